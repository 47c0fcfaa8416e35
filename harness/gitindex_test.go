package harness_test

import (
	"crypto/sha1"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cordon-run/cordon/harness"
	"github.com/cordon-run/cordon/internal/testenv"
	"github.com/cordon-run/cordon/refusal"
)

// TestGitlinksOfEveryIndexVersion reads the gitlinks of indexes git itself
// wrote, in versions 2, 3 (an extended flag) and 4 (prefix-compressed
// paths).
func TestGitlinksOfEveryIndexVersion(t *testing.T) {
	gitBin, err := exec.LookPath("git")
	testenv.Require(t, err == nil, "git: %v", err)
	ws := t.TempDir()
	git := func(args ...string) {
		t.Helper()
		cmd := exec.Command(gitBin, args...)
		cmd.Dir = ws
		cmd.Env = append(os.Environ(), "HOME="+ws, "GIT_CONFIG_NOSYSTEM=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v %s", args, err, out)
		}
	}
	git("init", "-q", ".")
	for _, f := range []string{"a.txt", "dir/b.txt", "dir/c.txt", "zz/long/path/name/file.go"} {
		os.MkdirAll(filepath.Join(ws, filepath.Dir(f)), 0o755)
		os.WriteFile(filepath.Join(ws, f), []byte(f), 0o644)
	}
	git("add", ".")
	const commit = "0123456789abcdef0123456789abcdef01234567"
	git("update-index", "--add", "--cacheinfo", "160000,"+commit+",dir/sub")
	git("update-index", "--add", "--cacheinfo", "160000,"+commit+",vendor/lib")
	for _, v := range []string{"2", "3", "4"} {
		git("update-index", "--index-version", v)
		if v == "3" {
			os.WriteFile(filepath.Join(ws, "dir/d.txt"), []byte("d"), 0o644)
			git("add", "-N", "dir/d.txt") // intent to add: an extended flag
		}
		links, err := harness.Gitlinks(filepath.Join(ws, ".git", "index"), 20)
		if err != nil {
			t.Fatalf("version %s: %v", v, err)
		}
		if !slices.Equal(links, []string{"dir/sub", "vendor/lib"}) {
			t.Errorf("version %s: gitlinks %q", v, links)
		}
	}
	// A split index: the entries are in .git/sharedindex.<hash>, which the
	// index's link extension names, and one more in the index itself.
	git("update-index", "--index-version", "2")
	git("update-index", "--split-index")
	git("update-index", "--add", "--cacheinfo", "160000,"+commit+",split/sub")
	if shared, _ := filepath.Glob(filepath.Join(ws, ".git", "sharedindex.*")); len(shared) == 0 {
		t.Fatalf("git made no shared index")
	}
	links, err := harness.Gitlinks(filepath.Join(ws, ".git", "index"), 20)
	if err != nil {
		t.Fatalf("split index: %v", err)
	}
	slices.Sort(links)
	if !slices.Equal(links, []string{"dir/sub", "split/sub", "vendor/lib"}) {
		t.Errorf("split index: gitlinks %q", links)
	}
	for _, bad := range [][]byte{nil, []byte("DIRC"), []byte("DIRC\x00\x00\x00\x09\x00\x00\x00\x01"), []byte("DIRC\x00\x00\x00\x02\x00\x00\x00\x05short")} {
		if _, _, err := harness.ParseGitlinks(bad, 20); err == nil {
			t.Errorf("ParseGitlinks(%q) succeeded", bad)
		}
	}
}

