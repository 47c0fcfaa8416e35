package egress

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// ForwardArg, as the first argument of a program that imports this
// package, makes it the forwarder inside a sandbox (see [Forwarder]).
const ForwardArg = "__cordon-egress-forward"

// ListenAddr is where the forwarder listens inside the sandbox's network
// namespace (loopback alone), and ProxyURL what the proxy variables say.
const (
	ListenAddr = "127.0.0.1:3128"
	ProxyURL   = "http://" + ListenAddr
)

// ProxyEnv is the environment that points a sandboxed command's clients
// at the forwarder: HTTP_PROXY, HTTPS_PROXY and ALL_PROXY, upper and lower
// case, and an empty NO_PROXY.
func ProxyEnv() []string {
	var env []string
	for _, n := range []string{"HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"} {
		env = append(env, n+"="+ProxyURL)
	}
	for _, n := range []string{"http_proxy", "https_proxy", "all_proxy"} {
		env = append(env, n+"="+ProxyURL)
	}
	return append(env, "NO_PROXY=", "no_proxy=")
}

// LimitArg, as the first argument of a program that imports this
// package, sets RLIMIT_AS and executes a command (see [Forwarder]).
const LimitArg = "__cordon-egress-limit"

// Forwarder returns the command line that runs argv under the forwarder:
// prog (this binary, as the sandbox sees it) listens on [ListenAddr],
// then runs argv as its child and exits as the child did. Each connection
// it accepts goes to the proxy, its descriptor sent over the control
// socket at descriptor fd (SCM_RIGHTS). The forwarder decides nothing and
// copies nothing: the proxy on the host does both.
//
// With as > 0 the tool gets an address-space limit of as bytes that the
// forwarder — a Go program, which reserves more at its start than a small
// limit allows — has not: the forwarder first sends [LimitReady] on the
// control socket and waits for the host to answer it, having set the
// limit on the sandbox's init (which the tool could otherwise make run
// its code, outside the limit), then runs its child through prog again,
// which sets RLIMIT_AS (soft and hard) and executes argv.
func Forwarder(prog string, fd int, as uint64, argv []string) []string {
	return append([]string{prog, ForwardArg, strconv.Itoa(fd), ListenAddr, strconv.FormatUint(as, 10), "--"}, argv...)
}

// limitWait bounds how long the forwarder waits for the host's answer.
const limitWait = 30 * time.Second

// LimitReady is the byte the forwarder sends on the control socket, and
// the host answers, before the tool of a run with an address-space limit
// starts (see [Forwarder]).
const LimitReady = 'L'

func init() {
	if len(os.Args) > 1 && os.Args[1] == ForwardArg {
		os.Exit(forwardMain(os.Args[2:]))
	}
	if len(os.Args) > 1 && os.Args[1] == LimitArg {
		os.Exit(limitMain(os.Args[2:]))
	}
}

// limitMain sets RLIMIT_AS and executes the command, as the forwarder's
// child: AS -- CMD ARGS... It returns only when it could not: 126, or
// 127 for a command not found, as the forwarder says them.
func limitMain(args []string) int {
	if len(args) < 3 || args[1] != "--" {
		fmt.Fprintf(os.Stderr, "cordon egress forwarder: usage: %s AS -- CMD ARGS...\n", LimitArg)
		return 126
	}
	as, err := strconv.ParseUint(args[0], 10, 64)
	if err != nil || as == 0 {
		fmt.Fprintf(os.Stderr, "cordon egress forwarder: bad address-space limit %q\n", args[0])
		return 126
	}
	path, err := exec.LookPath(args[2])
	if err != nil {
		fmt.Fprintf(os.Stderr, "cordon: %s: %v\n", args[2], err)
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist) {
			return 127
		}
		return 126
	}
	if err := setAS(as); err != nil {
		fmt.Fprintf(os.Stderr, "cordon egress forwarder: cannot set RLIMIT_AS=%d: %v\n", as, err)
		return 126
	}
	err = syscall.Exec(path, args[2:], os.Environ())
	if errors.Is(err, syscall.ENOEXEC) {
		// A script without "#!", as execvp(3) runs it.
		err = syscall.Exec("/bin/sh", append([]string{"/bin/sh", path}, args[3:]...), os.Environ())
	}
	fmt.Fprintf(os.Stderr, "cordon: %s: %v\n", args[2], err)
	return 126
}

