// Package proc is cordon's process control, below every substrate that
// runs processes: it starts one process tree with its output drained into
// bounded captures, bounds its wall-clock time, and kills the whole tree —
// grandchildren that called setsid(2) included — with SIGTERM, a grace
// period, then SIGKILL, through pidfds so that a reused PID is never hit.
//
// A [Tree] ends when its root process has exited and every process the
// caller asked it to outlast ([Tree.Outlast], a sandbox's PID-namespace
// init) is gone: no process it started outlives [Tree.Wait].
package proc

import (
	"context"
	"io"
	"log/slog"
	"os"
	"os/exec"
	goruntime "runtime"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/cordon-run/cordon/internal/capture"
	"github.com/cordon-run/cordon/substrate"
)

// Defaults for the zero values of a [Spec].
const (
	DefaultTimeout   = 2 * time.Minute
	DefaultGrace     = 2 * time.Second
	DefaultMaxOutput = 1 << 20
)

// drainWait bounds how long Wait keeps reading output after the tree is
// gone; only a descriptor smuggled out of the tree can make it matter.
const drainWait = time.Second

// reapWait bounds how long Wait waits for killed processes to be gone.
const reapWait = 5 * time.Second

// readSize is the size of each read from an output pipe, and pipeSize the
// pipe buffer asked for (Linux allows 1 MiB without privilege).
const (
	readSize = 256 << 10
	pipeSize = 1 << 20
)

// Spec is one process tree to start.
type Spec struct {
	// Cmd is the root process: its Path, Args, Env, Dir, ExtraFiles and
	// SysProcAttr are the caller's; Start sets its standard streams.
	Cmd *exec.Cmd
	// Stdin is the root's standard input (empty if nil).
	Stdin io.Reader
	// MaxOutput is the number of bytes kept of each of stdout and stderr.
	MaxOutput int64
	// Timeout bounds the run; Grace is the time between SIGTERM and SIGKILL.
	Timeout, Grace time.Duration
	// Supervised: the root supervises a sandbox (bwrap) whose own death
	// kills the sandbox at once. SIGTERM then goes to the root's
	// descendants only, so that the command gets its grace period.
	Supervised bool
	// Reaper: the root reaps and kills its own tree (the landlock
	// supervisor): at the kill step it gets SIGUSR1, not SIGKILL, and
	// kills the rest itself; SIGKILL reaches it only if it has not exited
	// after a while. SIGTERM goes to the tree as usual.
	Reaper bool
	// FreshKeyring: the thread that forks the root joins a new, empty
	// session keyring first, so the caller's keys stay out.
	FreshKeyring bool
	// Enter, if set, runs on the thread that forks the root, just before
	// the fork: the root starts where that thread then is (in its
	// cgroups). The leave it returns runs on the same thread once the
	// root has started (or failed to).
	Enter func() (leave func(), err error)
	// Started, if set, runs on the thread that forked the root, once the
	// root has started and leave has run, before Start returns: for what
	// the root waits on (bwrap reads its options from a pipe), which
	// would otherwise wait until the caller is scheduled again — on a
	// busy or fresh process, a new thread and hundreds of microseconds.
	Started func(pid int)
	// Logger receives debug records (discarded if nil).
	Logger *slog.Logger
}

// Tree is a started process tree with its output being drained.
type Tree struct {
	spec    Spec
	cmd     *exec.Cmd
	started time.Time
	outR    *os.File
	errR    *os.File
	out     *capture.Buffer
	errb    *capture.Buffer
	drained chan struct{}
	exited  chan struct{}
	// waited is closed as Wait returns: the forking thread, kept until
	// then, ends after the outcome is known rather than competing with
	// the goroutines that collect it when the root exits.
	waited   chan struct{}
	waitDone sync.Once

	mu      sync.Mutex
	outlast []int // pidfds of processes Wait outlasts ([Tree.Outlast])
	// deadline ends the tree from its own goroutine when the run's time
	// is up ([Tree.StartClock]); nil until armed.
	deadline *time.Timer
	ending   sync.Once
	ended    chan struct{} // closed once an ending (deadline, ctx) is done
	endSig   string        // the last signal the ending sent
	timedOut bool
	canceled bool
}

