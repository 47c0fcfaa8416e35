package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/cordon-run/cordon/internal/wasmtest"
	"github.com/cordon-run/cordon/substrate/bwrap"
)

func p99(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[(len(s)*99)/100]
}

// BenchmarkMCP drives a `cordon mcp` process through the SDK's client:
// a bash call of `true` (the server's pool warm) side by side with a fresh
// raw bwrap of the same options; 16 concurrent bash calls; read_file; a registered wasm tool's
// call. It reports medians (and p99 where the issue asks for them).
func BenchmarkMCP(b *testing.B) {
	needBwrap(b)
	cordon := buildCordon(b)
	h := benchHarness(b)
	b.Setenv("CORDON_ROOTS_DIR", h.RootsDir())
	ws := benchWorkspace(b)
	os.WriteFile(filepath.Join(ws, "a.txt"), []byte("TODO\n"), 0o644)
	bin, _ := bwrap.Find(os.Getenv("PATH"))
	rawArgs, rawEnv, sb := rawBwrap(b, h, ws)
	defer sb.Close()

	client := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil)
	cmd := exec.Command(cordon, "-w", ws, "mcp")
	cmd.Env = os.Environ()
	s, err := client.Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	callT := func(name string, args any) time.Duration {
		start := time.Now()
		res, err := s.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
		if err != nil || res.IsError {
			data, _ := json.Marshal(res)
			b.Fatalf("%s: %v %s", name, err, data)
		}
		return time.Since(start)
	}
	decl := json.RawMessage(wasmtest.Declaration(b, "examples/count-lines"))
	module := wasmtest.Go(b, "examples/count-lines")
	callT("register_tool", map[string]any{"declaration": decl, "files": map[string]string{"tool.wasm": base64.StdEncoding.EncodeToString(module)}})
	callT("count-lines", map[string]any{"pattern": "TODO"}) // compiles and caches the module

	var bash, raw, read, tool, conc []time.Duration
	b.ResetTimer()
	for range b.N {
		bash = append(bash, callT("bash", map[string]any{"command": "true"}))
		// The server refills its pool after the call, off its path: the
		// raw run is timed once that is done, not beside it.
		time.Sleep(40 * time.Millisecond)
		r := exec.Command(bin, rawArgs...)
		r.Env = rawEnv
		raw = append(raw, timeRun(b, r))
		read = append(read, callT("read_file", map[string]any{"path": "a.txt"}))
		tool = append(tool, callT("count-lines", map[string]any{"pattern": "TODO"}))
	}
	rounds := max(b.N/8, 2)
	for range rounds {
		var mu sync.Mutex
		var wg sync.WaitGroup
		for range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				d := callT("bash", map[string]any{"command": "true"})
				mu.Lock()
				conc = append(conc, d)
				mu.Unlock()
			}()
		}
		wg.Wait()
	}
	b.StopTimer()
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	b.ReportMetric(ms(median(bash)), "bash-ms")
	b.ReportMetric(ms(median(raw)), "raw-bwrap-ms")
	b.ReportMetric(float64(median(bash))/float64(median(raw)), "bash/raw-bwrap")
	b.ReportMetric(ms(median(conc)), "bash16-median-ms")
	b.ReportMetric(ms(p99(conc)), "bash16-p99-ms")
	b.ReportMetric(ms(median(read)), "read-ms")
	b.ReportMetric(ms(p99(read)), "read-p99-ms")
	b.ReportMetric(ms(median(tool)), "wasm-tool-ms")
	b.ReportMetric(ms(p99(tool)), "wasm-tool-p99-ms")
	b.ReportMetric(0, "ns/op")
}
