package mountinfo_test

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/cordon-run/cordon/internal/mountinfo"
	"github.com/cordon-run/cordon/internal/testenv"
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
	var before *mountinfo.Table
	testenv.WithBind(t, top, top, func() { // a mount namespace of this thread; dir is not bound yet
		var err error
		if before, err = mountinfo.Read(); err != nil { // a table read before the mount
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
	})
}
