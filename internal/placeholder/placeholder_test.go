package placeholder_test

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cordon-run/cordon/internal/mountinfo"
	"github.com/cordon-run/cordon/internal/placeholder"
	"github.com/cordon-run/cordon/refusal"
)

// The killed-run test runs a session in a re-executed copy of the test
// binary and kills it: only a process that dies without End is a run that
// was killed.
const helperEnv = "CORDON_PLACEHOLDER_TEST_HELPER"

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) != "" {
		os.Exit(helperMain())
	}
	os.Exit(m.Run())
}

// helperMain begins a session of CORDON_PLACEHOLDER_WS, creates the
// directory placeholder "d" and the file placeholder "d/f" in it, says
// "ready" and its session's ID, and waits, holding the session, until it
// is killed (or, at the latest, a minute has passed).
func helperMain() int {
	ws := os.Getenv("CORDON_PLACEHOLDER_WS")
	s, err := placeholder.Begin(os.Getenv("CORDON_PLACEHOLDER_STATE"), ws)
	if err == nil {
		err = s.Create(filepath.Join(ws, "d"), true, "")
	}
	if err == nil {
		err = s.Create(filepath.Join(ws, "d", "f"), false, "")
	}
	if err != nil {
		fmt.Println("error:", err)
		return 1
	}
	if err := s.Note("1234-5678-9"); err != nil {
		fmt.Println("error:", err)
		return 1
	}
	fmt.Println("ready", s.ID())
	time.Sleep(time.Minute)
	return 0
}

// layout makes a fresh temporary directory T with the workspace T/ws,
// the per-user state directory T/state (created on Begin) and T/outside,
// and returns T's canonical path.
func layout(t *testing.T) string {
	t.Helper()
	top, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"ws", "outside"} {
		if err := os.Mkdir(filepath.Join(top, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return top
}

func begin(t *testing.T, top string) *placeholder.Session {
	t.Helper()
	s, err := placeholder.Begin(filepath.Join(top, "state"), filepath.Join(top, "ws"))
	if err != nil {
		t.Fatalf("Begin: %v", err)
	}
	t.Cleanup(func() { s.End() })
	return s
}

func create(t *testing.T, s *placeholder.Session, path string, dir bool, content string) {
	t.Helper()
	if err := s.Create(path, dir, content); err != nil {
		t.Fatalf("Create(%s, dir=%v): %v", path, dir, err)
	}
}

func end(t *testing.T, s *placeholder.Session) {
	t.Helper()
	if err := s.End(); err != nil {
		t.Fatalf("End: %v", err)
	}
}

// manifests returns the manifests recorded under the state directory.
func manifests(t *testing.T, top string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(top, "state", "runs", "*", "m-*.json"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// describe says what is at p without following a symlink: "absent", a
// directory with its entries, a file with its contents, or a symlink with
// its target.
func describe(t *testing.T, p string) string {
	t.Helper()
	fi, err := os.Lstat(p)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "absent"
	case err != nil:
		t.Fatal(err)
	case fi.Mode()&fs.ModeSymlink != 0:
		l, _ := os.Readlink(p)
		return "symlink to " + l
	case fi.IsDir():
		entries, _ := os.ReadDir(p)
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		return fmt.Sprintf("dir %q", names)
	}
	b, _ := os.ReadFile(p)
	return fmt.Sprintf("file %q", b)
}

// tree describes every entry below top.
func tree(t *testing.T, top string) map[string]string {
	t.Helper()
	out := map[string]string{}
	filepath.WalkDir(top, func(p string, d fs.DirEntry, err error) error {
		if err == nil {
			out[p] = describe(t, p)
		}
		return nil
	})
	return out
}

func TestCreateAndEnd(t *testing.T) {
	top := layout(t)
	ws := filepath.Join(top, "ws")
	s := begin(t, top)
	husky, hook, commondir := filepath.Join(ws, ".husky"), filepath.Join(ws, ".husky", "pre-commit"), filepath.Join(ws, "commondir")
	create(t, s, husky, true, "")
	create(t, s, hook, false, "")
	create(t, s, commondir, false, ".\n")
	for p, want := range map[string]string{husky: `dir ["pre-commit"]`, hook: `file ""`, commondir: `file ".\n"`} {
		if got := describe(t, p); got != want {
			t.Errorf("placeholder %s is %s, want %s", p, got, want)
		}
	}
	var got []string
	for _, e := range s.Created() {
		got = append(got, fmt.Sprintf("%s dir=%v", e.Path, e.Dir))
	}
	want := []string{husky + " dir=true", hook + " dir=false", commondir + " dir=false"}
	if !slices.Equal(got, want) {
		t.Errorf("Created() = %q, want %q", got, want)
	}

	// The state is the user's alone: the runs directories 0700, the
	// manifest 0600.
	ms := manifests(t, top)
	if len(ms) != 1 {
		t.Fatalf("manifests %q, want one", ms)
	}
	for p, mode := range map[string]os.FileMode{filepath.Join(top, "state", "runs"): fs.ModeDir | 0o700, filepath.Dir(ms[0]): fs.ModeDir | 0o700, ms[0]: 0o600} {
		if fi, err := os.Lstat(p); err != nil || fi.Mode() != mode {
			t.Errorf("%s: %v, %v; want mode %v", p, fi.Mode(), err, mode)
		}
	}

	// What is there already is not a placeholder: ErrExist, and it stays.
	user := filepath.Join(ws, "user-file")
	os.WriteFile(user, []byte("mine"), 0o644)
	dangling := filepath.Join(ws, "dangling")
	os.Symlink(filepath.Join(top, "outside", "made"), dangling)
	for _, c := range []struct {
		path string
		dir  bool
	}{{husky, true}, {hook, false}, {user, false}, {user, true}, {dangling, false}, {dangling, true}} {
		if err := s.Create(c.path, c.dir, "x"); !errors.Is(err, fs.ErrExist) {
			t.Errorf("Create(%s, dir=%v) over what exists: %v, want fs.ErrExist", c.path, c.dir, err)
		}
	}
	if len(s.Created()) != 3 {
		t.Errorf("failed creations were recorded: %d entries", len(s.Created()))
	}
	if got := describe(t, filepath.Join(top, "outside", "made")); got != "absent" {
		t.Errorf("Create followed a dangling symlink and made %s", got)
	}

	end(t, s)
	for _, p := range []string{husky, hook, commondir} {
		if got := describe(t, p); got != "absent" {
			t.Errorf("after End, placeholder %s is %s, want it removed", p, got)
		}
	}
	if got := describe(t, user); got != `file "mine"` {
		t.Errorf("after End, the user's file is %s", got)
	}
	if got := describe(t, dangling); got == "absent" {
		t.Errorf("after End, the symlink that was there first is gone")
	}
	if ms := manifests(t, top); len(ms) != 0 {
		t.Errorf("after End, manifests %q remain", ms)
	}

	// End is idempotent; an ended session creates nothing.
	if err := s.End(); err != nil {
		t.Errorf("second End: %v", err)
	}
	if err := s.Create(filepath.Join(ws, "late"), true, ""); err == nil {
		t.Errorf("Create after End succeeded")
	}
	if got := describe(t, filepath.Join(ws, "late")); got != "absent" {
		t.Errorf("Create after End made %s", got)
	}
}

// TestLastSessionCleans runs sessions of one workspace side by side: a
// placeholder stays as long as any of them has not ended, whoever created
// it, and the last one to end removes them all.
func TestLastSessionCleans(t *testing.T) {
	cases := []struct {
		name    string
		creates []int // placeholders each session creates
		ends    []int // the order the sessions end in
	}{
		{name: "two, creator ends first", creates: []int{1, 1}, ends: []int{0, 1}},
		{name: "two, creator ends last", creates: []int{1, 1}, ends: []int{1, 0}},
		{name: "second only mounts, ends first", creates: []int{2, 0}, ends: []int{1, 0}},
		{name: "second only mounts, ends last", creates: []int{2, 0}, ends: []int{0, 1}},
		{name: "three, in order", creates: []int{1, 0, 2}, ends: []int{0, 1, 2}},
		{name: "three, reversed", creates: []int{1, 0, 2}, ends: []int{2, 1, 0}},
		{name: "three, middle last", creates: []int{1, 1, 1}, ends: []int{2, 0, 1}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			top := layout(t)
			var sessions []*placeholder.Session
			var all []string
			for i, n := range c.creates {
				s := begin(t, top)
				sessions = append(sessions, s)
				for j := range n {
					p := filepath.Join(top, "ws", fmt.Sprintf("s%d-%d", i, j))
					create(t, s, p, j%2 == 0, "")
					all = append(all, p)
				}
			}
			for k, i := range c.ends {
				end(t, sessions[i])
				last := k == len(c.ends)-1
				for _, p := range all {
					if got := describe(t, p); (got == "absent") != last {
						t.Fatalf("after session %d ended (%d of %d), placeholder %s is %s", i, k+1, len(c.ends), filepath.Base(p), got)
					}
				}
			}
			if ms := manifests(t, top); len(ms) != 0 {
				t.Errorf("after the last End, manifests %q remain", ms)
			}
			// A new run finds the paths free again.
			s := begin(t, top)
			create(t, s, all[0], true, "")
			end(t, s)
		})
	}
}

// TestWorkspacesAreIndependent checks that a session of one workspace does
// not keep another workspace's placeholders, nor remove them.
func TestWorkspacesAreIndependent(t *testing.T) {
	top := layout(t)
	state := filepath.Join(top, "state")
	ws2 := filepath.Join(top, "ws2")
	os.Mkdir(ws2, 0o755)
	a := begin(t, top)
	create(t, a, filepath.Join(top, "ws", "p"), true, "")
	b, err := placeholder.Begin(state, ws2)
	if err != nil {
		t.Fatal(err)
	}
	create(t, b, filepath.Join(ws2, "p"), true, "")
	end(t, b)
	if got := describe(t, filepath.Join(ws2, "p")); got != "absent" {
		t.Errorf("ws2's last session ended, yet its placeholder is %s", got)
	}
	if got := describe(t, filepath.Join(top, "ws", "p")); got == "absent" {
		t.Errorf("ws2's session removed ws's placeholder, which a session of ws holds")
	}
	end(t, a)
	if got := describe(t, filepath.Join(top, "ws", "p")); got != "absent" {
		t.Errorf("ws's last session ended, yet its placeholder is %s", got)
	}
}

// TestCleanupKeepsWhatChanged changes a placeholder while its session runs;
// End must leave whatever the change left.
func TestCleanupKeepsWhatChanged(t *testing.T) {
	write := func(p, data string) error { return os.WriteFile(p, []byte(data), 0o644) }
	cases := []struct {
		name   string
		dir    bool
		change func(p string) error
	}{
		{name: "directory filled", dir: true, change: func(p string) error {
			return write(filepath.Join(p, "hook"), "#!/bin/sh\n")
		}},
		{name: "directory given an empty subdirectory", dir: true, change: func(p string) error {
			return os.Mkdir(filepath.Join(p, "sub"), 0o755)
		}},
		{name: "directory replaced by a file", dir: true, change: func(p string) error {
			if err := os.Remove(p); err != nil {
				return err
			}
			return write(p, "")
		}},
		{name: "directory replaced by another directory", dir: true, change: func(p string) error {
			if err := os.Mkdir(p+".new", 0o755); err != nil {
				return err
			}
			return unix.Rename(p+".new", p) // os.Rename refuses a directory as the target
		}},
		{name: "file filled beyond 64 bytes", change: func(p string) error {
			return write(p, strings.Repeat("x", 100))
		}},
		{name: "file filled in place with a short config", change: func(p string) error {
			return write(p, "repos: []\n")
		}},
		{name: "file replaced by rename", change: func(p string) error {
			if err := write(p+".new", "mine\n"); err != nil {
				return err
			}
			return os.Rename(p+".new", p)
		}},
		// ext4 gives the new file the inode number the placeholder had:
		// the same device and inode are not the same file.
		{name: "file removed and written anew", change: func(p string) error {
			if err := os.Remove(p); err != nil {
				return err
			}
			return write(p, "mine\n")
		}},
		{name: "file replaced by a directory", change: func(p string) error {
			if err := os.Remove(p); err != nil {
				return err
			}
			return os.Mkdir(p, 0o755)
		}},
		{name: "file removed", change: os.Remove},
		{name: "directory removed", dir: true, change: os.Remove},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			top := layout(t)
			s := begin(t, top)
			p := filepath.Join(top, "ws", "placeholder")
			create(t, s, p, c.dir, "")
			if err := c.change(p); err != nil {
				t.Fatal(err)
			}
			before := tree(t, filepath.Join(top, "ws"))
			end(t, s)
			after := tree(t, filepath.Join(top, "ws"))
			for k, v := range before {
				if after[k] != v {
					t.Errorf("End changed %s from %s to %s; only an unchanged placeholder may be removed", k, v, describe(t, k))
				}
			}
		})
	}
}

