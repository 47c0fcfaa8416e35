//go:build unix

package workspace

import (
	"io/fs"
	"math"
	"os"
	"path"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// The methods in this file give a file system to guests that expect POSIX
// calls (WebAssembly's WASI): descriptors, directories, renames. They apply
// the same boundary as the direct file tools — the same lexical check,
// resolution beneath the workspace and harness-state refusal — and, unlike
// them, follow POSIX semantics (no atomic replace, no missing parents).

// OpenFile opens name beneath the workspace with the os.O_* flags flag,
// creating it with perm when os.O_CREATE is set. Only regular files and
// directories are opened: a FIFO, socket or device is refused without
// blocking on it. A file opened for writing (os.O_WRONLY, os.O_RDWR,
// os.O_CREATE, os.O_TRUNC or os.O_APPEND) must have a single hard link,
// else [ErrHardLink]; os.O_TRUNC is applied only after that check. With
// os.O_NOFOLLOW or os.O_EXCL a symlink in the last component is not
// followed.
func (w *Workspace) OpenFile(name string, flag int, perm fs.FileMode) (*os.File, error) {
	const op = "open"
	writing := flag&(unix.O_WRONLY|unix.O_RDWR|unix.O_CREAT|unix.O_TRUNC|unix.O_APPEND) != 0
	kflags := flag&^(unix.O_TRUNC|unix.O_NOFOLLOW|unix.O_CLOEXEC) | unix.O_NONBLOCK | unix.O_NOCTTY
	var mode uint32
	if flag&unix.O_CREAT != 0 {
		mode = uint32(perm.Perm()) // openat2 refuses a mode without O_CREAT
	}
	rel, err := w.check(op, name)
	if err != nil {
		return nil, err
	}
	var fd int
	var canon string
	// A trailing slash makes the kernel follow a symlink in the last
	// component whatever the flags say (and refuse O_CREAT with EISDIR).
	if flag&(unix.O_NOFOLLOW|unix.O_EXCL) != 0 && !dirOnly(rel) {
		dir, base, err := w.parent(op, name, rel)
		if err != nil {
			return nil, err
		}
		canon = path.Join(dir, base)
		if writing {
			if err := w.mayChange(op, name, canon, false); err != nil {
				return nil, err
			}
		}
		if fd, err = openBeneath(w.fd, dotIfEmpty(canon), kflags, mode); err != nil {
			return nil, w.fail(op, name, err)
		}
	} else if writing {
		// A change is judged by the path it reaches, and that path is
		// opened without following any symlink: one swapped in after the
		// check makes the open fail (and the check run again), never
		// reach another file.
		for attempt := 0; ; attempt++ {
			if canon, err = w.resolve(op, name, rel); err != nil {
				return nil, err
			}
			if err := w.mayChange(op, name, canon, false); err != nil {
				return nil, err
			}
			if fd, err = openBeneath(w.fd, dotIfEmpty(canon), kflags, mode); err == nil {
				break
			}
			if err != unix.ELOOP || attempt == 3 {
				return nil, w.fail(op, name, err)
			}
		}
	} else if fd, canon, err = w.openMode(op, name, rel, kflags, mode); err != nil {
		return nil, err
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, w.fail(op, name, err)
	}
	switch uint32(st.Mode) & unix.S_IFMT {
	case unix.S_IFREG:
		if writing && st.Nlink > 1 {
			unix.Close(fd)
			return nil, &PathError{Op: op, Path: name, Root: w.root, Err: ErrHardLink,
				detail: strconv.FormatUint(uint64(st.Nlink), 10) + " links"}
		}
		if flag&unix.O_TRUNC != 0 {
			if err := unix.Ftruncate(fd, 0); err != nil {
				unix.Close(fd)
				return nil, w.fail(op, name, err)
			}
		}
	case unix.S_IFDIR:
	default:
		unix.Close(fd)
		return nil, &PathError{Op: op, Path: name, Root: w.root, Err: ErrNotRegular, detail: "it is a " + typeOf(uint32(st.Mode))}
	}
	if flag&unix.O_NONBLOCK == 0 {
		// Opened non-blocking so that a FIFO could not block the open;
		// the caller did not ask for it.
		if fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0); err == nil {
			unix.FcntlInt(uintptr(fd), unix.F_SETFL, fl&^unix.O_NONBLOCK)
		}
	}
	return os.NewFile(uintptr(fd), path.Join(w.root, canon)), nil
}

