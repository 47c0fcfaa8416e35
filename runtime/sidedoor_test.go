package runtime_test

import (
	"context"
	"fmt"
	"maps"
	"net"
	"os"
	"path/filepath"
	goruntime "runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cordon-run/cordon/capabilities"
	"github.com/cordon-run/cordon/internal/testenv"
	"github.com/cordon-run/cordon/substrate/bwrap"
	"github.com/cordon-run/cordon/substrate/landlock"
)

// sideDoors is a Python program that tries each side door a read-only
// mount table leaves open and prints "NAME ERRNO" for each (0: it
// opened). Each attempt is one that succeeds, or fails with another
// errno than EPERM, outside a filter: the errno tells the filter's refusal
// from the kernel's own.
const sideDoors = `
import ctypes, errno, fcntl, os, socket, struct, sys, time
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def report(name, f):
    try:
        r = f()
        if isinstance(r, int) and r < 0:
            print(name, ctypes.get_errno())
        else:
            print(name, 0)
    except OSError as e:
        print(name, e.errno)
    sys.stdout.flush()
def sock(family, type=socket.SOCK_STREAM, proto=0):
    return lambda: socket.socket(family, type, proto).close()
params = ctypes.create_string_buffer(120)
report("io_uring", lambda: libc.syscall(425, 8, params))
report("bpf", lambda: libc.syscall(321, 0, None, 0))
report("vsock", sock(40))
report("vsock-dgram", sock(40, socket.SOCK_DGRAM))
report("netlink", sock(16, socket.SOCK_RAW, 0))
report("packet", sock(17, socket.SOCK_RAW, 0))
report("unix", sock(socket.AF_UNIX))
report("inet", sock(socket.AF_INET))
report("inet-udp", sock(socket.AF_INET, socket.SOCK_DGRAM))
report("socketpair-dgram", lambda: [x.close() for x in socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)])
report("keyctl", lambda: libc.syscall(250, 0, 0, 0, 0, 0))
report("add_key", lambda: libc.syscall(248, b"user", b"k", b"v", 1, -2))
report("userfaultfd", lambda: libc.syscall(323, 0))
report("perf_event_open", lambda: libc.syscall(298, None, 0, -1, -1, 0))
report("unshare-user", lambda: libc.syscall(272, 0x10000000))
report("mount", lambda: libc.syscall(165, b"none", b"/nonexistent-cordon", b"tmpfs", 0, None))
# TIOCSTI on stdin (a pipe: without a filter the kernel says ENOTTY)
report("tiocsti", lambda: fcntl.ioctl(0, 0x5412, b"x"))
report("tiocsti-high", lambda: libc.syscall(16, 0, 0x5412 | (1 << 32), ctypes.c_char_p(b"x")))
sibling = os.fork()
if sibling == 0:
    time.sleep(5)
    os._exit(0)
report("ptrace-sibling", lambda: libc.syscall(101, 16, sibling, 0, 0))  # PTRACE_ATTACH
report("process_vm_readv", lambda: libc.syscall(310, sibling, None, 0, None, 0, 0))
os.kill(sibling, 9)
`

// TestSideDoorsAreShut runs sideDoors inside each native substrate: every
// door must be refused with EPERM, the seccomp filter's answer.
func TestSideDoorsAreShut(t *testing.T) {
	needProgram(t, "python3")
	if goruntime.GOARCH != "amd64" {
		t.Skip("the program uses amd64 system call numbers")
	}
	substrates(t, func(t *testing.T, sub string) {
		ws := workspace(t, base(t))
		res := run(t, newPolicy(ws), "python3 -c '"+sideDoors+"'", on(sub))
		got := map[string]string{}
		for _, line := range strings.Split(strings.TrimSpace(res.Stdout), "\n") {
			if name, code, ok := strings.Cut(line, " "); ok {
				got[name] = code
			}
		}
		doors := []string{"io_uring", "bpf", "vsock", "vsock-dgram", "netlink", "packet", "unix", "inet", "inet-udp", "socketpair-dgram",
			"keyctl", "add_key", "userfaultfd", "perf_event_open", "unshare-user", "mount", "tiocsti", "tiocsti-high",
			"ptrace-sibling", "process_vm_readv"}
		if len(got) != len(doors) {
			t.Fatalf("not every door was tried: %q %q", res.Stdout, res.Stderr)
		}
		eperm := strconv.Itoa(int(syscall.EPERM))
		for _, d := range doors {
			if got[d] != eperm {
				t.Errorf("%s on %s: errno %s, want EPERM (%s) from the seccomp filter", d, sub, got[d], eperm)
			}
		}
	})
}

