//go:build unix

package workspace

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cordon-run/cordon/harness"
	"github.com/cordon-run/cordon/internal/placeholder"
	"github.com/cordon-run/cordon/refusal"
)

// maxSymlinks bounds the symlinks followed while resolving one path, as
// Linux's MAXSYMLINKS does.
const maxSymlinks = 40

// maxPathLen is the kernel's PATH_MAX: a path passed to the kernel is at
// most this long, its terminating NUL included.
const maxPathLen = unix.PathMax

// Workspace is an open workspace directory. Its methods are safe for
// concurrent use. Close releases the directory descriptor.
type Workspace struct {
	root  string // canonical absolute path
	given string // absolute, cleaned spelling the caller used
	fd    int    // directory descriptor on root
	cfg   Config

	protMu    sync.Mutex
	protFound bool
	base      *harness.Protected // found at the first change since opened or renewed
	protErr   error
	prot      *harness.Protected // base, guarding what guardedBy trust ([Workspace.Protected])
	guardedBy [][]byte
	presence  *placeholder.Presence // in the registry of runs since the base was asked for
}

// Open opens the workspace directory dir, resolving it to its canonical path
// once. The returned Workspace holds a descriptor on it until Close.
func Open(dir string, opts ...Option) (*Workspace, error) {
	cfg, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, &PathError{Op: "open", Path: dir, Err: ErrInvalid, Cause: err}
	}
	canon, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return nil, &PathError{Op: "open", Path: dir, Root: abs, Err: errnoSentinel(err), Cause: err, detail: "the workspace"}
	}
	if err := cfg.harness.CheckWorkspace(canon); err != nil {
		return nil, err
	}
	fd, err := unix.Open(canon, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &PathError{Op: "open", Path: dir, Root: canon, Err: errnoSentinel(err), Cause: err, detail: "the workspace"}
	}
	return &Workspace{root: canon, given: abs, fd: fd, cfg: cfg}, nil
}