func forwardMain(args []string) int {
	fail := func(format string, a ...any) int {
		fmt.Fprintf(os.Stderr, "cordon egress forwarder: "+format+"\n", a...)
		return 126
	}
	if len(args) < 5 || args[3] != "--" {
		return fail("usage: %s FD ADDR AS -- CMD ARGS...", ForwardArg)
	}
	as, err := strconv.ParseUint(args[2], 10, 64)
	if err != nil {
		return fail("bad address-space limit %q", args[2])
	}
	fd, err := strconv.Atoi(args[0])
	if err != nil || fd < 3 {
		return fail("bad control descriptor %q", args[0])
	}
	ctlFile := os.NewFile(uintptr(fd), "egress-control")
	ctlConn, err := net.FileConn(ctlFile) // a duplicate, close-on-exec
	ctlFile.Close()
	if err != nil {
		return fail("the control descriptor: %v", err)
	}
	ctl, ok := ctlConn.(*net.UnixConn)
	if !ok {
		return fail("the control descriptor is not a unix socket")
	}
	// Not dumpable: the tool, of the same uid and without a capability,
	// cannot take the control socket (pidfd_getfd, /proc/PID/fd) nor
	// trace this process.
	if err := undumpable(); err != nil {
		return fail("cannot make the forwarder undumpable: %v", err)
	}
	ln, err := net.Listen("tcp", args[1])
	if err != nil {
		return fail("listening on %s: %v", args[1], err)
	}
	argv := args[4:]
	if as > 0 {
		// The host limits the sandbox's init, then answers; the tool
		// starts only then, under the limit itself.
		if _, err := ctl.Write([]byte{LimitReady}); err != nil {
			return fail("asking the host to limit the sandbox's init: %v", err)
		}
		ctl.SetReadDeadline(time.Now().Add(limitWait))
		var ack [1]byte
		if n, err := ctl.Read(ack[:]); err != nil || n != 1 || ack[0] != LimitReady {
			return fail("the host did not confirm the address-space limit of the sandbox's init (%v): the tool does not start", err)
		}
		ctl.SetReadDeadline(time.Time{})
		self, err := os.Executable()
		if err != nil {
			return fail("cannot find this program: %v", err)
		}
		argv = append([]string{self, LimitArg, args[2], "--"}, argv...)
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go forwardOne(ctl, c)
		}
	}()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT)
	err = cmd.Start()
	if errors.Is(err, syscall.ENOEXEC) {
		// A script without "#!": /bin/sh runs it, as execvp(3) — and so
		// bwrap, without egress — does.
		cmd = exec.Command("/bin/sh", append([]string{cmd.Path}, argv[1:]...)...)
		cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
		err = cmd.Start()
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "cordon: %s: %v\n", argv[0], err)
		if errors.Is(err, fs.ErrNotExist) || isNotFound(err) {
			return 127
		}
		return 126
	}
	go func() {
		for s := range sigs {
			cmd.Process.Signal(s)
		}
	}()
	err = cmd.Wait()
	st, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
	if st.Signaled() {
		// Die of the same signal, so that the status is the command's.
		dieOf(st.Signal())
	}
	if err != nil && cmd.ProcessState == nil {
		return 126
	}
	return cmd.ProcessState.ExitCode()
}

func isNotFound(err error) bool {
	e, ok := err.(*exec.Error)
	return ok && e.Err == exec.ErrNotFound
}

// forwardOne hands the connection c to the proxy: its descriptor, sent
// over ctl, which the proxy then reads and writes itself. The forwarder
// keeps no copy and copies no byte.
func forwardOne(ctl *net.UnixConn, c net.Conn) {
	defer c.Close()
	rc, err := c.(*net.TCPConn).SyscallConn()
	if err != nil {
		return
	}
	rc.Control(func(fd uintptr) {
		ctl.WriteMsgUnix([]byte{1}, unix.UnixRights(int(fd)), nil)
	})
}

// ServeControl serves the connections a forwarder hands over ctl, each a
// connected stream socket (the TCP connection the forwarder accepted, or
// a unix one) received with SCM_RIGHTS, until ctl ends (the forwarder is
// gone) or ctx does, when every connection it serves is closed. The
// control socket is the sandbox's: a message with more than one
// descriptor, or one that is not a stream socket of AF_INET, AF_INET6 or
// AF_UNIX, is dropped, and at most Config.MaxConns are served at once. It returns once every
// connection it served is closed.
func (p *Proxy) ServeControl(ctx context.Context, ctl *net.UnixConn) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		<-ctx.Done()
		ctl.Close()
		p.closeAll()
	}()
	defer p.conns.Wait()
	buf := make([]byte, 16)
	oob := make([]byte, unix.CmsgSpace(4*8))
	for {
		_, oobn, _, _, err := ctl.ReadMsgUnix(buf, oob)
		if err != nil {
			return nil
		}
		var fds []int
		if msgs, err := unix.ParseSocketControlMessage(oob[:oobn]); err == nil {
			for _, m := range msgs {
				if got, err := unix.ParseUnixRights(&m); err == nil {
					fds = append(fds, got...)
				}
			}
		}
		if len(fds) != 1 || !streamSocket(fds[0]) {
			for _, fd := range fds {
				unix.Close(fd)
			}
			continue
		}
		unix.CloseOnExec(fds[0])
		f := os.NewFile(uintptr(fds[0]), "egress")
		c, err := net.FileConn(f)
		f.Close()
		if err != nil {
			continue
		}
		p.conns.Add(1)
		go func() {
			defer p.conns.Done()
			p.serveClient(ctx, c)
		}()
	}
}

// Socketpair returns a connected pair of unix stream sockets, each
// close-on-exec.
func Socketpair() ([2]int, error) {
	syscall.ForkLock.RLock() // no exec between the pair's birth and its close-on-exec
	defer syscall.ForkLock.RUnlock()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM, 0)
	if err != nil {
		return fds, err
	}
	unix.CloseOnExec(fds[0])
	unix.CloseOnExec(fds[1])
	return fds, nil
}
