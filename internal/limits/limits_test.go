package limits

import (
	"strings"
	"testing"
	"time"

	"github.com/cordon-run/cordon/capabilities"
)

func TestPlan(t *testing.T) {
	cgroup := Host{UID: 0, V1: map[string]string{"memory": "/m", "pids": "/p"}}
	none := Host{UID: 1000, V1: map[string]string{}, Why: map[string]string{}}
	root := Host{UID: 0, V1: map[string]string{}, Why: map[string]string{"pids": "no hierarchy"}}

	p, err := cgroup.Plan(Spec{})
	if err != nil || p.Memory != Cgroup1 || !p.DefaultMemory || p.Pids != Cgroup1 || p.Spec.Pids != DefaultPids {
		t.Errorf("defaults on a cgroup: %+v %v", p, err)
	}
	p, err = none.Plan(Spec{})
	if err != nil || p.Memory != None || p.Pids != Rlimit || p.Spec.Pids != DefaultPids {
		t.Errorf("defaults on rlimits: %+v %v; want no memory limit (address space is not memory), the default pids", p, err)
	}
	p, err = none.Plan(Spec{Memory: 64 << 20, Pids: 10, CPU: 1500 * time.Millisecond})
	if err != nil || p.Memory != Rlimit || p.Pids != Rlimit || p.CPU != Rlimit {
		t.Fatalf("asked on rlimits: %+v %v", p, err)
	}
	m := p.Mechanisms("bwrap", 2)
	var all []string
	for _, x := range m {
		if x.Substrate != "bwrap" {
			t.Errorf("mechanism %v is not the substrate's", x)
		}
		all = append(all, x.String())
	}
	joined := strings.Join(all, "\n")
	for _, want := range []string{"RLIMIT_AS=64MiB", "RLIMIT_NPROC: 12 tasks", "RLIMIT_CPU=2s"} {
		if !strings.Contains(joined, want) {
			t.Errorf("mechanisms do not say %q:\n%s", want, joined)
		}
	}
	if _, err := root.Plan(Spec{Pids: 10}); err == nil || !strings.Contains(err.Error(), "exempt") {
		t.Errorf("pids as root without a cgroup = %v; want a refusal naming the exemption", err)
	}
	if p, err := root.Plan(Spec{}); err != nil || p.Pids != None {
		t.Errorf("root's defaults without a cgroup: %+v %v; want no process limit, no error", p, err)
	}
	set := capabilities.MustParseSet("memory:1MiB", "pids:3", "cpu:1s")
	if s := SpecOf(set); s.Memory != 1<<20 || s.Pids != 3 || s.CPU != time.Second {
		t.Errorf("SpecOf = %+v", s)
	}
}
