//go:build !linux || !(amd64 || arm64)

package seccomp

// nativeTable: no system call table for this platform.
func nativeTable() *table { return nil }
