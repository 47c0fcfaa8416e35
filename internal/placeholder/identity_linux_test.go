package placeholder_test

import (
	"os"
	"path/filepath"
	goruntime "runtime"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/cordon-run/cordon/internal/placeholder"
)

// TestAPathToTheSameWorkspaceIsTheSameWorkspace: the registry of runs
// names a workspace by its directory, not by the path to it. A presence
// recorded by a bind mount's path (a devcontainer's /workspaces/x, a
// server started on /mnt/proj) was not read by a run of the workspace's
// own path, which kept its sets and took its trust lock elsewhere: the
// hand-over of a submodule from a file tool to a run went unseen.
func TestAPathToTheSameWorkspaceIsTheSameWorkspace(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("a bind mount, in a mount namespace of the test's thread alone, needs root")
	}
	top := layout(t)
	state, ws := filepath.Join(top, "state"), filepath.Join(top, "ws")
	alias := filepath.Join(top, "alias")
	if err := os.Mkdir(alias, 0o755); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		// Never unlocked: the thread, and the namespace, end with the
		// goroutine. The alias is this thread's alone.
		goruntime.LockOSThread()
		if err := unix.Unshare(unix.CLONE_FS | unix.CLONE_NEWNS); err != nil {
			t.Errorf("unshare: %v", err)
			return
		}
		if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
			t.Errorf("private mounts: %v", err)
			return
		}
		if err := unix.Mount(ws, alias, "", unix.MS_BIND, ""); err != nil {
			t.Errorf("bind mount: %v", err)
			return
		}
		if a, b := placeholder.Key(alias), placeholder.Key(ws); a != b {
			t.Errorf("Key(%s) = %s, Key(%s) = %s: two names for one workspace", alias, a, ws, b)
		}
		p, err := placeholder.Present(state, alias)
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
		if kept, all := s.OthersKept(nil); len(kept) != 1 || len(all) != 1 || string(kept[0]) != `{"Q":"tool"}` {
			t.Errorf("a run of %s beside a presence of %s (the same directory): OthersKept = %q, %q; want the presence's set", ws, alias, kept, all)
		}
		g, err := placeholder.Watch(state, alias)
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
	}()
	<-done
}
