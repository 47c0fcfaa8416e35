package admission

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cordon-run/cordon/internal/testenv"
	"github.com/cordon-run/cordon/runtime"
	"github.com/cordon-run/cordon/substrate"
	"github.com/cordon-run/cordon/substrate/bwrap"
)

// runTool admits decl (with files), registers it, and runs it with input
// through Prepare and runtime.Run, as cordon run does.
func (f *fixture) runTool(t *testing.T, decl string, files map[string]string, input string, environ []string) (runtime.Result, *Prepared) {
	t.Helper()
	adm := f.admit(t, decl, files)
	if err := f.reg.Register(adm); err != nil {
		t.Fatal(err)
	}
	p, err := f.a.Prepare(context.Background(), RunConfig{Registry: f.reg, Environ: environ}, adm.Grant.Tool, []byte(input))
	if err != nil {
		t.Fatal(err)
	}
	res, err := runtime.Run(context.Background(), p.Spec)
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
	return res, p
}

func script(name, body string) map[string]string {
	return map[string]string{name + "*": "#!/bin/sh\n" + body}
}

func decl(name, command string, files []string, caps ...string) string {
	q := func(ss []string) string {
		var out []string
		for _, s := range ss {
			out = append(out, fmt.Sprintf("%q", s))
		}
		return "[" + strings.Join(out, ", ") + "]"
	}
	d := fmt.Sprintf(`{"name": %q, "kind": "native", "command": %s, "capabilities": %s`, name, command, q(caps))
	if files != nil {
		d += `, "files": ` + q(files)
	}
	return d + `, "input_schema": {"type": "object"}}`
}

