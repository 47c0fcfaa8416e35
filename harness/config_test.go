package harness_test

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cordon-run/cordon/harness"
	"github.com/cordon-run/cordon/refusal"
)

// defaultState and defaultWriteLater are the documented defaults.
var (
	defaultState      = []string{".efferent", ".foundry"}
	defaultWriteLater = []string{
		".vscode/", ".idea/", ".zed/", ".cursor/", ".devcontainer/",
		".claude/", ".mcp.json", ".gemini/", ".codex/", ".envrc",
	}
)

func TestDefault(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	for _, c := range []struct {
		name                 string
		xdgState, xdgCache   string
		wantState, wantCache string
	}{
		{name: "from HOME", wantState: home + "/.local/state/cordon", wantCache: home + "/.cache/cordon"},
		{name: "from XDG", xdgState: "/x/state", xdgCache: "/x/cache", wantState: "/x/state/cordon", wantCache: "/x/cache/cordon"},
		{name: "relative XDG ignored", xdgState: "rel/state", xdgCache: "rel/cache", wantState: home + "/.local/state/cordon", wantCache: home + "/.cache/cordon"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv("XDG_STATE_HOME", c.xdgState)
			t.Setenv("XDG_CACHE_HOME", c.xdgCache)
			d := harness.Default()
			if d.IsZero() {
				t.Fatal("Default().IsZero()")
			}
			if err := d.Validate(); err != nil {
				t.Fatalf("Default().Validate(): %v", err)
			}
			if got := d.State(); !slices.Equal(got, defaultState) {
				t.Errorf("State() = %q, want %q", got, defaultState)
			}
			if got := d.WriteLater(); !slices.Equal(got, defaultWriteLater) {
				t.Errorf("WriteLater() = %q, want %q", got, defaultWriteLater)
			}
			if d.StateDir() != c.wantState || d.CacheDir() != c.wantCache || d.Home() != home {
				t.Errorf("StateDir %q, CacheDir %q, Home %q; want %q, %q, %q", d.StateDir(), d.CacheDir(), d.Home(), c.wantState, c.wantCache, home)
			}
			if d.RegistryDir() != ".efferent" {
				t.Errorf("RegistryDir() = %q, want .efferent", d.RegistryDir())
			}
		})
	}
}

func TestZeroConfig(t *testing.T) {
	var c harness.Config
	if !c.IsZero() {
		t.Error("the zero Config is not IsZero")
	}
	if err := c.Validate(); !errors.Is(err, refusal.InvalidPolicy) {
		t.Errorf("zero Config Validate: %v, want refusal.InvalidPolicy", err)
	}
	if _, err := c.Protect(t.TempDir()); !errors.Is(err, refusal.InvalidPolicy) {
		t.Errorf("zero Config Protect: %v, want refusal.InvalidPolicy", err)
	}
}

// TestConfigCopiesAreIndependent changes one copy, and the slices given to
// and returned by a Config, and checks that no other copy sees it.
func TestConfigCopiesAreIndependent(t *testing.T) {
	a := harness.Default()
	b := harness.Default()

	a.State()[0] = "mutated"
	a.WriteLater()[0] = "mutated"
	if a.State()[0] != ".efferent" || a.WriteLater()[0] != ".vscode/" {
		t.Errorf("changing a returned slice changed the Config: %q %q", a.State(), a.WriteLater())
	}

	names := []string{".mine", ".other"}
	paths := []string{"tools/"}
	w := a.WithState(names...).WithWriteLater(paths...)
	names[0], paths[0] = "mutated", "mutated"
	if got := w.State(); !slices.Equal(got, []string{".mine", ".other"}) {
		t.Errorf("WithState keeps the caller's slice: %q", got)
	}
	if got := w.WriteLater(); !slices.Equal(got, []string{"tools/"}) {
		t.Errorf("WithWriteLater keeps the caller's slice: %q", got)
	}

	// Modifiers return copies: the receiver, and copies made from the same
	// value, stay as they were.
	base := harness.Default().AddState(".x")
	c1 := base.AddState(".one").AddWriteLater("one/")
	c2 := base.AddState(".two").AddWriteLater("two/")
	if got := c1.State(); !slices.Equal(got, []string{".efferent", ".foundry", ".x", ".one"}) {
		t.Errorf("c1.State() = %q", got)
	}
	if got := c2.State(); !slices.Equal(got, []string{".efferent", ".foundry", ".x", ".two"}) {
		t.Errorf("c2.State() = %q (a copy sees another's addition)", got)
	}
	if slices.Contains(c2.WriteLater(), "one/") || slices.Contains(c1.WriteLater(), "two/") {
		t.Errorf("copies share write-later additions: %q, %q", c1.WriteLater(), c2.WriteLater())
	}
	if got := base.State(); !slices.Equal(got, []string{".efferent", ".foundry", ".x"}) {
		t.Errorf("base.State() = %q after copies were modified", got)
	}
	_ = a.WithStateDir("/elsewhere").WithCacheDir("/elsewhere").WithHome("/elsewhere")
	if a.StateDir() == "/elsewhere" || a.CacheDir() == "/elsewhere" || a.Home() == "/elsewhere" {
		t.Errorf("With modifiers changed their receiver")
	}
	if got := b.State(); !slices.Equal(got, defaultState) {
		t.Errorf("a second Default() = %q", got)
	}
	if got := harness.Default().State(); !slices.Equal(got, defaultState) {
		t.Errorf("Default() after all this = %q: a global changed", got)
	}
}

