//go:build !unix

package workspace

import "errors"

// Workspace is not available on this platform.
type Workspace struct {
	root string
	cfg  Config
}

// Entry describes one directory entry or file.
type Entry struct {
	Name, Type string
	Size       int64
}

const maxSymlinks = 40

// Open fails: the workspace guard needs a Unix system.
func Open(dir string, opts ...Option) (*Workspace, error) {
	return nil, errors.ErrUnsupported
}
