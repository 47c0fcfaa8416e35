package wasm

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"

	"github.com/cordon-run/cordon/internal/wasmtest"
)

// The benchmarks print the figures of the README's "WebAssembly tools"
// section, each measured side by side with its baseline in one run:
//
//	go test -run '^$' -bench . -benchtime 200x ./substrate/wasm

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

func minimalModule() []byte {
	var m wasmtest.Module
	m.Memory(1, 0)
	m.ExportFunc("_start", m.Func(nil, nil, nil))
	return m.Bytes()
}

// BenchmarkWarmCall is one call with the compiled module cached in
// process: a fresh instance, _start, close.
func BenchmarkWarmCall(b *testing.B) {
	ws, root, _ := layout(b)
	os.WriteFile(filepath.Join(root, "a.go"), []byte("package a\n// TODO one\n"), 0o644)
	for _, c := range []struct {
		name  string
		bin   func() []byte
		p     Policy
		stdin string
	}{
		{"minimal", minimalModule, policy(b), ""},
		{"count-lines", func() []byte { return wasmtest.Go(b, "examples/count-lines") },
			policy(b, "fs.read:workspace"), `{"pattern":"TODO","glob":"*.go"}`},
	} {
		b.Run(c.name, func(b *testing.B) {
			e, err := New(Config{})
			if err != nil {
				b.Fatal(err)
			}
			defer e.Close()
			m := load(b, c.bin())
			call := func() {
				res, err := e.Run(context.Background(), Call{Module: m, Workspace: ws, Policy: c.p, Args: []string{"tool"}, Stdin: bytes.NewReader([]byte(c.stdin))})
				if err != nil || res.ExitCode != 0 {
					b.Fatalf("%v %+v %s", err, res, res.Stderr.String())
				}
			}
			call() // compile
			times := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				start := time.Now()
				call()
				times = append(times, time.Since(start))
			}
			b.ReportMetric(float64(median(times).Microseconds()), "µs/median")
		})
	}
}

// BenchmarkDeadline measures what the deadline mechanism costs: the same
// module on two raw wazero runtimes, with and without
// close-on-context-done, alternated call by call — on a compute-bound
// loop (the worst case: a check on every back-edge) and on the
// count-lines example (a real tool). cordon itself never runs without it.
func BenchmarkDeadline(b *testing.B) {
	var m wasmtest.Module
	m.Memory(1, 0)
	u := wasmtest.U32
	// for i := 50_000_000; i != 0; i-- { acc += i }
	m.ExportFunc("_start", m.Func(nil, nil, []byte{wasmtest.I32, wasmtest.I32},
		u(50_000_000), wasmtest.LocalSet(0),
		wasmtest.Loop,
		wasmtest.LocalGet(1), wasmtest.LocalGet(0), wasmtest.I32Add, wasmtest.LocalSet(1),
		wasmtest.LocalGet(0), u(1), wasmtest.I32Sub, wasmtest.LocalSet(0),
		wasmtest.LocalGet(0), wasmtest.I32Eqz, wasmtest.I32Eqz, wasmtest.BrIf(0),
		wasmtest.End))
	_, root, _ := layout(b)
	for i := 0; i < 20; i++ {
		os.WriteFile(filepath.Join(root, "f"+string(rune('a'+i))+".go"), bytes.Repeat([]byte("package x // TODO\n"), 2000), 0o644)
	}
	for _, c := range []struct {
		name  string
		bin   func() []byte
		stdin string
	}{
		{"loop", m.Bytes, ""},
		{"count-lines", func() []byte { return wasmtest.Go(b, "examples/count-lines") }, `{"pattern":"TODO","glob":"*.go"}`},
	} {
		b.Run(c.name, func(b *testing.B) {
			bin := c.bin()
			ctx := context.Background()
			compile := func(closeOnDone bool) (wazero.Runtime, wazero.CompiledModule) {
				r := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfig().WithCloseOnContextDone(closeOnDone))
				wasi_snapshot_preview1.MustInstantiate(ctx, r)
				cm, err := r.CompileModule(ctx, bin)
				if err != nil {
					b.Fatal(err)
				}
				return r, cm
			}
			rOn, cmOn := compile(true)
			defer rOn.Close(ctx)
			rOff, cmOff := compile(false)
			defer rOff.Close(ctx)
			run := func(r wazero.Runtime, cm wazero.CompiledModule) time.Duration {
				cctx, cancel := context.WithTimeout(ctx, time.Minute)
				defer cancel()
				cfg := wazero.NewModuleConfig().WithName("").WithStdin(bytes.NewReader([]byte(c.stdin))).
					WithFSConfig(wazero.NewFSConfig().WithReadOnlyDirMount(root, "/"))
				start := time.Now()
				mod, err := r.InstantiateModule(cctx, cm, cfg)
				if err != nil {
					b.Fatal(err)
				}
				d := time.Since(start)
				mod.Close(ctx)
				return d
			}
			var on, off []time.Duration
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				on = append(on, run(rOn, cmOn))
				off = append(off, run(rOff, cmOff))
			}
			b.ReportMetric(float64(median(on).Microseconds())/1000, "ms/with-deadline")
			b.ReportMetric(float64(median(off).Microseconds())/1000, "ms/without")
			b.ReportMetric(float64(median(on))/float64(median(off)), "x-cost")
		})
	}
}

