//go:build unix

package workspace

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// escapeLayout builds a workspace next to an "outside" directory holding a
// secret, with every kind of path that tries to leave the workspace or reach
// harness state, and returns the workspace and the outside directory.
func escapeLayout(t *testing.T) (ws *Workspace, root, outside string) {
	t.Helper()
	base := t.TempDir()
	root = filepath.Join(base, "ws")
	outside = filepath.Join(base, "ws-old") // a sibling prefix, too
	for _, d := range []string{root, outside, filepath.Join(root, "sub"), filepath.Join(root, ".efferent"), filepath.Join(root, ".foundry")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write := func(p, s string) {
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(outside, "secret"), "secret\n")
	write(filepath.Join(root, ".efferent", "key"), "key\n")
	write(filepath.Join(root, "sub", "in.txt"), "inside\n")
	links := map[string]string{
		"link-out":     "../ws-old",
		"link-abs":     outside,
		"link-harness": ".efferent",
		"sub/up":       "../../ws-old/secret",
		"loop1":        "loop2",
		"loop2":        "loop1",
		"link-in":      "sub/in.txt",
	}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(root, name)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Link(filepath.Join(outside, "secret"), filepath.Join(root, "hard")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(root, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	ws, err := Open(root)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close() })
	return ws, root, outside
}

// escapeNames are paths that must never reach the outside secret or harness
// state, with the refusal each one gets from a check that resolves it.
var escapeNames = []struct {
	name string
	want error
}{
	{"../ws-old/secret", ErrOutsideWorkspace},
	{"sub/../../ws-old/secret", ErrOutsideWorkspace},
	{"link-out/secret", ErrOutsideWorkspace},
	{"link-abs/secret", ErrOutsideWorkspace},
	{"sub/up", ErrOutsideWorkspace},
	{".efferent/key", ErrHarnessState},
	{".EFFERENT/key", ErrHarnessState},
	{"./sub/../.efferent/key", ErrHarnessState},
	{"link-harness/key", ErrHarnessState},
	{".foundry/new", ErrHarnessState},
	{"loop1/x", ErrSymlinkLoop},
}

// TestFilesEscapeTable replays the escape paths against every method the
// guest file systems use, then checks that nothing outside or in harness
// state changed.
func TestFilesEscapeTable(t *testing.T) {
	ops := map[string]func(ws *Workspace, root, name string) error{
		"open read": func(ws *Workspace, _, n string) error { return closeIf(ws.OpenFile(n, os.O_RDONLY, 0)) },
		"open write": func(ws *Workspace, _, n string) error {
			return closeIf(ws.OpenFile(n, os.O_WRONLY|os.O_TRUNC, 0))
		},
		"open create": func(ws *Workspace, _, n string) error {
			return closeIf(ws.OpenFile(n, os.O_RDWR|os.O_CREATE, 0o600))
		},
		"open excl": func(ws *Workspace, _, n string) error {
			return closeIf(ws.OpenFile(n, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600))
		},
		"info":        func(ws *Workspace, _, n string) error { _, err := ws.Info(n); return err },
		"lstat":       func(ws *Workspace, _, n string) error { _, err := ws.Lstat(n); return err },
		"readlink":    func(ws *Workspace, _, n string) error { _, err := ws.Readlink(n); return err },
		"mkdir":       func(ws *Workspace, _, n string) error { return ws.Mkdir(n, 0o755) },
		"remove":      func(ws *Workspace, _, n string) error { return ws.Remove(n) },
		"rmdir":       func(ws *Workspace, _, n string) error { return ws.RemoveDir(n) },
		"rename from": func(ws *Workspace, _, n string) error { return ws.Rename(n, "sub/stolen") },
		"rename to": func(ws *Workspace, root, n string) error {
			if err := os.WriteFile(filepath.Join(root, "sub", "plant"), []byte("x"), 0o644); err != nil {
				t.Fatal(err)
			}
			return ws.Rename("sub/plant", n)
		},
	}
	for opName, op := range ops {
		for _, c := range escapeNames {
			if c.name == "sub/up" && !followsLast(opName) {
				continue // then "sub/up" is a link inside the workspace
			}
			ws, root, outside := escapeLayout(t)
			err := op(ws, root, c.name)
			if err == nil {
				t.Errorf("%s %q: succeeded, want %v", opName, c.name, c.want)
			} else if !errors.Is(err, c.want) {
				t.Errorf("%s %q: %v, want %v", opName, c.name, err, c.want)
			} else if msg := err.Error(); strings.HasSuffix(msg, ".") || msg != strings.ToLower(msg[:1])+msg[1:] {
				t.Errorf("%s %q: message %q is not lowercase without a trailing period", opName, c.name, msg)
			}
			var pe *PathError
			if err != nil && !errors.As(err, &pe) {
				t.Errorf("%s %q: error %T is not a *PathError", opName, c.name, err)
			}
			assertFile(t, filepath.Join(outside, "secret"), "secret\n")
			assertFile(t, filepath.Join(root, ".efferent", "key"), "key\n")
			if _, err := os.Lstat(filepath.Join(root, ".foundry", "new")); err == nil {
				t.Errorf("%s %q: .foundry/new was created", opName, c.name)
			}
			if entries, _ := os.ReadDir(outside); len(entries) != 1 {
				t.Errorf("%s %q: the outside directory changed: %v", opName, c.name, entries)
			}
		}
	}
}

// followsLast reports whether op follows a symlink in the last component.
func followsLast(op string) bool {
	switch op {
	case "open read", "open write", "open create", "info":
		return true
	}
	return false
}

func closeIf(f *os.File, err error) error {
	if f != nil {
		f.Close()
	}
	return err
}

func assertFile(t *testing.T, p, want string) {
	t.Helper()
	got, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("%s: %v", p, err)
	}
	if string(got) != want {
		t.Fatalf("%s changed: %q, want %q", p, got, want)
	}
}

