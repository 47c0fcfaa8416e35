package proc

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// newSessionKeyring gives the calling thread a new, empty, anonymous
// session keyring, which the processes it starts inherit: the session
// keyring of cordon's caller, and the keys and keyrings linked into it (the
// user keyring, Kerberos tickets, ...), stay out. Where keyctl is
// unavailable or forbidden (ENOSYS, or EPERM/EACCES from a seccomp filter
// or LSM, which the tree inherits), there is no keyring to reach — as long
// as the caller's session keyring cannot be looked up either; if it can,
// joining a new one failed while the old one is in reach, and that is an
// error, never a run that shares it.
func newSessionKeyring() error {
	_, _, e := unix.Syscall(unix.SYS_KEYCTL, unix.KEYCTL_JOIN_SESSION_KEYRING, 0, 0)
	switch e {
	case 0:
		return nil
	case unix.ENOSYS, unix.EPERM, unix.EACCES:
		id, e2 := unix.KeyctlGetKeyringID(unix.KEY_SPEC_SESSION_KEYRING, false)
		switch e2 {
		case unix.ENOSYS, unix.EPERM, unix.EACCES, unix.ENOKEY:
			return nil // no keyring the tree could reach
		case nil:
			return fmt.Errorf("cannot join a new session keyring (%v), and the caller's (%d) is still in reach", e, id)
		}
		return e2
	}
	return e
}

// setPipeSize asks for a larger pipe buffer, which lets a flood through
// with fewer context switches. Failure only costs speed.
func setPipeSize(f *os.File, n int) {
	if rc, err := f.SyscallConn(); err == nil {
		rc.Control(func(fd uintptr) { unix.FcntlInt(fd, unix.F_SETPIPE_SZ, n) })
	}
}

func signalName(s syscall.Signal) string { return unix.SignalName(s) }

// signalTree sends sig to the tree of pid and returns pidfds of the
// processes it signalled below pid, so that [awaitGone] can wait for them:
// the caller closes them. Supervised (pid is bwrap): SIGTERM goes to every
// process below it (bwrap would die of it at once, and its death kills the
// namespace without a grace period), SIGKILL to bwrap's group and
// everything below, which ends the PID namespace. Otherwise both go to the
// root's process group and to every descendant linked by parent. Signals
// go through pidfds, so a PID reused meanwhile is never hit.
func signalTree(pid int, supervised bool, sig syscall.Signal) []int {
	var fds []int
	seen := map[int]bool{}
	hit := func() int {
		n := 0
		for _, d := range descendants(pid) {
			if seen[d] {
				continue
			}
			seen[d] = true
			fd, err := unix.PidfdOpen(d, 0)
			if err != nil {
				continue // gone already
			}
			fds = append(fds, fd)
			unix.PidfdSendSignal(fd, sig, nil, 0)
			n++
		}
		return n
	}
	if sig != syscall.SIGKILL {
		if !supervised {
			unix.Kill(-pid, sig)
		}
		hit()
		return fds
	}
	// Kill from the leaves' side first, a few rounds, so that a process
	// forking during the kill is caught, then the root and its group.
	for range 4 {
		if hit() == 0 {
			break
		}
	}
	unix.Kill(-pid, sig)
	unix.Kill(pid, sig)
	return fds
}

// awaitGone waits, at most limit, until every process behind the pidfds
// has exited, and closes them. When the init of a PID namespace has
// exited, every process of the namespace is gone.
func awaitGone(fds []int, limit time.Duration) {
	deadline := time.Now().Add(limit)
	for _, fd := range fds {
		for {
			left := time.Until(deadline)
			if left <= 0 {
				break
			}
			pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
			n, err := unix.Poll(pfd, int(left.Milliseconds())+1)
			if n > 0 || (err != nil && err != unix.EINTR) {
				break
			}
		}
		unix.Close(fd)
	}
}

