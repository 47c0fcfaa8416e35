package bwrap

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/cordon-run/cordon/capabilities"
	"github.com/cordon-run/cordon/harness"
	"github.com/cordon-run/cordon/internal/limits"
	"github.com/cordon-run/cordon/internal/seccomp"
	"github.com/cordon-run/cordon/substrate"
	"github.com/cordon-run/cordon/substrate/egress"
)

// Access is what a sandboxed command may do to the workspace.
type Access int

const (
	// AccessNone hides the workspace behind an empty tmpfs.
	AccessNone Access = iota
	// AccessRead binds the workspace read-only.
	AccessRead
	// AccessWrite binds the workspace read-write: the one writable tree,
	// with harness state and the write-later paths read-only on top.
	AccessWrite
)

func (a Access) String() string {
	switch a {
	case AccessNone:
		return "none"
	case AccessRead:
		return "read"
	case AccessWrite:
		return "write"
	}
	return fmt.Sprintf("Access(%d)", int(a))
}

// Network is the network a sandboxed command sees.
type Network int

const (
	// NetNone gives the command a network namespace of its own with only a
	// loopback interface: nothing outside the sandbox is reachable, not
	// even the host's 127.0.0.1.
	NetNone Network = iota
	// NetHost keeps the host's network namespace: the network is open.
	NetHost
)

func (n Network) String() string {
	switch n {
	case NetNone:
		return "none"
	case NetHost:
		return "host"
	}
	return fmt.Sprintf("Network(%d)", int(n))
}

// ParseNetwork reads "none" or "host".
func ParseNetwork(s string) (Network, error) {
	switch s {
	case "none":
		return NetNone, nil
	case "host":
		return NetHost, nil
	}
	return 0, fmt.Errorf("unknown network %q: want none or host", s)
}

// Home is the HOME of a sandboxed command: an empty directory on the
// command's own /tmp.
const Home = "/tmp/home"

// DefaultTmpSize caps the sandbox's /tmp (which holds HOME) and, apart,
// its /dev/shm: a tool cannot fill the machine's memory through them.
const DefaultTmpSize = 512 << 20

// hiddenSize caps the tmpfs mounts that hide host directories; they are
// remounted read-only, so the cap only bounds what bubblewrap creates.
const hiddenSize = 1 << 20

// Policy describes one sandbox: the workspace and what the command may do
// to it, the network, the environment names it receives from the caller and
// extra read-only binds. Build one with [NewPolicy] and the With methods,
// which return modified copies; a Policy is checked when it is used.
type Policy struct {
	workspace  string
	access     Access
	network    Network
	harness    harness.Config
	env        []string
	readOnly   []string
	tmpSize    int64
	systemPath bool
	limits     limits.Plan
	// egress is the proxy's rules: the network stays none, and the only
	// way out is the egress proxy through the forwarder.
	egress []egress.Rule
}

// NewPolicy returns the policy of cordon's shell for the workspace, which
// must be an absolute, canonical path, under the harness configuration h:
// the workspace writable with harness state and the write-later paths
// read-only, no network, /tmp capped at [DefaultTmpSize], PATH led by
// <workspace>/.local/bin, and no environment beyond the allow-list.
func NewPolicy(workspace string, h harness.Config) Policy {
	return Policy{
		workspace: workspace,
		access:    AccessWrite,
		network:   NetNone,
		harness:   h,
		tmpSize:   DefaultTmpSize,
		limits:    defaultLimits(),
	}
}

// defaultLimits is the plan of a run that asks for no limit: the defaults
// of package limits (a process limit; memory on a cgroup).
func defaultLimits() limits.Plan {
	p, _ := limits.Detect().Plan(limits.Spec{}) // the defaults alone never fail
	return p
}

// WithLimits returns a copy of p whose run is held to the plan's limits
// (see package limits; [PolicyOf] makes the plan of a grant).
func (p Policy) WithLimits(l limits.Plan) Policy { p.limits = l; return p }

// Limits returns the plan of the run's limits.
func (p Policy) Limits() limits.Plan { return p.limits }

// toolAS is the address-space limit an egress run's forwarder sets on the
// tool in bwrap's place (0: none, or a cgroup's memory limit instead).
func (p Policy) toolAS() uint64 {
	if len(p.egress) == 0 || p.limits.Memory != limits.Rlimit || p.limits.Spec.Memory <= 0 {
		return 0
	}
	return uint64(p.limits.Spec.Memory)
}

