package bwrap

import (
	"fmt"
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// A table is a sandbox's mount table, held open for the watch of a run:
// its mountinfo, read as text at every look. The descriptor holds the
// namespace: the table can be read after the namespace's last process
// ended.
//
// The text, not a list of mount IDs (listmount(2)), nor the namespace's
// mount events (fanotify): a mount point the host renames aside (an
// editor's save that keeps a backup, `mv .git`) takes its mount with it,
// under the same ID and with no event of the namespace, and the path
// left behind is the workspace's, writable. Only the mount points, as
// the text has them, show it.
type table struct {
	info *os.File // /proc/PID/mountinfo
	proc *os.File // /proc/PID: the waits of [events] open its table again, and its root
	once sync.Once
}

// openTable opens the mount table of process pid, in the /proc/PID
// directory that stands for that process: never another one that got its
// ID later.
func openTable(pid int) (*table, error) {
	dir, err := os.Open(fmt.Sprintf("/proc/%d", pid))
	if err != nil {
		return nil, err
	}
	fd, err := unix.Openat(int(dir.Fd()), "mountinfo", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		dir.Close()
		return nil, &os.PathError{Op: "open", Path: dir.Name() + "/mountinfo", Err: err}
	}
	return &table{info: os.NewFile(uintptr(fd), dir.Name()+"/mountinfo"), proc: dir}, nil
}

// text reads the table into buf.
func (t *table) text(buf []byte) ([]byte, error) { return readTable(t.info, buf) }

// same reports whether the table is still base.
func (t *table) same(base string) (bool, error) {
	text, err := t.text(nil)
	return err == nil && string(text) == base, err
}

// close releases the table, off the caller's path: the last reference to
// a namespace whose processes have ended takes its mounts down.
func (t *table) close() {
	t.once.Do(func() {
		t.proc.Close()
		go t.info.Close()
	})
}
