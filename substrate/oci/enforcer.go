package oci

import (
	"context"
	"fmt"
	"os"
	"sync"

	"github.com/cordon-run/cordon/capabilities"
	"github.com/cordon-run/cordon/harness"
	"github.com/cordon-run/cordon/internal/limits"
	"github.com/cordon-run/cordon/internal/seccomp"
	"github.com/cordon-run/cordon/substrate"
	"github.com/cordon-run/cordon/substrate/bwrap"
)

// EnforcerConfig configures an [Enforcer].
type EnforcerConfig struct {
	// Workspace and Harness: a runtime inside a workspace, or inside a
	// directory that has been one, is refused (bwrap.TrustedProgram).
	Workspace string
	Harness   harness.Config
}

// Enforcer is the oci substrate's side of admission: the facts of the
// host (the OCI runtime that runs a bundle here, proved by running one)
// and, for each capability, the fields of the bundle that enforce it. It
// implements [substrate.Enforcer].
type Enforcer struct {
	cfg EnforcerConfig

	mu    sync.Mutex
	facts *substrate.Facts
}

// NewEnforcer returns the enforcer.
func NewEnforcer(cfg EnforcerConfig) *Enforcer { return &Enforcer{cfg: cfg} }

// Name returns "oci".
func (e *Enforcer) Name() string { return Name }

// String describes the enforcer.
func (e *Enforcer) String() string { return "native tools in an OCI runtime's container (runc, crun)" }

// Facts finds the OCI runtime that runs a bundle here ([Detect]) and
// records its name, path and version. The result is kept for the life of
// the enforcer.
func (e *Enforcer) Facts(ctx context.Context) (substrate.Facts, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.facts != nil {
		return *e.facts, nil
	}
	f, err := substrate.HostFacts(Name)
	if err != nil {
		return f, err
	}
	h := e.cfg.Harness
	if h.IsZero() {
		h = harness.Default()
	}
	rt, err := Detect(ctx, os.Getenv("PATH"), e.cfg.Workspace, h)
	if err != nil {
		return f, err
	}
	f.Values = map[string]string{"oci.runtime": rt.Name, "oci.path": rt.Path, "oci.version": rt.Version, "limits": limits.Detect().String()}
	e.facts = &f
	return f, nil
}

func mech(name, detail string) substrate.Mechanism {
	return substrate.Mechanism{Substrate: Name, Name: name, Detail: detail}
}

// The mechanisms of a bundle, as a grant quotes them: each names the
// fields of config.json behind it ([Spec] writes them from the
// sandbox's bwrap options).
var (
	ReadOnlyRoot       = mech("ro-root", "root.path: an empty rootfs, readonly; mounts: / bind rbind,ro,rro (recursively read-only), /proc proc, /dev tmpfs and devpts; readonlyPaths /dev, /proc/sys, /proc/sysrq-trigger, /proc/irq, /proc/bus")
	TmpfsTmp           = "mounts: /tmp tmpfs size=%s; HOME a tmpfs of its own there, of the same size"
	HideHomes          = mech("hide-homes", "mounts: tmpfs size=1MiB on /home, /root and the caller's home; readonlyPaths each")
	HideServiceSockets = mech("hide-run", "mounts: tmpfs size=1MiB on /run and /var/run; readonlyPaths each")
	HideTrustedState   = mech("hide-trusted-state", "mounts: tmpfs size=1MiB on cordon's state and cache directories; readonlyPaths each")
	BindWorkspace      = mech("bind-workspace", "mounts: <ws> bind rbind,rw")
	ReadOnlyWorkspace  = mech("ro-workspace", "mounts: <ws> bind rbind,rro")
	HideWorkspace      = mech("hide-workspace", "mounts: <ws> tmpfs size=1MiB; readonlyPaths <ws>")
	ReadOnlyHarness    = mech("ro-harness", "mounts: <ws>/<harness> bind rbind,rro")
	PinParents         = mech("pin-parents", "mounts: <ws>/.git, <ws>/.git/objects, <ws>/.git/refs bind rbind,rw onto themselves")
	ReadOnlyWriteLater = mech("ro-write-later", "mounts: <ws>/<write-later path> bind rbind,rro, every path of the protected set (placeholders for the absent ones, as bwrap's)")
	ReadOnlyBinds      = mech("ro-binds", "mounts: <path> bind rbind,rro")
	Namespaces         = mech("namespaces", "linux.namespaces: mount, pid, ipc, uts, cgroup (and user where the runtime runs rootless, the caller its uid 0)")
	UnshareNet         = mech("unshare-net", "linux.namespaces: network (loopback only); mounts: tmpfs on /sys/class/net and each interface's /sys/devices/.../net, readonlyPaths each")
	NoCapabilities     = mech("no-capabilities", "process.capabilities: every set empty; process.noNewPrivileges: true")
	ClearEnv           = mech("clearenv", "process.env: PATH=<ws>/.local/bin:..., HOME, LANG, TERM and granted names only")
	SystemPath         = mech("system-path", "process.env: PATH of system directories only")
	DeleteContainer    = mech("delete-container", "`runtime delete --force` once the runtime has exited: every process of the container killed")
	PIDOne             = mech("pid-one", "the command is the container's PID 1 (no init beside it): the rest of its PID namespace dies with it")
)

// Seccomp is the filter of the bundle: linux.seccomp, the same refusals
// as bwrap's program in the runtime-spec's form ([seccomp.OCI]).
func Seccomp(p seccomp.Policy) substrate.Mechanism {
	return mech("seccomp", "linux.seccomp: "+p.String()+"; personality's query refused too; another ABI's call killed")
}

