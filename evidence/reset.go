package evidence

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cordon-run/cordon/internal/dirfd"
	"github.com/cordon-run/cordon/internal/userdir"
	"github.com/cordon-run/cordon/refusal"
)

// maxAside bounds the names [Reset] tries for what it moves aside when
// another reset took the same second's name.
const maxAside = 100

// Moved is what [Reset] moved aside.
type Moved struct {
	// Dir is where the log directory is now,
	// "<log directory>.reset-<UTC time>"; "" when it was not moved (it
	// was missing or empty).
	Dir string `json:"moved_to,omitempty"`
	// Head is where the head and index file is now, in the trusted
	// directory; "" when there was none.
	Head string `json:"head_moved_to,omitempty"`
	// Log is the ID the head named; "" when there was no head, or it
	// named none.
	Log string `json:"log,omitempty"`
	// Receipts is the number of receipt files the log directory held.
	Receipts int `json:"receipts"`
}

// Reset moves the log in the directory rel below root (walked as
// [OpenLogAt] walks it), and its head in trustedDir, aside, so that the
// next append begins a new log with a new ID: the way out of a log that
// is refused (one copied or moved here, one tampered with, one of an
// earlier format). Nothing is deleted: the log directory is renamed to
// "<name>.reset-<UTC time>" beside it (in cordon's harness directory,
// where it stays harness state), and the head and index file to
// "head.json.reset-<UTC time>" in the trusted directory. Reset holds the
// writers' lock; a [Log] opened before it refuses to append afterwards.
//
// With neither a head nor a log directory that holds anything, there is
// nothing to reset, and the error matches [refusal.NotFound]. A log
// directory that is not a directory, or a symlink on the way to it, is
// refused with [refusal.UntrustedState].
func Reset(root, rel, trustedDir string) (Moved, error) {
	var m Moved
	dir := filepath.Join(root, rel)
	if err := checkRootRel(root, rel); err != nil {
		return m, &Error{Op: "reset", Path: dir, Err: err}
	}
	tfd, err := userdir.Ensure(trustedDir)
	if err != nil {
		return m, &Error{Op: "reset", Path: trustedDir, Err: err}
	}
	defer unix.Close(tfd)
	unlock, err := lockAt(tfd, trustedDir, unix.LOCK_EX)
	if err != nil {
		return m, err
	}
	defer unlock()

	hasHead, err := exists(tfd, indexName)
	if err != nil {
		return m, &Error{Op: "reset", Path: filepath.Join(trustedDir, indexName), Err: err}
	}
	if hasHead {
		// The ID is for the report only: a head that does not parse is
		// moved aside all the same.
		var x struct {
			Head struct {
				Log string `json:"log"`
			} `json:"head"`
		}
		if data, err := readFileLimit(tfd, indexName, maxIndexSize); err == nil && json.Unmarshal(data, &x) == nil && validLogID(x.Head.Log) {
			m.Log = x.Head.Log
		}
	}

	rd, err := dirfd.Open(root)
	if err != nil {
		return m, &Error{Op: "reset", Path: root, Err: err}
	}
	defer rd.Close()
	parentRel, base := filepath.Split(rel)
	var parent *dirfd.Dir // the log directory's parent; nil when missing
	if parentRel == "" {
		parent = rd
	} else {
		p, err := openDirAt(rd, root, filepath.Clean(parentRel), false)
		switch {
		case err == nil:
			parent = p
			defer p.Close()
		case !errors.Is(err, os.ErrNotExist):
			return m, err
		}
	}
	nonEmpty := false
	if parent != nil {
		d, err := openDirAt(parent, filepath.Join(root, parentRel), base, false)
		switch {
		case err == nil:
			names, lerr := listDir(d.Fd(), dir)
			d.Close()
			if lerr != nil {
				return m, lerr
			}
			m.Receipts = len(names.receipts)
			nonEmpty = len(names.receipts)+len(names.temps)+len(names.others) > 0
		case !errors.Is(err, os.ErrNotExist):
			return m, err
		}
	}
	if !hasHead && !nonEmpty {
		return m, &Error{Op: "reset", Path: dir, Err: refusal.Errorf(refusal.NotFound, "nothing to reset: the log directory holds nothing, and the trusted directory %s holds no head", trustedDir)}
	}

	stamp := ".reset-" + time.Now().UTC().Format("20060102T150405Z")
	// The head first: a reset that stops between the two leaves a log
	// without a head, which appends refuse, and the next reset moves.
	if hasHead {
		name, err := linkAside(tfd, indexName, stamp)
		if err != nil {
			return m, &Error{Op: "reset", Path: filepath.Join(trustedDir, indexName), Err: err}
		}
		m.Head = filepath.Join(trustedDir, name)
	}
	if nonEmpty {
		name, err := renameDirAside(parent.Fd(), base, stamp)
		if err != nil {
			return m, &Error{Op: "reset", Path: dir, Err: err}
		}
		m.Dir = filepath.Join(filepath.Dir(dir), name)
	}
	return m, nil
}

// exists reports whether name is in the directory fd, not following a
// symlink.
func exists(fd int, name string) (bool, error) {
	var st unix.Stat_t
	err := unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW)
	if err == unix.ENOENT {
		return false, nil
	}
	return err == nil, err
}

// asideName is the i-th name tried for name moved aside with stamp.
func asideName(name, stamp string, i int) string {
	if i == 0 {
		return name + stamp
	}
	return fmt.Sprintf("%s%s.%d", name, stamp, i)
}

// linkAside moves the file name in the directory fd to a new name of its
// own — link(2), which never replaces a file, then unlink — and syncs the
// directory. It returns the new name.
func linkAside(fd int, name, stamp string) (string, error) {
	for i := range maxAside {
		aside := asideName(name, stamp, i)
		err := unix.Linkat(fd, name, fd, aside, 0)
		if err == unix.EEXIST {
			continue
		}
		if err != nil {
			return "", fmt.Errorf("cannot move it aside to %s: %w", aside, err)
		}
		if err := unix.Unlinkat(fd, name, 0); err != nil {
			return "", fmt.Errorf("moved it to %s but cannot remove it: %w", aside, err)
		}
		return aside, unix.Fsync(fd)
	}
	return "", fmt.Errorf("%d names to move it aside to are taken", maxAside)
}

// renameDirAside moves the directory name in the directory fd to a new
// name of its own and syncs fd. It returns the new name. The new name is
// claimed first by making it (mkdir fails on any name that exists), then
// name is renamed over that empty directory: rename(2) replaces an empty
// directory only, so nothing there is lost, and a name that is not a
// directory is refused.
func renameDirAside(fd int, name, stamp string) (string, error) {
	for i := range maxAside {
		aside := asideName(name, stamp, i)
		err := unix.Mkdirat(fd, aside, 0o755)
		if err == unix.EEXIST {
			continue
		}
		if err != nil {
			return "", fmt.Errorf("cannot make %s to move the log aside to: %w", aside, err)
		}
		if err := unix.Renameat(fd, name, fd, aside); err != nil {
			unix.Unlinkat(fd, aside, unix.AT_REMOVEDIR)
			if err == unix.ENOTDIR {
				err = refusal.Errorf(refusal.UntrustedState, "it is not a directory")
			}
			return "", fmt.Errorf("cannot move the log aside to %s: %w", aside, err)
		}
		return aside, unix.Fsync(fd)
	}
	return "", fmt.Errorf("%d names to move the log aside to are taken", maxAside)
}
