// Package autonomy decides whether a run may start at an autonomy level.
//
// At [Supervised] — a person approves each run, cordon's behaviour without
// the flag — nothing is required. [Unattended] runs start only where the
// worst case is a discarded folder, under confinement proved on this host:
//
//   - root: the workspace is a disposable root cordon made (its record
//     authenticated with the key store), so that everything the run
//     writes can be reviewed (cordon root diff) before it reaches the
//     origin, or thrown away;
//   - sandbox: the run is sandboxed (bwrap, landlock, oci or wasm; not
//     --no-sandbox), and the substrate works here now;
//   - evidence: every probe of the substrate has a fresh passing receipt
//     in the root's evidence log — made before the decision, never run for
//     it (cordon probe makes them);
//   - harness-state: at least two independent mechanisms keep the
//     harness's own state from the run (for bwrap the read-only binds of
//     the mount namespace, seccomp's refusal of mount calls that could undo
//     them, and no capabilities; for oci the same three, as the bundle
//     states them; for landlock its rules, seccomp and no capabilities);
//   - network: none;
//   - memory, pids: a limit is applied;
//   - time: a deadline of at most [MaxTime].
//
// [Check] returns every precondition with what it rests on; the decision
// is recorded as a receipt by the caller (evidence.AutonomyPredicate).
package autonomy

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/cordon-run/cordon/evidence"
	"github.com/cordon-run/cordon/probes"
	"github.com/cordon-run/cordon/refusal"
	"github.com/cordon-run/cordon/roots"
	"github.com/cordon-run/cordon/substrate"
)

// The levels.
const (
	Supervised = "supervised"
	Unattended = "unattended"
)

// MaxTime is the longest deadline an unattended run may have.
const MaxTime = time.Hour

// ParseLevel checks a level's name.
func ParseLevel(s string) (string, error) {
	switch s {
	case Supervised, Unattended:
		return s, nil
	case "":
		return Supervised, nil
	}
	return "", refusal.Errorf(refusal.UsageError, "unknown autonomy level %q: want %s or %s", s, Supervised, Unattended)
}

// Input is what a decision looks at.
type Input struct {
	Level     string
	Workspace string // canonical
	// Substrate is the substrate the run uses ("host": no sandbox);
	// Mechanisms what it applies (runtime.Plan); Time the run's deadline.
	Substrate  string
	Mechanisms []substrate.Mechanism
	Time       time.Duration
	// Roots finds the workspace's root; Prover the workspace's evidence.
	Roots  *roots.Roots
	Prover *probes.Prover
	// Available checks that the substrate works here now (nil: not
	// checked).
	Available func(ctx context.Context) error
}

// Report is a decision: each precondition, checked.
type Report struct {
	Level         string                  `json:"level"`
	Allowed       bool                    `json:"allowed"`
	Workspace     string                  `json:"workspace"`
	Substrate     string                  `json:"substrate"`
	Root          *roots.Root             `json:"root,omitempty"`
	Preconditions []evidence.Precondition `json:"preconditions"`
}

// Err is nil when the run may start, else an [refusal.AutonomyRefused]
// naming every precondition that does not hold.
func (r *Report) Err() error {
	if r.Allowed {
		return nil
	}
	var failed []string
	for _, p := range r.Preconditions {
		if !p.Pass {
			failed = append(failed, p.Name+": "+p.Detail)
		}
	}
	return refusal.Errorf(refusal.AutonomyRefused, "refusing to start %s in %s: %d precondition(s) do not hold — %s", r.Level, r.Workspace, len(failed), strings.Join(failed, "; "))
}

