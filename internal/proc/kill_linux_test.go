package proc

import (
	"context"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/cordon-run/cordon/internal/testenv"
)

// TestKillSparesTheRootsIDOnceReaped: Kill of a supervised tree whose
// root has been reaped signals nothing by the root's ID — here given to
// another process (ns_last_pid), which stays alive. As root alone:
// writing ns_last_pid takes CAP_SYS_ADMIN. With the check in Kill left
// out, the other process is SIGKILLed.
func TestKillSparesTheRootsIDOnceReaped(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("ns_last_pid is written as root alone")
	}
	tr, err := Start(Spec{Cmd: exec.Command("true"), Supervised: true})
	if err != nil {
		t.Fatal(err)
	}
	root := tr.Pid()
	tr.Wait(context.Background())
	<-tr.Exited()
	// Hand the root's ID to a new process: the next ID the kernel gives
	// is ns_last_pid + 1 (another fork of the machine may take it first:
	// tried again).
	var other *exec.Cmd
	for range 50 {
		err := os.WriteFile("/proc/sys/kernel/ns_last_pid", []byte(strconv.Itoa(root-1)), 0)
		testenv.Require(t, err == nil, "ns_last_pid, to hand a process a chosen ID: %v", err)
		c := exec.Command("sleep", "30")
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		if c.Process.Pid == root {
			other = c
			break
		}
		c.Process.Kill()
		c.Wait()
	}
	if other == nil {
		t.Skipf("no process got ID %d again in 50 tries", root)
	}
	defer func() { other.Process.Kill(); other.Wait() }()
	tr.Kill()
	time.Sleep(50 * time.Millisecond)
	if err := other.Process.Signal(syscall.Signal(0)); err != nil {
		t.Fatalf("the process that got the reaped root's ID %d is gone: %v", root, err)
	}
	var ws syscall.WaitStatus
	if pid, _ := syscall.Wait4(root, &ws, syscall.WNOHANG, nil); pid == root {
		t.Fatalf("the process that got the reaped root's ID %d was killed: %v", root, ws)
	}
}

// TestTheGraceCountsFromTheDeadline: a tree that ignores SIGTERM is
// killed a grace after its deadline even when the SIGTERM's walk of the
// tree is slow (a loaded host's /proc: here a hook that holds it 1.5 s) —
// the grace counted from the end of that walk before, and the command ran
// on through it.
func TestTheGraceCountsFromTheDeadline(t *testing.T) {
	termWalkHook = func() { time.Sleep(1500 * time.Millisecond) }
	defer func() { termWalkHook = nil }()
	dir := t.TempDir()
	marker := dir + "/last"
	cmd := exec.Command("/bin/sh", "-c", `trap "" TERM; while :; do date +%s%N > "$0.new"; mv "$0.new" "$0"; sleep 0.02; done`, marker)
	tr, err := Start(Spec{Cmd: cmd, Timeout: 200 * time.Millisecond, Grace: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	o := tr.Wait(context.Background())
	if !o.TimedOut || o.Signal != "SIGKILL" {
		t.Fatalf("the outcome: %+v; want a timeout ended by SIGKILL", o)
	}
	b, err := os.ReadFile(marker)
	if err != nil {
		t.Fatal(err)
	}
	ns, _ := strconv.ParseInt(string(b[:len(b)-1]), 10, 64)
	if ran := time.Unix(0, ns).Sub(start); ran > time.Second {
		t.Errorf("the tree ran %v past its start with a 200 ms deadline and a 100 ms grace: the grace waited for the SIGTERM's walk", ran)
	}
}
