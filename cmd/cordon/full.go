//go:build !cordon_front

package main

import (
	"github.com/cordon-run/cordon/admission"
	"github.com/cordon-run/cordon/substrate"
	"github.com/cordon-run/cordon/substrate/wasm"
)

// frontEnd is false: this is the full binary, which runs every command
// (front.go is the front end's).
const frontEnd = false

// withWasm adds the wasm substrate to an admitter's substrates.
func withWasm(m map[string]substrate.Enforcer) map[string]substrate.Enforcer {
	m[admission.KindWasm] = wasm.Enforcer{}
	return m
}
