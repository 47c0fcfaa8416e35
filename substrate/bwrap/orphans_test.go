//go:build linux

package bwrap

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cordon-run/cordon/harness"
	"github.com/cordon-run/cordon/internal/limits"
	"github.com/cordon-run/cordon/internal/proc"
	"golang.org/x/sys/unix"
)

// The test binary, run with CORDON_TEST_KILLED_AT=before|after, is a
// cordon process that runs CORDON_TEST_SCRIPT in a sandbox of
// CORDON_TEST_WS and is killed (SIGKILL, by itself) just before or just
// after it releases the sandbox.
func init() {
	at := os.Getenv("CORDON_TEST_KILLED_AT")
	if at == "" {
		return
	}
	releaseHook = func(released bool) {
		if released == (at == "after") {
			syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {}
		}
	}
	h := harness.Default().WithStateDir(os.Getenv("CORDON_TEST_STATE")).WithCacheDir(os.Getenv("CORDON_TEST_CACHE"))
	_, err := Run(context.Background(), Spec{Policy: NewPolicy(os.Getenv("CORDON_TEST_WS"), h),
		Command: []string{"/bin/sh", "-c", os.Getenv("CORDON_TEST_SCRIPT")}, Timeout: time.Minute})
	os.Stderr.WriteString("the run was not killed where it was to be: " + errString(err) + "\n")
	os.Exit(3)
}

func errString(err error) string {
	if err == nil {
		return "no error"
	}
	return err.Error()
}

// bwrapsOf lists the bwrap processes of the runs ids: a sandbox's bwrap
// and its init (forks that execute nothing else), named after the run.
func bwrapsOf(ids []string) []string {
	var out []string
	cmdlines, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, c := range cmdlines {
		comm, _ := os.ReadFile(filepath.Join(filepath.Dir(c), "comm"))
		cmdline, _ := os.ReadFile(c)
		name, _, _ := strings.Cut(string(cmdline), "\x00")
		for _, id := range ids {
			if string(comm) == "bwrap\n" && name == argv0(id) {
				out = append(out, filepath.Base(filepath.Dir(c)))
			}
		}
	}
	return out
}

// records lists the IDs of the runs recorded in the registry of runs of
// the test's state directory.
func records(t *testing.T) map[string]bool {
	t.Helper()
	names, _ := filepath.Glob(filepath.Join(testHarness.StateDir(), "runs", "active", "r-*"))
	ids := map[string]bool{}
	for _, n := range names {
		ids[strings.TrimPrefix(filepath.Base(n), "r-")] = true
	}
	return ids
}

// notedIn returns the processes the run id noted in its record.
func notedIn(t *testing.T, id string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(testHarness.StateDir(), "runs", "active", "r-"+id))
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Split(string(b), "\x00")
	return f[1:]
}

