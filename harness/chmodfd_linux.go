package harness

import (
	"strconv"

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
