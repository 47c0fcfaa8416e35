package bwrap

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cordon-run/cordon/harness"
	"github.com/cordon-run/cordon/internal/limits"
	"github.com/cordon-run/cordon/internal/proc"
	"github.com/cordon-run/cordon/substrate"
	"github.com/cordon-run/cordon/substrate/egress"
)

// Spec is one command to run in a sandbox.
type Spec struct {
	// Policy is the sandbox: the workspace (also the working directory),
	// what the command may do to it, the network, the environment names it
	// receives, extra read-only binds.
	Policy Policy
	// Command is the program and its arguments, looked up in the
	// sandbox's PATH.
	Command []string
	// Stdin is the command's standard input (empty if nil).
	Stdin io.Reader
	// Environ is the caller's environment, from which the allow-list draws
	// and in whose PATH bwrap is looked up (os.Environ() if nil).
	Environ []string
	// Bwrap is the bubblewrap binary (looked up in Environ's PATH if
	// empty).
	Bwrap string
	// Timeout bounds the run, Grace is the time between SIGTERM and
	// SIGKILL, MaxOutput the bytes kept of each of stdout and stderr
	// (package proc's defaults if zero).
	Timeout, Grace time.Duration
	MaxOutput      int64
	// Logger receives debug records of the run's life (discarded if nil).
	Logger *slog.Logger
	// Pool, when set, runs a `/bin/sh -c SCRIPT` command without stdin
	// in a sandbox made ahead of the call, when it has one of exactly
	// this spec's sandbox (see [Pool]).
	Pool *Pool
	// Groups, when set, makes the run's cgroups ahead of it (see
	// [Groups]).
	Groups *Groups
	// Egress serves the sandbox's way out when the policy has egress
	// rules ([Policy.WithEgress]): the run hands it the host's end of
	// the forwarder's control socket for its length. Required then.
	Egress *egress.Proxy
	// Later, when set, is handed the last step of the run — giving up the
	// workspace's run lock, and removing the placeholders when no other
	// run holds it — instead of Run doing it before it returns: a
	// resident caller returns the outcome sooner and lets a burst of runs
	// share their placeholders. It must call the function it is given.
	Later func(func())
	// OneShot: the process exits once the run is over. The mount watch
	// asks whether the sandbox's init took its release (every
	// releaseEvery) rather than watching for its read of its seccomp
	// program ([watchRead]): a watch removed moments before the process
	// exits makes the exit wait for the kernel's grace period.
	OneShot bool
}

// initWait bounds how long Run waits for bwrap to report the sandbox's
// init; it is written right after bwrap's clone(2).
const initWait = 10 * time.Second

// Run runs the command in a new sandbox and returns what happened. The
// command starts only once bubblewrap has finished the sandbox — it blocks
// on a descriptor cordon holds — and cordon has checked from outside that
// the process bwrap reports lives in a user, mount, PID, IPC and UTS
// namespace (and, without the network, a network namespace) other than
// cordon's own; bwrap then starts the command as PID 2 of that PID
// namespace. A run that bwrap did not report as started never ran.
//
// With a [Pool], a command `/bin/sh -c SCRIPT` without standard input
// runs in a sandbox the pool made ahead of the call, when it holds one of
// exactly the sandbox Run would make now ([Pool] says how that is
// checked); otherwise in a new one.
//
// Run returns an error only when the command did not run: the sandbox is
// unavailable ([ErrUnavailable]) or could not be set up ([ErrSetup]), the
// policy refused to start ([ErrProtectedPath], [ErrEnvRefused], a refused
// workspace), or the spec is invalid ([ErrInvalidPolicy]). A command that
// is not found (127) or not executable (126) is an outcome.
func Run(ctx context.Context, s Spec) (substrate.Outcome, error) {
	if len(s.Command) == 0 || s.Command[0] == "" {
		return substrate.Outcome{}, invalid("no command to run")
	}
	if err := s.Policy.Validate(); err != nil {
		return substrate.Outcome{}, err
	}
	if s.Environ == nil {
		s.Environ = os.Environ()
	}
	if s.Logger == nil {
		s.Logger = slog.New(slog.DiscardHandler)
	}
	if s.Pool != nil {
		if o, err, ok := s.Pool.run(ctx, s); ok {
			return o, err
		}
	}
	r, err := launch(ctx, s, nil, nil)
	if err != nil {
		return substrate.Outcome{}, err
	}
	return r.finish(ctx)
}

