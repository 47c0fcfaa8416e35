package bwrap

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cordon-run/cordon/internal/limits"
	"github.com/cordon-run/cordon/internal/testenv"
	"github.com/cordon-run/cordon/substrate/egress"
)

func needBwrap(t *testing.T) {
	t.Helper()
	bin, err := Find(os.Getenv("PATH"))
	testenv.Require(t, err == nil, "bubblewrap: %v", err)
	testenv.Require(t, Detect(context.Background(), bin) == nil, "a working bubblewrap sandbox")
}

// testNames is a test resolver: every name it knows is the host's
// loopback; nothing leaves this machine.
type testNames map[string]string

func (n testNames) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if a, ok := n[strings.TrimSuffix(host, ".")]; ok {
		return []netip.Addr{netip.MustParseAddr(a)}, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

// TestEgressReachesTheGrantedNameAlone: in a sandbox of network none with
// egress to one name, curl (through the proxy variables) reaches that
// name on the host's loopback, and is refused another name; a direct
// connection to the host's listener, and curl told to ignore the proxy,
// fail; the proxy logged each decision.
func TestEgressReachesTheGrantedNameAlone(t *testing.T) {
	needBwrap(t)
	curl, err := exec.LookPath("curl")
	testenv.Require(t, err == nil, "curl: %v", err)
	hits := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits++
		fmt.Fprintf(w, "hello %s", r.Host)
	}))
	defer srv.Close()
	u, _ := url.Parse(srv.URL)
	port := u.Port()
	rule, _ := egress.ParseRule("api.example.test:" + port)
	proxy := egress.New(egress.Config{Rules: []egress.Rule{rule}, AllowInternal: true,
		Resolver: testNames{"api.example.test": "127.0.0.1", "other.example.test": "127.0.0.1"}})
	ws := tempWorkspace(t)
	script := fmt.Sprintf(`%[1]s -sS -m 5 http://api.example.test:%[2]s/ ; echo " exit=$?"
%[1]s -sS -m 5 -o /dev/null -w '%%{http_code}' http://other.example.test:%[2]s/ ; echo " exit=$?"
%[1]s -sS -m 2 --noproxy '*' http://127.0.0.1:%[2]s/ >/dev/null 2>&1; echo "direct exit=$?"
env | grep -c '^[A-Za-z_]*_[Pp][Rr][Oo][Xx][Yy]='`, curl, port)
	o, err := Run(context.Background(), Spec{Policy: newPolicy(ws).WithSystemPath(true).WithEgress(rule).WithReadOnly(curl), Egress: proxy,
		Command: []string{"/bin/sh", "-c", script}, Timeout: 20 * time.Second, MaxOutput: 1 << 16})
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(o.Stdout), "\n")
	if len(lines) != 4 || lines[0] != "hello api.example.test:"+port+" exit=0" || !strings.HasPrefix(lines[1], "403") ||
		lines[2] == "direct exit=0" || lines[3] != "8" || o.ExitCode != 0 {
		t.Fatalf("in the sandbox: exit %d\n%s\nstderr: %s", o.ExitCode, o.Stdout, o.Stderr)
	}
	if hits != 1 {
		t.Errorf("the host's server was reached %d times, want once", hits)
	}
	ev := proxy.Events()
	if len(ev) != 2 || !ev[0].Allowed || ev[0].Name != "api.example.test" || ev[1].Allowed || ev[1].Name != "other.example.test" {
		t.Errorf("the proxy's log: %+v", ev)
	}
}

// The forwarder's exit is the command's: a status, and a signal.
func TestEgressKeepsTheCommandsStatus(t *testing.T) {
	needBwrap(t)
	rule, _ := egress.ParseRule("api.example.test")
	for script, want := range map[string]int{"exit 7": 7, "kill -TERM $$": 143, "kill -SEGV $$": 139, "kill -ABRT $$": 134, "true": 0} {
		proxy := egress.New(egress.Config{Rules: []egress.Rule{rule}})
		o, err := Run(context.Background(), Spec{Policy: newPolicy(tempWorkspace(t)).WithEgress(rule), Egress: proxy,
			Command: []string{"/bin/sh", "-c", script}, Timeout: 10 * time.Second})
		if err != nil || o.ExitCode != want {
			t.Errorf("%q: exit %d, %v (stderr %q); want %d", script, o.ExitCode, err, o.Stderr, want)
		}
	}
	if _, err := Run(context.Background(), Spec{Policy: newPolicy(tempWorkspace(t)).WithEgress(rule), Command: []string{"true"}}); err == nil {
		t.Errorf("an egress policy ran without a proxy")
	}
}

