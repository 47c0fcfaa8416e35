// Package oci renders a native sandbox as an OCI runtime bundle: the
// config.json of the runtime-spec, which runc, crun and the engines that
// scale out (containerd, CRI-O, Kubernetes, with gVisor or Kata) run.
//
// The policy is the bwrap substrate's, not a second one written again:
// [Spec] takes a prepared [bwrap.Sandbox] — its protected set found, its
// placeholders made, its environment cleared to the allow-list — and
// states its mount table, namespaces and process in runtime-spec terms,
// option by option. An option it cannot state is an error: nothing of a
// sandbox is dropped on the way.
//
// What maps one to one: every bind (--bind, rw; --ro-bind, recursively
// read-only: "rro"), every tmpfs with its size and mode, /proc, the
// namespaces, the working directory, the environment, no capability,
// no_new_privs and the seccomp filter ([seccomp.OCI]: the same refusals,
// but for personality's query, refused too, and other ABIs, killed). What does not: bwrap's /dev is a tmpfs of device nodes,
// here the runtime's /dev (a tmpfs and its default nodes, /dev/pts);
// --remount-ro is readonlyPaths, applied after every mount as bwrap does
// it last; a directory bwrap makes in its tmpfs (HOME in /tmp) is a
// tmpfs of its own with /tmp's cap; bwrap's user namespace, made as root
// too, is made here only where the runtime runs rootless, and there the
// caller is the namespace's uid 0, as a rootless runtime needs it (bwrap
// keeps the caller's uid); everywhere the command is uid 0 without a
// capability.
//
// # Limitations
//
// The limits are the plan's as bwrap's run applies them: the cgroups
// become linux.resources (made by the runtime), the rlimits
// process.rlimits; RLIMIT_NPROC is the tool's count alone, the command
// being the container's first process. The filter of net:host has no
// OCI form here, so neither has its sandbox; a call the runtime's
// libseccomp cannot name stays allowed ([seccomp.OCI]). The probes of
// package probes prove them in containers of the runtime (oci/*). A
// bundle's sources
// are workspace paths, resolved when the engine runs it ([WriteBundle]).
package oci

import (
	"fmt"
	"os"
	"slices"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/cordon-run/cordon/internal/limits"
	"github.com/cordon-run/cordon/internal/seccomp"
	"github.com/cordon-run/cordon/substrate/bwrap"
)

// Name is the substrate's name.
const Name = "oci"

// Version is the runtime-spec version a bundle declares: the oldest
// whose fields it uses (rro among them, 1.1.0), not the Go types' own
// (1.3.0), which runtimes of before it refuse outright — crun 1.8:
// "unknown version specified".
const Version = "1.1.0"

// Options are what the runtime that runs the bundle needs to know.
type Options struct {
	// Rootless: the runtime runs as an unprivileged user, uid and gid,
	// and the bundle maps them into a user namespace of its own.
	Rootless bool
	UID, GID int
	// Hostname is the container's (its own UTS namespace); "cordon" if
	// empty.
	Hostname string
}

// DefaultOptions are the options of a runtime run by this process.
func DefaultOptions() Options {
	uid, gid := os.Geteuid(), os.Getegid()
	return Options{Rootless: uid != 0, UID: uid, GID: gid}
}

// Spec returns the runtime-spec configuration of argv run in the
// sandbox sb. The bundle's root is an empty directory, "rootfs", under
// the host's / bound read-only.
func Spec(sb *bwrap.Sandbox, argv []string, o Options) (*specs.Spec, error) {
	if len(argv) == 0 || argv[0] == "" {
		return nil, fmt.Errorf("oci: no command to run")
	}
	if o.Hostname == "" {
		o.Hostname = "cordon"
	}
	s := &specs.Spec{
		Version:  Version,
		Root:     &specs.Root{Path: "rootfs", Readonly: true},
		Hostname: o.Hostname,
		Process: &specs.Process{
			Args:            slices.Clone(argv),
			Env:             sb.Env(),
			NoNewPrivileges: true,
			Capabilities: &specs.LinuxCapabilities{
				Bounding: []string{}, Effective: []string{}, Inheritable: []string{}, Permitted: []string{}, Ambient: []string{},
			},
		},
		Linux: &specs.Linux{},
	}
	if err := render(s, sb.Options(), o); err != nil {
		return nil, err
	}
	limitsOf(s, sb.Policy().Limits())
	filter, err := seccomp.OCI(sb.Policy().Seccomp())
	if err != nil {
		return nil, fmt.Errorf("oci: cannot state the sandbox's seccomp filter: %w", err)
	}
	s.Linux.Seccomp = filter
	if s.Process.Cwd == "" {
		return nil, fmt.Errorf("oci: the sandbox names no working directory (--chdir)")
	}
	return s, nil
}

