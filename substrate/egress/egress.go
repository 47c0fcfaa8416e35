// Package egress is the filtering proxy that makes network access by name
// enforceable: a sandbox that has no network of its own (net:none) reaches
// the granted hosts through it and nothing else.
//
// The proxy speaks HTTP CONNECT (the tool's TLS goes end to end, never
// intercepted) and plain HTTP in absolute form, read with the standard
// library's parsers. It decides on the name it will connect to, and then
// connects to what it decided:
//
//   - a name is canonicalised (lower case) and refused where it cannot be:
//     an IP literal or a numeric, octal or hexadecimal host that a
//     resolver would read as one, a trailing dot, a non-ASCII (IDN) name,
//     a NUL or other control byte, userinfo, a label out of the DNS's
//     syntax;
//   - it must match a rule: an exact name, or "*.suffix" (any name below
//     the suffix, never the suffix itself nor a sibling such as
//     "badsuffix"), with the rule's port or any;
//   - the proxy resolves the name itself and refuses it when any address
//     it resolves to is loopback, private, link-local, multicast,
//     unspecified, shared (CGNAT), reserved, or a cloud metadata address
//     — also inside an IPv4-mapped, NAT64 or 6to4 address — unless a rule
//     names that address itself; it then dials the address it checked, so
//     a second answer (DNS rebinding) never reaches the dial;
//   - a CONNECT whose Host header names another host than its target, and
//     a request that is not in proxy form, are refused;
//   - tunnels close when idle and at a maximum age.
//
// Every decision is an [Event] of the proxy's log: allowed or refused, the
// name, the port, the address, the reason, the bytes each way.
//
// # Limitations
//
// The sandbox integration (the socket bound into a sandbox, the forwarder
// inside it, the proxy variables), admission of net.connect:host with a
// port or a wildcard, the probe and the CLI's --allow-host are not built
// yet: nothing grants a tool this mechanism. SOCKS5 is not spoken.
package egress

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/textproto"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// A Rule allows connections to one name, every name below a suffix, every
// name ("*"), or one address, at one port or at any (Port 0).
type Rule struct {
	Host string // "example.com", "*.example.com", "*" or an address, canonical
	Port int
}

func (r Rule) String() string {
	if r.Port == 0 {
		return r.Host
	}
	return net.JoinHostPort(r.Host, strconv.Itoa(r.Port))
}

// ParseRule reads NAME, *.SUFFIX or ADDRESS, each with an optional :PORT
// ("[ADDRESS]:PORT" for IPv6).
func ParseRule(s string) (Rule, error) {
	host, port := s, 0
	if h, p, err := net.SplitHostPort(s); err == nil {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 || strconv.Itoa(n) != p {
			return Rule{}, fmt.Errorf("egress: rule %q: the port is 1 to 65535", s)
		}
		host, port = h, n
	}
	if a, err := netip.ParseAddr(host); err == nil {
		if a.Zone() != "" {
			return Rule{}, fmt.Errorf("egress: rule %q: an address with a zone", s)
		}
		return Rule{Host: a.Unmap().String(), Port: port}, nil
	}
	name, wild := strings.CutPrefix(host, "*.")
	canon, why := canonicalName(name)
	if why != "" {
		return Rule{}, fmt.Errorf("egress: rule %q: %s", s, why)
	}
	if wild {
		if !strings.Contains(canon, ".") {
			return Rule{}, fmt.Errorf("egress: rule %q: a wildcard covers names below a domain of two labels or more, not a top-level domain", s)
		}
		canon = "*." + canon
	}
	return Rule{Host: canon, Port: port}, nil
}

