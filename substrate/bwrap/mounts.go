package bwrap

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cordon-run/cordon/internal/mountinfo"
)

// watchEvery is how often a run's mount table is read again, until the
// run has lasted eventsAfter: from then on it is read when something may
// have changed it ([events]). eventsAfter is a variable for tests alone.
const watchEvery = 5 * time.Millisecond

var eventsAfter = 10 * time.Second

// releaseEvery is how often the watch asks whether the sandbox's init has
// taken its release (one FIONREAD), before the first look, where the
// init's read of its seccomp program cannot be watched (watchRead) and
// once it has begun: a run over within it is not looked at. 0.2 ms
// against 1 ms left unwatched 1 of 100 runs of a static program that
// writes and exits at once, instead of 5. Asked every 0.2 ms while bwrap
// sets a sandbox up (~50 times, ~10 ms here), it cost the run 0.2–0.4 ms
// (runtime.Run of true, 800 runs alternated with and without the event;
// 600 shuffled runs had seen none against 1 ms): the event replaced it.
const (
	releaseEvery = 200 * time.Microsecond
	releaseWait  = 5 * time.Second
)

// releaseBackstop is how often the watch asks whether the sandbox's init
// has taken its release while it waits for the init's read of its seccomp
// program (watchRead): should that event not come, the first look is
// late by at most this.
const releaseBackstop = watchEvery

// mountWatch watches a sandbox's mount table for the length of its run.
//
// The table is fixed once bwrap has set the sandbox up: the command may
// mount nothing (no capability; the seccomp filter refuses mount). It can
// change from outside only, and each way is a hole: the host removes or
// renames another file over a protected path (git writes .git/config by
// renaming config.lock over it; an editor saves the same way), and the
// kernel detaches the read-only mount on it in every other mount
// namespace — the path is then as writable as the workspace around it;
// or a mount the host makes propagates in with the host's flags (a
// systemd host's / is shared). So a change stops the run: the tree is
// killed, and the outcome names the mounts that went or came.
type mountWatch struct {
	stop  chan struct{} // closed to end the watch
	ended chan struct{}

	mu      sync.Mutex
	changed []string // "went /path" and "came /path"
	notes   []string // more to say of the stop
}

// lastLookHook, set by tests alone, runs as the watch takes its last look
// at a run's mount table; tableReadHook as a look reads the table;
// releaseAskHook as the watch asks whether the init took its release.
var (
	lastLookHook   func(r *running)
	tableReadHook  func()
	releaseAskHook func()
)

// watchMounts starts the watch of a released sandbox's mount table; the
// run's tree is killed if it changes. End it with done.
func (r *running) watchMounts() *mountWatch {
	w := &mountWatch{stop: make(chan struct{}), ended: make(chan struct{})}
	if !r.verified || r.initPID <= 0 {
		close(w.ended)
		return w
	}
	go w.watch(r)
	return w
}

// done ends the watch and returns what changed (nil if nothing did), and
// what more it has to say of it.
func (w *mountWatch) done() (changed, notes []string) {
	close(w.stop)
	<-w.ended
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.changed, w.notes
}

