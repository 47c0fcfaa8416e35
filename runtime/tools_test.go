package runtime_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cordon-run/cordon/admission"
	"github.com/cordon-run/cordon/internal/testenv"
	"github.com/cordon-run/cordon/runtime"
	"github.com/cordon-run/cordon/substrate"
	"github.com/cordon-run/cordon/substrate/bwrap"
	"github.com/cordon-run/cordon/substrate/landlock"
)

// toolFixture is a workspace with an admission pipeline and a registry,
// to admit tools and run them as cordon run does.
type toolFixture struct {
	ws  string
	a   *admission.Admitter
	reg *admission.Registry
}

func newToolFixture(t *testing.T) *toolFixture {
	t.Helper()
	needBwrap(t)
	ws := workspace(t, base(t))
	a, err := admission.New(admission.Config{Workspace: ws, Harness: testHarness})
	if err != nil {
		t.Fatal(err)
	}
	reg, err := admission.OpenRegistry(admission.RegistryConfig{Workspace: ws, Harness: testHarness})
	if err != nil {
		t.Fatal(err)
	}
	return &toolFixture{ws: ws, a: a, reg: reg}
}

// admit writes decl and files (name → content; a name ending in "*" is
// executable) into a folder of the workspace, admits and registers it.
func (f *toolFixture) admit(t *testing.T, decl string, files map[string]string) *admission.Admission {
	t.Helper()
	dir := filepath.Join(f.ws, "src")
	os.RemoveAll(dir)
	testenv.WriteFiles(t, dir, files)
	adm, err := f.a.Admit(context.Background(), admission.Source{Name: "tool.json", Data: []byte(decl), Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.reg.Register(adm); err != nil {
		t.Fatal(err)
	}
	os.RemoveAll(dir)
	return adm
}

// runTool admits decl (with files) and runs it with input through Prepare
// and Runtime.Run, as cordon run does, with environ as the caller's
// environment.
func (f *toolFixture) runTool(t *testing.T, decl string, files map[string]string, input string, environ []string) (runtime.Result, *admission.Prepared) {
	t.Helper()
	adm := f.admit(t, decl, files)
	p, err := f.a.Prepare(context.Background(), f.reg, adm.Grant.Tool, []byte(input))
	if err != nil {
		t.Fatal(err)
	}
	rt := runtime.New(runtime.Config{Environ: environ})
	defer rt.Close()
	res, err := rt.Run(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	// Every bwrap mechanism the grant quotes is one the sandbox applied.
	for c, ms := range p.Grant.Mechanisms {
		for _, m := range ms {
			if strings.HasPrefix(m, "bwrap: ") && !slices.Contains(res.Mechanisms, m) {
				t.Errorf("the grant quotes %q for %s, but the run applied %q", m, c, res.Mechanisms)
			}
		}
	}
	if res.Tool != adm.Grant.Tool || res.Digest != adm.Grant.Digest {
		t.Errorf("the result names tool %q %s, want %q %s", res.Tool, res.Digest, adm.Grant.Tool, adm.Grant.Digest)
	}
	return res, p
}

var (
	decl   = testenv.Decl
	script = testenv.Script
)

// TestRunReadOnlyTool runs a tool granted fs.read:workspace only: it reads
// the workspace, and its attempts to write the workspace, harness state,
// and its own files all fail, leaving them unchanged.
func TestRunReadOnlyTool(t *testing.T) {
	f := newToolFixture(t)
	os.WriteFile(filepath.Join(f.ws, "notes.txt"), []byte("original\n"), 0o644)
	body := `cat notes.txt
echo changed > notes.txt && echo WROTE-NOTES
echo new > new.txt && echo WROTE-NEW
echo x > .efferent/tools/grants/evil.json && echo WROTE-HARNESS
echo x >> "$0" && echo WROTE-SELF
exit 0
`
	res, p := f.runTool(t, decl("reader", `["./reader.sh"]`, []string{"reader.sh"}, "fs.read:workspace", "time:10s"), script("reader.sh", body), "", nil)
	if res.ExitCode != 0 || !strings.Contains(res.Stdout, "original") {
		t.Fatalf("the tool could not read the workspace: %+v", res)
	}
	if strings.Contains(res.Stdout, "WROTE") {
		t.Errorf("a read-only tool wrote: %q", res.Stdout)
	}
	if data, _ := os.ReadFile(filepath.Join(f.ws, "notes.txt")); string(data) != "original\n" {
		t.Errorf("notes.txt changed to %q", data)
	}
	for _, p := range []string{filepath.Join(f.ws, "new.txt"), filepath.Join(f.reg.Dir(), "grants", "evil.json")} {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s exists after the run: %v", p, err)
		}
	}
	if data, _ := os.ReadFile(filepath.Join(p.Tool.Dir, "reader.sh")); !strings.HasSuffix(string(data), "exit 0\n") {
		t.Errorf("the tool changed its own file: %q", data)
	}
}

// TestRunWriteTool: fs.read and fs.write let the tool write the workspace,
// never harness state or its own files.
func TestRunWriteTool(t *testing.T) {
	f := newToolFixture(t)
	body := `echo written > out.txt
echo x > .efferent/tools/grants/evil.json && echo WROTE-HARNESS
echo x >> "$0" && echo WROTE-SELF
exit 0
`
	res, _ := f.runTool(t, decl("writer", `["./writer.sh"]`, []string{"writer.sh"}, "fs.read:workspace", "fs.write:workspace"), script("writer.sh", body), "", nil)
	if data, err := os.ReadFile(filepath.Join(f.ws, "out.txt")); err != nil || string(data) != "written\n" {
		t.Fatalf("the tool could not write the workspace: %v %q; %+v", err, data, res)
	}
	if strings.Contains(res.Stdout, "WROTE") {
		t.Errorf("the tool wrote harness state or itself: %q", res.Stdout)
	}
	if _, err := os.Stat(filepath.Join(f.reg.Dir(), "grants", "evil.json")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("harness state written: %v", err)
	}
}

// TestRunNoFilesystem: without an fs capability the workspace is hidden.
func TestRunNoFilesystem(t *testing.T) {
	f := newToolFixture(t)
	os.WriteFile(filepath.Join(f.ws, "secret.txt"), []byte("s3cret\n"), 0o644)
	res, _ := f.runTool(t, decl("blind", `["sh", "-c", "cat secret.txt; ls -A; echo x > y.txt && echo WROTE; exit 0"]`, nil), nil, "", nil)
	if strings.Contains(res.Stdout, "s3cret") || strings.Contains(res.Stdout, "secret.txt") {
		t.Errorf("a tool without fs capabilities saw the workspace: %q", res.Stdout)
	}
	// The write lands on the empty tmpfs that hides the workspace, and is
	// gone with the sandbox.
	if _, err := os.Stat(filepath.Join(f.ws, "y.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("y.txt written: %v", err)
	}
}

// TestRunNetwork: a tool without net:host cannot reach a listener on the
// host's loopback; the same tool with net:host can (so the attempt is a
// real one).
func TestRunNetwork(t *testing.T) {
	f := newToolFixture(t)
	port, accepted := testenv.LoopbackListener(t, "")
	connect := fmt.Sprintf(`["bash", "-c", "exec 3<>/dev/tcp/127.0.0.1/%d && echo CONNECTED; exit 0"]`, port)
	res, _ := f.runTool(t, decl("offline", connect, nil, "time:10s"), nil, "", nil)
	if strings.Contains(res.Stdout, "CONNECTED") {
		t.Fatalf("a tool without net:host connected to the host: %+v", res)
	}
	select {
	case <-accepted:
		t.Fatal("the listener accepted a connection from a tool without net:host")
	case <-time.After(100 * time.Millisecond):
	}
	res, _ = f.runTool(t, decl("online", connect, nil, "net:host", "time:10s"), nil, "", nil)
	if !strings.Contains(res.Stdout, "CONNECTED") {
		t.Fatalf("a tool with net:host could not connect (the attempt above proves nothing): %+v", res)
	}
}

// TestRunEnvInputOutputTime: only granted variables arrive; the input
// arrives on stdin exactly as given; output and time are bounded as granted.
func TestRunEnvInputOutputTime(t *testing.T) {
	f := newToolFixture(t)
	environ := append(os.Environ(), "CORDON_TEST_GRANTED=yes", "CORDON_TEST_SECRET=s3cret", "MY_VAR=granted-value", "SECRET_TOKEN=s3cret")
	res, _ := f.runTool(t, decl("envy", `["sh", "-c", "env; cat"]`, nil, "env:MY_VAR"), nil, `{"a": [1, 2]}`, environ)
	if !strings.Contains(res.Stdout, "MY_VAR=granted-value") || strings.Contains(res.Stdout, "s3cret") {
		t.Errorf("environment not held to the grant:\n%s", res.Stdout)
	}
	if !strings.HasSuffix(res.Stdout, "\n"+`{"a": [1, 2]}`) {
		t.Errorf("input did not arrive on stdin: %q", res.Stdout)
	}

	res, _ = f.runTool(t, decl("chatty", `["sh", "-c", "head -c 200000 /dev/zero | tr '\\\\0' x"]`, nil, "output:1KiB"), nil, "", nil)
	if !res.StdoutClipped || res.StdoutBytes != 200000 || len(res.Stdout) > 2048 {
		t.Errorf("output not bounded to 1KiB: clipped %v, %d bytes counted, %d kept", res.StdoutClipped, res.StdoutBytes, len(res.Stdout))
	}

	start := time.Now()
	res, _ = f.runTool(t, decl("sleepy", `["sleep", "60"]`, nil, "time:1s"), nil, "", nil)
	if !res.TimedOut || time.Since(start) > 30*time.Second {
		t.Errorf("time:1s did not end the run: %+v after %v", res, time.Since(start))
	}
}

// TestProbeAtRun: with ProbeAtRun the native substrate does not probe
// bubblewrap before a run, and the run itself refuses a "bwrap" that does
// not make a sandbox: it is reported unavailable, never as sandboxed.
func TestProbeAtRun(t *testing.T) {
	f := newToolFixture(t)
	f.admit(t, decl("probe", `["true"]`, nil), nil)
	onHost := filepath.Join(t.TempDir(), "bwrap") // runs its command on the host
	if err := os.WriteFile(onHost, []byte("#!/bin/sh\n[ \"$1\" = --version ] && { echo 'bubblewrap 0.0-fake'; exit 0; }\nwhile [ \"$1\" != -- ]; do shift; done; shift; exec \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	a, err := admission.New(admission.Config{Workspace: f.ws, Harness: testHarness, Substrates: map[string]substrate.Enforcer{
		admission.KindNative: bwrap.NewEnforcer(bwrap.EnforcerConfig{Bwrap: onHost, ProbeAtRun: true})}})
	if err != nil {
		t.Fatal(err)
	}
	p, err := a.Prepare(context.Background(), f.reg, "probe", nil)
	if err != nil {
		t.Fatalf("Prepare with ProbeAtRun = %v", err)
	}
	rt := runtime.New(runtime.Config{Bwrap: onHost})
	defer rt.Close()
	res, err := rt.Run(context.Background(), p)
	if !errors.Is(err, bwrap.ErrUnavailable) || !strings.Contains(err.Error(), "not in a sandbox") {
		t.Errorf("Run with ProbeAtRun = %v, %v; want ErrUnavailable", res, err)
	}
	if res.Sandboxed || res.ExitCode != 125 {
		t.Errorf("the refused run reads as %v", res)
	}
}

// TestRunToolOnLandlock admits a native tool for the landlock substrate,
// as a program that embeds cordon may: it writes the workspace below an
// existing directory, never harness state or its own files, and reaches
// the one TCP port its grant names, not another.
func TestRunToolOnLandlock(t *testing.T) {
	err := landlock.Available()
	testenv.Require(t, err == nil, "Landlock ABI %d: %v", landlock.RequiredABI, err)
	needProgram(t, "python3")
	ws := workspace(t, base(t))
	os.Mkdir(filepath.Join(ws, "data"), 0o755)
	a, err := admission.New(admission.Config{Workspace: ws, Harness: testHarness,
		Substrates: map[string]substrate.Enforcer{admission.KindNative: landlock.Enforcer{}}})
	if err != nil {
		t.Fatal(err)
	}
	reg, err := admission.OpenRegistry(admission.RegistryConfig{Workspace: ws, Harness: testHarness})
	if err != nil {
		t.Fatal(err)
	}
	f := &toolFixture{ws: ws, a: a, reg: reg}
	var ports []int
	for range 2 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				c.Write([]byte("hi\n"))
				c.Close()
			}
		}()
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	body := fmt.Sprintf(`echo written > data/out.txt
echo x > .efferent/tools/grants/evil.json && echo WROTE-HARNESS
echo x >> "$0" && echo WROTE-SELF
python3 -c 'import socket; socket.create_connection(("127.0.0.1", %d), 2); print("GRANTED-PORT")'
python3 -c 'import socket; socket.create_connection(("127.0.0.1", %d), 2); print("OTHER-PORT")'
exit 0
`, ports[0], ports[1])
	res, _ := f.runTool(t, decl("writer", `["./writer.sh"]`, []string{"writer.sh"}, "fs.read:workspace", "fs.write:workspace",
		fmt.Sprintf("net.connect:tcp:%d", ports[0])), script("writer.sh", body), "", nil)
	if res.Substrate != landlock.Name || !res.Sandboxed {
		t.Fatalf("ran on %s (sandboxed %v)", res.Substrate, res.Sandboxed)
	}
	if data, err := os.ReadFile(filepath.Join(ws, "data", "out.txt")); err != nil || string(data) != "written\n" {
		t.Fatalf("the tool could not write the workspace: %v %q; %+v %q", err, data, res, res.Stderr)
	}
	if strings.Contains(res.Stdout, "WROTE") {
		t.Errorf("the tool wrote harness state or itself: %q", res.Stdout)
	}
	if !strings.Contains(res.Stdout, "GRANTED-PORT") {
		t.Errorf("the granted port was not reachable: %q %q", res.Stdout, res.Stderr)
	}
	if strings.Contains(res.Stdout, "OTHER-PORT") {
		t.Errorf("a port the grant does not name was reachable: %q", res.Stdout)
	}
}
