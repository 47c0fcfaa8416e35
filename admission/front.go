//go:build cordon_front

package admission

import (
	"encoding/json"

	"github.com/cordon-run/cordon/refusal"
	"github.com/cordon-run/cordon/substrate"
)

// This file stands in for wasm.go, jsonschema.go and yaml.go in cordon's
// front end (the build tag cordon_front), which links no wasm substrate,
// JSON-schema validator or YAML decoder. The front end hands every command
// that needs them (admit, run, tools, probe, mcp) to the full binary
// before they are used; here they refuse.

// notLinked says what this build cannot do.
const notLinked = "which this build of cordon (its front end, built with the tag cordon_front) does not link; use the full cordon binary"

// WithWasm adds nothing: there is no wasm substrate.
func WithWasm(m map[string]substrate.Enforcer) map[string]substrate.Enforcer { return m }

func compileSchema(json.RawMessage) (func(v any) error, error) {
	return nil, refusal.Errorf(refusal.SandboxUnavailable, "checking an input_schema needs the JSON-schema validator, %s", notLinked)
}

// keywords is empty: the rule that reads them never runs here.
func keywords() []string { return nil }

func yamlToJSON([]byte) ([]byte, error) {
	return nil, &DecodeError{Format: FormatYAML, Reason: "decoding YAML needs the YAML decoder, " + notLinked}
}