// TestSymlinkPlanted replaces a placeholder, or the placeholder directory
// it is in, with a symlink: End must neither follow it nor remove it, nor
// anything it leads to.
func TestSymlinkPlanted(t *testing.T) {
	cases := []struct {
		name  string
		dir   bool
		plant func(t *testing.T, top, p string)
	}{
		{name: "file placeholder replaced by a symlink to a small file", plant: func(t *testing.T, top, p string) {
			target := filepath.Join(top, "outside", "small")
			os.WriteFile(target, nil, 0o644)
			replaceWithSymlink(t, p, target)
		}},
		{name: "directory placeholder replaced by a symlink to an empty directory", dir: true, plant: func(t *testing.T, top, p string) {
			target := filepath.Join(top, "outside", "empty")
			os.Mkdir(target, 0o755)
			replaceWithSymlink(t, p, target)
		}},
		{name: "file placeholder moved aside, a symlink to it in its place", plant: func(t *testing.T, top, p string) {
			if err := os.Rename(p, filepath.Join(top, "outside", "moved")); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(filepath.Join(top, "outside", "moved"), p); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "directory placeholder moved aside, a symlink to it in its place", dir: true, plant: func(t *testing.T, top, p string) {
			if err := os.Rename(p, filepath.Join(top, "outside", "moved")); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(filepath.Join(top, "outside", "moved"), p); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			top := layout(t)
			s := begin(t, top)
			p := filepath.Join(top, "ws", "placeholder")
			create(t, s, p, c.dir, "")
			c.plant(t, top, p)
			before := tree(t, top)
			end(t, s)
			after := tree(t, top)
			for k, v := range before {
				if k != filepath.Join(top, "state") && !strings.HasPrefix(k, filepath.Join(top, "state")+"/") && after[k] != v {
					t.Errorf("End changed %s from %s to %s", k, v, describe(t, k))
				}
			}
		})
	}

	// The placeholder directory on the way to a placeholder moved out of
	// the workspace, and a symlink to it left where it was: End must not
	// remove the inner placeholder through the symlink.
	t.Run("parent placeholder replaced by a symlink", func(t *testing.T) {
		top := layout(t)
		s := begin(t, top)
		parent := filepath.Join(top, "ws", ".husky")
		create(t, s, parent, true, "")
		create(t, s, filepath.Join(parent, "pre-commit"), false, "")
		moved := filepath.Join(top, "outside", "moved")
		if err := os.Rename(parent, moved); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(moved, parent); err != nil {
			t.Fatal(err)
		}
		end(t, s)
		if got := describe(t, filepath.Join(moved, "pre-commit")); got != `file ""` {
			t.Errorf("End removed %s (now %s) through the symlink %s", filepath.Join(moved, "pre-commit"), got, parent)
		}
		if got := describe(t, parent); got != "symlink to "+moved {
			t.Errorf("the planted symlink is now %s", got)
		}
	})
}

func replaceWithSymlink(t *testing.T, p, target string) {
	t.Helper()
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, p); err != nil {
		t.Fatal(err)
	}
}