// Protected returns the workspace's protected set ([harness.Config.Protect]),
// found on the first change the workspace is asked for since it was opened
// or renewed ([Workspace.Renew]), and kept: it is what git and the rest of
// the host would read later, as the workspace was when that change came.
// To it, each call adds the entries of the submodules that the runs of the
// workspace going on trust ([harness.Protected.Guarded]), as they are at
// that call, and those the runs seen since the set was found trusted: a
// run's command can take such a submodule out of the index,
// and a file tool that then wrote its P/.git — core.fsmonitor in its
// config — would be passed by at the run's end (the same inode it
// trusted), and obeyed by the host's git status. The set is found, and
// what the runs kept read, under the workspace's trust lock
// ([placeholder.Guard]): no run reads its index and keeps what it trusts
// in between. From its first change until it is renewed or closed, the
// workspace is present in the registry of runs ([placeholder.Present]),
// with what its set trusts — which, like a run's, is only what every run
// going on trusts too ([harness.Protected.TrustOnly]): runs of it that
// start meanwhile read that set, and runs of an enclosing or nested
// workspace do not start. A change is refused while a run of an
// enclosing or nested workspace is going on, which keeps its set under
// another lock. A
// configuration without a state directory (no home) has no registry of
// runs to read: no run of it can be going on.
func (w *Workspace) Protected() (_ *harness.Protected, err error) {
	w.protMu.Lock()
	defer w.protMu.Unlock()
	// Present in the registry of runs from the first change until the
	// workspace is renewed or closed, recorded before the runs are read:
	// a run that starts meanwhile reads what this set trusts, and a run
	// of a nested workspace does not start. Made only as the set is
	// about to be found, and left again on every way out before it is
	// kept: a presence that keeps nothing would hold those runs off for
	// nothing.
	dir := w.cfg.harness.StateDir()
	finding := !w.protFound
	leave := func() {
		if finding {
			w.presence.Leave()
			w.presence = nil
		}
	}
	if dir != "" && finding && w.presence == nil {
		if w.presence, err = placeholder.Present(dir, w.root, w.fd); err != nil && reachable(dir) {
			return nil, &harness.BesideError{Op: "present", Err: err}
		}
	}
	if dir != "" && w.presence == nil && !reachable(dir) {
		// A state directory that cannot be reached or made holds no
		// registry: no run of this configuration can start beside the
		// change (a run records itself there first).
		dir = ""
	}
	var g *placeholder.Guard
	if dir != "" {
		if g, err = placeholder.Watch(dir, w.root, w.fd); err != nil {
			leave()
			return nil, &harness.BesideError{Op: "lock", Err: err}
		}
		defer g.Release()
	}
	if finding {
		if beforeIndexHook != nil {
			beforeIndexHook()
		}
		w.base, w.protErr = w.cfg.harness.Protect(w.root)
	}
	// The runs are read after the index, as a run reads them: a sandbox
	// made ahead that was idle before the read may have been given its
	// command since, and entered a submodule of its own. And no set is
	// found while a change is refused: found while a run of an enclosing
	// workspace had taken a submodule out of the index, it would not
	// protect that submodule's entry once the run ended and put it back.
	kept, all, err := g.Kept(w.presence)
	if err != nil {
		if finding {
			w.base, w.protErr = nil, nil
			leave()
		}
		if !errors.Is(err, placeholder.ErrNested) {
			return nil, refusal.Errorf(refusal.WorkspaceRefused, "%w: a run going on that cannot be read could trust what a file tool's change would write", err)
		}
		return nil, refusal.Errorf(refusal.WorkspaceRefused, "%w, and a file tool's change beside it could write what that one trusts; wait for it to end", err)
	}
	if finding {
		// A submodule of the index is the user's — passed by at the
		// quarantine while its entry is the same file — only when every
		// run going on trusted it too, as a run's set trusts
		// ([harness.Protected.TrustOnly]; a sandbox this process made
		// ahead, its command not given, excepted): a run's command could
		// have made it and entered it in the index, to take it out again
		// before its end (its quarantine then finds nothing new), and the
		// tool's change put it back.
		w.base.TrustOnly(kept)
		w.prot, w.guardedBy = w.base, nil
		w.protFound = true
		if w.protErr == nil && w.presence != nil {
			// Kept under the trust lock, as a run keeps its set.
			if err := w.presence.Keep(w.base.Known()); err != nil {
				w.protErr = &harness.BesideError{Op: "keep", Err: err}
			}
		}
		if w.protErr != nil {
			leave() // no change is made: nothing to be present for
		}
	}
	if w.protErr != nil {
		return nil, w.protErr
	}
	// Every set seen since the base was found stays guarded, its run
	// ended or not: the base can be older than an index a run's command
	// changed, and an entry a run trusted while out of that index would
	// be writable once the run ended — to be trusted again, with what the
	// change wrote, by the next run that finds it in the index.
	grew := false
	for _, k := range all {
		if !slices.ContainsFunc(w.guardedBy, func(g []byte) bool { return bytes.Equal(g, k) }) {
			w.guardedBy, grew = append(w.guardedBy, k), true
		}
	}
	if grew {
		p, err := w.base.Guarded(w.guardedBy)
		if err != nil {
			return nil, err
		}
		w.prot = p
	}
	return w.prot, nil
}

// beforeIndexHook, set by tests alone, runs as a first change is about to
// read the index, before it reads what the runs kept.
var beforeIndexHook func()

// reachable reports whether the state directory dir is there to be
// looked at.
func reachable(dir string) bool {
	_, err := os.Lstat(dir)
	return err == nil
}

// Found returns the protected set found at the first change asked for
// since the workspace was opened or renewed, without what the runs trust
// ([Workspace.Protected] adds that); nil when no change was asked for, or
// none could be made (the set could not be found). The quarantine after a
// tool's changes reads the index against it
// ([harness.Protected.QuarantineNotes]) — whether or not a change could be
// made now: a run of a nested workspace that started since refuses
// changes, not the quarantine of those made before it.
func (w *Workspace) Found() *harness.Protected {
	w.protMu.Lock()
	defer w.protMu.Unlock()
	if !w.protFound || w.protErr != nil {
		return nil
	}
	return w.base
}

// Renew forgets the protected set: the next change finds it again, as the
// workspace is then. A workspace kept open across calls — a server's — is
// renewed before each: what git would read changes between them (a
// sandboxed command enters a submodule in the index, the user sets a
// hooks path), and a set found at the first change protects what the
// workspace was then.
func (w *Workspace) Renew() {
	w.protMu.Lock()
	defer w.protMu.Unlock()
	w.base, w.prot, w.protErr, w.protFound, w.guardedBy = nil, nil, nil, false, nil
	w.presence.Leave()
	w.presence = nil
}

