package workspace

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// openWS opens top/ws as the workspace.
func openWS(t testing.TB, top string, opts ...Option) *Workspace {
	t.Helper()
	w, err := Open(filepath.Join(top, "ws"), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	return w
}

// checkRefusal checks that err is want and, for a refusal of the boundary,
// that it is a *PathError whose message names the operation, the path and
// the boundary.
func checkRefusal(t *testing.T, op, path string, w *Workspace, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("%s %q: got error %v, want %v", op, path, err, want)
	}
	var pe *PathError
	if !errors.As(err, &pe) {
		t.Fatalf("%s %q: error %T is not a *PathError", op, path, err)
	}
	if pe.Op != op || pe.Path != path {
		t.Errorf("PathError{Op: %q, Path: %q}, want %q, %q", pe.Op, pe.Path, op, path)
	}
	msg := err.Error()
	if isPolicy(want) && (!strings.Contains(msg, op) || !strings.Contains(msg, path) || !strings.Contains(msg, w.Root())) {
		t.Errorf("message %q does not name the operation, the path and the boundary %s", msg, w.Root())
	}
}

// checkNaive proves that a refused case is refused by the guard: the same
// path, opened with the plain os package from the workspace, reaches the
// file the guard protects.
func checkNaive(t *testing.T, c pathCase, top, path string) {
	t.Helper()
	if !isPolicy(c.want) || c.target == "" || c.want == ErrSymlinkLoop {
		return
	}
	p := path
	if !filepath.IsAbs(p) {
		p = filepath.Join(top, "ws", p)
	}
	got, err := os.ReadFile(p)
	if errors.Is(err, os.ErrNotExist) && !strings.HasSuffix(c.target, "new") && !strings.HasSuffix(c.target, "planted") {
		t.Fatalf("naive read of %s: %v; the case does not exercise the guard", p, err)
	}
	if err == nil && string(got) != c.target {
		t.Fatalf("naive read of %s = %q, want the target %q; the case is wrong", p, got, c.target)
	}
}

func TestReadReplay(t *testing.T) {
	for _, c := range pathCases {
		t.Run(c.name, func(t *testing.T) {
			top, path := c.setup(t)
			checkNaive(t, c, top, path)
			w := openWS(t, top)
			before := snapshot(t, top)
			got, err := w.ReadFile(path)
			if c.want != nil {
				checkRefusal(t, "read", path, w, err, c.want)
				if c.target != "" && got != nil {
					t.Fatalf("refused read returned data %q", got)
				}
			} else if err != nil {
				t.Fatalf("read %q: %v", path, err)
			} else if string(got) != c.target {
				t.Fatalf("read %q = %q, want contents of %s", path, got, c.target)
			}
			if d := diff(before, snapshot(t, top)); len(d) > 0 {
				t.Fatalf("read changed the tree: %v", d)
			}
		})
	}
}

func TestStatReplay(t *testing.T) {
	for _, c := range pathCases {
		t.Run(c.name, func(t *testing.T) {
			top, path := c.setup(t)
			w := openWS(t, top)
			before := snapshot(t, top)
			en, err := w.Stat(path)
			if c.want != nil {
				checkRefusal(t, "stat", path, w, err, c.want)
			} else if err != nil {
				t.Fatalf("stat %q: %v", path, err)
			} else if en.Type != "file" || en.Size != int64(len(c.target)) {
				t.Fatalf("stat %q = %+v, want the file %s of size %d", path, en, c.target, len(c.target))
			}
			if d := diff(before, snapshot(t, top)); len(d) > 0 {
				t.Fatalf("stat changed the tree: %v", d)
			}
		})
	}
}

