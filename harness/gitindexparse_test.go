package harness_test

import (
	"crypto/sha1"
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cordon-run/cordon/harness"
)

// entry is one on-disk index entry, version 2 or 3: a file unless link,
// its flags' name length nameLen (len(name) if negative).
func entry(name string, link bool, nameLen int) []byte {
	mode := uint32(0o100644)
	if link {
		mode = 0o160000
	}
	if nameLen < 0 {
		nameLen = len(name)
	}
	b := make([]byte, 40, 64+len(name))
	binary.BigEndian.PutUint32(b[24:], mode)
	b = append(b, make([]byte, 20)...) // object name
	b = binary.BigEndian.AppendUint16(b, uint16(min(nameLen, 0xfff)))
	b = append(b, name...)
	size := (62 + nameLen + 8) &^ 7
	return append(b, make([]byte, size-len(b))...)
}

// v4entry is one version 4 entry: strip bytes of the previous name off
// (git's varint, one byte here), then suffix.
func v4entry(suffix string, link bool, strip byte) []byte {
	e := entry("", link, 0)[:62]
	binary.BigEndian.PutUint16(e[60:], 0xfff)
	return append(append(append(e, strip), suffix...), 0)
}

// index assembles an index of version v from entries and extensions and
// appends its SHA-1.
func index(v uint32, n int, entries []byte, exts ...[]byte) []byte {
	b := []byte("DIRC")
	b = binary.BigEndian.AppendUint32(b, v)
	b = binary.BigEndian.AppendUint32(b, uint32(n))
	b = append(b, entries...)
	for _, e := range exts {
		b = append(b, e...)
	}
	sum := sha1.Sum(b)
	return append(b, sum[:]...)
}

func ext(sig string, data []byte) []byte {
	b := append([]byte(sig), binary.BigEndian.AppendUint32(nil, uint32(len(data)))...)
	return append(b, data...)
}

// TestGitlinksAsGitReadsThem: cordon's reader takes an entry's name as
// git's create_from_disk does, and where git can read one index two
// ways (one entry after another, or in the blocks an IEOT extension
// lists, as git does with three threads or more once an EOIE extension
// says where the extensions are: git 2.39 -c index.threads=3 lists "sub"
// for the last index below, and enters it), the gitlinks of both.
func TestGitlinksAsGitReadsThem(t *testing.T) {
	hidden := entry("sub", true, -1)
	for _, c := range []struct {
		name string
		data []byte
		want []string
	}{
		{"a name as long as its flags say, past a NUL", func() []byte {
			// git: "a" (with the bytes up to its length), then sub. A
			// reader that stops at the NUL finds "b" inside it instead.
			raw := append([]byte("a\x00"), entry("b", false, -1)...)
			raw = append(raw, make([]byte, 100-len(raw))...)
			return index(2, 2, append(entry(string(raw), false, 100), hidden...))
		}(), []string{"sub"}},
		{"extended flags in version 2", func() []byte {
			e := entry("", true, 0)[:62]
			binary.BigEndian.PutUint16(e[60:], 0x4000|3)
			e = append(append(e, 0, 0), "sub"...)
			return index(2, 1, append(e, make([]byte, (64+3+8)&^7-len(e))...))
		}(), []string{"sub"}},
		{"version 4: git's varint", func() []byte {
			long := strings.Repeat("d", 200) + "/x"
			// strip 202 = git varint 0x80 0x4a (Go's Uvarint reads 9482)
			e := v4entry(long, false, 0)
			l := entry("", true, 0)[:62]
			binary.BigEndian.PutUint16(l[60:], 0xfff)
			l = append(append(l, 0x80, 0x4a), "sub\x00"...)
			return index(4, 2, append(e, l...))
		}(), []string{"sub"}},
		{"version 4: a first entry's prefix is ignored", index(4, 1, v4entry("sub", true, 5)), []string{"sub"}},
		{"the blocks of IEOT, each from its own offset", func() []byte {
			// One after another: a file whose long name holds an entry;
			// IEOT's second block starts at that entry.
			outer := "f\x00" + string(hidden)
			first := entry(outer, false, len(outer))
			entries := append(entry("a", false, -1), first...)
			blockAt := 12 + len(entry("a", false, -1)) + 62 + 2
			ieot := binary.BigEndian.AppendUint32(nil, 1)
			ieot = binary.BigEndian.AppendUint32(ieot, 12)
			ieot = binary.BigEndian.AppendUint32(ieot, 1)
			ieot = binary.BigEndian.AppendUint32(ieot, uint32(blockAt))
			ieot = binary.BigEndian.AppendUint32(ieot, 1)
			extAt := 12 + len(entries)
			ieotExt := ext("IEOT", ieot)
			h := sha1.Sum(ieotExt[:8])
			eoie := binary.BigEndian.AppendUint32(nil, uint32(extAt))
			eoie = append(eoie, h[:]...)
			return index(2, 2, entries, ieotExt, ext("EOIE", eoie))
		}(), []string{"sub"}},
	} {
		links, _, err := harness.ParseGitlinks(c.data, 20)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if !slices.Equal(links, c.want) {
			t.Errorf("%s: gitlinks %q, want %q", c.name, links, c.want)
		}
	}
}

// TestAnIndexThatCannotBeReadGoesAway: after a run that left an index
// cordon cannot read for its submodules, the index itself is moved to
// the quarantine (git then enters none), and the note says so; so is one
// naming a new submodule by an absolute path or through a symlink.
func TestAnIndexThatCannotBeReadGoesAway(t *testing.T) {
	for _, c := range []struct {
		name  string
		write func(ws string)
	}{
		{"unreadable", func(ws string) {
			os.WriteFile(filepath.Join(ws, ".git", "index"), []byte("DIRC\x00\x00\x00\x09"), 0o644)
		}},
		{"absolute", func(ws string) {
			os.WriteFile(filepath.Join(ws, ".git", "index"), index(2, 1, entry(ws+"/sub", true, -1)), 0o644)
		}},
		{"symlink", func(ws string) {
			os.MkdirAll(filepath.Join(ws, "d", "sub", ".git"), 0o755)
			os.Symlink("d", filepath.Join(ws, "lnk"))
			os.WriteFile(filepath.Join(ws, ".git", "index"), index(2, 1, entry("lnk/sub", true, -1)), 0o644)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			ws, _ := filepath.EvalSymlinks(t.TempDir())
			if out, err := exec.Command("git", "init", "-q", ws).CombinedOutput(); err != nil {
				t.Skipf("git: %v %s", err, out)
			}
			h := harness.Default().WithStateDir(t.TempDir()).WithCacheDir(t.TempDir())
			notes, err := harness.Quarantined(h, ws, func() { c.write(ws) })
			if err != nil {
				t.Fatal(err)
			}
			if len(notes) != 1 || !strings.Contains(notes[0], "moved the git index") {
				t.Errorf("notes %q", notes)
			}
			if _, err := os.Lstat(filepath.Join(ws, ".git", "index")); err == nil {
				t.Errorf("the index is still where git reads it")
			}
		})
	}
}
