package egress

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/proxy"
)

// names is a test resolver: every name it knows maps to its addresses;
// nothing leaves this machine.
type names struct {
	mu    sync.Mutex
	addrs map[string][]string
	asked map[string]int
}

func (n *names) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	host = strings.TrimSuffix(host, ".") // the proxy asks rooted names
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.asked == nil {
		n.asked = map[string]int{}
	}
	n.asked[host]++
	var out []netip.Addr
	for _, a := range n.addrs[host] {
		out = append(out, netip.MustParseAddr(a))
	}
	if len(out) == 0 {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	return out, nil
}

// upstream is a loopback TCP server that answers each connection with
// "hello from upstream\n" and echoes what it reads, counting connections.
type upstream struct {
	ln       net.Listener
	accepted atomic.Int64
}

func newUpstream(t *testing.T) *upstream {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := &upstream{ln: ln}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			u.accepted.Add(1)
			go func() {
				defer c.Close()
				io.WriteString(c, "hello from upstream\n")
				io.Copy(c, c)
			}()
		}
	}()
	return u
}

func (u *upstream) port() int { return u.ln.Addr().(*net.TCPAddr).Port }

// sockPath is a path for a unix socket, short enough for one (108 bytes)
// where the test's temporary directory is not: /tmp.
func sockPath(t *testing.T) string {
	t.Helper()
	if p := filepath.Join(t.TempDir(), "egress.sock"); len(p) < 100 {
		return p
	}
	dir, err := os.MkdirTemp("/tmp", "cordon-egress-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return filepath.Join(dir, "egress.sock")
}

// serve runs a proxy of cfg on a unix socket until the test ends.
func serve(t *testing.T, cfg Config) (*Proxy, string) {
	t.Helper()
	return serveOn(t, cfg, "unix")
}

// serveOn runs a proxy of cfg on a unix socket, or on loopback TCP (the
// tunnels between two TCP connections splice), and returns its address.
func serveOn(t *testing.T, cfg Config, network string) (*Proxy, string) {
	t.Helper()
	sock := "127.0.0.1:0"
	if network == "unix" {
		sock = sockPath(t)
	}
	ln, err := net.Listen(network, sock)
	if err != nil {
		t.Fatal(err)
	}
	sock = ln.Addr().String()
	p := New(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { p.Serve(ctx, ln); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return p, sock
}

func rules(t *testing.T, ss ...string) []Rule {
	var out []Rule
	for _, s := range ss {
		r, err := ParseRule(s)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	return out
}

// connect sends a raw request head to the proxy and returns the status
// line and the connection (open on a 200).
func connect(t *testing.T, sock, head string) (string, net.Conn, *bufio.Reader) {
	t.Helper()
	network := "tcp"
	if strings.HasPrefix(sock, "/") {
		network = "unix"
	}
	c, err := net.Dial(network, sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(5 * time.Second))
	io.WriteString(c, head)
	br := bufio.NewReader(c)
	line, _ := br.ReadString('\n')
	if !strings.Contains(line, " 200 ") {
		return strings.TrimSpace(line), c, br
	}
	for { // the rest of the proxy's response head
		l, err := br.ReadString('\n')
		if err != nil || l == "\r\n" {
			break
		}
	}
	return strings.TrimSpace(line), c, br
}

// An allowed name is tunnelled to the address the proxy resolved, end to
// end, and the decision is logged with its bytes; mixed case is the same
// name.
// Over a unix socket the tunnel copies; TCP to TCP it splices, and bytes
// the client sent with its CONNECT head go first.
func TestConnectToAGrantedName(t *testing.T) {
	for _, network := range []string{"unix", "tcp"} {
		t.Run(network, func(t *testing.T) { testConnectToAGrantedName(t, network) })
	}
}

func testConnectToAGrantedName(t *testing.T, network string) {
	up := newUpstream(t)
	res := &names{addrs: map[string][]string{"api.example.test": {"127.0.0.1"}}}
	p, sock := serveOn(t, Config{Rules: rules(t, "api.example.test:"+strconv.Itoa(up.port())), Resolver: res, AllowInternal: true}, network)
	for i, host := range []string{"api.example.test", "API.Example.TEST", "api.example.test"} {
		target := net.JoinHostPort(host, strconv.Itoa(up.port()))
		head := "CONNECT " + target + " HTTP/1.1\r\nHost: " + target + "\r\n\r\n"
		early := i == 2
		if early {
			head += "ping\n" // before the proxy answered
		}
		status, c, br := connect(t, sock, head)
		if !strings.HasPrefix(status, "HTTP/1.1 200") {
			t.Fatalf("CONNECT %s: %s", target, status)
		}
		if l, _ := br.ReadString('\n'); l != "hello from upstream\n" {
			t.Fatalf("through the tunnel: %q", l)
		}
		if !early {
			io.WriteString(c, "ping\n")
		}
		if l, _ := br.ReadString('\n'); l != "ping\n" {
			t.Fatalf("echo through the tunnel (early %v): %q", early, l)
		}
		c.Close()
	}
	// Each tunnel's bytes are counted when the proxy has closed it, a
	// moment after the client did.
	counted := func(ev []Event) bool {
		for _, e := range ev {
			if e.Up == 0 {
				return false
			}
		}
		return len(ev) == 3
	}
	ev := p.Events()
	for end := time.Now().Add(5 * time.Second); !counted(ev) && time.Now().Before(end); ev = p.Events() {
		time.Sleep(5 * time.Millisecond)
	}
	if len(ev) != 3 || !ev[0].Allowed || ev[0].Name != "api.example.test" || ev[0].Addr != "127.0.0.1:"+strconv.Itoa(up.port()) {
		t.Fatalf("events %+v", ev)
	}
	for _, e := range ev {
		if e.Up != 5 || e.Down != 25 {
			t.Errorf("bytes logged: up %d down %d, want 5 and 25", e.Up, e.Down)
		}
	}
}

// Real clients through the proxy: Go's HTTP client sends plain HTTP in
// absolute form and HTTPS through CONNECT, whose TLS goes end to end.
func TestHTTPClientsThroughTheProxy(t *testing.T) {
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "plain %s %s", r.Host, r.URL.Path)
	}))
	defer plain.Close()
	secure := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "secure %s", r.URL.Path)
	}))
	defer secure.Close()
	port := func(s *httptest.Server) string { u, _ := url.Parse(s.URL); return u.Port() }
	res := &names{addrs: map[string][]string{"web.example.test": {"127.0.0.1"}, "tls.example.test": {"127.0.0.1"}}}
	p, sock := serve(t, Config{Rules: rules(t, "web.example.test", "tls.example.test:"+port(secure)), Resolver: res, AllowInternal: true})
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		Proxy: http.ProxyURL(&url.URL{Scheme: "http", Host: "proxy.invalid"}),
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", sock)
		},
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, // the test server's own certificate
	}}
	get := func(u string) (int, string) {
		resp, err := client.Get(u)
		if err != nil {
			t.Fatalf("GET %s: %v", u, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get("http://web.example.test:" + port(plain) + "/a"); code != 200 || body != "plain web.example.test:"+port(plain)+" /a" {
		t.Errorf("plain HTTP: %d %q", code, body)
	}
	if code, body := get("https://tls.example.test:" + port(secure) + "/b"); code != 200 || body != "secure /b" {
		t.Errorf("HTTPS through CONNECT: %d %q", code, body)
	}
	if code, body := get("http://other.example.test:" + port(plain) + "/"); code != 403 || !strings.Contains(body, "not granted") {
		t.Errorf("a name not granted: %d %q", code, body)
	}
	var methods []string
	for _, e := range p.Events() {
		methods = append(methods, fmt.Sprintf("%s %s %v", e.Method, e.Name, e.Allowed))
	}
	if strings.Join(methods, ", ") != "GET web.example.test true, CONNECT tls.example.test true, GET other.example.test false" {
		t.Errorf("events: %q", methods)
	}
}

// Every bypass is refused before anything is dialled, and logged.
func TestBypassesAreRefused(t *testing.T) {
	up := newUpstream(t)
	port := strconv.Itoa(up.port())
	res := &names{addrs: map[string][]string{
		"api.example.test":    {"127.0.0.1"},
		"a.wild.test":         {"127.0.0.1"},
		"wild.test":           {"127.0.0.1"},
		"badwild.test":        {"127.0.0.1"},
		"priv.example.test":   {"10.1.2.3"},
		"loop.example.test":   {"127.0.0.1"},
		"map.example.test":    {"::ffff:127.0.0.1"},
		"meta.example.test":   {"169.254.169.254"},
		"nat.example.test":    {"64:ff9b::a01:203"},
		"cgn.example.test":    {"100.64.1.1"},
		"mixed.example.test":  {"93.184.216.34", "127.0.0.1"},
		"nip.example.test":    {"127.0.0.1"}, // a name that resolves to loopback, nip.io-style
		"compat.example.test": {"::7f00:1"},
		"teredo.example.test": {"2001:0:4136:e378:8000:63bf:3fff:fdd2"},
		"nat48.example.test":  {"64:ff9b:1::a00:1"},
	}}
	granted := []string{"api.example.test:" + port, "*.wild.test", "priv.example.test", "loop.example.test", "map.example.test",
		"meta.example.test", "nat.example.test", "cgn.example.test", "mixed.example.test", "nip.example.test",
		"compat.example.test", "teredo.example.test", "nat48.example.test"}
	open, sockOpen := serve(t, Config{Rules: rules(t, granted...), Resolver: res, AllowInternal: true})
	strict, sockStrict := serve(t, Config{Rules: rules(t, granted...), Resolver: res})
	_, _ = open, strict
	for _, c := range []struct {
		name, sock, head, status, reason string
	}{
		{"a name not granted", sockOpen, "CONNECT other.example.test:" + port + " HTTP/1.1\r\n\r\n", "403", "not granted"},
		{"a port not granted", sockOpen, "CONNECT api.example.test:1 HTTP/1.1\r\n\r\n", "403", "not granted"},
		{"a direct address", sockOpen, "CONNECT 127.0.0.1:" + port + " HTTP/1.1\r\n\r\n", "403", "address 127.0.0.1 is not granted"},
		{"an IPv6 address", sockOpen, "CONNECT [::1]:" + port + " HTTP/1.1\r\n\r\n", "403", "address ::1 is not granted"},
		{"a decimal host", sockOpen, "CONNECT 2130706433:" + port + " HTTP/1.1\r\n\r\n", "403", "numeric host"},
		{"an octal host", sockOpen, "CONNECT 0177.0.0.1:" + port + " HTTP/1.1\r\n\r\n", "403", "numeric host"},
		{"a hexadecimal host", sockOpen, "CONNECT 0x7f.1:" + port + " HTTP/1.1\r\n\r\n", "403", "numeric host"},
		{"a short dotted host", sockOpen, "CONNECT 127.1:" + port + " HTTP/1.1\r\n\r\n", "403", "numeric host"},
		{"a trailing dot", sockOpen, "CONNECT api.example.test.:" + port + " HTTP/1.1\r\n\r\n", "403", "trailing dot"},
		{"an IDN name", sockOpen, "CONNECT b\xc3\xbccher.wild.test:" + port + " HTTP/1.1\r\n\r\n", "403", "non-ASCII"},
		{"a NUL byte", sockOpen, "CONNECT api.example.test\x00.evil:" + port + " HTTP/1.1\r\n\r\n", "40", ""},
		{"userinfo", sockOpen, "CONNECT user@api.example.test:" + port + " HTTP/1.1\r\n\r\n", "403", "userinfo"},
		{"a Host header that disagrees", sockOpen, "CONNECT api.example.test:" + port + " HTTP/1.1\r\nHost: evil.test:" + port + "\r\n\r\n", "403", "disagrees"},
		{"two Host headers", sockOpen, "CONNECT api.example.test:" + port + " HTTP/1.1\r\nHost: api.example.test:" + port + "\r\nHost: evil.test\r\n\r\n", "40", ""},
		{"the wildcard's apex", sockOpen, "CONNECT wild.test:" + port + " HTTP/1.1\r\n\r\n", "403", "not granted"},
		{"the wildcard's sibling", sockOpen, "CONNECT badwild.test:" + port + " HTTP/1.1\r\n\r\n", "403", "not granted"},
		{"an origin-form request", sockOpen, "GET / HTTP/1.1\r\nHost: api.example.test:" + port + "\r\n\r\n", "400", "not a proxy request"},
		{"a private address", sockStrict, "CONNECT priv.example.test:" + port + " HTTP/1.1\r\n\r\n", "403", "private"},
		{"a name of loopback", sockStrict, "CONNECT nip.example.test:" + port + " HTTP/1.1\r\n\r\n", "403", "loopback"},
		{"an IPv4-mapped loopback", sockStrict, "CONNECT map.example.test:" + port + " HTTP/1.1\r\n\r\n", "403", "loopback"},
		{"the metadata address", sockStrict, "CONNECT meta.example.test:" + port + " HTTP/1.1\r\n\r\n", "403", "metadata"},
		{"NAT64 of a private address", sockStrict, "CONNECT nat.example.test:" + port + " HTTP/1.1\r\n\r\n", "403", "NAT64 of private"},
		{"shared address space", sockStrict, "CONNECT cgn.example.test:" + port + " HTTP/1.1\r\n\r\n", "403", "CGNAT"},
		{"an IPv4-compatible address", sockStrict, "CONNECT compat.example.test:" + port + " HTTP/1.1\r\n\r\n", "403", "IPv4-compatible"},
		{"a Teredo address", sockStrict, "CONNECT teredo.example.test:" + port + " HTTP/1.1\r\n\r\n", "403", "Teredo"},
		{"local-use NAT64", sockStrict, "CONNECT nat48.example.test:" + port + " HTTP/1.1\r\n\r\n", "403", "local-use NAT64"},
		{"one internal address among the answers", sockStrict, "CONNECT mixed.example.test:" + port + " HTTP/1.1\r\n\r\n", "403", "loopback"},
		{"plain HTTP to a name not granted", sockOpen, "GET http://other.example.test:" + port + "/ HTTP/1.1\r\nHost: other.example.test:" + port + "\r\n\r\n", "403", "not granted"},
		{"plain HTTP with userinfo", sockOpen, "GET http://u:p@api.example.test:" + port + "/ HTTP/1.1\r\nHost: api.example.test:" + port + "\r\n\r\n", "403", "userinfo"},
		{"plain HTTP whose Host disagrees", sockOpen, "GET http://api.example.test:" + port + "/ HTTP/1.1\r\nHost: evil.test\r\n\r\n", "403", "disagrees"},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := up.accepted.Load()
			status, conn, br := connect(t, c.sock, c.head)
			body, _ := io.ReadAll(br)
			conn.Close()
			if !strings.Contains(status, " "+c.status) || !strings.Contains(string(body), c.reason) {
				t.Errorf("%s: %q %q; want %s and %q", c.name, status, body, c.status, c.reason)
			}
			time.Sleep(20 * time.Millisecond)
			if up.accepted.Load() != before {
				t.Errorf("%s: the upstream was dialled", c.name)
			}
		})
	}
	// The wildcard covers a name below it.
	if status, _, _ := connect(t, sockOpen, "CONNECT a.wild.test:"+port+" HTTP/1.1\r\n\r\n"); !strings.Contains(status, " 200") {
		t.Errorf("a.wild.test under *.wild.test: %s", status)
	}
	// Every refusal is in the log.
	refused := 0
	for _, e := range open.Events() {
		if !e.Allowed && e.Reason != "" {
			refused++
		}
	}
	if refused < 10 {
		t.Errorf("only %d refusals logged: %+v", refused, open.Events())
	}
}