// TestKilledSession kills a process in the middle of its session, so that
// it never ends it: its placeholders stay while another run holds the
// workspace, and the next run to end last removes them.
// startHelper starts helperMain on top's workspace and state directory
// and returns it, once it is ready, with its session's ID; it is killed
// at the end of the test, if not before.
func startHelper(t *testing.T, top string) (*exec.Cmd, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"=1", "CORDON_PLACEHOLDER_WS="+filepath.Join(top, "ws"), "CORDON_PLACEHOLDER_STATE="+filepath.Join(top, "state"))
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	line, _ := bufio.NewReader(stdout).ReadString('\n')
	id, ok := strings.CutPrefix(strings.TrimSuffix(line, "\n"), "ready ")
	if !ok || id == "" {
		t.Fatalf("helper: %q", line)
	}
	return cmd, id
}

func TestKilledSession(t *testing.T) {
	top := layout(t)
	ws := filepath.Join(top, "ws")
	d, f := filepath.Join(ws, "d"), filepath.Join(ws, "d", "f")

	cmd, helperID := startHelper(t, top)

	// While the helper's session is alive, a run that ends leaves its
	// placeholders; its record is a run going on, not one abandoned.
	s := begin(t, top)
	end(t, s)
	if got := describe(t, f); got != `file ""` {
		t.Fatalf("a run ended while the helper still held the workspace, and its placeholder is %s", got)
	}

	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()

	if got := describe(t, d); got != `dir ["f"]` {
		t.Fatalf("after the kill, before another run, the placeholder is %s", got)
	}
	if ms := manifests(t, top); len(ms) != 1 {
		t.Fatalf("the killed run left manifests %q, want one", ms)
	}

	// Found by a process that has no sweeper (it has no bwrap to end what
	// the run left), the record stays, for one that has.
	record := filepath.Join(top, "state", "runs", "active", "r-"+helperID)
	placeholder.SetSweeper(nil)
	if ws, err := placeholder.Running(filepath.Join(top, "state"), ws); ws != "" || err != nil {
		t.Fatalf("the killed run is reported running in %s (%v)", ws, err)
	}
	if _, err := os.Stat(record); err != nil {
		t.Fatalf("the killed run's record went with no sweep: %v", err)
	}
	swept := make(chan placeholder.Abandoned, 4)
	placeholder.SetSweeper(func(a placeholder.Abandoned) { swept <- a })
	defer placeholder.SetSweeper(nil)

	// The next run to end last cleans up what the killed one left; it
	// says it found a run that died before it ended (whose sandbox may
	// outlive it), and the run after it does not.
	s = begin(t, top)
	select {
	case a := <-swept:
		if a.ID != helperID || !slices.Equal(a.Processes, []string{"1234-5678-9"}) {
			t.Errorf("swept %+v, want the killed run %s with what it noted", a, helperID)
		}
	case <-time.After(5 * time.Second):
		t.Error("the run after a killed one had nothing swept")
	}
	end(t, s)
	for i := 0; ; i++ {
		if _, err := os.Stat(record); errors.Is(err, fs.ErrNotExist) {
			break
		}
		if i > 500 {
			t.Fatal("the killed run's record stayed after its sweep")
		}
		time.Sleep(10 * time.Millisecond)
	}
	end(t, begin(t, top))
	select {
	case a := <-swept:
		t.Errorf("%+v swept where every run before ended", a)
	case <-time.After(100 * time.Millisecond):
	}
	for _, p := range []string{f, d} {
		if got := describe(t, p); got != "absent" {
			t.Errorf("the killed run's placeholder %s is %s after the next run ended", p, got)
		}
	}
	if ms := manifests(t, top); len(ms) != 0 {
		t.Errorf("manifests %q remain", ms)
	}
}

// TestUnendedSessionInProcess leaves a session of this process open: the
// runs that end meanwhile must leave its placeholders.
func TestUnendedSessionInProcess(t *testing.T) {
	top := layout(t)
	open := begin(t, top)
	p := filepath.Join(top, "ws", "held")
	create(t, open, p, true, "")
	for range 3 {
		end(t, begin(t, top))
	}
	if got := describe(t, p); got != "dir []" {
		t.Fatalf("runs that ended while a session was open removed its placeholder: %s", got)
	}
	end(t, open)
	if got := describe(t, p); got != "absent" {
		t.Errorf("after the open session ended, its placeholder is %s", got)
	}
}

// TestBeginRefusesUntrustedState plants a runs directory others can write:
// Begin refuses it and records nothing there.
func TestBeginRefusesUntrustedState(t *testing.T) {
	top := layout(t)
	runs := filepath.Join(top, "state", "runs")
	if err := os.MkdirAll(runs, 0o700); err != nil {
		t.Fatal(err)
	}
	os.Chmod(runs, 0o777)
	if s, err := placeholder.Begin(filepath.Join(top, "state"), filepath.Join(top, "ws")); !errors.Is(err, refusal.UntrustedState) {
		if err == nil {
			s.End()
		}
		t.Fatalf("Begin with a runs directory of mode 0777: %v, want refusal.UntrustedState", err)
	}
	if entries, _ := os.ReadDir(runs); len(entries) != 0 {
		t.Errorf("Begin wrote %s into the refused directory", entries[0].Name())
	}
}

// TestNestedSessions: a session of a workspace does not begin while one
// of an enclosing workspace is going on — also one of another
// configuration (state directory) — nor one of an enclosing workspace
// while one of a nested workspace is going on; sessions of two workspaces
// side by side inside a third begin together.
func TestNestedSessions(t *testing.T) {
	top := t.TempDir()
	state, other := filepath.Join(top, "state"), filepath.Join(top, "other-state")
	outer := filepath.Join(top, "outer")
	inner := filepath.Join(outer, "sub", "inner")
	sibling := filepath.Join(outer, "sibling")
	os.MkdirAll(inner, 0o755)
	os.MkdirAll(sibling, 0o755)
	o, err := placeholder.Begin(state, outer)
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range []string{state, other} {
		if s, err := placeholder.Begin(st, inner); !errors.Is(err, placeholder.ErrNested) || !strings.Contains(err.Error(), "enclosing workspace "+outer) {
			if s != nil {
				s.End()
			}
			t.Fatalf("a nested session (state %s) began while the enclosing one goes on: %v", st, err)
		}
	}
	o.End()
	i, err := placeholder.Begin(state, inner)
	if err != nil {
		t.Fatalf("a nested session after the enclosing one ended: %v", err)
	}
	sib, err := placeholder.Begin(state, sibling)
	if err != nil {
		t.Fatalf("a session of a workspace beside a nested one that goes on: %v", err)
	}
	if s, err := placeholder.Begin(state, outer); !errors.Is(err, placeholder.ErrNested) {
		if s != nil {
			s.End()
		}
		t.Fatalf("an enclosing session began while nested ones go on: %v", err)
	}
	i.End()
	sib.End()
	o, err = placeholder.Begin(state, outer)
	if err != nil {
		t.Fatalf("the enclosing session, once the nested ones ended: %v", err)
	}
	o.End()
}

// hammer runs round for rounds rounds in each of goroutines goroutines at
// once; a round reports what went wrong through fail, and ends its
// goroutine by returning false.
func hammer(t *testing.T, goroutines, rounds int, round func(g, r int, fail func(error)) bool) {
	t.Helper()
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for r := range rounds {
				fail := func(err error) { t.Errorf("goroutine %d round %d: %v", g, r, err) }
				if !round(g, r, fail) {
					return
				}
			}
		})
	}
	wg.Wait()
}

