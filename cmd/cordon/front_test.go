package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cordon-run/cordon/internal/testenv"
)

// frontPrograms returns a directory of its own holding cordon's front end
// (cordon, built with the tag cordon_front) and the full binary beside it
// (cordon-full), copied from the ones scripts/test built for the
// unprivileged run, or built here.
func frontPrograms(t *testing.T) string {
	t.Helper()
	src := filepath.Join("testdata", "front")
	if _, err := os.Stat(filepath.Join(src, "cordon")); err != nil {
		_, err := exec.LookPath("go")
		testenv.Require(t, err == nil, "the go command, to build cordon's front end: %v", err)
		src = t.TempDir()
		for _, b := range [][]string{
			{"build", "-tags", "cordon_front", "-o", filepath.Join(src, "cordon"), "."},
			{"build", "-o", filepath.Join(src, fullName), "."},
		} {
			c := exec.Command("go", b...)
			c.Env = append(os.Environ(), "CGO_ENABLED=0")
			if out, err := c.CombinedOutput(); err != nil {
				t.Fatalf("go %s: %v\n%s", strings.Join(b, " "), err, out)
			}
		}
	}
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"cordon", fullName} {
		data, err := os.ReadFile(filepath.Join(src, name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// runFront runs the front end in dir with args, in the workspace ws (see
// runProgram).
func runFront(t *testing.T, dir, ws string, args ...string) result {
	t.Helper()
	return runProgram(t, ws, append([]string{filepath.Join(dir, "cordon")}, args...)...)
}

// runProgram runs argv in ws, with the tests' per-user state, no input,
// and a bound on its time.
func runProgram(t *testing.T, ws string, argv ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := exec.CommandContext(ctx, argv[0], argv[1:]...)
	c.Dir = ws
	c.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}, stateEnv()...)
	var stdout, stderr bytes.Buffer
	c.Stdin, c.Stdout, c.Stderr = strings.NewReader(""), &stdout, &stderr
	err := c.Run()
	if ctx.Err() != nil {
		t.Fatalf("%v did not end within a minute (a hand-off to itself?)", argv)
	}
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("%v: %v", argv, err)
	}
	return result{code, stdout.String(), stderr.String()}
}

// The front end runs exec and fs itself, with no full binary beside it,
// and links none of what it leaves to the full binary (the static half is
// internal/deptest's TestTheFrontEndLinksNoEngine).
func TestTheFrontEndRunsExecAndFSItself(t *testing.T) {
	needBwrap(t)
	dir := frontPrograms(t)
	if err := os.Remove(filepath.Join(dir, fullName)); err != nil {
		t.Fatal(err)
	}
	ws := tempWorkspace(t)
	os.WriteFile(filepath.Join(ws, "a.txt"), []byte("hello\n"), 0o644)

	r := runFront(t, dir, ws, "--version", "--json")
	var v map[string]string
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &v) != nil || v["build"] != "front" {
		t.Fatalf("--version --json: %+v", r)
	}
	if r := runFront(t, dir, ws, "exec", "--", "sh", "-c", "cat a.txt; echo made > b.txt; exit 7"); r.code != 7 || r.stdout != "hello\n" {
		t.Fatalf("exec: %+v", r)
	}
	if r := runFront(t, dir, ws, "no-such-command"); r.code != exitUsage || !strings.Contains(r.stderr, "unknown command") {
		t.Fatalf("an unknown command: %+v", r)
	}
	if r := runFront(t, dir, ws, "fs", "read", "b.txt"); r.code != 0 || r.stdout != "made\n" {
		t.Fatalf("fs read: %+v", r)
	}
	if r := runFront(t, dir, ws, "--json", "fs", "read", "../x"); r.code != exitRefused || !strings.Contains(r.stdout, `"error":"OutsideWorkspace"`) {
		t.Fatalf("fs read outside: %+v", r)
	}
}

