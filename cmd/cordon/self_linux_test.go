package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/cordon-run/cordon/internal/testenv"
)

// TestNothingWritesCordonsOtherBinaryBoundIntoTheWorkspace: cordon's
// full binary, beside the program that runs (here this test binary, as
// cordon), bound alone into the workspace, is refused as that program
// is: the front end starts it.
func TestNothingWritesCordonsOtherBinaryBoundIntoTheWorkspace(t *testing.T) {
	needBwrap(t)
	if !testenv.PrivateMounts(t) {
		return
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	inst := t.TempDir()
	bin, full := filepath.Join(inst, "cordon"), filepath.Join(inst, fullName)
	for _, f := range []string{bin, full} {
		if err := os.WriteFile(f, data, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	ws := tempWorkspace(t)
	cf := filepath.Join(ws, "cf")
	if err := os.WriteFile(cf, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount(full, cf, "", unix.MS_BIND, ""); err != nil {
		t.Fatalf("bind mount: %v", err)
	}
	t.Cleanup(func() { unix.Unmount(cf, unix.MNT_DETACH) })
	for _, sub := range []string{"bwrap", "landlock"} {
		cmd := cordonProcess(t, os.Environ(), "-w", ws, "--json", "exec", "--substrate", sub, "--", "sh", "-c", "echo x >> cf")
		cmd.Path = bin
		out, err := cmd.Output()
		if code := procExit(err); code != exitRefused || !strings.Contains(string(out), "beside the program this process runs") {
			t.Errorf("%s: exit %d, %s; want a WorkspaceRefused naming the binary beside the program", sub, code, out)
		}
	}
	if after, _ := os.ReadFile(full); !bytes.Equal(after, data) {
		t.Error("cordon's full binary changed")
	}
}
