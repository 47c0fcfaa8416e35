package mountinfo_test

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/cordon-run/cordon/internal/mountinfo"
)

func TestAPlaceIsWhereADirectoryLiesInItsFileSystem(t *testing.T) {
	dir := t.TempDir()
	a, ok := mountinfo.Of(dir)
	if !ok {
		t.Fatalf("Of(%s): no place", dir)
	}
	if a.Dev == "" || a.Path == "" || a.Path[0] != '/' {
		t.Fatalf("Of(%s) = %+v", dir, a)
	}
	root, ok := mountinfo.Of("/")
	if !ok || root.Path != "/" {
		t.Fatalf("Of(/) = %+v, %v; want the root of its file system", root, ok)
	}
	if _, ok := mountinfo.Of(dir + "/missing"); ok {
		t.Errorf("Of a path that leads nowhere has a place")
	}
}

// TestABindMountLiesWhereItsDirectoryLies: a path through a bind mount of
// a directory (its name escaped in the table: a space, a tab) has the
// place of the directory's own path. Root alone: the mount is made in a
// mount namespace of the test's thread alone, which ends with it.
func TestABindMountLiesWhereItsDirectoryLies(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("a bind mount, in a mount namespace of the test's thread alone, needs root")
	}
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
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		if err := unix.Unshare(unix.CLONE_FS | unix.CLONE_NEWNS); err != nil {
			t.Errorf("unshare: %v", err)
			return
		}
		if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
			t.Errorf("private mounts: %v", err)
			return
		}
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
			a, okA := mountinfo.Of(c[0])
			b, okB := before.Of(c[1])
			if !okA || !okB || a != b {
				t.Errorf("Of(%q) = %+v %v, Of(%q) = %+v %v: want one place", c[0], a, okA, c[1], b, okB)
			}
		}
		outer, _ := mountinfo.Of(top)
		if in, _ := mountinfo.Of(filepath.Join(alias, "sub\tx")); !in.Within(outer) {
			t.Errorf("Of(alias/sub) = %+v, not within Of(%s) = %+v", in, top, outer)
		}
	}()
	<-done
}
