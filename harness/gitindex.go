package harness

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/cordon-run/cordon/internal/dirfd"
	"github.com/cordon-run/cordon/internal/gitconf"
	"golang.org/x/sys/unix"
)

// maxIndex bounds the git index read for gitlinks.
const maxIndex = 256 << 20

// gitlinkMode is the mode of an index entry that is a submodule: git
// enters the repository at that path (git status runs git there, and that
// git reads the repository's configuration).
const gitlinkMode = 0o160000

// gitlinks returns the paths of the index's gitlink entries (submodules),
// relative to the work tree, and what the index was as it was read. hashSize is 20 (SHA-1) or 32 (SHA-256). A
// missing index has none.
func gitlinks(index string, hashSize int) ([]string, *indexSeen, error) {
	f, err := os.OpenFile(index, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	at := time.Now()
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, nil, errors.New("not a regular file")
	} else if st.Size > maxIndex {
		return nil, nil, fmt.Errorf("larger than %d bytes", maxIndex)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxIndex+1))
	if err != nil {
		return nil, nil, err
	}
	links, shared, err := parseGitlinks(data, hashSize)
	if err != nil {
		return nil, nil, err
	}
	if shared == "" {
		return links, seenAs(&st, at), nil
	}
	// A split index: git reads the shared index's entries too (those the
	// split index does not replace or delete; all of them are taken, a
	// superset). Its stat is not this file's: an index that has one is
	// read again after every run.
	base, err := readIndexFile(filepath.Join(filepath.Dir(index), "sharedindex."+shared))
	if err != nil {
		return nil, nil, fmt.Errorf("its shared index: %w", err)
	}
	more, next, err := parseGitlinks(base, hashSize)
	if err != nil {
		return nil, nil, fmt.Errorf("its shared index: %w", err)
	}
	if next != "" {
		return nil, nil, errors.New("its shared index links to another")
	}
	for _, l := range more {
		if !slices.Contains(links, l) {
			links = append(links, l)
		}
	}
	return links, nil, nil
}

// readIndexFile reads a regular file of at most maxIndex bytes, never
// following a symlink.
func readIndexFile(name string) ([]byte, error) {
	f, err := os.OpenFile(name, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		return nil, errors.New("not a regular file")
	} else if st.Size() > maxIndex {
		return nil, fmt.Errorf("larger than %d bytes", maxIndex)
	}
	return io.ReadAll(io.LimitReader(f, maxIndex+1))
}

// indexSettle: an index whose change time lies less than this before it
// was looked at is read again after a run whatever its stat says. A file
// system keeps change times in coarse ticks (the kernel's clock tick,
// whole seconds on some), so a change within the tick of the look could
// leave the change time as it was.
const indexSettle = 3 * time.Second

// indexSeen is what the index was when it was read: its file, its size,
// and its change time, which the kernel sets at every change of the
// file's content or inode and no tool can set back — unlike its
// modification time (utimensat). at is when it was looked at.
type indexSeen struct {
	dev, ino    uint64
	size, ctime int64
	at          time.Time
}

func seenAs(st *unix.Stat_t, at time.Time) *indexSeen {
	return &indexSeen{dev: uint64(st.Dev), ino: st.Ino, size: st.Size, ctime: st.Ctim.Nano(), at: at}
}

// unchanged reports whether the index at path is, beyond doubt, the one
// seen: the same file, size and change time, a change time that had
// settled when it was seen.
func (s *indexSeen) unchanged(path string) bool {
	var st unix.Stat_t
	if s == nil || unix.Lstat(path, &st) != nil {
		return false
	}
	return uint64(st.Dev) == s.dev && st.Ino == s.ino && st.Size == s.size && st.Ctim.Nano() == s.ctime &&
		s.at.Sub(time.Unix(0, s.ctime)) >= indexSettle
}

