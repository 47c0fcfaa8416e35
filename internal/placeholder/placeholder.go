// Package placeholder creates the mount points a sandbox needs for
// protected paths that do not exist yet — an empty directory or file bound
// read-only over the absent path — and removes them again when no run of
// the workspace needs them any more.
//
// Removing a mount point is not harmless while another run of the same
// workspace is going on: since Linux 3.18, unlinking a path that is a
// mount point in another mount namespace detaches that mount there, and
// the other run's tool could then create the path it was kept from. So
// every run of a workspace holds a shared lock (flock) on the workspace
// directory itself — one lock for every user and every cordon
// configuration that runs there, and nothing a command could remove or
// replace — for as long as its sandbox may exist, and records each placeholder it creates in a manifest
// in the per-user state directory (trusted: no tool can forge what cordon
// will remove). The run that ends last — the one that gets the lock
// exclusively — removes every recorded placeholder that is still as
// created, also those a killed run left behind.
//
// # Directories used again
//
// On a journaling file system making and removing a directory costs far
// more than renaming one (ext4 on a virtual disk: ~110 µs and ~200 µs
// against ~13 µs), and a run needs a dozen of them. So the directory
// placeholders a run no longer needs are renamed, empty and this user's,
// into the workspace's own reuse directory in the per-user state directory
// (hidden from every sandbox), and later runs of that workspace rename them
// into place again. A directory is used again only in the workspace it
// came from: a process that kept it open could write into it after it was
// put away, but only one that could write that workspace's paths anyway (a
// run of an enclosing workspace, a process on the host). One found not
// empty when it is taken is never used again: it stays, renamed x-*, where
// only its owner sees it, and counts against the reuse directory's bound.
// On another file system placeholders are made and removed.
//
// # Nested workspaces
//
// A run of an enclosing workspace can change a nested one — rename a
// directory the nested run is about to bind, swap it for a symlink — and
// bubblewrap resolves bind paths when it mounts. So runs of nested
// workspaces do not overlap. A run does not start while the lock of a
// directory above its workspace is held (a look: an exclusive lock taken
// and let go at once), and records itself in the per-user registry of
// runs going on (a file it holds locked); a run whose workspace encloses
// one recorded there does not start. Each run locks and records itself
// before it looks at the others, so of two that start at once at least
// one sees the other. The registry is per user (and state directory): a
// run of another user's nested workspace that is already going on is not
// seen by a run of the enclosing one.
package placeholder

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"iter"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cordon-run/cordon/internal/dirfd"
	"github.com/cordon-run/cordon/internal/mountinfo"
	"github.com/cordon-run/cordon/internal/userdir"
)

// lockWait bounds how long Begin waits for a run that is removing
// placeholders (it holds the lock exclusively for milliseconds).
const lockWait = 10 * time.Second

// maxManifest bounds one manifest file.
const maxManifest = 1 << 20

// Session is one run's hold on a workspace's placeholders.
type Session struct {
	lock     *os.File // the workspace directory, flocked
	dir      string   // the workspace's manifest directory
	reuse    string   // this workspace's placeholder directories to use again
	active   *os.File // this run's record in the registry of runs, held locked
	recordAt string   // its path
	manifest *os.File
	kept     string // this run's kept file ([Session.Keep]), or ""

	workspace string           // the workspace, as recorded
	place     *mountinfo.Place // and its place, or nil
	activeDir string           // the registry of the runs going on

	mu       sync.Mutex
	created  []Entry
	ended    bool
	reusable []string // directories to use again, listed at the first use
	listed   bool
}

// maxReuse bounds a workspace's reuse directory; beyond it, placeholders
// are removed where they are.
const maxReuse = 64

// Entry is one placeholder a run created.
type Entry struct {
	Path string `json:"path"`
	Dir  bool   `json:"dir"`
	Dev  uint64 `json:"dev"`
	Ino  uint64 `json:"ino"`
	// Ctime (nanoseconds) of a placeholder file changes with every change
	// to it: one written, or removed and made anew (even on a reused inode
	// number), is no longer the one created.
	Ctime int64 `json:"ctime"`
	// Size is the placeholder file's size.
	Size int64 `json:"size"`
}

// ErrNested: a run of an enclosing or a nested workspace is going on.
var ErrNested = errors.New("runs of nested workspaces cannot overlap")

// Begin takes the shared lock of the workspace (absolute, canonical) and
// records the run in the per-user registry of runs in stateDir, where the
// manifests live too. It fails with [ErrNested] when a run of an
// enclosing or a nested workspace is going on. End the session when the
// sandbox is gone.
func Begin(stateDir, workspace string) (*Session, error) {
	return BeginAs(stateDir, workspace, NewID())
}

// NewID returns a new random session ID, for [BeginAs].
func NewID() string {
	var rnd [8]byte
	rand.Read(rnd[:])
	return hex.EncodeToString(rnd[:])
}

// BeginAs is [Begin] with the session's ID ([Session.ID]) given, from
// [NewID]: what the run starts before its session exists can carry it.
func BeginAs(stateDir, workspace, id string) (*Session, error) {
	if len(id) != 16 || strings.Trim(id, "0123456789abcdef") != "" {
		return nil, fmt.Errorf("placeholder: %q is not a session ID", id)
	}
	dirs, err := ensureDirs(stateDir, Key(workspace))
	if err != nil {
		return nil, err
	}
	dir, reuse, active := dirs[0], dirs[1], dirs[2]
	// The lock is the workspace directory itself: one for every user and
	// every configuration, and nothing a command could remove or replace.
	fd, err := unix.Open(workspace, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("cannot open %s for the run lock: %w", workspace, err)
	}
	s := &Session{lock: os.NewFile(uintptr(fd), workspace), dir: dir, reuse: reuse, workspace: workspace, activeDir: active}
	// Its place, told from the directory locked, is in its record: a run
	// of a directory it lies in, or that lies in it, finds it there by
	// whichever path either was reached.
	var lay layout
	if s.place, err = lay.ofFD(fd); err != nil {
		s.release()
		return nil, fmt.Errorf("cannot tell where %s lies: %w", workspace, err)
	}
	// Recorded first: a run of an enclosing workspace that starts from now
	// on sees this one.
	if s.active, s.recordAt, err = record(active, runPrefix, recordText(workspace, s.place, heldBy(fd)), id); err != nil {
		s.release()
		return nil, fmt.Errorf("cannot record the run in %s: %w", active, err)
	}
	if err := flock(s.lock, unix.LOCK_SH, lockWait); err != nil {
		s.release()
		return nil, fmt.Errorf("cannot take the run lock of %s: %w", workspace, err)
	}
	// Locked first: a run of a nested workspace that starts from now on
	// finds this one. Then the runs going on around and inside it.
	if outer := lockedAbove(workspace); outer != "" {
		s.release()
		return nil, fmt.Errorf("%w: a run of the enclosing workspace %s is going on", ErrNested, outer)
	}
	// (The locks above are found by path: a run of a directory above
	// this one that no path of this one leads through — this one a bind
	// mount of its subdirectory — is found by its record, by place.)
	names, err := readNames(active)
	if err != nil {
		s.release()
		return nil, fmt.Errorf("cannot read the registry of runs %s: %w", active, err)
	}
	var walkErr error
	for _, e := range liveRecords(active, names, runPrefix, s.recordAt, true, &walkErr) {
		r, err := lay.of(e, workspace, placeIs(s.place))
		switch {
		case err != nil:
			s.release()
			return nil, err
		case r == inside:
			s.release()
			return nil, fmt.Errorf("%w: a run of the nested workspace %s is going on", ErrNested, e.ws)
		case r == around:
			s.release()
			return nil, fmt.Errorf("%w: a run of the enclosing workspace %s is going on", ErrNested, e.ws)
		}
	}
	// And the presences around and inside it: a file tool's change of a
	// workspace kept open records its presence before it looks at the
	// runs.
	for _, e := range liveRecords(active, names, presencePrefix, "", false, &walkErr) {
		r, err := lay.of(e, workspace, placeIs(s.place))
		if err != nil {
			s.release()
			return nil, err
		}
		if r == inside || r == around {
			s.release()
			return nil, fmt.Errorf("%w: a file tool's change of the workspace %s is going on", ErrNested, e.ws)
		}
	}
	if walkErr != nil {
		s.release()
		return nil, walkErr
	}
	return s, nil
}

