//go:build !linux

package roots

import (
	"errors"
	"os"
)

// errNotLinux: roots read trees with openat2, which only Linux has.
var errNotLinux = errors.New("disposable roots need Linux (openat2 with RESOLVE_NO_SYMLINKS)")

func openBeneath(dirfd int, rel string, flags int) (*os.File, error) { return nil, errNotLinux }

func scan(root *os.File, skip skipFunc) (Manifest, error) { return nil, errNotLinux }

func readBeneath(dirfd int, rel string, max int64) ([]byte, error) { return nil, errNotLinux }
