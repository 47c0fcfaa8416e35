package main

import (
	"errors"

	"golang.org/x/sys/unix"
)

// mountOfItsOwn reports whether the file self is on another mount than its
// directory dir: a file bind-mounted there.
func mountOfItsOwn(self, dir string) (bool, error) {
	var sx, dx unix.Statx_t
	if err := unix.Statx(unix.AT_FDCWD, self, unix.AT_SYMLINK_NOFOLLOW, unix.STATX_MNT_ID, &sx); err != nil {
		return false, err
	}
	if err := unix.Statx(unix.AT_FDCWD, dir, 0, unix.STATX_MNT_ID, &dx); err != nil {
		return false, err
	}
	if sx.Mask&dx.Mask&unix.STATX_MNT_ID == 0 {
		return false, errors.New("statx gives no mount ID (Linux 5.8 and later do)")
	}
	return sx.Mnt_id != dx.Mnt_id, nil
}
