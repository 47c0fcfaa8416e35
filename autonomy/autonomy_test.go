package autonomy_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cordon-run/cordon/admission"
	"github.com/cordon-run/cordon/autonomy"
	"github.com/cordon-run/cordon/capabilities"
	"github.com/cordon-run/cordon/evidence"
	"github.com/cordon-run/cordon/internal/testenv"
	"github.com/cordon-run/cordon/probes"
	"github.com/cordon-run/cordon/refusal"
	"github.com/cordon-run/cordon/roots"
	"github.com/cordon-run/cordon/runtime"
	"github.com/cordon-run/cordon/substrate"
	"github.com/cordon-run/cordon/substrate/bwrap"
	"github.com/cordon-run/cordon/substrate/host"
	"github.com/cordon-run/cordon/substrate/landlock"
	"github.com/cordon-run/cordon/substrate/wasm"
)

// setup makes a root and a prover over its evidence log, and returns the
// inputs of an unattended bwrap run there, as cordon exec would make
// them (--memory and --pids given, so that limits hold as root and as an
// unprivileged user alike).
func setup(t *testing.T) (autonomy.Input, *probes.Prover) {
	t.Helper()
	h := testenv.Harness(t)
	origin, _ := filepath.EvalSymlinks(t.TempDir())
	if out, err := exec.Command("git", "init", "-q", origin).CombinedOutput(); err != nil {
		t.Fatalf("git init: %v %s", err, out)
	}
	rs, err := roots.Open(h)
	if err != nil {
		t.Fatal(err)
	}
	r, err := rs.Create(context.Background(), roots.CreateOptions{From: origin})
	if err != nil {
		t.Fatal(err)
	}
	seed := make([]byte, 32)
	s, err := evidence.NewSigner(seed)
	if err != nil {
		t.Fatal(err)
	}
	log, err := evidence.OpenLog(filepath.Join(r.Path, ".foundry", "evidence"), filepath.Join(t.TempDir(), "trusted"), s)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { log.Close() })
	prover := &probes.Prover{Log: log, Probes: probes.Config{Harness: h}, StateDir: h.StateDir()}
	a, err := admission.New(admission.Config{Workspace: r.Path, Harness: h, Substrates: map[string]substrate.Enforcer{
		admission.KindNative: bwrap.NewEnforcer(bwrap.EnforcerConfig{ProbeAtRun: true, Workspace: r.Path, Harness: h}),
		host.Name:            host.Enforcer{},
	}})
	if err != nil {
		t.Fatal(err)
	}
	set := capabilities.MustParseSet("fs.read:workspace", "fs.write:workspace", "net:none", "time:2m", "output:1MiB", "tmp:512MiB", "memory:1GiB", "pids:64")
	p, err := a.PrepareCommand(context.Background(), admission.Command{Argv: []string{"true"}, Capabilities: set})
	if err != nil {
		t.Fatal(err)
	}
	mechs, err := runtime.Plan(p)
	if err != nil {
		t.Fatal(err)
	}
	return autonomy.Input{Level: autonomy.Unattended, Workspace: r.Path, Substrate: p.Grant.Substrate, Mechanisms: mechs,
		Time: p.Grant.Time(), Roots: rs, Prover: prover}, prover
}

