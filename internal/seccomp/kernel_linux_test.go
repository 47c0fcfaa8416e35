package seccomp

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"unsafe"

	"github.com/cordon-run/cordon/internal/testenv"
	"golang.org/x/sys/unix"
)

// helperEnv tells a re-executed test binary to be the helper and which
// policy to apply: none, tcp, host, or control (no filter at all).
const helperEnv = "CORDON_SECCOMP_HELPER"

// resultPrefix marks the helper's result lines in its output.
const resultPrefix = "seccomp-check "

// check is one thing the helper tries: it returns nil when the call
// worked.
type check struct {
	name string
	try  func() error
}

// checks are tried in the helper, in this order. None of them reaches
// the network or the file system, and each is harmless without the
// filter too (the control run), where most fail differently — ENOTTY,
// ESRCH, EINVAL — or work, which shows that the EPERM under the filter
// is the filter's.
func checks() []check {
	sock := func(family, typ, proto int) func() error {
		return func() error {
			fd, err := unix.Socket(family, typ, proto)
			if err == nil {
				unix.Close(fd)
			}
			return err
		}
	}
	ioctl := func(request uint64) func() error {
		return func() error {
			var p [2]int
			if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
				return fmt.Errorf("pipe2: %w", err)
			}
			defer unix.Close(p[0])
			defer unix.Close(p[1])
			c := byte('x')
			_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(p[0]), uintptr(request), uintptr(unsafe.Pointer(&c)))
			return errnoOrNil(errno)
		}
	}
	return []check{
		{"io_uring_setup", func() error {
			var params [120]byte // struct io_uring_params, zeroed
			fd, _, errno := unix.Syscall(unix.SYS_IO_URING_SETUP, 1, uintptr(unsafe.Pointer(&params)), 0)
			if errno == 0 {
				unix.Close(int(fd))
			}
			return errnoOrNil(errno)
		}},
		{"socket(AF_VSOCK, SOCK_STREAM, 0)", sock(unix.AF_VSOCK, unix.SOCK_STREAM, 0)},
		{"socket(AF_NETLINK, SOCK_RAW, 0)", sock(unix.AF_NETLINK, unix.SOCK_RAW, 0)},
		{"socket(AF_UNIX, SOCK_STREAM, 0)", sock(unix.AF_UNIX, unix.SOCK_STREAM, 0)},
		{"socket(AF_INET, SOCK_STREAM, 0)", sock(unix.AF_INET, unix.SOCK_STREAM, 0)},
		{"socket(AF_INET, SOCK_STREAM|SOCK_CLOEXEC, IPPROTO_TCP)", sock(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, unix.IPPROTO_TCP)},
		{"socket(AF_INET, SOCK_DGRAM, 0)", sock(unix.AF_INET, unix.SOCK_DGRAM, 0)},
		{"socket(AF_INET, SOCK_STREAM, IPPROTO_MPTCP)", sock(unix.AF_INET, unix.SOCK_STREAM, unix.IPPROTO_MPTCP)},
		{"socketpair(AF_UNIX, SOCK_STREAM, 0)", func() error {
			fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
			if err == nil {
				unix.Close(fds[0])
				unix.Close(fds[1])
			}
			return err
		}},
		{"ioctl(pipe, TIOCSTI)", ioctl(unix.TIOCSTI)},
		{"ioctl(pipe, TIOCSTI|1<<32)", ioctl(1<<32 | unix.TIOCSTI)},
		{"ioctl(pipe, TIOCINQ)", ioctl(unix.TIOCINQ)},
		{"unshare(CLONE_NEWUSER)", func() error { return unix.Unshare(unix.CLONE_NEWUSER) }},
		{"clone(CLONE_NEWUSER) of /bin/true", func() error {
			cmd := exec.Command("/bin/true")
			cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWUSER}
			return cmd.Run()
		}},
		{"clone3(NULL, 0)", func() error {
			_, _, errno := unix.Syscall(unix.SYS_CLONE3, 0, 0, 0)
			return errnoOrNil(errno)
		}},
		{"ptrace(PTRACE_CONT, parent)", func() error {
			// Not our tracee: ESRCH without the filter.
			_, _, errno := unix.Syscall6(unix.SYS_PTRACE, unix.PTRACE_CONT, uintptr(os.Getppid()), 0, 0, 0, 0)
			return errnoOrNil(errno)
		}},
		{"personality(query)", func() error {
			_, _, errno := unix.Syscall(unix.SYS_PERSONALITY, 0xffffffff, 0, 0)
			return errnoOrNil(errno)
		}},
		{"personality(ADDR_NO_RANDOMIZE)", func() error {
			old, _, _ := unix.Syscall(unix.SYS_PERSONALITY, 0xffffffff, 0, 0)
			_, _, errno := unix.Syscall(unix.SYS_PERSONALITY, 0x0040000, 0, 0)
			if errno == 0 {
				unix.Syscall(unix.SYS_PERSONALITY, old, 0, 0) // the control run: put it back
			}
			return errnoOrNil(errno)
		}},
		{"getpid", func() error {
			if unix.Getpid() != os.Getpid() {
				return errors.New("getpid disagrees with os.Getpid")
			}
			return nil
		}},
		{"exec /bin/true", func() error { return exec.Command("/bin/true").Run() }},
		{"every thread filtered, no_new_privs", allThreadsFiltered},
	}
}

func errnoOrNil(errno unix.Errno) error {
	if errno == 0 {
		return nil
	}
	return errno
}

