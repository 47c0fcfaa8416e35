package seccomp

import (
	"fmt"
	"runtime"
	"slices"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
)

// OCI returns the filter of p in the runtime-spec's form, for a runtime
// that builds the program itself (runc and crun, through libseccomp):
// the same calls refused with the same errno as [Program]'s, each
// argument compared on the bits the kernel reads. Two differ, both
// narrower:
//
//   - personality(2) is refused for every persona but PER_LINUX, the
//     query (0xffffffff) included: a rule can compare an argument with
//     one value, and "neither 0 nor 0xffffffff" is two;
//   - a call on another ABI (i386, x32) kills the calling thread rather
//     than being refused: the form names the architectures filtered, and
//     libseccomp kills the others.
//
// And one wider, where it shows: the form names calls, and a runtime
// whose libseccomp does not know a name (one newer than it) leaves that
// call allowed; [Program] refuses by number.
//
// Only [NetNone] is stated: the inet families [NetTCP] and [NetHost]
// allow are an allow-list, which this form (refusals on top of a default
// that allows) cannot state exactly; OCI returns an error for them.
func OCI(p Policy) (*specs.LinuxSeccomp, error) {
	t := nativeTable()
	if t == nil {
		return nil, errUnsupported()
	}
	if p.Network != NetNone {
		return nil, fmt.Errorf("seccomp: the %s network policy has no OCI form here (only none)", p.Network)
	}
	if p.Metadata < MetadataAll || p.Metadata > MetadataNone {
		return nil, fmt.Errorf("seccomp: unknown metadata policy %v", p.Metadata)
	}
	arch := map[string]specs.Arch{"amd64": specs.ArchX86_64, "arm64": specs.ArchAARCH64}[runtime.GOARCH]
	eperm, enosys := uint(unix.EPERM), uint(unix.ENOSYS)
	s := &specs.LinuxSeccomp{DefaultAction: specs.ActAllow, Architectures: []specs.Arch{arch}}
	refuse := func(names []string, args ...specs.LinuxSeccompArg) {
		s.Syscalls = append(s.Syscalls, specs.LinuxSyscall{Names: names, Action: specs.ActErrno, ErrnoRet: &eperm, Args: args})
	}
	// low32 compares the low 32 bits of argument i with v: what the
	// kernel reads of an int or unsigned int.
	low32 := func(i uint, v uint64) specs.LinuxSeccompArg {
		return specs.LinuxSeccompArg{Index: i, Value: 0xffffffff, ValueTwo: v, Op: specs.OpMaskedEqual}
	}
	s.Syscalls = append(s.Syscalls, specs.LinuxSyscall{Names: []string{"clone3"}, Action: specs.ActErrno, ErrnoRet: &enosys})
	refuse(slices.Concat(sortedNames(t.denied), sortedNames(t.deniedMetadata(p.Metadata))))
	if p.Metadata != MetadataAll {
		// A path that is not NULL: a pointer, compared whole.
		refuse([]string{"utimensat"}, specs.LinuxSeccompArg{Index: 1, Value: 0, Op: specs.OpNotEqual})
	}
	// clone(2) with any flag of a new namespace: one rule a flag.
	for bit := uint64(1); bit != 0 && bit <= cloneNamespaces; bit <<= 1 {
		if cloneNamespaces&bit != 0 {
			refuse([]string{"clone"}, specs.LinuxSeccompArg{Index: 0, Value: bit, ValueTwo: bit, Op: specs.OpMaskedEqual})
		}
	}
	refuse([]string{"ioctl"}, low32(1, unix.TIOCSTI))
	refuse([]string{"ioctl"}, low32(1, unix.TIOCLINUX))
	refuse([]string{"personality"}, specs.LinuxSeccompArg{Index: 0, Value: perLinux, Op: specs.OpNotEqual})
	refuse([]string{"socket"})
	// socketpair(2): AF_UNIX alone (a family with high bits set is
	// refused too), of type SOCK_STREAM or SOCK_SEQPACKET.
	refuse([]string{"socketpair"}, specs.LinuxSeccompArg{Index: 0, Value: unix.AF_UNIX, Op: specs.OpNotEqual})
	for typ := uint64(0); typ <= sockTypeMask; typ++ {
		if typ != unix.SOCK_STREAM && typ != unix.SOCK_SEQPACKET {
			refuse([]string{"socketpair"}, specs.LinuxSeccompArg{Index: 1, Value: sockTypeMask, ValueTwo: typ, Op: specs.OpMaskedEqual})
		}
	}
	return s, nil
}
