package limits

import (
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cordon-run/cordon/internal/testenv"
)

// pidsHost returns this host's cgroups where this process makes pids
// cgroups (as root), and skips the test otherwise.
func pidsHost(t *testing.T) Host {
	t.Helper()
	h := Detect()
	if h.UID != 0 {
		t.Skip("cgroups are made only as root here; the unprivileged user's limits are rlimits")
	}
	_, ok := h.V1["pids"]
	testenv.Require(t, ok, "no pids cgroup can be made here: %s", h.Why["pids"])
	return h
}

// pidsGroup makes a run's cgroups for 7 processes and 2 more (pids.max 9).
func pidsGroup(t *testing.T) *Group {
	t.Helper()
	p, err := pidsHost(t).Plan(Spec{Pids: 7})
	if err != nil {
		t.Fatal(err)
	}
	g, err := p.Start(2)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// sleepIn starts a sleep and adds it to g; the channel is closed once
// the sleep has been waited for. The sleep is killed when the test ends.
func sleepIn(t *testing.T, g *Group) (*exec.Cmd, <-chan struct{}) {
	t.Helper()
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		g.Close()
		t.Fatal(err)
	}
	waited := make(chan struct{})
	go func() { cmd.Wait(); close(waited) }()
	t.Cleanup(func() { cmd.Process.Kill(); <-waited })
	if err := g.Add(cmd.Process.Pid); err != nil {
		g.Close()
		t.Fatal(err)
	}
	return cmd, waited
}

// wantKilled requires the sleep of sleepIn to have ended by SIGKILL
// within 5s.
func wantKilled(t *testing.T, cmd *exec.Cmd, waited <-chan struct{}) {
	t.Helper()
	select {
	case <-waited:
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || ws.Signal() != syscall.SIGKILL {
			t.Errorf("the process left ended otherwise than by SIGKILL: %v", cmd.ProcessState)
		}
	case <-time.After(5 * time.Second):
		t.Errorf("the process left in the cgroups outlived Close")
	}
}

// TestEnterBearsTheChildInTheCgroups: a process forked by a thread that
// entered the run's cgroups is born in them, with the limit written, and
// the thread is back in this process's cgroups afterwards.
func TestEnterBearsTheChildInTheCgroups(t *testing.T) {
	g := pidsGroup(t)
	defer g.Close()
	type forked struct {
		cmd    *exec.Cmd
		thread map[string]string
		err    error
	}
	done := make(chan forked, 1)
	go func() {
		goruntime.LockOSThread() // ends locked: the thread goes with the goroutine
		leave, err := g.Enter()
		if err != nil {
			done <- forked{err: err}
			return
		}
		cmd := exec.Command("sleep", "5")
		err = cmd.Start()
		leave()
		done <- forked{cmd: cmd, err: err, thread: cgroupsOf(unix.Gettid())}
	}()
	f := <-done
	if f.err != nil {
		t.Fatal(f.err)
	}
	defer f.cmd.Process.Kill()
	child := cgroupsOf(f.cmd.Process.Pid)
	if !strings.HasSuffix(child["pids"], "/"+g.id) {
		t.Errorf("the child's pids cgroup is %q; want the run's, %s", child["pids"], g.id)
	}
	if strings.Contains(f.thread["pids"], g.id) {
		t.Errorf("the forking thread is still in the run's cgroup: %q", f.thread["pids"])
	}
	max, err := os.ReadFile(g.dirs["pids"] + "/pids.max")
	if err != nil || strings.TrimSpace(string(max)) != strconv.Itoa(7+2) {
		t.Errorf("pids.max = %q %v; want 9", max, err)
	}
	// Add of a process already in the cgroups leaves it there.
	if err := g.Add(f.cmd.Process.Pid); err != nil {
		t.Errorf("Add of a member: %v", err)
	}
	if c := cgroupsOf(f.cmd.Process.Pid); c["pids"] != child["pids"] {
		t.Errorf("after Add: %q, was %q", c["pids"], child["pids"])
	}
}

// TestCloseEndsWhatIsLeft: Close removes the run's cgroups even when a
// process is still in them — it is killed first — and a Close of
// cgroups already empty removes them at once.
func TestCloseEndsWhatIsLeft(t *testing.T) {
	busy := pidsGroup(t)
	cmd, waited := sleepIn(t, busy)
	dir := busy.dirs["pids"]
	if err := busy.Close(); err != nil {
		t.Errorf("Close of cgroups with a process left in them: %v", err)
	}
	wantKilled(t, cmd, waited)
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("the cgroup %s is still there: %v", dir, err)
	}
	idle := pidsGroup(t)
	dir = idle.dirs["pids"]
	if err := idle.Close(); err != nil {
		t.Errorf("Close of empty cgroups: %v", err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("the cgroup %s is still there: %v", dir, err)
	}
}

