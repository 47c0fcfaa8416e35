package probes

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cordon-run/cordon/evidence"
)

// DefaultTTL is how long a probe's receipt counts as fresh: a grant cites
// receipts no older, made under the same host facts by the same cordon
// binary. A kernel update, a new bubblewrap, another user or another
// cordon makes them stale at once; the hour bounds what the facts do not
// show (a sysctl switched, an AppArmor profile loaded).
const DefaultTTL = time.Hour

// Citation names the receipt that proved a mechanism.
type Citation struct {
	Probe    string    `json:"probe"`
	Receipt  string    `json:"receipt"` // "sha256:..." of the receipt's file
	Sequence int64     `json:"sequence"`
	Time     time.Time `json:"time"`
}

// Failure is a probe whose receipt says the mechanism did not hold.
type Failure struct {
	Probe    string `json:"probe"`
	Observed string `json:"observed"`
	Receipt  string `json:"receipt,omitempty"`
}

// Proof is what the receipts say of a set of mechanisms.
type Proof struct {
	// Citations lists, for each mechanism with a probe, the fresh passing
	// receipts of every probe that proves it.
	Citations map[string][]Citation
	// Failed lists, for each mechanism, the probes that failed.
	Failed map[string][]Failure
	// Unproved are the mechanisms no probe covers.
	Unproved []string
	// Degraded says what the host lacks that the substrates use.
	Degraded []string
	// Ran are the probes run now (their receipts were missing or stale).
	Ran []Result
}

// Prover finds the receipts that prove mechanisms on this host, and runs
// the probes whose receipts are missing or stale first, appending their
// receipts to the log.
type Prover struct {
	Log *evidence.Log
	// Probes configures the probes it runs.
	Probes Config
	// StateDir is cordon's per-user state directory (where the binary's
	// digest is kept).
	StateDir string
	// TTL is how long a receipt stays fresh (zero: [DefaultTTL]).
	TTL time.Duration
	// Now returns the time (nil: time.Now).
	Now func() time.Time

	once sync.Once
	host evidence.Host
	bin  evidence.Binary
	err  error
}

func (p *Prover) facts(ctx context.Context) (evidence.Host, evidence.Binary, error) {
	p.once.Do(func() {
		p.host = HostFacts(ctx, p.Probes.Harness, p.Probes.Bwrap)
		p.bin, p.err = BinaryOf(p.StateDir)
	})
	return p.host, p.bin, p.err
}

// Host returns the host facts receipts are made and checked under.
func (p *Prover) Host(ctx context.Context) (evidence.Host, evidence.Binary, error) {
	return p.facts(ctx)
}

// Prove returns what the receipts say of mechanisms ("<substrate>/<name>")
// as the substrate sub applies them, running first every probe they need
// whose receipt is missing, stale, or a failure (a failure is tried again:
// it may have passed since). A mechanism several substrates share (the
// process layer's deadline, "proc/deadline") is proved by sub's own
// probes where sub has some: another substrate's probe then neither proves
// it for sub nor, when that substrate is missing here, disproves it. A
// mechanism sub has no probe of (the file guard's, for a WebAssembly
// tool) is proved by the probes that prove it. An empty sub takes every
// substrate's probes.
func (p *Prover) Prove(ctx context.Context, sub string, mechanisms []string) (*Proof, error) {
	host, bin, err := p.facts(ctx)
	if err != nil {
		return nil, err
	}
	proof := &Proof{Citations: map[string][]Citation{}, Failed: map[string][]Failure{}}
	needed := map[string]Probe{}
	var order []string
	for _, m := range mechanisms {
		ps := provingOn(m, sub)
		if len(ps) == 0 {
			if !slices.Contains(proof.Unproved, m) {
				proof.Unproved = append(proof.Unproved, m)
			}
			continue
		}
		for _, pr := range ps {
			if _, ok := needed[pr.Name]; !ok {
				needed[pr.Name] = pr
				order = append(order, pr.Name)
			}
		}
	}
	type outcome struct {
		cite Citation
		fail *Failure
	}
	outcomes := map[string]outcome{}
	var stale []Probe
	for _, name := range order {
		idx, ok, err := p.Log.LatestProbe(name)
		if err != nil {
			return nil, err
		}
		if p.stale(idx, ok, host, bin) == "" {
			outcomes[name] = outcome{cite: Citation{Probe: name, Receipt: idx.Digest, Sequence: idx.Sequence, Time: idx.Time}}
			continue
		}
		stale = append(stale, needed[name])
	}
	if len(stale) > 0 {
		results := Run(ctx, stale, p.Probes, nil)
		for _, r := range results {
			entry, err := p.Record(r, host, bin)
			if err != nil {
				return nil, err
			}
			proof.Ran = append(proof.Ran, r)
			if r.Pass {
				outcomes[r.Probe.Name] = outcome{cite: Citation{Probe: r.Probe.Name, Receipt: entry.Digest, Sequence: entry.Sequence, Time: entry.Statement.Predicate.Time}}
			} else {
				outcomes[r.Probe.Name] = outcome{fail: &Failure{Probe: r.Probe.Name, Observed: r.Observed, Receipt: entry.Digest}}
			}
		}
	}
	subs := map[string]bool{}
	for _, m := range mechanisms {
		for _, pr := range provingOn(m, sub) {
			subs[pr.Substrate] = true
			o := outcomes[pr.Name]
			if o.fail != nil {
				proof.Failed[m] = append(proof.Failed[m], *o.fail)
			} else {
				proof.Citations[m] = append(proof.Citations[m], o.cite)
			}
		}
	}
	for s := range subs {
		for _, d := range Degraded(host, s) {
			d = s + ": " + d
			if !slices.Contains(proof.Degraded, d) {
				proof.Degraded = append(proof.Degraded, d)
			}
		}
	}
	slices.Sort(proof.Degraded)
	return proof, nil
}