// openMode opens the checked workspace-relative path rel (the caller's
// name) beneath the workspace with flags and a creation mode, following
// symlinks only as far as they stay inside it, and returns the descriptor
// and the canonical workspace-relative path it opened.
func (w *Workspace) openMode(op, name, rel string, flags int, mode uint32) (int, string, error) {
	canon := rel
	for attempt := 0; ; attempt++ {
		fd, err := openBeneath(w.fd, dotIfEmpty(canon), flags, mode)
		if err == nil {
			return fd, canon, nil
		}
		if err != unix.ELOOP || attempt == 3 {
			return -1, "", w.fail(op, name, err)
		}
		if canon, err = w.resolve(op, name, rel); err != nil {
			return -1, "", err
		}
	}
}

// ReadDir reads at most n entries (all of them when n <= 0) from the
// directory dir, which [Workspace.OpenFile] opened. When dir is the
// workspace itself, harness state is left out.
func (w *Workspace) ReadDir(dir *os.File, n int) ([]fs.DirEntry, error) {
	entries, err := dir.ReadDir(n)
	if len(entries) == 0 || !w.isRootFile(dir) {
		return entries, err
	}
	kept := entries[:0]
	for _, e := range entries {
		if _, h := w.isHarness(e.Name()); !h {
			kept = append(kept, e)
		}
	}
	return kept, err
}

// isRootFile reports whether f is the workspace directory itself.
func (w *Workspace) isRootFile(f *os.File) bool {
	var a, b unix.Stat_t
	if unix.Fstat(int(f.Fd()), &a) != nil || unix.Fstat(w.fd, &b) != nil {
		return true // fail closed: filter
	}
	return a.Dev == b.Dev && a.Ino == b.Ino
}

// Info describes name, following symlinks inside the workspace, as an
// [fs.FileInfo] whose Sys method returns a *[unix.Stat_t].
func (w *Workspace) Info(name string) (fs.FileInfo, error) { return w.info("stat", name) }

func (w *Workspace) info(op, name string) (fs.FileInfo, error) {
	rel, err := w.check(op, name)
	if err != nil {
		return nil, err
	}
	canon := rel
	for attempt := 0; ; attempt++ {
		var st unix.Stat_t
		err := statBeneath(w.fd, dotIfEmpty(canon), &st)
		if err == nil {
			return &fileInfo{name: path.Base(name), st: st}, nil
		}
		if err != unix.ELOOP || attempt == 3 {
			return nil, w.fail(op, name, err)
		}
		if canon, err = w.resolve(op, name, rel); err != nil {
			return nil, err
		}
	}
}

// Lstat describes name without following a symlink in its last component.
// Sys returns a *[unix.Stat_t].
func (w *Workspace) Lstat(name string) (fs.FileInfo, error) {
	const op = "lstat"
	rel, err := w.check(op, name)
	if err != nil {
		return nil, err
	}
	if dirOnly(rel) {
		return w.info(op, name) // the kernel follows a symlink before a trailing slash
	}
	var st unix.Stat_t
	err = w.atRel(op, name, rel, func(dirfd int, base string) error {
		if base == "" {
			return unix.Fstat(dirfd, &st)
		}
		return unix.Fstatat(dirfd, base, &st, unix.AT_SYMLINK_NOFOLLOW)
	})
	if err != nil {
		return nil, err
	}
	return &fileInfo{name: path.Base(name), st: st}, nil
}

// Readlink returns the target of the symlink name. The target is the text
// of the link: it is not resolved, and reading it grants nothing.
func (w *Workspace) Readlink(name string) (string, error) {
	const op = "readlink"
	rel, err := w.check(op, name)
	if err != nil {
		return "", err
	}
	if dirOnly(rel) {
		// The kernel follows the link before a trailing slash and finds
		// a directory, which is not a link.
		if _, err := w.info(op, name); err != nil {
			return "", err
		}
		return "", w.fail(op, name, unix.EINVAL)
	}
	var target string
	err = w.atRel(op, name, rel, func(dirfd int, base string) error {
		if base == "" {
			return unix.EINVAL
		}
		var err error
		target, err = readlinkat(dirfd, base)
		return err
	})
	return target, err
}

// Mkdir creates the directory name with perm (less the umask). Its parent
// must exist.
func (w *Workspace) Mkdir(name string, perm fs.FileMode) error {
	return w.change("mkdir", name, false, func(dirfd int, base string) error {
		if base == "" {
			return unix.EEXIST
		}
		return unix.Mkdirat(dirfd, base, uint32(perm.Perm()))
	})
}

// Remove removes the file or symlink name (not a directory).
func (w *Workspace) Remove(name string) error {
	return w.change("remove", name, true, func(dirfd int, base string) error {
		if base == "" {
			return unix.EISDIR
		}
		return unix.Unlinkat(dirfd, base, 0)
	})
}

