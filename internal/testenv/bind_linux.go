package testenv

import (
	"os"
	"os/exec"
	"runtime"
	"syscall"
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

// privateMountsEnv marks the test process PrivateMounts started.
const privateMountsEnv = "CORDON_TEST_PRIVATE_MOUNTS"

// PrivateMounts reports whether the test runs in a mount namespace of its
// own. When it does not, it runs the test again in one (a process of
// this test binary, its mounts private) and reports false: a mount the
// test makes must not reach the host, nor the sandboxes of the tests
// running beside it, whose mount watch stops a run a writable mount comes
// into. Root alone (the test is skipped otherwise).
func PrivateMounts(t *testing.T) bool {
	t.Helper()
	if os.Getenv(privateMountsEnv) != "" {
		return true
	}
	if os.Geteuid() != 0 {
		t.Skip("a mount namespace of the test's own, for its mounts, needs root")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^"+t.Name()+"$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), privateMountsEnv+"=1")
	// Go makes every mount of the new namespace private, as unshare(1).
	cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s in a mount namespace of its own: %v\n%s", t.Name(), err, out)
	}
	t.Logf("in a mount namespace of its own:\n%s", out)
	return false
}

// Bind bind-mounts src on dst, made first as an empty directory or file
// like src, until the test ends: for a test that [PrivateMounts] runs in
// a mount namespace of its own.
func Bind(t testing.TB, src, dst string) {
	t.Helper()
	if os.Getenv(privateMountsEnv) == "" {
		t.Fatal("testenv.Bind outside PrivateMounts' namespace would mount on the host")
	}
	st, err := os.Stat(src)
	if err != nil {
		t.Fatal(err)
	}
	if st.IsDir() {
		err = os.Mkdir(dst, 0o755)
	} else {
		err = os.WriteFile(dst, nil, 0o644)
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount(src, dst, "", unix.MS_BIND, ""); err != nil {
		t.Fatalf("bind mount %s on %s: %v", src, dst, err)
	}
	t.Cleanup(func() { unix.Unmount(dst, unix.MNT_DETACH) })
}
