package seccomp

import (
	"bufio"
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/cordon-run/cordon/internal/testenv"
	"golang.org/x/sys/unix"
)

// helperEnv tells a re-executed test binary to be the helper and which
// policy to apply: its name ("none/by-fd"), or control (no filter at
// all).
const helperEnv = "CORDON_SECCOMP_HELPER"

// resultPrefix marks the helper's result lines in its output.
const resultPrefix = "seccomp-check "

// listenerEnv gives the helper the address of a TCP listener the parent
// opened on 127.0.0.1 ("127.0.0.1:40123"), which the MSG_FASTOPEN sends
// try to reach.
const listenerEnv = "CORDON_SECCOMP_LISTENER"

// check is one thing the helper tries: it returns nil when the call
// worked.
type check struct {
	name string
	try  func() error
}

// checks are tried in the helper, in this order. None of them reaches
// the network but the MSG_FASTOPEN sends, which reach only the parent's
// listener on 127.0.0.1 (listenerEnv) and the listen check, which listens
// for no longer than a close; the metadata checks change only the files
// [metadataDir] put in the helper's working directory; and each is
// harmless without
// the filter too (the control run), where most fail differently —
// ENOTTY, ESRCH, EINVAL — or work, which shows that the EPERM under the
// filter is the filter's.
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
		{"socketpair(AF_UNIX, SOCK_STREAM, 0)", pair(unix.SOCK_STREAM | unix.SOCK_CLOEXEC)},
		{"socketpair(AF_UNIX, SOCK_SEQPACKET, 0)", pair(unix.SOCK_SEQPACKET | unix.SOCK_CLOEXEC)},
		{"socketpair(AF_UNIX, SOCK_DGRAM, 0)", pair(unix.SOCK_DGRAM | unix.SOCK_CLOEXEC)},
		{"listen(unbound AF_INET SOCK_STREAM socket)", withTCPSocket(func(fd int) error { return unix.Listen(fd, 1) })},
		{"sendto(MSG_FASTOPEN) to the parent's listener", withTCPSocket(func(fd int) error {
			to, err := listenerAddr()
			if err != nil {
				return err
			}
			return unix.Sendto(fd, []byte("x"), unix.MSG_FASTOPEN, to)
		})},
		{"sendmsg(MSG_FASTOPEN) to the parent's listener", withTCPSocket(func(fd int) error {
			to, err := listenerAddr()
			if err != nil {
				return err
			}
			_, err = unix.SendmsgN(fd, []byte("x"), nil, to, unix.MSG_FASTOPEN)
			return err
		})},
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

		// The metadata of byPathFile, by its name.
		{"chmod(by-path, 0640)", func() error { return chmodPath(byPathFile, 0o640) }},
		{"fchmodat(AT_FDCWD, by-path, 0604)", func() error { return unix.Fchmodat(unix.AT_FDCWD, byPathFile, 0o604, 0) }},
		{"utimensat(AT_FDCWD, by-path, NULL)", func() error { return unix.UtimesNanoAt(unix.AT_FDCWD, byPathFile, nil, 0) }},
		{"setxattr(by-path, user.x)", func() error { return unix.Setxattr(byPathFile, "user.x", []byte("1"), 0) }},
		// The metadata of byFDFile, through a read-only descriptor.
		{"fchmod(read-only fd of by-fd, 0640)", withFD(byFDFile, unix.O_RDONLY, func(fd int) error { return unix.Fchmod(fd, 0o640) })},
		{"futimens: utimensat(read-only fd of by-fd, NULL, NULL)", withFD(byFDFile, unix.O_RDONLY, futimens)},
		// An O_PATH descriptor, which Landlock lets a tool open on any
		// file, is no descriptor to futimens: the kernel's EBADF.
		{"futimens: utimensat(O_PATH fd of by-path, NULL, NULL)", withFD(byPathFile, unix.O_PATH, futimens)},
	}
}

// pair makes a unix socket pair of type typ and closes it.
func pair(typ int) func() error {
	return func() error {
		fds, err := unix.Socketpair(unix.AF_UNIX, typ, 0)
		if err == nil {
			unix.Close(fds[0])
			unix.Close(fds[1])
		}
		return err
	}
}

