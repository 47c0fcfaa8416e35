package probes

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/cordon-run/cordon/capabilities"
	"github.com/cordon-run/cordon/internal/limits"
	"github.com/cordon-run/cordon/substrate"
	"github.com/cordon-run/cordon/substrate/bwrap"
	"github.com/cordon-run/cordon/substrate/landlock"
	"github.com/cordon-run/cordon/substrate/oci"
)

// The probes of the layers both native substrates share — the seccomp
// filter and the limits — and those of the landlock substrate. The
// landlock probes that try the same escape as a bubblewrap probe run the
// same code on the other substrate (sandboxed picks it).
func init() {
	mid := func(sub, name string) string { return sub + "/" + name }
	register(
		Probe{Name: "bwrap/seccomp", Substrate: bwrap.Name,
			Mechanisms: []string{mid(bwrap.Name, "seccomp")},
			Expected:   "io_uring, bpf, keyrings, ptrace of a sibling, TIOCSTI and sockets of families the grant does not cover fail with EPERM",
			run:        probeSeccomp},
		Probe{Name: "bwrap/limits", Substrate: bwrap.Name,
			Mechanisms: []string{mid(bwrap.Name, "pids"), mid(bwrap.Name, "memory")},
			Expected:   "a fork bomb under pids:64 and a balloon under memory:32MiB end at their limits",
			alone:      true,
			run:        probeLimits},
		Probe{Name: "landlock/write-outside", Substrate: landlock.Name,
			Mechanisms: ids(landlock.MechSystem, landlock.MechWriteWorkspace, landlock.MechLandlock(0)),
			Expected:   "a write to a host directory outside the workspace fails; one inside succeeds",
			run:        probeWriteOutside},
		Probe{Name: "landlock/read-only-workspace", Substrate: landlock.Name,
			Mechanisms: ids(landlock.MechReadWorkspace),
			Expected:   "with fs.read only, a write into the workspace fails",
			run:        probeReadOnlyWorkspace},
		Probe{Name: "landlock/harness-state", Substrate: landlock.Name,
			Mechanisms: ids(landlock.MechWriteWorkspace),
			Expected:   "harness state is read-only, also where it did not exist before the run",
			run:        probeHarnessState},
		Probe{Name: "landlock/write-later", Substrate: landlock.Name,
			Mechanisms: ids(landlock.MechWriteWorkspace),
			Expected:   "git's configuration and hooks and the editor settings are read-only, present or absent; .git cannot be moved away",
			run:        probeWriteLater},
		Probe{Name: "landlock/net-none", Substrate: landlock.Name,
			Mechanisms: ids(landlock.MechNetNone),
			Expected:   "under net:none a listener on the host's loopback is not reached",
			run:        probeNetNone},
		Probe{Name: "landlock/deadline", Substrate: landlock.Name,
			Mechanisms: []string{"proc/deadline", id(landlock.MechSubreaper)},
			Expected:   "a double-forking tree that ignores SIGTERM is gone at its deadline",
			run:        probeDeadline},
		Probe{Name: "landlock/trusted-state", Substrate: landlock.Name,
			Mechanisms: ids(landlock.MechSystem, landlock.MechScratch),
			Expected:   "cordon's key store and code cache, and the home directory, are not readable",
			run:        probeTrustedState},
		Probe{Name: "landlock/confinement", Substrate: landlock.Name,
			Mechanisms: ids(landlock.MechNoCaps, landlock.MechNoNewPrivs, landlock.MechScope, landlock.MechClearEnv),
			Expected:   "no capability, no_new_privs, a seccomp filter; a process outside the run cannot be signalled; only the allow-listed environment",
			run:        probeConfinement},
		Probe{Name: "landlock/seccomp", Substrate: landlock.Name,
			Mechanisms: []string{mid(landlock.Name, "seccomp")},
			Expected:   "io_uring, bpf, keyrings, ptrace of a sibling, TIOCSTI, chmod and sockets of families the grant does not cover fail with EPERM",
			run:        probeSeccomp},
		Probe{Name: "landlock/limits", Substrate: landlock.Name,
			Mechanisms: []string{mid(landlock.Name, "pids"), mid(landlock.Name, "memory")},
			Expected:   "a fork bomb under pids:64 and a balloon under memory:32MiB end at their limits",
			alone:      true,
			run:        probeLimits},
	)
}

// sideDoorArg, as the only argument of this binary, makes it try the side
// doors and print "NAME ERRNO" for each (0: it opened); balloonArg N
// holds N MiB. A probe runs the binary itself in its sandbox, so that it needs no
// program of the host's.
const (
	sideDoorArg = "__cordon-probe-side-doors"
	balloonArg  = "__cordon-probe-balloon"
)

func init() {
	if len(os.Args) < 2 {
		return
	}
	switch os.Args[1] {
	case sideDoorArg:
		os.Exit(sideDoors())
	case balloonArg:
		os.Exit(balloon())
	}
}

