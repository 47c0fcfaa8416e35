package capture

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"
)

// reference computes what a Buffer of the limit must keep for the whole
// stream, the slow way.
func reference(stream []byte, limit int) (head, tail []byte, dropped int) {
	h := (limit + 1) / 2
	t := limit - h
	if len(stream) <= h {
		return stream, nil, 0
	}
	head = stream[:h]
	rest := stream[h:]
	if len(rest) > t {
		dropped = len(rest) - t
		rest = rest[len(rest)-t:]
	}
	return head, rest, dropped
}

// TestBufferMatchesReference replays streams of many sizes, written in
// random chunk sizes, against the reference.
func TestBufferMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, limit := range []int{1, 2, 3, 7, 16, 100, 4096} {
		for _, size := range []int{0, 1, limit / 2, limit - 1, limit, limit + 1, 2 * limit, 10*limit + 3} {
			stream := make([]byte, size)
			for i := range stream {
				stream[i] = byte('a' + rng.IntN(26))
			}
			b := New(int64(limit))
			for rest := stream; len(rest) > 0; {
				k := min(len(rest), 1+rng.IntN(2*limit+1))
				if n, err := b.Write(rest[:k]); n != k || err != nil {
					t.Fatalf("Write = %d, %v; want %d, nil", n, err, k)
				}
				rest = rest[k:]
			}
			head, tail, dropped := reference(stream, limit)
			name := fmt.Sprintf("limit %d, %d bytes", limit, size)
			if got := b.Head(); !bytes.Equal(got, head) {
				t.Errorf("%s: head = %q, want %q", name, got, head)
			}
			if got := b.Tail(); !bytes.Equal(got, tail) {
				t.Errorf("%s: tail = %q, want %q", name, got, tail)
			}
			if b.Total() != int64(size) || b.Dropped() != int64(dropped) || b.Clipped() != (dropped > 0) {
				t.Errorf("%s: total %d dropped %d clipped %v; want %d %d %v", name, b.Total(), b.Dropped(), b.Clipped(), size, dropped, dropped > 0)
			}
			want := string(head) + string(tail)
			if dropped > 0 {
				want = string(head) + DroppedMarker(int64(dropped)) + string(tail)
			}
			if got := b.String(); got != want {
				t.Errorf("%s: String = %q, want %q", name, got, want)
			}
			if kept := len(b.Head()) + len(b.Tail()); int64(kept) > b.Limit() {
				t.Errorf("%s: kept %d bytes, more than the limit %d", name, kept, b.Limit())
			}
		}
	}
}

func TestStringSaysHowManyBytesWereDropped(t *testing.T) {
	b := New(8)
	fmt.Fprint(b, "0123456789abcdefghij")
	if got, want := b.String(), "0123\n[... 12 bytes dropped ...]\nghij"; got != want {
		t.Fatalf("String = %q, want %q", got, want)
	}
}

// TestMemoryStaysFlat writes 1 GiB through a 1 MiB Buffer and checks that
// the heap did not grow with it.
func TestMemoryStaysFlat(t *testing.T) {
	b := New(1 << 20)
	chunk := bytes.Repeat([]byte("x"), 1<<20)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for range 1024 {
		b.Write(chunk)
	}
	runtime.ReadMemStats(&after)
	if b.Total() != 1<<30 {
		t.Fatalf("Total = %d, want %d", b.Total(), 1<<30)
	}
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 4<<20 {
		t.Fatalf("writing 1 GiB allocated %d bytes; the buffer must stay within its 1 MiB limit", grew)
	}
}

func TestNewRejectsNonPositiveLimits(t *testing.T) {
	for _, limit := range []int64{0, -1} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("New(%d) did not panic", limit)
				}
			}()
			New(limit)
		}()
	}
}

func TestParseSize(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
	}{
		{"0", 0}, {"4096", 4096}, {"10B", 10}, {"64KiB", 64 << 10}, {"64kib", 64 << 10},
		{"1MiB", 1 << 20}, {"1 MiB", 1 << 20}, {"2M", 2 << 20}, {"1GiB", 1 << 30}, {"1T", 1 << 40},
		{"1kB", 1000}, {"1MB", 1000000}, {"3GB", 3e9}, {" 7 ", 7},
	} {
		got, err := ParseSize(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
		}
	}
	for _, in := range []string{"", "MiB", "-1", "1.5MiB", "1 parsec", "1MiBs", "99999999999999999999", "9999999999TiB", "0x10"} {
		if got, err := ParseSize(in); err == nil {
			t.Errorf("ParseSize(%q) = %d, want an error", in, got)
		} else if !strings.Contains(err.Error(), "invalid size") {
			t.Errorf("ParseSize(%q) error %q does not say the size is invalid", in, err)
		}
	}
}

func TestFormatSizeRoundTrips(t *testing.T) {
	for _, n := range []int64{0, 1, 100, 1024, 1536, 1 << 20, 3 << 30, 5 << 40, 1<<20 + 1} {
		s := FormatSize(n)
		back, err := ParseSize(s)
		if err != nil || back != n {
			t.Errorf("ParseSize(FormatSize(%d) = %q) = %d, %v", n, s, back, err)
		}
	}
	if got := FormatSize(1 << 20); got != "1MiB" {
		t.Errorf("FormatSize(1MiB) = %q", got)
	}
}

func FuzzParseSize(f *testing.F) {
	for _, s := range []string{"1MiB", "64 kib", "12", "9223372036854775807", "8EiB", " 3 GB "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := ParseSize(s)
		if err != nil {
			return
		}
		if n < 0 {
			t.Fatalf("ParseSize(%q) = %d, negative", s, n)
		}
		if back, err := ParseSize(FormatSize(n)); err != nil || back != n {
			t.Fatalf("ParseSize(FormatSize(%d)) = %d, %v", n, back, err)
		}
	})
}

func ExampleBuffer() {
	out := New(10)
	fmt.Fprint(out, "BEGIN-")
	fmt.Fprint(out, strings.Repeat(".", 1000))
	fmt.Fprint(out, "-END")
	fmt.Println(out.Total(), out.Clipped())
	fmt.Println(out)
	// Output:
	// 1010 true
	// BEGIN
	// [... 1000 bytes dropped ...]
	// .-END
}