// Check decides whether a run described by in may start at its level.
func Check(ctx context.Context, in Input) (*Report, error) {
	lvl, err := ParseLevel(in.Level)
	if err != nil {
		return nil, err
	}
	r := &Report{Level: lvl, Workspace: in.Workspace, Substrate: in.Substrate}
	if lvl == Supervised {
		r.Allowed = true
		r.Preconditions = []evidence.Precondition{{Name: "supervised", Pass: true, Detail: "a person approves each run: no precondition"}}
		return r, nil
	}
	add := func(name string, pass bool, detail string, ev ...string) {
		r.Preconditions = append(r.Preconditions, evidence.Precondition{Name: name, Pass: pass, Detail: detail, Evidence: ev})
	}
	r.Root = checkRoot(in, add)
	checkSandbox(ctx, in, add)
	if err := checkEvidence(ctx, in, add); err != nil {
		return nil, err
	}
	checkHarness(in, add)
	checkLimits(in, add)
	r.Allowed = !slices.ContainsFunc(r.Preconditions, func(p evidence.Precondition) bool { return !p.Pass })
	return r, nil
}

type adder func(name string, pass bool, detail string, ev ...string)

func checkRoot(in Input, add adder) *roots.Root {
	if in.Roots == nil {
		add("root", false, "no record of disposable roots to look in")
		return nil
	}
	r, err := in.Roots.Of(in.Workspace)
	if err != nil {
		add("root", false, fmt.Sprintf("%v; make one with cordon root create --from %s and run there", err, in.Workspace))
		return nil
	}
	add("root", true, fmt.Sprintf("a disposable root cordon made from %s at %s (%s)", r.Origin, r.Created.Format(time.RFC3339), r.Mode), "root:"+r.ID, "base:"+r.Base)
	return r
}

func checkSandbox(ctx context.Context, in Input, add adder) {
	switch in.Substrate {
	case "host", "":
		add("sandbox", false, "the run is not sandboxed (--no-sandbox); drop --no-sandbox")
		return
	}
	if in.Available != nil {
		if err := in.Available(ctx); err != nil {
			add("sandbox", false, fmt.Sprintf("the %s substrate does not work here now: %v", in.Substrate, err))
			return
		}
	}
	add("sandbox", true, "sandboxed on "+in.Substrate)
}

// probesOf are the probes whose receipts an unattended run on sub needs:
// the substrate's, and the workspace guard's (the file tools).
func probesOf(sub string) []probes.Probe {
	return probes.For(sub, "workspace")
}

func checkEvidence(ctx context.Context, in Input, add adder) error {
	if in.Prover == nil || in.Substrate == "host" || in.Substrate == "" {
		add("evidence", false, "no evidence of a sandbox to check")
		return nil
	}
	ps := probesOf(in.Substrate)
	if len(ps) == 0 {
		add("evidence", false, "no probe proves the "+in.Substrate+" substrate")
		return nil
	}
	fs, err := in.Prover.Check(ctx, ps)
	if err != nil {
		return err
	}
	var bad, cited []string
	for _, f := range fs {
		if f.Fresh {
			cited = append(cited, f.Receipt)
		} else {
			bad = append(bad, f.Probe+" ("+f.Why+")")
		}
	}
	if len(bad) > 0 {
		add("evidence", false, fmt.Sprintf("%d of %d probes of %s have no fresh passing receipt here: %s; run cordon probe -w %s", len(bad), len(fs), in.Substrate, strings.Join(bad, ", "), in.Workspace))
		return nil
	}
	add("evidence", true, fmt.Sprintf("%d probes of %s passed within %v, on this host and binary", len(fs), in.Substrate, probes.DefaultTTL), cited...)
	return nil
}

