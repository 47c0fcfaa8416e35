// Package harness is the configuration that belongs to whoever embeds
// cordon, never to a tool: the harness's own state inside a workspace, the
// write-later paths that run or configure something after a run, outside
// any sandbox, and the per-user directories where cordon keeps its trusted
// state outside every workspace.
//
// # One source
//
// A [Config] is a value: [Default] returns a fresh copy each time, and the
// With and Add methods return modified copies. There is no mutable global.
// The embedding program builds one (a library option); the CLI reads one
// from its environment with [FromEnv] (CORDON_CONFIG names a JSON file
// outside every workspace). A per-command addition ([Config.AddState],
// [Config.AddWriteLater]) adds names and never removes the defaults, and a
// tool declaration never reaches a Config at all.
//
// # One protected-path policy
//
// [Config.Protect] looks at one workspace and returns its [Protected] set:
// the harness state directories, and every write-later path — the static
// list of the Config, and what git would read or run there later (the git
// directory, the files its configuration includes, the hooks directory it
// names, the programs its configuration runs). The file guard, the wasm
// substrate and bwrap all enforce that one set: harness state is hidden
// from file tools and wasm tools and read-only to native commands;
// write-later paths are read-only everywhere, present or absent.
//
// # Limitations
//
//   - Names are compared without regard to case by the file guard (a
//     case-insensitive file system cannot be used to reach them); bwrap
//     binds the spelling the set names.
//   - A repository that a tool creates in a subdirectory is not protected:
//     its configuration runs when someone runs git there.
//   - Files that git reads as data (the index, refs, objects,
//     .gitattributes, .gitmodules) stay writable; they name no program of
//     their own.
package harness

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"

	"github.com/cordon-run/cordon/internal/userdir"
	"github.com/cordon-run/cordon/refusal"
)

// defaultState lists the harness directories of a workspace.
var defaultState = []string{".efferent", ".foundry"}

// defaultWriteLater lists the paths, relative to the workspace, that run or
// configure something after a run, outside the sandbox. A trailing slash
// marks a directory. The git directory's own paths are found by
// [Config.Protect] (wherever the git directory is); these are the editor,
// agent and shell configurations that run commands when the project is
// opened, or when a shell starts in it. Each costs every sandboxed run a
// bind mount (and, while absent, a placeholder): a harness that uses more
// tools adds theirs with [Config.AddWriteLater].
var defaultWriteLater = []string{
	// Editors and agents: tasks that run when a folder opens, MCP servers,
	// hooks, interpreters and terminal profiles chosen by settings.
	".vscode/", ".idea/", ".zed/", ".cursor/", ".devcontainer/",
	".claude/", ".mcp.json", ".gemini/", ".codex/",
	// direnv runs .envrc when a shell enters the folder.
	".envrc",
}

// homeWriteLater is added when the workspace is a home directory: what a
// shell, ssh, git and the user's PATH read from one.
var homeWriteLater = []string{
	".bashrc", ".bash_profile", ".bash_login", ".bash_logout", ".profile", ".zshrc", ".zshenv", ".zprofile", ".zlogin", ".zlogout",
	".gitconfig", ".ssh/", ".config/", ".local/bin/", "bin/",
}

// Environment variables of the CLI's configuration ([FromEnv]).
const (
	EnvConfig   = "CORDON_CONFIG"    // a JSON file: {"harness_state", "write_later", "state_dir", "cache_dir", "roots_dir"}
	EnvStateDir = "CORDON_STATE_DIR" // the per-user state directory (key store, run locks)
	EnvCacheDir = "CORDON_CACHE_DIR" // the per-user cache directory (compiled code)
	EnvRootsDir = "CORDON_ROOTS_DIR" // where cordon makes disposable roots
)

