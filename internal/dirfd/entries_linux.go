package dirfd

import (
	"encoding/binary"
	"io/fs"

	"golang.org/x/sys/unix"
)

// ReadEntries lists the entries of the directory path, relative to dfd,
// but "." and "..", with their types; flags as for [ReadNames]. An entry
// whose type the file system does not give (DT_UNKNOWN) is looked at
// (fstatat, not following a symlink).
func ReadEntries(dfd int, path string, flags int) ([]Entry, error) {
	var entries []Entry
	err := eachChunk(dfd, path, flags, nil, func(fd int, b []byte) bool {
		// struct linux_dirent64: d_ino u64, d_off s64, d_reclen u16,
		// d_type u8, d_name NUL-terminated.
		for len(b) >= 19 {
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
		return false
	})
	return entries, err
}

// typeOf is the type of the entry name of the directory fd whose d_type
// is t: on Linux d_type is the file's S_IFMT bits shifted right by 12, so
// a DT_UNKNOWN is looked up (fstatat, no link followed) and read the same
// way.
func typeOf(fd int, name string, t byte) fs.FileMode {
	if t == unix.DT_UNKNOWN {
		var st unix.Stat_t
		if unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW) != nil {
			return fs.ModeIrregular
		}
		t = byte(st.Mode & unix.S_IFMT >> 12)
	}
	switch t {
	case unix.DT_DIR:
		return fs.ModeDir
	case unix.DT_LNK:
		return fs.ModeSymlink
	case unix.DT_REG:
		return 0
	}
	return fs.ModeIrregular
}