// canonicalName returns the lower-case form of a DNS name, or why it is
// refused: empty, too long, a trailing dot, a byte outside letters, digits,
// '-' and '.', a label out of syntax, or a last label a resolver could read
// as a number (127.1, 0x7f.1, 2130706433, 0177.0.0.1).
func canonicalName(s string) (string, string) {
	switch {
	case s == "":
		return "", "no host name"
	case len(s) > 253:
		return "", "a host name is at most 253 characters"
	case strings.HasSuffix(s, "."):
		return "", "a trailing dot: give the name without it"
	}
	for i := 0; i < len(s); i++ {
		b := s[i]
		switch {
		case b == 0:
			return "", "a NUL byte in the host name"
		case b < 0x20 || b == 0x7f:
			return "", "a control byte in the host name"
		case b >= 0x80:
			return "", "a non-ASCII (IDN) name: grant and use its ASCII form (xn--...)"
		case !(b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' || b == '-' || b == '.'):
			return "", fmt.Sprintf("%q in the host name: names have letters, digits, '-' and '.' only", b)
		}
	}
	labels := strings.Split(strings.ToLower(s), ".")
	for _, l := range labels {
		if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return "", "a label of the host name is empty, over 63 characters, or starts or ends with '-'"
		}
	}
	if last := labels[len(labels)-1]; strings.Trim(last, "0123456789") == "" || strings.HasPrefix(last, "0x") {
		return "", "a numeric host (an address in another spelling): grant and use the address itself"
	}
	return strings.Join(labels, "."), ""
}

// Config configures a [Proxy].
type Config struct {
	Rules []Rule
	// Resolver resolves names (nil: net.DefaultResolver).
	Resolver interface {
		LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
	}
	// AllowInternal lifts the refusal of loopback, private and the other
	// internal addresses for every rule: for tests on loopback only.
	AllowInternal bool
	// DialTimeout bounds a connection to an upstream (zero: 10 s); Idle
	// closes a tunnel or request without a byte either way for that long
	// (zero: 2 min); MaxAge closes any tunnel that old (zero: 1 h).
	DialTimeout, Idle, MaxAge time.Duration
	// MaxConns bounds the client connections served at once (zero: 256):
	// one more is closed at once, and logged.
	MaxConns int
	// Now is the clock of the log (nil: time.Now).
	Now func() time.Time
}

// An Event is one decision of the proxy.
type Event struct {
	Time    time.Time `json:"time"`
	Method  string    `json:"method"` // CONNECT, GET, ...
	Name    string    `json:"name"`   // as asked
	Port    int       `json:"port"`
	Addr    string    `json:"addr,omitempty"` // the address dialled
	Allowed bool      `json:"allowed"`
	Reason  string    `json:"reason,omitempty"` // why it was refused, or the rule that allowed it
	Up      int64     `json:"up,omitempty"`     // bytes to the upstream
	Down    int64     `json:"down,omitempty"`   // bytes from it
}

// Proxy is the filtering proxy. Serve it on a listener (a unix socket a
// sandbox reaches); Events returns its log.
type Proxy struct {
	cfg Config

	mu      sync.Mutex
	events  []Event
	dropped int                   // events past maxEvents, not kept
	open    map[net.Conn]struct{} // client and upstream connections, closed when the service ends
	clients int                   // client connections being served
	conns   sync.WaitGroup
	self    []netip.Addr  // this host's own addresses, refused unless a rule names them
	selfErr error         // why they could not be listed: every name is refused then
	large   chan struct{} // a token per large copy buffer in use (at most maxLarge)
}

// maxEvents bounds the log; maxField each name and reason in it.
const (
	maxEvents = 1000
	maxField  = 256
)

// New returns a proxy of cfg.
func New(cfg Config) *Proxy {
	if cfg.Resolver == nil {
		cfg.Resolver = net.DefaultResolver
	}
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = 10 * time.Second
	}
	if cfg.Idle <= 0 {
		cfg.Idle = 2 * time.Minute
	}
	if cfg.MaxAge <= 0 {
		cfg.MaxAge = time.Hour
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.MaxConns <= 0 {
		cfg.MaxConns = 256
	}
	p := &Proxy{cfg: cfg, open: map[net.Conn]struct{}{}, large: make(chan struct{}, maxLarge)}
	addrs, err := net.InterfaceAddrs()
	p.selfErr = err
	if err == nil {
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok {
				if ip, ok := netip.AddrFromSlice(n.IP); ok {
					p.self = append(p.self, ip.Unmap())
				}
			}
		}
	}
	return p
}

