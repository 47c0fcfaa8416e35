package admission

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cordon-run/cordon/internal/testenv"
	"github.com/cordon-run/cordon/refusal"
	"github.com/cordon-run/cordon/substrate"
	"github.com/cordon-run/cordon/substrate/bwrap"
)

var (
	decl   = testenv.Decl
	script = testenv.Script
)

// TestRunRefusesBadInput: input that does not match input_schema never
// reaches the tool.
func TestPrepareRefusesBadInput(t *testing.T) {
	f := newFixture(t)
	d := `{"name": "typed", "kind": "native", "command": ["cat"], "capabilities": [],
	 "input_schema": {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}}`
	if _, err := f.reg.Register(f.admit(t, d, nil)); err != nil {
		t.Fatal(err)
	}
	_, err := f.a.Prepare(context.Background(), f.reg, "typed", []byte(`{"n": "five"}`))
	if !errors.Is(err, ErrInputRefused) || !strings.Contains(err.Error(), `input_schema#/properties/n: type: five has type "string", want "integer"`) {
		t.Fatalf("Prepare = %v", err)
	}
	if _, err := f.a.Prepare(context.Background(), f.reg, "nope", nil); !errors.Is(err, ErrUnknownTool) {
		t.Fatalf("Prepare of an unknown tool = %v", err)
	}
}

// TestRunRechecksChangedHost: a grant made under other host facts is made
// again before the tool runs, and a tool whose capability the host can no
// longer enforce is refused.
func TestPrepareRechecksChangedHost(t *testing.T) {
	f := newFixture(t)
	adm := f.admit(t, decl("moved", `["true"]`, nil, "time:5s"), nil)
	adm.Grant.Facts.Kernel = "0.0-another-host"
	adm.Grant.FactsDigest = adm.Grant.Facts.Digest()
	if _, err := f.reg.Register(adm); err != nil {
		t.Fatal(err)
	}
	p, err := f.a.Prepare(context.Background(), f.reg, "moved", nil)
	if err != nil {
		t.Fatal(err)
	}
	if !p.Rechecked || p.Grant.Facts.Kernel == "0.0-another-host" {
		t.Errorf("grant not re-made: rechecked %v, facts %v", p.Grant.Facts, p.Rechecked)
	}
	if tool, _ := f.reg.Load("moved"); tool.Grant.FactsDigest != p.Grant.FactsDigest {
		t.Errorf("the re-made grant was not registered")
	}

	// A grant for a capability this host refuses (as if admitted where it
	// could be held) is refused at run time.
	adm = f.admit(t, decl("filtered", `["true"]`, nil, "time:5s"), nil)
	adm.Grant.Facts.Kernel = "0.0-another-host"
	adm.Grant.FactsDigest = adm.Grant.Facts.Digest()
	adm.Declaration.Capabilities = []string{"wasm.import:cordon/log"}
	adm.Manifest, adm.Grant.Digest = manifestOf(adm.Declaration, adm.Files)
	if _, err := f.reg.Register(adm); err != nil {
		t.Fatal(err)
	}
	_, err = f.a.Prepare(context.Background(), f.reg, "filtered", nil)
	var hc *HostChangedError
	if !errors.As(err, &hc) || !errors.Is(err, ErrCapabilityRefused) || !strings.Contains(err.Error(), "wasm.import:cordon/log") {
		t.Fatalf("Prepare = %v", err)
	}
}

// TestPrepareRefusesEditedGrant: a grant edited in the registry (here: to
// add net:host) fails its MAC, and the tool does not run; so does one
// moved to another name or another workspace, or signed by another key.
func TestPrepareRefusesEditedGrant(t *testing.T) {
	f := newFixture(t)
	if _, err := f.reg.Register(f.admit(t, decl("edited", `["true"]`, nil, "time:5s"), nil)); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(f.reg.Dir(), "grants", "edited.json")
	data, _ := os.ReadFile(p)
	edited := strings.Replace(string(data), `time:5s`, `net:host\", \"time:5s`, 1)
	if edited == string(data) {
		t.Fatal("the grant file does not hold the capability")
	}
	replace := func(name, content string) {
		os.Remove(name)
		if err := os.WriteFile(name, []byte(content), 0o444); err != nil {
			t.Fatal(err)
		}
	}
	replace(p, edited)
	_, err := f.a.Prepare(context.Background(), f.reg, "edited", nil)
	if !errors.Is(err, refusal.UntrustedState) || !strings.Contains(err.Error(), "its MAC does not match") {
		t.Fatalf("Prepare of an edited grant = %v", err)
	}
	if _, err := f.reg.Load("edited"); !errors.Is(err, refusal.UntrustedState) {
		t.Fatalf("Load of an edited grant = %v", err)
	}
	grants, refused, err := f.reg.List()
	if err != nil || len(grants) != 0 || len(refused) != 1 || !errors.Is(refused[0], refusal.UntrustedState) {
		t.Fatalf("List with an edited grant = %v, %v, %v", grants, refused, err)
	}
	replace(p, string(data))
	if _, err := f.a.Prepare(context.Background(), f.reg, "edited", nil); err != nil {
		t.Fatalf("the original grant back: %v", err)
	}

	// The same grant under another name.
	replace(filepath.Join(f.reg.Dir(), "grants", "other.json"), string(data))
	if _, err := f.reg.Load("other"); !errors.Is(err, refusal.UntrustedState) {
		t.Errorf("a grant moved to another name: %v", err)
	}
	// In another workspace, with the same key store.
	g := newFixture(t)
	os.MkdirAll(filepath.Join(g.reg.Dir(), "grants"), 0o755)
	replace(filepath.Join(g.reg.Dir(), "grants", "edited.json"), string(data))
	if _, err := g.reg.Load("edited"); !errors.Is(err, refusal.UntrustedState) {
		t.Errorf("a grant moved to another workspace: %v", err)
	}
	// In this workspace, read with another user's key store.
	other, err := OpenRegistry(RegistryConfig{Workspace: f.ws, Harness: testHarness.WithStateDir(t.TempDir())})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.Load("edited"); !errors.Is(err, refusal.UntrustedState) {
		t.Errorf("a grant under another key store: %v", err)
	}
	// Unauthenticated, as an older cordon wrote it.
	var env struct {
		Grant json.RawMessage `json:"grant"`
	}
	json.Unmarshal(data, &env)
	replace(p, string(env.Grant))
	if _, err := f.reg.Load("edited"); !errors.Is(err, refusal.UntrustedState) || !strings.Contains(err.Error(), "no MAC") {
		t.Errorf("a grant without a MAC: %v", err)
	}
}

