//go:build unix

package dirfd

import (
	"errors"
	"io/fs"
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// The readers below take a bare descriptor, not an *os.File: making one
// asks the descriptor's flags and registers it with the runtime's poller
// (and a close undoes both), several system calls more than the reading
// itself on the paths every run of a sandbox takes.

// direntBuf is the buffer one read of a directory fills.
const direntBuf = 4096

// dirents holds the buffers of directory reads (*[direntBuf]byte): taken
// once a directory is open, given back when it has been read. A run of a
// sandbox lists a dozen directories, most of them absent.
var dirents = sync.Pool{New: func() any { return new([direntBuf]byte) }}

// Entry is a directory entry and its type as the directory gives it.
type Entry struct {
	Name string
	Type fs.FileMode // fs.ModeDir, fs.ModeSymlink, 0 for a regular file, fs.ModeIrregular for anything else
}

// IsDir reports whether the entry is a directory (not a symlink to one).
func (e Entry) IsDir() bool { return e.Type == fs.ModeDir }

// eachChunk opens the directory path, relative to dfd (unix.AT_FDCWD: the
// working directory), with flags added to O_RDONLY|O_DIRECTORY|O_CLOEXEC
// (unix.O_NOFOLLOW: not through a symlink at the last component), and
// hands each chunk of dirents getdents(2) fills into buf to each, with the
// open descriptor, until the directory ends or each reports it is done. A
// nil buf is one of dirents: each must not keep the chunk.
func eachChunk(dfd int, path string, flags int, buf []byte, each func(fd int, chunk []byte) (done bool)) error {
	fd, err := open(dfd, path, unix.O_DIRECTORY|flags)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if buf == nil {
		b := dirents.Get().(*[direntBuf]byte)
		defer dirents.Put(b)
		buf = b[:]
	}
	for {
		n, err := unix.ReadDirent(fd, buf)
		switch {
		case err == unix.EINTR:
			continue
		case err != nil:
			return &os.PathError{Op: "readdirent", Path: path, Err: err}
		case n <= 0:
			return nil
		}
		if each(fd, buf[:n]) {
			return nil
		}
	}
}

// open opens path, relative to dfd, read-only and close-on-exec with
// flags added, again when a signal interrupts it.
func open(dfd int, path string, flags int) (int, error) {
	for {
		fd, err := unix.Openat(dfd, path, unix.O_RDONLY|unix.O_CLOEXEC|flags, 0)
		if err != unix.EINTR {
			if err != nil {
				return -1, &os.PathError{Op: "open", Path: path, Err: err}
			}
			return fd, nil
		}
	}
}

// ReadNames lists the entries of the directory path, relative to dfd, but
// "." and "..", in the order the file system gives them; flags are added
// to the open's, as for eachChunk.
func ReadNames(dfd int, path string, flags int) ([]string, error) {
	var names []string
	err := eachChunk(dfd, path, flags, nil, func(_ int, chunk []byte) bool {
		_, _, names = unix.ParseDirent(chunk, -1, names)
		return false
	})
	return names, err
}

// IsEmpty reports whether the directory path, relative to dfd, has no
// entry but "." and ".."; flags as for [ReadNames].
func IsEmpty(dfd int, path string, flags int) (bool, error) {
	var buf [1024]byte
	empty := true
	err := eachChunk(dfd, path, flags, buf[:], func(_ int, chunk []byte) bool {
		_, count, _ := unix.ParseDirent(chunk, 1, nil) // "." and ".." are not counted
		empty = count == 0
		return !empty
	})
	return empty && err == nil, err
}

// ErrNotRegular is a file ReadSmall will not read: not a regular file.
var ErrNotRegular = errors.New("not a regular file")

// ReadSmall reads up to limit bytes of the regular file path, relative to
// dfd; flags are added to O_RDONLY|O_NONBLOCK|O_CLOEXEC (O_NONBLOCK: a
// FIFO planted there does not block the open). A file that is not regular
// is ErrNotRegular; of a longer one, the first limit bytes are returned.
func ReadSmall(dfd int, path string, flags int, limit int) ([]byte, error) {
	fd, err := open(dfd, path, unix.O_NONBLOCK|flags)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, &os.PathError{Op: "stat", Path: path, Err: err}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, &os.PathError{Op: "read", Path: path, Err: ErrNotRegular}
	}
	// One read takes all of a file no longer than its size said (one byte
	// more than that, to see the end); a file still growing takes more.
	size := int(min(max(st.Size, 0), int64(limit)))
	buf := make([]byte, 0, min(size+1, limit))
	for len(buf) < limit {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := unix.Read(fd, buf[len(buf):min(cap(buf), limit)])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, &os.PathError{Op: "read", Path: path, Err: err}
		}
		if n == 0 {
			break
		}
		buf = buf[:len(buf)+n]
		if int64(len(buf)) == st.Size && len(buf) < cap(buf) {
			break // a short read at the size fstat gave: the end
		}
	}
	return buf, nil
}
