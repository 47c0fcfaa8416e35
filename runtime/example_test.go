package runtime_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/cordon-run/cordon/admission"
	"github.com/cordon-run/cordon/harness"
	"github.com/cordon-run/cordon/internal/wasmtest"
	"github.com/cordon-run/cordon/runtime"
)

// Admit a native tool and a WebAssembly tool, then run each under exactly
// its grant through the one call every front end uses.
func Example() {
	ws, _ := os.MkdirTemp("", "example-ws-")
	defer os.RemoveAll(ws)
	state, _ := os.MkdirTemp("", "example-state-") // cordon's key store and code cache, outside every workspace
	defer os.RemoveAll(state)
	h := harness.Default().WithStateDir(filepath.Join(state, "state")).WithCacheDir(filepath.Join(state, "cache"))

	os.WriteFile(filepath.Join(ws, "hello.wasm"), helloModule(), 0o644) // any WASI command
	ctx := context.Background()
	a, _ := admission.New(admission.Config{Workspace: ws, Harness: h})
	reg, _ := admission.OpenRegistry(admission.RegistryConfig{Workspace: ws, Harness: h})
	rt := runtime.New(runtime.Config{})
	defer rt.Close()
	for _, decl := range []string{
		`{"name": "greet", "kind": "native", "command": ["sh", "-c", "echo hello from a sandbox"], "capabilities": ["time:5s"]}`,
		`{"name": "hello", "kind": "wasm", "module": "hello.wasm", "capabilities": ["time:5s"]}`,
	} {
		adm, err := a.Admit(ctx, admission.Source{Name: "decl", Data: []byte(decl), Dir: ws})
		if err != nil {
			fmt.Println(err) // a *admission.Refusal with every reason
			return
		}
		reg.Register(adm)
		p, err := a.Prepare(ctx, reg, adm.Grant.Tool, nil) // authenticated, rechecked, input checked
		if err != nil {
			fmt.Println(err)
			return
		}
		res, err := rt.Run(ctx, p)
		if err != nil {
			fmt.Println(err) // nothing ran: the sandbox is unavailable, say
			return
		}
		fmt.Printf("%s on %s (sandboxed %v): %s", adm.Grant.Tool, res.Substrate, res.Sandboxed, res.Stdout)
	}
	// Output:
	// greet on bwrap (sandboxed true): hello from a sandbox
	// hello on wasm (sandboxed true): hello from wasm
}

// helloModule is a WASI command that prints "hello from wasm".
func helloModule() []byte {
	const i32 = wasmtest.I32
	var m wasmtest.Module
	write := m.Import("wasi_snapshot_preview1", "fd_write", []byte{i32, i32, i32, i32}, []byte{i32})
	m.Memory(1, 0)
	msg := "hello from wasm\n"
	m.Data(16, []byte(msg))
	m.Data(0, append(wasmtest.Le32(16), wasmtest.Le32(uint32(len(msg)))...)) // one iovec
	m.ExportFunc("_start", m.Func(nil, nil, nil,
		wasmtest.I32Const(1), wasmtest.I32Const(0), wasmtest.I32Const(1), wasmtest.I32Const(8), wasmtest.Call(write), []byte{0x1a})) // drop the errno
	return m.Bytes()
}
