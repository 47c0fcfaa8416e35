//go:build unix

package wasm

import (
	"fmt"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// CacheDir returns the compilation cache directory of a workspace,
// root/harness/cache/wasm, creating each missing directory (mode 0700)
// without following a symlink: an existing component that is a symlink or
// not a directory is refused. harness is the harness-state directory the
// cache belongs in (".efferent"); tools cannot write there, which is what
// makes it safe to run code from it.
func CacheDir(root, harness string) (string, error) {
	fd, err := unix.Open(root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", fmt.Errorf("wasm: cache directory: %w", err)
	}
	p := root
	for _, c := range []string{harness, "cache", "wasm"} {
		if err := unix.Mkdirat(fd, c, 0o700); err != nil && err != unix.EEXIST {
			unix.Close(fd)
			return "", fmt.Errorf("wasm: cache directory %s: %w", filepath.Join(p, c), err)
		}
		next, err := unix.Openat(fd, c, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		unix.Close(fd)
		if err != nil {
			return "", fmt.Errorf("wasm: cache directory %s is not a directory: %w", filepath.Join(p, c), err)
		}
		fd, p = next, filepath.Join(p, c)
	}
	unix.Close(fd)
	return p, nil
}
