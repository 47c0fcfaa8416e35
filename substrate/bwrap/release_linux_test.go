package bwrap

import (
	"context"
	"log/slog"
	"os"
	"strconv"
	"sync/atomic"
	"testing"
	"time"
)

// TestWatchRead: the channel of a pipe's watch closes when the pipe is
// read from (as a sandbox's init reads its seccomp program right after its
// release), not before, not for another pipe's read, and not after the
// watch ended; many pipes are watched at once.
func TestWatchRead(t *testing.T) {
	type watched struct {
		r, w *os.File
		seen <-chan struct{}
		stop func()
	}
	var pipes []watched
	for range 20 {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.Close(); w.Close() })
		if _, err := w.Write([]byte("program")); err != nil {
			t.Fatal(err)
		}
		seen, stop := watchRead(r.Fd())
		if seen == nil {
			t.Fatal("a pipe cannot be watched here")
		}
		pipes = append(pipes, watched{r, w, seen, stop})
	}
	closed := func(ch <-chan struct{}, within time.Duration) bool {
		select {
		case <-ch:
			return true
		case <-time.After(within):
			return false
		}
	}
	// Read through another descriptor of the pipe, as the init reads its
	// own end.
	read := func(p watched) {
		other, err := os.Open("/proc/self/fd/" + strconv.FormatUint(uint64(p.r.Fd()), 10))
		if err != nil {
			t.Fatal(err)
		}
		defer other.Close()
		buf := make([]byte, 16)
		if _, err := other.Read(buf); err != nil {
			t.Fatal(err)
		}
	}
	for i, p := range pipes {
		if i%2 == 1 {
			continue
		}
		read(p)
		if !closed(p.seen, 5*time.Second) {
			t.Fatalf("pipe %d was read, and its watch did not say so", i)
		}
	}
	for i, p := range pipes {
		if i%2 == 0 {
			continue
		}
		if closed(p.seen, 10*time.Millisecond) {
			t.Errorf("pipe %d was not read, and its watch said it was", i)
		}
		p.stop()
		read(p)
		if closed(p.seen, 50*time.Millisecond) {
			t.Errorf("pipe %d was read after its watch ended, and the channel closed", i)
		}
	}
}

// TestTheReleaseIsSeenNotAskedFor: a run's mount watch learns that the
// sandbox's init took its release from the init's read of its seccomp
// program, not by asking every releaseEvery while bwrap sets the sandbox
// up (~50 times a run, each a wake-up of this process beside bwrap's
// work); its first look still comes while the command runs.
func TestTheReleaseIsSeenNotAskedFor(t *testing.T) {
	needBwrap(t)
	var asks, reads atomic.Int32
	var firstAsk, firstRead atomic.Int64 // UnixNano
	releaseAskHook = func() {
		asks.Add(1)
		firstAsk.CompareAndSwap(0, time.Now().UnixNano())
	}
	tableReadHook = func() {
		reads.Add(1)
		firstRead.CompareAndSwap(0, time.Now().UnixNano())
	}
	defer func() { releaseAskHook, tableReadHook = nil, nil }()
	ws := tempWorkspace(t)
	for range 5 {
		asks.Store(0)
		reads.Store(0)
		firstAsk.Store(0)
		firstRead.Store(0)
		o, err := Run(context.Background(), Spec{Policy: newPolicy(ws), Command: []string{"sleep", "0.05"},
			Environ: os.Environ(), Logger: slog.New(slog.DiscardHandler)})
		if err != nil || o.ExitCode != 0 {
			t.Fatalf("the run: %+v %v", o, err)
		}
		// Seen, the watch asks once, then every releaseBackstop until the
		// event comes; asking every releaseEvery, it would ask ~25 times
		// in 5 ms. The wait is bwrap's, longer on a loaded machine.
		waited := time.Duration(firstRead.Load() - firstAsk.Load())
		if n, most := asks.Load(), 2+int32(waited/releaseBackstop); n > most {
			t.Errorf("the watch asked %d times in %v whether the release was taken; want at most %d: the init's read to say so", n, waited, most)
		}
		if n := reads.Load(); n < 2 {
			t.Errorf("the watch read the table %d times; want its first look while the command ran and its last", n)
		}
	}
}
