package mountinfo_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/cordon-run/cordon/internal/mountinfo"
	"github.com/cordon-run/cordon/internal/testenv"
)

// ofBoth returns the place of path told by statmount(2) and by the table
// of mounts, failing the test unless both tell the same.
func ofBoth(t *testing.T, path string) mountinfo.Place {
	t.Helper()
	a, errA := mountinfo.Of(path)
	b, errB := mountinfo.ByTable(path)
	if errA != nil || errB != nil || a != b {
		t.Errorf("Of(%q) = %+v, %v; by the table %+v, %v: want one place", path, a, errA, b, errB)
	}
	return a
}

func TestAPlaceIsWhereADirectoryLiesInItsFileSystem(t *testing.T) {
	dir := t.TempDir()
	a := ofBoth(t, dir)
	if a.Dev == "" || a.Path == "" || a.Path[0] != '/' {
		t.Fatalf("Of(%s) = %+v", dir, a)
	}
	if root := ofBoth(t, "/"); root.Path != "/" {
		t.Fatalf("Of(/) = %+v; want the root of its file system", root)
	}
	if _, err := mountinfo.Of(dir + "/missing"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Of a path that leads nowhere: %v, want ErrNotExist", err)
	}
	if p, ok := mountinfo.Parse(a.String()); !ok || p != a {
		t.Errorf("Parse(%q) = %+v, %v", a.String(), p, ok)
	}
}

// TestAPlaceIsOfTheDirectoryHeld: the place of an open directory is where
// that directory lies, whatever its path leads to since.
func TestAPlaceIsOfTheDirectoryHeld(t *testing.T) {
	top, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(top, "d")
	if err := os.MkdirAll(filepath.Join(dir, "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	fd, err := unix.Open(filepath.Join(dir, "x"), unix.O_PATH|unix.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	before := ofBoth(t, filepath.Join(dir, "x"))
	if err := os.Rename(dir, filepath.Join(top, "moved")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(t.TempDir(), dir); err != nil {
		t.Fatal(err)
	}
	var tb *mountinfo.Table
	got, err := tb.OfFD(fd)
	want := before
	want.Path = filepath.Join(filepath.Dir(before.Path), "..", "moved", "x")
	want.Path = filepath.Clean(want.Path)
	if err != nil || got != want {
		t.Errorf("OfFD of the directory moved = %+v, %v; want %+v", got, err, want)
	}
	if _, err := mountinfo.Of(filepath.Join(dir, "x")); err == nil {
		t.Errorf("Of a path through a symbolic link at its end's parent told a place")
	}
}

// TestABindMountLiesWhereItsDirectoryLies: a path through a bind mount of
// a directory (its name escaped in the table: a space, a tab) has the
// place of the directory's own path, through a mount whose root is not
// its file system's (top bound on itself). Root alone: the mounts are
// made in a mount namespace of the test's thread alone.
func TestABindMountLiesWhereItsDirectoryLies(t *testing.T) {
	top, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	dir, alias := filepath.Join(top, "a dir"), filepath.Join(top, "alias")
	inner := filepath.Join(dir, "sub\tx")
	for _, d := range []string{dir, inner, alias} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	testenv.WithBind(t, top, top, func() { // a mount namespace of this thread; dir is not bound yet
		before, err := mountinfo.Read() // a table read before the mount
		if err != nil {
			t.Error(err)
			return
		}
		if err := unix.Mount(dir, alias, "", unix.MS_BIND, ""); err != nil {
			t.Errorf("bind mount: %v", err)
			return
		}
		for _, c := range [][2]string{{dir, alias}, {inner, filepath.Join(alias, "sub\tx")}} {
			a := ofBoth(t, c[0])
			b, err := before.Of(c[1])
			if err != nil || a != b || a != ofBoth(t, c[1]) {
				t.Errorf("Of(%q) = %+v; Of(%q) by a table read before its mount = %+v, %v: want one place", c[0], a, c[1], b, err)
			}
		}
		outer := ofBoth(t, top)
		if in := ofBoth(t, filepath.Join(alias, "sub\tx")); !in.Within(outer) {
			t.Errorf("Of(alias/sub) = %+v, not within Of(%s) = %+v", in, top, outer)
		}
	})
}

// TestAPlaceWhereStatmountIsRefused: a seccomp filter that refuses the
// calls it does not know with EPERM (a container runtime's default one)
// refused statmount(2), and every run failed to tell its place. The table
// of mounts tells it then. The filter is installed on a thread of the
// test's own, which ends with it.
func TestAPlaceWhereStatmountIsRefused(t *testing.T) {
	dir := t.TempDir()
	want := ofBoth(t, dir)
	defer mountinfo.UseStatmount()
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread() // never unlocked: the filter ends with the thread
		prog := []unix.SockFilter{
			{Code: unix.BPF_LD | unix.BPF_W | unix.BPF_ABS, K: 0}, // the call's number
			{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, Jt: 0, Jf: 1, K: unix.SYS_STATMOUNT},
			{Code: unix.BPF_RET | unix.BPF_K, K: unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)},
			{Code: unix.BPF_RET | unix.BPF_K, K: unix.SECCOMP_RET_ALLOW},
		}
		if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
			t.Error(err)
			return
		}
		fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
		if err := unix.Prctl(unix.PR_SET_SECCOMP, unix.SECCOMP_MODE_FILTER, uintptr(unsafe.Pointer(&fprog)), 0, 0); err != nil {
			t.Error(err)
			return
		}
		if got, err := mountinfo.Of(dir); err != nil || got != want {
			t.Errorf("Of(%s) with statmount refused = %+v, %v; want %+v", dir, got, err, want)
		}
	}()
	<-done
}
