package bwrap

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/cordon-run/cordon/internal/limits"
	"github.com/cordon-run/cordon/internal/placeholder"
	"github.com/cordon-run/cordon/substrate"
)

// Pool keeps sandboxes made ahead of their command, for a resident caller
// (cordon mcp): a call then costs the delivery of its script, not the
// making of a sandbox.
//
// Each pooled sandbox is made by the code that makes every sandbox
// ([Run]): its options, cgroups and rlimits, seccomp filter and placeholder
// session are a fresh run's, its init is verified and released the same
// way. Its command is the trusted /bin/sh, reading its script from a pipe
// with shell builtins alone (no process is forked, no program of the
// workspace's PATH run), then closing the pipe and executing /bin/sh -c
// SCRIPT with exactly a fresh run's argument list, environment and
// descriptors. The time bound and the output bound start at the call.
//
// A call takes a sandbox only when it is exactly the one Run would make
// now: at the call the sandbox is built again (the run lock taken, the
// protected set found, placeholders made) and its identity compared —
// bwrap and its options, the environment, the limits and seccomp filter,
// the grace period, and the device and inode of every path the options
// name. A protected path that appeared, went, moved or was replaced since
// the sandbox was made changes that identity: the stale sandbox is
// discarded and the call runs in a new one. A sandbox is used for one call
// and discarded; nothing of a call — /tmp, processes, environment —
// reaches another.
//
// A pooled sandbox holds what a run holds while it waits: the workspace's
// run lock (runs of a nested or an enclosing workspace wait or are
// refused meanwhile, as during any run), its placeholders, a locked
// thread, and its processes (two of bwrap, the waiting shell). The pool is
// bounded: at most size sandboxes, each discarded after maxAge unused.
type Pool struct {
	size   int
	maxAge time.Duration
	ctx    context.Context
	cancel context.CancelFunc

	mu      sync.Mutex
	ready   []*waiting
	filling int
	closed  bool
	wg      sync.WaitGroup
	stats   PoolStats
}

// PoolStats counts what a pool did.
type PoolStats struct {
	Hits   int // calls run in a pooled sandbox
	Misses int // poolable calls run in a new sandbox: none was ready
	Stale  int // pooled sandboxes discarded at a call: not the sandbox the call needed
	Made   int // sandboxes made ahead
	Failed int // sandboxes that could not be made ahead
	Ready  int // sandboxes ready now
}

// waiting is one sandbox made ahead, its command blocked on its script.
type waiting struct {
	key    string
	r      *running
	script *os.File // the writing end of the command's script pipe
	stdin  *os.File // the writing end of the command's standard input, nil for /dev/null
	expire *time.Timer
}

// MaxPooledScript is the longest script a pooled sandbox takes; a longer
// one runs in a new sandbox. The waiting shell reads its script a byte at
// a time.
const MaxPooledScript = 16 << 10

// NewPool returns a pool of at most size sandboxes (1 if less), each
// discarded after maxAge (a minute if zero) unused. Close it.
func NewPool(size int, maxAge time.Duration) *Pool {
	if size < 1 {
		size = 1
	}
	if maxAge <= 0 {
		maxAge = time.Minute
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Pool{size: size, maxAge: maxAge, ctx: ctx, cancel: cancel}
}

// Stats returns what the pool did so far.
func (p *Pool) Stats() PoolStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	st := p.stats
	st.Ready = len(p.ready)
	return st
}

// Close discards every pooled sandbox (its processes killed, its session
// ended) and waits for the sandboxes being made.
func (p *Pool) Close() {
	p.mu.Lock()
	p.closed = true
	ready := p.ready
	p.ready = nil
	p.mu.Unlock()
	p.cancel()
	for _, w := range ready {
		p.discard(w)
	}
	p.wg.Wait()
}