// running is a sandbox bwrap has set up and (verified) released: its
// command runs, or — made ahead by a [Pool] — waits for its script.
type running struct {
	s   Spec
	sb  *Sandbox
	grp *limits.Group
	t   *proc.Tree
	bin string
	// binPlaces are the places of bin and the directories above it, as
	// the check of the workspace's exposure told them before the
	// release (nil: not told): the mount watch distrusts bwrap when a
	// mount of the sandbox exposes one.
	binPlaces []placed
	verified  bool   // bwrap reported an init, which was checked and released
	initPID   int    // the sandbox's init, as this process sees it
	table     *table // a pooled sandbox's mount table, open since it was made
	base      string // and what it was when the sandbox was ready
	prepared  func() error
	// stopEgress ends the egress proxy's service of the run, or is nil.
	stopEgress func()
	// readSeen is closed once the sandbox's init has read its seccomp
	// program, which it does as it takes its release (nil: not watched;
	// the mount watch asks); stopReadSeen ends that watch.
	readSeen     <-chan struct{}
	stopReadSeen func()
	// initGone is closed once the released sandbox's init has died (nil:
	// not known); stopInitGone ends that wait.
	initGone     <-chan struct{}
	stopInitGone func()
	// quarantined is set once endSession, on the mount watch, has
	// quarantined what the run left in the git index, and quarantine
	// holds its notes (false: finish quarantines). indexRead reads what
	// is to be quarantined, once: finish reads it beside the watch's
	// last look (its moves must wait for that look; its reading need
	// not).
	quarantined bool
	quarantine  []string
	indexRead   func() *harness.QuarantineRead
	// sessionEnded is closed once the placeholder session that
	// endSession took is ended (nil: end ends it).
	sessionEnded chan struct{}
}

// quarantineHook, set by tests alone, runs as a run's git index is
// quarantined.
var quarantineHook func()

// endSession ends the workspace's placeholder session in the background
// as soon as nothing of the sandbox can write any more: its init has
// died, every process of its PID namespace first, and the mount watch
// has taken its last look and found the table unchanged (moving a
// placeholder aside before that look would read as a mount that went).
// The placeholders are then put away while the rest of the run is
// collected (bwrap's exit, the output), not after it. The watch calls
// it; finish takes its quarantine notes once the watch is done, and end
// waits for the session's end.
//
// Ending the session gives up the run's lock of the workspace, which
// keeps runs of nested workspaces apart: what the run left in the git
// index (final now) is quarantined first — it moves P/.git of each new
// gitlink P, where a nested run would bind its own. That is done here,
// on the watch, which finish waits for anyway: a goroutine of its own
// that handed the notes over and went on to end the session kept its
// processor, and the caller, ready, waited behind the session's end
// (0.1–0.4 ms a run here).
func (r *running) endSession() {
	sess := r.sb.takeSession()
	if sess == nil {
		return
	}
	r.quarantine, r.quarantined = r.quarantineNotes(), true
	r.sessionEnded = make(chan struct{})
	go func() {
		defer close(r.sessionEnded)
		sess.End()
	}()
}

// quarantineNotes quarantines what the run left in the git index
// ([harness.Protected.QuarantineNotes]); call it once every process of
// the run is gone, and before the run's placeholder session ends.
func (r *running) quarantineNotes() []string {
	if quarantineHook != nil {
		quarantineHook()
	}
	if q := r.indexRead(); q != nil {
		return q.Notes()
	}
	return nil
}

// readIndex is a run's indexRead: call it once every process of the run
// is gone.
func (s *Sandbox) readIndex() *harness.QuarantineRead {
	if p := s.Protected(); p != nil {
		return p.ReadQuarantine()
	}
	return nil
}

