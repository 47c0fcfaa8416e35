//go:build !cordon_front

package admission

import (
	"github.com/cordon-run/cordon/substrate"
	"github.com/cordon-run/cordon/substrate/wasm"
)

// This file is one of the three that cordon's front end (the build tag
// cordon_front) leaves out, for the initialisation its dependency costs
// every process (docs/architecture.md); front.go stands in for them there.

// WithWasm adds the wasm substrate, as the substrate of [KindWasm], to m
// and returns it: the default substrates have it, and a caller that makes
// its own (cmd/cordon) adds it with this. In cordon's front end (the
// build tag cordon_front), which links no WebAssembly engine, it adds
// nothing, and a wasm tool is refused as a kind without a substrate.
func WithWasm(m map[string]substrate.Enforcer) map[string]substrate.Enforcer {
	m[KindWasm] = wasm.Enforcer{}
	return m
}
