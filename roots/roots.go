package roots

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cordon-run/cordon/harness"
	"github.com/cordon-run/cordon/internal/userdir"
	"github.com/cordon-run/cordon/refusal"
)

// Roots makes and keeps the disposable roots of one harness
// configuration: trees in its roots directory, records in its state
// directory.
type Roots struct {
	h     harness.Config
	store *store
}

// Open opens the roots of h.
func Open(h harness.Config) (*Roots, error) {
	if err := h.Validate(); err != nil {
		return nil, err
	}
	s, err := openStore(h)
	if err != nil {
		return nil, err
	}
	return &Roots{h: h, store: s}, nil
}

// Root is a root cordon made, its record authenticated.
type Root struct {
	Record
	// Missing: the root's directory is gone (removed by hand).
	Missing bool `json:"missing,omitempty"`
}

// CreateOptions says how to make a root.
type CreateOptions struct {
	From string // the origin directory
	Mode string // ModeCopy (default) or ModeWorktree
	// HarnessState copies the origin's harness state too (the tool
	// registry, the evidence log): for a harness that asks for it. By
	// default a root starts without, and its evidence is its own.
	HarnessState bool
}

// Create makes a root from the origin: a directory of its own in the roots
// directory, then the record that makes it a root. A failure half-way
// removes what was made.
func (rs *Roots) Create(ctx context.Context, o CreateOptions) (*Root, error) {
	if o.Mode == "" {
		o.Mode = ModeCopy
	}
	if o.Mode != ModeCopy && o.Mode != ModeWorktree {
		return nil, refusal.Errorf(refusal.UsageError, "unknown root mode %q: want %s or %s", o.Mode, ModeCopy, ModeWorktree)
	}
	origin, err := rs.originDir(o.From)
	if err != nil {
		return nil, err
	}
	fd, err := userdir.Ensure(rs.h.RootsDir())
	if err != nil {
		return nil, err
	}
	unix.Close(fd)
	parent := rs.h.RootsDir()
	r := &Root{Record: Record{Version: recordVersion, ID: newID(origin), Origin: origin, Mode: o.Mode, Created: time.Now().UTC().Truncate(time.Second), HarnessState: o.HarnessState}}
	r.Path = filepath.Join(parent, r.ID)
	made := false
	defer func() {
		if !made {
			rs.removeTree(ctx, &r.Record)
			rs.store.remove(r.ID)
		}
	}()
	switch o.Mode {
	case ModeCopy:
		if err := os.Mkdir(r.Path, 0o700); err != nil {
			return nil, fmt.Errorf("cannot make the root %s: %w", r.Path, err)
		}
		how, err := copyTree(origin, r.Path, rs.copySkip(o.HarnessState))
		if err != nil {
			return nil, fmt.Errorf("cannot copy %s into the root %s: %w", origin, r.Path, err)
		}
		r.Copy = how
	case ModeWorktree:
		r.Branch = "cordon/root-" + r.ID
		if err := worktreeAdd(ctx, origin, r.Path, r.Branch); err != nil {
			return nil, err
		}
	}
	manifests, err := rs.manifests(r.Path, origin)
	if err != nil {
		return nil, err
	}
	r.Base, r.OriginDigest, r.Git = manifests[baseManifest].Digest(), manifests[originManifest].Digest(), manifests[gitManifest].Digest()
	if err := rs.store.save(&r.Record, manifests); err != nil {
		return nil, err
	}
	made = true
	return r, nil
}

// originDir checks and resolves the origin: a directory that may be a
// workspace, holding no root and inside none.
func (rs *Roots) originDir(from string) (string, error) {
	if from == "" {
		from = "."
	}
	abs, err := filepath.Abs(from)
	if err != nil {
		return "", err
	}
	origin, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return "", refusal.Errorf(refusal.NotFound, "cannot make a root of %s: %w", from, err)
	}
	if st, err := os.Stat(origin); err != nil || !st.IsDir() {
		return "", refusal.Errorf(refusal.NotDirectory, "cannot make a root of %s: not a directory", from)
	}
	if err := rs.h.CheckWorkspace(origin); err != nil {
		return "", err
	}
	roots := resolve(rs.h.RootsDir())
	if within(origin, roots) || within(roots, origin) {
		return "", refusal.Errorf(refusal.WorkspaceRefused, "cannot make a root of %s: it is, holds or lies inside cordon's roots directory %s", origin, roots)
	}
	return origin, nil
}

