package limits

import (
	"os/exec"
	"strconv"
	"testing"
	"time"
)

// TestBornLimitedIsWhatAddLeaves: a plan is limited from birth exactly
// when Add has nothing to apply to a process born in the run's cgroups —
// bwrap's options go before Add runs for such a plan alone (package bwrap,
// sendEarly). Add on a born group of each plan: a plan said born limited
// must leave a live process as it is, every other one must set an rlimit
// on it.
func TestBornLimitedIsWhatAddLeaves(t *testing.T) {
	ways := []Way{None, Cgroup1, Rlimit}
	for _, mem := range ways {
		for _, pids := range ways {
			for _, cpu := range []Way{None, Rlimit} {
				p := Plan{Memory: mem, Pids: pids, CPU: cpu,
					Spec: Spec{Memory: 3 << 30, Pids: 70, CPU: 997 * time.Second}}
				want := mem != Rlimit && pids != Rlimit && cpu != Rlimit
				if got := p.BornLimited(); got != want {
					t.Errorf("memory %q, pids %q, cpu %q: BornLimited = %v, want %v", mem, pids, cpu, got, want)
				}
				cmd := exec.Command("sleep", "30")
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				g := &Group{plan: p, born: true, dirs: map[string]string{}, nproc: 77} // below what any process has: lowering needs no privilege
				before := rlimits(t, cmd.Process.Pid)
				err := g.add(cmd.Process.Pid, true)
				after := rlimits(t, cmd.Process.Pid)
				cmd.Process.Kill()
				cmd.Wait()
				if err != nil {
					t.Fatalf("memory %q, pids %q, cpu %q: Add: %v", mem, pids, cpu, err)
				}
				if changed := before != after; changed == p.BornLimited() {
					t.Errorf("memory %q, pids %q, cpu %q: BornLimited %v, and Add changed the process's rlimits: %v", mem, pids, cpu, p.BornLimited(), changed)
				}
			}
		}
	}
}

// rlimits reads the process's rlimits as /proc shows them.
func rlimits(t *testing.T, pid int) string {
	t.Helper()
	out, err := exec.Command("cat", "/proc/"+strconv.Itoa(pid)+"/limits").Output()
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}
