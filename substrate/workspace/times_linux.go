package workspace

import (
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// utimeOmit is the utimensat(2) nanoseconds that keep a time unchanged.
const utimeOmit = unix.UTIME_OMIT

// FileChtimes sets the access and modification times of the open file f,
// in nanoseconds since the epoch ([UtimeOmit] keeps one): utimensat(2)
// with a NULL path, on the descriptor itself. It does not go through the
// guard: f must be a file [Workspace.OpenFile] opened for writing, whose
// open passed every check a change passes.
func FileChtimes(f *os.File, atime, mtime int64) error {
	ts := [2]unix.Timespec{timespec(atime), timespec(mtime)}
	_, _, e := unix.Syscall6(unix.SYS_UTIMENSAT, f.Fd(), 0, uintptr(unsafe.Pointer(&ts[0])), 0, 0, 0)
	if e != 0 {
		return e
	}
	return nil
}