// TestASandboxItsKilledCordonLeftNeverRunsUnsupervised: a cordon killed
// while bwrap sets the sandbox up (SIGKILL, nothing of it runs after).
// Killed before it released the sandbox, the command never starts:
// bwrap's child holds the writing end of its block descriptor, so its read
// does not end with cordon. Killed just after, bwrap — killed with cordon
// — may be gone before the sandbox's init bound its life to it, and the
// command runs on its own — here it even renames its init, writing over
// the init's command line through /proc/1/mem. The next run finds the
// killed run's record abandoned and ends what it left, by the program
// name bwrap runs under (the held sandbox) and by the init and bwrap the
// record noted before the release, before the command ran.
func TestASandboxItsKilledCordonLeftNeverRunsUnsupervised(t *testing.T) {
	needBwrap(t)
	for _, at := range []string{"before", "after"} {
		t.Run("killed "+at+" the release", func(t *testing.T) {
			ws := tempWorkspace(t)
			// Before the release the command is to write at once; after
			// it, a second later, so the sweep comes first.
			script := "echo ran > ran"
			if at == "after" {
				script = `a=$(cut -d' ' -f48 /proc/1/stat); printf Z | dd of=/proc/1/mem bs=1 seek="$a" conv=notrunc 2>/dev/null; sleep 1.5; echo ran > ran`
			}
			before := records(t)
			helper := exec.Command(os.Args[0], "-test.run=^$")
			helper.Env = append(os.Environ(), "CORDON_TEST_KILLED_AT="+at, "CORDON_TEST_WS="+ws,
				"CORDON_TEST_SCRIPT="+script, "CORDON_TEST_STATE="+testHarness.StateDir(), "CORDON_TEST_CACHE="+testHarness.CacheDir())
			out, err := helper.CombinedOutput()
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
				t.Fatalf("the helper cordon was not killed at the release: %v %s", err, out)
			}
			if at == "before" {
				time.Sleep(time.Second)
				if _, err := os.Stat(filepath.Join(ws, "ran")); err == nil {
					t.Fatal("the command of a sandbox its cordon never released ran")
				}
			}
			// The killed run's record stays, its lock free.
			var ids []string
			for id := range records(t) {
				if !before[id] {
					ids = append(ids, id)
				}
			}
			if len(ids) != 1 {
				t.Fatalf("the killed run left records %q, want one", ids)
			}
			// What is left: bwrap processes named after the run, and the
			// processes the run noted, while they are still those.
			noted := notedIn(t, ids[0])
			leftOf := func() []string {
				left := bwrapsOf(ids)
				for _, id := range noted {
					pid, _, _ := strings.Cut(id, "-")
					n, _ := strconv.Atoi(pid)
					st, _ := os.ReadFile("/proc/" + pid + "/stat")
					zombie := strings.Contains(string(st), ") Z ")
					if limits.ProcessID(n) == id && !zombie && !slices.Contains(left, pid) {
						left = append(left, pid)
					}
				}
				return left
			}
			time.Sleep(100 * time.Millisecond) // for the command to rename its init
			t.Logf("left by the killed cordon's run %s: %v (named after the run: %v; noted: %q)", ids[0], leftOf(), bwrapsOf(ids), noted)
			// The next run of this user's finds the killed one's record
			// and has the sweep done.
			bin, err := Find(os.Getenv("PATH"))
			if err != nil {
				t.Fatal(err)
			}
			if o, err := Run(context.Background(), Spec{Policy: newPolicy(tempWorkspace(t)), Bwrap: bin, Command: []string{"true"}, Timeout: 10 * time.Second}); err != nil || o.ExitCode != 0 {
				t.Fatalf("the next run: %+v %v", o, err)
			}
			for i := 0; len(leftOf()) > 0; i++ {
				if i > 200 {
					t.Fatalf("the sweep left the sandbox of a killed cordon: processes %v", leftOf())
				}
				time.Sleep(10 * time.Millisecond)
			}
			if at == "after" {
				time.Sleep(2 * time.Second)
			}
			if b, err := os.ReadFile(filepath.Join(ws, "ran")); err == nil {
				t.Fatalf("the command ran after the sweep: %q", strings.TrimSpace(string(b)))
			}
		})
	}
}

// TestTheDeadlineCountsFromTheRelease: a caller slow to wait after the
// sandbox was released (a loaded host, here a hook that sleeps 2 s) does
// not move the command's deadline, which counts from the release.
func TestTheDeadlineCountsFromTheRelease(t *testing.T) {
	needBwrap(t)
	bin, err := Find(os.Getenv("PATH"))
	if err != nil {
		t.Fatal(err)
	}
	releaseHook = func(released bool) {
		if released {
			time.Sleep(2 * time.Second)
		}
	}
	defer func() { releaseHook = nil }()
	ws := tempWorkspace(t)
	// The command notes when it started, then every 20 ms that it still
	// runs: the last note is when the deadline ended it.
	o, err := Run(context.Background(), Spec{Policy: newPolicy(ws), Bwrap: bin,
		Command: []string{"/bin/sh", "-c", "date +%s%N > first; while :; do date +%s%N > last.new; mv last.new last; sleep 0.02; done"},
		Timeout: 300 * time.Millisecond, Grace: 100 * time.Millisecond})
	if err != nil || !o.TimedOut {
		t.Fatalf("the run: %+v %v", o, err)
	}
	read := func(name string) time.Time {
		b, err := os.ReadFile(filepath.Join(ws, name))
		ns, perr := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		if err != nil || perr != nil {
			t.Fatalf("the command's note %s: %q %v", name, b, err)
		}
		return time.Unix(0, ns)
	}
	// Ended by a deadline that counts from the release, the command is
	// gone long before the hook lets the caller wait (2 s).
	if ran := read("last").Sub(read("first")); ran > 1500*time.Millisecond {
		t.Errorf("the command ran %v with a 300ms deadline: the deadline counted from when the caller waited", ran)
	} else {
		t.Logf("the command ran %v (deadline 300ms; the caller waited from 2s after the release)", ran)
	}
}