// The tool cannot reach the forwarder's descriptors (the control socket):
// the forwarder is not dumpable, so its /proc/PID/fd links do not open
// for the tool, of the same uid, and pidfd_getfd is refused by seccomp
// besides.
func TestEgressForwarderIsOutOfReach(t *testing.T) {
	needBwrap(t)
	rule, _ := egress.ParseRule("api.example.test")
	proxy := egress.New(egress.Config{Rules: []egress.Rule{rule}})
	o, err := Run(context.Background(), Spec{Policy: newPolicy(tempWorkspace(t)).WithEgress(rule), Egress: proxy,
		Command: []string{"/bin/sh", "-c", `readlink /proc/$PPID/fd/0 >/dev/null 2>&1 && echo fds-readable || echo fds-closed; ls /proc/self/fd | wc -l`}, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if lines := strings.Fields(o.Stdout); len(lines) != 2 || lines[0] != "fds-closed" || lines[1] != "4" {
		t.Errorf("in the sandbox: %q (stderr %q); want the forwarder's descriptors closed to the tool, and the tool holding 0-2 alone", o.Stdout, o.Stderr)
	}
}

// Clients that honour the proxy variables get through them: Python's
// urllib (what pip uses) and git over HTTP, each to the granted host on
// the host's loopback.
func TestEgressClientsHonourTheProxyVariables(t *testing.T) {
	needBwrap(t)
	git, err := exec.LookPath("git")
	testenv.Require(t, err == nil, "git: %v", err)
	_, err = os.Stat("/usr/bin/python3")
	testenv.Require(t, err == nil, "/usr/bin/python3: %v", err)
	// A bare repository served over dumb HTTP.
	repos := t.TempDir()
	work, bare := repos+"/work", repos+"/repo.git"
	for _, args := range [][]string{{"init", "-q", "-b", "main", work},
		{"-C", work, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "one"},
		{"clone", "-q", "--bare", work, bare}, {"-C", bare, "update-server-info"}} {
		if out, err := exec.Command(git, args...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v %s", args, err, out)
		}
	}
	srv := httptest.NewServer(http.FileServer(http.Dir(repos)))
	defer srv.Close()
	u, _ := url.Parse(srv.URL)
	rule, _ := egress.ParseRule(u.Host)
	proxy := egress.New(egress.Config{Rules: []egress.Rule{rule}})
	script := fmt.Sprintf(`/usr/bin/python3 -c 'import urllib.request; print(urllib.request.urlopen("%[1]s/repo.git/HEAD").read().decode().strip())'
%[2]s ls-remote %[1]s/repo.git 2>&1 | cut -f2`, srv.URL, git)
	o, err := Run(context.Background(), Spec{Policy: newPolicy(tempWorkspace(t)).WithSystemPath(true).WithEgress(rule), Egress: proxy,
		Command: []string{"/bin/sh", "-c", script}, Timeout: 20 * time.Second, MaxOutput: 1 << 16})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Fields(o.Stdout); len(got) < 3 || got[0] != "ref:" || got[1] != "refs/heads/main" || got[len(got)-1] != "refs/heads/main" {
		t.Fatalf("python3 and git through the proxy: %q (stderr %q)", o.Stdout, o.Stderr)
	}
	for _, ev := range proxy.Events() {
		if !ev.Allowed {
			t.Errorf("refused: %+v", ev)
		}
	}
	if len(proxy.Events()) < 2 {
		t.Errorf("the proxy saw %d requests, want python's and git's", len(proxy.Events()))
	}
}

// An egress run under a memory limit: where the limit is RLIMIT_AS (no
// cgroup: an unprivileged user), the forwarder — a Go program, whose
// runtime reserves more address space at its start than a small limit
// allows — runs outside it, and the tool and the sandbox's init get
// exactly the limit.
func TestEgressUnderAMemoryLimit(t *testing.T) {
	needBwrap(t)
	plan, err := limits.Detect().Plan(limits.Spec{Memory: 256 << 20})
	if err != nil {
		t.Skip(err)
	}
	rule, _ := egress.ParseRule("api.example.test")
	proxy := egress.New(egress.Config{Rules: []egress.Rule{rule}})
	o, err := Run(context.Background(), Spec{Policy: newPolicy(tempWorkspace(t)).WithEgress(rule).WithLimits(plan), Egress: proxy,
		Command: []string{"/bin/sh", "-c", `ulimit -v; ulimit -H -v; grep "Max address space" /proc/1/limits | tr -s ' ' | cut -d' ' -f4,5`}, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	// The sandbox's init (bwrap's, dumpable, of the tool's uid: the tool
	// could make it run its own code) is held to the limit too.
	want := "unlimited\nunlimited\nunlimited unlimited\n"
	if plan.Memory == limits.Rlimit {
		want = "262144\n262144\n268435456 268435456\n"
	}
	if o.ExitCode != 0 || o.Stdout != want {
		t.Errorf("memory %s: exit %d, ulimit -v %q (stderr %q); want %q", plan.Memory, o.ExitCode, o.Stdout, o.Stderr, want)
	}
	// A command not found is 127, by name or by path, and a script
	// without "#!" runs under /bin/sh, as without egress (execvp's way).
	ws := tempWorkspace(t)
	os.WriteFile(filepath.Join(ws, "noshebang"), []byte("exit 5\n"), 0o755)
	for argv, want := range map[string]int{"/nonexistent/x": 127, "no-such-command-here": 127, filepath.Join(ws, "noshebang"): 5} {
		for _, p := range []limits.Plan{plan, defaultLimits()} {
			o, err := Run(context.Background(), Spec{Policy: newPolicy(ws).WithEgress(rule).WithLimits(p),
				Egress: egress.New(egress.Config{Rules: []egress.Rule{rule}}), Command: []string{argv}, Timeout: 10 * time.Second})
			if err != nil || o.ExitCode != want {
				t.Errorf("%s (memory %s): exit %d, %v (stderr %q); want %d", argv, p.Memory, o.ExitCode, err, o.Stderr, want)
			}
		}
	}
}

// SOCKS5 through the same forwarder: curl told to use
// socks5h://127.0.0.1:3128 (the name goes to the proxy) reaches the
// granted name and is refused another.
func TestEgressSOCKS5(t *testing.T) {
	needBwrap(t)
	curl, err := exec.LookPath("curl")
	testenv.Require(t, err == nil, "curl: %v", err)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "hello") }))
	defer srv.Close()
	u, _ := url.Parse(srv.URL)
	rule, _ := egress.ParseRule("api.example.test:" + u.Port())
	proxy := egress.New(egress.Config{Rules: []egress.Rule{rule}, AllowInternal: true,
		Resolver: testNames{"api.example.test": "127.0.0.1", "other.example.test": "127.0.0.1"}})
	script := fmt.Sprintf(`%[1]s -sS -m 5 -x socks5h://%[3]s http://api.example.test:%[2]s/; echo " exit=$?"
%[1]s -sS -m 5 -x socks5h://%[3]s http://other.example.test:%[2]s/ 2>/dev/null; echo "other exit=$?"`, curl, u.Port(), egress.ListenAddr)
	o, err := Run(context.Background(), Spec{Policy: newPolicy(tempWorkspace(t)).WithSystemPath(true).WithEgress(rule).WithReadOnly(curl), Egress: proxy,
		Command: []string{"/bin/sh", "-c", script}, Timeout: 20 * time.Second, MaxOutput: 1 << 16})
	if err != nil {
		t.Fatal(err)
	}
	if o.Stdout != "hello exit=0\nother exit=97\n" {
		t.Errorf("curl over SOCKS5 in the sandbox: exit %d\n%s\nstderr: %s", o.ExitCode, o.Stdout, o.Stderr)
	}
	if ev := proxy.Events(); len(ev) != 2 || ev[0].Method != "SOCKS5" || !ev[0].Allowed || ev[1].Allowed {
		t.Errorf("the proxy's log: %+v", ev)
	}
}
