package egress

import (
	"os"
	"os/signal"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// streamSocket reports whether fd is a connected stream socket of
// AF_UNIX, AF_INET or AF_INET6: not a listening one, and one with a peer.
func streamSocket(fd int) bool {
	dom, err1 := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_DOMAIN)
	typ, err2 := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TYPE)
	acc, err3 := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_ACCEPTCONN)
	if err1 != nil || err2 != nil || err3 != nil || typ != unix.SOCK_STREAM || acc != 0 ||
		dom != unix.AF_UNIX && dom != unix.AF_INET && dom != unix.AF_INET6 {
		return false
	}
	_, err := unix.Getpeername(fd)
	return err == nil
}

// undumpable makes this process not dumpable (PR_SET_DUMPABLE 0).
func undumpable() error { return unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0) }

// setAS sets this process's RLIMIT_AS, soft and hard, to n bytes.
func setAS(n uint64) error {
	return unix.Setrlimit(unix.RLIMIT_AS, &unix.Rlimit{Cur: n, Max: n})
}

// dieOf ends this process by sig, as the command it ran ended: the
// signal's action set back to the default first — also for the signals
// Go's runtime keeps a handler for whatever signal.Reset says (SIGSEGV,
// SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGSYS), which would otherwise print
// a crash of this program's and exit 2.
func dieOf(sig syscall.Signal) {
	signal.Reset(sig)
	var dfl [4]uint64 // a struct sigaction of zeros: SIG_DFL, no flags, no mask
	unix.RawSyscall6(unix.SYS_RT_SIGACTION, uintptr(sig), uintptr(unsafe.Pointer(&dfl)), 0, 8, 0, 0)
	var set unix.Sigset_t
	set.Val[(int(sig)-1)/64] |= 1 << ((uint(sig) - 1) % 64)
	unix.RawSyscall6(unix.SYS_RT_SIGPROCMASK, unix.SIG_UNBLOCK, uintptr(unsafe.Pointer(&set)), 0, 8, 0, 0)
	unix.Tgkill(os.Getpid(), unix.Gettid(), sig)
	unix.Kill(os.Getpid(), sig)
	select {}
}
