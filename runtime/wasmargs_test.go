package runtime_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/cordon-run/cordon/admission"
	"github.com/cordon-run/cordon/harness"
	"github.com/cordon-run/cordon/internal/wasmtest"
	"github.com/cordon-run/cordon/runtime"
)

// TestWasmArgsAndInput: a declaration's fixed args follow the tool's name
// in the module's argv, and the input reaches stdin exactly as given.
func TestWasmArgsAndInput(t *testing.T) {
	ws, state := t.TempDir(), t.TempDir()
	h := harness.Default().WithStateDir(filepath.Join(state, "state")).WithCacheDir(filepath.Join(state, "cache"))
	if err := os.WriteFile(filepath.Join(ws, "guest.wasm"), wasmtest.Go(t, "substrate/wasm/testdata/guest"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	a, reg := admitterFor(t, ws, h)
	adm, err := a.Admit(ctx, admission.Source{Name: "decl", Dir: ws, Data: []byte(
		`{"name": "echo", "kind": "wasm", "module": "guest.wasm", "args": ["echo", "--flag", "x y"], "capabilities": [], "input_schema": {"type": "object"}}`)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := reg.Register(adm); err != nil {
		t.Fatal(err)
	}
	const input = ` {"a": [1, 2]} `
	p, err := a.Prepare(ctx, reg, "echo", []byte(input))
	if err != nil {
		t.Fatal(err)
	}
	rt := runtime.New(runtime.Config{})
	defer rt.Close()
	res, err := rt.Run(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	want := `argv: ["echo" "echo" "--flag" "x y"]` + "\n" + `stdin: " {\"a\": [1, 2]} "` + "\n"
	if string(res.Stdout) != want || res.ExitCode != 0 {
		t.Errorf("stdout %q (exit %d), want %q", res.Stdout, res.ExitCode, want)
	}
	// Args belong to wasm tools: a native declaration with them is refused.
	_, err = a.Admit(ctx, admission.Source{Name: "decl", Dir: ws, Data: []byte(
		`{"name": "n", "kind": "native", "command": ["true"], "args": ["x"], "capabilities": []}`)})
	if err == nil {
		t.Fatal("a native declaration with args was admitted")
	}
}