// provingOn returns the probes that prove mechanism m for substrate sub:
// sub's own where it has some, else every probe of m (the file guard's,
// say, which a WebAssembly tool's grant relies on; "" takes every probe).
func provingOn(m, sub string) []Probe {
	all := Proving(m)
	var own []Probe
	for _, pr := range all {
		if pr.Substrate == sub {
			own = append(own, pr)
		}
	}
	if len(own) == 0 {
		return all
	}
	return own
}

// Record appends the receipt of one probe's result to the log.
func (p *Prover) Record(r Result, host evidence.Host, bin evidence.Binary) (evidence.Entry, error) {
	verdict := evidence.Fail
	if r.Pass {
		verdict = evidence.Pass
	}
	rec := evidence.Receipt{
		Host:    host,
		Cordon:  bin,
		Verdict: verdict,
		Probe: &evidence.Probe{
			Name: r.Probe.Name, Substrate: r.Probe.Substrate, Mechanisms: r.Probe.Mechanisms,
			Expected: r.Probe.Expected, Observed: r.Observed, Degraded: Degraded(host, r.Probe.Substrate),
			DurationMS: float64(r.Duration.Microseconds()) / 1000,
		},
	}
	entry, err := p.Log.Append(BinarySubject(bin), evidence.ProbePredicate, rec)
	if err != nil {
		return evidence.Entry{}, fmt.Errorf("cannot record the receipt of probe %s: %w", r.Probe.Name, err)
	}
	return entry, nil
}

// BinarySubject is the subject of a probe's receipt: the cordon binary
// that ran it.
func BinarySubject(bin evidence.Binary) []evidence.Subject {
	return []evidence.Subject{{Name: "cordon", Digest: map[string]string{"sha256": strings.TrimPrefix(bin.Digest, "sha256:")}}}
}

// stale says why a probe's latest receipt (ok: there is one) is not fresh
// passing evidence here and now, or "" when it is: a pass, under this
// host's facts, by this binary, younger than the TTL, not dated ahead.
func (p *Prover) stale(idx evidence.ProbeIndex, ok bool, host evidence.Host, bin evidence.Binary) string {
	now := time.Now
	if p.Now != nil {
		now = p.Now
	}
	ttl := p.TTL
	if ttl <= 0 {
		ttl = DefaultTTL
	}
	switch age := now().Sub(idx.Time); {
	case !ok:
		return "no receipt"
	case idx.Verdict != evidence.Pass:
		return "its latest receipt is a failure"
	case idx.Host != host.Digest():
		return "made under other host facts (kernel, bubblewrap, OCI runtime, uid, harness configuration)"
	case idx.Cordon != bin.Digest:
		return "made by another cordon binary"
	case age >= ttl:
		return fmt.Sprintf("%v old; receipts count for %v", age.Round(time.Second), ttl)
	case idx.Time.After(now().Add(time.Minute)):
		return "dated in the future"
	}
	return ""
}

// Freshness is what the log holds of one probe, looked up without running
// anything.
type Freshness struct {
	Probe     string    `json:"probe"`
	Substrate string    `json:"substrate"`
	Fresh     bool      `json:"fresh"` // a passing receipt, fresh
	Why       string    `json:"why,omitempty"`
	Receipt   string    `json:"receipt,omitempty"`
	Sequence  int64     `json:"sequence,omitempty"`
	Time      time.Time `json:"time,omitzero"`
}

// Check reports for each probe whether the log holds a fresh passing
// receipt of it — under this host's facts, by this cordon binary, within
// the TTL — and why not, running nothing: for a decision that must rest on
// evidence already made (an unattended run), not on a probe run for it.
func (p *Prover) Check(ctx context.Context, ps []Probe) ([]Freshness, error) {
	host, bin, err := p.facts(ctx)
	if err != nil {
		return nil, err
	}
	var out []Freshness
	for _, pr := range ps {
		f := Freshness{Probe: pr.Name, Substrate: pr.Substrate}
		idx, ok, err := p.Log.LatestProbe(pr.Name)
		if err != nil {
			return nil, err
		}
		f.Why = p.stale(idx, ok, host, bin)
		f.Fresh = f.Why == ""
		if ok {
			f.Receipt, f.Sequence, f.Time = idx.Digest, idx.Sequence, idx.Time
		}
		out = append(out, f)
	}
	return out, nil
}
