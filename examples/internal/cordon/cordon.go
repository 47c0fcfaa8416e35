// Package cordon is the Go binding of cordon's host module for the example
// tools: read, write, list and stat workspace files through cordon's
// workspace guard, and log. The ABI is described in docs/wasm-abi.md; each
// function needs its wasm.import:cordon/NAME capability (and, for the file
// functions, fs.read:workspace or fs.write:workspace) in the tool's
// declaration. Outside WebAssembly every function fails with
// [ErrNotWasm].
package cordon

import (
	"errors"
	"fmt"
	"syscall"
)

// Log levels.
const (
	Debug = 0
	Info  = 1
	Warn  = 2
	Error = 3
)

// ErrNotWasm: the program is not running as a cordon WebAssembly tool.
var ErrNotWasm = errors.New("cordon: not running under cordon's wasm substrate")

// Refusal is a refusal of cordon's boundary, as cordon/error reports it.
type Refusal struct {
	Errno   syscall.Errno `json:"-"`
	Kind    string        `json:"error"`
	Op      string        `json:"op"`
	Path    string        `json:"path"`
	Message string        `json:"message"`
}

func (r *Refusal) Error() string {
	if r.Message != "" {
		return r.Message
	}
	return fmt.Sprintf("cordon: %s %s: errno %d", r.Op, r.Path, uint32(r.Errno))
}

// Unwrap returns the errno.
func (r *Refusal) Unwrap() error { return r.Errno }
