package bwrap

import "golang.org/x/sys/unix"

// setNproc sets the RLIMIT_NPROC of process pid.
func setNproc(pid int, n uint64) error {
	return unix.Prlimit(pid, unix.RLIMIT_NPROC, &unix.Rlimit{Cur: n, Max: n}, nil)
}
