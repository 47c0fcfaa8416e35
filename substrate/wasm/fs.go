//go:build unix

package wasm

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"sync"

	experimentalsys "github.com/tetratelabs/wazero/experimental/sys"
	"github.com/tetratelabs/wazero/sys"

	"github.com/cordon-run/cordon/refusal"
	"github.com/cordon-run/cordon/substrate/workspace"
)

// guardFS is the guest's file system: wazero's experimental sys.FS over the
// workspace guard. Every path goes through [workspace.Workspace]: resolved
// beneath the workspace by the kernel, symlinks followed only while they
// stay inside, harness state absent. Without write, every operation that
// would change the workspace answers EROFS.
//
// wazero's own DirFS follows symlinks out of its directory (wazero #2321);
// this file system is why the wasm substrate never uses it.
type guardFS struct {
	experimentalsys.UnimplementedFS
	ws    *workspace.Workspace
	write bool
	note  func(op, path string, err error) // records a refusal, may be nil
}

// rel turns a path of wazero's file-system interface, which is relative
// to the mount whether or not it begins with "/", into a workspace-relative
// path.
func rel(path string) string {
	path = strings.TrimLeft(path, "/")
	if path == "" {
		return "."
	}
	return path
}

const writeFlags = experimentalsys.O_WRONLY | experimentalsys.O_RDWR | experimentalsys.O_CREAT |
	experimentalsys.O_TRUNC | experimentalsys.O_APPEND

// OpenFile implements experimentalsys.FS.
func (g *guardFS) OpenFile(path string, flag experimentalsys.Oflag, perm fs.FileMode) (experimentalsys.File, experimentalsys.Errno) {
	write := flag&writeFlags != 0
	if write && !g.write {
		return nil, g.readOnly("open", path)
	}
	f, err := g.ws.OpenFile(rel(path), osFlags(flag), perm)
	if err != nil {
		return nil, g.errno("open", path, err, write)
	}
	return &guardFile{ws: g.ws, f: f, seeker: seeker[int64]{f}, append: flag&experimentalsys.O_APPEND != 0, writable: write}, 0
}

// osFlags translates wazero's open flags into os.O_* values.
func osFlags(flag experimentalsys.Oflag) int {
	var f int
	switch {
	case flag&experimentalsys.O_RDWR != 0:
		f = os.O_RDWR
	case flag&experimentalsys.O_WRONLY != 0:
		f = os.O_WRONLY
	}
	for _, m := range []struct {
		w experimentalsys.Oflag
		o int
	}{
		{experimentalsys.O_APPEND, os.O_APPEND}, {experimentalsys.O_CREAT, os.O_CREATE},
		{experimentalsys.O_EXCL, os.O_EXCL}, {experimentalsys.O_TRUNC, os.O_TRUNC},
		{experimentalsys.O_SYNC, os.O_SYNC}, {experimentalsys.O_DIRECTORY, oDirectory},
		{experimentalsys.O_NOFOLLOW, oNofollow}, {experimentalsys.O_NONBLOCK, oNonblock},
		{experimentalsys.O_DSYNC, oDsync},
	} {
		if flag&m.w != 0 {
			f |= m.o
		}
	}
	if f&(os.O_CREATE|os.O_TRUNC|os.O_APPEND) != 0 && f&(os.O_WRONLY|os.O_RDWR) == 0 {
		f |= os.O_RDWR
	}
	return f
}

// Lstat implements experimentalsys.FS.
func (g *guardFS) Lstat(path string) (sys.Stat_t, experimentalsys.Errno) {
	fi, err := g.ws.Lstat(rel(path))
	if err != nil {
		return sys.Stat_t{}, g.errno("lstat", path, err, false)
	}
	return statOf(fi), 0
}

// Stat implements experimentalsys.FS.
func (g *guardFS) Stat(path string) (sys.Stat_t, experimentalsys.Errno) {
	fi, err := g.ws.Info(rel(path))
	if err != nil {
		return sys.Stat_t{}, g.errno("stat", path, err, false)
	}
	return statOf(fi), 0
}

// Readlink implements experimentalsys.FS.
func (g *guardFS) Readlink(path string) (string, experimentalsys.Errno) {
	target, err := g.ws.Readlink(rel(path))
	if err != nil {
		return "", g.errno("readlink", path, err, false)
	}
	return target, 0
}

// Mkdir implements experimentalsys.FS.
func (g *guardFS) Mkdir(path string, perm fs.FileMode) experimentalsys.Errno {
	if !g.write {
		return g.readOnly("mkdir", path)
	}
	return g.errno("mkdir", path, g.ws.Mkdir(rel(path), perm), true)
}