// The proxy resolves once per decision and dials the address it checked:
// a resolver that answers differently the second time (DNS rebinding)
// never reaches the dial.
func TestRebindingNeverReachesTheDial(t *testing.T) {
	up := newUpstream(t)
	port := strconv.Itoa(up.port())
	res := &rebinder{first: "93.184.216.34", then: "127.0.0.1"}
	_, sock := serve(t, Config{Rules: rules(t, "rebind.example.test"), Resolver: res, DialTimeout: 300 * time.Millisecond})
	status, _, _ := connect(t, sock, "CONNECT rebind.example.test:"+port+" HTTP/1.1\r\n\r\n")
	if strings.Contains(status, " 200") || up.accepted.Load() != 0 || res.calls.Load() != 1 {
		t.Errorf("status %q, upstream dialled %d times, %d lookups", status, up.accepted.Load(), res.calls.Load())
	}
}

type rebinder struct {
	first, then string
	calls       atomic.Int64
}

func (r *rebinder) LookupNetIP(context.Context, string, string) ([]netip.Addr, error) { // rooted or not
	if r.calls.Add(1) == 1 {
		return []netip.Addr{netip.MustParseAddr(r.first)}, nil
	}
	return []netip.Addr{netip.MustParseAddr(r.then)}, nil
}