// The run's lock of its workspace (which keeps runs of nested workspaces
// apart) is held while what the run left in the git index is
// quarantined: the quarantine moves P/.git of each new gitlink P, where
// a nested run would bind its own. The session that holds the lock ends
// early, at the init's death; the quarantine must come first.
func TestTheWorkspaceStaysLockedWhileTheIndexIsQuarantined(t *testing.T) {
	needBwrap(t)
	bin, err := Find(os.Getenv("PATH"))
	if err != nil {
		t.Fatal(err)
	}
	ws := tempWorkspace(t)
	makeGitDir(t, filepath.Join(ws, ".git"))
	var mu sync.Mutex
	var quarantines, free int
	quarantineHook = func() {
		f, err := os.Open(ws)
		if err != nil {
			t.Error(err)
			return
		}
		defer f.Close()
		mu.Lock()
		quarantines++
		mu.Unlock()
		// Long enough for a session ended meanwhile to let go.
		for range 25 {
			if unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB) == nil {
				unix.Flock(int(f.Fd()), unix.LOCK_UN)
				mu.Lock()
				free++
				mu.Unlock()
				return
			}
			time.Sleep(2 * time.Millisecond)
		}
	}
	defer func() { quarantineHook = nil }()
	for range 5 {
		if _, err := Run(context.Background(), Spec{Policy: newPolicy(ws), Bwrap: bin, Command: []string{"true"}}); err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if quarantines == 0 {
		t.Fatal("no run quarantined its index")
	}
	if free > 0 {
		t.Errorf("in %d of %d quarantines the workspace's lock was free: a nested run could start under it", free, quarantines)
	}
}