// end releases what the run held once its tree is gone: the side
// channels and the mount table at once; the limits' cgroups and the
// workspace's placeholder session (unless endSession took it) by the
// spec's Later, when it has one.
func (r *running) end() {
	r.prepared()
	if r.stopInitGone != nil {
		r.stopInitGone()
	}
	if r.stopReadSeen != nil {
		r.stopReadSeen()
	}
	if r.stopEgress != nil {
		r.stopEgress()
	}
	if r.table != nil {
		r.table.close()
	}
	sess := r.sb.takeSession()
	r.sb.Close()
	last := func() {
		// Two file systems, no order between them.
		var cgroups sync.WaitGroup
		if r.grp != nil {
			cgroups.Go(func() { r.grp.Close() })
		}
		if sess != nil {
			sess.End()
		}
		if r.sessionEnded != nil {
			<-r.sessionEnded
		}
		cgroups.Wait()
		r.s.Groups.refill(r.s.Policy.limits)
	}
	if r.s.Later != nil {
		r.s.Later(last)
	} else {
		last()
	}
}

// openInit opens a pidfd of the sandbox's init (proc.OpenInit); tests
// alone replace it.
var openInit = proc.OpenInit

// releaseHook, set by tests alone, runs just before (false) and just
// after (true) a run's sandbox is released: a test process kills itself
// there to stand for a cordon killed at that instant.
var releaseHook func(released bool)

