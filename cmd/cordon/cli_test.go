package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cordon-run/cordon/harness"
	"github.com/cordon-run/cordon/internal/testenv"
	"github.com/cordon-run/cordon/refusal"
)

// TestHelpEverywhere: -h and --help on every command and subcommand, and
// cordon help [CMD], print that command's usage on stdout and exit 0.
func TestHelpEverywhere(t *testing.T) {
	ws := tempWorkspace(t)
	for _, args := range [][]string{
		{"--help"}, {"-h"}, {"help"},
		{"help", "exec"}, {"help", "fs"}, {"help", "admit"}, {"help", "run"}, {"help", "tools"},
		{"exec", "--help"}, {"exec", "-h"}, {"admit", "--help"}, {"admit", "-h"}, {"run", "--help"}, {"run", "-h"},
		{"tools", "--help"}, {"tools", "remove", "--help"}, {"tools", "remove", "-h"},
		{"fs", "--help"}, {"fs", "-h"}, {"fs", "read", "--help"}, {"fs", "write", "-h"}, {"fs", "edit", "--help"},
		{"fs", "list", "--help"}, {"fs", "stat", "--help"},
		{"help", "root"}, {"root", "--help"}, {"root", "-h"}, {"root", "create", "--help"}, {"root", "diff", "-h"},
		{"help", "autonomy"}, {"autonomy", "--help"}, {"autonomy", "check", "--help"},
	} {
		code, stdout, stderr := cordonMain(t, "", append([]string{"-w", ws}, args...)...)
		if code != 0 || !strings.HasPrefix(stdout, "usage: cordon") || stderr != "" {
			t.Errorf("cordon %s: exit %d, stdout %.60q, stderr %q; want the usage and exit 0", strings.Join(args, " "), code, stdout, stderr)
		}
		name := args[0]
		if name == "help" && len(args) > 1 {
			name = args[1]
		}
		if c, ok := lookup(name); ok && !strings.Contains(stdout, c.usage) {
			t.Errorf("cordon %s printed another command's usage: %.80q", strings.Join(args, " "), stdout)
		}
	}
	if code, _, _ := cordonMain(t, "", "help", "nosuch"); code != exitUsage {
		t.Errorf("help of an unknown command exits %d", code)
	}
}

// TestHelpOfEveryCommandAndSubcommand: `cordon help CMD [SUB]` prints
// exactly what `cordon CMD [SUB] --help` prints, for every command and
// every subcommand it names; help's own flags may come anywhere, and
// `cordon help help` is cordon's usage.
func TestHelpOfEveryCommandAndSubcommand(t *testing.T) {
	ws := tempWorkspace(t)
	same := func(viaHelp, viaFlag []string) {
		t.Helper()
		hc, hout, herr := cordonMain(t, "", append([]string{"-w", ws}, viaHelp...)...)
		fc, fout, ferr := cordonMain(t, "", append([]string{"-w", ws}, viaFlag...)...)
		if hc != exitOK || fc != exitOK || herr != "" || ferr != "" || hout != fout || !strings.HasPrefix(hout, "usage: cordon") {
			t.Errorf("cordon %s: exit %d, %.70q (stderr %q); cordon %s: exit %d, %.70q (stderr %q); want the same usage, exit 0",
				strings.Join(viaHelp, " "), hc, hout, herr, strings.Join(viaFlag, " "), fc, fout, ferr)
		}
	}
	for _, c := range commands {
		same([]string{"help", c.name}, []string{c.name, "--help"})
		for sub := range c.subs {
			same([]string{"help", c.name, sub}, []string{c.name, sub, "--help"})
		}
	}
	for _, args := range [][]string{{"help", "help"}, {"help", "-h"}, {"help", "--help"}} {
		same(args, []string{"--help"})
	}
	same([]string{"help", "--json", "exec"}, []string{"exec", "--help"})
	same([]string{"help", "exec", "--json"}, []string{"exec", "--help"})
	same([]string{"help", "-w", ws, "exec"}, []string{"exec", "--help"})
	same([]string{"help", "exec", "--workspace=" + ws, "--harness-state", ".x"}, []string{"exec", "--help"})
	if code, stdout, _ := cordonMain(t, "", "help", "oci", "pod"); code != exitOK || !strings.HasPrefix(stdout, "usage: cordon oci pod") {
		t.Errorf("cordon help oci pod: exit %d, %.60q; want the pod's usage", code, stdout)
	}
	for _, args := range [][]string{
		{"help", "nosuch"}, {"help", "exec", "true"}, {"help", "fs", "bogus"}, {"help", "oci", "pod", "x"}, {"help", "--frobnicate"},
	} {
		code, stdout, _ := cordonMain(t, "", append([]string{"--json"}, args...)...)
		var got errorJSON
		if code != exitUsage || json.Unmarshal([]byte(stdout), &got) != nil || got.Error != "Usage" {
			t.Errorf("cordon --json %s: exit %d, %q; want exit 2 and one Usage object", strings.Join(args, " "), code, stdout)
		}
	}
}