// TestVsockPortsStayFree binds and listens on a vsock port inside the
// sandbox: under --net none nothing may take a port of the machine's
// vsock space, which no network namespace separates.
func TestVsockPortsStayFree(t *testing.T) {
	needProgram(t, "python3")
	substrates(t, func(t *testing.T, sub string) {
		ws := workspace(t, base(t))
		port := 40000 + os.Getpid()%20000
		script := fmt.Sprintf(`import socket
s = socket.socket(40, socket.SOCK_STREAM)
s.bind((0xFFFFFFFF, %d))
s.listen(1)
print("listening")`, port)
		res := run(t, newPolicy(ws), "python3 -c '"+script+"'", on(sub))
		if strings.Contains(res.Stdout, "listening") {
			t.Fatalf("a sandboxed command listened on vsock port %d", port)
		}
		if !strings.Contains(res.Stderr, "Operation not permitted") {
			t.Errorf("the vsock socket failed otherwise than by the filter: %q", res.Stderr)
		}
	})
}

// TestLoopbackListenerUnreachable listens on the host's loopback and
// connects from inside with every transport the tool could pick.
func TestLoopbackListenerUnreachable(t *testing.T) {
	needProgram(t, "python3")
	substrates(t, func(t *testing.T, sub string) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		accepted := make(chan struct{}, 1)
		go func() {
			if c, err := ln.Accept(); err == nil {
				accepted <- struct{}{}
				c.Close()
			}
		}()
		port := ln.Addr().(*net.TCPAddr).Port
		ws := workspace(t, base(t))
		res := run(t, newPolicy(ws), fmt.Sprintf(`python3 -c 'import socket; socket.create_connection(("127.0.0.1", %d), 2)'`, port), on(sub))
		if res.ExitCode == 0 {
			t.Errorf("the connection to the host's loopback succeeded on %s", sub)
		}
		select {
		case <-accepted:
			t.Errorf("the host listener accepted a connection from %s", sub)
		case <-time.After(100 * time.Millisecond):
		}
		if sub == landlock.Name && !strings.Contains(res.Stderr, "Operation not permitted") {
			t.Errorf("on landlock the socket should be refused by the filter: %q", res.Stderr)
		}
	})
}