// Mechanisms lists what the bundle of the policy applies, in the order
// of its mount table.
func Mechanisms(p bwrap.Policy) []substrate.Mechanism {
	m := []substrate.Mechanism{Namespaces, NoCapabilities, PIDOne, DeleteContainer, ReadOnlyRoot,
		mech("tmpfs-tmp", fmt.Sprintf(TmpfsTmp, capabilities.FormatSize(p.TmpSize()))), HideHomes, HideServiceSockets, HideTrustedState}
	switch p.Access() {
	case bwrap.AccessNone:
		m = append(m, HideWorkspace)
	case bwrap.AccessRead:
		m = append(m, ReadOnlyWorkspace)
	case bwrap.AccessWrite:
		m = append(m, BindWorkspace, ReadOnlyHarness, PinParents, ReadOnlyWriteLater)
	}
	if len(p.ReadOnly()) > 0 {
		m = append(m, ReadOnlyBinds)
	}
	m = append(m, UnshareNet, ClearEnv, Seccomp(p.Seccomp()))
	return append(m, limitMechanisms(p.Limits())...)
}

// limitMechanisms names the plan's limits as the bundle states them.
func limitMechanisms(p limits.Plan) []substrate.Mechanism {
	var m []substrate.Mechanism
	switch p.Memory {
	case limits.Cgroup1:
		m = append(m, mech("memory", fmt.Sprintf("linux.resources.memory: limit=swap=%s, a cgroup the runtime makes: resident memory of the container; the kernel's OOM killer ends the tool at the limit", capabilities.FormatSize(p.Spec.Memory))))
	case limits.Rlimit:
		m = append(m, mech("memory", fmt.Sprintf("process.rlimits RLIMIT_AS=%s: address space of each process", capabilities.FormatSize(p.Spec.Memory))))
	}
	switch p.Pids {
	case limits.Cgroup1:
		m = append(m, mech("pids", fmt.Sprintf("linux.resources.pids: limit=%d, a cgroup the runtime makes; fork fails past it", p.Spec.Pids)))
	case limits.Rlimit:
		m = append(m, mech("pids", fmt.Sprintf("process.rlimits RLIMIT_NPROC=%d, counted in the container's user namespace (Linux 5.14): its tasks only", p.Spec.Pids)))
	}
	if p.CPU == limits.Rlimit {
		m = append(m, mech("cpu", fmt.Sprintf("process.rlimits RLIMIT_CPU=%ds (hard one more): processor time of each process", limits.CPUSeconds(p.Spec.CPU))))
	}
	return m
}

// Mechanisms returns how a native tool is held to c in a bundle, or why
// it cannot be.
func (e *Enforcer) Mechanisms(c capabilities.Capability, set capabilities.Set) ([]substrate.Mechanism, error) {
	return mechanismsOf(c, set)
}

func mechanismsOf(c capabilities.Capability, set capabilities.Set) ([]substrate.Mechanism, error) {
	refuse := func(reason string, instead ...string) error {
		return &substrate.UnenforceableError{Substrate: Name, Capability: c, Reason: reason, Instead: instead}
	}
	switch c.Kind() {
	case capabilities.KindFSRead:
		if set.Has(capabilities.WriteWorkspace()) {
			return []substrate.Mechanism{BindWorkspace, ReadOnlyHarness}, nil
		}
		return []substrate.Mechanism{ReadOnlyWorkspace}, nil
	case capabilities.KindFSWrite:
		return []substrate.Mechanism{BindWorkspace, ReadOnlyHarness, PinParents, ReadOnlyWriteLater}, nil
	case capabilities.KindNet:
		if c == capabilities.HostNet() {
			return nil, refuse("the seccomp filter of the open network allows a list of socket families, which the runtime-spec's seccomp form (refusals on top of a default that allows) cannot state exactly here",
				"net:none", "net:host on --substrate bwrap")
		}
		return []substrate.Mechanism{UnshareNet}, nil
	case capabilities.KindNetConnect:
		return nil, refuse("a bundle can only cut the network off (a network namespace of its own); it cannot filter connections by port or host name, and no filtering proxy runs here", "net:none")
	case capabilities.KindEnv:
		return []substrate.Mechanism{ClearEnv}, nil
	case capabilities.KindTime:
		return []substrate.Mechanism{mech("deadline", "deadline "+c.Arg()+", the runtime signalled TERM (it passes it on), grace, KILL"), DeleteContainer, PIDOne}, nil
	case capabilities.KindOutput:
		return []substrate.Mechanism{mech("bounded-output", "keep "+c.Arg()+" of stdout and of stderr, drain the rest")}, nil
	case capabilities.KindTmp:
		return []substrate.Mechanism{mech("tmpfs-tmp", fmt.Sprintf(TmpfsTmp, capabilities.FormatSize(c.Size()))), ReadOnlyRoot}, nil
	case capabilities.KindMemory, capabilities.KindPids, capabilities.KindCPU:
		plan, err := limits.Detect().Plan(limits.SpecOf(set))
		if err != nil {
			return nil, refuse(err.Error(), "no "+string(c.Kind())+": capability (the run then has the default limits only)")
		}
		var out []substrate.Mechanism
		for _, m := range limitMechanisms(plan) {
			if m.Name == string(c.Kind()) {
				out = append(out, m)
			}
		}
		if len(out) == 0 {
			return nil, refuse("the host can enforce this limit in no way here", "no "+string(c.Kind())+": capability")
		}
		return out, nil
	case capabilities.KindWasmImport:
		return nil, refuse("native tools do not import host functions; only wasm modules do", "no wasm.import: capability for a native tool")
	}
	return nil, refuse("unknown capability kind")
}