// launch starts bwrap for the spec and returns once the command is let
// start: bwrap has set the sandbox up, and its init is verified and
// released. built is the spec's sandbox already built (nil: it is built
// while bwrap starts); script, if not nil, is handed to the command as
// descriptor [scriptFD]. On an error nothing ran, and nothing of the run
// is left. A bwrap that ended before it reported a sandbox is not an
// error here: finish says what it was.
func launch(ctx context.Context, s Spec, built *Sandbox, script *os.File) (_ *running, err error) {
	// The host side is prepared while bwrap is found, checked, forked
	// and loaded: bwrap starts first and waits for its options on a pipe.
	sb := built
	prep := make(chan error, 1)
	// bwrap is found and checked by whichever needs it first: the build
	// makes the workspace's harness state and its record of runs, never
	// for a bwrap that may not run — a workspace that holds it (/usr, a
	// bind of /) would be marked a workspace above bwrap for good.
	program := sync.OnceValues(func() (string, error) { return binOf(s) })
	// Whether the workspace lets a sandboxed command write a directory
	// above bwrap through a mount, what a later search for it depends on,
	// or the program this process runs ([exposesAll]): asked beside
	// bwrap's start (the build's goroutine asks once the options are
	// sent), and waited for before the sandbox is released.
	exposure := sync.OnceValues(func() ([]placed, error) {
		real, err := program()
		if err != nil {
			return nil, nil // refused already
		}
		return exposesAll(s, real)
	})
	if sb == nil {
		sb = &Sandbox{policy: s.Policy, env: s.Policy.Environment(s.Environ), early: s.Policy.limits.BornLimited()}
		go func() {
			if _, err := program(); err != nil {
				prep <- err
				return
			}
			err := sb.build(s.Environ)
			if err == nil {
				sb.sendEarly()
			}
			prep <- err
			exposure()
		}()
	} else {
		prep <- nil
	}
	// The run's cgroups, made ahead or meanwhile: bwrap is born in them,
	// and cannot start before them.
	made := make(chan *limits.Group, 1)
	var madeErr error
	if g := s.Groups.take(s.Policy.limits); g != nil {
		made <- g
	} else {
		go func() {
			g, err := s.Policy.limits.Start(sandboxProcesses)
			madeErr = err
			made <- g
		}()
	}
	r := &running{s: s, sb: sb, prepared: sync.OnceValue(func() error { return <-prep }), indexRead: sync.OnceValue(sb.readIndex)}
	group := sync.OnceValue(func() *limits.Group { return <-made })
	defer func() {
		if err != nil {
			r.grp = group()
			r.end()
		}
	}()
	bin, err := program()
	if err != nil {
		return nil, err
	}
	initKnown := make(chan int, 1) // the sandbox's init, once verified
	if len(s.Policy.egress) > 0 {
		stop, err := startEgress(ctx, s, sb, initKnown)
		if err != nil {
			return nil, err
		}
		r.stopEgress = stop
	}
	cmd, err := sb.command(bin, s.Command, script)
	if err != nil {
		return nil, err
	}
	sb.sendEarly() // built already: the options wait in their pipe
	grp := group()
	if grp == nil {
		return nil, &Error{Op: "start", Root: s.Policy.Workspace(), Err: ErrSetup, Cause: madeErr, detail: madeErr.Error()}
	}
	// bwrap in a process group of its own (its --new-session gives the
	// command a session), killed should the thread that forks it die.
	cmd.SysProcAttr = bwrapAttr()
	if s.Logger.Enabled(ctx, slog.LevelDebug) { // the policy's text is long: made only if logged
		s.Logger.Debug("run", "policy", s.Policy.String(), "bwrap", bin, "command", s.Command)
	}
	// bwrap is born in the run's cgroups (the thread that forks it enters
	// them first: moving a whole process, v1, waits for the kernel's RCU,
	// milliseconds). It gets its rlimits while the host side is still
	// being prepared, and its options only after that: the sandbox's
	// processes inherit them, and the user namespace bwrap creates keeps
	// the RLIMIT_NPROC its creator had then as the bound of every count
	// inside it. All of it on the thread that forked bwrap, as soon as
	// bwrap has started: bwrap, loaded, waits for its options, and the
	// caller may not be scheduled again for a while. A run with no rlimit
	// has its options in the pipe as soon as they are built, before bwrap
	// may have started (sendEarly): born in the cgroups, bwrap is under
	// every limit of the run from its first instruction. (A call canceled
	// meanwhile may then have bwrap set a sandbox up; it is never
	// released, as any sandbox of a canceled call.)
	canceled := func() error {
		return &Error{Op: "start", Root: s.Policy.Workspace(), Err: ErrSetup,
			detail: "canceled before the sandbox was verified; the command was not let start"}
	}
	var addErr, prepErr error
	sent := func(pid int) {
		sb.launched()
		if s.Policy.toolAS() > 0 {
			addErr = grp.AddLeavingAS(pid)
		} else {
			addErr = grp.Add(pid)
		}
		// (A bwrap that is gone already gets no option; what it did is
		// judged by finish, as for any bwrap that ends early.)
		if prepErr = r.prepared(); prepErr != nil || addErr != nil && !errors.Is(addErr, limits.ErrGone) || ctx.Err() != nil {
			return // it gets no option from here (those sent early set a sandbox up that is never released)
		}
		if err := sb.sendArgs(); err != nil {
			// bwrap is gone already (EPIPE): what it said is its failure.
			s.Logger.Debug("cannot hand bwrap its options", "err", err)
		}
	}
	t, err := proc.Start(proc.Spec{
		Cmd: cmd, Stdin: s.Stdin, MaxOutput: s.MaxOutput, Timeout: s.Timeout, Grace: s.Grace,
		Supervised: true, FreshKeyring: true, Enter: grp.Enter, Started: sent, Logger: s.Logger,
	})
	if err != nil {
		sb.launched() // bwrap did not start: sent never ran
	}
	var keyErr *proc.KeyringError
	var enterErr *proc.EnterError
	switch {
	case err == nil && prepErr != nil:
		t.Kill()
		sb.Close()
		t.Wait(ctx)
		return nil, prepErr
	case err == nil && addErr != nil && !errors.Is(addErr, limits.ErrGone):
		t.Kill()
		sb.Close()
		t.Wait(ctx)
		return nil, &Error{Op: "start", Root: s.Policy.Workspace(), Err: ErrSetup, Cause: addErr, detail: addErr.Error()}
	case err == nil:
	case r.prepared() != nil:
		return nil, r.prepared()
	case errors.As(err, &keyErr), errors.As(err, &enterErr):
		return nil, &Error{Op: "start", Root: s.Policy.Workspace(), Err: ErrSetup, Cause: err}
	default:
		return nil, Unavailable(fmt.Errorf("cannot run %s: %w", bin, err))
	}
	r.t, r.bin, r.grp = t, bin, grp
	// Read while bwrap sets the sandbox up, not while the sandbox waits
	// for its release. It is bwrap's: the ID is noted only once bwrap
	// has reported the sandbox, after this read, so it lived throughout.
	bwrapID := limits.ProcessID(t.Pid())

	// The sandbox's init, reported by bwrap right after it created the
	// namespaces: verified, it is what the run outlasts.
	var refused error
	select {
	case rec, ok := <-sb.status:
		if !ok || rec.ChildPID <= 0 {
			return r, nil // bwrap ended first: finish says why
		}
		if ctx.Err() != nil {
			// Canceled as the sandbox was reported: a select between the
			// two picks either, and a canceled call is never let start.
			refused = canceled()
			t.Kill()
			break
		}
		if err := verifyInit(rec, s.Policy.network); err != nil {
			t.Kill() // never released: the command does not start
			if !errors.Is(err, errInitGone) {
				refused = err
				break
			}
			return r, nil
		}
		if err := boundInit(rec.ChildPID, s.Policy.limits); err != nil {
			t.Kill() // never released: the command does not start
			refused = &Error{Op: "start", Root: s.Policy.Workspace(), Err: ErrSetup, Cause: err, detail: err.Error()}
			break
		}
		places, err := exposure()
		if err != nil {
			t.Kill() // never released: the command does not start
			refused = err
			break
		}
		r.binPlaces = places
		// Noted before the release: should this process die from now
		// on, the next run ends them by these IDs, which nothing in the
		// sandbox can change ([sweepOrphans]).
		if err := sb.note(rec.ChildPID, t.Pid(), bwrapID); err != nil {
			t.Kill() // never released: the command does not start
			refused = &Error{Op: "start", Root: s.Policy.Workspace(), Err: ErrSetup, Cause: err, detail: "cannot note the sandbox in the registry of runs: " + err.Error()}
			break
		}
		// Held, the init's pidfd is what the end of the run waits for:
		// its death ends every process of the sandbox, and only then is
		// the mount table's last look taken. Without it nothing could
		// tell when the sandbox can no longer write: the command does
		// not start.
		initFD := openInit(rec.ChildPID, rec.PIDNS)
		if initFD < 0 {
			_, err := nsInode(strconv.Itoa(rec.ChildPID), "pid") // asked before the kill
			t.Kill()                                             // never released: the command does not start
			if errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ESRCH) {
				// Gone since it was checked: bwrap failed to set the
				// sandbox up, and finish says with what (as above).
				return r, nil
			}
			refused = &Error{Op: "start", Root: s.Policy.Workspace(), Err: ErrSetup,
				detail: fmt.Sprintf("cannot hold the sandbox's init (process %d) by a pidfd, which the end of the run waits for", rec.ChildPID)}
			break
		}
		t.Outlast(initFD)
		if releaseHook != nil {
			releaseHook(false)
		}
		if script == nil {
			// The command's deadline counts from its release (a
			// sandbox made ahead counts from its call: Arm).
			t.StartClock()
		}
		if built == nil && !s.OneShot {
			// Watched before the release: the init reads its program
			// right after it takes it.
			r.readSeen, r.stopReadSeen = sb.watchRelease()
		}
		if err := sb.release(); err != nil {
			s.Logger.Debug("cannot release the sandbox", "err", err)
		}
		if releaseHook != nil {
			releaseHook(true)
		}
		r.verified, r.initPID = true, rec.ChildPID
		// The mount watch's last look is due when the init has died —
		// every process of the sandbox with it (bwrap may exit before).
		r.initGone, r.stopInitGone = proc.Gone(initFD)
		initKnown <- rec.ChildPID
		grp.Sweep()
		return r, nil
	case <-time.After(initWait):
		refused = Unavailable(fmt.Errorf("%s reported no sandbox within %v", bin, initWait))
		t.Kill()
	case <-ctx.Done():
		// Wait sees ctx too: the command never starts.
		// Nothing was proved a sandbox: what ran (a bwrap that ignores
		// its options runs the command at once) is not a sandboxed run.
		refused = canceled()
		t.Kill()
	}
	t.Wait(ctx)
	return nil, refused
}

