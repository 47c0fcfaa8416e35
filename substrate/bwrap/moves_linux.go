package bwrap

import (
	"errors"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// events tells the mount watch when a sandbox's table may have changed,
// so that a run that lasts reads it only then, and at once. A mount goes
// where its mount point goes: a mount point, or a directory above it,
// renamed (an editor's save that keeps a backup, `mv .git`) takes the
// mount along and raises no event of the namespace — the directories on
// the way to the mount points are watched for renames (inotify, [moves]).
// Every other change of the table — a mount, an unmount, a detach — is an
// event of the namespace: POLLPRI on its table. Both are waited for by
// the runtime's poller, which costs a run no thread and no wake-up while
// nothing happens.
type events struct {
	wake    chan struct{} // a value when something may have changed
	changed atomic.Bool   // something may have changed since the last look
	broken  atomic.Bool   // a wait failed: the watch cannot vouch for anything
	files   []*os.File
	done    chan struct{}
	wg      sync.WaitGroup
}

// watchEvents starts the waits for changes of t's table, whose mount
// points are points: nil when they cannot be made (inotify's per-user
// bounds, which a sandbox of the same user can use up; the sandbox's
// init gone). Made before a read of the table: what changes after that
// read wakes the watch.
func watchEvents(t *table, points []string) *events {
	e := &events{wake: make(chan struct{}, 1), done: make(chan struct{})}
	// Two descriptors of the table of their own. The poller waits on
	// the first, and its look at it (the kernel's mounts_poll) takes the
	// event that made it ready; the second, asked with poll(2), says
	// whether there was one (POLLPRI: an event of the namespace since it
	// was last asked), so that a wake-up for nothing — the table is always
	// readable — is no change.
	proc := int(t.proc.Fd())
	var fds []int
	fail := func() *events {
		for _, fd := range fds {
			unix.Close(fd)
		}
		return nil
	}
	for _, flags := range []int{unix.O_NONBLOCK, 0} {
		fd, err := unix.Openat(proc, "mountinfo", unix.O_RDONLY|unix.O_CLOEXEC|flags, 0)
		if err != nil {
			return fail()
		}
		fds = append(fds, fd)
	}
	root, err := unix.Openat(proc, "root", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fail()
	}
	m := watchMoves(root, points)
	unix.Close(root)
	if m == nil {
		return fail()
	}
	wake, look := os.NewFile(uintptr(fds[0]), "mountinfo"), os.NewFile(uintptr(fds[1]), "mountinfo")
	in := os.NewFile(uintptr(m.fd), "inotify")
	e.files = []*os.File{wake, look, in}
	lookFD := fds[1] // never Fd(), which would make the file blocking: it is not pollable anyway
	moved := func(fd int) bool {
		if !m.moved(fd) {
			return false
		}
		if m.flooded {
			e.broken.Store(true) // the ticks take over for good
		}
		return true
	}
	if !e.waitOn(wake, func(int) bool { return nsEvent(lookFD) }) || !e.waitOn(in, moved) {
		e.close()
		return nil
	}
	return e
}

// nsEvent reports whether the namespace of the table open on fd mounted
// or unmounted something since the last time it was asked.
func nsEvent(fd int) bool {
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLPRI}}
	for {
		n, err := unix.Poll(fds, 0)
		if err == unix.EINTR {
			continue
		}
		return err != nil || n > 0 && fds[0].Revents&(unix.POLLPRI|unix.POLLERR|unix.POLLNVAL) != 0
	}
}

// waitFails, set by tests alone, makes every wait of [events] fail.
// Atomic: the waits of a run can outlive it by their close.
var waitFails atomic.Bool

// waitOn waits, in the background and for as long as e lasts, for f to
// be ready and check to find a change. It reports false when f cannot be
// waited for.
func (e *events) waitOn(f *os.File, check func(fd int) bool) bool {
	rc, err := f.SyscallConn()
	if err != nil {
		return false
	}
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		for {
			var err error
			if waitFails.Load() {
				err = errors.New("a wait that failed, for a test")
			} else {
				err = rc.Read(func(fd uintptr) bool { return check(int(fd)) })
			}
			select {
			case <-e.done:
				return
			default:
			}
			if err != nil {
				// The poller refused the descriptor, or a read failed:
				// from now on every look reads the table.
				e.broken.Store(true)
			}
			e.changed.Store(true)
			select {
			case e.wake <- struct{}{}:
			default:
			}
			if err != nil || e.broken.Load() {
				return
			}
		}
	}()
	return true
}

// take reports whether the table may have changed since it was last
// asked (or the watch is broken), and clears the mark.
func (e *events) take() bool { return e.changed.Swap(false) || e.broken.Load() }

// failed reports whether a wait of e failed (false for a nil e).
func (e *events) failed() bool { return e != nil && e.broken.Load() }

// wakes is the channel a change is sent on; nil for a nil e.
func (e *events) wakes() <-chan struct{} {
	if e == nil {
		return nil
	}
	return e.wake
}