// TestGitlinksOfASHA256Repository: in a repository with SHA-256 object
// names (extensions.objectformat in its configuration, wherever git wrote
// it there) the submodule entries are found, and protected.
func TestGitlinksOfASHA256Repository(t *testing.T) {
	gitBin, err := exec.LookPath("git")
	testenv.Require(t, err == nil, "git: %v", err)
	ws, _ := filepath.EvalSymlinks(t.TempDir())
	git := func(args ...string) {
		t.Helper()
		cmd := exec.Command(gitBin, args...)
		cmd.Dir = ws
		cmd.Env = append(os.Environ(), "HOME="+ws, "GIT_CONFIG_NOSYSTEM=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v %s", args, err, out)
		}
	}
	git("init", "-q", "--object-format=sha256", ".")
	// A long configuration before the extension: no first-page shortcut.
	for i := range 200 {
		git("config", "alias.a"+string(rune('a'+i%26))+string(rune('a'+i/26)), "status --short --branch --untracked-files=normal")
	}
	// The extension last, past the first pages of the file.
	cfgPath := filepath.Join(ws, ".git", "config")
	data, _ := os.ReadFile(cfgPath)
	cfg := strings.Replace(string(data), "[extensions]\n\tobjectformat = sha256\n", "", 1)
	if cfg == string(data) || len(cfg) < 8<<10 {
		t.Fatalf("unexpected configuration from git init (%d bytes):\n%.300s", len(cfg), data)
	}
	os.WriteFile(cfgPath, []byte(cfg+"[extensions]\n\tobjectFormat = sha256\n"), 0o644)
	os.WriteFile(filepath.Join(ws, "a.txt"), []byte("a"), 0o644)
	git("add", "a.txt")
	git("update-index", "--add", "--cacheinfo", "160000,"+strings.Repeat("ab", 32)+",dir/sub")
	p, err := testenv.Harness(t).Protect(ws)
	if err != nil {
		t.Fatal(err)
	}
	if v, _, _ := p.Check("dir/sub/.git"); v != harness.InWriteLater {
		t.Errorf("dir/sub/.git of a SHA-256 repository: %v; want it protected\n%s", v, p)
	}
	// A linked worktree of it: its git directory's commondir names the
	// main one, whose configuration holds the extension.
	git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "c")
	wt := filepath.Join(filepath.Dir(ws), filepath.Base(ws)+"-wt")
	git("worktree", "add", "-q", wt)
	t.Cleanup(func() { os.RemoveAll(wt) })
	cmd := exec.Command(gitBin, "update-index", "--add", "--cacheinfo", "160000,"+strings.Repeat("cd", 32)+",wsub")
	cmd.Dir, cmd.Env = wt, append(os.Environ(), "HOME="+ws, "GIT_CONFIG_NOSYSTEM=1")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git update-index in the worktree: %v %s", err, out)
	}
	p, err = testenv.Harness(t).Protect(wt)
	if err != nil {
		t.Fatalf("a linked worktree of a SHA-256 repository: %v", err)
	}
	if v, _, _ := p.Check("wsub/.git"); v != harness.InWriteLater {
		t.Errorf("wsub/.git of a linked worktree of a SHA-256 repository: %v; want it protected\n%s", v, p)
	}
}

// TestAQuarantineAToolMadeUnwritableStillHolds: a tool owns what it made,
// and can take its write permission away: the directory holding a
// submodule's .git (rename needs write on it), or .git itself (where the
// index is). cordon, not root, must still keep git out of the submodule.
func TestAQuarantineAToolMadeUnwritableStillHolds(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("skipping as root, whom no permission stops: the unprivileged lanes of scripts/test run it")
	}
	for _, c := range []struct {
		name  string
		write func(ws string)
	}{
		{"submodule directory 0555", func(ws string) {
			os.MkdirAll(filepath.Join(ws, "sub", ".git"), 0o755)
			os.WriteFile(filepath.Join(ws, ".git", "index"), index(2, 1, entry("sub", true, -1)), 0o644)
			os.Chmod(filepath.Join(ws, "sub"), 0o555)
		}},
		{"submodule .git 0555", func(ws string) {
			os.MkdirAll(filepath.Join(ws, "sub", ".git"), 0o755)
			os.WriteFile(filepath.Join(ws, ".git", "index"), index(2, 1, entry("sub", true, -1)), 0o644)
			os.Chmod(filepath.Join(ws, "sub", ".git"), 0o555)
		}},
		{".git 0555, an index cordon cannot read", func(ws string) {
			os.MkdirAll(filepath.Join(ws, "sub", ".git"), 0o755)
			d := append([]byte("DIRC\x00\x00\x00\x02\x00\x00\x00\x01"), entry("sub", true, -1)...)
			d = append(d, "JUNK"...) // git stops at fewer than 8 bytes; cordon refuses them
			sum := sha1.Sum(d)
			os.WriteFile(filepath.Join(ws, ".git", "index"), append(d, sum[:]...), 0o644)
			os.Chmod(filepath.Join(ws, ".git"), 0o555)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			ws, _ := filepath.EvalSymlinks(t.TempDir())
			if out, err := exec.Command("git", "init", "-q", ws).CombinedOutput(); err != nil {
				t.Skipf("git: %v %s", err, out)
			}
			t.Cleanup(func() {
				os.Chmod(filepath.Join(ws, "sub"), 0o755)
				os.Chmod(filepath.Join(ws, "sub", ".git"), 0o755)
				os.Chmod(filepath.Join(ws, ".git"), 0o755)
			})
			h := harness.Default().WithStateDir(t.TempDir()).WithCacheDir(t.TempDir())
			notes, err := harness.Quarantined(h, ws, func() { c.write(ws) })
			_, entry := os.Lstat(filepath.Join(ws, "sub", ".git"))
			f, index := os.Open(filepath.Join(ws, ".git", "index"))
			if index == nil {
				f.Close()
			}
			if entry == nil && index == nil {
				t.Errorf("sub/.git and the index are both where git reads them (notes %q, err %v)", notes, err)
			}
		})
	}
}