// A tunnel with no traffic closes at the idle bound, one copied through
// the proxy's buffers (from a unix socket) as one spliced (TCP to TCP).
func TestIdleTunnelsClose(t *testing.T) {
	for _, network := range []string{"unix", "tcp"} {
		t.Run(network, func(t *testing.T) { testIdleTunnelsClose(t, network) })
	}
}

func testIdleTunnelsClose(t *testing.T, network string) {
	up := newUpstream(t)
	port := strconv.Itoa(up.port())
	res := &names{addrs: map[string][]string{"api.example.test": {"127.0.0.1"}}}
	_, sock := serveOn(t, Config{Rules: rules(t, "api.example.test"), Resolver: res, AllowInternal: true, Idle: 200 * time.Millisecond}, network)
	status, _, br := connect(t, sock, "CONNECT api.example.test:"+port+" HTTP/1.1\r\n\r\n")
	if !strings.Contains(status, " 200") {
		t.Fatal(status)
	}
	br.ReadString('\n') // the upstream's greeting; then silence
	start := time.Now()
	if _, err := io.ReadAll(br); err != nil {
		t.Fatalf("the tunnel did not close cleanly: %v", err)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("the idle tunnel closed after %v", took)
	}
}

func TestParseRule(t *testing.T) {
	for in, want := range map[string]string{
		"Example.COM":        "example.com",
		"*.example.com:443":  "*.example.com:443",
		"10.0.0.5:8080":      "10.0.0.5:8080",
		"[::1]:22":           "[::1]:22",
		"::ffff:10.0.0.1":    "10.0.0.1",
		"pypi.org":           "pypi.org",
		"xn--bcher-kva.test": "xn--bcher-kva.test",
	} {
		r, err := ParseRule(in)
		if err != nil || r.String() != want {
			t.Errorf("ParseRule(%q) = %q, %v; want %q", in, r.String(), err, want)
		}
	}
	for _, in := range []string{"", "example.com.", "*.com", "*", "a..b", "-a.com", "a.com:0", "a.com:65536", "a.com:08", "127.1", "0x7f.1", "bücher.test", "a_b.com", "fe80::1%eth0"} {
		if r, err := ParseRule(in); err == nil {
			t.Errorf("ParseRule(%q) = %q, want an error", in, r)
		}
	}
}