// mayChange refuses a change to the canonical workspace-relative path
// canon when it is, or is inside, a write-later path; with keep, also when
// it is a directory that must stay in place (the git directory, a
// directory on the way to a write-later path): to remove or rename it,
// or to rename something onto it.
func (w *Workspace) mayChange(op, name, canon string, keep bool) error {
	if w.cfg.noState {
		return nil // not a workspace root: read-only use
	}
	canon = strings.TrimSuffix(canon, "/")
	p, err := w.Protected()
	if errors.Is(err, placeholder.ErrNested) {
		return refusal.Errorf(refusal.WorkspaceRefused, "refusing to %s %q in %s — %w", op, name, w.root, err)
	}
	if err != nil {
		return err
	}
	switch v, what, why := p.Check(canon); {
	case v == harness.InState:
		return &PathError{Op: op, Path: name, Root: w.root, Err: ErrHarnessState, detail: what}
	case v == harness.InWriteLater && w.cfg.allowLater != nil && w.cfg.allowLater(canon):
		return nil // named by the person who asked for the change
	case v == harness.InWriteLater:
		return &PathError{Op: op, Path: name, Root: w.root, Err: ErrWriteLater, detail: why, protected: what}
	case v == harness.IsPinned && keep:
		if what == "" {
			what = "."
		}
		if !strings.Contains(why, "in place") {
			why += "; it must stay in place"
		}
		return &PathError{Op: op, Path: name, Root: w.root, Err: ErrWriteLater, detail: why, protected: what}
	}
	return nil
}

// Close releases the workspace's directory descriptor.
func (w *Workspace) Close() error {
	w.protMu.Lock()
	w.presence.Leave()
	w.presence = nil
	w.protMu.Unlock()
	if w.fd < 0 {
		return nil
	}
	err := unix.Close(w.fd)
	w.fd = -1
	return err
}

// Entry describes one directory entry or file.
type Entry struct {
	Name    string      `json:"name"`
	Type    string      `json:"type"` // file, dir, symlink, fifo, socket, device, other
	Size    int64       `json:"size"`
	Mode    fs.FileMode `json:"-"`
	ModTime time.Time   `json:"mtime"`
}

// ReadFile returns the contents of the regular file name.
func (w *Workspace) ReadFile(name string) ([]byte, error) {
	data, _, err := w.read("read", name)
	return data, err
}

func (w *Workspace) read(op, name string) ([]byte, string, error) {
	fd, canon, err := w.open(op, name, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY)
	if err != nil {
		return nil, "", err
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, "", w.fail(op, name, err)
	}
	if err := w.regular(op, name, &st); err != nil {
		return nil, "", err
	}
	max := w.cfg.maxFileSize
	if st.Size > max {
		return nil, "", w.tooLarge(op, name, st.Size)
	}
	// The size is a hint; the file may grow or shrink while we read it.
	buf := make([]byte, 0, st.Size+1)
	for {
		if int64(len(buf)) > max {
			return nil, "", w.tooLarge(op, name, int64(len(buf)))
		}
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := unix.Read(fd, buf[len(buf):cap(buf)])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, "", w.fail(op, name, err)
		}
		if n == 0 {
			return buf, canon, nil
		}
		buf = buf[:len(buf)+n]
	}
}

// WriteFile replaces (or creates) the file name with data, atomically.
// Missing parent directories inside the workspace are created.
func (w *Workspace) WriteFile(name string, data []byte) error {
	return w.write("write", name, data)
}

func (w *Workspace) write(op, name string, data []byte) error {
	if int64(len(data)) > w.cfg.maxFileSize {
		return w.tooLarge(op, name, int64(len(data)))
	}
	rel, err := w.check(op, name)
	if err != nil {
		return err
	}
	if rel == "" || dirOnly(rel) {
		// A name that ends in "/" names a directory (O_CREAT on it is
		// EISDIR in the kernel too).
		return &PathError{Op: op, Path: name, Root: w.root, Err: ErrIsDir}
	}
	for attempt := 0; ; attempt++ {
		canon, err := w.resolve(op, name, rel)
		if err != nil {
			return err
		}
		if canon == "" || dirOnly(canon) {
			// The workspace, or a link whose target ends in "/".
			return &PathError{Op: op, Path: name, Root: w.root, Err: ErrIsDir}
		}
		if err := w.mayChange(op, name, canon, false); err != nil {
			return err
		}
		dir, base := path.Split(canon)
		dirfd, err := w.mkdirAll(strings.TrimSuffix(dir, "/"))
		if err != nil {
			return w.fail(op, name, err)
		}
		err = w.replace(dirfd, base, data)
		unix.Close(dirfd)
		if err == errRaced && attempt < 3 {
			continue // a symlink appeared at the target: resolve again
		}
		if err != nil {
			return w.fail(op, name, err)
		}
		return nil
	}
}