// RemoveDir removes the empty directory name.
func (w *Workspace) RemoveDir(name string) error {
	return w.change("remove", name, true, func(dirfd int, base string) error {
		if base == "" {
			return unix.EBUSY
		}
		return unix.Unlinkat(dirfd, base, unix.AT_REMOVEDIR)
	})
}

// Rename renames from to to, replacing to when it exists (as rename(2)
// does: a symlink in either last component is renamed or replaced, never
// followed). Both names are checked; neither may be the workspace itself
// or harness state.
func (w *Workspace) Rename(from, to string) error {
	const op = "rename"
	return w.change(op, from, true, func(fromfd int, fromBase string) error {
		if fromBase == "" {
			return unix.EBUSY
		}
		return w.change(op, to, true, func(tofd int, toBase string) error {
			if toBase == "" {
				return unix.EBUSY
			}
			return unix.Renameat(fromfd, fromBase, tofd, toBase)
		})
	})
}

// change is [Workspace.at] for an operation that changes name: it is
// refused when name's last component, in its resolved directory, is or is
// inside a write-later path, or (with keep) is a directory that must stay
// in place.
func (w *Workspace) change(op, name string, keep bool, fn func(dirfd int, base string) error) error {
	rel, err := w.check(op, name)
	if err != nil {
		return err
	}
	return w.changeRel(op, name, rel, keep, fn)
}

// changeRel is [Workspace.change] of the checked workspace-relative path
// rel (see [Workspace.check]).
func (w *Workspace) changeRel(op, name, rel string, keep bool, fn func(dirfd int, base string) error) error {
	if rel == "" {
		if err := w.mayChange(op, name, "", keep); err != nil {
			return err
		}
		return w.atRel(op, name, rel, fn)
	}
	dir, base, err := w.parent(op, name, rel)
	if err != nil {
		return err
	}
	if err := w.mayChange(op, name, path.Join(dir, base), keep); err != nil {
		return err
	}
	// at resolves the directory again, beneath the workspace and without
	// following symlinks: a directory swapped for a symlink meanwhile
	// fails the operation, it does not move it elsewhere.
	return w.atResolved(op, name, dir, base, fn)
}

// at runs fn with a descriptor on the directory holding name's last
// component, resolved beneath the workspace, and that component (""
// when name is the workspace itself: then the descriptor is the
// workspace's). An errno from fn is wrapped for op and name.
func (w *Workspace) at(op, name string, fn func(dirfd int, base string) error) error {
	rel, err := w.check(op, name)
	if err != nil {
		return err
	}
	return w.atRel(op, name, rel, fn)
}

// atRel is [Workspace.at] of the checked workspace-relative path rel.
func (w *Workspace) atRel(op, name, rel string, fn func(dirfd int, base string) error) error {
	if rel == "" {
		if err := fn(w.fd, ""); err != nil {
			return w.fail(op, name, err)
		}
		return nil
	}
	dir, base, err := w.parent(op, name, rel)
	if err != nil {
		return err
	}
	return w.atResolved(op, name, dir, base, fn)
}

// atResolved runs fn with a descriptor on the canonical directory dir,
// opened beneath the workspace without following symlinks.
func (w *Workspace) atResolved(op, name, dir, base string, fn func(dirfd int, base string) error) error {
	dirfd, err := openBeneath(w.fd, dotIfEmpty(dir), unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return w.fail(op, name, err)
	}
	defer unix.Close(dirfd)
	if err := fn(dirfd, base); err != nil {
		return w.fail(op, name, err)
	}
	return nil
}

// parent resolves the directory holding the last component of the cleaned
// workspace-relative path rel and returns its canonical path and that
// component. The component itself is not resolved; it is refused when it
// names harness state.
func (w *Workspace) parent(op, name, rel string) (string, string, error) {
	trimmed := strings.TrimSuffix(rel, "/") // a last "." stays the last component
	d, base := path.Split(trimmed)
	dir, err := w.resolve(op, name, strings.TrimSuffix(d, "/"))
	if err != nil {
		return "", "", err
	}
	if h, ok := w.isHarness(path.Join(dir, base)); ok {
		return "", "", &PathError{Op: op, Path: name, Root: w.root, Err: ErrHarnessState, detail: h}
	}
	// A trailing slash stays on the component: the calls made with it
	// (mkdir, unlink, rmdir, rename) do not follow a symlink there, and
	// answer ENOTDIR (or EISDIR) as the kernel does.
	return dir, base + rel[len(trimmed):], nil
}

// fileInfo is an [fs.FileInfo] over a stat result.
type fileInfo struct {
	name string
	st   unix.Stat_t
}

