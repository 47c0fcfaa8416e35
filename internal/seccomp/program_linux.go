package seccomp

import (
	"cmp"
	"fmt"
	"slices"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// Offsets into struct seccomp_data, the input of the filter: nr (u32) at
// 0, arch (u32) at 4, instruction_pointer (u64) at 8, args[6] (u64) from
// 16. Both supported architectures are little-endian, so the low 32 bits
// of argument i are the word at 16+8*i and the high 32 bits the word
// after it.
const (
	offNr   = 0
	offArch = 4
)

func argLow(i uint32) uint32  { return 16 + 8*i }
func argHigh(i uint32) uint32 { return 20 + 8*i }

// cloneNamespaces are the clone(2) flags that make a new namespace.
const cloneNamespaces = unix.CLONE_NEWNS | unix.CLONE_NEWCGROUP | unix.CLONE_NEWUTS |
	unix.CLONE_NEWIPC | unix.CLONE_NEWUSER | unix.CLONE_NEWPID | unix.CLONE_NEWNET

const (
	perLinux       = 0          // PER_LINUX, the default persona
	personaQuery   = 0xffffffff // personality(0xffffffff) reads the persona and changes nothing
	sockTypeMask   = 0xf        // SOCK_TYPE_MASK: the type without SOCK_NONBLOCK and SOCK_CLOEXEC
	protoByDefault = 0          // socket(2)'s protocol 0: the family's default for the type
)

const (
	retAllow  = unix.SECCOMP_RET_ALLOW
	retEPERM  = unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)
	retENOSYS = unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS)
)

