package main

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cordon-run/cordon/harness"
	"github.com/cordon-run/cordon/internal/testenv"
	"github.com/cordon-run/cordon/substrate/bwrap"
)

// TestNothingWritesCordonsOtherBinaryBoundIntoTheWorkspace: cordon's
// full binary, beside the program that runs (here this test binary, as
// cordon), bound alone into the workspace, is refused as that program
// is: the front end starts it.
func TestNothingWritesCordonsOtherBinaryBoundIntoTheWorkspace(t *testing.T) {
	needBwrap(t)
	if !testenv.PrivateMounts(t) {
		return
	}
	inst := t.TempDir()
	bin, full := filepath.Join(inst, "cordon"), filepath.Join(inst, fullName)
	data := copySelf(t, bin, full)
	ws := tempWorkspace(t)
	testenv.Bind(t, full, filepath.Join(ws, "cf"))
	for _, sub := range []string{"bwrap", "landlock"} {
		cmd := cordonProcess(t, os.Environ(), "-w", ws, "--json", "exec", "--substrate", sub, "--", "sh", "-c", "echo x >> cf")
		cmd.Path = bin
		out, err := cmd.Output()
		if code := procExit(err); code != exitRefused || !strings.Contains(string(out), "beside the program this process runs") {
			t.Errorf("%s: exit %d, %s; want a WorkspaceRefused naming the binary beside the program", sub, code, out)
		}
	}
	if after, _ := os.ReadFile(full); !bytes.Equal(after, data) {
		t.Error("cordon's full binary changed")
	}
}

// TestNoFileToolReadsCordonsStateBoundIntoTheWorkspace: cordon's state
// directory (its keys) bound into the workspace: the file tools refuse
// the workspace, a read included (they resolve below the workspace, and a
// mount below it is below it).
func TestNoFileToolReadsCordonsStateBoundIntoTheWorkspace(t *testing.T) {
	if !testenv.PrivateMounts(t) {
		return
	}
	state := os.Getenv(harness.EnvStateDir)
	if err := os.MkdirAll(state, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(state, "secret"), []byte("key"), 0o600); err != nil {
		t.Fatal(err)
	}
	ws := tempWorkspace(t)
	testenv.Bind(t, state, filepath.Join(ws, "st"))
	code, out, _ := cordonMain(t, "", "-w", ws, "--json", "fs", "read", "st/secret")
	if code != exitRefused || !strings.Contains(out, "cordon's state or cache") || strings.Contains(out, `"key"`) {
		t.Errorf("fs read st/secret: exit %d, %s; want a WorkspaceRefused naming cordon's state", code, out)
	}
}

// TestNothingReplacesTheLinkCordonWasStartedBy: cordon started by a link
// (a package manager's bin, here a directory of links bound into the
// workspace) is refused where a command could replace that link: the next
// start by that name would run what it put there, on the host.
func TestNothingReplacesTheLinkCordonWasStartedBy(t *testing.T) {
	needBwrap(t)
	if !testenv.PrivateMounts(t) {
		return
	}
	inst := t.TempDir()
	bin := filepath.Join(inst, "cordon")
	copySelf(t, bin, filepath.Join(inst, fullName))
	links := t.TempDir()
	link := filepath.Join(links, "cordon")
	if err := os.Symlink(bin, link); err != nil {
		t.Fatal(err)
	}
	ws := tempWorkspace(t)
	testenv.Bind(t, links, filepath.Join(ws, "lk"))
	for _, sub := range []string{"bwrap", "landlock"} {
		cmd := cordonProcess(t, os.Environ(), "-w", ws, "--json", "exec", "--substrate", sub, "--", "ln", "-sfn", "/bin/false", "lk/cordon")
		cmd.Path, cmd.Args[0] = link, link
		out, err := cmd.Output()
		if code := procExit(err); code != exitRefused || !strings.Contains(string(out), "the way this program was started") {
			t.Errorf("%s: exit %d, %s; want a WorkspaceRefused naming the link cordon was started by", sub, code, out)
		}
	}
	if to, err := os.Readlink(link); err != nil || to != bin {
		t.Errorf("the link cordon was started by now leads to %q (%v)", to, err)
	}
}