// recordPasses writes a passing receipt of every probe the substrate
// needs, as cordon probe would after running them.
func recordPasses(t *testing.T, prover *probes.Prover, sub string) {
	t.Helper()
	host, bin, err := prover.Host(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range probes.For(sub, "workspace") {
		if _, err := prover.Record(probes.Result{Probe: p, Observed: p.Expected, Pass: true}, host, bin); err != nil {
			t.Fatal(err)
		}
	}
}

func failedNames(r *autonomy.Report) string {
	var out []string
	for _, p := range r.Preconditions {
		if !p.Pass {
			out = append(out, p.Name)
		}
	}
	return strings.Join(out, ",")
}

func TestUnattendedPreconditions(t *testing.T) {
	ctx := context.Background()
	in, prover := setup(t)

	r, err := autonomy.Check(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	if r.Allowed || failedNames(r) != "evidence" {
		t.Fatalf("a root without receipts: allowed %v, failed %q; want evidence alone", r.Allowed, failedNames(r))
	}
	if err := r.Err(); !errors.Is(err, refusal.AutonomyRefused) || !strings.Contains(err.Error(), "cordon probe") {
		t.Errorf("the refusal %v does not say what to do", err)
	}

	recordPasses(t, prover, in.Substrate)
	if r, err = autonomy.Check(ctx, in); err != nil || !r.Allowed {
		t.Fatalf("a root with fresh receipts: %v, failed %q", err, failedNames(r))
	}

	// Stale: the same receipts two hours later.
	prover.Now = func() time.Time { return time.Now().Add(2 * time.Hour) }
	if r, _ = autonomy.Check(ctx, in); r.Allowed || failedNames(r) != "evidence" || !strings.Contains(r.Preconditions[2].Detail, "old") {
		t.Errorf("stale receipts: allowed %v, failed %q: %s", r.Allowed, failedNames(r), r.Preconditions[2].Detail)
	}
	prover.Now = nil

	for _, tc := range []struct {
		name   string
		change func(*autonomy.Input)
		want   string
	}{
		{"a plain directory", func(in *autonomy.Input) { in.Workspace = filepath.Dir(in.Workspace) }, "root"},
		{"no sandbox", func(in *autonomy.Input) { in.Substrate, in.Mechanisms = "host", nil }, "sandbox"},
		{"a broken substrate", func(in *autonomy.Input) {
			in.Available = func(context.Context) error { return errors.New("bwrap: creating new namespace failed") }
		}, "sandbox"},
		{"the network", func(in *autonomy.Input) {
			in.Mechanisms = append(in.Mechanisms, substrate.Mechanism{Substrate: "bwrap", Name: "share-net", Detail: "host network"})
		}, "network"},
		{"named hosts through the egress proxy", func(in *autonomy.Input) {
			in.Mechanisms = append(in.Mechanisms, substrate.Mechanism{Substrate: "bwrap", Name: "egress-proxy", Detail: "named hosts"})
		}, "network"},
		{"no limits", func(in *autonomy.Input) {
			var kept []substrate.Mechanism
			for _, m := range in.Mechanisms {
				if m.Name != "memory" && m.Name != "pids" {
					kept = append(kept, m)
				}
			}
			in.Mechanisms = kept
		}, "memory,pids"},
		{"a long deadline", func(in *autonomy.Input) { in.Time = 3 * time.Hour }, "time"},
		{"one harness mechanism", func(in *autonomy.Input) {
			var kept []substrate.Mechanism
			for _, m := range in.Mechanisms {
				if m.Name != "seccomp" && m.Name != "cap-drop" {
					kept = append(kept, m)
				}
			}
			in.Mechanisms = kept
		}, "harness-state"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := in
			c.Mechanisms = append([]substrate.Mechanism(nil), in.Mechanisms...)
			tc.change(&c)
			r, err := autonomy.Check(ctx, c)
			if err != nil {
				t.Fatal(err)
			}
			if r.Allowed || !strings.Contains(failedNames(r), tc.want) {
				t.Errorf("allowed %v, failed %q; want %s among them", r.Allowed, failedNames(r), tc.want)
			}
		})
	}
	// Supervised needs nothing.
	c := in
	c.Level, c.Workspace, c.Substrate = autonomy.Supervised, "/nowhere", "host"
	if r, err := autonomy.Check(ctx, c); err != nil || !r.Allowed {
		t.Errorf("supervised: %v %+v", err, r)
	}
}

// TestUnattendedWasm: a wasm tool's preconditions rest on the mechanisms
// the wasm substrate names for its grant, and fail without them.
func TestUnattendedWasm(t *testing.T) {
	ctx := context.Background()
	in, prover := setup(t)
	recordPasses(t, prover, "wasm")
	mechs := func(caps ...string) []substrate.Mechanism {
		set := capabilities.MustParseSet(caps...)
		var out []substrate.Mechanism
		for _, c := range set.All() {
			ms, err := wasm.Enforcer{}.Mechanisms(c, set)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, ms...)
		}
		return out
	}
	in.Substrate = "wasm"
	in.Mechanisms = mechs("fs.read:workspace", "net:none", "time:10s", "output:64KiB", "memory:64MiB")
	if r, err := autonomy.Check(ctx, in); err != nil || !r.Allowed {
		t.Fatalf("a wasm tool with its limits: %v, failed %q", err, failedNames(r))
	}
	for _, tc := range []struct {
		caps []string
		want string
	}{
		{[]string{"fs.read:workspace", "net:none", "time:10s", "output:64KiB"}, "memory"},
		{[]string{"net:none", "time:10s", "output:64KiB", "memory:64MiB"}, "harness-state"},
	} {
		c := in
		c.Mechanisms = mechs(tc.caps...)
		r, err := autonomy.Check(ctx, c)
		if err != nil || r.Allowed || !strings.Contains(failedNames(r), tc.want) {
			t.Errorf("%v: %v, allowed %v, failed %q; want %s", tc.caps, err, r.Allowed, failedNames(r), tc.want)
		}
	}
}

// TestUnattendedOtherPlaces: the same check on the landlock substrate
// rests on Landlock's own mechanisms; a folder inside a root is not the
// root.
func TestUnattendedOtherPlaces(t *testing.T) {
	ctx := context.Background()
	in, prover := setup(t)
	sub := filepath.Join(in.Workspace, "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	recordPasses(t, prover, in.Substrate)
	c := in
	c.Workspace = sub
	if r, _ := autonomy.Check(ctx, c); r.Allowed || !strings.Contains(failedNames(r), "root") {
		t.Errorf("a folder inside a root: allowed %v, failed %q", r.Allowed, failedNames(r))
	}

	testenv.Require(t, landlock.Available() == nil, "Landlock: %v", landlock.Available())
	a, err := admission.New(admission.Config{Workspace: in.Workspace, Harness: testenv.Harness(t), Substrates: map[string]substrate.Enforcer{landlock.Name: landlock.Enforcer{}}})
	if err != nil {
		t.Fatal(err)
	}
	set := capabilities.MustParseSet("fs.read:workspace", "fs.write:workspace", "net:none", "time:2m", "output:1MiB", "memory:1GiB", "pids:64")
	p, err := a.PrepareCommand(ctx, admission.Command{Argv: []string{"true"}, Capabilities: set, Substrate: landlock.Name})
	if err != nil {
		t.Fatal(err)
	}
	mechs, err := runtime.Plan(p)
	if err != nil {
		t.Fatal(err)
	}
	recordPasses(t, prover, landlock.Name)
	c = in
	c.Substrate, c.Mechanisms = landlock.Name, mechs
	r, err := autonomy.Check(ctx, c)
	if err != nil || !r.Allowed {
		t.Fatalf("landlock with its limits: %v, failed %q", err, failedNames(r))
	}
	for _, p := range r.Preconditions {
		if p.Name == "harness-state" && !strings.Contains(p.Detail, "Landlock") {
			t.Errorf("landlock's harness-state rests on %q", p.Detail)
		}
	}
}
