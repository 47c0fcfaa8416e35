package mountinfo

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// A Table is the calling thread's table of mounts as read once
// (/proc/thread-self/mountinfo), to look up the places of several paths.
type Table struct{ text string }

// maxTable bounds the table read: some 100 000 mounts.
const maxTable = 16 << 20

// Read reads the calling thread's table of mounts.
func Read() (*Table, error) {
	f, err := os.Open("/proc/thread-self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var b strings.Builder
	buf := make([]byte, 64<<10)
	for b.Len() < maxTable {
		n, err := f.Read(buf)
		b.Write(buf[:n])
		if n == 0 || err != nil {
			break
		}
	}
	return &Table{text: b.String()}, nil
}

// Of returns the place of the directory at path (absolute, canonical: no
// symbolic link on the way), reading the table of mounts once for it.
func Of(path string) (Place, bool) {
	var t *Table
	return t.Of(path)
}

// Of returns the place of the directory at path (absolute, canonical):
// the mount the path leads into, by its ID (statx), looked up in the
// table, and the rest of the path below that mount's point, from the
// mount's root. A mount the table does not hold (made since it was read;
// a nil Table holds none) is looked up in the table read again. False
// where the place cannot be told: no mount ID from the kernel, an
// unreadable table, a mount's root that is no path (deleted, or of
// another namespace's file system).
func (t *Table) Of(path string) (Place, bool) {
	var st unix.Statx_t
	if unix.Statx(unix.AT_FDCWD, path, unix.AT_SYMLINK_NOFOLLOW, unix.STATX_MNT_ID, &st) != nil || st.Mask&unix.STATX_MNT_ID == 0 {
		return Place{}, false
	}
	line, ok := t.line(st.Mnt_id)
	if !ok {
		fresh, err := Read()
		if err != nil {
			return Place{}, false
		}
		if t != nil {
			*t = *fresh
		}
		if line, ok = fresh.line(st.Mnt_id); !ok {
			return Place{}, false
		}
	}
	dev, root, point := Field(line, 2), Unescape(Field(line, 3)), Unescape(Field(line, 4))
	rest, ok := below(path, point)
	if !ok || !strings.HasPrefix(root, "/") || strings.HasSuffix(root, "//deleted") {
		return Place{}, false
	}
	return Place{Dev: dev, Path: filepath.Join(root, rest)}, true
}

// line returns the table's line of the mount id.
func (t *Table) line(id uint64) (string, bool) {
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
