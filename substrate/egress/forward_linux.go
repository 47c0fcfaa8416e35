package egress

import "golang.org/x/sys/unix"

// unixStream reports whether fd is a unix stream socket.
func unixStream(fd int) bool {
	dom, err1 := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_DOMAIN)
	typ, err2 := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TYPE)
	return err1 == nil && err2 == nil && dom == unix.AF_UNIX && typ == unix.SOCK_STREAM
}

// undumpable makes this process not dumpable (PR_SET_DUMPABLE 0).
func undumpable() error { return unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0) }