func (e *events) close() {
	if e == nil {
		return
	}
	close(e.done)
	for _, f := range e.files {
		f.Close()
	}
	e.wg.Wait()
}

// moves watches, for renames, the directories of a sandbox on the way to
// its mount points, reached through its own root: the watches sit on the
// inodes its mount points are in, whichever namespace renames them — the
// host, or another run of the workspace.
type moves struct {
	fd    int                       // inotify, non-blocking
	names map[int32]map[string]bool // per watch: the names in its directory on the way to a mount point
	buf   []byte
	// Renames of other names and wake-ups for nothing, counted per
	// floodEvery: a command renaming in the workspace's root all the
	// time would have the watch spend more than its ticks do.
	idle      int
	idleSince time.Time
	flooded   bool
}

// A watch that sees more than floodIdle renames of other names and
// wake-ups for nothing in floodEvery gives up: the ticks take over, at
// their fixed cost. Counted by events as well as wake-ups, it trips
// however the events are batched (a loaded machine wakes the watch less
// often, with more of them each time).
const (
	floodIdle  = 200
	floodEvery = 100 * time.Millisecond
)

// watchMoves watches the directories on the way to points (absolute
// paths in the sandbox) below root, an O_PATH descriptor of the
// sandbox's root, parents before their children. It returns nil when the
// watch cannot be made.
func watchMoves(root int, points []string) *moves {
	dirs := map[string]map[string]bool{}
	var order []string
	for _, p := range points {
		for p = path.Clean(p); p != "/" && path.IsAbs(p); p = path.Dir(p) {
			dir := path.Dir(p)
			if dirs[dir] == nil {
				dirs[dir] = map[string]bool{}
				order = append(order, dir)
			}
			dirs[dir][path.Base(p)] = true
		}
	}
	// Parents first: a directory swapped while its children's watches
	// are made is a rename in a directory watched already.
	slices.SortStableFunc(order, func(a, b string) int { return depth(a) - depth(b) })
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		return nil
	}
	m := &moves{fd: fd, names: map[int32]map[string]bool{}}
	prefix := "/proc/self/fd/" + strconv.Itoa(root)
	for _, dir := range order {
		at := prefix + dir
		if dir == "/" {
			at = prefix + "/." // the root itself, not the link to it
		}
		wd, err := unix.InotifyAddWatch(fd, at,
			unix.IN_MOVED_FROM|unix.IN_MOVE_SELF|unix.IN_DELETE_SELF|unix.IN_ONLYDIR|unix.IN_DONT_FOLLOW)
		if err != nil {
			// Not even a directory that is not there (ENOENT, ENOTDIR):
			// it can be renamed back before the read that follows, which
			// then finds the table as it was, and no event would come
			// of the mount points in it. The ticks take over.
			unix.Close(fd)
			return nil
		}
		names := m.names[int32(wd)]
		if names == nil {
			names = map[string]bool{}
			m.names[int32(wd)] = names
		}
		for n := range dirs[dir] {
			names[n] = true
		}
	}
	return m
}

// moved reads the events waiting on fd (m's) and reports whether one of
// them can have changed the table: anything but renames of other names;
// or whether the watch is flooded with those ([moves.flooded]).
func (m *moves) moved(fd int) bool {
	if m.buf == nil {
		m.buf = make([]byte, 16<<10)
	}
	moved := false
	// Bounded: a directory renamed in all the time cannot keep the
	// watch here.
	for range 64 {
		n, err := unix.Read(fd, m.buf)
		if err == unix.EINTR {
			continue
		}
		if err == unix.EAGAIN {
			if !moved {
				if now := time.Now(); now.Sub(m.idleSince) > floodEvery {
					m.idle, m.idleSince = 0, now
				}
				if m.idle++; m.idle > floodIdle {
					m.flooded = true
					return true
				}
			}
			return moved
		}
		if err != nil || n <= 0 {
			return true
		}
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			ev := (*unix.InotifyEvent)(unsafe.Pointer(&m.buf[off]))
			end := off + unix.SizeofInotifyEvent + int(ev.Len)
			if end > n {
				return true
			}
			if ev.Mask&^(unix.IN_MOVED_FROM|unix.IN_ISDIR) != 0 || ev.Mask&unix.IN_MOVED_FROM == 0 {
				// The directory itself moved, went or was unmounted, the
				// queue overflowed, a watch was dropped: anything.
				moved = true
			} else if m.names[ev.Wd][string(trimNUL(m.buf[off+unix.SizeofInotifyEvent:end]))] {
				moved = true
			} else {
				m.idle++
			}
			off = end
		}
	}
	return true
}

// depth is the number of components of the absolute path p.
func depth(p string) int {
	if p == "/" {
		return 0
	}
	return strings.Count(p, "/")
}

func trimNUL(b []byte) []byte {
	for i, c := range b {
		if c == 0 {
			return b[:i]
		}
	}
	return b
}
