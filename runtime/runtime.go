package runtime

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cordon-run/cordon/internal/capture"
	"github.com/cordon-run/cordon/internal/refusal"
	"github.com/cordon-run/cordon/substrate/bwrap"
)

// Defaults for the zero values of a [Spec].
const (
	DefaultTimeout   = 2 * time.Minute
	DefaultGrace     = 2 * time.Second
	DefaultMaxOutput = 1 << 20
)

// drainWait bounds how long Run keeps reading output after the process
// tree is gone; only a descriptor smuggled out of the tree can make it
// matter.
const drainWait = time.Second

// readSize is the size of each read from an output pipe, and pipeSize the
// pipe buffer asked for (Linux allows 1 MiB without privilege).
const (
	readSize = 256 << 10
	pipeSize = 1 << 20
)

// ErrInvalidSpec is the sentinel of a [Spec] that cannot run.
var ErrInvalidSpec = refusal.Failure("InvalidSpec", "invalid run specification")

// Spec is one command to run and its bounds.
type Spec struct {
	// Command is the program and its arguments. The program is looked up
	// in the sandbox's PATH, which <workspace>/.local/bin leads.
	Command []string
	// Policy is the sandbox: the workspace (also the working directory)
	// and what the command may do to it, the network, the environment
	// names it receives and extra read-only binds.
	Policy bwrap.Policy
	// NoSandbox runs the command on the host, with only its working
	// directory, environment allow-list and process-tree control from the
	// Policy. It is the explicit escape hatch, never a fallback.
	NoSandbox bool
	// Timeout bounds the run's wall-clock time (DefaultTimeout if zero).
	Timeout time.Duration
	// Grace is the time between SIGTERM and SIGKILL (DefaultGrace if zero).
	Grace time.Duration
	// MaxOutput is the number of bytes kept of each of stdout and stderr,
	// half from the start and half from the end (DefaultMaxOutput if zero).
	MaxOutput int64
	// Stdin is the command's standard input (empty if nil).
	Stdin io.Reader
	// Environ is the caller's environment, from which the allow-list draws
	// and in whose PATH bwrap is looked up (os.Environ() if nil).
	Environ []string
	// Bwrap is the bubblewrap binary (looked up in Environ's PATH if empty).
	Bwrap string
	// Logger receives debug records of the run's life (discarded if nil).
	Logger *slog.Logger
}

// String describes the run for logs and messages.
func (s Spec) String() string {
	sub := s.Policy.String()
	if s.NoSandbox {
		sub = "host (no sandbox): workspace " + s.Policy.Workspace()
	}
	return fmt.Sprintf("run %q on %s, timeout %v, output %s per stream", s.Command, sub, s.Timeout, capture.FormatSize(s.MaxOutput))
}

// Result is what happened to a command that ran.
type Result struct {
	// ExitCode is the command's exit status; 124 when it timed out, 126
	// when it was not executable, 127 when it was not found, 128+N when it
	// was killed by signal N.
	ExitCode int
	// Signal is the name of the signal that ended the command ("SIGKILL")
	// when cordon sent or observed it, or "".
	Signal string
	// TimedOut reports that the deadline ended the run.
	TimedOut bool
	// Canceled reports that the caller's context ended the run.
	Canceled bool
	// Stdout and Stderr are the kept head and tail of each stream, with a
	// line saying how many bytes were dropped in between when clipped.
	Stdout, Stderr string
	// StdoutBytes and StderrBytes count every byte the command wrote.
	StdoutBytes, StderrBytes int64
	// StdoutClipped and StderrClipped report that bytes were dropped.
	StdoutClipped, StderrClipped bool
	// Duration is the wall-clock time from start to the end of the tree.
	Duration time.Duration
	// Substrate is "bwrap" or "host".
	Substrate string
	// Sandboxed is false exactly when the command ran on the host.
	Sandboxed bool
	// Mechanisms lists what confined the command, as grants quote them.
	Mechanisms []string
}

// resultJSON is the CLI contract's shape of a Result.
type resultJSON struct {
	ExitCode      int      `json:"exit_code"`
	Signal        string   `json:"signal"`
	TimedOut      bool     `json:"timed_out"`
	Canceled      bool     `json:"canceled"`
	Stdout        string   `json:"stdout"`
	Stderr        string   `json:"stderr"`
	StdoutBytes   int64    `json:"stdout_bytes"`
	StderrBytes   int64    `json:"stderr_bytes"`
	StdoutClipped bool     `json:"stdout_clipped"`
	StderrClipped bool     `json:"stderr_clipped"`
	DurationMS    int64    `json:"duration_ms"`
	Substrate     string   `json:"substrate"`
	Sandboxed     bool     `json:"sandboxed"`
	Mechanisms    []string `json:"mechanisms"`
}

