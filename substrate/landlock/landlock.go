// Package landlock is the native substrate for hosts where bubblewrap
// cannot create a sandbox (user namespaces off, as in many containers and
// on hardened distributions): a native command runs under Landlock, a
// seccomp filter, no_new_privs, no capabilities and resource limits, which
// need neither user namespaces nor root.
//
// Landlock restricts the process that asks and cannot be lifted, so cordon
// never applies it to itself: it re-executes its own binary twice. The
// first helper, the supervisor, is the child subreaper of the run: every
// orphan of the tool becomes its child, and what is left when the tool
// ends (or at the deadline) is killed. The second, the confiner, applies
// the restrictions to itself and executes the tool. The supervisor stays
// outside the tool's Landlock domain, whose signals are scoped: the tool
// cannot kill it to orphan its processes. A program that embeds the
// substrate gets the helpers by importing this package (its init
// recognises them); [Run] re-executes /proc/self/exe.
//
// # What the tool sees
//
//   - The host's system directories (/usr, /bin, /sbin, /lib*, /etc,
//     /opt) readable and executable, /proc readable, the null, zero,
//     full, random and urandom devices; nothing else of the host — the
//     home directories, /run, /tmp, /var, /sys, /mnt and cordon's own
//     state and cache directories fail with EACCES.
//   - The workspace hidden, read-only, or writable as its grant says.
//     Landlock rules only add access, so a read-only path cannot be carved
//     out of a writable tree: with fs.write, the workspace root and every
//     directory on the way to a protected path (harness state, the
//     write-later set, git's paths) get no write access of their own —
//     nothing can be created, removed or renamed in them — while every
//     other entry in them is writable, a directory with all below it. A
//     tool cannot create a new top-level entry, or replace a top-level
//     file by renaming another onto it.
//   - HOME and TMPDIR in a fresh directory of its own, removed after the
//     run; /tmp itself is the host's, read-only.
//   - TCP through Landlock's network rules (none, or connect to granted
//     ports), every other socket family through the seccomp filter.
package landlock

import (
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/cordon-run/cordon/capabilities"
	"github.com/cordon-run/cordon/harness"
	"github.com/cordon-run/cordon/internal/limits"
	"github.com/cordon-run/cordon/internal/seccomp"
	"github.com/cordon-run/cordon/substrate"
)

// Name is the substrate's name in grants and facts.
const Name = "landlock"

// RequiredABI is the Landlock ABI the substrate needs: file system rights
// with truncation and device ioctls (ABI 5), TCP rules (ABI 4), scoped
// signals and abstract unix sockets (ABI 6). Strict: on an older kernel
// the substrate is unavailable, never applied in part.
const RequiredABI = 6

// SystemDirs are the host directories a tool may read and execute.
var SystemDirs = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt"}

// Devices are the device files a tool may read and write.
var Devices = []string{"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom"}

// Access is what a tool may do to the workspace.
type Access string

const (
	AccessNone  Access = "none"
	AccessRead  Access = "read"
	AccessWrite Access = "write"
)

// Network is what network a tool reaches.
type Network string

const (
	NetNone Network = "none" // no TCP, no socket of another family
	NetTCP  Network = "tcp"  // TCP connections to the granted ports only
	NetHost Network = "host" // the host's network, unfiltered
)

func mech(name, detail string) substrate.Mechanism {
	return substrate.Mechanism{Substrate: Name, Name: name, Detail: detail}
}