func TestOpenFileRefusesSpecialFilesAndHardLinks(t *testing.T) {
	ws, _, outside := escapeLayout(t)
	done := make(chan error, 1)
	go func() { done <- closeIf(ws.OpenFile("fifo", os.O_RDONLY, 0)) }()
	select {
	case err := <-done:
		if !errors.Is(err, ErrNotRegular) {
			t.Errorf("open fifo: %v, want ErrNotRegular", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("opening a FIFO blocked")
	}
	for _, flag := range []int{os.O_WRONLY, os.O_RDWR, os.O_WRONLY | os.O_TRUNC, os.O_WRONLY | os.O_APPEND} {
		err := closeIf(ws.OpenFile("hard", flag, 0))
		if !errors.Is(err, ErrHardLink) {
			t.Errorf("open hard link with flags %#x: %v, want ErrHardLink", flag, err)
		}
	}
	assertFile(t, filepath.Join(outside, "secret"), "secret\n")
	// Reading through an existing hard link is allowed (the guard confines
	// names, not inodes; see Limitations).
	f, err := ws.OpenFile("hard", os.O_RDONLY, 0)
	if err != nil {
		t.Fatalf("read hard link: %v", err)
	}
	f.Close()
}

func TestOpenFileInside(t *testing.T) {
	ws, root, _ := escapeLayout(t)
	f, err := ws.OpenFile("link-in", os.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	n, _ := f.Read(buf)
	f.Close()
	if string(buf[:n]) != "inside\n" {
		t.Fatalf("read through an inside link: %q", buf[:n])
	}
	f, err = ws.OpenFile("sub/new.txt", os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o640)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("made")
	f.Close()
	assertFile(t, filepath.Join(root, "sub", "new.txt"), "made")
	if err := closeIf(ws.OpenFile("link-in", os.O_WRONLY|syscall.O_NOFOLLOW, 0)); err == nil {
		t.Fatal("O_NOFOLLOW opened a symlink")
	}
	if err := ws.Mkdir("sub/d", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := ws.Rename("sub/new.txt", "sub/d/moved.txt"); err != nil {
		t.Fatal(err)
	}
	assertFile(t, filepath.Join(root, "sub", "d", "moved.txt"), "made")
	if target, err := ws.Readlink("link-out"); err != nil || target != "../ws-old" {
		t.Fatalf("readlink: %q %v", target, err)
	}
	fi, err := ws.Lstat("link-out")
	if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
		t.Fatalf("lstat link-out: %v %v", fi, err)
	}
	if err := ws.Remove("sub/d/moved.txt"); err != nil {
		t.Fatal(err)
	}
	if err := ws.RemoveDir("sub/d"); err != nil {
		t.Fatal(err)
	}
	// Removing a link removes the link, not what it points to.
	if err := ws.Remove("link-out"); err != nil {
		t.Fatal(err)
	}
}

func TestReadDirHidesHarnessState(t *testing.T) {
	ws, _, _ := escapeLayout(t)
	for _, name := range []string{".", "./sub/.."} {
		d, err := ws.OpenFile(name, os.O_RDONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		entries, err := ws.ReadDir(d, 0)
		d.Close()
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if _, h := ws.isHarness(e.Name()); h {
				t.Errorf("listing %q shows harness state %q", name, e.Name())
			}
		}
		if len(entries) == 0 {
			t.Errorf("listing %q is empty", name)
		}
	}
}

// wazero passes a creation mode with every open; openat2 refuses a mode
// without O_CREAT, so OpenFile must drop it.
func TestOpenFileModeWithoutCreate(t *testing.T) {
	ws, _, _ := escapeLayout(t)
	f, err := ws.OpenFile("sub/in.txt", os.O_RDONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
}