// Rename implements experimentalsys.FS.
func (g *guardFS) Rename(from, to string) experimentalsys.Errno {
	if !g.write {
		return g.readOnly("rename", from)
	}
	return g.errno("rename", from+" -> "+to, g.ws.Rename(rel(from), rel(to)), true)
}

// Rmdir implements experimentalsys.FS.
func (g *guardFS) Rmdir(path string) experimentalsys.Errno {
	if !g.write {
		return g.readOnly("remove", path)
	}
	return g.errno("remove", path, g.ws.RemoveDir(rel(path)), false)
}

// Unlink implements experimentalsys.FS.
func (g *guardFS) Unlink(path string) experimentalsys.Errno {
	if !g.write {
		return g.readOnly("remove", path)
	}
	return g.errno("remove", path, g.ws.Remove(rel(path)), false)
}

// Symlink implements experimentalsys.FS. The target is text and may name
// anything; the guard never follows it out of the workspace.
func (g *guardFS) Symlink(target, link string) experimentalsys.Errno {
	if !g.write {
		return g.readOnly("symlink", link)
	}
	return g.errno("symlink", link, g.ws.Symlink(target, rel(link)), true)
}

// Link implements experimentalsys.FS.
func (g *guardFS) Link(from, to string) experimentalsys.Errno {
	if !g.write {
		return g.readOnly("link", to)
	}
	return g.errno("link", from+" -> "+to, g.ws.Link(rel(from), rel(to)), true)
}

// Utimens implements experimentalsys.FS: the times of path, following a
// symlink inside the workspace.
func (g *guardFS) Utimens(path string, atim, mtim int64) experimentalsys.Errno {
	if !g.write {
		return g.readOnly("chtimes", path)
	}
	return g.errno("chtimes", path, g.ws.Chtimes(rel(path), omit(atim), omit(mtim), true), false)
}

func omit(t int64) int64 {
	if t == experimentalsys.UTIME_OMIT {
		return workspace.UtimeOmit
	}
	return t
}

// readOnly answers a change without fs.write: EROFS, as a read-only mount
// does, recorded as a refusal.
func (g *guardFS) readOnly(op, path string) experimentalsys.Errno {
	g.record(op, path, fmt.Errorf("%w: refusing to %s %q — the grant holds no fs.write:workspace, and the workspace is mounted read-only (EROFS)", refusal.CapabilityRefused, op, path))
	return experimentalsys.EROFS
}

// Chmod stays unimplemented (ENOSYS): cordon does not let a tool change
// modes.

// errno maps a workspace error to the errno the guest sees, recording
// policy refusals. Harness state is absent: ENOENT, or EACCES where the
// operation would create it.
func (g *guardFS) errno(op, path string, err error, creating bool) experimentalsys.Errno {
	if err == nil {
		return 0
	}
	var pe *workspace.PathError
	if !errors.As(err, &pe) {
		if k := refusal.Of(err); k != nil && k.Class() == refusal.Policy {
			// The workspace's set refused the change as a whole (a
			// protected path that cannot be protected, a run of an
			// enclosing workspace going on).
			g.record(op, path, err)
			return experimentalsys.EACCES
		}
		return experimentalsys.UnwrapOSError(err)
	}
	switch pe.Err {
	case workspace.ErrWriteLater:
		// Read-only, as the bind over it is in a native sandbox.
		g.record(op, path, err)
		return experimentalsys.EROFS
	case workspace.ErrOutsideWorkspace, workspace.ErrHardLink:
		g.record(op, path, err)
		return experimentalsys.EPERM
	case workspace.ErrHarnessState:
		g.record(op, path, err)
		if creating {
			return experimentalsys.EACCES
		}
		return experimentalsys.ENOENT
	case workspace.ErrSymlinkLoop:
		return experimentalsys.ELOOP
	case workspace.ErrNotFound:
		return experimentalsys.ENOENT
	case workspace.ErrNotDir:
		return experimentalsys.ENOTDIR
	case workspace.ErrIsDir:
		return experimentalsys.EISDIR
	case workspace.ErrNotRegular:
		g.record(op, path, err)
		return experimentalsys.EACCES
	case workspace.ErrInvalid:
		return experimentalsys.EINVAL
	}
	if pe.Cause != nil {
		return experimentalsys.UnwrapOSError(pe.Cause)
	}
	return experimentalsys.EIO
}

func (g *guardFS) record(op, path string, err error) {
	if g.note != nil {
		g.note(op, path, err)
	}
}

