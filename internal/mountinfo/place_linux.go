package mountinfo

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// A Table is the calling thread's table of mounts as read once
// (/proc/thread-self/mountinfo): where the kernel has no statmount(2)
// (before 6.8), places are looked up in it, and one table serves every
// place one look asks.
type Table struct{ text string }

// maxTable bounds the table read: some 100 000 mounts.
const maxTable = 16 << 20

// Read reads the calling thread's table of mounts.
func Read() (*Table, error) {
	fd, err := unix.Open("/proc/thread-self/mountinfo", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: "/proc/thread-self/mountinfo", Err: err}
	}
	defer unix.Close(fd)
	buf := make([]byte, 0, 16<<10)
	for {
		if len(buf) == cap(buf) {
			if len(buf) > maxTable {
				return nil, fmt.Errorf("the table of mounts is over %d bytes", maxTable)
			}
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := unix.Read(fd, buf[len(buf):cap(buf)])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, &os.PathError{Op: "read", Path: "/proc/thread-self/mountinfo", Err: err}
		}
		if n == 0 {
			return &Table{text: string(buf)}, nil
		}
		buf = buf[:len(buf)+n]
	}
}

// Of returns the place of the directory at path, as [Table.OfFD] of the
// directory opened (no table read ahead).
func Of(path string) (Place, error) {
	var t *Table
	return t.Of(path)
}

// Of is [Table.OfFD] of the directory at path, opened (O_PATH) without
// following a symbolic link at its end.
func (t *Table) Of(path string) (Place, error) {
	fd, err := unix.Open(path, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return Place{}, &os.PathError{Op: "open", Path: path, Err: err}
	}
	defer unix.Close(fd)
	return t.OfFD(fd)
}

// ErrUnsupported: the kernel cannot tell which mount a file is on (no
// STATX_MNT_ID: before 5.8).
var ErrUnsupported = errors.New("the kernel does not tell a file's mount")

// ErrNoPlace: the directory has no place — deleted, or reached through a
// mount whose root is deleted — and so lies inside nothing.
var ErrNoPlace = errors.New("the directory has no place in its file system")

// OfFD returns the place of the directory open as fd: the mount it is on
// (statx), that mount's root in its file system and its point
// (statmount(2) where the kernel has it, else the table, read again for
// a mount made since it was read; a nil Table holds none), and the path
// of fd (its link in /proc) below that point. Told from the directory
// held, not from a path: a directory on the way to it swapped for a
// symbolic link meanwhile does not move it.
func (t *Table) OfFD(fd int) (Place, error) {
	var st unix.Statx_t
	if err := unix.Statx(fd, "", unix.AT_EMPTY_PATH, unix.STATX_MNT_ID|unix.STATX_MNT_ID_UNIQUE, &st); err != nil {
		return Place{}, fmt.Errorf("statx: %v", err)
	}
	var dev, root, point string
	if st.Mask&unix.STATX_MNT_ID_UNIQUE != 0 && !noStatmount.Load() && !byTableOnly {
		var err error
		dev, root, point, err = statmount(st.Mnt_id)
		if errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EPERM) {
			// Missing, or refused by a seccomp filter (a container
			// runtime's default one refuses calls it does not know so):
			// the table, from now on.
			noStatmount.Store(true)
			return t.OfFD(fd)
		}
		if err != nil {
			return Place{}, fmt.Errorf("statmount of mount %d: %v", st.Mnt_id, err)
		}
	} else {
		// The table lists the mounts by the IDs of STATX_MNT_ID, which
		// a kernel that has the unique ones gives only when asked alone.
		if st.Mask&unix.STATX_MNT_ID == 0 {
			if err := unix.Statx(fd, "", unix.AT_EMPTY_PATH, unix.STATX_MNT_ID, &st); err != nil {
				return Place{}, fmt.Errorf("statx: %v", err)
			}
			if st.Mask&unix.STATX_MNT_ID == 0 {
				return Place{}, ErrUnsupported
			}
		}
		line, err := t.line(st.Mnt_id)
		if err != nil {
			return Place{}, err
		}
		dev, root, point = Field(line, 2), Unescape(Field(line, 3)), Unescape(Field(line, 4))
	}
	if strings.HasSuffix(root, "//deleted") || !strings.HasPrefix(root, "/") {
		return Place{}, ErrNoPlace
	}
	// The errors of /proc's machinery are never "no such file" (%v):
	// that would read as a path that leads nowhere.
	path, err := os.Readlink("/proc/thread-self/fd/" + strconv.Itoa(fd))
	if err != nil {
		return Place{}, fmt.Errorf("cannot read the path of descriptor %d: %v", fd, err)
	}
	if !strings.HasPrefix(path, "/") {
		return Place{}, fmt.Errorf("descriptor %d has no path from this root: %q", fd, path)
	}
	if strings.HasSuffix(path, " (deleted)") {
		// A name may end so too: the directory is deleted only when it
		// is unlinked; else the path must lead to the directory itself.
		var held, named unix.Stat_t
		if err := unix.Fstat(fd, &held); err != nil {
			return Place{}, fmt.Errorf("fstat: %v", err)
		}
		if held.Nlink == 0 {
			return Place{}, ErrNoPlace
		}
		if err := unix.Lstat(path, &named); err != nil || named.Dev != held.Dev || named.Ino != held.Ino {
			return Place{}, fmt.Errorf("%s: cannot tell whether it is deleted", path)
		}
	}
	rest, ok := below(path, point)
	if !ok {
		return Place{}, fmt.Errorf("%s is not below the point %s of the mount it is on", path, point)
	}
	return Place{Dev: dev, Path: filepath.Join(root, rest)}, nil
}

