package runtime_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cordon-run/cordon/harness"
	"github.com/cordon-run/cordon/internal/testenv"
	"github.com/cordon-run/cordon/refusal"
	"github.com/cordon-run/cordon/runtime"
	"github.com/cordon-run/cordon/substrate/bwrap"
	"github.com/cordon-run/cordon/substrate/landlock"
	guard "github.com/cordon-run/cordon/substrate/workspace"
)

// hostGit runs the host's git at the workspace root as the user would,
// with its default configuration (a home of its own, no system file), and
// returns its output; an error of git is part of the output.
func hostGit(t *testing.T, ws string, args ...string) string {
	t.Helper()
	gitBin, err := exec.LookPath("git")
	testenv.Require(t, err == nil, "git: %v", err)
	home := t.TempDir()
	cmd := exec.Command(gitBin, args...)
	cmd.Dir = ws
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "GIT_CONFIG_NOSYSTEM=1", "GIT_CEILING_DIRECTORIES=" + filepath.Dir(ws)}
	out, _ := cmd.CombinedOutput()
	return string(out)
}

// plantCommand returns a shell command that makes the file marker when a
// later git runs it.
func plantCommand(marker string) string { return "touch " + marker + "; false" }

// plantSub is a shell script that makes dir a repository whose
// core.fsmonitor runs plantCommand(marker), as a tool would.
func plantSub(dir, marker string) string {
	return fmt.Sprintf(`git init -q %[1]s && printf '#!/bin/sh\n%[2]s\n' > %[1]s/fsm && chmod +x %[1]s/fsm && git -C %[1]s config core.fsmonitor "$PWD/%[1]s/fsm" &&
git -C %[1]s -c user.name=t -c user.email=t@t commit -q --allow-empty -m s`, dir, plantCommand(marker))
}

// shapeRootScript makes the workspace root (or dir) a git directory whose
// configuration runs a command: HEAD, objects, refs and a config with
// core.fsmonitor.
func shapeRootScript(dir, marker string) string {
	return fmt.Sprintf(`
mkdir -p %[1]s/objects %[1]s/refs/heads 2>/dev/null
echo 'ref: refs/heads/main' > %[1]s/HEAD 2>/dev/null
printf '[core]\n\trepositoryformatversion = 0\n\tfsmonitor = "%[2]s"\n' > %[1]s/config 2>/dev/null
true`, dir, plantCommand(marker))
}

// gitRepo makes ws a git repository with one commit, by the host's git.
func gitRepo(t *testing.T, ws string) {
	t.Helper()
	hostGit(t, ws, "init", "-q", ".")
	if out := hostGit(t, ws, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "init"); out != "" {
		t.Fatalf("git commit: %s", out)
	}
}

// afterGit runs the host's git status and commit in ws and fails the test
// when the planted command ran.
func afterGit(t *testing.T, ws, marker string) {
	t.Helper()
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the marker exists before the host's git ran")
	}
	hostGit(t, ws, "status", "--short")
	hostGit(t, ws, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "after")
	if _, err := os.Stat(marker); err == nil {
		t.Fatalf("git on the host ran the command a tool planted")
	}
}

// TestGitFindsNoRepositoryATookMade: in a workspace without a git
// repository, a sandboxed command cannot give the workspace root (or a new
// .git) the shape of a git directory whose configuration the host's git
// would obey.
func TestGitFindsNoRepositoryATookMade(t *testing.T) {
	needBwrap(t)
	b := base(t)
	ws := workspace(t, b)
	marker := filepath.Join(b, "pwned")
	script := shapeRootScript(".", marker) + shapeRootScript(".git", marker) +
		attempt("rmdir-git", "rmdir .git") + attempt("rm-head", "rmdir HEAD") +
		attempt("git-init", "git init -q .")
	res := run(t, newPolicy(ws), script)
	for name, rc := range statuses(t, res.Stdout) {
		if rc == "0" {
			t.Errorf("attack %s succeeded", name)
		}
	}
	if _, err := os.Stat(filepath.Join(ws, "objects")); err != nil {
		t.Fatalf("the command could not write the workspace (the test proves nothing): %v %q", err, res.Stderr)
	}
	afterGit(t, ws, marker)
	if out := hostGit(t, ws, "rev-parse", "--git-dir"); !strings.Contains(out, "not a git repository") {
		t.Errorf("the host's git finds a repository in the workspace: %q", out)
	}
}