// self is this binary, which the probes run inside their sandboxes.
func self() (string, error) {
	p, err := os.Executable()
	if err != nil {
		return "", err
	}
	return filepath.EvalSymlinks(p)
}

// withSelf lets the sandbox read and execute this binary.
func withSelf(bin string) func(*runOptions) {
	return func(o *runOptions) { o.readOnly = append(o.readOnly, bin) }
}

func probeSeccomp(ctx context.Context, e *Env) (string, bool, error) {
	ws, err := probeWorkspace(e)
	if err != nil {
		return "", false, err
	}
	bin, err := self()
	if err != nil {
		return "", false, err
	}
	o, err := sandboxedArgv(ctx, e, ws, []string{"fs.read:workspace", "fs.write:workspace", "net:none"}, []string{bin, sideDoorArg}, withSelf(bin))
	if err != nil {
		return "no sandbox: " + err.Error(), false, nil
	}
	got := map[string]string{}
	var names []string
	for _, line := range strings.Split(strings.TrimSpace(o.Stdout), "\n") {
		if name, code, ok := strings.Cut(line, " "); ok {
			got[name] = code
			names = append(names, name)
		}
	}
	if len(names) < 10 {
		return fmt.Sprintf("the probe program did not run in the sandbox (exit %d: %s)", o.ExitCode, lastLine(o.Stderr)), false, nil
	}
	var open, refused []string
	eperm := fmt.Sprint(int(syscall.EPERM))
	for _, n := range names {
		if n == "chmod" && (e.substrate == bwrap.Name || e.substrate == oci.Name) {
			continue // the mount table decides it there, as the bundle states it (the workspace's own file may change mode)
		}
		if got[n] != eperm {
			open = append(open, n+"="+got[n])
		}
		refused = append(refused, n)
	}
	if len(open) > 0 {
		return "not refused with EPERM: " + strings.Join(open, " "), false, nil
	}
	return fmt.Sprintf("%d calls refused with EPERM: %s", len(refused), strings.Join(refused, ", ")), true, nil
}

func probeLimits(ctx context.Context, e *Env) (string, bool, error) {
	ws, err := probeWorkspace(e)
	if err != nil {
		return "", false, err
	}
	bin, err := self()
	if err != nil {
		return "", false, err
	}
	caps := []string{"fs.read:workspace", "net:none"}
	// The shell forks sleeping children until a fork fails (dash then
	// says "Cannot fork" and exits): one task each, no threads of its own
	// to count against the limit.
	fork, err := sandboxed(ctx, e, ws, append(caps, "pids:64"), `for i in $(seq 200); do sleep 10 & echo started; done; echo never-refused`)
	if err != nil {
		return "no sandbox: " + err.Error(), false, nil
	}
	n := strings.Count(fork.Stdout, "started")
	refused := !strings.Contains(fork.Stdout, "never-refused") && strings.Contains(strings.ToLower(fork.Stderr), "fork")
	mem, err := sandboxedArgv(ctx, e, ws, append(caps, "memory:32MiB"), []string{bin, balloonArg, "256"}, withSelf(bin))
	if err != nil {
		return "no sandbox: " + err.Error(), false, nil
	}
	held := strings.Contains(mem.Stdout, "held")
	// A cgroup counts the run's tasks alone: fewer than 64 forks. An
	// rlimit counts the user's: tasks of the user's that end during the
	// run leave room for more, but the bomb still stops.
	most := 64
	if _, cgroup := limits.Detect().V1["pids"]; !cgroup {
		most = 150
	}
	switch {
	case !refused || n >= most:
		return fmt.Sprintf("the fork bomb forked %d processes under pids:64 (refused: %v; %s)", n, refused, lastLine(fork.Stderr)), false, nil
	case mem.Canceled || mem.TimedOut:
		return fmt.Sprintf("the balloon did not end by itself (%s): the limit was not seen to hold", mem.String()), false, nil
	case held || mem.ExitCode == 0:
		return fmt.Sprintf("the balloon held 256MiB under memory:32MiB (exit %d)", mem.ExitCode), false, nil
	}
	return fmt.Sprintf("the fork bomb was refused after %d forks under pids:64; the 256MiB balloon ended under memory:32MiB (%s)", n, mem.String()), true, nil
}

