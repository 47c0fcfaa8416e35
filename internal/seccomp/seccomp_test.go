//go:build linux

package seccomp

import (
	"encoding/binary"
	"errors"
	"fmt"
	"path"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

var (
	networks  = []Network{NetNone, NetTCP, NetHost}
	metadatas = []Metadata{MetadataAll, MetadataByFD, MetadataNone}
)

// policies are every Network with every Metadata.
var policies = func() []Policy {
	var ps []Policy
	for _, m := range metadatas {
		for _, n := range networks {
			ps = append(ps, Policy{Network: n, Metadata: m})
		}
	}
	return ps
}()

// name is a policy's short name, network/metadata: "tcp/by-fd".
func name(p Policy) string { return p.Network.String() + "/" + p.Metadata.String() }

// native returns this architecture's table, or skips the test on one the
// package has none for.
func native(t *testing.T) *table {
	t.Helper()
	tab := nativeTable()
	if tab == nil {
		_, err := Program(Policy{})
		if !errors.Is(err, errors.ErrUnsupported) {
			t.Fatalf("Program without a table: got %v, want an error wrapping errors.ErrUnsupported", err)
		}
		t.Skipf("no system call table: %v", err)
	}
	return tab
}

// vm runs p's program, as assembled for the kernel, in bpf.VM.
func vm(t *testing.T, p Policy) *bpf.VM {
	t.Helper()
	prog, err := Program(p)
	if err != nil {
		t.Fatal(err)
	}
	insns := make([]bpf.Instruction, len(prog))
	for i, raw := range prog {
		insns[i] = raw.Disassemble()
	}
	m, err := bpf.NewVM(insns)
	if err != nil {
		t.Fatalf("%v: the program does not load: %v", p, err)
	}
	return m
}

// seccompData is a struct seccomp_data for bpf.VM. The kernel's loads
// read host-order words of the little-endian struct; bpf.VM's loads read
// big-endian ones. So each 32-bit word is written big-endian at the
// offset the little-endian struct puts it: an argument's low half at
// 16+8*i, its high half at 20+8*i.
func seccompData(arch, nr uint32, args ...uint64) []byte {
	b := make([]byte, 64)
	binary.BigEndian.PutUint32(b[0:], nr)
	binary.BigEndian.PutUint32(b[4:], arch)
	for i, a := range args {
		binary.BigEndian.PutUint32(b[16+8*i:], uint32(a))
		binary.BigEndian.PutUint32(b[20+8*i:], uint32(a>>32))
	}
	return b
}

const (
	allow  = unix.SECCOMP_RET_ALLOW
	eperm  = unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)
	enosys = unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS)
)

func verdict(r int) string {
	switch uint32(r) {
	case allow:
		return "ALLOW"
	case eperm:
		return "ERRNO(EPERM)"
	case enosys:
		return "ERRNO(ENOSYS)"
	}
	return fmt.Sprintf("%#x", r)
}

// sysCall is one system call as the filter sees it, and what it must
// answer under each value of the policy field its table is about.
type sysCall struct {
	name string
	arch uint32 // 0: the table's
	nr   uint32
	args []uint64
	want [3]uint32 // for NetNone, NetTCP, NetHost; or MetadataAll, MetadataByFD, MetadataNone
}

func same(v uint32) [3]uint32 { return [3]uint32{v, v, v} }

