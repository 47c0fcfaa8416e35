//go:build unix && !linux

package dirfd

import (
	"io/fs"
	"os"
)

// Entry is a directory entry and its type as the directory gives it.
type Entry struct {
	Name string
	Type fs.FileMode // fs.ModeDir, fs.ModeSymlink, 0 for a regular file, fs.ModeIrregular for anything else
}

// IsDir reports whether the entry is a directory (not a symlink to one).
func (e Entry) IsDir() bool { return e.Type == fs.ModeDir }

// ReadEntries lists the entries of the directory path, relative to dfd,
// but "." and "..", with their types; flags as for [ReadNames].
func ReadEntries(dfd int, path string, flags int) ([]Entry, error) {
	fd, err := openDir(dfd, path, flags)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	des, err := f.ReadDir(-1)
	entries := make([]Entry, 0, len(des))
	for _, d := range des {
		t := d.Type()
		switch {
		case t.IsDir():
			t = fs.ModeDir
		case t&fs.ModeSymlink != 0:
			t = fs.ModeSymlink
		case t.IsRegular():
			t = 0
		default:
			t = fs.ModeIrregular
		}
		entries = append(entries, Entry{Name: d.Name(), Type: t})
	}
	return entries, err
}
