package probes

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync/atomic"
	"time"

	"github.com/cordon-run/cordon/capabilities"
	"github.com/cordon-run/cordon/substrate/bwrap"
	"github.com/cordon-run/cordon/substrate/egress"
)

func init() {
	register(Probe{Name: "bwrap/egress", Substrate: bwrap.Name,
		Mechanisms: ids(bwrap.EgressProxy(nil)),
		Expected: "through the egress proxy, a granted address on the host's loopback answers; a name not granted, and a granted name that resolves to loopback, are refused; " +
			"a direct connection to the host's listener fails; every decision is in the proxy's log",
		run: probeEgress})
}

// egressProbeNames is the egress probe's resolver: its own names, each the
// host's loopback, so that nothing leaves the machine.
type egressProbeNames struct{}

func (egressProbeNames) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if strings.HasSuffix(strings.TrimSuffix(host, "."), ".probe.cordon.invalid") {
		return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

// probeEgress runs a sandbox granted net.connect to the host's listener by
// address (a grant naming the address lifts the loopback refusal) and to
// a name that resolves to loopback (which the proxy must refuse), and asks
// through the forwarder for each, for a name not granted, and directly.
func probeEgress(ctx context.Context, e *Env) (string, bool, error) {
	ws, err := probeWorkspace(e)
	if err != nil {
		return "", false, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", false, fmt.Errorf("cannot listen on the host's loopback: %w", err)
	}
	defer ln.Close()
	var hits atomic.Int64
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		fmt.Fprint(w, "probe-answer")
	}), ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	defer srv.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	if fmt.Sprint(port) == strings.TrimPrefix(egress.ListenAddr, "127.0.0.1:") {
		return "", false, fmt.Errorf("the host's listener got the forwarder's port %d; run the probe again", port)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	internal := fmt.Sprintf("loop.probe.cordon.invalid:%d", port)
	set, err := capabilities.ParseSet([]string{"fs.read:workspace", "net.connect:host:" + addr, "net.connect:host:" + internal})
	if err != nil {
		return "", false, err
	}
	pol, err := bwrap.PolicyOf(set, ws, e.Harness)
	if err != nil {
		return "no sandbox: " + err.Error(), false, nil
	}
	proxy := egress.New(egress.Config{Rules: pol.Egress(), Resolver: egressProbeNames{}, DialTimeout: 3 * time.Second})
	// Raw HTTP through bash's /dev/tcp: no client of the host's is trusted
	// to honour the proxy variables, and the answers are checked here.
	ask := func(target string) string {
		return fmt.Sprintf(`if exec 3<>/dev/tcp/127.0.0.1/%s; then printf 'GET http://%s/ HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n' >&3; IFS= read -r l <&3; echo "${l%%%%$'\r'}"; exec 3>&-; else echo unreachable; fi`,
			strings.TrimPrefix(egress.ListenAddr, "127.0.0.1:"), target, target)
	}
	script := strings.Join([]string{
		"command -v bash >/dev/null || { echo untried; exit 0; }",
		"exec bash -c " + shellQuote(strings.Join([]string{
			ask(addr),
			ask(fmt.Sprintf("other.probe.cordon.invalid:%d", port)),
			ask(internal),
			fmt.Sprintf(`if exec 4<>/dev/tcp/127.0.0.1/%d; then echo direct-connected; else echo direct-failed; fi 2>/dev/null`, port),
		}, "\n")),
	}, "\n")
	o, err := bwrap.Run(ctx, bwrap.Spec{Policy: pol.WithSystemPath(true), Egress: proxy, Command: []string{"/bin/sh", "-c", script},
		Environ: e.Environ, Bwrap: e.Bwrap, Timeout: 8 * time.Second, MaxOutput: 64 << 10})
	if err != nil {
		return "no sandbox: " + err.Error(), false, nil
	}
	lines := strings.Split(strings.TrimSpace(o.Stdout), "\n")
	if len(lines) == 1 && lines[0] == "untried" {
		return "no bash in the sandbox to try connections with", false, nil
	}
	if len(lines) != 4 {
		return fmt.Sprintf("the probe script said %q (exit %d: %s)", o.Stdout, o.ExitCode, lastLine(o.Stderr)), false, nil
	}
	events := proxy.Events()
	var bad []string
	if !strings.HasPrefix(lines[0], "HTTP/1.1 200") || hits.Load() != 1 {
		bad = append(bad, fmt.Sprintf("the granted %s answered %q (the host's listener saw %d requests)", addr, lines[0], hits.Load()))
	}
	if !strings.HasPrefix(lines[1], "HTTP/1.1 403") {
		bad = append(bad, fmt.Sprintf("a name not granted answered %q", lines[1]))
	}
	if !strings.HasPrefix(lines[2], "HTTP/1.1 403") {
		bad = append(bad, fmt.Sprintf("a granted name of loopback answered %q", lines[2]))
	}
	if lines[3] != "direct-failed" {
		bad = append(bad, "a direct connection to the host's listener: "+lines[3])
	}
	if len(events) != 3 || !events[0].Allowed || events[1].Allowed || events[2].Allowed || !strings.Contains(events[2].Reason, "loopback") {
		bad = append(bad, fmt.Sprintf("the proxy's log: %+v", events))
	}
	if len(bad) > 0 {
		return strings.Join(bad, "; "), false, nil
	}
	return fmt.Sprintf("%s answered through the proxy; other.probe.cordon.invalid refused (%s); %s refused (%s); a direct connection failed",
		addr, events[1].Reason, internal, events[2].Reason), true, nil
}

// shellQuote quotes s for sh.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