// TestGitStaysValidInAWorkspaceRepository: a command cannot make .git
// invalid (so that git looks at the root, or a parent, instead) by
// removing its HEAD, objects or refs; with .git valid, the shape of the
// root does not matter. Ordinary work still goes: status, add, commit on
// the current branch.
func TestGitStaysValidInAWorkspaceRepository(t *testing.T) {
	needBwrap(t)
	b := base(t)
	ws := workspace(t, b)
	gitRepo(t, ws)
	marker := filepath.Join(b, "pwned")
	script := attempt("head-rm", "rm -f .git/HEAD") + attempt("head-write", "echo garbage > .git/HEAD") +
		attempt("objects-rm", "rm -rf .git/objects") + attempt("refs-rm", "rm -rf .git/refs") +
		attempt("refs-mv", "mv .git/refs .git/r") + shapeRootScript(".", marker) +
		attempt("work", "echo data > file.txt && git add file.txt && git -c user.name=t -c user.email=t@t commit -q -m work")
	res := run(t, newPolicy(ws), script)
	for name, rc := range statuses(t, res.Stdout) {
		if (rc == "0") != (name == "work") {
			t.Errorf("%s: exit %s (%q)", name, rc, res.Stderr)
		}
	}
	afterGit(t, ws, marker)
	if out := hostGit(t, ws, "log", "--format=%s", "-1", "HEAD~1"); !strings.Contains(out, "work") {
		t.Errorf("the commit made in the sandbox is not in the repository: %q", out)
	}
}

// TestGitfileTargetInsideIsProtected: a .git file naming a git directory
// inside the workspace leaves that directory's configuration and hooks
// read-only.
func TestGitfileTargetInsideIsProtected(t *testing.T) {
	needBwrap(t)
	b := base(t)
	ws := workspace(t, b)
	gitRepo(t, ws)
	if err := os.Rename(filepath.Join(ws, ".git"), filepath.Join(ws, "realgit")); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(ws, ".git"), "gitdir: realgit\n")
	if out := hostGit(t, ws, "status", "--short"); strings.Contains(out, "fatal") {
		t.Fatalf("the gitfile layout does not work: %s", out)
	}
	marker := filepath.Join(b, "pwned")
	script := attempt("config", fmt.Sprintf(`printf '[core]\n\tfsmonitor = "%s"\n' >> realgit/config`, plantCommand(marker))) +
		attempt("hook", fmt.Sprintf("printf '#!/bin/sh\\n%s\\n' > realgit/hooks/pre-commit && chmod +x realgit/hooks/pre-commit", plantCommand(marker))) +
		attempt("repoint", "echo 'gitdir: evil' > .git") + attempt("mv-target", "mv realgit other")
	res := run(t, newPolicy(ws), script)
	for name, rc := range statuses(t, res.Stdout) {
		if rc == "0" {
			t.Errorf("attack %s succeeded", name)
		}
	}
	afterGit(t, ws, marker)
}