// TestAQuarantineAToolMadeUnsearchableStillHolds: a tool can take away
// more than the write bit — read and search of .git (mode 0). Once the
// user gives them back (chmod u+rwx .git), git must not enter the
// submodule: cordon gave them back and moved the index or the entry.
func TestAQuarantineAToolMadeUnsearchableStillHolds(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("skipping as root, whom no permission stops: the unprivileged lanes of scripts/test run it")
	}
	for _, mode := range []os.FileMode{0, 0o200, 0o400, 0o600} {
		t.Run(fmt.Sprintf(".git %04o", mode), func(t *testing.T) {
			ws, _ := filepath.EvalSymlinks(t.TempDir())
			if out, err := exec.Command("git", "init", "-q", ws).CombinedOutput(); err != nil {
				t.Skipf("git: %v %s", err, out)
			}
			t.Cleanup(func() { os.Chmod(filepath.Join(ws, ".git"), 0o755) })
			h := harness.Default().WithStateDir(t.TempDir()).WithCacheDir(t.TempDir())
			notes, err := harness.Quarantined(h, ws, func() {
				os.MkdirAll(filepath.Join(ws, "sub", ".git"), 0o755)
				os.WriteFile(filepath.Join(ws, ".git", "index"), index(2, 1, entry("sub", true, -1)), 0o644)
				os.Chmod(filepath.Join(ws, ".git"), mode)
			})
			os.Chmod(filepath.Join(ws, ".git"), 0o755) // what the user does next
			_, entry := os.Lstat(filepath.Join(ws, "sub", ".git"))
			links, ierr := harness.Gitlinks(filepath.Join(ws, ".git", "index"), 20)
			if entry == nil && ierr == nil && slices.Contains(links, "sub") {
				t.Errorf("once .git is searchable again, git enters sub: sub/.git and the index naming it both stayed (notes %q, err %v)", notes, err)
			}
		})
	}
}

// TestAnotherUsersEnclosingRepositoryIsNotOurs: a repository enclosing
// the workspace that another user owns (anyone can make /tmp/.git) is one
// git refuses ("dubious ownership"): cordon neither protects nor moves
// anything for it, unless safe.directory in the user's configuration
// lets git use it.
func TestAnotherUsersEnclosingRepositoryIsNotOurs(t *testing.T) {
	uid, gid := testenv.OtherUser(t)
	outer, _ := filepath.EvalSymlinks(t.TempDir())
	ws := filepath.Join(outer, "ws")
	os.MkdirAll(filepath.Join(ws, "dep", ".git"), 0o755)
	if out, err := exec.Command("git", "init", "-q", outer).CombinedOutput(); err != nil {
		t.Skipf("git: %v %s", err, out)
	}
	os.WriteFile(filepath.Join(outer, ".git", "index"), index(2, 0, nil), 0o644)
	filepath.Walk(filepath.Join(outer, ".git"), func(p string, _ os.FileInfo, _ error) error { return os.Lchown(p, uid, gid) })
	home := t.TempDir()
	h := harness.Default().WithStateDir(t.TempDir()).WithCacheDir(t.TempDir()).WithHome(home)
	t.Setenv("GIT_CONFIG_GLOBAL", "")
	t.Setenv("GIT_CONFIG_SYSTEM", filepath.Join(home, "no-system-config"))

	p, err := h.Protect(ws)
	if err != nil {
		t.Fatal(err)
	}
	notes, err := harness.Quarantined(h, ws, func() {
		// The other user, during the run: its index names ws/dep.
		os.WriteFile(filepath.Join(outer, ".git", "index"), index(2, 1, entry("ws/dep", true, -1)), 0o644)
	})
	if _, lerr := os.Lstat(filepath.Join(ws, "dep", ".git")); lerr != nil {
		t.Errorf("another user's index moved dep/.git of the workspace: %q %v", notes, err)
	}
	if p, err = h.Protect(ws); err != nil {
		t.Fatal(err)
	}
	if v, _, _ := p.Check("dep/.git"); v == harness.InWriteLater {
		t.Errorf("dep/.git is protected for another user's repository, which git refuses")
	}

	// safe.directory lets git use it: then it is protected as any.
	os.WriteFile(filepath.Join(home, ".gitconfig"), []byte("[safe]\n\tdirectory = *\n"), 0o644)
	if p, err = h.Protect(ws); err != nil {
		t.Fatal(err)
	}
	if v, _, _ := p.Check("dep/.git"); v != harness.InWriteLater {
		t.Errorf("dep/.git: %v; with safe.directory = * git uses the repository, and enters dep", v)
	}
}