// The mechanisms of a Landlock run, as grants quote them.
var (
	MechSystem         = mech("ro-system", "read and execute "+strings.Join(SystemDirs, " ")+", read /proc (the host's processes are listed, their command lines readable; their environment, memory and descriptors are not), read and write "+strings.Join(Devices, " ")+"; nothing else of the host (EACCES)")
	MechHideWorkspace  = mech("hide-workspace", "no rule for the workspace (EACCES)")
	MechReadWorkspace  = mech("ro-workspace", "read and execute <ws>")
	MechWriteWorkspace = mech("write-workspace", "read and execute <ws>; every directory on the way to a protected path (harness state, write-later paths, git's) gets no write access, every other entry of them all access: nothing can be created, removed or renamed at the top level")
	MechScratch        = mech("scratch", "HOME and TMPDIR in a fresh directory of the run's own, removed after it (the host's /tmp read-only)")
	MechNetNone        = mech("net-none", "TCP bind and connect with no rule (every TCP socket refused)")
	MechNetHost        = mech("net-host", "no network rule: the host's network is open")
	MechScope          = mech("scope", "signals and abstract unix sockets scoped to the run's domain")
	MechNoNewPrivs     = mech("no-new-privs", "PR_SET_NO_NEW_PRIVS: setuid programs and file capabilities grant nothing")
	MechNoCaps         = mech("no-capabilities", "ambient, inheritable, permitted and effective sets emptied and checked, whoever the caller is; as root also the bounding set, SECBIT_NOROOT locked: not even root holds a capability")
	MechSubreaper      = mech("subreaper", "a supervisor outside the tool's domain is the child subreaper of its tree: what is left when the tool ends, or at the deadline, is killed")
	MechClearEnv       = mech("clearenv", "environment: PATH, HOME, TMPDIR, LANG, TERM and granted names only")
)

// MechConnectTCP is a Landlock rule allowing TCP connections to port.
func MechConnectTCP(port int) substrate.Mechanism {
	return mech("net-connect-tcp", fmt.Sprintf("TCP connect to port %d only, no bind; other sockets refused by seccomp", port))
}

// MechSeccomp is the seccomp filter of a run.
func MechSeccomp(p seccomp.Policy) substrate.Mechanism { return mech("seccomp", p.String()) }

// MechLandlock names the ABI in use.
func MechLandlock(abi int) substrate.Mechanism {
	return mech("abi", fmt.Sprintf("Landlock ABI %d (at least %d required, strict: nothing applied in part)", abi, RequiredABI))
}

// Policy is one Landlock run's confinement, made from a grant with
// [PolicyOf].
type Policy struct {
	Workspace string
	Access    Access
	Network   Network
	Ports     []int
	Env       []string // granted environment names
	ReadOnly  []string // extra host paths readable and executable (a tool's own files)
	// SystemPath: PATH holds system directories only (admitted tools).
	SystemPath bool
	Limits     limits.Plan
}

// Seccomp returns the policy's seccomp filter. It refuses every change of
// a file's mode, owner and extended attributes, by path and by descriptor
// (Landlock governs none of them, and a tool may open protected files of
// the workspace, and system files, read-only): on Landlock a tool cannot
// chmod at all; futimens stays.
func (p Policy) Seccomp() seccomp.Policy {
	sp := seccomp.Policy{Network: seccomp.NetNone, Metadata: seccomp.MetadataNone}
	switch p.Network {
	case NetHost:
		sp.Network = seccomp.NetHost
	case NetTCP:
		sp.Network = seccomp.NetTCP
	}
	return sp
}

// Mechanisms lists what the policy applies, with the ABI in use.
func (p Policy) Mechanisms(abi int) []substrate.Mechanism {
	m := []substrate.Mechanism{MechLandlock(abi), MechSystem}
	switch p.Access {
	case AccessRead:
		m = append(m, MechReadWorkspace)
	case AccessWrite:
		m = append(m, MechWriteWorkspace)
	default:
		m = append(m, MechHideWorkspace)
	}
	m = append(m, MechScratch)
	switch p.Network {
	case NetHost:
		m = append(m, MechNetHost)
	case NetTCP:
		for _, port := range p.Ports {
			m = append(m, MechConnectTCP(port))
		}
	default:
		m = append(m, MechNetNone)
	}
	m = append(m, MechScope, MechNoNewPrivs, MechNoCaps, MechSubreaper, MechClearEnv, MechSeccomp(p.Seccomp()))
	return append(m, p.Limits.Mechanisms(Name, helperProcesses)...)
}

// helperProcesses counts the helpers' processes in the run's limits: none
// (the confiner joins the cgroups and sets the rlimits on itself just
// before it executes the tool; the supervisor stays out of them).
const helperProcesses = 0

