package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

type result struct {
	code           int
	stdout, stderr string
}

// cordon runs the CLI in-process with args and stdin.
func cordon(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	code := doMain(args, strings.NewReader(stdin), &out, &errb)
	if strings.Contains(errb.String(), "panic") {
		t.Fatalf("cordon %v panicked: %s", args, errb.String())
	}
	return result{code, out.String(), errb.String()}
}

func fsWorkspace(t *testing.T) (top, ws string) {
	top, _ = filepath.EvalSymlinks(t.TempDir())
	ws = filepath.Join(top, "ws")
	for _, d := range []string{"ws/.efferent", "ws/.foundry", "ws/dir", "outside"} {
		os.MkdirAll(filepath.Join(top, d), 0o755)
	}
	os.WriteFile(filepath.Join(ws, "a.txt"), []byte("hello\n"), 0o644)
	os.WriteFile(filepath.Join(ws, ".efferent", "key"), []byte("KEY"), 0o600)
	os.WriteFile(filepath.Join(top, "outside", "secret"), []byte("SECRET"), 0o644)
	os.Symlink("../outside/secret", filepath.Join(ws, "link"))
	return top, ws
}

func TestFSCommands(t *testing.T) {
	_, ws := fsWorkspace(t)
	if r := cordon(t, "", "fs", "read", "-w", ws, "a.txt"); r.code != 0 || r.stdout != "hello\n" {
		t.Fatalf("fs read: %+v", r)
	}
	if r := cordon(t, "", "-w", ws, "fs", "read", "--json", "a.txt"); r.code != 0 || !strings.Contains(r.stdout, `"text":"hello\n"`) {
		t.Fatalf("fs read --json (global -w): %+v", r)
	}
	if r := cordon(t, "new contents", "fs", "write", "-w", ws, "sub/b.txt"); r.code != 0 {
		t.Fatalf("fs write: %+v", r)
	}
	if got, _ := os.ReadFile(filepath.Join(ws, "sub", "b.txt")); string(got) != "new contents" {
		t.Fatalf("written: %q", got)
	}
	if r := cordon(t, "", "fs", "edit", "-w", ws, "sub/b.txt", "--old", "new", "--new", "old"); r.code != 0 {
		t.Fatalf("fs edit: %+v", r)
	}
	if got, _ := os.ReadFile(filepath.Join(ws, "sub", "b.txt")); string(got) != "old contents" {
		t.Fatalf("edited: %q", got)
	}
	if r := cordon(t, "", "fs", "list", "-w", ws, "."); r.code != 0 || r.stdout != "a.txt\ndir/\nlink\nsub/\n" {
		t.Fatalf("fs list: %+v", r)
	}
	r := cordon(t, "", "fs", "stat", "--json", "-w", ws, "a.txt")
	var st map[string]any
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &st) != nil || st["size"] != float64(6) || st["type"] != "file" {
		t.Fatalf("fs stat --json: %+v", r)
	}
}