// TestGitlinksAddedRunAfterRunAreBounded: runs that each add fewer
// submodules than a run may add still cannot grow the index past what a
// sandbox can protect: the run that would is the one whose index goes;
// and a run that adds as many as it takes away still adds them.
func TestGitlinksAddedRunAfterRunAreBounded(t *testing.T) {
	ws, _ := filepath.EvalSymlinks(t.TempDir())
	if out, err := exec.Command("git", "init", "-q", ws).CombinedOutput(); err != nil {
		t.Skipf("git: %v %s", err, out)
	}
	links := func(prefix string, n int) []byte {
		var e []byte
		for i := range n {
			e = append(e, entry(fmt.Sprintf("%s%04d", prefix, i), true, -1)...)
		}
		return index(2, n, e)
	}
	idx := filepath.Join(ws, ".git", "index")
	h := harness.Default().WithStateDir(t.TempDir()).WithCacheDir(t.TempDir())
	for _, c := range []struct {
		name          string
		before, after []byte
	}{
		{"30 more past 1000", links("g", 1000), links("g", 1030)},
		// As many gone as came: the count is the same, the submodules new.
		{"300 in place of 300", links("g", 300), links("n", 300)},
	} {
		os.WriteFile(idx, c.before, 0o644)
		notes, err := harness.Quarantined(h, ws, func() { os.WriteFile(idx, c.after, 0o644) })
		if err != nil || len(notes) != 1 || !strings.Contains(notes[0], "git reads none now") {
			t.Errorf("%s: notes %q, err %v; want the index moved", c.name, notes, err)
		}
	}
}

// TestAGitfileWithDotDotAfterASymlinkIsRefused: git resolves a gitfile's
// target from its directory as the kernel does — d/sym/.. is the parent
// of d/sym's target — while a path cleaned as text drops the link. The
// git directory of a submodule whose gitfile reads so cannot be
// protected by its name: the run is refused.
func TestAGitfileWithDotDotAfterASymlinkIsRefused(t *testing.T) {
	gitBin, err := exec.LookPath("git")
	testenv.Require(t, err == nil, "git: %v", err)
	ws, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	git := func(dir string, args ...string) {
		t.Helper()
		cmd := exec.Command(gitBin, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "HOME="+ws, "GIT_CONFIG_NOSYSTEM=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v %s", args, err, out)
		}
	}
	git(ws, "init", "-q", ".")
	os.MkdirAll(filepath.Join(ws, "d", "x", "y"), 0o755)
	os.Symlink("x/y", filepath.Join(ws, "d", "sym"))
	git(ws, "init", "-q", "--separate-git-dir", filepath.Join(ws, "d", "x", "Q"), filepath.Join(ws, "P"))
	const commit = "0123456789abcdef0123456789abcdef01234567"
	git(ws, "update-index", "--add", "--cacheinfo", "160000,"+commit+",P")
	os.WriteFile(filepath.Join(ws, "P", ".git"), []byte("gitdir: ../d/sym/../Q\n"), 0o644)
	if _, err := testenv.Harness(t).Protect(ws); !errors.Is(err, refusal.ProtectedPath) {
		t.Fatalf("Protect = %v, want a ProtectedPath refusal", err)
	}
	// The plain gitfile of that directory is protected as before.
	os.WriteFile(filepath.Join(ws, "P", ".git"), []byte("gitdir: ../d/x/Q\n"), 0o644)
	p, err := testenv.Harness(t).Protect(ws)
	if err != nil {
		t.Fatal(err)
	}
	// Whole and read-only: its configuration and its index.
	for _, rel := range []string{"d/x/Q/config", "d/x/Q/index"} {
		if v, _, _ := p.Check(rel); v != harness.InWriteLater {
			t.Errorf("%s is not protected (%v): %v", rel, v, p.Paths())
		}
	}
}
