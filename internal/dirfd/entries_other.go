//go:build unix && !linux

package dirfd

import (
	"io/fs"
	"os"

	"golang.org/x/sys/unix"
)

// ReadEntries lists the entries of the directory path, relative to dfd,
// but "." and "..", with their types; flags as for [ReadNames].
func ReadEntries(dfd int, path string, flags int) ([]Entry, error) {
	fd, err := unix.Openat(dfd, path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC|flags, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
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
