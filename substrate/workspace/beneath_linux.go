package workspace

import (
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// noOpenat2 is set once openat2(2) has answered ENOSYS (kernels before 5.6,
// or a seccomp filter that blocks it); the walk is used from then on.
var noOpenat2 atomic.Bool

// resolveFlags confine a lookup beneath the directory descriptor and refuse
// every symlink, so a path that was checked is the path that is opened.
const resolveFlags = unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS

// openBeneath opens the symlink-free relative path p beneath dirfd. Any
// symlink on the way fails the open with ELOOP.
func openBeneath(dirfd int, p string, flags int, mode uint32) (int, error) {
	if !noOpenat2.Load() {
		how := unix.OpenHow{Flags: uint64(flags | unix.O_CLOEXEC), Mode: uint64(mode), Resolve: resolveFlags}
		for i := 0; ; i++ {
			fd, err := unix.Openat2(dirfd, p, &how)
			if (err == unix.EAGAIN || err == unix.EINTR) && i < 8 {
				continue // a concurrent rename somewhere on the host
			}
			if err != unix.ENOSYS {
				return fd, err
			}
			noOpenat2.Store(true)
			break
		}
	}
	return openWalk(dirfd, p, flags, mode)
}

// statBeneath stats the symlink-free relative path p beneath dirfd.
func statBeneath(dirfd int, p string, st *unix.Stat_t) error {
	if noOpenat2.Load() {
		return statWalk(dirfd, p, st)
	}
	fd, err := openBeneath(dirfd, p, unix.O_PATH, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	return unix.Fstat(fd, st)
}
