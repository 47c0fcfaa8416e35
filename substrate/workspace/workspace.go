package workspace

import (
	"fmt"
	"strings"

	"github.com/cordon-run/cordon/harness"
	"github.com/cordon-run/cordon/refusal"
)

// DefaultMaxFileSize bounds a single read or write unless [WithMaxFileSize]
// says otherwise.
const DefaultMaxFileSize = 16 << 20

// DefaultMaxEntries bounds a directory listing.
const DefaultMaxEntries = 10000

// Sentinels for [errors.Is]. The policy refusals (outside the workspace,
// harness state, a symlink loop) are decisions of the boundary; the rest are
// ordinary failures.
var (
	ErrOutsideWorkspace = refusal.OutsideWorkspace
	ErrHarnessState     = refusal.HarnessState
	ErrWriteLater       = refusal.WriteLater
	ErrSymlinkLoop      = refusal.SymlinkLoop
	ErrNotFound         = refusal.NotFound
	ErrNotRegular       = refusal.NotRegular
	ErrIsDir            = refusal.IsDirectory
	ErrNotDir           = refusal.NotDirectory
	ErrTooLarge         = refusal.TooLarge
	ErrNoMatch          = refusal.NoMatch
	ErrNotUnique        = refusal.NotUnique
	ErrInvalid          = refusal.Invalid
	ErrExist            = refusal.Exists
	// ErrHardLink refuses to open a file for writing when it has more
	// than one hard link: another name may lie outside the workspace or in
	// harness state, and a write through this one would change it too.
	ErrHardLink = refusal.HardLink
)

// PathError is the error of every [Workspace] operation.
type PathError struct {
	Op   string // "read", "write", "list", "stat", "edit"
	Path string // the path as the caller gave it
	Root string // the canonical workspace: the boundary
	Err  error  // one of the package's sentinels
	// Cause is the underlying error (an errno), or nil.
	Cause  error
	detail string
	// protected is the protected path the refusal is about.
	protected string
}

func (e *PathError) Error() string {
	switch e.Err {
	case ErrOutsideWorkspace:
		return fmt.Sprintf("refusing to %s %q — resolved paths are confined to %s", e.Op, e.Path, e.Root)
	case ErrHarnessState:
		return fmt.Sprintf("refusing to %s %q — %s is harness state, outside the workspace grant of %s", e.Op, e.Path, e.detail, e.Root)
	case ErrWriteLater:
		return fmt.Sprintf("refusing to %s %q — %s is a write-later path of %s (%s); it is read-only to every tool", e.Op, e.Path, e.protected, e.Root, e.detail)
	case ErrHardLink:
		return fmt.Sprintf("refusing to %s %q for writing — it has %s, and writes in %s never go through a hard link", e.Op, e.Path, e.detail, e.Root)
	case ErrSymlinkLoop:
		return fmt.Sprintf("refusing to %s %q — more than %d symlinks on the way; paths are resolved within %s", e.Op, e.Path, maxSymlinks, e.Root)
	}
	msg := fmt.Sprintf("cannot %s %q: %s", e.Op, e.Path, e.Err)
	if e.detail != "" {
		msg += " (" + e.detail + ")"
	}
	return msg
}

// Unwrap returns the sentinel and the cause.
func (e *PathError) Unwrap() []error {
	if e.Cause == nil {
		return []error{e.Err}
	}
	return []error{e.Err, e.Cause}
}

// Config holds a workspace's settings. Build one with [Option] values
// passed to [Open].
type Config struct {
	harness     harness.Config
	state       []string
	noState     bool
	maxFileSize int64
	maxEntries  int
	sync        bool
	allowLater  func(canon string) bool
}

// Option changes a [Config].
type Option func(*Config)

// WithHarness sets the harness configuration whose protected set the
// workspace enforces (default [harness.Default]): its harness state is
// refused to every operation, its write-later paths to every change. It
// is for the program that embeds cordon, never for a tool.
func WithHarness(h harness.Config) Option { return func(c *Config) { c.harness = h } }

// WithoutHarnessState opens a directory that is not a workspace's root
// (a folder below it, or outside it) for reading: no top-level name is
// harness state there. The directory is still refused when it holds
// cordon's trusted state.
func WithoutHarnessState() Option { return func(c *Config) { c.noState = true } }

// WithWriteLaterAllowed lets changes through to the write-later paths for
// which allow (given a canonical workspace-relative path) says yes: for a
// person who named those paths explicitly (cordon root apply), never for
// a tool. Harness state stays refused, and so do the directories that
// must stay in place.
func WithWriteLaterAllowed(allow func(canon string) bool) Option {
	return func(c *Config) { c.allowLater = allow }
}

// WithMaxFileSize bounds reads and writes, in bytes.
func WithMaxFileSize(n int64) Option { return func(c *Config) { c.maxFileSize = n } }

// WithMaxEntries bounds the number of entries a listing returns.
func WithMaxEntries(n int) Option { return func(c *Config) { c.maxEntries = n } }

// WithSync sets whether writes fsync the temporary file before renaming it
// into place (default true). Without it a crash can leave an empty file.
func WithSync(sync bool) Option { return func(c *Config) { c.sync = sync } }

func newConfig(opts []Option) (Config, error) {
	c := Config{
		harness:     harness.Default(),
		maxFileSize: DefaultMaxFileSize,
		maxEntries:  DefaultMaxEntries,
		sync:        true,
	}
	for _, o := range opts {
		o(&c)
	}
	if err := c.harness.Validate(); err != nil {
		return c, err
	}
	if !c.noState {
		c.state = c.harness.State()
	}
	if c.maxFileSize <= 0 {
		return c, fmt.Errorf("workspace: max file size %d is not positive", c.maxFileSize)
	}
	if c.maxEntries <= 0 {
		return c, fmt.Errorf("workspace: max entries %d is not positive", c.maxEntries)
	}
	return c, nil
}

// HarnessState returns the protected top-level names.
func (w *Workspace) HarnessState() []string { return append([]string(nil), w.cfg.state...) }

// Harness returns the harness configuration the workspace enforces.
func (w *Workspace) Harness() harness.Config { return w.cfg.harness }

// Root returns the canonical path of the workspace.
func (w *Workspace) Root() string { return w.root }

// String describes the boundary, for messages and evidence.
func (w *Workspace) String() string {
	return fmt.Sprintf("workspace %s (harness state: %s)", w.root, strings.Join(w.cfg.state, ", "))
}

// isHarness reports which harness name the first component of the
// workspace-relative path rel names, compared without regard to case so that
// a case-insensitive file system cannot be used to reach it.
func (w *Workspace) isHarness(rel string) (string, bool) {
	first, _, _ := strings.Cut(rel, "/")
	for _, h := range w.cfg.state {
		if strings.EqualFold(first, h) {
			return h, true
		}
	}
	return "", false
}