func (fi *fileInfo) Name() string       { return fi.name }
func (fi *fileInfo) Size() int64        { return fi.st.Size }
func (fi *fileInfo) ModTime() time.Time { return mtime(&fi.st) }
func (fi *fileInfo) IsDir() bool        { return uint32(fi.st.Mode)&unix.S_IFMT == unix.S_IFDIR }
func (fi *fileInfo) Sys() any           { return &fi.st }

func (fi *fileInfo) Mode() fs.FileMode {
	m := fs.FileMode(fi.st.Mode & 0o777)
	switch uint32(fi.st.Mode) & unix.S_IFMT {
	case unix.S_IFDIR:
		m |= fs.ModeDir
	case unix.S_IFLNK:
		m |= fs.ModeSymlink
	case unix.S_IFIFO:
		m |= fs.ModeNamedPipe
	case unix.S_IFSOCK:
		m |= fs.ModeSocket
	case unix.S_IFCHR:
		m |= fs.ModeDevice | fs.ModeCharDevice
	case unix.S_IFBLK:
		m |= fs.ModeDevice
	}
	return m
}

// Symlink creates the symlink name with the text target. The target may
// name anything, as a native tool's symlink may: it is text, and no
// operation of the workspace ever follows it out (or into harness state).
// name itself is refused where a change is refused.
func (w *Workspace) Symlink(target, name string) error {
	const op = "symlink"
	if target == "" || len(target) >= maxPathLen || strings.IndexByte(target, 0) >= 0 {
		return &PathError{Op: op, Path: name, Root: w.root, Err: ErrInvalid, detail: "a link's target must be 1 to 4095 bytes without NUL"}
	}
	// keep: a link is never made where a directory must stay in place (an
	// absent one on the way to a write-later path would then resolve
	// somewhere writable).
	return w.change(op, name, true, func(dirfd int, base string) error {
		if base == "" {
			return unix.EEXIST
		}
		return unix.Symlinkat(target, dirfd, base)
	})
}

// Link creates the hard link name for the file old (a symlink in old's
// last component is linked, not followed). A write-later path is never
// linked: its other name would be writable where the path itself is not.
func (w *Workspace) Link(old, name string) error {
	const op = "link"
	return w.change(op, old, false, func(olddirfd int, oldBase string) error {
		if oldBase == "" || strings.HasSuffix(oldBase, "/") {
			return unix.EPERM // a directory: link(2) refuses it too
		}
		return w.change(op, name, true, func(dirfd int, base string) error {
			if base == "" {
				return unix.EEXIST
			}
			return unix.Linkat(olddirfd, oldBase, dirfd, base, 0)
		})
	})
}

// Chtimes sets the access and modification times of name, in nanoseconds
// since the epoch ([UtimeOmit] keeps one as it is). With follow, a symlink
// in the last component is followed (inside the workspace only); without,
// the link's own times are set.
func (w *Workspace) Chtimes(name string, atime, mtime int64, follow bool) error {
	const op = "chtimes"
	rel, err := w.check(op, name)
	if err != nil {
		return err
	}
	if follow || dirOnly(rel) {
		// The kernel follows a link before a trailing slash whatever the
		// flags say: follow it here, inside the workspace, and never hand
		// the kernel a name with a slash after it.
		canon, err := w.resolve(op, name, rel)
		if err != nil {
			return err
		}
		rel = strings.TrimSuffix(canon, "/")
	}
	ts := []unix.Timespec{timespec(atime), timespec(mtime)}
	return w.changeRel(op, name, rel, false, func(dirfd int, base string) error {
		if base == "" {
			return unix.UtimesNanoAt(dirfd, ".", ts, 0)
		}
		var st unix.Stat_t
		if err := unix.Fstatat(dirfd, base, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return err
		}
		if uint32(st.Mode)&unix.S_IFMT == unix.S_IFREG && st.Nlink > 1 {
			// Its other name may be outside, or a protected path.
			return &PathError{Op: op, Path: name, Root: w.root, Err: ErrHardLink,
				detail: strconv.FormatUint(uint64(st.Nlink), 10) + " links"}
		}
		return unix.UtimesNanoAt(dirfd, base, ts, unix.AT_SYMLINK_NOFOLLOW)
	})
}

// UtimeOmit given as a time to [Workspace.Chtimes] leaves it unchanged.
const UtimeOmit = math.MinInt64

func timespec(ns int64) unix.Timespec {
	if ns == UtimeOmit {
		return unix.Timespec{Nsec: utimeOmit}
	}
	return unix.NsecToTimespec(ns)
}
