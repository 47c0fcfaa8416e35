//go:build !linux

package proc

import (
	"os"
	"syscall"
	"time"
)

func newSessionKeyring() error { return nil }

// Gone waits for nothing here: no pidfds.
func Gone(int) (<-chan struct{}, func()) { return nil, func() {} }

func setPipeSize(*os.File, int) {}

func signalName(s syscall.Signal) string { return s.String() }

// signalTree signals the process group of pid.
func signalTree(pid int, supervised bool, sig syscall.Signal) []int {
	syscall.Kill(-pid, sig)
	if sig == syscall.SIGKILL {
		syscall.Kill(pid, sig)
	}
	return nil
}

func awaitGone([]int, time.Duration) {}

// OpenInit has no pidfds to offer here.
func OpenInit(int, uint64) int { return -1 }

func killGroup(pid int, sig syscall.Signal) { syscall.Kill(-pid, sig) }

func killInits(pid int, _ []int) {
	syscall.Kill(-pid, syscall.SIGKILL)
	syscall.Kill(pid, syscall.SIGKILL)
}

// Pipe is [os.Pipe] outside Linux.
func Pipe(pollR, pollW bool) (r, w *os.File, err error) { return os.Pipe() }
