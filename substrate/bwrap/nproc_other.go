//go:build !linux

package bwrap

import "errors"

// setNproc is Linux's alone: bubblewrap runs nowhere else.
func setNproc(pid int, n uint64) error {
	return errors.New("bwrap: RLIMIT_NPROC of another process is Linux's")
}

func nprocPerNamespace() bool { return false }

// setAS is Linux's alone, as setNproc is.
func setAS(pid int, n uint64) error {
	return errors.New("bwrap: RLIMIT_AS of another process is Linux's")
}