// TestRunReadOnlyTool runs a tool granted fs.read:workspace only: it reads
// the workspace, and its attempts to write the workspace, harness state,
// and its own files all fail, leaving them unchanged.
func TestRunReadOnlyTool(t *testing.T) {
	f := newFixture(t)
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
	f := newFixture(t)
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
	f := newFixture(t)
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
	f := newFixture(t)
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
// arrives on stdin as JSON; output and time are bounded as granted.
func TestRunEnvInputOutputTime(t *testing.T) {
	f := newFixture(t)
	environ := append(os.Environ(), "CORDON_TEST_GRANTED=yes", "CORDON_TEST_SECRET=s3cret", "MY_VAR=granted-value", "SECRET_TOKEN=s3cret")
	res, _ := f.runTool(t, decl("envy", `["sh", "-c", "env; cat"]`, nil, "env:MY_VAR"), nil, `{"a": [1, 2]}`, environ)
	if !strings.Contains(res.Stdout, "MY_VAR=granted-value") || strings.Contains(res.Stdout, "s3cret") {
		t.Errorf("environment not held to the grant:\n%s", res.Stdout)
	}
	if !strings.Contains(res.Stdout, `{"a":[1,2]}`) {
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

// TestRunRefusesBadInput: input that does not match input_schema never
// reaches the tool.
func TestRunRefusesBadInput(t *testing.T) {
	f := newFixture(t)
	d := `{"name": "typed", "kind": "native", "command": ["cat"], "capabilities": [],
	 "input_schema": {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}}`
	if err := f.reg.Register(f.admit(t, d, nil)); err != nil {
		t.Fatal(err)
	}
	_, err := f.a.Prepare(context.Background(), RunConfig{Registry: f.reg}, "typed", []byte(`{"n": "five"}`))
	if !errors.Is(err, ErrInputRefused) || !strings.Contains(err.Error(), `input_schema#/properties/n: type: five has type "string", want "integer"`) {
		t.Fatalf("Prepare = %v", err)
	}
	if _, err := f.a.Prepare(context.Background(), RunConfig{Registry: f.reg}, "nope", nil); !errors.Is(err, ErrUnknownTool) {
		t.Fatalf("Prepare of an unknown tool = %v", err)
	}
}

// TestRunRechecksChangedHost: a grant made under other host facts is made
// again before the tool runs, and a tool whose capability the host can no
// longer enforce is refused.
func TestRunRechecksChangedHost(t *testing.T) {
	f := newFixture(t)
	adm := f.admit(t, decl("moved", `["true"]`, nil, "time:5s"), nil)
	adm.Grant.Facts.Kernel = "0.0-another-host"
	adm.Grant.FactsDigest = adm.Grant.Facts.Digest()
	if err := f.reg.Register(adm); err != nil {
		t.Fatal(err)
	}
	p, err := f.a.Prepare(context.Background(), RunConfig{Registry: f.reg}, "moved", nil)
	if err != nil {
		t.Fatal(err)
	}
	if !p.Rechecked || p.Grant.Facts.Kernel == "0.0-another-host" {
		t.Errorf("grant not re-made: rechecked %v, facts %v", p.Grant.Facts, p.Rechecked)
	}
	if tool, _ := f.reg.Load("moved"); tool.Grant.FactsDigest != p.Grant.FactsDigest {
		t.Errorf("the re-made grant was not registered")
	}

	// A grant for a capability this host refuses (as if admitted where a
	// filtering proxy existed) is refused at run time.
	adm = f.admit(t, decl("filtered", `["true"]`, nil, "time:5s"), nil)
	adm.Grant.Facts.Kernel = "0.0-another-host"
	adm.Grant.FactsDigest = adm.Grant.Facts.Digest()
	adm.Declaration.Capabilities = []string{"net.connect:tcp:443"}
	adm.Manifest, adm.Grant.Digest = manifestOf(adm.Declaration, adm.Files)
	if err := f.reg.Register(adm); err != nil {
		t.Fatal(err)
	}
	_, err = f.a.Prepare(context.Background(), RunConfig{Registry: f.reg}, "filtered", nil)
	var hc *HostChangedError
	if !errors.As(err, &hc) || !errors.Is(err, ErrCapabilityRefused) || !strings.Contains(err.Error(), "net.connect:tcp:443") {
		t.Fatalf("Prepare = %v", err)
	}
}

// TestRunRefusesEditedGrant: a grant edited in the registry (here: to add
// net:host) no longer matches its declaration, and the tool does not run.
func TestRunRefusesEditedGrant(t *testing.T) {
	f := newFixture(t)
	if err := f.reg.Register(f.admit(t, decl("edited", `["true"]`, nil, "time:5s"), nil)); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(f.reg.Dir(), "grants", "edited.json")
	data, _ := os.ReadFile(p)
	edited := strings.Replace(string(data), `"time:5s"`, `"net:host", "time:5s"`, 1)
	if edited == string(data) {
		t.Fatal("the grant file does not hold the capability")
	}
	os.Remove(p)
	if err := os.WriteFile(p, []byte(edited), 0o444); err != nil {
		t.Fatal(err)
	}
	_, err := f.a.Prepare(context.Background(), RunConfig{Registry: f.reg}, "edited", nil)
	if !errors.Is(err, ErrRegistry) || !strings.Contains(err.Error(), "does not match its declaration (capabilities") {
		t.Fatalf("Prepare of an edited grant = %v", err)
	}
}

// TestRunRefusesWhenProgramGone: a tool whose host program is no longer
// found (here: an admitter whose lookup path lacks it, as on a host where
// it was removed) is refused before it runs, with the reason.
func TestRunRefusesWhenProgramGone(t *testing.T) {
	f := newFixture(t)
	if err := f.reg.Register(f.admit(t, decl("gone", `["sh", "-c", "true"]`, nil), nil)); err != nil {
		t.Fatal(err)
	}
	n := requireBwrap(t)
	elsewhere, err := New(Config{Workspace: f.ws, Substrates: map[string]substrate.Enforcer{KindNative: n},
		Lookup: HostPrograms{Workspace: f.ws, Path: "/nonexistent/bin"}.Lookup})
	if err != nil {
		t.Fatal(err)
	}
	_, err = elsewhere.Prepare(context.Background(), RunConfig{Registry: f.reg}, "gone", nil)
	var hc *HostChangedError
	if !errors.As(err, &hc) || !strings.Contains(err.Error(), "its grant no longer holds on this host") || !strings.Contains(err.Error(), `"sh" is not a program`) {
		t.Fatalf("Prepare = %v", err)
	}
}

// TestProbeAtRun: with ProbeAtRun the native substrate does not probe
// bubblewrap before a run, and the run itself still refuses a "bwrap" that
// does not make a sandbox: the tool never runs. Without it, Prepare
// refuses first.
func TestProbeAtRun(t *testing.T) {
	f := newFixture(t)
	marker := filepath.Join(t.TempDir(), "ran")
	adm := f.admit(t, decl("probe", fmt.Sprintf(`["sh", "-c", "echo ran > %s"]`, marker), nil), nil)
	if err := f.reg.Register(adm); err != nil {
		t.Fatal(err)
	}
	onHost := filepath.Join(t.TempDir(), "bwrap") // runs its command on the host
	if err := os.WriteFile(onHost, []byte("#!/bin/sh\n[ \"$1\" = --version ] && { echo 'bubblewrap 0.0-fake'; exit 0; }\nwhile [ \"$1\" != -- ]; do shift; done; shift; exec \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, probeAtRun := range []bool{false, true} {
		a, err := New(Config{Workspace: f.ws, Substrates: map[string]substrate.Enforcer{
			KindNative: NewNative(NativeConfig{Bwrap: onHost, ProbeAtRun: probeAtRun})}})
		if err != nil {
			t.Fatal(err)
		}
		p, err := a.Prepare(context.Background(), RunConfig{Registry: f.reg}, "probe", nil)
		if !probeAtRun {
			if !errors.Is(err, substrate.ErrUnavailable) || !strings.Contains(err.Error(), "not in a sandbox") {
				t.Errorf("Prepare with the probe = %v; want ErrUnavailable", err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("Prepare with ProbeAtRun = %v", err)
		}
		p.Spec.Bwrap = onHost
		res, err := runtime.Run(context.Background(), p.Spec)
		if !errors.Is(err, bwrap.ErrUnavailable) || !strings.Contains(err.Error(), "not in a sandbox") {
			t.Errorf("Run with ProbeAtRun = %v, %v; want ErrUnavailable", res, err)
		}
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the tool ran without a sandbox")
	}
}