// harnessKinds names, for each substrate, the independent mechanisms
// that keep the harness's state from a run, by the mechanism names that
// make each.
var harnessKinds = map[string][]struct {
	kind  string
	names []string
	any   bool // one of names is enough (else all of them)
}{
	"bwrap": {
		{"mount namespace: the workspace's harness directories bound read-only, cordon's per-user state hidden", []string{"ro-harness", "hide-trusted-state"}, false},
		{"seccomp: mount, umount, pivot_root and the mount API refused, so no bind can be undone", []string{"seccomp"}, false},
		{"no capabilities: a user namespace and --cap-drop ALL", []string{"cap-drop", "unshare-user"}, false},
	},
	"oci": {
		{"the container's mount table: the workspace's harness directories bound read-only (rro), cordon's per-user state hidden", []string{"ro-harness", "hide-trusted-state"}, false},
		{"seccomp (linux.seccomp): mount, umount, pivot_root and the mount API refused, so no bind can be undone", []string{"seccomp"}, false},
		{"no capabilities: every set of process.capabilities empty, noNewPrivileges", []string{"no-capabilities"}, false},
	},
	"landlock": {
		{"Landlock: the harness directories get no write access, cordon's per-user state no access", []string{"write-workspace", "ro-workspace"}, true},
		{"seccomp: the metadata and mount calls refused", []string{"seccomp"}, false},
		{"no capabilities, no_new_privs", []string{"no-capabilities", "no-new-privs"}, false},
	},
	"wasm": {
		{"wasm: harness state is not exported to the module", []string{"harness-absent"}, false},
		{"the file guard behind every file call refuses harness state", []string{"wasi-guard-ro", "wasi-guard-rw"}, true},
	},
}

func checkHarness(in Input, add adder) {
	kinds := harnessKinds[in.Substrate]
	var held, ev []string
	for _, k := range kinds {
		var found []string
		for _, m := range in.Mechanisms {
			if slices.Contains(k.names, m.Name) {
				found = append(found, m.String())
			}
		}
		names := map[string]bool{}
		for _, m := range in.Mechanisms {
			if slices.Contains(k.names, m.Name) {
				names[m.Name] = true
			}
		}
		if len(names) == len(k.names) || k.any && len(names) > 0 {
			held = append(held, k.kind)
			ev = append(ev, found...)
		}
	}
	if len(held) < 2 {
		add("harness-state", false, fmt.Sprintf("%d independent mechanism(s) keep harness state from the run (%s); 2 are required", len(held), strings.Join(held, "; ")))
		return
	}
	add("harness-state", true, fmt.Sprintf("%d independent mechanisms: %s", len(held), strings.Join(held, "; ")), ev...)
}

func checkLimits(in Input, add adder) {
	has := func(names ...string) []string {
		var out []string
		for _, m := range in.Mechanisms {
			if slices.Contains(names, m.Name) {
				out = append(out, m.String())
			}
		}
		return out
	}
	switch {
	case in.Substrate == "host" || in.Substrate == "":
		add("network", false, "the host's network: no sandbox")
	case len(has("share-net", "net-host", "net-connect-tcp", "net.connect", "egress-proxy")) > 0:
		add("network", false, "the run may reach the network; unattended runs get none (drop --net host, --allow-host)")
	case len(has("unshare-net", "net-none", "wasi-no-socket")) > 0:
		add("network", true, "no network", has("unshare-net", "net-none", "wasi-no-socket")...)
	default:
		add("network", false, "no mechanism of the run takes the network away")
	}
	if m := has("memory", "memory-limit"); len(m) > 0 {
		add("memory", true, "a memory limit is applied", m...)
	} else {
		add("memory", false, "no memory limit is applied; pass --memory SIZE, or declare memory: (on this host a default applies to native runs only on a memory cgroup)")
	}
	if in.Substrate == "wasm" {
		// A property of the substrate, not of a grant: WASI here has no
		// call that starts a process.
		add("pids", true, "the wasm substrate serves no call that starts a process", has("no-processes")...)
	} else {
		if m := has("pids"); len(m) > 0 {
			add("pids", true, "a process limit is applied", m...)
		} else {
			add("pids", false, "no process limit is applied; pass --pids N (as root a process limit needs a pids cgroup)")
		}
	}
	switch {
	case in.Time <= 0:
		add("time", false, "the run has no deadline")
	case in.Time > MaxTime:
		add("time", false, fmt.Sprintf("the deadline is %v; unattended runs get at most %v (--timeout)", in.Time, MaxTime))
	default:
		add("time", true, fmt.Sprintf("a deadline of %v, then the whole process tree is killed", in.Time))
	}
}

// Workspace returns dir canonical, for [Input.Workspace].
func Workspace(dir string) string {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return dir
	}
	if p, err := filepath.EvalSymlinks(abs); err == nil {
		return p
	}
	return abs
}
