//go:build cordon_front

package runtime

import (
	"context"

	"github.com/cordon-run/cordon/admission"
	"github.com/cordon-run/cordon/refusal"
	"github.com/cordon-run/cordon/substrate"
)

// This file replaces wasm.go in cordon's front end (the build tag
// cordon_front), which links no WebAssembly engine: a wasm tool is
// refused, and the front end hands every tool command to the full
// binary before it gets here.

// wasmName is the WebAssembly substrate's name.
const wasmName = "wasm"

// wasmState holds nothing: there is no engine to keep.
type wasmState struct{}

func (w *wasmState) close() error { return nil }

func (r *Runtime) runWasm(ctx context.Context, p *admission.Prepared, res *Result) error {
	return errNoWasm(p)
}

func wasmPlan(p *admission.Prepared) ([]substrate.Mechanism, error) {
	return nil, errNoWasm(p)
}

func errNoWasm(p *admission.Prepared) error {
	return refusal.Errorf(refusal.SandboxUnavailable, "tool %q runs on the wasm substrate, which this build of cordon (its front end, built with the tag cordon_front) does not link; run it with the full cordon binary", p.Grant.Tool)
}
