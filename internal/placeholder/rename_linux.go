package placeholder

import "golang.org/x/sys/unix"

// renameNoReplace renames without replacing what is at the new path.
func renameNoReplace(olddfd int, oldpath string, newdfd int, newpath string) error {
	return unix.Renameat2(olddfd, oldpath, newdfd, newpath, unix.RENAME_NOREPLACE)
}
