//go:build unix

package workspace

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// A differential test of the guard against os.Root, the standard library's
// implementation of the kernel's semantics beneath a directory. A layout
// (files, directories, relative and absolute symlinks, loops) is built
// twice: as it is for the guard, and for os.Root with every absolute
// symlink into the workspace rewritten as the relative link it stands for
// (the one documented difference: os.Root refuses every absolute symlink,
// the guard follows one whose target is inside the workspace). Then a path
// must be refused by both or reach the same file in both.

var diffNames = []string{"a", "b", "c"}

// diffLayout decodes a layout from fuzz bytes: entries of a kind, a
// directory to put them in, a name and, for links, a target.
type diffLayout struct {
	entries []diffEntry
}

type diffEntry struct {
	path   string // workspace-relative
	kind   byte   // 'f' file, 'd' directory, 'l' relative link, 'a' absolute link into the workspace, 'o' absolute link out
	target string // for links: the target as written, relative to the link's directory or to the workspace
}

type byteReader struct {
	b []byte
	i int
}

func (r *byteReader) next() byte {
	if r.i >= len(r.b) {
		return 0
	}
	r.i++
	return r.b[r.i-1]
}

func (r *byteReader) more() bool { return r.i < len(r.b) }

// diffPath decodes a path of up to 5 components from names, ".", "..",
// "" and a trailing slash.
func diffPath(r *byteReader) string {
	n := 1 + int(r.next()%5)
	var parts []string
	for range n {
		switch c := r.next() % 7; {
		case c < 3:
			parts = append(parts, diffNames[c])
		case c < 5:
			parts = append(parts, "..")
		case c == 5:
			parts = append(parts, ".")
		default:
			parts = append(parts, "")
		}
	}
	p := strings.Join(parts, "/")
	if r.next()%4 == 0 {
		p += "/"
	}
	if p == "" {
		p = "."
	}
	return p
}

func decodeLayout(data []byte) diffLayout {
	r := &byteReader{b: data}
	dirs := []string{""}
	var l diffLayout
	taken := map[string]bool{"": true}
	for r.more() && len(l.entries) < 12 {
		kind := "fdlla o"[r.next()%7]
		dir := dirs[int(r.next())%len(dirs)]
		p := filepath.Join(dir, diffNames[r.next()%3])
		if taken[p] {
			continue
		}
		taken[p] = true
		e := diffEntry{path: p, kind: kind}
		switch kind {
		case ' ':
			continue
		case 'd':
			dirs = append(dirs, p)
		case 'l', 'a', 'o':
			e.target = diffPath(r)
		}
		l.entries = append(l.entries, e)
	}
	return l
}

