package workspace

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzPath throws arbitrary paths at every operation of a workspace full of
// traps (symlinks out, into harness state, loops, a sibling prefix). The
// invariant: nothing outside the workspace or inside harness state is ever
// read, listed, stat'ed or changed.
func FuzzPath(f *testing.F) {
	for _, c := range pathCases {
		f.Add(c.path)
	}
	for _, c := range dirCases {
		f.Add(c.path)
	}
	for _, s := range []string{"lo/../file", "la/x", "lh/../secret", ".efferent/../file", "./.Foundry", "$WS/../ws/.efferent", "ld/../../ws/file", "a//b", "/", "$T", "$WS/", "lid/../.efferent/canary"} {
		f.Add(s)
	}
	top := makeTree(f, append(append([]string(nil), baseTree...),
		"outside/canary", "ws-old/canary", "ws/.efferent/canary", "ws/.foundry/canary",
		"ws/lo => ../outside", "ws/la => $T/outside/canary", "ws/lh => .efferent", "ws/lhf => .foundry/canary",
		"ws/dir/lhu => ../../ws/.efferent", "ws/ls => $T/ws-old", "ws/l1 => l2", "ws/l2 => l1",
		"ws/lid => dir", "ws/dang => ../outside/planted", "ws/dangh => .efferent/planted"))
	// Canaries have sizes no workspace file has.
	canary := bytes.Repeat([]byte("CANARY"), 20011)
	for _, p := range []string{"outside/canary", "ws-old/canary", "ws/.efferent/canary", "ws/.foundry/canary", "outside/secret"} {
		if err := os.WriteFile(filepath.Join(top, p), canary, 0o644); err != nil {
			f.Fatal(err)
		}
	}
	protected := func(t testing.TB) map[string]string {
		s := map[string]string{}
		for _, d := range []string{"outside", "ws-old", "ws/.efferent", "ws/.foundry"} {
			for k, v := range snapshot(t, filepath.Join(top, d)) {
				s[d+"/"+k] = v
			}
		}
		return s
	}
	before := protected(f)
	w, err := Open(filepath.Join(top, "ws"))
	if err != nil {
		f.Fatal(err)
	}
	defer w.Close()
	repl := strings.NewReplacer("$T", top, "$WS", filepath.Join(top, "ws"))

	f.Fuzz(func(t *testing.T, p string) {
		p = repl.Replace(p)
		if data, err := w.ReadFile(p); err == nil && bytes.Contains(data, []byte("CANARY")) {
			t.Fatalf("read %q returned protected contents", p)
		}
		if en, err := w.Stat(p); err == nil && en.Size == int64(len(canary)) {
			t.Fatalf("stat %q described a protected file", p)
		}
		if entries, _, err := w.List(p); err == nil {
			for _, e := range entries {
				if e.Size == int64(len(canary)) {
					t.Fatalf("list %q showed protected entry %q", p, e.Name)
				}
			}
		}
		if entries, _, err := w.List("."); err == nil {
			for _, e := range entries {
				if e.Name == ".efferent" || e.Name == ".foundry" {
					t.Fatalf("the workspace root lists harness state %q", e.Name)
				}
			}
		}
		w.WriteFile(p, []byte("FUZZ"))
		w.Edit(p, "CANARY", "FUZZ")
		if d := diff(before, protected(t)); len(d) > 0 {
			t.Fatalf("operations on %q changed protected files: %v", p, d)
		}
	})
}
