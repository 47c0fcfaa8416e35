package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cordon-run/cordon/admission"
	"github.com/cordon-run/cordon/evidence"
	"github.com/cordon-run/cordon/probes"
	"github.com/cordon-run/cordon/runtime"
)

func init() {
	register(evidenceCommand)
	register(command{name: "probe", summary: "[--substrate S]: prove each mechanism on this host; receipts go to the evidence log", usage: probeUsage, run: runProbe})
}

const probeUsage = `usage: cordon probe [-w DIR] [--json] [--substrate bwrap|landlock|wasm|workspace]...
  Tries every escape the substrates must stop, for real, in parallel, and
  appends a signed receipt per probe to the workspace's evidence log
  (.foundry/evidence). Exit 0 when every probe passed, 1 when one failed.`

func runProbe(e *env, args []string) int {
	fs := e.flags("probe")
	subs := fs.StringArray("substrate", nil, "only the probes of this substrate (repeatable)")
	if code := e.parse(fs, args, probeUsage); code >= 0 {
		return code
	}
	if fs.NArg() != 0 {
		return e.usageError("probe takes no arguments\n" + probeUsage)
	}
	known := probes.Substrates()
	for _, s := range *subs {
		if !slices.Contains(known, s) {
			return e.usageError(fmt.Sprintf("unknown substrate %q: want %s", s, strings.Join(known, ", ")))
		}
	}
	prover, err := e.prover()
	if err != nil {
		return e.fail(err)
	}
	ctx, intr := interruptible()
	defer intr.stop()
	host, bin, err := prover.Host(ctx)
	if err != nil {
		return e.fail(err)
	}
	ps := probes.For(*subs...)
	start := time.Now()
	var mu sync.Mutex
	var done int
	tty := !e.json && isTerminal(e.stderr)
	results := probes.Run(ctx, ps, prover.Probes, func(r probes.Result) {
		if !tty {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		done++
		fmt.Fprintf(e.stderr, "\r\033[K[%d/%d] %s %s", done, len(ps), mark(r.Pass), r.Probe.Name)
	})
	if tty {
		fmt.Fprint(e.stderr, "\r\033[K")
	}
	took := time.Since(start)
	rows := make([]probeRow, 0, len(results))
	failed := 0
	for _, r := range results {
		entry, err := prover.Record(r, host, bin)
		if err != nil {
			return e.fail(err)
		}
		if !r.Pass {
			failed++
		}
		rows = append(rows, probeRow{Probe: r.Probe.Name, Substrate: r.Probe.Substrate, Mechanisms: r.Probe.Mechanisms,
			Expected: r.Probe.Expected, Observed: r.Observed, Pass: r.Pass,
			DurationMS: float64(r.Duration.Microseconds()) / 1000, Receipt: entry.Digest, Sequence: entry.Sequence})
	}
	dir := prover.Log.Dir()
	report := prover.Log.Verify()
	if e.json {
		out := map[string]any{"ok": failed == 0 && report.OK, "probes": rows, "failed": failed,
			"duration_ms": float64(took.Microseconds()) / 1000, "host": host, "cordon": bin,
			"evidence": dir, "verified": report.OK, "receipts": report.Count}
		if !report.OK && report.First != nil {
			out["problem"] = report.First
		}
		e.printJSON(out)
	} else {
		w := 10
		for _, r := range rows {
			w = max(w, len(r.Probe))
		}
		fmt.Fprintf(e.stdout, "   %-*s  %-9s  %s\n", w, "probe", "substrate", "observed")
		for _, r := range rows {
			fmt.Fprintf(e.stdout, "%s  %-*s  %-9s  %s\n", mark(r.Pass), w, r.Probe, r.Substrate, r.Observed)
		}
		fmt.Fprintf(e.stdout, "%d of %d probes passed in %.2f s on %s %s (uid %d%s); receipts #%d-#%d in %s",
			len(rows)-failed, len(rows), took.Seconds(), host.OS, host.Kernel, host.UID, containerNote(host),
			first(rows), last(rows), dir)
		if report.OK {
			fmt.Fprintf(e.stdout, ", %d receipts verified\n", report.Count)
		} else {
			fmt.Fprintf(e.stdout, "\ncordon: the evidence log does not verify: %s\n", shown(report.First.String()))
		}
		for _, d := range probes.Degraded(host, "bwrap") {
			if len(*subs) == 0 || slices.Contains(*subs, "bwrap") {
				fmt.Fprintf(e.stdout, "degraded: bwrap: %s\n", d)
			}
		}
	}
	if failed > 0 || !report.OK {
		return exitError
	}
	return exitOK
}

// probeRow is one probe's line of the table and of the JSON.
type probeRow struct {
	Probe      string   `json:"probe"`
	Substrate  string   `json:"substrate"`
	Mechanisms []string `json:"mechanisms"`
	Expected   string   `json:"expected"`
	Observed   string   `json:"observed"`
	Pass       bool     `json:"pass"`
	DurationMS float64  `json:"duration_ms"`
	Receipt    string   `json:"receipt"`
	Sequence   int64    `json:"sequence"`
}

func first(rows []probeRow) int64 {
	if len(rows) == 0 {
		return 0
	}
	return rows[0].Sequence
}

func last(rows []probeRow) int64 {
	if len(rows) == 0 {
		return 0
	}
	return rows[len(rows)-1].Sequence
}

func mark(pass bool) string {
	if pass {
		return "✓"
	}
	return "✗"
}

func containerNote(h evidence.Host) string {
	if h.Container {
		return ", in a container"
	}
	return ""
}

// prover returns the prover admission uses: probes under this
// configuration, receipts in the workspace's evidence log, signed with
// this user's evidence key (created when missing).
func (e *env) prover() (*probes.Prover, error) {
	if e.prov != nil {
		return e.prov, nil
	}
	h, err := e.harnessConfig()
	if err != nil {
		return nil, err
	}
	log, _, err := e.evidenceLog(true)
	if err != nil {
		return nil, err
	}
	e.closers = append(e.closers, func() { log.Close() })
	e.prov = &probes.Prover{Log: log, Probes: probes.Config{Harness: h}, StateDir: h.StateDir()}
	return e.prov, nil
}

// runReceipt appends the receipt of a run (exec or run) to the evidence
// log: what ran under which grant, the mechanisms and the receipts that
// proved them, and digests of the output.
func (e *env) runReceipt(ctx context.Context, op string, p *admission.Prepared, res runtime.Result) (evidence.Entry, error) {
	prover, err := e.prover()
	if err != nil {
		return evidence.Entry{}, err
	}
	host, bin, err := prover.Host(ctx)
	if err != nil {
		return evidence.Entry{}, err
	}
	g := p.Grant
	run := &evidence.Run{
		Op: op, Substrate: res.Substrate, Sandboxed: res.Sandboxed,
		Capabilities: g.All().Strings(), Mechanisms: g.Mechanisms,
		ExitCode: res.ExitCode, Signal: res.Signal, TimedOut: res.TimedOut,
		StdoutDigest: digestOf(res.Stdout), StderrDigest: digestOf(res.Stderr),
		StdoutBytes: res.StdoutBytes, StderrBytes: res.StderrBytes,
		StdoutClipped: res.StdoutClipped, StderrClipped: res.StderrClipped,
		DurationMS:    float64(res.Duration.Microseconds()) / 1000,
		EgressDropped: res.EgressDropped,
	}
	for _, ev := range res.Egress {
		run.Egress = append(run.Egress, evidence.EgressEvent{Time: ev.Time, Method: ev.Method, Name: ev.Name, Port: ev.Port,
			Addr: ev.Addr, Allowed: ev.Allowed, Reason: ev.Reason, Up: ev.Up, Down: ev.Down})
	}
	for c, cs := range g.Evidence {
		if run.Evidence == nil {
			run.Evidence = map[string][]string{}
		}
		for _, cit := range cs {
			run.Evidence[c] = append(run.Evidence[c], cit.Receipt)
		}
	}
	var subject evidence.Subject
	subject, run.Digest = runSubject(p)
	if p.Tool != nil {
		run.Tool = g.Tool
	} else {
		run.Command = p.Command
	}
	return prover.Log.Append([]evidence.Subject{subject}, evidence.RunPredicate,
		evidence.Receipt{Host: host, Cordon: bin, Verdict: evidence.Ran, Run: run})
}

// runSubject is what a receipt about running p is about: the tool (by
// its artifact's digest) or the command (by its argv's), and that digest.
func runSubject(p *admission.Prepared) (evidence.Subject, string) {
	s := evidence.Subject{Name: "command"}
	digest := p.Grant.Digest
	if p.Tool != nil {
		s.Name = "tool:" + p.Grant.Tool
	} else {
		argv, _ := json.Marshal(p.Command)
		digest = digestOf(string(argv))
	}
	s.Digest = map[string]string{"sha256": strings.TrimPrefix(digest, "sha256:")}
	return s, digest
}

func digestOf(s string) string {
	sum := sha256.Sum256([]byte(s))
	return "sha256:" + hex.EncodeToString(sum[:])
}
