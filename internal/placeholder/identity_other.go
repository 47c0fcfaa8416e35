//go:build !linux

package placeholder

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// dirIdentity names the directory at path by its device and inode
// ([Key]).
func dirIdentity(path string) (string, bool) {
	var st unix.Stat_t
	if unix.Stat(path, &st) != nil {
		return "", false
	}
	return fmt.Sprintf("dev %d ino %d", st.Dev, st.Ino), true
}