// Warm makes sandboxes for the spec's command ahead, until the pool holds
// its size or a sandbox cannot be made, and returns once they are ready.
// The spec's command must be poolable: `/bin/sh -c SCRIPT`, its standard
// input none or a reader, not a file.
func (p *Pool) Warm(s Spec) error {
	if _, ok := poolable(s); !ok {
		return invalid("only a /bin/sh -c command of at most 16 KiB, its standard input not a file, runs in a pooled sandbox")
	}
	s = s.defaults()
	for {
		p.mu.Lock()
		if p.closed || len(p.ready)+p.filling >= p.size {
			p.mu.Unlock()
			return nil
		}
		p.filling++
		p.wg.Add(1)
		p.mu.Unlock()
		if err := p.fill(s); err != nil {
			return err
		}
	}
}

// poolable returns the script of a command a pooled sandbox can run: its
// standard input is none (/dev/null) or a reader, not a file.
func poolable(s Spec) (string, bool) {
	if len(s.Policy.egress) > 0 {
		return "", false // its forwarder and control socket are the run's own
	}
	if _, file := s.Stdin.(*os.File); file || len(s.Command) != 3 || s.Command[0] != "/bin/sh" || s.Command[1] != "-c" {
		return "", false
	}
	script := s.Command[2]
	if len(script) > MaxPooledScript || strings.IndexByte(script, 0) >= 0 {
		return "", false
	}
	return script, true
}

// trampoline is the command of a pooled sandbox: it reads its script from
// scriptFD to the end with builtins alone — every byte kept, the last line
// with or without its newline — and executes /bin/sh -c SCRIPT with the
// descriptor closed. Its variables (trampolineVars) are not exported; a
// sandbox whose environment holds one of their names is not pooled.
var trampoline = []string{"/bin/sh", "-c", `_cordon_n='
'; _cordon_s=; _cordon_l=; while IFS= read -r _cordon_l; do _cordon_s=$_cordon_s$_cordon_l$_cordon_n; done <&` +
	strconv.Itoa(scriptFD) + `; _cordon_s=$_cordon_s$_cordon_l; exec ` + strconv.Itoa(scriptFD) + `<&- /bin/sh -c "$_cordon_s"`}

var trampolineVars = []string{"_cordon_n", "_cordon_s", "_cordon_l"}

// pooledEnv reports whether a sandbox's environment leaves the
// trampoline's variables to it.
func pooledEnv(env []string) bool {
	for _, e := range env {
		name, _, _ := strings.Cut(e, "=")
		if slices.Contains(trampolineVars, name) {
			return false
		}
	}
	return true
}

func (s Spec) defaults() Spec {
	if s.Environ == nil {
		s.Environ = os.Environ()
	}
	if s.Logger == nil {
		s.Logger = slog.New(slog.DiscardHandler)
	}
	return s
}

// identity is what a call compares to take a pooled sandbox: everything
// bwrap is given and the identity of every path its options name.
func (sb *Sandbox) identity(bin string, s Spec) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s\x00%v\x00%+v\x00%v\x00stdin=%v\x00%d\x00", bin, s.Grace, sb.policy.limits, sb.policy.Seccomp(), s.Stdin != nil, len(sb.args))
	for i, a := range sb.args {
		b.WriteString(a)
		// Every path of the host the options name — bind sources and
		// mount points, a workspace under /tmp as anywhere — but what
		// the sandbox makes itself (its /proc, /dev, /tmp and HOME).
		inside := i > 0 && (sb.args[i-1] == "--dir" || sb.args[i-1] == "--proc" || sb.args[i-1] == "--dev")
		if strings.HasPrefix(a, "/") && !inside && a != "/tmp" && !within(a, Home) {
			var st syscall.Stat_t
			if err := syscall.Lstat(a, &st); err == nil {
				fmt.Fprintf(&b, "@%d:%d:%o", st.Dev, st.Ino, st.Mode&syscall.S_IFMT)
			} else {
				b.WriteString("@absent")
			}
		}
		b.WriteByte(0)
	}
	for _, e := range sb.env {
		b.WriteString(e)
		b.WriteByte(0)
	}
	return b.String()
}

