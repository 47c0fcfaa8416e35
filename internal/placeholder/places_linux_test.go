package placeholder_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/cordon-run/cordon/internal/mountinfo"
	"github.com/cordon-run/cordon/internal/placeholder"
	"github.com/cordon-run/cordon/internal/testenv"
)

// TestADirectoryNamedDeletedHasItsPlace: a directory named "x (deleted)"
// — which a run's command can make inside its own workspace — was taken
// for a deleted one (its path in /proc ends so): no place, and a
// workspace with no place was apart from every record. A run or a change
// in it, through a bind mount of a directory inside the running
// workspace, started beside that run. Deleted is an unlinked directory.
func TestADirectoryNamedDeletedHasItsPlace(t *testing.T) {
	sc := newBindScene(t, "ws/sub/proj")
	state, ws, sub, alias := sc.state, sc.ws, sc.sub, sc.alias
	sc.beside(t, ws, func() { // the host's bind mount of ws/sub (a devcontainer's, say)
		// The command of the run of ws, inside ws only.
		if err := os.Rename(filepath.Join(sub, "proj"), filepath.Join(sub, "proj (deleted)")); err != nil {
			t.Error(err)
			return
		}
		if err := os.Symlink("proj (deleted)", filepath.Join(sub, "proj")); err != nil {
			t.Error(err)
			return
		}
		// The user starts a run in alias/proj; the workspace is canonical.
		canon, err := filepath.EvalSymlinks(filepath.Join(alias, "proj"))
		if err != nil {
			t.Error(err)
			return
		}
		if _, err := mountinfo.Of(canon); !errors.Is(err, mountinfo.ErrNoPlace) {
			t.Logf("Of(%q) = %v", canon, err)
		}
		refusedBeside(t, state, canon, ws)
	})
}

// TestARecordTooLongForItsPlaceIsPlacedByItsPath: a record is read to
// maxRecord (8192) bytes, but a path near PATH_MAX and its place exceed
// it: the place read was cut short — a valid place, another directory's —
// and a bind mount of a directory inside the workspace lay apart from it.
// Such a record holds no place, and is placed by its path.
func TestARecordTooLongForItsPlaceIsPlacedByItsPath(t *testing.T) {
	top := layout(t)
	state, alias := filepath.Join(top, "state"), filepath.Join(top, "alias")
	if err := os.Mkdir(alias, 0o755); err != nil {
		t.Fatal(err)
	}
	p, err := mountinfo.Of(top)
	if err != nil {
		t.Fatal(err)
	}
	off := len(p.Path) - len(top)
	// L + 2 + len(dev) + L + off > 8192, L+2 <= 4095
	L := 4093
	if 2*L+2+len(p.Dev)+off <= 8192 {
		t.Skipf("dev %q, offset %d: no truncation at L=%d", p.Dev, off, L)
	}
	fd, err := unix.Open(top, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	ws := top
	for len(ws) < L {
		n := min(200, L-len(ws)-1)
		if rest := L - len(ws) - 1 - n; rest > 0 && rest < 10 {
			n -= 10
		}
		name := strings.Repeat("d", n)
		fd, ws = descend(t, fd, name), ws+"/"+name
	}
	defer unix.Close(fd)
	if len(ws) != L {
		t.Fatalf("len %d", len(ws))
	}
	if err := unix.Mkdirat(fd, "s", 0o755); err != nil {
		t.Fatal(err)
	}
	sc := bindScene{top: top, state: state, ws: ws, sub: ws + "/s", alias: alias}
	sc.beside(t, ws, func() {
		b, err := placeholder.Begin(state, alias)
		if !errors.Is(err, placeholder.ErrNested) {
			t.Errorf("a run of %s (bind of ws/s) beside a run of ws (%d bytes of path): %v, want ErrNested", alias, len(ws), err)
		}
		if err == nil {
			b.End()
		}
	})
}

// TestNoProcFailsTheLookClosed: an ENOENT of /proc's machinery (no
// /proc/thread-self: a chroot or a sandbox without /proc) was taken for a
// path that leads nowhere: Running's own place was none, and a run of a
// bind mount of a directory inside the tree was not reported.
func TestNoProcFailsTheLookClosed(t *testing.T) {
	sc := newBindScene(t)
	state, ws, alias := sc.state, sc.ws, sc.alias
	sc.beside(t, alias, func() {
		if got, err := placeholder.Running(state, ws); got == "" || err != nil {
			t.Errorf("with /proc: Running(ws) = %q, %v", got, err)
		}
		if err := unix.Mount("none", "/proc", "tmpfs", 0, ""); err != nil { // this thread's namespace only
			t.Error(err)
			return
		}
		if got, err := placeholder.Running(state, ws); got == "" && err == nil {
			t.Errorf("without /proc: Running(ws) = %q, %v beside a run of %s (= ws/sub); want it or an error", got, err, alias)
		}
	})
}

// TestOnePathInTwoMountNamespacesIsTwoDirectories: one path is one
// workspace only within one mount namespace. A record of the same path was
// the same workspace before places were compared, though both places were
// known and said the other lies inside it.
func TestOnePathInTwoMountNamespacesIsTwoDirectories(t *testing.T) {
	top := layout(t)
	state, ws := filepath.Join(top, "state"), filepath.Join(top, "ws")
	sub := filepath.Join(ws, "sub")
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	a, err := placeholder.Begin(state, ws) // the host's namespace
	if err != nil {
		t.Fatal(err)
	}
	defer a.End()
	testenv.WithBind(t, sub, ws, func() { // another namespace, where ws is ws/sub
		b, err := placeholder.Begin(state, ws)
		if !errors.Is(err, placeholder.ErrNested) {
			t.Errorf("a run of ws (= host's ws/sub here) beside the host's run of ws: %v, want ErrNested", err)
		}
		if err == nil {
			b.End()
		}
	})
}

// TestARunMovedByTheUserIsFoundWhereItIs: a record kept the place its
// workspace had when the run began; when the user renamed a directory
// above it (`mv ~/p ~/q`) meanwhile, a run of the directory that now
// encloses it started beside it, and Running did not report it. Where
// the record's path no longer leads to the directory its process holds,
// that directory is looked at through the process's descriptor.
func TestARunMovedByTheUserIsFoundWhereItIs(t *testing.T) {
	top := layout(t)
	state := filepath.Join(top, "state")
	ws := filepath.Join(top, "p", "ws")
	if err := os.MkdirAll(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	a, err := placeholder.Begin(state, ws)
	if err != nil {
		t.Fatal(err)
	}
	defer a.End()
	q := filepath.Join(top, "q")
	if err := os.Rename(filepath.Join(top, "p"), q); err != nil {
		t.Fatal(err)
	}
	if got, err := placeholder.Running(state, q); got != ws || err != nil {
		t.Errorf("Running(%s) beside the run of %s (moved to q/ws) = %q, %v; want it", q, ws, got, err)
	}
	b, err := placeholder.Begin(state, q)
	if !errors.Is(err, placeholder.ErrNested) {
		t.Errorf("a run of %s beside a run of its q/ws (moved since): %v, want ErrNested", q, err)
	}
	if err == nil {
		b.End()
	}
}