// Seccomp returns the seccomp filter of the run: the network decides
// which sockets it may create.
func (p Policy) Seccomp() seccomp.Policy {
	if p.network == NetHost {
		return seccomp.Policy{Network: seccomp.NetHost}
	}
	if len(p.egress) > 0 {
		return seccomp.Policy{Network: seccomp.NetLoopback}
	}
	return seccomp.Policy{Network: seccomp.NetNone}
}

// WithAccess returns a copy of p with the workspace access a.
func (p Policy) WithAccess(a Access) Policy { p.access = a; return p }

// WithNetwork returns a copy of p with the network n.
func (p Policy) WithNetwork(n Network) Policy { p.network = n; return p }

// WithEnv returns a copy of p that also passes the caller's values of the
// variables names into the sandbox (a name the caller has not set is left
// out). Names that change how programs load or run are refused when the
// policy is used; see [CheckEnvName].
func (p Policy) WithEnv(names ...string) Policy {
	p.env = append(slices.Clone(p.env), names...)
	return p
}

// WithReadOnly returns a copy of p that also binds the absolute host paths
// read-only at the same place inside the sandbox, on top of every other
// mount: a tool's own files, for instance, even inside harness state or a
// hidden workspace.
func (p Policy) WithReadOnly(paths ...string) Policy {
	p.readOnly = append(slices.Clone(p.readOnly), paths...)
	return p
}

// WithTmpSize returns a copy of p whose /tmp (and, apart, /dev/shm) holds
// at most n bytes.
func (p Policy) WithTmpSize(n int64) Policy { p.tmpSize = n; return p }

// WithSystemPath returns a copy of p whose PATH holds system directories
// only, never <workspace>/.local/bin: an admitted tool runs no program
// that a command planted in the workspace.
func (p Policy) WithSystemPath(on bool) Policy { p.systemPath = on; return p }

// WithEgress returns a copy of p whose command reaches the network only
// through the egress proxy, under rules: its network namespace holds
// loopback alone, where the forwarder listens ([egress.Forwarder]), and
// the proxy variables point there. The caller runs the proxy
// ([Spec.Egress]).
func (p Policy) WithEgress(rules ...egress.Rule) Policy {
	p.egress = slices.Clone(rules)
	return p
}

// Egress returns the egress proxy's rules (none: no egress).
func (p Policy) Egress() []egress.Rule { return slices.Clone(p.egress) }

// Workspace returns the workspace path.
func (p Policy) Workspace() string { return p.workspace }

// Access returns the workspace access.
func (p Policy) Access() Access { return p.access }

// Network returns the network.
func (p Policy) Network() Network { return p.network }

// Env returns the granted environment names.
func (p Policy) Env() []string { return slices.Clone(p.env) }

// Harness returns the harness configuration.
func (p Policy) Harness() harness.Config { return p.harness }

// ReadOnly returns the extra read-only binds.
func (p Policy) ReadOnly() []string { return slices.Clone(p.readOnly) }

// TmpSize returns the cap of /tmp and of /dev/shm.
func (p Policy) TmpSize() int64 { return p.tmpSize }

// String describes the policy for messages and evidence, for example
// "bwrap: workspace /w (write; harness state .efferent, .foundry read-only,
// write-later paths read-only), network none, tmp 512MiB, env PATH HOME
// LANG TERM".
func (p Policy) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "bwrap: workspace %s (%s", p.workspace, p.access)
	if p.access == AccessWrite {
		fmt.Fprintf(&b, "; harness state %s read-only; write-later paths read-only", strings.Join(p.harness.State(), ", "))
	}
	fmt.Fprintf(&b, "), network %s, tmp %s, env %s", p.network, capabilities.FormatSize(p.tmpSize), strings.Join(append([]string{"PATH", "HOME", "LANG", "TERM"}, p.env...), " "))
	if p.systemPath {
		b.WriteString(", system PATH")
	}
	if len(p.egress) > 0 {
		var rs []string
		for _, r := range p.egress {
			rs = append(rs, r.String())
		}
		fmt.Fprintf(&b, ", egress to %s", strings.Join(rs, " "))
	}
	if len(p.readOnly) > 0 {
		fmt.Fprintf(&b, ", read-only binds %s", strings.Join(p.readOnly, " "))
	}
	return b.String()
}