// withTCPSocket runs try on a new AF_INET SOCK_STREAM socket. When the
// filter refuses the socket itself (NetNone), the error says so, so that
// it is not taken for try's refusal.
func withTCPSocket(try func(fd int) error) func() error {
	return func() error {
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("socket: %s", outcome(err))
		}
		defer unix.Close(fd)
		return try(fd)
	}
}

// listenerAddr is the address listenerEnv names.
func listenerAddr() (*unix.SockaddrInet4, error) {
	ap, err := netip.ParseAddrPort(os.Getenv(listenerEnv))
	if err != nil || !ap.Addr().Is4() {
		return nil, fmt.Errorf("%s=%q: not an IPv4 address and port", listenerEnv, os.Getenv(listenerEnv))
	}
	return &unix.SockaddrInet4{Addr: ap.Addr().As4(), Port: int(ap.Port())}, nil
}

// loopbackListener listens on a free port of 127.0.0.1 until the test
// ends, accepting nothing, and returns its address and a function that
// takes the connections waiting in its queue and counts them.
func loopbackListener(t *testing.T) (string, func() int) {
	t.Helper()
	ln, err := net.ListenTCP("tcp4", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln.Addr().String(), func() int {
		// A connection the helper made is queued by the time it has
		// exited: the kernel completes the handshake without Accept.
		n := 0
		for n < 100 {
			ln.SetDeadline(time.Now().Add(100 * time.Millisecond))
			c, err := ln.Accept()
			if err != nil {
				break
			}
			c.Close()
			n++
		}
		return n
	}
}

// The files the metadata checks change, in the helper's working
// directory: byPathFile only by its name, byFDFile only through a
// descriptor. Both start with mode 0600 and the modification time
// oldTime.
const (
	byPathFile = "by-path"
	byFDFile   = "by-fd"
)

var oldTime = time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC)

// metadataDir returns a new directory holding byPathFile and byFDFile.
func metadataDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, name := range []string{byPathFile, byFDFile} {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, 0o600); err != nil { // whatever the umask
			t.Fatal(err)
		}
		if err := os.Chtimes(p, oldTime, oldTime); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// chmodPath is chmod(2) where the architecture has it (amd64), else
// fchmodat(AT_FDCWD), which is what the C library's chmod is there.
func chmodPath(name string, mode uint32) error {
	i := slices.IndexFunc(nativeTable().metadataByPath, func(c call) bool { return c.name == "chmod" })
	if i < 0 {
		return unix.Fchmodat(unix.AT_FDCWD, name, mode, 0)
	}
	p, err := unix.BytePtrFromString(name)
	if err != nil {
		return err
	}
	_, _, errno := unix.Syscall(uintptr(nativeTable().metadataByPath[i].nr), uintptr(unsafe.Pointer(p)), uintptr(mode), 0)
	return errnoOrNil(errno)
}

// withFD opens name with flags and runs try on the descriptor.
func withFD(name string, flags int, try func(fd int) error) func() error {
	return func() error {
		fd, err := unix.Open(name, flags|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("open %s: %w", name, err)
		}
		defer unix.Close(fd)
		return try(fd)
	}
}

// futimens sets fd's times to now: utimensat(fd, NULL, NULL, 0), which
// x/sys has no wrapper for (its Futimes goes through /proc/self/fd).
func futimens(fd int) error {
	_, _, errno := unix.Syscall6(unix.SYS_UTIMENSAT, uintptr(fd), 0, 0, 0, 0, 0)
	return errnoOrNil(errno)
}

// metadataAfter is what a helper left of the files in its directory, as
// the parent sees them: the modes, whether the modification times moved,
// whether by-path holds the xattr user.x.
type metadataAfter struct {
	pathMode, fdMode       os.FileMode
	pathTouched, fdTouched bool
	pathXattr              bool
}