func TestFSRefusals(t *testing.T) {
	top, ws := fsWorkspace(t)
	cases := []struct {
		args  []string
		stdin string
		code  int
		kind  string
	}{
		{[]string{"read", "../outside/secret"}, "", 3, "OutsideWorkspace"},
		{[]string{"read", filepath.Join(top, "outside", "secret")}, "", 3, "OutsideWorkspace"},
		{[]string{"read", "link"}, "", 3, "OutsideWorkspace"},
		{[]string{"write", "link"}, "PWNED", 3, "OutsideWorkspace"},
		{[]string{"write", "../outside/secret"}, "PWNED", 3, "OutsideWorkspace"},
		{[]string{"read", ".efferent/key"}, "", 3, "HarnessState"},
		{[]string{"write", ".efferent/key"}, "PWNED", 3, "HarnessState"},
		{[]string{"write", "dir/../.foundry/x"}, "PWNED", 3, "HarnessState"},
		{[]string{"list", ".efferent"}, "", 3, "HarnessState"},
		{[]string{"stat", ".efferent/key"}, "", 3, "HarnessState"},
		{[]string{"edit", ".efferent/key", "--old", "KEY", "--new", "PWNED"}, "", 3, "HarnessState"},
		{[]string{"read", "missing.txt"}, "", 1, "NotFound"},
		{[]string{"read", "dir"}, "", 1, "IsDirectory"},
		{[]string{"edit", "a.txt", "--old", "zzz", "--new", "y"}, "", 1, "NoMatch"},
	}
	for _, c := range cases {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			args := append([]string{"fs", c.args[0], "--json", "-w", ws}, c.args[1:]...)
			r := cordon(t, c.stdin, args...)
			if r.code != c.code {
				t.Fatalf("exit %d, want %d: %+v", r.code, c.code, r)
			}
			var got map[string]string
			if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
				t.Fatalf("stdout is not one JSON object: %q", r.stdout)
			}
			for _, k := range []string{"error", "op", "path", "message"} {
				if got[k] == "" {
					t.Fatalf("refusal JSON lacks %q: %s", k, r.stdout)
				}
			}
			if got["error"] != c.kind || got["op"] != c.args[0] || got["path"] != c.args[1] {
				t.Fatalf("refusal %s, want error %s op %s path %s", r.stdout, c.kind, c.args[0], c.args[1])
			}
		})
	}
	if got, _ := os.ReadFile(filepath.Join(top, "outside", "secret")); string(got) != "SECRET" {
		t.Fatalf("the outside file changed: %q", got)
	}
	if got, _ := os.ReadFile(filepath.Join(ws, ".efferent", "key")); string(got) != "KEY" {
		t.Fatalf("harness state changed: %q", got)
	}
	if r := cordon(t, "", "fs", "read", "-w", ws, "../outside/secret"); r.code != 3 || !strings.Contains(r.stderr, "refusing to read") || r.stdout != "" {
		t.Fatalf("refusal without --json: %+v", r)
	}
}

func TestFSUsage(t *testing.T) {
	_, ws := fsWorkspace(t)
	for _, args := range [][]string{
		{"fs"},
		{"fs", "frobnicate", "x"},
		{"fs", "read"},
		{"fs", "read", "a", "b"},
		{"fs", "read", "--bogus", "a"},
		{"fs", "edit", "a.txt"},
		{"nosuchcommand"},
		{},
	} {
		if r := cordon(t, "", append(args, "-w", ws)...); r.code != 2 {
			t.Errorf("cordon %v: exit %d, want 2 (%s)", args, r.code, r.stderr)
		}
	}
	if r := cordon(t, "", "--help"); r.code != 0 || !strings.Contains(r.stdout, "usage") {
		t.Errorf("--help: %+v", r)
	}
}

// TestFSNonUTF8Names: a name that is not UTF-8 comes with its bytes in
// --json output, and those bytes, given back as a path, name the file.
func TestFSNonUTF8Names(t *testing.T) {
	_, ws := fsWorkspace(t)
	name := "caf\xe9.txt" // Latin-1, not UTF-8
	os.WriteFile(filepath.Join(ws, "dir", name), []byte("latin\n"), 0o644)
	os.Symlink("../a.txt", filepath.Join(ws, "dir", "alias"))
	r := cordon(t, "", "fs", "list", "--json", "-w", ws, "dir")
	var out struct {
		Entries []struct {
			Name      string `json:"name"`
			NameBytes []byte `json:"name_bytes"`
		} `json:"entries"`
	}
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &out) != nil {
		t.Fatalf("fs list --json: %+v", r)
	}
	var found []byte
	for _, e := range out.Entries {
		if e.NameBytes != nil {
			found = e.NameBytes
		}
	}
	if string(found) != name {
		t.Fatalf("no entry holds the name's bytes: %s", r.stdout)
	}
	if r := cordon(t, "", "fs", "read", "-w", ws, "dir/"+string(found)); r.code != 0 || r.stdout != "latin\n" {
		t.Fatalf("fs read of the listed bytes: %+v", r)
	}
	r = cordon(t, "", "fs", "stat", "--json", "-w", ws, "dir/"+name)
	var st map[string]any
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &st) != nil || st["name_bytes"] == nil || st["path_bytes"] == nil {
		t.Fatalf("fs stat --json of a non-UTF-8 name: %+v", r)
	}
	// stat names the path it was asked about, not the link's target.
	r = cordon(t, "", "fs", "stat", "--json", "-w", ws, "dir/alias")
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &st) != nil || st["name"] != "alias" {
		t.Fatalf("fs stat --json of a symlink: %+v", r)
	}
}
