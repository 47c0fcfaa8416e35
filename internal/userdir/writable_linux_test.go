package userdir_test

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/cordon-run/cordon/internal/testenv"
	"github.com/cordon-run/cordon/internal/userdir"
)

// TestWritable: a file this user could write through another name of it —
// its own (whose mode it may change) or one its mode lets it write — and
// none on a read-only mount (a store's hard links), nor another user's it
// may not write.
func TestWritable(t *testing.T) {
	dir := t.TempDir()
	mine := filepath.Join(dir, "mine")
	os.WriteFile(mine, nil, 0o644)
	readOnly := filepath.Join(dir, "read-only")
	os.WriteFile(readOnly, nil, 0o444)
	if !userdir.Writable(mine) || !userdir.Writable(readOnly) {
		t.Errorf("Writable: this user's file %v, its mode 0444 file %v; want both (the owner may change the mode)", userdir.Writable(mine), userdir.Writable(readOnly))
	}
	// Root may write any file of a writable mount; another user not root's.
	if got, want := userdir.Writable("/etc/passwd"), os.Geteuid() == 0; got != want {
		t.Errorf("Writable(/etc/passwd) = %v as uid %d", got, os.Geteuid())
	}
}

// TestWritableNotOnAReadOnlyMount: a file of a read-only mount is not
// writable, by root either (a Nix store's hard links of one content).
func TestWritableNotOnAReadOnlyMount(t *testing.T) {
	if !testenv.PrivateMounts(t) {
		return
	}
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "f"), nil, 0o644)
	store := filepath.Join(t.TempDir(), "store")
	testenv.Bind(t, dir, store)
	if err := unix.Mount("", store, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY, ""); err != nil {
		t.Fatal(err)
	}
	if userdir.Writable(filepath.Join(store, "f")) {
		t.Error("Writable: a file of a read-only mount")
	}
	if !userdir.Writable(filepath.Join(dir, "f")) {
		t.Error("Writable: not the same file by its writable name")
	}
}