// TestConfigNamedFilesAreProtected: what the repository's configuration
// names inside the workspace — a hooks directory (core.hooksPath, as husky
// sets it), an included file (present or absent), the program of
// core.fsmonitor — is read-only, as is the configuration of a hook manager
// whose hook is installed.
func TestConfigNamedFilesAreProtected(t *testing.T) {
	needBwrap(t)
	b := base(t)
	ws := workspace(t, b)
	gitRepo(t, ws)
	writeFile(t, filepath.Join(ws, ".husky/pre-commit"), "#!/bin/sh\nexit 0\n")
	os.Chmod(filepath.Join(ws, ".husky/pre-commit"), 0o755)
	writeFile(t, filepath.Join(ws, "tools/fsmon"), "#!/bin/sh\nexit 1\n")
	os.Chmod(filepath.Join(ws, "tools/fsmon"), 0o755)
	cfg := filepath.Join(ws, ".git/config")
	data, _ := os.ReadFile(cfg)
	data = append(data, "[core]\n\thooksPath = .husky\n\tfsmonitor = tools/fsmon\n\tpager = sh tools/pager.sh\n[include]\n\tpath = ../shared.gitconfig\n\tpath = ../inc/local.cfg\n"...)
	writeFile(t, filepath.Join(ws, "tools/pager.sh"), "exec cat\n")
	os.WriteFile(cfg, data, 0o644)
	marker := filepath.Join(b, "pwned")
	script := attempt("husky", fmt.Sprintf("printf '#!/bin/sh\\n%s\\n' > .husky/pre-commit", plantCommand(marker))) +
		attempt("husky-new", "echo x > .husky/post-commit") +
		attempt("include", fmt.Sprintf(`printf '[core]\n\tpager = "%s"\n' > shared.gitconfig`, plantCommand(marker))) +
		attempt("fsmonitor", fmt.Sprintf("printf '#!/bin/sh\\n%s\\n' > tools/fsmon", plantCommand(marker))) +
		attempt("pager-script", fmt.Sprintf("printf '%s\\n' > tools/pager.sh", plantCommand(marker))) +
		attempt("pre-commit", "echo 'repos: []' > .pre-commit-config.yaml") +
		attempt("include-parent", fmt.Sprintf(`mv inc inc.old && mkdir inc && printf '[core]\n\tpager = "%s"\n' > inc/local.cfg`, plantCommand(marker))) +
		attempt("remotes", "mkdir -p .git/remotes && echo 'URL: /tmp/x' > .git/remotes/origin") +
		attempt("chmod-git", "chmod 000 .git && echo 'ref: refs/heads/main' > HEAD")
	res := run(t, newPolicy(ws), script)
	for name, rc := range statuses(t, res.Stdout) {
		if rc == "0" {
			t.Errorf("attack %s succeeded", name)
		}
	}
	os.Chmod(filepath.Join(ws, ".git"), 0o755) // a chmod by the command would show here
	for _, absent := range []string{"shared.gitconfig", ".pre-commit-config.yaml", ".husky/post-commit", "inc.old", ".git/remotes/origin"} {
		if _, err := os.Lstat(filepath.Join(ws, absent)); err == nil {
			t.Errorf("%s exists after the run", absent)
		}
	}
	afterGit(t, ws, marker)
}

