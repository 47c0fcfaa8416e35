package runtime_test

import (
	"os"
	"os/exec"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// privateMountsEnv marks the test process privateMounts started.
const privateMountsEnv = "CORDON_TEST_PRIVATE_MOUNTS"

// privateMounts reports whether the test runs in a mount namespace of its
// own. When it does not, it runs the test again in one (a process of
// this test binary, its mounts private) and reports false: a mount the
// test makes must not reach the sandboxes of the tests running beside it,
// whose mount watch stops a run a writable mount comes into.
func privateMounts(t *testing.T) bool {
	t.Helper()
	if os.Getenv(privateMountsEnv) != "" {
		return true
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

// mountTmpfs mounts a small tmpfs on dir until the test ends (root, in
// the namespace of privateMounts).
func mountTmpfs(t *testing.T, dir string) {
	t.Helper()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size=16m,mode=0755"); err != nil {
		t.Fatalf("mount a tmpfs: %v", err)
	}
	t.Cleanup(func() { unix.Unmount(dir, unix.MNT_DETACH) })
}

// exchange swaps the names a and b in one rename (RENAME_EXCHANGE): no
// moment lacks either.
func exchange(t *testing.T, a, b string) {
	t.Helper()
	if err := unix.Renameat2(unix.AT_FDCWD, a, unix.AT_FDCWD, b, unix.RENAME_EXCHANGE); err != nil {
		t.Fatalf("renameat2 %s %s RENAME_EXCHANGE: %v", a, b, err)
	}
}
