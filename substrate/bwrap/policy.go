package bwrap

import (
	"fmt"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/cordon-run/cordon/capabilities"
	"github.com/cordon-run/cordon/substrate"
)

// Access is what a sandboxed command may do to the workspace.
type Access int

const (
	// AccessNone hides the workspace behind an empty tmpfs.
	AccessNone Access = iota
	// AccessRead binds the workspace read-only.
	AccessRead
	// AccessWrite binds the workspace read-write: the one writable tree,
	// with harness state and the write-later paths read-only on top.
	AccessWrite
)

func (a Access) String() string {
	switch a {
	case AccessNone:
		return "none"
	case AccessRead:
		return "read"
	case AccessWrite:
		return "write"
	}
	return fmt.Sprintf("Access(%d)", int(a))
}

// Network is the network a sandboxed command sees.
type Network int

const (
	// NetNone gives the command a network namespace of its own with only a
	// loopback interface: nothing outside the sandbox is reachable, not
	// even the host's 127.0.0.1.
	NetNone Network = iota
	// NetHost keeps the host's network namespace: the network is open.
	NetHost
)

func (n Network) String() string {
	switch n {
	case NetNone:
		return "none"
	case NetHost:
		return "host"
	}
	return fmt.Sprintf("Network(%d)", int(n))
}

// ParseNetwork reads "none" or "host".
func ParseNetwork(s string) (Network, error) {
	switch s {
	case "none":
		return NetNone, nil
	case "host":
		return NetHost, nil
	}
	return 0, fmt.Errorf("unknown network %q: want none or host", s)
}

// DefaultWriteLater lists the workspace paths that run later outside the
// sandbox: what git executes or obeys when the user runs it afterwards. The
// repository's hooks and configuration; "commondir", which moves git to
// another directory's configuration and hooks (a tool could otherwise plant
// a whole git directory whose core.fsmonitor runs on the next "git
// status"); and the git directories of submodules and linked worktrees,
// each with its own hooks and configuration. A trailing slash marks a
// directory.
var DefaultWriteLater = []string{".git/hooks/", ".git/config", ".git/commondir", ".git/modules/", ".git/worktrees/"}

// placeholder is what an absent write-later file is created with before the
// run, as its read-only mount point: content that means to git what the
// absence meant ("commondir" naming the git directory itself), so that git
// inside and outside the sandbox behaves as before.
var placeholder = map[string]string{".git/commondir": ".\n"}

// DefaultHarnessState lists the harness directories protected by default;
// it matches the workspace guard's list.
var DefaultHarnessState = []string{".efferent", ".foundry"}

// Home is the HOME of a sandboxed command: an empty directory on the
// command's own /tmp.
const Home = "/tmp/home"

// Policy describes one sandbox: the workspace and what the command may do
// to it, the network, the environment names it receives from the caller and
// extra read-only binds. Build one with [NewPolicy] and the With methods,
// which return modified copies; a Policy is checked when it is used.
type Policy struct {
	workspace  string
	access     Access
	network    Network
	harness    []string
	writeLater []string
	env        []string
	readOnly   []string
}

// NewPolicy returns the policy of cordon's shell for the workspace, which
// must be an absolute, canonical path: the workspace writable with harness
// state and the write-later paths read-only, no network, and no
// environment beyond the allow-list.
func NewPolicy(workspace string) Policy {
	return Policy{
		workspace:  workspace,
		access:     AccessWrite,
		network:    NetNone,
		harness:    slices.Clone(DefaultHarnessState),
		writeLater: slices.Clone(DefaultWriteLater),
	}
}

// WithAccess returns a copy of p with the workspace access a.
func (p Policy) WithAccess(a Access) Policy { p.access = a; return p }

// WithNetwork returns a copy of p with the network n.
func (p Policy) WithNetwork(n Network) Policy { p.network = n; return p }

// WithHarnessState returns a copy of p whose harness directories are
// names, top-level directory names of the workspace. It replaces the
// default list; it is for the program that embeds cordon, never for a tool.
func (p Policy) WithHarnessState(names ...string) Policy {
	p.harness = slices.Clone(names)
	return p
}

// WithWriteLater returns a copy of p whose write-later paths are paths,
// relative to the workspace; a trailing slash marks a directory (an absent
// one is masked by an empty directory, an absent file by an empty file).
// It replaces [DefaultWriteLater].
func (p Policy) WithWriteLater(paths ...string) Policy {
	p.writeLater = slices.Clone(paths)
	return p
}

// WithEnv returns a copy of p that also passes the caller's values of the
// variables names into the sandbox (a name the caller has not set is left
// out). Names that change how programs load or run are refused when the
// policy is used; see [CheckEnvName].
func (p Policy) WithEnv(names ...string) Policy {
	p.env = append(slices.Clone(p.env), names...)
	return p
}

// WithReadOnly returns a copy of p that also binds the absolute host paths
// read-only at the same place inside the sandbox, on top of every other
// mount: a tool's own files, for instance, even inside harness state or a
// hidden workspace.
func (p Policy) WithReadOnly(paths ...string) Policy {
	p.readOnly = append(slices.Clone(p.readOnly), paths...)
	return p
}

// Workspace returns the workspace path.
func (p Policy) Workspace() string { return p.workspace }

// Access returns the workspace access.
func (p Policy) Access() Access { return p.access }

// Network returns the network.
func (p Policy) Network() Network { return p.network }