// boundInit, where the process limit is an rlimit (no pids cgroup: an
// unprivileged user), sets the RLIMIT_NPROC of the sandbox's init — which
// the command inherits — to the tool's processes plus the init. Inside
// the user namespace bwrap made, the kernel counts only that namespace's
// processes against it, so processes of the user that end during the run
// no longer widen the tool's bound. It is still at most N: bwrap's own
// bound (the user's processes when the run began, plus the run's, which
// its clone needed) holds too, and narrows as the user starts others.
//
// On a kernel before 5.14, which counts every task of the user against
// it, the init keeps bwrap's bound.
func boundInit(pid int, lim limits.Plan) error {
	if lim.Pids != limits.Rlimit || lim.Spec.Pids <= 0 || !nprocPerNamespace() {
		return nil
	}
	n := uint64(lim.Spec.Pids + 1)
	if err := setNproc(pid, n); err != nil {
		return fmt.Errorf("limits: cannot set RLIMIT_NPROC=%d on the sandbox's init (process %d): %w", n, pid, err)
	}
	return nil
}

// finish waits for the run's tree to end (at the latest at its time
// bound, or when ctx ends), releases what it held, and says what
// happened.
func (r *running) finish(ctx context.Context) (substrate.Outcome, error) {
	defer r.end()
	watch := r.watchMounts()
	o := r.t.Wait(ctx)
	// Every process of the run is gone: what the limits saw is final (a
	// pread of each counter, opened with the cgroups), and so is the git
	// index. Read while the watch takes its last look.
	limited := r.grp.Notes()
	r.indexRead()
	changed, watchNotes := watch.done()
	// So is what the run left in the index, quarantined by endSession
	// when the watch ended the session (done orders it before this),
	// else now, under the run's lock.
	if r.quarantined {
		o.Notes = r.quarantine
	} else {
		o.Notes = r.quarantineNotes()
	}
	o.Notes = append(o.Notes, limited...)
	if len(changed) > 0 {
		// The command ran, and cordon ended it: that is the outcome,
		// whatever bwrap got to report.
		o.Notes = append(append(o.Notes, mountNote(changed)), watchNotes...)
		o.ExitCode, o.Signal = 128+int(unix.SIGKILL), "SIGKILL"
		return o, nil
	}
	switch {
	case r.sb.ran():
		remember(r.bin, nil)
		return o, nil
	case o.TimedOut || o.Canceled:
		return o, nil
	}
	if code, why := execFailure(o.Stderr); code != 0 {
		msg := fmt.Sprintf("cordon: %s: %s\n", r.s.Command[0], why)
		return substrate.Outcome{ExitCode: code, Stderr: msg, StderrBytes: int64(len(msg)), Duration: o.Duration}, nil
	}
	return substrate.Outcome{}, r.sb.failure(ctx, o.Stderr)
}

