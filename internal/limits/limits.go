// Package limits bounds what the processes of one native run may use —
// memory, processes, processor time — with a cgroup where this process can
// create one, else with resource limits (rlimits), and says which: the two
// differ, and a grant quotes what is applied.
//
// A cgroup counts the whole tree of the run: memory is resident memory
// (with swap, where the kernel accounts it), processes are every process
// of the run. An rlimit counts otherwise: RLIMIT_AS is address space, per
// process, not resident memory; RLIMIT_NPROC counts every process of the
// user, the run's and the others, and does not hold for root at all;
// RLIMIT_CPU is per process. Where the host has neither for a limit that
// was asked for, [Host.Plan] refuses it; it never applies a weaker one
// silently.
//
// A [Plan] is decided once, from the host ([Detect]); [Plan.Start] makes
// its cgroups for one run, [Group.Add] puts the run's first process in
// them and sets its rlimits before it starts the tool (bwrap waits for its
// options, the landlock helper for its policy), and [Group.Close] removes
// the cgroups after the run, killing anything left in them.
//
// Cgroups in the v1 layout (a hierarchy per controller, as on this
// project's CI hosts, where the v2 tree holds no controller) are used
// where this process may write them, in practice as root; a v2 tree with
// the memory and pids controllers delegated is detected and reported, not
// yet used.
package limits

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/cordon-run/cordon/capabilities"
	"github.com/cordon-run/cordon/substrate"
)

// Spec is what one run may use; a zero field is no limit.
type Spec struct {
	Memory int64         // bytes
	Pids   int           // processes of the tool (the substrate's own come on top: [Plan.Start])
	CPU    time.Duration // processor time
}

// Default is what every native run may use when its grant asks for no
// limit of a kind: a fork bomb ends at [DefaultPids] processes. Memory has
// no default limit on an rlimit (address space is not memory; runtimes
// such as V8 reserve far more than they use), only on a cgroup
// ([DefaultMemory]).
const DefaultPids = 4096

// DefaultMemory returns the memory every run may use on a cgroup when its
// grant asks for no memory: limit, half of the machine's memory.
func DefaultMemory() int64 { return physicalMemory() / 2 }

// SpecOf returns the limits of the capabilities set: memory:, pids:, cpu:.
func SpecOf(set capabilities.Set) Spec {
	var s Spec
	if c, ok := set.One(capabilities.KindMemory); ok {
		s.Memory = c.Size()
	}
	if c, ok := set.One(capabilities.KindPids); ok {
		s.Pids = c.Count()
	}
	if c, ok := set.One(capabilities.KindCPU); ok {
		s.CPU = c.Duration()
	}
	return s
}

// Way is how one limit is enforced.
type Way string

const (
	// None: the limit is not applied (not asked for, and no default).
	None Way = ""
	// Cgroup1: a cgroup of the controller's v1 hierarchy.
	Cgroup1 Way = "cgroup-v1"
	// Rlimit: a resource limit of the run's first process, inherited.
	Rlimit Way = "rlimit"
)

// Host is what this host offers for limits.
type Host struct {
	// UID is the real user ID of this process.
	UID int
	// V1 maps a controller ("memory", "pids") to the directory of this
	// process's cgroup in its v1 hierarchy, present when this process may
	// create cgroups below it.
	V1 map[string]string
	// V2 is the mount point of the cgroup v2 tree, and V2Controllers the
	// controllers enabled in it ("hugetlb" on a hybrid host).
	V2            string
	V2Controllers []string
	// Why says, for each controller that cannot be used, why not.
	Why map[string]string
}

// String describes what the host offers, for facts and messages.
func (h Host) String() string {
	var parts []string
	for _, c := range []string{"memory", "pids"} {
		if dir, ok := h.V1[c]; ok {
			parts = append(parts, c+"=cgroup-v1:"+dir)
		} else {
			parts = append(parts, c+"=rlimit")
		}
	}
	if h.V2 != "" {
		parts = append(parts, "v2="+h.V2+"("+strings.Join(h.V2Controllers, ",")+")")
	}
	return strings.Join(parts, " ")
}

// Plan is how the limits of one Spec are enforced on a host.
type Plan struct {
	Spec              Spec
	Memory, Pids, CPU Way
	// Defaulted marks limits applied by default, not asked for.
	DefaultMemory, DefaultPids bool
	host                       Host
}

// BornLimited reports whether a process born in the plan's cgroups
// ([Group.Enter]) is under every limit of the plan from its first
// instruction: the plan sets no rlimit, which only [Group.Add] applies,
// to a process that runs already.
func (p Plan) BornLimited() bool {
	return p.Memory != Rlimit && p.Pids != Rlimit && p.CPU != Rlimit
}

// ErrGone: the process to limit had exited already; it started nothing
// that the limits could have held.
var ErrGone = errors.New("limits: the process is gone")

// Unenforceable is a limit that the host can enforce in no way.
type Unenforceable struct {
	Limit  string // "memory", "pids", "cpu"
	Reason string
}

func (e *Unenforceable) Error() string {
	return fmt.Sprintf("cannot limit %s: %s", e.Limit, e.Reason)
}

