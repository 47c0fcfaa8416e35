package placeholder_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cordon-run/cordon/internal/placeholder"
	"github.com/cordon-run/cordon/internal/testenv"
)

// TestAPathToTheSameWorkspaceIsTheSameWorkspace: the registry of runs
// names a workspace by its directory, not by the path to it. A presence
// recorded by a bind mount's path (a devcontainer's /workspaces/x, a
// server started on /mnt/proj) was not read by a run of the workspace's
// own path, which kept its sets and took its trust lock elsewhere: the
// hand-over of a submodule from a file tool to a run went unseen.
func TestAPathToTheSameWorkspaceIsTheSameWorkspace(t *testing.T) {
	top := layout(t)
	state, ws := filepath.Join(top, "state"), filepath.Join(top, "ws")
	alias := filepath.Join(top, "alias")
	if err := os.Mkdir(alias, 0o755); err != nil {
		t.Fatal(err)
	}
	testenv.WithBind(t, ws, alias, func() {
		if a, b := placeholder.Key(alias), placeholder.Key(ws); a != b {
			t.Errorf("Key(%s) = %s, Key(%s) = %s: two names for one workspace", alias, a, ws, b)
		}
		p, err := placeholder.Present(state, alias, -1)
		if err != nil {
			t.Error(err)
			return
		}
		defer p.Leave()
		if err := p.Keep([]byte(`{"Q":"tool"}`)); err != nil {
			t.Error(err)
			return
		}
		s, err := placeholder.Begin(state, ws)
		if err != nil {
			t.Error(err)
			return
		}
		defer s.End()
		if kept, all, err := s.OthersKept(nil); err != nil || len(kept) != 1 || len(all) != 1 || string(kept[0]) != `{"Q":"tool"}` {
			t.Errorf("a run of %s beside a presence of %s (the same directory): OthersKept = %q, %q, %v; want the presence's set", ws, alias, kept, all, err)
		}
		g, err := placeholder.Watch(state, alias, -1)
		if err != nil || g == nil {
			t.Errorf("Watch = %v, %v", g, err)
			return
		}
		defer g.Release()
		if err := s.Keep([]byte(`{"P":"run"}`)); err != nil {
			t.Error(err)
			return
		}
		if _, all, err := g.Kept(p); err != nil || len(all) != 1 || string(all[0]) != `{"P":"run"}` {
			t.Errorf("a change of %s beside a run of %s (the same directory): Kept = %q, %v; want the run's set", alias, ws, all, err)
		}
	})
}