func TestVersion(t *testing.T) {
	code, stdout, _ := cordonMain(t, "", "--version")
	if code != 0 || !strings.HasPrefix(stdout, "cordon ") || !strings.Contains(stdout, "commit ") || !strings.Contains(stdout, "go1.") {
		t.Errorf("--version: %d %q", code, stdout)
	}
	code, stdout, _ = cordonMain(t, "", "--json", "--version")
	var v map[string]string
	if code != 0 || json.Unmarshal([]byte(stdout), &v) != nil || v["version"] == "" || v["commit"] == "" || !strings.HasPrefix(v["go"], "go1.") || v["build"] != "full" {
		t.Errorf("--json --version: %d %q", code, stdout)
	}
}

// TestJSONErrorsAreOneObject: with --json, every error — a usage error
// included — is one JSON object with error and message, and op and path
// where there is one; the exit code is the kind's.
func TestJSONErrorsAreOneObject(t *testing.T) {
	ws := tempWorkspace(t)
	for _, tc := range []struct {
		args    []string
		kind    string
		code    int
		op, pth string
	}{
		{[]string{"bogus"}, "Usage", exitUsage, "", ""},
		{[]string{"exec", "--bogus", "--", "true"}, "Usage", exitUsage, "", ""},
		{[]string{"exec", "--env", "LD_PRELOAD", "--", "true"}, "EnvRefused", exitRefused, "pass", "LD_PRELOAD"},
		{[]string{"fs", "edit", "a.txt", "--old", "x"}, "Usage", exitUsage, "", ""},
		{[]string{"fs", "read", "../x"}, "OutsideWorkspace", exitRefused, "read", "../x"},
		{[]string{"fs", "write", ".efferent/x"}, "HarnessState", exitRefused, "write", ".efferent/x"},
		{[]string{"fs", "write", ".git/config"}, "WriteLater", exitRefused, "write", ".git/config"},
		{[]string{"fs", "write", ".vscode/tasks.json"}, "WriteLater", exitRefused, "write", ".vscode/tasks.json"},
		{[]string{"fs", "read", "missing"}, "NotFound", exitError, "read", "missing"},
		{[]string{"run", "nosuch"}, "UnknownTool", exitError, "load", "nosuch"},
		{[]string{"tools", "remove", "nosuch"}, "UnknownTool", exitError, "remove", "nosuch"},
		{[]string{"exec", "--substrate", "oci", "--net", "host", "--", "true"}, "CapabilityRefused", exitRefused, "exec", "true"},
	} {
		code, stdout, stderr := cordonMain(t, "data", append([]string{"-w", ws, "--json"}, tc.args...)...)
		var e errorJSON
		if err := json.Unmarshal([]byte(stdout), &e); err != nil || strings.Count(stdout, "\n") != 1 {
			t.Errorf("cordon %s: stdout %q is not one JSON object (stderr %q)", strings.Join(tc.args, " "), stdout, stderr)
			continue
		}
		if code != tc.code || e.Error != tc.kind || e.Message == "" || e.Op != tc.op || e.Path != tc.pth {
			t.Errorf("cordon %s: exit %d, %+v; want exit %d, kind %s, op %q, path %q", strings.Join(tc.args, " "), code, e, tc.code, tc.kind, tc.op, tc.pth)
		}
	}
}

// TestEditNeedsOldAndNew: fs edit without --new is a usage error, not a
// deletion; --new ” deletes, explicitly.
func TestEditNeedsOldAndNew(t *testing.T) {
	ws := tempWorkspace(t)
	os.WriteFile(filepath.Join(ws, "a.txt"), []byte("keep this, drop that\n"), 0o644)
	if code, _, _ := cordonMain(t, "", "-w", ws, "fs", "edit", "a.txt", "--old", ", drop that"); code != exitUsage {
		t.Errorf("edit without --new exits %d", code)
	}
	if data, _ := os.ReadFile(filepath.Join(ws, "a.txt")); string(data) != "keep this, drop that\n" {
		t.Fatalf("edit without --new changed the file: %q", data)
	}
	if code, _, stderr := cordonMain(t, "", "-w", ws, "fs", "edit", "a.txt", "--old", ", drop that", "--new", ""); code != 0 {
		t.Fatalf("edit --new '': %d %s", code, stderr)
	}
	if data, _ := os.ReadFile(filepath.Join(ws, "a.txt")); string(data) != "keep this\n" {
		t.Errorf("edit --new '' left %q", data)
	}
}