// calls is the table every policy replays, by its Network.
func calls(tab *table) []sysCall {
	var cs []sysCall
	for _, c := range tab.denied {
		// Arguments that the calls checked by argument would allow.
		cs = append(cs, sysCall{name: c.name, nr: c.nr, args: []uint64{0, 0, 0}, want: same(eperm)})
	}
	const plainClone = unix.CLONE_VM | unix.CLONE_FS | unix.CLONE_FILES | unix.CLONE_SIGHAND |
		unix.CLONE_SYSVSEM | unix.CLONE_THREAD | unix.CLONE_SETTLS | unix.CLONE_PARENT_SETTID | unix.CLONE_CHILD_CLEARTID
	cs = append(cs,
		sysCall{name: "getpid", nr: unix.SYS_GETPID, want: same(allow)},
		sysCall{name: "read", nr: unix.SYS_READ, args: []uint64{0, 0, 1}, want: same(allow)},
		sysCall{name: "write", nr: unix.SYS_WRITE, args: []uint64{1, 0, 1}, want: same(allow)},
		sysCall{name: "openat", nr: unix.SYS_OPENAT, want: same(allow)},
		sysCall{name: "execve", nr: unix.SYS_EXECVE, want: same(allow)},
		sysCall{name: "clone3", nr: unix.SYS_CLONE3, want: same(enosys)},

		sysCall{name: "clone(thread)", nr: unix.SYS_CLONE, args: []uint64{plainClone}, want: same(allow)},
		sysCall{name: "clone(fork)", nr: unix.SYS_CLONE, args: []uint64{uint64(unix.SIGCHLD)}, want: same(allow)},
		sysCall{name: "clone(vfork)", nr: unix.SYS_CLONE, args: []uint64{unix.CLONE_VM | unix.CLONE_VFORK | unix.CLONE_PIDFD | uint64(unix.SIGCHLD)}, want: same(allow)},
		sysCall{name: "clone(high bits only)", nr: unix.SYS_CLONE, args: []uint64{1<<32 | uint64(unix.SIGCHLD)}, want: same(allow)},
		sysCall{name: "clone(CLONE_NEWUSER|high bits)", nr: unix.SYS_CLONE, args: []uint64{1<<32 | unix.CLONE_NEWUSER}, want: same(eperm)},

		sysCall{name: "ioctl(TIOCSTI)", nr: unix.SYS_IOCTL, args: []uint64{0, unix.TIOCSTI}, want: same(eperm)},
		sysCall{name: "ioctl(TIOCSTI|1<<32)", nr: unix.SYS_IOCTL, args: []uint64{0, 1<<32 | unix.TIOCSTI}, want: same(eperm)},
		sysCall{name: "ioctl(TIOCLINUX)", nr: unix.SYS_IOCTL, args: []uint64{0, unix.TIOCLINUX}, want: same(eperm)},
		sysCall{name: "ioctl(TIOCLINUX|0xffffffff<<32)", nr: unix.SYS_IOCTL, args: []uint64{0, 0xffffffff<<32 | unix.TIOCLINUX}, want: same(eperm)},
		sysCall{name: "ioctl(TIOCGWINSZ)", nr: unix.SYS_IOCTL, args: []uint64{0, unix.TIOCGWINSZ}, want: same(allow)},
		sysCall{name: "ioctl(TIOCINQ)", nr: unix.SYS_IOCTL, args: []uint64{0, unix.TIOCINQ}, want: same(allow)},
		sysCall{name: "ioctl(TIOCSTI in fd)", nr: unix.SYS_IOCTL, args: []uint64{unix.TIOCSTI, unix.TIOCGWINSZ}, want: same(allow)},

		sysCall{name: "personality(PER_LINUX)", nr: unix.SYS_PERSONALITY, args: []uint64{0}, want: same(allow)},
		sysCall{name: "personality(query)", nr: unix.SYS_PERSONALITY, args: []uint64{0xffffffff}, want: same(allow)},
		sysCall{name: "personality(1<<32)", nr: unix.SYS_PERSONALITY, args: []uint64{1 << 32}, want: same(allow)},
		sysCall{name: "personality(ADDR_NO_RANDOMIZE)", nr: unix.SYS_PERSONALITY, args: []uint64{0x0040000}, want: same(eperm)},
		sysCall{name: "personality(READ_IMPLIES_EXEC)", nr: unix.SYS_PERSONALITY, args: []uint64{0x0400000}, want: same(eperm)},
		sysCall{name: "personality(PER_LINUX32)", nr: unix.SYS_PERSONALITY, args: []uint64{0x0008}, want: same(eperm)},

		sysCall{name: "getpid on AUDIT_ARCH_I386", arch: unix.AUDIT_ARCH_I386, nr: unix.SYS_GETPID, want: same(eperm)},
		sysCall{name: "nr 0 on AUDIT_ARCH_ARM", arch: unix.AUDIT_ARCH_ARM, nr: 0, want: same(eperm)},
	)
	if tab.x32Bit != 0 {
		cs = append(cs,
			sysCall{name: "x32 getpid", nr: tab.x32Bit | unix.SYS_GETPID, want: same(eperm)},
			sysCall{name: "x32 nr 0", nr: tab.x32Bit, want: same(eperm)},
			sysCall{name: "nr -1", nr: 0xffffffff, want: same(eperm)},
		)
	}

	// socket(2): family, type, protocol.
	const (
		stream = unix.SOCK_STREAM
		flags  = unix.SOCK_NONBLOCK | unix.SOCK_CLOEXEC
	)
	tcpOnly := [3]uint32{eperm, allow, allow}
	hostOnly := [3]uint32{eperm, eperm, allow}
	sockets := []struct {
		family, typ, proto uint64
		want               [3]uint32
	}{
		{unix.AF_INET, stream, 0, tcpOnly},
		{unix.AF_INET, stream, unix.IPPROTO_TCP, tcpOnly},
		{unix.AF_INET, stream | flags, 0, tcpOnly},
		{unix.AF_INET, stream | unix.SOCK_NONBLOCK, unix.IPPROTO_TCP, tcpOnly},
		{unix.AF_INET6, stream, 0, tcpOnly},
		{unix.AF_INET6, stream | flags, unix.IPPROTO_TCP, tcpOnly},
		{1<<32 | unix.AF_INET, 1<<32 | stream, 1<<32 | unix.IPPROTO_TCP, tcpOnly}, // the kernel reads ints
		{unix.AF_INET, stream, unix.IPPROTO_MPTCP, hostOnly},
		{unix.AF_INET6, stream, unix.IPPROTO_MPTCP, hostOnly},
		{unix.AF_INET, stream, unix.IPPROTO_SCTP, hostOnly},
		{unix.AF_INET, stream, unix.IPPROTO_UDP, hostOnly},
		{unix.AF_INET, unix.SOCK_DGRAM, 0, hostOnly},
		{unix.AF_INET6, unix.SOCK_DGRAM | flags, unix.IPPROTO_UDP, hostOnly},
		{unix.AF_INET, unix.SOCK_RAW, unix.IPPROTO_ICMP, hostOnly},
		{unix.AF_INET6, unix.SOCK_RAW, unix.IPPROTO_RAW, hostOnly},
		{unix.AF_INET, unix.SOCK_SEQPACKET, unix.IPPROTO_SCTP, hostOnly},
		{unix.AF_INET, unix.SOCK_DGRAM, unix.IPPROTO_ICMP, hostOnly},
		{unix.AF_UNIX, stream, 0, same(eperm)},
		{unix.AF_UNIX, unix.SOCK_DGRAM | flags, 0, same(eperm)},
		{1<<32 | unix.AF_UNIX, stream, 0, same(eperm)},
		{unix.AF_NETLINK, unix.SOCK_RAW, unix.NETLINK_ROUTE, same(eperm)},
		{unix.AF_PACKET, unix.SOCK_RAW, 0x0300, same(eperm)},
		{unix.AF_VSOCK, stream, 0, same(eperm)},
		{unix.AF_BLUETOOTH, stream, 0, same(eperm)},
		{unix.AF_ALG, unix.SOCK_SEQPACKET, 0, same(eperm)},
		{unix.AF_XDP, unix.SOCK_RAW, 0, same(eperm)},
		{unix.AF_KEY, unix.SOCK_RAW, 2, same(eperm)},
		{unix.AF_UNSPEC, stream, 0, same(eperm)},
	}
	for _, s := range sockets {
		cs = append(cs, sysCall{
			name: fmt.Sprintf("socket(%#x, %#x, %d)", s.family, s.typ, s.proto),
			nr:   tab.socket, args: []uint64{s.family, s.typ, s.proto}, want: s.want,
		})
	}

	// socketpair(2): family, type, protocol, sv. Only a unix stream or
	// seqpacket pair, under every Network.
	const sv = 0x7ffc_9a2b_3c40
	pairs := []struct {
		family, typ uint64
		want        uint32
	}{
		{unix.AF_UNIX, stream, allow},
		{unix.AF_UNIX, stream | unix.SOCK_CLOEXEC, allow},
		{unix.AF_UNIX, stream | flags, allow},
		{unix.AF_UNIX, unix.SOCK_SEQPACKET, allow},
		{unix.AF_UNIX, unix.SOCK_SEQPACKET | unix.SOCK_NONBLOCK, allow},
		{unix.AF_UNIX, 0xffffffff<<32 | stream, allow}, // the kernel reads an int
		{1<<32 | unix.AF_UNIX, 1<<32 | unix.SOCK_SEQPACKET, allow},
		{unix.AF_UNIX, unix.SOCK_DGRAM, eperm},
		{unix.AF_UNIX, unix.SOCK_DGRAM | unix.SOCK_NONBLOCK, eperm},
		{unix.AF_UNIX, unix.SOCK_DGRAM | flags, eperm},
		{unix.AF_UNIX, 1<<32 | unix.SOCK_DGRAM, eperm},
		{unix.AF_UNIX, unix.SOCK_RAW, eperm},
		{unix.AF_UNIX, unix.SOCK_RDM, eperm},
		{unix.AF_UNIX, unix.SOCK_PACKET, eperm},
		{unix.AF_UNIX, 0, eperm},
		{unix.AF_UNIX, sockTypeMask | stream<<4, eperm},
		// Another family: TIPC makes pairs, and creating any socket
		// loads its family's module.
		{unix.AF_TIPC, stream, eperm},
		{unix.AF_TIPC, unix.SOCK_SEQPACKET, eperm},
		{unix.AF_INET, stream, eperm},
		{unix.AF_INET, unix.SOCK_DGRAM, eperm},
		{unix.AF_NETLINK, unix.SOCK_RAW, eperm},
		{unix.AF_UNSPEC, stream, eperm},
		{1<<32 | unix.AF_INET, stream, eperm},
	}
	for _, s := range pairs {
		cs = append(cs, sysCall{
			name: fmt.Sprintf("socketpair(%#x, %#x, 0)", s.family, s.typ),
			nr:   tab.socketpair, args: []uint64{s.family, s.typ, 0, sv}, want: same(s.want),
		})
	}

	// listen(2), and the sends whose flags can ask for TCP Fast Open:
	// refused under NetTCP only.
	const (
		fd, buf, addr = 3, 0x7ffc_9a2b_3d00, 0x7ffc_9a2b_3e00
		dontWait      = unix.MSG_DONTWAIT
		fastOpen      = unix.MSG_FASTOPEN
	)
	tcpRefuses := [3]uint32{allow, eperm, allow}
	cs = append(cs,
		sysCall{name: "listen(fd, 128)", nr: tab.listen, args: []uint64{fd, 128}, want: tcpRefuses},
		sysCall{name: "listen(fd, 0)", nr: tab.listen, args: []uint64{fd, 0}, want: tcpRefuses},
	)
	sends := []struct {
		flags uint64
		want  [3]uint32
	}{
		{fastOpen, tcpRefuses},
		{fastOpen | dontWait, tcpRefuses},
		{fastOpen | unix.MSG_NOSIGNAL | unix.MSG_MORE, tcpRefuses},
		{0xffffffff, tcpRefuses},
		{1<<32 | fastOpen, tcpRefuses},
		{dontWait, same(allow)},
		{unix.MSG_NOSIGNAL | unix.MSG_DONTWAIT | unix.MSG_MORE, same(allow)},
		{0, same(allow)},
		{0xffffffff<<32 | dontWait, same(allow)}, // the kernel reads an unsigned int
		{^uint64(fastOpen), same(allow)},
	}
	for _, s := range sends {
		cs = append(cs,
			sysCall{name: fmt.Sprintf("sendto(fd, buf, 1, %#x, addr, 16)", s.flags), nr: tab.sendto, args: []uint64{fd, buf, 1, s.flags, addr, 16}, want: s.want},
			sysCall{name: fmt.Sprintf("sendmsg(fd, msg, %#x)", s.flags), nr: tab.sendmsg, args: []uint64{fd, buf, s.flags}, want: s.want},
			sysCall{name: fmt.Sprintf("sendmmsg(fd, msgvec, 1, %#x)", s.flags), nr: tab.sendmmsg, args: []uint64{fd, buf, 1, s.flags}, want: s.want},
		)
	}
	// The flags where the other calls have them are not the flags.
	cs = append(cs,
		sysCall{name: "sendto(fd, buf, MSG_FASTOPEN as len, 0)", nr: tab.sendto, args: []uint64{fd, buf, fastOpen, 0, addr, 16}, want: same(allow)},
		sysCall{name: "sendmsg(fd, msg, 0, MSG_FASTOPEN in arg 3)", nr: tab.sendmsg, args: []uint64{fd, buf, 0, fastOpen}, want: same(allow)},
		sysCall{name: "sendmmsg(fd, msgvec, MSG_FASTOPEN as vlen, 0)", nr: tab.sendmmsg, args: []uint64{fd, buf, fastOpen, 0}, want: same(allow)},
		sysCall{name: "recvfrom(fd, buf, 1, MSG_FASTOPEN)", nr: unix.SYS_RECVFROM, args: []uint64{fd, buf, 1, fastOpen}, want: same(allow)},
		sysCall{name: "connect(fd, addr, 16)", nr: unix.SYS_CONNECT, args: []uint64{fd, addr, 16}, want: same(allow)},
		sysCall{name: "bind(fd, addr, 16)", nr: unix.SYS_BIND, args: []uint64{fd, addr, 16}, want: same(allow)},
		sysCall{name: "accept4(fd, 0, 0, SOCK_CLOEXEC)", nr: unix.SYS_ACCEPT4, args: []uint64{fd, 0, 0, unix.SOCK_CLOEXEC}, want: same(allow)},
		sysCall{name: "setsockopt(fd, IPPROTO_TCP, TCP_FASTOPEN_CONNECT)", nr: unix.SYS_SETSOCKOPT, args: []uint64{fd, unix.IPPROTO_TCP, unix.TCP_FASTOPEN_CONNECT, buf, 4}, want: same(allow)},
	)
	return cs
}