// How a workspace lies against another ([layout.of]).
const (
	apart  = iota
	same   // one directory, by whichever paths
	inside // strictly below the other
	around // the other strictly below it
)

// A layout tells how the workspaces of one look at the registry lie
// against each other: by their paths, and where the paths say they are
// apart, by their places ([mountinfo.Place]) — a bind mount of a
// workspace, or of a directory inside it, lies inside it there, where no
// path of this mount namespace leads from one to the other. A record
// holds the place its workspace had when it was recorded, told from the
// directory it holds (not the path: a directory on the way swapped for a
// symbolic link does not move it; no mount made since moves it either);
// a record that holds none (an older cordon's, a place too long to keep)
// is placed where its path leads now — one that leads nowhere now
// (unmounted, renamed) has no place. A place that cannot be told
// otherwise is an error: the look fails closed.
type layout struct {
	table  mountinfo.Table             // read at the first place looked up, where the kernel has no statmount
	places map[string]*mountinfo.Place // nil: no place
}

// of returns how the workspace of the record e lies against workspace,
// whose place self tells (nil: none; asked only when the paths say
// neither is inside the other): nested (inside or around) when its path
// or its place says so — one path can name two directories in two mount
// namespaces — else the same when either says so, else apart.
func (l *layout) of(e entry, workspace string, selfPlace func() (*mountinfo.Place, error)) (int, error) {
	byPath := apart
	switch {
	case e.ws == workspace:
		byPath = same
	case within(e.ws, workspace):
		byPath = inside
	case within(workspace, e.ws):
		byPath = around
	}
	if byPath == inside || byPath == around {
		return byPath, nil
	}
	self, err := selfPlace()
	if err != nil || self == nil {
		return byPath, err
	}
	place := e.place
	if place == nil {
		var err error
		if place, err = l.place(e.ws); err != nil {
			return apart, err
		}
	}
	byPlace := placed(place, self)
	if byPlace != inside && byPlace != around && e.held.moved(e.ws) {
		// Its path leads elsewhere now (the user renamed a directory
		// above it): where the directory its process holds lies now.
		if now := l.heldPlace(e.held); now != nil {
			if r := placed(now, self); r != apart {
				byPlace = r
			}
		}
	}
	if byPlace != apart {
		return byPlace, nil
	}
	return byPath, nil
}

// heldPlace returns where the directory h holds lies now, or nil.
func (l *layout) heldPlace(h holder) *mountinfo.Place {
	fd := h.open()
	if fd < 0 {
		return nil
	}
	defer unix.Close(fd)
	p, _ := l.ofFD(fd)
	return p
}

// placeIs returns p, for [layout.of].
func placeIs(p *mountinfo.Place) func() (*mountinfo.Place, error) {
	return func() (*mountinfo.Place, error) { return p, nil }
}

// placed returns how the place a lies against the place b.
func placed(a, b *mountinfo.Place) int {
	switch {
	case a == nil || b == nil:
		return apart
	case *a == *b:
		return same
	case a.Within(*b):
		return inside
	case b.Within(*a):
		return around
	}
	return apart
}

// place returns the place the path ws leads to now, or nil.
func (l *layout) place(ws string) (*mountinfo.Place, error) {
	if p, ok := l.places[ws]; ok {
		return p, nil
	}
	p, err := l.table.Of(ws)
	out, err := placeOrNone(p, err, true)
	if err != nil {
		return nil, fmt.Errorf("cannot tell where %s lies: %w", ws, err)
	}
	if l.places == nil {
		l.places = map[string]*mountinfo.Place{}
	}
	l.places[ws] = out
	return out, nil
}

// ofFD returns the place of the directory open as fd, or nil.
func (l *layout) ofFD(fd int) (*mountinfo.Place, error) {
	p, err := l.table.OfFD(fd)
	return placeOrNone(p, err, false)
}

// placeOrNone is what [mountinfo] told of a directory: its place, none
// (nil: a kernel that cannot tell, a directory deleted; with byPath, a
// path that leads to no directory now), or an error.
func placeOrNone(p mountinfo.Place, err error, byPath bool) (*mountinfo.Place, error) {
	switch {
	case err == nil:
		return &p, nil
	case errors.Is(err, mountinfo.ErrUnsupported), errors.Is(err, mountinfo.ErrNoPlace):
		return nil, nil
	case byPath && (errors.Is(err, fs.ErrNotExist) || errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ELOOP)):
		return nil, nil
	}
	return nil, err
}

// An entry is a record of the registry of runs: the workspace, by its
// path, its place when it was recorded (nil: not told), and the
// directory its process holds open (zero: not told).
type entry struct {
	ws    string
	place *mountinfo.Place
	held  holder
}

// A holder is a workspace directory a process holds open: the process,
// the descriptor, and the directory's device and inode — for a later look
// to find where the directory lies now, should the path it was recorded
// by lead elsewhere (a directory above it renamed since).
type holder struct {
	pid, fd  int
	dev, ino uint64
}

// heldBy returns the holder of the directory open as fd in this process
// (zero where fd is -1 or cannot be looked at).
func heldBy(fd int) holder {
	var st unix.Stat_t
	if fd < 0 || unix.Fstat(fd, &st) != nil {
		return holder{}
	}
	return holder{pid: os.Getpid(), fd: fd, dev: uint64(st.Dev), ino: st.Ino}
}

func (h holder) String() string { return fmt.Sprintf("%d:%d:%d:%d", h.pid, h.fd, h.dev, h.ino) }

// moved reports whether the path ws no longer leads to the directory h
// holds. A holder not told has not moved.
func (h holder) moved(ws string) bool {
	var st unix.Stat_t
	return h.pid > 0 && (unix.Lstat(ws, &st) != nil || uint64(st.Dev) != h.dev || st.Ino != h.ino)
}

// open opens the directory h holds, through its process's descriptor,
// and checks it is that directory; -1 where it cannot (the process gone,
// another user's, the descriptor closed or reused).
func (h holder) open() int {
	fd, err := unix.Open(fmt.Sprintf("/proc/%d/fd/%d", h.pid, h.fd), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1
	}
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil || uint64(st.Dev) != h.dev || st.Ino != h.ino {
		unix.Close(fd)
		return -1
	}
	return fd
}

// recordText is what a record of a run or a presence of workspace holds
// first: its path, its place after a NUL and an "@", and the directory
// its process holds after a NUL and a "#" (a run notes its processes
// after more NULs: [Session.Note]).
func recordText(workspace string, place *mountinfo.Place, held holder) string {
	text := workspace
	if place != nil && len(workspace)+len(place.Dev)+len(place.Path) <= maxPlace {
		text += "\x00@" + place.String()
	}
	if held.pid > 0 {
		text += "\x00#" + held.String()
	}
	return text
}