// binOf finds bwrap (the spec's, or in its environment's PATH) and checks
// that it may be run ([trustedProgram]).
func binOf(s Spec) (string, error) {
	bin := s.Bwrap
	if bin == "" {
		path, _ := lookupEnv(s.Environ, "PATH")
		var err error
		if bin, err = findIn(path); err != nil {
			return "", Unavailable(err)
		}
	}
	return trustedProgram(bin, s.Policy.Workspace(), s.Policy.harness)
}

// findIn is [Find] of the PATH value path, remembered (foundIn): the
// bwrap found there before while it is still an executable file.
func findIn(path string) (string, error) {
	if v, ok := foundIn.Load(path); ok && executable(v.(string)) {
		return v.(string), nil
	}
	bin, err := Find(path)
	if err != nil {
		foundIn.Delete(path)
		return "", err
	}
	foundIn.Store(path, bin)
	return bin, nil
}

// Ahead reads now what a process's first run reads of the host and of
// the process, each once per process: the limits the host can apply, the
// process's identity (the owner its cgroups name) and namespaces (what a
// sandbox's must differ from), the host's network interface
// directories, and the bwrap that environ's PATH finds (still checked by
// every run). A program about to start one run, as `cordon exec` is,
// calls it in a goroutine while it admits the command: the reads then
// come while a processor is idle, not while the run's setting up keeps
// both busy.
func Ahead(environ []string) {
	limits.Detect()
	limits.SelfID()
	for _, ns := range checkedNamespaces {
		selfNamespace(ns)
	}
	netSysDirs()
	path, _ := lookupEnv(environ, "PATH")
	findIn(path)
}

// foundIn remembers, per PATH value, the bwrap [Find] found there, as a
// shell remembers where a command is: a later run checks that it is still
// an executable file (and, as every run does, that it is trusted) instead
// of looking in every directory before it again. One put in an earlier
// directory since is not seen by this process.
var foundIn sync.Map // PATH value → bwrap

// executable reports whether p is a regular file someone may execute, as
// Find wants it.
func executable(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular() && st.Mode().Perm()&0o111 != 0
}

// run runs the spec's command in a pooled sandbox when it can (ok false:
// the command is not poolable, and Run runs it as usual). A call that
// finds none ready runs in the sandbox it built to compare, and makes
// the pool refill for it after it.
func (p *Pool) run(ctx context.Context, s Spec) (o substrate.Outcome, err error, ok bool) {
	script, ok := poolable(s)
	if !ok || ctx.Err() != nil {
		return substrate.Outcome{}, nil, false // a canceled call: Run refuses it
	}
	bin, err := binOf(s)
	if err != nil {
		return substrate.Outcome{}, nil, false // Run says why
	}
	sb := &Sandbox{policy: s.Policy, env: s.Policy.Environment(s.Environ)}
	if err := sb.build(s.Environ); err != nil {
		sb.Close()
		return substrate.Outcome{}, err, true
	}
	if !pooledEnv(sb.env) {
		r, err := launch(ctx, s, sb, nil)
		if err != nil {
			return substrate.Outcome{}, err, true
		}
		o, err = r.finish(ctx)
		return o, err, true
	}
	key := sb.identity(bin, s)
	defer p.refill(s)
	for {
		w := p.take(key)
		if w == nil {
			break
		}
		if o, err, ok := p.call(ctx, w, s, script); ok {
			// The sandbox built to compare is not needed: its session
			// goes (the pooled one's holds the placeholders).
			r := &running{s: s, sb: sb, prepared: func() error { return nil }}
			r.end()
			o.Pooled = err == nil
			return o, err, true
		}
	}
	r, err := launch(ctx, s, sb, nil)
	if err != nil {
		return substrate.Outcome{}, err, true
	}
	o, err = r.finish(ctx)
	return o, err, true
}

// take returns a ready sandbox of the key, discarding the stale ones it
// passes; nil if there is none.
func (p *Pool) take(key string) *waiting {
	p.mu.Lock()
	var stale []*waiting
	var found *waiting
	keep := p.ready[:0]
	for _, w := range p.ready {
		switch {
		case found == nil && w.key == key:
			found = w
		case w.key != key:
			stale = append(stale, w)
		default:
			keep = append(keep, w)
		}
	}
	p.ready = keep
	if found == nil {
		p.stats.Misses++
	}
	p.stats.Stale += len(stale)
	p.mu.Unlock()
	for _, w := range stale {
		p.later(w)
	}
	if found != nil {
		found.expire.Stop()
		placeholder.SetIdle(found.r.sb.runID(), false) // its command is about to be given
	}
	return found
}

