//go:build unix

package workspace

import (
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// kernelTree is the layout of the kernel-semantics cases: a symlink a whose
// target's parent is b, a file beside the link's target, and a file of the
// same name at the top that lexical cleaning would reach instead.
var kernelTree = []string{
	"ws/target", "ws/b/target", "ws/b/c/",
	"ws/a => b/c", "ws/abs => $WS/b/c",
	"ws/file", "ws/dir/", "ws/ldir => dir", "ws/lfile => file",
}

// TestDotDotAfterSymlink: ".." after a symlink goes to the parent of the
// link's target, for every operation, as in the kernel and os.Root.
func TestDotDotAfterSymlink(t *testing.T) {
	top := makeTree(t, kernelTree)
	w := openWS(t, top)
	root, err := os.OpenRoot(filepath.Join(top, "ws"))
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	for _, p := range []string{"a/../target", "a/./../target", "a/../c/../target", "abs/../target"} {
		got, err := w.ReadFile(p)
		if err != nil || string(got) != "ws/b/target" {
			t.Errorf("read %q = %q, %v; want ws/b/target", p, got, err)
		}
		if !strings.HasPrefix(p, "abs") { // os.Root refuses absolute links
			want, err := root.ReadFile(p)
			if err != nil || string(want) != string(got) {
				t.Errorf("os.Root read %q = %q, %v; cordon read %q", p, want, err, got)
			}
		}
		if e, err := w.Stat(p); err != nil || e.Size != int64(len("ws/b/target")) || e.Name != "target" {
			t.Errorf("stat %q = %+v, %v", p, e, err)
		}
	}
	if err := w.WriteFile("a/../new", []byte("x")); err != nil {
		t.Fatal(err)
	}
	assertFile(t, filepath.Join(top, "ws/b/new"), "x")
	if _, err := os.Lstat(filepath.Join(top, "ws/new")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("write a/../new created ws/new: %v", err)
	}
	if err := w.Edit("a/../target", "ws/b/target", "edited"); err != nil {
		t.Fatal(err)
	}
	assertFile(t, filepath.Join(top, "ws/b/target"), "edited")
	assertFile(t, filepath.Join(top, "ws/target"), "ws/target")
	// Lstat and Readlink keep the last component: a/../lfile is the
	// symlink b/lfile, which does not exist; ../lfile from dir is.
	if _, err := w.Lstat("a/../lfile"); !errors.Is(err, ErrNotFound) {
		t.Errorf("lstat a/../lfile: %v, want not found", err)
	}
	if target, err := w.Readlink("dir/../lfile"); err != nil || target != "file" {
		t.Errorf("readlink dir/../lfile = %q, %v", target, err)
	}
	// A ".." that would climb out is refused even when the kernel would
	// come back in; one through a file or a missing directory fails as
	// the kernel's lookup does.
	for p, want := range map[string]error{
		"a/../../../ws/target": ErrOutsideWorkspace, "file/../target": ErrNotDir,
		"missing/../target": ErrNotFound, "lfile/../target": ErrNotDir, "file/..": ErrNotDir,
	} {
		if _, err := w.ReadFile(p); !errors.Is(err, want) {
			t.Errorf("read %q: %v, want %v", p, err, want)
		}
		if err := w.WriteFile(p, []byte("x")); !errors.Is(err, want) {
			t.Errorf("write %q: %v, want %v", p, err, want)
		}
	}
}

// TestTrailingSlash: a name that ends in "/" names a directory; on anything
// else the kernel answers ENOTDIR (EISDIR when creating).
func TestTrailingSlash(t *testing.T) {
	top := makeTree(t, kernelTree)
	w := openWS(t, top)
	for _, p := range []string{"file/", "file/.", "lfile/", "missing/"} {
		want := ErrNotDir
		if p == "missing/" {
			want = ErrNotFound
		}
		if _, err := w.ReadFile(p); !errors.Is(err, want) {
			t.Errorf("read %q: %v, want %v", p, err, want)
		}
		if _, err := w.Stat(p); !errors.Is(err, want) {
			t.Errorf("stat %q: %v, want %v", p, err, want)
		}
		if _, err := w.Info(p); !errors.Is(err, want) {
			t.Errorf("info %q: %v, want %v", p, err, want)
		}
		if err := w.WriteFile(p, []byte("x")); !errors.Is(err, ErrIsDir) {
			t.Errorf("write %q: %v, want %v", p, err, ErrIsDir)
		}
		if f, err := w.OpenFile(p, os.O_WRONLY|os.O_CREATE, 0o644); err == nil {
			f.Close()
			t.Errorf("open %q for creating succeeded", p)
		}
		if err := w.Remove(p); err == nil {
			t.Errorf("remove %q succeeded", p)
		}
	}
	assertFile(t, filepath.Join(top, "ws/file"), "ws/file")
	if _, err := os.Lstat(filepath.Join(top, "ws/missing")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a write of missing/ created something: %v", err)
	}
	if _, err := os.Lstat(filepath.Join(top, "ws/lfile")); err != nil {
		t.Errorf("remove lfile/ removed the link: %v", err)
	}
	// On a directory, or a link to one, the slash is what it is in the
	// kernel: followed.
	for _, p := range []string{"dir/", "ldir/", "ldir/."} {
		if e, err := w.Stat(p); err != nil || e.Type != "dir" {
			t.Errorf("stat %q = %+v, %v", p, e, err)
		}
		if fi, err := w.Lstat(p); err != nil || !fi.IsDir() {
			t.Errorf("lstat %q = %v, %v: the kernel follows a link before a trailing slash", p, fi, err)
		}
		if f, err := w.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW, 0); err != nil {
			t.Errorf("open %q with O_NOFOLLOW: %v", p, err)
		} else {
			f.Close()
		}
	}
	if _, err := w.Readlink("ldir/"); !errors.Is(err, unix.EINVAL) {
		t.Errorf("readlink ldir/: %v, want EINVAL", err)
	}
	if err := w.Mkdir("made/", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := w.RemoveDir("made/"); err != nil {
		t.Fatal(err)
	}
	if err := w.RemoveDir("ldir/"); !errors.Is(err, ErrNotDir) {
		t.Errorf("rmdir ldir/: %v, want not a directory (rmdir does not follow)", err)
	}
	if err := w.Rename("file/", "moved"); !errors.Is(err, ErrNotDir) {
		t.Errorf("rename file/: %v, want not a directory", err)
	}
}

// TestOpenRootWithAnyFlags: the workspace itself opens with O_NOFOLLOW and
// O_DIRECTORY, as WASI runtimes open a preopen.
func TestOpenRootWithAnyFlags(t *testing.T) {
	w := openWS(t, makeTree(t, kernelTree))
	for _, name := range []string{".", "./", "dir/..", w.Root(), w.Root() + "/"} {
		for _, flag := range []int{os.O_RDONLY, os.O_RDONLY | syscall.O_NOFOLLOW, os.O_RDONLY | syscall.O_DIRECTORY | syscall.O_NOFOLLOW} {
			f, err := w.OpenFile(name, flag, 0)
			if err != nil {
				t.Errorf("open %q with flags %#x: %v", name, flag, err)
				continue
			}
			if !w.isRootFile(f) {
				t.Errorf("open %q opened something else than the workspace", name)
			}
			f.Close()
		}
	}
}

// TestPathLengthIsTheKernels: 4095 bytes pass the check and reach the
// kernel (which answers with a classified error), 4096 are refused as the
// kernel would refuse them.
func TestPathLengthIsTheKernels(t *testing.T) {
	w := openWS(t, makeTree(t, kernelTree))
	long := func(n int) string {
		var b strings.Builder
		for b.Len() < n {
			b.WriteString("d/")
		}
		return b.String()[:n-1] + "x"
	}
	if _, err := w.ReadFile(long(4096)); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "4095") {
		t.Errorf("read of a 4096-byte path: %v", err)
	}
	if _, err := w.ReadFile(long(4095)); !errors.Is(err, ErrNotFound) {
		t.Errorf("read of a 4095-byte path: %v, want not found", err)
	}
	if _, err := w.ReadFile(strings.Repeat("n", 256)); !errors.Is(err, ErrInvalid) {
		t.Errorf("read of a 256-byte name: %v, want invalid", err)
	}
}

