package admission

import (
	"context"
	"crypto/rand"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cordon-run/cordon/evidence"
	"github.com/cordon-run/cordon/internal/testenv"
	"github.com/cordon-run/cordon/probes"
	"github.com/cordon-run/cordon/substrate"
	"github.com/cordon-run/cordon/substrate/bwrap"
)

// proverFor is a prover whose probes use bwrap binary bin (the one on
// PATH when empty) and keep their receipts in a log of its own.
func proverFor(t *testing.T, ws, bin string) (*probes.Prover, *evidence.Log) {
	t.Helper()
	seed := make([]byte, 32)
	rand.Read(seed)
	s, err := evidence.NewSigner(seed)
	if err != nil {
		t.Fatal(err)
	}
	log, err := evidence.OpenLog(filepath.Join(ws, ".foundry", "evidence"), filepath.Join(t.TempDir(), "trusted"), s)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { log.Close() })
	tmp := t.TempDir()
	return &probes.Prover{Log: log, Probes: probes.Config{Harness: testHarness, Bwrap: bin, TempDir: tmp},
		StateDir: testHarness.StateDir()}, log
}

const writerDecl = `{"name": "writer", "kind": "native", "command": ["w.sh"], "files": ["w.sh"],
  "capabilities": ["fs.read:workspace", "fs.write:workspace", "time:5s"], "input_schema": {"type": "object"}}`

func admitWith(t *testing.T, ws string, n *bwrap.Enforcer, p *probes.Prover) (*Admission, error) {
	t.Helper()
	a, err := New(Config{Workspace: ws, Harness: testHarness, Substrates: map[string]substrate.Enforcer{KindNative: n}, Prover: p})
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(ws, "src")
	testenv.WriteFiles(t, dir, testenv.Script("w.sh", "echo ok\n"))
	return a.Admit(context.Background(), Source{Name: "tool.json", Data: []byte(writerDecl), Dir: dir})
}

// TestGrantCitesReceipts: with a prover, every capability of a grant
// names the receipts that proved its mechanisms, and a second admission
// finds them fresh.
func TestGrantCitesReceipts(t *testing.T) {
	n := requireBwrap(t)
	ws := t.TempDir()
	p, log := proverFor(t, ws, "")
	adm, err := admitWith(t, ws, n, p)
	if err != nil {
		t.Fatal(err)
	}
	g := adm.Grant
	for _, c := range g.All().Strings() {
		if len(g.Evidence[c]) == 0 {
			t.Errorf("%s cites no receipt (mechanisms %v)", c, g.Mechanisms[c])
		}
	}
	if !strings.Contains(g.String(), "proved by: bwrap/") {
		t.Errorf("the printed grant names no proof:\n%s", g)
	}
	head, _ := log.Head()
	again, err := admitWith(t, ws, n, p)
	if err != nil {
		t.Fatal(err)
	}
	if head2, _ := log.Head(); head2.Sequence != head.Sequence {
		t.Fatalf("a second admission ran probes again (%d -> %d receipts) while fresh ones existed", head.Sequence, head2.Sequence)
	}
	if again.Grant.Evidence["fs.write:workspace"][0].Receipt != g.Evidence["fs.write:workspace"][0].Receipt {
		t.Fatal("the second admission cites other receipts")
	}
	if rep := log.Verify(); !rep.OK {
		t.Fatalf("the log does not verify: %v", rep.First)
	}
}