// Events returns the log so far: at most 1000 events, each name and
// reason cut at 256 bytes; Dropped says how many more there were.
func (p *Proxy) Events() []Event {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.events)
}

// Dropped returns the number of events past the log's bound.
func (p *Proxy) Dropped() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.dropped
}

// clip cuts s at maxField bytes and writes its control bytes and
// non-ASCII as \xNN: the fields come from the sandbox, and are printed on
// the caller's terminal.
func clip(s string) string {
	if len(s) > maxField {
		s = s[:maxField] + "..."
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f {
			fmt.Fprintf(&b, "\\x%02x", c)
		} else {
			b.WriteByte(c)
		}
	}
	return b.String()
}

// record logs e and returns its index, or -1 past the log's bound.
func (p *Proxy) record(e Event) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.events) >= maxEvents {
		p.dropped++
		return -1
	}
	e.Time = p.cfg.Now().UTC()
	e.Name, e.Reason = clip(e.Name), clip(e.Reason)
	p.events = append(p.events, e)
	return len(p.events) - 1
}

func (p *Proxy) addBytes(i int, up, down int64) {
	if i < 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.events[i].Up += up
	p.events[i].Down += down
}

// track keeps c until untrack, to be closed should the service end
// first; false: the service has ended, and c is closed.
func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.open == nil {
		c.Close()
		return false
	}
	p.open[c] = struct{}{}
	return true
}

func (p *Proxy) untrack(c net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.open, c)
}

// closeAll closes every connection being served.
func (p *Proxy) closeAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.open {
		c.Close()
	}
	p.open = nil // connections tracked from now on are closed at once
}

// admit counts a new client connection, or closes it past MaxConns.
func (p *Proxy) admit(c net.Conn) bool {
	p.mu.Lock()
	over := p.clients >= p.cfg.MaxConns
	if !over {
		p.clients++
	}
	p.mu.Unlock()
	if over {
		p.record(Event{Method: "-", Reason: fmt.Sprintf("over %d connections at once: closed", p.cfg.MaxConns)})
		c.Close()
		return false
	}
	return true
}

func (p *Proxy) release() {
	p.mu.Lock()
	p.clients--
	p.mu.Unlock()
}

// serveClient serves one client connection under the bounds.
func (p *Proxy) serveClient(ctx context.Context, c net.Conn) {
	if !p.admit(c) {
		return
	}
	defer p.release()
	if !p.track(c) {
		return
	}
	defer p.untrack(c)
	p.serveConn(ctx, c)
}

// Serve accepts connections on ln until ctx ends or ln fails, serving
// each; it returns once every connection it served is closed.
func (p *Proxy) Serve(ctx context.Context, ln net.Listener) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		<-ctx.Done()
		ln.Close()
		p.closeAll()
	}()
	defer p.conns.Wait()
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		p.conns.Add(1)
		go func() {
			defer p.conns.Done()
			p.serveClient(ctx, c)
		}()
	}
}

// maxHead bounds a request's line and headers.
const maxHead = 16 << 10

// A refusal is a decision against a request: its status and reason.
type refusal struct {
	status int
	reason string
}

func (r *refusal) Error() string { return r.reason }

func refuse(status int, format string, args ...any) error {
	return &refusal{status: status, reason: fmt.Sprintf(format, args...)}
}

