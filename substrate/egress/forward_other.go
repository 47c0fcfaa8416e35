//go:build !linux

package egress

import (
	"errors"
	"os"
	"os/signal"
	"syscall"

	"golang.org/x/sys/unix"
)

// streamSocket reports whether fd is a stream socket (the domain cannot be
// asked here).
func streamSocket(fd int) bool {
	typ, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TYPE)
	return err == nil && typ == unix.SOCK_STREAM
}

// undumpable is Linux's alone: the forwarder runs only there.
func undumpable() error { return errors.New("egress: the forwarder runs on Linux only") }

// setAS is Linux's alone: the forwarder runs only there.
func setAS(n uint64) error { return errors.New("egress: the forwarder runs on Linux only") }

// dieOf ends this process by sig.
func dieOf(sig syscall.Signal) {
	signal.Reset(sig)
	syscall.Kill(os.Getpid(), sig)
	select {}
}
