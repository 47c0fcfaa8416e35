package wasm_test

import (
	"context"
	"fmt"

	"github.com/cordon-run/cordon/capabilities"
	"github.com/cordon-run/cordon/internal/wasmtest"
	"github.com/cordon-run/cordon/substrate/wasm"
)

// A module runs in a fresh instance under the policy of its grant; what
// it prints is kept in bounded captures.
func ExampleEngine_Run() {
	// A WASI command whose _start writes one line to stdout.
	var m wasmtest.Module
	i32 := wasmtest.I32
	fdWrite := m.Import("wasi_snapshot_preview1", "fd_write", []byte{i32, i32, i32, i32}, []byte{i32})
	m.Memory(1, 0)
	m.Data(0, append(wasmtest.Le32(16), wasmtest.Le32(16)...)) // one iovec: 16 bytes at 16
	m.Data(16, []byte("hello from wasm\n"))
	u := wasmtest.U32
	m.ExportFunc("_start", m.Func(nil, nil, nil, u(1), u(0), u(1), u(8), wasmtest.Call(fdWrite), wasmtest.Drop))

	module, err := wasm.Load(m.Bytes())
	if err != nil {
		panic(err)
	}
	policy, err := wasm.PolicyOf(capabilities.MustParseSet("time:5s", "memory:1MiB", "output:4KiB"))
	if err != nil {
		panic(err)
	}
	engine, err := wasm.New(wasm.Config{})
	if err != nil {
		panic(err)
	}
	defer engine.Close()
	res, err := engine.Run(context.Background(), wasm.Call{Module: module, Policy: policy, Args: []string{"hello"}})
	if err != nil {
		panic(err)
	}
	fmt.Print(res.Stdout.String())
	fmt.Println("exit", res.ExitCode, "—", policy)
	// Output:
	// hello from wasm
	// exit 0 — no workspace, memory 16 pages, time 5s, output 4KiB
}