// Program returns the filter for p on the architecture the package was
// built for: a binary search on the system call number, then a short
// block for each call checked by its arguments, then the shared returns.
//
// A search, not one run of comparisons: as it attaches a filter, the
// kernel runs it (seccomp_cache_prepare) for every system call number of
// each ABI to find the calls it always allows, which then skip it. Each
// of those runs walked the whole run of comparisons, ~75 of them, on
// every number: a load took 118 µs at best, against 67 µs with the
// search (twice in a bubblewrap sandbox: the init and the command),
// which decides any number in at most 13 instructions.
//
// It returns an error for an architecture without a table and for a
// Network or Metadata it does not know.
func Program(p Policy) ([]bpf.RawInstruction, error) {
	t := nativeTable()
	if t == nil {
		return nil, errUnsupported()
	}
	if p.Network < NetNone || p.Network > NetLoopback {
		return nil, fmt.Errorf("seccomp: unknown network policy %v", p.Network)
	}
	if p.Metadata < MetadataAll || p.Metadata > MetadataNone {
		return nil, fmt.Errorf("seccomp: unknown metadata policy %v", p.Metadata)
	}
	var a asm

	// Another ABI numbers its calls differently: refuse it whole.
	a.load(offArch)
	a.jumpIf(bpf.JumpEqual, t.audit, "", "eperm")
	a.load(offNr)
	if t.x32Bit != 0 {
		a.jumpIf(bpf.JumpGreaterOrEqual, t.x32Bit, "eperm", "")
	}

	// The calls checked by their number, each with where it goes; every
	// other number is allowed.
	routes := []route{{t.clone3, "enosys"}}
	for _, c := range slices.Concat(t.denied, t.deniedMetadata(p.Metadata)) {
		routes = append(routes, route{c.nr, "eperm"})
	}
	if p.Metadata != MetadataAll {
		routes = append(routes, route{t.utimensat, "utimensat"})
	}
	routes = append(routes, route{t.clone, "clone"}, route{t.ioctl, "ioctl"}, route{t.personality, "personality"})
	if p.Network == NetNone {
		routes = append(routes, route{t.socket, "eperm"})
	} else {
		routes = append(routes, route{t.socket, "socket"})
	}
	routes = append(routes, route{t.socketpair, "socketpair"})
	if p.Network == NetTCP {
		routes = append(routes, route{t.listen, "eperm"}, route{t.sendto, "flags3"},
			route{t.sendmmsg, "flags3"}, route{t.sendmsg, "flags2"})
	}
	slices.SortFunc(routes, func(x, y route) int { return cmp.Compare(x.nr, y.nr) })
	for i := 1; i < len(routes); i++ {
		if routes[i].nr == routes[i-1].nr {
			return nil, fmt.Errorf("seccomp: system call %d is checked twice (%s, %s)", routes[i].nr, routes[i-1].to, routes[i].to)
		}
	}
	a.search(routes, "allow")

	// clone(2): the flags are the first argument on both architectures.
	a.label("clone")
	a.load(argLow(0))
	a.jumpIf(bpf.JumpBitsSet, cloneNamespaces, "eperm", "allow")

	// ioctl(2): the request is an unsigned int, the second argument.
	a.label("ioctl")
	a.load(argLow(1))
	a.jumpIf(bpf.JumpEqual, unix.TIOCSTI, "eperm", "")
	a.jumpIf(bpf.JumpEqual, unix.TIOCLINUX, "eperm", "allow")

	a.label("personality")
	a.load(argLow(0))
	a.jumpIf(bpf.JumpEqual, perLinux, "allow", "")
	a.jumpIf(bpf.JumpEqual, personaQuery, "allow", "eperm")

	// socket(family, type, protocol).
	switch p.Network {
	case NetTCP, NetLoopback:
		a.label("socket")
		a.load(argLow(0))
		a.jumpIf(bpf.JumpEqual, unix.AF_INET, "inet", "")
		a.jumpIf(bpf.JumpEqual, unix.AF_INET6, "inet", "eperm")
		a.label("inet")
		a.load(argLow(1))
		a.and(sockTypeMask)
		a.jumpIf(bpf.JumpEqual, unix.SOCK_STREAM, "", "eperm")
		a.load(argLow(2))
		a.jumpIf(bpf.JumpEqual, protoByDefault, "allow", "")
		a.jumpIf(bpf.JumpEqual, unix.IPPROTO_TCP, "allow", "eperm")
	case NetHost:
		a.label("socket")
		a.load(argLow(0))
		a.jumpIf(bpf.JumpEqual, unix.AF_INET, "allow", "")
		a.jumpIf(bpf.JumpEqual, unix.AF_INET6, "allow", "eperm")
	}

	// socketpair(family, type, protocol, sv): only a unix stream or
	// seqpacket pair, which takes no destination address on a send. The
	// type's low bits are SOCK_TYPE_MASK's; SOCK_NONBLOCK and SOCK_CLOEXEC
	// are above them.
	a.label("socketpair")
	a.load(argLow(0))
	a.jumpIf(bpf.JumpEqual, unix.AF_UNIX, "", "eperm")
	a.load(argLow(1))
	a.and(sockTypeMask)
	a.jumpIf(bpf.JumpEqual, unix.SOCK_STREAM, "allow", "")
	a.jumpIf(bpf.JumpEqual, unix.SOCK_SEQPACKET, "allow", "eperm")

	// The sends' flags are an unsigned int: the fourth argument of
	// sendto(fd, buf, len, flags, addr, addrlen) and of sendmmsg(fd, msgvec,
	// vlen, flags), the third of sendmsg(fd, msg, flags), which overrides
	// the msg_flags in memory.
	if p.Network == NetTCP {
		a.label("flags3")
		a.load(argLow(3))
		a.jumpIf(bpf.JumpBitsSet, unix.MSG_FASTOPEN, "eperm", "allow")
		a.label("flags2")
		a.load(argLow(2))
		a.jumpIf(bpf.JumpBitsSet, unix.MSG_FASTOPEN, "eperm", "allow")
	}

	// utimensat(dirfd, path, times, flags) changes the times of path, or
	// of dirfd's own file when path is NULL (futimens). The path is a
	// pointer, which the kernel compares whole: a NULL one has both
	// halves zero.
	if p.Metadata != MetadataAll {
		a.label("utimensat")
		a.load(argLow(1))
		a.jumpIf(bpf.JumpEqual, 0, "", "eperm")
		a.load(argHigh(1))
		a.jumpIf(bpf.JumpEqual, 0, "allow", "eperm")
	}

	a.label("allow")
	a.ret(retAllow)
	a.label("eperm")
	a.ret(retEPERM)
	a.label("enosys")
	a.ret(retENOSYS)
	return a.assemble()
}