// BenchmarkProcess runs a module as separate processes, for the
// count-lines example and for a minimal Go module: the first `cordon run`
// (compiles and fills cordon's per-user cache), the second (loads compiled
// code from it), and plain wazero loading the same module from its own
// on-disk cache (internal/plainrun), alternated in one loop.
func BenchmarkProcess(b *testing.B) {
	if testing.Short() {
		b.Skip("builds binaries")
	}
	dir := b.TempDir()
	root, err := moduleRootDir()
	if err != nil {
		b.Skip(err)
	}
	// cordon as README.md installs it: its front end, which hands run to
	// the full binary beside it.
	cordonBin, plainBin := filepath.Join(dir, "cordon"), filepath.Join(dir, "plainrun")
	for _, build := range [][]string{
		{"-tags", "cordon_front", "-o", cordonBin, "./cmd/cordon"},
		{"-o", filepath.Join(dir, "cordon-full"), "./cmd/cordon"},
		{"-o", plainBin, "./substrate/wasm/internal/plainrun"},
	} {
		cmd := exec.Command("go", append([]string{"build"}, build...)...)
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("%v: %s", err, out)
		}
	}
	ws := filepath.Join(dir, "ws")
	os.MkdirAll(filepath.Join(ws, "src"), 0o755)
	for i := 0; i < 20; i++ {
		os.WriteFile(filepath.Join(ws, "src", "f"+string(rune('a'+i))+".go"), bytes.Repeat([]byte("package x // TODO\n"), 200), 0o644)
	}
	countDecl, _ := os.ReadFile(filepath.Join(root, "examples", "count-lines", "tool.json"))
	tools := []struct {
		name, src, decl, input, want string
	}{
		{"count-lines", "examples/count-lines", string(countDecl), `{"pattern":"TODO","glob":"*.go"}`, `"total": 4000`},
		{"hello", "substrate/wasm/testdata/hello", `{"name": "hello", "kind": "wasm", "module": "tool.wasm", "capabilities": ["fs.read:workspace"]}`, `{}`, "hello"},
	}
	cordonCache := filepath.Join(dir, "cordon-cache")
	env := append(os.Environ(), "CORDON_STATE_DIR="+filepath.Join(dir, "cordon-state"), "CORDON_CACHE_DIR="+cordonCache)
	exe := func(want, input, name string, args ...string) time.Duration {
		cmd := exec.Command(name, args...)
		cmd.Env = env
		cmd.Stdin = bytes.NewReader([]byte(input))
		start := time.Now()
		out, err := cmd.CombinedOutput()
		d := time.Since(start)
		if err != nil || !bytes.Contains(out, []byte(want)) {
			b.Fatalf("%s %v: %v: %s", name, args, err, out)
		}
		return d
	}
	type times struct{ first, second, plain []time.Duration }
	results := make([]times, len(tools))
	modules := make([]string, len(tools))
	for i, tool := range tools {
		tdir := filepath.Join(dir, tool.name)
		os.MkdirAll(tdir, 0o755)
		modules[i] = filepath.Join(tdir, "tool.wasm")
		os.WriteFile(modules[i], wasmtest.Go(b, tool.src), 0o644)
		os.WriteFile(filepath.Join(tdir, "tool.json"), []byte(tool.decl), 0o644)
		admit := exec.Command(cordonBin, "-w", ws, "admit", filepath.Join(tdir, "tool.json"))
		admit.Env = env
		if out, err := admit.CombinedOutput(); err != nil {
			b.Fatalf("admit: %v: %s", err, out)
		}
	}
	plainCache := filepath.Join(dir, "plain-cache")
	b.ResetTimer()
	for n := 0; n < b.N; n++ {
		for i, tool := range tools {
			run := []string{"-w", ws, "run", tool.name, "--input", tool.input}
			os.RemoveAll(cordonCache)
			results[i].first = append(results[i].first, exe(tool.want, tool.input, cordonBin, run...))
			results[i].second = append(results[i].second, exe(tool.want, tool.input, cordonBin, run...))
			if n == 0 {
				exe(tool.want, tool.input, plainBin, plainCache, ws, modules[i]) // fills plain wazero's cache
			}
			results[i].plain = append(results[i].plain, exe(tool.want, tool.input, plainBin, plainCache, ws, modules[i]))
		}
	}
	for i, tool := range tools {
		r := results[i]
		b.ReportMetric(float64(median(r.first).Microseconds())/1000, tool.name+"-ms/first-run")
		b.ReportMetric(float64(median(r.second).Microseconds())/1000, tool.name+"-ms/second-run")
		b.ReportMetric(float64(median(r.plain).Microseconds())/1000, tool.name+"-ms/plain-wazero")
		b.ReportMetric(float64(median(r.second))/float64(median(r.plain)), tool.name+"-x-second/plain")
	}
	b.ReportMetric(0, "ns/op")
}

func moduleRootDir() (string, error) {
	dir, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		return "", err
	}
	if _, err := os.Stat(filepath.Join(dir, "go.mod")); err != nil {
		return "", err
	}
	return dir, nil
}