// maxPlace bounds the path and place a record holds: a longer place (a
// workspace whose directories above it in its file system are no path of
// this system, or a path near PATH_MAX) is left out, and the record read
// by the place its path leads to now — with the processes a run notes
// after it, it would not fit the bound a record is read to (maxRecord),
// and a place cut there is another directory's.
const maxPlace = maxRecord / 2

// parseRecord reads a record: its entry and the processes noted.
func parseRecord(data []byte) (entry, []string) {
	fields := strings.Split(string(data), "\x00")
	e := entry{ws: fields[0]}
	var procs []string
	for _, f := range fields[1:] {
		if at, ok := strings.CutPrefix(f, "@"); ok {
			if p, ok := mountinfo.Parse(at); ok && e.place == nil {
				e.place = &p
			}
			continue
		}
		if h, ok := strings.CutPrefix(f, "#"); ok {
			var held holder
			if n, err := fmt.Sscanf(h, "%d:%d:%d:%d", &held.pid, &held.fd, &held.dev, &held.ino); n == 4 && err == nil && e.held.pid == 0 {
				e.held = held
			}
			continue
		}
		if f != "" {
			procs = append(procs, f)
		}
	}
	return e, procs
}

// Key names the directory of a workspace's runs in the state directory:
// the workspace directory itself ([dirIdentity]: its inode and birth
// time), so that every path to it (a bind mount elsewhere: a
// devcontainer's /workspaces/x, a server started on /mnt/proj) has the
// one trust lock and the one place for what its runs and changes keep.
// A workspace that cannot be looked at is named by its path.
func Key(workspace string) string {
	d, ok := dirIdentity(workspace)
	if !ok {
		return LegacyKey(workspace)
	}
	sum := sha256.Sum256([]byte(d))
	return hex.EncodeToString(sum[:16])
}

// LegacyKey is what [Key] was before it named a workspace by its
// directory: the hash of its path. Directories of runs made then are
// under it.
func LegacyKey(workspace string) string {
	sum := sha256.Sum256([]byte(workspace))
	return hex.EncodeToString(sum[:16])
}

// checkWait is how long a look at another workspace's lock retries:
// others take it exclusively only for an instant, to look too. Unless the
// kernel's table of locks shows a run's shared lock ([runMayHold]), the
// look goes on for up to contendedWait instead of reporting a run that is
// not there.
const (
	checkWait     = 50 * time.Millisecond
	contendedWait = 2 * time.Second
)

// lockedAbove returns the nearest directory above workspace whose lock a
// run holds (of any user and configuration), or "".
func lockedAbove(workspace string) string {
	for dir := filepath.Dir(workspace); ; dir = filepath.Dir(dir) {
		if fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0); err == nil {
			f := os.NewFile(uintptr(fd), dir)
			err := flock(f, unix.LOCK_EX, checkWait)
			if err != nil && !runMayHold(f) {
				err = flock(f, unix.LOCK_EX, contendedWait)
			}
			f.Close()
			if err != nil {
				return dir
			}
		}
		if dir == "/" {
			return ""
		}
	}
}

// lockID names a file in the kernel's table of locks: its device's major
// and minor numbers and its inode.
type lockID struct {
	major, minor uint32
	ino          uint64
}

// runMayHold reports whether a run may be what holds f's flock: the
// kernel's table of locks shows it held shared (a run holds its workspace
// shared, a look exclusively), or the table cannot be read. A table that
// shows f held exclusively is other looks (many runs starting at once);
// one that shows nothing of f was read in the instant between two looks,
// or its holder is in a PID namespace this process cannot see. In both
// the look goes on for longer instead of reporting a run that may not be
// there: it passes only by taking the lock, which no run then holds, so
// looking longer costs time (contendedWait, when a run that cannot be
// seen does hold it), never safety.
func runMayHold(f *os.File) bool {
	var st unix.Stat_t
	if unix.Fstat(int(f.Fd()), &st) != nil {
		return true
	}
	shared, _, ok := flocksOf(lockID{unix.Major(uint64(st.Dev)), unix.Minor(uint64(st.Dev)), st.Ino})
	return !ok || shared
}

// ensured remembers, for the life of the process, the state directories
// made and checked once: they are the user's own, mode 0700.
var ensured sync.Map // stateDir + "\x00" + key -> [3]string

// ensureDirs makes and checks the directories of runs in stateDir: the
// workspace's (key), its reuse directory, and the registry of runs.
func ensureDirs(stateDir, key string) ([3]string, error) {
	id := stateDir + "\x00" + key
	if d, ok := ensured.Load(id); ok {
		return d.([3]string), nil
	}
	var out [3]string
	fd, err := userdir.Ensure(stateDir)
	if err != nil {
		return out, err
	}
	defer unix.Close(fd)
	runsPath := filepath.Join(stateDir, "runs")
	runs, err := userdir.Sub(fd, stateDir, "runs")
	if err != nil {
		return out, err
	}
	defer unix.Close(runs)
	ws, err := userdir.Sub(runs, runsPath, key)
	if err != nil {
		return out, err
	}
	out[0] = filepath.Join(runsPath, key)
	reuse, err := userdir.Sub(ws, out[0], "reuse")
	unix.Close(ws)
	if err != nil {
		return out, err
	}
	unix.Close(reuse)
	out[1] = filepath.Join(out[0], "reuse")
	active, err := userdir.Sub(runs, runsPath, "active")
	if err != nil {
		return out, err
	}
	unix.Close(active)
	out[2] = filepath.Join(runsPath, "active")
	ensured.Store(id, out)
	return out, nil
}

// maxRecord bounds one record of the registry of runs.
const maxRecord = 8 << 10

// maxKept bounds what one run keeps for the others ([Session.Keep]).
const maxKept = 8 << 20

// maxSpares bounds the spare records a registry of runs keeps.
const maxSpares = 8

// record adds a record of a run, holding text ([recordText]), to the
// registry dir and returns it, held locked for as long as the run lasts.
// It is locked before it takes its name, so that no one sees it
// unlocked: a spare record (s-*) that a run ended left, or else a new
// file made under a temporary name. On a journaling file system making a
// file costs several times renaming one (ext4 on a virtual disk: ~80–300
// µs against ~17 µs).
func record(dir, prefix, text, name string) (*os.File, string, error) {
	path := filepath.Join(dir, prefix+name)
	if f := takeSpare(dir, path, text); f != nil {
		return f, path, nil
	}
	f, err := lockedRecord(filepath.Join(dir, "."+prefix+name), path, text)
	if err != nil {
		return nil, "", err
	}
	return f, path, nil
}

// lockedRecord makes the record path holding text, locked: made as tmp,
// locked and written, then renamed into place, so that no one sees it
// unlocked (a record whose process died).
func lockedRecord(tmp, path, text string) (*os.File, error) {
	f, err := dirfd.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, err
	}
	if err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err == nil {
		if _, err = f.WriteString(text); err == nil {
			err = os.Rename(tmp, path)
		}
	}
	if err != nil {
		f.Close()
		os.Remove(tmp)
		return nil, err
	}
	return f, nil
}

// maxTakes bounds the spares one run tries to take.
const maxTakes = 3

// withPrefix returns the names in dir that begin with prefix (spares:
// s-* records, sm-* manifests), as dir/name.
func withPrefix(dir, prefix string) []string {
	names, _ := readNames(dir)
	return namesWith(dir, names, prefix)
}

func namesWith(dir string, names []string, prefix string) []string {
	var out []string
	for _, n := range names {
		if strings.HasPrefix(n, prefix) {
			out = append(out, filepath.Join(dir, n))
		}
	}
	return out
}