func TestWithAndAdd(t *testing.T) {
	d := harness.Default()
	cases := []struct {
		name       string
		c          harness.Config
		state      []string
		writeLater []string
	}{
		{name: "AddState adds", c: d.AddState(".agent"), state: append(slices.Clone(defaultState), ".agent"), writeLater: defaultWriteLater},
		{name: "AddState of a default adds nothing", c: d.AddState(".foundry", ".efferent"), state: defaultState, writeLater: defaultWriteLater},
		{name: "AddState once per name", c: d.AddState(".a", ".a").AddState(".a"), state: append(slices.Clone(defaultState), ".a"), writeLater: defaultWriteLater},
		{name: "AddState after WithState keeps the replacement", c: d.WithState(".only").AddState(".x"), state: []string{".only", ".x"}, writeLater: defaultWriteLater},
		{name: "WithState replaces", c: d.WithState(".h"), state: []string{".h"}, writeLater: defaultWriteLater},
		{name: "AddWriteLater adds", c: d.AddWriteLater("Makefile", ".envrc"), state: defaultState, writeLater: append(slices.Clone(defaultWriteLater), "Makefile")},
		{name: "WithWriteLater replaces", c: d.WithWriteLater("a/", "b"), state: defaultState, writeLater: []string{"a/", "b"}},
		{name: "WithWriteLater empty", c: d.WithWriteLater(), state: defaultState, writeLater: nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := c.c.State(); !slices.Equal(got, c.state) {
				t.Errorf("State() = %q, want %q", got, c.state)
			}
			if got := c.c.WriteLater(); !slices.Equal(got, c.writeLater) {
				t.Errorf("WriteLater() = %q, want %q", got, c.writeLater)
			}
			if c.c.RegistryDir() != c.state[0] {
				t.Errorf("RegistryDir() = %q, want the first state name %q", c.c.RegistryDir(), c.state[0])
			}
			if err := c.c.Validate(); err != nil {
				t.Errorf("Validate: %v", err)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	d := harness.Default().WithStateDir("/var/state").WithCacheDir("/var/cache")
	cases := []struct {
		name string
		c    harness.Config
		ok   bool
	}{
		{name: "default", c: d, ok: true},
		{name: "no state names", c: d.WithState()},
		{name: "empty state name", c: d.WithState("")},
		{name: "dot", c: d.WithState(".")},
		{name: "dot-dot", c: d.WithState("..")},
		{name: "state name with a slash", c: d.WithState("a/b")},
		{name: "state name with NUL", c: d.WithState("a\x00")},
		{name: "added bad state name", c: d.AddState("../up")},
		{name: "write-later absolute", c: d.AddWriteLater("/etc/passwd")},
		{name: "write-later dot-dot", c: d.AddWriteLater("../outside")},
		{name: "write-later inner dot-dot", c: d.AddWriteLater("a/../b")},
		{name: "write-later dot", c: d.AddWriteLater(".")},
		{name: "write-later dot slash", c: d.AddWriteLater("./x")},
		{name: "write-later empty", c: d.AddWriteLater("")},
		{name: "write-later slash only", c: d.AddWriteLater("/")},
		{name: "write-later double slash", c: d.AddWriteLater("a//b")},
		{name: "write-later NUL", c: d.AddWriteLater("a\x00b")},
		{name: "write-later nested dir", c: d.AddWriteLater("a/b/"), ok: true},
		{name: "no state dir", c: d.WithStateDir("")},
		{name: "relative state dir", c: d.WithStateDir("state")},
		{name: "root state dir", c: d.WithStateDir("/")},
		{name: "unclean state dir", c: d.WithStateDir("/var/state/")},
		{name: "dot-dot cache dir", c: d.WithCacheDir("/var/x/../cache")},
		{name: "no cache dir", c: d.WithCacheDir("")},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := c.c.Validate()
			if c.ok {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if !errors.Is(err, refusal.InvalidPolicy) {
				t.Fatalf("Validate: %v, want refusal.InvalidPolicy", err)
			}
			if _, err := c.c.Protect(t.TempDir()); !errors.Is(err, refusal.InvalidPolicy) {
				t.Errorf("Protect with an invalid Config: %v, want refusal.InvalidPolicy", err)
			}
		})
	}
}

func TestConfigString(t *testing.T) {
	s := harness.Default().WithStateDir("/s").WithCacheDir("/c").AddWriteLater("Makefile").String()
	for _, want := range []string{".efferent,.foundry", ".vscode/", "Makefile", "/s", "/c"} {
		if !strings.Contains(s, want) {
			t.Errorf("String() = %q, does not name %q", s, want)
		}
	}
}

func TestFromEnv(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_STATE_HOME", "")
	t.Setenv("XDG_CACHE_HOME", "")
	dir := t.TempDir()
	file := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	defState, defCache := home+"/.local/state/cordon", home+"/.cache/cordon"
	cases := []struct {
		name       string
		env        map[string]string
		err        *refusal.Kind
		state      []string
		writeLater []string
		stateDir   string
		cacheDir   string
	}{
		{name: "nothing set", stateDir: defState, cacheDir: defCache},
		{name: "env dirs", env: map[string]string{harness.EnvStateDir: "/e/state", harness.EnvCacheDir: "/e/cache"}, stateDir: "/e/state", cacheDir: "/e/cache"},
		{name: "env state dir relative", env: map[string]string{harness.EnvStateDir: "e/state"}, err: refusal.InvalidPolicy},
		{name: "file sets everything", env: map[string]string{harness.EnvConfig: file("all.json",
			`{"harness_state": [".h"], "write_later": ["Makefile", "tools/"], "state_dir": "/f/state", "cache_dir": "/f/cache"}`)},
			state: []string{".h"}, writeLater: []string{"Makefile", "tools/"}, stateDir: "/f/state", cacheDir: "/f/cache"},
		{name: "file sets the dirs only", env: map[string]string{harness.EnvConfig: file("dirs.json", `{"state_dir": "/f/state", "cache_dir": "/f/cache"}`)},
			stateDir: "/f/state", cacheDir: "/f/cache"},
		{name: "env overrides the file", env: map[string]string{
			harness.EnvConfig:   file("over.json", `{"state_dir": "/f/state", "cache_dir": "/f/cache"}`),
			harness.EnvStateDir: "/e/state", harness.EnvCacheDir: "/e/cache"},
			stateDir: "/e/state", cacheDir: "/e/cache"},
		{name: "empty object", env: map[string]string{harness.EnvConfig: file("empty.json", `{}`)}, stateDir: defState, cacheDir: defCache},
		{name: "a file with two names", env: map[string]string{harness.EnvConfig: linked(t, file("linked.json", `{}`))}, err: refusal.InvalidPolicy},
		{name: "relative file name", env: map[string]string{harness.EnvConfig: "cordon.json"}, err: refusal.InvalidPolicy},
		{name: "missing file", env: map[string]string{harness.EnvConfig: filepath.Join(dir, "absent.json")}, err: refusal.InvalidPolicy},
		{name: "a directory", env: map[string]string{harness.EnvConfig: dir}, err: refusal.InvalidPolicy},
		{name: "unknown field", env: map[string]string{harness.EnvConfig: file("unknown.json", `{"harness_state": [".h"], "allow_everything": true}`)}, err: refusal.InvalidPolicy},
		{name: "misspelt field", env: map[string]string{harness.EnvConfig: file("typo.json", `{"writelater": []}`)}, err: refusal.InvalidPolicy},
		{name: "not JSON", env: map[string]string{harness.EnvConfig: file("bad.json", `harness_state = [".h"]`)}, err: refusal.InvalidPolicy},
		{name: "wrong type", env: map[string]string{harness.EnvConfig: file("type.json", `{"state_dir": 1}`)}, err: refusal.InvalidPolicy},
		{name: "trailing data", env: map[string]string{harness.EnvConfig: file("trailing.json", `{"state_dir": "/f/state"} {"write_later": []}`)}, err: refusal.InvalidPolicy},
		{name: "too large", env: map[string]string{harness.EnvConfig: file("large.json", `{"write_later": ["`+strings.Repeat("a", 70<<10)+`"]}`)}, err: refusal.InvalidPolicy},
		{name: "no harness state", env: map[string]string{harness.EnvConfig: file("nostate.json", `{"harness_state": []}`)}, err: refusal.InvalidPolicy},
		{name: "relative state dir in the file", env: map[string]string{harness.EnvConfig: file("relstate.json", `{"state_dir": "state"}`)}, err: refusal.InvalidPolicy},
		{name: "bad write-later in the file", env: map[string]string{harness.EnvConfig: file("badwl.json", `{"write_later": ["../x"]}`)}, err: refusal.InvalidPolicy},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg, path, err := harness.FromEnv(func(k string) string { return c.env[k] })
			if c.err != nil {
				if !errors.Is(err, c.err) {
					t.Fatalf("FromEnv: %v, want %s", err, c.err.Name())
				}
				return
			}
			if err != nil {
				t.Fatalf("FromEnv: %v", err)
			}
			want := c.env[harness.EnvConfig]
			if path != want || cfg.File() != want {
				t.Errorf("FromEnv returned the file %q (File() %q), want %q", path, cfg.File(), want)
			}
			state, writeLater := c.state, c.writeLater
			if state == nil {
				state = defaultState
			}
			if writeLater == nil {
				writeLater = defaultWriteLater
			}
			if got := cfg.State(); !slices.Equal(got, state) {
				t.Errorf("State() = %q, want %q", got, state)
			}
			if got := cfg.WriteLater(); !slices.Equal(got, writeLater) {
				t.Errorf("WriteLater() = %q, want %q", got, writeLater)
			}
			if cfg.StateDir() != c.stateDir || cfg.CacheDir() != c.cacheDir {
				t.Errorf("StateDir %q CacheDir %q, want %q %q", cfg.StateDir(), cfg.CacheDir(), c.stateDir, c.cacheDir)
			}
		})
	}
}

