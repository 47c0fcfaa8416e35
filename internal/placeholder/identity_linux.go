package placeholder

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// dirIdentity names the directory at path by its device, inode and, where
// the file system keeps one, birth time ([Key]).
func dirIdentity(path string) (string, bool) {
	var st unix.Statx_t
	if unix.Statx(unix.AT_FDCWD, path, 0, unix.STATX_INO|unix.STATX_BTIME, &st) != nil || st.Mask&unix.STATX_INO == 0 {
		return "", false
	}
	id := fmt.Sprintf("dev %d:%d ino %d", st.Dev_major, st.Dev_minor, st.Ino)
	if st.Mask&unix.STATX_BTIME != 0 {
		id += fmt.Sprintf(" born %d.%09d", st.Btime.Sec, st.Btime.Nsec)
	}
	return id, true
}