// Mechanisms lists the named mechanisms the policy applies, in the order
// of the mount table.
func (p Policy) Mechanisms() []substrate.Mechanism {
	m := []substrate.Mechanism{UnshareUser, CapDrop, UnsharePID, UnshareIPC, NewSession, DieWithParent, NoInheritedFDs,
		ReadOnlyRoot, TmpfsTmp(p.tmpSize), ReadOnlyDev, EmptyHome, HideHomes, HideServiceSockets, HideTrustedState}
	switch p.access {
	case AccessNone:
		m = append(m, HideWorkspace)
	case AccessRead:
		m = append(m, ReadOnlyWorkspace)
	case AccessWrite:
		m = append(m, BindWorkspace, ReadOnlyHarness, PinParents, ReadOnlyWriteLater)
	}
	if len(p.readOnly) > 0 {
		m = append(m, ReadOnlyBinds)
	}
	if p.network == NetHost {
		m = append(m, ShareNet)
	} else {
		m = append(m, UnshareNet)
	}
	if len(p.egress) > 0 {
		m = append(m, EgressProxy(p.egress))
	}
	if p.systemPath {
		m = append(m, SystemPath)
	}
	m = append(m, ClearEnv, Seccomp(p.Seccomp()))
	return append(m, initBound(p.limits.Mechanisms(Name, sandboxProcesses), p.limits.Spec.Pids)...)
}

// initBound adds to an RLIMIT_NPROC process limit what [boundInit] does
// beside it: the sandbox's init gets the tool's bound, counted inside its
// user namespace alone.
func initBound(ms []substrate.Mechanism, pids int) []substrate.Mechanism {
	if !nprocPerNamespace() {
		return ms
	}
	for i, m := range ms {
		if m.Name == "pids" && strings.Contains(m.Detail, "RLIMIT_NPROC") {
			ms[i].Detail += fmt.Sprintf("; and RLIMIT_NPROC=%d on the sandbox's init, which the tool inherits: inside the user namespace bwrap makes, only the init and the tool's tasks count against it (the tool gets at most %d: the user's other tasks started meanwhile still count against bwrap's)", pids+1, pids)
		}
	}
	return ms
}

// Validate checks the policy without touching the file system.
func (p Policy) Validate() error {
	ws := p.workspace
	if !filepath.IsAbs(ws) || filepath.Clean(ws) != ws {
		return invalid("workspace %q is not an absolute, clean path", ws)
	}
	if len(p.egress) > 0 && p.network != NetNone {
		return invalid("egress through the proxy needs network none: the proxy is the only way out")
	}
	if ws == "/" || within("/tmp", ws) {
		return invalid("workspace %s contains /tmp, which the sandbox replaces with a fresh tmpfs", ws)
	}
	for _, sys := range []string{"/proc", "/dev", Home} {
		if within(ws, sys) || within(sys, ws) {
			return invalid("workspace %s overlaps %s, which the sandbox mounts itself", ws, sys)
		}
	}
	switch p.access {
	case AccessNone, AccessRead, AccessWrite:
	default:
		return invalid("unknown workspace access %d", int(p.access))
	}
	switch p.network {
	case NetNone, NetHost:
	default:
		return invalid("unknown network %d", int(p.network))
	}
	if err := p.harness.Validate(); err != nil {
		return err
	}
	if err := p.harness.CheckWorkspace(ws); err != nil {
		return err
	}
	if p.tmpSize <= 0 || p.tmpSize > capabilities.MaxSize {
		return invalid("tmp size %d is not between 1 byte and %s", p.tmpSize, capabilities.FormatSize(capabilities.MaxSize))
	}
	for _, name := range p.env {
		if err := CheckEnvName(name); err != nil {
			return err
		}
	}
	for _, r := range p.readOnly {
		if !filepath.IsAbs(r) || filepath.Clean(r) != r || r == "/" {
			return invalid("read-only bind %q is not an absolute, clean path below /", r)
		}
	}
	return nil
}

// within reports whether p is dir or inside it.
func within(p, dir string) bool {
	return p == dir || dir == "/" || strings.HasPrefix(p, dir+"/")
}

// CheckEnvName refuses names that may not be passed into a sandbox; see
// [substrate.CheckEnvName].
func CheckEnvName(name string) error { return substrate.CheckEnvName(name) }

func invalid(format string, args ...any) error {
	return &Error{Op: "configure", Err: ErrInvalidPolicy, detail: fmt.Sprintf(format, args...)}
}
