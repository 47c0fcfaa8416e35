//go:build unix

package wasm

import (
	"github.com/cordon-run/cordon/harness"
	"github.com/cordon-run/cordon/internal/userdir"
)

// CacheDir returns the compilation cache directory of the harness
// configuration h: "wasm" in cordon's per-user cache directory, outside
// every workspace and hidden from every sandbox. Each directory is created
// mode 0700 when missing and refused when it is a symlink, belongs to
// another user or is open to group or others ([refusal.UntrustedState]):
// cordon maps and runs the code it holds, so nothing but cordon itself may
// write there.
func CacheDir(h harness.Config) (string, error) {
	return userdir.EnsurePath(h.CacheDir(), "wasm")
}