// KeyringError is a failure to give the tree a session keyring of its own.
type KeyringError struct{ Err error }

func (e *KeyringError) Error() string {
	return "cannot give the command a session keyring of its own: " + e.Err.Error()
}
func (e *KeyringError) Unwrap() error { return e.Err }

// EnterError is a failure of [Spec.Enter]: the root did not start.
type EnterError struct{ Err error }

func (e *EnterError) Error() string { return e.Err.Error() }
func (e *EnterError) Unwrap() error { return e.Err }

// Start starts the tree. An error means the root did not start.
func Start(s Spec) (*Tree, error) {
	if s.Timeout <= 0 {
		s.Timeout = DefaultTimeout
	}
	if s.Grace <= 0 {
		s.Grace = DefaultGrace
	}
	if s.MaxOutput <= 0 {
		s.MaxOutput = DefaultMaxOutput
	}
	if s.Logger == nil {
		s.Logger = slog.New(slog.DiscardHandler)
	}
	outR, outW, err := Pipe(true, false)
	if err != nil {
		return nil, err
	}
	errR, errW, err := Pipe(true, false)
	if err != nil {
		outR.Close()
		outW.Close()
		return nil, err
	}
	setPipeSize(outW, pipeSize)
	setPipeSize(errW, pipeSize)
	cmd := s.Cmd
	cmd.Stdout, cmd.Stderr = outW, errW
	cmd.Stdin = s.Stdin
	// Should a descriptor of stdin outlive the tree, Wait still returns.
	cmd.WaitDelay = drainWait
	t := &Tree{
		spec: s, cmd: cmd, outR: outR, errR: errR,
		out: capture.New(s.MaxOutput), errb: capture.New(s.MaxOutput),
		drained: make(chan struct{}), exited: make(chan struct{}), waited: make(chan struct{}),
	}
	t.started = time.Now()
	t.ended = make(chan struct{})
	started := make(chan error, 1)
	go func() {
		// This goroutine's thread forks the root and lives exactly as
		// long as the run: a child's Pdeathsig fires when the thread that
		// forked it exits, and the thread carries the fresh session
		// keyring. The goroutine ends locked to its thread, which ends
		// the thread.
		goruntime.LockOSThread()
		if s.FreshKeyring {
			if err := newSessionKeyring(); err != nil {
				started <- &KeyringError{err}
				return
			}
		}
		leave := func() {}
		if s.Enter != nil {
			var err error
			if leave, err = s.Enter(); err != nil {
				started <- &EnterError{err}
				return // the thread ends with the goroutine, wherever it is
			}
		}
		err := cmd.Start()
		leave() // before anyone hears that the root started
		if err != nil {
			started <- err
			return
		}
		if s.Started != nil {
			s.Started(cmd.Process.Pid)
		}
		// Another goroutine waits for the root; this one parks until
		// Wait has returned — the root has exited by then — which hands
		// its processor to the caller at once (a thread blocked in
		// wait(2) would keep it until the scheduler took it back), and
		// keeps the thread's end, a locked goroutine's, off the path from
		// the root's exit to the outcome.
		go func() {
			cmd.Wait() // the outcome is in cmd.ProcessState
			close(t.exited)
		}()
		started <- nil
		<-t.waited // the root has exited, and its outcome is collected
	}()
	err = <-started
	outW.Close()
	errW.Close()
	if err != nil {
		outR.Close()
		errR.Close()
		return nil, err
	}
	if !s.Supervised {
		t.StartClock() // the root is the command: its time runs from now
	}
	go func() {
		done := make(chan struct{})
		go func() { drain(errR, t.errb); close(done) }()
		drain(outR, t.out)
		<-done
		close(t.drained)
	}()
	return t, nil
}