// Env returns the granted environment names.
func (p Policy) Env() []string { return slices.Clone(p.env) }

// HarnessState returns the harness directory names.
func (p Policy) HarnessState() []string { return slices.Clone(p.harness) }

// WriteLater returns the write-later paths.
func (p Policy) WriteLater() []string { return slices.Clone(p.writeLater) }

// ReadOnly returns the extra read-only binds.
func (p Policy) ReadOnly() []string { return slices.Clone(p.readOnly) }

// String describes the policy for messages and evidence, for example
// "bwrap: workspace /w (write; read-only: .efferent, .foundry, .git/hooks/,
// .git/config), network none, env PATH HOME LANG TERM".
func (p Policy) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "bwrap: workspace %s (%s", p.workspace, p.access)
	if p.access == AccessWrite {
		if ro := append(slices.Clone(p.harness), p.writeLater...); len(ro) > 0 {
			fmt.Fprintf(&b, "; read-only: %s", strings.Join(ro, ", "))
		}
	}
	fmt.Fprintf(&b, "), network %s, env %s", p.network, strings.Join(append([]string{"PATH", "HOME", "LANG", "TERM"}, p.env...), " "))
	if len(p.readOnly) > 0 {
		fmt.Fprintf(&b, ", read-only binds %s", strings.Join(p.readOnly, " "))
	}
	return b.String()
}

// Mechanisms lists the named mechanisms the policy applies, in the order
// of the mount table.
func (p Policy) Mechanisms() []substrate.Mechanism {
	m := []substrate.Mechanism{UnshareUser, CapDrop, UnsharePID, UnshareIPC, NewSession, DieWithParent, NoInheritedFDs,
		ReadOnlyRoot, TmpfsTmp, EmptyHome, HideHomes, HideServiceSockets}
	switch p.access {
	case AccessNone:
		m = append(m, HideWorkspace)
	case AccessRead:
		m = append(m, ReadOnlyWorkspace)
	case AccessWrite:
		m = append(m, BindWorkspace)
		if len(p.harness) > 0 {
			m = append(m, ReadOnlyHarness)
		}
		if len(p.writeLater) > 0 {
			m = append(m, PinParents, ReadOnlyWriteLater)
		}
	}
	if len(p.readOnly) > 0 {
		m = append(m, ReadOnlyBinds)
	}
	if p.network == NetHost {
		m = append(m, ShareNet)
	} else {
		m = append(m, UnshareNet)
	}
	return append(m, ClearEnv)
}

// Validate checks the policy without touching the file system.
func (p Policy) Validate() error {
	ws := p.workspace
	if !filepath.IsAbs(ws) || filepath.Clean(ws) != ws {
		return invalid("workspace %q is not an absolute, clean path", ws)
	}
	if ws == "/" || within("/tmp", ws) {
		return invalid("workspace %s contains /tmp, which the sandbox replaces with a fresh tmpfs", ws)
	}
	for _, sys := range []string{"/proc", "/dev", Home} {
		if within(ws, sys) || within(sys, ws) {
			return invalid("workspace %s overlaps %s, which the sandbox mounts itself", ws, sys)
		}
	}
	switch p.access {
	case AccessNone, AccessRead, AccessWrite:
	default:
		return invalid("unknown workspace access %d", int(p.access))
	}
	switch p.network {
	case NetNone, NetHost:
	default:
		return invalid("unknown network %d", int(p.network))
	}
	for _, h := range p.harness {
		if h == "" || h == "." || h == ".." || strings.ContainsRune(h, '/') {
			return invalid("harness state name %q is not a single path component", h)
		}
	}
	for _, w := range p.writeLater {
		c := strings.TrimSuffix(w, "/")
		if c == "" || path.IsAbs(c) || path.Clean(c) != c || c == "." || c == ".." || strings.HasPrefix(c, "../") {
			return invalid("write-later path %q is not a clean path inside the workspace", w)
		}
	}
	for _, name := range p.env {
		if err := CheckEnvName(name); err != nil {
			return err
		}
	}
	for _, r := range p.readOnly {
		if !filepath.IsAbs(r) || filepath.Clean(r) != r || r == "/" {
			return invalid("read-only bind %q is not an absolute, clean path below /", r)
		}
	}
	return nil
}

// within reports whether p is dir or inside it.
func within(p, dir string) bool {
	return p == dir || dir == "/" || strings.HasPrefix(p, dir+"/")
}

// CheckEnvName returns an error matching [ErrEnvRefused] when name is not a
// valid variable name or is one of the variables that change how programs
// load or run (LD_*, DYLD_*, BASH_ENV, ENV, BASH_FUNC_*, ...) or that the
// sandbox sets itself (PATH, HOME).
func CheckEnvName(name string) error {
	if !validEnvName(name) {
		return &Error{Op: "pass", Path: name, Err: ErrEnvRefused, detail: "not a valid environment variable name"}
	}
	if why := capabilities.EnvHazard(name); why != "" {
		return &Error{Op: "pass", Path: name, Err: ErrEnvRefused, detail: why}
	}
	return nil
}

func validEnvName(name string) bool {
	if name == "" {
		return false
	}
	for i, c := range name {
		switch {
		case c == '_', c >= 'A' && c <= 'Z', c >= 'a' && c <= 'z':
		case c >= '0' && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

func invalid(format string, args ...any) error {
	return &Error{Op: "configure", Err: ErrInvalidPolicy, detail: fmt.Sprintf(format, args...)}
}