// TestCloseKillsWhatItCannotRemove: a run's cgroup that Close cannot
// remove — its hierarchy read-only, here in a mount namespace of the
// test's own — still has what is in it killed, and Close says it failed.
func TestCloseKillsWhatItCannotRemove(t *testing.T) {
	if os.Getenv("CORDON_LIMITS_READONLY_CHILD") == "1" {
		closeOnReadOnlyCgroups(t)
		return
	}
	pidsHost(t)
	unshare, err := exec.LookPath("unshare")
	testenv.Require(t, err == nil, "unshare(1) (util-linux) to make a mount namespace: %v", err)
	cmd := exec.Command(unshare, "--mount", "--propagation", "private", os.Args[0], "-test.run=^TestCloseKillsWhatItCannotRemove$", "-test.v")
	cmd.Env = append(os.Environ(), "CORDON_LIMITS_READONLY_CHILD=1")
	out, err := cmd.CombinedOutput()
	// The child's cgroups are left (read-only there, not here): removed
	// from this namespace, once what was in them is gone.
	for _, line := range strings.Split(string(out), "\n") {
		if dir, ok := strings.CutPrefix(strings.TrimSpace(line), "cgroup: "); ok && strings.Contains(dir, "/cordon-") {
			for range 50 {
				if unix.Rmdir(dir) == nil || !fileExists(dir) {
					break
				}
				time.Sleep(10 * time.Millisecond)
			}
		}
	}
	if err != nil || !strings.Contains(string(out), "--- PASS: TestCloseKillsWhatItCannotRemove") {
		t.Fatalf("in a mount namespace of its own: %v\n%s", err, out)
	}
}

// closeOnReadOnlyCgroups is TestCloseKillsWhatItCannotRemove's child, in
// a mount namespace of its own.
func closeOnReadOnlyCgroups(t *testing.T) {
	g := pidsGroup(t)
	for _, dir := range g.dirs {
		fmt.Printf("cgroup: %s\n", dir)
	}
	cmd, waited := sleepIn(t, g)
	for c, dir := range g.dirs {
		parent := filepath.Dir(dir)
		if err := unix.Mount(parent, parent, "", unix.MS_BIND, ""); err != nil {
			t.Fatalf("bind %s: %v", parent, err)
		}
		if err := unix.Mount("", parent, "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY, ""); err != nil {
			t.Fatalf("read-only %s (%s): %v", parent, c, err)
		}
	}
	if err := g.Close(); err == nil {
		t.Errorf("Close of cgroups on a read-only hierarchy reported no error")
	}
	wantKilled(t, cmd, waited)
}

// TestSweepRemovesOnlyAbandonedCgroups: the cgroup of a dead owner goes,
// and what still ran in it is killed; an empty one of the old naming made
// before the sweep's time goes; a live owner's, empty or not, one of the
// old naming with a process or made after, and a directory of another
// name stay.
func TestSweepRemovesOnlyAbandonedCgroups(t *testing.T) {
	h := pidsHost(t)
	root := h.V1["pids"]
	// A parent of the test's own: the sweep never sees the cgroups of the
	// runs of other tests.
	parent, err := os.MkdirTemp(root, "sweep-test-")
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Rmdir(parent)
	h.V1 = map[string]string{"pids": parent}
	p, err := h.Plan(Spec{Pids: 7})
	if err != nil {
		t.Fatal(err)
	}
	idle, err := p.Start(2) // this process's, empty
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	busy, err := p.Start(2)
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	sleep := func() *exec.Cmd {
		c := exec.Command("sleep", "30")
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Process.Kill(); c.Wait() })
		return c
	}
	if err := busy.Add(sleep().Process.Pid); err != nil {
		t.Fatal(err)
	}
	mk := func(name string) string {
		dir := filepath.Join(parent, name)
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { unix.Rmdir(dir) })
		return dir
	}
	// An owner that is gone: PID 1 of this namespace did not start at
	// tick 0.
	dead := mk("cordon-0123456789abcdef-1-0-" + pidNamespace("self"))
	// One of another PID namespace is not judged.
	foreign := mk("cordon-0123456789abcdee-1-0-1")
	orphan := sleep()
	if err := writeFile(filepath.Join(dead, "cgroup.procs"), strconv.Itoa(orphan.Process.Pid)); err != nil {
		t.Fatal(err)
	}
	oldEmpty := mk("cordon-00112233445566ff")
	other := mk("cordon-not-a-run")

	sweep(map[string]string{"pids": parent}, time.Now().Add(-time.Hour)) // nothing is that old
	if _, err := os.Stat(dead); err == nil {
		t.Error("the cgroup of a dead owner was left")
	}
	if err := orphan.Wait(); err == nil || !strings.Contains(err.Error(), "killed") {
		t.Errorf("what ran in the dead owner's cgroup: %v, want killed", err)
	}
	if _, err := os.Stat(oldEmpty); err != nil {
		t.Fatalf("a cgroup made after the sweep's time was removed: %v", err)
	}
	sweep(map[string]string{"pids": parent}, time.Now().Add(time.Second))
	if _, err := os.Stat(oldEmpty); err == nil {
		t.Error("an empty, abandoned cgroup of the old naming was left")
	}
	for _, dir := range []string{idle.dirs["pids"], busy.dirs["pids"], other, foreign} {
		if _, err := os.Stat(dir); err != nil {
			t.Errorf("%s was removed: %v", dir, err)
		}
	}
}

// TestCloseNeverKillsThisProcess: Close kills what is left in a run's
// cgroups, but not this process, should a thread of its own still be in
// them (a forking thread that did not leave): the removal fails instead.
func TestCloseNeverKillsThisProcess(t *testing.T) {
	g := pidsGroup(t)
	in, out := make(chan func()), make(chan struct{})
	go func() {
		goruntime.LockOSThread()
		defer goruntime.UnlockOSThread()
		leave, err := g.Enter()
		if err != nil {
			t.Error(err)
			leave = func() {}
		}
		in <- leave
		<-out
		leave()
		out <- struct{}{}
	}()
	<-in
	dirs := maps.Clone(g.dirs)
	if err := g.Close(); err == nil {
		t.Error("a cgroup with a thread of this process in it was removed")
	}
	out <- struct{}{}
	<-out
	if err := (&Group{dirs: dirs}).Close(); err != nil {
		t.Errorf("once the thread left: %v", err)
	}
}
