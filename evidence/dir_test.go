package evidence

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cordon-run/cordon/refusal"
)

// layout makes, under top, the tree of lines: "d/" a directory, "f" an
// empty file, "a => b" a symlink a to b.
func layout(t *testing.T, top string, lines ...string) {
	t.Helper()
	for _, line := range lines {
		p := filepath.Join(top, strings.TrimSuffix(strings.Fields(line)[0], "/"))
		var err error
		switch name, target, isLink := strings.Cut(line, " => "); {
		case isLink:
			err = os.Symlink(target, filepath.Join(top, name))
		case strings.HasSuffix(line, "/"):
			err = os.MkdirAll(p, 0o755)
		default:
			err = os.WriteFile(p, nil, 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// TestLogDirNoFollow replays layouts of a workspace ws whose log is
// .foundry/evidence, with a directory outside/ beside it, against every
// operation that opens the log: a symlink (or a file) at any component
// below the workspace is refused, and nothing outside the workspace is
// created, read or moved. The layouts that are not refused (ok) prove that
// the refusals come from the guard.
func TestLogDirNoFollow(t *testing.T) {
	const rel = ".foundry/evidence"
	for _, tc := range []struct {
		name   string
		layout []string
		ok     bool
	}{
		{"plain", []string{"ws/.foundry/", "outside/"}, true},
		{"nothing yet", []string{"ws/", "outside/"}, true},
		{"the harness directory is a symlink", []string{"ws/", "outside/", "ws/.foundry => ../outside"}, false},
		{"the harness directory is a symlink to a log", []string{"ws/", "outside/evidence/", "ws/.foundry => ../outside"}, false},
		{"the log directory is a symlink", []string{"ws/.foundry/", "outside/evidence/", "ws/.foundry/evidence => ../../outside/evidence"}, false},
		{"a dangling symlink", []string{"ws/.foundry/", "outside/", "ws/.foundry/evidence => ../../outside/evidence"}, false},
		{"the harness directory is a file", []string{"ws/", "outside/", "ws/.foundry"}, false},
		{"the log directory is a file", []string{"ws/.foundry/", "outside/", "ws/.foundry/evidence"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := mustSigner(t, 1)
			// A genuine log outside, for the symlinks to point into.
			src := newLog(t)
			appendN(t, src, 2)

			top := tempDir(t)
			layout(t, top, tc.layout...)
			if fi, err := os.Lstat(filepath.Join(top, "outside", "evidence")); err == nil && fi.IsDir() {
				copyDir(t, src.Dir(), filepath.Join(top, "outside", "evidence"))
			}
			ws := filepath.Join(top, "ws")
			outside := snapshot(t, filepath.Join(top, "outside"))
			trusted := filepath.Join(tempDir(t), "trusted")

			check := func(op string, err error) {
				t.Helper()
				if tc.ok && err != nil {
					t.Errorf("%s: %v", op, err)
				}
				if !tc.ok && !errors.Is(err, refusal.UntrustedState) {
					t.Errorf("%s = %v, want UntrustedState", op, err)
				}
			}
			_, err := ReadLogAt(ws, rel)
			check("ReadLogAt", err)
			_, err = ReadLog(filepath.Join(ws, rel))
			check("ReadLog", err)
			rep := VerifyAt(ws, rel, s.Public(), nil)
			if tc.ok != rep.OK || (!tc.ok && !strings.Contains(rep.First.Message, "symlink or not a directory")) {
				t.Errorf("VerifyAt = %+v", rep)
			}
			if tc.ok != Verify(filepath.Join(ws, rel), s.Public(), nil).OK {
				t.Errorf("Verify disagrees with VerifyAt")
			}
			for _, open := range []struct {
				name string
				f    func() (*Log, error)
			}{
				{"OpenLogAt", func() (*Log, error) { return OpenLogAt(ws, rel, trusted, s) }},
				{"OpenLog", func() (*Log, error) { return OpenLog(filepath.Join(ws, rel), trusted, s) }},
			} {
				l, err := open.f()
				check(open.name, err)
				if err == nil {
					appendN(t, l, 1)
					l.Close()
				}
			}
			if tc.ok { // a receipt from each open
				if rep := VerifyAt(ws, rel, s.Public(), nil); !rep.OK || rep.Count != 2 {
					t.Errorf("the log made in the workspace: %+v", rep)
				}
			} else {
				_, err = Reset(ws, rel, trusted)
				check("Reset", err)
			}
			if now := snapshot(t, filepath.Join(top, "outside")); now != outside {
				t.Errorf("the tree outside the workspace changed:\n%s\nwas:\n%s", now, outside)
			}
		})
	}
}

// snapshot lists the tree under dir: names, types and sizes.
func snapshot(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		size := int64(0) // a directory's size is the file system's business
		if fi.Mode().IsRegular() {
			size = fi.Size()
		}
		b.WriteString(rel + " " + fi.Mode().String() + " " + itoa64(size) + "\n")
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}
