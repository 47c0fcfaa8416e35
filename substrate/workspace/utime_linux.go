package workspace

import "golang.org/x/sys/unix"

// utimeOmit is the utimensat(2) nanoseconds that keep a time unchanged.
const utimeOmit = unix.UTIME_OMIT