// takeSpare makes a spare record of the registry dir the record path of
// a run, holding text — locked, written over before it is renamed —
// and returns it, or nil when there is none to take (at most maxTakes are
// tried).
func takeSpare(dir, path, text string) *os.File {
	for i, p := range withPrefix(dir, "s-") {
		if i == maxTakes {
			break
		}
		f, err := dirfd.OpenFile(p, os.O_RDWR|syscall.O_NOFOLLOW, 0)
		if err != nil {
			continue // taken meanwhile
		}
		// Locked, and still the spare of that name: another run that took
		// it first holds its lock for as long as it runs, and renamed it.
		var held, named unix.Stat_t
		if unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB) != nil || unix.Fstat(int(f.Fd()), &held) != nil ||
			unix.Lstat(p, &named) != nil || held.Dev != named.Dev || held.Ino != named.Ino || !ownSpare(&held) {
			f.Close()
			continue
		}
		// Written over, then cut to the text's length: a truncate to
		// zero frees the file's block, which on ext4 mounted with discard
		// waits for the device (~0.2 ms here, against ~5 µs).
		if n, err := f.WriteString(text); err != nil || n != len(text) || f.Truncate(int64(n)) != nil ||
			renameNoReplace(unix.AT_FDCWD, p, unix.AT_FDCWD, path) != nil {
			f.Close()
			continue
		}
		return f
	}
	return nil
}

// Running returns the workspace at or below workspace (absolute,
// canonical) — by path or by place ([layout]) — where a run recorded in
// stateDir's registry of runs is going on, or "": for an operation on a
// whole tree that no run may overlap (applying a disposable root).
// Records whose run is gone (their lock is free) are handed to the
// sweeper ([SetSweeper]), which has them removed. An error: the registry
// could not be read whole (none there is no error: no run is recorded).
func Running(stateDir, workspace string) (string, error) {
	active := filepath.Join(stateDir, "runs", "active")
	names, err := readNames(active)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("cannot read the registry of runs %s: %w", active, err)
	}
	var lay layout
	self := sync.OnceValues(func() (*mountinfo.Place, error) { return lay.place(workspace) })
	var walkErr error
	for _, e := range liveRecords(active, names, runPrefix, "", true, &walkErr) {
		r, err := lay.of(e, workspace, self)
		if err != nil {
			return "", err
		}
		if r == same || r == inside {
			return e.ws, nil
		}
	}
	return "", walkErr
}

// The prefixes of the records in a registry of runs: a run's session's,
// and a presence's ([Presence]: a workspace a file tool keeps open).
const (
	runPrefix      = "r-"
	presencePrefix = "f-"
)

// liveRecords walks the records named prefix+ID among names, those of the
// registry of runs dir (a caller that walks the records of both prefixes
// reads the directory once), but for the record self, and yields the ID
// and workspace of each run or presence going on (its record locked). A
// run's record whose run is gone (its lock free) is handed to the sweeper
// ([SetSweeper]) when sweep is set, and skipped; a presence's found
// unlocked (its process died) is removed, with what it kept. A record
// that cannot be opened, but for one gone meanwhile (its run ended), sets
// *errp, if it is nil, and is skipped: the caller fails closed — a run it
// did not read could be one it must not go on beside.
func liveRecords(dir string, names []string, prefix, self string, sweep bool, errp *error) iter.Seq2[string, entry] {
	return func(yield func(id string, e entry) bool) {
		for _, n := range names {
			if !strings.HasPrefix(n, prefix) || n == filepath.Base(self) {
				continue
			}
			id := strings.TrimPrefix(n, prefix)
			p := filepath.Join(dir, n)
			f, err := dirfd.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
			if err != nil {
				if !errors.Is(err, fs.ErrNotExist) && *errp == nil {
					*errp = fmt.Errorf("cannot read the record %s of the registry of runs: %w", p, err)
				}
				continue
			}
			if unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB) == nil {
				// Its run is gone. A session ended renames its record away
				// (a spare) or removes it: still of this name, this one's
				// process died during its run. What it noted is all there
				// now. (Opened before its run ended, the file may since have
				// been a spare and another run's record: then it is not
				// this name's any more, and nothing to sweep.)
				var held, named unix.Stat_t
				stillNamed := unix.Fstat(int(f.Fd()), &held) == nil && unix.Lstat(p, &named) == nil && held.Dev == named.Dev && held.Ino == named.Ino
				if stillNamed && prefix == presencePrefix {
					data, _ := io.ReadAll(io.LimitReader(f, maxRecord))
					f.Close()
					if e, _ := parseRecord(data); e.ws != "" {
						os.Remove(filepath.Join(filepath.Dir(dir), Key(e.ws), presenceKept+id))
					}
					os.Remove(p)
					continue
				}
				if sweep && stillNamed {
					data, _ := io.ReadAll(io.LimitReader(f, maxRecord))
					f.Close()
					abandon(p, id, data)
					continue
				}
				f.Close()
				continue
			}
			data, _ := io.ReadAll(io.LimitReader(f, maxRecord))
			f.Close()
			e, _ := parseRecord(data)
			if len(data) == maxRecord {
				e.place = nil // perhaps cut: placed by its path
			}
			if !yield(id, e) {
				return
			}
		}
	}
}

// An Abandoned run is one whose process died before it ended its session:
// a run killed, whose sandbox may outlive it.
type Abandoned struct {
	ID        string   // its session's ([Session.ID])
	Processes []string // what it noted ([Session.Note])
}

var (
	sweeper  atomic.Pointer[func(Abandoned)]
	sweeping sync.Map // record path -> struct{}: swept by this process now
)

// SetSweeper has every abandoned run found in a registry of runs — by any
// session's Begin, or [Running] — handed to sweep, off the finder's path;
// its record is removed once sweep has returned (a process that ends
// first leaves it to the next). Without one (a program with no bwrap in
// it) the record stays for a process that has one: removed unswept, what
// the run left would be found by nothing.
func SetSweeper(sweep func(Abandoned)) {
	if sweep == nil {
		sweeper.Store(nil)
		return
	}
	sweeper.Store(&sweep)
}

func abandon(path, id string, data []byte) {
	sweep := sweeper.Load()
	if sweep == nil {
		return
	}
	if _, busy := sweeping.LoadOrStore(path, struct{}{}); busy {
		return
	}
	_, procs := parseRecord(data)
	a := Abandoned{ID: id, Processes: procs}
	go func() {
		defer sweeping.Delete(path)
		(*sweep)(a)
		os.Remove(path)
	}()
}