// Gone returns a channel closed once the process behind pidfd has
// exited (the init of a PID namespace: every process of the namespace is
// gone then), waited for by the runtime's poller — no thread blocks — on
// a duplicate of pidfd, and stop, which ends the wait and releases the
// duplicate. The caller keeps pidfd. The channel is closed only when the
// process was seen gone: never when the wait could not be made (the
// poller refused the descriptor: epoll's per-user watches, which a
// sandbox of the same user can use up, are spent) nor when stop ended it.
// It returns nil and a no-op where there is no descriptor to wait on.
func Gone(pidfd int) (<-chan struct{}, func()) {
	none := func() {}
	if pidfd < 0 {
		return nil, none
	}
	dup, err := unix.FcntlInt(uintptr(pidfd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, none
	}
	// O_NONBLOCK is the open file's, so the caller's pidfd gets it too:
	// harmless to poll(2) and pidfd_send_signal, its only uses (a
	// waitid(P_PIDFD) on it would return EAGAIN).
	if err := unix.SetNonblock(dup, true); err != nil {
		unix.Close(dup)
		return nil, none
	}
	return goneOf(os.NewFile(uintptr(dup), "pidfd")) // non-blocking: pollable, if the poller takes it
}

// goneOf is Gone on f, a pidfd this takes over.
func goneOf(f *os.File) (<-chan struct{}, func()) {
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, func() {}
	}
	gone := make(chan struct{})
	go func() {
		seen := false
		rc.Read(func(fd uintptr) bool {
			n, err := unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, 0)
			seen = err == nil && n > 0
			return seen
		})
		if seen {
			close(gone)
		}
	}()
	var once sync.Once
	return gone, func() { once.Do(func() { f.Close() }) }
}

// OpenInit returns a pidfd of pid after checking that it is the init of
// the PID namespace pidNS (its inode number, 0 to skip the check); -1 when
// it is gone or is not.
func OpenInit(pid int, pidNS uint64) int {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return -1
	}
	if pidNS == 0 {
		return fd
	}
	link, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/ns/pid")
	switch {
	case errors.Is(err, unix.EACCES), errors.Is(err, unix.EPERM):
		// Not ours to inspect: trust the pidfd, opened while its parent
		// was running.
	case err != nil || link != "pid:["+strconv.FormatUint(pidNS, 10)+"]":
		unix.Close(fd)
		return -1
	}
	return fd
}

// killInits ends a supervised tree whose namespaces' inits are known: the
// inits (SIGKILL through their pidfds, which a PID used again never
// receives), whose deaths end every process of their namespaces, then
// the supervisor's group and the supervisor.
func killInits(pid int, inits []int) {
	for _, fd := range inits {
		unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0)
	}
	unix.Kill(-pid, unix.SIGKILL)
	unix.Kill(pid, unix.SIGKILL)
}

// killGroup sends sig to the process group pid leads.
func killGroup(pid int, sig syscall.Signal) { unix.Kill(-pid, sig) }

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
	// One read into a buffer of the stack: no stat of the file, nothing
	// allocated (a walk reads every process's).
	var buf [512]byte
	fd, err := unix.Open("/proc/"+strconv.Itoa(pid)+"/stat", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0, false
	}
	n, err := unix.Read(fd, buf[:])
	unix.Close(fd)
	if err != nil || n <= 0 {
		return 0, false
	}
	b := buf[:n]
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

// Pipe returns a new pipe, each end either this process's to wait on
// (poll: non-blocking, in the runtime's poller) or one a child inherits
// (blocking, never in the poller). [os.Pipe] makes both ends
// non-blocking and registers both, and an end handed to a child is made
// blocking again as it goes ([os.File.Fd]): four or five system calls an
// end that nothing waits on, which a run of bwrap has seven of, between
// its call and bwrap's options.
func Pipe(pollR, pollW bool) (r, w *os.File, err error) {
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		return nil, nil, os.NewSyscallError("pipe2", err)
	}
	end := func(fd int, name string, poll bool) *os.File {
		if poll {
			// os.NewFile puts a non-blocking descriptor in the poller;
			// should this fail, a blocking end still works, by a thread
			// of its own.
			unix.SetNonblock(fd, true)
		}
		return os.NewFile(uintptr(fd), name)
	}
	return end(p[0], "|0", pollR), end(p[1], "|1", pollW), nil
}
