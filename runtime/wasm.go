//go:build !cordon_front

package runtime

import (
	"context"
	"errors"
	"fmt"

	"github.com/cordon-run/cordon/admission"
	"github.com/cordon-run/cordon/refusal"
	"github.com/cordon-run/cordon/substrate"
	"github.com/cordon-run/cordon/substrate/bwrap"
	"github.com/cordon-run/cordon/substrate/wasm"
	"github.com/cordon-run/cordon/substrate/workspace"
)

// wasmName is the WebAssembly substrate's name.
const wasmName = wasm.Name

// wasmState is a runtime's WebAssembly engine, made on first use, and the
// harness cache directory it was made for.
type wasmState struct {
	engine *wasm.Engine
	cache  string
}

// close closes the engine, if one was made. The caller holds r.mu.
func (w *wasmState) close() error {
	if w.engine != nil {
		return w.engine.Close()
	}
	return nil
}

// wasmEngine returns the runtime's engine, made on first use with the
// per-user compiled-code cache of the harness configuration.
func (r *Runtime) wasmEngine(p *admission.Prepared) (*wasm.Engine, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, errors.New("runtime: closed")
	}
	if r.wasm.engine != nil && r.wasm.cache == p.Harness.CacheDir() {
		return r.wasm.engine, nil
	}
	if r.wasm.engine != nil {
		return nil, fmt.Errorf("runtime: the wasm cache moved from %s to %s; use one runtime per harness configuration", r.wasm.cache, p.Harness.CacheDir())
	}
	cache, err := wasm.CacheDir(p.Harness) // made and checked once
	if err != nil {
		return nil, err
	}
	e, err := wasm.New(wasm.Config{CacheDir: cache, Logger: r.cfg.Logger})
	if err != nil {
		return nil, refusal.Errorf(refusal.SandboxUnavailable, "%w", err)
	}
	r.wasm.engine, r.wasm.cache = e, p.Harness.CacheDir()
	return e, nil
}

func (r *Runtime) runWasm(ctx context.Context, p *admission.Prepared, res *Result) error {
	g := p.Grant
	policy, err := wasm.PolicyOf(g.All())
	if err != nil {
		return err
	}
	mod, ok := p.Artifact.(*wasm.Module)
	if !ok {
		if p.Tool == nil || len(p.Tool.Files) != 1 {
			return refusal.Errorf(refusal.Registry, "tool %q: no module to run", g.Tool)
		}
		if mod, err = wasm.Load(p.Tool.Files[0].Data); err != nil {
			return err
		}
	}
	engine, err := r.wasmEngine(p)
	if err != nil {
		return err
	}
	call := wasm.Call{Module: mod, Policy: policy, Args: append([]string{g.Tool}, g.Args...), Stdin: p.Stdin, Getenv: r.getenv}
	if policy.Read || policy.Write {
		// A module reaches what lies in the workspace: not cordon's state,
		// nor, writing, its binaries.
		if err := bwrap.OwnExposure("a WebAssembly tool", p.Workspace, p.Harness, policy.Write); err != nil {
			return err
		}
		ws, err := workspace.Open(p.Workspace, workspace.WithHarness(p.Harness))
		if err != nil {
			return err
		}
		defer ws.Close()
		call.Workspace = ws
	}
	out, err := engine.Run(ctx, call)
	if call.Workspace != nil && policy.Write {
		if prot := call.Workspace.Found(); prot != nil {
			res.Notes = prot.QuarantineNotes()
		}
	}
	switch {
	case errors.Is(err, wasm.ErrCanceled):
		res.Canceled, err = true, nil
	case err != nil:
		return err
	}
	res.Outcome = substrate.Outcome{
		ExitCode: out.ExitCode, TimedOut: out.TimedOut, Canceled: res.Canceled, Duration: out.Duration, Notes: res.Notes,
	}
	if out.Stdout != nil {
		res.Stdout, res.StdoutBytes, res.StdoutClipped = out.Stdout.String(), out.Stdout.Total(), out.Stdout.Clipped()
		res.Stderr, res.StderrBytes, res.StderrClipped = out.Stderr.String(), out.Stderr.Total(), out.Stderr.Clipped()
	}
	res.Sandboxed, res.Trap, res.Log, res.Refusals = true, out.Trap, out.Log, out.Refusals
	for _, c := range g.All().All() {
		res.Mechanisms = append(res.Mechanisms, g.Mechanisms[c.String()]...)
	}
	return nil
}

// wasmPlan returns the mechanisms a run of the wasm tool p applies: its
// grant's.
func wasmPlan(p *admission.Prepared) ([]substrate.Mechanism, error) {
	g := p.Grant
	var out []substrate.Mechanism
	for _, c := range g.All().All() {
		ms, err := wasm.Enforcer{}.Mechanisms(c, g.All())
		if err != nil {
			return nil, err
		}
		out = append(out, ms...)
	}
	return out, nil
}