// Note records processes of the run (IDs a later process can check:
// [limits.ProcessID]) in its record, in one write, for a sweep should the
// run's process die before it ends the session ([Abandoned]). It cannot
// be forged from a sandbox: the registry is hidden from every one.
func (s *Session) Note(processes ...string) error {
	var b strings.Builder
	for _, p := range processes {
		if strings.IndexByte(p, 0) >= 0 || strings.HasPrefix(p, "@") || strings.HasPrefix(p, "#") {
			return fmt.Errorf("placeholder: a NUL or a leading @ or # in %q", p)
		}
		b.WriteString("\x00" + p)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.active == nil {
		return errors.New("placeholder: the session has ended")
	}
	_, err := s.active.WriteString(b.String())
	return err
}

// trustWait bounds the wait for the workspace's trust lock ([Session.Trusting]).
const trustWait = 10 * time.Second

// Trusting takes the workspace's trust lock, which the caller holds from
// before it reads the index until it has kept what it trusts
// ([Session.Keep]), and returns its release. Those steps of two runs of
// the workspace do not interleave, then: each run either kept its set
// before the other looked ([Session.OthersKept]), or read the index
// before the other did and so before the other's command could change it.
// Interleaved, a run could read the index, a command of a third run take
// a submodule out of it, and a run starting meanwhile find neither the
// submodule in its index nor the first run's set, which it had not kept
// yet: the entry was writable in it.
func (s *Session) Trusting() (func(), error) { return trusting(s.dir) }

// trusting takes the trust lock of the workspace whose directory of runs
// is dir, and returns its release.
func trusting(dir string) (func(), error) {
	f, err := dirfd.OpenFile(filepath.Join(dir, "trust.lock"), os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, err
	}
	if err := flock(f, unix.LOCK_EX, trustWait); err != nil {
		f.Close()
		return nil, fmt.Errorf("placeholder: the workspace's trust lock: %w", err)
	}
	return sync.OnceFunc(func() { f.Close() }), nil
}

// A Guard is a change to a workspace that is no run — a file tool's
// write, from the command line, a server or a WebAssembly tool — among
// the runs of that workspace going on: it holds the workspace's trust
// lock ([Session.Trusting]) while the change finds what it must not write
// — the index read, and what the runs kept ([Guard.Kept]) — so that no
// run reads its index and keeps its set in between. A run whose set is
// kept before the guard looks is seen; one that keeps it after read its
// index after the change did, and trusts only what it found there.
// Release it once those are read; the change itself need not hold it.
type Guard struct {
	dir, active, workspace string
	root                   int // the workspace directory, or -1
	release                func()
}

// Watch takes the trust lock of the runs of workspace (absolute,
// canonical) in stateDir, making the workspace's directory of runs if need
// be. Where stateDir does not exist, no run of it is going on, nor can one
// have read the index before this change did while keeping its set after
// (a command of a run going on is what could have changed the index in
// between): the guard is nil, which guards nothing. root is the workspace
// directory, open, that the change is made in (-1: the path is opened),
// whose place tells which workspaces it lies in ([layout]).
func Watch(stateDir, workspace string, root int) (*Guard, error) {
	key := Key(workspace)
	if _, ok := ensured.Load(stateDir + "\x00" + key); !ok {
		if _, err := os.Lstat(stateDir); errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
	}
	dirs, err := ensureDirs(stateDir, key)
	if err != nil {
		return nil, err
	}
	release, err := trusting(dirs[0])
	if err != nil {
		return nil, err
	}
	return &Guard{dir: dirs[0], active: dirs[2], workspace: workspace, root: root, release: release}, nil
}

// placeOfRoot returns the place of the workspace directory root (-1: of
// the directory at workspace, opened), or nil.
func placeOfRoot(lay *layout, workspace string, root int) (*mountinfo.Place, error) {
	var p mountinfo.Place
	var err error
	if root < 0 {
		p, err = lay.table.Of(workspace)
	} else {
		p, err = lay.table.OfFD(root)
	}
	out, err := placeOrNone(p, err, false)
	if err != nil {
		return nil, fmt.Errorf("cannot tell where %s lies: %w", workspace, err)
	}
	return out, nil
}

// Kept returns what the runs of the guard's workspace going on now kept
// ([Session.Keep]) and what its presences kept ([Presence.Keep]) but
// self's: all, and kept, without the sessions this process made ahead
// of their command ([Idle]) — as [Session.OthersKept] returns them. It
// fails with [ErrNested] while a run or a presence of an enclosing or a
// nested workspace is going on: that one keeps its set under its own
// workspace's trust lock, not this one, so the guard cannot tell whether
// it read its index before the change did and has yet to keep what it
// trusts — an entry the change would then write unguarded.
func (g *Guard) Kept(self *Presence) (kept, all [][]byte, err error) {
	if g == nil {
		return nil, nil, nil
	}
	names, err := readNames(g.active)
	if err != nil {
		return nil, nil, fmt.Errorf("cannot read the registry of runs %s: %w", g.active, err)
	}
	var lay layout
	// Told only when a record's path says neither: a change among runs
	// of its own path looks up no place.
	place := sync.OnceValues(func() (*mountinfo.Place, error) { return placeOfRoot(&lay, g.workspace, g.root) })
	return setsBeside(g.active, g.dir, names, "", self.recordPath(), Idle, func(e entry, what string) error {
		switch rel, err := lay.of(e, g.workspace, place); {
		case err != nil:
			return err
		case rel == around:
			return fmt.Errorf("%w: %s of the enclosing workspace %s is going on", ErrNested, what, e.ws)
		case rel == inside:
			return fmt.Errorf("%w: %s of the nested workspace %s is going on", ErrNested, what, e.ws)
		}
		return nil
	})
}

// setsBeside returns the sets kept in dir ([Session.Keep],
// [Presence.Keep]) by the runs and the presences of the registry active
// (its entries names) going on, but for the run selfRun and the presence
// selfPresence (record paths, or ""): all, and kept — without the runs
// skip names (nil: none), which never names a presence. A set in dir is
// a run's or a presence's of dir's workspace, by whichever path (IDs are
// random): its record's path is not asked, which may no longer lead there
// (renamed, unmounted). check, when not nil, is asked of every record
// first, and its error is the walk's.
func setsBeside(active, dir string, names []string, selfRun, selfPresence string, skip func(id string) bool, check func(e entry, what string) error) (kept, all [][]byte, err error) {
	var walkErr error
	for _, r := range []struct{ prefix, self, kept, what string }{
		{runPrefix, selfRun, "known-", "a run"},
		{presencePrefix, selfPresence, presenceKept, "a file tool's change"},
	} {
		for id, e := range liveRecords(active, names, r.prefix, r.self, false, &walkErr) {
			if check != nil {
				if err := check(e, r.what); err != nil {
					return nil, nil, err
				}
			}
			set, ok, err := readSet(dir, r.kept+id)
			if err != nil {
				return nil, nil, err
			}
			if !ok {
				continue
			}
			all = append(all, set)
			if r.prefix != runPrefix || skip == nil || !skip(id) {
				kept = append(kept, set)
			}
		}
	}
	if walkErr != nil {
		return nil, nil, walkErr
	}
	return kept, all, nil
}

// presenceKept begins the name of what a presence kept, in its
// workspace's directory of runs (not known-: the end of the last run of
// the workspace removes those, a killed run's, and a presence is no run).
const presenceKept = "tool-"

// A Presence is a workspace kept open for changes that are no run — a
// WebAssembly tool's, a server's, a file tool's — in the registry of runs,
// from its first change until it lets go ([Presence.Leave]). What its set
// trusts ([Presence.Keep]) is read with what the runs kept
// ([Session.OthersKept], [Guard.Kept]): a run that starts beside it
// trusts a submodule of the index only when the change's set trusts it
// too — the change could have made it and entered it in the index, to
// take it out again before its end, and the run's command put it back.
// A run of an enclosing or a nested workspace does not start while it
// lasts ([ErrNested]), nor a change of one.
type Presence struct {
	f      *os.File // the record, locked while the presence lasts
	record string
	kept   string
}

// Present records a presence of workspace (absolute, canonical) in the
// registry of runs of stateDir, making the directories if need be.
// Record it before its guard looks at the runs ([Guard.Kept]): a run of a
// nested workspace that starts from then on sees it. root is the
// workspace directory, open (-1: the path is opened), whose place the
// record holds ([layout]).
func Present(stateDir, workspace string, root int) (*Presence, error) {
	var lay layout
	place, err := placeOfRoot(&lay, workspace, root)
	if err != nil {
		return nil, err
	}
	dirs, err := ensureDirs(stateDir, Key(workspace))
	if err != nil {
		return nil, err
	}
	id := NewID()
	f, path, err := record(dirs[2], presencePrefix, recordText(workspace, place, heldBy(root)), id)
	if err != nil {
		return nil, fmt.Errorf("cannot record the change in %s: %w", dirs[2], err)
	}
	return &Presence{f: f, record: path, kept: filepath.Join(dirs[0], presenceKept+id)}, nil
}

func (p *Presence) recordPath() string {
	if p == nil {
		return ""
	}
	return p.record
}

// Keep leaves data (what the change's set trusts) for the runs of the
// workspace that start from now on, and the changes beside it. Call it
// holding the workspace's trust lock ([Watch]), from the index's read on.
func (p *Presence) Keep(data []byte) error {
	return keepFile(p.kept, data)
}

// keepFile writes data whole to name: written as name.t — a spare set
// taken ([takeSpareKept]), or a new file — and renamed into place, so
// that a reader finds all of it or nothing; at most maxKept bytes. Call
// it holding the workspace's trust lock, under which every set is read.
func keepFile(name string, data []byte) error {
	if len(data) > maxKept {
		return fmt.Errorf("placeholder: %d bytes to keep, over the %d a run or a change keeps", len(data), maxKept)
	}
	tmp := name + ".t"
	os.Remove(tmp) // a killed process's of the same ID: none, in practice
	if !takeSpareKept(filepath.Dir(name), tmp, data) {
		if err := createFile(tmp, string(data), 0o600); err != nil {
			return err
		}
	}
	if err := os.Rename(tmp, name); err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}

// Leave ends the presence: what it kept goes, and its record.
func (p *Presence) Leave() {
	if p == nil || p.f == nil {
		return
	}
	spareKept(p.kept)
	spareRecord(p.record)
	p.f.Close()
	p.f = nil
}

// maxSpareKept bounds the spare sets (sk-*) of a workspace's directory
// (runs that end at once may each find room, and leave a few more: they
// go as later runs take them).
const maxSpareKept = 4

// ownSpare reports whether st is a spare's to write over: a regular file
// of this user's with no other name (a hard link planted in the state
// directory would lead the write elsewhere; a file made anew, O_EXCL,
// never could).
func ownSpare(st *unix.Stat_t) bool {
	return st.Mode&unix.S_IFMT == unix.S_IFREG && st.Nlink == 1 && st.Uid == uint32(os.Geteuid())
}

// Spare sets (sk-*) are the files the runs and changes that ended kept
// their sets in ([Session.Keep], [Presence.Keep]), renamed aside for a
// later one to write its own over: making a file on ext4 costs ~0.15 ms
// here (the allocation of its inode passes over those recently deleted,
// many where tools come and go), against ~20 µs a rename. The name is no
// set's: no reader opens it.

// spareKept renames the set a run or a change kept, name, a spare of its
// directory, or removes it when the directory has spares enough. A
// reader that opened it before (under the trust lock) still reads it
// whole: its next writer takes the trust lock first ([takeSpareKept]).
func spareKept(name string) {
	if name != "" {
		spareIn(name, "sk-", maxSpareKept)
	}
}

// spareIn renames path a spare of its directory (prefix-<random>) while
// the directory has fewer than max of them, else removes it.
func spareIn(path, prefix string, max int) {
	if len(withPrefix(filepath.Dir(path), prefix)) >= max || !renameSpare(path, prefix) {
		os.Remove(path)
	}
}

// renameSpare renames path prefix-<random> in its directory, and
// reports whether it did.
func renameSpare(path, prefix string) bool {
	var rnd [8]byte
	rand.Read(rnd[:])
	return renameNoReplace(unix.AT_FDCWD, path, unix.AT_FDCWD, filepath.Join(filepath.Dir(path), prefix+hex.EncodeToString(rnd[:]))) == nil
}

// takeSpareKept renames a spare set of dir to tmp and writes data over
// it, and reports whether it did (false: there was none to take, or it
// failed, and tmp is gone). Called under the workspace's trust lock,
// under which every set is read: no reader has this one open.
func takeSpareKept(dir, tmp string, data []byte) bool {
	f := takeSpareFile(dir, "sk-", tmp, os.O_WRONLY)
	if f == nil {
		return false
	}
	// Written over, then cut to the data's length (a truncate to zero
	// would free its block: see takeSpare).
	n, err := f.WriteAt(data, 0)
	if err == nil && n != len(data) {
		err = io.ErrShortWrite
	}
	if err == nil {
		err = f.Truncate(int64(len(data)))
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(tmp)
		return false
	}
	return true
}

// takeSpareFile renames a spare of dir (a name beginning with prefix) to
// name and opens it with flag, or returns nil when there is none to take
// (at most maxTakes are tried). Two takers at once get one each, or one
// makes its own: the rename decides. A spare that is not a regular file
// of this user's with no other name ([ownSpare]) is removed, not taken.
func takeSpareFile(dir, prefix, name string, flag int) *os.File {
	for i, p := range withPrefix(dir, prefix) {
		if i == maxTakes {
			break
		}
		if renameNoReplace(unix.AT_FDCWD, p, unix.AT_FDCWD, name) != nil {
			continue
		}
		f, err := os.OpenFile(name, flag|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
		if err == nil {
			var st unix.Stat_t
			if serr := unix.Fstat(int(f.Fd()), &st); serr != nil || !ownSpare(&st) {
				f.Close()
				err = fs.ErrInvalid
			}
		}
		if err != nil {
			os.Remove(name)
			continue
		}
		return f
	}
	return nil
}

// spareRecord renames the record path of a run or a change that ends — its
// lock still held, so that no one takes it for a record of a process that
// died — a spare of its registry for a later one to take ([takeSpare]),
// or removes it when the registry has spares enough.
func spareRecord(path string) { spareIn(path, "s-", maxSpares) }

// idle holds the IDs of the sessions this process made ahead of their
// command ([SetIdle]).
var idle sync.Map

// SetIdle marks the session id as made ahead, its command not given (on),
// or no longer (off): a sandbox a pool of this process keeps ready, of
// which nothing has run. What it kept is guarded by the runs and changes
// of this process beside it, but not held against what they trust
// ([Session.OthersKept] with [Idle] as skip, [Guard.Kept]).
func SetIdle(id string, on bool) {
	if on {
		idle.Store(id, true)
	} else {
		idle.Delete(id)
	}
}

// Idle reports whether the session id is marked idle ([SetIdle]).
func Idle(id string) bool { _, ok := idle.Load(id); return ok }

// within reports whether path p lies strictly below dir.
func within(p, dir string) bool {
	return p != dir && strings.HasPrefix(p, strings.TrimSuffix(dir, "/")+"/")
}

// Release lets go of the trust lock.
func (g *Guard) Release() {
	if g != nil {
		g.release()
	}
}

// Keep leaves data where the other runs of the workspace going on now
// and from now on find it ([Session.OthersKept]) until the session ends:
// in the state directory, written whole (a file renamed into place).
func (s *Session) Keep(data []byte) error {
	name := filepath.Join(s.dir, "known-"+s.ID())
	if err := keepFile(name, data); err != nil {
		return err
	}
	s.mu.Lock()
	s.kept = name
	s.mu.Unlock()
	return nil
}

// OthersKept returns what the other runs of the session's workspace going
// on now kept ([Session.Keep]) — as the registry of runs of this state
// directory lists them; runs of another user or state directory are not
// in it. A run that has kept nothing yet is left out, and so are the
// sessions skip names (a sandbox made ahead whose command has not been
// given: nothing of it has run) — all has those too. A set that cannot be
// read whole (not a regular file, over maxKept) is there as nil: a set
// that trusts nothing. An error: the registry, a record or a set could
// not be read (a set not read is one this run would not hold against its
// own, nor guard).
func (s *Session) OthersKept(skip func(id string) bool) (kept, all [][]byte, err error) {
	return keptBy(s.activeDir, s.dir, s.recordAt, skip)
}

// keptBy is [Session.OthersKept] of the runs of workspace going on in the
// registry active, but for the record self, whose sets are in dir — and
// of its presences ([Presence]), which skip never names.
func keptBy(active, dir, self string, skip func(id string) bool) (kept, all [][]byte, err error) {
	names, err := readNames(active)
	if err != nil {
		return nil, nil, fmt.Errorf("cannot read the registry of runs %s: %w", active, err)
	}
	return setsBeside(active, dir, names, self, "", skip, nil)
}

// readSet reads the set in dir/name a run or a presence kept: false when
// it has kept nothing yet (it has let no command start), nil when it
// cannot be read whole (not a regular file, over maxKept) — a set that
// trusts nothing; an error when it cannot be read at all.
func readSet(dir, name string) ([]byte, bool, error) {
	set, err := dirfd.ReadSmall(unix.AT_FDCWD, filepath.Join(dir, name), unix.O_NOFOLLOW, maxKept+1)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, false, nil
	case errors.Is(err, dirfd.ErrNotRegular) || errors.Is(err, unix.ELOOP) || err == nil && len(set) > maxKept:
		return nil, true, nil
	case err != nil:
		return nil, false, fmt.Errorf("cannot read the set %s kept: %w", filepath.Join(dir, name), err)
	}
	return set, true, nil
}

// ID names the session's run among the runs of its state directory: a
// random name, which a run can give what it starts, for a later run to
// tell what a killed one left ([Abandoned]).
func (s *Session) ID() string { return strings.TrimPrefix(filepath.Base(s.recordAt), "r-") }

// release lets go of every lock the session holds, and of its record: it
// becomes a spare for a later run to take (renamed while still locked, so
// that no one sees it as a run's record unlocked), or goes when the
// registry has spares enough.
func (s *Session) release() {
	spareKept(s.kept)
	s.kept = ""
	if s.active != nil {
		spareRecord(s.recordAt)
		s.active.Close()
		s.active = nil
	}
	s.lock.Close()
}

func flock(f *os.File, how int, wait time.Duration) error {
	deadline := time.Now().Add(wait)
	for {
		err := unix.Flock(int(f.Fd()), how|unix.LOCK_NB)
		if err == nil {
			return nil
		}
		if err != unix.EWOULDBLOCK && err != unix.EINTR {
			return err
		}
		if wait == 0 || time.Now().After(deadline) {
			return err
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// Create makes the placeholder path — an empty directory, or a file
// holding content — and records it. It fails with fs.ErrExist when
// something is there already (another run made it meanwhile, say); the
// caller then inspects what is there.
func (s *Session) Create(path string, dir bool, content string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended {
		return errors.New("placeholder: session ended")
	}
	if dir {
		if !s.takeReused(path) {
			if err := os.Mkdir(path, 0o755); err != nil {
				return err
			}
		}
	} else if err := createFile(path, content, 0o644); err != nil {
		return err
	}
	var st unix.Stat_t
	if err := unix.Lstat(path, &st); err != nil {
		return err
	}
	e := Entry{Path: path, Dir: dir, Dev: uint64(st.Dev), Ino: st.Ino, Ctime: st.Ctim.Nano(), Size: st.Size}
	s.created = append(s.created, e)
	return s.record(e)
}

// takeReused renames one of the workspace's directories to use again to
// path, which must not exist, and reports whether it did. Called with s.mu
// held.
func (s *Session) takeReused(path string) bool {
	if !s.listed {
		s.listed = true
		names, _ := readNames(s.reuse)
		for _, n := range names {
			if strings.HasPrefix(n, "d-") {
				s.reusable = append(s.reusable, filepath.Join(s.reuse, n))
			}
		}
	}
	for tries := 0; len(s.reusable) > 0 && tries < 3; {
		from := s.reusable[len(s.reusable)-1]
		s.reusable = s.reusable[:len(s.reusable)-1]
		if !emptyDir(unix.AT_FDCWD, from) {
			// Written to after the run that put it away (through a
			// descriptor kept from then): never a placeholder again.
			renameNoReplace(unix.AT_FDCWD, from, unix.AT_FDCWD, filepath.Join(s.reuse, "x-"+strings.TrimPrefix(filepath.Base(from), "d-")))
			continue
		}
		tries++
		switch err := renameNoReplace(unix.AT_FDCWD, from, unix.AT_FDCWD, path); err {
		case nil:
			return true
		case unix.ENOENT: // taken by another run meanwhile, or path's parent is gone
		default: // path exists (Mkdir says so), or another file system: make one
			if err != unix.EEXIST {
				s.reusable = nil
			} else {
				s.reusable = append(s.reusable, from)
			}
			return false
		}
	}
	return false
}

// CreateKept makes a placeholder that stays: one inside a git directory,
// which git reads as the absence it stands for. It is not recorded.
func CreateKept(path string, dir bool, content string) error {
	if dir {
		return os.Mkdir(path, 0o755)
	}
	return createFile(path, content, 0o644)
}

// createFile makes the file path, which must not exist, holding content;
// on a failure to write it, it is removed again.
func createFile(path, content string, perm uint32) error {
	f, err := dirfd.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, perm)
	if err != nil {
		return err
	}
	_, err = f.WriteString(content)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
	}
	return err
}

// record appends e to this session's manifest, so that a later run can
// remove the placeholder should this one be killed.
func (s *Session) record(e Entry) error {
	if s.manifest == nil {
		var rnd [8]byte
		rand.Read(rnd[:])
		name := filepath.Join(s.dir, "m-"+hex.EncodeToString(rnd[:])+".json")
		f := takeSpareManifest(s.dir, name)
		if f == nil {
			var err error
			f, err = dirfd.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL|os.O_APPEND|syscall.O_NOFOLLOW, 0o600)
			if err != nil {
				return err
			}
		}
		s.manifest = f
	}
	line, _ := json.Marshal(e)
	_, err := s.manifest.Write(append(line, '\n'))
	return err
}

// maxSpareManifests bounds the spare manifests of a workspace.
const maxSpareManifests = 4

// Spare manifests (sm-*) are manifests emptied by the run that cleaned
// up, kept for later runs to record into. On ext4 mounted with discard,
// removing a file that holds a block waits for the device (~0.2 ms here),
// and making one costs ~0.1–0.3 ms; a spare costs a rename.

// spareManifest empties the manifest m — one newline, which no reader
// takes for an entry, so that its block stays — and renames it a spare,
// and reports whether it did. Called with the workspace's lock held
// exclusively (clean).
func spareManifest(m string) bool {
	f, err := os.OpenFile(m, os.O_WRONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return false
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil || !ownSpare(&st) {
		f.Close()
		return false
	}
	_, err = f.WriteAt([]byte{'\n'}, 0)
	if err == nil {
		err = f.Truncate(1)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return false
	}
	return renameSpare(m, "sm-")
}

// takeSpareManifest renames a spare manifest of dir to name and opens it
// to append to, or returns nil when there is none to take.
func takeSpareManifest(dir, name string) *os.File {
	return takeSpareFile(dir, "sm-", name, os.O_WRONLY|os.O_APPEND)
}

// Created returns the placeholders this session created.
func (s *Session) Created() []Entry {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.created)
}

// End releases the session. If no other run of the workspace holds the
// lock, it removes every recorded placeholder that is still as created,
// and their manifests.
func (s *Session) End() error {
	s.mu.Lock()
	if s.ended {
		s.mu.Unlock()
		return nil
	}
	s.ended = true
	if s.manifest != nil {
		s.manifest.Close()
	}
	recorded := s.manifest != nil
	kept := s.kept
	s.kept = ""
	s.mu.Unlock()
	defer s.release()
	// The set this run kept is a spare from now on (not a killed run's,
	// which the clean below would remove).
	spareKept(kept)
	// Converting the lock releases it first: a run that starts meanwhile
	// takes it shared, and then this one leaves the placeholders to it.
	// No waiting: a run still going on holds it for as long as it lasts
	// (and removes the placeholders itself), and a look from a nested
	// workspace's run lasts an instant (the placeholders then stay until
	// the next run of the workspace ends).
	if err := flock(s.lock, unix.LOCK_EX, 0); err != nil {
		return nil
	}
	if !recorded && !s.leftovers() {
		return nil // nothing of this run's or anyone's to remove
	}
	return clean(s.dir, s.reuse)
}

// leftovers reports whether the workspace's directory holds a manifest
// (of a run that was killed before it could clean up).
func (s *Session) leftovers() bool {
	names, err := readNames(s.dir)
	if err != nil {
		return true
	}
	for _, n := range names {
		if strings.HasPrefix(n, "m-") || strings.HasPrefix(n, "known-") {
			return true
		}
	}
	return false
}

// clean removes what every manifest in dir records, deepest first; an
// empty directory of this user's goes to the workspace's reuse directory
// while that holds fewer than maxReuse. Called with the workspace's lock
// held exclusively: no run of it is going on, so what a run kept
// ([Session.Keep]) is a killed run's, and goes too.
func clean(dir, reuse string) error {
	names, err := readNames(dir)
	if err != nil {
		return err
	}
	var entries []Entry
	var manifests []string
	for _, n := range names {
		if strings.HasPrefix(n, "known-") {
			os.Remove(filepath.Join(dir, n))
			continue
		}
		if !strings.HasPrefix(n, "m-") || !strings.HasSuffix(n, ".json") {
			continue
		}
		p := filepath.Join(dir, n)
		manifests = append(manifests, p)
		data, err := readBounded(p)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(data), "\n") {
			var e Entry
			if json.Unmarshal([]byte(line), &e) == nil && filepath.IsAbs(e.Path) {
				entries = append(entries, e)
			}
		}
	}
	slices.SortFunc(entries, func(a, b Entry) int { return len(b.Path) - len(a.Path) })
	// Each parent directory is opened once, without following a link.
	parents := map[string]*dirfd.Dir{}
	defer func() {
		for _, d := range parents {
			d.Close()
		}
	}()
	bin := &putAway{dir: reuse, uid: uint32(os.Geteuid())}
	if names, err := readNames(reuse); err == nil {
		bin.room = maxReuse - len(names)
	}
	var errs []error
	for _, e := range entries {
		dir := filepath.Dir(e.Path)
		d, ok := parents[dir]
		if !ok {
			d, _ = openNoFollow(dir)
			parents[dir] = d
		}
		if d == nil {
			continue // gone, or not reachable without a link: leave it
		}
		if err := removeIfUnchanged(d.Fd(), e, bin); err != nil {
			errs = append(errs, err)
		}
	}
	spares := len(namesWith(dir, names, "sm-")) // as listed above: the lock is held exclusively, no run takes or adds one meanwhile
	for _, m := range manifests {
		if spares < maxSpareManifests && spareManifest(m) {
			spares++
			continue
		}
		os.Remove(m)
	}
	return errors.Join(errs...)
}

