//go:build linux

package roots

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"slices"
	"strings"

	"golang.org/x/sys/unix"
)

// beneath is how every path of a tree is opened: below its root, through
// no symlink at all (a link planted in a root is data, never a way out).
const beneath = unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS

// openBeneath opens rel below the directory dirfd without following any
// symlink on the way or at its end.
func openBeneath(dirfd int, rel string, flags int) (*os.File, error) {
	if rel == "" {
		rel = "."
	}
	fd, err := unix.Openat2(dirfd, rel, &unix.OpenHow{Flags: uint64(flags | unix.O_CLOEXEC | unix.O_NOFOLLOW), Resolve: beneath})
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: rel, Err: err}
	}
	return os.NewFile(uintptr(fd), rel), nil
}

// scan walks the tree below the open directory root — no symlink
// followed, no mount point crossed — and returns its manifest, every
// file's content hashed.
func scan(root *os.File, skip skipFunc) (Manifest, error) {
	var st unix.Stat_t
	if err := unix.Fstat(int(root.Fd()), &st); err != nil {
		return nil, err
	}
	var m Manifest
	err := walk(root, "", st.Dev, skip, func(rel string, dir *os.File, name string, st *unix.Stat_t) error {
		e := Entry{Path: rel, Mode: uint32(st.Mode & 0o7777)}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFDIR:
			e.Type = "dir"
		case unix.S_IFLNK:
			e.Type = "symlink"
			buf := make([]byte, unix.PathMax)
			n, err := unix.Readlinkat(int(dir.Fd()), name, buf)
			if err != nil {
				return &os.PathError{Op: "readlink", Path: rel, Err: err}
			}
			e.Target = string(buf[:n])
			e.Mode = 0o777
		case unix.S_IFREG:
			e.Type, e.Size = "file", st.Size
			f, err := openRegular(int(dir.Fd()), name)
			if err != nil {
				return err
			}
			h := sha256.New()
			n, err := io.Copy(h, f)
			f.Close()
			if err != nil {
				return &os.PathError{Op: "read", Path: rel, Err: err}
			}
			e.Size, e.Digest = n, "sha256:"+hex.EncodeToString(h.Sum(nil))
		default:
			e.Type = "other" // a FIFO, socket or device: recorded, never copied
		}
		m = append(m, e)
		return nil
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(m, func(a, b Entry) int { return strings.Compare(a.Path, b.Path) })
	return m, nil
}

// visitFunc is called for every entry of a walk (not the root): its
// path, its directory (open) and name there, and its lstat.
type visitFunc func(rel string, dir *os.File, name string, st *unix.Stat_t) error

// walk calls visit for every entry below dir (rel is dir's path), depth
// first, a directory before what it holds. A directory on another file
// system (a mount point) is visited but not entered.
func walk(dir *os.File, rel string, dev uint64, skip skipFunc, visit visitFunc) error {
	names, err := dir.Readdirnames(-1)
	if err != nil {
		return &os.PathError{Op: "readdir", Path: rel, Err: err}
	}
	if _, err := dir.Seek(0, io.SeekStart); err != nil {
		return err
	}
	slices.Sort(names)
	for _, name := range names {
		p := path.Join(rel, name)
		var st unix.Stat_t
		if err := unix.Fstatat(int(dir.Fd()), name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			if errors.Is(err, unix.ENOENT) {
				continue // gone meanwhile
			}
			return &os.PathError{Op: "lstat", Path: p, Err: err}
		}
		isDir := st.Mode&unix.S_IFMT == unix.S_IFDIR
		if skip != nil && skip(p, isDir) {
			continue
		}
		if err := visit(p, dir, name, &st); err != nil {
			return err
		}
		if !isDir || st.Dev != dev {
			continue
		}
		sub, err := openBeneath(int(dir.Fd()), name, unix.O_RDONLY|unix.O_DIRECTORY)
		if err != nil {
			return err
		}
		err = walk(sub, p, dev, skip, visit)
		sub.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

// openRegular opens the regular file rel below dirfd for reading (no
// symlink followed), without blocking: a FIFO swapped in for a file is
// refused, never waited on.
func openRegular(dirfd int, rel string) (*os.File, error) {
	f, err := openBeneath(dirfd, rel, unix.O_RDONLY|unix.O_NONBLOCK)
	if err != nil {
		return nil, err
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		f.Close()
		return nil, &os.PathError{Op: "open", Path: rel, Err: errors.New("not a regular file (it changed while it was read)")}
	}
	return f, nil
}

// readBeneath reads the regular file rel below dirfd (no symlink
// followed), at most max bytes; more is an error.
func readBeneath(dirfd int, rel string, max int64) ([]byte, error) {
	f, err := openRegular(dirfd, rel)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > max {
		return nil, fmt.Errorf("%s is larger than %d bytes", rel, max)
	}
	return data, nil
}