func (w *mountWatch) watch(r *running) {
	defer close(w.ended)
	t := r.table
	if t == nil {
		// The table is final once the init has taken its release: it
		// mounts nothing after, and starts the command
		// ([Sandbox.releaseTaken]). The init reads its seccomp program
		// right after, which is an event (readSeen): until it comes the
		// watch asks every releaseBackstop, from then on (the init reads
		// the program whole at once), or where the pipe cannot be
		// watched, every releaseEvery. (A run over before the first
		// look goes unwatched.)
		seen := r.readSeen
		deadline := time.Now().Add(releaseWait)
		wait := time.NewTimer(time.Hour)
		for !r.sb.releaseTaken() {
			if releaseAskHook != nil {
				releaseAskHook()
			}
			every := releaseEvery
			if seen != nil {
				every = releaseBackstop
			}
			wait.Reset(every)
			select {
			case <-w.stop:
				wait.Stop()
				return
			case <-seen:
				seen = nil
			case <-wait.C:
			}
			if time.Now().After(deadline) {
				w.changedTo(r, []string{fmt.Sprintf("the sandbox's init did not take its release in %v: the table cannot be watched", releaseWait)})
				return
			}
		}
		wait.Stop()
		if r.stopReadSeen != nil {
			go r.stopReadSeen() // off the first look's path
		}
		var err error
		if t, err = openTable(r.initPID); err != nil {
			// ENOENT, ESRCH, or EINVAL (the init is exiting: its
			// namespaces are gone already) — the run is over; anything
			// else stops it.
			if !errors.Is(err, os.ErrNotExist) && !errors.Is(err, unix.ESRCH) && !errors.Is(err, unix.EINVAL) {
				w.changedTo(r, []string{"the table cannot be read: " + err.Error()})
			}
			return // the init is gone: so is the run
		}
	}
	defer t.close() // the descriptor holds the namespace: it can be read to the end
	// Every mount the options made must be there — a change before this
	// watch began is no baseline. A pooled sandbox's table was checked
	// when it was made, and found unchanged at its call a moment ago.
	want, layers := r.sb.mountPoints(), r.sb.layers()
	// Read into one buffer, compared as bytes: a long run reads the
	// table hundreds of times a second and allocates nothing for it.
	bp := tableBufs.Get().(*[]byte)
	defer tableBufs.Put(bp)
	buf := *bp
	defer func() { *bp = buf[:0] }()
	base := r.base
	if base == "" {
		var err error
		if buf, err = t.text(buf); err != nil {
			w.changedTo(r, []string{"the table cannot be read: " + err.Error()})
			return
		}
		base = string(buf)
		if went := missing(want, base); len(went) > 0 {
			w.changedTo(r, went)
			return
		}
		// A mount the host made between the release's check of the
		// workspace and this look is in the baseline: bwrap exposed by
		// one is distrusted all the same.
		if p, point := exposedBy(base, layers, r.binPlaces); p != "" {
			w.changedTo(r, []string{"came " + point})
			w.noteToo(r.distrustNote(fmt.Sprintf("a run of the workspace %s was stopped when its first look found %s in its sandbox, writable, which exposed %s: its command may have written it", r.s.Policy.Workspace(), point, p)))
			return
		}
	}
	// The table is read every watchEvery, and once more when the run has
	// ended — a command that wrote an exposed path and exited at once is
	// reported too. A timer, as a sleeping goroutine: no thread waits for
	// it. A run that lasts eventsAfter waits instead for what can change
	// the table ([events]: renames on the way to the mount points,
	// mounts and unmounts of the namespace), made before a read that
	// checks the table as it is, and reads it when one comes: at once,
	// and not 200 times a second (a tick costs the run's process ~0.2 ms
	// of a processor: ~4% of one while the run lasts). Not sooner: ending
	// that wait costs ~20 ms of the kernel's (the inotify instance's
	// marks are freed after an SRCU grace period, which its close waits
	// for), off a resident runtime's path but before a one-shot `cordon
	// exec` can exit — 0.2–0.4% of a run that needed the wait. Where
	// the events cannot be waited for, the ticks go on.
	began := time.Now()
	tick := time.NewTimer(watchEvery)
	defer tick.Stop()
	var ev, retired *events
	defer func() {
		// Off the run's path: its end waits for the kernel.
		go func() { ev.close(); retired.close() }()
	}()
	noEvents := false // they could not be waited for: ticks read
	// The last look is taken when no process of the sandbox can write
	// any more: as soon as its init has died (its death ends every
	// process of its PID namespace first), while the caller still
	// collects the rest of the run; else when the caller is done, after
	// Wait, which outlasts the init (a run starts only with its init
	// held by a pidfd; Wait gives up on it after reapWait, when every
	// process left has been sent SIGKILL). Not when bwrap has exited: it
	// reports the command's exit and goes, and its init (killed as its
	// parent dies) may outlive it for a moment, and a process of the
	// sandbox with it.
	for {
		last, gone := false, false
		select {
		case <-tick.C:
		case <-ev.wakes():
		case <-r.initGone:
			last, gone = true, true
		case <-w.stop:
			last = true
		}
		if last && lastLookHook != nil {
			lastLookHook(r)
		}
		if !last {
			// The last look always reads: a rename is in its directory
			// before its event is queued, and nothing looks after it.
			if ev != nil && !ev.take() {
				continue
			}
			// Made anew before each read: a watch made on a directory
			// swapped meanwhile is replaced, and the read checks what
			// the new one watches. The old one ends after the read.
			retired, ev = ev, nil
			if retired.failed() {
				noEvents = true // a wait failed: the ticks take over for good
			}
			if !noEvents && time.Since(began) >= eventsAfter {
				if ev = watchEvents(t, want); ev == nil {
					noEvents = true
				}
			}
			if ev == nil {
				tick.Reset(watchEvery)
			}
		}
		if tableReadHook != nil {
			tableReadHook()
		}
		var err error
		if buf, err = t.text(buf); err != nil {
			w.changedTo(r, []string{"the table cannot be read: " + err.Error()})
			return
		}
		if string(buf) != base {
			cur := string(buf)
			if changed := append(missing(want, cur), tableChanges(base, cur, layers)...); len(changed) > 0 {
				w.changedTo(r, changed)
				if note := r.distrustIfExposed(base, cur, layers); note != "" {
					w.noteToo(note)
				}
				return
			}
		}
		if last {
			if gone {
				r.endSession()
			}
			return
		}
		// Here, not off the watch's path: a command that makes it wake
		// for nothing, again and again, makes it wait each time.
		retired.close()
		retired = nil
	}
}