func TestWriteReplay(t *testing.T) {
	for _, c := range pathCases {
		t.Run(c.name, func(t *testing.T) {
			top, path := c.setup(t)
			w := openWS(t, top)
			want, target := c.write()
			before := snapshot(t, top)
			err := w.WriteFile(path, []byte("NEW"))
			after := snapshot(t, top)
			changed := diff(before, after)
			if want != nil {
				checkRefusal(t, "write", path, w, err, want)
				if len(changed) > 0 {
					t.Fatalf("refused write changed the tree: %v", changed)
				}
				return
			}
			if err != nil {
				t.Fatalf("write %q: %v", path, err)
			}
			if after[target] != "file:NEW" {
				t.Fatalf("write %q: %s = %q, want file:NEW", path, target, after[target])
			}
			// Only the target and the directories created for it changed.
			for _, p := range changed {
				if p != target && !(after[p] == "dir" && strings.HasPrefix(target, p+"/")) {
					t.Fatalf("write %q changed %s too (all changes: %v)", path, p, changed)
				}
			}
			if strings.HasPrefix(before[filepath.Join("ws", c.path)], "link:") && !strings.HasPrefix(after[filepath.Join("ws", c.path)], "link:") {
				t.Fatalf("write %q replaced the symlink instead of its target", path)
			}
		})
	}
}

func TestEditReplay(t *testing.T) {
	for _, c := range pathCases {
		t.Run(c.name, func(t *testing.T) {
			top, path := c.setup(t)
			w := openWS(t, top)
			before := snapshot(t, top)
			old := c.target
			if old == "" {
				old = "x"
			}
			err := w.Edit(path, old, "EDITED")
			after := snapshot(t, top)
			if c.want != nil {
				checkRefusal(t, "edit", path, w, err, c.want)
				if d := diff(before, after); len(d) > 0 {
					t.Fatalf("refused edit changed the tree: %v", d)
				}
				return
			}
			if err != nil {
				t.Fatalf("edit %q: %v", path, err)
			}
			if d := diff(before, after); !slices.Equal(d, []string{c.target}) || after[c.target] != "file:EDITED" {
				t.Fatalf("edit %q changed %v (%s = %q), want only %s", path, d, c.target, after[c.target], c.target)
			}
		})
	}
}

// dirCases replays the boundary against List.
var dirCases = []pathCase{
	{name: "root", path: ".", target: "ws"},
	{name: "root absolute", path: "$WS", target: "ws"},
	{name: "subdirectory", path: "dir", target: "ws/dir"},
	{name: "directory symlink inside", fs: []string{"ws/lid => dir"}, path: "lid", target: "ws/dir"},
	{name: "parent", path: "..", want: ErrOutsideWorkspace},
	{name: "outside absolute", path: "$T/outside", want: ErrOutsideWorkspace},
	{name: "directory symlink out", fs: []string{"ws/ld => ../outside"}, path: "ld", want: ErrOutsideWorkspace},
	{name: "sibling prefix", path: "$T/ws-old", want: ErrOutsideWorkspace},
	{name: "harness", path: ".efferent", want: ErrHarnessState},
	{name: "symlink to harness", fs: []string{"ws/lh => .foundry"}, path: "lh", want: ErrHarnessState},
	{name: "a file", path: "file", want: ErrNotDir},
	{name: "missing", path: "nothere", want: ErrNotFound},
}

func TestListReplay(t *testing.T) {
	for _, c := range dirCases {
		t.Run(c.name, func(t *testing.T) {
			top, path := c.setup(t)
			w := openWS(t, top)
			entries, _, err := w.List(path)
			if c.want != nil {
				checkRefusal(t, "list", path, w, err, c.want)
				if entries != nil {
					t.Fatalf("refused list returned %v", entries)
				}
				return
			}
			if err != nil {
				t.Fatalf("list %q: %v", path, err)
			}
			var got []string
			for _, e := range entries {
				got = append(got, e.Name)
			}
			des, err := os.ReadDir(filepath.Join(top, c.target))
			if err != nil {
				t.Fatal(err)
			}
			var want []string
			for _, d := range des {
				if c.target == "ws" && (d.Name() == ".efferent" || d.Name() == ".foundry") {
					continue
				}
				want = append(want, d.Name())
			}
			if !slices.Equal(got, want) {
				t.Fatalf("list %q = %v, want %v (harness state left out)", path, got, want)
			}
		})
	}
}
