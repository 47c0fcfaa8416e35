package egress

import (
	"net"
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// What the control socket may hand the proxy: a connected stream socket
// (the tool's TCP connection, or a unix one), never a listening socket, an
// unconnected one, a datagram socket or a file.
func TestTheControlSocketTakesConnectedStreamsAlone(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	server, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer server.Close()
	fdOf := func(c interface{ File() (*os.File, error) }) int {
		f, err := c.File()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		return int(f.Fd())
	}
	unconnected, _ := unix.Socket(unix.AF_INET, unix.SOCK_STREAM, 0)
	defer unix.Close(unconnected)
	udp, _ := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM, 0)
	defer unix.Close(udp)
	pair, err := Socketpair()
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(pair[0])
	defer unix.Close(pair[1])
	file, _ := os.Open(os.DevNull)
	defer file.Close()
	for name, c := range map[string]struct {
		fd   int
		want bool
	}{
		"the accepted TCP connection": {fdOf(server.(*net.TCPConn)), true},
		"a unix socket pair's end":    {pair[0], true},
		"a listening TCP socket":      {fdOf(ln.(*net.TCPListener)), false},
		"an unconnected TCP socket":   {unconnected, false},
		"a UDP socket":                {udp, false},
		"a file":                      {int(file.Fd()), false},
	} {
		if got := streamSocket(c.fd); got != c.want {
			t.Errorf("%s: taken %v, want %v", name, got, c.want)
		}
	}
}