// allThreadsFiltered reads each thread's status: TSYNC must have given
// every thread the filter (Seccomp: 2) and no_new_privs.
func allThreadsFiltered() error {
	tasks, err := filepath.Glob("/proc/self/task/*/status")
	if err != nil || len(tasks) == 0 {
		return fmt.Errorf("no threads under /proc/self/task: %v", err)
	}
	for _, status := range tasks {
		b, err := os.ReadFile(status)
		if err != nil {
			return err
		}
		if !bytes.Contains(b, []byte("\nSeccomp:\t2\n")) || !bytes.Contains(b, []byte("\nNoNewPrivs:\t1\n")) {
			return fmt.Errorf("%s: not Seccomp 2 with NoNewPrivs 1", status)
		}
	}
	return nil
}

// outcome is how a check's result is printed: ok or the errno's name.
func outcome(err error) string {
	var errno syscall.Errno
	switch {
	case err == nil:
		return "ok"
	case errors.As(err, &errno) && unix.ErrnoName(errno) != "":
		return unix.ErrnoName(errno)
	}
	return strings.ReplaceAll(err.Error(), "\n", " ")
}

// TestHelperProcess is the child TestKernel starts: it applies the
// filter to itself, tries each check and prints the outcomes. Without
// helperEnv it does nothing.
func TestHelperProcess(t *testing.T) {
	mode, ok := os.LookupEnv(helperEnv)
	if !ok {
		return
	}
	if mode != "control" {
		var p Policy
		switch mode {
		case "none":
			p.Network = NetNone
		case "tcp":
			p.Network = NetTCP
		case "host":
			p.Network = NetHost
		default:
			t.Fatalf("%s=%q", helperEnv, mode)
		}
		if err := Apply(p); err != nil {
			fmt.Printf("%sapply\t%s\n", resultPrefix, outcome(err))
			return
		}
	}
	for _, c := range checks() {
		fmt.Printf("%s%s\t%s\n", resultPrefix, c.name, outcome(c.try()))
	}
}

// runHelper re-executes the test binary as the helper in mode and returns
// its outcomes by check name.
func runHelper(t *testing.T, mode string) map[string]string {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestHelperProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), helperEnv+"="+mode)
	cmd.Dir = t.TempDir()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("helper %s: %v\n%s%s", mode, err, out, stderr.Bytes())
	}
	got := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if line, ok := strings.CutPrefix(sc.Text(), resultPrefix); ok {
			name, result, _ := strings.Cut(line, "\t")
			got[name] = result
		}
	}
	if len(got) == 0 {
		t.Fatalf("helper %s printed no outcomes:\n%s%s", mode, out, stderr.Bytes())
	}
	return got
}

// TestKernel applies each policy in a child process and checks what the
// kernel then lets the child do; a control child without the filter
// shows which refusals are the filter's.
func TestKernel(t *testing.T) {
	native(t)
	everyPolicy := map[string]string{
		"io_uring_setup":                      "EPERM",
		"socket(AF_VSOCK, SOCK_STREAM, 0)":    "EPERM",
		"socket(AF_NETLINK, SOCK_RAW, 0)":     "EPERM",
		"socket(AF_UNIX, SOCK_STREAM, 0)":     "EPERM",
		"ioctl(pipe, TIOCSTI)":                "EPERM",
		"ioctl(pipe, TIOCSTI|1<<32)":          "EPERM",
		"ioctl(pipe, TIOCINQ)":                "ok",
		"unshare(CLONE_NEWUSER)":              "EPERM",
		"clone(CLONE_NEWUSER) of /bin/true":   "EPERM",
		"clone3(NULL, 0)":                     "ENOSYS",
		"ptrace(PTRACE_CONT, parent)":         "EPERM",
		"personality(query)":                  "ok",
		"personality(ADDR_NO_RANDOMIZE)":      "EPERM",
		"socketpair(AF_UNIX, SOCK_STREAM, 0)": "ok",
		"getpid":                              "ok",
		"exec /bin/true":                      "ok",
		"every thread filtered, no_new_privs": "ok",
	}
	with := func(inet map[string]string) map[string]string {
		m := map[string]string{}
		for k, v := range everyPolicy {
			m[k] = v
		}
		for k, v := range inet {
			m[k] = v
		}
		return m
	}
	const (
		stream    = "socket(AF_INET, SOCK_STREAM, 0)"
		streamTCP = "socket(AF_INET, SOCK_STREAM|SOCK_CLOEXEC, IPPROTO_TCP)"
		dgram     = "socket(AF_INET, SOCK_DGRAM, 0)"
		mptcp     = "socket(AF_INET, SOCK_STREAM, IPPROTO_MPTCP)"
	)
	policies := map[string]map[string]string{
		"none": with(map[string]string{stream: "EPERM", streamTCP: "EPERM", dgram: "EPERM", mptcp: "EPERM"}),
		"tcp":  with(map[string]string{stream: "ok", streamTCP: "ok", dgram: "EPERM", mptcp: "EPERM"}),
		"host": with(map[string]string{stream: "ok", streamTCP: "ok", dgram: "ok"}),
	}

	control := runHelper(t, "control")
	t.Logf("without the filter: %v", control)
	for _, mode := range []string{"none", "tcp", "host"} {
		t.Run(mode, func(t *testing.T) {
			got := runHelper(t, mode)
			if result, failed := got["apply"]; failed {
				testenv.Require(t, result != "EINVAL", "seccomp filters in this kernel (Apply: %s)", result)
				t.Fatalf("Apply: %s", result)
			}
			for name, want := range policies[mode] {
				switch {
				case got[name] != want:
					t.Errorf("%s: got %q, want %q", name, got[name], want)
				case want != "ok" && control[name] == want:
					t.Logf("%s: %s without the filter too: this host does not show the filter's part", name, want)
				}
			}
		})
	}
}
