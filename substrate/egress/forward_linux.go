package egress

import "golang.org/x/sys/unix"

// streamSocket reports whether fd is a stream socket of AF_UNIX, AF_INET
// or AF_INET6.
func streamSocket(fd int) bool {
	dom, err1 := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_DOMAIN)
	typ, err2 := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TYPE)
	return err1 == nil && err2 == nil && typ == unix.SOCK_STREAM &&
		(dom == unix.AF_UNIX || dom == unix.AF_INET || dom == unix.AF_INET6)
}

// undumpable makes this process not dumpable (PR_SET_DUMPABLE 0).
func undumpable() error { return unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0) }
