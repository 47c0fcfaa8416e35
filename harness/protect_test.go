package harness_test

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
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

// makeTree creates the pre entries in T, a fresh temporary directory,
// runs the git commands (in T, the real git binary, isolated from the
// host's configuration), then creates the entries, and returns T's
// canonical path. An entry is
//
//   - "d/": directory d
//   - "f": an empty file f
//   - "f: text": file f holding text
//   - "a => b": symlink a with target b (replacing what is at a)
//   - "-p": p removed
//
// $T is replaced with T's path and $WS with the workspace's, T/ws. Parents
// are created.
func makeTree(t *testing.T, ws string, pre []string, git [][]string, entries []string) string {
	t.Helper()
	top, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	r := strings.NewReplacer("$T", top, "$WS", filepath.Join(top, ws))
	makeEntries(t, top, r, pre)
	for _, args := range git {
		runGit(t, top, r, args...)
	}
	makeEntries(t, top, r, entries)
	return top
}

func makeEntries(t *testing.T, top string, r *strings.Replacer, entries []string) {
	t.Helper()
	for _, ent := range entries {
		ent = r.Replace(ent)
		var err error
		if rm, ok := strings.CutPrefix(ent, "-"); ok {
			if err := os.RemoveAll(filepath.Join(top, rm)); err != nil {
				t.Fatal(err)
			}
			continue
		}
		name, link, isLink := strings.Cut(ent, " => ")
		name, text, _ := strings.Cut(name, ": ")
		p := filepath.Join(top, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		switch {
		case isLink:
			os.RemoveAll(p)
			err = os.Symlink(link, p)
		case strings.HasSuffix(name, "/"):
			err = os.MkdirAll(p, 0o755)
		default:
			err = os.WriteFile(p, []byte(text), 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// runGit runs git with args in dir, reading no system or global
// configuration.
func runGit(t *testing.T, dir string, r *strings.Replacer, args ...string) {
	t.Helper()
	gitBin, err := exec.LookPath("git")
	testenv.Require(t, err == nil, "git is not installed: %v", err)
	argv := []string{"-c", "init.defaultBranch=main"}
	for _, a := range args {
		argv = append(argv, r.Replace(a))
	}
	cmd := exec.Command(gitBin, argv...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "HOME="+dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git %q: %v\n%s", args, err, out)
	}
}

// testConfig is the default configuration with the state, cache and home
// directories in T, outside the workspace, so that nothing reads or
// writes the real ones.
func testConfig(t *testing.T, top string) harness.Config {
	t.Helper()
	t.Setenv("XDG_CONFIG_HOME", "")
	home := filepath.Join(top, "home")
	if err := os.MkdirAll(home, 0o755); err != nil {
		t.Fatal(err)
	}
	return harness.Default().WithStateDir(filepath.Join(top, "state")).WithCacheDir(filepath.Join(top, "cache")).WithHome(home)
}

// code spells one protected path for the tables: "ro" or "pin", "/" for a
// directory, " mask" when an absent file is masked by a directory, and the
// placeholder content.
func code(q harness.Path) string {
	s := "ro"
	if q.Mode == harness.Pinned {
		s = "pin"
	}
	if q.Dir {
		s += "/"
	}
	if q.MaskDir {
		s += " mask"
	}
	if q.Content != "" {
		s += fmt.Sprintf(" content=%q", q.Content)
	}
	return s
}

// gitDirPaths is what a git directory g (workspace-relative, "" for the
// root) inside the workspace protects.
func gitDirPaths(g string) map[string]string {
	j := func(n string) string {
		if g == "" {
			return n
		}
		return g + "/" + n
	}
	m := map[string]string{
		j("HEAD"): "ro", j("config"): "ro", j("config.worktree"): "ro", j("commondir"): `ro content=".\n"`,
		j("hooks"): "ro/", j("modules"): "ro/", j("worktrees"): "ro/", j("remotes"): "ro/", j("branches"): "ro/",
		j("objects"): "pin/", j("refs"): "pin/",
	}
	if g != "" {
		m[g] = "pin/"
		// The root keeps the shape of no git directory, whatever happens
		// to this one.
		m["HEAD"] = "ro mask"
	}
	return m
}

// hookConfigs are the git-hook managers' configurations, protected when a
// hook is installed.
var hookConfigs = map[string]string{
	".pre-commit-config.yaml": "ro", ".pre-commit-config.yml": "ro",
	"lefthook.yml": "ro", ".lefthook.yml": "ro", "lefthook.yaml": "ro", ".lefthook.yaml": "ro",
	"lefthook-local.yml": "ro", ".lefthook-local.yml": "ro", ".overcommit.yml": "ro", ".husky": "ro/",
}

// noGit is what a workspace without a usable git directory protects.
var noGit = map[string]string{".git": "ro/", "HEAD": "ro mask"}

func merge(ms ...map[string]string) map[string]string {
	out := map[string]string{}
	for _, m := range ms {
		maps.Copy(out, m)
	}
	return out
}

// snapshot records every entry below top: type, mode and content.
func snapshot(t *testing.T, top string) map[string]string {
	t.Helper()
	snap := map[string]string{}
	filepath.WalkDir(top, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return nil
		}
		v := fi.Mode().String()
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			l, _ := os.Readlink(p)
			v += " " + l
		case fi.Mode().IsRegular():
			b, _ := os.ReadFile(p)
			v += " " + string(b)
		}
		snap[p] = v
		return nil
	})
	return snap
}

type protectCase struct {
	name string
	ws   string   // the workspace, relative to T; "ws" when empty
	pre  []string // entries made before git runs
	git  [][]string
	fs   []string
	// want is the protected set beyond the default write-later paths
	// (which every case checks as well).
	want map[string]string
	err  *refusal.Kind
}

var protectCases = []protectCase{
	{name: "no git directory", fs: []string{"ws/README"}, want: noGit},
	{name: "a valid .git", git: [][]string{{"init", "-q", "ws"}}, want: gitDirPaths(".git")},
	{name: "an empty .git directory", fs: []string{"ws/.git/"}, want: noGit},
	{name: "a .git directory with a bad HEAD", git: [][]string{{"init", "-q", "ws"}}, fs: []string{"ws/.git/HEAD: not a ref"}, want: noGit},
	{name: "a .git directory without objects", git: [][]string{{"init", "-q", "ws"}}, fs: []string{"-ws/.git/objects"}, want: noGit},
	{name: "a bare repository at the root", git: [][]string{{"init", "-q", "--bare", "ws"}}, want: merge(map[string]string{".git": "ro/"}, gitDirPaths(""))},
	{name: "a bad .git directory in a bare repository", git: [][]string{{"init", "-q", "--bare", "ws"}}, fs: []string{"ws/.git/"},
		want: merge(map[string]string{".git": "ro/"}, gitDirPaths(""))},

	// Gitfiles.
	{name: "gitfile naming a git directory inside, absolute", pre: []string{"ws/sub/"}, git: [][]string{{"init", "-q", "--separate-git-dir=$WS/sub/gd", "ws"}},
		want: merge(map[string]string{".git": "ro", "sub": "pin/"}, gitDirPaths("sub/gd"))},
	{name: "gitfile naming a git directory inside, relative", git: [][]string{{"init", "-q", "--bare", "ws/sub/gd"}}, fs: []string{"ws/.git: gitdir: sub/gd\n"},
		want: merge(map[string]string{".git": "ro", "sub": "pin/"}, gitDirPaths("sub/gd"))},
	{name: "gitfile naming a git directory outside", pre: []string{"outside/"}, git: [][]string{{"init", "-q", "--separate-git-dir=$T/outside/gd", "ws"}},
		want: map[string]string{".git": "ro", "HEAD": "ro mask"}},
	{name: "gitfile outside whose config names a hooks directory inside", pre: []string{"outside/"}, git: [][]string{
		{"init", "-q", "--separate-git-dir=$T/outside/gd", "ws"}, {"-C", "ws", "config", "core.hooksPath", ".husky"}},
		want: map[string]string{".git": "ro", ".husky": "ro/", "HEAD": "ro mask"}},
	// A gitfile naming a directory inside that is not a git directory yet:
	// no tool may make it one.
	{name: "gitfile naming nothing", fs: []string{"ws/.git: gitdir: nowhere\n"}, want: map[string]string{".git": "ro", "nowhere": "ro/", "HEAD": "ro mask"}},
	{name: "gitfile without gitdir", fs: []string{"ws/.git: garbage\n"}, err: refusal.ProtectedPath},

	// Hooks.
	{name: "core.hooksPath without a hook", git: [][]string{{"init", "-q", "ws"}, {"-C", "ws", "config", "core.hooksPath", ".husky"}},
		want: merge(gitDirPaths(".git"), map[string]string{".husky": "ro/"})},
	{name: "core.hooksPath with a hook installed", git: [][]string{{"init", "-q", "ws"}, {"-C", "ws", "config", "core.hooksPath", ".husky"}},
		fs:   []string{"ws/.husky/pre-commit: #!/bin/sh\n"},
		want: merge(gitDirPaths(".git"), hookConfigs)},
	{name: "core.hooksPath with only sample hooks", git: [][]string{{"init", "-q", "ws"}, {"-C", "ws", "config", "core.hooksPath", ".husky"}},
		fs:   []string{"ws/.husky/pre-commit.sample", "ws/.husky/_/"},
		want: merge(gitDirPaths(".git"), map[string]string{".husky": "ro/"})},
	{name: "a hook in .git/hooks", git: [][]string{{"init", "-q", "ws"}}, fs: []string{"ws/.git/hooks/pre-commit: #!/bin/sh\n"},
		want: merge(gitDirPaths(".git"), hookConfigs)},

	// Files the configuration includes, programs it runs.
	{name: "include.path relative to .git, absent", git: [][]string{{"init", "-q", "ws"}, {"-C", "ws", "config", "include.path", "../shared.gitconfig"}},
		want: merge(gitDirPaths(".git"), map[string]string{"shared.gitconfig": "ro"})},
	{name: "include.path present, and what it names", git: [][]string{{"init", "-q", "ws"}, {"-C", "ws", "config", "include.path", "../shared.gitconfig"}},
		fs:   []string{"ws/shared.gitconfig: [core]\n\tfsmonitor = ./scripts/fsmon\n"},
		want: merge(gitDirPaths(".git"), map[string]string{"shared.gitconfig": "ro", "scripts": "pin/", "scripts/fsmon": "ro"})},
	{name: "includeIf path", git: [][]string{{"init", "-q", "ws"}, {"-C", "ws", "config", "includeIf.gitdir:/nowhere/.path", "../conf/cond.gitconfig"}},
		want: merge(gitDirPaths(".git"), map[string]string{"conf": "pin/", "conf/cond.gitconfig": "ro"})},
	{name: "include.path outside the workspace", git: [][]string{{"init", "-q", "ws"}, {"-C", "ws", "config", "include.path", "$T/outside/x.gitconfig"}},
		want: gitDirPaths(".git")},
	{name: "include.path through a symlink to the workspace", git: [][]string{{"init", "-q", "ws"}, {"-C", "ws", "config", "include.path", "$T/alias/shared.gitconfig"}},
		fs:   []string{"alias => $WS"},
		want: merge(gitDirPaths(".git"), map[string]string{"shared.gitconfig": "ro"})},
	{name: "core.fsmonitor program", git: [][]string{{"init", "-q", "ws"}, {"-C", "ws", "config", "core.fsmonitor", "./scripts/fsmon"}},
		want: merge(gitDirPaths(".git"), map[string]string{"scripts": "pin/", "scripts/fsmon": "ro"})},
	{name: "core.fsmonitor boolean", git: [][]string{{"init", "-q", "ws"}, {"-C", "ws", "config", "core.fsmonitor", "true"}},
		want: gitDirPaths(".git")},
	{name: "shell alias running a script", git: [][]string{{"init", "-q", "ws"}, {"-C", "ws", "config", "alias.x", "!./tools/run.sh --flag"}},
		want: merge(gitDirPaths(".git"), map[string]string{"tools": "pin/", "tools/run.sh": "ro"})},
	{name: "fsmonitor runs a script through sh", git: [][]string{{"init", "-q", "ws"}, {"-C", "ws", "config", "core.fsmonitor", "sh tools/fsmon.sh --quiet"}},
		want: merge(gitDirPaths(".git"), map[string]string{"tools": "pin/", "tools/fsmon.sh": "ro"})},
	{name: "alias runs a script at the top", git: [][]string{{"init", "-q", "ws"}, {"-C", "ws", "config", "alias.y", "!bash 'st.sh' && true"}},
		fs:   []string{"ws/st.sh: echo"},
		want: merge(gitDirPaths(".git"), map[string]string{"st.sh": "ro"})},
	{name: "editor looked up in PATH", git: [][]string{{"init", "-q", "ws"}, {"-C", "ws", "config", "core.editor", "vim"}},
		want: gitDirPaths(".git")},
	{name: "pager outside the workspace", git: [][]string{{"init", "-q", "ws"}, {"-C", "ws", "config", "core.pager", "/usr/bin/less -R"}},
		want: gitDirPaths(".git")},
	{name: "config.worktree names a program", git: [][]string{{"init", "-q", "ws"}}, fs: []string{"ws/.git/config.worktree: [core]\n\tsshCommand = bin/ssh-wrap\n"},
		want: merge(gitDirPaths(".git"), map[string]string{"bin": "pin/", "bin/ssh-wrap": "ro"})},

	// An enclosing repository: git run at the workspace root uses it.
	{name: "enclosing repository including a file in the workspace", ws: "outer/sub",
		git: [][]string{{"init", "-q", "outer"}, {"-C", "outer", "config", "include.path", "../sub/inc.gitconfig"}}, fs: []string{"outer/sub/"},
		want: merge(noGit, map[string]string{"inc.gitconfig": "ro"})},
	{name: "enclosing repository whose hooks are in the workspace", ws: "outer/sub",
		git: [][]string{{"init", "-q", "outer"}, {"-C", "outer", "config", "core.hooksPath", "sub/hooks"}}, fs: []string{"outer/sub/"},
		want: merge(noGit, map[string]string{"hooks": "ro/"})},
	{name: "enclosing repository two levels up", ws: "outer/a/b",
		git: [][]string{{"init", "-q", "outer"}, {"-C", "outer", "config", "core.fsmonitor", "a/b/mon"}}, fs: []string{"outer/a/b/"},
		want: merge(noGit, map[string]string{"mon": "ro"})},
	{name: "enclosing repository through a gitfile", ws: "outer/sub",
		git: [][]string{{"init", "-q", "--separate-git-dir=$T/gd", "outer"}, {"-C", "outer", "config", "include.path", "$WS/inc.gitconfig"}}, fs: []string{"outer/sub/"},
		want: merge(noGit, map[string]string{"inc.gitconfig": "ro"})},

	// Symlinks where a protected path must be.
	{name: ".git is a symlink", git: [][]string{{"init", "-q", "outside/real"}}, fs: []string{"ws/", "ws/.git => $T/outside/real/.git"}, err: refusal.ProtectedPath},
	{name: ".git/config is a symlink", git: [][]string{{"init", "-q", "ws"}}, fs: []string{"outside/config: [core]\n", "ws/.git/config => $T/outside/config"}, err: refusal.ProtectedPath},
	{name: ".git/hooks is a symlink", git: [][]string{{"init", "-q", "ws"}}, fs: []string{"outside/hooks/", "ws/.git/hooks => $T/outside/hooks"}, err: refusal.ProtectedPath},
	{name: ".git/HEAD is a symlink to a ref", git: [][]string{{"init", "-q", "ws"}}, fs: []string{"ws/.git/HEAD => refs/heads/main"}, err: refusal.ProtectedPath},
	{name: "an absent .git/modules is a dangling symlink", git: [][]string{{"init", "-q", "ws"}}, fs: []string{"ws/.git/modules => $T/outside/modules"}, err: refusal.ProtectedPath},
	{name: "an included file is a symlink", git: [][]string{{"init", "-q", "ws"}, {"-C", "ws", "config", "include.path", "../shared.gitconfig"}},
		fs: []string{"outside/shared.gitconfig: [core]\n", "ws/shared.gitconfig => $T/outside/shared.gitconfig"}, err: refusal.ProtectedPath},
	{name: "a symlink on the way to an included file", git: [][]string{{"init", "-q", "ws"}, {"-C", "ws", "config", "include.path", "../conf/shared.gitconfig"}},
		fs: []string{"outside/conf/", "ws/conf => $T/outside/conf"}, err: refusal.ProtectedPath},
	{name: "the core.hooksPath directory is a symlink", git: [][]string{{"init", "-q", "ws"}, {"-C", "ws", "config", "core.hooksPath", ".husky"}},
		fs: []string{"ws/hooks-real/", "ws/.husky => hooks-real"}, err: refusal.ProtectedPath},
	{name: "a symlink on the way to a configured program", git: [][]string{{"init", "-q", "ws"}, {"-C", "ws", "config", "core.fsmonitor", "./scripts/fsmon"}},
		fs: []string{"ws/real-scripts/fsmon", "ws/scripts => real-scripts"}, err: refusal.ProtectedPath},
	{name: "a hook manager's configuration is a symlink", git: [][]string{{"init", "-q", "ws"}},
		fs: []string{"ws/.git/hooks/pre-commit", "ws/dotfiles/pre-commit.yaml", "ws/.pre-commit-config.yaml => dotfiles/pre-commit.yaml"}, err: refusal.ProtectedPath},
	{name: "a default write-later directory is a symlink", fs: []string{"ws/shared-settings/", "ws/.vscode => shared-settings"}, err: refusal.ProtectedPath},
	{name: "a default write-later file is a symlink", fs: []string{"ws/dotfiles/envrc", "ws/.envrc => dotfiles/envrc"}, err: refusal.ProtectedPath},

	// Configuration git itself could not read.
	{name: "malformed .git/config", git: [][]string{{"init", "-q", "ws"}}, fs: []string{"ws/.git/config: [core\n\tbare = false\n"}, err: refusal.ProtectedPath},
	{name: "malformed config.worktree", git: [][]string{{"init", "-q", "ws"}}, fs: []string{"ws/.git/config.worktree: = nothing\n"}, err: refusal.ProtectedPath},
	{name: ".git/config is a directory", git: [][]string{{"init", "-q", "ws"}}, fs: []string{"-ws/.git/config", "ws/.git/config/"}, err: refusal.ProtectedPath},
	{name: "malformed included file", git: [][]string{{"init", "-q", "ws"}, {"-C", "ws", "config", "include.path", "../shared.gitconfig"}},
		fs: []string{"ws/shared.gitconfig: [oops\n"}, err: refusal.ProtectedPath},
	{name: "malformed config of a git directory outside", pre: []string{"outside/"}, git: [][]string{{"init", "-q", "--separate-git-dir=$T/outside/gd", "ws"}},
		fs: []string{"outside/gd/config: [core\n"}, err: refusal.ProtectedPath},
	{name: "malformed config of the enclosing repository", ws: "outer/sub", git: [][]string{{"init", "-q", "outer"}},
		fs: []string{"outer/sub/", "outer/.git/config: [core\n"}, err: refusal.ProtectedPath},
}

// TestProtect replays every layout: Protect returns the expected set (or
// refuses with the expected kind), lists it parents first, and changes
// nothing on disk.
func TestProtect(t *testing.T) {
	for _, c := range protectCases {
		t.Run(c.name, func(t *testing.T) {
			ws := c.ws
			if ws == "" {
				ws = "ws"
			}
			top := makeTree(t, ws, c.pre, c.git, c.fs)
			cfg := testConfig(t, top)
			root := filepath.Join(top, ws)
			before := snapshot(t, top)
			p, err := cfg.Protect(root)
			if after := snapshot(t, top); !maps.Equal(before, after) {
				t.Errorf("Protect changed the tree")
			}
			if c.err != nil {
				if !errors.Is(err, c.err) {
					t.Fatalf("Protect: %v (set %v), want %s", err, p, c.err.Name())
				}
				if !strings.Contains(err.Error(), root) {
					t.Errorf("the refusal %q does not name the workspace", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Protect: %v", err)
			}
			if p.Root() != root || !slices.Equal(p.State(), defaultState) {
				t.Errorf("Root() %s State() %q, want %s %q", p.Root(), p.State(), root, defaultState)
			}
			checkSet(t, p, c.want, defaultWriteLater)
		})
	}
}

// checkSet compares p's paths with want plus the static write-later paths,
// each masked by a directory when absent, and checks the order: a
// directory before what is inside it.
func checkSet(t *testing.T, p *harness.Protected, want map[string]string, static []string) {
	t.Helper()
	want = maps.Clone(want)
	for _, w := range static {
		rel := strings.TrimSuffix(w, "/")
		if _, ok := want[rel]; ok {
			continue
		}
		if strings.HasSuffix(w, "/") {
			want[rel] = "ro/ mask"
		} else {
			want[rel] = "ro mask"
		}
	}
	got := map[string]string{}
	paths := p.Paths()
	for i, q := range paths {
		if _, dup := got[q.Rel]; dup {
			t.Errorf("%s is listed twice", q.Rel)
		}
		got[q.Rel] = code(q)
		if q.Reason == "" {
			t.Errorf("%s has no reason", q.Rel)
		}
		for _, later := range paths[i+1:] {
			if strings.HasPrefix(q.Rel, later.Rel+"/") {
				t.Errorf("%s is listed before %s, which contains it", q.Rel, later.Rel)
			}
		}
	}
	for _, rel := range slices.Sorted(maps.Keys(merge(want, got))) {
		if got[rel] != want[rel] {
			t.Errorf("%-24s got %-12q want %q", rel, got[rel], want[rel])
		}
	}
}

// TestProtectedCheck classifies paths of one workspace: a repository with
// hooks in .husky and an fsmonitor in scripts.
func TestProtectedCheck(t *testing.T) {
	top := makeTree(t, "ws", nil, [][]string{
		{"init", "-q", "ws"},
		{"-C", "ws", "config", "core.hooksPath", ".husky"},
		{"-C", "ws", "config", "core.fsmonitor", "./scripts/fsmon"},
	}, []string{"ws/.husky/pre-commit: #!/bin/sh\n", "ws/src/main.go"})
	p, err := testConfig(t, top).AddState(".agent").Protect(filepath.Join(top, "ws"))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		rel  string
		want harness.Verdict
		name string // the protected name it falls under
	}{
		{"", harness.IsPinned, ""},
		{".", harness.IsPinned, ""},
		{"src/main.go", harness.Open, ""},
		{"src", harness.Open, ""},
		{"HEAD", harness.InWriteLater, "HEAD"},

		{".efferent", harness.InState, ".efferent"},
		{".efferent/registry.json", harness.InState, ".efferent"},
		{".EFFERENT/x", harness.InState, ".efferent"},
		{".Foundry", harness.InState, ".foundry"},
		{".agent/x", harness.InState, ".agent"},
		{"src/.efferent", harness.Open, ""},
		{".efferent-old", harness.Open, ""},

		{".git", harness.IsPinned, ".git"},
		{".GIT", harness.IsPinned, ".git"},
		{".git/config", harness.InWriteLater, ".git/config"},
		{".Git/Config", harness.InWriteLater, ".git/config"},
		{".git/HEAD", harness.InWriteLater, ".git/HEAD"},
		{".git/head", harness.InWriteLater, ".git/HEAD"},
		{".git/hooks", harness.InWriteLater, ".git/hooks"},
		{".git/hooks/pre-commit", harness.InWriteLater, ".git/hooks"},
		{".git/HOOKS/post-checkout", harness.InWriteLater, ".git/hooks"},
		{".git/hooksx", harness.Open, ""},
		{".git/modules/sub/config", harness.InWriteLater, ".git/modules"},
		{".git/worktrees/wt/commondir", harness.InWriteLater, ".git/worktrees"},
		{".git/objects", harness.IsPinned, ".git/objects"},
		{".git/objects/ab/cdef", harness.Open, ""},
		{".git/refs", harness.IsPinned, ".git/refs"},
		{".git/refs/heads/main", harness.Open, ""},
		{".git/index", harness.Open, ""},

		{".husky", harness.InWriteLater, ".husky"},
		{".husky/pre-commit", harness.InWriteLater, ".husky"},
		{".HUSKY/_/husky.sh", harness.InWriteLater, ".husky"},
		{".pre-commit-config.yaml", harness.InWriteLater, ".pre-commit-config.yaml"},
		{"LEFTHOOK.YML", harness.InWriteLater, "lefthook.yml"},

		{"scripts", harness.IsPinned, "scripts"},
		{"scripts/fsmon", harness.InWriteLater, "scripts/fsmon"},
		{"Scripts/FSMON", harness.InWriteLater, "scripts/fsmon"},
		{"scripts/other", harness.Open, ""},
		{"scripts/fsmon.bak", harness.Open, ""},

		{".vscode", harness.InWriteLater, ".vscode"},
		{".vscode/tasks.json", harness.InWriteLater, ".vscode"},
		{".VSCode/settings.json", harness.InWriteLater, ".vscode"},
		{".envrc", harness.InWriteLater, ".envrc"},
		{".ENVRC", harness.InWriteLater, ".envrc"},
		{".mcp.json", harness.InWriteLater, ".mcp.json"},
		{".claude/settings.json", harness.InWriteLater, ".claude"},
		{".bashrc", harness.Open, ""},
	}
	for _, c := range cases {
		v, name, why := p.Check(c.rel)
		if v != c.want || name != c.name {
			t.Errorf("Check(%q) = %v %q, want %v %q", c.rel, v, name, c.want, c.name)
		}
		if v != harness.Open && why == "" {
			t.Errorf("Check(%q) gives no reason", c.rel)
		}
	}
}

// TestProtectHome protects a workspace that is the home directory: the
// shell's start-up files, ssh's and git's configuration and the user's
// PATH directories as well.
func TestProtectHome(t *testing.T) {
	homeWriteLater := []string{
		".bashrc", ".bash_profile", ".bash_login", ".bash_logout", ".profile", ".zshrc", ".zshenv", ".zprofile", ".zlogin", ".zlogout",
		".gitconfig", ".ssh/", ".config/", ".local/bin/", "bin/",
	}
	static := append(slices.Clone(defaultWriteLater), homeWriteLater...)
	t.Run("the home directory", func(t *testing.T) {
		top := makeTree(t, "home", nil, nil, []string{"home/.profile: PATH=$PATH\n"})
		home := filepath.Join(top, "home")
		p, err := testConfig(t, top).WithHome(home).Protect(home)
		if err != nil {
			t.Fatal(err)
		}
		// In a home, what a shell or git reads as a file is masked by an
		// empty file: an empty directory in place of ~/.gitconfig makes
		// every git command fail ("unable to access '.gitconfig': Is a
		// directory"), and one in place of ~/.bashrc makes bash complain.
		inHome := map[string]string{".local": "pin/"}
		for _, w := range homeWriteLater {
			if rel, dir := strings.CutSuffix(w, "/"); dir {
				inHome[rel] = "ro/"
			} else {
				inHome[rel] = "ro"
			}
		}
		checkSet(t, p, merge(noGit, inHome), static)
		for rel, want := range map[string]harness.Verdict{
			".bashrc": harness.InWriteLater, ".ssh/authorized_keys": harness.InWriteLater, ".local/bin/tool": harness.InWriteLater,
			".local": harness.IsPinned, ".local/share/x": harness.Open, ".config/git/config": harness.InWriteLater, "bin/x": harness.InWriteLater,
		} {
			if v, _, _ := p.Check(rel); v != want {
				t.Errorf("Check(%q) = %v, want %v", rel, v, want)
			}
		}
	})
	t.Run("the home directory named through a symlink", func(t *testing.T) {
		top := makeTree(t, "home", nil, nil, []string{"home/", "homelink => home"})
		p, err := testConfig(t, top).WithHome(filepath.Join(top, "homelink")).Protect(filepath.Join(top, "home"))
		if err != nil {
			t.Fatal(err)
		}
		if v, _, _ := p.Check(".bashrc"); v != harness.InWriteLater {
			t.Errorf("Check(.bashrc) = %v in a home named through a symlink, want InWriteLater", v)
		}
	})
	t.Run("a project is not a home", func(t *testing.T) {
		top := makeTree(t, "ws", nil, nil, []string{"ws/"})
		p, err := testConfig(t, top).Protect(filepath.Join(top, "ws"))
		if err != nil {
			t.Fatal(err)
		}
		checkSet(t, p, noGit, defaultWriteLater)
	})
	t.Run("a global include inside the workspace", func(t *testing.T) {
		top := makeTree(t, "ws", nil, nil, []string{"ws/", "home/.gitconfig: [include]\n\tpath = $WS/team.gitconfig\n[core]\n\thooksPath = $WS/githooks\n"})
		p, err := testConfig(t, top).Protect(filepath.Join(top, "ws"))
		if err != nil {
			t.Fatal(err)
		}
		checkSet(t, p, merge(noGit, map[string]string{"team.gitconfig": "ro", "githooks": "ro/"}), defaultWriteLater)
	})
	t.Run("a shell start-up file is a symlink", func(t *testing.T) {
		top := makeTree(t, "home", nil, nil, []string{"home/dotfiles/bashrc", "home/.bashrc => dotfiles/bashrc"})
		home := filepath.Join(top, "home")
		if p, err := testConfig(t, top).WithHome(home).Protect(home); !errors.Is(err, refusal.ProtectedPath) {
			t.Errorf("Protect of a home whose .bashrc is a symlink: %v (set %v), want refusal.ProtectedPath", err, p)
		}
	})
	t.Run("a symlink on the way to a PATH directory", func(t *testing.T) {
		top := makeTree(t, "home", nil, nil, []string{"home/dotfiles/local/bin/", "home/.local => dotfiles/local"})
		home := filepath.Join(top, "home")
		if p, err := testConfig(t, top).WithHome(home).Protect(home); !errors.Is(err, refusal.ProtectedPath) {
			t.Errorf("Protect of a home whose .local is a symlink: %v (set %v), want refusal.ProtectedPath", err, p)
		}
	})
}

// TestSeen: Protected.Seen says what Protect found at each path of the set
// — a directory, a file, nothing (the path, or a directory on the way to
// it, absent) — and nothing for a path outside the set or one it could
// not look at.
func TestSeen(t *testing.T) {
	top := makeTree(t, "ws", nil, [][]string{{"init", "-q", "ws"}}, []string{"ws/.vscode/", "ws/.git/modules/x"})
	root := filepath.Join(top, "ws")
	p, err := testConfig(t, top).Protect(root)
	if err != nil {
		t.Fatal(err)
	}
	paths := map[string]bool{}
	for _, q := range p.Paths() {
		paths[q.Rel] = true
	}
	for _, c := range []struct {
		rel             string
		exists, dir, ok bool
	}{
		{".vscode", true, true, true},
		{".git/config", true, false, true},
		{".git/hooks", true, true, true},
		{".git/modules", true, true, true},
		{".idea", false, false, true},
		{".git/worktrees", false, false, true},
		{".git/modules/x", false, false, false}, // under a read-only directory: not in the set
		{"src", false, false, false},
	} {
		if !paths[c.rel] && c.ok {
			t.Errorf("%s is not in the set %v", c.rel, p)
			continue
		}
		exists, dir, ok := p.Seen(c.rel)
		if exists != c.exists || dir != c.dir || ok != c.ok {
			t.Errorf("Seen(%s) = %v, %v, %v; want %v, %v, %v", c.rel, exists, dir, ok, c.exists, c.dir, c.ok)
		}
	}
}
