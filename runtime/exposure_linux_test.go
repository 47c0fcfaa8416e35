package runtime_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cordon-run/cordon/admission"
	"github.com/cordon-run/cordon/harness"
	"github.com/cordon-run/cordon/internal/testenv"
	"github.com/cordon-run/cordon/internal/wasmtest"
	"github.com/cordon-run/cordon/refusal"
	"github.com/cordon-run/cordon/runtime"
	"github.com/cordon-run/cordon/substrate/bwrap"
)

// TestNoSubstrateRunsWhereTheWorkspaceExposesBwrap: a workspace holding a
// bind of the directory of the bwrap later runs start (the one PATH
// finds: a copy here), or of a directory PATH searches before it, is
// refused on every substrate before the command starts — on Landlock and OCI too, whose commands write the workspace
// with every mount below it, and would have written bwrap as root.
func TestNoSubstrateRunsWhereTheWorkspaceExposesBwrap(t *testing.T) {
	if !testenv.PrivateMounts(t) {
		return
	}
	sys, err := bwrap.Find(os.Getenv("PATH"))
	testenv.Require(t, err == nil, "bubblewrap: %v", err)
	data, err := os.ReadFile(sys)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "bwrap")
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	// A directory PATH searches before bwrap's: a bwrap put there would
	// be found first. A link to bwrap, found first: it could be replaced.
	early, links := t.TempDir(), t.TempDir()
	if err := os.Symlink(bin, filepath.Join(links, "bwrap")); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, bound, path string }{
		{"bwrap's directory", dir, dir},
		{"a directory searched first", early, early + ":" + dir},
		{"the directory of a link to it", links, links + ":" + dir},
	} {
		env := append(os.Environ(), "PATH="+tc.path+":"+os.Getenv("PATH"))
		bound := tc.bound
		t.Run(tc.name, func(t *testing.T) {
			substrates(t, func(t *testing.T, sub string) {
				ws := workspace(t, base(t))
				testenv.Bind(t, bound, filepath.Join(ws, "tools"))
				refusedOn(t, sub, newPolicy(ws), env, "a mount inside the workspace")
				if after, _ := os.ReadFile(bin); string(after) != string(data) {
					t.Error("bwrap changed")
				}
			})
		})
	}
}