// noteToo adds a note to what the watch reports of a run it stopped.
func (w *mountWatch) noteToo(note string) {
	w.mu.Lock()
	w.notes = append(w.notes, note)
	w.mu.Unlock()
}

// changedTo stops the run: its mounts changed.
func (w *mountWatch) changedTo(r *running, changed []string) {
	r.t.Kill()
	w.mu.Lock()
	w.changed = changed
	w.mu.Unlock()
}

// mountPoints returns the mount points bwrap's options make: binds and
// tmpfs.
func (s *Sandbox) mountPoints() []string {
	var out []string
	for _, l := range s.layers() {
		if !l.own {
			out = append(out, l.point)
		}
	}
	return out
}

// A layer is a mount bwrap's options make, in their order: a bind shows
// what it binds at its point, a tmpfs hides what lies beneath it.
type layer struct {
	point string
	hides bool // a tmpfs, or the tmpfs of --dev or the proc of --proc
	own   bool // --dev or --proc: bwrap's own mounts, which it makes beneath the point too
}

// layers returns the mounts bwrap's options make, in their order.
func (s *Sandbox) layers() []layer {
	var out []layer
	for i := 0; i < len(s.args); i++ {
		switch s.args[i] {
		case "--bind", "--ro-bind":
			if i+2 < len(s.args) {
				out = append(out, layer{point: s.args[i+2]})
			}
			i += 2
		case "--tmpfs":
			if i+1 < len(s.args) {
				out = append(out, layer{point: s.args[i+1], hides: true})
			}
			i++
		case "--dev", "--proc":
			if i+1 < len(s.args) {
				out = append(out, layer{point: s.args[i+1], hides: true, own: true})
			}
			i++
		case "--size", "--perms", "--dir", "--remount-ro", "--chdir":
			i++ // the option's value
		}
	}
	return out
}

// missing lists, as "went PATH", the mount points of want that the mount
// table lacks. One pass over the table, its lines not split apart: the
// first look of every run makes it.
func missing(want []string, table string) []string {
	seen := make(map[string]bool, len(want))
	for _, p := range want {
		seen[p] = false
	}
	left := len(seen)
	for line := range strings.Lines(table) {
		p := mountPointField(line)
		if p == "" {
			continue
		}
		if strings.Contains(p, "\\") {
			p = mountinfo.Unescape(p)
		}
		if found, ok := seen[p]; ok && !found {
			seen[p] = true
			if left--; left == 0 {
				return nil
			}
		}
	}
	var out []string
	for _, p := range want {
		if !seen[p] {
			out = append(out, "went "+p)
			seen[p] = true // once, should want name it twice
		}
	}
	return out
}

// mountPointField returns the fifth field of a mountinfo line, its mount
// point as the table has it (escaped), or "".
func mountPointField(line string) string { return mountinfo.Field(line, 4) }

// tableBufs holds the buffers the watches read tables into (*[]byte).
var tableBufs = sync.Pool{New: func() any { return new([]byte) }}

