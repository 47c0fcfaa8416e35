//go:build unix

package dirfd

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"golang.org/x/sys/unix"
)

// TestReadersAgreeWithOS reads directories larger than one buffer, and
// entries of every type, as os.ReadDir does.
func TestReadersAgreeWithOS(t *testing.T) {
	top := t.TempDir()
	for _, n := range []int{0, 1, 300} {
		d := filepath.Join(top, fmt.Sprint("d", n))
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		for i := range n {
			name := filepath.Join(d, fmt.Sprintf("entry-with-a-name-long-enough-to-fill-buffers-%04d", i))
			var err error
			switch i % 4 {
			case 0:
				err = os.WriteFile(name, nil, 0o644)
			case 1:
				err = os.Mkdir(name, 0o755)
			case 2:
				err = os.Symlink(".", name)
			case 3:
				err = unix.Mkfifo(name, 0o644)
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		want, err := os.ReadDir(d)
		if err != nil {
			t.Fatal(err)
		}
		names, err := ReadNames(unix.AT_FDCWD, d, unix.O_NOFOLLOW)
		if err != nil {
			t.Fatal(err)
		}
		entries, err := ReadEntries(unix.AT_FDCWD, d, unix.O_NOFOLLOW)
		if err != nil {
			t.Fatal(err)
		}
		slices.Sort(names)
		slices.SortFunc(entries, func(a, b Entry) int {
			if a.Name < b.Name {
				return -1
			}
			return 1
		})
		if len(names) != len(want) || len(entries) != len(want) {
			t.Fatalf("%s: %d names, %d entries; os.ReadDir has %d", d, len(names), len(entries), len(want))
		}
		for i, w := range want {
			wt := fs.ModeIrregular
			switch {
			case w.Type().IsDir():
				wt = fs.ModeDir
			case w.Type()&fs.ModeSymlink != 0:
				wt = fs.ModeSymlink
			case w.Type().IsRegular():
				wt = 0
			}
			if names[i] != w.Name() || entries[i].Name != w.Name() || entries[i].Type != wt || entries[i].IsDir() != w.IsDir() {
				t.Errorf("%s: entry %d is %q / %q %v; os.ReadDir: %q %v", d, i, names[i], entries[i].Name, entries[i].Type, w.Name(), wt)
			}
		}
		if empty, err := IsEmpty(unix.AT_FDCWD, d, unix.O_NOFOLLOW); err != nil || empty != (n == 0) {
			t.Errorf("IsEmpty(%s) = %v, %v; it has %d entries", d, empty, err, n)
		}
	}
	// Not through a symlink; not a file.
	link := filepath.Join(top, "link")
	if err := os.Symlink("d300", link); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{link, filepath.Join(top, "d300", "entry-with-a-name-long-enough-to-fill-buffers-0000")} {
		if _, err := ReadNames(unix.AT_FDCWD, p, unix.O_NOFOLLOW); err == nil {
			t.Errorf("ReadNames(%s) read it", p)
		}
		if _, err := ReadEntries(unix.AT_FDCWD, p, unix.O_NOFOLLOW); err == nil {
			t.Errorf("ReadEntries(%s) read it", p)
		}
		if empty, err := IsEmpty(unix.AT_FDCWD, p, unix.O_NOFOLLOW); empty || err == nil {
			t.Errorf("IsEmpty(%s) = %v, %v", p, empty, err)
		}
	}
}

func TestReadSmall(t *testing.T) {
	top := t.TempDir()
	write := func(name string, data []byte) string {
		p := filepath.Join(top, name)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	long := bytes.Repeat([]byte("0123456789"), 1000)
	for _, c := range []struct {
		path  string
		limit int
		want  []byte
	}{
		{write("empty", nil), 4096, nil},
		{write("short", []byte("ref: refs/heads/main\n")), 4096, []byte("ref: refs/heads/main\n")},
		{write("exact", long[:4096]), 4096, long[:4096]},
		{write("long", long), 4096, long[:4096]},
		{filepath.Join(top, "long"), 20000, long},
	} {
		got, err := ReadSmall(unix.AT_FDCWD, c.path, 0, c.limit)
		if err != nil || !bytes.Equal(got, c.want) {
			t.Errorf("ReadSmall(%s, %d) = %d bytes, %v; want %d", c.path, c.limit, len(got), err, len(c.want))
		}
	}
	// A file whose size says 0 but that has content (procfs) is read.
	if got, err := ReadSmall(unix.AT_FDCWD, "/proc/self/stat", 0, 4096); err != nil || len(got) == 0 {
		t.Errorf("ReadSmall(/proc/self/stat) = %q, %v", got, err)
	}
	// A FIFO is refused without blocking; a directory too; a symlink with
	// O_NOFOLLOW.
	fifo := filepath.Join(top, "fifo")
	if err := unix.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadSmall(unix.AT_FDCWD, fifo, 0, 4096); !errors.Is(err, ErrNotRegular) {
		t.Errorf("ReadSmall of a FIFO: %v; want ErrNotRegular", err)
	}
	if _, err := ReadSmall(unix.AT_FDCWD, top, 0, 4096); !errors.Is(err, ErrNotRegular) {
		t.Errorf("ReadSmall of a directory: %v; want ErrNotRegular", err)
	}
	if err := os.Symlink("short", filepath.Join(top, "link")); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadSmall(unix.AT_FDCWD, filepath.Join(top, "link"), unix.O_NOFOLLOW, 4096); !errors.Is(err, unix.ELOOP) {
		t.Errorf("ReadSmall of a symlink with O_NOFOLLOW: %v; want ELOOP", err)
	}
}