// errInitGone: the process bwrap reported ended before it could be
// checked (bwrap failed to set the sandbox up); the run never started.
var errInitGone = errors.New("the sandbox's init is gone")

// selfNS holds this process's namespace inodes once read (ns → uint64):
// cordon never changes its own namespaces (it unshares and joins none),
// and verifyInit runs while the sandbox waits for its release.
var selfNS sync.Map

func selfNamespace(ns string) (uint64, error) {
	if v, ok := selfNS.Load(ns); ok {
		return v.(uint64), nil
	}
	ino, err := nsInode("self", ns)
	if err == nil {
		selfNS.Store(ns, ino)
	}
	return ino, err
}

// checkedNamespaces are the namespaces verifyInit compares, in order.
var checkedNamespaces = []string{"user", "mnt", "pid", "ipc", "uts", "net"}

// verifyInit checks from outside that the process bwrap reported lives in
// namespaces of its own — not this process's — and is the one bwrap
// described.
func verifyInit(rec statusRecord, net Network) error {
	pid := strconv.Itoa(rec.ChildPID)
	want := map[string]uint64{"pid": rec.PIDNS, "mnt": rec.MntNS, "ipc": rec.IPCNS, "uts": rec.UTSNS, "user": 0}
	if net == NetNone {
		want["net"] = rec.NetNS
	}
	for _, ns := range checkedNamespaces {
		reported, ok := want[ns]
		if !ok {
			continue
		}
		theirs, err := nsInode(pid, ns)
		if errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ESRCH) {
			return errInitGone
		}
		if err != nil {
			return Unavailable(fmt.Errorf("cannot check the sandbox's %s namespace (process %s): %v", ns, pid, err))
		}
		ours, err := selfNamespace(ns)
		if err != nil {
			return Unavailable(fmt.Errorf("cannot read this process's %s namespace: %v", ns, err))
		}
		if theirs == ours {
			return Unavailable(fmt.Errorf("bwrap ran, but not in a sandbox: its process %s shares cordon's %s namespace", pid, ns))
		}
		if ns != "user" && reported != 0 && reported != theirs {
			return Unavailable(fmt.Errorf("bwrap reported %s namespace %d for process %s, which is in %d", ns, reported, pid, theirs))
		}
	}
	return nil
}

