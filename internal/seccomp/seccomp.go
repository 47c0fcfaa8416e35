// Package seccomp builds the seccomp-BPF filter every sandboxed native
// tool runs under. Bubblewrap reads it from its --seccomp descriptor (the
// bytes of [Marshal]); the landlock helper installs it on itself with
// [Apply] just before it executes the tool. It closes the kernel
// interfaces a tool has no business with and that neither namespaces nor
// Landlock confine — io_uring, bpf, perf events, keyrings, ptrace, module
// and kexec loading, mounts and new namespaces, the clock — and narrows
// socket(2) to what the run's [Network] allows.
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
// In this order, for the architecture the package was built for:
//
//   - a call on another ABI (i386 through int 0x80 on amd64, x32, 32-bit
//     ARM on arm64) is refused;
//   - clone3 returns ENOSYS;
//   - the calls [Denied] lists are refused whatever their arguments;
//   - clone(2) is refused when its flags ask for a new namespace
//     (CLONE_NEWNS, CLONE_NEWCGROUP, CLONE_NEWUTS, CLONE_NEWIPC,
//     CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET);
//   - ioctl(2) is refused for TIOCSTI and TIOCLINUX (pushing input into a
//     terminal the tool shares with the person);
//   - personality(2) may only query or set PER_LINUX: the other personas
//     (ADDR_NO_RANDOMIZE, READ_IMPLIES_EXEC, ...) weaken the tool's own
//     exploit mitigations;
//   - socket(2) creates only what [Network] allows, and never anything
//     outside AF_INET and AF_INET6: an allow-list of families.
//
// Everything else is allowed. Arguments are compared on their low 32 bits,
// which is what the kernel reads for each of them (an int or unsigned int,
// or clone's flags, which it truncates), so setting the high bits of a
// register gets past nothing.
//
// # Limitations
//
//   - Only Linux on amd64 and arm64 has a system call table here;
//     [Program], [Marshal] and [Apply] return an error wrapping
//     [errors.ErrUnsupported] elsewhere.
//   - The filter sees registers only: whatever a call reads from memory
//     (clone3's arguments, a sockaddr, setsockopt values) is beyond it.
//   - ioctl is filtered for two requests; every other one is allowed.
//   - socketpair(2) is allowed for every family: the pair is connected to
//     itself and reaches nothing outside.
//   - [NetTCP] narrows protocols, not addresses or ports: those are
//     Landlock's TCP rules (the landlock helper) or the network namespace
//     (bubblewrap).
package seccomp

import (
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"slices"
)

// Network is what the filter lets socket() create for the inet families.
type Network int

const (
	// NetNone allows no AF_INET or AF_INET6 socket at all.
	NetNone Network = iota
	// NetTCP allows AF_INET and AF_INET6 only as SOCK_STREAM with
	// protocol 0 or IPPROTO_TCP: Landlock's TCP rules then filter the
	// ports. UDP, raw sockets, SCTP and MPTCP are refused, because Landlock
	// does not cover them.
	NetTCP
	// NetHost allows any AF_INET or AF_INET6 socket.
	NetHost
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
	}
	return fmt.Sprintf("Network(%d)", int(n))
}

// Policy is what a filter allows beyond its fixed denials.
type Policy struct {
	Network Network
}

// String is the one line a grant's mechanisms quote for the filter.
func (p Policy) String() string {
	const fixed = "seccomp: EPERM for io_uring_*, bpf, perf_event_open, userfaultfd, " +
		"keyctl, add_key, request_key, ptrace, process_vm_*, kexec_*, *_module, " +
		"mount, umount2, pivot_root, chroot, the mount API (fsopen, fsconfig, fsmount, " +
		"fspick, move_mount, open_tree*, mount_setattr), unshare, setns, " +
		"clone with CLONE_NEW*, swapon, swapoff, reboot, acct, syslog, quotactl*, " +
		"*_handle_at, lookup_dcookie, iopl, ioperm, uselib, nfsservctl, vhangup, " +
		"settimeofday, clock_settime, clock_adjtime, adjtimex, lsm_set_self_attr, " +
		"ioctl TIOCSTI/TIOCLINUX, personality other than PER_LINUX, other ABIs (i386, x32); " +
		"ENOSYS for clone3; "
	switch p.Network {
	case NetNone:
		return fixed + "socket() refused for every family (socketpair allowed)"
	case NetTCP:
		return fixed + "socket() only AF_INET/AF_INET6 SOCK_STREAM with protocol 0 or IPPROTO_TCP (socketpair allowed)"
	case NetHost:
		return fixed + "socket() only AF_INET/AF_INET6, any type and protocol (socketpair allowed)"
	}
	return fmt.Sprintf("seccomp: invalid network policy %v", p.Network)
}

// Denied returns the names of the system calls the filter refuses with
// EPERM whatever their arguments, sorted. clone3 (ENOSYS) and the calls
// checked by argument (clone, ioctl, personality, socket) are not among
// them. It is empty where the package has no system call table.
func Denied() []string {
	t := nativeTable()
	if t == nil {
		return nil
	}
	names := make([]string, 0, len(t.denied))
	for _, c := range t.denied {
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

	clone, clone3, ioctl, personality, socket uint32

	denied []call // refused with EPERM whatever their arguments
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