// TestBrokenSubstrateRefused: a bwrap that makes real namespaces but
// binds harness state and the write-later paths writable passes
// bubblewrap's own check; the probes catch it, and admission refuses every
// capability that relies on the mechanisms it broke, naming the probe and
// what it saw.
func TestBrokenSubstrateRefused(t *testing.T) {
	requireBwrap(t)
	ws := t.TempDir()
	p, _ := proverFor(t, ws, "")
	fake := testenv.FakeBwrap(t, testenv.FakeNoReadOnlyBinds, p.Probes.TempDir)
	p.Probes.Bwrap = fake
	n := bwrap.NewEnforcer(bwrap.EnforcerConfig{Workspace: ws, Harness: testHarness, Bwrap: fake})
	_, err := admitWith(t, ws, n, p)
	var r *Refusal
	if !errors.As(err, &r) || !errors.Is(err, ErrCapabilityRefused) {
		t.Fatalf("admission under a broken bwrap: %v", err)
	}
	refused := map[string]string{}
	for _, reason := range r.Reasons {
		if reason.Check == "evidence" {
			refused[reason.Capability] = reason.Blocked
		}
	}
	for _, c := range []string{"fs.write:workspace", "fs.read:workspace"} {
		if why := refused[c]; !strings.Contains(why, "bwrap/harness-state") || !strings.Contains(why, "observed:") {
			t.Errorf("%s: %q", c, why)
		}
	}
	if _, ok := refused["time:5s"]; ok {
		t.Errorf("time:5s refused, though its mechanisms held: %v", refused["time:5s"])
	}
}

// TestFakeBwrapRefused: a bwrap that ignores its flags is caught before
// any probe, by the substrate's own check that its sandbox is one.
func TestFakeBwrapRefused(t *testing.T) {
	requireBwrap(t)
	ws := t.TempDir()
	fake := testenv.FakeBwrap(t, testenv.FakeIgnoresFlags, "")
	p, _ := proverFor(t, ws, fake)
	n := bwrap.NewEnforcer(bwrap.EnforcerConfig{Workspace: ws, Harness: testHarness, Bwrap: fake})
	_, err := admitWith(t, ws, n, p)
	var r *Refusal
	if !errors.As(err, &r) || !strings.Contains(r.Error(), "not in a sandbox") {
		t.Fatalf("admission under a bwrap that ignores its flags: %v", err)
	}
}

// TestMissingBwrapRefused: without bubblewrap, native tools are refused.
func TestMissingBwrapRefused(t *testing.T) {
	ws := t.TempDir()
	missing := filepath.Join(t.TempDir(), "bwrap")
	p, _ := proverFor(t, ws, missing)
	n := bwrap.NewEnforcer(bwrap.EnforcerConfig{Workspace: ws, Harness: testHarness, Bwrap: missing})
	_, err := admitWith(t, ws, n, p)
	var r *Refusal
	if !errors.As(err, &r) || !errors.Is(err, ErrCapabilityRefused) {
		t.Fatalf("admission without bwrap: %v", err)
	}
	if _, err := os.Stat(filepath.Join(ws, ".foundry", "evidence", "00000001.json")); err == nil {
		t.Log("receipts were written for the failed probes")
	}
}

// TestNoProverSaysSo: an admission without a prover cites nothing, and
// its grant says so rather than looking like one that needed no proof.
func TestNoProverSaysSo(t *testing.T) {
	n := requireBwrap(t)
	ws := t.TempDir()
	adm, err := admitWith(t, ws, n, nil)
	if err != nil {
		t.Fatal(err)
	}
	if adm.Grant.Evidence != nil || !strings.Contains(adm.Grant.String(), "evidence: none cited") {
		t.Fatalf("a grant made without a prover:\n%s", adm.Grant)
	}
}

// TestGrantCitesItsOwnSubstratesProbes: a mechanism that several
// substrates share (the process layer's deadline) is proved for a bwrap
// tool by bwrap's probes alone: a bwrap grant cites no landlock or oci
// receipt, and so no failure of another substrate's probe (a host without
// Landlock) can refuse it.
func TestGrantCitesItsOwnSubstratesProbes(t *testing.T) {
	n := requireBwrap(t)
	ws := t.TempDir()
	p, _ := proverFor(t, ws, "")
	adm, err := admitWith(t, ws, n, p)
	if err != nil {
		t.Fatal(err)
	}
	for c, cites := range adm.Grant.Evidence {
		for _, cit := range cites {
			if !strings.HasPrefix(cit.Probe, "bwrap/") {
				t.Errorf("%s of a bwrap grant cites %s", c, cit.Probe)
			}
		}
	}
	if len(adm.Grant.Evidence["time:5s"]) == 0 {
		t.Error("time:5s cites no receipt")
	}
}
