package placeholder

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// TestPutLooksAfterTheMove: a directory placeholder whose ctime still
// reads as when it was recorded is put away without a look first (see
// put), yet one that holds an entry all the same — written within the
// file system's clock tick of the recording — comes back with it: the look
// after the move decides. An empty one goes to the reuse directory.
func TestPutLooksAfterTheMove(t *testing.T) {
	top := t.TempDir()
	ws, reuse := filepath.Join(top, "ws"), filepath.Join(top, "reuse")
	for _, d := range []string{ws, reuse} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	dfd, err := unix.Open(ws, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(dfd)
	bin := &putAway{dir: reuse, room: 4, uid: uint32(os.Geteuid())}
	// made is a directory placeholder as recorded once fill has run.
	made := func(name string, fill func(p string)) (unix.Stat_t, Entry) {
		p := filepath.Join(ws, name)
		if err := os.Mkdir(p, 0o755); err != nil {
			t.Fatal(err)
		}
		fill(p)
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			t.Fatal(err)
		}
		return st, Entry{Path: p, Dir: true, Dev: uint64(st.Dev), Ino: st.Ino, Ctime: st.Ctim.Nano()}
	}

	st, e := made("filled", func(p string) {
		if err := os.WriteFile(filepath.Join(p, "hook"), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	})
	if done, err := bin.put(dfd, "filled", &st, e); !done || err != nil {
		t.Fatalf("put of a filled placeholder = %v, %v; want done, nil", done, err)
	}
	if data, err := os.ReadFile(filepath.Join(e.Path, "hook")); err != nil || string(data) != "#!/bin/sh\n" {
		t.Fatalf("the entry written into the placeholder is not where it was: %q, %v", data, err)
	}
	if names, _ := os.ReadDir(reuse); len(names) != 0 {
		t.Fatalf("the reuse directory holds %v; a filled placeholder must come back", names)
	}

	st, e = made("empty", func(string) {})
	if done, err := bin.put(dfd, "empty", &st, e); !done || err != nil {
		t.Fatalf("put of an empty placeholder = %v, %v; want done, nil", done, err)
	}
	if _, err := os.Lstat(e.Path); !os.IsNotExist(err) {
		t.Fatalf("the empty placeholder is still in the workspace: %v", err)
	}
	if names, _ := os.ReadDir(reuse); len(names) != 1 {
		t.Fatalf("the reuse directory holds %v; want the one empty placeholder", names)
	}
}

// TestEmptyDir reads directories of every size to their end.
func TestEmptyDir(t *testing.T) {
	top := t.TempDir()
	for _, n := range []int{0, 1, 2, 100} {
		d := filepath.Join(top, "d", string(rune('a'+n%26))+string(rune('0'+n/26)))
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		for i := range n {
			if err := os.WriteFile(filepath.Join(d, "a-rather-long-name-that-fills-the-buffer-"+string(rune('A'+i%26))+string(rune('a'+i/26))), nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if got := emptyDir(unix.AT_FDCWD, d); got != (n == 0) {
			t.Errorf("emptyDir of a directory of %d entries = %v", n, got)
		}
	}
	f := filepath.Join(top, "file")
	if err := os.WriteFile(f, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(top, "d"), filepath.Join(top, "link")); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{f, filepath.Join(top, "link"), filepath.Join(top, "absent")} {
		if emptyDir(unix.AT_FDCWD, p) {
			t.Errorf("emptyDir(%s) = true; only a directory, not through a link, is", p)
		}
	}
}
