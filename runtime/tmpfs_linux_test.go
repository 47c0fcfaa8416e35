package runtime_test

import (
	"testing"

	"golang.org/x/sys/unix"
)

// mountTmpfs mounts a small tmpfs on dir until the test ends (root only).
func mountTmpfs(t *testing.T, dir string) {
	t.Helper()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size=16m,mode=0755"); err != nil {
		t.Fatalf("mount a tmpfs: %v", err)
	}
	t.Cleanup(func() { unix.Unmount(dir, unix.MNT_DETACH) })
}