// MarshalJSON writes the CLI contract's fields: exit_code, signal,
// timed_out, stdout, stderr, stdout_bytes, stderr_bytes, stdout_clipped,
// stderr_clipped, duration_ms, substrate, sandboxed (and canceled,
// mechanisms).
func (r Result) MarshalJSON() ([]byte, error) {
	m := r.Mechanisms
	if m == nil {
		m = []string{}
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	err := enc.Encode(resultJSON{
		ExitCode: r.ExitCode, Signal: r.Signal, TimedOut: r.TimedOut, Canceled: r.Canceled,
		Stdout: r.Stdout, Stderr: r.Stderr, StdoutBytes: r.StdoutBytes, StderrBytes: r.StderrBytes,
		StdoutClipped: r.StdoutClipped, StderrClipped: r.StderrClipped,
		DurationMS: r.Duration.Milliseconds(), Substrate: r.Substrate, Sandboxed: r.Sandboxed, Mechanisms: m,
	})
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), err
}

// String summarizes the result in one line, for logs and messages.
func (r Result) String() string {
	var b strings.Builder
	switch {
	case r.TimedOut:
		fmt.Fprintf(&b, "timed out (%s)", r.Signal)
	case r.Canceled:
		fmt.Fprintf(&b, "canceled (%s)", r.Signal)
	case r.Signal != "":
		fmt.Fprintf(&b, "killed by %s", r.Signal)
	default:
		fmt.Fprintf(&b, "exit %d", r.ExitCode)
	}
	sandboxed := "sandboxed"
	if !r.Sandboxed {
		sandboxed = "not sandboxed"
	}
	fmt.Fprintf(&b, " after %v on %s (%s); stdout %d bytes", r.Duration.Round(time.Millisecond), r.Substrate, sandboxed, r.StdoutBytes)
	if r.StdoutClipped {
		b.WriteString(" (clipped)")
	}
	fmt.Fprintf(&b, ", stderr %d bytes", r.StderrBytes)
	if r.StderrClipped {
		b.WriteString(" (clipped)")
	}
	return b.String()
}

func (s Spec) normalize() (Spec, error) {
	if len(s.Command) == 0 || s.Command[0] == "" {
		return s, &specError{"no command to run"}
	}
	if s.Timeout < 0 || s.Grace < 0 || s.MaxOutput < 0 {
		return s, &specError{fmt.Sprintf("timeout %v, grace %v and max output %d must not be negative", s.Timeout, s.Grace, s.MaxOutput)}
	}
	if s.Timeout == 0 {
		s.Timeout = DefaultTimeout
	}
	if s.Grace == 0 {
		s.Grace = DefaultGrace
	}
	if s.MaxOutput == 0 {
		s.MaxOutput = DefaultMaxOutput
	}
	if s.Environ == nil {
		s.Environ = os.Environ()
	}
	if s.Logger == nil {
		s.Logger = slog.New(slog.DiscardHandler)
	}
	return s, nil
}

type specError struct{ msg string }

func (e *specError) Error() string   { return "cannot run: " + e.msg }
func (e *specError) Unwrap() error   { return ErrInvalidSpec }
func (e *specError) Is(t error) bool { return t == ErrInvalidSpec }