// metadataCalls is the table every policy replays, by its Metadata.
func metadataCalls(tab *table) []sysCall {
	var (
		byPath = [3]uint32{allow, eperm, eperm}
		byFD   = [3]uint32{allow, allow, eperm}
	)
	const (
		atFDCWD = 1<<64 - 100 // AT_FDCWD, -100, in a register
		path    = 0x7ffc_9a2b_3c40
		fd      = 3
		times   = 0x7ffc_9a2b_3d00
	)
	var cs []sysCall
	for _, c := range tab.metadataByPath {
		// Arguments that name a descriptor where the call takes one
		// (AT_EMPTY_PATH is 0x1000): refused all the same.
		cs = append(cs,
			sysCall{name: c.name, nr: c.nr, args: []uint64{atFDCWD, path, 0o777, 0}, want: byPath},
			sysCall{name: c.name + "(fd, \"\", AT_EMPTY_PATH)", nr: c.nr, args: []uint64{fd, path, 0o777, unix.AT_EMPTY_PATH, unix.AT_EMPTY_PATH}, want: byPath},
		)
	}
	for _, c := range tab.metadataByFD {
		cs = append(cs, sysCall{name: c.name, nr: c.nr, args: []uint64{fd, 0o777}, want: byFD})
	}
	return append(cs,
		sysCall{name: "utimensat(AT_FDCWD, path)", nr: tab.utimensat, args: []uint64{atFDCWD, path, times, 0}, want: byPath},
		sysCall{name: "utimensat(fd, path, NULL)", nr: tab.utimensat, args: []uint64{fd, path, 0, 0}, want: byPath},
		sysCall{name: "utimensat(fd, \"\", AT_EMPTY_PATH)", nr: tab.utimensat, args: []uint64{fd, path, times, unix.AT_EMPTY_PATH}, want: byPath},
		sysCall{name: "utimensat(fd, path with a zero low half)", nr: tab.utimensat, args: []uint64{fd, 0x7ffc_0000_0000, times, 0}, want: byPath},
		sysCall{name: "utimensat(fd, path 1<<32)", nr: tab.utimensat, args: []uint64{fd, 1 << 32, 0, 0}, want: byPath},
		sysCall{name: "utimensat(fd, path with a zero high half)", nr: tab.utimensat, args: []uint64{fd, 0x9a2b_3c40, 0, 0}, want: byPath},
		sysCall{name: "futimens: utimensat(fd, NULL, times)", nr: tab.utimensat, args: []uint64{fd, 0, times, 0}, want: same(allow)},
		sysCall{name: "futimens: utimensat(fd, NULL, NULL)", nr: tab.utimensat, args: []uint64{fd, 0, 0, 0}, want: same(allow)},
		sysCall{name: "utimensat(AT_FDCWD, NULL)", nr: tab.utimensat, args: []uint64{atFDCWD, 0, times, 0}, want: same(allow)},
		// Reading metadata is never refused.
		sysCall{name: "fstat", nr: unix.SYS_FSTAT, args: []uint64{fd, path}, want: same(allow)},
		sysCall{name: "newfstatat", nr: unix.SYS_NEWFSTATAT, args: []uint64{atFDCWD, path, path, 0}, want: same(allow)},
		sysCall{name: "statx", nr: unix.SYS_STATX, args: []uint64{atFDCWD, path, 0, 0x7ff, path}, want: same(allow)},
		sysCall{name: "getxattr", nr: unix.SYS_GETXATTR, args: []uint64{path, path, path, 8}, want: same(allow)},
		sysCall{name: "fgetxattr", nr: unix.SYS_FGETXATTR, args: []uint64{fd, path, path, 8}, want: same(allow)},
		sysCall{name: "listxattr", nr: unix.SYS_LISTXATTR, args: []uint64{path, path, 8}, want: same(allow)},
		sysCall{name: "getxattrat", nr: unix.SYS_GETXATTRAT, args: []uint64{atFDCWD, path, 0, path, path}, want: same(allow)},
		sysCall{name: "listxattrat", nr: unix.SYS_LISTXATTRAT, args: []uint64{atFDCWD, path, 0, path, 8}, want: same(allow)},
		sysCall{name: "file_getattr", nr: unix.SYS_FILE_GETATTR, args: []uint64{atFDCWD, path, path, 24, 0}, want: same(allow)},
	)
}