// TestNoSubstrateRunsWhereTheWorkspaceExposesItsRunner: a workspace
// holding a bind of the directory of the program that runs the runtime
// (cordon, here this test binary) is refused on every substrate before
// the command starts: nothing checks that program before its next start.
func TestNoSubstrateRunsWhereTheWorkspaceExposesItsRunner(t *testing.T) {
	if !testenv.PrivateMounts(t) {
		return
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	substrates(t, func(t *testing.T, sub string) {
		ws := workspace(t, base(t))
		testenv.Bind(t, filepath.Dir(self), filepath.Join(ws, "tools"))
		refusedOn(t, sub, newPolicy(ws), os.Environ(), "the program this process runs", refusal.WorkspaceRefused)
	})
}

// TestNoSubstrateRunsWhereTheWorkspaceExposesCordonsState: a workspace
// holding a bind of cordon's state directory (its keys, the registry of
// runs, the marks of distrusted programs) is refused on every substrate
// before the command starts: bwrap hides the state at its own path, not
// under another. Tried before the check: a bwrap and a Landlock command
// each made a file in the state's runs directory through the bind.
func TestNoSubstrateRunsWhereTheWorkspaceExposesCordonsState(t *testing.T) {
	if !testenv.PrivateMounts(t) {
		return
	}
	state := testHarness.StateDir()
	if err := os.MkdirAll(state, 0o700); err != nil {
		t.Fatal(err)
	}
	substrates(t, func(t *testing.T, sub string) {
		ws := workspace(t, base(t))
		testenv.Bind(t, state, filepath.Join(ws, "st"))
		refusedOn(t, sub, newPolicy(ws), os.Environ(), "cordon's state or cache", refusal.WorkspaceRefused)
	})
}

// configured returns the test harness read as the CLI reads it, with the
// configuration file file (CORDON_CONFIG).
func configured(t *testing.T, file string) harness.Config {
	t.Helper()
	env := map[string]string{
		harness.EnvConfig:   file,
		harness.EnvStateDir: testHarness.StateDir(),
		harness.EnvCacheDir: testHarness.CacheDir(),
		harness.EnvRootsDir: testHarness.RootsDir(),
	}
	h, got, err := harness.FromEnv(func(k string) string { return env[k] })
	if err != nil || got != file || h.File() != file {
		t.Fatalf("harness.FromEnv = %v, %q, %v; want the configuration of %s", h, got, err, file)
	}
	return h
}

// TestNoSubstrateRunsWhereTheConfigurationLeadsIntoTheWorkspace: a
// configuration file that is a link into the workspace (one kept in a
// repository of dotfiles, the workspace), or a link to a link there, is
// refused on every substrate, for root and an unprivileged user alike:
// the command could rewrite what the next cordon reads (the harness state
// it protects, where its state lies), or point the middle link at a file
// of its own. Tried before the check: the command rewrote it through the
// workspace (the CLI's check of the configuration's path compared the
// link's); and, with the first link guarded, re-pointed the middle one.
func TestNoSubstrateRunsWhereTheConfigurationLeadsIntoTheWorkspace(t *testing.T) {
	for _, chain := range []bool{false, true} {
		t.Run(map[bool]string{false: "a link", true: "a link to a link"}[chain], func(t *testing.T) {
			substrates(t, func(t *testing.T, sub string) {
				top := base(t)
				ws := workspace(t, top)
				real := filepath.Join(ws, "cordon.json")
				if chain {
					real = filepath.Join(top, "real.json")
				}
				if err := os.WriteFile(real, []byte(`{"harness_state": [".efferent"]}`), 0o644); err != nil {
					t.Fatal(err)
				}
				to := real
				if chain { // top/cordon.json -> ws/cordon.json -> top/real.json
					to = filepath.Join(ws, "cordon.json")
					if err := os.Symlink(real, to); err != nil {
						t.Fatal(err)
					}
				}
				file := filepath.Join(top, "cordon.json")
				if err := os.Symlink(to, file); err != nil {
					t.Fatal(err)
				}
				refusedOn(t, sub, bwrap.NewPolicy(ws, configured(t, file)), os.Environ(), "the configuration cordon reads", refusal.WorkspaceRefused)
			})
		})
	}
}

// TestNoSubstrateRunsWhereTheWorkspaceExposesCordonsConfiguration: a
// workspace holding a bind of the directory of cordon's configuration
// file is refused on every substrate (root: the bind needs it).
func TestNoSubstrateRunsWhereTheWorkspaceExposesCordonsConfiguration(t *testing.T) {
	if !testenv.PrivateMounts(t) {
		return
	}
	dir := filepath.Join(t.TempDir(), "config")
	os.Mkdir(dir, 0o755)
	file := filepath.Join(dir, "cordon.json")
	if err := os.WriteFile(file, []byte(`{}`), 0o644); err != nil {
		t.Fatal(err)
	}
	h := configured(t, file)
	substrates(t, func(t *testing.T, sub string) {
		ws := workspace(t, base(t))
		testenv.Bind(t, dir, filepath.Join(ws, "cfg"))
		refusedOn(t, sub, bwrap.NewPolicy(ws, h), os.Environ(), "the configuration cordon reads", refusal.WorkspaceRefused)
	})
}

// TestCordonsStateThroughALinkIntoAnotherMountIsNoRefusal: a state and a
// cache directory reached through a link into another mount (~/.local on
// another disk) refuse no run: each is placed as the kernel reaches it.
// Before, every run on every substrate was refused ("cannot be told": the
// path is not below the point of the mount it is on).
func TestCordonsStateThroughALinkIntoAnotherMountIsNoRefusal(t *testing.T) {
	if !testenv.PrivateMounts(t) {
		return
	}
	_, link := tmpfsBehindALink(t)
	h := testHarness.WithStateDir(filepath.Join(link, "state")).WithCacheDir(filepath.Join(link, "cache"))
	for _, d := range []string{h.StateDir(), h.CacheDir()} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	substrates(t, func(t *testing.T, sub string) {
		ws := workspace(t, base(t))
		out := filepath.Join(ws, "out")
		os.Mkdir(out, 0o755)
		p := prepared(t, bwrap.NewPolicy(ws, h), "touch "+filepath.Join(out, "ran"), in(sub))
		rt := runtime.New(runtime.Config{})
		defer rt.Close()
		if res, err := rt.Run(context.Background(), p); err != nil || res.ExitCode != 0 {
			t.Fatalf("Run = %+v, %v; want the command run", res, err)
		}
		if _, err := os.Stat(filepath.Join(out, "ran")); err != nil {
			t.Errorf("the command did not run: %v", err)
		}
	})
}

// TestNoWasmToolWritesWhereTheWorkspaceExposesItsRunner: a WebAssembly
// tool granted fs.write:workspace is refused where the workspace holds a
// bind of the directory of the program that runs the runtime (this test
// binary); one that only reads runs.
func TestNoWasmToolWritesWhereTheWorkspaceExposesItsRunner(t *testing.T) {
	if !testenv.PrivateMounts(t) {
		return
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ws, state := t.TempDir(), t.TempDir()
	h := harness.Default().WithStateDir(filepath.Join(state, "state")).WithCacheDir(filepath.Join(state, "cache"))
	if err := os.WriteFile(filepath.Join(ws, "guest.wasm"), wasmtest.Go(t, "substrate/wasm/testdata/guest"), 0o644); err != nil {
		t.Fatal(err)
	}
	testenv.Bind(t, filepath.Dir(self), filepath.Join(ws, "tools"))
	ctx := context.Background()
	a, reg := admitterFor(t, ws, h)
	rt := runtime.New(runtime.Config{})
	defer rt.Close()
	for _, c := range []struct {
		cap     string
		refused bool
	}{{`fs.read:workspace", "fs.write:workspace`, true}, {"fs.read:workspace", false}} {
		adm, err := a.Admit(ctx, admission.Source{Name: "decl", Dir: ws, Data: []byte(
			`{"name": "echo", "kind": "wasm", "module": "guest.wasm", "args": ["echo"], "capabilities": ["` + c.cap + `"], "input_schema": {"type": "object"}}`)})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := reg.Register(adm); err != nil {
			t.Fatal(err)
		}
		p, err := a.Prepare(ctx, reg, "echo", []byte(`{}`))
		if err != nil {
			t.Fatal(err)
		}
		_, err = rt.Run(ctx, p)
		if got := errors.Is(err, refusal.WorkspaceRefused) && strings.Contains(err.Error(), "the program this process runs"); got != c.refused {
			t.Errorf("%s: Run = %v; refused %v, want %v", c.cap, err, got, c.refused)
		}
	}
}

// tmpfsBehindALink mounts a tmpfs of the test's own (in PrivateMounts'
// namespace) and returns it and a link to it from another mount: a home
// on another disk, a Nix profile.
func tmpfsBehindALink(t *testing.T) (m, link string) {
	t.Helper()
	top := t.TempDir()
	m = filepath.Join(top, "m")
	os.Mkdir(m, 0o755)
	mountTmpfs(t, m)
	link = filepath.Join(top, "link")
	if err := os.Symlink(m, link); err != nil {
		t.Fatal(err)
	}
	return m, link
}

// TestAPathEntryThroughALinkIntoAnotherMountIsNoRefusal: a PATH directory
// reached through a symlink into another mount (a Nix profile, a home on
// another disk), searched before bwrap's, is placed as the kernel reaches
// it: the run is not refused for it.
func TestAPathEntryThroughALinkIntoAnotherMountIsNoRefusal(t *testing.T) {
	if !testenv.PrivateMounts(t) {
		return
	}
	m, profile := tmpfsBehindALink(t)
	os.Mkdir(filepath.Join(m, "bin"), 0o755)
	env := append(os.Environ(), "PATH="+filepath.Join(profile, "bin")+":"+os.Getenv("PATH"))
	substrates(t, func(t *testing.T, sub string) {
		ws := workspace(t, base(t))
		out := filepath.Join(ws, "out")
		os.Mkdir(out, 0o755)
		p := prepared(t, newPolicy(ws), "touch "+filepath.Join(out, "ran"), in(sub))
		rt := runtime.New(runtime.Config{Environ: env})
		defer rt.Close()
		if res, err := rt.Run(context.Background(), p); err != nil || res.ExitCode != 0 {
			t.Fatalf("Run = %+v, %v; want the command run", res, err)
		}
	})
}

// TestNoSubstrateRunsWhereTheWorkspaceHoldsBwrap: the bwrap later runs
// start (first on PATH) inside the workspace is refused on every
// substrate, for root and for an unprivileged user alike.
func TestNoSubstrateRunsWhereTheWorkspaceHoldsBwrap(t *testing.T) {
	sys, err := bwrap.Find(os.Getenv("PATH"))
	testenv.Require(t, err == nil, "bubblewrap: %v", err)
	data, err := os.ReadFile(sys)
	if err != nil {
		t.Fatal(err)
	}
	substrates(t, func(t *testing.T, sub string) {
		ws := workspace(t, base(t))
		dir := filepath.Join(ws, "bin")
		os.Mkdir(dir, 0o755)
		bin := filepath.Join(dir, "bwrap")
		if err := os.WriteFile(bin, data, 0o755); err != nil {
			t.Fatal(err)
		}
		refusedOn(t, sub, newPolicy(ws), append(os.Environ(), "PATH="+dir+":"+os.Getenv("PATH")), "it is inside the workspace")
	})
}

// refusedOn runs a command in the workspace of pol on the substrate sub,
// with the environment env, and fails the test unless the run is refused
// — as WorkspaceRefused, on bwrap as SandboxUnavailable (bwrap's own
// check) or as onBwrap says — with a message that mentions mention, and
// the command never ran.
func refusedOn(t *testing.T, sub string, pol bwrap.Policy, env []string, mention string, onBwrap ...*refusal.Kind) {
	t.Helper()
	out := filepath.Join(pol.Workspace(), "out")
	os.Mkdir(out, 0o755)
	ran := filepath.Join(out, "ran") // below an entry: Landlock makes nothing new at the top
	p := prepared(t, pol, "touch "+ran, in(sub))
	rt := runtime.New(runtime.Config{Environ: env})
	defer rt.Close()
	res, err := rt.Run(context.Background(), p)
	want := refusal.WorkspaceRefused
	if sub == bwrap.Name {
		want = refusal.SandboxUnavailable // bwrap's own check, before the release
		if len(onBwrap) > 0 {
			want = onBwrap[0]
		}
	}
	if !errors.Is(err, want) || !strings.Contains(err.Error(), mention) {
		t.Errorf("Run = %v; want a %s that mentions %q", err, want.Name(), mention)
	}
	if res.ExitCode == 0 {
		t.Errorf("result %+v reads as a run that happened", res)
	}
	rt.Close()
	if _, err := os.Stat(ran); err == nil {
		t.Error("the command ran")
	}
}

// TestAPathDirectoryInsideTheWorkspaceIsNoRefusal: a directory of the
// workspace that PATH searches before bwrap's (a project's bin) does not
// refuse the run — a bwrap a command put there is refused by the next
// run's own check (a directory that has been a workspace); only a mount
// inside the workspace shows such a directory under another path.
func TestAPathDirectoryInsideTheWorkspaceIsNoRefusal(t *testing.T) {
	substrates(t, func(t *testing.T, sub string) {
		ws := workspace(t, base(t))
		dir := filepath.Join(ws, "bin")
		os.Mkdir(dir, 0o755)
		env := append(os.Environ(), "PATH="+dir+":"+os.Getenv("PATH"))
		ran := filepath.Join(dir, "ran") // below an entry: Landlock makes nothing new at the top
		p := prepared(t, newPolicy(ws), "touch "+ran, in(sub))
		rt := runtime.New(runtime.Config{Environ: env})
		defer rt.Close()
		if res, err := rt.Run(context.Background(), p); err != nil || res.ExitCode != 0 {
			t.Fatalf("Run = %+v, %v; want the command run", res, err)
		}
		if _, err := os.Stat(ran); err != nil {
			t.Error("the command did not run")
		}
	})
}

// TestARunWhoseStateCannotBePlacedNamesIt: cordon's state directory on a
// mount whose place cannot be told (a bind of a directory since removed:
// its root reads "//deleted") refuses a Landlock or OCI run naming
// cordon's own — not the bwrap later runs start, whose exposure was not
// what failed. (A bwrap run cannot make its record of runs in a removed
// directory: refused before that, as a setup error.)
func TestARunWhoseStateCannotBePlacedNamesIt(t *testing.T) {
	if !testenv.PrivateMounts(t) {
		return
	}
	top := t.TempDir()
	src, state := filepath.Join(top, "src"), filepath.Join(top, "state")
	os.Mkdir(src, 0o700)
	testenv.Bind(t, src, state)
	if err := os.Remove(src); err != nil {
		t.Fatal(err)
	}
	h := testHarness.WithStateDir(state)
	substrates(t, func(t *testing.T, sub string) {
		if sub == bwrap.Name {
			t.Skip("a bwrap run is refused before: it cannot make its record of runs in a removed directory")
		}
		ws := workspace(t, base(t))
		refusedOn(t, sub, bwrap.NewPolicy(ws, h), os.Environ(), "cordon's own binaries, state or configuration through a mount cannot be told")
	})
}

// TestNoSubstrateRunsWhereTheWorkspaceExposesCordonsRoots: a workspace
// holding a bind of cordon's roots directory is refused on every
// substrate — its command could change another root's tree, which that
// root's apply copies into its origin — while a run inside a root (a
// workspace below the roots directory) is no refusal.
func TestNoSubstrateRunsWhereTheWorkspaceExposesCordonsRoots(t *testing.T) {
	if !testenv.PrivateMounts(t) {
		return
	}
	roots := testHarness.RootsDir()
	other := filepath.Join(roots, "other-root")
	if err := os.MkdirAll(other, 0o700); err != nil {
		t.Fatal(err)
	}
	substrates(t, func(t *testing.T, sub string) {
		ws := workspace(t, base(t))
		testenv.Bind(t, roots, filepath.Join(ws, "rt"))
		refusedOn(t, sub, newPolicy(ws), os.Environ(), "cordon's roots directory", refusal.WorkspaceRefused)
	})
}

// TestARunInsideARootIsNoRefusal: a workspace below cordon's roots
// directory (a disposable root) runs on every substrate, for root and an
// unprivileged user alike: the roots directory above it is not exposed.
func TestARunInsideARootIsNoRefusal(t *testing.T) {
	substrates(t, func(t *testing.T, sub string) {
		ws := filepath.Join(testHarness.RootsDir(), "r-"+sub)
		if err := os.MkdirAll(filepath.Join(ws, "out"), 0o755); err != nil {
			t.Fatal(err)
		}
		defer os.RemoveAll(ws)
		p := prepared(t, newPolicy(ws), "touch "+filepath.Join(ws, "out", "ran"), in(sub))
		rt := runtime.New(runtime.Config{})
		defer rt.Close()
		if res, err := rt.Run(context.Background(), p); err != nil || res.ExitCode != 0 {
			t.Fatalf("Run = %+v, %v; want the command run", res, err)
		}
	})
}
