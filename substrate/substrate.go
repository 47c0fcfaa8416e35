// Package substrate names cordon's enforcement backends and the mechanisms
// they provide.
//
// A substrate is one way of confining a tool: the workspace guard for the
// direct file tools, bubblewrap for native commands, wazero for WebAssembly
// modules. Each enforces capabilities with concrete mechanisms — a bwrap
// flag, a kernel resolve flag, a host function, a deadline — and a
// [Mechanism] is the named, quotable value of one of them: a grant lists the
// mechanisms behind each capability, and evidence proves them on a host.
// The backends live in the sub-packages; this package holds only what they
// share: the [Mechanism] value, the [Enforcer] interface through which
// admission asks a substrate what it can enforce, the [Facts] of a host a
// grant is made under, and the [Inspector] interface of substrates that read
// a tool's artifact.
//
// # Limitations
//
// A Mechanism is a description, not an enforcement: it is only as true as
// the substrate code that applies it and the probe that proves it. [Facts]
// describe a host at the moment they were probed; a host can change after.
package substrate

// Mechanism is one named enforcement mechanism of a substrate.
type Mechanism struct {
	Substrate string `json:"substrate"` // "bwrap", "workspace", "wasm", "runtime"
	Name      string `json:"name"`      // stable identifier, e.g. "bind-workspace"
	Detail    string `json:"detail"`    // what is applied, e.g. "--bind <ws> <ws>"
}

// String is the form a grant quotes: "bwrap: --bind <ws> <ws>".
func (m Mechanism) String() string { return m.Substrate + ": " + m.Detail }
