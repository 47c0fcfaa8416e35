package runtime_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/cordon-run/cordon/admission"
	"github.com/cordon-run/cordon/capabilities"
	"github.com/cordon-run/cordon/harness"
	"github.com/cordon-run/cordon/internal/testenv"
	"github.com/cordon-run/cordon/internal/wasmtest"
	"github.com/cordon-run/cordon/runtime"
	"github.com/cordon-run/cordon/substrate"
	"github.com/cordon-run/cordon/substrate/bwrap"
	"github.com/cordon-run/cordon/substrate/host"
	"github.com/cordon-run/cordon/substrate/landlock"
	"github.com/cordon-run/cordon/substrate/oci"
)

// needBwrap stops the test unless bubblewrap can create a sandbox here
// (a failure in CI, where .ci/run installs it).
func needBwrap(t testing.TB) {
	t.Helper()
	bin, err := bwrap.Find(os.Getenv("PATH"))
	testenv.Require(t, err == nil, "bubblewrap: %v", err)
	err = bwrap.Detect(context.Background(), bin)
	testenv.Require(t, err == nil, "a working bubblewrap sandbox: %v", err)
}

// needProgram stops the test unless name is installed.
// bothModes runs f in a subtest with the sandbox (skipped or failed, as
// testenv.Require says, without bubblewrap) and in one without it
// (--no-sandbox), for the properties that hold in both.
func bothModes(t *testing.T, f func(t *testing.T, sandboxed bool)) {
	for _, sandboxed := range []bool{true, false} {
		t.Run(fmt.Sprintf("sandboxed=%v", sandboxed), func(t *testing.T) {
			if sandboxed {
				needBwrap(t)
			}
			f(t, sandboxed)
		})
	}
}

// everyMode runs f in a subtest for each way a native command runs: on
// bwrap, on landlock and (host) without a sandbox.
func everyMode(t *testing.T, f func(t *testing.T, sub string)) {
	substrates(t, f)
	t.Run(host.Name, func(t *testing.T) { f(t, host.Name) })
}

// in returns an option of run for the mode sub of everyMode.
func in(sub string) func(*Spec) {
	return func(s *Spec) {
		if sub == host.Name {
			s.NoSandbox = true
		} else {
			s.Substrate = sub
		}
	}
}

// needOCI stops the test unless an OCI runtime runs a bundle here.
func needOCI(t testing.TB) {
	t.Helper()
	_, err := oci.Detect(context.Background(), os.Getenv("PATH"), "", testHarness)
	testenv.Require(t, err == nil, "an OCI runtime (runc): %v", err)
}

func needProgram(t testing.TB, name string) {
	t.Helper()
	_, err := exec.LookPath(name)
	testenv.Require(t, err == nil, "the %s program: %v", name, err)
}

