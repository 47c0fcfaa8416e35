// Package seccomp builds the seccomp-BPF filter every sandboxed native
// tool runs under. Bubblewrap reads it from its --seccomp descriptor (the
// bytes of [Marshal]); the landlock helper installs it on itself with
// [Apply] just before it executes the tool. It closes the kernel
// interfaces a tool has no business with and that neither namespaces nor
// Landlock confine — io_uring, bpf, perf events, keyrings, ptrace, module
// and kexec loading, mounts and new namespaces, the clock — narrows
// socket(2) to what the run's [Network] allows and socketpair(2) to unix
// stream and seqpacket pairs, keeps a [NetTCP] tool a client, and refuses
// the changes to a file's mode, owner, times and extended attributes that
// the run's [Metadata] does not allow.
//
// # Denials are errors, not kills
//
// Every refused call returns an errno, so a tool fails with a message it
// can report: EPERM, or ENOSYS for clone3. clone3 passes its flags in
// memory, where seccomp cannot read them; ENOSYS makes the C library fall
// back to clone(2), whose flags are a register the filter checks.
//
// # What the filter checks
//
// For the architecture the package was built for (the ABI first, then a
// binary search on the call's number; see [Program]):
//
//   - a call on another ABI (i386 through int 0x80 on amd64, x32, 32-bit
//     ARM on arm64) is refused;
//   - clone3 returns ENOSYS;
//   - the calls [Denied] lists are refused whatever their arguments, and
//     so are the ones [DeniedMetadata] lists for the run's [Metadata];
//   - utimensat(2) is refused when its path is not NULL, unless
//     [Metadata] is [MetadataAll]: with a NULL path it is futimens(3),
//     which changes the times of the descriptor's own file;
//   - clone(2) is refused when its flags ask for a new namespace
//     (CLONE_NEWNS, CLONE_NEWCGROUP, CLONE_NEWUTS, CLONE_NEWIPC,
//     CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET);
//   - ioctl(2) is refused for TIOCSTI and TIOCLINUX (pushing input into a
//     terminal the tool shares with the person);
//   - personality(2) may only query or set PER_LINUX: the other personas
//     (ADDR_NO_RANDOMIZE, READ_IMPLIES_EXEC, ...) weaken the tool's own
//     exploit mitigations;
//   - socket(2) creates only what [Network] allows, and never anything
//     outside AF_INET and AF_INET6: an allow-list of families;
//   - socketpair(2) creates only AF_UNIX pairs of type SOCK_STREAM or
//     SOCK_SEQPACKET, with SOCK_NONBLOCK and SOCK_CLOEXEC or without,
//     under every [Network]. A unix SOCK_DGRAM socket, connected or not,
//     sends to whatever path a send names — any datagram socket of the
//     host (/dev/log, journald's, an agent's), and Landlock does not
//     check unix socket paths. AF_TIPC makes pairs too, and creating a
//     socket of any family loads the family's module, whatever the call
//     does next;
//   - under [NetTCP], listen(2) is refused: on a socket not yet bound it
//     binds an ephemeral port on the wildcard address, which the host
//     can reach, without Landlock's bind check. So are sendto(2),
//     sendmsg(2) and sendmmsg(2) when their flags have MSG_FASTOPEN,
//     which connects (TCP Fast Open) without Landlock's connect check.
//     TCP_FASTOPEN_CONNECT then connect(2) goes through that check, and
//     is allowed.
//
// Everything else is allowed. Arguments are compared on their low 32 bits,
// which is what the kernel reads for each of them (an int or unsigned int,
// or clone's flags, which it truncates), so setting the high bits of a
// register gets past nothing. utimensat's path is the exception: it is a
// pointer, the kernel reads all 64 bits, and so does the filter.
//
// # Limitations
//
//   - Only Linux on amd64 and arm64 has a system call table here;
//     [Program], [Marshal] and [Apply] return an error wrapping
//     [errors.ErrUnsupported] elsewhere.
//   - The filter sees registers only: whatever a call reads from memory
//     (clone3's arguments, a sockaddr, setsockopt values) is beyond it.
//   - ioctl is filtered for two requests; every other one is allowed.
//   - A socketpair(2) pair is connected to itself and reaches nothing
//     outside: a send that names an address fails on a SOCK_STREAM
//     socket (EISCONN), the address is dropped on a SOCK_SEQPACKET one,
//     and neither can be connected again. A unix socket the tool
//     inherits is another matter: the filter sees calls, not what their
//     descriptor is.
//   - Under [NetTCP], listen and the send flags are checked whatever the
//     socket: a unix pair's MSG_FASTOPEN, which the kernel ignores, is
//     refused too, and so is listen on an inherited unix socket.
//   - [NetTCP] narrows protocols, not addresses or ports: those are
//     Landlock's TCP rules (the landlock helper) or the network namespace
//     (bubblewrap).
//   - [MetadataByFD] leaves a tool fchmod, fchown, fsetxattr, fremovexattr
//     and futimens on every file it can open, read-only included: the
//     kernel does not ask for a writable descriptor, so Landlock's read
//     rules decide those files too. futimens stays allowed under
//     [MetadataNone].
//   - The *at calls (fchmodat, fchmodat2, fchownat, setxattrat,
//     removexattrat, file_setattr) are refused whole, AT_EMPTY_PATH on a
//     descriptor included: an O_PATH descriptor, which Landlock lets a tool
//     open on any file, would serve. So is a library's change through
//     /proc/self/fd/N (x/sys's unix.Futimes): it is a path.
//   - The inode flags that ioctl sets (FS_IOC_SETFLAGS, FS_IOC_FSSETXATTR:
//     chattr) are allowed under every [Metadata].
package seccomp