// TestHammer has many goroutines run sessions of one workspace at once,
// each creating placeholders of its own. A placeholder must exist from its
// creation to its session's end (no run removes what a live run holds),
// and when every session has ended nothing is left.
func TestHammer(t *testing.T) {
	top := layout(t)
	state, ws := filepath.Join(top, "state"), filepath.Join(top, "ws")
	hammer(t, 16, 20, func(g, r int, fail func(error)) bool {
		s, err := placeholder.Begin(state, ws)
		if err != nil {
			fail(fmt.Errorf("Begin: %w", err))
			return false
		}
		var mine []string
		for i := range 3 {
			p := filepath.Join(ws, fmt.Sprintf("g%d-r%d-%d", g, r, i))
			if err := s.Create(p, i%2 == 0, ""); err != nil {
				fail(fmt.Errorf("Create: %w", err))
			}
			mine = append(mine, p)
		}
		if r%3 == 0 {
			time.Sleep(time.Millisecond)
		}
		for _, p := range mine {
			if _, err := os.Lstat(p); err != nil {
				fail(fmt.Errorf("placeholder %s gone while its session runs: %v", filepath.Base(p), err))
			}
		}
		if err := s.End(); err != nil {
			fail(fmt.Errorf("End: %w", err))
		}
		return true
	})
	var names []string
	entries, _ := os.ReadDir(ws)
	for _, e := range entries {
		if e.Name() != ".efferent" { // the harness directory holding the run lock
			names = append(names, e.Name())
		}
	}
	if len(names) != 0 {
		t.Errorf("after every session ended, %d placeholders remain: %q", len(names), names)
	}
	if ms := manifests(t, top); len(ms) != 0 {
		t.Errorf("after every session ended, %d manifests remain", len(ms))
	}
	var st unix.Stat_t
	if err := unix.Lstat(filepath.Join(state, "runs"), &st); err != nil || st.Mode&0o777 != 0o700 {
		t.Errorf("runs directory: mode %#o, %v", st.Mode&0o777, err)
	}
}

