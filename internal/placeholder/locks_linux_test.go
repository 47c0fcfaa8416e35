package placeholder

import (
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// TestOnlyLooks: the kernel's table of locks tells a run's shared lock
// from a look's exclusive one, so that a look that waits on other looks
// does not report a run.
func TestOnlyLooks(t *testing.T) {
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
	if onlyLooks(probe) {
		t.Fatal("no lock held, yet only looks reported")
	}
	if err := unix.Flock(int(holder.Fd()), unix.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	if !onlyLooks(probe) {
		t.Fatal("an exclusive look held: not reported as only looks")
	}
	unix.Flock(int(holder.Fd()), unix.LOCK_UN)
	if err := unix.Flock(int(holder.Fd()), unix.LOCK_SH); err != nil {
		t.Fatal(err)
	}
	if onlyLooks(probe) {
		t.Fatal("a run's shared lock held, yet only looks reported")
	}
	if lockedAbove(dir+"/ws") != dir {
		t.Fatal("lockedAbove does not see the run's lock")
	}
}
