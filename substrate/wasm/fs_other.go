//go:build !unix

package wasm

import (
	"errors"

	"github.com/tetratelabs/wazero"

	"github.com/cordon-run/cordon/substrate/workspace"
)

func mountWorkspace(ws *workspace.Workspace, write bool, note func(op, path string, err error)) (wazero.FSConfig, error) {
	return nil, errors.ErrUnsupported
}
