package host

import (
	"errors"
	"os"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/cordon-run/cordon/substrate"
)

// procAttr returns the attributes of a command on the host: its own
// session and process group and, with ns, a private PID namespace (through
// a user namespace mapping the caller's own IDs when not root), and the
// mechanisms that describe it.
func procAttr(ns bool) (*syscall.SysProcAttr, []substrate.Mechanism) {
	a := &syscall.SysProcAttr{Setsid: true, Pdeathsig: syscall.SIGKILL}
	if !ns {
		return a, []substrate.Mechanism{MechNoNS}
	}
	if _, err := os.Stat("/bin/sh"); err != nil {
		return nil, nil // no init to run the command under
	}
	a.Cloneflags = syscall.CLONE_NEWPID
	if uid := os.Geteuid(); uid != 0 {
		gid := os.Getegid()
		a.Cloneflags |= syscall.CLONE_NEWUSER
		a.UidMappings = []syscall.SysProcIDMap{{ContainerID: uid, HostID: uid, Size: 1}}
		a.GidMappings = []syscall.SysProcIDMap{{ContainerID: gid, HostID: gid, Size: 1}}
		a.GidMappingsEnableSetgroups = false
		return a, []substrate.Mechanism{MechPIDNSUser}
	}
	return a, []substrate.Mechanism{MechPIDNS}
}

// nsRefused reports whether a start failed because the namespaces could not
// be created, so that a start without them is worth trying.
func nsRefused(err error) bool {
	for _, e := range []error{unix.EPERM, unix.EINVAL, unix.ENOSPC, unix.EUSERS, unix.EACCES} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

func isExecError(err error) bool {
	return errors.Is(err, unix.ENOEXEC) || errors.Is(err, unix.EISDIR)
}
