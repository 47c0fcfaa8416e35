package runtime_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cordon-run/cordon/admission"
	"github.com/cordon-run/cordon/capabilities"
	"github.com/cordon-run/cordon/runtime"
	"github.com/cordon-run/cordon/substrate/bwrap"
)

// TestPooledSandboxes runs the sandbox's property tests again with every
// `/bin/sh -c` command on bwrap in a sandbox a pool made ahead of the call
// (runSpec and runBwrap fail a run that did not take one): what holds for
// a new sandbox holds for a pooled one.
func TestPooledSandboxes(t *testing.T) {
	needBwrap(t)
	pooled = true
	defer func() { pooled = false }()
	for name, f := range map[string]func(*testing.T){
		"WorkspaceIsWritable":                    TestWorkspaceIsWritable,
		"WritingOutsideTheWorkspaceFails":        TestWritingOutsideTheWorkspaceFails,
		"ProtectedPaths":                         TestProtectedPaths,
		"GitCannotBeRedirected":                  TestGitCannotBeRedirected,
		"ProtectedSymlinksRefuseToStart":         TestProtectedSymlinksRefuseToStart,
		"HomeIsEmptyAndRealHomesHidden":          TestHomeIsEmptyAndRealHomesHidden,
		"TmpIsFreshPerCall":                      TestTmpIsFreshPerCall,
		"SecretsInTheEnvironmentStayOut":         TestSecretsInTheEnvironmentStayOut,
		"HostProcessesAreInvisible":              TestHostProcessesAreInvisible,
		"NoCapabilitiesInside":                   TestNoCapabilitiesInside,
		"NetworkNone":                            TestNetworkNone,
		"InheritedDescriptorsStayOut":            TestInheritedDescriptorsStayOut,
		"HostSocketsAreUnreachable":              TestHostSocketsAreUnreachable,
		"TimeoutKillsTheWholeTree":               TestTimeoutKillsTheWholeTree,
		"BackgroundJobsDieWithTheCommand":        TestBackgroundJobsDieWithTheCommand,
		"CancellationKillsTheTree":               TestCancellationKillsTheTree,
		"FloodKeepsMemoryFlat":                   TestFloodKeepsMemoryFlat,
		"NotFoundAndNotExecutable":               TestNotFoundAndNotExecutable,
		"WorkspaceAccess":                        TestWorkspaceAccess,
		"OwnSignalsAndStatuses":                  TestOwnSignalsAndStatuses,
		"AnErrorNeverReadsAsSuccess":             TestAnErrorNeverReadsAsSuccess,
		"TrustedStateIsHidden":                   TestTrustedStateIsHidden,
		"SideDoorsAreShut":                       TestSideDoorsAreShut,
		"VsockPortsStayFree":                     TestVsockPortsStayFree,
		"LoopbackListenerUnreachable":            TestLoopbackListenerUnreachable,
		"LimitsEndABombAndABalloon":              TestLimitsEndABombAndABalloon,
		"HostInterfacesHidden":                   TestHostInterfacesHidden,
		"HoppersDieAtTheDeadline":                TestHoppersDieAtTheDeadline,
		"GitFindsNoRepositoryATookMade":          TestGitFindsNoRepositoryATookMade,
		"GitStaysValidInAWorkspaceRepository":    TestGitStaysValidInAWorkspaceRepository,
		"GitfileTargetInsideIsProtected":         TestGitfileTargetInsideIsProtected,
		"ConfigNamedFilesAreProtected":           TestConfigNamedFilesAreProtected,
		"ConcurrentRunsKeepEachOthersProtection": TestConcurrentRunsKeepEachOthersProtection,
		"NestedWorkspace":                        TestNestedWorkspace,
		"TmpfsAreCapped":                         TestTmpfsAreCapped,
		"SubmodulesAreNotAWayIn":                 TestSubmodulesAreNotAWayIn,
	} {
		t.Run(name, f)
	}
}

