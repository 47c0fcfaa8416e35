package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/cordon-run/cordon/admission"
	"github.com/cordon-run/cordon/autonomy"
	"github.com/cordon-run/cordon/capabilities"
	"github.com/cordon-run/cordon/evidence"
	"github.com/cordon-run/cordon/internal/capture"
	"github.com/cordon-run/cordon/runtime"
	"github.com/cordon-run/cordon/substrate"
	"github.com/cordon-run/cordon/substrate/bwrap"
	"github.com/cordon-run/cordon/substrate/host"
	"github.com/cordon-run/cordon/substrate/landlock"
	"github.com/cordon-run/cordon/substrate/oci"
)

func init() {
	register(command{name: "exec", summary: "[flags] -- CMD ARGS...: run a native command in the sandbox", usage: execUsage, run: runExec, front: true})
}

const execUsage = `usage: cordon exec [-w DIR] [--timeout D] [--max-output SIZE] [--net none|host] [--allow-host H]... [--env NAME]...
                   [--tmp-size SIZE] [--memory SIZE] [--pids N] [--cpu D] [--substrate bwrap|landlock|oci]
                   [--no-sandbox] [--autonomy supervised|unattended] [--receipt] [--json] -- CMD ARGS...
  --timeout D         wall-clock bound, e.g. 30s, 5m (default 2m); exit 124 when it ends the run
  --max-output SIZE   bytes kept of each of stdout and stderr, head and tail (default 1MiB)
  --net none|host     none: no network, not even the host's loopback (default); host: open network
  --allow-host H      reach the host H only, through cordon's egress proxy (repeatable; bwrap): a name,
                      *.DOMAIN for the names below it, or an address, each with an optional :PORT;
                      the sandbox keeps no network of its own, and HTTP_PROXY, HTTPS_PROXY and ALL_PROXY
                      point at the proxy, which refuses every other name and internal addresses
  --env NAME          pass cordon's value of NAME into the sandbox (repeatable; unset names are left out)
  --tmp-size SIZE     cap of the sandbox's /tmp (which holds HOME) and of its /dev/shm (default 512MiB; bwrap and oci)
  --memory SIZE       memory limit of the whole run (a cgroup where cordon can make one, else RLIMIT_AS)
  --pids N            process limit (default 4096; a cgroup, else RLIMIT_NPROC)
  --cpu D             processor time limit of each process (RLIMIT_CPU)
  --substrate S       bwrap (default): bubblewrap's mount table, seccomp and limits; landlock: Landlock,
                      seccomp and limits, for hosts where bubblewrap cannot create a sandbox; oci: the
                      same sandbox as bwrap's, as a container of runc or crun (net:none only)
                      (no fallback from one to another)
  --no-sandbox        run on the host without a sandbox (results say "sandboxed": false)
  --autonomy L        supervised (default): a person approves each run; unattended: start only in a
                      disposable root with fresh evidence, the sandbox on, no network, limits and a
                      deadline of at most 1h, else exit 3 listing what failed (cordon autonomy check);
                      the decision is a receipt in the evidence log
  --receipt           append a signed receipt of the run to the evidence log (cordon evidence list)`

// Defaults of cordon exec.
const (
	defaultExecTimeout = 2 * time.Minute
	defaultExecOutput  = 1 << 20
)

// warmStart makes, in the background, the check the os package makes
// before a process's first start of another: whether pidfds work, which
// opens one, waits on it and clones a child that exits at once (about
// 0.15 ms here); then the reads of the host a first bwrap run makes
// (bwrap.Ahead). exec calls it as soon as its flags are parsed (and the
// front end has not handed the command off, which would leave the full
// binary the child it clones), so that they overlap the admitting, while
// the other processor is idle, instead of delaying bwrap's start. (The
// landlock helper, which reaps every child, runs from a package init and
// never gets here.)
func warmStart() {
	if p, err := os.FindProcess(os.Getpid()); err == nil {
		p.Release()
	}
	bwrap.Ahead(os.Environ())
}