// Arm makes the call of a tree started ahead of it (a sandbox made
// before its command arrived): the run's time bound, its output bound
// and its duration count from now. It reports false, changing nothing
// that matters, when the tree has printed anything already — it is not
// the fresh tree its caller takes it for. Call it before Wait.
func (t *Tree) Arm(timeout time.Duration, maxOutput int64) bool {
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	if maxOutput <= 0 {
		maxOutput = DefaultMaxOutput
	}
	if !t.out.Relimit(maxOutput) || !t.errb.Relimit(maxOutput) {
		return false
	}
	t.spec.Timeout, t.spec.MaxOutput = timeout, maxOutput
	t.started = time.Now()
	t.StartClock()
	return true
}

// StartClock arms the run's deadline from now: when the command is let
// start. A tree whose root runs the command itself is armed as it starts;
// a supervisor that holds the command until the sandbox is verified
// (bwrap, Supervised) calls it as it lets the command go, and one made
// ahead of its call is armed by [Tree.Arm]. Armed, the deadline ends the
// tree from its own goroutine: neither the setting up before nor a caller
// slow to call Wait after moves it. Wait arms a tree never armed.
func (t *Tree) StartClock() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.armLocked()
}

func (t *Tree) armLocked() {
	if t.deadline != nil {
		t.deadline.Stop()
	}
	t.deadline = time.AfterFunc(t.spec.Timeout, func() { t.end(true) })
}

// end ends the tree, once, unless it has exited already: at its deadline
// (timedOut) or when the caller's context is done.
func (t *Tree) end(timedOut bool) {
	t.ending.Do(func() {
		defer close(t.ended)
		select {
		case <-t.exited:
			return // it ended by itself first
		default:
		}
		sig := t.terminate(t.spec.Grace)
		t.mu.Lock()
		t.endSig, t.timedOut, t.canceled = sig, timedOut, !timedOut
		t.mu.Unlock()
	})
}

// Pid is the root's process ID.
func (t *Tree) Pid() int { return t.cmd.Process.Pid }

// Exited is closed when the root has exited.
func (t *Tree) Exited() <-chan struct{} { return t.exited }

// Outlast makes Wait return only once the process behind pidfd fd has
// exited too (fd < 0: none): a sandbox's PID-namespace init, whose death
// ends every process of the namespace — and, killed, the way the tree's
// SIGKILL reaches them all ([Tree.terminate]). Wait closes it.
func (t *Tree) Outlast(fd int) {
	if fd < 0 {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.outlast = append(t.outlast, fd)
}

// outlasting returns the pidfds Wait outlasts.
func (t *Tree) outlasting() []int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Clone(t.outlast)
}

// Kill ends the tree at once (SIGKILL to every process of it). A
// supervised tree whose root has been reaped has nothing left to signal
// by the root's ID, which may name another process by then: the root's
// death killed the sandbox it supervised, whose inits Wait outlasts.
// Kill then does nothing.
func (t *Tree) Kill() {
	if t.spec.Supervised {
		select {
		case <-t.exited:
			return
		default:
		}
	}
	signalTree(t.cmd.Process.Pid, t.spec.Supervised, syscall.SIGKILL)
}

// readBuffers recycles drain's read buffers across runs: a run that
// prints nothing should not leave half a megabyte to the collector.
var readBuffers = sync.Pool{New: func() any { return new([readSize]byte) }}

