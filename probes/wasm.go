//go:build !cordon_front

package probes

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/cordon-run/cordon/capabilities"
	"github.com/cordon-run/cordon/substrate/wasm"
	"github.com/cordon-run/cordon/substrate/workspace"
)

// The probes' modules, hand-written in testdata/*.wat and compiled with
// wat2wasm (TestWasmModulesMatchSources keeps the two in step).
var (
	//go:embed testdata/wasm-loop.wasm
	wasmLoop []byte
	//go:embed testdata/wasm-grow.wasm
	wasmGrow []byte
	//go:embed testdata/wasm-create.wasm
	wasmCreate []byte
)

// The wasm probes' limits. wasmGrowCap is the cap wasm-grow.wat is
// written for: it grows to that many pages, then to 64.
const (
	wasmDeadline = 100 * time.Millisecond
	// wasmDeadlineSlack is how far past its deadline a module may run
	// before the deadline probe counts it as not stopped.
	// Wall-clock time: on a loaded host a module stopped at its first
	// check after the deadline was seen running 0.9 s (two cores, four
	// probe runs at once and four busy loops), 9x.
	wasmDeadlineSlack = 20
	// wasmSetup bounds making the engine and compiling the module, which
	// the deadline does not cover; the probe stops waiting for a call
	// after wasmDeadlineSlack times the deadline and this. It is only the
	// backstop for a deadline that does not work (the verdict is judged
	// on the engine's own Duration), so it is generous: on a loaded host
	// under -race, making the engine and compiling took over 500 ms.
	wasmSetup   = 10 * time.Second
	wasmGrowCap = 16 // pages: memory:1MiB
)

func init() {
	register(
		Probe{
			Name:       "wasm/deadline",
			Substrate:  wasm.Name,
			Mechanisms: []string{wasm.Name + "/" + wasm.MechDeadline.Name},
			Expected:   fmt.Sprintf("a module looping forever is stopped at its deadline (time:%s), within %dx of it", capabilities.FormatDuration(wasmDeadline), wasmDeadlineSlack),
			run:        wasmDeadlineRun(wasmDeadline, wasmSetup, "time:"+capabilities.FormatDuration(wasmDeadline)),
		},
		Probe{
			Name:       "wasm/memory-cap",
			Substrate:  wasm.Name,
			Mechanisms: []string{wasm.Name + "/" + wasm.MechMemory(wasmGrowCap).Name},
			Expected:   "under memory:1MiB, memory.grow to 16 pages succeeds and to 64 pages (4MiB) answers -1",
			run:        wasmMemoryRun("memory:1MiB"),
		},
		Probe{
			Name:       "wasm/write-without-fs.write",
			Substrate:  wasm.Name,
			Mechanisms: []string{wasm.Name + "/" + wasm.MechGuardRead.Name},
			Expected:   "under fs.read:workspace, a module reads a workspace file but path_open with O_CREAT and fd_write answers an errno, and no file appears on the host",
			run:        wasmCreateRun("fs.read:workspace"),
		},
	)
}

// wasmCall runs bin once under the policy of grant on an engine of its
// own that keeps compiled code in memory only: a probe writes nothing
// outside its directory.
func wasmCall(ctx context.Context, bin []byte, grant []string, ws *workspace.Workspace) (wasm.Result, error) {
	set, err := capabilities.ParseSet(grant)
	if err != nil {
		return wasm.Result{}, err
	}
	policy, err := wasm.PolicyOf(set)
	if err != nil {
		return wasm.Result{}, err
	}
	m, err := wasm.Load(bin)
	if err != nil {
		return wasm.Result{}, err
	}
	engine, err := wasm.New(wasm.Config{})
	if err != nil {
		return wasm.Result{}, err
	}
	defer engine.Close()
	return engine.Run(ctx, wasm.Call{Module: m, Policy: policy, Workspace: ws, Args: []string{"probe"}})
}