// route sends one system call number to a label.
type route struct {
	nr uint32
	to string
}

// leafCalls is the most numbers a search compares one by one.
const leafCalls = 3

// search writes a binary search of the numbers of routes (sorted, no two
// the same) for the number in A: a number found goes to its route's
// label, any other to otherwise.
func (a *asm) search(routes []route, otherwise string) {
	if len(routes) == 0 {
		a.jumpIf(bpf.JumpEqual, 0, otherwise, otherwise)
		return
	}
	if len(routes) <= leafCalls {
		for i, r := range routes {
			no := ""
			if i == len(routes)-1 {
				no = otherwise
			}
			a.jumpIf(bpf.JumpEqual, r.nr, r.to, no)
		}
		return
	}
	mid := len(routes) / 2
	upper := fmt.Sprintf("search %d", len(a.insns))
	a.jumpIf(bpf.JumpGreaterOrEqual, routes[mid].nr, upper, "")
	a.search(routes[:mid], otherwise)
	a.label(upper)
	a.search(routes[mid:], otherwise)
}

// asm is a classic BPF program being written whose conditional jumps
// name their targets by label; assemble turns the names into the 8-bit
// forward offsets the instruction set has.
type asm struct {
	insns  []bpf.Instruction
	jumps  []jump
	labels map[string]int // label → index of the instruction it names
}

// jump is a conditional jump waiting for its offsets.
type jump struct {
	at      int    // index of the bpf.JumpIf in insns
	yes, no string // target labels; "" is the next instruction
}

func (a *asm) load(off uint32) { a.insns = append(a.insns, bpf.LoadAbsolute{Off: off, Size: 4}) }

func (a *asm) and(val uint32) {
	a.insns = append(a.insns, bpf.ALUOpConstant{Op: bpf.ALUOpAnd, Val: val})
}

func (a *asm) ret(val uint32) { a.insns = append(a.insns, bpf.RetConstant{Val: val}) }

// jumpIf appends a jump to yes when A cond val holds and to no when not.
func (a *asm) jumpIf(cond bpf.JumpTest, val uint32, yes, no string) {
	a.jumps = append(a.jumps, jump{at: len(a.insns), yes: yes, no: no})
	a.insns = append(a.insns, bpf.JumpIf{Cond: cond, Val: val})
}

// label names the next instruction.
func (a *asm) label(name string) {
	if a.labels == nil {
		a.labels = map[string]int{}
	}
	a.labels[name] = len(a.insns)
}

// assemble resolves the jumps and encodes the program. An unknown label,
// a backward target or one more than 255 instructions ahead is a bug in
// Program; the error says which.
func (a *asm) assemble() ([]bpf.RawInstruction, error) {
	skip := func(from int, name string) (uint8, error) {
		if name == "" {
			return 0, nil
		}
		to, ok := a.labels[name]
		if !ok {
			return 0, fmt.Errorf("seccomp: assemble: jump at %d to unknown label %q", from, name)
		}
		n := to - from - 1
		if n < 0 || n > 255 {
			return 0, fmt.Errorf("seccomp: assemble: jump at %d to %q is %d instructions, outside 0..255", from, name, n)
		}
		return uint8(n), nil
	}
	for _, j := range a.jumps {
		ins := a.insns[j.at].(bpf.JumpIf)
		var err error
		if ins.SkipTrue, err = skip(j.at, j.yes); err != nil {
			return nil, err
		}
		if ins.SkipFalse, err = skip(j.at, j.no); err != nil {
			return nil, err
		}
		a.insns[j.at] = ins
	}
	if len(a.insns) > unix.BPF_MAXINSNS {
		return nil, fmt.Errorf("seccomp: assemble: %d instructions, more than the kernel's %d", len(a.insns), unix.BPF_MAXINSNS)
	}
	prog, err := bpf.Assemble(a.insns)
	if err != nil {
		return nil, fmt.Errorf("seccomp: assemble: %w", err)
	}
	return prog, nil
}