// TestWriteOntoSpecialFiles: a write onto a FIFO or a device is NotRegular,
// and leaves it in place.
func TestWriteOntoSpecialFiles(t *testing.T) {
	top := makeTree(t, kernelTree)
	if err := unix.Mkfifo(filepath.Join(top, "ws/fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	w := openWS(t, top)
	names := []string{"fifo"}
	if err := os.Symlink("/dev/null", filepath.Join(top, "ws/devnull")); err == nil && os.Getuid() == 0 {
		if unix.Mknod(filepath.Join(top, "ws/null"), unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))) == nil {
			names = append(names, "null")
		}
	}
	for _, n := range names {
		err := w.WriteFile(n, []byte("x"))
		if !errors.Is(err, ErrNotRegular) || !strings.Contains(err.Error(), n) {
			t.Errorf("write %s: %v, want NotRegular", n, err)
		}
		if fi, err := os.Lstat(filepath.Join(top, "ws", n)); err != nil || fi.Mode().IsRegular() {
			t.Errorf("%s was replaced: %v %v", n, fi, err)
		}
	}
}

// TestStatNamesWhatItWasAsked: stat of a symlink names the link, not its
// target.
func TestStatNamesWhatItWasAsked(t *testing.T) {
	w := openWS(t, makeTree(t, kernelTree))
	for p, want := range map[string]string{"lfile": "lfile", "ldir/": "ldir", "dir/../file": "file", ".": "."} {
		if e, err := w.Stat(p); err != nil || e.Name != want {
			t.Errorf("stat %q named %q (%v), want %q", p, e.Name, err, want)
		}
		if fi, err := w.Info(p); err != nil || fi.Name() != want {
			t.Errorf("info %q: %v", p, err)
		}
	}
}

