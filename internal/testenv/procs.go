package testenv

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// ProcessesWith returns the PIDs of host processes whose program name
// (the base of argv[0]) is name; zombies have none.
func ProcessesWith(name string) []int {
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		var pid int
		if _, err := fmt.Sscanf(e.Name(), "%d", &pid); err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		argv0, _, _ := strings.Cut(string(cmdline), "\x00")
		if err == nil && filepath.Base(argv0) == name {
			pids = append(pids, pid)
		}
	}
	return pids
}

// MarkedSleep makes <ws>/.local/bin/sleep-MARKER, a symlink to sleep(1),
// and returns its name: every process a test starts through it carries
// that name, unique to the test, in its command line, where ProcessesWith
// finds it on the host (inside a sandbox <ws>/.local/bin leads PATH). The
// test's clean-up kills, by PID, the marked processes a failure left
// behind: only processes the test itself started.
func MarkedSleep(t testing.TB, ws string) string {
	t.Helper()
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Fatal(err)
	}
	sleep, _ = filepath.EvalSymlinks(sleep)
	name := fmt.Sprintf("sleep-cordon-marker-%d-%d", os.Getpid(), time.Now().UnixNano())
	bin := filepath.Join(ws, ".local", "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(sleep, filepath.Join(bin, name)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, pid := range ProcessesWith(name) {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	return name
}

// LoopbackListener listens on an ephemeral port of 127.0.0.1 for the life
// of the test, writes greeting to every connection it accepts, and reports
// each accepted connection on the returned channel: a test that a sandbox
// cannot reach the host's loopback observes the channel stay empty, and its
// control case (the network shared) observes a connection.
func LoopbackListener(t testing.TB, greeting string) (port int, accepted <-chan struct{}) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	ch := make(chan struct{}, 16)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			select {
			case ch <- struct{}{}:
			default:
			}
			c.Write([]byte(greeting))
			c.Close()
		}
	}()
	return ln.Addr().(*net.TCPAddr).Port, ch
}
