package bwrap

import (
	"errors"
	"os"
	"slices"
	"unsafe"

	"golang.org/x/sys/unix"
)

// openList makes the table listed by mount ID where the kernel lists
// the namespace of the process of dir (/proc/PID) to this one; otherwise every look reads
// the text: an older kernel (no listmount(2), ENOSYS; no namespace IDs,
// ENOTTY or EINVAL), or one that does not list this namespace here.
func (t *table) openList(dir *os.File) {
	fd, err := unix.Openat(int(dir.Fd()), "ns/mnt", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return
	}
	ns := os.NewFile(uintptr(fd), dir.Name()+"/ns/mnt")
	var id uint64
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, ns.Fd(), unix.NS_GET_MNTNS_ID, uintptr(unsafe.Pointer(&id))); e != 0 || id == 0 {
		ns.Close()
		return
	}
	t.ns, t.nsID = ns, id
	if _, err := t.list(nil); err != nil {
		t.ns, t.nsID = nil, 0
		ns.Close()
	}
}

// mntIDReq is the kernel's struct mnt_id_req, version 1 (32 bytes).
type mntIDReq struct {
	size    uint32
	spare   uint32
	mntID   uint64
	param   uint64
	mntNsID uint64
}

// lsmtRoot asks listmount for every mount of the namespace.
const lsmtRoot = ^uint64(0)

// maxMounts bounds the mounts listed (the text is bounded at 4 MiB).
const maxMounts = 1 << 16

// list returns the sorted IDs of the table's mounts, in buf.
func (t *table) list(buf []uint64) ([]uint64, error) {
	if cap(buf) < 128 {
		buf = make([]uint64, 0, 128)
	}
	buf = buf[:0]
	req := mntIDReq{size: uint32(unsafe.Sizeof(mntIDReq{})), mntID: lsmtRoot, mntNsID: t.nsID}
	for {
		if len(buf) == cap(buf) {
			if cap(buf) >= maxMounts {
				return buf, errors.New("the mount table has over 65536 mounts")
			}
			buf = append(buf, 0)[:len(buf)]
		}
		free := buf[len(buf):cap(buf)]
		n, _, e := unix.Syscall6(unix.SYS_LISTMOUNT, uintptr(unsafe.Pointer(&req)),
			uintptr(unsafe.Pointer(&free[0])), uintptr(len(free)), 0, 0, 0)
		if e != 0 {
			return buf, e
		}
		buf = buf[:len(buf)+int(n)]
		if int(n) < len(free) {
			break
		}
		req.param = buf[len(buf)-1] // more may follow the last one listed
	}
	slices.Sort(buf)
	return buf, nil
}