// serveConn serves the requests of one client connection: one CONNECT
// tunnel, plain HTTP requests one after another, or one SOCKS5 tunnel.
func (p *Proxy) serveConn(ctx context.Context, c net.Conn) {
	defer c.Close()
	// Every read, of a request's head or of its body, waits at most
	// Idle, and none goes on past MaxAge from now: plain requests one
	// after another on one connection, or a body that trickles in, end
	// there as a tunnel does.
	until := time.Now().Add(p.cfg.MaxAge)
	br := bufio.NewReaderSize(&idleReader{c: c, idle: p.cfg.Idle, until: until}, maxHead)
	if first, err := br.Peek(1); err == nil && first[0] == socksVersion {
		p.socks(ctx, c, br)
		return
	}
	for {
		hosts, err := hostHeaders(br)
		if err != nil {
			if !errors.Is(err, io.EOF) {
				writeRefusal(c, refuse(http.StatusBadRequest, "%v", err))
			}
			return
		}
		req, err := http.ReadRequest(br)
		if err != nil {
			writeRefusal(c, refuse(http.StatusBadRequest, "not an HTTP request: %v", err))
			return
		}
		if req.Method == http.MethodConnect {
			p.tunnel(ctx, c, br, req, hosts)
			return
		}
		if !p.forward(ctx, c, req, hosts, until) {
			return
		}
	}
}

// idleReader reads c with a deadline of idle from each read, and never
// past until.
type idleReader struct {
	c     net.Conn
	idle  time.Duration
	until time.Time
}

func (r *idleReader) Read(b []byte) (int, error) {
	r.c.SetReadDeadline(minTime(time.Now().Add(r.idle), r.until))
	return r.c.Read(b)
}

// hostHeaders returns the Host header values of the request at the head
// of br, read from its peeked header block with textproto (the request
// parser keeps only one Host and drops it when the target names a host).
func hostHeaders(br *bufio.Reader) ([]string, error) {
	for n := 1; ; n = br.Buffered() + 1 {
		if n > maxHead {
			return nil, fmt.Errorf("the request's line and headers are over %d bytes", maxHead)
		}
		// Waits for one byte more than has come, then looks at all that has.
		if _, err := br.Peek(n); err != nil {
			if br.Buffered() == 0 && errors.Is(err, io.EOF) {
				return nil, io.EOF
			}
			return nil, fmt.Errorf("the request ended in its headers: %v", err)
		}
		head, _ := br.Peek(br.Buffered())
		if i := bytes.Index(head, []byte("\r\n\r\n")); i >= 0 {
			tp := textproto.NewReader(bufio.NewReader(bytes.NewReader(head[:i+4])))
			if _, err := tp.ReadLine(); err != nil {
				return nil, err
			}
			h, err := tp.ReadMIMEHeader()
			if err != nil {
				return nil, fmt.Errorf("the request's headers: %v", err)
			}
			return h.Values("Host"), nil
		}
	}
}

func writeRefusal(w io.Writer, err error) {
	r, ok := err.(*refusal)
	if !ok {
		r = &refusal{status: http.StatusBadGateway, reason: err.Error()}
	}
	body := "cordon egress: " + r.reason + "\n"
	fmt.Fprintf(w, "HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
		r.status, http.StatusText(r.status), len(body), body)
}

