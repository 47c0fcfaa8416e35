package wasm

import (
	"os"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/cordon-run/cordon/substrate/workspace"
)

// futimens sets the times of the open file f (utimensat with a NULL path),
// in nanoseconds; [workspace.UtimeOmit] keeps one.
func futimens(f *os.File, atim, mtim int64) error {
	ts := [2]unix.Timespec{timespecOf(atim), timespecOf(mtim)}
	_, _, e := unix.Syscall6(unix.SYS_UTIMENSAT, f.Fd(), 0, uintptr(unsafe.Pointer(&ts[0])), 0, 0, 0)
	if e != 0 {
		return e
	}
	return nil
}

func timespecOf(ns int64) unix.Timespec {
	if ns == workspace.UtimeOmit {
		return unix.Timespec{Nsec: unix.UTIME_OMIT}
	}
	return unix.NsecToTimespec(ns)
}