// TestEveryKindIsDocumented: README.md lists every refusal kind by name,
// with its exit code.
func TestEveryKindIsDocumented(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Skipf("README.md is not here (the test binary runs away from the source): %v", err)
	}
	for _, k := range refusal.Kinds() {
		if !strings.Contains(string(readme), "`"+k.Name()+"`") {
			t.Errorf("README.md does not list the kind %s (%s, exit %d)", k.Name(), k.Class(), k.ExitCode())
		}
	}
}

// TestFIFOsDoNotBlock: a declaration or a configuration file that is a
// FIFO is refused at once, never waited on.
func TestFIFOsDoNotBlock(t *testing.T) {
	testenv.IsolateHarness(t)
	ws := tempWorkspace(t)
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	within := func(what string, args ...string) {
		done := make(chan int, 1)
		go func() {
			code, _, _ := cordonMain(t, "", args...)
			done <- code
		}()
		select {
		case code := <-done:
			if code == 0 {
				t.Errorf("%s: a FIFO was read as a file", what)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: cordon blocked on a FIFO", what)
		}
	}
	within("admit", "-w", ws, "admit", fifo)
	t.Setenv(harness.EnvConfig, fifo)
	within("CORDON_CONFIG", "-w", ws, "fs", "list", ".")
}

// TestConfigurationInsideTheWorkspaceIsRefused: a workspace that holds
// cordon's configuration file (CORDON_CONFIG), or where it leads (a link
// to it, from a repository of dotfiles), is refused by every command,
// since a tool could rewrite what protects it; the file is left as it is.
// Tried with the link before the check: `cordon exec` let its command
// rewrite the file.
func TestConfigurationInsideTheWorkspaceIsRefused(t *testing.T) {
	for _, linked := range []bool{false, true} {
		t.Run(map[bool]string{false: "inside", true: "a link into it"}[linked], func(t *testing.T) {
			testenv.IsolateHarness(t)
			ws := tempWorkspace(t)
			cfg := filepath.Join(ws, "cordon.json")
			os.WriteFile(cfg, []byte(`{"write_later": []}`), 0o644)
			named := cfg
			if linked {
				named = filepath.Join(t.TempDir(), "cordon.json")
				if err := os.Symlink(cfg, named); err != nil {
					t.Fatal(err)
				}
			}
			t.Setenv(harness.EnvConfig, named)
			os.WriteFile(filepath.Join(ws, "t.json"), []byte(`{"name":"t","kind":"native","command":["true"],"capabilities":[]}`), 0o644)
			for _, args := range [][]string{
				{"fs", "write", "cordon.json"}, {"fs", "read", "t.json"}, {"exec", "--", "sh", "-c", "echo '{}' > cordon.json"},
				{"exec", "--substrate", "landlock", "--", "sh", "-c", "echo '{}' > cordon.json"},
				{"admit", filepath.Join(ws, "t.json")}, {"tools"},
			} {
				code, stdout, _ := cordonMain(t, `{"write_later": [], "harness_state": [".x"]}`, append([]string{"-w", ws, "--json"}, args...)...)
				var r struct{ Error string }
				json.Unmarshal([]byte(stdout), &r)
				if code != 3 || r.Error != "WorkspaceRefused" {
					t.Errorf("cordon %q with the configuration inside the workspace: exit %d %s; want 3, WorkspaceRefused", args, code, stdout)
				}
			}
			if data, _ := os.ReadFile(cfg); string(data) != `{"write_later": []}` {
				t.Errorf("the configuration was rewritten: %q", data)
			}
		})
	}
}

// TestConfigurationNamedThroughTheWorkspaceIsNoRefusal: a configuration
// file whose name goes through the workspace and back out of it (ws/..)
// lies outside it, as the kernel reaches it: no refusal (the check
// compared the name as a string).
func TestConfigurationNamedThroughTheWorkspaceIsNoRefusal(t *testing.T) {
	testenv.IsolateHarness(t)
	ws := tempWorkspace(t)
	cfg := filepath.Join(filepath.Dir(ws), "cordon.json")
	os.WriteFile(cfg, []byte(`{}`), 0o644)
	t.Setenv(harness.EnvConfig, ws+"/../cordon.json")
	if code, stdout, stderr := cordonMain(t, "", "-w", ws, "--json", "tools"); code != 0 {
		t.Errorf("cordon tools with the configuration %s/../cordon.json: exit %d %s %s; want 0", ws, code, stdout, stderr)
	}
}
