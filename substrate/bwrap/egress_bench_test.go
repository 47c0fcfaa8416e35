package bwrap

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cordon-run/cordon/substrate/egress"
)

// BenchmarkEgressSandbox measures the whole egress path a tool's
// download takes — curl in a sandbox of network none, through the
// forwarder and the proxy on the host — against the same curl on the
// host downloading directly, side by side: 100 MiB from a loopback
// server, each speed as curl itself reports it (process start excluded).
// substrate/egress's BenchmarkEgress measures the proxy alone.
func BenchmarkEgressSandbox(b *testing.B) {
	const size = 100 << 20
	bin, err := Find(os.Getenv("PATH"))
	if err != nil || Detect(context.Background(), bin) != nil {
		b.Skipf("no working bubblewrap: %v", err)
	}
	curl, err := exec.LookPath("curl")
	if err != nil {
		b.Skip("curl: ", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	go serveBulk(ln, size)
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	rule, _ := egress.ParseRule("bulk.example.test:" + port)
	ws, err := filepath.EvalSymlinks(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	speed := func(out string) float64 {
		v, err := strconv.ParseFloat(strings.TrimSpace(out), 64)
		if err != nil || v <= 0 {
			b.Fatalf("curl printed %q", out)
		}
		return v / (1 << 20)
	}
	args := []string{"-sS", "-o", "/dev/null", "-w", "%{speed_download}"}
	var direct, proxied, hostProxied, tunnelled []float64
	hp := egress.New(egress.Config{Rules: []egress.Rule{rule}, AllowInternal: true,
		Resolver: testNames{"bulk.example.test": "127.0.0.1"}})
	pln, _ := net.Listen("tcp", "127.0.0.1:0")
	go hp.Serve(b.Context(), pln)
	b.ResetTimer()
	for range b.N {
		out0, err := exec.Command(curl, append(args, "-x", "http://"+pln.Addr().String(), "http://bulk.example.test:"+port+"/")...).Output()
		if err != nil {
			b.Fatalf("host curl: %v", err)
		}
		hostProxied = append(hostProxied, speed(string(out0)))
		out, err := exec.Command(curl, append(args, "http://127.0.0.1:"+port+"/")...).Output()
		if err != nil {
			b.Fatalf("direct curl: %v", err)
		}
		direct = append(direct, speed(string(out)))

		proxy := egress.New(egress.Config{Rules: []egress.Rule{rule}, AllowInternal: true,
			Resolver: testNames{"bulk.example.test": "127.0.0.1"}})
		o, err := Run(context.Background(), Spec{Policy: newPolicy(ws).WithSystemPath(true).WithEgress(rule).WithReadOnly(curl), Egress: proxy,
			Command: append(append([]string{curl}, args...), "http://bulk.example.test:"+port+"/"), Timeout: time.Minute, MaxOutput: 1 << 16})
		if err != nil || o.ExitCode != 0 {
			b.Fatalf("curl in the sandbox: %v exit %d %s", err, o.ExitCode, o.Stderr)
		}
		proxied = append(proxied, speed(o.Stdout))

		// -p: a CONNECT tunnel, as https takes
		proxy = egress.New(egress.Config{Rules: []egress.Rule{rule}, AllowInternal: true,
			Resolver: testNames{"bulk.example.test": "127.0.0.1"}})
		o, err = Run(context.Background(), Spec{Policy: newPolicy(ws).WithSystemPath(true).WithEgress(rule).WithReadOnly(curl), Egress: proxy,
			Command: append(append([]string{curl, "-p"}, args...), "http://bulk.example.test:"+port+"/"), Timeout: time.Minute, MaxOutput: 1 << 16})
		if err != nil || o.ExitCode != 0 {
			b.Fatalf("curl -p in the sandbox: %v exit %d %s", err, o.ExitCode, o.Stderr)
		}
		tunnelled = append(tunnelled, speed(o.Stdout))
	}
	b.StopTimer()
	slices.Sort(direct)
	slices.Sort(proxied)
	d, p := direct[len(direct)/2], proxied[len(proxied)/2]
	b.ReportMetric(d, "direct-MiB/s")
	b.ReportMetric(p, "sandbox-proxy-MiB/s")
	b.ReportMetric(p/d, "sandbox-proxy/direct-throughput")
	slices.Sort(tunnelled)
	b.ReportMetric(tunnelled[len(tunnelled)/2]/d, "sandbox-tunnel/direct-throughput")
	slices.Sort(hostProxied)
	b.ReportMetric(hostProxied[len(hostProxied)/2]/d, "host-proxy/direct-throughput")
	b.ReportMetric(0, "ns/op")
}

// serveBulk answers every HTTP request on ln with size bytes.
func serveBulk(ln net.Listener, size int) {
	chunk := make([]byte, 256<<10)
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			buf := make([]byte, 4096)
			var req []byte
			for !strings.Contains(string(req), "\r\n\r\n") && len(req) < 64<<10 {
				n, err := c.Read(buf)
				if err != nil {
					return
				}
				req = append(req, buf[:n]...)
			}
			fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n", size)
			for left := size; left > 0; {
				k := min(left, len(chunk))
				if _, err := c.Write(chunk[:k]); err != nil {
					return
				}
				left -= k
			}
			io.Copy(io.Discard, c)
		}()
	}
}