// TestTheFullBinaryGuardsTheLinkTheFrontEndWasStartedBy: the front end
// started by a link (a package manager's bin, here bound into the
// workspace) hands off to the full binary by the latter's own name; the
// full binary still refuses a run whose command could replace that link
// (CORDON_STARTED_AS): the next start by that name would run what it put
// there, on the host. Tried before: `exec --receipt` replaced it, and the
// next start ran the command's script.
func TestTheFullBinaryGuardsTheLinkTheFrontEndWasStartedBy(t *testing.T) {
	needBwrap(t)
	if !testenv.PrivateMounts(t) {
		return
	}
	dir := frontPrograms(t)
	links := t.TempDir()
	link := filepath.Join(links, "cordon")
	if err := os.Symlink(filepath.Join(dir, "cordon"), link); err != nil {
		t.Fatal(err)
	}
	ws := tempWorkspace(t)
	testenv.Bind(t, links, filepath.Join(ws, "lk"))
	for _, args := range [][]string{
		{"exec", "--receipt", "--", "ln", "-sfn", "/bin/false", "lk/cordon"},
		{"exec", "--", "ln", "-sfn", "/bin/false", "lk/cordon"},
	} {
		r := runProgram(t, ws, append([]string{link}, args...)...)
		if r.code != exitRefused || !strings.Contains(r.stderr, "on the way this program was started") {
			t.Errorf("%v: %+v; want a WorkspaceRefused naming the link the front end was started by", args, r)
		}
	}
	if to, err := os.Readlink(link); err != nil || to != filepath.Join(dir, "cordon") {
		t.Errorf("the link the front end was started by now leads to %q (%v)", to, err)
	}
}

// TestNothingReplacesALinkOnTheWayCordonWasStartedBy: cordon started as
// WS/L/../../cordon, where L is a link in the workspace (to INST/a/b):
// the kernel goes through L and back up from where it leads, to
// INST/cordon. The link is on the way the next start by that name goes:
// the run is refused (the name, cleaned as text, skipped L).
func TestNothingReplacesALinkOnTheWayCordonWasStartedBy(t *testing.T) {
	needBwrap(t)
	inst := t.TempDir()
	os.MkdirAll(filepath.Join(inst, "a", "b"), 0o755)
	copySelf(t, filepath.Join(inst, "cordon"), filepath.Join(inst, fullName))
	ws := tempWorkspace(t)
	link := filepath.Join(ws, "L")
	if err := os.Symlink(filepath.Join(inst, "a", "b"), link); err != nil {
		t.Fatal(err)
	}
	name := link + "/../../cordon"
	for _, sub := range []string{"bwrap", "landlock"} {
		cmd := cordonProcess(t, os.Environ(), "-w", ws, "--json", "exec", "--substrate", sub, "--", "ln", "-sfn", "/tmp", "L")
		cmd.Path, cmd.Args[0] = name, name
		out, err := cmd.Output()
		if code := procExit(err); code != exitRefused || !strings.Contains(string(out), "on the way this program was started") {
			t.Errorf("%s: exit %d, %s; want a WorkspaceRefused naming the way cordon was started", sub, code, out)
		}
	}
	if to, err := os.Readlink(link); err != nil || to != filepath.Join(inst, "a", "b") {
		t.Errorf("the link on the way cordon was started now leads to %q (%v)", to, err)
	}
}

// TestTheHandOffNamesTheFrontEnd: the full binary is handed the paths the
// front end was started by and runs, one value of CORDON_STARTED_AS (any
// earlier one replaced: the first of two would be read).
func TestTheHandOffNamesTheFrontEnd(t *testing.T) {
	env := handOffEnv([]string{"A=1", bwrap.EnvStartedAs + "=/usr/bin/true", "B=2"})
	var got []string
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, bwrap.EnvStartedAs+"="); ok {
			got = append(got, v)
		}
	}
	self, _ := os.Executable()
	if len(got) != 1 || !strings.Contains(got[0], self) || strings.Contains(got[0], "/usr/bin/true") || !slices.Contains(env, "B=2") {
		t.Errorf("handOffEnv = %q; want one %s naming %s, the rest kept", env, bwrap.EnvStartedAs, self)
	}
}