func probeConfinement(ctx context.Context, e *Env) (string, bool, error) {
	ws, err := probeWorkspace(e)
	if err != nil {
		return "", false, err
	}
	// This process is outside the run's domain: a signal to it must fail.
	script := fmt.Sprintf(`grep -E '^(Cap(Inh|Prm|Eff|Bnd|Amb)|NoNewPrivs|Seccomp):' /proc/self/status; kill -0 %d 2>/dev/null && echo signalled=yes || echo signalled=no; env | cut -d= -f1 | sort | tr '\n' ' '`, os.Getpid())
	o, err := sandboxed(ctx, e, ws, []string{"fs.read:workspace"}, script)
	if err != nil {
		return "no sandbox: " + err.Error(), false, nil
	}
	vals := map[string]string{}
	for _, line := range strings.Split(o.Stdout, "\n") {
		if k, v, ok := strings.Cut(line, ":\t"); ok {
			vals[k] = v
		}
	}
	var bad []string
	for _, c := range []string{"CapInh", "CapPrm", "CapEff", "CapAmb"} {
		if strings.Trim(vals[c], "0") != "" || vals[c] == "" {
			bad = append(bad, c+"="+vals[c])
		}
	}
	if os.Geteuid() == 0 && strings.Trim(vals["CapBnd"], "0") != "" {
		bad = append(bad, "CapBnd="+vals["CapBnd"])
	}
	if vals["NoNewPrivs"] != "1" {
		bad = append(bad, "NoNewPrivs="+vals["NoNewPrivs"])
	}
	if vals["Seccomp"] != "2" {
		bad = append(bad, "Seccomp="+vals["Seccomp"])
	}
	if !strings.Contains(o.Stdout, "signalled=no") {
		bad = append(bad, fmt.Sprintf("a signal reached process %d outside the run", os.Getpid()))
	}
	lines := strings.Split(strings.TrimSpace(o.Stdout), "\n")
	envNames := strings.Fields(lines[len(lines)-1])
	for _, n := range envNames {
		if !slices.Contains([]string{"PATH", "HOME", "TMPDIR", "LANG", "TERM", "PWD", "OLDPWD", "SHLVL", "_"}, n) {
			bad = append(bad, "environment holds "+n)
		}
	}
	if len(bad) > 0 {
		return strings.Join(bad, "; "), false, nil
	}
	return fmt.Sprintf("no capability (bounding set %s), no_new_privs, seccomp filter; signal to process %d refused; environment %s",
		vals["CapBnd"], os.Getpid(), strings.Join(envNames, " ")), true, nil
}

// runOptions are what a probe's sandbox gets beyond its capabilities.
type runOptions struct {
	readOnly       []string
	timeout, grace time.Duration
}

// sandboxedArgv runs argv (no shell) in the probe's substrate under caps
// on ws.
func sandboxedArgv(ctx context.Context, e *Env, ws string, caps, argv []string, opts ...func(*runOptions)) (substrate.Outcome, error) {
	o := runOptions{timeout: 5 * time.Second}
	for _, f := range opts {
		f(&o)
	}
	set, err := capabilities.ParseSet(caps)
	if err != nil {
		return substrate.Outcome{}, err
	}
	if e.substrate == landlock.Name {
		return onLandlock(ctx, e, ws, set, argv, o)
	}
	if e.substrate == oci.Name {
		return onOCI(ctx, e, ws, set, bwrap.Spec{Policy: bwrap.Policy{}.WithReadOnly(o.readOnly...), Command: argv, Environ: e.Environ,
			Timeout: o.timeout, Grace: o.grace, MaxOutput: 64 << 10})
	}
	pol, err := bwrap.PolicyOf(set, ws, e.Harness)
	if err != nil {
		return substrate.Outcome{}, err
	}
	pol = pol.WithSystemPath(true).WithReadOnly(o.readOnly...)
	return bwrap.Run(ctx, bwrap.Spec{Policy: pol, Command: argv, Environ: e.Environ, Bwrap: e.Bwrap,
		Timeout: o.timeout, Grace: o.grace, MaxOutput: 64 << 10})
}

// confined is sandboxed on the landlock substrate: the options' time
// bounds apply (their bubblewrap policy does not).
func confined(ctx context.Context, e *Env, ws string, set capabilities.Set, script string, opt ...func(*bwrap.Spec)) (substrate.Outcome, error) {
	s := bwrap.Spec{Timeout: 5 * time.Second}
	for _, o := range opt {
		o(&s)
	}
	return onLandlock(ctx, e, ws, set, []string{"/bin/sh", "-c", script}, runOptions{timeout: s.Timeout, grace: s.Grace})
}

// onLandlock runs argv on the landlock substrate as a run of set on ws
// does, with the system PATH and the options' read-only paths and bounds.
func onLandlock(ctx context.Context, e *Env, ws string, set capabilities.Set, argv []string, o runOptions) (substrate.Outcome, error) {
	pol, err := landlock.PolicyOf(set, ws)
	if err != nil {
		return substrate.Outcome{}, err
	}
	pol.SystemPath, pol.ReadOnly = true, o.readOnly
	out, _, err := landlock.Run(ctx, landlock.Spec{Policy: pol, Harness: e.Harness, Command: argv, Environ: e.Environ,
		Timeout: o.timeout, Grace: o.grace, MaxOutput: 64 << 10})
	return out, err
}
