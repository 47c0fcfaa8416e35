package limits

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestSparesAreMadeAheadForTheirPlanAlone: a plan's cgroups are made
// ahead only once it has run twice; the spare has its plan's limit
// written, is taken by a run of that plan and no other, is not taken
// once it is over a minute old or its cgroup is gone, and Close removes
// what is left. A plan
// of rlimits has none.
func TestSparesAreMadeAheadForTheirPlanAlone(t *testing.T) {
	h := pidsHost(t)
	p, err := h.Plan(Spec{Pids: 7})
	if err != nil {
		t.Fatal(err)
	}
	q, err := h.Plan(Spec{Pids: 8})
	if err != nil {
		t.Fatal(err)
	}
	var s Spares
	run := func(p Plan) *Group {
		t.Helper()
		if g := s.Take(p, 2); g != nil {
			return g
		}
		g, err := p.Start(2)
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	exists := func(g *Group) bool {
		_, err := os.Stat(g.dirs["pids"])
		return err == nil
	}
	g1 := run(p)
	g1.Close()
	s.Refill(p, 2)
	if len(s.ready) != 0 {
		t.Fatal("a spare was made after the plan's first run")
	}
	g2 := run(p)
	g2.Close()
	s.Refill(p, 2)
	sp, ok := s.ready[spareKey(p, 2)]
	if !ok {
		t.Fatal("no spare after the plan's second run")
	}
	if data, err := os.ReadFile(filepath.Join(sp.g.dirs["pids"], "pids.max")); err != nil || strings.TrimSpace(string(data)) != "9" {
		t.Errorf("the spare's pids.max: %q %v, want 9", data, err)
	}
	if g := run(q); g == sp.g {
		t.Error("a run of another plan took the spare")
	} else {
		g.Close()
	}
	if g := run(p); g != sp.g {
		t.Error("the run did not take its plan's spare")
	}
	sp.g.Close()

	s.Refill(p, 2)
	old := s.ready[spareKey(p, 2)]
	old.made = time.Now().Add(-2 * spareAge)
	s.ready[spareKey(p, 2)] = old
	if g := run(p); g == old.g {
		t.Error("a spare over a minute old was taken")
	} else {
		g.Close()
	}
	// A spare another process's sweep removed is not taken.
	s.Refill(p, 2)
	swept := s.ready[spareKey(p, 2)].g
	if err := os.Remove(swept.dirs["pids"]); err != nil {
		t.Fatal(err)
	}
	if g := run(p); g == swept {
		t.Error("a spare whose cgroup is gone was taken")
	} else {
		g.Close()
	}
	s.Refill(p, 2)
	left := s.ready[spareKey(p, 2)].g
	s.Close()
	if exists(left) || exists(old.g) {
		t.Error("Close left a spare's cgroup")
	}
	s.Refill(p, 2)
	if len(s.ready) != 0 {
		t.Error("a spare was made after Close")
	}

	r, err := h.Plan(Spec{Pids: 7})
	if err != nil {
		t.Fatal(err)
	}
	r.Pids = Rlimit
	if spareKey(r, 2) != "" {
		t.Error("a plan of rlimits has spares")
	}
}

// TestSparesAheadAreWaitedFor: a spare asked for ahead of a plan's first
// run is made in the background; the run's Take waits for it and gets it,
// a second Ahead while one is made or ready makes no other, a plan of
// rlimits gets none, and Close removes one no run took.
func TestSparesAheadAreWaitedFor(t *testing.T) {
	h := pidsHost(t)
	p, err := h.Plan(Spec{Pids: 7})
	if err != nil {
		t.Fatal(err)
	}
	var s Spares
	s.Ahead(p, 2)
	s.Ahead(p, 2) // one is being made: no other
	g := s.Take(p, 2)
	if g == nil {
		t.Fatal("the run did not get the spare made ahead of it")
	}
	if data, err := os.ReadFile(filepath.Join(g.dirs["pids"], "pids.max")); err != nil || strings.TrimSpace(string(data)) != "9" {
		t.Errorf("the spare's pids.max: %q %v, want 9", data, err)
	}
	if len(s.ready) != 0 || len(s.making) != 0 {
		t.Errorf("left after the take: %d ready, %d being made; want none", len(s.ready), len(s.making))
	}
	g.Close()

	s.Ahead(p, 2)
	if g := s.Take(p, 0); g != nil { // another plan (extra): nothing to wait for, nothing to take
		t.Error("a run of another plan took the spare made ahead")
		g.Close()
	}
	s.wg.Wait()
	if len(s.ready) != 1 {
		t.Fatalf("%d spares ready after Ahead, want 1", len(s.ready))
	}
	s.Ahead(p, 2) // one is ready: no other
	s.wg.Wait()
	if len(s.ready) != 1 {
		t.Fatalf("%d spares ready after a second Ahead, want 1", len(s.ready))
	}
	left := s.ready[spareKey(p, 2)].g
	s.Close()
	if _, err := os.Stat(left.dirs["pids"]); err == nil {
		t.Error("Close left the spare made ahead")
	}
	s.Ahead(p, 2)
	if len(s.ready) != 0 || len(s.making) != 0 {
		t.Error("a spare was made after Close")
	}

	r := p
	r.Pids = Rlimit
	var s2 Spares
	s2.Ahead(r, 2)
	if len(s2.making) != 0 {
		t.Error("a plan of rlimits has a spare made ahead")
	}
}