// Run runs spec's command and returns what happened. It returns an error
// only when the command could not run: the sandbox is unavailable
// ([bwrap.ErrUnavailable]) or could not be set up ([bwrap.ErrSetup]), the
// policy refused ([bwrap.ErrProtectedPath], [bwrap.ErrEnvRefused]), or the
// Spec is invalid ([ErrInvalidSpec]). Cancelling ctx ends the run like a
// timeout does and returns a Result with Canceled set.
func Run(ctx context.Context, spec Spec) (Result, error) {
	s, err := spec.normalize()
	if err != nil {
		return Result{}, err
	}
	if s.NoSandbox {
		return runHost(ctx, s)
	}
	res := Result{Substrate: "bwrap", Sandboxed: true}
	for _, m := range s.Policy.Mechanisms() {
		res.Mechanisms = append(res.Mechanisms, m.String())
	}
	bin := s.Bwrap
	if bin == "" {
		path, _ := lookupEnv(s.Environ, "PATH")
		if bin, err = bwrap.Find(path); err != nil {
			return res, bwrap.Unavailable(err)
		}
	}
	sb, err := s.Policy.Prepare(s.Environ)
	if err != nil {
		return res, err
	}
	defer sb.Close()
	cmd, err := sb.Command(bin, s.Command)
	if err != nil {
		return res, err
	}
	cmd.SysProcAttr = bwrapAttr()
	s.Logger.Debug("run", "spec", s.String(), "bwrap", bin)
	t, err := start(cmd, s)
	if err != nil {
		return res, bwrap.Unavailable(fmt.Errorf("cannot run %s: %w", bin, err))
	}
	t.wait(ctx, s, true, &res)
	if !sb.Started() && !res.TimedOut && !res.Canceled {
		return Result{Substrate: "bwrap", Sandboxed: true, Mechanisms: res.Mechanisms}, sb.Failure(ctx, res.Stderr)
	}
	return res, nil
}

// runHost runs the command without a sandbox.
func runHost(ctx context.Context, s Spec) (Result, error) {
	res := Result{Substrate: "host", Sandboxed: false}
	if err := s.Policy.Validate(); err != nil {
		return res, err
	}
	ws := s.Policy.Workspace()
	env := s.Policy.Environment(s.Environ)
	for i, kv := range env {
		if strings.HasPrefix(kv, "HOME=") {
			if h, ok := lookupEnv(s.Environ, "HOME"); ok {
				env[i] = "HOME=" + h
			} else {
				env = append(env[:i], env[i+1:]...)
			}
			break
		}
	}
	path, _ := lookupEnv(env, "PATH")
	prog, code, why := lookPath(s.Command[0], path, ws)
	if code != 0 {
		res.ExitCode = code
		res.Stderr = fmt.Sprintf("cordon: %s: %s\n", s.Command[0], why)
		res.StderrBytes = int64(len(res.Stderr))
		return res, nil
	}
	var t *tree
	var err error
	for _, ns := range []bool{true, false} {
		cmd := &exec.Cmd{Path: prog, Args: s.Command, Env: env, Dir: ws}
		var mechs []string
		cmd.SysProcAttr, mechs = hostAttr(ns)
		if cmd.SysProcAttr == nil {
			continue
		}
		res.Mechanisms = append([]string{"host: no sandbox (explicit --no-sandbox)"}, mechs...)
		s.Logger.Debug("run", "spec", s.String(), "pid-namespace", ns)
		t, err = start(cmd, s)
		if err == nil || !nsRefused(err) {
			break
		}
	}
	if err != nil {
		switch {
		case errors.Is(err, unix.ENOENT):
			res.ExitCode = 127
		case errors.Is(err, unix.EACCES), errors.Is(err, unix.ENOEXEC), errors.Is(err, unix.EISDIR):
			res.ExitCode = 126
		default:
			return res, &specError{fmt.Sprintf("cannot start %s: %v", s.Command[0], err)}
		}
		res.Stderr = fmt.Sprintf("cordon: %s: %v\n", s.Command[0], err)
		res.StderrBytes = int64(len(res.Stderr))
		return res, nil
	}
	t.wait(ctx, s, false, &res)
	return res, nil
}

// lookPath finds name as a shell would in path, relative to dir: it
// returns the program, or 127 (not found) or 126 (not executable) and why.
func lookPath(name, path, dir string) (string, int, string) {
	check := func(p string) int {
		st, err := os.Stat(p)
		switch {
		case err != nil:
			return 127
		case st.IsDir() || st.Mode().Perm()&0o111 == 0 || unix.Access(p, unix.X_OK) != nil:
			return 126
		}
		return 0
	}
	if strings.Contains(name, "/") {
		p := name
		if !filepath.IsAbs(p) {
			p = filepath.Join(dir, p)
		}
		switch check(p) {
		case 127:
			return "", 127, "no such file or directory"
		case 126:
			return "", 126, "permission denied"
		}
		return p, 0, ""
	}
	code := 127
	for _, d := range filepath.SplitList(path) {
		if !filepath.IsAbs(d) {
			continue
		}
		p := filepath.Join(d, name)
		switch check(p) {
		case 0:
			return p, 0, ""
		case 126:
			code = 126
		}
	}
	if code == 126 {
		return "", 126, "permission denied"
	}
	return "", 127, "command not found"
}