func runExec(e *env, args []string) int {
	fs := e.flags("exec")
	fs.SetInterspersed(false)
	timeout := fs.Duration("timeout", defaultExecTimeout, "wall-clock bound")
	maxOutput := fs.String("max-output", capture.FormatSize(defaultExecOutput), "bytes kept per stream")
	netName := fs.String("net", "none", "none or host")
	allowHosts := fs.StringArray("allow-host", nil, "a host the command may reach through the egress proxy")
	envNames := fs.StringArray("env", nil, "environment variable to pass in")
	tmpSize := fs.String("tmp-size", capture.FormatSize(bwrap.DefaultTmpSize), "cap of /tmp and /dev/shm")
	noSandbox := fs.Bool("no-sandbox", false, "run on the host without a sandbox")
	memory := fs.String("memory", "", "memory limit")
	pids := fs.Int("pids", 0, "process limit")
	cpu := fs.Duration("cpu", 0, "processor time limit")
	substrateName := fs.String("substrate", "bwrap", "the sandbox substrate")
	autonomyLevel := fs.String("autonomy", "supervised", "autonomy level: supervised or unattended")
	receipt := fs.Bool("receipt", false, "append a signed receipt of the run to the evidence log")
	if code := e.parse(fs, args, execUsage); code >= 0 {
		return code
	}
	if fs.NArg() == 0 || fs.Arg(0) == "" {
		return e.usageError("exec needs a command: cordon exec [flags] -- CMD ARGS...\n" + execUsage)
	}
	if *noSandbox && fs.Changed("substrate") {
		return e.usageError("--no-sandbox runs without a substrate; drop --substrate or --no-sandbox")
	}
	level, err := autonomy.ParseLevel(*autonomyLevel)
	if err != nil {
		return e.usageError(err.Error())
	}
	if frontEnd && (*receipt || level != autonomy.Supervised) {
		// Receipts and evidence name the binary that made them: the
		// full binary makes and checks them all.
		return e.handOff()
	}
	go warmStart()
	// SIGINT and SIGTERM end the run like a timeout does: the whole tree
	// dies before cordon exits. They are caught while the command is
	// admitted, and before it runs.
	ctx, intr := interruptibleSoon()
	defer intr.stop()
	sub := bwrap.Name
	switch {
	case *noSandbox:
		sub = host.Name
	case *substrateName == bwrap.Name, *substrateName == landlock.Name, *substrateName == oci.Name:
		sub = *substrateName
	default:
		return e.usageError(fmt.Sprintf("unknown substrate %q: want bwrap, landlock or oci", *substrateName))
	}
	if sub != bwrap.Name && sub != oci.Name && fs.Changed("tmp-size") {
		return e.usageError(fmt.Sprintf("--tmp-size caps the /tmp that bubblewrap (or the bundle) mounts; the %s substrate has none to cap; drop --tmp-size", sub))
	}
	set, code := e.execCapabilities(fs.Changed("net"), sub, *timeout, *maxOutput, *netName, *tmpSize, *envNames, *memory, *pids, *cpu)
	if code >= 0 {
		return code
	}
	if len(*allowHosts) > 0 {
		if set, code = e.withAllowedHosts(set, *allowHosts, fs.Changed("net") && *netName != "none", *noSandbox); code >= 0 {
			return code
		}
	}

	a, err := e.admitter(true, false)
	if err != nil {
		return e.fail(err)
	}
	p, err := a.PrepareCommand(context.Background(), admission.Command{Argv: fs.Args(), Capabilities: set, Substrate: sub, Stdin: e.stdin})
	if err != nil {
		return e.refuse("exec", fs.Arg(0), err)
	}

	rt := runtime.New(runtime.Config{OneShot: true})
	defer rt.Close()
	rt.Ahead(p) // what the run needs first, made while the rest gets ready

	if code, ok := intr.admitted(); ok {
		return code // while the command was admitted: it never starts
	}
	if *receipt {
		// The log opens before the run: a receipt that cannot be
		// written stops the command before it runs.
		if _, err := e.prover(); err != nil {
			return e.fail(err)
		}
	}
	if code := e.admitUnattended(ctx, *autonomyLevel, "exec", p); code >= 0 {
		return code
	}
	res, err := rt.Run(ctx, p)
	if err != nil {
		if code, ok := intr.interrupted(); ok {
			return code // before the command started: runtime.Run says so
		}
		return e.fail(err)
	}
	entry, receiptErr := e.recordRun(ctx, *receipt, "exec", p, res)
	if e.json {
		out := resultJSON(res)
		addReceipt(out, entry, receiptErr)
		e.printJSON(out)
	} else {
		defer printReceipt(e, entry, receiptErr)
		fmt.Fprint(e.stdout, res.Stdout)
		fmt.Fprint(e.stderr, res.Stderr)
		if !res.Sandboxed {
			fmt.Fprintln(e.stderr, "cordon: ran without a sandbox (--no-sandbox)")
		}
		for _, n := range res.Notes {
			fmt.Fprintf(e.stderr, "cordon: %s\n", n)
		}
		printEgress(e, res)
		if res.TimedOut {
			fmt.Fprintf(e.stderr, "cordon: timed out after %v; the process tree was killed (%s)\n", timeout.Round(time.Millisecond), res.Signal)
		}
	}
	return intr.exitOf(res)
}

