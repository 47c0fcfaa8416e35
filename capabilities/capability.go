package capabilities

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"
)

// Kind is the part of a capability before its first colon.
type Kind string

// The kinds of the vocabulary, in canonical order.
const (
	KindFSRead     Kind = "fs.read"
	KindFSWrite    Kind = "fs.write"
	KindNet        Kind = "net"
	KindNetConnect Kind = "net.connect"
	KindEnv        Kind = "env"
	KindTime       Kind = "time"
	KindOutput     Kind = "output"
	KindMemory     Kind = "memory"
	KindTmp        Kind = "tmp"
	KindPids       Kind = "pids"
	KindCPU        Kind = "cpu"
	KindWasmImport Kind = "wasm.import"
)

// Kinds lists every kind in canonical order.
func Kinds() []Kind {
	return []Kind{KindFSRead, KindFSWrite, KindNet, KindNetConnect, KindEnv, KindTime, KindOutput, KindMemory, KindTmp, KindPids, KindCPU, KindWasmImport}
}

func (k Kind) rank() int {
	for i, kk := range Kinds() {
		if k == kk {
			return i
		}
	}
	return len(Kinds())
}

// Limits of the vocabulary. Values beyond them are errors, never clamped.
const (
	MaxDuration = 24 * time.Hour // time:
	MaxSize     = int64(1) << 40 // output:, memory: (1TiB)
	MaxPids     = 65536          // pids:
	MaxPort     = 65535          // net.connect:tcp:
	MaxNameLen  = 128            // env names, wasm module and function names
	MaxHostLen  = 253            // net.connect:host:
	MaxLen      = 512            // a whole capability string
)

// Scopes and arguments with one spelling.
const (
	ScopeWorkspace = "workspace" // fs.read:workspace, fs.write:workspace
	NetNone        = "none"      // net:none
	NetHost        = "host"      // net:host
	ConnectTCP     = "tcp"       // net.connect:tcp:PORT
	ConnectHost    = "host"      // net.connect:host:NAME
)

// Sentinels for [errors.Is]; every error of the package is an [*Error]
// wrapping one of them.
var (
	ErrSyntax    = errors.New("malformed capability")
	ErrUnknown   = errors.New("unknown capability")
	ErrRange     = errors.New("capability value out of range")
	ErrDuplicate = errors.New("duplicate capability")
	ErrConflict  = errors.New("conflicting capabilities")
)

// Error is a capability that cannot be parsed, or a set that cannot hold it.
type Error struct {
	Input  string // the capability as given (shortened when very long)
	Err    error  // ErrSyntax, ErrUnknown, ErrRange, ErrDuplicate or ErrConflict
	Reason string // what is wrong and what would be right
}

func (e *Error) Error() string {
	return fmt.Sprintf("capability %q: %s", e.Input, e.Reason)
}

func (e *Error) Unwrap() error { return e.Err }

func fail(input string, err error, format string, args ...any) *Error {
	return &Error{Input: shorten(input), Err: err, Reason: fmt.Sprintf(format, args...)}
}

// shorten bounds text quoted back in messages.
func shorten(s string) string {
	const max = 80
	if len(s) <= max {
		return s
	}
	return s[:max] + "…"
}

// Capability is one thing a tool may do. It is a comparable value: two
// spellings of one capability ("output:65536", "output:64KiB") parse to
// equal values. The zero Capability is not a capability.
type Capability struct {
	kind Kind
	arg  string // canonical argument, the text after "kind:"
	num  int64  // port, bytes, nanoseconds or count, by kind
}

// Kind returns the capability's kind.
func (c Capability) Kind() Kind { return c.kind }

// Arg returns the canonical text after the kind and its colon.
func (c Capability) Arg() string { return c.arg }

// IsZero reports whether c is the zero Capability.
func (c Capability) IsZero() bool { return c.kind == "" }

// String returns the canonical spelling, e.g. "output:64KiB".
func (c Capability) String() string {
	if c.kind == "" {
		return ""
	}
	return string(c.kind) + ":" + c.arg
}

// Port returns the port of net.connect:tcp:PORT, or 0.
func (c Capability) Port() int {
	if c.kind == KindNetConnect && strings.HasPrefix(c.arg, ConnectTCP+":") {
		return int(c.num)
	}
	return 0
}

// Host returns the host and port of net.connect:host:TARGET ("*.example.com"
// and 0 for any port), or "" and 0.
func (c Capability) Host() (string, int) {
	if c.kind != KindNetConnect || !strings.HasPrefix(c.arg, ConnectHost+":") {
		return "", 0
	}
	t := strings.TrimPrefix(c.arg, ConnectHost+":")
	if c.num == 0 {
		return t, 0
	}
	h, _, _ := net.SplitHostPort(t)
	return h, int(c.num)
}

