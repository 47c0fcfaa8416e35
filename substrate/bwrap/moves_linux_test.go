package bwrap

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cordon-run/cordon/internal/testenv"
	"github.com/cordon-run/cordon/substrate"
)

// gitWorkspace returns a workspace holding a git directory with a
// config, which a run binds read-only, and that config's path.
func gitWorkspace(t *testing.T) (ws, cfg string) {
	t.Helper()
	ws = tempWorkspace(t)
	makeGitDir(t, filepath.Join(ws, ".git"))
	cfg = filepath.Join(ws, ".git", "config")
	if err := os.WriteFile(cfg, []byte("[core]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return ws, cfg
}

// watchFromTheFirstTick makes the watch wait for events from its first
// tick on, and runs hook (if not nil) as a look reads the table, for the
// length of the test.
func watchFromTheFirstTick(t *testing.T, hook func()) {
	eventsAfter, tableReadHook = 0, hook
	t.Cleanup(func() { eventsAfter, tableReadHook = 10*time.Second, nil })
}

// countReads makes the watch wait for events from its first tick on and
// counts the reads of the table.
func countReads(t *testing.T) *atomic.Int64 {
	var reads atomic.Int64
	watchFromTheFirstTick(t, func() { reads.Add(1) })
	return &reads
}

// firstLook waits, up to 10 s, for the watch to have read the table more
// than from times: the run has started and its watch has looked. On a
// loaded machine (two users' tests at once, under the race detector) a
// run can take more than the few hundred milliseconds a test sleeps.
func firstLook(t *testing.T, reads *atomic.Int64, from int64) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); reads.Load() <= from; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the run's watch did not look at its table within 10 s")
		}
	}
}

// runIn runs command in a sandbox of ws in the background; its outcome
// comes on the channel.
func runIn(t *testing.T, ws string, environ []string, command ...string) <-chan substrate.Outcome {
	t.Helper()
	bin, err := Find(os.Getenv("PATH"))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan substrate.Outcome, 1)
	go func() {
		o, err := Run(context.Background(), Spec{Policy: newPolicy(ws), Bwrap: bin, Environ: environ, Command: command})
		if err != nil {
			t.Error(err)
		}
		done <- o
	}()
	return done
}