// resolve returns dir with the symlinks of its existing prefix resolved.
func resolve(dir string) string {
	rest := ""
	for d := dir; ; d = filepath.Dir(d) {
		if r, err := filepath.EvalSymlinks(d); err == nil {
			return filepath.Join(r, rest)
		}
		if d == filepath.Dir(d) {
			return dir
		}
		rest = filepath.Join(filepath.Base(d), rest)
	}
}

func within(p, dir string) bool { return p == dir || strings.HasPrefix(p, dir+"/") }

// newID names a root after its origin, with 6 random bytes: "myrepo-3fa9c2d1e0b4".
func newID(origin string) string {
	var b0 strings.Builder
	for _, c := range []byte(filepath.Base(origin)) {
		if nameChar(c) {
			b0.WriteByte(c)
		} else if !strings.HasSuffix(b0.String(), "-") {
			b0.WriteByte('-')
		}
	}
	base := strings.Trim(b0.String(), "-.")
	if len(base) > 40 {
		base = base[:40]
	}
	if base == "" {
		base = "root"
	}
	var b [6]byte
	rand.Read(b[:])
	return base + "-" + hex.EncodeToString(b[:])
}

// copySkip leaves the origin's harness state out of a copy unless asked.
func (rs *Roots) copySkip(harnessState bool) skipFunc {
	if harnessState {
		return nil
	}
	state := rs.h.State()
	return func(rel string, _ bool) bool { return isState(state, rel) }
}

func isState(state []string, rel string) bool {
	if strings.Contains(rel, "/") {
		return false
	}
	for _, s := range state {
		if strings.EqualFold(rel, s) {
			return true
		}
	}
	return false
}

// treeSkip leaves out of a diffed manifest what a root never hands back:
// harness state, and the git directory (or gitfile) at the top.
func (rs *Roots) treeSkip(rel string, _ bool) bool {
	return isState(rs.h.State(), rel) || strings.EqualFold(rel, ".git")
}

// gitSkip keeps, of a git directory, the files that configure or run
// something: its configuration, hooks and info.
func gitSkip(rel string, isDir bool) bool {
	first, _, _ := strings.Cut(rel, "/")
	switch first {
	case "config", "hooks", "info", "config.worktree":
		return false
	}
	return true
}

// manifests scans the root, its git directory, and the origin.
func (rs *Roots) manifests(root, origin string) (map[string]Manifest, error) {
	base, err := scanDir(root, rs.treeSkip)
	if err != nil {
		return nil, fmt.Errorf("cannot read the root %s: %w", root, err)
	}
	git, err := scanGit(root)
	if err != nil {
		return nil, err
	}
	orig, err := scanDir(origin, rs.treeSkip)
	if err != nil {
		return nil, fmt.Errorf("cannot read the origin %s: %w", origin, err)
	}
	return map[string]Manifest{baseManifest: base, originManifest: orig, gitManifest: git}, nil
}

func scanDir(dir string, skip skipFunc) (Manifest, error) {
	f, err := os.OpenFile(dir, os.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return scan(f, skip)
}

// scanGit is the manifest of the root's own git directory's write-later
// files (none in worktree mode, whose .git is a file naming the origin's).
func scanGit(root string) (Manifest, error) {
	rf, err := os.OpenFile(root, os.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW, 0)
	if err != nil {
		return nil, err
	}
	defer rf.Close()
	g, err := openBeneath(int(rf.Fd()), ".git", unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		return Manifest{}, nil // no git directory of its own
	}
	defer g.Close()
	m, err := scan(g, gitSkip)
	if err != nil {
		return nil, fmt.Errorf("cannot read the root's git directory: %w", err)
	}
	for i := range m {
		m[i].Path = path.Join(".git", m[i].Path)
	}
	return m, nil
}

// List returns every root whose record is authentic, and an error for
// each record that is not.
func (rs *Roots) List() ([]*Root, error) {
	ids, err := rs.store.ids()
	if err != nil {
		return nil, err
	}
	var out []*Root
	var errs []error
	for _, id := range ids {
		r, err := rs.byID(id)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, r)
	}
	return out, errors.Join(errs...)
}

func (rs *Roots) byID(id string) (*Root, error) {
	rec, err := rs.store.load(id)
	if err != nil {
		return nil, err
	}
	r := &Root{Record: *rec}
	if st, err := os.Lstat(r.Path); err != nil || !st.IsDir() {
		r.Missing = true
	}
	return r, nil
}

