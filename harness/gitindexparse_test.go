package harness_test

import (
	"crypto/sha1"
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
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
			if len(notes) != 1 || !strings.Contains(notes[0], "git reads none now") {
				t.Errorf("notes %q", notes)
			}
			if _, err := os.Lstat(filepath.Join(ws, ".git", "index")); err == nil {
				t.Errorf("the index is still where git reads it")
			}
		})
	}
}

// TestANameIsWhatGitMakesOfItsTerminator: git copies an entry's name
// with the byte after it (create_from_disk: memcpy(ce->name, name, len+1))
// and uses ce->name as a C string: a gitlink "sub" whose terminator is
// 'x' is "subx" to git status (it runs git status in subx), in every
// version. Such an index is git's "subx", or not readable.
func TestANameIsWhatGitMakesOfItsTerminator(t *testing.T) {
	v2 := entry("sub", true, -1)
	v2[62+3] = 'x'
	v4 := v4entry("sub", true, 0)
	binary.BigEndian.PutUint16(v4[60:], 3)
	v4[len(v4)-1] = 'x'
	for _, c := range []struct {
		name string
		data []byte
	}{
		{"version 2", index(2, 2, append(v2, entry("zz", false, -1)...))},
		{"version 4", index(4, 2, append(v4, v4entry("zz", false, 0)...))},
	} {
		links, _, err := harness.ParseGitlinks(c.data, 20)
		if err == nil && !slices.Contains(links, "subx") {
			t.Errorf("%s: gitlinks %q; git enters subx", c.name, links)
		}
	}
}

// TestGitReadsTheFirstIEOT: git's read_ieot_extension stops at the first
// IEOT extension after where EOIE points; a second one must not hide the
// first one's blocks.
func TestGitReadsTheFirstIEOT(t *testing.T) {
	a := entry("a", false, -1)
	hidden := entry("subx", true, -1)
	ieot := func(off, n uint32) []byte {
		b := binary.BigEndian.AppendUint32(nil, 1)
		b = binary.BigEndian.AppendUint32(b, off)
		return ext("IEOT", binary.BigEndian.AppendUint32(b, n))
	}
	extAt := 12 + len(a)
	first, second := ieot(0, 1), ieot(12, 1)
	first = ieot(uint32(extAt+len(first)+len(second)+8), 1)
	zzzz := ext("ZZZZ", hidden)
	h := sha1.New()
	for _, e := range [][]byte{first, second, zzzz} {
		h.Write(e[:8])
	}
	eoie := append(binary.BigEndian.AppendUint32(nil, uint32(extAt)), h.Sum(nil)...)
	data := index(2, 1, a, first, second, zzzz, ext("EOIE", eoie))
	links, _, err := harness.ParseGitlinks(data, 20)
	if err == nil && !slices.Contains(links, "subx") {
		t.Errorf("gitlinks %q; git -c index.threads=3 enters subx", links)
	}
}

// TestTheReaderIsBounded: the work of reading an index grows with its
// size, not faster: IEOT blocks that together list more entries than the
// index has (each block reading all of them again: hours for a large
// index) are refused, and version 4 names that each grow the last by a
// byte are read in one buffer, not copied whole each time.
func TestTheReaderIsBounded(t *testing.T) {
	const n = 20000
	var files, grow []byte
	for i := 0; i < n; i++ {
		files = append(files, entry(string(rune('a'+i%26))+string(rune('a'+i/26%26))+string(rune('a'+i/676)), false, -1)...)
		grow = append(grow, v4entry("a", false, 0)...)
	}
	ieot := binary.BigEndian.AppendUint32(nil, 1)
	for i := 0; i < n; i++ {
		ieot = binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint32(ieot, 12), n)
	}
	eoie := append(binary.BigEndian.AppendUint32(nil, uint32(12+len(files))), make([]byte, 20)...)
	if _, _, err := harness.ParseGitlinks(index(2, n, files, ext("IEOT", ieot), ext("EOIE", eoie)), 20); err == nil {
		t.Errorf("IEOT blocks listing %d entries of an index of %d were read", n*n, n)
	}
	var m0, m1 runtimeMem
	m0.read()
	harness.ParseGitlinks(index(4, n, grow), 20)
	m1.read()
	if used := m1.alloc - m0.alloc; used > 64<<20 {
		t.Errorf("version 4 names growing by a byte, %d of them: %d MB allocated", n, used>>20)
	}
}

// runtimeMem reads the bytes the process has allocated so far.
type runtimeMem struct{ alloc uint64 }

func (m *runtimeMem) read() {
	var s runtime.MemStats
	runtime.ReadMemStats(&s)
	m.alloc = s.TotalAlloc
}

// FuzzParseGitlinks: no index, however made, makes the reader panic or
// return a gitlink that is not a C string (git's name up to its NUL).
func FuzzParseGitlinks(f *testing.F) {
	f.Add(index(2, 2, append(entry("a", false, -1), entry("sub", true, -1)...)), 20)
	f.Add(index(4, 2, append(v4entry("dir/a", false, 0), v4entry("sub", true, 1)...)), 20)
	f.Add(index(3, 1, entry("sub", true, -1), ext("link", make([]byte, 20))), 20)
	f.Add(index(2, 1, entry("sub", true, -1), ext("IEOT", []byte{0, 0, 0, 1, 0, 0, 0, 12, 0, 0, 0, 1})), 32)
	f.Fuzz(func(t *testing.T, data []byte, hashSize int) {
		if hashSize != 20 && hashSize != 32 {
			hashSize = 20
		}
		links, _, err := harness.ParseGitlinks(data, hashSize)
		if err != nil {
			return
		}
		for _, l := range links {
			if strings.IndexByte(l, 0) >= 0 {
				t.Fatalf("gitlink %q holds a NUL", l)
			}
		}
	})
}
