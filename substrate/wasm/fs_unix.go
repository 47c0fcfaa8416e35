//go:build unix

package wasm

import (
	"io/fs"
	"os"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/experimental/sysfs"
	"github.com/tetratelabs/wazero/sys"
	"golang.org/x/sys/unix"

	"github.com/cordon-run/cordon/substrate/workspace"
)

const (
	oDirectory = unix.O_DIRECTORY
	oNofollow  = unix.O_NOFOLLOW
	oNonblock  = unix.O_NONBLOCK
	oDsync     = unix.O_DSYNC
)

// mountWorkspace returns a file-system configuration that mounts the
// workspace at the guest's "/" through the guard.
func mountWorkspace(ws *workspace.Workspace, write bool, note func(op, path string, err error)) (wazero.FSConfig, error) {
	g := &guardFS{ws: ws, write: write, note: note}
	return wazero.NewFSConfig().(sysfs.FSConfig).WithSysFSMount(g, "/"), nil
}

func setAppend(f *os.File, enable bool) error {
	fl, err := unix.FcntlInt(f.Fd(), unix.F_GETFL, 0)
	if err != nil {
		return err
	}
	if enable {
		fl |= unix.O_APPEND
	} else {
		fl &^= unix.O_APPEND
	}
	_, err = unix.FcntlInt(f.Fd(), unix.F_SETFL, fl)
	return err
}

// inoAt returns the inode of the entry name of the directory dir, or 0.
func inoAt(dir *os.File, name string) uint64 {
	var st unix.Stat_t
	if unix.Fstatat(int(dir.Fd()), name, &st, unix.AT_SYMLINK_NOFOLLOW) != nil {
		return 0
	}
	return uint64(st.Ino)
}

// statOf converts the guard's file information into wazero's.
func statOf(fi fs.FileInfo) sys.Stat_t {
	st, ok := fi.Sys().(*unix.Stat_t)
	if !ok {
		return sys.NewStat_t(fi)
	}
	return sys.Stat_t{
		Dev:   uint64(st.Dev),
		Ino:   uint64(st.Ino),
		Mode:  fi.Mode(),
		Nlink: uint64(st.Nlink),
		Size:  st.Size,
		Atim:  st.Atim.Nano(),
		Mtim:  st.Mtim.Nano(),
		Ctim:  st.Ctim.Nano(),
	}
}
