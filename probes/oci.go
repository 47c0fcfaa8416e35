package probes

import (
	"context"
	"fmt"
	"strings"

	"github.com/cordon-run/cordon/capabilities"
	"github.com/cordon-run/cordon/substrate"
	"github.com/cordon-run/cordon/substrate/bwrap"
	"github.com/cordon-run/cordon/substrate/oci"
)

// The oci probes: the bubblewrap probes' escapes, run in a container of
// the OCI runtime that runs bundles here (oci.Detect), from the bundle a
// run of the same grant gets (sandboxed picks the substrate). The
// runtime and its version are in the receipts' host facts.
func init() {
	o := func(name string) string { return oci.Name + "/" + name }
	register(
		Probe{Name: "oci/sandbox", Substrate: oci.Name,
			Mechanisms: ids(oci.Namespaces, oci.PIDOne),
			Expected:   "a container starts: the command is PID 1 of a PID namespace of its own, seeing no host process",
			run:        probeOCISandbox},
		Probe{Name: "oci/write-outside", Substrate: oci.Name,
			Mechanisms: ids(oci.ReadOnlyRoot, oci.BindWorkspace),
			Expected:   "a write to a host directory outside the workspace fails; one inside succeeds",
			run:        probeWriteOutside},
		Probe{Name: "oci/read-only-workspace", Substrate: oci.Name,
			Mechanisms: ids(oci.ReadOnlyWorkspace),
			Expected:   "with fs.read only, a write into the workspace fails",
			run:        probeReadOnlyWorkspace},
		Probe{Name: "oci/harness-state", Substrate: oci.Name,
			Mechanisms: ids(oci.ReadOnlyHarness),
			Expected:   "harness state is read-only, also where it did not exist before the run",
			run:        probeHarnessState},
		Probe{Name: "oci/write-later", Substrate: oci.Name,
			Mechanisms: ids(oci.ReadOnlyWriteLater, oci.PinParents),
			Expected:   "git's configuration and hooks and the editor settings are read-only, present or absent; .git cannot be moved away",
			run:        probeWriteLater},
		Probe{Name: "oci/no-capabilities", Substrate: oci.Name,
			Mechanisms: ids(oci.NoCapabilities),
			Expected:   "the command holds no capability, and cannot make a user namespace to get some",
			run:        probeNoCapabilities},
		Probe{Name: "oci/net-none", Substrate: oci.Name,
			Mechanisms: ids(oci.UnshareNet),
			Expected:   "under net:none a listener on the host's loopback is not reached",
			run:        probeNetNone},
		Probe{Name: "oci/deadline", Substrate: oci.Name,
			Mechanisms: []string{o("deadline"), id(oci.DeleteContainer), id(oci.PIDOne)},
			Expected:   "a double-forking tree that ignores SIGTERM is gone at its deadline",
			run:        probeDeadline},
		Probe{Name: "oci/environment", Substrate: oci.Name,
			Mechanisms: ids(oci.ClearEnv),
			Expected:   "the environment holds only the allow-list and the granted names",
			run:        probeEnvironment},
		Probe{Name: "oci/trusted-state", Substrate: oci.Name,
			Mechanisms: ids(oci.HideTrustedState, oci.HideHomes),
			Expected:   "cordon's key store and code cache are empty inside the sandbox",
			run:        probeTrustedState},
		Probe{Name: "oci/output-and-tmp", Substrate: oci.Name,
			Mechanisms: []string{o("bounded-output"), o("tmpfs-tmp")},
			Expected:   "output is kept to its bound and counted; /tmp is fresh and capped; /dev is read-only",
			run:        probeOutputAndTmp},
		Probe{Name: "oci/seccomp", Substrate: oci.Name,
			Mechanisms: []string{o("seccomp")},
			Expected:   "io_uring, bpf, keyrings, ptrace of a sibling, TIOCSTI and sockets of families the grant does not cover fail with EPERM",
			run:        probeSeccomp},
		Probe{Name: "oci/limits", Substrate: oci.Name,
			Mechanisms: []string{o("pids"), o("memory")},
			Expected:   "a fork bomb under pids:64 and a balloon under memory:32MiB end at their limits",
			alone:      true,
			run:        probeLimits},
	)
}

// onOCI runs argv as a run of set on ws does on the oci substrate: the
// bwrap sandbox of the same policy (system PATH, the options' read-only
// paths), as a container of the runtime oci.Detect finds on the probe's
// PATH.
func onOCI(ctx context.Context, e *Env, ws string, set capabilities.Set, s bwrap.Spec) (substrate.Outcome, error) {
	pol, err := bwrap.PolicyOf(set, ws, e.Harness)
	if err != nil {
		return substrate.Outcome{}, err
	}
	s.Policy = pol.WithSystemPath(true).WithReadOnly(s.Policy.ReadOnly()...)
	rt, err := oci.Detect(ctx, pathOf(e.Environ), ws, e.Harness)
	if err != nil {
		return substrate.Outcome{}, err
	}
	return oci.Run(ctx, oci.RunSpec{Spec: s, Runtime: rt})
}

// pathOf is the PATH of an environment.
func pathOf(environ []string) string {
	for i := len(environ) - 1; i >= 0; i-- {
		if v, ok := strings.CutPrefix(environ[i], "PATH="); ok {
			return v
		}
	}
	return ""
}

// probeOCISandbox: the command is PID 1 of its own PID namespace, and
// /proc lists its processes alone.
func probeOCISandbox(ctx context.Context, e *Env) (string, bool, error) {
	ws, err := probeWorkspace(e)
	if err != nil {
		return "", false, err
	}
	o, err := sandboxed(ctx, e, ws, []string{"fs.read:workspace"}, `echo "pid=$$"; n=0; for p in /proc/[0-9]*; do n=$((n+1)); done; echo "procs=$n"`)
	if err != nil {
		return "no sandbox: " + err.Error(), false, nil
	}
	f := strings.Fields(o.Stdout)
	if o.ExitCode != 0 || len(f) != 2 {
		return fmt.Sprintf("exit %d: %s", o.ExitCode, lastLine(o.Stderr)), false, nil
	}
	// The shell itself, and a subshell at most.
	ok := f[0] == "pid=1" && (f[1] == "procs=1" || f[1] == "procs=2")
	return fmt.Sprintf("%s in its own PID namespace, %s visible in /proc", f[0], strings.TrimPrefix(f[1], "procs=")), ok, nil
}
