//go:build unix && !linux

package workspace

// utimeOmit is the utimensat(2) nanoseconds that keep a time unchanged
// (UTIME_OMIT in the BSDs' sys/stat.h).
const utimeOmit = -2
