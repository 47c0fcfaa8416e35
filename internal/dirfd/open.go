//go:build unix

package dirfd

import (
	"os"

	"golang.org/x/sys/unix"
)

// OpenFile is [os.OpenFile] for a file nothing waits on, opened without
// O_NONBLOCK (a regular file, a directory): os.OpenFile tries every
// descriptor it opens in the runtime's poller — which refuses regular
// files — setting O_NONBLOCK for the try and clearing it after, four
// system calls an open; a run makes several on its way to the sandbox.
// The descriptor is close-on-exec.
func OpenFile(name string, flag int, perm uint32) (*os.File, error) {
	for {
		fd, err := unix.Open(name, flag|unix.O_CLOEXEC, perm)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, &os.PathError{Op: "open", Path: name, Err: err}
		}
		return os.NewFile(uintptr(fd), name), nil
	}
}