// reuse lists the reuse directories of every workspace's runs below top.
func reuse(t *testing.T, top string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(top, "state", "runs", "*", "reuse", "*"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func inode(t *testing.T, p string) uint64 {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Lstat(p, &st); err != nil {
		t.Fatal(err)
	}
	return st.Ino
}

func inodes(t *testing.T, paths []string) map[uint64]string {
	out := map[uint64]string{}
	for _, p := range paths {
		out[inode(t, p)] = p
	}
	return out
}

// TestSpares: the directory placeholders no run needs go, empty, to the
// workspace's reuse directory (0700, in the state directory), and the
// next run of that workspace renames them into place; one that a process
// that kept it open wrote into afterwards is never a placeholder again,
// one the host wrote into during the run stays, and no other workspace
// ever gets this one's.
func TestSpares(t *testing.T) {
	top := layout(t)
	ws := filepath.Join(top, "ws")
	vscode, idea := filepath.Join(ws, ".vscode"), filepath.Join(ws, ".idea")

	s := begin(t, top)
	create(t, s, vscode, true, "")
	create(t, s, idea, true, "")
	// A process keeps one placeholder open; the host writes into the other.
	kept, err := unix.Open(vscode, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(kept)
	os.WriteFile(filepath.Join(idea, "workspace.xml"), []byte("mine"), 0o644)
	ino := inode(t, vscode)
	end(t, s)
	if got := describe(t, vscode); got != "absent" {
		t.Errorf("after End, %s is %s", vscode, got)
	}
	if got := describe(t, idea); got != `dir ["workspace.xml"]` {
		t.Errorf("after End, %s is %s; want the host's file kept", idea, got)
	}
	put := reuse(t, top)
	if _, ok := inodes(t, put)[ino]; !ok || len(put) != 1 {
		t.Fatalf("reuse directory %q, want only the empty placeholder", put)
	}
	if fi, err := os.Lstat(filepath.Dir(put[0])); err != nil || fi.Mode() != fs.ModeDir|0o700 {
		t.Errorf("reuse directory: %v, %v; want drwx------", fi.Mode(), err)
	}

	// The next run of the workspace takes it.
	s = begin(t, top)
	create(t, s, vscode, true, "")
	if inode(t, vscode) != ino {
		t.Errorf("the placeholder directory was not used again")
	}
	end(t, s)

	// Another workspace never gets it.
	other := filepath.Join(top, "other")
	os.Mkdir(other, 0o755)
	o, err := placeholder.Begin(filepath.Join(top, "state"), other)
	if err != nil {
		t.Fatal(err)
	}
	create(t, o, filepath.Join(other, ".vscode"), true, "")
	if inode(t, filepath.Join(other, ".vscode")) == ino {
		t.Errorf("another workspace got %s's placeholder directory", ws)
	}
	end(t, o)

	// Written through the kept descriptor after the run put it away: the
	// next run does not use it, and makes an empty placeholder instead.
	fd, err := unix.Openat(kept, "settings.json", unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_CLOEXEC, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	unix.Close(fd)
	s = begin(t, top)
	create(t, s, vscode, true, "")
	if got := describe(t, vscode); got != "dir []" || inode(t, vscode) == ino {
		t.Errorf("placeholder %s is %s (inode %d; the written one is %d)", vscode, got, inode(t, vscode), ino)
	}
	end(t, s)
	spoiled, ok := inodes(t, reuse(t, top))[ino]
	if !ok || !strings.HasPrefix(filepath.Base(spoiled), "x-") || describe(t, spoiled) != `dir ["settings.json"]` {
		t.Errorf("the written directory: %q in %q; want it kept aside as x-*, never used", spoiled, reuse(t, top))
	}
}

// TestReuseIsBounded: beyond a bounded reuse directory, placeholders are
// removed where they are.
func TestReuseIsBounded(t *testing.T) {
	top := layout(t)
	ws := filepath.Join(top, "ws")
	s := begin(t, top)
	for i := range 100 {
		create(t, s, filepath.Join(ws, fmt.Sprint("d", i)), true, "")
	}
	end(t, s)
	if got := len(reuse(t, top)); got != 64 {
		t.Errorf("reuse holds %d directories, want 64", got)
	}
	if entries, _ := os.ReadDir(ws); len(entries) != 0 {
		t.Errorf("after End the workspace holds %d entries", len(entries))
	}
}

// TestSparesOnAnotherFileSystem: a workspace on another file system than
// the state directory gets directories made and removed.
func TestSparesOnAnotherFileSystem(t *testing.T) {
	shm, err := os.MkdirTemp("/dev/shm", "cordon-ph")
	if err != nil {
		t.Skipf("no /dev/shm: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(shm) })
	top := layout(t)
	var a, b unix.Stat_t
	if unix.Stat(shm, &a) != nil || unix.Stat(top, &b) != nil || a.Dev == b.Dev {
		t.Skip("/dev/shm is on the same file system as the temporary directory")
	}
	for range 2 {
		s, err := placeholder.Begin(filepath.Join(top, "state"), shm)
		if err != nil {
			t.Fatal(err)
		}
		create(t, s, filepath.Join(shm, ".vscode"), true, "")
		end(t, s)
		if got := describe(t, filepath.Join(shm, ".vscode")); got != "absent" {
			t.Errorf("after End, the placeholder is %s", got)
		}
	}
	if got := reuse(t, top); len(got) != 0 {
		t.Errorf("reuse %q: nothing put there across file systems", got)
	}
}

// TestNestedRunOfANeverRunWorkspace: a run of a workspace that has never
// had one (no lock file yet) does not start while a run of a workspace
// inside it is going on.
func TestNestedRunOfANeverRunWorkspace(t *testing.T) {
	top := t.TempDir()
	state := filepath.Join(top, "state")
	outer := filepath.Join(top, "outer")
	inner := filepath.Join(outer, "sub", "inner")
	os.MkdirAll(inner, 0o755)
	i, err := placeholder.Begin(state, inner)
	if err != nil {
		t.Fatal(err)
	}
	o, err := placeholder.Begin(state, outer)
	if !errors.Is(err, placeholder.ErrNested) || !strings.Contains(fmt.Sprint(err), inner) {
		if o != nil {
			o.End()
		}
		t.Fatalf("Begin(outer) while a nested run goes on: %v; want ErrNested naming %s", err, inner)
	}
	i.End()
	o, err = placeholder.Begin(state, outer)
	if err != nil {
		t.Fatalf("Begin(outer) after the nested run ended: %v", err)
	}
	o.End()
}

// TestNestedRunsNeverOverlap starts runs of a workspace and of one inside
// it at once, many times, each holding its session for a moment: never
// are both going on.
func TestNestedRunsNeverOverlap(t *testing.T) {
	for round := range 30 {
		top := t.TempDir()
		state := filepath.Join(top, "state")
		outer := filepath.Join(top, "outer")
		inner := filepath.Join(outer, "inner")
		os.MkdirAll(inner, 0o755)
		var wg sync.WaitGroup
		var mu sync.Mutex
		active, most := 0, 0
		for _, ws := range []string{outer, inner} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				s, err := placeholder.Begin(state, ws)
				if err != nil {
					return
				}
				mu.Lock()
				active++
				most = max(most, active)
				mu.Unlock()
				time.Sleep(5 * time.Millisecond)
				mu.Lock()
				active--
				mu.Unlock()
				s.End()
			}()
		}
		wg.Wait()
		if most > 1 {
			t.Fatalf("round %d: runs of %s and of %s went on at once", round, outer, inner)
		}
	}
}

// activeRecords lists the registry of runs below top: run records (r-*)
// and spare records (s-*).
func activeRecords(t *testing.T, top string) (runs, spares []string) {
	t.Helper()
	runs, _ = filepath.Glob(filepath.Join(top, "state", "runs", "active", "r-*"))
	spares, _ = filepath.Glob(filepath.Join(top, "state", "runs", "active", "s-*"))
	return runs, spares
}

// TestSpareRecords: a run's record, once the run ended, stays as a spare,
// which the next run takes — the same file, emptied of what the last run
// noted, locked before it is named a run's — and which no one takes for
// a run going on; the spares are bounded.
func TestSpareRecords(t *testing.T) {
	top := layout(t)
	state, ws := filepath.Join(top, "state"), filepath.Join(top, "ws")
	s := begin(t, top)
	if err := s.Note("process of the first run"); err != nil {
		t.Fatal(err)
	}
	end(t, s)
	runs, spares := activeRecords(t, top)
	if len(runs) != 0 || len(spares) != 1 {
		t.Fatalf("after a run ended: records %q, spares %q; want none and one", runs, spares)
	}
	spare := inode(t, spares[0])
	if got, err := placeholder.Running(state, ws); got != "" || err != nil {
		t.Fatalf("Running with only a spare record = %q, want none", got)
	}

	s = begin(t, top)
	runs, spares = activeRecords(t, top)
	if len(runs) != 1 || len(spares) != 0 || inode(t, runs[0]) != spare {
		t.Fatalf("the next run made records %q, left spares %q; want it to take the spare (inode %d)", runs, spares, spare)
	}
	data, err := os.ReadFile(runs[0])
	if want := recordOf(t, ws); err != nil || !strings.HasPrefix(string(data), want+"\x00#") || strings.Count(string(data), "\x00") != 2 {
		t.Fatalf("the taken record holds %q (%v), want only the workspace, its place, %q, and what holds it", data, err, want)
	}
	if f, err := os.Open(runs[0]); err == nil {
		if unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB) == nil {
			t.Error("the taken record is not locked")
		}
		f.Close()
	}
	if got, err := placeholder.Running(state, ws); got != ws || err != nil {
		t.Errorf("Running during the run = %q, want %q", got, ws)
	}
	end(t, s)

	// Many runs at once, then none: at most maxSpares (8) stay.
	var sessions []*placeholder.Session
	for range 12 {
		other := filepath.Join(top, "outside", fmt.Sprintf("w%d", len(sessions)))
		if err := os.Mkdir(other, 0o755); err != nil {
			t.Fatal(err)
		}
		s, err := placeholder.Begin(state, other)
		if err != nil {
			t.Fatal(err)
		}
		sessions = append(sessions, s)
	}
	for _, s := range sessions {
		end(t, s)
	}
	if runs, spares := activeRecords(t, top); len(runs) != 0 || len(spares) > 8 {
		t.Errorf("after 12 runs at once: %d records, %d spares; want none and at most 8", len(runs), len(spares))
	}
}

// TestSpareRecordsHammer: runs that begin and end at once never share a
// record, and every run's record names its own workspace.
func TestSpareRecordsHammer(t *testing.T) {
	const goroutines, rounds = 12, 25
	top := layout(t)
	state := filepath.Join(top, "state")
	var workspaces, records []string
	for g := range goroutines {
		ws := filepath.Join(top, "outside", fmt.Sprintf("h%d", g))
		if err := os.Mkdir(ws, 0o755); err != nil {
			t.Fatal(err)
		}
		workspaces, records = append(workspaces, ws), append(records, recordOf(t, ws))
	}
	var mu sync.Mutex
	live := map[uint64]int{} // record inode -> goroutine holding it
	hammer(t, goroutines, rounds, func(g, r int, fail func(error)) bool {
		ws := workspaces[g]
		s, err := placeholder.Begin(state, ws)
		if err != nil {
			fail(fmt.Errorf("Begin: %w", err))
			return false
		}
		rec := filepath.Join(state, "runs", "active", "r-"+s.ID())
		var st unix.Stat_t
		if err := unix.Lstat(rec, &st); err != nil {
			fail(fmt.Errorf("its record: %w", err))
		} else {
			mu.Lock()
			if other, ok := live[st.Ino]; ok {
				fail(fmt.Errorf("record inode %d is goroutine %d's too", st.Ino, other))
			}
			live[st.Ino] = g
			mu.Unlock()
			if data, err := os.ReadFile(rec); err != nil || !strings.HasPrefix(string(data), records[g]+"\x00#") || strings.Count(string(data), "\x00") != 2 {
				fail(fmt.Errorf("its record holds %q (%v)", data, err))
			}
		}
		mu.Lock()
		delete(live, st.Ino)
		mu.Unlock()
		if err := s.End(); err != nil {
			fail(fmt.Errorf("End: %w", err))
		}
		return true
	})
	if runs, spares := activeRecords(t, top); len(runs) != 0 || len(spares) > 8 {
		t.Errorf("after every run ended: %d records, %d spares", len(runs), len(spares))
	}
}

// spareManifestsOf lists the spare manifests below top.
func spareManifestsOf(t *testing.T, top string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(top, "state", "runs", "*", "sm-*"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestSpareManifests: the run that cleans up keeps the manifests as
// spares (emptied), and a later run records into one: a run killed after
// it did so still has its placeholders removed by the next run to end.
func TestSpareManifests(t *testing.T) {
	top := layout(t)
	ws := filepath.Join(top, "ws")
	s := begin(t, top)
	create(t, s, filepath.Join(ws, ".vscode"), true, "")
	create(t, s, filepath.Join(ws, ".envrc"), false, "")
	end(t, s)
	spares := spareManifestsOf(t, top)
	if ms := manifests(t, top); len(ms) != 0 || len(spares) != 1 {
		t.Fatalf("after the run: manifests %q, spares %q; want none and one", ms, spares)
	}
	if data, err := os.ReadFile(spares[0]); err != nil || string(data) != "\n" {
		t.Fatalf("the spare holds %q (%v), want an empty line", data, err)
	}
	spare := inode(t, spares[0])

	// A run killed after it recorded into the spare.
	cmd, _ := startHelper(t, top)
	ms := manifests(t, top)
	if len(ms) != 1 || inode(t, ms[0]) != spare || len(spareManifestsOf(t, top)) != 0 {
		t.Fatalf("the helper's manifest %q is not the spare (inode %d); spares left %q", ms, spare, spareManifestsOf(t, top))
	}
	cmd.Process.Kill()
	cmd.Wait()

	s = begin(t, top)
	end(t, s)
	for _, p := range []string{filepath.Join(ws, "d", "f"), filepath.Join(ws, "d")} {
		if _, err := os.Lstat(p); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("the killed run's placeholder %s stays after the next run ended: %v", p, err)
		}
	}
	if ms := manifests(t, top); len(ms) != 0 {
		t.Errorf("manifests left: %q", ms)
	}
}

// TestOthersKept: a session finds what the other sessions of its
// workspace going on kept, not its own, not another workspace's, not one
// that has kept nothing, not one skip names; a set it cannot read whole
// (not a regular file, over the bound) is there as nil, which trusts
// nothing; and one that ended is gone.
func TestOthersKept(t *testing.T) {
	top := layout(t)
	state := filepath.Join(top, "state")
	ws2 := filepath.Join(top, "ws2")
	if err := os.Mkdir(ws2, 0o755); err != nil {
		t.Fatal(err)
	}
	self, a, quiet, odd, big := begin(t, top), begin(t, top), begin(t, top), begin(t, top), begin(t, top)
	other, err := placeholder.Begin(state, ws2)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.End() })
	for _, k := range []struct {
		s    *placeholder.Session
		data string
	}{{self, `{"self":"-"}`}, {a, `{"a":"1:2"}`}, {other, `{"other":"-"}`}, {odd, `{}`}, {big, `{}`}} {
		if err := k.s.Keep([]byte(k.data)); err != nil {
			t.Fatalf("Keep: %v", err)
		}
	}
	keptFile := func(s *placeholder.Session) string {
		m, _ := filepath.Glob(filepath.Join(state, "runs", "*", "known-"+s.ID()))
		if len(m) != 1 {
			t.Fatalf("the kept file of session %s: %v", s.ID(), m)
		}
		return m[0]
	}
	// One that cannot be read as a file, and one over the bound.
	oddFile := keptFile(odd)
	if err := os.Remove(oddFile); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(oddFile, 0o700); err != nil {
		t.Fatal(err)
	}
	huge := append([]byte(`{"x":"`), make([]byte, 8<<20)...)
	if err := os.WriteFile(keptFile(big), huge, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := big.Keep(huge); err == nil {
		t.Error("Keep took a set over its bound, which no other run could read")
	}
	_ = quiet // kept nothing: left out

	got := map[string]bool{}
	nils := 0
	kept, all := othersKept(t, self, nil)
	if len(all) != len(kept) {
		t.Errorf("OthersKept skipping nothing: %d sets and %d in all", len(kept), len(all))
	}
	for _, k := range kept {
		if k == nil {
			nils++
			continue
		}
		got[string(k)] = true
	}
	if !got[`{"a":"1:2"}`] || len(got) != 1 || nils != 2 {
		t.Errorf("OthersKept = %v and %d that trust nothing, want a's set alone and 2 that trust nothing (the directory, the set over the bound)", got, nils)
	}
	skipped, all := othersKept(t, self, func(id string) bool { return id == a.ID() })
	for _, k := range skipped {
		if string(k) == `{"a":"1:2"}` {
			t.Errorf("OthersKept returned the set of a session skip names")
		}
	}
	if !slices.ContainsFunc(all, func(k []byte) bool { return string(k) == `{"a":"1:2"}` }) {
		t.Errorf("OthersKept left the set of a session skip names out of all")
	}
	end(t, a)
	kept, _ = othersKept(t, self, nil)
	for _, k := range kept {
		if string(k) == `{"a":"1:2"}` {
			t.Errorf("OthersKept returned the set of a session that ended")
		}
	}
}

// TestAKilledRunsKeptSetGoes: what a killed run kept stays until the last
// session of its workspace ends, which removes it; a session of the
// workspace going on leaves it.
func TestAKilledRunsKeptSetGoes(t *testing.T) {
	top := layout(t)
	a := begin(t, top)
	if err := a.Keep([]byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	m, _ := filepath.Glob(filepath.Join(top, "state", "runs", "*", "known-"+a.ID()))
	if len(m) != 1 {
		t.Fatalf("the kept file: %v", m)
	}
	stale := filepath.Join(filepath.Dir(m[0]), "known-0123456789abcdef")
	if err := os.WriteFile(stale, []byte(`{"a":"1:2"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	b := begin(t, top)
	end(t, b)
	if _, err := os.Stat(stale); err != nil {
		t.Errorf("a session ended while another of the workspace went on, and a killed run's kept set went: %v", err)
	}
	end(t, a)
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("the last session of the workspace ended, and a killed run's kept set is still there (%v)", err)
	}
	if _, err := os.Stat(m[0]); !os.IsNotExist(err) {
		t.Errorf("a session ended, and its own kept set is still there (%v)", err)
	}
}

// TestTrustingIsOneAtATime: two sessions of a workspace take its trust
// lock one after the other; one of another workspace is not held off.
func TestTrustingIsOneAtATime(t *testing.T) {
	top := layout(t)
	ws2 := filepath.Join(top, "ws2")
	if err := os.Mkdir(ws2, 0o755); err != nil {
		t.Fatal(err)
	}
	a, b := begin(t, top), begin(t, top)
	other, err := placeholder.Begin(filepath.Join(top, "state"), ws2)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.End() })
	unlockA, err := a.Trusting()
	if err != nil {
		t.Fatal(err)
	}
	unlockOther, err := other.Trusting()
	if err != nil {
		t.Fatalf("another workspace's session was held off: %v", err)
	}
	unlockOther()
	got := make(chan struct{})
	go func() {
		unlockB, err := b.Trusting()
		if err != nil {
			t.Error(err)
		} else {
			unlockB()
		}
		close(got)
	}()
	select {
	case <-got:
		t.Fatal("a second session of the workspace took the trust lock while the first held it")
	case <-time.After(100 * time.Millisecond):
	}
	unlockA()
	unlockA() // a second release is none
	select {
	case <-got:
	case <-time.After(5 * time.Second):
		t.Fatal("the second session did not get the trust lock once the first let it go")
	}
}

// TestAGuardSeesTheRunsBesideIt: a change that is no run (a file tool's)
// holds the workspace's trust lock while it looks — a run's Trusting
// waits for it — and finds what the runs of its workspace going on kept,
// not those of another workspace nor an ended one's. Where the state
// directory does not exist, no run can be going on: the guard is nil and
// guards nothing, and the directory is not made.
func TestAGuardSeesTheRunsBesideIt(t *testing.T) {
	top := layout(t)
	state, ws := filepath.Join(top, "state"), filepath.Join(top, "ws")
	g, err := placeholder.Watch(state, ws, -1)
	if err != nil || g != nil {
		t.Fatalf("Watch without a state directory = %v, %v; want nil, nil", g, err)
	}
	g.Release() // a nil guard's release is none
	if _, got, err := g.Kept(nil); got != nil || err != nil {
		t.Errorf("a nil guard kept %q, %v", got, err)
	}
	if _, err := os.Lstat(state); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Watch made the state directory: %v", err)
	}
	ws2 := filepath.Join(top, "ws2")
	if err := os.Mkdir(ws2, 0o755); err != nil {
		t.Fatal(err)
	}
	a, ended := begin(t, top), begin(t, top)
	other, err := placeholder.Begin(state, ws2)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.End() })
	for s, set := range map[*placeholder.Session]string{a: `{"P":"a"}`, ended: `{"P":"ended"}`, other: `{"P":"other"}`} {
		if err := s.Keep([]byte(set)); err != nil {
			t.Fatal(err)
		}
	}
	if err := ended.End(); err != nil {
		t.Fatal(err)
	}
	if g, err = placeholder.Watch(state, ws, -1); err != nil || g == nil {
		t.Fatalf("Watch = %v, %v", g, err)
	}
	if _, got, err := g.Kept(nil); err != nil || len(got) != 1 || string(got[0]) != `{"P":"a"}` {
		t.Errorf("Kept = %q, %v; want the set of the one run of the workspace going on", got, err)
	}
	// A change of a workspace nested in the run's, or enclosing it, is
	// refused: that run keeps its set under its own trust lock.
	inner := filepath.Join(ws, "inner")
	if err := os.Mkdir(inner, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{inner, top} {
		other, err := placeholder.Watch(state, dir, -1)
		if err != nil {
			t.Fatal(err)
		}
		if _, got, err := other.Kept(nil); !errors.Is(err, placeholder.ErrNested) {
			t.Errorf("a guard of %s beside a run of %s: Kept = %q, %v; want ErrNested", dir, ws, got, err)
		}
		other.Release()
	}
	got := make(chan struct{})
	go func() {
		unlock, err := a.Trusting()
		if err != nil {
			t.Error(err)
		} else {
			unlock()
		}
		close(got)
	}()
	select {
	case <-got:
		t.Fatal("a run took the trust lock while a guard held it")
	case <-time.After(100 * time.Millisecond):
	}
	g.Release()
	select {
	case <-got:
	case <-time.After(5 * time.Second):
		t.Fatal("the run did not get the trust lock once the guard let it go")
	}
}

// TestAPresenceIsReadWithTheRuns: a workspace kept open for changes that
// are no run is present in the registry of runs: the runs of its
// workspace, and the other changes of it, read what it kept (not its own
// guard); a run of an enclosing or nested workspace does not start while
// it lasts, one of the same workspace does; the end of the last run of
// the workspace leaves what it kept; leaving, or its process dying, takes
// its record and its set away.
func TestAPresenceIsReadWithTheRuns(t *testing.T) {
	top := layout(t)
	state, ws := filepath.Join(top, "state"), filepath.Join(top, "ws")
	p, err := placeholder.Present(state, ws, -1)
	if err != nil {
		t.Fatal(err)
	}
	g, err := placeholder.Watch(state, ws, -1)
	if err != nil || g == nil {
		t.Fatalf("Watch = %v, %v", g, err)
	}
	if err := p.Keep([]byte(`{"P":"tool"}`)); err != nil {
		t.Fatal(err)
	}
	if _, got, err := g.Kept(p); err != nil || len(got) != 0 {
		t.Errorf("the presence's own guard read %q, %v; want nothing", got, err)
	}
	if _, got, err := g.Kept(nil); err != nil || len(got) != 1 || string(got[0]) != `{"P":"tool"}` {
		t.Errorf("another change's guard read %q, %v; want the presence's set", got, err)
	}
	g.Release()
	a := begin(t, top)
	kept, all := othersKept(t, a, func(string) bool { return true })
	if len(kept) != 1 || len(all) != 1 || string(kept[0]) != `{"P":"tool"}` {
		t.Errorf("a run beside the presence: OthersKept = %q, %q; want the presence's set in both", kept, all)
	}
	end(t, a) // the last run of the workspace: it cleans up
	if got, _ := filepath.Glob(filepath.Join(state, "runs", "*", "tool-*")); len(got) != 1 {
		t.Errorf("the end of the last run took the presence's set: %q", got)
	}
	for _, dir := range []string{filepath.Join(ws, "inner"), top} {
		os.MkdirAll(dir, 0o755)
		if s, err := placeholder.Begin(state, dir); !errors.Is(err, placeholder.ErrNested) {
			if s != nil {
				s.End()
			}
			t.Errorf("a run of %s beside a presence of %s: %v; want ErrNested", dir, ws, err)
		}
	}
	p.Leave()
	if got, _ := filepath.Glob(filepath.Join(state, "runs", "*", "tool-*")); len(got) != 0 {
		t.Errorf("the presence left, and its set is still there: %q", got)
	}
	if got, _ := filepath.Glob(filepath.Join(state, "runs", "active", "f-*")); len(got) != 0 {
		t.Errorf("the presence left, and its record is still there: %q", got)
	}
	// A presence whose process died: its record unlocked.
	dead, err := placeholder.Present(state, ws, -1)
	if err != nil {
		t.Fatal(err)
	}
	if err := dead.Keep([]byte(`{"P":"dead"}`)); err != nil {
		t.Fatal(err)
	}
	records, _ := filepath.Glob(filepath.Join(state, "runs", "active", "f-*"))
	if len(records) != 1 {
		t.Fatalf("the record: %q", records)
	}
	dead.Forget() // its lock goes as a killed process's would; its files stay
	b := begin(t, top)
	if kept, all := othersKept(t, b, nil); len(kept)+len(all) != 0 {
		t.Errorf("a run read the set of a presence whose process died: %q %q", kept, all)
	}
	if got, _ := filepath.Glob(filepath.Join(state, "runs", "*", "tool-*")); len(got) != 0 {
		t.Errorf("a presence's process died, and its set is still there after a walk: %q", got)
	}
	if _, err := os.Lstat(records[0]); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a presence's process died, and its record is still there after a walk: %v", err)
	}
}

// TestARenamedWorkspaceKeepsItsRunsSets: a run's set is kept in its
// workspace's directory of runs, named by the directory itself; its
// record names the path it was begun by. The workspace renamed while the
// run goes on, a change and a run of the new path read that set (the
// record's path, which leads nowhere now, is not asked).
func TestARenamedWorkspaceKeepsItsRunsSets(t *testing.T) {
	top := layout(t)
	state, ws, moved := filepath.Join(top, "state"), filepath.Join(top, "ws"), filepath.Join(top, "moved")
	s, err := placeholder.Begin(state, ws)
	if err != nil {
		t.Fatal(err)
	}
	defer s.End()
	if err := s.Keep([]byte(`{"Q":"-"}`)); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(ws, moved); err != nil {
		t.Fatal(err)
	}
	g, err := placeholder.Watch(state, moved, -1)
	if err != nil || g == nil {
		t.Fatalf("Watch = %v, %v", g, err)
	}
	defer g.Release()
	kept, all, err := g.Kept(nil)
	if err != nil || len(all) != 1 || len(kept) != 1 {
		t.Errorf("a change of %s beside a run recorded as %s (the same directory, the same key %s): Kept = %q, %q, %v; want the run's set",
			moved, ws, placeholder.Key(moved), kept, all, err)
	}
	s2, err := placeholder.Begin(state, moved)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.End()
	if kept, all := othersKept(t, s2, nil); len(all) != 1 || len(kept) != 1 {
		t.Errorf("a run of %s beside a run recorded as %s: OthersKept = %q, %q; want the first run's set", moved, ws, kept, all)
	}
}

// othersKept is s.OthersKept, its error the test's failure.
func othersKept(t *testing.T, s *placeholder.Session, skip func(id string) bool) (kept, all [][]byte) {
	t.Helper()
	kept, all, err := s.OthersKept(skip)
	if err != nil {
		t.Fatal(err)
	}
	return kept, all
}

// TestARegistryThatCannotBeReadFailsClosed: a record of the registry of
// runs that could not be opened (here a symbolic link, which is opened
// without following it; a process out of descriptors fails the same way)
// was skipped as if no run were there: a nested run started beside it, a
// file tool's change and a run's set held nothing of it against their
// own, a disposable root was applied under it. Each of them now fails,
// naming the record; and so does a run's look at a set kept that cannot be
// read (one that is no regular file still trusts nothing).
func TestARegistryThatCannotBeReadFailsClosed(t *testing.T) {
	top := layout(t)
	state, ws := filepath.Join(top, "state"), filepath.Join(top, "ws")
	s := begin(t, top)
	bad := filepath.Join(state, "runs", "active", "r-0123456789abcdef")
	if err := os.Symlink(filepath.Join(top, "outside"), bad); err != nil {
		t.Fatal(err)
	}
	named := func(what string, err error) {
		t.Helper()
		if err == nil || !strings.Contains(err.Error(), bad) {
			t.Errorf("%s beside a record that cannot be read: %v, want an error naming %s", what, err, bad)
		}
	}
	_, _, err := s.OthersKept(nil)
	named("OthersKept", err)
	g, err := placeholder.Watch(state, ws, -1)
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = g.Kept(nil)
	g.Release()
	named("Guard.Kept", err)
	end(t, s) // no run to find before the record
	_, err = placeholder.Running(state, top)
	named("Running", err)
	nested := filepath.Join(ws, "sub")
	if err := os.Mkdir(nested, 0o755); err != nil {
		t.Fatal(err)
	}
	n, err := placeholder.Begin(state, nested)
	if err == nil {
		n.End()
	}
	named("Begin", err)
	if err := os.Remove(bad); err != nil {
		t.Fatal(err)
	}

	// A set another run kept that cannot be read (a directory is one that
	// trusts nothing: nil, as before).
	s, other := begin(t, top), begin(t, top)
	known := filepath.Join(state, "runs", placeholder.Key(ws), "known-"+other.ID())
	if err := os.Symlink(filepath.Join(top, "outside"), known); err != nil {
		t.Fatal(err)
	}
	if kept, all := othersKept(t, s, nil); len(kept) != 1 || kept[0] != nil || len(all) != 1 {
		t.Errorf("a set that is a symbolic link: OthersKept = %q, %q; want one set that trusts nothing", kept, all)
	}
	if os.Geteuid() == 0 {
		return // root reads a file of mode 0: the unprivileged pass checks the rest
	}
	if err := os.Remove(known); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(known, []byte(`{}`), 0); err != nil {
		t.Fatal(err)
	}
	_, _, err = s.OthersKept(nil)
	if err == nil || !strings.Contains(err.Error(), known) {
		t.Errorf("OthersKept beside a set that cannot be read: %v, want an error naming %s", err, known)
	}
}

// recordOf is what the record of a run of ws holds first: its path, and
// its place (then what holds it open).
func recordOf(t *testing.T, ws string) string {
	t.Helper()
	p, err := mountinfo.Of(ws)
	if err != nil {
		t.Fatal(err)
	}
	return ws + "\x00@" + p.String()
}

// TestSpareSets: the set a run or a file tool's change kept is a spare of
// its workspace's directory once it ends (sk-*), and the next one writes
// its own over it — the same file, no new one made: the runs beside it
// read exactly what it kept, a set shorter than the spare held too. A
// change's record is a spare record once it leaves, which the next change
// takes; the spares are bounded.
func TestSpareSets(t *testing.T) {
	top := layout(t)
	state, ws := filepath.Join(top, "state"), filepath.Join(top, "ws")
	spareSets := func() []string {
		m, _ := filepath.Glob(filepath.Join(state, "runs", "*", "sk-*"))
		return m
	}
	keptFile := func(name string) string {
		m, _ := filepath.Glob(filepath.Join(state, "runs", "*", name))
		if len(m) != 1 {
			t.Fatalf("the kept file %s: %v", name, m)
		}
		return m[0]
	}
	long := `{"a/long/path/of/a/submodule":"1:2","another/submodule":"3:4"}`
	first := begin(t, top)
	if err := first.Keep([]byte(long)); err != nil {
		t.Fatal(err)
	}
	set := inode(t, keptFile("known-"+first.ID()))
	end(t, first)
	if got := spareSets(); len(got) != 1 || inode(t, got[0]) != set {
		t.Fatalf("after a run ended: spare sets %q, want its set (inode %d)", got, set)
	}

	reader, second := begin(t, top), begin(t, top)
	short := `{"b":"5:6"}`
	if err := second.Keep([]byte(short)); err != nil {
		t.Fatal(err)
	}
	if got := inode(t, keptFile("known-"+second.ID())); got != set {
		t.Errorf("the next run kept its set in inode %d, want the spare's %d", got, set)
	}
	if got := spareSets(); len(got) != 0 {
		t.Errorf("the spare taken is still there: %q", got)
	}
	if kept, _ := othersKept(t, reader, nil); len(kept) != 1 || string(kept[0]) != short {
		t.Errorf("a run beside it read %q, want exactly %q", kept, short)
	}
	end(t, second)
	end(t, reader)

	// A file tool's change: its set and its record are spares once it
	// leaves; the next change takes both.
	p, err := placeholder.Present(state, ws, -1)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Keep([]byte(long)); err != nil {
		t.Fatal(err)
	}
	records, _ := filepath.Glob(filepath.Join(state, "runs", "active", "f-*"))
	if len(records) != 1 {
		t.Fatalf("the change's record: %q", records)
	}
	record, set := inode(t, records[0]), inode(t, keptFile("tool-*"))
	p.Leave()
	_, spares := activeRecords(t, top)
	if !slices.ContainsFunc(spares, func(s string) bool { return inode(t, s) == record }) {
		t.Errorf("the change left: spare records %q, none its record (inode %d)", spares, record)
	}
	spareInodes := inodes(t, spares)
	if got := spareSets(); !slices.ContainsFunc(got, func(s string) bool { return inode(t, s) == set }) {
		t.Errorf("the change left: spare sets %q, none its set (inode %d)", got, set)
	}
	q, err := placeholder.Present(state, ws, -1)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Leave()
	if err := q.Keep([]byte(short)); err != nil {
		t.Fatal(err)
	}
	records, _ = filepath.Glob(filepath.Join(state, "runs", "active", "f-*"))
	if len(records) != 1 || spareInodes[inode(t, records[0])] == "" {
		t.Fatalf("the next change's record %q, want a spare record taken (%q)", records, spares)
	}
	if data, err := os.ReadFile(records[0]); err != nil || string(data) != recordOf(t, ws) {
		t.Errorf("the taken record holds %q (%v), want only %q", data, err, recordOf(t, ws))
	}
	if got := keptFile("tool-*"); inode(t, got) != set {
		t.Errorf("the next change kept its set in a new file, not the spare (inode %d)", set)
	}
	g, err := placeholder.Watch(state, ws, -1)
	if err != nil {
		t.Fatal(err)
	}
	_, all, err := g.Kept(nil)
	g.Release()
	if err != nil || len(all) != 1 || string(all[0]) != short {
		t.Errorf("another change read %q (%v), want exactly %q", all, err, short)
	}

	// A spare that has another name (a hard link planted in the state
	// directory) is not written through: the set goes to a file of its own.
	for _, sk := range spareSets() {
		os.Remove(sk)
	}
	victim := filepath.Join(top, "outside", "victim")
	if err := os.WriteFile(victim, []byte("the user's"), 0o600); err != nil {
		t.Fatal(err)
	}
	planted := filepath.Join(filepath.Dir(keptFile("tool-*")), "sk-planted")
	if err := os.Link(victim, planted); err != nil {
		t.Fatal(err)
	}
	linked := begin(t, top)
	if err := linked.Keep([]byte(short)); err != nil {
		t.Fatal(err)
	}
	if data, _ := os.ReadFile(victim); string(data) != "the user's" {
		t.Errorf("a set was written through a hard-linked spare: the other name holds %q", data)
	}
	if got := inode(t, keptFile("known-"+linked.ID())); got == inode(t, victim) {
		t.Error("a hard-linked spare was taken for a set")
	}
	end(t, linked)

	// Many at once, then none: at most 4 spare sets stay.
	var sessions []*placeholder.Session
	for range 7 {
		s := begin(t, top)
		if err := s.Keep([]byte(short)); err != nil {
			t.Fatal(err)
		}
		sessions = append(sessions, s)
	}
	for _, s := range sessions {
		end(t, s)
	}
	if got := spareSets(); len(got) > 4 {
		t.Errorf("after 7 runs at once: %d spare sets, want at most 4", len(got))
	}
}