// TestLimitsEndABombAndABalloon runs a fork bomb under pids:32 and a memory
// balloon under memory:64MiB on each native substrate: each ends at its
// limit, and the test (this process, cordon's) goes on.
func TestLimitsEndABombAndABalloon(t *testing.T) {
	needProgram(t, "python3")
	substrates(t, func(t *testing.T, sub string) {
		ws := workspace(t, base(t))
		withLimits := func(extra ...capabilities.Capability) func(*Spec) {
			return func(s *Spec) { s.Extra = extra }
		}
		pids, _ := capabilities.PidsLimit(32)
		var before map[string]bool
		if sub == landlock.Name {
			before = steadyTasks(t, os.Getuid())
		}
		start := time.Now()
		res := run(t, newPolicy(ws), forkBomb, on(sub), withLimits(pids))
		if !strings.Contains(res.Stdout, "fork failed") {
			t.Fatalf("the bomb was not stopped: %q %q", res.Stdout, res.Stderr)
		}
		n := forked(res.Stdout)
		bound := 32
		if sub == landlock.Name && mentions(res.Mechanisms, "RLIMIT_NPROC") {
			// Landlock's process limit, unprivileged, is bound to every
			// task of the user, this test process's threads among them
			// (bwrap's sandbox counts its own alone: boundInit): each
			// task of the user's that ends while the run goes on widens
			// it by one — an earlier sandbox's init among them, a zombie
			// until the host's init reaps it. Those seen before the run
			// and gone after it are counted; a few more (a thread
			// started and ended between the two looks) are allowed for.
			after := userTasks(os.Getuid())
			ended := 0
			for task := range before {
				if !after[task] {
					ended++
				}
			}
			bound = 32 + ended + 4
			t.Logf("landlock, RLIMIT_NPROC: %d forked; %d of the user's tasks ended during the run, the bound is %d", n, ended, bound)
		}
		if n >= bound {
			t.Errorf("the bomb forked %d processes under pids:32 (at most %d allowed)", n, bound-1)
		}
		if d := time.Since(start); d > 20*time.Second {
			t.Errorf("the run took %v: its children outlived it", d)
		}
		if !mentions(res.Mechanisms, "pids.max", "RLIMIT_NPROC", "linux.resources.pids") {
			t.Errorf("the result names no process limit: %q", res.Mechanisms)
		}
		if mentions(res.Mechanisms, "pids.max") && !strings.Contains(strings.Join(res.Notes, "\n"), "process limit (32, cgroup)") {
			t.Errorf("the result does not say that the run reached its process limit: %q", res.Notes)
		}

		mem, _ := capabilities.MemoryLimit(64 << 20)
		balloon := `import sys
chunks = []
for i in range(64):
    chunks.append(bytearray(8 << 20))
print("held", len(chunks) * 8, "MiB")`
		res = run(t, newPolicy(ws), "python3 -c '"+balloon+"'", on(sub), withLimits(mem))
		if strings.Contains(res.Stdout, "held") || res.ExitCode == 0 {
			t.Fatalf("the balloon held 512MiB under memory:64MiB: %v %q %q", res, res.Stdout, res.Stderr)
		}
		if !mentions(res.Mechanisms, "memory.limit_in_bytes", "RLIMIT_AS", "linux.resources.memory") {
			t.Errorf("the result names no memory limit: %q", res.Mechanisms)
		}
		if mentions(res.Mechanisms, "memory.limit_in_bytes") && !strings.Contains(strings.Join(res.Notes, "\n"), "memory limit (64MiB, cgroup)") {
			t.Errorf("the result does not say that the run reached its memory limit: %q", res.Notes)
		}
		t.Logf("balloon on %s: %v; mechanisms %q", sub, res, res.Mechanisms)
	})
}

// userTasks returns the tasks (/proc/PID/task/TID) of the user uid.
func userTasks(uid int) map[string]bool {
	tasks := map[string]bool{}
	dirs, _ := filepath.Glob("/proc/[0-9]*/task/[0-9]*")
	for _, d := range dirs {
		var st syscall.Stat_t
		if syscall.Stat(d, &st) == nil && int(st.Uid) == uid {
			tasks[d] = true
		}
	}
	return tasks
}

// steadyTasks returns the user's tasks once two looks 50ms apart find
// the same ones (at most 2s): earlier runs' tasks that are still ending
// are gone before the next run counts the user's.
func steadyTasks(t *testing.T, uid int) map[string]bool {
	t.Helper()
	last := userTasks(uid)
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
		now := userTasks(uid)
		if maps.Equal(now, last) {
			return now
		}
		last = now
	}
	t.Logf("the user's tasks did not settle in 2s (%d now)", len(last))
	return last
}

// forkBomb forks children that wait, until fork fails; it prints how
// many it got. Bounded by its loop in any case.
const forkBomb = `python3 -c 'import os, time, sys
n = 0
for i in range(2000):
    try:
        if os.fork() == 0:
            time.sleep(30)
            os._exit(0)
        n += 1
    except OSError as e:
        print("fork failed", e.errno)
        break
print("forked", n)
sys.stdout.flush()
os._exit(0)'`

// forked reads how many children forkBomb got (-1 if it did not say).
func forked(stdout string) int {
	i := strings.Index(stdout, "forked")
	if i < 0 {
		return -1
	}
	var n int
	fmt.Sscanf(stdout[i:], "forked %d", &n)
	return n
}

// mentions reports whether a mechanism names one of the ways a limit is
// applied.
func mentions(mechs []string, ways ...string) bool {
	for _, m := range mechs {
		for _, w := range ways {
			if strings.Contains(m, w) {
				return true
			}
		}
	}
	return false
}

