package bwrap

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"

	"golang.org/x/sys/unix"
)

// A table is a sandbox's mount table, held open for the watch of a run:
// its mountinfo, read as text, and its namespace, listed by mount ID
// where the kernel can list another namespace's mounts (listmount(2)
// with a namespace ID, Linux 6.11). A list is one system call of a few
// microseconds that formats nothing; the text, which a look at every
// mount needs, is read only when the list has changed. Both descriptors
// hold the namespace: it can be looked at after its last process ended.
type table struct {
	info *os.File // /proc/PID/mountinfo
	ns   *os.File // /proc/PID/ns/mnt; nil where the table is not listed
	nsID uint64
	once sync.Once
}

// A snapshot is a table's text, and the IDs of its mounts (none where
// the table is not listed) as they were when the text was read.
type snapshot struct {
	ids  []uint64
	text string
}

// openTable opens the mount table of process pid. Both descriptors are
// opened in one /proc/PID directory, which stands for that process: never
// another one that got its ID later.
func openTable(pid int) (*table, error) {
	dir, err := os.Open(fmt.Sprintf("/proc/%d", pid))
	if err != nil {
		return nil, err
	}
	defer dir.Close()
	fd, err := unix.Openat(int(dir.Fd()), "mountinfo", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: dir.Name() + "/mountinfo", Err: err}
	}
	t := &table{info: os.NewFile(uintptr(fd), dir.Name()+"/mountinfo")}
	t.openList(dir)
	return t, nil
}

// listed reports whether the table is looked at by its mount IDs.
func (t *table) listed() bool { return t.ns != nil }

// text reads the table's mountinfo into buf.
func (t *table) text(buf []byte) ([]byte, error) { return readTable(t.info, buf) }

// snapshot returns the table's text and, where it is listed, the IDs it
// has: a list before the text and one after, found equal (mount IDs are
// never used again, so nothing came or went in between).
func (t *table) snapshot() (*snapshot, error) {
	for range 100 {
		var before []uint64
		var err error
		if t.listed() {
			if before, err = t.list(nil); err != nil {
				return nil, err
			}
		}
		text, err := t.text(nil)
		if err != nil {
			return nil, err
		}
		if !t.listed() {
			return &snapshot{text: string(text)}, nil
		}
		after, err := t.list(nil)
		if err != nil {
			return nil, err
		}
		if slices.Equal(before, after) {
			return &snapshot{ids: after, text: string(text)}, nil
		}
	}
	return nil, errors.New("the mount table keeps changing")
}

// same reports whether the table is still the snapshot s.
func (t *table) same(s *snapshot) (bool, error) {
	if t.listed() {
		ids, err := t.list(nil)
		return err == nil && slices.Equal(ids, s.ids), err
	}
	text, err := t.text(nil)
	return err == nil && string(text) == s.text, err
}

// close releases the table, off the caller's path: the last reference to
// a namespace whose processes have ended takes its mounts down.
func (t *table) close() {
	t.once.Do(func() {
		go func() {
			t.info.Close()
			if t.ns != nil {
				t.ns.Close()
			}
		}()
	})
}