// TestProbeAtRun: without ProbeAtRun, Prepare proves bubblewrap first and
// refuses a "bwrap" that does not make a sandbox; with it, Prepare leaves
// the proof to the run (package runtime tests the run's refusal).
func TestProbeAtRun(t *testing.T) {
	f := newFixture(t)
	if _, err := f.reg.Register(f.admit(t, decl("probe", `["true"]`, nil), nil)); err != nil {
		t.Fatal(err)
	}
	onHost := filepath.Join(t.TempDir(), "bwrap") // runs its command on the host
	if err := os.WriteFile(onHost, []byte("#!/bin/sh\n[ \"$1\" = --version ] && { echo 'bubblewrap 0.0-fake'; exit 0; }\nwhile [ \"$1\" != -- ]; do shift; done; shift; exec \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, probeAtRun := range []bool{false, true} {
		a, err := New(Config{Workspace: f.ws, Harness: testHarness, Substrates: map[string]substrate.Enforcer{
			KindNative: bwrap.NewEnforcer(bwrap.EnforcerConfig{Bwrap: onHost, ProbeAtRun: probeAtRun})}})
		if err != nil {
			t.Fatal(err)
		}
		_, err = a.Prepare(context.Background(), f.reg, "probe", nil)
		switch {
		case !probeAtRun && (!errors.Is(err, substrate.ErrUnavailable) || !strings.Contains(err.Error(), "not in a sandbox")):
			t.Errorf("Prepare with the probe = %v; want ErrUnavailable", err)
		case probeAtRun && !errors.As(err, new(*HostChangedError)):
			// The fake's version differs from the grant's: the grant is
			// re-made, which is fine; any other error is not.
			if err != nil {
				t.Errorf("Prepare with ProbeAtRun = %v", err)
			}
		}
	}
}

// TestRunRefusesWhenProgramGone: a tool whose host program is no longer
// found (here: an admitter whose lookup path lacks it, as on a host where
// it was removed) is refused before it runs, with the reason.
func TestPrepareRefusesWhenProgramGone(t *testing.T) {
	f := newFixture(t)
	if _, err := f.reg.Register(f.admit(t, decl("gone", `["sh", "-c", "true"]`, nil), nil)); err != nil {
		t.Fatal(err)
	}
	n := requireBwrap(t)
	elsewhere, err := New(Config{Workspace: f.ws, Harness: testHarness, Substrates: map[string]substrate.Enforcer{KindNative: n},
		Lookup: HostPrograms{Workspace: f.ws, Path: "/nonexistent/bin"}.Lookup})
	if err != nil {
		t.Fatal(err)
	}
	_, err = elsewhere.Prepare(context.Background(), f.reg, "gone", nil)
	var hc *HostChangedError
	if !errors.As(err, &hc) || !strings.Contains(err.Error(), "its grant no longer holds on this host") || !strings.Contains(err.Error(), `"sh" is not a program`) {
		t.Fatalf("Prepare = %v", err)
	}
}

// TestOldGrantsDoNotReplay: a grant kept from before — the tool admitted
// again with less, or removed — and put back is authentic but not
// current, and is refused.
func TestOldGrantsDoNotReplay(t *testing.T) {
	f := newFixture(t)
	if _, err := f.reg.Register(f.admit(t, decl("replay", `["true"]`, nil, "fs.read:workspace", "fs.write:workspace"), nil)); err != nil {
		t.Fatal(err)
	}
	grant := filepath.Join(f.reg.Dir(), "grants", "replay.json")
	kept, err := os.ReadFile(grant)
	if err != nil {
		t.Fatal(err)
	}
	restore := func() {
		os.Remove(grant)
		if err := os.WriteFile(grant, kept, 0o444); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := f.reg.Register(f.admit(t, decl("replay", `["true"]`, nil, "fs.read:workspace"), nil)); err != nil {
		t.Fatal(err)
	}
	restore()
	if _, err := f.a.Prepare(context.Background(), f.reg, "replay", nil); !errors.Is(err, refusal.UntrustedState) || !strings.Contains(err.Error(), "not the grant last admitted") {
		t.Fatalf("an older grant put back: %v", err)
	}
	if _, err := f.reg.Register(f.admit(t, decl("replay", `["true"]`, nil, "fs.read:workspace"), nil)); err != nil {
		t.Fatal(err)
	}
	if _, err := f.reg.Remove("replay"); err != nil {
		t.Fatal(err)
	}
	restore()
	if _, err := f.reg.Load("replay"); !errors.Is(err, refusal.UntrustedState) {
		t.Fatalf("a removed tool's grant put back: %v", err)
	}
}
