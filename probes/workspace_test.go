package probes

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cordon-run/cordon/substrate/workspace"
)

func TestWorkspaceProbesPass(t *testing.T) {
	ps := For("workspace")
	want := []string{"workspace/harness-alias", "workspace/symlink-escape"}
	if len(ps) != len(want) {
		t.Fatalf("workspace probes %v, want %v", probeNames(ps), want)
	}
	for i, r := range runProbesLogged(t, ps...) {
		if r.Probe.Name != want[i] {
			t.Errorf("probe %d is %s, want %s", i, r.Probe.Name, want[i])
		}
		if !r.Pass {
			t.Errorf("%s failed: %s", r.Probe.Name, r.Observed)
		}
		if strings.Contains(r.Observed, ": read") || strings.Contains(r.Observed, ": written") {
			t.Errorf("%s passed with an operation that succeeded: %s", r.Probe.Name, r.Observed)
		}
	}
}

// unguarded is a workspace without the guard: paths joined to the
// directory and handed to the kernel.
type unguarded string

func (u unguarded) ReadFile(name string) ([]byte, error) {
	return os.ReadFile(filepath.Join(string(u), name))
}

func (u unguarded) WriteFile(name string, data []byte) error {
	p := filepath.Join(string(u), name)
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return err
	}
	return os.WriteFile(p, data, 0o600)
}

func (unguarded) Close() error { return nil }

func openUnguarded(dir string, e *Env) (wsFiles, error) { return unguarded(dir), nil }

// The workspace probes fail without the guard, and the harness probe
// without harness state.
func TestWorkspaceProbesFailWithoutTheGuard(t *testing.T) {
	noState := func(dir string, e *Env) (wsFiles, error) {
		ws, err := workspace.Open(dir, workspace.WithHarness(e.Harness), workspace.WithoutHarnessState())
		if err != nil {
			return nil, err
		}
		return ws, nil
	}
	for _, c := range []struct {
		name, observed string
		run            func(context.Context, *Env) (string, bool, error)
	}{
		{"symlink escape, unguarded", "read link/secret: read; write link/new: written; outside dir changed (now new,secret)",
			wsSymlinkEscapeRun(openUnguarded)},
		{"harness alias, unguarded", "read alias/x: read; write alias/y: written",
			wsHarnessAliasRun(openUnguarded)},
		{"harness alias, no harness state", ".efferent changed (now x,y)",
			wsHarnessAliasRun(noState)},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := runProbesLogged(t, Probe{Name: "workspace/broken", Substrate: "workspace", run: c.run})[0]
			if r.Pass || !strings.Contains(r.Observed, c.observed) {
				t.Errorf("pass %v, observed %q; want a failure observing %q", r.Pass, r.Observed, c.observed)
			}
		})
	}
}

// A refusal is not enough: the symlink-escape probe checks the outside
// directory itself, so a write that lands there and still reports a
// refusal fails it.
func TestSymlinkEscapeChecksTheHost(t *testing.T) {
	lying := func(dir string, e *Env) (wsFiles, error) {
		ws, err := wsGuard(dir, e)
		if err != nil {
			return nil, err
		}
		return lyingFiles{ws, dir}, nil
	}
	r := runProbesLogged(t, Probe{Name: "workspace/broken", Substrate: "workspace", run: wsSymlinkEscapeRun(lying)})[0]
	if r.Pass || !strings.Contains(r.Observed, "outside dir changed") {
		t.Errorf("pass %v, observed %q; want the change seen", r.Pass, r.Observed)
	}
}

// lyingFiles writes without the guard but returns the guard's refusal.
type lyingFiles struct {
	wsFiles
	dir string
}

func (l lyingFiles) WriteFile(name string, data []byte) error {
	err := l.wsFiles.WriteFile(name, data)
	_ = unguarded(l.dir).WriteFile(name, data)
	return err
}

// TestProvingOn: a mechanism two substrates share is proved for each by
// its own probe alone; one a substrate has no probe of (the file guard's,
// for a WebAssembly grant) by every probe that proves it.
func TestProvingOn(t *testing.T) {
	for _, c := range []struct{ mech, sub, want string }{
		{"proc/deadline", "bwrap", "bwrap/deadline"},
		{"proc/deadline", "landlock", "landlock/deadline"},
		{"proc/deadline", "", "bwrap/deadline landlock/deadline"},
		{wsMechBeneath, "wasm", "workspace/symlink-escape"},
	} {
		var got []string
		for _, p := range provingOn(c.mech, c.sub) {
			got = append(got, p.Name)
		}
		slices.Sort(got)
		if strings.Join(got, " ") != c.want {
			t.Errorf("provingOn(%s, %q) = %v, want %s", c.mech, c.sub, got, c.want)
		}
	}
}