// Fields from the sandbox are written with their control bytes escaped:
// nothing of a tool's reaches the caller's terminal as an escape.
func TestTheLogEscapesControlBytes(t *testing.T) {
	p := New(Config{})
	p.record(Event{Name: "a\x1b]0;pwned\x07b", Reason: "\x1b[2Jc\u00e9"})
	e := p.Events()[0]
	if e.Name != `a\x1b]0;pwned\x07b` || e.Reason != `\x1b[2Jc\xc3\xa9` {
		t.Errorf("name %q, reason %q", e.Name, e.Reason)
	}
}

// The log is bounded, and so are its fields: a tool that floods the
// proxy with refused requests costs the host at most that.
func TestTheLogIsBounded(t *testing.T) {
	p := New(Config{})
	for i := range maxEvents + 50 {
		p.record(Event{Method: "CONNECT", Name: strings.Repeat("x", 20000), Reason: strconv.Itoa(i) + strings.Repeat("y", 20000)})
	}
	ev := p.Events()
	if len(ev) != maxEvents || p.Dropped() != 50 || len(ev[0].Name) > maxField+3 || len(ev[0].Reason) > maxField+3 {
		t.Errorf("%d events, %d dropped, a name of %d bytes", len(ev), p.Dropped(), len(ev[0].Name))
	}
}

