package runtime

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/cordon-run/cordon/admission"
	"github.com/cordon-run/cordon/refusal"
	"github.com/cordon-run/cordon/substrate"
	"github.com/cordon-run/cordon/substrate/bwrap"
	"github.com/cordon-run/cordon/substrate/egress"
	"github.com/cordon-run/cordon/substrate/host"
	"github.com/cordon-run/cordon/substrate/landlock"
	"github.com/cordon-run/cordon/substrate/oci"
)

// Config configures a [Runtime].
type Config struct {
	// Environ is the caller's environment: granted env:NAME values are
	// drawn from it, and bwrap is looked up in its PATH (os.Environ() if
	// nil).
	Environ []string
	// Bwrap is the bubblewrap binary (looked up in Environ's PATH if
	// empty).
	Bwrap string
	// Grace is the time between SIGTERM and SIGKILL when a native run is
	// ended (2s if zero).
	Grace time.Duration
	// Logger receives debug records of each run (discarded if nil).
	Logger *slog.Logger
	// Pool, when above zero, keeps that many bubblewrap sandboxes made
	// ahead of their call for `/bin/sh -c` commands (see [bwrap.Pool]):
	// a resident caller's calls then cost the delivery of their script.
	// PoolAge bounds how long one waits unused (a minute if zero).
	Pool    int
	PoolAge time.Duration
	// OneShot: the process ends with its run (the CLI's exec and run).
	// A bwrap run's mount watch then asks every 0.2 ms whether the
	// sandbox's init has taken its release, instead of watching the
	// init's read of its seccomp program: the watch, removed moments
	// before the process exits, makes the exit wait for the kernel
	// (~0.1–0.4 ms), as much as it saves a run.
	OneShot bool
}

// Runtime runs prepared tools and commands. It keeps the WebAssembly
// engine (and its compiled code) across runs; it is safe for concurrent
// use. Close releases it.
type Runtime struct {
	cfg Config

	mu     sync.Mutex
	wasm   wasmState // the WebAssembly engine, made on first use
	closed bool
	later  sync.WaitGroup // the last steps of runs, done after their results
	pool   *bwrap.Pool    // nil without Config.Pool
	groups *bwrap.Groups  // the cgroups of bwrap runs, made ahead of them
}

