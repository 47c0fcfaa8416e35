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

// BenchmarkProcess runs the count-lines example as separate processes:
// the first `cordon run` (compiles and fills the on-disk cache), the
// second (loads compiled code from it), and plain wazero loading the same
// module from its own on-disk cache (internal/plainrun), alternated.
func BenchmarkProcess(b *testing.B) {
	if testing.Short() {
		b.Skip("builds binaries")
	}
	dir := b.TempDir()
	root, err := moduleRootDir()
	if err != nil {
		b.Skip(err)
	}
	cordonBin, plainBin := filepath.Join(dir, "cordon"), filepath.Join(dir, "plainrun")
	for out, pkg := range map[string]string{cordonBin: "./cmd/cordon", plainBin: "./substrate/wasm/internal/plainrun"} {
		cmd := exec.Command("go", "build", "-o", out, pkg)
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("%v: %s", err, out)
		}
	}
	ws := filepath.Join(dir, "ws")
	tool := filepath.Join(dir, "tool")
	os.MkdirAll(filepath.Join(ws, "src"), 0o755)
	os.MkdirAll(tool, 0o755)
	for i := 0; i < 20; i++ {
		os.WriteFile(filepath.Join(ws, "src", "f"+string(rune('a'+i))+".go"), bytes.Repeat([]byte("package x // TODO\n"), 200), 0o644)
	}
	module := filepath.Join(tool, "tool.wasm")
	os.WriteFile(module, wasmtest.Go(b, "examples/count-lines"), 0o644)
	decl, _ := os.ReadFile(filepath.Join(root, "examples", "count-lines", "tool.json"))
	os.WriteFile(filepath.Join(tool, "tool.json"), decl, 0o644)
	input := `{"pattern":"TODO","glob":"*.go"}`
	exe := func(name string, args ...string) time.Duration {
		cmd := exec.Command(name, args...)
		cmd.Stdin = bytes.NewReader([]byte(input))
		start := time.Now()
		out, err := cmd.CombinedOutput()
		d := time.Since(start)
		if err != nil || !bytes.Contains(out, []byte(`"total": 4000`)) {
			b.Fatalf("%s %v: %v: %s", name, args, err, out)
		}
		return d
	}
	if out, err := exec.Command(cordonBin, "-w", ws, "admit", filepath.Join(tool, "tool.json")).CombinedOutput(); err != nil {
		b.Fatalf("admit: %v: %s", err, out)
	}
	cordonCache := filepath.Join(ws, ".efferent", "cache")
	plainCache := filepath.Join(dir, "plain-cache")
	run := []string{"-w", ws, "run", "count-lines", "--input", input}
	var first, second, plain []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		os.RemoveAll(cordonCache)
		first = append(first, exe(cordonBin, run...))
		second = append(second, exe(cordonBin, run...))
		if i == 0 {
			exe(plainBin, plainCache, ws, module) // fills plain wazero's cache
		}
		plain = append(plain, exe(plainBin, plainCache, ws, module))
	}
	b.ReportMetric(float64(median(first).Microseconds())/1000, "ms/first-run")
	b.ReportMetric(float64(median(second).Microseconds())/1000, "ms/second-run")
	b.ReportMetric(float64(median(plain).Microseconds())/1000, "ms/plain-wazero")
	b.ReportMetric(float64(median(second))/float64(median(plain)), "x-second/plain")
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