// Past MaxConns, a client connection is closed at once; ending the
// service closes every open connection, a quiet tunnel's too, at once.
func TestConnectionsAreBoundedAndClosedAtTheEnd(t *testing.T) {
	up := newUpstream(t)
	port := strconv.Itoa(up.port())
	res := &names{addrs: map[string][]string{"api.example.test": {"127.0.0.1"}}}
	sock := sockPath(t)
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	p := New(Config{Rules: rules(t, "api.example.test"), Resolver: res, AllowInternal: true, MaxConns: 2})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { p.Serve(ctx, ln); close(done) }()
	var tunnels []*bufio.Reader
	for range 2 {
		status, _, br := connect(t, sock, "CONNECT api.example.test:"+port+" HTTP/1.1\r\n\r\n")
		if !strings.Contains(status, " 200") {
			t.Fatal(status)
		}
		br.ReadString('\n')
		tunnels = append(tunnels, br)
	}
	third, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	third.SetDeadline(time.Now().Add(5 * time.Second))
	if n, err := third.Read(make([]byte, 1)); n != 0 || err == nil {
		t.Errorf("a third connection past MaxConns 2 was served: %d %v", n, err)
	}
	start := time.Now()
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the service did not end with its open tunnels")
	}
	for _, br := range tunnels {
		if _, err := io.ReadAll(br); err != nil && !strings.Contains(err.Error(), "closed") && !strings.Contains(err.Error(), "reset") {
			t.Errorf("a tunnel after the end: %v", err)
		}
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("ending the service took %v", took)
	}
}