// base returns a fresh directory for a test's workspace and for the files
// "outside" it. It lives under /var/tmp when possible: the sandbox shows
// /var/tmp read-only, while it replaces /tmp with an empty tmpfs, so an
// outside file under /var/tmp is one the command can see and must not
// change.
func base(t testing.TB) string {
	t.Helper()
	d, err := os.MkdirTemp("/var/tmp", "cordon-test-")
	if err != nil {
		d = t.TempDir()
	} else {
		t.Cleanup(func() { os.RemoveAll(d) })
	}
	d, err = filepath.EvalSymlinks(d)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// workspace makes base/ws and returns its canonical path.
func workspace(t testing.TB, base string) string {
	t.Helper()
	ws := filepath.Join(base, "ws")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	return ws
}

// subdir makes the directory sub inside ws and returns it: a nested
// workspace.
func subdir(t testing.TB, ws string) string {
	t.Helper()
	sub := filepath.Join(ws, "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	return sub
}

// testHarness is the default harness configuration with the per-user key
// store and cache in a temporary directory of the test binary.
var testHarness harness.Config

func TestMain(m *testing.M) { testenv.Main(m, &testHarness, wasmtest.RemoveBuilds) }

// newPolicy is the policy of cordon exec in ws: the workspace writable, no
// network.
func newPolicy(ws string) bwrap.Policy { return bwrap.NewPolicy(ws, testHarness) }

// Spec is one command as cordon exec gives it to the runtime: the policy
// says the workspace access, the network, the env names and the /tmp
// size; the rest bound the run.
type Spec struct {
	Command   []string
	Policy    bwrap.Policy
	NoSandbox bool
	Timeout   time.Duration
	Grace     time.Duration
	MaxOutput int64
	Stdin     io.Reader
	Environ   []string
	Bwrap     string
	Logger    *slog.Logger
	// Substrate is "bwrap" (if empty) or "landlock"; NoSandbox overrides it.
	Substrate string
	// Extra are capabilities granted beyond the policy's (limits).
	Extra []capabilities.Capability
}

// capabilities returns the capabilities the spec grants.
func (s Spec) capabilities() (capabilities.Set, error) {
	var caps []capabilities.Capability
	p := s.Policy
	switch p.Access() {
	case bwrap.AccessRead:
		caps = append(caps, capabilities.ReadWorkspace())
	case bwrap.AccessWrite:
		caps = append(caps, capabilities.ReadWorkspace(), capabilities.WriteWorkspace())
	}
	if p.Network() == bwrap.NetHost || s.NoSandbox {
		caps = append(caps, capabilities.HostNet())
	} else {
		caps = append(caps, capabilities.NoNet())
	}
	for _, n := range p.Env() {
		c, err := capabilities.Parse("env:" + n)
		if err != nil {
			return capabilities.Set{}, err
		}
		caps = append(caps, c)
	}
	timeout, output := s.Timeout, s.MaxOutput
	if timeout == 0 {
		timeout = 2 * time.Minute
	}
	if output == 0 {
		output = 1 << 20
	}
	for _, mk := range []func() (capabilities.Capability, error){
		func() (capabilities.Capability, error) { return capabilities.TimeLimit(timeout) },
		func() (capabilities.Capability, error) { return capabilities.OutputLimit(output) },
	} {
		c, err := mk()
		if err != nil {
			return capabilities.Set{}, err
		}
		caps = append(caps, c)
	}
	if !s.NoSandbox && s.substrate() == bwrap.Name {
		c, err := capabilities.TmpLimit(p.TmpSize())
		if err != nil {
			return capabilities.Set{}, err
		}
		caps = append(caps, c)
	}
	return capabilities.NewSet(append(caps, s.Extra...)...)
}

// substrate returns the substrate the spec runs on.
func (s Spec) substrate() string {
	switch {
	case s.NoSandbox:
		return host.Name
	case s.Substrate != "":
		return s.Substrate
	}
	return bwrap.Name
}

// on returns an option of run that picks the substrate.
func on(sub string) func(*Spec) { return func(s *Spec) { s.Substrate = sub } }

// substrates runs f in a subtest for each native sandbox — bwrap,
// landlock and oci (runc) — after checking that the substrate can run
// here (a failure in CI, a skip with the reason elsewhere).
func substrates(t *testing.T, f func(t *testing.T, sub string)) {
	for _, sub := range []string{bwrap.Name, landlock.Name, oci.Name} {
		t.Run(sub, func(t *testing.T) {
			switch sub {
			case bwrap.Name:
				needBwrap(t)
			case landlock.Name:
				err := landlock.Available()
				testenv.Require(t, err == nil, "Landlock ABI %d: %v", landlock.RequiredABI, err)
			case oci.Name:
				needOCI(t)
			}
			f(t, sub)
		})
	}
}

// prepare admits the spec's command as cordon exec does
// (admission.PrepareCommand).
func prepare(ctx context.Context, s Spec) (*admission.Prepared, error) {
	set, err := s.capabilities()
	if err != nil {
		return nil, err
	}
	h := s.Policy.Harness()
	a, err := admission.New(admission.Config{Workspace: s.Policy.Workspace(), Harness: h, Substrates: map[string]substrate.Enforcer{
		admission.KindNative: bwrap.NewEnforcer(bwrap.EnforcerConfig{Bwrap: s.Bwrap, ProbeAtRun: true}),
		host.Name:            host.Enforcer{},
		landlock.Name:        landlock.Enforcer{},
		oci.Name:             oci.NewEnforcer(oci.EnforcerConfig{Workspace: s.Policy.Workspace(), Harness: h}),
	}})
	if err != nil {
		return nil, err
	}
	return a.PrepareCommand(ctx, admission.Command{Argv: s.Command, Capabilities: set, Substrate: s.substrate(), Stdin: s.Stdin})
}

// runSpec runs the spec's command as cordon exec does: a grant made for
// it (admission.PrepareCommand), run by the runtime.
func runSpec(ctx context.Context, s Spec) (runtime.Result, error) {
	p, err := prepare(ctx, s)
	if err != nil {
		return runtime.Result{}, err
	}
	cfg := runtime.Config{Environ: s.Environ, Bwrap: s.Bwrap, Grace: s.Grace, Logger: s.Logger}
	if !pooled || !poolable(s.substrate(), s.Command, s.Stdin) {
		rt := runtime.New(cfg)
		defer rt.Close()
		return rt.Run(ctx, p)
	}
	cfg.Pool = 1
	rt := runtime.New(cfg)
	defer rt.Close()
	rt.Warm(p) // an error is the run's too, and the run says it
	res, err := rt.Run(ctx, p)
	if err == nil && !res.Pooled {
		return res, fmt.Errorf("pooled: %q did not run in a pooled sandbox (%+v)", s.Command, rt.PoolStats())
	}
	return res, err
}

// pooled, set while TestPooledSandboxes runs the property tests again,
// makes every poolable command of runSpec and runBwrap run in a sandbox
// made ahead of it by a pool, and fails a run that did not.
var pooled bool

// poolable reports whether a pool runs the command: /bin/sh -c on bwrap,
// without standard input.
func poolable(sub string, argv []string, stdin io.Reader) bool {
	return sub == bwrap.Name && stdin == nil && len(argv) == 3 && argv[0] == "/bin/sh" && argv[1] == "-c" &&
		len(argv[2]) <= bwrap.MaxPooledScript
}

// run runs the shell script under the policy and fails the test when the
// command could not run.
func run(t testing.TB, p bwrap.Policy, script string, opts ...func(*Spec)) runtime.Result {
	t.Helper()
	spec := Spec{Command: []string{"/bin/sh", "-c", script}, Policy: p, Timeout: 60 * time.Second}
	for _, o := range opts {
		o(&spec)
	}
	res, err := runSpec(context.Background(), spec)
	if err != nil {
		t.Fatalf("Run(%q) = %v", script, err)
	}
	return res
}

// runBwrap runs the shell script with bwrap.Run directly, for the
// policies no grant makes (extra read-only binds).
func runBwrap(t testing.TB, p bwrap.Policy, script string) runtime.Result {
	t.Helper()
	spec := bwrap.Spec{Command: []string{"/bin/sh", "-c", script}, Policy: p, Timeout: 60 * time.Second}
	if pooled && len(script) <= bwrap.MaxPooledScript {
		spec.Pool = bwrap.NewPool(1, 0)
		defer spec.Pool.Close()
		spec.Pool.Warm(spec)
	}
	o, err := bwrap.Run(context.Background(), spec)
	if err != nil {
		t.Fatalf("bwrap.Run(%q) = %v", script, err)
	}
	if spec.Pool != nil && !o.Pooled {
		t.Fatalf("pooled: bwrap.Run(%q) did not run in a pooled sandbox (%+v)", script, spec.Pool.Stats())
	}
	return runtime.Result{Outcome: o, Substrate: bwrap.Name, Sandboxed: true}
}

// makeGitDir makes dir a valid, empty git directory.
func makeGitDir(t testing.TB, dir string) {
	t.Helper()
	for _, d := range []string{"objects", "refs/heads"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	writeFile(t, filepath.Join(dir, "HEAD"), "ref: refs/heads/main\n")
}

// writeFile writes a file, creating its directory.
func writeFile(t testing.TB, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// snapshot describes every entry below dir (type, mode, size, content
// digest or link target), to compare a tree before and after a run.
func snapshot(t testing.TB, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		rel, _ := filepath.Rel(dir, p)
		if err != nil {
			out[rel] = "error: " + err.Error()
			return nil
		}
		info, err := d.Info()
		if err != nil {
			out[rel] = "error: " + err.Error()
			return nil
		}
		desc := fmt.Sprintf("%v %d", info.Mode(), info.Size())
		switch {
		case info.Mode()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			desc += " -> " + target
		case info.Mode().IsRegular():
			data, _ := os.ReadFile(p)
			sum := sha256.Sum256(data)
			desc += " " + hex.EncodeToString(sum[:8])
		}
		out[rel] = desc
		return nil
	})
	return out
}

// diff lists the differences between two snapshots.
func diff(before, after map[string]string) []string {
	var d []string
	for k, v := range before {
		if w, ok := after[k]; !ok {
			d = append(d, "removed "+k)
		} else if w != v {
			d = append(d, fmt.Sprintf("changed %s: %s => %s", k, v, w))
		}
	}
	for k := range after {
		if _, ok := before[k]; !ok {
			d = append(d, "added "+k)
		}
	}
	sort.Strings(d)
	return d
}

// statuses parses lines "NAME rc" printed by a script that tries several
// attacks, one per line.
func statuses(t testing.TB, out string) map[string]string {
	t.Helper()
	m := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		name, rc, ok := strings.Cut(line, " ")
		if ok {
			m[name] = rc
		}
	}
	return m
}

// attempt returns a shell line that runs cmd and prints "NAME rc".
func attempt(name, cmd string) string {
	return fmt.Sprintf("( %s ) >/dev/null 2>&1; echo %s $?\n", cmd, name)
}

// admitterFor returns an admitter and a registry of tools for the
// workspace ws under the harness configuration h.
func admitterFor(t *testing.T, ws string, h harness.Config) (*admission.Admitter, *admission.Registry) {
	t.Helper()
	a, err := admission.New(admission.Config{Workspace: ws, Harness: h})
	if err != nil {
		t.Fatal(err)
	}
	reg, err := admission.OpenRegistry(admission.RegistryConfig{Workspace: ws, Harness: h})
	if err != nil {
		t.Fatal(err)
	}
	return a, reg
}