// noStatmount is set once statmount(2) is found missing (ENOSYS) or
// refused (EPERM).
var noStatmount atomic.Bool

// byTableOnly, set by tests alone, has places told by the table.
var byTableOnly bool

// The fields of struct statmount (linux/mount.h) read here, by offset,
// the strings after the fixed part; and the request mask.
const (
	smMask       = 8
	smDevMajor   = 16
	smDevMinor   = 20
	smMntRoot    = 104
	smMntPoint   = 108
	smStrings    = 512
	smSBBasic    = 0x01
	smMntRootReq = 0x08
	smMntPtReq   = 0x10
	mntIDReqSize = 24 // MNT_ID_REQ_SIZE_VER0
)

// statmount returns the device ("MAJOR:MINOR" of its file system), root
// and point of the mount whose unique ID is id, in the calling thread's
// mount namespace.
func statmount(id uint64) (dev, root, point string, err error) {
	var req [mntIDReqSize]byte
	binary.NativeEndian.PutUint32(req[0:], mntIDReqSize)
	binary.NativeEndian.PutUint64(req[8:], id)
	binary.NativeEndian.PutUint64(req[16:], smSBBasic|smMntRootReq|smMntPtReq)
	for size := 4096; size <= 1<<24; size *= 4 {
		buf := make([]byte, size)
		_, _, errno := unix.Syscall6(unix.SYS_STATMOUNT, uintptr(unsafe.Pointer(&req[0])), uintptr(unsafe.Pointer(&buf[0])), uintptr(size), 0, 0, 0)
		if errno == unix.EOVERFLOW {
			continue
		}
		if errno != 0 {
			return "", "", "", errno
		}
		mask := binary.NativeEndian.Uint64(buf[smMask:])
		if mask&(smSBBasic|smMntRootReq|smMntPtReq) != smSBBasic|smMntRootReq|smMntPtReq {
			return "", "", "", fmt.Errorf("statmount gave mask %#x", mask)
		}
		str := func(off int) (string, error) {
			o := smStrings + int(binary.NativeEndian.Uint32(buf[off:]))
			if o >= len(buf) {
				return "", errors.New("statmount: a string beyond its buffer")
			}
			s, _, ok := strings.Cut(string(buf[o:]), "\x00")
			if !ok {
				return "", errors.New("statmount: a string without its end")
			}
			return s, nil
		}
		if root, err = str(smMntRoot); err == nil {
			point, err = str(smMntPoint)
		}
		dev = strconv.FormatUint(uint64(binary.NativeEndian.Uint32(buf[smDevMajor:])), 10) + ":" +
			strconv.FormatUint(uint64(binary.NativeEndian.Uint32(buf[smDevMinor:])), 10)
		return dev, root, point, err
	}
	return "", "", "", unix.EOVERFLOW
}

