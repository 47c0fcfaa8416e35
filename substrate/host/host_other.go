//go:build !linux

package host

import (
	"errors"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/cordon-run/cordon/substrate"
)

// procAttr returns a session and process group of its own; there is no PID
// namespace here, so ns yields nothing.
func procAttr(ns bool) (*syscall.SysProcAttr, []substrate.Mechanism) {
	if ns {
		return nil, nil
	}
	return &syscall.SysProcAttr{Setsid: true}, []substrate.Mechanism{MechNoNS}
}

func nsRefused(error) bool { return false }

func isExecError(err error) bool {
	return errors.Is(err, unix.ENOEXEC) || errors.Is(err, unix.EISDIR)
}