// ran reports whether bwrap started the command: it reports the
// command's exit code only after executing it in the finished sandbox.
// Call it after the run.
func (s *Sandbox) ran() bool {
	for {
		select {
		case rec, ok := <-s.status:
			if !ok {
				return false
			}
			if rec.ExitCode != nil {
				return true
			}
		case <-time.After(time.Second):
			return false // a descriptor smuggled out of the tree
		}
	}
}

// execFailure reads bwrap's message for a command it could not execute:
// 127 and why for one not found, 126 for one not executable, 0 otherwise.
func execFailure(stderr string) (int, string) {
	msg := strings.TrimSpace(stderr)
	if i := strings.LastIndex(msg, "\n"); i >= 0 {
		msg = msg[i+1:]
	}
	if !strings.HasPrefix(msg, "bwrap: execvp ") {
		return 0, ""
	}
	switch {
	case strings.HasSuffix(msg, ": No such file or directory"):
		return 127, "command not found"
	case strings.HasSuffix(msg, ": Permission denied"), strings.HasSuffix(msg, ": Exec format error"),
		strings.HasSuffix(msg, ": Is a directory"), strings.HasSuffix(msg, ": Not a directory"):
		return 126, "permission denied"
	}
	return 0, ""
}

// failure explains a command that never started: [ErrUnavailable] when
// bubblewrap cannot create any sandbox on this host ([Detect] says why),
// [ErrSetup] with bwrap's own message (taken from stderr) otherwise.
func (s *Sandbox) failure(ctx context.Context, stderr string) error {
	if err := Detect(ctx, s.bin); err != nil {
		return err
	}
	msg := strings.TrimSpace(stderr)
	if i := strings.LastIndex(msg, "\n"); i >= 0 {
		msg = msg[i+1:]
	}
	if msg == "" {
		msg = "bwrap exited before the command started"
	}
	return &Error{Op: "start", Root: s.policy.workspace, Err: ErrSetup, detail: msg}
}

// Groups makes the cgroups of a resident caller's runs ahead of them: a
// run of a plan run twice before takes cgroups made after the last one,
// with its limits written, instead of waiting for new ones (a v1 memory
// cgroup takes a fraction of a millisecond). Where the limits are
// rlimits, or counted at the start of the run, there is nothing to make
// ahead. Close removes what is left; a process killed leaves them to the
// sweep of abandoned cgroups. A nil *Groups makes none.
type Groups struct{ spares limits.Spares }

