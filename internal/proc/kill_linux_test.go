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
