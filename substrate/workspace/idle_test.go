package workspace

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/cordon-run/cordon/harness"
	"github.com/cordon-run/cordon/internal/placeholder"
)

// TestASandboxGivenItsCommandMeanwhileIsHeldAgainstTheSet: a pool of this
// process made a sandbox ahead (its set kept, idle: held against no one's
// trust). A file tool's first change looked at the runs while it was
// idle; the pool then gave it its command (no trust lock is taken for
// that), which made Q/.git and entered Q in the index; the change read
// the index and trusted Q. What is held against the set is read after the
// index now, as a run reads it: here the command comes just before the
// index's read.
func TestASandboxGivenItsCommandMeanwhileIsHeldAgainstTheSet(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	top := t.TempDir()
	top, _ = filepath.EvalSymlinks(top)
	state, ws := filepath.Join(top, "state"), filepath.Join(top, "ws")
	os.Mkdir(ws, 0o755)
	git := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir, cmd.Env = ws, []string{"PATH=" + os.Getenv("PATH"), "HOME=" + top, "GIT_CONFIG_NOSYSTEM=1"}
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v %s", args, err, out)
		}
	}
	git("init", "-q")
	h := harness.Default().WithStateDir(state)
	// The sandbox made ahead: its set (no Q) kept, idle.
	s, err := placeholder.Begin(state, ws)
	if err != nil {
		t.Fatal(err)
	}
	defer s.End()
	ahead, err := h.Protect(ws)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Keep(ahead.Known()); err != nil {
		t.Fatal(err)
	}
	placeholder.SetIdle(s.ID(), true)
	defer placeholder.SetIdle(s.ID(), false)

	beforeIndexHook = func() {
		// The pool gives the sandbox its command, which enters Q.
		placeholder.SetIdle(s.ID(), false)
		os.MkdirAll(filepath.Join(ws, "Q", ".git", "objects"), 0o755)
		os.MkdirAll(filepath.Join(ws, "Q", ".git", "refs"), 0o755)
		os.WriteFile(filepath.Join(ws, "Q", ".git", "HEAD"), []byte("ref: refs/heads/main\n"), 0o644)
		os.WriteFile(filepath.Join(ws, "Q", ".git", "config"), []byte("[core]\n\tfsmonitor = \"false\"\n"), 0o644)
		git("update-index", "--add", "--cacheinfo", "160000,0123456789012345678901234567890123456789,Q")
	}
	defer func() { beforeIndexHook = nil }()
	w, err := Open(ws, WithHarness(h))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := w.WriteFile("x.txt", []byte("x")); err != nil {
		t.Fatal(err)
	}
	var set map[string]string
	json.Unmarshal(w.Found().Known(), &set)
	if _, ok := set["Q"]; ok {
		t.Errorf("the tool's set trusts Q, which the sandbox's command entered after the tool's look had passed it by as idle: %s", w.Found().Known())
	}
}
