// Package probes proves, on this host, that each substrate's mechanisms
// work: every probe tries an escape for real (a write outside the
// workspace, a write to harness state, a capability held, a listener on
// the host's loopback reached, a run past its deadline) and states what it
// expected and what it observed. The receipts of package evidence record
// the outcome; admission cites them in grants.
//
// Probes are small and independent; [Run] runs a set of them in parallel,
// each in temporary directories of its own, and touches nothing else.
package probes

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/cordon-run/cordon/harness"
)

// Probe is one escape tried for real.
type Probe struct {
	// Name is stable: "<substrate>/<what>", e.g. "bwrap/write-outside".
	Name string
	// Substrate is the substrate whose mechanisms it proves.
	Substrate string
	// Mechanisms are the mechanisms it proves, as "<substrate>/<name>"
	// ([substrate.Mechanism] Substrate and Name), e.g. "bwrap/ro-root".
	Mechanisms []string
	// Expected says what a working mechanism does, in a few words.
	Expected string
	// alone: the probe runs after the others, by itself — a limit that
	// counts every task of the user (RLIMIT_NPROC) must not have its
	// budget eaten by the probes beside it.
	alone bool
	// run tries it: what it observed, and whether that is what was
	// expected. An error is a probe that could not be carried out (it
	// counts as a failure, its message the observation).
	run func(ctx context.Context, e *Env) (observed string, ok bool, err error)
}

// Env is what a probe runs with.
type Env struct {
	// Dir is a temporary directory of the probe's own, removed after it.
	Dir string
	// Harness is the harness configuration the probe's sandboxes use.
	Harness harness.Config
	// Environ is the environment the probe's sandboxes draw from.
	Environ []string
	// Bwrap is the bubblewrap binary ("": looked up in Environ's PATH).
	Bwrap string
	// substrate is the probe's substrate: the one sandboxed runs on.
	substrate string
}

// Result is what one probe observed.
type Result struct {
	Probe    Probe
	Observed string
	Pass     bool
	Duration time.Duration
}

// Config configures [Run].
type Config struct {
	// Harness is the harness configuration (zero: [harness.Default]).
	Harness harness.Config
	// Environ is the environment sandboxes draw from (nil: os.Environ()).
	Environ []string
	// Bwrap is the bubblewrap binary ("": looked up in Environ's PATH).
	Bwrap string
	// TempDir is where probes make their directories ("": os.TempDir()).
	TempDir string
	// Timeout bounds each probe (zero: 10s).
	Timeout time.Duration
	// Parallel is the number of probes run at once (zero: all of them).
	Parallel int
}

var (
	registryMu sync.Mutex
	registry   []Probe
)

// register adds probes to the set [All] returns.
func register(ps ...Probe) {
	registryMu.Lock()
	defer registryMu.Unlock()
	registry = append(registry, ps...)
}

// All returns every probe, in a stable order (substrate, then name).
func All() []Probe {
	registryMu.Lock()
	defer registryMu.Unlock()
	out := slices.Clone(registry)
	slices.SortStableFunc(out, func(a, b Probe) int {
		if a.Substrate != b.Substrate {
			return cmpString(a.Substrate, b.Substrate)
		}
		return cmpString(a.Name, b.Name)
	})
	return out
}

// For returns the probes of the named substrates (all when none is named).
func For(substrates ...string) []Probe {
	var out []Probe
	for _, p := range All() {
		if len(substrates) == 0 || slices.Contains(substrates, p.Substrate) {
			out = append(out, p)
		}
	}
	return out
}

// Proving returns the probes that prove mechanism ("<substrate>/<name>").
func Proving(mechanism string) []Probe {
	var out []Probe
	for _, p := range All() {
		if slices.Contains(p.Mechanisms, mechanism) {
			out = append(out, p)
		}
	}
	return out
}

// Substrates returns the names of the substrates that have probes.
func Substrates() []string {
	var out []string
	for _, p := range All() {
		if !slices.Contains(out, p.Substrate) {
			out = append(out, p.Substrate)
		}
	}
	return out
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// Run runs the probes in parallel and returns their results in the order
// given. progress, when set, is called once per probe as it finishes (from
// one goroutine at a time).
func Run(ctx context.Context, ps []Probe, cfg Config, progress func(Result)) []Result {
	if cfg.Harness.IsZero() {
		cfg.Harness = harness.Default()
	}
	if cfg.Environ == nil {
		cfg.Environ = os.Environ()
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Second
	}
	n := cfg.Parallel
	if n <= 0 || n > len(ps) {
		n = len(ps)
	}
	results := make([]Result, len(ps))
	var mu sync.Mutex
	sem := make(chan struct{}, max(n, 1))
	var wg sync.WaitGroup
	var later []int
	for i, p := range ps {
		if p.alone {
			later = append(later, i)
			continue
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			r := runOne(ctx, p, cfg)
			mu.Lock()
			defer mu.Unlock()
			results[i] = r
			if progress != nil {
				progress(r)
			}
		}()
	}
	wg.Wait()
	for _, i := range later {
		r := runOne(ctx, ps[i], cfg)
		results[i] = r
		if progress != nil {
			progress(r)
		}
	}
	return results
}

func runOne(ctx context.Context, p Probe, cfg Config) Result {
	start := time.Now()
	res := Result{Probe: p}
	dir, err := os.MkdirTemp(cfg.TempDir, "cordon-probe-")
	if err != nil {
		res.Observed = fmt.Sprintf("cannot make the probe's directory: %v", err)
		res.Duration = time.Since(start)
		return res
	}
	defer removeAll(dir)
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	e := &Env{Dir: dir, Harness: cfg.Harness, Environ: cfg.Environ, Bwrap: cfg.Bwrap, substrate: p.Substrate}
	func() {
		defer func() {
			if v := recover(); v != nil {
				res.Observed, res.Pass = fmt.Sprintf("the probe panicked: %v", v), false
			}
		}()
		observed, ok, err := p.run(ctx, e)
		if err != nil {
			res.Observed, res.Pass = "could not probe: "+err.Error(), false
			return
		}
		res.Observed, res.Pass = observed, ok
	}()
	res.Duration = time.Since(start)
	return res
}

// removeAll removes a probe's directory, also where a probe left it
// without write permission.
func removeAll(dir string) {
	if os.RemoveAll(dir) == nil {
		return
	}
	_ = chmodTree(dir)
	_ = os.RemoveAll(dir)
}

func chmodTree(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	os.Chmod(dir, 0o700)
	for _, e := range entries {
		if e.IsDir() {
			chmodTree(dir + "/" + e.Name())
		}
	}
	return nil
}
