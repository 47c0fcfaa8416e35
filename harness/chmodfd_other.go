//go:build !linux

package harness

import "golang.org/x/sys/unix"

// openNoFollow opens name (relative to dirfd) for a change of its mode,
// never following a symlink (a file without read permission cannot be
// opened here).
func openNoFollow(dirfd int, name string) (int, error) {
	return unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
}

// chmodFd sets the mode of the open file fd.
func chmodFd(fd int, mode uint32) error { return unix.Fchmod(fd, mode) }