// Config is the harness's configuration. The zero Config is not valid:
// start from [Default].
type Config struct {
	state      []string
	writeLater []string
	stateDir   string
	cacheDir   string
	rootsDir   string
	file       string // the configuration file it was read from (FromEnv), or ""
	home       string // the caller's home, for ~ in git's configuration
	set        bool
	// resolved holds stateDir and cacheDir with their symlinks resolved,
	// found once per pair of directories (a copy with other directories
	// gets its own).
	resolved *resolvedPair
}

type resolvedPair struct {
	once         sync.Once
	state, cache string
}

// resolvedDirs returns the state and cache directories with the symlinks
// of their existing prefixes resolved: where they are, or will be.
func (c Config) resolvedDirs() (string, string) {
	r := c.resolved
	if r == nil {
		r = &resolvedPair{}
	}
	r.once.Do(func() { r.state, r.cache = resolveExisting(c.stateDir), resolveExisting(c.cacheDir) })
	return r.state, r.cache
}

// Default returns the default configuration: harness state .efferent and
// .foundry, the default write-later set, and the per-user directories
// under $XDG_STATE_HOME and $XDG_CACHE_HOME (or ~/.local/state and
// ~/.cache).
func Default() Config {
	home, _ := os.UserHomeDir()
	return Config{
		state:      slices.Clone(defaultState),
		writeLater: slices.Clone(defaultWriteLater),
		stateDir:   xdgDir("XDG_STATE_HOME", home, ".local/state"),
		cacheDir:   xdgDir("XDG_CACHE_HOME", home, ".cache"),
		rootsDir:   filepath.Join(xdgDir("XDG_DATA_HOME", home, ".local/share"), "roots"),
		home:       home,
		set:        true,
		resolved:   &resolvedPair{},
	}
}

func xdgDir(env, home, fallback string) string {
	if d := os.Getenv(env); filepath.IsAbs(d) {
		return filepath.Join(d, "cordon")
	}
	if home == "" || !filepath.IsAbs(home) {
		return ""
	}
	return filepath.Join(home, fallback, "cordon")
}

// WithState returns a copy whose harness directories are names (top-level
// directory names of the workspace), replacing the list: for the embedding
// program only.
func (c Config) WithState(names ...string) Config { c.state = slices.Clone(names); return c }

// AddState returns a copy that also protects names as harness state.
func (c Config) AddState(names ...string) Config {
	c.state = appendNew(c.state, names)
	return c
}

// WithWriteLater returns a copy whose static write-later paths are paths
// (workspace-relative, a trailing slash for a directory), replacing the
// default list. What git reads is protected whatever this list holds.
func (c Config) WithWriteLater(paths ...string) Config {
	c.writeLater = slices.Clone(paths)
	return c
}

// AddWriteLater returns a copy that also protects paths.
func (c Config) AddWriteLater(paths ...string) Config {
	c.writeLater = appendNew(c.writeLater, paths)
	return c
}

// WithStateDir returns a copy whose per-user state directory is dir.
func (c Config) WithStateDir(dir string) Config {
	c.stateDir, c.resolved = dir, &resolvedPair{}
	return c
}

// WithCacheDir returns a copy whose per-user cache directory is dir.
func (c Config) WithCacheDir(dir string) Config {
	c.cacheDir, c.resolved = dir, &resolvedPair{}
	return c
}

// WithRootsDir returns a copy whose disposable roots are made in dir.
func (c Config) WithRootsDir(dir string) Config { c.rootsDir = dir; return c }

// WithHome returns a copy that resolves "~" in git's configuration
// against home (the caller's home directory by default).
func (c Config) WithHome(home string) Config { c.home = home; return c }