// execCapabilities turns exec's flags into the capabilities the command
// runs under, or returns the exit code of a usage error.
func (e *env) execCapabilities(netSet bool, sub string, timeout time.Duration, maxOutput, netName, tmpSize string, envNames []string,
	memory string, pids int, cpu time.Duration) (capabilities.Set, int) {
	noSandbox := sub == host.Name
	if timeout <= 0 {
		return capabilities.Set{}, e.usageError(fmt.Sprintf("--timeout must be a positive duration such as 30s or 5m, not %v", timeout))
	}
	size, err := capture.ParseSize(maxOutput)
	if err != nil {
		return capabilities.Set{}, e.usageError("--max-output: " + err.Error())
	}
	if size <= 0 {
		return capabilities.Set{}, e.usageError(fmt.Sprintf("--max-output must be positive, not %q", maxOutput))
	}
	network, err := bwrap.ParseNetwork(netName)
	if err != nil {
		return capabilities.Set{}, e.usageError("--net: " + err.Error())
	}
	if noSandbox && netSet && network == bwrap.NetNone {
		return capabilities.Set{}, e.usageError("--no-sandbox cannot restrict the network; drop --net none or --no-sandbox")
	}
	caps := []capabilities.Capability{capabilities.ReadWorkspace(), capabilities.WriteWorkspace()}
	if network == bwrap.NetHost || noSandbox {
		caps = append(caps, capabilities.HostNet())
	} else {
		caps = append(caps, capabilities.NoNet())
	}
	for _, name := range envNames {
		if !substrate.ValidEnvName(name) {
			return capabilities.Set{}, e.usageError(fmt.Sprintf("--env %q: not a variable's name (letters, digits and _, not led by a digit); --env passes cordon's own value of NAME", name))
		}
		if err := substrate.CheckEnvName(name); err != nil {
			// A refusal of the policy (EnvRefused, exit 3), not of the
			// command line's form: the name is one no sandbox passes in.
			return capabilities.Set{}, e.fail(fmt.Errorf("--env: %w", err))
		}
		c, err := capabilities.Parse("env:" + name)
		if err != nil {
			return capabilities.Set{}, e.usageError("--env: " + err.Error())
		}
		caps = append(caps, c)
	}
	limit := func(flag string, c capabilities.Capability, err error) bool {
		if err != nil {
			e.usageError(flag + ": " + err.Error())
			return false
		}
		caps = append(caps, c)
		return true
	}
	if c, err := capabilities.TimeLimit(timeout); !limit("--timeout", c, err) {
		return capabilities.Set{}, exitUsage
	}
	if c, err := capabilities.OutputLimit(size); !limit("--max-output", c, err) {
		return capabilities.Set{}, exitUsage
	}
	if noSandbox && (memory != "" || pids != 0 || cpu != 0) {
		return capabilities.Set{}, e.usageError("--no-sandbox applies no limit; drop --memory, --pids and --cpu, or --no-sandbox")
	}
	if memory != "" {
		n, err := capture.ParseSize(memory)
		if err != nil {
			return capabilities.Set{}, e.usageError("--memory: " + err.Error())
		}
		if c, err := capabilities.MemoryLimit(n); !limit("--memory", c, err) {
			return capabilities.Set{}, exitUsage
		}
	}
	if pids != 0 {
		if c, err := capabilities.PidsLimit(pids); !limit("--pids", c, err) {
			return capabilities.Set{}, exitUsage
		}
	}
	if cpu != 0 {
		if c, err := capabilities.CPULimit(cpu); !limit("--cpu", c, err) {
			return capabilities.Set{}, exitUsage
		}
	}
	if sub == bwrap.Name || sub == oci.Name {
		n, err := capture.ParseSize(tmpSize)
		if err != nil {
			return capabilities.Set{}, e.usageError("--tmp-size: " + err.Error())
		}
		if c, err := capabilities.TmpLimit(n); !limit("--tmp-size", c, err) {
			return capabilities.Set{}, exitUsage
		}
	}
	set, err := capabilities.NewSet(dedupe(caps)...)
	if err != nil {
		return capabilities.Set{}, e.usageError(err.Error())
	}
	return set, -1
}

// printEgress says the run's egress refusals on stderr: the first 20, then
// how many more.
func printEgress(e *env, res runtime.Result) {
	n := 0
	for _, ev := range res.Egress {
		if ev.Allowed {
			continue
		}
		if n++; n <= 20 {
			fmt.Fprintf(e.stderr, "cordon: egress refused %s %s:%d: %s\n", ev.Method, ev.Name, ev.Port, ev.Reason)
		}
	}
	if more := n - 20 + res.EgressDropped; more > 0 {
		fmt.Fprintf(e.stderr, "cordon: egress: %d more decisions not shown (--json lists up to 1000)\n", more)
	}
}

