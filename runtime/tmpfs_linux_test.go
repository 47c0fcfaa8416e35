package runtime_test

import (
	"testing"

	"golang.org/x/sys/unix"
)

// mountTmpfs mounts a small tmpfs on dir until the test ends (root, in
// the namespace of testenv.PrivateMounts).
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