func appendNew(list, add []string) []string {
	out := slices.Clone(list)
	for _, a := range add {
		if !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	return out
}

// IsZero reports whether c is the zero Config, which is not a
// configuration: callers substitute [Default].
func (c Config) IsZero() bool { return !c.set }

// State returns the harness directory names.
func (c Config) State() []string { return slices.Clone(c.state) }

// WriteLater returns the static write-later paths.
func (c Config) WriteLater() []string { return slices.Clone(c.writeLater) }

// RegistryDir returns the harness directory that holds the tool registry:
// the first harness directory.
func (c Config) RegistryDir() string {
	if len(c.state) == 0 {
		return ""
	}
	return c.state[0]
}

// EvidenceDir returns the workspace-relative directory of the evidence
// log: "evidence" in the second harness directory (.foundry by default),
// or in the first when there is one only; "" when there is none.
func (c Config) EvidenceDir() string {
	switch len(c.state) {
	case 0:
		return ""
	case 1:
		return c.state[0] + "/evidence"
	}
	return c.state[1] + "/evidence"
}

// StateDir returns the per-user state directory: the key store and the
// run locks live there.
func (c Config) StateDir() string { return c.stateDir }

// File is the configuration file c was read from ([FromEnv]), or "":
// what cordon reads at its next start, which no tool may rewrite.
func (c Config) File() string { return c.file }

// CacheDir returns the per-user cache directory: compiled code lives
// there.
func (c Config) CacheDir() string { return c.cacheDir }

// RootsDir returns the directory disposable roots are made in: cordon's
// own, outside every origin ($XDG_DATA_HOME/cordon/roots, or
// ~/.local/share/cordon/roots; inside the home directory, which sandboxes
// do not see). The records that make them roots are in the state
// directory.
func (c Config) RootsDir() string { return c.rootsDir }

// Home returns the home directory "~" stands for in git's configuration.
func (c Config) Home() string { return c.home }

// Validate checks the configuration.
func (c Config) Validate() error {
	if !c.set {
		return refusal.Errorf(refusal.InvalidPolicy, "harness: the configuration is not set; start from harness.Default()")
	}
	if len(c.state) == 0 {
		return refusal.Errorf(refusal.InvalidPolicy, "harness: at least one harness state directory is needed (the tool registry lives in the first)")
	}
	for _, h := range c.state {
		if h == "" || h == "." || h == ".." || strings.ContainsAny(h, "/\x00") {
			return refusal.Errorf(refusal.InvalidPolicy, "harness: harness state name %q is not a single path component", h)
		}
	}
	for _, w := range c.writeLater {
		if _, err := cleanRel(w); err != nil {
			return refusal.Errorf(refusal.InvalidPolicy, "harness: write-later path %q: %v", w, err)
		}
	}
	for _, d := range []struct{ what, dir string }{{"state", c.stateDir}, {"cache", c.cacheDir}, {"roots", c.rootsDir}} {
		if d.dir == "" || d.dir == "roots" {
			return refusal.Errorf(refusal.InvalidPolicy, "harness: no %s directory: set %s or HOME", d.what, map[string]string{"state": EnvStateDir, "cache": EnvCacheDir, "roots": EnvRootsDir}[d.what])
		}
		if !filepath.IsAbs(d.dir) || filepath.Clean(d.dir) != d.dir || d.dir == "/" {
			return refusal.Errorf(refusal.InvalidPolicy, "harness: %s directory %q is not an absolute, clean path below /", d.what, d.dir)
		}
	}
	return nil
}

// cleanRel checks a workspace-relative path (a trailing slash marks a
// directory) and returns it clean, without the slash.
func cleanRel(p string) (string, error) {
	c := strings.TrimSuffix(p, "/")
	switch {
	case c == "" || c == "." || c == "..":
		return "", errors.New("not a path inside the workspace")
	case strings.ContainsRune(c, 0):
		return "", errors.New("contains NUL")
	case path.IsAbs(c) || path.Clean(c) != c || strings.HasPrefix(c, "../"):
		return "", errors.New("not a clean relative path inside the workspace")
	}
	return c, nil
}

// String describes the configuration for messages and evidence.
func (c Config) String() string {
	return fmt.Sprintf("harness state %s; write-later %s; state %s; cache %s",
		strings.Join(c.state, ","), strings.Join(c.writeLater, ","), c.stateDir, c.cacheDir)
}

// fileConfig is the JSON of a CORDON_CONFIG file.
type fileConfig struct {
	HarnessState []string `json:"harness_state"`
	WriteLater   []string `json:"write_later"`
	StateDir     string   `json:"state_dir"`
	CacheDir     string   `json:"cache_dir"`
	RootsDir     string   `json:"roots_dir"`
}

// maxConfigFile bounds a configuration file.
const maxConfigFile = 64 << 10

// FromEnv returns the configuration of the CLI: [Default], changed by the
// JSON file CORDON_CONFIG names (fields harness_state and write_later
// replace the lists; state_dir, cache_dir and roots_dir set the
// directories), then by CORDON_STATE_DIR, CORDON_CACHE_DIR and
// CORDON_ROOTS_DIR. getenv is os.Getenv in the CLI. The file's path is
// returned with the Config, so that the caller can refuse a workspace that
// contains it.
func FromEnv(getenv func(string) string) (Config, string, error) {
	c := Default()
	file := getenv(EnvConfig)
	if file != "" {
		if !filepath.IsAbs(file) {
			return c, "", refusal.Errorf(refusal.InvalidPolicy, "%s=%q is not an absolute path", EnvConfig, file)
		}
		data, links, err := readBounded(file, maxConfigFile)
		if err != nil {
			return c, "", refusal.Errorf(refusal.InvalidPolicy, "cannot read the configuration %s: %w", file, err)
		}
		if links > 1 && userdir.Writable(file) {
			// cordon guards the file's names and where they lead, not a
			// hard link of it (one in a workspace); one nothing run here
			// can write (a read-only store's) is no matter.
			return c, "", refusal.Errorf(refusal.InvalidPolicy, "the configuration %s has %d links: a tool could rewrite it through another name, which cordon does not guard; keep one name for it (a copy outside every workspace)", file, links)
		}
		dec := json.NewDecoder(strings.NewReader(string(data)))
		dec.DisallowUnknownFields()
		var fc fileConfig
		if err := dec.Decode(&fc); err != nil {
			return c, "", refusal.Errorf(refusal.InvalidPolicy, "the configuration %s: %v", file, err)
		}
		if dec.More() {
			return c, "", refusal.Errorf(refusal.InvalidPolicy, "the configuration %s holds more than one JSON object", file)
		}
		if fc.HarnessState != nil {
			c = c.WithState(fc.HarnessState...)
		}
		if fc.WriteLater != nil {
			c = c.WithWriteLater(fc.WriteLater...)
		}
		if fc.StateDir != "" {
			c = c.WithStateDir(fc.StateDir)
		}
		if fc.CacheDir != "" {
			c = c.WithCacheDir(fc.CacheDir)
		}
		if fc.RootsDir != "" {
			c = c.WithRootsDir(fc.RootsDir)
		}
	}
	c.file = file
	if d := getenv(EnvStateDir); d != "" {
		c = c.WithStateDir(d)
	}
	if d := getenv(EnvCacheDir); d != "" {
		c = c.WithCacheDir(d)
	}
	if d := getenv(EnvRootsDir); d != "" {
		c = c.WithRootsDir(d)
	}
	return c, file, c.Validate()
}

// readBounded reads the regular file name, at most max bytes, and says
// how many links (names) it has.
func readBounded(name string, max int64) ([]byte, uint64, error) {
	f, err := os.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0) // a FIFO does not block the open
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, 0, err
	}
	if !st.Mode().IsRegular() {
		return nil, 0, errors.New("not a regular file")
	}
	links := uint64(1)
	if sys, ok := st.Sys().(*syscall.Stat_t); ok {
		links = uint64(sys.Nlink)
	}
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, 0, err
	}
	if int64(len(data)) > max {
		return nil, 0, fmt.Errorf("larger than %d bytes", max)
	}
	return data, links, nil
}
