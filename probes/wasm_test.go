//go:build !cordon_front

package probes

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// runProbesLogged runs ps through Run, in a temporary directory of the test.
func runProbesLogged(t *testing.T, ps ...Probe) []Result {
	t.Helper()
	if len(ps) == 0 {
		t.Fatal("no probes")
	}
	start := time.Now()
	rs := Run(context.Background(), ps, Config{TempDir: t.TempDir()}, nil)
	t.Logf("%d probes in %s", len(ps), time.Since(start).Round(time.Millisecond))
	for _, r := range rs {
		t.Logf("%s %v in %s: %s", r.Probe.Name, r.Pass, r.Duration.Round(time.Millisecond), r.Observed)
	}
	return rs
}

func TestWasmProbesPass(t *testing.T) {
	ps := For("wasm")
	want := []string{"wasm/deadline", "wasm/memory-cap", "wasm/write-without-fs.write"}
	if len(ps) != len(want) {
		t.Fatalf("wasm probes %v, want %v", probeNames(ps), want)
	}
	for i, r := range runProbesLogged(t, ps...) {
		if r.Probe.Name != want[i] {
			t.Errorf("probe %d is %s, want %s", i, r.Probe.Name, want[i])
		}
		if !r.Pass {
			t.Errorf("%s failed: %s", r.Probe.Name, r.Observed)
		}
		if r.Probe.Expected == "" || len(r.Probe.Mechanisms) == 0 {
			t.Errorf("%s: expected %q, mechanisms %v", r.Probe.Name, r.Probe.Expected, r.Probe.Mechanisms)
		}
	}
	for _, m := range []string{"wasm/close-on-deadline", "wasm/memory-limit", "wasm/wasi-guard-ro"} {
		if len(Proving(m)) == 0 {
			t.Errorf("no probe proves %s", m)
		}
	}
}

// Each wasm probe fails against a grant that does not hold the limit it
// proves, and the deadline probe does so in bounded time.
func TestWasmProbesFailWithoutTheMechanism(t *testing.T) {
	for _, c := range []struct {
		name, observed string
		run            func(context.Context, *Env) (string, bool, error)
		within         time.Duration
	}{
		{"deadline of an hour", "not stopped by its deadline",
			wasmDeadlineRun(wasmDeadline, 500*time.Millisecond, "time:1h"), wasmDeadlineSlack*wasmDeadline + 1500*time.Millisecond},
		{"no memory cap", "past the cap, succeeded", wasmMemoryRun(), 0},
		{"a cap below the module's need", "within the cap, answered -1", wasmMemoryRun("memory:512KiB"), 0},
		{"fs.write granted", "the host file written exists", wasmCreateRun("fs.write:workspace"), 0},
		{"no file-system grant", "the workspace is not mounted", wasmCreateRun(), 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := Probe{Name: "wasm/broken", Substrate: "wasm", run: c.run}
			start := time.Now()
			r := runProbesLogged(t, p)[0]
			if r.Pass || !strings.Contains(r.Observed, c.observed) {
				t.Errorf("pass %v, observed %q; want a failure observing %q", r.Pass, r.Observed, c.observed)
			}
			if took := time.Since(start); c.within > 0 && took > c.within {
				t.Errorf("failed after %s, want within %s", took, c.within)
			}
		})
	}
}

// The committed modules are what wat2wasm makes of their sources.
func TestWasmModulesMatchSources(t *testing.T) {
	wat2wasm, err := exec.LookPath("wat2wasm")
	if err != nil {
		t.Skip("wat2wasm (wabt) is not installed: the modules are not recompiled")
	}
	for src, committed := range map[string][]byte{
		"testdata/wasm-loop.wat":   wasmLoop,
		"testdata/wasm-grow.wat":   wasmGrow,
		"testdata/wasm-create.wat": wasmCreate,
	} {
		out := filepath.Join(t.TempDir(), "out.wasm")
		if b, err := exec.Command(wat2wasm, src, "-o", out).CombinedOutput(); err != nil {
			t.Fatalf("wat2wasm %s: %v\n%s", src, err, b)
		}
		got, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, committed) {
			t.Errorf("%s compiles to %d bytes that differ from the committed %d: run wat2wasm %s -o %s.wasm",
				src, len(got), len(committed), src, strings.TrimSuffix(src, ".wat"))
		}
	}
}

func probeNames(ps []Probe) []string {
	var out []string
	for _, p := range ps {
		out = append(out, p.Name)
	}
	return out
}