// TestVerdicts replays the table of calls against each policy's program,
// by its Network, and the table of metadata calls, by its Metadata.
func TestVerdicts(t *testing.T) {
	tab := native(t)
	for _, p := range policies {
		t.Run(name(p), func(t *testing.T) {
			m := vm(t, p)
			run := func(c sysCall, want uint32) {
				t.Helper()
				arch := c.arch
				if arch == 0 {
					arch = tab.audit
				}
				got, err := m.Run(seccompData(arch, c.nr, c.args...))
				if err != nil {
					t.Fatalf("%s: %v", c.name, err)
				}
				if got != int(want) {
					t.Errorf("%s (nr %d): got %s, want %s", c.name, c.nr, verdict(got), verdict(int(want)))
				}
			}
			for _, c := range calls(tab) {
				run(c, c.want[p.Network])
			}
			for _, c := range metadataCalls(tab) {
				run(c, c.want[p.Metadata])
			}
		})
	}
}

// everyNrArgs are the arguments the *ChangesNothingElse tests give every
// call number: ones that some argument check allows and ones it refuses.
var everyNrArgs = [][]uint64{
	{},
	{unix.AF_INET, unix.SOCK_STREAM, 0},
	{unix.AF_UNIX, unix.SOCK_STREAM, 0, unix.MSG_FASTOPEN},
	{unix.AF_UNIX, unix.SOCK_DGRAM, unix.MSG_FASTOPEN, 0},
	{unix.CLONE_NEWUSER, unix.TIOCSTI},
	{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
}

// TestMetadataChangesNothingElse: every call number, on the native ABI
// and another, gets the same answer under each Metadata as under
// MetadataAll, but for the metadata calls themselves.
func TestMetadataChangesNothingElse(t *testing.T) {
	tab := native(t)
	metadata := map[uint32]bool{tab.utimensat: true}
	for _, c := range tab.deniedMetadata(MetadataNone) {
		metadata[c.nr] = true
	}
	for _, n := range networks {
		all := vm(t, Policy{Network: n, Metadata: MetadataAll})
		for _, md := range metadatas[1:] {
			p := Policy{Network: n, Metadata: md}
			m := vm(t, p)
			for _, arch := range []uint32{tab.audit, unix.AUDIT_ARCH_I386} {
				for nr := uint32(0); nr < 1024; nr++ {
					if arch == tab.audit && metadata[nr] {
						continue
					}
					for _, a := range everyNrArgs {
						in := seccompData(arch, nr, a...)
						want, err1 := all.Run(in)
						got, err2 := m.Run(in)
						if err1 != nil || err2 != nil || got != want {
							t.Errorf("%s: arch %#x nr %d%v: got %s (%v), %s under %s (%v)",
								name(p), arch, nr, a, verdict(got), err2, verdict(want), MetadataAll, err1)
						}
					}
				}
			}
		}
	}
}

// TestNetworkChangesNothingElse: every call number, on the native ABI
// and another, gets the same answer under each Network as under NetNone,
// but for socket(2), and for listen(2) and the sends checked for
// MSG_FASTOPEN under NetTCP.
func TestNetworkChangesNothingElse(t *testing.T) {
	tab := native(t)
	byNetwork := map[Network][]uint32{
		NetTCP:  {tab.socket, tab.listen, tab.sendto, tab.sendmsg, tab.sendmmsg},
		NetHost: {tab.socket},
	}
	for _, md := range metadatas {
		none := vm(t, Policy{Network: NetNone, Metadata: md})
		for _, n := range networks[1:] {
			p := Policy{Network: n, Metadata: md}
			m := vm(t, p)
			for _, arch := range []uint32{tab.audit, unix.AUDIT_ARCH_I386} {
				for nr := uint32(0); nr < 1024; nr++ {
					if arch == tab.audit && slices.Contains(byNetwork[n], nr) {
						continue
					}
					for _, a := range everyNrArgs {
						in := seccompData(arch, nr, a...)
						want, err1 := none.Run(in)
						got, err2 := m.Run(in)
						if err1 != nil || err2 != nil || got != want {
							t.Errorf("%s: arch %#x nr %d%v: got %s (%v), %s under %s (%v)",
								name(p), arch, nr, a, verdict(got), err2, verdict(want), NetNone, err1)
						}
					}
				}
			}
		}
	}
}

// TestDeniedWhateverTheArguments: a denied call is refused with any
// argument, the ones the argument checks look at included.
func TestDeniedWhateverTheArguments(t *testing.T) {
	tab := native(t)
	args := [][]uint64{
		{},
		{unix.AF_INET, unix.SOCK_STREAM, 0},
		{0, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
		{1 << 32, 1 << 32, 1 << 32},
	}
	for _, p := range policies {
		m := vm(t, p)
		denied := slices.Concat(tab.denied, tab.deniedMetadata(p.Metadata))
		if p.Network == NetTCP {
			denied = append(denied, call{"listen", tab.listen})
		}
		for _, c := range denied {
			for _, a := range args {
				got, err := m.Run(seccompData(tab.audit, c.nr, a...))
				if err != nil || got != int(eperm) {
					t.Errorf("%s: %s%v: got %s (%v), want ERRNO(EPERM)", name(p), c.name, a, verdict(got), err)
				}
			}
		}
	}
}

// TestTable checks the table against itself: sorted unique names, no
// number twice, and none of the calls checked by argument denied outright.
func TestTable(t *testing.T) {
	tab := native(t)
	lists := map[string]struct {
		names []string
		calls []call
	}{
		"Denied()":                     {Denied(), tab.denied},
		"DeniedMetadata(MetadataAll)":  {DeniedMetadata(MetadataAll), nil},
		"DeniedMetadata(MetadataByFD)": {DeniedMetadata(MetadataByFD), tab.metadataByPath},
		"DeniedMetadata(MetadataNone)": {DeniedMetadata(MetadataNone), slices.Concat(tab.metadataByPath, tab.metadataByFD)},
		"DeniedMetadata(Metadata(7))":  {DeniedMetadata(7), nil},
	}
	for f, l := range lists {
		if len(l.names) != len(l.calls) || !slices.IsSorted(l.names) {
			t.Errorf("%s = %v: want the table's %d names, sorted", f, l.names, len(l.calls))
		}
		if len(slices.Compact(slices.Clone(l.names))) != len(l.names) {
			t.Errorf("%s names a call twice: %v", f, l.names)
		}
	}
	seen := map[uint32]string{
		tab.clone: "clone", tab.clone3: "clone3", tab.ioctl: "ioctl",
		tab.personality: "personality", tab.socket: "socket", tab.socketpair: "socketpair",
		tab.listen: "listen", tab.sendto: "sendto", tab.sendmsg: "sendmsg", tab.sendmmsg: "sendmmsg",
		tab.utimensat: "utimensat",
	}
	if len(seen) != 11 {
		t.Errorf("the calls checked by argument share numbers: %v", seen)
	}
	for _, c := range slices.Concat(tab.denied, tab.metadataByPath, tab.metadataByFD) {
		if other, dup := seen[c.nr]; dup {
			t.Errorf("%s has the number %d of %s", c.name, c.nr, other)
		}
		seen[c.nr] = c.name
	}
}

// TestStringNamesEveryDenial: the line a grant quotes names each denied
// call, literally or by a pattern (io_uring_*), so it does not drift
// from the table; and it names no metadata call the policy allows.
func TestStringNamesEveryDenial(t *testing.T) {
	tab := native(t)
	words := regexp.MustCompile(`[a-z0-9_*]+`)
	seen := map[string]bool{}
	for _, p := range policies {
		s := p.String()
		if seen[s] {
			t.Errorf("two policies have the same String: %s", s)
		}
		seen[s] = true
		ws := words.FindAllString(s, -1)
		names := func(call string) bool {
			return slices.ContainsFunc(ws, func(w string) bool {
				// CLONE_NEW* leaves a lone "*", which names nothing.
				ok, _ := path.Match(w, call)
				return ok && strings.Trim(w, "*") != ""
			})
		}
		refused := slices.Concat(Denied(), DeniedMetadata(p.Metadata))
		if p.Metadata != MetadataAll {
			refused = append(refused, "utimensat")
		}
		for _, call := range refused {
			if !names(call) {
				t.Errorf("%s: String() does not name %s: %s", name(p), call, s)
			}
		}
		for _, c := range slices.Concat(tab.metadataByPath, tab.metadataByFD, []call{{name: "utimensat"}}) {
			if !slices.Contains(refused, c.name) && names(c.name) {
				t.Errorf("%s: String() names %s, which the policy allows: %s", name(p), c.name, s)
			}
		}
	}
	for _, c := range []struct {
		p    Policy
		want string
	}{
		{Policy{Network: 7}, "seccomp: invalid network policy Network(7)"},
		{Policy{Metadata: 7}, "seccomp: invalid metadata policy Metadata(7)"},
		{Policy{Metadata: -1}, "seccomp: invalid metadata policy Metadata(-1)"},
	} {
		if s := c.p.String(); s != c.want {
			t.Errorf("String() = %q, want %q", s, c.want)
		}
		if _, err := Program(c.p); err == nil {
			t.Errorf("Program accepts %q", c.want)
		}
	}
}

// checked returns the system call numbers p's program sends anywhere but
// straight to ALLOW: refused whole or checked by their arguments.
func checked(tab *table, p Policy) map[uint32]bool {
	nrs := map[uint32]bool{tab.clone3: true, tab.clone: true, tab.ioctl: true, tab.personality: true,
		tab.socket: true, tab.socketpair: true}
	for _, c := range slices.Concat(tab.denied, tab.deniedMetadata(p.Metadata)) {
		nrs[c.nr] = true
	}
	if p.Metadata != MetadataAll {
		nrs[tab.utimensat] = true
	}
	if p.Network == NetTCP {
		nrs[tab.listen], nrs[tab.sendto], nrs[tab.sendmsg], nrs[tab.sendmmsg] = true, true, true, true
	}
	return nrs
}

// constAllow runs prog as the kernel does for each system call number
// when it attaches a filter (seccomp_is_const_allow, kernel/seccomp.c):
// with the number and the architecture only. It reports whether the run
// ends in ALLOW without reading an argument — the kernel then lets that
// call skip the filter — and how many instructions it took.
func constAllow(t *testing.T, prog []bpf.RawInstruction, arch, nr uint32) (bool, int) {
	t.Helper()
	var a uint32
	for pc, steps := 0, 1; pc < len(prog); pc, steps = pc+1, steps+1 {
		in := prog[pc]
		switch in.Op {
		case unix.BPF_LD | unix.BPF_W | unix.BPF_ABS:
			switch in.K {
			case offNr:
				a = nr
			case offArch:
				a = arch
			default:
				return false, steps // an argument: not constant
			}
		case unix.BPF_RET | unix.BPF_K:
			return in.K == allow, steps
		case unix.BPF_JMP | unix.BPF_JA:
			pc += int(in.K)
		case unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, unix.BPF_JMP | unix.BPF_JGE | unix.BPF_K,
			unix.BPF_JMP | unix.BPF_JGT | unix.BPF_K, unix.BPF_JMP | unix.BPF_JSET | unix.BPF_K:
			var yes bool
			switch in.Op & 0xf0 {
			case unix.BPF_JEQ:
				yes = a == in.K
			case unix.BPF_JGE:
				yes = a >= in.K
			case unix.BPF_JGT:
				yes = a > in.K
			case unix.BPF_JSET:
				yes = a&in.K != 0
			}
			if yes {
				pc += int(in.Jt)
			} else {
				pc += int(in.Jf)
			}
		case unix.BPF_ALU | unix.BPF_AND | unix.BPF_K:
			a &= in.K
		default:
			return false, steps
		}
	}
	t.Fatalf("the program ran off its end for call %d", nr)
	return false, 0
}

// maxSearch is the most instructions the program may take to decide a
// call by its number alone. The kernel runs it that way for every number
// of every ABI as it attaches the filter, so the time a load takes grows
// with it: a run of ~75 comparisons took ~0.1 ms more per load.
const maxSearch = 16

// TestProgramSearch: every call the program does not check is one the
// kernel can let skip the filter, and the program decides any number,
// of its own ABI or another, in a few instructions — a search, not a
// run of comparisons. It stays below the kernel's limit (assemble
// checks that, and each jump's reach).
func TestProgramSearch(t *testing.T) {
	tab := native(t)
	foreign := uint32(unix.AUDIT_ARCH_I386)
	if tab.audit == unix.AUDIT_ARCH_AARCH64 {
		foreign = unix.AUDIT_ARCH_ARM
	}
	for _, p := range policies {
		prog, err := Program(p)
		if err != nil {
			t.Fatal(err)
		}
		want := checked(tab, p)
		most, total := 0, 0
		for nr := uint32(0); nr < 1024; nr++ {
			ok, steps := constAllow(t, prog, tab.audit, nr)
			if ok == want[nr] {
				t.Errorf("%s: call %d: constant ALLOW %v, want %v", name(p), nr, ok, !want[nr])
			}
			most, total = max(most, steps), total+steps
			if ok, steps := constAllow(t, prog, foreign, nr); ok || steps > 3 {
				t.Errorf("%s: call %d of another ABI: ALLOW %v after %d instructions, want a refusal within 3", name(p), nr, ok, steps)
			}
		}
		if most > maxSearch {
			t.Errorf("%s: a call takes %d instructions to decide by its number, want at most %d", name(p), most, maxSearch)
		}
		t.Logf("%s: %d instructions; by number alone at most %d a call, %d for calls 0-1023", name(p), len(prog), most, total)
	}
}

// TestMarshal: 8 bytes an instruction, which decode to the program again.
func TestMarshal(t *testing.T) {
	native(t)
	for _, p := range policies {
		prog, err := Program(p)
		if err != nil {
			t.Fatal(err)
		}
		b, err := Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		if len(b) != 8*len(prog) {
			t.Fatalf("%s: %d bytes for %d instructions", name(p), len(b), len(prog))
		}
		var back []bpf.RawInstruction
		for i := 0; i < len(b); i += 8 {
			back = append(back, bpf.RawInstruction{
				Op: binary.NativeEndian.Uint16(b[i:]),
				Jt: b[i+2],
				Jf: b[i+3],
				K:  binary.NativeEndian.Uint32(b[i+4:]),
			})
		}
		if !slices.Equal(back, prog) {
			t.Errorf("%s: Marshal does not decode to Program", name(p))
		}
	}
}

// TestMarshalIsTheKernelLayout: Marshal's bytes are the memory of the
// []unix.SockFilter that Apply hands the kernel (x/sys generates that
// struct from the kernel's headers), so bubblewrap reads what Apply
// installs.
func TestMarshalIsTheKernelLayout(t *testing.T) {
	native(t)
	if unsafe.Sizeof(unix.SockFilter{}) != 8 {
		t.Fatalf("struct sock_filter is %d bytes, not 8", unsafe.Sizeof(unix.SockFilter{}))
	}
	for _, p := range policies {
		prog, err := Program(p)
		if err != nil {
			t.Fatal(err)
		}
		filter := make([]unix.SockFilter, len(prog))
		for i, ins := range prog {
			filter[i] = unix.SockFilter{Code: ins.Op, Jt: ins.Jt, Jf: ins.Jf, K: ins.K}
		}
		mem := unsafe.Slice((*byte)(unsafe.Pointer(&filter[0])), 8*len(filter))
		b, err := Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(b, mem) {
			t.Errorf("%s: Marshal differs from the kernel's struct sock_filter array", name(p))
		}
	}
}
