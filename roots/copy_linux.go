//go:build linux

package roots

import (
	"fmt"
	"io"
	"os"
	"path"
	"slices"

	"golang.org/x/sys/unix"
)

// copyTree copies the tree at src into the empty directory dst: files
// (reflinked where the file system can, else copied), directories and
// symlinks (as links, never followed), with their modes and times. FIFOs,
// sockets and devices are left out, and so is what skip names. It returns
// how files were copied: "reflink", "copy", or "reflink and copy".
func copyTree(src, dst string, skip skipFunc) (string, error) {
	sf, err := os.OpenFile(src, os.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW, 0)
	if err != nil {
		return "", err
	}
	defer sf.Close()
	df, err := os.OpenFile(dst, os.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW, 0)
	if err != nil {
		return "", err
	}
	defer df.Close()
	var st unix.Stat_t
	if err := unix.Fstat(int(sf.Fd()), &st); err != nil {
		return "", err
	}
	c := &copier{dst: df}
	defer c.closeParent()
	if err := walk(sf, "", st.Dev, skip, c.visit); err != nil {
		return "", err
	}
	c.closeParent()
	// Directories get their modes and times last, deepest first: a
	// read-only directory is filled before it becomes read-only.
	slices.Reverse(c.dirs)
	for _, d := range c.dirs {
		if err := c.finish(d.rel, d.mode, d.times); err != nil {
			return "", err
		}
	}
	if err := unix.Fchmod(int(df.Fd()), uint32(st.Mode&0o7777)|0o700); err != nil {
		return "", err
	}
	switch {
	case c.reflinked && c.copied:
		return "reflink and copy", nil
	case c.reflinked:
		return "reflink", nil
	}
	return "copy", nil
}

type dirInfo struct {
	rel   string
	mode  uint32
	times [2]unix.Timespec
}

type copier struct {
	dst               *os.File
	parentRel         string
	parent            *os.File
	dirs              []dirInfo
	reflinked, copied bool
	noReflink         bool // a clone failed: the file system cannot
}

// parentOf opens the destination directory of rel's parent (the last one
// is kept: a walk visits a directory's entries one after another).
func (c *copier) parentOf(rel string) (*os.File, error) {
	dir := path.Dir(rel)
	if dir == "." {
		return c.dst, nil
	}
	if c.parent != nil && c.parentRel == dir {
		return c.parent, nil
	}
	c.closeParent()
	f, err := openBeneath(int(c.dst.Fd()), dir, unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		return nil, err
	}
	c.parent, c.parentRel = f, dir
	return f, nil
}

func (c *copier) closeParent() {
	if c.parent != nil {
		c.parent.Close()
		c.parent, c.parentRel = nil, ""
	}
}

func (c *copier) visit(rel string, dir *os.File, name string, st *unix.Stat_t) error {
	pd, err := c.parentOf(rel)
	if err != nil {
		return err
	}
	times := [2]unix.Timespec{st.Atim, st.Mtim}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		if err := unix.Mkdirat(int(pd.Fd()), name, 0o700); err != nil {
			return &os.PathError{Op: "mkdir", Path: rel, Err: err}
		}
		c.dirs = append(c.dirs, dirInfo{rel: rel, mode: uint32(st.Mode & 0o7777), times: times})
	case unix.S_IFLNK:
		buf := make([]byte, unix.PathMax)
		n, err := unix.Readlinkat(int(dir.Fd()), name, buf)
		if err != nil {
			return &os.PathError{Op: "readlink", Path: rel, Err: err}
		}
		if err := unix.Symlinkat(string(buf[:n]), int(pd.Fd()), name); err != nil {
			return &os.PathError{Op: "symlink", Path: rel, Err: err}
		}
		unix.UtimesNanoAt(int(pd.Fd()), name, times[:], unix.AT_SYMLINK_NOFOLLOW)
	case unix.S_IFREG:
		return c.file(rel, dir, name, pd, st, times)
	}
	return nil // FIFOs, sockets, devices: not copied
}

func (c *copier) file(rel string, dir *os.File, name string, pd *os.File, st *unix.Stat_t, times [2]unix.Timespec) error {
	in, err := openRegular(int(dir.Fd()), name)
	if err != nil {
		return err
	}
	defer in.Close()
	fd, err := unix.Openat(int(pd.Fd()), name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return &os.PathError{Op: "create", Path: rel, Err: err}
	}
	out := os.NewFile(uintptr(fd), rel)
	defer out.Close()
	cloned := false
	if !c.noReflink && st.Size > 0 {
		if err := unix.IoctlFileClone(fd, int(in.Fd())); err == nil {
			cloned, c.reflinked = true, true
		} else {
			// EOPNOTSUPP, EXDEV, EINVAL: this file system does not share
			// extents; copy (copy_file_range where it can) from now on.
			c.noReflink = true
		}
	}
	if !cloned {
		if _, err := io.Copy(out, in); err != nil {
			return &os.PathError{Op: "copy", Path: rel, Err: err}
		}
		c.copied = c.copied || st.Size > 0
	}
	if err := unix.Fchmod(fd, uint32(st.Mode&0o7777)); err != nil {
		return &os.PathError{Op: "chmod", Path: rel, Err: err}
	}
	if err := unix.UtimesNanoAt(int(pd.Fd()), name, times[:], unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return &os.PathError{Op: "utimes", Path: rel, Err: err}
	}
	return out.Close()
}

// finish gives the directory rel its mode and times.
func (c *copier) finish(rel string, mode uint32, times [2]unix.Timespec) error {
	f, err := openBeneath(int(c.dst.Fd()), rel, unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := unix.Fchmod(int(f.Fd()), mode); err != nil {
		return &os.PathError{Op: "chmod", Path: rel, Err: err}
	}
	if err := unix.UtimesNanoAt(int(c.dst.Fd()), rel, times[:], unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return fmt.Errorf("utimes %s: %w", rel, err)
	}
	return nil
}