// idleAhead names the sessions of the sandboxes pools made ahead whose
// command has not been given ([placeholder.SetIdle]): nothing of them has
// run ([placeholder.Session.OthersKept]).
func idleAhead(id string) bool { return placeholder.Idle(id) }

// call runs the script in the pooled sandbox w, and says what happened
// as [Run] does. ok false: w was no longer waiting untouched (its command
// gone or having printed); it is discarded, and nothing of the call ran.
func (p *Pool) call(ctx context.Context, w *waiting, s Spec, script string) (substrate.Outcome, error, bool) {
	r := w.r
	select {
	case <-r.t.Exited():
		p.later(w)
		return substrate.Outcome{}, nil, false
	default:
	}
	// A mount of the sandbox the host detached (a protected path it
	// removed or renamed over: git's lock-and-rename of .git/config), or
	// one the host's mount propagated in, with the host's flags: stale.
	if !r.unchanged() {
		p.mu.Lock()
		p.stats.Stale++
		p.mu.Unlock()
		p.later(w)
		return substrate.Outcome{}, nil, false
	}
	if !r.t.Arm(s.Timeout, s.MaxOutput) {
		p.later(w)
		return substrate.Outcome{}, nil, false
	}
	// The call's own last step, log and command, not the filling's.
	r.s.Later, r.s.Logger, r.s.Command = s.Later, s.Logger, s.Command
	_, err := w.script.Write([]byte(script)) // within the pipe's buffer: never blocks
	w.script.Close()
	if err != nil {
		// No reader (EPIPE): the waiting shell is gone, it read nothing.
		p.later(w)
		return substrate.Outcome{}, nil, false
	}
	if w.stdin != nil {
		// As exec.Cmd feeds a new run's command from a reader: a pipe,
		// copied into until the reader ends or the command is gone.
		go func() {
			io.Copy(w.stdin, s.Stdin)
			w.stdin.Close()
		}()
	}
	p.mu.Lock()
	p.stats.Hits++
	p.mu.Unlock()
	o, err := r.finish(ctx)
	return o, err, true
}

// waitingShell returns the process ID of a pooled sandbox's command, the
// only child of its init.
func (r *running) waitingShell() (int, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", r.initPID, r.initPID))
	if err != nil {
		return 0, err
	}
	kids := strings.Fields(string(data))
	if len(kids) != 1 {
		return 0, fmt.Errorf("the sandbox's init has %d children, not the waiting shell alone", len(kids))
	}
	return strconv.Atoi(kids[0])
}

// unchanged reports whether a pooled sandbox is still as it was made:
// its init has the waiting shell alone, and its mount table is the one
// it had then.
func (r *running) unchanged() bool {
	if _, err := r.waitingShell(); err != nil {
		return false
	}
	same, err := r.table.same(r.base)
	return err == nil && same
}

// refill makes sandboxes for the spec, off the caller's path, up to the
// pool's size.
func (p *Pool) refill(s Spec) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || len(p.ready)+p.filling >= p.size {
		return
	}
	p.filling++
	p.wg.Add(1)
	go p.fill(s)
}