// A tunnel whose one direction is quiet while the other moves bytes stays
// open past Idle, from a unix socket or a TCP one.
func TestAOneWayTunnelIsNotIdle(t *testing.T) {
	for _, network := range []string{"unix", "tcp"} {
		t.Run(network, func(t *testing.T) { testAOneWayTunnelIsNotIdle(t, network) })
	}
}

func testAOneWayTunnelIsNotIdle(t *testing.T, network string) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	halfClosed := make(chan bool, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			halfClosed <- false
			return
		}
		defer c.Close()
		for range 8 { // a byte every 100 ms for 800 ms, the client silent
			c.Write([]byte("z"))
			time.Sleep(100 * time.Millisecond)
		}
		// The quiet way was not ended meanwhile: no EOF from the client.
		c.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
		_, err = c.Read(make([]byte, 1))
		halfClosed <- errors.Is(err, io.EOF)
	}()
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	res := &names{addrs: map[string][]string{"api.example.test": {"127.0.0.1"}}}
	_, sock := serveOn(t, Config{Rules: rules(t, "api.example.test"), Resolver: res, AllowInternal: true, Idle: 300 * time.Millisecond}, network)
	status, _, br := connect(t, sock, "CONNECT api.example.test:"+port+" HTTP/1.1\r\n\r\n")
	if !strings.Contains(status, " 200") {
		t.Fatal(status)
	}
	got, _ := io.ReadAll(br)
	if string(got) != "zzzzzzzz" {
		t.Errorf("through a tunnel quiet one way: %q", got)
	}
	if <-halfClosed {
		t.Errorf("the quiet way was closed while the other moved bytes")
	}
}

// A tunnel that never goes idle still ends at MaxAge, copied or spliced.
func TestTunnelsEndAtMaxAge(t *testing.T) {
	for _, network := range []string{"unix", "tcp"} {
		t.Run(network, func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			go func() {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				defer c.Close()
				for range 30 { // a byte every 100 ms for 3 s
					if _, err := c.Write([]byte("z")); err != nil {
						return
					}
					time.Sleep(100 * time.Millisecond)
				}
			}()
			port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
			res := &names{addrs: map[string][]string{"api.example.test": {"127.0.0.1"}}}
			_, sock := serveOn(t, Config{Rules: rules(t, "api.example.test"), Resolver: res, AllowInternal: true,
				Idle: 300 * time.Millisecond, MaxAge: time.Second}, network)
			start := time.Now()
			status, _, br := connect(t, sock, "CONNECT api.example.test:"+port+" HTTP/1.1\r\n\r\n")
			if !strings.Contains(status, " 200") {
				t.Fatal(status)
			}
			got, _ := io.ReadAll(br)
			if took := time.Since(start); took > 1600*time.Millisecond || len(got) < 5 {
				t.Errorf("a busy tunnel with a MaxAge of 1s lasted %v and moved %d bytes", took, len(got))
			}
		})
	}
}

// A plain HTTP response that trickles for longer than Idle, never idle
// for that long, comes through whole: the bound is per read and write,
// not on the whole exchange.
func TestASlowPlainResponseIsNotIdle(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "8")
		for range 8 {
			w.Write([]byte("z"))
			w.(http.Flusher).Flush()
			time.Sleep(100 * time.Millisecond)
		}
	}))
	defer srv.Close()
	u, _ := url.Parse(srv.URL)
	res := &names{addrs: map[string][]string{"api.example.test": {"127.0.0.1"}}}
	_, sock := serveOn(t, Config{Rules: rules(t, "api.example.test"), Resolver: res, AllowInternal: true, Idle: 300 * time.Millisecond}, "tcp")
	c, err := net.Dial("tcp", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	io.WriteString(c, "GET http://api.example.test:"+u.Port()+"/ HTTP/1.1\r\nHost: api.example.test:"+u.Port()+"\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil || string(body) != "zzzzzzzz" {
		t.Errorf("a response slower than Idle: %q, %v", body, err)
	}
}

