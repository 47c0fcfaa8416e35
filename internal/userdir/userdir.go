// Package userdir opens the per-user directories cordon keeps its trusted
// state in — the key store, run locks, the compiled-code cache — outside
// every workspace. A directory is created mode 0700 when missing, opened
// without following a symlink at its last component, and refused unless
// it is a directory owned by the caller with no access for group or
// others: state that another user, or a link planted by one, could
// change is not trusted.
package userdir

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/cordon-run/cordon/refusal"
)

// Ensure makes sure dir (absolute and clean) exists as a directory cordon
// owns, creating it and missing parents (mode 0700) when absent. It
// returns a descriptor on the directory, opened O_NOFOLLOW; the caller
// closes it. A directory that is a symlink, not owned by the caller or
// open to group or others is refused with [refusal.UntrustedState].
func Ensure(dir string) (int, error) {
	if !filepath.IsAbs(dir) || filepath.Clean(dir) != dir || dir == "/" {
		return -1, refusal.Errorf(refusal.InvalidPolicy, "cordon's state directory %q is not an absolute, clean path", dir)
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o700); err != nil {
		return -1, refusal.Errorf(refusal.UntrustedState, "cannot create the parent of cordon's state directory %s: %w", dir, err)
	}
	if err := unix.Mkdir(dir, 0o700); err != nil && err != unix.EEXIST {
		return -1, refusal.Errorf(refusal.UntrustedState, "cannot create cordon's state directory %s: %w", dir, err)
	}
	return Open(dir)
}

// Open opens the existing directory dir as [Ensure] does, without
// creating anything.
func Open(dir string) (int, error) {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		if err == unix.ELOOP || err == unix.ENOTDIR {
			return -1, refusal.Errorf(refusal.UntrustedState, "refusing cordon's state directory %s — it is a symlink or not a directory", dir)
		}
		return -1, refusal.Errorf(refusal.UntrustedState, "cannot open cordon's state directory %s: %w", dir, err)
	}
	if err := Check(fd, dir); err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

// Check refuses the open directory fd unless the caller owns it and group
// and others have no access.
func Check(fd int, name string) error {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return refusal.Errorf(refusal.UntrustedState, "cannot inspect %s: %w", name, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return refusal.Errorf(refusal.UntrustedState, "refusing %s — it is not a directory", name)
	}
	if int(st.Uid) != os.Geteuid() {
		return refusal.Errorf(refusal.UntrustedState, "refusing %s — it belongs to uid %d, not to this user (uid %d); another user could change what cordon trusts", name, st.Uid, os.Geteuid())
	}
	if st.Mode&0o077 != 0 {
		return refusal.Errorf(refusal.UntrustedState, "refusing %s — its mode is %#o; cordon's state must be 0700 (chmod 700 %s)", name, st.Mode&0o777, name)
	}
	return nil
}

// Sub ensures the subdirectory name (one component) of the directory fd
// as [Ensure] does, and returns a descriptor on it.
func Sub(fd int, parent, name string) (int, error) {
	if name == "" || name == "." || name == ".." || strings.ContainsRune(name, '/') {
		return -1, fmt.Errorf("userdir: %q is not one path component", name)
	}
	p := filepath.Join(parent, name)
	if err := unix.Mkdirat(fd, name, 0o700); err != nil && err != unix.EEXIST {
		return -1, refusal.Errorf(refusal.UntrustedState, "cannot create %s: %w", p, err)
	}
	sub, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, refusal.Errorf(refusal.UntrustedState, "refusing %s — it is a symlink or not a directory (%v)", p, err)
	}
	if err := Check(sub, p); err != nil {
		unix.Close(sub)
		return -1, err
	}
	return sub, nil
}

// EnsurePath ensures dir/name for each name in turn and returns the last
// one's path; every directory on the way is checked.
func EnsurePath(dir string, names ...string) (string, error) {
	fd, err := Ensure(dir)
	if err != nil {
		return "", err
	}
	p := dir
	for _, n := range names {
		sub, err := Sub(fd, p, n)
		unix.Close(fd)
		if err != nil {
			return "", err
		}
		fd, p = sub, filepath.Join(p, n)
	}
	unix.Close(fd)
	return p, nil
}

// Writable reports whether this user — or a command it runs, a sandboxed
// one without capabilities included — could write the file at path
// through another name of it (a hard link): it is this user's (who may
// change its mode), or its mode lets this user write; and its mount is
// not read-only. A file of a read-only store (a Nix store's hard links of
// one content) is not.
func Writable(path string) bool {
	var st unix.Stat_t
	if unix.Stat(path, &st) != nil {
		return true // cannot tell: as if it were
	}
	err := unix.Access(path, unix.W_OK)
	return err == nil || int(st.Uid) == os.Geteuid() && err != unix.EROFS
}
