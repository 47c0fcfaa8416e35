package harness

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
)

// parseGitlinks reads the gitlink entries of a git index (versions 2, 3
// and 4; see git's Documentation/gitformat-index.txt) as git reads them,
// and the names (hex) of the shared indexes a split index's "link"
// extension names: entries git reads from those files too.
//
// Where git can read one index two ways, both are taken. git reads the
// entries one after another and the extensions after them; but where the
// index ends with an "EOIE" extension (git writes one with index.threads
// set), git reading it with threads finds the extensions where EOIE says,
// and with three threads or more and an "IEOT" extension among them reads
// the entries in the blocks IEOT lists, each from its own offset, its
// first entry without a previous name — by default on a host of three
// processors or more, for an index whose header counts 30000 entries or
// more. A crafted index can make the readings differ (git 2.39 at
// index.threads 3 entered a submodule only the blocks held); the gitlinks
// of all are returned. An entry is read as git's
// create_from_disk reads it: a name as long as its flags say (its bytes up
// to the first NUL are the path git uses), extended flags in any version,
// a version 4 name's prefix length in git's own varint, no prefix for a
// block's first entry.
func parseGitlinks(data []byte, hashSize int) (links, shared []string, err error) {
	if len(data) < 12+hashSize || string(data[:4]) != "DIRC" {
		return nil, nil, errors.New("not a git index")
	}
	version := binary.BigEndian.Uint32(data[4:8])
	if version < 2 || version > 4 {
		return nil, nil, fmt.Errorf("index version %d", version)
	}
	r := indexReader{data: data, end: len(data) - hashSize, hashSize: hashSize, version: version}
	// One after another, and the extensions after them.
	links, off, err := r.entries(12, int(binary.BigEndian.Uint32(data[8:12])))
	if err != nil {
		return nil, nil, err
	}
	if _, err := r.extensions(off, r.end, &shared); err != nil {
		return nil, nil, err
	}
	// Where EOIE says, and in IEOT's blocks.
	eoie := r.end - (8 + 4 + hashSize)
	if eoie < 12 || string(data[eoie:eoie+4]) != "EOIE" || binary.BigEndian.Uint32(data[eoie+4:eoie+8]) != uint32(4+hashSize) {
		return links, shared, nil
	}
	from := int(binary.BigEndian.Uint32(data[eoie+8 : eoie+12]))
	if from < 12 || from >= eoie {
		return links, shared, nil // git ignores the EOIE
	}
	ieot, err := r.extensions(from, eoie, &shared)
	if err != nil {
		return nil, nil, fmt.Errorf("the extensions EOIE points to: %w", err)
	}
	if ieot == nil {
		return links, shared, nil
	}
	if len(ieot) < 4 || binary.BigEndian.Uint32(ieot[:4]) != 1 {
		return links, shared, nil // git ignores an IEOT of another version
	}
	seen := map[string]bool{}
	for _, l := range links {
		seen[l] = true
	}
	total := 0
	for b := ieot[4:]; len(b) >= 8; b = b[8:] {
		// git puts the blocks' entries in an array of the header's count:
		// more would overrun it; cordon reads no more than that in all.
		if total += int(binary.BigEndian.Uint32(b[4:8])); total > int(binary.BigEndian.Uint32(data[8:12])) {
			return nil, nil, errors.New("IEOT lists more entries than the index has")
		}
		block, _, err := r.entries(int(binary.BigEndian.Uint32(b[:4])), int(binary.BigEndian.Uint32(b[4:8])))
		if err != nil {
			return nil, nil, fmt.Errorf("a block IEOT lists: %w", err)
		}
		for _, l := range block {
			if !seen[l] {
				seen[l] = true
				links = append(links, l)
			}
		}
	}
	return links, shared, nil
}

// maxGitlinkName bounds a gitlink's name (PATH_MAX: git cannot lstat a
// longer one, and version 4 names can grow by a byte an entry).
const maxGitlinkName = 4096

// indexReader reads the entries and extensions of one index; end is where
// its trailing hash begins.
type indexReader struct {
	data     []byte
	end      int
	hashSize int
	version  uint32
}