import (
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"slices"
)

// Network is what the filter lets socket() create for the inet families,
// and what it lets a TCP socket do.
type Network int

const (
	// NetNone allows no AF_INET or AF_INET6 socket at all.
	NetNone Network = iota
	// NetTCP allows AF_INET and AF_INET6 only as SOCK_STREAM with
	// protocol 0 or IPPROTO_TCP: Landlock's TCP rules then filter the
	// ports. UDP, raw sockets, SCTP and MPTCP are refused, because Landlock
	// does not cover them; so are listen(2) and sends with MSG_FASTOPEN,
	// which bind and connect past Landlock's checks.
	NetTCP
	// NetHost allows any AF_INET or AF_INET6 socket.
	NetHost
	// NetLoopback allows AF_INET and AF_INET6 only as SOCK_STREAM with
	// protocol 0 or IPPROTO_TCP, listen(2) included: for a network
	// namespace of loopback alone, whose only way out is the egress
	// proxy's forwarder listening there (bubblewrap).
	NetLoopback
)

// String names the network policy: none, tcp or host.
func (n Network) String() string {
	switch n {
	case NetNone:
		return "none"
	case NetTCP:
		return "tcp"
	case NetHost:
		return "host"
	case NetLoopback:
		return "loopback"
	}
	return fmt.Sprintf("Network(%d)", int(n))
}

// Metadata is what the filter leaves of the calls that change a file's
// mode, owner, times and extended attributes. Landlock (ABI 7 and before)
// does not govern them, so under the landlock helper a tool could change
// a host file it owns by its path alone, one Landlock forbids it to write
// or even read; under bubblewrap the read-only mount table refuses that.
type Metadata int

const (
	// MetadataAll, the zero value, allows every such call: a read-only
	// mount table protects the host (bubblewrap).
	MetadataAll Metadata = iota
	// MetadataByFD allows them only through a descriptor: chmod, fchmodat,
	// fchmodat2, chown, lchown, fchownat, utime, utimes, futimesat,
	// utimensat with a path, setxattr, lsetxattr, setxattrat, removexattr,
	// lremovexattr, removexattrat and file_setattr are refused; fchmod,
	// fchown, fsetxattr, fremovexattr and futimens (utimensat with a NULL
	// path) are allowed, on the files Landlock lets the tool open.
	MetadataByFD
	// MetadataNone refuses fchmod, fchown, fsetxattr and fremovexattr
	// too, for root, who owns the host's system files and could open one
	// read-only and change its mode. futimens stays allowed.
	MetadataNone
)

// String names the metadata policy: all, by-fd or none.
func (m Metadata) String() string {
	switch m {
	case MetadataAll:
		return "all"
	case MetadataByFD:
		return "by-fd"
	case MetadataNone:
		return "none"
	}
	return fmt.Sprintf("Metadata(%d)", int(m))
}

// Policy is what a filter allows beyond its fixed denials.
type Policy struct {
	Network  Network
	Metadata Metadata
}

