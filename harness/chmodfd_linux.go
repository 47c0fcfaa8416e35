package harness

import (
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// openNoFollow opens name (relative to dirfd) for a change of its mode
// alone, whatever its permissions, never following a symlink.
func openNoFollow(dirfd int, name string) (int, error) {
	return unix.Openat(dirfd, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
}

// chmodFd sets the mode of the file an O_PATH descriptor holds (fchmod
// refuses one; the descriptor's /proc link is that file, not a path).
func chmodFd(fd int, mode uint32) error {
	return unix.Chmod("/proc/self/fd/"+strconv.Itoa(fd), mode)
}

// bornAt returns when the file at path (not followed) was made: its birth
// time where the file system keeps one, else its change time, which is no
// earlier.
func bornAt(path string) (time.Time, bool) {
	var stx unix.Statx_t
	if unix.Statx(unix.AT_FDCWD, path, unix.AT_SYMLINK_NOFOLLOW, unix.STATX_BTIME|unix.STATX_CTIME, &stx) != nil {
		return time.Time{}, false
	}
	t := stx.Ctime
	if stx.Mask&unix.STATX_BTIME != 0 {
		t = stx.Btime
	}
	return time.Unix(t.Sec, int64(t.Nsec)), true
}
