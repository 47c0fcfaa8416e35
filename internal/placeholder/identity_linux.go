package placeholder

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// dirIdentity names the directory at path by its inode and birth time
// where the file system keeps one — both on the disk, the same after a
// reboot, where a device number may not be (btrfs subvolumes, device
// mapper) — and by its device and inode where it does not ([Key]).
func dirIdentity(path string) (string, bool) {
	var st unix.Statx_t
	if unix.Statx(unix.AT_FDCWD, path, 0, unix.STATX_INO|unix.STATX_BTIME, &st) != nil || st.Mask&unix.STATX_INO == 0 {
		return "", false
	}
	if st.Mask&unix.STATX_BTIME != 0 {
		return fmt.Sprintf("ino %d born %d.%09d", st.Ino, st.Btime.Sec, st.Btime.Nsec), true
	}
	return fmt.Sprintf("dev %d:%d ino %d", st.Dev_major, st.Dev_minor, st.Ino), true
}
