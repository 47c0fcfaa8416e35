package probes

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cordon-run/cordon/internal/testenv"
)

// needBwrap skips (fails in CI) without a bubblewrap that makes sandboxes.
func needBwrap(t *testing.T) string {
	t.Helper()
	bin, err := exec.LookPath("bwrap")
	testenv.Require(t, err == nil, "bubblewrap is not installed: %v", err)
	return bin
}

func runBwrapProbes(t *testing.T, cfg Config) map[string]Result {
	t.Helper()
	if cfg.Harness.IsZero() {
		cfg.Harness = testenv.Harness(t)
	}
	if cfg.TempDir == "" {
		cfg.TempDir = t.TempDir()
	}
	out := map[string]Result{}
	for _, r := range Run(context.Background(), For("bwrap"), cfg, nil) {
		out[r.Probe.Name] = r
	}
	return out
}

// TestBwrapProbesPass: on a host whose bubblewrap works (the CI machine,
// as root and unprivileged) every probe passes, the set in well under
// the second the whole set is allowed.
func TestBwrapProbesPass(t *testing.T) {
	needBwrap(t)
	start := time.Now()
	results := runBwrapProbes(t, Config{})
	took := time.Since(start)
	if len(results) < 10 {
		t.Fatalf("only %d bwrap probes", len(results))
	}
	for name, r := range results {
		if !r.Pass {
			t.Errorf("%s failed: %s", name, r.Observed)
		}
		t.Logf("%-26s %6.1f ms  %s", name, float64(r.Duration.Microseconds())/1000, r.Observed)
	}
	t.Logf("all bwrap probes in %v", took)
}

// TestBwrapProbesWithoutBwrap: with bubblewrap missing from PATH, every
// probe that needs a sandbox fails and says why.
func TestBwrapProbesWithoutBwrap(t *testing.T) {
	results := runBwrapProbes(t, Config{Environ: []string{"PATH=" + t.TempDir()}})
	for name, r := range results {
		if r.Pass {
			t.Errorf("%s passed without bubblewrap: %s", name, r.Observed)
		}
		if !strings.Contains(r.Observed, "bwrap") {
			t.Errorf("%s does not say bwrap is missing: %s", name, r.Observed)
		}
	}
}

// TestBwrapProbesFakeIgnoresFlags: a bwrap that runs the command without
// any sandbox fails the probes: none of them takes its word.
func TestBwrapProbesFakeIgnoresFlags(t *testing.T) {
	fake := testenv.FakeBwrap(t, testenv.FakeIgnoresFlags, "")
	results := runBwrapProbes(t, Config{Bwrap: fake, Timeout: 2 * time.Second}) // it keeps the status pipe open: no 10 s wait
	for name, r := range results {
		if r.Pass {
			t.Errorf("%s passed under a bwrap that ignores its flags: %s", name, r.Observed)
		}
	}
	// Unconfined, the probes' scripts ran in their own workspaces, which
	// bwrap is started in: nothing of theirs landed in the host's /.
	for _, n := range []string{".git-away", ".envrc", "file.txt", "new.txt"} {
		if _, err := os.Lstat("/" + n); err == nil {
			t.Errorf("/%s exists after the probes ran unconfined", n)
		}
	}
}

// TestBwrapProbesFakeNoReadOnlyBinds: a bwrap that makes real namespaces
// but binds harness state and the write-later paths writable fails
// exactly the probes of those mechanisms.
func TestBwrapProbesFakeNoReadOnlyBinds(t *testing.T) {
	tmp := t.TempDir()
	fake := testenv.FakeBwrap(t, testenv.FakeNoReadOnlyBinds, tmp)
	results := runBwrapProbes(t, Config{Bwrap: fake, TempDir: tmp})
	for _, name := range []string{"bwrap/harness-state", "bwrap/write-later"} {
		if r := results[name]; r.Pass {
			t.Errorf("%s passed with writable binds: %s", name, r.Observed)
		} else {
			t.Logf("%s failed as it should: %s", name, r.Observed)
		}
	}
	for _, name := range []string{"bwrap/sandbox", "bwrap/no-capabilities", "bwrap/net-none", "bwrap/environment"} {
		if r := results[name]; !r.Pass {
			t.Errorf("%s failed, though the fake honours its mechanism: %s", name, r.Observed)
		}
	}
}