// wasmDeadlineRun runs wasm-loop under grant and expects it stopped by
// its deadline within wasmDeadlineSlack times limit of running (the
// engine's Duration: from instantiation, when the deadline starts). Past
// that and setup it stops waiting (it cancels the call) and reports
// the module not stopped, so a deadline that does not work fails the
// probe in bounded time.
func wasmDeadlineRun(limit, setup time.Duration, grant ...string) func(context.Context, *Env) (string, bool, error) {
	return func(ctx context.Context, e *Env) (string, bool, error) {
		bound := wasmDeadlineSlack * limit
		// A cancellation, not a deadline: the engine reports a deadline of
		// the caller's context as its own (TimedOut).
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		stop := time.AfterFunc(bound+setup, cancel)
		defer stop.Stop()
		start := time.Now()
		res, err := wasmCall(ctx, wasmLoop, grant, nil)
		took := time.Since(start).Round(time.Millisecond)
		ran := res.Duration.Round(time.Millisecond)
		switch {
		case errors.Is(err, wasm.ErrCanceled):
			return fmt.Sprintf("not stopped by its deadline: still running after %s, canceled by the probe", took), false, nil
		case err != nil:
			return "", false, err
		case !res.TimedOut:
			return fmt.Sprintf("returned after %s without timing out (exit %d, trap %q)", ran, res.ExitCode, res.Trap), false, nil
		case res.Duration > bound:
			return fmt.Sprintf("stopped only after %s running, past %s", ran, bound), false, nil
		}
		return fmt.Sprintf("stopped after %s running, %s with compiling (deadline %s): TimedOut, exit %d",
			ran, took, limit, res.ExitCode), true, nil
	}
}

// wasmMemoryRun runs wasm-grow under grant and expects the grow within
// the cap to succeed and the grow past it to be refused.
func wasmMemoryRun(grant ...string) func(context.Context, *Env) (string, bool, error) {
	return func(ctx context.Context, e *Env) (string, bool, error) {
		res, err := wasmCall(ctx, wasmGrow, grant, nil)
		if err != nil {
			return "", false, err
		}
		switch {
		case res.Trap != "":
			return "trapped: " + res.Trap, false, nil
		case res.TimedOut:
			return "timed out", false, nil
		}
		switch res.ExitCode {
		case 0:
			return fmt.Sprintf("grew to %d pages; memory.grow to 64 pages answered -1", wasmGrowCap), true, nil
		case 1:
			return fmt.Sprintf("memory.grow to %d pages, within the cap, answered -1", wasmGrowCap), false, nil
		case 2:
			return "memory.grow to 64 pages (4MiB), past the cap, succeeded", false, nil
		}
		return fmt.Sprintf("exit %d, not one the module has", res.ExitCode), false, nil
	}
}

// wasmCreateRun runs wasm-create under grant in a workspace holding the
// file "present", and expects the read to succeed, the create to answer
// an errno, and no file "written" on the host.
func wasmCreateRun(grant ...string) func(context.Context, *Env) (string, bool, error) {
	return func(ctx context.Context, e *Env) (string, bool, error) {
		dir := filepath.Join(e.Dir, "ws")
		if err := os.Mkdir(dir, 0o700); err != nil {
			return "", false, err
		}
		if err := os.WriteFile(filepath.Join(dir, "present"), []byte("probe\n"), 0o600); err != nil {
			return "", false, err
		}
		ws, err := workspace.Open(dir, workspace.WithHarness(e.Harness))
		if err != nil {
			return "", false, err
		}
		defer ws.Close()
		res, err := wasmCall(ctx, wasmCreate, grant, ws)
		if err != nil {
			return "", false, err
		}
		_, statErr := os.Lstat(filepath.Join(dir, "written"))
		if statErr != nil && !errors.Is(statErr, os.ErrNotExist) {
			return "", false, statErr
		}
		created := statErr == nil
		var open string
		switch code := res.ExitCode; {
		case res.Trap != "":
			open = "trapped: " + res.Trap
		case res.TimedOut:
			open = "timed out"
		case code == 0:
			open = "path_open O_CREAT succeeded and fd_write wrote"
		case code > 128:
			return fmt.Sprintf("reading present answered errno %d: the workspace is not mounted", code-128), false, nil
		default:
			open = fmt.Sprintf("path_open O_CREAT answered errno %d%s", code, errnoName(code))
		}
		switch {
		case created:
			return open + "; the host file written exists", false, nil
		case res.ExitCode == 0 || res.Trap != "" || res.TimedOut:
			return open + "; the host file written is absent", false, nil
		}
		return "read present; " + open + "; the host file written is absent", true, nil
	}
}

// errnoName names the WASI errnos the create may answer.
func errnoName(code int) string {
	switch code {
	case 2:
		return " (EACCES)"
	case 8:
		return " (EBADF)"
	case 63:
		return " (EPERM)"
	case 69:
		return " (EROFS)"
	case 76:
		return " (ENOTCAPABLE)"
	}
	return ""
}