// Plain requests one after another on one connection, and a body that
// trickles in, end at MaxAge as a tunnel does.
func TestPlainConnectionsEndAtMaxAge(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		fmt.Fprint(w, "ok")
	}))
	defer srv.Close()
	u, _ := url.Parse(srv.URL)
	res := &names{addrs: map[string][]string{"api.example.test": {"127.0.0.1"}}}
	const maxAge = time.Second
	_, sock := serveOn(t, Config{Rules: rules(t, "api.example.test"), Resolver: res, AllowInternal: true, Idle: 300 * time.Millisecond, MaxAge: maxAge}, "tcp")
	target := "http://api.example.test:" + u.Port() + "/"
	t.Run("keep-alive", func(t *testing.T) {
		c, err := net.Dial("tcp", sock)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		br := bufio.NewReader(c)
		start := time.Now()
		answers := 0
		for time.Since(start) < 3*time.Second {
			c.SetDeadline(time.Now().Add(2 * time.Second))
			if _, err := io.WriteString(c, "GET "+target+" HTTP/1.1\r\nHost: api.example.test:"+u.Port()+"\r\n\r\n"); err != nil {
				break
			}
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				break
			}
			io.Copy(io.Discard, resp.Body)
			answers++
			time.Sleep(200 * time.Millisecond)
		}
		if took := time.Since(start); answers == 0 || took > maxAge+700*time.Millisecond {
			t.Errorf("a keep-alive connection served %d requests over %v, past its MaxAge of %v", answers, took, maxAge)
		}
	})
	t.Run("slow body", func(t *testing.T) {
		c, err := net.Dial("tcp", sock)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		start := time.Now()
		io.WriteString(c, "POST "+target+" HTTP/1.1\r\nHost: api.example.test:"+u.Port()+"\r\nContent-Length: 30\r\n\r\n")
		for range 30 {
			if _, err := c.Write([]byte("x")); err != nil {
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		c.SetReadDeadline(time.Now().Add(2 * time.Second))
		io.Copy(io.Discard, c)
		if took := time.Since(start); took > maxAge+1500*time.Millisecond {
			t.Errorf("a body trickling in held the connection %v, past its MaxAge of %v", took, maxAge)
		}
	})
}

// More bulk tunnels at once than the proxy has large buffers for: every
// byte comes through, and the large buffers are all given back.
func TestLargeBuffersAreBounded(t *testing.T) {
	const size = 4 << 20
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		chunk := make([]byte, 64<<10)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				for left := size; left > 0; left -= len(chunk) {
					if _, err := c.Write(chunk); err != nil {
						return
					}
				}
			}()
		}
	}()
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	res := &names{addrs: map[string][]string{"bulk.example.test": {"127.0.0.1"}}}
	p, sock := serveOn(t, Config{Rules: rules(t, "bulk.example.test"), Resolver: res, AllowInternal: true}, "tcp")
	var wg sync.WaitGroup
	got := make(chan int64, 2*maxLarge)
	for range 2 * maxLarge {
		wg.Add(1)
		go func() {
			defer wg.Done()
			status, _, br := connect(t, sock, "CONNECT bulk.example.test:"+port+" HTTP/1.1\r\n\r\n")
			if !strings.Contains(status, " 200") {
				got <- -1
				return
			}
			n, _ := io.Copy(io.Discard, br)
			got <- n
		}()
	}
	wg.Wait()
	close(got)
	for n := range got {
		if n != size {
			t.Errorf("a tunnel moved %d bytes, want %d", n, size)
		}
	}
	time.Sleep(100 * time.Millisecond)
	if n := len(p.large); n != 0 {
		t.Errorf("%d large buffers still taken after every tunnel ended", n)
	}
}

