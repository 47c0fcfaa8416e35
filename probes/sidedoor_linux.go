package probes

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"unsafe"

	"golang.org/x/sys/unix"
)

// sideDoors tries, from inside a sandbox, each call the seccomp filter
// refuses, and prints "NAME ERRNO" for each (0: it succeeded). Each would
// succeed, or fail with another errno than EPERM, without the filter.
func sideDoors() int {
	report := func(name string, err error) {
		code := 0
		var errno unix.Errno
		if errors.As(err, &errno) {
			code = int(errno)
		} else if err != nil {
			code = -1
		}
		fmt.Printf("%s %d\n", name, code)
	}
	sys := func(nr uintptr, args ...uintptr) error {
		var a [6]uintptr
		copy(a[:], args)
		r, _, e := unix.Syscall6(nr, a[0], a[1], a[2], a[3], a[4], a[5])
		if e != 0 {
			return e
		}
		if nr == unix.SYS_IO_URING_SETUP || nr == unix.SYS_USERFAULTFD {
			unix.Close(int(r))
		}
		return nil
	}
	sock := func(family, typ int) error {
		fd, err := unix.Socket(family, typ, 0)
		if err == nil {
			unix.Close(fd)
		}
		return err
	}
	var params [120]byte
	report("io_uring", sys(unix.SYS_IO_URING_SETUP, 8, uintptr(unsafe.Pointer(&params[0]))))
	report("bpf", sys(unix.SYS_BPF, 0, 0, 0))
	report("keyctl", sys(unix.SYS_KEYCTL, unix.KEYCTL_GET_KEYRING_ID, uintptr(0xfffffffd), 0)) // the session keyring
	report("userfaultfd", sys(unix.SYS_USERFAULTFD, 0))
	report("unshare", unix.Unshare(unix.CLONE_NEWUSER))
	report("vsock", sock(unix.AF_VSOCK, unix.SOCK_STREAM))
	report("netlink", sock(unix.AF_NETLINK, unix.SOCK_RAW))
	report("packet", sock(unix.AF_PACKET, unix.SOCK_RAW))
	report("unix", sock(unix.AF_UNIX, unix.SOCK_STREAM))
	report("inet", sock(unix.AF_INET, unix.SOCK_STREAM))
	// TIOCSTI on a pipe: without the filter the kernel says ENOTTY.
	var p [2]int
	if err := unix.Pipe(p[:]); err == nil {
		c := byte('x')
		report("tiocsti", sys(unix.SYS_IOCTL, uintptr(p[0]), unix.TIOCSTI, uintptr(unsafe.Pointer(&c))))
		report("tiocsti-high-bits", sys(unix.SYS_IOCTL, uintptr(p[0]), unix.TIOCSTI|1<<32, uintptr(unsafe.Pointer(&c))))
		unix.Close(p[0])
		unix.Close(p[1])
	}
	// A sibling: ptrace and process_vm_readv of it.
	sib := exec.Command("/bin/sleep", "5")
	if err := sib.Start(); err == nil {
		report("ptrace-sibling", unix.PtraceAttach(sib.Process.Pid))
		report("process_vm_readv", sys(unix.SYS_PROCESS_VM_READV, uintptr(sib.Process.Pid), 0, 0, 0, 0, 0))
		sib.Process.Kill()
		sib.Wait()
	}
	// chmod of a file this process owns (the workspace's file.txt): the
	// metadata calls of a Landlock run.
	report("chmod", unix.Chmod("file.txt", 0o777))
	return 0
}

// balloon holds the number of MiB in its argument, touching every page.
func balloon() int {
	n, _ := strconv.Atoi(os.Args[len(os.Args)-1])
	var held [][]byte
	for i := 0; i < n; i++ {
		b, err := unix.Mmap(-1, 0, 1<<20, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
		if err != nil {
			fmt.Printf("refused after %d MiB: %v\n", i, err)
			return 1
		}
		for j := 0; j < len(b); j += 4096 {
			b[j] = 1
		}
		held = append(held, b)
	}
	fmt.Printf("held %d MiB\n", len(held))
	return 0
}
