package main

import (
	"encoding/json"
	"github.com/cordon-run/cordon/harness"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cordon-run/cordon/internal/wasmtest"
)

// exampleTool copies an example's declaration and its module (built for
// wasip1) into dir.
func exampleTool(t *testing.T, name, dir string) string {
	t.Helper()
	os.MkdirAll(dir, 0o755)
	decl := wasmtest.Declaration(t, "examples/"+name)
	os.WriteFile(filepath.Join(dir, "tool.json"), decl, 0o644)
	os.WriteFile(filepath.Join(dir, "tool.wasm"), wasmtest.Go(t, "examples/"+name), 0o644)
	return filepath.Join(dir, "tool.json")
}

// wasmWorkspace is a workspace with TODO lines inside, in harness state
// and behind a symlink out, and a badly formatted Go file inside and in
// harness state.
func wasmWorkspace(t *testing.T) (top, ws string) {
	top, ws = fsWorkspace(t)
	os.WriteFile(filepath.Join(ws, "a.txt"), []byte("TODO one\nTODO two\ndone\n"), 0o644)
	os.WriteFile(filepath.Join(ws, ".foundry", "notes.txt"), []byte("TODO harness\n"), 0o644)
	os.WriteFile(filepath.Join(top, "outside", "todo.txt"), []byte("TODO outside\n"), 0o644)
	os.Symlink("../outside", filepath.Join(ws, "out"))
	os.WriteFile(filepath.Join(ws, "dir", "f.go"), []byte("package dir\nfunc  F( ) {}\n"), 0o644)
	os.WriteFile(filepath.Join(ws, ".foundry", "h.go"), []byte("package h\nfunc  H( ) {}\n"), 0o644)
	return top, ws
}

// The examples go from declaration to a running, confined tool with
// nothing but Go: no bubblewrap involved.
func TestWasmExamplesEndToEnd(t *testing.T) {
	top, ws := wasmWorkspace(t)
	count := exampleTool(t, "count-lines", filepath.Join(top, "tools", "count-lines"))
	r := cordon(t, "", "admit", "-w", ws, count)
	if r.code != 0 || !strings.Contains(r.stdout, `admitted wasm tool "count-lines"`) || !strings.Contains(r.stdout, "wasm: memory limited to 1024 pages") {
		t.Fatalf("admit count-lines: %+v", r)
	}
	r = cordon(t, "", "run", "-w", ws, "--json", "count-lines", "--input", `{"pattern":"TODO"}`)
	var res struct {
		ExitCode  int    `json:"exit_code"`
		Stdout    string `json:"stdout"`
		Substrate string `json:"substrate"`
		Sandboxed bool   `json:"sandboxed"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil || r.code != 0 || res.Substrate != "wasm" || !res.Sandboxed {
		t.Fatalf("run count-lines: %v %+v", err, r)
	}
	var counted struct {
		Files []struct {
			Path  string `json:"path"`
			Lines int    `json:"lines"`
		} `json:"files"`
		Total int `json:"total"`
	}
	if err := json.Unmarshal([]byte(res.Stdout), &counted); err != nil {
		t.Fatalf("tool output %q: %v", res.Stdout, err)
	}
	// Only a.txt: not harness state, not the file behind the symlink out.
	if counted.Total != 2 || len(counted.Files) != 1 || counted.Files[0].Path != "a.txt" {
		t.Fatalf("counted %+v, want 2 lines in a.txt only", counted)
	}

	gofmt := exampleTool(t, "gofmt", filepath.Join(top, "tools", "gofmt"))
	if r := cordon(t, "", "admit", "-w", ws, gofmt); r.code != 0 {
		t.Fatalf("admit gofmt: %+v", r)
	}
	r = cordon(t, "", "run", "-w", ws, "gofmt")
	if r.code != 0 || !strings.Contains(r.stderr, "formatted dir/f.go") {
		t.Fatalf("run gofmt: %+v", r)
	}
	if data, _ := os.ReadFile(filepath.Join(ws, "dir", "f.go")); string(data) != "package dir\n\nfunc F() {}\n" {
		t.Errorf("dir/f.go: %q", data)
	}
	if data, _ := os.ReadFile(filepath.Join(ws, ".foundry", "h.go")); string(data) != "package h\nfunc  H( ) {}\n" {
		t.Errorf("harness state changed: %q", data)
	}
	if data, _ := os.ReadFile(filepath.Join(top, "outside", "secret")); string(data) != "SECRET" {
		t.Errorf("outside changed: %q", data)
	}
	// The compiled code is cached in cordon's per-user cache, outside the
	// workspace: nothing there runs as code.
	if entries, err := os.ReadDir(filepath.Join(os.Getenv(harness.EnvCacheDir), "wasm")); err != nil || len(entries) == 0 {
		t.Errorf("no compilation cache: %v", err)
	}
	if _, err := os.Stat(filepath.Join(ws, ".efferent", "cache")); err == nil {
		t.Errorf("a compilation cache in the workspace's harness state")
	}
}

// A module that imports a host function its declaration does not ask for
// is refused at admission, with a reason naming the import.
func TestWasmAdmissionRefusesUngrantedImport(t *testing.T) {
	top, ws := wasmWorkspace(t)
	dir := filepath.Join(top, "tools", "sneaky")
	exampleTool(t, "gofmt", dir)
	// gofmt's module (which imports cordon/write) with count-lines's
	// capabilities (fs.read only).
	os.WriteFile(filepath.Join(dir, "tool.json"), wasmtest.Declaration(t, "examples/count-lines"), 0o644)
	r := cordon(t, "", "admit", "-w", ws, "--json", filepath.Join(dir, "tool.json"))
	if r.code != 3 || !strings.Contains(r.stdout, "wasm.import:cordon/write") {
		t.Fatalf("admit: %+v", r)
	}
	if r := cordon(t, "", "run", "-w", ws, "count-lines"); r.code == 0 {
		t.Fatalf("a refused tool ran: %+v", r)
	}
}
