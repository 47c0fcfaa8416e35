// Package capture keeps a bounded head and tail of an output stream while
// counting every byte of it.
//
// A [Buffer] is an [io.Writer] for a tool's stdout or stderr. Whatever the
// tool prints, the Buffer keeps at most its limit: the first half of the
// limit as the head and the last half as the tail, so that both how the
// output began and how it ended survive. Everything in between is counted
// and dropped, never stored, so memory stays flat however much the tool
// prints. [Buffer.String] joins head and tail with a line that says how many
// bytes were dropped; [Buffer.Total] counts every byte written.
//
// [ParseSize] reads the sizes a user writes for limits ("64KiB", "1MiB",
// "4096").
//
// # Limitations
//
//   - The cut between the head, the dropped middle and the tail falls on byte
//     boundaries: a multi-byte UTF-8 character or a line can be split there.
//   - The tail's ring is allocated in full (half the limit) the first time
//     the head overflows; a Buffer never holds more than its limit.
//   - A Buffer is safe for concurrent use, but concurrent writers interleave
//     their bytes in the order the lock is taken, as with any shared writer.
package capture

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
)

// Buffer keeps a bounded head and tail of everything written to it.
// The zero value is not usable; make one with [New].
type Buffer struct {
	mu      sync.Mutex
	headMax int
	tailMax int
	head    []byte
	ring    []byte // the tail, as a ring of tailMax bytes once allocated
	next    int    // where the next tail byte goes in ring
	kept    int    // bytes of the tail held in ring (<= tailMax)
	total   int64
}

// New returns a Buffer that keeps at most limit bytes: the first
// ceil(limit/2) as the head and the last floor(limit/2) as the tail.
// New panics if limit is not positive or does not fit in an int.
func New(limit int64) *Buffer {
	if limit <= 0 || limit > int64(maxInt) {
		panic(fmt.Sprintf("capture: limit %d out of range", limit))
	}
	head := int((limit + 1) / 2)
	return &Buffer{headMax: head, tailMax: int(limit) - head}
}

const maxInt = int(^uint(0) >> 1)

// Write keeps what fits in the head, keeps the last bytes of p in the tail
// and counts the rest. It never fails.
func (b *Buffer) Write(p []byte) (int, error) {
	n := len(p)
	b.mu.Lock()
	defer b.mu.Unlock()
	b.total += int64(n)
	if room := b.headMax - len(b.head); room > 0 {
		k := min(room, len(p))
		b.head = append(b.head, p[:k]...)
		p = p[k:]
	}
	if len(p) == 0 || b.tailMax == 0 {
		return n, nil
	}
	if b.ring == nil {
		b.ring = make([]byte, b.tailMax)
	}
	if len(p) >= b.tailMax {
		copy(b.ring, p[len(p)-b.tailMax:])
		b.next, b.kept = 0, b.tailMax
		return n, nil
	}
	k := copy(b.ring[b.next:], p)
	copy(b.ring, p[k:])
	b.next = (b.next + len(p)) % b.tailMax
	b.kept = min(b.kept+len(p), b.tailMax)
	return n, nil
}

// Relimit sets the most bytes the Buffer keeps, as [New] would, and
// reports true — only while nothing has been written to it; otherwise it
// changes nothing and reports false.
func (b *Buffer) Relimit(limit int64) bool {
	if limit <= 0 || limit > int64(maxInt) {
		panic(fmt.Sprintf("capture: limit %d out of range", limit))
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.total != 0 {
		return false
	}
	b.headMax = int((limit + 1) / 2)
	b.tailMax = int(limit) - b.headMax
	return true
}

// Limit is the most bytes the Buffer keeps.
func (b *Buffer) Limit() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return int64(b.headMax + b.tailMax)
}

// Total is the number of bytes written, kept or not.
func (b *Buffer) Total() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.total
}

// Dropped is the number of bytes written but not kept.
func (b *Buffer) Dropped() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.dropped()
}

func (b *Buffer) dropped() int64 { return b.total - int64(len(b.head)) - int64(b.kept) }

// Clipped reports whether bytes were dropped.
func (b *Buffer) Clipped() bool { return b.Dropped() > 0 }

// Head returns a copy of the kept head.
func (b *Buffer) Head() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]byte(nil), b.head...)
}

// Tail returns a copy of the kept tail: the last bytes written after the
// head filled, at most half the limit.
func (b *Buffer) Tail() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.tail(nil)
}

func (b *Buffer) tail(dst []byte) []byte {
	if b.kept == 0 {
		return dst
	}
	start := (b.next - b.kept + b.tailMax) % b.tailMax
	if start+b.kept <= b.tailMax {
		return append(dst, b.ring[start:start+b.kept]...)
	}
	dst = append(dst, b.ring[start:]...)
	return append(dst, b.ring[:b.next]...)
}

// DroppedMarker is the line [Buffer.String] puts where bytes were dropped.
func DroppedMarker(n int64) string {
	return fmt.Sprintf("\n[... %d bytes dropped ...]\n", n)
}

// String returns what was kept: the head, then, when bytes were dropped, a
// line saying how many ([DroppedMarker]), then the tail.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var s strings.Builder
	s.Grow(len(b.head) + b.kept + 40)
	s.Write(b.head)
	if d := b.dropped(); d > 0 {
		s.WriteString(DroppedMarker(d))
	}
	s.Write(b.tail(nil))
	return s.String()
}

// ParseSize parses a size in bytes: a non-negative integer with an optional
// unit, binary (KiB, MiB, GiB, TiB, or K, M, G, T) or decimal (kB, MB, GB,
// TB), with or without a space, case-insensitive; "B" or no unit means
// bytes. "64KiB" is 65536, "1MB" is 1000000.
func ParseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	i := 0
	for i < len(t) && t[i] >= '0' && t[i] <= '9' {
		i++
	}
	if i == 0 {
		return 0, fmt.Errorf("invalid size %q: want a number of bytes with an optional unit such as KiB or MiB", s)
	}
	n, err := strconv.ParseInt(t[:i], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("invalid size %q: %w", s, err)
	}
	unit := strings.ToLower(strings.TrimSpace(t[i:]))
	mult, ok := units[unit]
	if !ok {
		return 0, fmt.Errorf("invalid size %q: unknown unit %q (use B, KiB, MiB, GiB, TiB, kB, MB, GB or TB)", s, t[i:])
	}
	if n > 0 && mult > (1<<63-1)/n {
		return 0, fmt.Errorf("invalid size %q: too large", s)
	}
	return n * mult, nil
}

var units = map[string]int64{
	"": 1, "b": 1,
	"k": 1 << 10, "kib": 1 << 10, "m": 1 << 20, "mib": 1 << 20,
	"g": 1 << 30, "gib": 1 << 30, "t": 1 << 40, "tib": 1 << 40,
	"kb": 1e3, "mb": 1e6, "gb": 1e9, "tb": 1e12,
}

// FormatSize writes n bytes the way [ParseSize] reads them back, in the
// largest binary unit that divides it ("1MiB", "1536KiB", "100B").
func FormatSize(n int64) string {
	for _, u := range []struct {
		name string
		size int64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n != 0 && n%u.size == 0 {
			return strconv.FormatInt(n/u.size, 10) + u.name
		}
	}
	return strconv.FormatInt(n, 10) + "B"
}
