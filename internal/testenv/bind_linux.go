package testenv

import (
	"os"
	"runtime"
	"testing"

	"golang.org/x/sys/unix"
)

// WithBind runs fn on a thread of its own, in a mount namespace of its
// own where dir is bind-mounted on alias (an existing directory), and
// returns when fn has. The mount is that thread's alone and goes with it:
// the thread is never unlocked, so it ends with fn's goroutine, and the
// host's mounts are never touched. fn runs on another goroutine than the
// test's: it reports with t.Error, never t.Fatal. Root alone (the test is
// skipped otherwise: an unprivileged process cannot make a mount
// namespace for one thread of many).
func WithBind(t testing.TB, dir, alias string, fn func()) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("a bind mount, in a mount namespace of the test's thread alone, needs root")
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread()
		if err := unix.Unshare(unix.CLONE_FS | unix.CLONE_NEWNS); err != nil {
			t.Errorf("unshare: %v", err)
			return
		}
		if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
			t.Errorf("private mounts: %v", err)
			return
		}
		if err := unix.Mount(dir, alias, "", unix.MS_BIND, ""); err != nil {
			t.Errorf("bind mount: %v", err)
			return
		}
		fn()
	}()
	<-done
}
