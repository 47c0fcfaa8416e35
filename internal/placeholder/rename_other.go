//go:build !linux

package placeholder

import "golang.org/x/sys/unix"

// renameNoReplace is not available here: spare directories are not used,
// placeholders are made and removed.
func renameNoReplace(int, string, int, string) error { return unix.ENOSYS }