// parseGitlinks reads the gitlink entries of a git index (versions 2, 3
// and 4; see git's Documentation/gitformat-index.txt), and the name (hex)
// of the shared index a split index's "link" extension names ("" for
// none): the entries git reads from that file too.
func parseGitlinks(data []byte, hashSize int) (links []string, shared string, err error) {
	if len(data) < 12 || string(data[:4]) != "DIRC" {
		return nil, "", errors.New("not a git index")
	}
	version := binary.BigEndian.Uint32(data[4:8])
	if version < 2 || version > 4 {
		return nil, "", fmt.Errorf("index version %d", version)
	}
	count := binary.BigEndian.Uint32(data[8:12])
	var out []string
	off := 12
	prev := ""
	for i := uint32(0); i < count; i++ {
		start := off
		fixed := 40 + hashSize + 2 // stat data, mode among it, object name, flags
		if off+fixed > len(data) {
			return nil, "", errors.New("index truncated")
		}
		mode := binary.BigEndian.Uint32(data[off+24 : off+28])
		flags := binary.BigEndian.Uint16(data[off+40+hashSize : off+fixed])
		off += fixed
		if flags&0x4000 != 0 { // extended flags (version 3 and later)
			if version < 3 || off+2 > len(data) {
				return nil, "", errors.New("bad extended flags")
			}
			off += 2
		}
		var name string
		if version == 4 {
			strip, n := binary.Uvarint(data[off:])
			if n <= 0 || strip > uint64(len(prev)) {
				return nil, "", errors.New("bad path prefix")
			}
			off += n
			end := bytes.IndexByte(data[off:], 0)
			if end < 0 {
				return nil, "", errors.New("index truncated")
			}
			name = prev[:len(prev)-int(strip)] + string(data[off:off+end])
			off += end + 1
		} else {
			end := bytes.IndexByte(data[off:], 0)
			if end < 0 {
				return nil, "", errors.New("index truncated")
			}
			name = string(data[off : off+end])
			// Padded with 1 to 8 NULs to a multiple of 8 from the entry's start.
			off = start + ((off + end - start + 8) &^ 7)
		}
		prev = name
		if mode&0o170000 == gitlinkMode {
			out = append(out, name)
		}
	}
	// The extensions, up to the checksum: a split index keeps most of its
	// entries in the shared index its "link" extension names.
	for end := len(data) - hashSize; off < end; {
		if off+8 > end {
			return nil, "", errors.New("bad extension")
		}
		sig, size := string(data[off:off+4]), int(binary.BigEndian.Uint32(data[off+4:off+8]))
		off += 8
		if size < 0 || size > end-off {
			return nil, "", errors.New("extension truncated")
		}
		if sig == "link" {
			if size < hashSize {
				return nil, "", errors.New("bad link extension")
			}
			if base := data[off : off+hashSize]; !allZero(base) {
				shared = hex.EncodeToString(base)
			}
		}
		off += size
	}
	return out, shared, nil
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// submodules protects the entry into every submodule the repository's
// index names: P/.git, present or absent. git status at the workspace
// root enters each and runs git there, which obeys that repository's
// configuration; a tool must not make one, or redirect one.
func (pr *protector) submodules(gitdir, top string) error {
	hashSize := 20
	if cfg, err := readObjectFormat(gitdir); err == nil && cfg == "sha256" {
		hashSize = 32
	}
	links, seen, err := gitlinks(filepath.Join(gitdir, "index"), hashSize)
	if err != nil {
		return pr.protectedErr(".git/index", "cannot be read for the submodules git enters: %v", err)
	}
	pr.gitlinks = nil
	for _, l := range links {
		abs := filepath.Join(top, filepath.FromSlash(l))
		if rel, ok := pr.rel(abs); ok && rel != "" && !strings.HasPrefix(rel, "../") {
			pr.gitlinks = append(pr.gitlinks, rel)
			pr.add(Path{Rel: rel + "/.git", Dir: true, Reason: "a submodule's entry: git status at the workspace root enters it and obeys its configuration"})
		}
	}
	pr.indexFile, pr.indexSeen = filepath.Join(gitdir, "index"), seen
	pr.hashSize = hashSize
	return nil
}

// readObjectFormat returns extensions.objectformat of a git directory's
// own configuration (git reads extensions from no other file), or "".
func readObjectFormat(gitdir string) (string, error) {
	name := filepath.Join(gitdir, "config")
	data, err := readBounded(name, 1<<20)
	if err != nil {
		return "", err
	}
	entries, err := gitconf.Parse(name, data)
	if err != nil {
		return "", err
	}
	format := ""
	for _, e := range entries {
		if e.Key == "extensions.objectformat" {
			format = strings.ToLower(e.Value) // the last one wins, as in git
		}
	}
	return format, nil
}

// Quarantine moves away the entry (P/.git) of every repository that the
// workspace's index names as a submodule now but did not when the set was
// found: a run (a tool writing the index) made the host's git status at
// the workspace root enter a repository whose configuration the tool
// could write. Each goes to <harness dir>/quarantine/<time>/P.git, where
// the user can look at it; the list of what moved is returned. Call it
// once a run is over, with no process of it left.
func (p *Protected) Quarantine() ([]string, error) {
	if p.index == "" {
		return nil, nil
	}
	if p.indexSeen.unchanged(p.index) {
		return nil, nil // the same index: the same submodules
	}
	links, _, err := gitlinks(p.index, p.hashSize)
	if err != nil {
		return nil, fmt.Errorf("cannot read %s for the submodules git enters: %w", p.index, err)
	}
	var moved []string
	var errs []error
	stamp := ""
	for _, l := range links {
		rel := filepath.ToSlash(filepath.Clean(l))
		if slices.Contains(p.gitlinks, rel) || rel == "." || strings.HasPrefix(rel, "../") {
			continue
		}
		entry := filepath.Join(p.root, filepath.FromSlash(rel), ".git")
		if _, err := os.Lstat(entry); err != nil {
			continue // nothing for git to enter
		}
		if stamp == "" {
			stamp = time.Now().UTC().Format("20060102T150405.000000000Z")
		}
		dest, err := p.quarantineDir(stamp, rel)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if err := os.Rename(entry, filepath.Join(dest, ".git")); err != nil {
			errs = append(errs, fmt.Errorf("cannot move %s/.git out of git's way: %w", rel, err))
			continue
		}
		moved = append(moved, fmt.Sprintf("moved %s/.git — a repository the run entered in the index as a submodule, which git at the workspace root would enter and obey — to %s", rel, strings.TrimPrefix(dest, p.root+"/")))
	}
	return moved, errors.Join(errs...)
}

// QuarantineNotes calls [Protected.Quarantine] and returns what it did as
// the notes of a result, a failure last ("after the run: ..."). Every
// front end and substrate that lets a run write calls it once the run is
// over.
func (p *Protected) QuarantineNotes() []string {
	notes, err := p.Quarantine()
	if err != nil {
		notes = append(notes, "after the run: "+err.Error())
	}
	return notes
}

// quarantineDir makes <root>/<registry>/quarantine/<stamp>/<rel>, one
// component at a time, never following a symlink.
func (p *Protected) quarantineDir(stamp, rel string) (string, error) {
	root, err := dirfd.Open(p.root)
	if err != nil {
		return "", err
	}
	defer root.Close()
	d, err := root.OpenPath(p.registry+"/quarantine/"+stamp+"/"+rel, true, 0o700)
	if err != nil {
		return "", fmt.Errorf("cannot make the quarantine: %w", err)
	}
	defer d.Close()
	return d.Name(), nil
}