// NewGroups returns cgroups made ahead of runs.
func NewGroups() *Groups { return &Groups{} }

// Close removes the cgroups made ahead; no more are made.
func (g *Groups) Close() {
	if g != nil {
		g.spares.Close()
	}
}

func (g *Groups) take(p limits.Plan) *limits.Group {
	if g == nil {
		return nil
	}
	return g.spares.Take(p, sandboxProcesses)
}

// Ahead makes, in the background, what a run of s that is about to be
// asked for would make on its way to bwrap's start: its cgroups, kept in
// s.Groups for it (nil: none), its seccomp program, made once per
// process, and the check of the bwrap it runs, which the run's own check
// then finds remembered (~0.17 ms of a first run in a process against a
// few lstats: [checkProgram]). The run then waits for none of them, and
// decides nothing by them: a remembered check is asked again whether
// what it saw is unchanged, and the run's exposure is asked anew.
func (s Spec) Ahead() {
	if s.Groups != nil {
		s.Groups.spares.Ahead(s.Policy.limits, sandboxProcesses)
	}
	go filterOf(s.Policy.Seccomp())
	go binOf(s)
}

func (g *Groups) refill(p limits.Plan) {
	if g != nil {
		g.spares.Refill(p, sandboxProcesses)
	}
}

// startEgress makes the forwarder's control socket: the sandbox's end for
// sb's command, the host's served by the spec's proxy until the returned
// stop, which waits for its connections to close.
func startEgress(ctx context.Context, s Spec, sb *Sandbox, initKnown <-chan int) (func(), error) {
	if s.Egress == nil {
		return nil, invalid("the policy has egress rules but the spec no proxy (Spec.Egress)")
	}
	fds, err := egress.Socketpair()
	if err != nil {
		return nil, &Error{Op: "start", Root: s.Policy.Workspace(), Err: ErrSetup, Cause: err, detail: "the egress control socket: " + err.Error()}
	}
	host := os.NewFile(uintptr(fds[0]), "egress-control")
	conn, err := net.FileConn(host)
	host.Close()
	if err != nil {
		unix.Close(fds[1])
		return nil, &Error{Op: "start", Root: s.Policy.Workspace(), Err: ErrSetup, Cause: err, detail: "the egress control socket: " + err.Error()}
	}
	sb.mu.Lock()
	sb.egressCtl = os.NewFile(uintptr(fds[1]), "egress-control")
	sb.mu.Unlock()
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	ctl := conn.(*net.UnixConn)
	go func() {
		defer close(done)
		if as := s.Policy.toolAS(); as > 0 {
			if err := limitInit(ctx, ctl, as, initKnown); err != nil {
				s.Logger.Debug("the sandbox's init was not limited: the tool does not start", "err", err)
				ctl.Close()
				return
			}
		}
		s.Egress.ServeControl(ctx, ctl)
	}()
	return func() { cancel(); <-done }, nil
}

// limitInit answers the forwarder of a run whose tool gets an
// address-space limit the forwarder has not (see [egress.Forwarder]):
// once the forwarder says it runs, the sandbox's init — bwrap's, of the
// tool's uid and dumpable, whose memory the tool could write and run its
// own code in — gets the limit too, and only then may the tool start.
func limitInit(ctx context.Context, ctl *net.UnixConn, as uint64, initKnown <-chan int) error {
	stop := context.AfterFunc(ctx, func() { ctl.SetReadDeadline(time.Now()) })
	defer stop()
	var b [1]byte
	if n, err := ctl.Read(b[:]); err != nil || n != 1 || b[0] != egress.LimitReady {
		return fmt.Errorf("no word from the forwarder: %v", err)
	}
	var pid int
	select {
	case pid = <-initKnown:
	case <-ctx.Done():
		return ctx.Err()
	}
	if err := setAS(pid, as); err != nil {
		return fmt.Errorf("cannot set RLIMIT_AS=%d on the sandbox's init (process %d): %w", as, pid, err)
	}
	_, err := ctl.Write([]byte{egress.LimitReady})
	return err
}
