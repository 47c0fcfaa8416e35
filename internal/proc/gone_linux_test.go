package proc

import (
	"os"
	"os/exec"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestGone: the channel closes when the process behind the pidfd dies,
// not before; stop ends the wait without touching the caller's pidfd.
func TestGone(t *testing.T) {
	start := func() (*exec.Cmd, int) {
		cmd := exec.Command("sleep", "30")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		fd, err := unix.PidfdOpen(cmd.Process.Pid, 0)
		if err != nil {
			t.Skipf("no pidfd here: %v", err)
		}
		t.Cleanup(func() { unix.Close(fd) })
		return cmd, fd
	}

	cmd, fd := start()
	gone, stop := Gone(fd)
	defer stop()
	select {
	case <-gone:
		t.Fatal("Gone closed while the process lives")
	case <-time.After(100 * time.Millisecond):
	}
	cmd.Process.Kill()
	select {
	case <-gone:
	case <-time.After(5 * time.Second):
		t.Fatal("Gone did not close within 5s of the process's death")
	}

	// Stopped, or never waited for, it stays open: only a death seen
	// closes it.
	cmd, fd = start()
	gone, stop = Gone(fd)
	stop()
	select {
	case <-gone:
		t.Fatal("stop closed the channel of a process still alive")
	case <-time.After(100 * time.Millisecond):
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err != nil {
		t.Fatalf("the caller's pidfd was closed: %v", err)
	}
	if err := cmd.Process.Signal(unix.Signal(0)); err != nil {
		t.Fatalf("the process is gone after stop: %v", err)
	}
	// A pidfd the poller does not wait on (a blocking one here; one the
	// poller refuses, as when the user's epoll watches are spent, alike)
	// is not taken for a death.
	_, fd = start()
	blocking, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	gone, stop = goneOf(os.NewFile(uintptr(blocking), "pidfd"))
	defer stop()
	select {
	case <-gone:
		t.Fatal("Gone closed for a live process it could not wait on")
	case <-time.After(100 * time.Millisecond):
	}

	if gone, stop := Gone(-1); gone != nil {
		stop()
		t.Fatal("Gone(-1) returned a channel")
	}
}