// TestABindMountOfANestedDirectoryIsNested: which workspace encloses which
// was told by their paths alone. A run of ws and a run (or a file tool's
// change) of a bind mount of ws/sub elsewhere went on at once — no path of
// the one leads through the other — each keeping its set under its own
// trust lock: the nested run's command could write what the enclosing
// run trusted, and the other way round. They lie one inside the other in
// their file system, and are refused as runs of nested workspaces are.
func TestABindMountOfANestedDirectoryIsNested(t *testing.T) {
	top := layout(t)
	state, ws := filepath.Join(top, "state"), filepath.Join(top, "ws")
	sub, alias, same := filepath.Join(ws, "sub"), filepath.Join(top, "alias"), filepath.Join(top, "same")
	for _, d := range []string{sub, alias, same} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	testenv.WithBind(t, sub, alias, func() {
		if err := unix.Mount(ws, same, "", unix.MS_BIND, ""); err != nil {
			t.Errorf("bind mount: %v", err)
			return
		}
		refused := func(what string, err error) {
			t.Helper()
			if !errors.Is(err, placeholder.ErrNested) {
				t.Errorf("%s: %v, want ErrNested", what, err)
			}
		}
		for _, c := range []struct{ first, second string }{{ws, alias}, {alias, ws}, {same, alias}} {
			s, err := placeholder.Begin(state, c.first)
			if err != nil {
				t.Error(err)
				return
			}
			second, err := placeholder.Begin(state, c.second)
			refused(fmt.Sprintf("a run of %s beside a run of %s", c.second, c.first), err)
			if err == nil {
				second.End()
			}
			g, err := placeholder.Watch(state, c.second, -1)
			if err != nil {
				t.Error(err)
				return
			}
			_, _, err = g.Kept(nil)
			g.Release()
			refused(fmt.Sprintf("a change of %s beside a run of %s", c.second, c.first), err)
			if got, err := placeholder.Running(state, ws); got != c.first || err != nil {
				t.Errorf("Running(%s) beside a run of %s = %q, %v", ws, c.first, got, err)
			}
			s.End()

			p, err := placeholder.Present(state, c.first, -1)
			if err != nil {
				t.Error(err)
				return
			}
			second, err = placeholder.Begin(state, c.second)
			refused(fmt.Sprintf("a run of %s beside a change of %s", c.second, c.first), err)
			if err == nil {
				second.End()
			}
			p.Leave()
		}
		// Two paths to one directory are one workspace: its runs go on at
		// once.
		a, err := placeholder.Begin(state, ws)
		if err != nil {
			t.Error(err)
			return
		}
		defer a.End()
		b, err := placeholder.Begin(state, same)
		if err != nil {
			t.Errorf("a run of %s beside a run of %s (one directory): %v", same, ws, err)
			return
		}
		b.End()
		if got, err := placeholder.Running(state, same); got != ws || err != nil {
			t.Errorf("Running(%s) beside a run of %s (one directory) = %q, %v", same, ws, got, err)
		}
		a.End()

		// An older cordon's record holds the path alone: it is placed
		// where its path leads now.
		old := filepath.Join(state, "runs", "active", "r-00000000000000aa")
		f, err := os.OpenFile(old, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			t.Error(err)
			return
		}
		defer os.Remove(old)
		defer f.Close()
		if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
			t.Error(err)
			return
		}
		if _, err := f.WriteString(ws); err != nil {
			t.Error(err)
			return
		}
		b, err = placeholder.Begin(state, alias)
		if !errors.Is(err, placeholder.ErrNested) {
			t.Errorf("a run of %s beside an older cordon's run of %s: %v, want ErrNested", alias, ws, err)
		}
		if err == nil {
			b.End()
		}
	})
}

// deepen makes a chain of directories of about n bytes of path in dir, as
// a run's command could, and returns the last one, open.
func deepen(t *testing.T, dir string, n int) int {
	t.Helper()
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	name := strings.Repeat("d", 250)
	for l := 0; l < n; l += len(name) + 1 {
		fd = descend(t, fd, name)
	}
	return fd
}

// descend makes the directory name in the directory open as fd, opens it
// and closes fd: a step of a chain of paths longer than a path may be.
func descend(t *testing.T, fd int, name string) int {
	t.Helper()
	if err := unix.Mkdirat(fd, name, 0o755); err != nil {
		t.Fatal(err)
	}
	next, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	unix.Close(fd)
	if err != nil {
		t.Fatal(err)
	}
	return next
}

// TestANestedBindMountMovedDeepIsStillNested: the source of a bind mount
// of ws/sub, moved by a run of ws to the end of a chain of directories a
// mebibyte long, made the mount's line in the table of mounts longer than
// the table's reader read: its place could not be told, and that was
// taken for "apart" — a run and a file tool's change of the alias went on
// beside the run of ws. A place is told by statmount(2) (or the table,
// read whole), and one that cannot be told fails the look.
func TestANestedBindMountMovedDeepIsStillNested(t *testing.T) {
	sc := newBindScene(t)
	state, ws, alias := sc.state, sc.ws, sc.alias
	sc.beside(t, ws, func() {
		deep := deepen(t, ws, 1<<20+4096) // the run's command, inside ws
		defer unix.Close(deep)
		wsfd, err := unix.Open(ws, unix.O_RDONLY|unix.O_DIRECTORY, 0)
		if err != nil {
			t.Error(err)
			return
		}
		defer unix.Close(wsfd)
		if err := unix.Renameat(wsfd, "sub", deep, "sub"); err != nil {
			t.Error(err)
			return
		}
		refusedBeside(t, state, alias, ws)
	})
}

