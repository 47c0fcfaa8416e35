package placeholder

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestRunMayHold: the kernel's table of locks tells a run's shared lock
// from a look's exclusive one, so that a look that waits on other looks
// (or finds the lock free between two of them) does not report a run.
func TestRunMayHold(t *testing.T) {
	dir := t.TempDir()
	open := func() *os.File {
		f, err := os.Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		return f
	}
	probe, holder := open(), open()
	if runMayHold(probe) {
		t.Fatal("no lock held, yet a run reported")
	}
	if err := unix.Flock(int(holder.Fd()), unix.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	if runMayHold(probe) {
		t.Fatal("an exclusive look held, yet a run reported")
	}
	unix.Flock(int(holder.Fd()), unix.LOCK_UN)
	if err := unix.Flock(int(holder.Fd()), unix.LOCK_SH); err != nil {
		t.Fatal(err)
	}
	if !runMayHold(probe) {
		t.Fatal("a run's shared lock held: not reported")
	}
	start := time.Now()
	if lockedAbove(dir+"/ws") != dir {
		t.Fatal("lockedAbove does not see the run's lock")
	}
	if d := time.Since(start); d >= contendedWait {
		t.Errorf("a run's lock was reported after %v: it should be at once (within checkWait)", d)
	}
}

// TestALockTheTableDoesNotShowIsWaitedFor: a look that finds the lock
// taken for longer than checkWait, and the table of locks showing nothing
// of it (read between two looks, or held from a PID namespace this
// process cannot see), goes on looking; it passes once the lock is free.
func TestALockTheTableDoesNotShowIsWaitedFor(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(t.TempDir(), "locks")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	old := locksTable
	locksTable = empty
	defer func() { locksTable = old }()
	holder, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	if err := unix.Flock(int(holder.Fd()), unix.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	released := make(chan struct{})
	go func() {
		time.Sleep(4 * checkWait)
		unix.Flock(int(holder.Fd()), unix.LOCK_UN)
		close(released)
	}()
	if got := lockedAbove(filepath.Join(dir, "ws")); got == dir {
		t.Fatalf("a lock taken for %v, which the table did not show, reported as a run of %s", 4*checkWait, dir)
	}
	<-released
}
