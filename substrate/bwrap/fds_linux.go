package bwrap

import (
	"os"
	"strconv"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// closeOnExecAll marks every descriptor of this process above 2
// close-on-exec. Go opens its own descriptors that way, but a descriptor
// the process inherited from its parent is not, and bwrap passes whatever
// it inherits on to the command: an open directory outside the workspace
// would be a way around the mount table. exec.Cmd's ExtraFiles are
// duplicated onto their numbers in the child, so they still pass.
func closeOnExecAll() error {
	// One call where the kernel has it (Linux 5.11); a walk of the
	// descriptors otherwise.
	if unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC) == nil {
		return nil
	}
	d, err := os.Open("/proc/self/fd")
	if err != nil {
		return err
	}
	names, err := d.Readdirnames(-1)
	self := int(d.Fd())
	d.Close()
	if err != nil {
		return err
	}
	for _, n := range names {
		fd, err := strconv.Atoi(n)
		if err != nil || fd <= 2 || fd == self {
			continue
		}
		flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
		if err != nil || flags&unix.FD_CLOEXEC != 0 {
			continue
		}
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETFD, flags|unix.FD_CLOEXEC); err != nil {
			return err
		}
	}
	return nil
}

// nsInode returns the inode number of the namespace ns ("pid", "mnt",
// ...) of process pid ("self" for this one).
func nsInode(pid, ns string) (uint64, error) {
	var st unix.Stat_t
	if err := unix.Stat("/proc/"+pid+"/ns/"+ns, &st); err != nil {
		return 0, err
	}
	return st.Ino, nil
}

// bwrapAttr puts bwrap in a process group of its own (its --new-session
// gives the command a session of its own), killed should the thread that
// forks it die (a backstop: the PID namespace is the mechanism).
func bwrapAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// pipeUnread returns the bytes that wait in the pipe of fd, either end
// (FIONREAD, which is TIOCINQ on Linux).
//
// A raw system call: it never blocks, and one made through the runtime's
// entersyscall while every processor is idle wakes the runtime's sysmon,
// which then looks every 20 µs for a millisecond. The mount watch asks
// every releaseEvery while bwrap sets the sandbox up.
func pipeUnread(fd int) (int, error) {
	var n int32
	if _, _, e := unix.RawSyscall(unix.SYS_IOCTL, uintptr(fd), unix.TIOCINQ, uintptr(unsafe.Pointer(&n))); e != 0 {
		return 0, e
	}
	return int(n), nil
}

// pipeCapacity returns the bytes the pipe of descriptor fd holds.
func pipeCapacity(fd uintptr) (int, error) { return unix.FcntlInt(fd, unix.F_GETPIPE_SZ, 0) }

// localTimes reports whether path is on a file system of this machine's
// whose change times its clock sets.
func localTimes(path string) bool {
	var fs unix.Statfs_t
	if unix.Statfs(path, &fs) != nil {
		return false
	}
	switch uint32(fs.Type) {
	case unix.EXT4_SUPER_MAGIC, unix.XFS_SUPER_MAGIC, unix.BTRFS_SUPER_MAGIC, unix.TMPFS_MAGIC,
		unix.OVERLAYFS_SUPER_MAGIC, unix.F2FS_SUPER_MAGIC, unix.SQUASHFS_MAGIC:
		return true
	}
	return false
}
