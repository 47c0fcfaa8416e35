package egress

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"time"
)

// SOCKS5 (RFC 1928) beside HTTP on the same listener: a connection whose
// first byte is 5 is a SOCKS5 client. Only what a tunnel needs is spoken
// — no authentication, CONNECT alone — and the target is decided exactly
// as a CONNECT request's is: a name (address type 3) is checked, resolved
// and dialled by the proxy, an address (types 1 and 4) only where a rule
// names it.
const (
	socksVersion = 5

	socksNoAuth       = 0x00
	socksNoAcceptable = 0xff

	socksConnect = 1

	socksIPv4   = 1
	socksDomain = 3
	socksIPv6   = 4

	socksSucceeded       = 0x00
	socksGeneralFailure  = 0x01
	socksNotAllowed      = 0x02
	socksHostUnreachable = 0x04
	socksCmdUnsupported  = 0x07
	socksAddrUnsupported = 0x08
)

// socks serves one SOCKS5 client on c, whose bytes br reads (each read
// waits at most Idle).
func (p *Proxy) socks(ctx context.Context, c net.Conn, br *bufio.Reader) {
	// The greeting: version, then the methods the client offers.
	var head [2]byte
	if _, err := io.ReadFull(br, head[:]); err != nil || head[0] != socksVersion || head[1] == 0 {
		return
	}
	methods := make([]byte, head[1])
	if _, err := io.ReadFull(br, methods); err != nil {
		return
	}
	method := byte(socksNoAcceptable)
	for _, m := range methods {
		if m == socksNoAuth {
			method = socksNoAuth
		}
	}
	c.SetWriteDeadline(time.Now().Add(p.cfg.Idle))
	if _, err := c.Write([]byte{socksVersion, method}); err != nil || method != socksNoAuth {
		return
	}
	// The request: version, command, reserved, address type, address, port.
	var req [4]byte
	if _, err := io.ReadFull(br, req[:]); err != nil || req[0] != socksVersion || req[2] != 0 {
		return
	}
	ev := Event{Method: "SOCKS5"}
	host, err := socksAddr(br, req[3])
	var port uint16
	if err == nil {
		err = binary.Read(br, binary.BigEndian, &port)
	}
	if err != nil {
		var r *refusal
		if errors.As(err, &r) {
			ev.Reason = r.reason
			p.record(ev)
			p.socksReply(c, socksAddrUnsupported)
		}
		return
	}
	ev.Name, ev.Port = host, int(port)
	if req[1] != socksConnect {
		ev.Reason = "SOCKS5 command " + strconv.Itoa(int(req[1])) + ": only CONNECT is served"
		p.record(ev)
		p.socksReply(c, socksCmdUnsupported)
		return
	}
	if port == 0 {
		ev.Reason = "port 0"
		p.record(ev)
		p.socksReply(c, socksNotAllowed)
		return
	}
	addrs, rule, err := p.decide(ctx, host, int(port))
	if err != nil {
		ev.Reason = err.Error()
		p.record(ev)
		p.socksReply(c, socksNotAllowed)
		return
	}
	up, a, err := p.dial(ctx, addrs, int(port))
	if err != nil {
		ev.Reason = err.Error()
		p.record(ev)
		p.socksReply(c, socksHostUnreachable)
		return
	}
	defer up.Close()
	if !p.track(up) {
		return
	}
	defer p.untrack(up)
	ev.Allowed, ev.Addr, ev.Reason = true, netip.AddrPortFrom(a, port).String(), "allowed by "+rule.String()
	i := p.record(ev)
	if !p.socksReply(c, socksSucceeded) {
		return
	}
	upBytes, downBytes := p.splice(c, br, up)
	p.addBytes(i, upBytes, downBytes)
}

// socksAddr reads the request's address of type typ: a name (checked
// later, as every name is), or an address, written as netip writes it.
func socksAddr(br *bufio.Reader, typ byte) (string, error) {
	switch typ {
	case socksIPv4, socksIPv6:
		b := make([]byte, 4)
		if typ == socksIPv6 {
			b = make([]byte, 16)
		}
		if _, err := io.ReadFull(br, b); err != nil {
			return "", err
		}
		a, _ := netip.AddrFromSlice(b)
		return a.String(), nil
	case socksDomain:
		n, err := br.ReadByte()
		if err != nil {
			return "", err
		}
		if n == 0 {
			return "", refuse(http.StatusBadRequest, "an empty SOCKS5 host name")
		}
		b := make([]byte, n)
		if _, err := io.ReadFull(br, b); err != nil {
			return "", err
		}
		return string(b), nil
	}
	return "", refuse(http.StatusBadRequest, "SOCKS5 address type %d", typ)
}

// socksReply answers the request with code and a zero bound address,
// waiting at most Idle; it reports whether the reply went.
func (p *Proxy) socksReply(c net.Conn, code byte) bool {
	c.SetWriteDeadline(time.Now().Add(p.cfg.Idle))
	_, err := c.Write([]byte{socksVersion, code, 0, socksIPv4, 0, 0, 0, 0, 0, 0})
	return err == nil
}
