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

// Kinds of fake bubblewrap (FakeBwrap).
const (
	// FakeIgnoresFlags runs the command directly, as if every flag were
	// honoured: no sandbox at all.
	FakeIgnoresFlags = "ignores-flags"
	// FakeNoReadOnlyBinds honours every option but makes the read-only
	// binds of paths under a prefix writable: the namespaces are real,
	// the protection of harness state and write-later paths is not.
	FakeNoReadOnlyBinds = "no-read-only-binds"
	// FakeNoCapDrop honours every option but --cap-drop: as root, the
	// command keeps its capabilities.
	FakeNoCapDrop = "no-cap-drop"
)

// FakeBwrap writes a program named bwrap (Python, run by /usr/bin/python3)
// that stands in for the real bubblewrap the way kind says, and returns
// its path; prefix is where FakeNoReadOnlyBinds turns read-only binds
// writable. `bwrap --version` answers as the real one does.
func FakeBwrap(t testing.TB, kind, prefix string) string {
	t.Helper()
	real, err := exec.LookPath("bwrap")
	Require(t, err == nil, "bubblewrap is not installed: %v", err)
	_, err = os.Stat("/usr/bin/python3")
	Require(t, err == nil, "no /usr/bin/python3 for a fake bwrap: %v", err)
	var body string
	switch kind {
	case FakeIgnoresFlags:
		body = `
i = ARGS.index('--')
os.execvp(ARGS[i+1], ARGS[i+1:])
`
	case FakeNoReadOnlyBinds, FakeNoCapDrop:
		body = fmt.Sprintf("PREFIX = %q.encode()\nDROPCAPS = %v\n", prefix, map[bool]string{true: "True", false: "False"}[kind == FakeNoCapDrop]) + `
if '--args' not in ARGS:
    os.execv(REAL, [REAL] + ARGS)
i = ARGS.index('--args')
fd = int(ARGS[i+1])
data = b''
while True:
    chunk = os.read(fd, 1 << 16)
    if not chunk:
        break
    data += chunk
os.close(fd)
parts = data.split(b'\0')[:-1]
out, j = [], 0
while j < len(parts):
    if DROPCAPS and parts[j] == b'--cap-drop':
        j += 2
        continue
    if not DROPCAPS and parts[j] == b'--ro-bind' and parts[j+1].startswith(PREFIX):
        out += [b'--bind', parts[j+1], parts[j+2]]
        j += 3
        continue
    out.append(parts[j])
    j += 1
r, w = os.pipe()
os.write(w, b''.join(p + b'\0' for p in out))
os.close(w)
os.set_inheritable(r, True)
ARGS[i+1] = str(r)
os.execv(REAL, [REAL] + ARGS)
`
	default:
		t.Fatalf("unknown fake bwrap %q", kind)
	}
	dir := t.TempDir()
	os.Chmod(dir, 0o755)
	script := fmt.Sprintf("#!/usr/bin/python3\nimport os, sys\nREAL = %q\nARGS = sys.argv[1:]\nif ARGS == ['--version']:\n    os.execv(REAL, [REAL] + ARGS)\n%s", real, body)
	p := filepath.Join(dir, "bwrap")
	if err := os.WriteFile(p, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// Hopper is a Python program of chains of processes that fork, let the
// parent exit and call setsid, over and over, for a number of seconds:
// at any moment each chain is one new process whose parent is gone. All
// ignore SIGTERM and SIGHUP. Run it as
// `python3 -c HOPPER CHAINS SECONDS MARKER`; the main process prints
// "hopping" and sleeps. The marker, unique to a test, is how
// PythonProcessesNaming finds what is left of it.
const Hopper = `import os, signal, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
signal.signal(signal.SIGHUP, signal.SIG_IGN)
for i in range(int(sys.argv[1])):
    if os.fork() == 0:
        end = time.time() + float(sys.argv[2])
        while time.time() < end:
            try:
                if os.fork() > 0:
                    os._exit(0)
                os.setsid()
            except OSError:
                pass
        os._exit(0)
print("hopping", flush=True)
time.sleep(60)`

// PythonProcessesNaming returns the python3 processes whose command line
// holds word (a test's marker; a cordon process whose arguments hold it
// is not one of them).
func PythonProcessesNaming(word string) []int {
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		var pid int
		if _, err := fmt.Sscanf(e.Name(), "%d", &pid); err != nil {
			continue
		}
		data, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		argv0, _, _ := strings.Cut(string(data), "\x00")
		if err == nil && strings.HasSuffix(argv0, "python3") && strings.Contains(string(data), word) {
			pids = append(pids, pid)
		}
	}
	return pids
}
