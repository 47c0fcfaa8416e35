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
var nprocPerNamespace = sync.OnceValue(func() bool {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return false
	}
	var major, minor int
	if _, err := fmt.Sscanf(unix.ByteSliceToString(u.Release[:]), "%d.%d", &major, &minor); err != nil {
		return false
	}
	return major > 5 || major == 5 && minor >= 14
})