// guardFile is an experimentalsys.File over a descriptor the guard opened.
type guardFile struct {
	seeker[int64]
	ws       *workspace.Workspace
	f        *os.File
	append   bool
	writable bool // opened for writing, so through every check a change passes

	once sync.Once
	st   sys.Stat_t
	serr experimentalsys.Errno
}

func (f *guardFile) cached() (sys.Stat_t, experimentalsys.Errno) {
	f.once.Do(func() { f.st, f.serr = f.Stat() })
	return f.st, f.serr
}

func (f *guardFile) Dev() (uint64, experimentalsys.Errno) { st, e := f.cached(); return st.Dev, e }
func (f *guardFile) Ino() (sys.Inode, experimentalsys.Errno) {
	st, e := f.cached()
	return st.Ino, e
}
func (f *guardFile) IsDir() (bool, experimentalsys.Errno) {
	st, e := f.cached()
	return st.Mode.IsDir(), e
}
func (f *guardFile) IsAppend() bool { return f.append }

func (f *guardFile) SetAppend(enable bool) experimentalsys.Errno {
	if err := setAppend(f.f, enable); err != nil {
		return experimentalsys.UnwrapOSError(err)
	}
	f.append = enable
	return 0
}

func (f *guardFile) Stat() (sys.Stat_t, experimentalsys.Errno) {
	fi, err := f.f.Stat()
	if err != nil {
		return sys.Stat_t{}, experimentalsys.UnwrapOSError(err)
	}
	return sys.NewStat_t(fi), 0
}

func (f *guardFile) Read(buf []byte) (int, experimentalsys.Errno) {
	if len(buf) == 0 {
		return 0, 0
	}
	n, err := f.f.Read(buf)
	return n, ioErrno(err)
}

func (f *guardFile) Pread(buf []byte, off int64) (int, experimentalsys.Errno) {
	if len(buf) == 0 {
		return 0, 0
	}
	n, err := f.f.ReadAt(buf, off)
	return n, ioErrno(err)
}

// seeker gives guardFile the Seek of wazero's File interface. Its offset
// type is a type parameter only so that go vet's stdmethods check, which
// expects io.Seeker's error result, does not flag the errno result that
// wazero's interface requires.
type seeker[O ~int64] struct{ f *os.File }

func (s seeker[O]) Seek(offset O, whence int) (int64, experimentalsys.Errno) {
	n, err := s.f.Seek(int64(offset), whence)
	return n, ioErrno(err)
}

func (f *guardFile) Readdir(n int) ([]experimentalsys.Dirent, experimentalsys.Errno) {
	entries, err := f.ws.ReadDir(f.f, n)
	if err != nil && err != io.EOF {
		return nil, experimentalsys.UnwrapOSError(err)
	}
	out := make([]experimentalsys.Dirent, 0, len(entries))
	for _, e := range entries {
		out = append(out, experimentalsys.Dirent{Name: e.Name(), Ino: inoAt(f.f, e.Name()), Type: e.Type()})
	}
	return out, 0
}

func (f *guardFile) Write(buf []byte) (int, experimentalsys.Errno) {
	if len(buf) == 0 {
		return 0, 0
	}
	n, err := f.f.Write(buf)
	return n, ioErrno(err)
}

func (f *guardFile) Pwrite(buf []byte, off int64) (int, experimentalsys.Errno) {
	if len(buf) == 0 {
		return 0, 0
	}
	n, err := f.f.WriteAt(buf, off)
	return n, ioErrno(err)
}

func (f *guardFile) Truncate(size int64) experimentalsys.Errno {
	return ioErrno(f.f.Truncate(size))
}

func (f *guardFile) Sync() experimentalsys.Errno     { return ioErrno(f.f.Sync()) }
func (f *guardFile) Datasync() experimentalsys.Errno { return ioErrno(f.f.Sync()) }

// Utimens sets the file's times through its descriptor when it was opened
// for writing (and so passed the guard's checks for a change). Otherwise it
// answers EPERM, and wazero falls back to [guardFS.Utimens] by path, which
// the guard checks.
func (f *guardFile) Utimens(atim, mtim int64) experimentalsys.Errno {
	if !f.writable {
		return experimentalsys.EPERM
	}
	err := workspace.FileChtimes(f.f, omit(atim), omit(mtim))
	if errors.Is(err, errors.ErrUnsupported) {
		return experimentalsys.EPERM // wazero then sets them by path, through the guard
	}
	return experimentalsys.UnwrapOSError(err)
}

func (f *guardFile) Close() experimentalsys.Errno { return ioErrno(f.f.Close()) }

func ioErrno(err error) experimentalsys.Errno {
	if err == nil || err == io.EOF {
		return 0
	}
	return experimentalsys.UnwrapOSError(err)
}