// removeIfUnchanged removes e's path when it is still the placeholder:
// the same inode, and an empty directory, or a file unchanged since it was
// made (its ctime and size). The path is reached without
// following a symlink in any component (dfd is its parent, opened so): a
// placeholder's parent swapped for a link never leads the removal
// elsewhere.
func removeIfUnchanged(dfd int, e Entry, bin *putAway) error {
	base := filepath.Base(e.Path)
	var st unix.Stat_t
	if err := unix.Fstatat(dfd, base, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return nil
	}
	if uint64(st.Dev) != e.Dev || st.Ino != e.Ino {
		return nil
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		if !e.Dir {
			return nil
		}
		if done, err := bin.put(dfd, base, &st, e); done {
			return err
		}
		err := unix.Unlinkat(dfd, base, unix.AT_REMOVEDIR) // fails unless empty
		if err == unix.ENOENT || err == unix.ENOTEMPTY || err == unix.EEXIST || err == unix.EBUSY {
			return nil
		}
		return err
	case unix.S_IFREG:
		// A directory's ctime moves with its entries (placeholders made
		// inside it); a file's only when it changes.
		if e.Dir || st.Size != e.Size || st.Ctim.Nano() != e.Ctime {
			return nil
		}
		if err := unix.Unlinkat(dfd, base, 0); err != nil && err != unix.ENOENT && err != unix.EBUSY {
			return err
		}
	}
	return nil
}

