package workspace

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// makeTree creates a test file tree in a fresh temporary directory T and
// returns T. The workspace is T/ws; the rest of T is "outside".
//
// Each entry is one of (a small language, as in os.Root's tests):
//
//   - "d/": directory d
//   - "f": file f whose contents are its own name
//   - "a => b": symlink a with target b
//
// $T is replaced with T's absolute path, $WS with T/ws. Parents are created.
func makeTree(t testing.TB, entries []string) string {
	t.Helper()
	top, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, ent := range entries {
		ent = strings.NewReplacer("$T", top, "$WS", filepath.Join(top, "ws")).Replace(ent)
		name, link, isLink := strings.Cut(ent, " => ")
		p := filepath.Join(top, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		switch {
		case isLink:
			err = os.Symlink(link, p)
		case strings.HasSuffix(name, "/"):
			err = os.MkdirAll(p, 0o755)
		default:
			err = os.WriteFile(p, []byte(name), 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return top
}

// baseTree is present in every case: a workspace with harness state, a file
// outside it and a sibling whose name starts with the workspace's.
var baseTree = []string{
	"ws/file",
	"ws/dir/sub",
	"ws/.efferent/secret",
	"ws/.foundry/receipt",
	"outside/secret",
	"ws-old/secret",
}

// snapshot records every entry under top: file contents, directories and
// link targets.
func snapshot(t testing.TB, top string) map[string]string {
	t.Helper()
	snap := map[string]string{}
	err := filepath.WalkDir(top, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(top, p)
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			l, err := os.Readlink(p)
			if err != nil {
				return err
			}
			snap[rel] = "link:" + l
		case d.IsDir():
			snap[rel] = "dir"
		default:
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			snap[rel] = "file:" + string(b)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return snap
}

// diff returns the entries of after that differ from before (added,
// changed or removed).
func diff(before, after map[string]string) []string {
	var d []string
	for k, v := range after {
		if before[k] != v {
			d = append(d, k)
		}
	}
	for k := range before {
		if _, ok := after[k]; !ok {
			d = append(d, k+" (removed)")
		}
	}
	return d
}

type pathCase struct {
	name string
	fs   []string // on top of baseTree
	path string   // what the caller asks for; $T and $WS are replaced

	// target is the file (relative to T) the operation must reach, or, for
	// a refusal, the file it must not reach.
	target string
	want   error // nil: success

	// For writes, when they differ from reads (a dangling link, a missing
	// file): the expected error and the file created.
	writeWant   error
	writeTarget string
	writeDiffer bool
}

var pathCases = []pathCase{
	{name: "plain", path: "file", target: "ws/file"},
	{name: "dot", path: "./file", target: "ws/file"},
	{name: "dot-dot inside", path: "dir/../file", target: "ws/file"},
	{name: "nested", path: "dir/./sub", target: "ws/dir/sub"},
	{name: "absolute inside", path: "$WS/file", target: "ws/file"},
	{name: "absolute with dot-dot inside", path: "$WS/dir/../file", target: "ws/file"},
	{name: "dot-dot outside", path: "../outside/secret", target: "outside/secret", want: ErrOutsideWorkspace},
	{name: "deep dot-dot outside", path: "dir/../../outside/secret", target: "outside/secret", want: ErrOutsideWorkspace},
	{name: "absolute outside", path: "$T/outside/secret", target: "outside/secret", want: ErrOutsideWorkspace},
	{name: "absolute system file", path: "/etc/passwd", want: ErrOutsideWorkspace},
	{name: "sibling prefix relative", path: "../ws-old/secret", target: "ws-old/secret", want: ErrOutsideWorkspace},
	{name: "sibling prefix absolute", path: "$T/ws-old/secret", target: "ws-old/secret", want: ErrOutsideWorkspace},
	{name: "sibling prefix via workspace", path: "$WS/../ws-old/secret", target: "ws-old/secret", want: ErrOutsideWorkspace},
	{name: "relative symlink out", fs: []string{"ws/lo => ../outside/secret"}, path: "lo", target: "outside/secret", want: ErrOutsideWorkspace},
	{name: "absolute symlink out", fs: []string{"ws/la => $T/outside/secret"}, path: "la", target: "outside/secret", want: ErrOutsideWorkspace},
	{name: "chained symlink out", fs: []string{"ws/c1 => dir/c2", "ws/dir/c2 => ../c3", "ws/c3 => ../outside/secret"}, path: "c1", target: "outside/secret", want: ErrOutsideWorkspace},
	{name: "directory symlink out", fs: []string{"ws/ld => ../outside"}, path: "ld/secret", target: "outside/secret", want: ErrOutsideWorkspace},
	{name: "symlink to sibling prefix", fs: []string{"ws/ls => $T/ws-old"}, path: "ls/secret", target: "ws-old/secret", want: ErrOutsideWorkspace},
	{name: "symlink out and back in", fs: []string{"ws/lb => ../ws/file"}, path: "lb", target: "ws/file", want: ErrOutsideWorkspace},
	{name: "symlink to root dir", fs: []string{"ws/lr => /"}, path: "lr/etc/passwd", want: ErrOutsideWorkspace},
	{name: "dangling symlink out", fs: []string{"ws/dl => ../outside/new"}, path: "dl", target: "outside/new", want: ErrOutsideWorkspace},
	{name: "symlink loop", fs: []string{"ws/l1 => l2", "ws/l2 => l1"}, path: "l1", want: ErrSymlinkLoop},
	{name: "self loop", fs: []string{"ws/self => self"}, path: "self/x", want: ErrSymlinkLoop},
	{name: "harness", path: ".efferent/secret", target: "ws/.efferent/secret", want: ErrHarnessState},
	{name: "harness dir itself", path: ".foundry", target: "ws/.foundry", want: ErrHarnessState},
	{name: "harness second", path: ".foundry/receipt", target: "ws/.foundry/receipt", want: ErrHarnessState},
	{name: "harness dot", path: "./.efferent/secret", target: "ws/.efferent/secret", want: ErrHarnessState},
	{name: "harness dot-dot", path: "dir/../.efferent/secret", target: "ws/.efferent/secret", want: ErrHarnessState},
	{name: "harness absolute", path: "$WS/.efferent/secret", target: "ws/.efferent/secret", want: ErrHarnessState},
	{name: "harness other case", path: ".EFFERENT/secret", want: ErrHarnessState},
	{name: "harness new file", path: ".efferent/new", target: "ws/.efferent/new", want: ErrHarnessState},
	{name: "symlink to harness file", fs: []string{"ws/lh => .efferent/secret"}, path: "lh", target: "ws/.efferent/secret", want: ErrHarnessState},
	{name: "symlink to harness dir", fs: []string{"ws/dir/lhd => ../.efferent"}, path: "dir/lhd/secret", target: "ws/.efferent/secret", want: ErrHarnessState},
	{name: "absolute symlink to harness", fs: []string{"ws/lah => $WS/.foundry/receipt"}, path: "lah", target: "ws/.foundry/receipt", want: ErrHarnessState},
	{name: "dangling symlink into harness", fs: []string{"ws/ldh => .efferent/planted"}, path: "ldh", target: "ws/.efferent/planted", want: ErrHarnessState},
	{name: "symlink inside", fs: []string{"ws/li => file"}, path: "li", target: "ws/file"},
	{name: "directory symlink inside", fs: []string{"ws/lid => dir"}, path: "lid/sub", target: "ws/dir/sub"},
	{name: "absolute symlink inside", fs: []string{"ws/lai => $WS/dir/sub"}, path: "lai", target: "ws/dir/sub"},
	{name: "symlink with dot-dot inside", fs: []string{"ws/dir/up => ../file"}, path: "dir/up", target: "ws/file"},
	{name: "chained symlinks inside", fs: []string{"ws/i1 => dir/i2", "ws/dir/i2 => sub"}, path: "i1", target: "ws/dir/sub"},
	{name: "harness name deeper is ordinary", fs: []string{"ws/dir/.efferent/x"}, path: "dir/.efferent/x", target: "ws/dir/.efferent/x"},
	{name: "missing file", path: "nothere", want: ErrNotFound, writeTarget: "ws/nothere", writeDiffer: true},
	{name: "missing parents", path: "new/deeper/f", want: ErrNotFound, writeTarget: "ws/new/deeper/f", writeDiffer: true},
	{name: "dangling symlink inside", fs: []string{"ws/dang => dir/made"}, path: "dang", want: ErrNotFound, writeTarget: "ws/dir/made", writeDiffer: true},
	{name: "through a file", path: "file/x", want: ErrNotDir, writeWant: ErrNotDir, writeDiffer: true},
}

func (c *pathCase) setup(t *testing.T) (top, path string) {
	top = makeTree(t, append(append([]string(nil), baseTree...), c.fs...))
	path = strings.NewReplacer("$T", top, "$WS", filepath.Join(top, "ws")).Replace(c.path)
	return top, path
}

func (c *pathCase) write() (error, string) {
	if c.writeDiffer {
		return c.writeWant, c.writeTarget
	}
	return c.want, c.target
}

// isPolicy reports whether err is one of the boundary's refusals.
func isPolicy(err error) bool {
	return errors.Is(err, ErrOutsideWorkspace) || errors.Is(err, ErrHarnessState) || errors.Is(err, ErrSymlinkLoop)
}