// readMetadata reads the files metadataDir made in dir.
func readMetadata(t *testing.T, dir string) metadataAfter {
	t.Helper()
	var m metadataAfter
	for _, f := range []struct {
		name    string
		mode    *os.FileMode
		touched *bool
	}{
		{byPathFile, &m.pathMode, &m.pathTouched},
		{byFDFile, &m.fdMode, &m.fdTouched},
	} {
		fi, err := os.Stat(filepath.Join(dir, f.name))
		if err != nil {
			t.Fatal(err)
		}
		*f.mode = fi.Mode().Perm()
		*f.touched = !fi.ModTime().Equal(oldTime)
	}
	_, err := unix.Getxattr(filepath.Join(dir, byPathFile), "user.x", nil)
	m.pathXattr = err == nil
	return m
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
	if mode != "control" && mode != "oci" { // under runc, the filter is the runtime's (TestOCIForm)
		i := slices.IndexFunc(policies, func(p Policy) bool { return name(p) == mode })
		if i < 0 {
			t.Fatalf("%s=%q", helperEnv, mode)
		}
		if err := Apply(policies[i]); err != nil {
			fmt.Printf("%sapply\t%s\n", resultPrefix, outcome(err))
			return
		}
	}
	for _, c := range checks() {
		fmt.Printf("%s%s\t%s\n", resultPrefix, c.name, outcome(c.try()))
	}
}

// runHelper re-executes the test binary as the helper in mode, in dir,
// with the TCP listener at listener, and returns its outcomes by check
// name.
func runHelper(t *testing.T, mode, dir, listener string) map[string]string {
	t.Helper()
	// The test binary by its absolute name: the child runs in dir, and
	// os.Args[0] may be relative ("./pkg.test").
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(t.Context(), self, "-test.run=^TestHelperProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), helperEnv+"="+mode, listenerEnv+"="+listener)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("helper %s: %v\n%s%s", mode, err, out, stderr.Bytes())
	}
	got := outcomes(string(out))
	if len(got) == 0 {
		t.Fatalf("helper %s printed no outcomes:\n%s%s", mode, out, stderr.Bytes())
	}
	return got
}

// everyPolicy is what each check answers under every policy.
var everyPolicy = map[string]string{
	"io_uring_setup":                         "EPERM",
	"socket(AF_VSOCK, SOCK_STREAM, 0)":       "EPERM",
	"socket(AF_NETLINK, SOCK_RAW, 0)":        "EPERM",
	"socket(AF_UNIX, SOCK_STREAM, 0)":        "EPERM",
	"ioctl(pipe, TIOCSTI)":                   "EPERM",
	"ioctl(pipe, TIOCSTI|1<<32)":             "EPERM",
	"ioctl(pipe, TIOCINQ)":                   "ok",
	"unshare(CLONE_NEWUSER)":                 "EPERM",
	"clone(CLONE_NEWUSER) of /bin/true":      "EPERM",
	"clone3(NULL, 0)":                        "ENOSYS",
	"ptrace(PTRACE_CONT, parent)":            "EPERM",
	"personality(query)":                     "ok",
	"personality(ADDR_NO_RANDOMIZE)":         "EPERM",
	"socketpair(AF_UNIX, SOCK_STREAM, 0)":    "ok",
	"socketpair(AF_UNIX, SOCK_SEQPACKET, 0)": "ok",
	"socketpair(AF_UNIX, SOCK_DGRAM, 0)":     "EPERM",
	"getpid":                                 "ok",
	"exec /bin/true":                         "ok",
	"every thread filtered, no_new_privs":    "ok",
}

// The checks of the inet sockets.
const (
	stream    = "socket(AF_INET, SOCK_STREAM, 0)"
	streamTCP = "socket(AF_INET, SOCK_STREAM|SOCK_CLOEXEC, IPPROTO_TCP)"
	dgram     = "socket(AF_INET, SOCK_DGRAM, 0)"
	mptcp     = "socket(AF_INET, SOCK_STREAM, IPPROTO_MPTCP)"
	listen    = "listen(unbound AF_INET SOCK_STREAM socket)"
	sendto    = "sendto(MSG_FASTOPEN) to the parent's listener"
	sendmsg   = "sendmsg(MSG_FASTOPEN) to the parent's listener"
	noSocket  = "socket: EPERM"
)

// "" is what the check answers without the filter.
var byNetwork = map[Network]map[string]string{
	NetNone: {stream: "EPERM", streamTCP: "EPERM", dgram: "EPERM", mptcp: "EPERM", listen: noSocket, sendto: noSocket, sendmsg: noSocket},
	NetTCP:  {stream: "ok", streamTCP: "ok", dgram: "EPERM", mptcp: "EPERM", listen: "EPERM", sendto: "EPERM", sendmsg: "EPERM"},
	NetHost: {stream: "ok", streamTCP: "ok", dgram: "ok", listen: "ok", sendto: "", sendmsg: ""},
}

