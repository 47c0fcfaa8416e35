// Command plainrun runs a WASI module with plain wazero and its on-disk
// compilation cache, with the directory mounted through wazero's own
// DirFS: the baseline that substrate/wasm's process benchmark compares a
// second `cordon run` with. It is not a way to run tools (DirFS is not a
// boundary; see substrate/wasm).
//
// usage: plainrun CACHEDIR DIR MODULE < input
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
	"github.com/tetratelabs/wazero/sys"
)

func main() { os.Exit(run()) }

func run() int {
	if len(os.Args) != 4 {
		fmt.Fprintln(os.Stderr, "usage: plainrun CACHEDIR DIR MODULE < input")
		return 2
	}
	ctx := context.Background()
	cache, err := wazero.NewCompilationCacheWithDir(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	r := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfig().WithCompilationCache(cache))
	defer r.Close(ctx)
	wasi_snapshot_preview1.MustInstantiate(ctx, r)
	bin, err := os.ReadFile(os.Args[3])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	cm, err := r.CompileModule(ctx, bin)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	cfg := wazero.NewModuleConfig().WithArgs("tool").WithStdin(os.Stdin).WithStdout(os.Stdout).WithStderr(os.Stderr).
		WithSysWalltime().WithSysNanotime().WithFSConfig(wazero.NewFSConfig().WithDirMount(os.Args[2], "/"))
	_, err = r.InstantiateModule(ctx, cm, cfg)
	if exit, ok := err.(*sys.ExitError); ok {
		return int(exit.ExitCode())
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}