// readTable reads a mount table from its start into buf, grown as
// needed (at most 4 MiB): a seek to the start, then reads in order, one
// walk of the table (a read at an offset would walk it again).
func readTable(f *os.File, buf []byte) ([]byte, error) {
	if cap(buf) < 32<<10 {
		buf = make([]byte, 0, 32<<10)
	}
	buf = buf[:0]
	fd := int(f.Fd())
	if _, err := unix.Seek(fd, 0, 0); err != nil {
		return buf, err
	}
	for {
		if len(buf) == cap(buf) {
			if cap(buf) >= 4<<20 {
				return buf, errors.New("the mount table is over 4 MiB")
			}
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := unix.Read(fd, buf[len(buf):cap(buf)])
		if err != nil {
			return buf, err
		}
		if n == 0 {
			return buf, nil
		}
		buf = buf[:len(buf)+n]
	}
}

// tableChanges lists the mounts of a that b lacks ("went PATH") and those
// of b that a lacks ("came PATH"), by mount point. A mount that came is
// no hole when it is read-only, or when what lies where it came is hidden
// ([coveredBy] the sandbox's layers): mounts of the host under a hidden
// /run or /tmp propagate to the host tree beneath the tmpfs, which the
// sandbox cannot see.
func tableChanges(a, b string, layers []layer) []string {
	lines := func(t string) map[string]bool {
		m := map[string]bool{}
		for _, l := range strings.Split(strings.TrimSpace(t), "\n") {
			m[l] = true
		}
		return m
	}
	as, bs := lines(a), lines(b)
	var out []string
	for l := range as {
		if !bs[l] {
			out = append(out, "went "+mountPoint(l))
		}
	}
	for l := range bs {
		if as[l] {
			continue
		}
		if !writable(l) {
			continue
		}
		p := mountPoint(l)
		if coveredBy(p, layers) {
			continue
		}
		out = append(out, "came "+p)
	}
	slices.Sort(out)
	return out
}

// mountPoint is the mount point of a mountinfo line, unescaped.
func mountPoint(line string) string {
	p := mountPointField(line)
	if p == "" {
		return line
	}
	return mountinfo.Unescape(p)
}

// coveredBy reports whether a mount at p is hidden from the sandbox: the
// last of its layers (in the order bwrap makes them) at or above p hides
// what lies beneath it, and p is not its point. A bind made later shows
// its tree again — the workspace under a hidden /tmp or home is bound
// again at its own path (the workspace that is the home itself, on top of
// its own tmpfs), and a mount the host makes in it propagates into that
// bind too, where the command sees it, as well as into the host tree
// beneath the tmpfs, at the same path, where it does not.
func coveredBy(p string, layers []layer) bool {
	for i := len(layers) - 1; i >= 0; i-- {
		if l := layers[i]; within(p, l.point) {
			return l.hides && p != l.point
		}
	}
	return false
}

// mountNote is the note of a run its mount watch stopped.
func mountNote(changed []string) string {
	return fmt.Sprintf("cordon stopped the run: the sandbox's mounts changed from outside (%s). A mount that went is a "+
		"protected path the host removed or renamed another file over — git's own `git config` does — which was writable "+
		"in the sandbox from then on (for up to a few milliseconds before cordon saw it); a mount that came is the host's, "+
		"with the host's flags. Check those paths (.git/config, git diff) before the host's tools read them.", strings.Join(changed, ", "))
}

// distrustIfExposed, for a run whose sandbox a mount came into (base
// then cur), marks bwrap not to be trusted again ([distrust]) when one of
// the mounts that came — writable and not hidden — is bwrap or a
// directory above it, or holds one: the run was stopped, but its command
// may have written bwrap before the watch saw the mount, and every later
// run would execute it on the host. Where bwrap's places were not told,
// any such mount distrusts it. It returns the note that says so, or "".
func (r *running) distrustIfExposed(base, cur string, layers []layer) string {
	if r.bin == "" {
		return ""
	}
	old := map[string]bool{}
	for l := range strings.Lines(base) {
		old[l] = true
	}
	var came strings.Builder
	for l := range strings.Lines(cur) {
		if !old[l] {
			came.WriteString(l)
		}
	}
	var p, point string
	if len(r.binPlaces) > 0 {
		p, point = exposedBy(came.String(), layers, r.binPlaces)
	} else {
		p, point = exposedByAny(came.String(), layers) // untold: every such mount may expose it
	}
	if p == "" {
		return ""
	}
	return r.distrustNote(fmt.Sprintf("a run of the workspace %s was stopped when %s came into its sandbox, writable, which exposed %s: its command may have written it", r.s.Policy.Workspace(), point, p))
}

// exposedByAny returns the point of the first writable, visible mount of
// the table (mountinfo text), and bin's place unknown: the program.
func exposedByAny(table string, layers []layer) (path, point string) {
	for l := range strings.Lines(table) {
		if pt := mountPoint(l); writable(l) && !coveredBy(pt, layers) {
			return "bwrap (its place could not be told)", pt
		}
	}
	return "", ""
}

// writable reports whether the mount of a mountinfo line is not mounted
// read-only.
func writable(line string) bool {
	return !slices.Contains(strings.Split(mountinfo.Field(line, 5), ","), "ro")
}

// distrustNote marks bwrap not to be trusted again for why, and returns
// the run's note that says so (or that it could not be marked).
func (r *running) distrustNote(why string) string {
	if err := distrust(r.bin, r.s.Policy.harness, why); err != nil {
		return fmt.Sprintf("cordon could not mark %s not to be trusted again (%v): %s — check it before the next run", r.bin, err, why)
	}
	return fmt.Sprintf("%s; cordon will not run %s again until %s is removed (reinstall or check it first)", why, r.bin, distrustFile(r.bin, r.s.Policy.harness))
}
