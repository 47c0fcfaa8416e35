package dirfd

import (
	"encoding/binary"
	"io/fs"
	"os"

	"golang.org/x/sys/unix"
)

// Entry is a directory entry and its type as the directory gives it.
type Entry struct {
	Name string
	Type fs.FileMode // fs.ModeDir, fs.ModeSymlink, 0 for a regular file, fs.ModeIrregular for anything else
}

// IsDir reports whether the entry is a directory (not a symlink to one).
func (e Entry) IsDir() bool { return e.Type == fs.ModeDir }

// ReadEntries lists the entries of the directory path, relative to dfd,
// but "." and "..", with their types; flags as for [ReadNames]. An entry
// whose type the file system does not give (DT_UNKNOWN) is looked at
// (fstatat, not following a symlink).
func ReadEntries(dfd int, path string, flags int) ([]Entry, error) {
	fd, err := openDir(dfd, path, flags)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	var entries []Entry
	buf := make([]byte, direntBuf)
	for {
		n, err := readDirent(fd, buf)
		if err != nil {
			return entries, &os.PathError{Op: "readdirent", Path: path, Err: err}
		}
		if n <= 0 {
			return entries, nil
		}
		// struct linux_dirent64: d_ino u64, d_off s64, d_reclen u16,
		// d_type u8, d_name NUL-terminated.
		for b := buf[:n]; len(b) >= 19; {
			reclen := int(binary.NativeEndian.Uint16(b[16:18]))
			if reclen < 19 || reclen > len(b) {
				break
			}
			rec := b[:reclen]
			b = b[reclen:]
			if binary.NativeEndian.Uint64(rec[0:8]) == 0 {
				continue // a removed entry
			}
			name := rec[19:]
			for i, c := range name {
				if c == 0 {
					name = name[:i]
					break
				}
			}
			if s := string(name); s != "." && s != ".." {
				entries = append(entries, Entry{Name: s, Type: typeOf(fd, s, rec[18])})
			}
		}
	}
}

func typeOf(fd int, name string, t byte) fs.FileMode {
	switch t {
	case unix.DT_DIR:
		return fs.ModeDir
	case unix.DT_LNK:
		return fs.ModeSymlink
	case unix.DT_REG:
		return 0
	case unix.DT_UNKNOWN:
		var st unix.Stat_t
		if unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil {
			switch st.Mode & unix.S_IFMT {
			case unix.S_IFDIR:
				return fs.ModeDir
			case unix.S_IFLNK:
				return fs.ModeSymlink
			case unix.S_IFREG:
				return 0
			}
		}
	}
	return fs.ModeIrregular
}
