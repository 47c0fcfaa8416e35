package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os/exec"
	"strings"
	"testing"

	"github.com/cordon-run/cordon/internal/testenv"
)

// TestExecAllowHost: cordon exec --allow-host ADDRESS:PORT lets curl reach
// the host's listener there through the egress proxy and nothing else —
// another name is refused (and said so on stderr), a direct connection
// fails — and --json carries the proxy's log; --allow-host beside an open
// network, without a sandbox or with a bad target is a usage error.
func TestExecAllowHost(t *testing.T) {
	needBwrap(t)
	curl, err := exec.LookPath("curl")
	testenv.Require(t, err == nil, "curl: %v", err)
	hits := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits++; fmt.Fprint(w, "hello") }))
	defer srv.Close()
	u, _ := url.Parse(srv.URL)
	ws := tempWorkspace(t)
	script := fmt.Sprintf(`%[1]s -sS -m 5 %[2]s/; echo
%[1]s -sS -m 5 -o /dev/null -w '%%{http_code}\n' http://other.example.test/
%[1]s -sS -m 2 --noproxy '*' %[2]s/ >/dev/null 2>&1 || echo direct-failed`, curl, srv.URL)
	code, stdout, stderr := cordonMain(t, "", "-w", ws, "exec", "--allow-host", u.Host, "--", "sh", "-c", script)
	if code != 0 || stdout != "hello\n403\ndirect-failed\n" || !strings.Contains(stderr, "cordon: egress refused GET other.example.test:80: other.example.test:80 is not granted") {
		t.Fatalf("exit %d\nstdout %q\nstderr %q", code, stdout, stderr)
	}
	if hits != 1 {
		t.Errorf("the host's listener was reached %d times, want once", hits)
	}
	code, stdout, _ = cordonMain(t, "", "-w", ws, "exec", "--json", "--allow-host", u.Host, "--", curl, "-sS", "-m", "5", "-o", "/dev/null", srv.URL+"/")
	var got struct {
		Egress []struct {
			Name    string
			Allowed bool
			Down    int64
		}
		Mechanisms []string
	}
	if code != 0 || json.Unmarshal([]byte(stdout), &got) != nil || len(got.Egress) != 1 || !got.Egress[0].Allowed || got.Egress[0].Name != "127.0.0.1" || got.Egress[0].Down == 0 {
		t.Fatalf("--json: exit %d %s", code, stdout)
	}
	if !strings.Contains(strings.Join(got.Mechanisms, "\n"), "egress proxy on the host, which allows "+u.Host+" only") {
		t.Errorf("the mechanisms do not name the egress proxy: %q", got.Mechanisms)
	}
	// The run's receipt carries the proxy's log: the allowed connection
	// with its bytes, and the refused one with why.
	code, stdout, stderr = cordonMain(t, "", "-w", ws, "exec", "--json", "--receipt", "--allow-host", u.Host, "--", "sh", "-c", script)
	var withReceipt struct {
		Receipt struct{ Digest string }
	}
	if code != 0 || json.Unmarshal([]byte(stdout), &withReceipt) != nil || withReceipt.Receipt.Digest == "" {
		t.Fatalf("exec --receipt: exit %d %s %s", code, stdout, stderr)
	}
	code, stdout, _ = cordonMain(t, "", "-w", ws, "evidence", "show", "--json", withReceipt.Receipt.Digest)
	var shown struct {
		Statement struct {
			Predicate struct {
				Run struct {
					Egress []struct {
						Name    string
						Port    int
						Allowed bool
						Reason  string
						Down    int64
					}
				}
			}
		}
	}
	if code != 0 || json.Unmarshal([]byte(stdout), &shown) != nil {
		t.Fatalf("evidence show: exit %d %s", code, stdout)
	}
	eg := shown.Statement.Predicate.Run.Egress
	if len(eg) != 2 || !eg[0].Allowed || eg[0].Name != "127.0.0.1" || eg[0].Down == 0 ||
		eg[1].Allowed || eg[1].Name != "other.example.test" || eg[1].Port != 80 || !strings.Contains(eg[1].Reason, "not granted") {
		t.Errorf("the receipt's egress log: %+v\n%s", eg, stdout)
	}
	for _, args := range [][]string{
		{"--allow-host", "a.example", "--net", "host"},
		{"--allow-host", "a.example", "--no-sandbox"},
		{"--allow-host", "127.1"},
		{"--allow-host", "*.com"},
	} {
		if code, _, stderr := cordonMain(t, "", append(append([]string{"-w", ws, "exec"}, args...), "--", "true")...); code != exitUsage {
			t.Errorf("exec %q: exit %d, want usage (%s)", args, code, stderr)
		}
	}
}

// TestAToolGrantedAHost: a native tool declaring net.connect:host:ADDR:PORT
// is admitted on bwrap with the egress proxy among its mechanisms, and
// its run reaches that listener and nothing else.
func TestAToolGrantedAHost(t *testing.T) {
	needBwrap(t)
	_, err := exec.LookPath("curl")
	testenv.Require(t, err == nil, "curl: %v", err)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "hello") }))
	defer srv.Close()
	u, _ := url.Parse(srv.URL)
	ws := tempWorkspace(t)
	decl := fmt.Sprintf(`{"name": "fetch", "kind": "native", "command": ["curl", "-sS", "-m", "5", "%s/", "http://other.example.test/"],
 "capabilities": ["net.connect:host:%s"]}`, srv.URL, u.Host)
	code, stdout, stderr := cordonMain(t, decl, "-w", ws, "admit", "-")
	if code != 0 || !strings.Contains(stdout, "egress proxy on the host, which allows "+u.Host+" only") {
		t.Fatalf("admit: exit %d\n%s\n%s", code, stdout, stderr)
	}
	code, stdout, _ = cordonMain(t, "", "-w", ws, "run", "--json", "fetch")
	var got struct {
		Stdout string
		Egress []struct {
			Name    string
			Allowed bool
		}
	}
	if json.Unmarshal([]byte(stdout), &got) != nil || !strings.HasPrefix(got.Stdout, "hello") || len(got.Egress) != 2 ||
		!got.Egress[0].Allowed || got.Egress[1].Allowed || got.Egress[1].Name != "other.example.test" {
		t.Fatalf("run: exit %d %s", code, stdout)
	}
}
