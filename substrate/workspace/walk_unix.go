//go:build unix

package workspace

import (
	"strings"

	"golang.org/x/sys/unix"
)

// openWalk opens the relative path p beneath dirfd one component at a time
// with O_NOFOLLOW, so that no symlink is followed: the portable equivalent
// of openat2 with RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS for a path without "..".
// A trailing "/" needs a directory, as in the kernel.
func openWalk(dirfd int, p string, flags int, mode uint32) (int, error) {
	p, dir := trimSlash(p)
	if dir {
		if flags&unix.O_CREAT != 0 {
			return -1, unix.EISDIR
		}
		flags |= unix.O_DIRECTORY
	}
	parent, last, err := walkParent(dirfd, p)
	if err != nil {
		return -1, err
	}
	fd, err := unix.Openat(parent, last, flags|unix.O_NOFOLLOW|unix.O_CLOEXEC, mode)
	if err == unix.ENOTDIR && isSymlink(parent, last) {
		err = unix.ELOOP // O_DIRECTORY|O_NOFOLLOW on a symlink says ENOTDIR on Linux
	}
	if parent != dirfd {
		unix.Close(parent)
	}
	return fd, err
}

func isSymlink(dirfd int, name string) bool {
	var st unix.Stat_t
	return unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && uint32(st.Mode)&unix.S_IFMT == unix.S_IFLNK
}

func statWalk(dirfd int, p string, st *unix.Stat_t) error {
	p, dir := trimSlash(p)
	parent, last, err := walkParent(dirfd, p)
	if err != nil {
		return err
	}
	err = unix.Fstatat(parent, last, st, unix.AT_SYMLINK_NOFOLLOW)
	if parent != dirfd {
		unix.Close(parent)
	}
	switch {
	case err != nil:
		return err
	case uint32(st.Mode)&unix.S_IFMT == unix.S_IFLNK:
		return unix.ELOOP
	case dir && uint32(st.Mode)&unix.S_IFMT != unix.S_IFDIR:
		return unix.ENOTDIR
	}
	return nil
}

// trimSlash removes p's trailing slashes and reports whether it had any.
func trimSlash(p string) (string, bool) {
	t := strings.TrimRight(p, "/")
	if t == "" {
		return p, false
	}
	return t, len(t) < len(p)
}

// walkParent opens the directory holding p's last component. The returned
// descriptor is dirfd itself when p has one component.
func walkParent(dirfd int, p string) (int, string, error) {
	comps := strings.Split(p, "/")
	fd := dirfd
	for _, c := range comps[:len(comps)-1] {
		if c == ".." {
			return -1, "", unix.EXDEV
		}
		next, err := unix.Openat(fd, c, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err == unix.ENOTDIR && isSymlink(fd, c) {
			err = unix.ELOOP
		}
		if fd != dirfd {
			unix.Close(fd)
		}
		if err != nil {
			return -1, "", err
		}
		fd = next
	}
	last := comps[len(comps)-1]
	if last == ".." {
		if fd != dirfd {
			unix.Close(fd)
		}
		return -1, "", unix.EXDEV
	}
	return fd, last, nil
}
