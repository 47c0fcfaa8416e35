package bwrap

import (
	"fmt"
	"sync"

	"golang.org/x/sys/unix"
)

// setNproc sets the RLIMIT_NPROC of process pid.
func setNproc(pid int, n uint64) error {
	return unix.Prlimit(pid, unix.RLIMIT_NPROC, &unix.Rlimit{Cur: n, Max: n}, nil)
}

// nprocPerNamespace reports whether this kernel counts RLIMIT_NPROC per
// user namespace (Linux 5.14, "ucounts" rlimits): a task's own limit is
// then held against its namespace's tasks of its user, not every task of
// the user on the host.
var nprocPerNamespace = sync.OnceValue(func() bool { return kernelAtLeast(5, 14) })

// kernelAtLeast reports whether the running kernel's release is at least
// major.minor.
func kernelAtLeast(major, minor int) bool {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return false
	}
	var ma, mi int
	if _, err := fmt.Sscanf(unix.ByteSliceToString(u.Release[:]), "%d.%d", &ma, &mi); err != nil {
		return false
	}
	return ma > major || ma == major && mi >= minor
}

// setAS sets process pid's RLIMIT_AS, soft and hard, to n bytes.
func setAS(pid int, n uint64) error {
	return unix.Prlimit(pid, unix.RLIMIT_AS, &unix.Rlimit{Cur: n, Max: n}, nil)
}
