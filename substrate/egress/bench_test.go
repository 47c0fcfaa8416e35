package egress

import (
	"bufio"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"
)

// BenchmarkEgress measures, side by side on loopback, a 100 MiB download
// through the proxy against the same download direct (throughput ratio,
// target ≥ 0.7x), and the time to a first byte of a new connection each
// way (the latency the proxy adds).
func BenchmarkEgress(b *testing.B) {
	const size = 100 << 20
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	chunk := make([]byte, 256<<10)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				var one [1]byte
				if _, err := io.ReadFull(c, one[:]); err != nil {
					return
				}
				n := 1 // a one-byte answer asks for the first byte only
				if one[0] == 'D' {
					n = size
				}
				for left := n; left > 0; {
					k := min(left, len(chunk))
					if _, err := c.Write(chunk[:k]); err != nil {
						return
					}
					left -= k
				}
			}()
		}
	}()
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	res := &names{addrs: map[string][]string{"bulk.example.test": {"127.0.0.1"}}}
	p := New(Config{Rules: []Rule{{Host: "bulk.example.test"}}, Resolver: res, AllowInternal: true})
	pln, err := net.Listen("tcp", "127.0.0.1:0") // the proxy on loopback TCP, as the forwarder reaches it
	if err != nil {
		b.Fatal(err)
	}
	go p.Serve(b.Context(), pln)
	direct := func() net.Conn {
		c, err := net.Dial("tcp", "127.0.0.1:"+port)
		if err != nil {
			b.Fatal(err)
		}
		return c
	}
	proxied := func() net.Conn {
		c, err := net.Dial("tcp", pln.Addr().String())
		if err != nil {
			b.Fatal(err)
		}
		io.WriteString(c, "CONNECT bulk.example.test:"+port+" HTTP/1.1\r\n\r\n")
		br := bufio.NewReader(c)
		line, _ := br.ReadString('\n')
		if !strings.Contains(line, " 200 ") {
			b.Fatalf("CONNECT: %q", line)
		}
		br.ReadString('\n')
		return &bufConn{Conn: c, r: br}
	}
	fetch := func(dial func() net.Conn, what byte, n int64) time.Duration {
		start := time.Now()
		c := dial()
		defer c.Close()
		c.Write([]byte{what})
		if got, _ := io.CopyN(io.Discard, c, n); got != n {
			b.Fatalf("read %d of %d bytes", got, n)
		}
		return time.Since(start)
	}
	var dDown, pDown, dFirst, pFirst []time.Duration
	b.ResetTimer()
	for range b.N {
		dDown = append(dDown, fetch(direct, 'D', size))
		pDown = append(pDown, fetch(proxied, 'D', size))
		for range 20 {
			dFirst = append(dFirst, fetch(direct, '1', 1))
			pFirst = append(pFirst, fetch(proxied, '1', 1))
		}
	}
	b.StopTimer()
	med := func(ds []time.Duration) time.Duration {
		s := append([]time.Duration(nil), ds...)
		for i := range s {
			for j := i + 1; j < len(s); j++ {
				if s[j] < s[i] {
					s[i], s[j] = s[j], s[i]
				}
			}
		}
		return s[len(s)/2]
	}
	mib := func(d time.Duration) float64 { return float64(size) / (1 << 20) / d.Seconds() }
	b.ReportMetric(mib(med(dDown)), "direct-MiB/s")
	b.ReportMetric(mib(med(pDown)), "proxy-MiB/s")
	b.ReportMetric(mib(med(pDown))/mib(med(dDown)), "proxy/direct-throughput")
	b.ReportMetric(float64(med(pFirst)-med(dFirst))/1e3, "added-µs/connection")
	b.ReportMetric(0, "ns/op")
}

type bufConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *bufConn) Read(p []byte) (int, error) { return c.r.Read(p) }