// fill makes one sandbox for s and adds it to the pool. The caller has
// counted it in filling and wg.
func (p *Pool) fill(s Spec) (err error) {
	defer p.wg.Done()
	defer func() {
		p.mu.Lock()
		p.filling--
		if err != nil {
			p.stats.Failed++
		}
		p.mu.Unlock()
	}()
	fs := s
	fs.Command, fs.Later, fs.Pool = trampoline, nil, nil
	bin, err := binOf(fs)
	if err != nil {
		return err
	}
	sb := &Sandbox{policy: fs.Policy, env: fs.Policy.Environment(fs.Environ)}
	// Idle until a call takes it: the runs that start meanwhile do not
	// hold what it trusts against theirs.
	id := sb.runID()
	placeholder.SetIdle(id, true)
	defer func() {
		if err != nil {
			placeholder.SetIdle(id, false)
		}
	}()
	if err := sb.build(fs.Environ); err != nil {
		sb.Close()
		return err
	}
	// The identity is taken before bwrap mounts anything: a path swapped
	// after this reads as another at the call, which then discards it.
	key := sb.identity(bin, s)
	pr, pw, err := os.Pipe()
	if err != nil {
		sb.Close()
		return err
	}
	var stdin *os.File
	if s.Stdin != nil {
		stdinR, w, err := os.Pipe()
		if err != nil {
			sb.Close()
			pr.Close()
			pw.Close()
			return err
		}
		defer stdinR.Close() // the command has its own
		fs.Stdin, stdin = stdinR, w
	}
	r, err := launch(p.ctx, fs, sb, pr)
	pr.Close()
	if err != nil {
		pw.Close()
		if stdin != nil {
			stdin.Close()
		}
		return err
	}
	if !r.verified {
		pw.Close()
		if stdin != nil {
			stdin.Close()
		}
		_, err := r.finish(p.ctx)
		if err == nil {
			err = &Error{Op: "start", Root: fs.Policy.Workspace(), Err: ErrSetup, detail: "bwrap ended before it reported a sandbox"}
		}
		return err
	}
	// Ready once the init has started the waiting shell; its mount table
	// is the sandbox's from then on, and has every mount of the options.
	abandon := func(why string) error {
		pw.Close()
		if stdin != nil {
			stdin.Close()
		}
		r.t.Kill()
		r.t.Wait(context.Background())
		r.end()
		return &Error{Op: "start", Root: fs.Policy.Workspace(), Err: ErrSetup, detail: why}
	}
	for i := 0; ; i++ {
		if _, err = r.waitingShell(); err == nil {
			break
		}
		if i == 2000 {
			return abandon("the pooled sandbox's command did not start within 2s")
		}
		time.Sleep(time.Millisecond)
	}
	if r.table, err = openTable(r.initPID); err != nil {
		return abandon("cannot open the pooled sandbox's mount table: " + err.Error())
	}
	text, err := r.table.text(nil)
	if err != nil {
		return abandon("cannot read the pooled sandbox's mount table: " + err.Error())
	}
	r.base = string(text)
	if went := missing(sb.mountPoints(), r.base); len(went) > 0 {
		return abandon("the pooled sandbox lacks mounts of its options: " + strings.Join(went, ", "))
	}
	w := &waiting{key: key, r: r, script: pw, stdin: stdin}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		p.discard(w)
		return nil
	}
	w.expire = time.AfterFunc(p.maxAge, func() { p.expireOne(w) })
	p.ready = append(p.ready, w)
	p.stats.Made++
	p.mu.Unlock()
	return nil
}

// expireOne discards w if it is still waiting.
func (p *Pool) expireOne(w *waiting) {
	p.mu.Lock()
	i := -1
	for j, x := range p.ready {
		if x == w {
			i = j
		}
	}
	if i < 0 {
		p.mu.Unlock()
		return
	}
	p.ready = append(p.ready[:i], p.ready[i+1:]...)
	p.mu.Unlock()
	p.later(w)
}

// later discards w off the caller's path; Close waits for it.
func (p *Pool) later(w *waiting) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		p.discard(w)
		return
	}
	p.wg.Add(1)
	p.mu.Unlock()
	go func() {
		defer p.wg.Done()
		p.discard(w)
	}()
}

// discard kills a pooled sandbox, waits for its tree to be gone and
// releases what it holds.
func (p *Pool) discard(w *waiting) {
	if w.expire != nil {
		w.expire.Stop()
	}
	placeholder.SetIdle(w.r.sb.runID(), false)
	w.script.Close()
	if w.stdin != nil {
		w.stdin.Close()
	}
	w.r.t.Kill()
	w.r.t.Wait(context.Background())
	w.r.s.Later = nil
	w.r.end()
}
