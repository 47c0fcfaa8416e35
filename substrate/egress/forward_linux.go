package egress

import "golang.org/x/sys/unix"

// streamSocket reports whether fd is a connected stream socket of
// AF_UNIX, AF_INET or AF_INET6: not a listening one, and one with a peer.
func streamSocket(fd int) bool {
	dom, err1 := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_DOMAIN)
	typ, err2 := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TYPE)
	acc, err3 := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_ACCEPTCONN)
	if err1 != nil || err2 != nil || err3 != nil || typ != unix.SOCK_STREAM || acc != 0 ||
		dom != unix.AF_UNIX && dom != unix.AF_INET && dom != unix.AF_INET6 {
		return false
	}
	_, err := unix.Getpeername(fd)
	return err == nil
}

// undumpable makes this process not dumpable (PR_SET_DUMPABLE 0).
func undumpable() error { return unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0) }

// setAS sets this process's RLIMIT_AS, soft and hard, to n bytes.
func setAS(n uint64) error {
	return unix.Setrlimit(unix.RLIMIT_AS, &unix.Rlimit{Cur: n, Max: n})
}