// wantStopped waits for the run of done to end, stopped by its watch
// for the mount at path (what: "went" or "came"), within 5 s.
func wantStopped(t *testing.T, done <-chan substrate.Outcome, what, path string) {
	t.Helper()
	select {
	case o := <-done:
		if o.ExitCode == 0 || !strings.Contains(strings.Join(o.Notes, "\n"), what+" "+path) {
			t.Errorf("exit %d, notes %q: the run was not stopped for the mount of %s", o.ExitCode, o.Notes, path)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("the run went on after the mount of %s %s", path, what)
	}
}

// The watch of a run that lasts (eventsAfter) reads the mount table only
// when something may have changed it, and still stops the run at each way the
// host can move a protected path: a mount point renamed aside, a
// directory above one renamed aside (neither raises an event of the
// namespace), a file renamed over one (a detach). A rename of another
// name in those directories costs no read.
func TestTheWatchReadsTheTableWhenSomethingMoved(t *testing.T) {
	needBwrap(t)
	reads := countReads(t)
	for _, change := range []struct {
		name string
		went string // the mount point the outcome names
		do   func(ws string) error
	}{
		{"a mount point renamed aside", ".git/config", func(ws string) error {
			cfg := filepath.Join(ws, ".git", "config")
			return os.Rename(cfg, cfg+"~")
		}},
		{"a directory above it renamed aside", ".git", func(ws string) error {
			return os.Rename(filepath.Join(ws, ".git"), filepath.Join(ws, "git-aside"))
		}},
		{"a file renamed over it", ".git/config", renameOver},
	} {
		t.Run(change.name, func(t *testing.T) {
			ws, _ := gitWorkspace(t)
			start := reads.Load()
			done := runIn(t, ws, nil, "sleep", "10")
			// 60 ticks and more, then renames of other names in the
			// directories watched.
			time.Sleep(300 * time.Millisecond)
			for _, d := range []string{ws, filepath.Join(ws, ".git")} {
				a, b := filepath.Join(d, "a"), filepath.Join(d, "b")
				if err := os.WriteFile(a, nil, 0o644); err != nil {
					t.Fatal(err)
				}
				if err := os.Rename(a, b); err != nil {
					t.Fatal(err)
				}
			}
			time.Sleep(50 * time.Millisecond)
			// The first tick's (the first look is not counted); a
			// second should a mount of the host have come or gone
			// meanwhile.
			if n := reads.Load() - start; n > 2 {
				t.Errorf("a run where nothing of its own moved read its table %d times in 350 ms", n)
			}
			if err := change.do(ws); err != nil {
				t.Fatal(err)
			}
			wantStopped(t, done, "went", filepath.Join(ws, change.went))
		})
	}
}

// renameOver writes ws's .git/config as git does: a new file renamed
// over it, which detaches the read-only mount on it.
func renameOver(ws string) error {
	tmp := filepath.Join(ws, ".git", "config.lock")
	if err := os.WriteFile(tmp, []byte("[core]\n"), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(ws, ".git", "config"))
}

// Where the events cannot be waited for, the watch falls back to reading
// the table every tick, for good: it neither spins nor goes blind.
func TestTheWatchReadsAtTicksWhenTheEventsFail(t *testing.T) {
	needBwrap(t)
	reads := countReads(t)
	waitFails.Store(true)
	defer waitFails.Store(false)
	ws, cfg := gitWorkspace(t)
	done := runIn(t, ws, nil, "sleep", "10")
	firstLook(t, reads, 0)
	start := reads.Load()
	time.Sleep(300 * time.Millisecond)
	// 60 ticks: every one reads, and nothing more does.
	if n := reads.Load() - start; n < 10 || n > 120 {
		t.Errorf("%d reads of the table in 300 ms, want one a tick", n)
	}
	if err := os.Rename(cfg, cfg+"~"); err != nil {
		t.Fatal(err)
	}
	wantStopped(t, done, "went", cfg)
}

// A command that renames in the workspace's root all the time (names on
// the way to no mount point) would keep the watch of events waking for
// nothing: it gives up, and the ticks take over at their fixed cost —
// the table is read at each tick again — and a detach still stops the
// run.
func TestAFloodOfRenamesSendsTheWatchBackToTicks(t *testing.T) {
	needBwrap(t)
	const python = "/usr/bin/python3" // the system's: the sandbox hides home directories
	if _, err := os.Stat(python); err != nil {
		t.Fatal(err)
	}
	reads := countReads(t)
	ws, cfg := gitWorkspace(t)
	flood := "import os\nopen('a','w').close()\nwhile True:\n os.rename('a','b'); os.rename('b','a')\n"
	done := runIn(t, ws, nil, python, "-c", flood)
	firstLook(t, reads, 0)
	time.Sleep(500 * time.Millisecond)
	before := reads.Load()
	time.Sleep(300 * time.Millisecond)
	if n := reads.Load() - before; n < 10 {
		t.Errorf("%d reads of the table in 300 ms of a flood of renames: the watch still waits for events", n)
	}
	if err := renameOver(ws); err != nil {
		t.Fatal(err)
	}
	wantStopped(t, done, "went", cfg)
}

// A directory on the way to mount points that is absent while the watch
// of renames is made (a host's `mv .git x`, which woke the watch) and back
// before the read that follows (`mv x .git`: a rename into the name, no
// event of the name's) would leave that directory unwatched, and a later
// rename of a mount point in it unseen: the ticks take over instead.
func TestADirectorySwappedAsTheWatchIsMadeLeavesNoBlindSpot(t *testing.T) {
	needBwrap(t)
	ws, cfg := gitWorkspace(t)
	git := filepath.Join(ws, ".git")
	var armed atomic.Bool
	var reads atomic.Int64
	watchFromTheFirstTick(t, func() {
		reads.Add(1)
		if armed.CompareAndSwap(true, false) {
			// After the watch is made, before the read.
			if err := os.Rename(git+"-aside", git); err != nil {
				t.Error(err)
			}
		}
	})
	done := runIn(t, ws, nil, "sleep", "10")
	firstLook(t, &reads, 0)
	time.Sleep(300 * time.Millisecond)
	armed.Store(true)
	if err := os.Rename(git, git+"-aside"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	if armed.Load() {
		t.Fatal("the watch did not read the table after .git was renamed aside")
	}
	select {
	case o := <-done:
		t.Fatalf("the run stopped at the swap, which it could not see: %q", o.Notes)
	default:
	}
	if err := os.Rename(cfg, cfg+"~"); err != nil {
		t.Fatal(err)
	}
	wantStopped(t, done, "went", cfg)
}

// The watch of renames tells a rename of a name on the way to a mount
// point from one of another name, and anything else it cannot vouch for
// (the directory itself moved) as one.
func TestMovesTellsTheNamesOnTheWay(t *testing.T) {
	dir := tempWorkspace(t)
	for _, d := range []string{"a/b", "other"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	root, err := unix.Open("/", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(root)
	watch := func() *moves {
		m := watchMoves(root, []string{filepath.Join(dir, "a", "b", "mnt")})
		if m == nil {
			t.Fatal("no watch of renames")
		}
		return m
	}
	m := watch()
	defer func() { unix.Close(m.fd) }()
	if m.moved(m.fd) {
		t.Fatal("a fresh watch is not quiet")
	}
	rename := func(from, to string) {
		t.Helper()
		if err := os.Rename(filepath.Join(dir, from), filepath.Join(dir, to)); err != nil {
			t.Fatal(err)
		}
	}
	rename("other", "other2")
	if err := os.WriteFile(filepath.Join(dir, "a", "b", "f"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	rename("a/b/f", "a/b/g")
	if m.moved(m.fd) {
		t.Error("renames of other names count as moves")
	}
	if err := os.Mkdir(filepath.Join(dir, "a", "b", "mnt"), 0o755); err != nil {
		t.Fatal(err)
	}
	rename("a/b/mnt", "a/b/mnt2")
	if !m.moved(m.fd) {
		t.Error("the mount point renamed aside is no move")
	}
	if m.moved(m.fd) {
		t.Error("the events of a rename were not all taken")
	}
	rename("a/b", "a/c")
	if !m.moved(m.fd) {
		t.Error("a directory on the way renamed aside is no move")
	}
	rename("a/c", "a/b")
	unix.Close(m.fd)
	m = watch()
	rename("a", "z")
	if !m.moved(m.fd) {
		t.Error("a directory on the way renamed aside, two levels up, is no move")
	}
}

// A writable mount the host makes in the workspace while a command runs
// comes into the sandbox, through the workspace's bind, where the command
// could write it: the run is stopped. Here the workspace lies under the
// hidden /tmp, and then is the home itself (hidden, and bound again on top
// of its own tmpfs) — two cases a mount's path alone took for covered.
// The host's mounts propagate only where its / is shared (systemd's), so
// the test runs again in a mount namespace whose / is: as root alone.
func TestAHostMountInTheWorkspaceStopsTheRun(t *testing.T) {
	needBwrap(t)
	if os.Getenv("CORDON_TEST_SHARED_ROOT") == "" {
		if os.Geteuid() != 0 {
			t.Skip("a mount namespace whose / is shared, and mounts in it, are made as root alone")
		}
		unshare, err := exec.LookPath("unshare")
		testenv.Require(t, err == nil, "unshare (util-linux): %v", err)
		cmd := exec.Command(unshare, "-m", "--propagation", "shared", "--", os.Args[0],
			"-test.run", "^TestAHostMountInTheWorkspaceStopsTheRun$", "-test.count=1", "-test.v")
		cmd.Env = append(os.Environ(), "CORDON_TEST_SHARED_ROOT=1")
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "--- PASS: TestAHostMountInTheWorkspaceStopsTheRun") {
			t.Fatalf("in a namespace whose / is shared: %v\n%s", err, out)
		}
		return
	}
	for _, home := range []bool{false, true} {
		t.Run(fmt.Sprintf("home=%v", home), func(t *testing.T) {
			ws := tempWorkspace(t)
			mnt := filepath.Join(ws, "mnt")
			if err := os.Mkdir(mnt, 0o755); err != nil {
				t.Fatal(err)
			}
			environ := os.Environ()
			if home {
				environ = append(environ, "HOME="+ws)
			}
			done := runIn(t, ws, environ, "sh", "-c", "sleep 1; echo written > mnt/f")
			time.Sleep(300 * time.Millisecond)
			if err := syscall.Mount("none", mnt, "tmpfs", 0, ""); err != nil {
				t.Fatal(err)
			}
			defer syscall.Unmount(mnt, syscall.MNT_DETACH)
			wantStopped(t, done, "came", mnt)
			if _, err := os.Stat(filepath.Join(mnt, "f")); err == nil {
				t.Error("the command wrote into the host's mount")
			}
		})
	}
}