// TestBwrapProbesTrustNoPlantedProgram: a bwrap that keeps the command's
// capabilities fails the capability probe even when the caller's PATH
// leads with a directory where a command planted a grep that prints
// "no capabilities" and an unshare that fails: the probes run the host's
// programs only.
func TestBwrapProbesTrustNoPlantedProgram(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("without root a sandbox holds no capability to keep; the root run covers this")
	}
	fake := testenv.FakeBwrap(t, testenv.FakeNoCapDrop, "")
	// Visible in the sandbox, unlike a directory under /tmp.
	planted, err := os.MkdirTemp("/var/tmp", "cordon-planted-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(planted) })
	os.WriteFile(filepath.Join(planted, "grep"), []byte("#!/bin/sh\nfor c in Inh Prm Eff Bnd Amb; do printf 'Cap%s:\\t0000000000000000\\n' $c; done\n"), 0o755)
	os.WriteFile(filepath.Join(planted, "unshare"), []byte("#!/bin/sh\nexit 1\n"), 0o755)
	env := []string{"PATH=" + planted + ":" + os.Getenv("PATH")}
	results := runBwrapProbes(t, Config{Bwrap: fake, Environ: env})
	if r := results["bwrap/no-capabilities"]; r.Pass {
		t.Fatalf("the capability probe passed with capabilities kept: %s", r.Observed)
	} else {
		t.Logf("failed as it should: %s", r.Observed)
	}
}

// TestOCIProbesPass: with an OCI runtime that runs bundles here (runc on
// the CI machine, as root and unprivileged), every oci probe passes.
func TestOCIProbesPass(t *testing.T) {
	_, err := exec.LookPath("runc")
	testenv.Require(t, err == nil, "runc (Debian's runc package): %v", err)
	cfg := Config{Harness: testenv.Harness(t), TempDir: t.TempDir()}
	results := Run(context.Background(), For("oci"), cfg, nil)
	if len(results) < 12 {
		t.Fatalf("only %d oci probes", len(results))
	}
	for _, r := range results {
		if !r.Pass {
			t.Errorf("%s failed: %s", r.Probe.Name, r.Observed)
		}
		t.Logf("%-26s %6.1f ms  %s", r.Probe.Name, float64(r.Duration.Microseconds())/1000, r.Observed)
	}
}

// TestOCIProbesWithoutARuntime: with no OCI runtime on PATH, every oci
// probe fails and says so.
func TestOCIProbesWithoutARuntime(t *testing.T) {
	cfg := Config{Harness: testenv.Harness(t), TempDir: t.TempDir(), Environ: []string{"PATH=" + t.TempDir()}}
	for _, r := range Run(context.Background(), For("oci"), cfg, nil) {
		if r.Pass || !strings.Contains(r.Observed, "no OCI runtime") {
			t.Errorf("%s without a runtime: pass %v, %s", r.Probe.Name, r.Pass, r.Observed)
		}
	}
}

// The host facts name the OCI runtime a run would try first and its
// version, which every receipt then records; without one, the oci
// substrate is degraded.
func TestHostFactsNameTheOCIRuntime(t *testing.T) {
	runc, err := exec.LookPath("runc")
	testenv.Require(t, err == nil, "runc (Debian's runc package): %v", err)
	real, _ := filepath.EvalSymlinks(runc)
	h := testenv.Harness(t)
	f := HostFacts(context.Background(), h, "")
	if !strings.HasPrefix(f.OCI, "runc: runc version ") || f.OCIPath != real {
		t.Errorf("host facts: oci %q at %q, want runc's version at %s", f.OCI, f.OCIPath, real)
	}
	if d := Degraded(f, "oci"); len(d) > 0 {
		t.Errorf("degraded with runc installed: %q", d)
	}
	f.OCI = ""
	if d := Degraded(f, "oci"); len(d) == 0 {
		t.Errorf("not degraded without an OCI runtime")
	}
}