// target checks a request's target: host and port, the Host headers
// agreeing with it, no userinfo.
func target(authority string, hosts []string, defaultPort int) (string, int, error) {
	if strings.ContainsAny(authority, "@") {
		return "", 0, refuse(http.StatusForbidden, "userinfo in the target %q", authority)
	}
	host, portStr, err := net.SplitHostPort(authority)
	if err != nil {
		if defaultPort == 0 {
			return "", 0, refuse(http.StatusBadRequest, "the target %q is not HOST:PORT", authority)
		}
		host, portStr = authority, strconv.Itoa(defaultPort)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil || port < 1 || port > 65535 || strconv.Itoa(port) != portStr {
		return "", 0, refuse(http.StatusBadRequest, "the target's port %q", portStr)
	}
	for _, h := range hosts {
		hh, hp, err := net.SplitHostPort(h)
		if err != nil {
			hh, hp = h, strconv.Itoa(port)
		}
		if !strings.EqualFold(hh, host) || hp != strconv.Itoa(port) {
			return "", 0, refuse(http.StatusForbidden, "the Host header %q disagrees with the target %q", h, authority)
		}
	}
	return host, port, nil
}

// decide resolves and checks host:port against the rules. It returns the
// addresses to dial (each checked) and the rule that allowed it.
func (p *Proxy) decide(ctx context.Context, host string, port int) ([]netip.Addr, Rule, error) {
	if a, err := netip.ParseAddr(strings.Trim(host, "[]")); err == nil {
		a = a.Unmap()
		for _, r := range p.cfg.Rules {
			if r.Host == a.String() && (r.Port == 0 || r.Port == port) {
				return []netip.Addr{a}, r, nil
			}
		}
		return nil, Rule{}, refuse(http.StatusForbidden, "the address %s is not granted: connections go to names, or to an address a grant names", a)
	}
	name, why := canonicalName(host)
	if why != "" {
		return nil, Rule{}, refuse(http.StatusForbidden, "%q: %s", host, why)
	}
	if p.selfErr != nil && !p.cfg.AllowInternal {
		return nil, Rule{}, refuse(http.StatusBadGateway, "cannot list this host's own addresses, which a name must not resolve to: %v", p.selfErr)
	}
	var rule *Rule
	for i, r := range p.cfg.Rules {
		if (r.Port == 0 || r.Port == port) && matches(r.Host, name) {
			rule = &p.cfg.Rules[i]
			break
		}
	}
	if rule == nil {
		return nil, Rule{}, refuse(http.StatusForbidden, "%s:%d is not granted", name, port)
	}
	ctx, cancel := context.WithTimeout(ctx, p.cfg.DialTimeout)
	defer cancel()
	// Rooted (a trailing dot): the resolver's search domains do not apply.
	addrs, err := p.cfg.Resolver.LookupNetIP(ctx, "ip", name+".")
	if err != nil || len(addrs) == 0 {
		return nil, *rule, refuse(http.StatusBadGateway, "%s does not resolve: %v", name, err)
	}
	for i, a := range addrs {
		a = a.Unmap()
		addrs[i] = a
		why := internal(a)
		if why == "" && slices.Contains(p.self, a) {
			why = "an address of this host"
		}
		if why != "" && !p.cfg.AllowInternal {
			return nil, *rule, refuse(http.StatusForbidden, "%s resolves to %s, %s: refused (a grant may name that address itself)", name, a, why)
		}
	}
	return addrs, *rule, nil
}

// matches reports whether the rule's host covers name: equal, or "*.S"
// and name ends in ".S" with at least one label before it.
func matches(ruleHost, name string) bool {
	if ruleHost == "*" {
		return true // any name (net.connect:tcp:PORT), never an address
	}
	if suffix, ok := strings.CutPrefix(ruleHost, "*."); ok {
		return strings.HasSuffix(name, "."+suffix) && len(name) > len(suffix)+1
	}
	return ruleHost == name
}

var internalNets = func() []struct {
	p   netip.Prefix
	why string
} {
	var out []struct {
		p   netip.Prefix
		why string
	}
	for _, n := range []struct{ cidr, why string }{
		{"0.0.0.0/8", "this network"},
		{"100.64.0.0/10", "shared address space (CGNAT)"},
		{"192.0.0.0/24", "IETF protocol assignments"},
		{"192.0.2.0/24", "documentation"},
		{"198.18.0.0/15", "benchmarking"},
		{"198.51.100.0/24", "documentation"},
		{"203.0.113.0/24", "documentation"},
		{"240.0.0.0/4", "reserved"},
		{"2001:db8::/32", "documentation"},
		{"100::/64", "discard"},
		{"2001::/32", "Teredo"},
		{"fec0::/10", "site-local"},
		{"::/96", "IPv4-compatible"},
		{"64:ff9b:1::/48", "local-use NAT64"},
	} {
		out = append(out, struct {
			p   netip.Prefix
			why string
		}{netip.MustParsePrefix(n.cidr), n.why})
	}
	return out
}()

var (
	nat64     = netip.MustParsePrefix("64:ff9b::/96")
	sixToFour = netip.MustParsePrefix("2002::/16")
	metadata  = []netip.Addr{netip.MustParseAddr("169.254.169.254"), netip.MustParseAddr("fd00:ec2::254"), netip.MustParseAddr("100.100.100.200")}
	broadcast = netip.MustParseAddr("255.255.255.255")
)

// internal says why a is not an address of the open internet, or "".
// An IPv4 address embedded in a NAT64 (64:ff9b::/96) or 6to4 (2002::/16)
// one is judged as itself.
func internal(a netip.Addr) string {
	a = a.Unmap()
	if a.Is6() {
		b := a.As16()
		switch {
		case nat64.Contains(a):
			if why := internal(netip.AddrFrom4([4]byte(b[12:16]))); why != "" {
				return "NAT64 of " + why
			}
		case sixToFour.Contains(a):
			if why := internal(netip.AddrFrom4([4]byte(b[2:6]))); why != "" {
				return "6to4 of " + why
			}
		}
	}
	switch {
	case a.IsLoopback():
		return "loopback"
	case a.IsUnspecified():
		return "unspecified"
	case slices.Contains(metadata, a):
		return "a cloud metadata address"
	case a.IsLinkLocalUnicast(), a.IsLinkLocalMulticast():
		return "link-local"
	case a.IsMulticast(), a.IsInterfaceLocalMulticast():
		return "multicast"
	case a.IsPrivate():
		return "private"
	case a == broadcast:
		return "broadcast"
	}
	for _, n := range internalNets {
		if n.p.Contains(a) {
			return n.why
		}
	}
	return ""
}

// dial connects to the first of addrs that answers.
func (p *Proxy) dial(ctx context.Context, addrs []netip.Addr, port int) (net.Conn, netip.Addr, error) {
	d := net.Dialer{Timeout: p.cfg.DialTimeout}
	var last error
	for _, a := range addrs {
		c, err := d.DialContext(ctx, "tcp", netip.AddrPortFrom(a, uint16(port)).String())
		if err == nil {
			return c, a, nil
		}
		last = err
	}
	return nil, netip.Addr{}, refuse(http.StatusBadGateway, "cannot connect: %v", last)
}

// tunnel serves a CONNECT: decide, dial what was decided, answer 200 and
// copy both ways under the idle and age bounds.
func (p *Proxy) tunnel(ctx context.Context, c net.Conn, br *bufio.Reader, req *http.Request, hosts []string) {
	ev := Event{Method: req.Method, Name: req.RequestURI}
	host, port, err := target(req.RequestURI, hosts, 0)
	if err == nil {
		ev.Name, ev.Port = host, port
		var addrs []netip.Addr
		var rule Rule
		if addrs, rule, err = p.decide(ctx, host, port); err == nil {
			var up net.Conn
			var a netip.Addr
			if up, a, err = p.dial(ctx, addrs, port); err == nil {
				defer up.Close()
				if !p.track(up) {
					return
				}
				defer p.untrack(up)
				ev.Allowed, ev.Addr, ev.Reason = true, netip.AddrPortFrom(a, uint16(port)).String(), "allowed by "+rule.String()
				i := p.record(ev)
				if _, err := io.WriteString(c, "HTTP/1.1 200 Connection Established\r\n\r\n"); err != nil {
					return
				}
				upBytes, downBytes := p.splice(c, br, up)
				p.addBytes(i, upBytes, downBytes)
				return
			}
		}
	}
	ev.Reason = err.Error()
	p.record(ev)
	writeRefusal(c, err)
}

// splice copies client→upstream (what br holds first) and back until
// either side ends, no byte moves either way for cfg.Idle, or cfg.MaxAge
// passes. Each read waits at most Idle; a direction that waited that
// long goes on while the other moved bytes meanwhile.
func (p *Proxy) splice(c net.Conn, br *bufio.Reader, up net.Conn) (int64, int64) {
	var upBytes, downBytes atomic.Int64
	var last atomic.Int64 // when a byte last moved, either way
	last.Store(time.Now().UnixNano())
	deadline := time.Now().Add(p.cfg.MaxAge)
	copyDir := func(dst io.Writer, src io.Reader, srcConn, dstConn net.Conn, n *atomic.Int64) {
		buf := p.copyBuffer()
		defer buf.release()
		for {
			srcConn.SetReadDeadline(minTime(time.Now().Add(p.cfg.Idle), deadline))
			k, err := src.Read(buf.b)
			if k > 0 {
				last.Store(time.Now().UnixNano())
				dstConn.SetWriteDeadline(minTime(time.Now().Add(p.cfg.Idle), deadline))
				if _, werr := dst.Write(buf.b[:k]); werr != nil {
					return
				}
				n.Add(int64(k))
				buf.filled(k)
			}
			if err != nil {
				var ne net.Error
				if errors.As(err, &ne) && ne.Timeout() && time.Now().Before(deadline) &&
					time.Since(time.Unix(0, last.Load())) < p.cfg.Idle {
					continue // this way idle, the other not
				}
				return
			}
		}
	}
	done := make(chan struct{}, 2)
	go func() { copyDir(up, br, c, up, &upBytes); closeWrite(up); done <- struct{}{} }()
	go func() { copyDir(c, up, up, c, &downBytes); closeWrite(c); done <- struct{}{} }()
	<-done
	// One side ended: the other gets the idle bound to finish.
	c.SetReadDeadline(time.Now().Add(p.cfg.Idle))
	up.SetReadDeadline(time.Now().Add(p.cfg.Idle))
	<-done
	return upBytes.Load(), downBytes.Load()
}

// A copy (a tunnel's direction, a plain response's body) reads into a
// small buffer, and into a large one once a read has filled the small
// one and the proxy has a large one to give: a bulk download costs few
// system calls (with 64 KiB buffers it ran at about 0.65x of a direct
// download on loopback, with 256 KiB about 0.8x; see BenchmarkEgress),
// and the memory the host holds for a run stays bounded, whatever the
// tool does with its connections: MaxConns x 2 x smallCopy, plus maxLarge
// x largeCopy (at most 20 MiB at the defaults). The buffers are the
// host's, outside the run's limits.
const (
	smallCopy = 32 << 10
	largeCopy = 256 << 10
	maxLarge  = 16
)

var (
	smallBuffers = sync.Pool{New: func() any { return new([smallCopy]byte) }}
	largeBuffers = sync.Pool{New: func() any { return new([largeCopy]byte) }}
)

// copyBuf is a copy's buffer, b: the small one or the large one.
type copyBuf struct {
	p     *Proxy
	b     []byte
	small *[smallCopy]byte
	large *[largeCopy]byte
}

func (p *Proxy) copyBuffer() *copyBuf {
	small := smallBuffers.Get().(*[smallCopy]byte)
	return &copyBuf{p: p, b: small[:], small: small}
}

// filled takes the large buffer after a read of k bytes filled the small
// one, when the proxy has one to give.
func (c *copyBuf) filled(k int) {
	if c.large != nil || k < len(c.b) {
		return
	}
	select {
	case c.p.large <- struct{}{}:
		c.large = largeBuffers.Get().(*[largeCopy]byte)
		c.b = c.large[:]
	default:
	}
}

func (c *copyBuf) release() {
	smallBuffers.Put(c.small)
	if c.large != nil {
		largeBuffers.Put(c.large)
		<-c.p.large
	}
}

func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
	}
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// forward serves a plain HTTP request in absolute form: decide on its
// URL's host, send it to the address decided (Host set to the name
// checked), and copy the response back. It reports whether the client
// connection may carry another request.
func (p *Proxy) forward(ctx context.Context, c net.Conn, req *http.Request, hosts []string, until time.Time) bool {
	ev := Event{Method: req.Method, Name: req.Host}
	err := func() error {
		if !req.URL.IsAbs() || req.URL.Scheme != "http" {
			return refuse(http.StatusBadRequest, "not a proxy request: give the absolute http:// URL (https goes through CONNECT)")
		}
		if req.URL.User != nil {
			return refuse(http.StatusForbidden, "userinfo in the URL")
		}
		host, port, err := target(req.URL.Host, hosts, 80)
		if err != nil {
			return err
		}
		ev.Name, ev.Port = host, port
		addrs, rule, err := p.decide(ctx, host, port)
		if err != nil {
			return err
		}
		up, a, err := p.dial(ctx, addrs, port)
		if err != nil {
			return err
		}
		defer up.Close()
		if !p.track(up) {
			return errClientGone
		}
		defer p.untrack(up)
		ev.Allowed, ev.Addr, ev.Reason = true, netip.AddrPortFrom(a, uint16(port)).String(), "allowed by "+rule.String()
		i := p.record(ev)
		out := req.Clone(ctx)
		out.RequestURI, out.Host = "", net.JoinHostPort(host, strconv.Itoa(port))
		if port == 80 {
			out.Host = host
		}
		for _, h := range []string{"Proxy-Connection", "Proxy-Authorization", "Connection", "Keep-Alive", "Te", "Trailer", "Upgrade"} {
			out.Header.Del(h)
		}
		out.Close = true
		// Each read and write either way waits at most Idle, and none
		// goes on past the connection's MaxAge.
		cu := &countConn{Conn: up, idle: p.cfg.Idle, until: until}
		if err := out.Write(cu); err != nil {
			return refuse(http.StatusBadGateway, "sending the request: %v", err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(cu), out)
		if err != nil {
			return refuse(http.StatusBadGateway, "reading the response: %v", err)
		}
		defer resp.Body.Close()
		resp.Close = req.Close
		for _, h := range []string{"Connection", "Keep-Alive", "Proxy-Connection", "Trailer", "Upgrade"} {
			resp.Header.Del(h)
		}
		werr := resp.Write(&idleWriter{p: p, c: c, idle: p.cfg.Idle, until: until})
		p.addBytes(i, cu.out.Load(), cu.in.Load())
		if werr != nil {
			return errClientGone
		}
		return nil
	}()
	switch {
	case err == nil:
		return !req.Close
	case errors.Is(err, errClientGone):
		return false
	}
	ev.Reason = err.Error()
	p.record(ev)
	writeRefusal(c, err)
	return false
}

var errClientGone = errors.New("the client went")

// countConn counts the bytes written to and read from a connection, each
// read and write waiting at most idle, and never past until.
type countConn struct {
	net.Conn
	idle    time.Duration
	until   time.Time
	in, out atomic.Int64
}

func (c *countConn) Read(b []byte) (int, error) {
	c.Conn.SetReadDeadline(minTime(time.Now().Add(c.idle), c.until))
	n, err := c.Conn.Read(b)
	c.in.Add(int64(n))
	return n, err
}

func (c *countConn) Write(b []byte) (int, error) {
	c.Conn.SetWriteDeadline(minTime(time.Now().Add(c.idle), c.until))
	n, err := c.Conn.Write(b)
	c.out.Add(int64(n))
	return n, err
}

// idleWriter writes a response to the client, each write waiting at most
// idle, and never past until. Its ReadFrom copies a body with the
// proxy's copy buffers, which net/http's 32 KiB would otherwise replace.
type idleWriter struct {
	p     *Proxy
	c     net.Conn
	idle  time.Duration
	until time.Time
}

func (w *idleWriter) Write(b []byte) (int, error) {
	w.c.SetWriteDeadline(minTime(time.Now().Add(w.idle), w.until))
	return w.c.Write(b)
}

func (w *idleWriter) ReadFrom(r io.Reader) (int64, error) {
	buf := w.p.copyBuffer()
	defer buf.release()
	var n int64
	for {
		k, err := r.Read(buf.b)
		if k > 0 {
			if _, werr := w.Write(buf.b[:k]); werr != nil {
				return n, werr
			}
			n += int64(k)
			buf.filled(k)
		}
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
}