// render states bwrap's options in s: the namespaces, the mounts in
// bwrap's order, the working directory.
func render(s *specs.Spec, args []string, o Options) error {
	ns := []specs.LinuxNamespace{{Type: specs.MountNamespace}}
	var size, perms string // pending --size and --perms, for the next --tmpfs
	value := func(i int, n int) ([]string, error) {
		if i+n >= len(args) {
			return nil, fmt.Errorf("oci: %s wants %d value(s)", args[i], n)
		}
		return args[i+1 : i+1+n], nil
	}
	tmpSize := ""
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch a {
		case "--unshare-user":
			if o.Rootless {
				ns = append(ns, specs.LinuxNamespace{Type: specs.UserNamespace})
				// The caller is the namespace's root, as a rootless runtime
				// needs it; without a capability, as everywhere here.
				s.Linux.UIDMappings = []specs.LinuxIDMapping{{ContainerID: 0, HostID: uint32(o.UID), Size: 1}}
				s.Linux.GIDMappings = []specs.LinuxIDMapping{{ContainerID: 0, HostID: uint32(o.GID), Size: 1}}
			}
		case "--unshare-ipc":
			ns = append(ns, specs.LinuxNamespace{Type: specs.IPCNamespace})
		case "--unshare-pid":
			ns = append(ns, specs.LinuxNamespace{Type: specs.PIDNamespace})
		case "--unshare-uts":
			ns = append(ns, specs.LinuxNamespace{Type: specs.UTSNamespace})
		case "--unshare-cgroup-try":
			ns = append(ns, specs.LinuxNamespace{Type: specs.CgroupNamespace})
		case "--unshare-net":
			ns = append(ns, specs.LinuxNamespace{Type: specs.NetworkNamespace})
		case "--disable-userns", "--die-with-parent", "--new-session":
			// No further user namespace: the seccomp filter's (clone and
			// unshare with CLONE_NEWUSER refused). The runtime's init
			// makes the command a session of its own, and dies with the
			// container's PID namespace.
		case "--cap-drop":
			v, err := value(i, 1)
			if err != nil {
				return err
			}
			if v[0] != "ALL" {
				return fmt.Errorf("oci: cannot state --cap-drop %s", v[0])
			}
			i++
		case "--size":
			v, err := value(i, 1)
			if err != nil {
				return err
			}
			size, i = v[0], i+1
		case "--perms":
			v, err := value(i, 1)
			if err != nil {
				return err
			}
			perms, i = v[0], i+1
		case "--tmpfs":
			v, err := value(i, 1)
			if err != nil {
				return err
			}
			opts := []string{"nosuid", "nodev"}
			if size != "" {
				opts = append(opts, "size="+size)
			}
			if perms != "" {
				opts = append(opts, "mode="+perms)
			} else {
				opts = append(opts, "mode=755")
			}
			if v[0] == "/tmp" {
				tmpSize = size
			}
			s.Mounts = append(s.Mounts, specs.Mount{Destination: v[0], Type: "tmpfs", Source: "tmpfs", Options: opts})
			size, perms, i = "", "", i+1
		case "--bind", "--ro-bind":
			v, err := value(i, 2)
			if err != nil {
				return err
			}
			if within(v[1], "/proc") {
				// The runtime mounts nothing into /proc; a read-only bind
				// of a path onto itself there is a read-only path.
				if a != "--ro-bind" || v[0] != v[1] {
					return fmt.Errorf("oci: cannot state %s %s %s inside /proc", a, v[0], v[1])
				}
				s.Linux.ReadonlyPaths = append(s.Linux.ReadonlyPaths, v[1])
				i += 2
				continue
			}
			opts := []string{"rbind", "rw"}
			if a == "--ro-bind" {
				// rro for every mount below (runc 1.1, crun 1.4); ro too,
				// for the top one where a runtime passes an option it does
				// not know to the mount as data, which a bind ignores.
				opts = []string{"rbind", "ro", "rro"}
			}
			s.Mounts = append(s.Mounts, specs.Mount{Destination: v[1], Type: "bind", Source: v[0], Options: opts})
			i += 2
		case "--proc":
			v, err := value(i, 1)
			if err != nil {
				return err
			}
			s.Mounts = append(s.Mounts, specs.Mount{Destination: v[0], Type: "proc", Source: "proc", Options: []string{"nosuid", "nodev", "noexec"}})
			// What bwrap covers read-only in every /proc it mounts.
			for _, p := range []string{"sysrq-trigger", "irq", "bus"} {
				s.Linux.ReadonlyPaths = append(s.Linux.ReadonlyPaths, v[0]+"/"+p)
			}
			i++
		case "--dev":
			v, err := value(i, 1)
			if err != nil {
				return err
			}
			if v[0] != "/dev" {
				return fmt.Errorf("oci: cannot state --dev %s", v[0])
			}
			s.Mounts = append(s.Mounts,
				specs.Mount{Destination: "/dev", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "strictatime", "mode=755", "size=65536k"}},
				specs.Mount{Destination: "/dev/pts", Type: "devpts", Source: "devpts", Options: []string{"nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620"}})
			i++
		case "--dir":
			v, err := value(i, 1)
			if err != nil {
				return err
			}
			// A directory bwrap makes in the fresh /tmp: a tmpfs of its
			// own, as large as /tmp may be.
			if !within(v[0], "/tmp") || tmpSize == "" {
				return fmt.Errorf("oci: cannot state --dir %s outside the sandbox's /tmp", v[0])
			}
			s.Mounts = append(s.Mounts, specs.Mount{Destination: v[0], Type: "tmpfs", Source: "tmpfs",
				Options: []string{"nosuid", "nodev", "size=" + tmpSize, "mode=755"}})
			i++
		case "--remount-ro":
			v, err := value(i, 1)
			if err != nil {
				return err
			}
			s.Linux.ReadonlyPaths = append(s.Linux.ReadonlyPaths, v[0])
			i++
		case "--chdir":
			v, err := value(i, 1)
			if err != nil {
				return err
			}
			s.Process.Cwd, i = v[0], i+1
		default:
			return fmt.Errorf("oci: cannot state bwrap's option %s", a)
		}
	}
	s.Linux.Namespaces = ns
	if len(s.Mounts) == 0 || s.Mounts[0].Destination != "/" || s.Mounts[0].Source != "/" || !slices.Contains(s.Mounts[0].Options, "ro") {
		return fmt.Errorf("oci: the sandbox does not start from the host's / read-only")
	}
	return nil
}