// build creates the layout under top/ws. With forRoot, absolute links into
// the workspace are written as the relative links they stand for. Every
// entry is listed by inode in ids, so that what each side opened can be
// named.
func (l diffLayout) build(t testing.TB, top string, forRoot bool) {
	ws := filepath.Join(top, "ws")
	if err := os.MkdirAll(filepath.Join(top, "outside", "a"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, e := range l.entries {
		p := filepath.Join(ws, e.path)
		var err error
		switch e.kind {
		case 'f':
			err = os.WriteFile(p, []byte(e.path), 0o644)
		case 'd':
			err = os.Mkdir(p, 0o755)
		case 'l':
			err = os.Symlink(e.target, p)
		case 'a':
			target := ws + "/" + e.target
			if forRoot {
				depth := strings.Count(e.path, "/")
				target = strings.Repeat("../", depth) + "./" + e.target
			}
			err = os.Symlink(target, p)
		case 'o':
			err = os.Symlink(filepath.Join(top, "outside")+"/"+e.target, p)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// ids names every inode under dir by its path relative to dir.
func ids(t testing.TB, dir string) map[uint64]string {
	m := map[uint64]string{}
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		var st syscall.Stat_t
		if syscall.Lstat(p, &st) == nil {
			rel, _ := filepath.Rel(dir, p)
			m[st.Ino] = rel
		}
		return nil
	})
	return m
}

// diffOutcome is what one side did with a path: the entry it reached, or
// that it failed.
func diffOutcome(fi fs.FileInfo, err error, names map[uint64]string) string {
	if err != nil {
		return "error"
	}
	var ino uint64
	switch st := fi.Sys().(type) {
	case *syscall.Stat_t:
		ino = st.Ino
	case *unix.Stat_t:
		ino = st.Ino
	default:
		return "no stat"
	}
	if n, ok := names[ino]; ok {
		return n
	}
	return fmt.Sprintf("inode %d, outside the layout", ino)
}

// compare runs every read-only operation on p through the guard and
// through os.Root and reports where they disagree.
func compare(t *testing.T, w *Workspace, root *os.Root, wsIDs, rootIDs map[uint64]string, p string) {
	gtop, rtop := filepath.Dir(w.Root()), filepath.Dir(root.Name())
	t.Helper()
	check := func(op string, g, r string) {
		t.Helper()
		if g != r {
			t.Errorf("%s %q: the guard reached %q, os.Root %q", op, p, g, r)
		}
	}
	gfi, gerr := w.Info(p)
	rfi, rerr := root.Stat(p)
	check("stat", diffOutcome(gfi, gerr, wsIDs), diffOutcome(rfi, rerr, rootIDs))
	gfi, gerr = w.Lstat(p)
	rfi, rerr = root.Lstat(p)
	check("lstat", diffOutcome(gfi, gerr, wsIDs), diffOutcome(rfi, rerr, rootIDs))
	gdata, gerr := w.ReadFile(p)
	rdata, rerr := root.ReadFile(p)
	g, r := string(gdata), string(rdata)
	if gerr != nil {
		g = "error"
	}
	if rerr != nil {
		r = "error"
	}
	check("read", g, r)
	gl, gerr := w.Readlink(p)
	rl, rerr := root.Readlink(p)
	gl, rl = strings.TrimPrefix(gl, gtop), strings.TrimPrefix(rl, rtop)
	if strings.HasPrefix(gl, "/ws/") && rerr == nil {
		rl = gl // an absolute link inside, rewritten for os.Root: the texts differ by design
	}
	if gerr != nil {
		gl = "error"
	}
	if rerr != nil {
		rl = "error"
	}
	check("readlink", gl, rl)
	if gf, err := w.OpenFile(p, os.O_RDONLY, 0); err == nil {
		gnames, _ := gf.Readdirnames(-1)
		gf.Close()
		rf, err := root.Open(p)
		if err != nil {
			t.Errorf("open %q: the guard opened it, os.Root: %v", p, err)
			return
		}
		rnames, _ := rf.Readdirnames(-1)
		rf.Close()
		slices.Sort(gnames)
		slices.Sort(rnames)
		if !slices.Equal(gnames, rnames) {
			t.Errorf("list %q: the guard %v, os.Root %v", p, gnames, rnames)
		}
	}
}

// diffSeeds are layouts and paths worth starting from: the cases of the
// issue that changed the guard (".." after a link, a trailing slash after
// a file, an absolute link inside, a loop).
var diffSeeds = []struct{ layout, path []byte }{
	{[]byte{1, 0, 1, 0, 0, 0, 2, 0, 0, 3, 1, 2, 3, 1, 0, 0}, []byte{2, 0, 3, 0, 0}},
	{[]byte{0, 0, 0, 2, 0, 1, 1, 0, 0, 1}, []byte{1, 1, 6, 0}},
	{[]byte{4, 0, 0, 2, 1, 1, 1, 0, 2, 0}, []byte{2, 0, 3, 1, 1}},
	{[]byte{2, 0, 0, 1, 0, 2, 0, 1, 1, 0, 0}, []byte{1, 0, 0, 1}},
	{[]byte{1, 0, 0, 0, 1, 1, 2, 0, 2, 3, 0, 3, 1, 1, 1}, []byte{4, 2, 3, 1, 5, 0, 0}},
}

func FuzzAgainstOSRoot(f *testing.F) {
	for _, s := range diffSeeds {
		f.Add(s.layout, s.path)
	}
	f.Fuzz(func(t *testing.T, layout, path []byte) {
		l := decodeLayout(layout)
		gtop, rtop := t.TempDir(), t.TempDir()
		l.build(t, gtop, false)
		l.build(t, rtop, true)
		w, err := Open(filepath.Join(gtop, "ws"))
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		root, err := os.OpenRoot(filepath.Join(rtop, "ws"))
		if err != nil {
			t.Fatal(err)
		}
		defer root.Close()
		wsIDs, rootIDs := ids(t, filepath.Join(gtop, "ws")), ids(t, filepath.Join(rtop, "ws"))
		r := &byteReader{b: path}
		for range 4 {
			p := diffPath(r)
			compare(t, w, root, wsIDs, rootIDs, p)
			if !r.more() {
				break
			}
		}
	})
}

// TestAgainstOSRootExhaustive walks every path of up to three components
// over a fixed layout with each kind of entry, and compares the guard with
// os.Root on each.
func TestAgainstOSRootExhaustive(t *testing.T) {
	l := diffLayout{entries: []diffEntry{
		{path: "a", kind: 'd'}, {path: "a/b", kind: 'd'}, {path: "a/b/c", kind: 'f'}, {path: "a/c", kind: 'f'},
		{path: "b", kind: 'l', target: "a/b"}, {path: "c", kind: 'f'},
		{path: "a/a", kind: 'a', target: "a/b/"}, {path: "a/b/a", kind: 'l', target: "../../c"},
		{path: "a/b/b", kind: 'l', target: "b"}, {path: "a/b/b2", kind: 'o', target: "a"},
		{path: "a/b/c2", kind: 'l', target: "c/"},
	}}
	gtop, rtop := t.TempDir(), t.TempDir()
	l.build(t, gtop, false)
	l.build(t, rtop, true)
	w := openWS(t, gtop)
	root, err := os.OpenRoot(filepath.Join(rtop, "ws"))
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	wsIDs, rootIDs := ids(t, filepath.Join(gtop, "ws")), ids(t, filepath.Join(rtop, "ws"))
	comps := []string{"a", "b", "c", "..", ".", "b2", "c2"}
	var paths []string
	var walk func(prefix string, depth int)
	walk = func(prefix string, depth int) {
		if depth == 3 {
			return
		}
		for _, c := range comps {
			p := c
			if prefix != "" {
				p = prefix + "/" + c
			}
			paths = append(paths, p, p+"/")
			walk(p, depth+1)
		}
	}
	walk("", 0)
	for _, p := range paths {
		compare(t, w, root, wsIDs, rootIDs, p)
	}
	if t.Failed() {
		return
	}
	t.Logf("%d paths agree", len(paths))
}