// Find returns the root that name is: its directory (or a path inside
// it), or its ID. A directory cordon did not make a root is
// [refusal.NotARoot]; a record that is not authentic
// [refusal.UntrustedState].
func (rs *Roots) Find(name string) (*Root, error) {
	if validID(name) {
		if _, err := os.Stat(rs.store.file(name, "")); err == nil {
			return rs.byID(name)
		}
	}
	abs, err := filepath.Abs(name)
	if err != nil {
		return nil, err
	}
	p, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return nil, refusal.Errorf(refusal.NotARoot, "%s is not a disposable root cordon made: %v", name, err)
	}
	parent := resolve(rs.h.RootsDir())
	rel, err := filepath.Rel(parent, p)
	if err != nil || rel == "." || strings.HasPrefix(rel, "..") {
		return nil, refusal.Errorf(refusal.NotARoot, "%s is not a disposable root cordon made: roots are made in %s (cordon root create)", name, parent)
	}
	id, _, _ := strings.Cut(rel, "/")
	r, err := rs.byID(id)
	if err != nil {
		return nil, err
	}
	if resolve(r.Path) != filepath.Join(parent, id) {
		return nil, refusal.Errorf(refusal.UntrustedState, "the record of root %s names another directory (%s)", id, r.Path)
	}
	return r, nil
}

// Of returns the root whose directory is exactly dir, or nil: for the
// autonomy check of a workspace.
func (rs *Roots) Of(dir string) (*Root, error) {
	r, err := rs.Find(dir)
	if err != nil {
		return nil, err
	}
	p, _ := filepath.EvalSymlinks(dir)
	if p != resolve(r.Path) {
		return nil, refusal.Errorf(refusal.NotARoot, "%s lies inside the root %s but is not the root itself: run in %s", dir, r.ID, r.Path)
	}
	return r, nil
}

// Discard removes a root cordon made: its directory (and, in worktree
// mode, its worktree and branch in the origin), then its record.
func (rs *Roots) Discard(ctx context.Context, r *Root) error {
	if err := rs.removeTree(ctx, &r.Record); err != nil {
		return err
	}
	return rs.store.remove(r.ID)
}

// removeTree removes the root's directory, never following a link out of
// it; a worktree also leaves its origin's list of worktrees, and its
// branch goes.
func (rs *Roots) removeTree(ctx context.Context, r *Record) error {
	if r.Path == "" || filepath.Dir(r.Path) != resolve(rs.h.RootsDir()) && filepath.Dir(r.Path) != rs.h.RootsDir() {
		return refusal.Errorf(refusal.NotARoot, "refusing to remove %s: not in cordon's roots directory", r.Path)
	}
	if r.Mode == ModeWorktree {
		if _, err := os.Lstat(r.Path); err == nil {
			// A worktree whose .git file was replaced is not one git
			// removes: the directory goes below, and prune forgets it.
			git(ctx, r.Origin, "worktree", "remove", "--force", r.Path)
		}
		defer git(ctx, r.Origin, "worktree", "prune")
		if r.Branch != "" {
			git(ctx, r.Origin, "branch", "-D", "--", r.Branch)
		}
	}
	if err := os.RemoveAll(r.Path); err != nil {
		return fmt.Errorf("cannot remove the root %s: %w", r.Path, err)
	}
	return nil
}

// worktreeAdd makes a git worktree of origin's HEAD at dir, on a new
// branch: the origin's hooks do not run.
func worktreeAdd(ctx context.Context, origin, dir, branch string) error {
	if err := git(ctx, origin, "rev-parse", "--verify", "-q", "HEAD^{commit}"); err != nil {
		return refusal.Errorf(refusal.Invalid, "cannot make a worktree root of %s: it is not a git repository with a commit (use --mode copy)", origin)
	}
	return git(ctx, origin, "worktree", "add", "-q", "-b", branch, dir, "HEAD")
}

// git runs the host's git in dir with hooks and the fsmonitor off and no
// GIT_ variable of the caller's.
func git(ctx context.Context, dir string, args ...string) error {
	cmd := exec.CommandContext(ctx, "git", append([]string{"-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false", "-C", dir}, args...)...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GIT_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	var stderr bytes.Buffer
	cmd.Stderr, cmd.Stdout = &stderr, io.Discard
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("git %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return nil
}