// pooledRuntime returns a runtime with a pool of size sandboxes.
func pooledRuntime(t *testing.T, size int, age time.Duration) *runtime.Runtime {
	t.Helper()
	rt := runtime.New(runtime.Config{Pool: size, PoolAge: age})
	t.Cleanup(func() { rt.Close() })
	return rt
}

// prepared admits `/bin/sh -c script` under the policy.
func prepared(t *testing.T, p bwrap.Policy, script string, opts ...func(*Spec)) *admission.Prepared {
	t.Helper()
	spec := Spec{Command: []string{"/bin/sh", "-c", script}, Policy: p, Timeout: 60 * time.Second}
	for _, o := range opts {
		o(&spec)
	}
	pr, err := prepare(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	return pr
}

// warmed waits until the runtime's pool holds n sandboxes (at most 10 s).
func warmed(t *testing.T, rt *runtime.Runtime, n int) {
	t.Helper()
	for i := 0; rt.PoolStats().Ready < n; i++ {
		if i > 1000 {
			t.Fatalf("the pool holds %+v, not %d ready", rt.PoolStats(), n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestPooledCommandIsTheFreshOne: the process a pooled sandbox runs is
// the one a new sandbox runs — its argument list byte for byte (a script
// of every byte but NUL, trailing blanks, backslashes, no final newline),
// environment, descriptors, standard input, signal state, IDs — and its
// output bound and exit status are the call's.
func TestPooledCommandIsTheFreshOne(t *testing.T) {
	needBwrap(t)
	ws := workspace(t, base(t))
	var junk []byte
	for c := 1; c < 256; c++ {
		junk = append(junk, byte(c))
	}
	scripts := map[string]string{
		"argv": "od -An -tx1 -v /proc/$$/cmdline; exit 0\n" + string(junk) + " \\\n\n\n  ",
		"self": "env | sort; for f in /proc/self/fd/*; do echo \"$f $(readlink $f | cut -d: -f1)\"; done; stat -L -c %F /dev/stdin; " +
			"grep -E '^(Sig(Ign|Blk)|NoNewPrivs|Seccomp|Cap(Eff|Bnd|Prm|Inh)|Uid|Gid|Groups)' /proc/self/status; echo $$ $PPID; ls /proc >/tmp/procs; grep -c '^[0-9]' /tmp/procs; ulimit -a | grep -v '^process'; umask; pwd", // (the process limit: TestProcessLimitIsTheTools)
		"clip":   "head -c 100000 /dev/zero | tr '\\0' x; exit 3",
		"nonl":   "printf '%s' \"$0\" no-final-newline",
		"signal": "kill -TERM $$",
	}
	for name, script := range scripts {
		t.Run(name, func(t *testing.T) {
			opt := func(s *Spec) {
				if name == "clip" {
					s.MaxOutput = 1000
				}
			}
			fresh := run(t, newPolicy(ws), script, opt)
			rt := pooledRuntime(t, 1, 0)
			p := prepared(t, newPolicy(ws), script, opt)
			if err := rt.Warm(p); err != nil {
				t.Fatal(err)
			}
			got, err := rt.Run(context.Background(), p)
			if err != nil || !got.Pooled {
				t.Fatalf("pooled run: %v (pooled %v, %+v)", err, got.Pooled, rt.PoolStats())
			}
			if got.Stdout != fresh.Stdout || got.Stderr != fresh.Stderr || got.ExitCode != fresh.ExitCode ||
				got.StdoutBytes != fresh.StdoutBytes || got.StdoutClipped != fresh.StdoutClipped || got.Signal != fresh.Signal {
				t.Errorf("pooled and fresh differ: %s\n", lineDiff(got.Stdout, fresh.Stdout))
				t.Errorf("pooled and fresh differ:\npooled: %d %q %q %d %v\nfresh:  %d %q %q %d %v", got.ExitCode, got.Stdout, got.Stderr,
					got.StdoutBytes, got.StdoutClipped, fresh.ExitCode, fresh.Stdout, fresh.Stderr, fresh.StdoutBytes, fresh.StdoutClipped)
			}
			if name == "argv" {
				var want strings.Builder
				for _, a := range []string{"/bin/sh", "-c", script} {
					for _, c := range []byte(a + "\x00") {
						fmt.Fprintf(&want, "%02x", c)
					}
				}
				if strings.Join(strings.Fields(got.Stdout), "") != want.String() {
					t.Errorf("the pooled command's argument list is not /bin/sh -c SCRIPT:\n%s", got.Stdout)
				}
			}
		})
	}
}

// TestPoolDiscardsStaleSandboxes: the host changes the protected set
// after a sandbox was made ahead — git's configuration includes a file
// of the workspace; a protected directory is replaced by another of the
// same name — and the call does not take the stale sandbox: it runs in a
// new one, in which the new protected path is read-only.
func TestPoolDiscardsStaleSandboxes(t *testing.T) {
	needBwrap(t)
	needProgram(t, "git")
	for _, under := range []string{"/var/tmp", "/tmp"} {
		t.Run(under, func(t *testing.T) {
			d, err := os.MkdirTemp(under, "cordon-pool-")
			if err != nil {
				t.Skip(err)
			}
			t.Cleanup(func() { os.RemoveAll(d) })
			b, _ := filepath.EvalSymlinks(d)
			staleSandboxes(t, b)
		})
	}
}

// staleSandboxes is TestPoolDiscardsStaleSandboxes in base b.
func staleSandboxes(t *testing.T, b string) {
	ws := workspace(t, b)
	marker := filepath.Join(b, "pwned")
	if out, err := exec.Command("git", "init", "-q", ws).CombinedOutput(); err != nil {
		t.Fatalf("git init: %v %s", err, out)
	}
	fsmonitor := fmt.Sprintf("printf '[core]\\n\\tfsmonitor = \"touch %s; false\"\\n'", marker)
	attack := attempt("include", fsmonitor+" > inc.gitconfig") + attempt("config", fsmonitor+" >> .git/config") +
		attempt("state", "echo x > .efferent/planted")
	rt := pooledRuntime(t, 1, 0)
	if err := rt.Warm(prepared(t, newPolicy(ws), "true")); err != nil {
		t.Fatal(err)
	}
	stale := 0
	call := func(what string) {
		t.Helper()
		stale++
		res, err := rt.Run(context.Background(), prepared(t, newPolicy(ws), attack))
		if err != nil {
			t.Fatal(err)
		}
		if res.Pooled {
			t.Errorf("%s: the call took a sandbox made before", what)
		}
		for name, rc := range statuses(t, res.Stdout) {
			if rc == "0" {
				t.Errorf("%s: attack %s succeeded: %q %q", what, name, res.Stdout, res.Stderr)
			}
		}
		if st := rt.PoolStats(); st.Stale != stale {
			t.Errorf("%s: pool stats %+v: want %d stale sandboxes discarded", what, st, stale)
		}
		exec.Command("git", "-C", ws, "status").Run() // runs fsmonitor if planted
		if _, err := os.Stat(marker); err == nil {
			t.Fatalf("%s: the host's git ran what the sandbox planted", what)
		}
		if _, err := os.Lstat(filepath.Join(ws, ".efferent", "planted")); err == nil {
			t.Fatalf("%s: a file was planted in harness state", what)
		}
		warmed(t, rt, 1)
	}
	// The host's git now reads inc.gitconfig: a write-later path that
	// was not one when the sandbox was made.
	if out, err := exec.Command("git", "-C", ws, "config", "include.path", "../inc.gitconfig").CombinedOutput(); err != nil {
		t.Fatalf("git config: %v %s", err, out)
	}
	call("a new include")
	// The host's git writes its configuration by renaming a new file over
	// it: the read-only mount on the old one is detached in the waiting
	// sandbox, where .git/config would be writable.
	if out, err := exec.Command("git", "-C", ws, "config", "user.name", "host").CombinedOutput(); err != nil {
		t.Fatalf("git config: %v %s", err, out)
	}
	call("git config renamed over")
	// A protected directory replaced by another of the same name: the
	// options are the same, the identity is not.
	state := filepath.Join(ws, ".efferent")
	if err := os.Rename(state, state+".old"); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(state, 0o700); err != nil {
		t.Fatal(err)
	}
	call("harness state replaced")
}

// TestPoolRefusesWhatANewSandboxRefuses: a canceled call does not start
// in a pooled sandbox; granted variables named as the waiting shell's are
// passed, the call then runs in a new sandbox.
func TestPoolRefusesWhatANewSandboxRefuses(t *testing.T) {
	needBwrap(t)
	ws := workspace(t, base(t))
	rt := pooledRuntime(t, 1, 0)
	ran := filepath.Join(ws, "ran")
	p := prepared(t, newPolicy(ws), "touch "+ran)
	for range 5 {
		if err := rt.Warm(p); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		res, err := rt.Run(ctx, prepared(t, newPolicy(ws), "touch "+ran))
		if res.Pooled {
			t.Errorf("a canceled call ran in a pooled sandbox: %v %+v", err, res)
		}
		if _, err := os.Stat(ran); err == nil {
			t.Fatal("a canceled call's command ran")
		}
	}

	names := newPolicy(ws).WithEnv("_cordon_s", "_cordon_l")
	env := append(os.Environ(), "_cordon_s=host-s", "_cordon_l=host-l")
	rt = runtime.New(runtime.Config{Pool: 1, Environ: env})
	defer rt.Close()
	script := `printf '[%s|%s]' "$_cordon_s" "$_cordon_l"`
	p = prepared(t, names, script)
	rt.Warm(p)
	res, err := rt.Run(context.Background(), p)
	if err != nil || res.Stdout != "[host-s|host-l]" {
		t.Errorf("granted variables: %v %q %q", err, res.Stdout, res.Stderr)
	}
}

// trampolineProcs returns the host's processes that are waiting shells of
// pooled sandboxes of the workspace ws (whose working directory it is:
// other tests' pools run meanwhile).
func trampolineProcs(ws string) []string {
	var out []string
	dirs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, d := range dirs {
		data, _ := os.ReadFile(d)
		cwd, _ := os.Readlink(filepath.Join(filepath.Dir(d), "cwd"))
		if strings.Contains(string(data), "_cordon_s=$_cordon_s") && cwd == ws {
			out = append(out, d)
		}
	}
	return out
}

// TestPooledCallsShareNothing: one call leaves a file in /tmp, a
// variable, a background process that left its session; the next call,
// in another pooled sandbox, sees none of them, and the process is gone
// when the first call returns.
func TestPooledCallsShareNothing(t *testing.T) {
	needBwrap(t)
	ws := workspace(t, base(t))
	marker := fmt.Sprintf("cordon-pool-marker-%d", time.Now().UnixNano())
	rt := pooledRuntime(t, 2, 0)
	if err := rt.Warm(prepared(t, newPolicy(ws), "true")); err != nil {
		t.Fatal(err)
	}
	first, err := rt.Run(context.Background(), prepared(t, newPolicy(ws),
		fmt.Sprintf("echo secret > /tmp/left; export LEFT=1; setsid sh -c 'exec -a %s sleep 300' </dev/null >/dev/null 2>&1 & echo started", marker)))
	if err != nil || !first.Pooled || first.Stdout != "started\n" {
		t.Fatalf("first call: %v %+v", err, first)
	}
	for _, f := range func() []string { m, _ := filepath.Glob("/proc/[0-9]*/cmdline"); return m }() {
		if data, _ := os.ReadFile(f); strings.HasPrefix(string(data), marker) {
			t.Errorf("the first call's background process %s outlived its call", f)
		}
	}
	second, err := rt.Run(context.Background(), prepared(t, newPolicy(ws),
		"ls -A /tmp; echo \"left=${LEFT-unset}\"; grep -l "+marker[:len(marker)-1]+"[0-9] /proc/[0-9]*/cmdline 2>/dev/null; echo end"))
	if err != nil || !second.Pooled {
		t.Fatalf("second call: %v %+v", err, second)
	}
	if second.Stdout != "home\nleft=unset\nend\n" { // /tmp holds HOME alone
		t.Errorf("the second call saw the first's state: %q", second.Stdout)
	}
}

// TestPoolLeavesNothing: closing the runtime kills the waiting sandboxes
// and ends their sessions — no process, no placeholder is left — and an
// unused sandbox is discarded after the pool's age.
func TestPoolLeavesNothing(t *testing.T) {
	needBwrap(t)
	ws := workspace(t, base(t))
	run(t, newPolicy(ws), "true") // the harness directories, kept
	before := snapshot(t, ws)
	rt := runtime.New(runtime.Config{Pool: 2})
	if err := rt.Warm(prepared(t, newPolicy(ws), "true")); err != nil {
		t.Fatal(err)
	}
	if n := len(trampolineProcs(ws)); n < 2 {
		t.Fatalf("%d waiting shells, want 2 (%+v)", n, rt.PoolStats())
	}
	rt.Close()
	if p := trampolineProcs(ws); len(p) > 0 {
		t.Errorf("waiting shells outlived the pool: %v", p)
	}
	if d := diff(before, snapshot(t, ws)); len(d) > 0 {
		t.Errorf("the pool left the workspace changed: %v", d)
	}

	rt = pooledRuntime(t, 1, 300*time.Millisecond)
	if err := rt.Warm(prepared(t, newPolicy(ws), "true")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(800 * time.Millisecond)
	if st := rt.PoolStats(); st.Ready != 0 {
		t.Errorf("a sandbox outlived the pool's age: %+v", st)
	}
	if p := trampolineProcs(ws); len(p) > 0 {
		t.Errorf("waiting shells outlived the pool's age: %v", p)
	}
}

// TestPoolTimeBoundStartsAtTheCall: a sandbox made long before its call
// gives the call its whole time bound.
func TestPoolTimeBoundStartsAtTheCall(t *testing.T) {
	needBwrap(t)
	ws := workspace(t, base(t))
	rt := pooledRuntime(t, 1, 0)
	timeout := func(s *Spec) { s.Timeout = time.Second }
	p := prepared(t, newPolicy(ws), "sleep 0.4; echo done", timeout)
	if err := rt.Warm(p); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1200 * time.Millisecond)
	res, err := rt.Run(context.Background(), p)
	if err != nil || !res.Pooled {
		t.Fatalf("%v %+v", err, res)
	}
	if res.TimedOut || res.Stdout != "done\n" || res.Duration > 900*time.Millisecond {
		t.Errorf("the call's time bound counted from the sandbox's making: %+v", res.Outcome)
	}
	p = prepared(t, newPolicy(ws), "sleep 5", timeout)
	warmed(t, rt, 1)
	res, err = rt.Run(context.Background(), p)
	if err != nil || !res.Pooled || !res.TimedOut {
		t.Errorf("a pooled call past its bound: %v %+v", err, res.Outcome)
	}
}

// lineDiff lists the lines of a that b does not have, and those of b
// that a does not have.
func lineDiff(a, b string) string {
	in := func(s string) map[string]bool {
		m := map[string]bool{}
		for _, l := range strings.Split(s, "\n") {
			m[l] = true
		}
		return m
	}
	ma, mb := in(a), in(b)
	var out []string
	for l := range ma {
		if !mb[l] {
			out = append(out, "-"+l)
		}
	}
	for l := range mb {
		if !ma[l] {
			out = append(out, "+"+l)
		}
	}
	return strings.Join(out, "\n")
}

// TestProcessLimitIsTheTools: processes the user had when a run began —
// when a pooled sandbox was made, or a new one set up — and that are gone
// by the time its tool forks, do not widen the tool's process limit.
// (Unprivileged, the limit is an rlimit, whose bound on bwrap counted the
// user's processes of the time; root's is a pids cgroup.)
func TestProcessLimitIsTheTools(t *testing.T) {
	needBwrap(t)
	needProgram(t, "python3")
	ws := workspace(t, base(t))
	pids, _ := capabilities.PidsLimit(32)
	limit := func(s *Spec) { s.Extra = []capabilities.Capability{pids} }
	bomb := forkBomb
	others := func() func() {
		var cmds []*exec.Cmd
		for range 12 {
			c := exec.Command("sleep", "60")
			if err := c.Start(); err != nil {
				t.Fatal(err)
			}
			cmds = append(cmds, c)
		}
		return func() {
			for _, c := range cmds {
				c.Process.Kill()
				c.Wait()
			}
		}
	}
	check := func(t *testing.T, res runtime.Result) {
		if n := forked(res.Stdout); n < 25 || n > 31 { // python itself is the tool's first process
			t.Errorf("the bomb forked %d processes under pids:32 (%q %q), want at most 31", forked(res.Stdout), res.Stdout, res.Stderr)
		}
	}
	t.Run("new", func(t *testing.T) {
		gone := others()
		started, goOn := filepath.Join(ws, "started"), filepath.Join(ws, "go")
		var res runtime.Result
		done := make(chan struct{})
		go func() {
			defer close(done)
			res = run(t, newPolicy(ws), fmt.Sprintf("touch %s; i=0; while [ ! -e %s ] && [ $i -lt 300 ]; do sleep 0.02; i=$((i+1)); done; %s", started, goOn, bomb), limit)
		}()
		for i := 0; i < 500; i++ {
			if _, err := os.Stat(started); err == nil {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		gone()
		os.WriteFile(goOn, nil, 0o644)
		<-done
		check(t, res)
	})
	t.Run("pooled", func(t *testing.T) {
		p := prepared(t, newPolicy(ws), bomb, limit)
		gone := others()
		rt := pooledRuntime(t, 1, 0)
		err := rt.Warm(p)
		gone()
		if err != nil {
			t.Fatal(err)
		}
		res, err := rt.Run(context.Background(), p)
		if err != nil || !res.Pooled {
			t.Fatalf("%v %+v", err, res)
		}
		check(t, res)
	})
}

// TestHostRenamingOverAProtectedPathStopsTheRun: while a command runs,
// the host changes a protected path from outside — its git renames a new
// .git/config over the old one (the read-only mount on it is detached),
// an editor saves .git/config keeping a backup (the old file, and its
// mount with it, renamed aside), or .git is moved aside and copied back —
// each time the path in the sandbox is the workspace's, writable. The
// run is stopped before it writes there, the result names the mount that
// went, and the host's git runs nothing; new and pooled.
func TestHostRenamingOverAProtectedPathStopsTheRun(t *testing.T) {
	needBwrap(t)
	needProgram(t, "git")
	changes := []struct {
		name string
		went string // the mount point the result names, under ws
		do   func(t *testing.T, ws, b string)
	}{
		{"git config", ".git/config", func(t *testing.T, ws, b string) { hostGitConfig(t, ws) }},
		{"saved keeping a backup", ".git/config", func(t *testing.T, ws, b string) {
			cfg := filepath.Join(ws, ".git", "config")
			data, _ := os.ReadFile(cfg)
			if err := os.Rename(cfg, cfg+"~"); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(cfg, data, 0o644); err != nil {
				t.Fatal(err)
			}
		}},
		{"git dir moved aside", ".git", func(t *testing.T, ws, b string) {
			// Copied, then swapped into place in one rename: a pool's next
			// sandbox, made while no .git was there, would make one of its
			// own (a cp -a into the path found its placeholders).
			g, back, aside := filepath.Join(ws, ".git"), filepath.Join(ws, ".git-back"), filepath.Join(b, "git-aside")
			if out, err := exec.Command("cp", "-a", g, back).CombinedOutput(); err != nil {
				t.Fatalf("cp: %v %s", err, out)
			}
			exchange(t, back, g)
			if err := os.Rename(back, aside); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, change := range changes {
		for _, pool := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/pooled=%v", change.name, pool), func(t *testing.T) {
				b := base(t)
				ws := workspace(t, b)
				marker := filepath.Join(b, "pwned")
				if out, err := exec.Command("git", "init", "-q", ws).CombinedOutput(); err != nil {
					t.Fatalf("git init: %v %s", err, out)
				}
				started := filepath.Join(ws, "started")
				script := fmt.Sprintf("touch %s; sleep 1.5; printf '[core]\\n\\tfsmonitor = \"touch %s; false\"\\n' >> .git/config && echo wrote", started, marker)
				rt := runtime.New(runtime.Config{})
				if pool {
					rt = pooledRuntime(t, 1, 0)
				} else {
					defer rt.Close()
				}
				p := prepared(t, newPolicy(ws), script)
				if pool {
					if err := rt.Warm(p); err != nil {
						t.Fatal(err)
					}
				}
				res := whileHost(t, rt, p, started, func() { change.do(t, ws, b) })
				if res.Pooled != pool {
					t.Errorf("pooled %v, want %v", res.Pooled, pool)
				}
				if strings.Contains(res.Stdout, "wrote") || res.ExitCode == 0 {
					t.Errorf("the run went on after its mount of %s went: %+v", change.went, res.Outcome)
				}
				if !strings.Contains(strings.Join(res.Notes, "\n"), "went "+filepath.Join(ws, change.went)) {
					t.Errorf("the result does not say that the mount of %s went: %q", change.went, res.Notes)
				}
				exec.Command("git", "-C", ws, "status").Run()
				if _, err := os.Stat(marker); err == nil {
					t.Fatal("the host's git ran what the sandbox planted")
				}
			})
		}
	}
}

// TestAWriteAtTheDetachIsReported: a command that retries a write of
// .git/config until the host's git detaches its mount, then exits at
// once, is reported every time — the table is read once more when the
// run has ended — new and pooled.
func TestAWriteAtTheDetachIsReported(t *testing.T) {
	needBwrap(t)
	needProgram(t, "git")
	for _, pool := range []bool{false, true} {
		t.Run(fmt.Sprintf("pooled=%v", pool), func(t *testing.T) {
			for i := range 20 { // a fifth or so of them end between two reads
				b := base(t)
				ws := workspace(t, b)
				if out, err := exec.Command("git", "init", "-q", ws).CombinedOutput(); err != nil {
					t.Fatalf("git init: %v %s", err, out)
				}
				started := filepath.Join(ws, "started")
				script := fmt.Sprintf("touch %s; i=0; while ! printf '[core]\\n\\tx = evil\\n' >> .git/config 2>/dev/null && [ $i -lt 100000 ]; do i=$((i+1)); done; exit 0", started)
				rt := pooledRuntime(t, 1, 0)
				p := prepared(t, newPolicy(ws), script)
				if pool {
					if err := rt.Warm(p); err != nil {
						t.Fatal(err)
					}
				}
				res := whileHost(t, rt, p, started, func() { hostGitConfig(t, ws) })
				if !strings.Contains(strings.Join(res.Notes, "\n"), "mounts changed") || res.ExitCode == 0 {
					t.Errorf("run %d: a write at the detach went unreported: %+v %q", i, res.Outcome, res.Notes)
				}
			}
		})
	}
}

// whileHost runs p (a script that touches started first) in rt and,
// once it has started, changes the host with change; it returns the
// run's result.
func whileHost(t *testing.T, rt *runtime.Runtime, p *admission.Prepared, started string, change func()) runtime.Result {
	t.Helper()
	var res runtime.Result
	var err error
	done := make(chan struct{})
	go func() { defer close(done); res, err = rt.Run(context.Background(), p) }()
	for j := 0; j < 500; j++ {
		if _, err := os.Stat(started); err == nil {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	change()
	<-done
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// hostGitConfig has the host's git write .git/config of ws, by renaming
// a new file over it.
func hostGitConfig(t *testing.T, ws string) {
	if out, err := exec.Command("git", "-C", ws, "config", "user.name", "host").CombinedOutput(); err != nil {
		t.Errorf("git config: %v %s", err, out)
	}
}
