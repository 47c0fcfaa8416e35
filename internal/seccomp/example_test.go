package seccomp_test

import (
	"fmt"

	"github.com/cordon-run/cordon/internal/seccomp"
)

// The line a grant's mechanisms quote for a tool that may open TCP
// connections (Landlock then decides which ports) and only as a client.
func ExamplePolicy_String() {
	fmt.Println(seccomp.Policy{Network: seccomp.NetTCP})
	// Output:
	// seccomp: EPERM for io_uring_*, bpf, perf_event_open, userfaultfd, keyctl, add_key, request_key, ptrace, process_vm_*, pidfd_getfd, kexec_*, *_module, mount, umount2, pivot_root, chroot, the mount API (fsopen, fsconfig, fsmount, fspick, move_mount, open_tree*, mount_setattr), unshare, setns, clone with CLONE_NEW*, swapon, swapoff, reboot, acct, syslog, quotactl*, *_handle_at, lookup_dcookie, iopl, ioperm, uselib, nfsservctl, vhangup, settimeofday, clock_settime, clock_adjtime, adjtimex, lsm_set_self_attr, ioctl TIOCSTI/TIOCLINUX, personality other than PER_LINUX, other ABIs (i386, x32); ENOSYS for clone3; socket() only AF_INET/AF_INET6 SOCK_STREAM with protocol 0 or IPPROTO_TCP; socketpair only AF_UNIX SOCK_STREAM/SOCK_SEQPACKET; listen and MSG_FASTOPEN sends refused
}

// The line for a tool under the landlock helper, where Landlock does not
// govern a file's mode, owner, times and extended attributes: only
// through a descriptor of a file it could open.
func ExamplePolicy_String_metadata() {
	fmt.Println(seccomp.Policy{Network: seccomp.NetNone, Metadata: seccomp.MetadataByFD})
	// Output:
	// seccomp: EPERM for io_uring_*, bpf, perf_event_open, userfaultfd, keyctl, add_key, request_key, ptrace, process_vm_*, pidfd_getfd, kexec_*, *_module, mount, umount2, pivot_root, chroot, the mount API (fsopen, fsconfig, fsmount, fspick, move_mount, open_tree*, mount_setattr), unshare, setns, clone with CLONE_NEW*, swapon, swapoff, reboot, acct, syslog, quotactl*, *_handle_at, lookup_dcookie, iopl, ioperm, uselib, nfsservctl, vhangup, settimeofday, clock_settime, clock_adjtime, adjtimex, lsm_set_self_attr, ioctl TIOCSTI/TIOCLINUX, personality other than PER_LINUX, other ABIs (i386, x32); ENOSYS for clone3; socket() refused for every family; socketpair only AF_UNIX SOCK_STREAM/SOCK_SEQPACKET; EPERM for the chmod, chown, utimes, xattr and file attribute calls by path (chmod, fchmodat*, chown, lchown, fchownat, utime, utimes, futimesat, utimensat with a path, setxattr*, lsetxattr, removexattr*, lremovexattr, file_setattr); by descriptor allowed
}