// TestTheCommandCannotHoldOffTheWatch: the mount watch's first look comes
// once the sandbox's init has taken its release, which the command cannot
// fake or hold off — here it writes a byte into the block pipe through its
// init's --sync-fd (/proc/1/fd/7), which would read as "not yet taken" to a
// watch that asked that pipe.
func TestTheCommandCannotHoldOffTheWatch(t *testing.T) {
	needBwrap(t)
	ws := tempWorkspace(t)
	spec := Spec{Policy: newPolicy(ws), Command: []string{"/bin/sh", "-c", "(printf x > /proc/1/fd/7) 2>/dev/null; echo wrote > wrote; sleep 3"},
		Environ: os.Environ(), Logger: slog.New(slog.DiscardHandler), Timeout: 10 * time.Second}
	r, err := launch(context.Background(), spec, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.finish(context.Background())
	deadline := time.Now().Add(2500 * time.Millisecond)
	for {
		_, werr := os.Stat(filepath.Join(ws, "wrote"))
		if werr == nil && r.sb.releaseTaken() {
			return // the command wrote, and the release still reads as taken
		}
		if time.Now().After(deadline) {
			t.Fatalf("2.5 s after the release: the command wrote its byte (%v), the release reads as taken: %v", werr == nil, r.sb.releaseTaken())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestNoRunWithoutTheInitHeld: a sandbox whose init cannot be held by a
// pidfd (here a pidfd_open made to fail) is never released — nothing could
// tell when its processes can no longer write, which the mount table's
// last look waits for — and the run fails as a setup error.
func TestNoRunWithoutTheInitHeld(t *testing.T) {
	needBwrap(t)
	bin, err := Find(os.Getenv("PATH"))
	if err != nil {
		t.Fatal(err)
	}
	openInit = func(int, uint64) int { return -1 }
	defer func() { openInit = proc.OpenInit }()
	ws := tempWorkspace(t)
	o, err := Run(context.Background(), Spec{Policy: newPolicy(ws), Bwrap: bin, Command: []string{"/bin/sh", "-c", "touch ran"}})
	if !errors.Is(err, ErrSetup) || !strings.Contains(err.Error(), "pidfd") {
		t.Fatalf("the run: %+v %v; want a setup error naming the pidfd", o, err)
	}
	if _, err := os.Lstat(filepath.Join(ws, "ran")); !os.IsNotExist(err) {
		t.Fatalf("the command ran without its init held: %v", err)
	}
}

// TestAnInitGoneBeforeItIsHeldIsBwrapsFailure: bwrap fails to set the
// sandbox up after it reported the init (a bind source gone), and the
// init dies between its check and the pidfd that holds it: the run is
// bwrap's failure, as when it dies before its check — not a setup error
// about the pidfd (seen once in CI, as an unprivileged user).
func TestAnInitGoneBeforeItIsHeldIsBwrapsFailure(t *testing.T) {
	needBwrap(t)
	bin, err := Find(os.Getenv("PATH"))
	if err != nil {
		t.Fatal(err)
	}
	openInit = func(pid int, _ uint64) int {
		// The init dies here, as a bwrap that failed ends it.
		syscall.Kill(pid, syscall.SIGKILL)
		for range 500 {
			if _, err := nsInode(strconv.Itoa(pid), "pid"); err != nil {
				break
			}
			time.Sleep(2 * time.Millisecond)
		}
		return -1
	}
	defer func() { openInit = proc.OpenInit }()
	ws := tempWorkspace(t)
	o, err := Run(context.Background(), Spec{Policy: newPolicy(ws), Bwrap: bin, Command: []string{"/bin/sh", "-c", "touch ran"}})
	t.Logf("the run: %+v %v", o, err)
	if err != nil && strings.Contains(err.Error(), "pidfd") {
		t.Errorf("an init gone before it was held reads as a failure to hold it: %v", err)
	}
	if err == nil && o.ExitCode == 0 {
		t.Errorf("a run whose init died before its release reads as a success: %+v", o)
	}
	if _, err := os.Lstat(filepath.Join(ws, "ran")); !os.IsNotExist(err) {
		t.Fatalf("the command ran: %v", err)
	}
}

// TestTheLastLookComesAfterTheInitDied: the mount table's last look, which
// must see any write a process of the sandbox could make, is taken only
// once the sandbox's init has died — and every process of its namespace
// with it. bwrap reports the command's exit and goes first, and its init
// (killed as its parent dies) with a background process of the command
// can outlive it a moment: a look at bwrap's exit came while they lived
// (with that trigger back, 28 and 29 of 30 looks came early here).
func TestTheLastLookComesAfterTheInitDied(t *testing.T) {
	needBwrap(t)
	bin, err := Find(os.Getenv("PATH"))
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var looks, early int
	lastLookHook = func(r *running) {
		// The init is dead when its /proc entry is gone or a zombie.
		data, err := os.ReadFile("/proc/" + strconv.Itoa(r.initPID) + "/stat")
		alive := false
		if err == nil {
			if i := strings.LastIndexByte(string(data), ')'); i > 0 && i+2 < len(data) {
				alive = data[i+2] != 'Z' && data[i+2] != 'X'
			}
		}
		mu.Lock()
		looks++
		if alive {
			early++
		}
		mu.Unlock()
	}
	defer func() { lastLookHook = nil }()
	ws := tempWorkspace(t)
	for range 30 {
		// A background process the command leaves, which the init's
		// death ends.
		if _, err := Run(context.Background(), Spec{Policy: newPolicy(ws), Bwrap: bin,
			Command: []string{"/bin/sh", "-c", "sleep 5 & sleep 0.02; exit 0"}}); err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if looks == 0 {
		t.Fatal("no run's mount table had a last look")
	}
	if early > 0 {
		t.Errorf("%d of %d last looks came while the sandbox's init lived", early, looks)
	}
}