// linked gives the file p a second name beside it, and returns p.
func linked(t *testing.T, p string) string {
	t.Helper()
	if err := os.Link(p, p+".other"); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestCheckWorkspace(t *testing.T) {
	top, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"state/runs", "cache/wasm", "state2", "ws", "other/made"} {
		os.MkdirAll(filepath.Join(top, d), 0o755)
	}
	// link/ stands for the workspace: a state directory named through it
	// is inside the workspace.
	if err := os.Symlink(filepath.Join(top, "other"), filepath.Join(top, "link")); err != nil {
		t.Fatal(err)
	}
	cfg := harness.Default().WithStateDir(filepath.Join(top, "state")).WithCacheDir(filepath.Join(top, "cache")).WithHome(filepath.Join(top, "home"))
	cases := []struct {
		name string
		cfg  harness.Config
		ws   string
		ok   bool
	}{
		{name: "the file system root", cfg: cfg, ws: "/"},
		{name: "the state dir", cfg: cfg, ws: filepath.Join(top, "state")},
		{name: "inside the state dir", cfg: cfg, ws: filepath.Join(top, "state", "runs")},
		{name: "the cache dir", cfg: cfg, ws: filepath.Join(top, "cache")},
		{name: "inside the cache dir", cfg: cfg, ws: filepath.Join(top, "cache", "wasm")},
		{name: "containing both", cfg: cfg, ws: top},
		{name: "containing the state dir far down", cfg: cfg, ws: filepath.Dir(top)},
		{name: "state dir named through a symlink into the workspace", cfg: cfg.WithStateDir(filepath.Join(top, "link", "made")), ws: filepath.Join(top, "other")},
		// Not made yet: the first run would make it, through the
		// symlink, inside the workspace.
		{name: "absent state dir named through a symlink into the workspace", cfg: cfg.WithStateDir(filepath.Join(top, "link", "absent", "state")), ws: filepath.Join(top, "other")},
		{name: "cache dir that is a symlink to the workspace", cfg: cfg.WithCacheDir(filepath.Join(top, "link")), ws: filepath.Join(top, "other")},
		{name: "a sibling sharing the state dir's prefix", cfg: cfg, ws: filepath.Join(top, "state2"), ok: true},
		{name: "a project beside them", cfg: cfg, ws: filepath.Join(top, "ws"), ok: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := c.cfg.CheckWorkspace(c.ws)
			if c.ok {
				if err != nil {
					t.Fatalf("CheckWorkspace(%s): %v", c.ws, err)
				}
				if _, err := c.cfg.Protect(c.ws); err != nil {
					t.Fatalf("Protect(%s): %v", c.ws, err)
				}
				return
			}
			if !errors.Is(err, refusal.WorkspaceRefused) {
				t.Fatalf("CheckWorkspace(%s): %v, want refusal.WorkspaceRefused", c.ws, err)
			}
			if _, err := c.cfg.Protect(c.ws); !errors.Is(err, refusal.WorkspaceRefused) {
				t.Errorf("Protect(%s): %v, want refusal.WorkspaceRefused", c.ws, err)
			}
		})
	}
}
