//go:build !linux

package runtime

import (
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// bwrapAttr starts bwrap in a session of its own. (bwrap is Linux only;
// Find fails first.)
func bwrapAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setsid: true} }

// hostAttr returns a session and process group of its own; there is no PID
// namespace here, so ns yields nothing.
func hostAttr(ns bool) (*syscall.SysProcAttr, []string) {
	if ns {
		return nil, nil
	}
	return &syscall.SysProcAttr{Setsid: true}, []string{"host: own session and process group; a process that leaves the group can outlive the run"}
}

func nsRefused(error) bool { return false }

func setPipeSize(*os.File, int) {}

// signalTree signals the process group of pid.
func signalTree(pid int, sandboxed bool, sig unix.Signal) {
	unix.Kill(-pid, sig)
	if sig == unix.SIGKILL {
		unix.Kill(pid, sig)
	}
}

func killGroup(pid int, sig unix.Signal) { unix.Kill(-pid, sig) }