// entries reads n entries from off, the first one without a previous
// name, and returns the gitlinks among them and the offset after them.
func (r indexReader) entries(off, n int) (links []string, next int, err error) {
	data, end := r.data, r.end
	var prev []byte
	for i := 0; i < n; i++ {
		start := off
		fixed := 40 + r.hashSize + 2 // stat data, mode among it, object name, flags
		if off < 12 || off+fixed > end {
			return nil, 0, errors.New("index truncated")
		}
		mode := binary.BigEndian.Uint32(data[off+24 : off+28])
		flags := binary.BigEndian.Uint16(data[off+40+r.hashSize : off+fixed])
		off += fixed
		if flags&0x4000 != 0 { // extended flags: git reads them in any version
			off += 2
		}
		length := int(flags & 0xfff)
		var name []byte
		if r.version == 4 {
			strip, n := gitVarint(data[min(off, end):end])
			off += n
			copyLen := 0
			if i > 0 { // a block's first entry has no previous name
				if strip > uint64(len(prev)) {
					return nil, 0, errors.New("bad path prefix")
				}
				copyLen = len(prev) - int(strip)
			}
			if length == 0xfff {
				nul := bytes.IndexByte(data[min(off, end):end], 0)
				if nul < 0 {
					return nil, 0, errors.New("index truncated")
				}
				length = copyLen + nul
			}
			suffix := length - copyLen
			if suffix < 0 || off+suffix+1 > end {
				return nil, 0, errors.New("index truncated")
			}
			if data[off+suffix] != 0 { // git copies it with the name, and reads on where it is not a NUL
				return nil, 0, errors.New("a name without its NUL")
			}
			name = append(prev[:copyLen], data[off:off+suffix]...) // prev is the reader's own buffer in version 4
			off += suffix + 1
		} else {
			if length == 0xfff {
				nul := bytes.IndexByte(data[min(off, end):end], 0)
				if nul < 0 {
					return nil, 0, errors.New("index truncated")
				}
				length = nul
			}
			if off+length+1 > end {
				return nil, 0, errors.New("index truncated")
			}
			if data[off+length] != 0 { // git copies it with the name, and reads on where it is not a NUL
				return nil, 0, errors.New("a name without its NUL")
			}
			name = data[off : off+length]
			// Padded with 1 to 8 NULs to a multiple of 8 from the entry's start.
			off = start + ((off + length - start + 8) &^ 7)
		}
		prev = name
		if mode&0o170000 == gitlinkMode {
			path, _, _ := bytes.Cut(name, []byte{0}) // git uses the name as a C string
			if len(path) > maxGitlinkName {          // no path git can lstat
				return nil, 0, errors.New("a gitlink's name is too long")
			}
			links = append(links, string(path))
		}
	}
	return links, off, nil
}

// extensions walks the extensions from off to end, adding the shared
// index a "link" extension names to shared, and returns the content of
// an "IEOT" extension (nil if there is none).
func (r indexReader) extensions(off, end int, shared *[]string) (ieot []byte, err error) {
	for off < end {
		if off+8 > end {
			return nil, errors.New("bad extension")
		}
		sig, size := string(r.data[off:off+4]), int(binary.BigEndian.Uint32(r.data[off+4:off+8]))
		off += 8
		if size < 0 || size > end-off {
			return nil, errors.New("extension truncated")
		}
		ext := r.data[off : off+size]
		switch sig {
		case "link":
			if size < r.hashSize {
				return nil, errors.New("bad link extension")
			}
			if base := ext[:r.hashSize]; !allZero(base) {
				if h := hex.EncodeToString(base); !slices.Contains(*shared, h) {
					*shared = append(*shared, h)
				}
			}
		case "IEOT":
			if ieot == nil { // git's read_ieot_extension takes the first
				ieot = ext
			}
		}
		off += size
	}
	return ieot, nil
}

// gitVarint decodes git's varint (varint.c: big-endian groups of seven
// bits, each continuation adding one) and returns it and the bytes it
// took; on an overflow, as git, 0 and none.
func gitVarint(b []byte) (uint64, int) {
	if len(b) == 0 {
		return 0, 0
	}
	c := b[0]
	val := uint64(c & 127)
	i := 1
	for c&128 != 0 {
		val++
		if val == 0 || val&^(1<<57-1) != 0 { // git: !val || MSB(val, 7)
			return 0, 0
		}
		if i >= len(b) {
			return 0, 0
		}
		c = b[i]
		i++
		val = val<<7 + uint64(c&127)
	}
	return val, i
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}