// TestAPlaceIsOfTheDirectoryLocked: a run's place was told from its path,
// looked up again after the run had opened and locked its directory; a
// command of an enclosing run that swapped a directory on the way for a
// symbolic link meanwhile moved it elsewhere ("apart"), and the nested
// run started. The place is told from the directory locked.
func TestAPlaceIsOfTheDirectoryLocked(t *testing.T) {
	sc := newBindScene(t, "ws/sub/x/deeper", "outside/deeper")
	top, state, ws, sub, alias := sc.top, sc.state, sc.ws, sc.sub, sc.alias
	sc.beside(t, ws, func() {
		hold, err := os.Open(top)
		if err != nil {
			t.Error(err)
			return
		}
		unix.Flock(int(hold.Fd()), unix.LOCK_EX) // holds the look above the workspace a while
		swapped := make(chan error, 1)
		go func() { // the command of the run of ws
			time.Sleep(300 * time.Millisecond)
			err := os.Rename(filepath.Join(sub, "x"), filepath.Join(sub, "x.real"))
			if err == nil {
				err = os.Symlink(filepath.Join(top, "outside"), filepath.Join(sub, "x"))
			}
			hold.Close()
			swapped <- err
		}()
		b, err := placeholder.Begin(state, filepath.Join(alias, "x", "deeper"))
		if serr := <-swapped; serr != nil {
			t.Error(serr)
		}
		if !errors.Is(err, placeholder.ErrNested) {
			t.Errorf("a run of alias/x/deeper (opened as ws/sub/x/deeper) beside a run of ws: %v, want ErrNested", err)
		}
		if err == nil {
			b.End()
		}
	})
}

// A bindScene is a workspace ws with a directory sub inside it, bound on
// alias beside it (in a mount namespace of one thread: [testenv.WithBind]),
// and the state directory of their runs.
type bindScene struct{ top, state, ws, sub, alias string }

// newBindScene makes the directories of a bindScene, and more (relative to
// its top).
func newBindScene(t *testing.T, more ...string) bindScene {
	t.Helper()
	top := layout(t)
	ws := filepath.Join(top, "ws")
	sc := bindScene{top: top, state: filepath.Join(top, "state"), ws: ws, sub: filepath.Join(ws, "sub"), alias: filepath.Join(top, "alias")}
	dirs := []string{sc.sub, sc.alias}
	for _, m := range more {
		dirs = append(dirs, filepath.Join(top, m))
	}
	for _, d := range dirs {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return sc
}

// beside runs fn where sub is bound on alias, beside a run of the
// workspace run, begun there and ended once fn returns (fn is not run if
// it cannot begin).
func (sc bindScene) beside(t *testing.T, run string, fn func()) {
	t.Helper()
	testenv.WithBind(t, sc.sub, sc.alias, func() {
		a, err := placeholder.Begin(sc.state, run)
		if err != nil {
			t.Error(err)
			return
		}
		defer a.End()
		fn()
	})
}

// refusedBeside checks that neither a run nor a file tool's change of dir
// starts beside the run of beside: ErrNested.
func refusedBeside(t *testing.T, state, dir, beside string) {
	t.Helper()
	b, err := placeholder.Begin(state, dir)
	if !errors.Is(err, placeholder.ErrNested) {
		t.Errorf("a run of %s beside a run of %s: %v, want ErrNested", dir, beside, err)
	}
	if err == nil {
		b.End()
	}
	g, err := placeholder.Watch(state, dir, -1)
	if err != nil {
		t.Error(err)
		return
	}
	_, _, err = g.Kept(nil)
	g.Release()
	if !errors.Is(err, placeholder.ErrNested) {
		t.Errorf("a file tool's change of %s beside a run of %s: %v, want ErrNested", dir, beside, err)
	}
}