// TestHostInterfacesHidden looks for the host's network interfaces and
// their hardware addresses in /sys with the network off: neither substrate
// may show them.
func TestHostInterfacesHidden(t *testing.T) {
	substrates(t, func(t *testing.T, sub string) {
		ws := workspace(t, base(t))
		res := run(t, newPolicy(ws), `ls /sys/class/net 2>/dev/null; cat /sys/class/net/*/address /sys/devices/virtual/net/*/address 2>/dev/null; find /sys/devices -path '*/net/*' -name address 2>/dev/null | head -3; echo end`, on(sub))
		if strings.TrimSpace(res.Stdout) != "end" {
			t.Errorf("/sys shows the host's interfaces on %s: %q", sub, res.Stdout)
		}
	})
	// The control: the host has interfaces to hide.
	if ifs, _ := net.Interfaces(); len(ifs) == 0 {
		t.Fatalf("the host lists no interface: the test cannot tell")
	}
}

// TestHoppersDieAtTheDeadline runs chains of processes that fork, let the
// parent exit and call setsid, over and over, so that at any moment each
// chain is one new process whose parent is gone: the deadline must end
// every one of them, on each substrate, before the run returns.
func TestHoppersDieAtTheDeadline(t *testing.T) {
	needProgram(t, "python3")
	everyMode(t, func(t *testing.T, sub string) {
		if sub == "host" {
			t.Skip("without a sandbox a process that leaves the group and loses its parent can outlive the run (documented)")
		}
		ws := workspace(t, base(t))
		marker := fmt.Sprintf("cordon-hopper-%d-%d", os.Getpid(), time.Now().UnixNano())

		res := run(t, newPolicy(ws), "exec python3 -c '"+testenv.Hopper+"' 16 8 "+marker, in(sub), func(s *Spec) {
			s.Timeout, s.Grace = time.Second, 200*time.Millisecond
		})
		// Not a timing test: only a kill that never converges (the
		// fallback after every wait) takes this long.
		if res.Duration > 20*time.Second {
			t.Errorf("the run took %v after a 1s deadline: %q", res.Duration, res.Stderr)
		}
		if !res.TimedOut || !strings.Contains(res.Stdout, "hopping") {
			t.Fatalf("the hoppers did not run to the deadline: %v %q %q", res, res.Stdout, res.Stderr)
		}
		for _, wait := range []time.Duration{0, 500 * time.Millisecond} {
			time.Sleep(wait)
			if left := testenv.PythonProcessesNaming(marker); len(left) > 0 {
				for _, pid := range left {
					syscall.Kill(pid, syscall.SIGKILL) // ours: the marker is this test's
				}
				t.Fatalf("%d hoppers outlived the run on %s (%v after it)", len(left), sub, wait)
			}
		}
	})
}

// TestNestedRunsExclude starts a bwrap run in a workspace and, while it
// goes on, a landlock run of a workspace inside it, read-only and
// writable: the enclosing run's command could change the nested one while
// its rules are made, so the nested run is refused, on every access. (An
// enclosing landlock run in the same process is not seen: its lock is
// held by this process, not by a sandbox's, and the look above reads a
// lock of this process as its own. Separate cordon processes do see it.)
func TestNestedRunsExclude(t *testing.T) {
	needBwrap(t)
	func(t *testing.T, sub string) {
		outer := workspace(t, base(t))
		inner := filepath.Join(outer, "inner")
		os.Mkdir(inner, 0o755)
		started := filepath.Join(outer, "started")
		done := make(chan struct{})
		go func() {
			defer close(done)
			run(t, newPolicy(outer), "touch started; sleep 3", on(sub))
		}()
		for range 200 {
			if _, err := os.Stat(started); err == nil {
				break
			}
			time.Sleep(25 * time.Millisecond)
		}
		for _, access := range []bwrap.Access{bwrap.AccessRead, bwrap.AccessWrite} {
			_, err := runSpec(context.Background(), Spec{Substrate: landlock.Name, Command: []string{"true"},
				Policy: newPolicy(inner).WithAccess(access), Timeout: 10 * time.Second})
			if err == nil || !strings.Contains(err.Error(), "going on") {
				t.Errorf("a landlock run (%s) of %s while a %s run of %s goes on = %v; want a refusal", access, inner, sub, outer, err)
			}
		}
		<-done
	}(t, bwrap.Name)
}
