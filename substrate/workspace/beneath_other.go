//go:build unix && !linux

package workspace

import "golang.org/x/sys/unix"

func openBeneath(dirfd int, p string, flags int, mode uint32) (int, error) {
	return openWalk(dirfd, p, flags, mode)
}

func statBeneath(dirfd int, p string, st *unix.Stat_t) error { return statWalk(dirfd, p, st) }