// putAway is the workspace's reuse directory, where the directory
// placeholders no run needs go.
type putAway struct {
	dir  string
	room int
	uid  uint32 // this process's effective user
}

// put renames the empty directory base in dfd, found as st and made as e,
// into the reuse directory and reports whether it is done with it: moved,
// or left where it is because it is not empty or still a mount point
// somewhere. When it reports false, the caller removes the directory where
// it is. A directory of another user's is never used again: they could
// write into it once it is in place.
func (p *putAway) put(dfd int, base string, st *unix.Stat_t, e Entry) (bool, error) {
	if p.room <= 0 || st.Uid != p.uid || st.Mode&0o7022 != 0 {
		return false, nil
	}
	// A directory whose ctime is still the one it had when it was made
	// gained no entry since (each one added changes it): empty, without
	// reading it. Else it is read; something put there on the host stays.
	// Either way the look after the move below is what decides.
	if st.Ctim.Nano() != e.Ctime && !emptyDir(dfd, base) {
		return true, nil
	}
	var rnd [8]byte
	rand.Read(rnd[:])
	name := filepath.Join(p.dir, "d-"+hex.EncodeToString(rnd[:]))
	switch err := renameNoReplace(dfd, base, unix.AT_FDCWD, name); err {
	case nil:
	case unix.EBUSY, unix.ENOENT:
		return true, nil // a mount point in some namespace still, or gone
	default:
		p.room = 0 // another file system, say: remove instead
		return false, nil
	}
	p.room--
	if emptyDir(unix.AT_FDCWD, name) {
		return true, nil
	}
	// Written to on the host between the look and the move: it goes back.
	if err := renameNoReplace(unix.AT_FDCWD, name, dfd, base); err != nil {
		return true, fmt.Errorf("placeholder %s gained entries while it was put away; they are in %s: %w", base, name, err)
	}
	return true, nil
}

// emptyDir reports whether base in dfd is a directory with no entries,
// without following a link.
func emptyDir(dfd int, base string) bool {
	empty, err := dirfd.IsEmpty(dfd, base, unix.O_NOFOLLOW)
	return err == nil && empty
}

// openNoFollow opens the absolute directory p one component at a time,
// never following a symlink.
func openNoFollow(p string) (*dirfd.Dir, error) {
	root, err := dirfd.Open("/")
	if err != nil {
		return nil, err
	}
	defer root.Close()
	if p = strings.Trim(p, "/"); p == "" {
		return dirfd.Open("/")
	}
	return root.OpenPath(p, false, 0)
}

func readNames(dir string) ([]string, error) { return dirfd.ReadNames(unix.AT_FDCWD, dir, 0) }

func readBounded(p string) ([]byte, error) {
	data, err := dirfd.ReadSmall(unix.AT_FDCWD, p, unix.O_NOFOLLOW, maxManifest+1)
	if errors.Is(err, dirfd.ErrNotRegular) || len(data) > maxManifest {
		return nil, fs.ErrInvalid
	}
	return data, err
}
