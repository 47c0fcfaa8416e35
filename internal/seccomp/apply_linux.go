package seccomp

import (
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Apply installs the filter for p on every thread of the calling process,
// for good: it sets PR_SET_NO_NEW_PRIVS (which seccomp requires of a
// process without CAP_SYS_ADMIN) and calls seccomp(SECCOMP_SET_MODE_FILTER)
// with SECCOMP_FILTER_FLAG_TSYNC. It is for a helper process that executes
// the tool right after; the filter and no_new_privs pass to every process
// it starts. Never call it in a process that has other work to do — a
// test binary's own process least of all.
func Apply(p Policy) error {
	prog, err := Program(p)
	if err != nil {
		return err
	}
	filter := make([]unix.SockFilter, len(prog))
	for i, ins := range prog {
		filter[i] = unix.SockFilter{Code: ins.Op, Jt: ins.Jt, Jf: ins.Jf, K: ins.K}
	}
	fprog := unix.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]}

	// no_new_privs is a property of each thread, and seccomp checks the
	// calling one's: make both calls on the same thread. TSYNC then gives
	// every other thread the filter and no_new_privs too.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("seccomp: prctl(PR_SET_NO_NEW_PRIVS): %w", err)
	}
	tid, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER,
		unix.SECCOMP_FILTER_FLAG_TSYNC, uintptr(unsafe.Pointer(&fprog)))
	runtime.KeepAlive(filter)
	if errno != 0 {
		return fmt.Errorf("seccomp: install the filter (SECCOMP_SET_MODE_FILTER, TSYNC): %w", errno)
	}
	if tid != 0 {
		// TSYNC's failure: the thread that could not take the filter (it
		// has another one of its own), and nothing was installed.
		return fmt.Errorf("seccomp: install the filter: thread %d cannot be synchronized", tid)
	}
	return nil
}
