//go:build !linux

package harness

import (
	"time"

	"golang.org/x/sys/unix"
)

// openNoFollow opens name (relative to dirfd) for a change of its mode,
// never following a symlink (a file without read permission cannot be
// opened here).
func openNoFollow(dirfd int, name string) (int, error) {
	return unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
}

// chmodFd sets the mode of the open file fd.
func chmodFd(fd int, mode uint32) error { return unix.Fchmod(fd, mode) }

// bornAt returns the change time of the file at path (not followed), no
// earlier than its birth.
func bornAt(path string) (time.Time, bool) {
	var st unix.Stat_t
	if unix.Lstat(path, &st) != nil {
		return time.Time{}, false
	}
	return time.Unix(st.Ctim.Unix()), true
}
