//go:build unix

package dirfd

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestNoFollow plants symlinks to a folder outside and checks that no
// operation goes through them, and that RemoveAll removes the link, never
// what it points at.
func TestNoFollow(t *testing.T) {
	top := t.TempDir()
	outside := filepath.Join(top, "outside")
	os.MkdirAll(outside, 0o755)
	os.WriteFile(filepath.Join(outside, "keep"), []byte("keep"), 0o644)
	root := filepath.Join(top, "root")
	os.MkdirAll(filepath.Join(root, "tree", "sub"), 0o755)
	os.Symlink(outside, filepath.Join(root, "link"))
	os.Symlink(outside, filepath.Join(root, "tree", "sub", "link"))
	os.Symlink(filepath.Join(outside, "keep"), filepath.Join(root, "filelink"))

	d, err := Open(root)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if _, err := d.OpenDir("link", false, 0); err == nil {
		t.Error("OpenDir followed a symlink")
	}
	if _, err := d.OpenPath("link/x", true, 0o755); err == nil {
		t.Error("OpenPath followed a symlink")
	}
	if _, _, err := d.ReadFile("filelink", 1<<20); err == nil {
		t.Error("ReadFile followed a symlink")
	}
	if err := d.WriteFile("filelink", []byte("x"), 0o644); err == nil {
		t.Error("WriteFile wrote through a symlink")
	}
	for _, name := range []string{"..", ".", "a/b", ""} {
		if _, err := d.OpenDir(name, true, 0o755); !errors.Is(err, ErrBadName) {
			t.Errorf("OpenDir(%q) = %v, want ErrBadName", name, err)
		}
	}
	if err := d.RemoveAll("tree"); err != nil {
		t.Fatal(err)
	}
	if err := d.RemoveAll("link"); err != nil {
		t.Fatal(err)
	}
	if data, err := os.ReadFile(filepath.Join(outside, "keep")); err != nil || string(data) != "keep" {
		t.Fatalf("RemoveAll reached outside: %q, %v", data, err)
	}
	if _, err := os.Lstat(filepath.Join(root, "tree")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("tree not removed: %v", err)
	}
}

func TestWriteReadRename(t *testing.T) {
	d, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	sub, err := d.OpenPath("a/b", true, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	if err := sub.WriteFile("f", []byte("data"), 0o555); err != nil {
		t.Fatal(err)
	}
	if err := sub.WriteFile("f", []byte("again"), 0o444); err == nil {
		t.Error("WriteFile replaced an existing file")
	}
	data, mode, err := sub.ReadFile("f", 4)
	if err != nil || string(data) != "data" || mode.Perm() != 0o555 {
		t.Fatalf("ReadFile = %q %v %v", data, mode, err)
	}
	if _, _, err := sub.ReadFile("f", 3); err == nil {
		t.Error("ReadFile read past its limit")
	}
	if err := sub.Rename("f", d, "g"); err != nil {
		t.Fatal(err)
	}
	if ok, err := d.Exists("g"); !ok || err != nil {
		t.Errorf("Exists(g) = %v, %v", ok, err)
	}
}