// TestLastDotAndLinkSlash: a last component "." is one rename, rmdir and
// mkdir refuse, as the kernel does; a link whose target ends in "/" names
// a directory even when the target is missing, so a write through it
// creates nothing.
func TestLastDotAndLinkSlash(t *testing.T) {
	top := makeTree(t, append(kernelTree, "ws/empty/", "ws/toslash => missing/"))
	w := openWS(t, top)
	if err := w.Rename("dir/.", "moved"); err == nil {
		t.Error(`rename "dir/." succeeded; the kernel answers EBUSY`)
	}
	if err := w.RemoveDir("empty/."); err == nil {
		t.Error(`rmdir "empty/." succeeded; the kernel answers EINVAL`)
	}
	if err := w.Mkdir("new/.", 0o755); err == nil {
		t.Error(`mkdir "new/." succeeded; the kernel answers ENOENT`)
	}
	if err := w.WriteFile("toslash", []byte("x")); !errors.Is(err, ErrIsDir) {
		t.Errorf("write through a link to missing/: %v, want is a directory", err)
	}
	if f, err := w.OpenFile("toslash", os.O_WRONLY|os.O_CREATE, 0o644); err == nil {
		f.Close()
		t.Error("open for creating through a link to missing/ succeeded")
	}
	for _, p := range []string{"dir", "empty", "moved", "new", "missing"} {
		_, err := os.Lstat(filepath.Join(top, "ws", p))
		if exists := err == nil; exists != (p == "dir" || p == "empty") {
			t.Errorf("%s: exists %v", p, exists)
		}
	}
}

// TestLinksAndTimesStayInside: the attacks on Symlink, Link and Chtimes.
// A trailing slash never makes Chtimes follow a link out or into harness
// state; a time is never set through a second hard link; a link is never
// made at an absent directory on the way to a write-later path.
func TestLinksAndTimesStayInside(t *testing.T) {
	top := makeTree(t, append(kernelTree, "outside/dir/", "ws/.efferent/key",
		"ws/linkout => ../outside/dir", "ws/eff => .efferent", "ws/hk => .git/hooks", "outside/twin"))
	for _, args := range [][]string{{"init", "-q"}, {"config", "core.hooksPath", "tools/hooks"}} {
		cmd := exec.Command("git", args...)
		cmd.Dir = filepath.Join(top, "ws")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	if err := os.Link(filepath.Join(top, "outside/twin"), filepath.Join(top, "ws/twin")); err != nil {
		t.Fatal(err)
	}
	w := openWS(t, top)
	mtime := func(p string) int64 {
		fi, err := os.Stat(filepath.Join(top, p))
		if err != nil {
			t.Fatal(err)
		}
		return fi.ModTime().UnixNano()
	}
	guarded := []string{"outside/dir", "ws/.efferent", "ws/.git/hooks", "outside/twin"}
	before := map[string]int64{}
	for _, p := range guarded {
		before[p] = mtime(p)
	}
	const when = int64(981173106) * 1e9
	for _, name := range []string{"linkout/", "linkout/.", "eff/", "hk/", "twin"} {
		for _, follow := range []bool{false, true} {
			if err := w.Chtimes(name, when, when, follow); err == nil {
				t.Errorf("chtimes %q (follow %v) succeeded", name, follow)
			}
		}
	}
	for _, p := range guarded {
		if mtime(p) != before[p] {
			t.Errorf("%s: its time was changed", p)
		}
	}
	if err := w.Chtimes("file", when, when, true); err != nil || mtime("ws/file") != when {
		t.Errorf("chtimes file: %v", err)
	}
	if err := w.Mkdir("evil", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := w.Symlink("evil", "tools"); !errors.Is(err, ErrWriteLater) {
		t.Errorf("symlink at the absent hooks path's directory: %v, want WriteLater", err)
	}
	if err := w.Link("file", "tools"); !errors.Is(err, ErrWriteLater) {
		t.Errorf("hard link at the absent hooks path's directory: %v, want WriteLater", err)
	}
	if _, err := os.Lstat(filepath.Join(top, "ws/tools")); err == nil {
		t.Error("something was made at tools")
	}
}