// Size returns the bytes of output:, memory: or tmp:, or 0.
func (c Capability) Size() int64 {
	if c.kind == KindOutput || c.kind == KindMemory || c.kind == KindTmp {
		return c.num
	}
	return 0
}

// Duration returns the limit of time: or cpu:, or 0.
func (c Capability) Duration() time.Duration {
	if c.kind == KindTime || c.kind == KindCPU {
		return time.Duration(c.num)
	}
	return 0
}

// Count returns N of pids:N, or 0.
func (c Capability) Count() int {
	if c.kind == KindPids {
		return int(c.num)
	}
	return 0
}

// Name returns the variable of env:NAME, the host of
// net.connect:host:NAME, or "".
func (c Capability) Name() string {
	switch {
	case c.kind == KindEnv:
		return c.arg
	case c.kind == KindNetConnect && strings.HasPrefix(c.arg, ConnectHost+":"):
		return strings.TrimPrefix(c.arg, ConnectHost+":")
	}
	return ""
}

// Import returns the module and function of wasm.import:MODULE/NAME.
func (c Capability) Import() (module, name string) {
	if c.kind != KindWasmImport {
		return "", ""
	}
	module, name, _ = strings.Cut(c.arg, "/")
	return module, name
}

// MarshalText returns the canonical spelling.
func (c Capability) MarshalText() ([]byte, error) {
	if c.IsZero() {
		return nil, errors.New("capabilities: the zero Capability has no spelling")
	}
	return []byte(c.String()), nil
}

// UnmarshalText parses text with [Parse].
func (c *Capability) UnmarshalText(text []byte) error {
	p, err := Parse(string(text))
	if err != nil {
		return err
	}
	*c = p
	return nil
}

// Parse parses one capability string. Errors are [*Error] values wrapping
// [ErrSyntax], [ErrUnknown] or [ErrRange].
func Parse(s string) (Capability, error) {
	if len(s) > MaxLen {
		return Capability{}, fail(s, ErrSyntax, "longer than %d bytes", MaxLen)
	}
	kind, arg, ok := strings.Cut(s, ":")
	if !ok {
		return Capability{}, fail(s, ErrSyntax, "a capability is KIND:VALUE, e.g. fs.read:workspace or time:10s")
	}
	switch Kind(kind) {
	case KindFSRead, KindFSWrite:
		if arg != ScopeWorkspace {
			return Capability{}, fail(s, ErrUnknown, "the only scope of %s is workspace (%s:workspace); paths outside the workspace cannot be granted", kind, kind)
		}
		return Capability{kind: Kind(kind), arg: arg}, nil
	case KindNet:
		if arg != NetNone && arg != NetHost {
			return Capability{}, fail(s, ErrUnknown, "net is net:none or net:host; for one port ask for net.connect:tcp:PORT")
		}
		return Capability{kind: KindNet, arg: arg}, nil
	case KindNetConnect:
		return parseConnect(s, arg)
	case KindEnv:
		if err := checkEnvName(arg); err != "" {
			return Capability{}, fail(s, ErrSyntax, "%s", err)
		}
		return Capability{kind: KindEnv, arg: arg}, nil
	case KindTime:
		d, err := ParseDuration(arg)
		if err != nil {
			return Capability{}, wrapValue(s, err)
		}
		return TimeLimit(d)
	case KindCPU:
		d, err := ParseDuration(arg)
		if err != nil {
			return Capability{}, wrapValue(s, err)
		}
		return CPULimit(d)
	case KindOutput, KindMemory, KindTmp:
		n, err := ParseSize(arg)
		if err != nil {
			return Capability{}, wrapValue(s, err)
		}
		return sizeLimit(Kind(kind), n)
	case KindPids:
		n, err := parseCount(arg, MaxPids)
		if err != nil {
			return Capability{}, wrapValue(s, err)
		}
		return PidsLimit(int(n))
	case KindWasmImport:
		module, name, ok := strings.Cut(arg, "/")
		if !ok {
			return Capability{}, fail(s, ErrSyntax, "a host function is wasm.import:MODULE/NAME, e.g. wasm.import:cordon/log")
		}
		return Import(module, name)
	}
	return Capability{}, fail(s, ErrUnknown, "unknown kind %q; the kinds are %s", shorten(kind), kindList())
}

func kindList() string {
	var names []string
	for _, k := range Kinds() {
		names = append(names, string(k))
	}
	return strings.Join(names, ", ")
}

// wrapValue turns a value error into an *Error about the whole capability.
func wrapValue(s string, err error) error {
	var ve *valueError
	if errors.As(err, &ve) {
		return fail(s, ve.err, "%s", ve.reason)
	}
	return fail(s, ErrSyntax, "%v", err)
}

// valueError is an error of ParseSize or ParseDuration; it prints as its
// reason and unwraps to ErrSyntax or ErrRange.
type valueError struct {
	err    error
	reason string
}