var errRaced = errors.New("the path changed while it was being written")

// notRegular is what replace finds in the way: a FIFO, socket or device,
// which a write never replaces.
type notRegular struct{ mode uint32 }

func (e *notRegular) Error() string { return "it is a " + typeOf(e.mode) }

// replace writes data to a temporary file in dirfd and renames it onto base.
func (w *Workspace) replace(dirfd int, base string, data []byte) error {
	perm, keep := uint32(0o644), false
	var st unix.Stat_t
	switch err := unix.Fstatat(dirfd, base, &st, unix.AT_SYMLINK_NOFOLLOW); {
	case err == nil:
		switch uint32(st.Mode) & unix.S_IFMT {
		case unix.S_IFREG:
			perm, keep = uint32(st.Mode)&0o7777, true
		case unix.S_IFLNK:
			return errRaced
		case unix.S_IFDIR:
			return unix.EISDIR
		default:
			return &notRegular{uint32(st.Mode)}
		}
	case err != unix.ENOENT:
		return err
	}
	var rnd [8]byte
	rand.Read(rnd[:])
	tmp := ".cordon-" + hex.EncodeToString(rnd[:]) + ".tmp"
	// A new file gets 0644 less the umask; an existing one keeps its mode.
	fd, err := unix.Openat(dirfd, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, perm)
	if err != nil {
		return err
	}
	err = writeAll(fd, data)
	if err == nil && keep {
		err = unix.Fchmod(fd, perm)
	}
	if err == nil && w.cfg.sync {
		err = unix.Fsync(fd)
	}
	if cerr := unix.Close(fd); err == nil {
		err = cerr
	}
	if err == nil {
		err = unix.Renameat(dirfd, tmp, dirfd, base)
	}
	if err != nil {
		unix.Unlinkat(dirfd, tmp, 0)
	}
	return err
}

func writeAll(fd int, data []byte) error {
	for len(data) > 0 {
		n, err := unix.Write(fd, data)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		data = data[n:]
	}
	return nil
}