// withAllowedHosts replaces net:none in set by net.connect:host for each
// --allow-host, or returns the exit code of a usage error.
func (e *env) withAllowedHosts(set capabilities.Set, hosts []string, openNet, noSandbox bool) (capabilities.Set, int) {
	if openNet || noSandbox {
		return capabilities.Set{}, e.usageError("--allow-host narrows a sandbox of no network to named hosts; drop --net host or --no-sandbox, or --allow-host")
	}
	var caps []capabilities.Capability
	for _, c := range set.All() {
		if c != capabilities.NoNet() {
			caps = append(caps, c)
		}
	}
	for _, h := range hosts {
		c, err := capabilities.ConnectToHost(h)
		if err != nil {
			return capabilities.Set{}, e.usageError("--allow-host: " + err.Error())
		}
		caps = append(caps, c)
	}
	out, err := capabilities.NewSet(dedupe(caps)...)
	if err != nil {
		return capabilities.Set{}, e.usageError("--allow-host: " + err.Error())
	}
	return out, -1
}

// dedupe drops repeated capabilities (--env NAME given twice).
func dedupe(caps []capabilities.Capability) []capabilities.Capability {
	var out []capabilities.Capability
	seen := map[capabilities.Capability]bool{}
	for _, c := range caps {
		if !seen[c] {
			seen[c] = true
			out = append(out, c)
		}
	}
	return out
}

// resultJSON is the CLI contract's shape of a run's result: exit_code,
// signal, timed_out, stdout, stderr, stdout_bytes, stderr_bytes,
// stdout_clipped, stderr_clipped, duration_ms, substrate, sandboxed (and
// canceled, mechanisms; for a tool, tool, digest and regranted; for a
// wasm tool, trap, log and refusals).
func resultJSON(r runtime.Result) map[string]any {
	m := r.Mechanisms
	if m == nil {
		m = []string{}
	}
	out := map[string]any{
		"exit_code": r.ExitCode, "signal": r.Signal, "timed_out": r.TimedOut, "canceled": r.Canceled,
		"stdout": r.Stdout, "stderr": r.Stderr, "stdout_bytes": r.StdoutBytes, "stderr_bytes": r.StderrBytes,
		"stdout_clipped": r.StdoutClipped, "stderr_clipped": r.StderrClipped,
		"duration_ms": r.Duration.Milliseconds(), "substrate": r.Substrate, "sandboxed": r.Sandboxed, "mechanisms": m,
		"notes": nonNil(r.Notes),
	}
	if r.Tool != "" {
		out["tool"], out["digest"], out["regranted"] = r.Tool, r.Digest, r.Regranted
	}
	if r.Substrate == "wasm" {
		out["trap"], out["log"], out["refusals"] = r.Trap, nonNil(r.Log), nonNil(r.Refusals)
	}
	if r.Egress != nil {
		out["egress"] = r.Egress
		if r.EgressDropped > 0 {
			out["egress_dropped"] = r.EgressDropped
		}
	}
	return out
}

// recordRun appends the receipt of a run when asked to. The run has
// happened: a receipt that cannot be written is reported beside its
// result, never instead of it (the command's exit code still counts).
func (e *env) recordRun(ctx context.Context, want bool, op string, p *admission.Prepared, res runtime.Result) (*evidence.Entry, error) {
	if !want {
		return nil, nil
	}
	en, err := e.runReceipt(ctx, op, p, res)
	if err != nil {
		return nil, err
	}
	return &en, nil
}

// addReceipt adds a run's receipt to its JSON: "receipt": {"sequence",
// "digest", "file"}, or "receipt_error" when it could not be written.
func addReceipt(out map[string]any, entry *evidence.Entry, err error) {
	if entry != nil {
		out["receipt"] = map[string]any{"sequence": entry.Sequence, "digest": entry.Digest, "file": entry.File}
	}
	if err != nil {
		out["receipt_error"] = err.Error()
	}
}

// printReceipt says where a run's receipt went, or why it went nowhere.
func printReceipt(e *env, entry *evidence.Entry, err error) {
	if entry != nil {
		fmt.Fprintf(e.stderr, "cordon: receipt #%d %s in %s\n", entry.Sequence, entry.Digest, entry.File)
	}
	if err != nil {
		fmt.Fprintf(e.stderr, "cordon: the run's receipt was not written: %v\n", err)
	}
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