// The metadata checks under MetadataAll, MetadataByFD and
// MetadataNone; "" is what they answer without the filter.
var byMetadata = map[string][3]string{
	"chmod(by-path, 0640)":                                   {"", "EPERM", "EPERM"},
	"fchmodat(AT_FDCWD, by-path, 0604)":                      {"", "EPERM", "EPERM"},
	"utimensat(AT_FDCWD, by-path, NULL)":                     {"", "EPERM", "EPERM"},
	"setxattr(by-path, user.x)":                              {"", "EPERM", "EPERM"},
	"fchmod(read-only fd of by-fd, 0640)":                    {"", "ok", "EPERM"},
	"futimens: utimensat(read-only fd of by-fd, NULL, NULL)": {"", "ok", "ok"},
	"futimens: utimensat(O_PATH fd of by-path, NULL, NULL)":  {"", "EBADF", "EBADF"},
}

// outcomes reads the helper's result lines, by check name.
func outcomes(out string) map[string]string {
	got := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		if line, ok := strings.CutPrefix(sc.Text(), resultPrefix); ok {
			name, result, _ := strings.Cut(line, "\t")
			got[name] = result
		}
	}
	return got
}

// TestKernel applies each policy in a child process and checks what the
// kernel then lets the child do; a control child without the filter
// shows which refusals are the filter's.
func TestKernel(t *testing.T) {
	native(t)
	listener, connections := loopbackListener(t)
	control := runHelper(t, "control", metadataDir(t), listener)
	t.Logf("without the filter: %v", control)
	// Without the filter the sends connect, or this kernel's TCP Fast Open
	// client is off (net.ipv4.tcp_fastopen), and they fail otherwise.
	if n := connections(); control[sendto] == "ok" && n != 2 {
		t.Errorf("without the filter: the MSG_FASTOPEN sends worked and made %d connections, want 2", n)
	}
	for _, p := range []Policy{
		{Network: NetNone}, {Network: NetTCP}, {Network: NetHost},
		{Network: NetNone, Metadata: MetadataByFD}, {Network: NetNone, Metadata: MetadataNone},
	} {
		t.Run(name(p), func(t *testing.T) {
			dir := metadataDir(t)
			listener, connections := loopbackListener(t)
			got := runHelper(t, name(p), dir, listener)
			if result, failed := got["apply"]; failed {
				testenv.Require(t, result != "EINVAL", "seccomp filters in this kernel (Apply: %s)", result)
				t.Fatalf("Apply: %s", result)
			}
			want := maps.Clone(everyPolicy)
			for name, w := range byNetwork[p.Network] {
				want[name] = cmp.Or(w, control[name])
			}
			for name, w := range byMetadata {
				want[name] = cmp.Or(w[p.Metadata], control[name])
			}
			for name, want := range want {
				switch {
				case got[name] != want:
					t.Errorf("%s: got %q, want %q", name, got[name], want)
				case (want == "EPERM" || want == "ENOSYS") && control[name] == want:
					t.Logf("%s: %s without the filter too: this host does not show the filter's part", name, want)
				}
			}

			// What the host sees: no connection to its listener past
			// Landlock's connect check (NetTCP), and the files as the
			// helper left them.
			if n := connections(); p.Network != NetHost && n != 0 {
				t.Errorf("the listener on %s had %d connections from the helper, want none", listener, n)
			}

			after := readMetadata(t, dir)
			byPath := p.Metadata == MetadataAll
			wantPathMode := os.FileMode(0o600)
			if byPath {
				wantPathMode = 0o604 // fchmodat's, the later of the two
			}
			if after.pathMode != wantPathMode || after.pathTouched != byPath || after.pathXattr && !byPath {
				t.Errorf("%s afterwards: mode %v, times changed %v, user.x set %v; want mode %v, times changed %v",
					byPathFile, after.pathMode, after.pathTouched, after.pathXattr, wantPathMode, byPath)
			}
			wantFDMode := os.FileMode(0o640)
			if p.Metadata == MetadataNone {
				wantFDMode = 0o600
			}
			if after.fdMode != wantFDMode || !after.fdTouched {
				t.Errorf("%s afterwards: mode %v, times changed %v; want mode %v, times changed (futimens)",
					byFDFile, after.fdMode, after.fdTouched, wantFDMode)
			}
		})
	}
}