// PolicyOf returns the policy that holds a native command to the
// capabilities set on the workspace (absolute, canonical). It fails for a
// capability the substrate cannot enforce, as [Enforcer.Mechanisms] does.
func PolicyOf(set capabilities.Set, workspace string) (Policy, error) {
	p := Policy{Workspace: workspace, Access: AccessNone, Network: NetNone}
	for _, c := range set.All() {
		if _, err := mechanismsOf(c, set); err != nil {
			return Policy{}, err
		}
		switch c.Kind() {
		case capabilities.KindFSRead:
			if p.Access == AccessNone {
				p.Access = AccessRead
			}
		case capabilities.KindFSWrite:
			p.Access = AccessWrite
		case capabilities.KindNet:
			if c == capabilities.HostNet() {
				p.Network = NetHost
			}
		case capabilities.KindNetConnect:
			p.Network = NetTCP
			p.Ports = append(p.Ports, c.Port())
		case capabilities.KindEnv:
			p.Env = append(p.Env, c.Name())
		}
	}
	plan, err := limits.Detect().Plan(limits.SpecOf(set))
	if err != nil {
		return Policy{}, err
	}
	p.Limits = plan
	return p, nil
}

func mechanismsOf(c capabilities.Capability, set capabilities.Set) ([]substrate.Mechanism, error) {
	refuse := func(reason string, instead ...string) error {
		return &substrate.UnenforceableError{Substrate: Name, Capability: c, Reason: reason, Instead: instead}
	}
	switch c.Kind() {
	case capabilities.KindFSRead:
		if set.Has(capabilities.WriteWorkspace()) {
			return []substrate.Mechanism{MechWriteWorkspace}, nil
		}
		return []substrate.Mechanism{MechReadWorkspace}, nil
	case capabilities.KindFSWrite:
		return []substrate.Mechanism{MechWriteWorkspace}, nil
	case capabilities.KindNet:
		if c == capabilities.HostNet() {
			return []substrate.Mechanism{MechNetHost}, nil
		}
		return []substrate.Mechanism{MechNetNone, MechSeccomp(seccomp.Policy{Network: seccomp.NetNone, Metadata: seccomp.MetadataNone})}, nil
	case capabilities.KindNetConnect:
		if c.Port() == 0 {
			return nil, refuse("Landlock filters TCP by port, not by host name, and no filtering proxy runs here", "net.connect:tcp:PORT", "net:host")
		}
		return []substrate.Mechanism{MechConnectTCP(c.Port()), MechSeccomp(seccomp.Policy{Network: seccomp.NetTCP, Metadata: seccomp.MetadataNone})}, nil
	case capabilities.KindEnv:
		return []substrate.Mechanism{MechClearEnv}, nil
	case capabilities.KindTime:
		return []substrate.Mechanism{{Substrate: "proc", Name: "deadline", Detail: "deadline " + c.Arg() + ", then TERM, grace, KILL"}, MechSubreaper}, nil
	case capabilities.KindOutput:
		return []substrate.Mechanism{{Substrate: "proc", Name: "bounded-output", Detail: "keep " + c.Arg() + " of stdout and of stderr, drain the rest"}}, nil
	case capabilities.KindTmp:
		return nil, refuse("the run's TMPDIR is a directory on the host's file system, which Landlock cannot cap (only bubblewrap mounts a tmpfs of a given size)", "no tmp: capability", "the bwrap substrate")
	case capabilities.KindMemory, capabilities.KindPids, capabilities.KindCPU:
		m, err := limits.Detect().MechanismsOf(c, set, Name, helperProcesses)
		if err != nil {
			return nil, refuse(err.Error(), "no "+string(c.Kind())+": capability (the run then has the default limits only)")
		}
		return m, nil
	case capabilities.KindWasmImport:
		return nil, refuse("native tools do not import host functions; only wasm modules do", "no wasm.import: capability for a native tool")
	}
	return nil, refuse("unknown capability kind")
}

// Spec is one command to run under Landlock.
type Spec struct {
	// Policy is the confinement ([PolicyOf]); the workspace is also the
	// working directory.
	Policy  Policy
	Harness harness.Config
	// Command is the program and its arguments, looked up in the PATH of
	// the command's environment, under the restrictions.
	Command []string
	Stdin   io.Reader
	// Environ is the caller's environment (os.Environ() if nil).
	Environ []string
	// Timeout, Grace and MaxOutput bound the run (package proc's defaults
	// if zero).
	Timeout, Grace time.Duration
	MaxOutput      int64
	Logger         *slog.Logger
}