// String is the one line a grant's mechanisms quote for the filter.
func (p Policy) String() string {
	const fixed = "seccomp: EPERM for io_uring_*, bpf, perf_event_open, userfaultfd, " +
		"keyctl, add_key, request_key, ptrace, process_vm_*, pidfd_getfd, kexec_*, *_module, " +
		"mount, umount2, pivot_root, chroot, the mount API (fsopen, fsconfig, fsmount, " +
		"fspick, move_mount, open_tree*, mount_setattr), unshare, setns, " +
		"clone with CLONE_NEW*, swapon, swapoff, reboot, acct, syslog, quotactl*, " +
		"*_handle_at, lookup_dcookie, iopl, ioperm, uselib, nfsservctl, vhangup, " +
		"settimeofday, clock_settime, clock_adjtime, adjtimex, lsm_set_self_attr, " +
		"ioctl TIOCSTI/TIOCLINUX, personality other than PER_LINUX, other ABIs (i386, x32); " +
		"ENOSYS for clone3; "
	const byPath = "; EPERM for the chmod, chown, utimes, xattr and file attribute calls by path " +
		"(chmod, fchmodat*, chown, lchown, fchownat, utime, utimes, futimesat, utimensat with a path, " +
		"setxattr*, lsetxattr, removexattr*, lremovexattr, file_setattr)"
	const pair = "; socketpair only AF_UNIX SOCK_STREAM/SOCK_SEQPACKET"
	var socket, metadata string
	switch p.Network {
	case NetNone:
		socket = "socket() refused for every family" + pair
	case NetTCP:
		socket = "socket() only AF_INET/AF_INET6 SOCK_STREAM with protocol 0 or IPPROTO_TCP" + pair +
			"; listen and MSG_FASTOPEN sends refused"
	case NetHost:
		socket = "socket() only AF_INET/AF_INET6, any type and protocol" + pair
	case NetLoopback:
		socket = "socket() only AF_INET/AF_INET6 SOCK_STREAM with protocol 0 or IPPROTO_TCP (a network namespace of loopback alone)" + pair
	default:
		return fmt.Sprintf("seccomp: invalid network policy %v", p.Network)
	}
	switch p.Metadata {
	case MetadataAll:
	case MetadataByFD:
		metadata = byPath + "; by descriptor allowed"
	case MetadataNone:
		metadata = byPath + " and by descriptor (fchmod, fchown, fsetxattr, fremovexattr); futimens allowed"
	default:
		return fmt.Sprintf("seccomp: invalid metadata policy %v", p.Metadata)
	}
	return fixed + socket + metadata
}

// Denied returns the names of the system calls the filter refuses with
// EPERM whatever their arguments, sorted. clone3 (ENOSYS), the calls
// checked by argument (clone, ioctl, personality, socket, socketpair, and
// under [NetTCP] sendto, sendmsg and sendmmsg), listen (refused under
// NetTCP only) and the ones that depend on [Metadata] ([DeniedMetadata])
// are not among them. It is empty where the package has no system call
// table.
func Denied() []string {
	t := nativeTable()
	if t == nil {
		return nil
	}
	return sortedNames(t.denied)
}

// DeniedMetadata returns the names of the calls that change a file's
// metadata and that the filter refuses with EPERM under m whatever their
// arguments, sorted: none under [MetadataAll], the calls by path under
// [MetadataByFD], those and the calls by descriptor under [MetadataNone].
// utimensat, checked by its path argument, is not among them. It is empty
// where the package has no system call table and for a Metadata it does
// not know.
func DeniedMetadata(m Metadata) []string {
	t := nativeTable()
	if t == nil {
		return nil
	}
	return sortedNames(t.deniedMetadata(m))
}

func sortedNames(calls []call) []string {
	names := make([]string, 0, len(calls))
	for _, c := range calls {
		names = append(names, c.name)
	}
	slices.Sort(names)
	return names
}

// Marshal returns [Program] as the kernel's struct sock_filter array — 8
// bytes an instruction: u16 code, u8 jt, u8 jf, u32 k, in the host's byte
// order — which is what bubblewrap reads from its --seccomp descriptor.
func Marshal(p Policy) ([]byte, error) {
	prog, err := Program(p)
	if err != nil {
		return nil, err
	}
	b := make([]byte, 0, 8*len(prog))
	for _, ins := range prog {
		b = binary.NativeEndian.AppendUint16(b, ins.Op)
		b = append(b, ins.Jt, ins.Jf)
		b = binary.NativeEndian.AppendUint32(b, ins.K)
	}
	return b, nil
}

// table is one architecture's system call numbers, as the filter needs
// them.
type table struct {
	audit uint32 // the AUDIT_ARCH_* value of the native ABI
	// x32Bit, when not 0, marks numbers at or above it as another ABI
	// that shares the native audit value (amd64's x32).
	x32Bit uint32

	clone, clone3, ioctl, personality, socket, socketpair uint32
	// listen and the sends that can carry MSG_FASTOPEN are checked
	// under NetTCP.
	listen, sendto, sendmsg, sendmmsg uint32
	// utimensat is checked by its path unless Metadata is MetadataAll.
	utimensat uint32

	denied []call // refused with EPERM whatever their arguments
	// metadataByPath change a file's mode, owner, times or extended
	// attributes through a path: refused unless Metadata is MetadataAll.
	metadataByPath []call
	// metadataByFD do it through a descriptor: refused under MetadataNone.
	metadataByFD []call
}

// deniedMetadata returns the calls m refuses whatever their arguments.
func (t *table) deniedMetadata(m Metadata) []call {
	switch m {
	case MetadataByFD:
		return t.metadataByPath
	case MetadataNone:
		return slices.Concat(t.metadataByPath, t.metadataByFD)
	}
	return nil
}

// call is a system call by name and number.
type call struct {
	name string
	nr   uint32
}

// errUnsupported is the error for a platform without a system call table.
func errUnsupported() error {
	return fmt.Errorf("seccomp: no system call table for %s/%s: %w", runtime.GOOS, runtime.GOARCH, errors.ErrUnsupported)
}
