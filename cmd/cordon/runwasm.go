package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/cordon-run/cordon/admission"
	"github.com/cordon-run/cordon/runtime"
	"github.com/cordon-run/cordon/substrate/wasm"
)

// runWasm runs a prepared wasm tool in process, with the compiled code
// cached in the workspace's harness state.
// A signal that canceled ctx arrives on got; the exit code is then 128+N,
// as for a native tool.
func (e *env) runWasm(ctx context.Context, p *admission.Prepared, intr *interrupt) int {
	policy, err := wasm.PolicyOf(p.Grant.All())
	if err != nil {
		return e.fail(err)
	}
	if len(p.Tool.Files) != 1 {
		return e.fail(fmt.Errorf("tool %q: the registry holds %d modules, want 1", p.Grant.Tool, len(p.Tool.Files)))
	}
	mod, err := wasm.Load(p.Tool.Files[0].Data)
	if err != nil {
		return e.fail(err)
	}
	ws, err := e.openWorkspace()
	if err != nil {
		return e.fail(err)
	}
	defer ws.Close()
	cache, err := wasm.CacheDir(ws.Root(), e.harnessDir())
	if err != nil {
		return e.failCode(err, exitCannotRun)
	}
	engine, err := wasm.New(wasm.Config{CacheDir: cache})
	if err != nil {
		return e.failCode(err, exitCannotRun)
	}
	defer engine.Close()
	res, err := engine.Run(ctx, wasm.Call{
		Module:    mod,
		Workspace: ws,
		Policy:    policy,
		Args:      []string{p.Grant.Tool},
		Stdin:     bytes.NewReader(p.Input),
		Getenv:    os.Getenv,
	})
	if err != nil {
		switch {
		case errors.Is(err, wasm.ErrCanceled):
			return intr.code()
		case errors.Is(err, wasm.ErrModule):
			return e.failCode(err, exitCannotRun)
		}
		return e.fail(err)
	}
	var mechs []string
	for _, ms := range p.Grant.Mechanisms {
		mechs = append(mechs, ms...)
	}
	out := runtime.Result{
		ExitCode:      res.ExitCode,
		TimedOut:      res.TimedOut,
		Stdout:        res.Stdout.String(),
		Stderr:        res.Stderr.String(),
		StdoutBytes:   res.Stdout.Total(),
		StderrBytes:   res.Stderr.Total(),
		StdoutClipped: res.Stdout.Clipped(),
		StderrClipped: res.Stderr.Clipped(),
		Duration:      res.Duration,
		Substrate:     wasm.Name,
		Sandboxed:     true,
		Mechanisms:    mechs,
	}
	if e.json {
		data, _ := json.Marshal(out)
		var m map[string]any
		json.Unmarshal(data, &m)
		m["tool"], m["digest"], m["regranted"] = p.Grant.Tool, p.Grant.Digest, p.Rechecked
		m["trap"], m["log"], m["refusals"] = res.Trap, nonNil(res.Log), nonNil(res.Refusals)
		e.printJSON(m)
	} else {
		fmt.Fprint(e.stdout, out.Stdout)
		fmt.Fprint(e.stderr, out.Stderr)
		for _, l := range res.Log {
			fmt.Fprintf(e.stderr, "cordon: %s log: %s\n", l.Level, l.Message)
		}
		for _, r := range res.Refusals {
			fmt.Fprintf(e.stderr, "cordon: refused: %s\n", r.Message)
		}
		switch {
		case res.TimedOut:
			fmt.Fprintf(e.stderr, "cordon: tool %q ran out of its time (%v); the module was stopped\n", p.Grant.Tool, policy.Timeout)
		case res.Trap != "":
			fmt.Fprintf(e.stderr, "cordon: tool %q trapped: %s\n", p.Grant.Tool, res.Trap)
		}
	}
	return res.ExitCode
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