// line returns the table's line of the mount id, reading the table (again)
// when it does not hold it.
func (t *Table) line(id uint64) (string, error) {
	if l, ok := t.find(id); ok {
		return l, nil
	}
	fresh, err := Read()
	if err != nil {
		return "", fmt.Errorf("cannot read the table of mounts: %v", err)
	}
	if t != nil {
		*t = *fresh
	}
	if l, ok := fresh.find(id); ok {
		return l, nil
	}
	return "", fmt.Errorf("mount %d is not in the table of mounts", id)
}

func (t *Table) find(id uint64) (string, bool) {
	if t == nil {
		return "", false
	}
	prefix := strconv.FormatUint(id, 10) + " "
	for rest := t.text; rest != ""; {
		line, next, _ := strings.Cut(rest, "\n")
		if strings.HasPrefix(line, prefix) {
			return line, true
		}
		rest = next
	}
	return "", false
}

// PlaceOf returns the place of the directory at path — a path with no
// symbolic link in it, as [filepath.EvalSymlinks] leaves one — by the
// mount statx(2) finds there and that mount's line in t (the table is
// read again for a mount made since): one system call where [Table.Of]
// makes three.
func (t *Table) PlaceOf(path string) (Place, error) {
	var st unix.Statx_t
	if err := unix.Statx(unix.AT_FDCWD, path, unix.AT_SYMLINK_NOFOLLOW|unix.AT_NO_AUTOMOUNT, unix.STATX_MNT_ID, &st); err != nil {
		return Place{}, &os.PathError{Op: "statx", Path: path, Err: err}
	}
	if st.Mask&unix.STATX_MNT_ID == 0 {
		return Place{}, ErrUnsupported
	}
	line, err := t.line(st.Mnt_id)
	if err != nil {
		return Place{}, err
	}
	dev, root, point := Field(line, 2), Unescape(Field(line, 3)), Unescape(Field(line, 4))
	if strings.HasSuffix(root, "//deleted") || !strings.HasPrefix(root, "/") {
		return Place{}, ErrNoPlace
	}
	rest, ok := below(path, point)
	if !ok {
		return Place{}, fmt.Errorf("%s is not below the point %s of the mount it is on", path, point)
	}
	return Place{Dev: dev, Path: filepath.Join(root, rest)}, nil
}

// A Mount is a mount of a table: where it is mounted, and the place of
// its root.
type Mount struct {
	Point string
	Root  Place
}

// Below returns the mounts of t mounted strictly below the directory dir
// (a path of this mount namespace), but those whose root is deleted.
func (t *Table) Below(dir string) []Mount {
	var out []Mount
	for rest := t.text; rest != ""; {
		line, next, _ := strings.Cut(rest, "\n")
		rest = next
		point := Unescape(Field(line, 4))
		if r, ok := below(point, dir); !ok || r == "" {
			continue
		}
		root := Unescape(Field(line, 3))
		if strings.HasSuffix(root, "//deleted") || !strings.HasPrefix(root, "/") {
			continue
		}
		out = append(out, Mount{Point: point, Root: Place{Dev: Field(line, 2), Path: root}})
	}
	return out
}

// below returns the part of path below the mount point point ("" at it).
func below(path, point string) (string, bool) {
	if path == point {
		return "", true
	}
	if rest, ok := strings.CutPrefix(path, strings.TrimSuffix(point, "/")+"/"); ok {
		return rest, true
	}
	return "", false
}
