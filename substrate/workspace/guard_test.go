package workspace

import (
	"bytes"
	"errors"
	"github.com/cordon-run/cordon/harness"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

func TestReadRefusesSpecialFilesWithoutBlocking(t *testing.T) {
	top := makeTree(t, baseTree)
	ws := filepath.Join(top, "ws")
	if err := syscall.Mkfifo(filepath.Join(ws, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Chdir(ws) // a relative socket name: temporary paths can exceed sun_path
	l, err := net.Listen("unix", "sock")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := os.Symlink("fifo", filepath.Join(ws, "tofifo")); err != nil {
		t.Fatal(err)
	}
	w := openWS(t, top)
	for _, name := range []string{"fifo", "sock", "tofifo"} {
		done := make(chan error, 1)
		go func() { _, err := w.ReadFile(name); done <- err }()
		select {
		case err := <-done:
			if name == "sock" {
				// A socket cannot be opened at all (ENXIO); either way nothing is read.
				if err == nil {
					t.Fatalf("read %s succeeded", name)
				}
				continue
			}
			if !errors.Is(err, ErrNotRegular) {
				t.Fatalf("read %s: %v, want ErrNotRegular", name, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("read %s blocked", name)
		}
	}
	if _, err := w.ReadFile("dir"); !errors.Is(err, ErrIsDir) {
		t.Fatalf("read dir: %v, want ErrIsDir", err)
	}
}

func TestReadSizeLimit(t *testing.T) {
	top := makeTree(t, baseTree)
	ws := filepath.Join(top, "ws")
	if err := os.WriteFile(filepath.Join(ws, "eleven"), []byte("01234567890"), 0o644); err != nil {
		t.Fatal(err)
	}
	w := openWS(t, top, WithMaxFileSize(10))
	if _, err := w.ReadFile("eleven"); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("read over the limit: %v, want ErrTooLarge", err)
	}
	if err := w.WriteFile("big", []byte("01234567890")); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("write over the limit: %v, want ErrTooLarge", err)
	}
	if got, err := w.ReadFile("file"); err != nil || string(got) != "ws/file" {
		t.Fatalf("read under the limit: %q, %v", got, err)
	}
}

// TestReadHugeFileMemoryFlat reads a sparse 8 GiB file: the read is refused
// without allocating anything like its size.
func TestReadHugeFileMemoryFlat(t *testing.T) {
	top := makeTree(t, baseTree)
	huge := filepath.Join(top, "ws", "huge")
	f, err := os.Create(huge)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(8 << 30); err != nil {
		t.Skipf("sparse file: %v", err)
	}
	f.Close()
	w := openWS(t, top)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err = w.ReadFile("huge")
	runtime.ReadMemStats(&after)
	if !errors.Is(err, ErrTooLarge) {
		t.Fatalf("read 8 GiB: %v, want ErrTooLarge", err)
	}
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 1<<20 {
		t.Fatalf("refusing an 8 GiB file allocated %d bytes", grew)
	}
	if !strings.Contains(err.Error(), "limit") {
		t.Fatalf("message %q does not state the limit", err)
	}
}

func TestWriteNeverThroughHardLink(t *testing.T) {
	top := makeTree(t, baseTree)
	outside := filepath.Join(top, "outside", "secret")
	if err := os.Link(outside, filepath.Join(top, "ws", "hl")); err != nil {
		t.Fatal(err)
	}
	w := openWS(t, top)
	if err := w.WriteFile("hl", []byte("NEW")); err != nil {
		t.Fatal(err)
	}
	if err := w.Edit("hl", "NEW", "EDITED"); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(outside); string(got) != "outside/secret" {
		t.Fatalf("the outside file changed through a hard link: %q", got)
	}
	if got, _ := os.ReadFile(filepath.Join(top, "ws", "hl")); string(got) != "EDITED" {
		t.Fatalf("ws/hl = %q", got)
	}
}

func TestWriteKeepsModeAndLeavesNoTemporaryFiles(t *testing.T) {
	top := makeTree(t, baseTree)
	ws := filepath.Join(top, "ws")
	if err := os.Chmod(filepath.Join(ws, "file"), 0o750); err != nil {
		t.Fatal(err)
	}
	w := openWS(t, top)
	if err := w.WriteFile("file", []byte("x")); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(ws, "file"))
	if err != nil || fi.Mode().Perm() != 0o750 {
		t.Fatalf("mode after write: %v, %v; want 0750", fi.Mode(), err)
	}
	if err := w.WriteFile("dir", []byte("x")); !errors.Is(err, ErrIsDir) {
		t.Fatalf("write onto a directory: %v, want ErrIsDir", err)
	}
	for _, d := range []string{ws, filepath.Join(ws, "dir")} {
		des, _ := os.ReadDir(d)
		for _, de := range des {
			if strings.HasPrefix(de.Name(), ".cordon-") {
				t.Fatalf("temporary file left behind: %s", de.Name())
			}
		}
	}
}

func TestEditUniqueness(t *testing.T) {
	top := makeTree(t, baseTree)
	ws := filepath.Join(top, "ws")
	os.WriteFile(filepath.Join(ws, "f.go"), []byte("a b a"), 0o644)
	w := openWS(t, top)
	if err := w.Edit("f.go", "a", "c"); !errors.Is(err, ErrNotUnique) || !strings.Contains(err.Error(), "2 times") {
		t.Fatalf("edit of a repeated string: %v, want ErrNotUnique naming the count", err)
	}
	if err := w.Edit("f.go", "zzz", "c"); !errors.Is(err, ErrNoMatch) {
		t.Fatalf("edit of an absent string: %v, want ErrNoMatch", err)
	}
	if err := w.Edit("f.go", "", "c"); !errors.Is(err, ErrInvalid) {
		t.Fatalf("edit of an empty string: %v, want ErrInvalid", err)
	}
	if got, _ := os.ReadFile(filepath.Join(ws, "f.go")); string(got) != "a b a" {
		t.Fatalf("failed edits changed the file: %q", got)
	}
	if err := w.Edit("f.go", "b", "B"); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(filepath.Join(ws, "f.go")); string(got) != "a B a" {
		t.Fatalf("after edit: %q", got)
	}
}

func TestHarnessStateIsConfigurable(t *testing.T) {
	top := makeTree(t, append(baseTree, "ws/.state/x"))
	w := openWS(t, top, WithHarness(harness.Default().WithState(".state")))
	if _, err := w.ReadFile(".state/x"); !errors.Is(err, ErrHarnessState) {
		t.Fatalf("custom harness state: %v", err)
	}
	if _, err := w.ReadFile(".efferent/secret"); err != nil {
		t.Fatalf("with a custom list, .efferent is ordinary: %v", err)
	}
	if _, err := Open(filepath.Join(top, "ws"), WithHarness(harness.Default().WithState("a/b"))); err == nil {
		t.Fatal("a harness name with a slash was accepted")
	}
	// A per-command addition keeps the defaults.
	w = openWS(t, top, WithHarness(harness.Default().AddState(".state")))
	for _, p := range []string{".state/x", ".efferent/secret"} {
		if _, err := w.ReadFile(p); !errors.Is(err, ErrHarnessState) {
			t.Errorf("with .state added, %s: %v; want ErrHarnessState", p, err)
		}
	}
}

func TestInvalidPaths(t *testing.T) {
	top := makeTree(t, baseTree)
	w := openWS(t, top)
	for _, p := range []string{"", "a\x00b", strings.Repeat("a/", 3000)} {
		if _, err := w.ReadFile(p); !errors.Is(err, ErrInvalid) {
			t.Errorf("read %q: %v, want ErrInvalid", p, err)
		}
	}
}

// TestRaceSwapDirectoryForSymlink swaps a directory of the workspace for a
// symlink to a directory outside (and to harness state) while reads and
// writes run through it. The outside files are never read or changed.
func TestRaceSwapDirectoryForSymlink(t *testing.T) {
	top := makeTree(t, append(baseTree, "ws/d/f", "outside/f", "ws/.efferent/f"))
	ws := filepath.Join(top, "ws")
	w := openWS(t, top)
	outsideF := filepath.Join(top, "outside", "f")
	harnessF := filepath.Join(ws, ".efferent", "f")
	os.WriteFile(outsideF, []byte("OUTSIDE"), 0o644)
	os.WriteFile(harnessF, []byte("HARNESS"), 0o644)

	stop := make(chan struct{})
	var wg sync.WaitGroup
	var swaps atomic.Int64
	wg.Add(1)
	go func() {
		defer wg.Done()
		d, real := filepath.Join(ws, "d"), filepath.Join(ws, "d.real")
		targets := []string{"../outside", filepath.Join(top, "outside"), ".efferent"}
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			// d is a directory; swap it for a symlink and back.
			os.Rename(d, real)
			os.Symlink(targets[i%len(targets)], d)
			runtime.Gosched()
			os.Remove(d)
			os.Rename(real, d)
			swaps.Add(1)
			// As long a window with d a directory: a write takes more steps
			// than a read, and on a loaded machine (two cores, the race
			// detector) a swapper that yields only while d is a link can
			// leave no write a whole window.
			runtime.Gosched()
		}
	}()
	var reads, writes, refusals atomic.Int64
	// The race runs for at least 700 ms and then until each kind of call
	// has succeeded once (a check that it ran at all), for at most 20 s.
	start := time.Now()
	running := func() bool {
		took := time.Since(start)
		if took < 700*time.Millisecond {
			return true
		}
		ran := reads.Load() > 0 && writes.Load() > 0 && swaps.Load() > 0
		return !ran && took < 20*time.Second
	}
	done := make(chan struct{})
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for running() {
				if g%2 == 0 {
					data, err := w.ReadFile("d/f")
					if err == nil {
						reads.Add(1)
						if bytes.Contains(data, []byte("OUTSIDE")) || bytes.Contains(data, []byte("HARNESS")) {
							t.Errorf("read outside the boundary: %q", data)
							return
						}
					} else if isPolicy(err) {
						refusals.Add(1)
					}
				} else {
					if err := w.WriteFile("d/f", []byte("NEW")); err == nil {
						writes.Add(1)
					} else if isPolicy(err) {
						refusals.Add(1)
					}
				}
			}
		}(g)
	}
	go func() {
		for running() {
			time.Sleep(10 * time.Millisecond)
		}
		close(done)
	}()
	<-done
	close(stop)
	wg.Wait()
	if got, _ := os.ReadFile(outsideF); string(got) != "OUTSIDE" {
		t.Fatalf("the outside file changed: %q", got)
	}
	if got, _ := os.ReadFile(harnessF); string(got) != "HARNESS" {
		t.Fatalf("the harness file changed: %q", got)
	}
	des, _ := os.ReadDir(filepath.Join(top, "outside"))
	if len(des) != 2 {
		t.Fatalf("files appeared outside: %v", des)
	}
	des, _ = os.ReadDir(filepath.Join(ws, ".efferent"))
	if len(des) != 2 {
		t.Fatalf("files appeared in harness state: %v", des)
	}
	t.Logf("%d swaps, %d reads, %d writes, %d refusals", swaps.Load(), reads.Load(), writes.Load(), refusals.Load())
	if reads.Load() == 0 || writes.Load() == 0 || swaps.Load() == 0 {
		t.Fatal("the race did not run: no successful read, write or swap")
	}
}

// TestAtomicWriteReaders hammers a file with writes of two whole contents
// while readers check they only ever see one of them.
func TestAtomicWriteReaders(t *testing.T) {
	top := makeTree(t, baseTree)
	w := openWS(t, top, WithSync(false))
	a, b := bytes.Repeat([]byte("a"), 4096), bytes.Repeat([]byte("b"), 4096)
	if err := w.WriteFile("f", a); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			data := a
			if i%2 == 1 {
				data = b
			}
			if err := w.WriteFile("f", data); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	for i := 0; i < 3000; i++ {
		got, err := w.ReadFile("f")
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, a) && !bytes.Equal(got, b) {
			t.Fatalf("a reader saw a partial write (%d bytes)", len(got))
		}
	}
	close(stop)
	wg.Wait()
}
