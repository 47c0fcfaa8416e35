package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// origin returns a git repository with one commit, for a root.
func originRepo(t *testing.T) string {
	t.Helper()
	dir := tempWorkspace(t)
	os.WriteFile(filepath.Join(dir, "a.txt"), []byte("hello\n"), 0o644)
	for _, args := range [][]string{{"init", "-q"}, {"add", "-A"}, {"-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "base"}} {
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v %s", args, err, out)
		}
	}
	return dir
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// makeRoot creates a root of origin with the CLI and returns its path.
func makeRoot(t *testing.T, origin string, args ...string) string {
	t.Helper()
	code, stdout, stderr := cordonMain(t, "", append([]string{"root", "create", "--from", origin}, args...)...)
	if code != 0 {
		t.Fatalf("root create: exit %d: %s %s", code, stdout, stderr)
	}
	root := lastLine(stdout)
	if !filepath.IsAbs(root) {
		t.Fatalf("root create's last line is %q, not the root's path", root)
	}
	t.Cleanup(func() { cordonMain(t, "", "root", "discard", root) })
	return root
}

// TestRootLifecycle: create (copy and worktree), list, diff, apply,
// discard through the CLI; and the refusals a model can act on.
func TestRootLifecycle(t *testing.T) {
	for _, mode := range []string{"copy", "worktree"} {
		t.Run(mode, func(t *testing.T) {
			origin := originRepo(t)
			root := makeRoot(t, origin, "--mode", mode)
			code, stdout, _ := cordonMain(t, "", "--json", "root", "list")
			if code != 0 || !strings.Contains(stdout, root) {
				t.Fatalf("root list: %d %s", code, stdout)
			}
			os.WriteFile(filepath.Join(root, "a.txt"), []byte("hello\nworld\n"), 0o644)
			os.WriteFile(filepath.Join(root, "tool.sh"), []byte("#!/bin/sh\n"), 0o755)
			code, stdout, stderr := cordonMain(t, "", "root", "diff", root)
			if code != 0 || !strings.Contains(stdout, "+world") || !strings.Contains(stdout, "!! EXECUTABLE  tool.sh") {
				t.Fatalf("root diff: %d %s %s", code, stdout, stderr)
			}
			var d struct {
				Changes []struct{ Path, Change string }
			}
			code, stdout, _ = cordonMain(t, "", "--json", "root", "diff", root)
			if json.Unmarshal([]byte(stdout), &d); code != 0 || len(d.Changes) != 2 {
				t.Fatalf("root diff --json: %d %s", code, stdout)
			}
			// The origin changed where the root did: apply refuses, exit 3.
			os.WriteFile(filepath.Join(origin, "a.txt"), []byte("the person's edit\n"), 0o644)
			code, stdout, _ = cordonMain(t, "", "--json", "root", "apply", root)
			var e errorJSON
			if json.Unmarshal([]byte(stdout), &e); code != exitRefused || e.Error != "OriginChanged" || !strings.Contains(e.Message, "a.txt") {
				t.Fatalf("apply over a changed origin: %d %s", code, stdout)
			}
			if data, _ := os.ReadFile(filepath.Join(origin, "a.txt")); string(data) != "the person's edit\n" {
				t.Fatal("apply overwrote the origin's work")
			}
			// The other change still goes, named.
			if code, stdout, stderr := cordonMain(t, "", "root", "apply", root, "tool.sh"); code != 0 {
				t.Fatalf("apply tool.sh: %d %s %s", code, stdout, stderr)
			}
			if st, err := os.Stat(filepath.Join(origin, "tool.sh")); err != nil || st.Mode().Perm() != 0o755 {
				t.Fatalf("tool.sh in the origin: %v %v", st, err)
			}
			if code, _, stderr := cordonMain(t, "", "root", "discard", root); code != 0 {
				t.Fatalf("discard: %d %s", code, stderr)
			}
			if _, err := os.Stat(root); !os.IsNotExist(err) {
				t.Fatalf("discarded root still there: %v", err)
			}
		})
	}
}

// TestDiscardOnlyRoots: discard refuses a directory cordon did not make
// (exit 3, NotARoot) and leaves it alone.
func TestDiscardOnlyRoots(t *testing.T) {
	dir := originRepo(t)
	for _, target := range []string{dir, filepath.Join(os.Getenv("CORDON_ROOTS_DIR"), "..")} {
		code, stdout, _ := cordonMain(t, "", "--json", "root", "discard", target)
		var e errorJSON
		if json.Unmarshal([]byte(stdout), &e); code != exitRefused || e.Error != "NotARoot" {
			t.Errorf("discard %s: %d %s; want exit 3, NotARoot", target, code, stdout)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "a.txt")); err != nil {
		t.Fatal("discard touched a directory that is not a root")
	}
}

// TestUnattendedRefusedAndAccepted: --autonomy unattended refuses in a
// plain directory, in a root without evidence, without the sandbox, with
// a broken substrate — exit 3, every failed precondition named, nothing
// run — and runs in a root with fresh receipts; each decision is a
// receipt.
func TestUnattendedRefusedAndAccepted(t *testing.T) {
	needBwrap(t)
	limits := []string{"--memory", "1GiB", "--pids", "256"}
	unattended := func(t *testing.T, env []string, ws string, extra ...string) (int, errorJSON, map[string]any) {
		t.Helper()
		marker := filepath.Join(ws, "ran")
		args := append([]string{"-w", ws, "--json", "exec", "--autonomy", "unattended"}, limits...)
		args = append(append(args, extra...), "--", "sh", "-c", "echo ran > "+marker)
		cmd := cordonProcess(t, env, args...)
		out, err := cmd.Output()
		var e errorJSON
		var all map[string]any
		json.Unmarshal(out, &e)
		json.Unmarshal(out, &all)
		code := procExit(err)
		if _, err := os.Stat(marker); (err == nil) != (code == 0) {
			t.Fatalf("exit %d, but the marker exists: %v (%s)", code, err == nil, out)
		}
		return code, e, all
	}
	failed := func(all map[string]any) []string {
		var names []string
		a, _ := all["autonomy"].(map[string]any)
		ps, _ := a["preconditions"].([]any)
		for _, p := range ps {
			p := p.(map[string]any)
			if p["pass"] != true {
				names = append(names, p["name"].(string))
			}
		}
		return names
	}
	path := []string{"PATH=" + os.Getenv("PATH")}

	plain := originRepo(t)
	code, e, all := unattended(t, path, plain)
	if code != exitRefused || e.Error != "AutonomyRefused" || !strings.Contains(strings.Join(failed(all), ","), "root") {
		t.Fatalf("in a plain directory: exit %d %+v %v", code, e, failed(all))
	}

	root := makeRoot(t, plain)
	code, _, all = unattended(t, path, root)
	if code != exitRefused || strings.Join(failed(all), ",") != "evidence" {
		t.Fatalf("in a root without evidence: exit %d, failed %v; want only evidence", code, failed(all))
	}
	if code, stdout, stderr := cordonMain(t, "", "-w", root, "probe"); code != 0 {
		t.Fatalf("probe: %d %s %s", code, stdout, stderr)
	}
	code, e, all = unattended(t, path, root)
	if code != 0 {
		t.Fatalf("in a fresh root: exit %d %+v %v", code, e, failed(all))
	}
	if _, err := os.Stat(filepath.Join(plain, "ran")); err == nil {
		t.Fatal("the run in the root wrote the origin")
	}
	os.Remove(filepath.Join(root, "ran"))

	// Without the sandbox.
	cmd := cordonProcess(t, path, "-w", root, "--json", "exec", "--autonomy", "unattended", "--no-sandbox", "--", "true")
	out, err := cmd.Output()
	json.Unmarshal(out, &all)
	if procExit(err) != exitRefused || !strings.Contains(strings.Join(failed(all), ","), "sandbox") {
		t.Fatalf("--no-sandbox: %v %s", err, out)
	}
	// With the network.
	code, _, all = unattended(t, path, root, "--net", "host")
	if code != exitRefused || strings.Join(failed(all), ",") != "network" {
		t.Fatalf("--net host: exit %d, failed %v", code, failed(all))
	}
	// A broken substrate: the bwrap found first fails.
	broken := t.TempDir()
	os.WriteFile(filepath.Join(broken, "bwrap"), []byte("#!/bin/sh\necho 'bwrap: creating new namespace failed: Operation not permitted' >&2\nexit 1\n"), 0o755)
	code, _, all = unattended(t, []string{"PATH=" + broken + ":" + os.Getenv("PATH")}, root)
	if code != exitRefused || !strings.Contains(strings.Join(failed(all), ","), "sandbox") {
		t.Fatalf("a broken bwrap: exit %d, failed %v", code, failed(all))
	}

	// Every decision is a receipt.
	code, stdout, _ := cordonMain(t, "", "-w", root, "--json", "evidence", "list")
	var list struct {
		Receipts []struct{ Verdict, Autonomy string }
	}
	json.Unmarshal([]byte(stdout), &list)
	verdicts := map[string]int{}
	for _, r := range list.Receipts {
		if r.Autonomy != "" {
			verdicts[r.Verdict]++
		}
	}
	if code != 0 || verdicts["allowed"] != 1 || verdicts["refused"] != 4 {
		t.Errorf("decisions in the root's log: %v (exit %d); want 1 allowed, 4 refused", verdicts, code)
	}
	if code, stdout, stderr := cordonMain(t, "", "-w", root, "evidence", "verify"); code != 0 {
		t.Errorf("evidence verify: %d %s %s", code, stdout, stderr)
	}

	// run of an admitted tool: the same decision.
	os.MkdirAll(filepath.Join(root, "tools"), 0o755)
	os.WriteFile(filepath.Join(root, "tools", "hello.yaml"), []byte(`name: hello
description: say hello
kind: native
command: [sh, -c, "echo hello"]
capabilities: [time:10s, output:64KiB, memory:256MiB, pids:64]
`), 0o644)
	if code, stdout, stderr := cordonMain(t, "", "-w", root, "admit", filepath.Join(root, "tools", "hello.yaml")); code != 0 {
		t.Fatalf("admit in the root: %d %s %s", code, stdout, stderr)
	}
	if code, stdout, stderr := cordonMain(t, "", "-w", root, "run", "--autonomy", "unattended", "hello"); code != 0 || strings.TrimSpace(stdout) != "hello" {
		t.Fatalf("run --autonomy unattended in the root: %d %q %s", code, stdout, stderr)
	}

	// autonomy check says the same, without running anything.
	if code, stdout, _ := cordonMain(t, "", append([]string{"-w", root, "autonomy", "check"}, limits...)...); code != 0 || !strings.Contains(stdout, "every precondition holds") {
		t.Errorf("autonomy check in the fresh root: %d %s", code, stdout)
	}
	if code, _, stderr := cordonMain(t, "", "-w", plain, "autonomy", "check"); code != exitRefused || !strings.Contains(stderr, "FAIL  root") {
		t.Errorf("autonomy check in a plain directory: %d %s", code, stderr)
	}
}