// SOCKS5 on the same listener: x/net's SOCKS5 client reaches a granted
// name (sent as a name, resolved by the proxy) and is refused one not
// granted; addresses, numeric names, commands other than CONNECT and
// clients without the no-authentication method are refused, each
// decision logged.
func TestSOCKS5(t *testing.T) {
	up := newUpstream(t)
	port := strconv.Itoa(up.port())
	res := &names{addrs: map[string][]string{"api.example.test": {"127.0.0.1"}, "other.example.test": {"127.0.0.1"}}}
	p, sock := serveOn(t, Config{Rules: rules(t, "api.example.test:"+port), Resolver: res, AllowInternal: true}, "tcp")
	d, err := proxy.SOCKS5("tcp", sock, nil, proxy.Direct)
	if err != nil {
		t.Fatal(err)
	}
	c, err := d.Dial("tcp", "api.example.test:"+port)
	if err != nil {
		t.Fatalf("SOCKS5 to a granted name: %v", err)
	}
	br := bufio.NewReader(c)
	if l, _ := br.ReadString('\n'); l != "hello from upstream\n" {
		t.Fatalf("through the SOCKS5 tunnel: %q", l)
	}
	io.WriteString(c, "ping\n")
	if l, _ := br.ReadString('\n'); l != "ping\n" {
		t.Fatalf("echo through the SOCKS5 tunnel: %q", l)
	}
	c.Close()
	if _, err := d.Dial("tcp", "other.example.test:"+port); err == nil {
		t.Errorf("SOCKS5 reached a name not granted")
	}
	// Raw requests: the reply code of each.
	raw := func(greeting, request []byte) []byte {
		c, err := net.Dial("tcp", sock)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(5 * time.Second))
		c.Write(greeting)
		var ans [2]byte
		if _, err := io.ReadFull(c, ans[:]); err != nil {
			return nil
		}
		if ans[1] != 0 {
			return ans[:]
		}
		c.Write(request)
		reply := make([]byte, 10)
		n, _ := io.ReadFull(c, reply)
		return reply[:n]
	}
	p16 := func(port string) []byte { n, _ := strconv.Atoi(port); return []byte{byte(n >> 8), byte(n)} }
	name := func(s string) []byte { return append([]byte{5, 1, 0, 3, byte(len(s))}, s...) }
	for what, c := range map[string]struct {
		greeting, request []byte
		code              byte
	}{
		"an address not granted":  {[]byte{5, 1, 0}, append([]byte{5, 1, 0, 1, 127, 0, 0, 1}, p16(port)...), socksNotAllowed},
		"an IPv6 address":         {[]byte{5, 1, 0}, append(append([]byte{5, 1, 0, 4}, net.IPv6loopback...), p16(port)...), socksNotAllowed},
		"a numeric name":          {[]byte{5, 1, 0}, append(name("127.1"), p16(port)...), socksNotAllowed},
		"an address as a name":    {[]byte{5, 1, 0}, append(name("127.0.0.1"), p16(port)...), socksNotAllowed},
		"a name with a NUL":       {[]byte{5, 1, 0}, append(name("api.example.test\x00.evil"), p16(port)...), socksNotAllowed},
		"a trailing dot":          {[]byte{5, 1, 0}, append(name("api.example.test."), p16(port)...), socksNotAllowed},
		"another port":            {[]byte{5, 1, 0}, append(name("api.example.test"), 0, 1), socksNotAllowed},
		"BIND":                    {[]byte{5, 1, 0}, append([]byte{5, 2, 0, 3, 16}, append([]byte("api.example.test"), p16(port)...)...), socksCmdUnsupported},
		"an unknown address type": {[]byte{5, 1, 0}, []byte{5, 1, 0, 9, 0, 0}, socksAddrUnsupported},
		"password authentication": {[]byte{5, 1, 2}, nil, socksNoAcceptable},
	} {
		got := raw(c.greeting, c.request)
		if len(got) < 2 || got[1] != c.code {
			t.Errorf("%s: answered %v, want code %#x", what, got, c.code)
		}
	}
	// The tunnel's bytes are counted when the proxy has closed it, a
	// moment after the client did.
	ev := p.Events()
	for end := time.Now().Add(5 * time.Second); len(ev) > 0 && ev[0].Up != 5 && time.Now().Before(end); ev = p.Events() {
		time.Sleep(5 * time.Millisecond)
	}
	if len(ev) < 2 || !ev[0].Allowed || ev[0].Method != "SOCKS5" || ev[0].Name != "api.example.test" || ev[0].Up != 5 || ev[1].Allowed {
		t.Errorf("the log: %+v", ev)
	}
	for _, e := range ev[1:] {
		if e.Allowed {
			t.Errorf("allowed: %+v", e)
		}
	}
	if up.accepted.Load() != 1 {
		t.Errorf("the upstream was reached %d times, want once", up.accepted.Load())
	}
}
