//go:build unix

// Package dirfd holds the descriptor-relative file operations cordon uses
// on its own harness state (the tool registry): every path is walked one
// component at a time from a directory descriptor with O_NOFOLLOW, so a
// symlink planted anywhere on the way is an error, never followed.
//
// # Limitations
//
// Names are single components checked by the caller's paths: "..", "."
// and names with '/' are refused. There is no Windows support.
package dirfd

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// ErrBadName is a path component that is empty, ".", ".." or has a '/'.
var ErrBadName = errors.New("not a single path component")

// maxDepth bounds the directories RemoveAll descends.
const maxDepth = 64

// Dir is an open directory descriptor.
type Dir struct {
	fd   int
	name string // for messages
}

// Open opens the directory at the absolute path, following symlinks in
// it (the caller resolved it), O_CLOEXEC.
func Open(path string) (*Dir, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	return &Dir{fd: fd, name: path}, nil
}

// Close releases the descriptor.
func (d *Dir) Close() error {
	if d == nil || d.fd < 0 {
		return nil
	}
	err := unix.Close(d.fd)
	d.fd = -1
	return err
}

// Fd returns the descriptor, for the *at system calls the methods here do
// not cover.
func (d *Dir) Fd() int { return d.fd }

// Name returns the path the directory was reached by.
func (d *Dir) Name() string { return d.name }

func (d *Dir) join(name string) string { return d.name + "/" + name }

func check(name string) error {
	if name == "" || name == "." || name == ".." || strings.ContainsRune(name, '/') || strings.ContainsRune(name, 0) {
		return fmt.Errorf("%q: %w", name, ErrBadName)
	}
	return nil
}

// OpenDir opens the subdirectory name, refusing a symlink; with create,
// a missing one is made with mode perm first.
func (d *Dir) OpenDir(name string, create bool, perm uint32) (*Dir, error) {
	if err := check(name); err != nil {
		return nil, err
	}
	if create {
		if err := unix.Mkdirat(d.fd, name, perm); err != nil && err != unix.EEXIST {
			return nil, &os.PathError{Op: "mkdir", Path: d.join(name), Err: err}
		}
	}
	fd, err := unix.Openat(d.fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: d.join(name), Err: err}
	}
	return &Dir{fd: fd, name: d.join(name)}, nil
}

// OpenPath opens the directory at the '/'-separated relative path, one
// component at a time, creating missing ones with create.
func (d *Dir) OpenPath(rel string, create bool, perm uint32) (*Dir, error) {
	cur := &Dir{fd: -1, name: d.name}
	var err error
	cur.fd, err = unix.Dup(d.fd)
	if err != nil {
		return nil, err
	}
	unix.CloseOnExec(cur.fd)
	for _, part := range strings.Split(rel, "/") {
		next, err := cur.OpenDir(part, create, perm)
		cur.Close()
		if err != nil {
			return nil, err
		}
		cur = next
	}
	return cur, nil
}

// WriteFile creates name (it must not exist) with data and mode perm,
// and syncs it.
func (d *Dir) WriteFile(name string, data []byte, perm uint32) error {
	if err := check(name); err != nil {
		return err
	}
	fd, err := unix.Openat(d.fd, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, perm)
	if err != nil {
		return &os.PathError{Op: "create", Path: d.join(name), Err: err}
	}
	f := os.NewFile(uintptr(fd), d.join(name))
	_, err = f.Write(data)
	if err == nil {
		err = f.Chmod(os.FileMode(perm)) // the umask may have cleared bits
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// ReadFile reads the regular file name, refusing a symlink, a non-regular
// file, or more than max bytes.
func (d *Dir) ReadFile(name string, max int64) ([]byte, os.FileMode, error) {
	if err := check(name); err != nil {
		return nil, 0, err
	}
	fd, err := unix.Openat(d.fd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, 0, &os.PathError{Op: "open", Path: d.join(name), Err: err}
	}
	f := os.NewFile(uintptr(fd), d.join(name))
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, 0, err
	}
	if !fi.Mode().IsRegular() {
		return nil, 0, fmt.Errorf("%s is not a regular file", d.join(name))
	}
	if fi.Size() > max {
		return nil, 0, fmt.Errorf("%s is larger than %d bytes", d.join(name), max)
	}
	buf, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, 0, err
	}
	if int64(len(buf)) > max {
		return nil, 0, fmt.Errorf("%s is larger than %d bytes", d.join(name), max)
	}
	return buf, fi.Mode(), nil
}