// exec and fs keep the same boundary through the front end as through the
// full binary, on bwrap and on landlock: each attack below fails the same
// way, with the same exit code, and its target on the host is left as it
// was (git's config, the harness state, a file outside the workspace).
func TestTheFrontEndKeepsTheBoundary(t *testing.T) {
	needBwrap(t)
	dir := frontPrograms(t)
	top := t.TempDir()
	ws := filepath.Join(top, "ws")
	// A host file outside the workspace that the host's user may write
	// (the sandbox's own /tmp is a tmpfs, where writing proves nothing).
	host, err := os.MkdirTemp("/var/tmp", "cordon-front-test-")
	testenv.Require(t, err == nil, "a directory of the host's /var/tmp: %v", err)
	t.Cleanup(func() { os.RemoveAll(host) })
	outside := filepath.Join(host, "outside")
	for _, d := range []string{filepath.Join(ws, ".git"), filepath.Join(ws, ".efferent")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	config := filepath.Join(ws, ".git", "config")
	if err := os.WriteFile(config, []byte("[core]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		code int
	}{
		// sh's status when a redirection fails is 2.
		{[]string{"exec", "--", "sh", "-c", "echo '[core] hooksPath=/tmp' >> .git/config"}, 2},
		{[]string{"exec", "--", "sh", "-c", "echo x > .efferent/planted"}, 2},
		{[]string{"exec", "--", "sh", "-c", "echo x > " + outside}, 2},
		// The landlock substrate runs its helpers as this program
		// re-executed: the front end's own.
		{[]string{"exec", "--substrate", "landlock", "--", "sh", "-c", "echo '[core] hooksPath=/tmp' >> .git/config"}, 2},
		{[]string{"exec", "--substrate", "landlock", "--", "sh", "-c", "echo x > " + outside}, 2},
		{[]string{"fs", "write", ".git/config"}, exitRefused},
		{[]string{"fs", "write", ".efferent/planted"}, exitRefused},
		{[]string{"fs", "write", outside}, exitRefused},
		{[]string{"exec", "--timeout", "1s", "--", "sleep", "5"}, exitTimeout},
		{[]string{"exec", "--", "no-such-program-here"}, 127},
		{[]string{"exec", "--bogus", "--", "true"}, exitUsage},
	} {
		front := runFront(t, dir, ws, tc.args...)
		full := runProgram(t, ws, append([]string{filepath.Join(dir, fullName)}, tc.args...)...)
		if front.code != tc.code || full.code != tc.code {
			t.Errorf("%v: exit %d through the front end, %d through the full binary; want %d (%s | %s)", tc.args, front.code, full.code, tc.code, front.stderr, full.stderr)
		}
	}
	if data, err := os.ReadFile(config); err != nil || string(data) != "[core]\n" {
		t.Errorf(".git/config is now %q (%v)", data, err)
	}
	for _, p := range []string{filepath.Join(ws, ".efferent", "planted"), outside} {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("%s was written", p)
		}
	}
}

// Every other command — and exec with a receipt or unattended, whose
// evidence names the binary that made it — is the full binary's: the
// front end replaces itself with it, same arguments and streams, so that
// its exit code is the full binary's own.
func TestTheFrontEndHandsTheRestToTheFullBinary(t *testing.T) {
	needBwrap(t)
	dir := frontPrograms(t)
	ws := tempWorkspace(t)

	// mcp is not in the front end at all.
	if r := runFront(t, dir, ws, "mcp", "--help"); r.code != 0 || !strings.Contains(r.stdout, "usage: cordon mcp") {
		t.Fatalf("mcp --help: %+v", r)
	}
	if r := runFront(t, dir, ws, "help"); r.code != 0 || !strings.Contains(r.stdout, "mcp") {
		t.Fatalf("help: %+v", r)
	}
	r := runFront(t, dir, ws, "--json", "run", "no-such-tool")
	if r.code != exitError || !strings.Contains(r.stdout, `"error":"UnknownTool"`) {
		t.Fatalf("run of no tool: %+v", r)
	}
	if r := runFront(t, dir, ws, "exec", "--receipt", "--", "true"); r.code != 0 || !strings.Contains(r.stderr, "cordon: receipt #") {
		t.Fatalf("exec --receipt: %+v", r)
	}
	// Without the full binary, each of them is refused, naming it.
	os.Remove(filepath.Join(dir, fullName))
	for _, args := range [][]string{{"mcp", "--help"}, {"run", "no-such-tool"}, {"exec", "--receipt", "--", "true"}, {"exec", "--autonomy", "unattended", "--", "true"}} {
		if r := runFront(t, dir, ws, args...); r.code != exitCannotRun || !strings.Contains(r.stderr, filepath.Join(dir, fullName)) {
			t.Errorf("%v without the full binary: %+v", args, r)
		}
	}
}

// The front end runs the full binary on the host, as cordon itself: it
// refuses one that someone other than root and this user could have put
// there, one that is not a file of its own beside the front end (a link
// out, a hard link), one in a directory others may write, and a front end
// under the full binary's name, which would hand off to itself for ever.
// The program refused never runs. (One in a directory that has been a
// workspace is run: the front end the user runs lies there too.)
func TestTheFrontEndRefusesAFullBinaryItCannotTrust(t *testing.T) {
	ws := tempWorkspace(t)
	planted := func(t *testing.T, dir string, mode os.FileMode) string {
		marker := filepath.Join(t.TempDir(), "ran")
		script := "#!/bin/sh\necho planted > " + marker + "\n"
		if err := os.WriteFile(filepath.Join(dir, fullName), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(filepath.Join(dir, fullName), mode); err != nil {
			t.Fatal(err)
		}
		return marker
	}
	refused := func(t *testing.T, r result, marker, why string) {
		t.Helper()
		if r.code != exitCannotRun || !strings.Contains(r.stderr, why) {
			t.Errorf("want a refusal (%s): %+v", why, r)
		}
		if _, err := os.Stat(marker); err == nil {
			t.Errorf("the refused program ran")
		}
	}

	t.Run("writable by others", func(t *testing.T) {
		dir := frontPrograms(t)
		marker := planted(t, dir, 0o757)
		refused(t, runFront(t, dir, ws, "tools"), marker, "writable by group or others")
	})
	t.Run("in a directory another user owns", func(t *testing.T) {
		dir := frontPrograms(t)
		marker := planted(t, dir, 0o755)
		if err := os.Chown(filepath.Join(dir, fullName), 4242, 4242); err != nil {
			t.Skipf("chown to another user needs root: %v", err)
		}
		refused(t, runFront(t, dir, ws, "tools"), marker, "belongs to uid 4242")
	})
	t.Run("a link out of the front end's directory", func(t *testing.T) {
		dir := frontPrograms(t)
		elsewhere := t.TempDir()
		marker := planted(t, elsewhere, 0o755)
		os.Remove(filepath.Join(dir, fullName))
		if err := os.Symlink(filepath.Join(elsewhere, fullName), filepath.Join(dir, fullName)); err != nil {
			t.Fatal(err)
		}
		refused(t, runFront(t, dir, ws, "tools"), marker, "outside "+dir)
	})
	t.Run("a hard link to a file elsewhere", func(t *testing.T) {
		dir := frontPrograms(t)
		elsewhere := t.TempDir()
		marker := planted(t, elsewhere, 0o755)
		os.Remove(filepath.Join(dir, fullName))
		if err := os.Link(filepath.Join(elsewhere, fullName), filepath.Join(dir, fullName)); err != nil {
			t.Skipf("no hard link across these directories: %v", err)
		}
		refused(t, runFront(t, dir, ws, "tools"), marker, "2 links")
	})
	t.Run("the front end with another name", func(t *testing.T) {
		// Handed off, the front end no longer runs (no ETXTBSY): a
		// sandboxed command could write it through a hard link in the
		// workspace.
		dir := frontPrograms(t)
		if err := os.Link(filepath.Join(dir, "cordon"), filepath.Join(ws, "cordon-copy")); err != nil {
			t.Skipf("no hard link across these directories: %v", err)
		}
		defer os.Remove(filepath.Join(ws, "cordon-copy"))
		r := runFront(t, dir, ws, "tools")
		if r.code != exitCannotRun || !strings.Contains(r.stderr, "has 2 links") {
			t.Errorf("want a refusal (the front end's 2 links): %+v", r)
		}
	})
	t.Run("a directory others may write", func(t *testing.T) {
		dir := frontPrograms(t)
		marker := planted(t, dir, 0o755)
		if err := os.Chmod(dir, 0o1777); err != nil {
			t.Fatal(err)
		}
		refused(t, runFront(t, dir, ws, "tools"), marker, "writable by group or others")
	})
	t.Run("a script", func(t *testing.T) {
		// Its interpreter, and whatever it runs, could lie in a
		// workspace: nothing would check them.
		dir := frontPrograms(t)
		marker := planted(t, dir, 0o755)
		refused(t, runFront(t, dir, ws, "tools"), marker, "not an ELF executable")
	})
	t.Run("the front end bind-mounted beside another cordon-full", func(t *testing.T) {
		// A container's -v of the front end into a workspace: the
		// directory it seems to lie in is not the one it was installed
		// in, and a sandboxed command may write there.
		if os.Geteuid() != 0 {
			t.Skip("a bind mount needs root")
		}
		unshare, err := exec.LookPath("unshare")
		testenv.Require(t, err == nil, "unshare(1): %v", err)
		dir := frontPrograms(t)
		other := t.TempDir()
		marker := planted(t, other, 0o755)
		if err := os.WriteFile(filepath.Join(other, "cordon"), nil, 0o755); err != nil {
			t.Fatal(err)
		}
		script := "mount --bind " + filepath.Join(dir, "cordon") + " " + filepath.Join(other, "cordon") + " && exec " + filepath.Join(other, "cordon") + " tools"
		refused(t, runProgram(t, ws, unshare, "-m", "--propagation", "private", "sh", "-c", script), marker, "a mount of its own")
	})
	for _, how := range []string{"a copy", "a link"} {
		t.Run("the front end itself, as "+how, func(t *testing.T) {
			dir := frontPrograms(t)
			full := filepath.Join(dir, fullName)
			os.Remove(full)
			var err error
			if how == "a link" {
				err = os.Symlink("cordon", full)
			} else {
				var data []byte
				if data, err = os.ReadFile(filepath.Join(dir, "cordon")); err == nil {
					err = os.WriteFile(full, data, 0o755)
				}
			}
			if err != nil {
				t.Fatal(err)
			}
			r := runFront(t, dir, ws, "tools")
			if r.code != exitCannotRun || !strings.Contains(r.stderr, "front end") {
				t.Errorf("the front end as %s: %+v", fullName, r)
			}
		})
	}
	// The real full binary, as a control: the same command is run.
	dir := frontPrograms(t)
	if r := runFront(t, dir, ws, "tools"); r.code != 0 {
		t.Errorf("tools through a trusted full binary: %+v", r)
	}
}

// TestTheFullBinaryGuardsALinkToTheFrontEndInTheWorkspace: the front end
// started by a link inside the workspace hands off (exec --receipt) to
// the full binary by the latter's own name; the full binary still refuses
// the run, whose command could replace the link the next start by that
// name goes through — for root and an unprivileged user alike (the bind
// mount case: TestTheFullBinaryGuardsTheLinkTheFrontEndWasStartedBy).
func TestTheFullBinaryGuardsALinkToTheFrontEndInTheWorkspace(t *testing.T) {
	needBwrap(t)
	dir := frontPrograms(t)
	ws := tempWorkspace(t)
	os.Mkdir(filepath.Join(ws, "lk"), 0o755)
	link := filepath.Join(ws, "lk", "cordon")
	if err := os.Symlink(filepath.Join(dir, "cordon"), link); err != nil {
		t.Fatal(err)
	}
	r := runProgram(t, ws, link, "exec", "--receipt", "--", "ln", "-sfn", "/bin/false", "lk/cordon")
	if r.code != exitRefused || !strings.Contains(r.stderr, "on the way this program was started") {
		t.Errorf("exec --receipt from a link in the workspace: %+v; want a WorkspaceRefused naming the link", r)
	}
	if to, err := os.Readlink(link); err != nil || to != filepath.Join(dir, "cordon") {
		t.Errorf("the link the front end was started by now leads to %q (%v)", to, err)
	}
}

// TestNoRunRewritesCordonThroughASecondName: a hard link of cordon-full
// or of the front end in the workspace — one its user made (a binary
// linked into a project's bin); a sandboxed command cannot make one —
// would let a command rewrite the program the next hand-off or start
// runs, on the host. Every run is refused while either has a second name
// on the workspace's file system, on every substrate, and neither
// changes; once the second name is gone, runs go on. (Tried before the
// check: a command wrote cordon-full through the link and removed it,
// and the next `cordon tools` ran what it wrote.)
func TestNoRunRewritesCordonThroughASecondName(t *testing.T) {
	needBwrap(t)
	dir := frontPrograms(t)
	for _, name := range []string{fullName, "cordon"} {
		ws := tempWorkspace(t)
		second := filepath.Join(ws, "linked")
		err := os.Link(filepath.Join(dir, name), second)
		testenv.Require(t, err == nil, "a hard link of %s in the workspace (one file system): %v", name, err)
		want, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		for _, sub := range []string{"bwrap", "landlock"} {
			r := runFront(t, dir, ws, "exec", "--substrate", sub, "--", "sh", "-c", "echo written > linked; rm -f linked")
			if r.code != exitRefused || !strings.Contains(r.stderr, "has 2 names") {
				t.Errorf("%s linked into the workspace, a %s run: %+v; want a WorkspaceRefused naming its second name", name, sub, r)
			}
		}
		if got, err := os.ReadFile(filepath.Join(dir, name)); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%s was rewritten through its second name (%v)", name, err)
		}
		os.Remove(second)
		if r := runFront(t, dir, ws, "exec", "--", "true"); r.code != 0 {
			t.Errorf("a run once the second name of %s is gone: %+v", name, r)
		}
	}
}