// mkdirAll opens the canonical directory dir beneath the workspace, creating
// missing components, one at a time and without following symlinks.
func (w *Workspace) mkdirAll(dir string) (int, error) {
	fd, err := unix.Openat(w.fd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil || dir == "" {
		return fd, err
	}
	for _, c := range strings.Split(dir, "/") {
		if err := unix.Mkdirat(fd, c, 0o755); err != nil && err != unix.EEXIST {
			unix.Close(fd)
			return -1, err
		}
		next, err := unix.Openat(fd, c, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		unix.Close(fd)
		if err != nil {
			return -1, err
		}
		fd = next
	}
	return fd, nil
}

// Edit replaces the one occurrence of old in the file name with new. It
// fails with [ErrNoMatch] when old does not occur and [ErrNotUnique] when it
// occurs more than once; the file is then unchanged.
func (w *Workspace) Edit(name, old, new string) error {
	const op = "edit"
	if old == "" {
		return &PathError{Op: op, Path: name, Root: w.root, Err: ErrInvalid, detail: "the text to replace is empty"}
	}
	data, canon, err := w.read(op, name)
	if err != nil {
		return err
	}
	switch n := strings.Count(string(data), old); n {
	case 0:
		return &PathError{Op: op, Path: name, Root: w.root, Err: ErrNoMatch}
	case 1:
	default:
		return &PathError{Op: op, Path: name, Root: w.root, Err: ErrNotUnique, detail: "found " + strconv.Itoa(n) + " times; include more surrounding text"}
	}
	out := strings.Replace(string(data), old, new, 1)
	if err := w.write(op, canon, []byte(out)); err != nil {
		if pe, ok := err.(*PathError); ok {
			pe.Path = name
		}
		return err
	}
	return nil
}

// List returns the entries of the directory name, sorted by name. At the
// workspace root, harness state is left out. At most the configured number
// of entries is returned; truncated reports whether there were more.
func (w *Workspace) List(name string) (entries []Entry, truncated bool, err error) {
	const op = "list"
	fd, canon, err := w.open(op, name, unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		return nil, false, err
	}
	defer unix.Close(fd)
	names, err := readDirNames(fd, w.cfg.maxEntries+1)
	if err != nil {
		return nil, false, w.fail(op, name, err)
	}
	sort.Strings(names)
	for _, n := range names {
		if canon == "" {
			if _, h := w.isHarness(n); h {
				continue
			}
		}
		if len(entries) == w.cfg.maxEntries {
			return entries, true, nil
		}
		var st unix.Stat_t
		if err := unix.Fstatat(fd, n, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			continue // removed while listing
		}
		entries = append(entries, entryOf(n, &st))
	}
	return entries, false, nil
}

// Stat describes the file or directory name, following symlinks inside
// the workspace.
func (w *Workspace) Stat(name string) (Entry, error) {
	const op = "stat"
	rel, err := w.check(op, name)
	if err != nil {
		return Entry{}, err
	}
	canon := rel
	for attempt := 0; ; attempt++ {
		var st unix.Stat_t
		err := statBeneath(w.fd, dotIfEmpty(canon), &st)
		if err == nil {
			return entryOf(path.Base(name), &st), nil
		}
		if err != unix.ELOOP || attempt == 3 {
			return Entry{}, w.fail(op, name, err)
		}
		if canon, err = w.resolve(op, name, rel); err != nil {
			return Entry{}, err
		}
	}
}

// open opens name beneath the workspace with flags, following symlinks only
// as far as they stay inside it, and returns the descriptor and the
// canonical workspace-relative path it opened.
func (w *Workspace) open(op, name string, flags int) (int, string, error) {
	rel, err := w.check(op, name)
	if err != nil {
		return -1, "", err
	}
	return w.openMode(op, name, rel, flags, 0)
}

// check turns name into a workspace-relative path and refuses it when it
// leaves the workspace or names harness state. The result holds no "." and
// no "..": a ".." is resolved as the kernel resolves it, from the directory
// the components before it reach (after a symlink, the parent of the
// link's target), so the components before the last are then canonical.
// The last component is left as it is (a symlink there is not followed
// here). A name that ends in "/" or "/." keeps one trailing "/": it names a
// directory, and the kernel answers ENOTDIR when it is not one.
func (w *Workspace) check(op, name string) (string, error) {
	if name == "" || len(name) >= maxPathLen || strings.IndexByte(name, 0) >= 0 {
		return "", &PathError{Op: op, Path: name, Root: w.root, Err: ErrInvalid,
			detail: "a path must be 1 to 4095 bytes without NUL (the kernel's PATH_MAX of 4096 counts the NUL)"}
	}
	rel, ok := w.relative(name)
	if !ok {
		return "", &PathError{Op: op, Path: name, Root: w.root, Err: ErrOutsideWorkspace}
	}
	if hasDotDot(rel) {
		var err error
		if rel, err = w.resolveDotDot(op, name, rel); err != nil {
			return "", err
		}
	}
	if h, ok := w.isHarness(rel); ok {
		return "", &PathError{Op: op, Path: name, Root: w.root, Err: ErrHarnessState, detail: h}
	}
	return rel, nil
}

// resolveDotDot resolves the components of rel up to its last one (all of
// them when the last is ".."), and appends the last one to the result.
func (w *Workspace) resolveDotDot(op, name, rel string) (string, error) {
	trimmed := strings.TrimSuffix(strings.TrimSuffix(rel, "/."), "/")
	slash := rel[len(trimmed):]
	dir, last := path.Split(trimmed)
	if last == ".." {
		canon, err := w.resolve(op, name, trimmed)
		if err != nil || canon == "" {
			return canon, err
		}
		return canon + slash, nil
	}
	canon, err := w.resolve(op, name, strings.TrimSuffix(dir, "/"))
	if err != nil {
		return "", err
	}
	return path.Join(canon, last) + slash, nil
}

func hasDotDot(rel string) bool {
	return rel == ".." || strings.HasPrefix(rel, "../") || strings.HasSuffix(rel, "/..") ||
		strings.HasSuffix(rel, "/../") || strings.Contains(rel, "/../")
}

// relative converts name to a path relative to the workspace ("" for the
// workspace itself), dropping empty and "." components and keeping ".."
// ones for [Workspace.resolve]. An absolute name must begin with the
// workspace's canonical path or the spelling it was opened with. It is a
// translation, not the containment check: the kernel enforces containment
// when the result is opened beneath the workspace.
func (w *Workspace) relative(name string) (string, bool) {
	rest := name
	if strings.HasPrefix(name, "/") {
		var ok bool
		if rest, ok = cutPrefix(name, w.root); !ok {
			if rest, ok = cutPrefix(name, w.given); !ok {
				return "", false
			}
		}
	}
	var b strings.Builder
	for c := range strings.SplitSeq(rest, "/") {
		if c == "" || c == "." {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('/')
		}
		b.WriteString(c)
	}
	rel := b.String()
	switch {
	case rel == "" || strings.HasSuffix(rel, ".."):
	case strings.HasSuffix(name, "/."):
		rel += "/." // a last component "." is one the kernel keeps: rename and rmdir refuse it
	case strings.HasSuffix(name, "/"):
		rel += "/"
	}
	return rel, true
}

// dirOnly reports whether the checked path rel names a directory whatever
// its last component is: it ends in "/" or "/.".
func dirOnly(rel string) bool { return strings.HasSuffix(rel, "/") || strings.HasSuffix(rel, "/.") }

// cutPrefix reports whether the absolute path name begins with the
// components of the clean absolute path dir, and returns the rest of name.
func cutPrefix(name, dir string) (string, bool) {
	rest := name
	for want := range strings.SplitSeq(strings.TrimPrefix(dir, "/"), "/") {
		if want == "" {
			break // dir is "/"
		}
		var c string
		for {
			rest = strings.TrimLeft(rest, "/")
			c, rest, _ = strings.Cut(rest, "/")
			if c != "." {
				break
			}
		}
		if c != want {
			return "", false
		}
	}
	return rest, true
}

// resolve replaces every symlink in rel by its target, one component at a
// time, and resolves ".." as the kernel does: to the parent of the
// directory reached so far, so after a symlink the parent of its target.
// It returns the canonical workspace-relative path, with a trailing "/"
// when rel has one. A path whose tail does not exist yet is completed
// lexically (a ".." after a missing component fails as the kernel's lookup
// does). The result is refused when it leaves the workspace or reaches
// harness state.
func (w *Workspace) resolve(op, name, rel string) (string, error) {
	outside := &PathError{Op: op, Path: name, Root: w.root, Err: ErrOutsideWorkspace}
	todo := splitPath(rel)
	var done []string
	links := 0
	// state of the last component in done: found as a directory, found as
	// something else, or missing (with the errno that said so).
	const (
		isDir = iota
		notDir
		missing
	)
	last, why := isDir, error(nil)
	// trailing: the path ends in "/" or "/." (its own, or a link target's
	// as the last thing resolved), so it names a directory.
	trailing := false
	for len(todo) > 0 {
		c := todo[0]
		todo = todo[1:]
		trailing = len(todo) == 0 && (c == "" || c == ".")
		switch c {
		case "", ".", "..":
			switch {
			case last == notDir:
				return "", w.fail(op, name, unix.ENOTDIR)
			case last == missing && c == "..":
				return "", w.fail(op, name, why)
			case c == "..":
				if len(done) == 0 {
					return "", outside
				}
				done = done[:len(done)-1]
			}
			continue
		}
		if last == missing {
			done = append(done, c)
			continue
		}
		if last == notDir {
			return "", w.fail(op, name, unix.ENOTDIR)
		}
		p := strings.Join(append(done, c), "/")
		var st unix.Stat_t
		if err := unix.Fstatat(w.fd, p, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			if err != unix.ENOENT {
				return "", w.fail(op, name, err)
			}
			last, why = missing, err
			done = append(done, c)
			continue
		}
		switch uint32(st.Mode) & unix.S_IFMT {
		case unix.S_IFLNK:
		case unix.S_IFDIR:
			last = isDir
			done = append(done, c)
			continue
		default:
			last = notDir
			done = append(done, c)
			continue
		}
		if links++; links > maxSymlinks {
			return "", &PathError{Op: op, Path: name, Root: w.root, Err: ErrSymlinkLoop, Cause: unix.ELOOP}
		}
		target, err := readlinkat(w.fd, p)
		if err != nil {
			return "", w.fail(op, name, err)
		}
		if filepath.IsAbs(target) {
			t, ok := w.relative(target)
			if !ok {
				return "", outside
			}
			done, last = nil, isDir
			target = t
		}
		todo = append(splitPath(target), todo...)
	}
	canon := strings.Join(done, "/")
	if h, ok := w.isHarness(canon); ok {
		return "", &PathError{Op: op, Path: name, Root: w.root, Err: ErrHarnessState, detail: h}
	}
	if canon != "" && trailing {
		canon += "/"
	}
	return canon, nil
}

func splitPath(p string) []string {
	if p == "" {
		return nil
	}
	return strings.Split(p, "/")
}

func dotIfEmpty(p string) string {
	if p == "" {
		return "."
	}
	return p
}

func readlinkat(dirfd int, p string) (string, error) {
	buf := make([]byte, unix.PathMax)
	n, err := unix.Readlinkat(dirfd, p, buf)
	if err != nil {
		return "", err
	}
	if n >= len(buf) {
		return "", unix.ENAMETOOLONG
	}
	return string(buf[:n]), nil
}

// readDirNames reads at most max names from the directory fd (a duplicate
// is read, so fd stays usable for fstatat).
func readDirNames(fd int, max int) ([]string, error) {
	dfd, err := unix.Dup(fd)
	if err != nil {
		return nil, err
	}
	unix.CloseOnExec(dfd)
	f := os.NewFile(uintptr(dfd), "dir")
	defer f.Close()
	names, err := f.Readdirnames(max)
	if err == io.EOF {
		err = nil
	}
	return names, err
}

func (w *Workspace) regular(op, name string, st *unix.Stat_t) error {
	switch uint32(st.Mode) & unix.S_IFMT {
	case unix.S_IFREG:
		return nil
	case unix.S_IFDIR:
		return &PathError{Op: op, Path: name, Root: w.root, Err: ErrIsDir}
	}
	return &PathError{Op: op, Path: name, Root: w.root, Err: ErrNotRegular, detail: "it is a " + typeOf(uint32(st.Mode))}
}

func (w *Workspace) tooLarge(op, name string, size int64) error {
	return &PathError{Op: op, Path: name, Root: w.root, Err: ErrTooLarge,
		detail: "at least " + strconv.FormatInt(size, 10) + " bytes; the limit is " + strconv.FormatInt(w.cfg.maxFileSize, 10)}
}

// fail wraps an errno from an operation on name.
func (w *Workspace) fail(op, name string, err error) error {
	if pe, ok := err.(*PathError); ok {
		return pe
	}
	if nr, ok := err.(*notRegular); ok {
		return &PathError{Op: op, Path: name, Root: w.root, Err: ErrNotRegular, detail: nr.Error() + "; a write never replaces one"}
	}
	if err == unix.ENAMETOOLONG {
		return &PathError{Op: op, Path: name, Root: w.root, Err: ErrInvalid, Cause: err, detail: "a name in the path is longer than the file system allows (255 bytes on most)"}
	}
	return &PathError{Op: op, Path: name, Root: w.root, Err: errnoSentinel(err), Cause: err}
}

func errnoSentinel(err error) error {
	var errno unix.Errno
	if !errors.As(err, &errno) {
		return err
	}
	switch errno {
	case unix.ENOENT:
		return ErrNotFound
	case unix.ENOTDIR:
		return ErrNotDir
	case unix.EISDIR:
		return ErrIsDir
	case unix.ELOOP:
		return ErrSymlinkLoop
	case unix.EXDEV:
		return ErrOutsideWorkspace
	case unix.EFBIG:
		return ErrTooLarge
	case unix.EEXIST:
		return ErrExist
	}
	return errno
}

func entryOf(name string, st *unix.Stat_t) Entry {
	return Entry{
		Name:    name,
		Type:    typeOf(uint32(st.Mode)),
		Size:    st.Size,
		Mode:    fs.FileMode(st.Mode & 0o777),
		ModTime: mtime(st),
	}
}

func typeOf(mode uint32) string {
	switch mode & unix.S_IFMT {
	case unix.S_IFREG:
		return "file"
	case unix.S_IFDIR:
		return "dir"
	case unix.S_IFLNK:
		return "symlink"
	case unix.S_IFIFO:
		return "fifo"
	case unix.S_IFSOCK:
		return "socket"
	case unix.S_IFCHR, unix.S_IFBLK:
		return "device"
	}
	return "other"
}