// drain reads r to the end into b.
func drain(r *os.File, b *capture.Buffer) {
	p := readBuffers.Get().(*[readSize]byte)
	defer readBuffers.Put(p)
	buf := p[:]
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

// Wait waits for the tree to end — by itself, at the deadline, or when ctx
// is done — kills what is left of it, collects the output and returns the
// outcome.
func (t *Tree) Wait(ctx context.Context) substrate.Outcome {
	defer t.waitDone.Do(func() { close(t.waited) })
	var o substrate.Outcome
	t.mu.Lock()
	if t.deadline == nil {
		t.armLocked()
	}
	deadline := t.deadline
	s := t.spec
	t.mu.Unlock()
	select {
	case <-t.exited:
	case <-t.ended:
	case <-ctx.Done():
		t.end(false)
	}
	deadline.Stop()
	<-t.exited
	// An ending begun (the deadline fired, the context ended) is done
	// first; none begins after this.
	t.ending.Do(func() { close(t.ended) })
	<-t.ended
	t.mu.Lock()
	o.TimedOut, o.Canceled, o.Signal = t.timedOut, t.canceled, t.endSig
	t.mu.Unlock()
	t.mu.Lock()
	fds := t.outlast // awaited and closed: no ending begins after this
	t.outlast = nil
	t.mu.Unlock()
	if len(fds) > 0 {
		awaitGone(fds, reapWait)
	}
	if !s.Supervised {
		// Background jobs left in the group die with the run.
		killGroup(t.cmd.Process.Pid, syscall.SIGKILL)
	}
	select {
	case <-t.drained:
	case <-time.After(drainWait):
		s.Logger.Debug("output still open after the tree ended; closing it")
		now := time.Now()
		t.outR.SetReadDeadline(now)
		t.errR.SetReadDeadline(now)
		<-t.drained
	}
	t.outR.Close()
	t.errR.Close()
	o.Duration = time.Since(t.started)

	st := t.cmd.ProcessState
	if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		o.ExitCode = 128 + int(ws.Signal())
		if o.Signal == "" {
			o.Signal = signalName(ws.Signal())
		}
	} else {
		o.ExitCode = st.ExitCode()
	}
	if o.TimedOut {
		o.ExitCode = 124
	}
	o.Stdout, o.StdoutBytes, o.StdoutClipped = t.out.String(), t.out.Total(), t.out.Clipped()
	o.Stderr, o.StderrBytes, o.StderrClipped = t.errb.String(), t.errb.Total(), t.errb.Clipped()
	if s.Logger.Enabled(ctx, slog.LevelDebug) {
		s.Logger.Debug("done", "outcome", o.String())
	}
	return o
}

// termWalkHook, set by tests alone, runs before terminate's SIGTERM walks
// the tree (a slow walk: a loaded host's /proc).
var termWalkHook func()

// terminate ends the tree: SIGTERM to every process of it, then, if the
// root has not exited within grace, SIGKILL to all of them. It returns the
// name of the last signal sent.
func (t *Tree) terminate(grace time.Duration) string {
	pid := t.cmd.Process.Pid
	t.spec.Logger.Debug("terminating", "pid", pid, "grace", grace)
	// The grace counts from now, not from the end of the SIGTERM's walk
	// of /proc, which on a loaded host takes a good part of a second: the
	// SIGKILL through the namespace's init comes on time meanwhile.
	graceOver := time.After(grace)
	termed := make(chan []int, 1)
	go func() {
		if termWalkHook != nil {
			termWalkHook()
		}
		termed <- signalTree(pid, t.spec.Supervised, syscall.SIGTERM)
	}()
	var fds []int
	sig := "SIGTERM"
	select {
	case <-t.exited:
	case <-graceOver:
		sig = "SIGKILL"
		if t.spec.Reaper {
			// The root is not reaped before Wait: its PID is still its own.
			// Said again every 100 ms, should a signal be lost.
			deadline := time.After(reapWait)
			tick := time.NewTicker(100 * time.Millisecond)
			defer tick.Stop()
			for done := false; !done; {
				syscall.Kill(pid, syscall.SIGUSR1)
				select {
				case <-t.exited:
					done = true
				case <-tick.C:
				case <-deadline:
					fds = append(fds, signalTree(pid, false, syscall.SIGKILL)...)
					done = true
				}
			}
			break
		}
		if inits := t.outlasting(); t.spec.Supervised && len(inits) > 0 {
			// The namespace's init killed ends every process of its
			// namespace, and none forks any more: no walk of /proc, which
			// on a loaded host takes a good part of a second each.
			killInits(pid, inits)
			break
		}
		fds = append(fds, signalTree(pid, t.spec.Supervised, syscall.SIGKILL)...)
	}
	// A supervisor can be gone before its namespace's init has finished
	// killing the namespace: the run ends when every process it signalled
	// has.
	<-t.exited
	fds = append(fds, <-termed...)
	awaitGone(fds, reapWait)
	return sig
}
