//go:build unix && !linux

package workspace

import (
	"errors"
	"os"
)

// utimeOmit is the utimensat(2) nanoseconds that keep a time unchanged
// (UTIME_OMIT in the BSDs' sys/stat.h).
const utimeOmit = -2

// FileChtimes answers [errors.ErrUnsupported] where utimensat cannot take
// a descriptor alone: set the times by path with [Workspace.Chtimes].
func FileChtimes(f *os.File, atime, mtime int64) error { return errors.ErrUnsupported }