// Plan decides how s is enforced here, adding the defaults for limits s
// does not ask for. A limit that neither a cgroup nor an rlimit can hold
// is an [*Unenforceable].
func (h Host) Plan(s Spec) (Plan, error) {
	p := Plan{Spec: s, host: h}
	if _, ok := h.V1["memory"]; ok {
		p.Memory = Cgroup1
		if s.Memory == 0 {
			p.Spec.Memory, p.DefaultMemory = DefaultMemory(), true
		}
	} else if s.Memory > 0 {
		p.Memory = Rlimit
	}
	if p.Spec.Memory == 0 {
		p.Memory = None
	}
	if s.Pids == 0 {
		p.Spec.Pids, p.DefaultPids = DefaultPids, true
	}
	switch _, ok := h.V1["pids"]; {
	case ok:
		p.Pids = Cgroup1
	case h.UID == 0 && p.DefaultPids:
		p.Pids = None // root is exempt from RLIMIT_NPROC: no default to apply
	case h.UID == 0:
		return Plan{}, &Unenforceable{Limit: "pids", Reason: "root is exempt from RLIMIT_NPROC, and no pids cgroup can be created here (" + h.Why["pids"] + ")"}
	default:
		p.Pids = Rlimit
	}
	if p.Pids == None {
		p.Spec.Pids, p.DefaultPids = 0, false
	}
	if s.CPU > 0 {
		p.CPU = Rlimit
	}
	return p, nil
}

// Mechanisms names what the plan applies, as grants and results quote it,
// as mechanisms of the substrate sub ("bwrap/pids": each substrate puts
// its run in the limits its own way, and a probe proves each); extra is
// the number of the substrate's own processes counted with the tool's (see
// [Plan.Start]).
func (p Plan) Mechanisms(sub string, extra int) []substrate.Mechanism {
	mech := func(name, detail string) substrate.Mechanism {
		return substrate.Mechanism{Substrate: sub, Name: name, Detail: detail}
	}
	var m []substrate.Mechanism
	def := func(d bool) string {
		if d {
			return " (the default)"
		}
		return ""
	}
	switch p.Memory {
	case Cgroup1:
		m = append(m, mech("memory", fmt.Sprintf("cgroup v1 memory.limit_in_bytes=%s and memory.memsw.limit_in_bytes where swap is accounted%s: resident memory of the whole tree; the kernel's OOM killer ends the tool at the limit", capabilities.FormatSize(p.Spec.Memory), def(p.DefaultMemory))))
	case Rlimit:
		m = append(m, mech("memory", fmt.Sprintf("rlimit RLIMIT_AS=%s: address space of each process, not resident memory; an allocation past it fails", capabilities.FormatSize(p.Spec.Memory))))
	}
	switch p.Pids {
	case Cgroup1:
		of := ""
		if extra > 0 {
			of = fmt.Sprintf(": %d processes of the tool and %d of the sandbox", p.Spec.Pids, extra)
		}
		m = append(m, mech("pids", fmt.Sprintf("cgroup v1 pids.max=%d%s%s; fork fails past it", p.Spec.Pids+extra, def(p.DefaultPids), of)))
	case Rlimit:
		m = append(m, mech("pids", fmt.Sprintf("rlimit RLIMIT_NPROC: %d tasks (processes or threads) more than uid %d has when the run starts%s; it counts every task of the user, the run's and the others", p.Spec.Pids+extra, p.host.UID, def(p.DefaultPids))))
	}
	if p.CPU == Rlimit {
		secs := cpuSeconds(p.Spec.CPU)
		m = append(m, mech("cpu", fmt.Sprintf("rlimit RLIMIT_CPU=%ds of processor time for each process (rounded up to whole seconds): SIGXCPU, then SIGKILL a second later", secs)))
	}
	return m
}

// cpuSeconds rounds d up to whole seconds, at least 1.
// CPUSeconds is the RLIMIT_CPU soft limit of a processor-time limit d:
// whole seconds, rounded up, at least one (the hard limit is one more).
func CPUSeconds(d time.Duration) uint64 { return cpuSeconds(d) }

func cpuSeconds(d time.Duration) uint64 {
	s := uint64((d + time.Second - 1) / time.Second)
	return max(s, 1)
}

// MechanismsOf returns the mechanisms that hold a run to the limit c
// (memory:, pids:, cpu:) of set on this host, extra being the substrate's
// own processes counted with the tool's. The error is an [*Unenforceable].
func (h Host) MechanismsOf(c capabilities.Capability, set capabilities.Set, sub string, extra int) ([]substrate.Mechanism, error) {
	plan, err := h.Plan(SpecOf(set))
	if err != nil {
		return nil, err
	}
	var out []substrate.Mechanism
	for _, m := range plan.Mechanisms(sub, extra) {
		if m.Name == string(c.Kind()) {
			out = append(out, m)
		}
	}
	if len(out) == 0 {
		return nil, &Unenforceable{Limit: string(c.Kind()), Reason: "no mechanism on this host applies it"}
	}
	return out, nil
}