func (e *valueError) Error() string { return e.reason }
func (e *valueError) Unwrap() error { return e.err }

func parseConnect(s, arg string) (Capability, error) {
	proto, target, ok := strings.Cut(arg, ":")
	if !ok {
		return Capability{}, fail(s, ErrSyntax, "write net.connect:tcp:PORT or net.connect:host:NAME")
	}
	switch proto {
	case ConnectTCP:
		n, err := parseCount(target, MaxPort)
		if err != nil {
			return Capability{}, wrapValue(s, err)
		}
		return ConnectTCPPort(int(n))
	case ConnectHost:
		return ConnectToHost(target)
	}
	return Capability{}, fail(s, ErrUnknown, "net.connect takes tcp:PORT or host:NAME, not %q", shorten(proto))
}

// parseCount parses a decimal number in 1..max: digits only, no sign, no
// leading zero.
func parseCount(s string, max int64) (int64, error) {
	if s == "" || strings.TrimLeft(s, "0123456789") != "" {
		return 0, &valueError{ErrSyntax, fmt.Sprintf("%q is not a whole number (write digits only, 1 to %d)", shorten(s), max)}
	}
	if len(s) > 1 && s[0] == '0' {
		return 0, &valueError{ErrSyntax, fmt.Sprintf("%q has a leading zero (write digits only, 1 to %d)", shorten(s), max)}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 1 || n > max {
		return 0, &valueError{ErrRange, fmt.Sprintf("%s is out of range: it must be 1 to %d", shorten(s), max)}
	}
	return n, nil
}

// ReadWorkspace returns fs.read:workspace.
func ReadWorkspace() Capability { return Capability{kind: KindFSRead, arg: ScopeWorkspace} }

// WriteWorkspace returns fs.write:workspace.
func WriteWorkspace() Capability { return Capability{kind: KindFSWrite, arg: ScopeWorkspace} }

// NoNet returns net:none.
func NoNet() Capability { return Capability{kind: KindNet, arg: NetNone} }

// HostNet returns net:host.
func HostNet() Capability { return Capability{kind: KindNet, arg: NetHost} }

// ConnectTCPPort returns net.connect:tcp:PORT.
func ConnectTCPPort(port int) (Capability, error) {
	if port < 1 || port > MaxPort {
		return Capability{}, fail("net.connect:tcp:"+strconv.Itoa(port), ErrRange, "port %d is out of range: it must be 1 to %d", port, MaxPort)
	}
	return Capability{kind: KindNetConnect, arg: ConnectTCP + ":" + strconv.Itoa(port), num: int64(port)}, nil
}

// ConnectToHost returns net.connect:host:TARGET, where TARGET is a DNS
// name, "*." and a domain (every name below it, never the domain
// itself), or an IP address ("[...]" for IPv6 with a port), each with an
// optional ":PORT". Names are lowercased.
func ConnectToHost(target string) (Capability, error) {
	in := "net.connect:host:" + target
	host, port := target, 0
	if h, p, err := net.SplitHostPort(target); err == nil {
		n, err := parseCount(p, MaxPort)
		if err != nil {
			return Capability{}, wrapValue(in, err)
		}
		host, port = h, int(n)
	} else if strings.HasPrefix(target, "[") {
		return Capability{}, fail(in, ErrSyntax, "an IPv6 address in brackets takes a port: [ADDRESS]:PORT, or the address alone")
	}
	withPort := func(h string) string {
		if port == 0 {
			return h
		}
		return net.JoinHostPort(h, strconv.Itoa(port))
	}
	if a, err := netip.ParseAddr(host); err == nil {
		if a.Zone() != "" {
			return Capability{}, fail(in, ErrSyntax, "an address with a zone cannot be granted")
		}
		return Capability{kind: KindNetConnect, arg: ConnectHost + ":" + withPort(a.Unmap().String()), num: int64(port)}, nil
	}
	name, wild := strings.CutPrefix(host, "*.")
	if reason := checkHostName(name); reason != "" {
		return Capability{}, fail(in, ErrSyntax, "%s", reason)
	}
	if wild && !strings.Contains(name, ".") {
		return Capability{}, fail(in, ErrSyntax, "a wildcard covers the names below a domain of two labels or more (*.example.com), not a top-level domain")
	}
	if last := name[strings.LastIndexByte(name, '.')+1:]; strings.Trim(last, "0123456789") == "" {
		return Capability{}, fail(in, ErrSyntax, "a numeric host is an address in another spelling: grant the address itself")
	}
	if wild {
		name = "*." + name
	}
	return Capability{kind: KindNetConnect, arg: ConnectHost + ":" + withPort(strings.ToLower(name)), num: int64(port)}, nil
}

func checkHostName(name string) string {
	if name == "" || len(name) > MaxHostLen {
		return fmt.Sprintf("a host name is 1 to %d characters", MaxHostLen)
	}
	for _, label := range strings.Split(name, ".") {
		if label == "" || len(label) > 63 {
			return "every label of a host name is 1 to 63 characters"
		}
		if label[0] == '-' || label[len(label)-1] == '-' {
			return "a host name label cannot start or end with '-'"
		}
		for i := 0; i < len(label); i++ {
			b := label[i]
			if !(b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' || b == '-') {
				return "a host name has letters, digits, '-' and '.' only"
			}
		}
	}
	return ""
}

// EnvVar returns env:NAME. A name is [A-Za-z_][A-Za-z0-9_]*. Whether a
// name can be granted is for admission to decide; this only checks the
// spelling.
func EnvVar(name string) (Capability, error) {
	if reason := checkEnvName(name); reason != "" {
		return Capability{}, fail("env:"+name, ErrSyntax, "%s", reason)
	}
	return Capability{kind: KindEnv, arg: name}, nil
}

func checkEnvName(name string) string {
	if name == "" || len(name) > MaxNameLen {
		return fmt.Sprintf("an environment variable name is 1 to %d characters", MaxNameLen)
	}
	for i := 0; i < len(name); i++ {
		b := name[i]
		if !(b >= 'A' && b <= 'Z' || b >= 'a' && b <= 'z' || b == '_' || i > 0 && b >= '0' && b <= '9') {
			return "an environment variable name is [A-Za-z_][A-Za-z0-9_]*"
		}
	}
	return ""
}

// TimeLimit returns time:DURATION for 0 < d ≤ [MaxDuration].
func TimeLimit(d time.Duration) (Capability, error) {
	if d <= 0 || d > MaxDuration {
		return Capability{}, fail("time:"+d.String(), ErrRange, "a time limit must be more than 0 and at most %s", FormatDuration(MaxDuration))
	}
	return Capability{kind: KindTime, arg: FormatDuration(d), num: int64(d)}, nil
}

// CPULimit returns cpu:DURATION, processor time, for 0 < d ≤
// [MaxDuration]. Time limits count the wall clock; this counts what the
// tool's processes spend on a processor.
func CPULimit(d time.Duration) (Capability, error) {
	if d <= 0 || d > MaxDuration {
		return Capability{}, fail("cpu:"+d.String(), ErrRange, "a processor time limit must be more than 0 and at most %s", FormatDuration(MaxDuration))
	}
	return Capability{kind: KindCPU, arg: FormatDuration(d), num: int64(d)}, nil
}

// OutputLimit returns output:SIZE for 0 < n ≤ [MaxSize].
func OutputLimit(n int64) (Capability, error) { return sizeLimit(KindOutput, n) }

// MemoryLimit returns memory:SIZE for 0 < n ≤ [MaxSize].
func MemoryLimit(n int64) (Capability, error) { return sizeLimit(KindMemory, n) }

// TmpLimit returns tmp:SIZE, the cap of a native tool's /tmp.
func TmpLimit(n int64) (Capability, error) { return sizeLimit(KindTmp, n) }

func sizeLimit(k Kind, n int64) (Capability, error) {
	if n <= 0 || n > MaxSize {
		return Capability{}, fail(string(k)+":"+strconv.FormatInt(n, 10), ErrRange, "a size must be more than 0 and at most %s", FormatSize(MaxSize))
	}
	return Capability{kind: k, arg: FormatSize(n), num: n}, nil
}

// PidsLimit returns pids:N for 1 ≤ n ≤ [MaxPids].
func PidsLimit(n int) (Capability, error) {
	if n < 1 || n > MaxPids {
		return Capability{}, fail("pids:"+strconv.Itoa(n), ErrRange, "a process limit must be 1 to %d", MaxPids)
	}
	return Capability{kind: KindPids, arg: strconv.Itoa(n), num: int64(n)}, nil
}

// Import returns wasm.import:MODULE/NAME. Module and function names are 1
// to [MaxNameLen] characters of [A-Za-z0-9_.$-].
func Import(module, name string) (Capability, error) {
	in := "wasm.import:" + module + "/" + name
	for _, part := range []string{module, name} {
		if part == "" || len(part) > MaxNameLen {
			return Capability{}, fail(in, ErrSyntax, "module and function names are 1 to %d characters", MaxNameLen)
		}
		for i := 0; i < len(part); i++ {
			b := part[i]
			if !(b >= 'A' && b <= 'Z' || b >= 'a' && b <= 'z' || b >= '0' && b <= '9' || b == '_' || b == '.' || b == '$' || b == '-') {
				return Capability{}, fail(in, ErrSyntax, "module and function names have letters, digits and _.$- only")
			}
		}
	}
	return Capability{kind: KindWasmImport, arg: module + "/" + name}, nil
}