// New returns a runtime.
func New(cfg Config) *Runtime {
	if cfg.Environ == nil {
		cfg.Environ = os.Environ()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	r := &Runtime{cfg: cfg, groups: bwrap.NewGroups()}
	if cfg.Pool > 0 {
		r.pool = bwrap.NewPool(cfg.Pool, cfg.PoolAge)
	}
	return r
}

// Close waits for the last steps of every run (the placeholders of the
// workspaces go) and releases the WebAssembly engine.
func (r *Runtime) Close() error {
	if r.pool != nil {
		r.pool.Close()
	}
	r.later.Wait()
	r.groups.Close()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
	return r.wasm.close()
}

// Result is what happened to one run.
type Result struct {
	substrate.Outcome
	// Substrate is "bwrap", "landlock", "wasm" or "host".
	Substrate string
	// Sandboxed is true when a sandbox confined the run: false on the
	// host, and for a run that did not happen. (Outcome.Pooled says the
	// sandbox was made ahead of the call.)
	Sandboxed bool
	// Mechanisms lists what confined the run, as grants quote them.
	Mechanisms []string
	// Tool and Digest name the admitted tool ("" for a command).
	Tool, Digest string
	// Regranted reports that the host had changed and the tool's grant
	// was made again before the run.
	Regranted bool
	// Trap is the trap that ended a module ("wasm error: unreachable").
	Trap string
	// Log holds a module's cordon/log lines; Refusals what the guard
	// refused it.
	Log      []substrate.LogLine
	Refusals []substrate.Refusal
	// Egress is the egress proxy's log of the run: every connection it
	// allowed or refused, with its bytes (a run granted net.connect on
	// bwrap).
	Egress []egress.Event
	// EgressDropped counts the events past the log's bound (1000).
	EgressDropped int
}

// String summarizes the result in one line, for logs and messages.
func (r Result) String() string {
	sandboxed := "sandboxed"
	if !r.Sandboxed {
		sandboxed = "not sandboxed"
	}
	what := r.Outcome.String()
	if r.Trap != "" {
		what = "trapped (" + r.Trap + "), " + what
	}
	return fmt.Sprintf("%s on %s (%s)", what, r.Substrate, sandboxed)
}

// Run runs p on the substrate its grant names, under exactly its grant,
// and returns what happened: a native tool or command in a bubblewrap
// sandbox ([bwrap.Run]), or on the host when the grant says so
// ([host.Run]); a WebAssembly tool in process ([wasm.Engine.Run]). Time
// and output are bounded by the grant; the whole process tree is gone when
// Run returns.
//
// Everything that ran is a Result — an exit code, a timeout, a trap, a
// command not found (127) — never a panic. An error means nothing ran; the
// Result that comes with it is not a success (its exit code is the
// error's, [refusal.ExitCode]) and says Sandboxed false. Cancelling ctx
// ends the run like a timeout does and returns a Result with Canceled set;
// a ctx that has ended before Run is called starts nothing: a Canceled
// refusal.
func (r *Runtime) Run(ctx context.Context, p *admission.Prepared) (Result, error) {
	g := p.Grant
	res := Result{Substrate: g.Substrate}
	if p.Tool != nil {
		res.Tool, res.Digest, res.Regranted = g.Tool, g.Digest, p.Rechecked
	}
	// A context that has ended already starts nothing, on any substrate
	// (on the host or Landlock the command would start, then be ended;
	// on bwrap its sandbox would be built and never released).
	if err := ctx.Err(); err != nil {
		return notRun(res, refusal.Errorf(refusal.Canceled, "the run's context ended before it started (%w); nothing ran", err))
	}
	var err error
	switch g.Substrate {
	case bwrap.Name:
		err = r.runBwrap(ctx, p, &res)
	case host.Name:
		err = r.runHost(ctx, p, &res)
	case landlock.Name:
		err = r.runLandlock(ctx, p, &res)
	case oci.Name:
		err = r.runOCI(ctx, p, &res)
	case wasmName:
		err = r.runWasm(ctx, p, &res)
	default:
		err = refusal.Errorf(refusal.SandboxUnavailable, "tool %q runs on the %s substrate, which this cordon does not have", g.Tool, g.Substrate)
	}
	if err != nil {
		return notRun(res, err)
	}
	return res, nil
}

// notRun is what Run returns for res when err says the run did not
// happen: nothing in the result reads as success.
func notRun(res Result, err error) (Result, error) {
	return Result{Substrate: res.Substrate, Tool: res.Tool, Digest: res.Digest,
		Outcome: substrate.Outcome{ExitCode: refusal.ExitCode(err)}}, err
}

// bwrapSpec is the bwrap spec of a run of p, and its policy.
func (r *Runtime) bwrapSpec(p *admission.Prepared) (bwrap.Spec, error) {
	g := p.Grant
	policy, err := bwrap.PolicyOf(g.All(), p.Workspace, p.Harness)
	if err != nil {
		return bwrap.Spec{}, err
	}
	policy = policy.WithSystemPath(!p.WorkspacePath)
	if p.Tool != nil && len(p.Tool.Files) > 0 {
		policy = policy.WithReadOnly(p.Tool.Dir)
	}
	return bwrap.Spec{
		Policy: policy, Command: p.Command, Stdin: p.Stdin, Environ: r.cfg.Environ, Bwrap: r.cfg.Bwrap,
		Timeout: g.Time(), Grace: r.cfg.Grace, MaxOutput: g.Output(), Logger: r.cfg.Logger,
		Later: func(f func()) { r.later.Go(f) }, Pool: r.pool, Groups: r.groups, OneShot: r.cfg.OneShot,
	}, nil
}

func (r *Runtime) runBwrap(ctx context.Context, p *admission.Prepared, res *Result) error {
	spec, err := r.bwrapSpec(p)
	if err != nil {
		return err
	}
	if rules := spec.Policy.Egress(); len(rules) > 0 {
		spec.Egress = egress.New(egress.Config{Rules: rules})
	}
	// What the run applies, as the result names it: made while the run
	// goes on, not on the path from its end to its result (~25 µs of
	// formatting).
	mechs := make(chan []string, 1)
	go func() {
		var ms []string
		for _, m := range spec.Policy.Mechanisms() {
			ms = append(ms, m.String())
		}
		mechs <- ms
	}()
	o, err := bwrap.Run(ctx, spec)
	if spec.Egress != nil {
		res.Egress, res.EgressDropped = spec.Egress.Events(), spec.Egress.Dropped()
	}
	if err != nil {
		return err
	}
	res.Outcome, res.Sandboxed = o, true
	res.Mechanisms = <-mechs
	return nil
}

// Warm makes the runtime's pool hold sandboxes for runs like p's — a
// `/bin/sh -c` command on bwrap without standard input — and returns once
// they are ready: the first calls do not wait for them. It changes what
// runs nowhere else: a call still takes a pooled sandbox only when it is
// exactly the one the call would get new.
func (r *Runtime) Warm(p *admission.Prepared) error {
	if r.pool == nil {
		return errors.New("runtime: no pool (Config.Pool is 0)")
	}
	if p.Grant.Substrate != bwrap.Name {
		return fmt.Errorf("runtime: only bwrap sandboxes are pooled, not %s", p.Grant.Substrate)
	}
	spec, err := r.bwrapSpec(p)
	if err != nil {
		return err
	}
	return r.pool.Warm(spec)
}

// Ahead readies, in the background, what a run of p is about to need and
// can be made before it is asked for: on bwrap, its cgroups, its seccomp
// program and the check of bwrap itself. A caller
// that has admitted a command and has more to do before it runs it (a
// command line setting up its signals) calls it first. Nothing of the
// run is decided by it: a run takes what was readied only when it is
// exactly its own, and Close removes what no run took.
func (r *Runtime) Ahead(p *admission.Prepared) {
	if p.Grant.Substrate != bwrap.Name {
		return
	}
	if spec, err := r.bwrapSpec(p); err == nil {
		spec.Ahead()
	}
}

// PoolStats returns what the runtime's pool did (zero without one).
func (r *Runtime) PoolStats() bwrap.PoolStats {
	if r.pool == nil {
		return bwrap.PoolStats{}
	}
	return r.pool.Stats()
}

func (r *Runtime) runLandlock(ctx context.Context, p *admission.Prepared, res *Result) error {
	// Its command writes the workspace with every mount below it: not
	// where it could write the bwrap later runs start.
	if err := bwrap.Exposure("a landlock run", p.Workspace, r.getenv("PATH"), p.Harness); err != nil {
		return err
	}
	g := p.Grant
	policy, err := landlock.PolicyOf(g.All(), p.Workspace)
	if err != nil {
		return err
	}
	policy.SystemPath = !p.WorkspacePath
	if p.Tool != nil && len(p.Tool.Files) > 0 {
		policy.ReadOnly = append(policy.ReadOnly, p.Tool.Dir)
	}
	o, mechs, err := landlock.Run(ctx, landlock.Spec{
		Policy: policy, Harness: p.Harness, Command: p.Command, Stdin: p.Stdin, Environ: r.cfg.Environ,
		Timeout: g.Time(), Grace: r.cfg.Grace, MaxOutput: g.Output(), Logger: r.cfg.Logger,
	})
	if err != nil {
		return err
	}
	res.Outcome, res.Sandboxed = o, true
	for _, m := range mechs {
		res.Mechanisms = append(res.Mechanisms, m.String())
	}
	return nil
}

// runOCI runs p as a container of the OCI runtime that runs one here
// ([oci.Detect]): the sandbox bwrap would make, stated as a bundle.
func (r *Runtime) runOCI(ctx context.Context, p *admission.Prepared, res *Result) error {
	// As on Landlock (the bundle binds the workspace rbind): the OCI
	// runtime's own exposure oci.Detect asks.
	if err := bwrap.Exposure("an oci run", p.Workspace, r.getenv("PATH"), p.Harness); err != nil {
		return err
	}
	spec, err := r.bwrapSpec(p)
	if err != nil {
		return err
	}
	spec.Pool, spec.Groups = nil, nil
	rt, err := oci.Detect(ctx, r.getenv("PATH"), p.Workspace, p.Harness)
	if err != nil {
		return err
	}
	o, err := oci.Run(ctx, oci.RunSpec{Spec: spec, Runtime: rt})
	if err != nil {
		return err
	}
	res.Outcome, res.Sandboxed = o, true
	for _, m := range oci.Mechanisms(spec.Policy) {
		res.Mechanisms = append(res.Mechanisms, m.String())
	}
	return nil
}

// Bundle writes the OCI bundle of a native run of p to dir, which must
// not exist, for another engine to run ([oci.WriteBundle]): the sandbox
// the run would get on bwrap or oci, stated as config.json. It returns
// how many absent protected paths have stand-ins in it.
func (r *Runtime) Bundle(p *admission.Prepared, dir string) (int, error) {
	switch p.Grant.Substrate {
	case bwrap.Name, oci.Name:
	default:
		return 0, refusal.Errorf(refusal.CapabilityRefused, "a bundle states a native sandbox of bwrap's; %q runs on %s", p.Grant.Tool, p.Grant.Substrate)
	}
	spec, err := r.bwrapSpec(p)
	if err != nil {
		return 0, err
	}
	sb, err := spec.Policy.Prepare(spec.Environ)
	if err != nil {
		return 0, err
	}
	defer sb.Close()
	return len(sb.Placeholders()), oci.WriteBundle(sb, p.Command, oci.DefaultOptions(), dir)
}

// Portable returns the prepared native tool or command p as an engine
// elsewhere needs it ([oci.Portable]): its sandbox's configuration, the
// placeholders the sandbox made, the grant's limits and time limit, and
// whether a tool's input comes on standard input.
func (r *Runtime) Portable(p *admission.Prepared) (*oci.Portable, error) {
	switch p.Grant.Substrate {
	case bwrap.Name, oci.Name:
	default:
		return nil, refusal.Errorf(refusal.CapabilityRefused, "a pod states a native sandbox of bwrap's; %q runs on %s", p.Grant.Tool, p.Grant.Substrate)
	}
	spec, err := r.bwrapSpec(p)
	if err != nil {
		return nil, err
	}
	sb, err := spec.Policy.Prepare(spec.Environ)
	if err != nil {
		return nil, err
	}
	defer sb.Close()
	in, err := oci.PortableOf(sb, p.Command, oci.Options{})
	if err != nil {
		return nil, err
	}
	in.Timeout, in.Input = p.Grant.Time(), p.Tool != nil && p.Stdin != nil
	if p.Tool != nil {
		in.ToolDir = p.Tool.Dir
		for _, f := range p.Tool.Files {
			in.ToolFiles = append(in.ToolFiles, oci.ToolFile{Path: f.Path, Data: f.Data, Exec: f.Exec})
		}
	}
	return in, nil
}

func (r *Runtime) runHost(ctx context.Context, p *admission.Prepared, res *Result) error {
	g := p.Grant
	o, mechs, err := host.Run(ctx, host.Spec{
		Workspace: p.Workspace, Command: p.Command, Env: g.Env(), Environ: r.cfg.Environ, Stdin: p.Stdin,
		Timeout: g.Time(), Grace: r.cfg.Grace, MaxOutput: g.Output(), Logger: r.cfg.Logger,
	})
	if err != nil {
		return err
	}
	res.Outcome = o
	for _, m := range mechs {
		res.Mechanisms = append(res.Mechanisms, m.String())
	}
	return nil
}

// getenv looks a granted variable up in the runtime's environment.
func (r *Runtime) getenv(name string) string {
	v, _ := substrate.LookupEnv(r.cfg.Environ, name)
	return v
}

// Plan returns the mechanisms a run of p applies, without running it: the
// policy of its substrate for its grant, limits and their defaults
// included, as a result would list them. A wasm tool's are its grant's.
func Plan(p *admission.Prepared) ([]substrate.Mechanism, error) {
	g := p.Grant
	switch g.Substrate {
	case bwrap.Name:
		policy, err := bwrap.PolicyOf(g.All(), p.Workspace, p.Harness)
		if err != nil {
			return nil, err
		}
		return policy.Mechanisms(), nil
	case landlock.Name:
		policy, err := landlock.PolicyOf(g.All(), p.Workspace)
		if err != nil {
			return nil, err
		}
		return policy.Mechanisms(landlock.ABI()), nil
	case oci.Name:
		policy, err := bwrap.PolicyOf(g.All(), p.Workspace, p.Harness)
		if err != nil {
			return nil, err
		}
		return oci.Mechanisms(policy), nil
	case host.Name:
		return nil, nil
	case wasmName:
		return wasmPlan(p)
	}
	return nil, refusal.Errorf(refusal.SandboxUnavailable, "no substrate %q", g.Substrate)
}