// limitsOf states the plan's limits as the runtime applies them: a
// cgroup's as linux.resources (the runtime makes the container's
// cgroups; its command is the container's first process, with no init
// beside it), an rlimit's as process.rlimits.
func limitsOf(s *specs.Spec, p limits.Plan) {
	rlimit := func(typ string, soft, hard uint64) {
		s.Process.Rlimits = append(s.Process.Rlimits, specs.POSIXRlimit{Type: typ, Soft: soft, Hard: hard})
	}
	res := &specs.LinuxResources{}
	switch p.Memory {
	case limits.Cgroup1:
		m := p.Spec.Memory
		res.Memory = &specs.LinuxMemory{Limit: &m, Swap: &m} // swap counts too, as memsw
	case limits.Rlimit:
		rlimit("RLIMIT_AS", uint64(p.Spec.Memory), uint64(p.Spec.Memory))
	}
	switch p.Pids {
	case limits.Cgroup1:
		n := int64(p.Spec.Pids)
		res.Pids = &specs.LinuxPids{Limit: &n}
	case limits.Rlimit:
		n := uint64(p.Spec.Pids)
		rlimit("RLIMIT_NPROC", n, n)
	}
	if p.CPU == limits.Rlimit {
		secs := limits.CPUSeconds(p.Spec.CPU)
		rlimit("RLIMIT_CPU", secs, secs+1)
	}
	if res.Memory != nil || res.Pids != nil {
		s.Linux.Resources = res
	}
}

// within reports whether p is dir or below it.
func within(p, dir string) bool {
	return p == dir || len(p) > len(dir) && p[:len(dir)] == dir && p[len(dir)] == '/'
}
