package runtime

import (
	"bytes"
	"errors"
	"os"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// bwrapAttr starts bwrap in a session and process group of its own, killed
// if cordon's thread dies (a backstop: bwrap's --die-with-parent and the
// PID namespace are the mechanism).
func bwrapAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setsid: true, Pdeathsig: syscall.SIGKILL}
}

// hostAttr returns the attributes of a command on the host: its own
// session and process group and, with ns, a private PID namespace (through
// a user namespace mapping the caller's own IDs when not root). It returns
// the mechanisms that describe it.
func hostAttr(ns bool) (*syscall.SysProcAttr, []string) {
	a := &syscall.SysProcAttr{Setsid: true, Pdeathsig: syscall.SIGKILL}
	if !ns {
		return a, []string{"host: own session and process group; no PID namespace could be created, so a process that leaves the group and loses its parent can outlive the run"}
	}
	a.Cloneflags = syscall.CLONE_NEWPID
	if uid := os.Geteuid(); uid != 0 {
		gid := os.Getegid()
		a.Cloneflags |= syscall.CLONE_NEWUSER
		a.UidMappings = []syscall.SysProcIDMap{{ContainerID: uid, HostID: uid, Size: 1}}
		a.GidMappings = []syscall.SysProcIDMap{{ContainerID: gid, HostID: gid, Size: 1}}
		a.GidMappingsEnableSetgroups = false
		return a, []string{"host: own session and process group", "host: PID 1 of a private PID namespace (in a user namespace mapping the caller's IDs): the tree dies with the command"}
	}
	return a, []string{"host: own session and process group", "host: PID 1 of a private PID namespace: the tree dies with the command"}
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

// setPipeSize asks for a larger pipe buffer, which lets a flood through
// with fewer context switches. Failure only costs speed.
func setPipeSize(f *os.File, n int) {
	if rc, err := f.SyscallConn(); err == nil {
		rc.Control(func(fd uintptr) { unix.FcntlInt(fd, unix.F_SETPIPE_SZ, n) })
	}
}

// signalTree sends sig to the tree of pid. In the sandbox, pid is bwrap:
// SIGTERM goes to every process below it (bwrap would die of it at once,
// and its death kills the namespace without a grace period), SIGKILL to
// bwrap's group and everything below, which ends the PID namespace. On the
// host both go to the command's process group and to every descendant
// linked by parent.
func signalTree(pid int, sandboxed bool, sig unix.Signal) {
	if sig != unix.SIGKILL {
		if !sandboxed {
			unix.Kill(-pid, sig)
		}
		for _, d := range descendants(pid) {
			unix.Kill(d, sig)
		}
		return
	}
	// Kill from the leaves' side first, a few rounds, so that a process
	// forking during the kill is caught, then the root and its group.
	for range 4 {
		ds := descendants(pid)
		if len(ds) == 0 {
			break
		}
		for _, d := range ds {
			unix.Kill(d, sig)
		}
	}
	unix.Kill(-pid, sig)
	unix.Kill(pid, sig)
}

// killGroup sends sig to the process group pid leads.
func killGroup(pid int, sig unix.Signal) { unix.Kill(-pid, sig) }

// descendants returns the processes below pid, found by their parent links
// in /proc.
func descendants(pid int) []int {
	d, err := os.Open("/proc")
	if err != nil {
		return nil
	}
	names, _ := d.Readdirnames(-1)
	d.Close()
	children := map[int][]int{}
	for _, n := range names {
		p, err := strconv.Atoi(n)
		if err != nil {
			continue
		}
		if pp, ok := parentOf(p); ok {
			children[pp] = append(children[pp], p)
		}
	}
	var out []int
	queue := children[pid]
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		out = append(out, p)
		queue = append(queue, children[p]...)
	}
	return out
}

// parentOf reads the parent of pid from /proc/PID/stat.
func parentOf(pid int) (int, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	// "pid (comm) state ppid ...": comm may hold spaces and parentheses.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 > len(b) {
		return 0, false
	}
	f := bytes.Fields(b[i+2:])
	if len(f) < 2 {
		return 0, false
	}
	pp, err := strconv.Atoi(string(f[1]))
	return pp, err == nil
}