// Names lists the directory's entries.
func (d *Dir) Names() ([]string, error) { return ReadNames(d.fd, ".", 0) }

// Rename moves from (in d) to to (in dst), replacing a file at to.
func (d *Dir) Rename(from string, dst *Dir, to string) error {
	if err := check(from); err != nil {
		return err
	}
	if err := check(to); err != nil {
		return err
	}
	if err := unix.Renameat(d.fd, from, dst.fd, to); err != nil {
		return &os.LinkError{Op: "rename", Old: d.join(from), New: dst.join(to), Err: err}
	}
	return nil
}

// Exists reports whether name exists (without following a symlink).
func (d *Dir) Exists(name string) (bool, error) {
	if err := check(name); err != nil {
		return false, err
	}
	var st unix.Stat_t
	err := unix.Fstatat(d.fd, name, &st, unix.AT_SYMLINK_NOFOLLOW)
	if err == unix.ENOENT {
		return false, nil
	}
	return err == nil, err
}

// Remove removes the file or empty directory name.
func (d *Dir) Remove(name string) error {
	if err := check(name); err != nil {
		return err
	}
	err := unix.Unlinkat(d.fd, name, 0)
	if err == unix.EISDIR || err == unix.EPERM {
		err = unix.Unlinkat(d.fd, name, unix.AT_REMOVEDIR)
	}
	if err != nil && err != unix.ENOENT {
		return &os.PathError{Op: "remove", Path: d.join(name), Err: err}
	}
	return nil
}

// RemoveAll removes name and everything beneath it, never following a
// symlink out; a missing name is not an error.
func (d *Dir) RemoveAll(name string) error { return d.removeAll(name, 0) }

func (d *Dir) removeAll(name string, depth int) error {
	if err := check(name); err != nil {
		return err
	}
	if depth > maxDepth {
		return fmt.Errorf("%s: deeper than %d directories", d.join(name), maxDepth)
	}
	err := unix.Unlinkat(d.fd, name, 0)
	if err == nil || err == unix.ENOENT {
		return nil
	}
	if err != unix.EISDIR && err != unix.EPERM {
		return &os.PathError{Op: "remove", Path: d.join(name), Err: err}
	}
	sub, err := d.OpenDir(name, false, 0)
	if err != nil {
		return err
	}
	names, err := sub.Names()
	if err == nil {
		for _, n := range names {
			if err = sub.removeAll(n, depth+1); err != nil {
				break
			}
		}
	}
	sub.Close()
	if err != nil {
		return err
	}
	return d.Remove(name)
}

// Sync flushes the directory itself (new and renamed entries).
func (d *Dir) Sync() error { return unix.Fsync(d.fd) }

// Lock takes an exclusive advisory lock on the file name (created when
// missing) and returns the function that releases it.
func (d *Dir) Lock(name string) (func(), error) {
	if err := check(name); err != nil {
		return nil, err
	}
	fd, err := unix.Openat(d.fd, name, unix.O_RDWR|unix.O_CREAT|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: d.join(name), Err: err}
	}
	if err := unix.Flock(fd, unix.LOCK_EX); err != nil {
		unix.Close(fd)
		return nil, &os.PathError{Op: "lock", Path: d.join(name), Err: err}
	}
	return func() { unix.Flock(fd, unix.LOCK_UN); unix.Close(fd) }, nil
}

// Canonical returns p absolute with every symbolic link resolved, as the
// kernel reaches it: a relative p from the kernel's working directory,
// not $PWD (which filepath.Abs trusts: a shell in a directory reached
// through a link names it by the link).
func Canonical(p string) (string, error) {
	if !filepath.IsAbs(p) {
		wd, err := syscall.Getwd()
		if err != nil {
			return "", err
		}
		p = wd + "/" + p
	}
	return filepath.EvalSymlinks(p)
}