// during runs, in a sandbox of p's workspace, a command that starts, waits
// until the host has called meanwhile (at most 15 s), then runs script;
// it returns that run's result.
func during(t *testing.T, p bwrap.Policy, script string, meanwhile func()) runtime.Result {
	t.Helper()
	started, done := filepath.Join(p.Workspace(), "started"), filepath.Join(p.Workspace(), "done")
	// An earlier call's in the same workspace would end this one's run at
	// once, and meanwhile run beside nothing.
	os.Remove(started)
	os.Remove(done)
	wait := fmt.Sprintf("touch %s; i=0; while [ ! -e %s ] && [ $i -lt 300 ]; do sleep 0.05; i=$((i+1)); done\n", started, done)
	var res runtime.Result
	var wg sync.WaitGroup
	wg.Go(func() { res = run(t, p, wait+script) })
	for i := 0; i < 400; i++ {
		if _, err := os.Stat(started); err == nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	meanwhile()
	os.WriteFile(done, nil, 0o644)
	wg.Wait()
	return res
}

// TestConcurrentRunsKeepEachOthersProtection: while one run of a
// workspace goes on, another starts and ends; the first keeps every
// read-only mount (the second must not remove a placeholder the first has
// mounted), and no repository is left behind.
func TestConcurrentRunsKeepEachOthersProtection(t *testing.T) {
	needBwrap(t)
	b := base(t)
	ws := workspace(t, b)
	marker := filepath.Join(b, "pwned")
	// The long run waits until the short one is over, then attacks.
	long := during(t, newPolicy(ws),
		shapeRootScript(".git", marker)+shapeRootScript(".", marker)+attempt("vscode", "mkdir -p .vscode && echo x > .vscode/tasks.json"),
		func() { run(t, newPolicy(ws), "true") })
	for name, rc := range statuses(t, long.Stdout) {
		if rc == "0" {
			t.Errorf("attack %s of the long run succeeded after the short run ended", name)
		}
	}
	afterGit(t, ws, marker)
	for _, p := range []string{".git", "HEAD", ".vscode"} {
		if _, err := os.Lstat(filepath.Join(ws, p)); err == nil {
			t.Errorf("%s is left in the workspace after both runs", p)
		}
	}
}

// TestNestedWorkspace: a run in an enclosing workspace O can write O/sub's
// harness state; what it writes there is never trusted by a later run in
// O/sub — a forged grant is refused — and O/sub's own protection holds.
func TestNestedWorkspace(t *testing.T) {
	f := newToolFixture(t)
	outer := filepath.Dir(f.ws)
	// The outer run forges a grant in the inner registry and plants a git
	// directory for it.
	forge := fmt.Sprintf(`mkdir -p %[1]s/.efferent/tools/grants && echo '{"grant":{"tool":"evil"},"mac":"hmac-sha256:00"}' > %[1]s/.efferent/tools/grants/evil.json && echo forged`, f.ws)
	res := run(t, newPolicy(outer), forge)
	if !strings.Contains(res.Stdout, "forged") {
		t.Fatalf("the outer run could not write the inner workspace (the test proves nothing): %v %q", res, res.Stderr)
	}
	_, err := f.a.Prepare(context.Background(), f.reg, "evil", nil)
	if !errors.Is(err, refusal.UntrustedState) {
		t.Fatalf("a grant forged by the enclosing workspace's tool: Prepare = %v", err)
	}
}

// TestFileToolsAndWasmRefuseWriteLater: the direct file tools (and the
// guard every wasm tool's file system goes through) refuse the same
// write-later paths bwrap binds read-only, present or absent, with the
// WriteLater kind and a message that names the path and why.
func TestFileToolsAndWasmRefuseWriteLater(t *testing.T) {
	ws := workspace(t, base(t))
	gitRepo(t, ws)
	w, err := guard.Open(ws, guard.WithHarness(testHarness))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	for _, p := range []string{".git/config", ".git/hooks/pre-commit", ".git/HEAD", ".git/commondir", ".git/config.worktree",
		".git/modules/x/config", ".vscode/tasks.json", ".mcp.json", ".claude/settings.json", ".envrc", ".GIT/config"} {
		err := w.WriteFile(p, []byte("x"))
		if !errors.Is(err, guard.ErrWriteLater) || !strings.Contains(err.Error(), "write-later") {
			t.Errorf("WriteFile(%s) = %v; want ErrWriteLater", p, err)
		}
	}
	for name, op := range map[string]func() error{
		"rename .git":        func() error { return w.Rename(".git", "g") },
		"remove .git/HEAD":   func() error { return w.Remove(".git/HEAD") },
		"rmdir .git/refs":    func() error { return w.RemoveDir(".git/refs") },
		"mkdir .git/modules": func() error { return w.Mkdir(".git/modules", 0o755) },
		"rename onto config": func() error { w.WriteFile("c", nil); return w.Rename("c", ".git/config") },
		"open for append":    func() error { _, err := w.OpenFile(".git/config", os.O_WRONLY|os.O_APPEND, 0); return err },
		"create hook": func() error {
			_, err := w.OpenFile(".git/hooks/post-commit", os.O_WRONLY|os.O_CREATE, 0o755)
			return err
		},
	} {
		if err := op(); !errors.Is(err, guard.ErrWriteLater) {
			t.Errorf("%s: %v; want ErrWriteLater", name, err)
		}
	}
	// Reading them is fine, and ordinary files stay writable.
	if _, err := w.ReadFile(".git/config"); err != nil {
		t.Errorf("reading .git/config: %v", err)
	}
	if err := w.WriteFile(".git/description", []byte("ok\n")); err != nil {
		t.Errorf("writing .git/description, which runs nothing: %v", err)
	}
}

// TestAdmittedToolsPATHIsTheSystemsOwn: a program a command planted in
// <workspace>/.local/bin never runs inside an admitted tool's grant.
func TestAdmittedToolsPATHIsTheSystemsOwn(t *testing.T) {
	f := newToolFixture(t)
	marker := filepath.Join(f.ws, "planted-ran")
	res := run(t, newPolicy(f.ws), fmt.Sprintf("mkdir -p .local/bin && printf '#!/bin/sh\\ntouch %s\\n' > .local/bin/cat && chmod +x .local/bin/cat && echo planted", marker))
	if !strings.Contains(res.Stdout, "planted") {
		t.Fatalf("cordon exec could not plant the program: %v %q", res, res.Stderr)
	}
	out, _ := f.runTool(t, decl("catter", `["sh", "-c", "echo $PATH; cat /dev/null"]`, nil, "fs.read:workspace", "fs.write:workspace"), nil, "", nil)
	if strings.Contains(out.Stdout, ".local/bin") {
		t.Errorf("an admitted tool's PATH holds the workspace: %q", out.Stdout)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatalf("the planted cat ran inside the tool's grant")
	}
}

// TestTmpfsAreCapped: /tmp (with HOME) and /dev/shm stop at their cap,
// the hidden directories and /dev take no writes at all.
func TestTmpfsAreCapped(t *testing.T) {
	needBwrap(t)
	ws := workspace(t, base(t))
	script := attempt("tmp-small", "head -c 100000 /dev/zero > /tmp/small && rm /tmp/small") + attempt("tmp-fill", "head -c 3000000 /dev/zero > /tmp/big") + attempt("home-fill", "head -c 3000000 /dev/zero > $HOME/big") +
		attempt("shm-fill", "head -c 3000000 /dev/zero > /dev/shm/big") +
		attempt("dev", "touch /dev/x") + attempt("home", "touch /home/x") + attempt("root", "touch /root/x") +
		attempt("run", "touch /run/x") + attempt("devnull", "echo x > /dev/null")
	res := run(t, newPolicy(ws).WithTmpSize(2<<20), script)
	want := map[string]string{"tmp-small": "0", "devnull": "0"}
	for name, rc := range statuses(t, res.Stdout) {
		if ok := want[name] == "0"; (rc == "0") != ok {
			t.Errorf("%s: exit %s", name, rc)
		}
	}
}

// TestRunsOfOtherConfigurationsShareTheLock: two runs of one workspace
// with different state directories (two users, two configurations) hold
// one lock: the first to end does not remove the masks the other has
// mounted.
func TestRunsOfOtherConfigurationsShareTheLock(t *testing.T) {
	needBwrap(t)
	for name, other := range map[string]harness.Config{
		"another state directory": testHarness.WithStateDir(filepath.Join(t.TempDir(), "other-state")),
		// The same state directory (the same manifests), another first
		// harness directory (where a lock file used to live).
		"other harness state": testHarness.WithState(".foundry", ".efferent"),
	} {
		t.Run(name, func(t *testing.T) {
			b := base(t)
			ws := workspace(t, b)
			long := during(t, newPolicy(ws),
				attempt("vscode", "mkdir -p .vscode/x")+attempt("git", "mkdir -p .git/hooks")+attempt("mcp", "rmdir .mcp.json && echo {} > .mcp.json"),
				func() { run(t, bwrap.NewPolicy(ws, other), "true") })
			for name, rc := range statuses(t, long.Stdout) {
				if rc == "0" {
					t.Errorf("attack %s of the long run succeeded after a run of another configuration ended", name)
				}
			}
			for _, p := range []string{".vscode/x", ".git/hooks", ".mcp.json"} {
				if fi, err := os.Stat(filepath.Join(ws, p)); err == nil && (fi.Mode().IsRegular() || p == ".vscode/x") {
					t.Errorf("%s was written on the host", p)
				}
			}
		})
	}
}

// TestNestedRunsDoNotOverlap: while a run of an enclosing workspace goes
// on, a run of a nested one does not start — the enclosing run's tool
// could swap what the nested run is about to bind (a .git for a symlink
// to a host repository).
func TestNestedRunsDoNotOverlap(t *testing.T) {
	needBwrap(t)
	b := base(t)
	outer := workspace(t, b)
	inner := subdir(t, outer)
	marker := filepath.Join(inner, "inner-ran") // the writing run could make it
	// Every access: a run that only reads binds the workspace too, and the
	// enclosing run's command could swap it for a link to a secret.
	errs := map[string]error{}
	during(t, newPolicy(outer), "", func() {
		for name, p := range map[string]bwrap.Policy{
			"write": newPolicy(inner), "read": newPolicy(inner).WithAccess(bwrap.AccessRead), "none": newPolicy(inner).WithAccess(bwrap.AccessNone),
		} {
			_, errs[name] = runSpec(context.Background(), Spec{Command: []string{"sh", "-c", "echo " + name + " >> " + marker}, Policy: p})
		}
	})
	for name, err := range errs {
		if !errors.Is(err, bwrap.ErrSetup) || !strings.Contains(err.Error(), "enclosing workspace "+outer) {
			t.Errorf("a nested run (%s access) while the enclosing one goes on: %v; want a refusal naming the enclosing run", name, err)
		}
	}
	if data, err := os.ReadFile(marker); err == nil {
		t.Errorf("nested runs' commands ran: %q", data)
	}
	if res := run(t, newPolicy(inner), "echo ok"); res.Stdout != "ok\n" {
		t.Errorf("the nested run, once the enclosing one ended: %v %q", res, res.Stderr)
	}
}

// TestEnclosingRunWaitsForNested: while a run of a nested workspace goes
// on, a run of the workspace around it — one that never had a run, so
// that it has no lock file the nested run could hold — does not start:
// its command could change the nested workspace under the nested run.
func TestEnclosingRunWaitsForNested(t *testing.T) {
	needBwrap(t)
	b := base(t)
	outer := workspace(t, b)
	inner := subdir(t, outer)
	marker := filepath.Join(outer, "outer-ran")
	var err error
	during(t, newPolicy(inner), "", func() {
		_, err = runSpec(context.Background(), Spec{Command: []string{"touch", marker}, Policy: newPolicy(outer)})
	})
	if !errors.Is(err, bwrap.ErrSetup) || !strings.Contains(err.Error(), "nested workspace "+inner) {
		t.Fatalf("an enclosing run while a nested one goes on: %v; want a refusal naming the nested run", err)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Errorf("the enclosing run's command ran")
	}
	if res := run(t, newPolicy(outer), "echo ok"); res.Stdout != "ok\n" {
		t.Errorf("the enclosing run, once the nested one ended: %v %q", res, res.Stderr)
	}
}

// TestSubmodulesAreNotAWayIn: git status at the workspace root enters
// every submodule the index names and obeys that repository's
// configuration. The entry of an existing submodule is read-only; a
// repository a run enters in the index itself is moved out of git's way
// when the run is over, and the result says so.
func TestSubmodulesAreNotAWayIn(t *testing.T) {
	needBwrap(t)
	b := base(t)
	ws := workspace(t, b)
	gitRepo(t, ws)
	lib := filepath.Join(b, "lib")
	os.Mkdir(lib, 0o755)
	gitRepo(t, lib)
	if out := hostGit(t, ws, "-c", "protocol.file.allow=always", "submodule", "add", "-q", lib, "vendor/lib"); out != "" {
		t.Fatalf("git submodule add: %s", out)
	}
	hostGit(t, ws, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "submodule")
	marker := filepath.Join(b, "pwned")
	script := attempt("redirect-existing", "echo 'gitdir: ../../evil' > vendor/lib/.git") +
		plantSub("sub", marker) + " && git update-index --add --cacheinfo 160000,$(git -C sub rev-parse HEAD),sub && echo ENTERED\n"
	res := run(t, newPolicy(ws), script)
	if !strings.Contains(res.Stdout, "ENTERED") {
		t.Fatalf("the command could not enter its repository in the index (the test proves nothing): %q %q", res.Stdout, res.Stderr)
	}
	if statuses(t, strings.Replace(res.Stdout, "ENTERED\n", "", 1))["redirect-existing"] == "0" {
		t.Errorf("an existing submodule's .git could be rewritten")
	}
	if len(res.Notes) != 1 || !strings.Contains(res.Notes[0], "moved sub/.git") {
		t.Errorf("the result's notes %q do not say the repository was moved", res.Notes)
	}
	if _, err := os.Lstat(filepath.Join(ws, "sub", ".git")); err == nil {
		t.Errorf("sub/.git is still where git would enter it")
	}
	afterGit(t, ws, marker)
}

// keepIndexIdentity rewrites .git/index, as the file .git/keep (a hard
// link to the index as it was before git replaced it), with the content
// git wrote: padded with an optional extension to the old size, given
// back the old modification time, and renamed over the index — the same
// file, size and mtime as before the run.
const keepIndexIdentity = `
import hashlib, os, struct
st = os.stat(".git/keep")
data = open(".git/index", "rb").read()[:-20]
pad = st.st_size - len(data) - 8 - 20
assert pad >= 0, pad
data += b"ZPAD" + struct.pack(">I", pad) + bytes(pad)
data += hashlib.sha1(data).digest()
with open(".git/keep", "r+b") as f:
    f.write(data)
os.utime(".git/keep", ns=(st.st_atime_ns, st.st_mtime_ns))
os.replace(".git/keep", ".git/index")
`

// TestAnIndexThatLooksUnchangedIsRead: a run that enters a repository of
// its own in the index as a submodule, and gives the index back its
// inode, its size and its modification time (all of which a tool can
// set), still has that repository moved out of git's way. The check of
// the index after a run trusts only what no tool can set (its change
// time), and only once that has settled. (Landlock gives no tool write
// access to .git's entries: there git cannot write the index at all.)
func TestAnIndexThatLooksUnchangedIsRead(t *testing.T) {
	needProgram(t, "python3")
	substrates(t, func(t *testing.T, sub string) {
		b := base(t)
		ws := workspace(t, b)
		gitRepo(t, ws)
		long := "d/" + strings.Repeat("a-long-name-", 10) // in d: landlock lets no tool make an entry at the top
		os.Mkdir(filepath.Join(ws, "d"), 0o755)
		writeFile(t, filepath.Join(ws, long), "x")
		hostGit(t, ws, "add", long)
		hostGit(t, ws, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "long")
		index := filepath.Join(ws, ".git", "index")
		before, err := os.Stat(index)
		if err != nil {
			t.Fatal(err)
		}
		// An index written just now is read whatever its stat says: wait
		// until this one could be trusted by it.
		time.Sleep(time.Until(before.ModTime().Add(3500 * time.Millisecond)))
		marker := filepath.Join(b, "pwned")
		if sub == landlock.Name {
			data, _ := os.ReadFile(index)
			res := run(t, newPolicy(ws), attempt("link", "ln .git/index .git/keep")+
				attempt("update", "git update-index --add --cacheinfo 160000,$(git rev-parse HEAD),d/sub"), on(sub))
			if st := statuses(t, res.Stdout); st["link"] == "0" || st["update"] == "0" {
				t.Errorf("on landlock a tool wrote .git: %q", res.Stdout)
			}
			if now, _ := os.ReadFile(index); !bytes.Equal(now, data) {
				t.Errorf("on landlock a tool rewrote the index")
			}
			return
		}
		script := plantSub("d/sub", marker) + fmt.Sprintf(` &&
ln .git/index .git/keep && git rm -q --cached %s && git update-index --add --cacheinfo 160000,$(git -C d/sub rev-parse HEAD),d/sub &&
python3 -c '%s' && echo ENTERED
`, long, keepIndexIdentity)
		res := run(t, newPolicy(ws), script, on(sub))
		if !strings.Contains(res.Stdout, "ENTERED") {
			t.Fatalf("the command could not rewrite the index (the test proves nothing): %q %q", res.Stdout, res.Stderr)
		}
		after, err := os.Stat(index)
		if err != nil {
			t.Fatal(err)
		}
		if !os.SameFile(before, after) || before.Size() != after.Size() || !before.ModTime().Equal(after.ModTime()) {
			t.Fatalf("the index's inode, size or mtime changed (the test proves nothing): %v %v", before, after)
		}
		if !strings.Contains(hostGit(t, ws, "ls-files", "-s", "d/sub"), "160000") {
			t.Fatalf("the host's git does not see the submodule (the test proves nothing)")
		}
		if len(res.Notes) != 1 || !strings.Contains(res.Notes[0], "moved d/sub/.git") {
			t.Errorf("the result's notes %q do not say the repository was moved", res.Notes)
		}
		afterGit(t, ws, marker)
	})
}