// tree is a started command with its output being drained.
type tree struct {
	cmd      *exec.Cmd
	started  time.Time
	outR     *os.File
	errR     *os.File
	out      *capture.Buffer
	errb     *capture.Buffer
	drained  chan struct{}
	exited   chan struct{}
	waitErr  error
	sandbox  bool
	logger   *slog.Logger
	deadline time.Duration
}

// start starts cmd with its output going to bounded buffers through large
// pipes.
func start(cmd *exec.Cmd, s Spec) (*tree, error) {
	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return nil, err
	}
	setPipeSize(outW, pipeSize)
	setPipeSize(errW, pipeSize)
	cmd.Stdout, cmd.Stderr = outW, errW
	cmd.Stdin = s.Stdin
	// Should a descriptor of stdin outlive the tree, Wait still returns.
	cmd.WaitDelay = drainWait
	t := &tree{
		cmd: cmd, outR: outR, errR: errR,
		out: capture.New(s.MaxOutput), errb: capture.New(s.MaxOutput),
		drained: make(chan struct{}), exited: make(chan struct{}), logger: s.Logger,
	}
	t.started = time.Now()
	err = cmd.Start()
	outW.Close()
	errW.Close()
	if err != nil {
		outR.Close()
		errR.Close()
		return nil, err
	}
	go func() {
		done := make(chan struct{})
		go func() { drain(errR, t.errb); close(done) }()
		drain(outR, t.out)
		<-done
		close(t.drained)
	}()
	go func() {
		t.waitErr = cmd.Wait()
		close(t.exited)
	}()
	return t, nil
}

// drain reads r to the end into b.
func drain(r *os.File, b *capture.Buffer) {
	buf := make([]byte, readSize)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			b.Write(buf[:n])
		}
		if err != nil {
			return
		}
	}
}

// wait waits for the tree to end (by itself, on the deadline or on
// cancellation), kills what is left, collects the output and fills res.
func (t *tree) wait(ctx context.Context, s Spec, sandboxed bool, res *Result) {
	timer := time.NewTimer(s.Timeout)
	defer timer.Stop()
	select {
	case <-t.exited:
	case <-timer.C:
		res.TimedOut = true
		res.Signal = t.terminate(sandboxed, s.Grace)
	case <-ctx.Done():
		res.Canceled = true
		res.Signal = t.terminate(sandboxed, s.Grace)
	}
	<-t.exited
	if !sandboxed {
		// Background jobs left in the group die with the run.
		killGroup(t.cmd.Process.Pid, unix.SIGKILL)
	}
	select {
	case <-t.drained:
	case <-time.After(drainWait):
		t.logger.Debug("output still open after the tree ended; closing it")
		now := time.Now()
		t.outR.SetReadDeadline(now)
		t.errR.SetReadDeadline(now)
		<-t.drained
	}
	t.outR.Close()
	t.errR.Close()
	res.Duration = time.Since(t.started)

	st := t.cmd.ProcessState
	if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		res.ExitCode = 128 + int(ws.Signal())
		if res.Signal == "" {
			res.Signal = unix.SignalName(ws.Signal())
		}
	} else {
		res.ExitCode = st.ExitCode()
	}
	if res.TimedOut {
		res.ExitCode = 124
	}
	res.Stdout, res.StdoutBytes, res.StdoutClipped = t.out.String(), t.out.Total(), t.out.Clipped()
	res.Stderr, res.StderrBytes, res.StderrClipped = t.errb.String(), t.errb.Total(), t.errb.Clipped()
	t.logger.Debug("done", "result", res.String())
}

// terminate ends the tree: SIGTERM to every process of it, then, if the
// command has not exited within grace, SIGKILL to all of them. It returns
// the name of the last signal sent.
func (t *tree) terminate(sandboxed bool, grace time.Duration) string {
	pid := t.cmd.Process.Pid
	t.logger.Debug("terminating", "pid", pid, "grace", grace)
	signalTree(pid, sandboxed, unix.SIGTERM)
	select {
	case <-t.exited:
		return "SIGTERM"
	case <-time.After(grace):
	}
	signalTree(pid, sandboxed, unix.SIGKILL)
	return "SIGKILL"
}

func lookupEnv(environ []string, name string) (string, bool) {
	for i := len(environ) - 1; i >= 0; i-- {
		if k, v, ok := strings.Cut(environ[i], "="); ok && k == name {
			return v, true
		}
	}
	return "", false
}
