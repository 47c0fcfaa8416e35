package evidence

import (
	"errors"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/cordon-run/cordon/internal/testenv"
	"github.com/cordon-run/cordon/refusal"
)

// TestLogDirRaceSymlink: while another process swaps the workspace's
// harness directory with a symlink to a directory outside, again and
// again (renameat2 RENAME_EXCHANGE: the name is never missing), opening
// the log and appending to it either works inside the workspace or is
// refused; nothing is ever created outside. A check of the path followed
// by an open of the path loses this race.
func TestLogDirRaceSymlink(t *testing.T) {
	const rounds = 300
	top := tempDir(t)
	ws, outside := filepath.Join(top, "ws"), filepath.Join(top, "outside")
	layout(t, top, "ws/.foundry/", "outside/", "ws/.foundry.link => ../outside")
	s := mustSigner(t, 1)
	trusted := filepath.Join(tempDir(t), "trusted")
	rel := filepath.Join(".foundry", "evidence")

	var stop atomic.Bool
	var wg sync.WaitGroup
	swaps := 0
	wg.Go(func() {
		a, b := filepath.Join(ws, ".foundry"), filepath.Join(ws, ".foundry.link")
		for !stop.Load() {
			if err := unix.Renameat2(unix.AT_FDCWD, a, unix.AT_FDCWD, b, unix.RENAME_EXCHANGE); err != nil {
				if errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EINVAL) {
					return // no RENAME_EXCHANGE here: the test is skipped below
				}
				t.Errorf("renameat2: %v", err)
				return
			}
			swaps++
		}
	})
	opened, refused := 0, 0
	for range rounds {
		l, err := OpenLogAt(ws, rel, trusted, s)
		if err != nil {
			if !errors.Is(err, refusal.UntrustedState) {
				t.Errorf("OpenLogAt: %v", err)
			}
			refused++
			continue
		}
		opened++
		subj, pt, r := probeReceipt("x", Pass)
		if _, err := l.Append(subj, pt, r); err != nil && !errors.Is(err, refusal.UntrustedState) && !errors.Is(err, refusal.NotFound) {
			t.Errorf("Append: %v", err)
		}
		l.Close()
	}
	stop.Store(true)
	wg.Wait()
	t.Logf("%d swaps; %d opens, %d refused", swaps, opened, refused)
	testenv.Require(t, swaps > 0, "renameat2 RENAME_EXCHANGE, to swap the harness directory with a symlink")
	if names, err := os.ReadDir(outside); err != nil || len(names) != 0 {
		t.Errorf("the race made %v outside the workspace (%v)", names, err)
	}
}
