package bwrap

import (
	"github.com/cordon-run/cordon/capabilities"
	"github.com/cordon-run/cordon/internal/seccomp"
	"github.com/cordon-run/cordon/substrate"
	"github.com/cordon-run/cordon/substrate/egress"
	"strings"
)

func mech(name, detail string) substrate.Mechanism {
	return substrate.Mechanism{Substrate: "bwrap", Name: name, Detail: detail}
}

// The mechanisms a [Policy] applies, as a grant quotes them. Each names the
// bwrap flags behind it; [Policy.Mechanisms] lists those of one policy.
var (
	// ReadOnlyRoot: the host file system is visible and read-only.
	ReadOnlyRoot = mech("ro-root", "--ro-bind / / --dev /dev --proc /proc --ro-bind /proc/sys /proc/sys")
	// ReadOnlyDev: a fresh /dev of device nodes, read-only, with a capped
	// /dev/shm of its own.
	ReadOnlyDev = mech("ro-dev", "--dev /dev --perms 1777 --size <tmp> --tmpfs /dev/shm --remount-ro /dev")
	// EmptyHome: HOME is an empty directory on the fresh /tmp.
	EmptyHome = mech("tmpfs-home", "--dir "+Home+" (HOME="+Home+")")
	// HideHomes: the real home directories are replaced by empty tmpfs.
	HideHomes = mech("hide-homes", "--size 1MiB --tmpfs /home --tmpfs /root --tmpfs <caller's home>, each --remount-ro")
	// HideServiceSockets: host service sockets under /run are unreachable.
	HideServiceSockets = mech("hide-run", "--size 1MiB --tmpfs /run --tmpfs /var/run, each --remount-ro")
	// HideTrustedState: cordon's per-user key store and code cache are
	// empty and read-only inside, wherever they are.
	HideTrustedState = mech("hide-trusted-state", "--size 1MiB --tmpfs <state dir> --tmpfs <cache dir>, each --remount-ro")
	// SystemPath: PATH holds system directories only.
	SystemPath = mech("system-path", "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin (no workspace directory)")
	// BindWorkspace: the workspace is the one writable tree.
	BindWorkspace = mech("bind-workspace", "--bind <ws> <ws>")
	// ReadOnlyWorkspace: the workspace is visible read-only.
	ReadOnlyWorkspace = mech("ro-workspace", "--ro-bind <ws> <ws>")
	// HideWorkspace: the workspace is an empty tmpfs.
	HideWorkspace = mech("hide-workspace", "--size 1MiB --tmpfs <ws> --remount-ro <ws>")
	// ReadOnlyHarness: harness state is re-bound read-only on top of the
	// writable workspace, created first when absent.
	ReadOnlyHarness = mech("ro-harness", "--ro-bind <ws>/<harness> <ws>/<harness>")
	// PinParents: the git directory, its objects and refs, and the
	// directories on the way to a write-later path are bound onto
	// themselves, so they cannot be removed, renamed away or replaced.
	PinParents = mech("pin-parents", "--bind <ws>/.git <ws>/.git, --bind <ws>/.git/objects, --bind <ws>/.git/refs (same path)")
	// ReadOnlyWriteLater: the paths that run later outside the sandbox —
	// git's configuration, hooks, HEAD and what its configuration names,
	// editor and agent settings, shell start-up files — are read-only,
	// masked by a placeholder directory or file when absent.
	ReadOnlyWriteLater = mech("ro-write-later", "--ro-bind <ws>/<write-later path> (same path), every path of the protected set")
	// ReadOnlyBinds: extra host paths bound read-only on top of everything.
	ReadOnlyBinds = mech("ro-binds", "--ro-bind <path> <path>")
	// UnshareUser: a new user namespace in which no further user namespace
	// can be created.
	UnshareUser = mech("unshare-user", "--unshare-user --disable-userns")
	// CapDrop: the command holds no capability, not even as root.
	CapDrop = mech("cap-drop", "--cap-drop ALL")
	// UnsharePID: a private PID namespace; host processes are invisible and
	// every process of the sandbox dies with its init.
	UnsharePID = mech("unshare-pid", "--unshare-pid")
	// UnshareIPC: private IPC, UTS and cgroup namespaces.
	UnshareIPC = mech("unshare-ipc", "--unshare-ipc --unshare-uts --unshare-cgroup-try")
	// UnshareNet: a network namespace of its own, with only loopback,
	// and the host's interfaces hidden from /sys.
	UnshareNet = mech("unshare-net", "--unshare-net; --size 1MiB --tmpfs /sys/class/net and each interface's /sys/devices/.../net, each --remount-ro")
	// ShareNet: the host network namespace (the network is open).
	ShareNet = mech("share-net", "no --unshare-net: host network")
	// NewSession: a new session, with no controlling terminal to inject
	// input into.
	NewSession = mech("new-session", "--new-session")
	// DieWithParent: the sandbox is killed when bwrap dies (a backstop;
	// the PID namespace is the mechanism).
	DieWithParent = mech("die-with-parent", "--die-with-parent")
	// NoInheritedFDs: the command gets its standard streams and no other
	// descriptor of the caller's.
	NoInheritedFDs = mech("no-inherited-fds", "every descriptor above 2 close-on-exec before bwrap starts")
	// ClearEnv: the environment is exactly the allow-list.
	ClearEnv = mech("clearenv", "environment: PATH=<ws>/.local/bin:..., HOME, LANG, TERM and granted names only")
)

// Seccomp is the seccomp filter bwrap installs before it starts the
// command (--seccomp FD): side doors the mount table does not shut
// (io_uring, bpf, ptrace, keyrings, terminal injection, sockets of other
// families) fail with EPERM.
func Seccomp(p seccomp.Policy) substrate.Mechanism {
	return mech("seccomp", "--seccomp <fd>: "+p.String())
}

// TmpfsTmp is the fresh /tmp of every call, capped at size bytes.
func TmpfsTmp(size int64) substrate.Mechanism {
	return mech("tmpfs-tmp", "--size "+capabilities.FormatSize(size)+" --tmpfs /tmp")
}

// EgressProxy is the way out of a sandbox of network none that may reach
// named hosts: cordon's egress proxy, on the host side.
func EgressProxy(rules []egress.Rule) substrate.Mechanism {
	var rs []string
	for _, r := range rules {
		rs = append(rs, r.String())
	}
	return mech("egress-proxy", "the network namespace holds loopback alone, where a forwarder (cordon's own binary, bound read-only) listens on "+egress.ListenAddr+
		" and hands each connection over an inherited socket to cordon's egress proxy on the host, which allows "+strings.Join(rs, ", ")+
		" only: names checked and resolved by the proxy (internal addresses, numeric hosts, userinfo, IDN refused), the checked address dialled, every decision logged; HTTP_PROXY, HTTPS_PROXY, ALL_PROXY point at the forwarder")
}
