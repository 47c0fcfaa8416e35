package dirfd

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// TestTypeOfUnknown: an entry whose file system gives no type (DT_UNKNOWN,
// as XFS without ftype or some network file systems do) is looked at, not
// through a symlink, and typed as one with its type given.
func TestTypeOfUnknown(t *testing.T) {
	top := t.TempDir()
	if err := os.Mkdir(filepath.Join(top, "dir"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(top, "file"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("dir", filepath.Join(top, "link")); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mkfifo(filepath.Join(top, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	fd, err := unix.Open(top, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	for name, want := range map[string]fs.FileMode{"dir": fs.ModeDir, "file": 0, "link": fs.ModeSymlink, "fifo": fs.ModeIrregular, "absent": fs.ModeIrregular} {
		if got := typeOf(fd, name, unix.DT_UNKNOWN); got != want {
			t.Errorf("typeOf(%s, DT_UNKNOWN) = %v, want %v", name, got, want)
		}
	}
}
