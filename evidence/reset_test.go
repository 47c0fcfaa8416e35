package evidence

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cordon-run/cordon/refusal"
)

// TestReset: Reset moves the log and its head aside, keeping every
// receipt; the next append begins a new log at 1 with a new ID, which
// verifies; a Log opened before the reset refuses to append to the log
// moved aside; a second reset in the same second takes another name; and
// with nothing to reset, Reset refuses.
func TestReset(t *testing.T) {
	s := mustSigner(t, 1)
	dir, trusted := logDirs(t)
	ws, rel := splitWorkspace(dir)
	old := openLog(t, dir, trusted, s)
	entries := appendN(t, old, 3)
	oldID := head(t, old).Log

	m, err := Reset(ws, rel, trusted)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(m.Dir, dir+".reset-") || filepath.Dir(m.Dir) != filepath.Dir(dir) || m.Receipts != 3 || m.Log != oldID ||
		!strings.HasPrefix(m.Head, filepath.Join(trusted, indexName)+".reset-") {
		t.Errorf("Reset = %+v, want the log beside %s, its 3 receipts, its ID %s and its head in %s", m, dir, oldID, trusted)
	}
	for _, e := range entries {
		if data := readFile(t, filepath.Join(m.Dir, e.File)); digestOf(data) != e.Digest {
			t.Errorf("%s changed when it was moved aside", e.File)
		}
	}
	if rep := Verify(m.Dir, s.Public(), nil); !rep.OK || rep.Count != 3 {
		t.Errorf("the log moved aside does not verify with the key: %+v", rep)
	}
	if _, err := os.Stat(filepath.Join(trusted, indexName)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the head is still in place: %v", err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the log directory is still in place: %v", err)
	}

	subj, pt, r := probeReceipt("x", Pass)
	if _, err := old.Append(subj, pt, r); err == nil {
		t.Error("a Log opened before the reset appended")
	}
	if names, _ := os.ReadDir(m.Dir); len(names) != 3 {
		t.Errorf("the log moved aside holds %d files", len(names))
	}

	l := openLog(t, dir, trusted, s)
	if h := head(t, l); h != nil {
		t.Errorf("the head after a reset: %+v", h)
	}
	e := appendN(t, l, 1)[0]
	h := head(t, l)
	if e.Sequence != 1 || e.Statement.Predicate.Previous != "" || h.Log == oldID || e.Statement.Predicate.Log != h.Log {
		t.Errorf("the first append after a reset is receipt %d after %q in log %s (head %+v, old log %s)", e.Sequence, e.Statement.Predicate.Previous, e.Statement.Predicate.Log, h, oldID)
	}
	if rep := l.Verify(); !rep.OK || rep.Count != 1 {
		t.Errorf("Log.Verify after a reset = %+v", rep)
	}

	m2, err := Reset(ws, rel, trusted)
	if err != nil || m2.Dir == m.Dir || m2.Head == m.Head || m2.Receipts != 1 || m2.Log != h.Log {
		t.Errorf("a second reset = %+v, %v; the first moved to %+v", m2, err, m)
	}
	if rep := Verify(m.Dir, s.Public(), nil); !rep.OK || rep.Count != 3 {
		t.Errorf("the second reset changed the first log moved aside: %+v", rep)
	}

	if _, err := Reset(ws, rel, trusted); !errors.Is(err, refusal.NotFound) {
		t.Errorf("Reset with nothing to reset = %v, want NotFound", err)
	}
	os.MkdirAll(dir, 0o755)
	if _, err := Reset(ws, rel, trusted); !errors.Is(err, refusal.NotFound) {
		t.Errorf("Reset of an empty log without a head = %v, want NotFound", err)
	}
}

// TestResetTransplantedLog: a log that appends refuse for want of a head
// is moved aside, and the workspace gets a log of its own.
func TestResetTransplantedLog(t *testing.T) {
	s := mustSigner(t, 1)
	dir, trusted := logDirs(t)
	appendN(t, openLog(t, dir, trusted, s), 2)
	sub := filepath.Join(tempDir(t), "sub")
	subDir := filepath.Join(sub, ".foundry", "evidence")
	copyDir(t, dir, subDir)
	subTrusted := filepath.Join(tempDir(t), "trusted")
	l := openLog(t, subDir, subTrusted, s)
	subj, pt, r := probeReceipt("x", Pass)
	if _, err := l.Append(subj, pt, r); !errors.Is(err, refusal.UntrustedState) {
		t.Fatalf("Append to the transplanted log = %v", err)
	}
	l.Close()
	m, err := Reset(sub, filepath.Join(".foundry", "evidence"), subTrusted)
	if err != nil || m.Head != "" || m.Receipts != 2 || m.Log != "" {
		t.Fatalf("Reset = %+v, %v; want the log moved and no head", m, err)
	}
	l = openLog(t, subDir, subTrusted, s)
	if e := appendN(t, l, 1)[0]; e.Sequence != 1 {
		t.Errorf("the first append after the reset is receipt %d", e.Sequence)
	}
	if rep := l.Verify(); !rep.OK {
		t.Errorf("Log.Verify = %+v", rep)
	}
}

// TestResetRefusesSymlinks: a log directory, or a directory on the way to
// it, that is a symlink is refused, and nothing is moved.
func TestResetRefusesSymlinks(t *testing.T) {
	top := tempDir(t)
	ws, outside := filepath.Join(top, "ws"), filepath.Join(top, "outside")
	os.MkdirAll(filepath.Join(outside, "evidence"), 0o755)
	writeFile(t, filepath.Join(outside, "evidence", "00000001.json"), []byte("{}"))
	os.MkdirAll(filepath.Join(ws, "h"), 0o755)
	os.Symlink(outside, filepath.Join(ws, ".foundry"))
	os.Symlink(filepath.Join(outside, "evidence"), filepath.Join(ws, "h", "evidence"))
	for _, rel := range []string{".foundry/evidence", "h/evidence"} {
		if _, err := Reset(ws, rel, filepath.Join(top, "trusted")); !errors.Is(err, refusal.UntrustedState) {
			t.Errorf("Reset of %s = %v, want UntrustedState", rel, err)
		}
	}
	if names, _ := os.ReadDir(outside); len(names) != 1 {
		t.Errorf("the reset moved something outside: %v", names)
	}
}
