//go:build linux

package seccomp

import "golang.org/x/sys/unix"

// aarch64 is the table for arm64. 32-bit ARM calls carry AUDIT_ARCH_ARM;
// the filter refuses them.
var aarch64 = table{
	audit: unix.AUDIT_ARCH_AARCH64,

	clone:       unix.SYS_CLONE,
	clone3:      unix.SYS_CLONE3,
	ioctl:       unix.SYS_IOCTL,
	personality: unix.SYS_PERSONALITY,
	socket:      unix.SYS_SOCKET,
	socketpair:  unix.SYS_SOCKETPAIR,
	listen:      unix.SYS_LISTEN,
	sendto:      unix.SYS_SENDTO,
	sendmsg:     unix.SYS_SENDMSG,
	sendmmsg:    unix.SYS_SENDMMSG,
	utimensat:   unix.SYS_UTIMENSAT,

	denied: []call{
		// Kernel interfaces with a record of privilege escalations.
		{"io_uring_setup", unix.SYS_IO_URING_SETUP},
		{"io_uring_enter", unix.SYS_IO_URING_ENTER},
		{"io_uring_register", unix.SYS_IO_URING_REGISTER},
		{"bpf", unix.SYS_BPF},
		{"perf_event_open", unix.SYS_PERF_EVENT_OPEN},
		{"userfaultfd", unix.SYS_USERFAULTFD},
		{"keyctl", unix.SYS_KEYCTL},
		{"add_key", unix.SYS_ADD_KEY},
		{"request_key", unix.SYS_REQUEST_KEY},
		// Other processes' memory.
		{"ptrace", unix.SYS_PTRACE},
		{"process_vm_readv", unix.SYS_PROCESS_VM_READV},
		{"process_vm_writev", unix.SYS_PROCESS_VM_WRITEV},
		{"pidfd_getfd", unix.SYS_PIDFD_GETFD},
		// The kernel itself.
		{"kexec_load", unix.SYS_KEXEC_LOAD},
		{"kexec_file_load", unix.SYS_KEXEC_FILE_LOAD},
		{"init_module", unix.SYS_INIT_MODULE},
		{"finit_module", unix.SYS_FINIT_MODULE},
		{"delete_module", unix.SYS_DELETE_MODULE},
		// Mounts and namespaces.
		{"mount", unix.SYS_MOUNT},
		{"umount2", unix.SYS_UMOUNT2},
		{"pivot_root", unix.SYS_PIVOT_ROOT},
		{"chroot", unix.SYS_CHROOT},
		{"unshare", unix.SYS_UNSHARE},
		{"setns", unix.SYS_SETNS},
		{"open_tree", unix.SYS_OPEN_TREE},
		{"move_mount", unix.SYS_MOVE_MOUNT},
		{"fsopen", unix.SYS_FSOPEN},
		{"fsconfig", unix.SYS_FSCONFIG},
		{"fsmount", unix.SYS_FSMOUNT},
		{"fspick", unix.SYS_FSPICK},
		{"mount_setattr", unix.SYS_MOUNT_SETATTR},
		{"open_tree_attr", unix.SYS_OPEN_TREE_ATTR},
		// The machine's administration.
		{"swapon", unix.SYS_SWAPON},
		{"swapoff", unix.SYS_SWAPOFF},
		{"reboot", unix.SYS_REBOOT},
		{"acct", unix.SYS_ACCT},
		{"syslog", unix.SYS_SYSLOG},
		{"quotactl", unix.SYS_QUOTACTL},
		{"quotactl_fd", unix.SYS_QUOTACTL_FD},
		{"vhangup", unix.SYS_VHANGUP},
		{"lsm_set_self_attr", unix.SYS_LSM_SET_SELF_ATTR},
		// Files by handle, past the path checks.
		{"open_by_handle_at", unix.SYS_OPEN_BY_HANDLE_AT},
		{"name_to_handle_at", unix.SYS_NAME_TO_HANDLE_AT},
		// The clock.
		{"settimeofday", unix.SYS_SETTIMEOFDAY},
		{"clock_settime", unix.SYS_CLOCK_SETTIME},
		{"clock_adjtime", unix.SYS_CLOCK_ADJTIME},
		{"adjtimex", unix.SYS_ADJTIMEX},
		// Obsolete.
		{"lookup_dcookie", unix.SYS_LOOKUP_DCOOKIE},
		{"nfsservctl", unix.SYS_NFSSERVCTL},
	},

	// What changes a file's mode, owner, times and extended attributes
	// (see Metadata), by path — utimensat is checked by its path — and
	// by descriptor. arm64 has no chmod, chown, lchown, utime, utimes or
	// futimesat: the C library builds them on the *at calls.
	metadataByPath: []call{
		{"fchmodat", unix.SYS_FCHMODAT},
		{"fchmodat2", unix.SYS_FCHMODAT2},
		{"fchownat", unix.SYS_FCHOWNAT},
		{"setxattr", unix.SYS_SETXATTR},
		{"lsetxattr", unix.SYS_LSETXATTR},
		{"setxattrat", unix.SYS_SETXATTRAT},
		{"removexattr", unix.SYS_REMOVEXATTR},
		{"lremovexattr", unix.SYS_LREMOVEXATTR},
		{"removexattrat", unix.SYS_REMOVEXATTRAT},
		{"file_setattr", unix.SYS_FILE_SETATTR},
	},
	metadataByFD: []call{
		{"fchmod", unix.SYS_FCHMOD},
		{"fchown", unix.SYS_FCHOWN},
		{"fsetxattr", unix.SYS_FSETXATTR},
		{"fremovexattr", unix.SYS_FREMOVEXATTR},
	},
}

func nativeTable() *table { return &aarch64 }
