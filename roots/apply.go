package roots

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cordon-run/cordon/harness"
	"github.com/cordon-run/cordon/internal/placeholder"
	"github.com/cordon-run/cordon/refusal"
	"github.com/cordon-run/cordon/substrate/workspace"
)

// Applied is what an apply did.
type Applied struct {
	Root    *Root    `json:"root"`
	Applied []Change `json:"applied"`
	// Left are the changes not applied, and why: those that must be
	// named and were not, and what a root never hands back.
	Left []Left `json:"left,omitempty"`
}

// Left is a change an apply did not take.
type Left struct {
	Path   string `json:"path"`
	Change string `json:"change"`
	Why    string `json:"why"`
}

// stepHook, when set (by tests), runs before each change goes into
// place: an error there is a failure half-way.
var stepHook func(path string) error

// maxApplied bounds one file apply copies into the origin.
const maxApplied = 1 << 30

// ApplyOptions says what to apply.
type ApplyOptions struct {
	// Paths limits the apply to the changes at or below these
	// root-relative paths (all changes when empty); a write-later path
	// must be named to be applied.
	Paths []string
	// Digest, when set, is the digest of the diff that was reviewed
	// ([Diff.Digest]): the apply refuses if the root changed since.
	Digest string
}

// Apply copies the root's changes back into its origin: all of them, or
// those at or below o.Paths (root-relative). It writes through the
// origin's workspace guard (no symlink followed, harness state never
// written, hard-linked files refused), reads the root through no symlink,
// and is all or nothing: every new file is staged in a directory of its
// own at the origin's top first, then the changes are renamed into place,
// and an error half-way puts back what was replaced.
//
// It refuses — changing nothing — a change where the origin changed since
// the root was made ([refusal.OriginChanged]), changes that are not those
// of the reviewed diff (o.Digest), and a symlink that would lead out of
// the origin or into what it protects ([refusal.OutsideWorkspace]). It
// leaves out, and lists in [Applied.Left], what must be named to go: a
// write-later path, content the diff could not show, a file others may
// write; and what never goes: git directories and harness state at any
// depth. Setuid, setgid and sticky bits are never applied.
//
// No run of the root may go on meanwhile: apply takes the root's run lock
// exclusively, and refuses when a run holds it or when a run of a
// directory inside the root is going on; it is present in the registry
// of runs while it applies, so that a run of a directory inside the root
// reached by another path (a bind mount), which the lock does not hold
// off, does not start either.
func (rs *Roots) Apply(ctx context.Context, r *Root, o ApplyOptions) (*Applied, error) {
	paths := o.Paths
	unlock, err := lockRoot(r)
	if err != nil {
		return nil, err
	}
	defer unlock()
	// Present in the registry of runs while it applies: a run of a
	// directory inside the root that no path of the root leads through (a
	// bind mount of it elsewhere), which the root's lock does not hold
	// off, does not start meanwhile ([placeholder.Begin]). Recorded before
	// the runs are read: one that starts from then on sees it.
	presence, err := placeholder.Present(rs.h.StateDir(), r.Path, -1)
	if err != nil {
		return nil, refusal.Errorf(refusal.Other, "refusing to apply root %s: cannot record the apply in the registry of runs (%v); nothing was changed", r.ID, err)
	}
	defer presence.Leave()
	ws, err := placeholder.Running(rs.h.StateDir(), r.Path)
	if err != nil {
		return nil, refusal.Errorf(refusal.Other, "refusing to apply root %s: cannot tell whether a run in it is going on (%v); nothing was changed", r.ID, err)
	}
	if ws != "" {
		return nil, refusal.Errorf(refusal.Invalid, "refusing to apply root %s: a run in %s is going on; apply once it has ended (nothing was changed)", r.ID, ws)
	}
	d, err := rs.Diff(r)
	if err != nil {
		return nil, err
	}
	if o.Digest != "" && o.Digest != d.Digest {
		return nil, refusal.Errorf(refusal.OriginChanged, "refusing to apply root %s: its changes are not the ones reviewed (digest %s, reviewed %s); nothing was changed — review cordon root diff %s again", r.ID, d.Digest, o.Digest, r.ID)
	}
	named := map[string]bool{}
	for _, p := range paths {
		c := path.Clean(strings.TrimPrefix(p, "./"))
		if c == "." || path.IsAbs(c) || c == ".." || strings.HasPrefix(c, "../") {
			return nil, refusal.Errorf(refusal.Invalid, "apply: %q is not a path inside the root", p)
		}
		named[c] = true
	}
	var sel []Change
	for n := range named {
		if !slices.ContainsFunc(d.Changes, func(c Change) bool { return c.Path == n || strings.HasPrefix(c.Path, n+"/") }) {
			return nil, refusal.Errorf(refusal.NotFound, "apply: the root has no change at %s (cordon root diff %s lists them)", n, r.ID)
		}
	}
	var left []Left
	for _, c := range d.Changes {
		if len(named) > 0 && !named[c.Path] && !slices.ContainsFunc(paths, func(p string) bool { return strings.HasPrefix(c.Path, path.Clean(p)+"/") }) {
			continue
		}
		if why := c.needsNaming(); why != "" && !explicit(c, named) {
			left = append(left, Left{Path: c.Path, Change: c.Change, Why: why + "; name it to apply it"})
			continue
		}
		sel = append(sel, c)
	}
	// A directory that holds a change left out stays as it is.
	for i := 0; i < len(sel); {
		c := sel[i]
		if c.Old != nil && c.Old.Type == "dir" && (c.New == nil || c.New.Type != "dir") &&
			slices.ContainsFunc(left, func(l Left) bool { return strings.HasPrefix(l.Path, c.Path+"/") }) {
			left = append(left, Left{Path: c.Path, Change: c.Change, Why: "it holds a change that is not applied"})
			sel = slices.Delete(sel, i, i+1)
			continue
		}
		i++
	}
	for _, g := range d.Git {
		left = append(left, Left{Path: g.Path, Change: g.Change, Why: g.WriteLater + "; never applied"})
	}
	if err := refuseApply(r, sel, named); err != nil {
		return nil, err
	}
	if err := rs.refuseLinks(r, sel, d.origin); err != nil {
		return nil, err
	}
	allowed := map[string]bool{}
	for _, c := range sel {
		if c.WriteLater != "" {
			allowed[c.Path] = true
		}
	}
	tx := &applyTx{root: r, allowed: allowed, dir: ".cordon-apply-" + randomTag()}
	origin, err := workspace.Open(r.Origin, workspace.WithHarness(rs.h), workspace.WithSync(true), workspace.WithMaxFileSize(maxApplied),
		workspace.WithWriteLaterAllowed(func(canon string) bool { return tx.allowed[canon] }))
	if err != nil {
		return nil, err
	}
	defer origin.Close()
	tx.origin = origin
	rootF, err := os.OpenFile(r.Path, os.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW, 0)
	if err != nil {
		return nil, err
	}
	defer rootF.Close()
	tx.rootFD = int(rootF.Fd())
	if err := origin.Mkdir(tx.dir, 0o700); err != nil {
		return nil, fmt.Errorf("apply: cannot make the staging directory %s in the origin: %w", tx.dir, err)
	}
	err = tx.run(sel)
	if err != nil {
		if rerr := tx.rollback(); rerr != nil {
			// What could not be put back is in the staging directory:
			// it stays, with the originals set aside there.
			return nil, fmt.Errorf("apply of root %s failed (%w), and putting the origin back failed too: %v — the originals set aside are in %s", r.ID, err, rerr, filepath.Join(r.Origin, tx.dir))
		}
	}
	tx.cleanup()
	if err != nil {
		return nil, err
	}
	if err := rs.rebase(r, sel); err != nil {
		return nil, fmt.Errorf("the changes were applied, but the root's record could not be updated: %w", err)
	}
	return &Applied{Root: r, Applied: sel, Left: left}, nil
}

// lockRoot takes the root's run lock (the root directory itself, which
// every sandboxed run of it holds shared) exclusively, without waiting.
func lockRoot(r *Root) (func(), error) {
	fd, err := unix.Open(r.Path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("cannot open the root %s: %w", r.Path, err)
	}
	if err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB); err != nil {
		unix.Close(fd)
		return nil, refusal.Errorf(refusal.Invalid, "refusing to apply root %s: a run of it is going on; apply once it has ended (nothing was changed)", r.ID)
	}
	return func() { unix.Close(fd) }, nil
}

// refuseApply refuses the apply when a selected change would overwrite
// what changed in the origin.
func refuseApply(r *Root, sel []Change, named map[string]bool) error {
	var conflicts []string
	for _, c := range sel {
		if c.Conflict != "" {
			q, _ := visible(c.Path)
			conflicts = append(conflicts, q+" ("+c.Conflict+")")
		}
		if c.New != nil && c.New.Type == "other" {
			return refusal.Errorf(refusal.Invalid, "apply: %s in the root is a FIFO, socket or device; only files, directories and symlinks go back", c.Path)
		}
	}
	switch {
	case len(conflicts) > 0:
		return refusal.Errorf(refusal.OriginChanged, "refusing to apply root %s: the origin %s changed since the root was made at %s, and applying would overwrite that work: %s. Nothing was changed; apply the other paths by naming them, or make a new root", r.ID, r.Origin, strings.Join(conflicts, "; "), r.Created.Format(time.RFC3339))
	}
	return nil
}

// explicit reports whether the person named the change: its own path,
// or (for a write-later path) the protected path or a path inside it
// that holds the change.
func explicit(c Change, named map[string]bool) bool {
	if named[c.Path] {
		return true
	}
	if c.WriteLater == "" || c.WriteLaterPath == "" {
		return false
	}
	for n := range named {
		if n == c.WriteLaterPath || strings.HasPrefix(n, c.WriteLaterPath+"/") && strings.HasPrefix(c.Path, n+"/") {
			return true
		}
	}
	return false
}

// refuseLinks refuses every new symlink whose target, resolved as the
// kernel would in the origin as the apply leaves it (through the tree's
// own links, .. after a link included), leaves the origin or reaches its
// harness state, a git directory or a write-later path.
//
// origin is the origin as the diff read it (its git directory and harness
// state left out: a target that reaches them is refused by its path).
func (rs *Roots) refuseLinks(r *Root, sel []Change, origin Manifest) error {
	tree := origin.index()
	for _, c := range sel {
		if c.New == nil {
			delete(tree, c.Path)
			for p := range tree {
				if strings.HasPrefix(p, c.Path+"/") {
					delete(tree, p)
				}
			}
		} else {
			tree[c.Path] = *c.New
		}
	}
	prot, err := rs.h.Protect(r.Origin)
	if err != nil {
		return err
	}
	var bad []string
	for _, c := range sel {
		if c.New == nil || c.New.Type != "symlink" {
			continue
		}
		q, _ := visible(c.Path)
		t, _ := visible(c.New.Target)
		switch end, ok := resolveIn(tree, c.Path); {
		case !ok:
			bad = append(bad, fmt.Sprintf("%s -> %s (leaves the origin)", q, t))
		case rs.neverApplied(end) != "" || strings.EqualFold(end, ".git"):
			bad = append(bad, fmt.Sprintf("%s -> %s (reaches %s)", q, t, end))
		default:
			if v, what, _ := prot.Check(end); v == harness.InState || v == harness.InWriteLater {
				bad = append(bad, fmt.Sprintf("%s -> %s (reaches the protected %s)", q, t, what))
			}
		}
	}
	if len(bad) > 0 {
		return refusal.Errorf(refusal.OutsideWorkspace, "refusing to apply root %s: these symlinks would lead out of the origin or into what it protects: %s. Nothing was changed", r.ID, strings.Join(bad, "; "))
	}
	return nil
}

// resolveIn resolves the link at link in tree (origin-relative paths) as
// the kernel would, every link on the way followed, and returns where it
// ends; ok is false when the path leaves the tree (an absolute target, ..
// past the top) or loops.
func resolveIn(tree map[string]Entry, link string) (string, bool) {
	e := tree[link]
	var stack []string // the resolved directory so far
	if d := path.Dir(link); d != "." {
		stack = strings.Split(d, "/")
	}
	todo := strings.Split(e.Target, "/")
	if strings.HasPrefix(e.Target, "/") || e.Target == "" {
		return "", false
	}
	for hops := 0; len(todo) > 0; {
		c := todo[0]
		todo = todo[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			if len(stack) == 0 {
				return "", false
			}
			stack = stack[:len(stack)-1]
			continue
		}
		p := strings.Join(append(slices.Clone(stack), c), "/")
		if next, ok := tree[p]; ok && next.Type == "symlink" {
			if hops++; hops > 40 || strings.HasPrefix(next.Target, "/") || next.Target == "" {
				return "", false
			}
			todo = append(strings.Split(next.Target, "/"), todo...)
			continue
		}
		stack = append(stack, c)
	}
	return strings.Join(stack, "/"), true
}

func randomTag() string {
	var b [6]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// applyTx is one apply: what it staged and did, to undo.
type applyTx struct {
	root    *Root
	origin  *workspace.Workspace
	rootFD  int
	allowed map[string]bool
	dir     string // the staging directory, at the origin's top
	n       int
	staged  map[string]string // target → its staged temporary
	undo    []func() error
	backups []string
	whole   []string // directories set aside whole
}

// aside names a temporary or a backup in the staging directory: out of
// every directory the apply may remove, and of every protected path.
func (tx *applyTx) aside(what string) string {
	tx.n++
	return path.Join(tx.dir, fmt.Sprintf("%d.%s", tx.n, what))
}

func (tx *applyTx) run(sel []Change) error {
	tx.staged = map[string]string{}
	// Directories first (in path order, parents before children), then
	// every file and link staged: nothing of the origin's is replaced yet.
	for _, c := range sel {
		if c.New == nil || c.New.Type != "dir" || c.Old != nil && c.Old.Type == "dir" {
			continue
		}
		if c.Old != nil { // a file or link became a directory
			if err := tx.setAside(c.Path); err != nil {
				return err
			}
		}
		if err := tx.mkdirAll(c.Path, c.New.Mode); err != nil {
			return err
		}
	}
	for _, c := range sel {
		if c.New == nil || c.New.Type == "dir" {
			continue
		}
		if err := tx.mkdirAll(path.Dir(c.Path), 0o755); err != nil {
			return err
		}
		if err := tx.stage(c); err != nil {
			return err
		}
	}
	// Then into place: each replaced or removed entry is kept aside until
	// the end (a directory whole, with what the root removed of it).
	gone := func(p string) bool {
		return slices.ContainsFunc(tx.whole, func(d string) bool { return strings.HasPrefix(p, d+"/") })
	}
	for _, c := range sel {
		if gone(c.Path) {
			continue
		}
		if stepHook != nil {
			if err := stepHook(c.Path); err != nil {
				return err
			}
		}
		switch {
		case c.New != nil && c.New.Type == "dir":
			if c.Old != nil && c.Old.Type == "dir" && c.Old.Mode != c.New.Mode {
				if err := tx.chmodDir(c.Path, c.Old.Mode, c.New.Mode); err != nil {
					return err
				}
			}
		case c.New != nil:
			if c.Old != nil {
				if err := tx.setAside(c.Path); err != nil {
					return err
				}
				if c.Old.Type == "dir" {
					tx.whole = append(tx.whole, c.Path)
				}
			} else if _, err := tx.origin.Lstat(c.Path); err == nil {
				return refusal.Errorf(refusal.OriginChanged, "refusing to apply: %s appeared in the origin while applying; nothing was changed", c.Path)
			}
			tmp := tx.staged[c.Path]
			if err := tx.origin.Rename(tmp, c.Path); err != nil {
				return err
			}
			delete(tx.staged, c.Path)
			tx.undo = append(tx.undo, func() error { return tx.origin.Remove(c.Path) })
		case c.Old != nil && c.Old.Type != "dir":
			if err := tx.setAside(c.Path); err != nil {
				return err
			}
		}
	}
	// Removed directories last, deepest first: their entries are gone.
	for i := len(sel) - 1; i >= 0; i-- {
		c := sel[i]
		if c.New == nil && c.Old != nil && c.Old.Type == "dir" && !gone(c.Path) {
			if err := tx.origin.RemoveDir(c.Path); err != nil {
				return err
			}
			mode := c.Old.Mode
			tx.undo = append(tx.undo, func() error { return tx.origin.Mkdir(c.Path, fs.FileMode(mode)) })
		}
	}
	return nil
}

// mkdirAll makes dir and its missing parents in the origin.
func (tx *applyTx) mkdirAll(dir string, mode uint32) error {
	if dir == "." || dir == "" {
		return nil
	}
	if st, err := tx.origin.Lstat(dir); err == nil {
		if !st.IsDir() {
			return refusal.Errorf(refusal.OriginChanged, "refusing to apply: %s is not a directory in the origin; nothing was changed", dir)
		}
		return nil
	}
	if err := tx.mkdirAll(path.Dir(dir), 0o755); err != nil {
		return err
	}
	if err := tx.origin.Mkdir(dir, fs.FileMode(mode&0o777)|0o700); err != nil {
		return err
	}
	tx.undo = append(tx.undo, func() error { return tx.origin.RemoveDir(dir) })
	return tx.chmod(dir, mode)
}

func (tx *applyTx) chmod(name string, mode uint32) error {
	f, err := tx.origin.OpenFile(name, os.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Chmod(fs.FileMode(mode & 0o777))
}

func (tx *applyTx) chmodDir(name string, old, mode uint32) error {
	if err := tx.chmod(name, mode); err != nil {
		return err
	}
	tx.undo = append(tx.undo, func() error { return tx.chmod(name, old) })
	return nil
}

// stage writes the new content of c beside its target, read from the
// root through no symlink and checked against the digest the diff saw.
func (tx *applyTx) stage(c Change) error {
	tmp := tx.aside("new")
	switch c.New.Type {
	case "symlink":
		if err := tx.origin.Symlink(c.New.Target, tmp); err != nil {
			return err
		}
	case "file":
		data, err := readBeneath(tx.rootFD, c.Path, maxApplied)
		if err != nil {
			return fmt.Errorf("apply: cannot read %s in the root: %w", c.Path, err)
		}
		if digestOf(data) != c.New.Digest {
			return refusal.Errorf(refusal.OriginChanged, "refusing to apply: %s changed in the root while applying; nothing was changed — review the diff again", c.Path)
		}
		f, err := tx.origin.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return err
		}
		_, err = f.Write(data)
		if err == nil {
			err = f.Chmod(fs.FileMode(c.New.Mode & 0o777)) // never setuid, setgid or sticky
		}
		if err == nil {
			err = f.Sync()
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			tx.origin.Remove(tmp)
			return fmt.Errorf("apply: cannot stage %s: %w", c.Path, err)
		}
	}
	tx.staged[c.Path] = tmp
	return nil
}

// setAside renames what the origin has at name out of the way, to put
// back should the apply fail.
func (tx *applyTx) setAside(name string) error {
	bak := tx.aside("old")
	if err := tx.origin.Rename(name, bak); err != nil {
		return err
	}
	tx.backups = append(tx.backups, bak)
	tx.undo = append(tx.undo, func() error {
		tx.backups = slices.DeleteFunc(tx.backups, func(b string) bool { return b == bak })
		return tx.origin.Rename(bak, name)
	})
	return nil
}

// rollback undoes what was done, last first, and says what it could not
// undo.
func (tx *applyTx) rollback() error {
	var errs []error
	for i := len(tx.undo) - 1; i >= 0; i-- {
		if err := tx.undo[i](); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// cleanup empties and removes the staging directory: what was staged and
// not used, and what was set aside (the apply held, or was undone).
func (tx *applyTx) cleanup() {
	for _, p := range append(slices.Collect(maps.Values(tx.staged)), tx.backups...) {
		tx.removeAll(p)
	}
	tx.origin.RemoveDir(tx.dir)
}

// removeAll removes p, a file, a link or a directory set aside whole
// (listed as often as a listing is cut short).
func (tx *applyTx) removeAll(p string) {
	if tx.origin.Remove(p) == nil {
		return
	}
	for range 1 << 20 {
		entries, truncated, err := tx.origin.List(p)
		if err != nil {
			return
		}
		for _, e := range entries {
			tx.removeAll(path.Join(p, e.Name))
		}
		if !truncated {
			break
		}
	}
	tx.origin.RemoveDir(p)
}

// rebase records the applied changes as the root's new base, and the
// origin as it is now, so that later changes of the root apply on top.
func (rs *Roots) rebase(r *Root, applied []Change) error {
	base, err := rs.store.manifest(&r.Record, baseManifest)
	if err != nil {
		return err
	}
	git, err := rs.store.manifest(&r.Record, gitManifest)
	if err != nil {
		return err
	}
	idx := base.index()
	for _, c := range applied {
		if c.New == nil {
			delete(idx, c.Path)
		} else {
			idx[c.Path] = *c.New
		}
	}
	var nb Manifest
	for _, e := range idx {
		nb = append(nb, e)
	}
	slices.SortFunc(nb, func(a, b Entry) int { return strings.Compare(a.Path, b.Path) })
	origin, err := scanDir(r.Origin, rs.treeSkip)
	if err != nil {
		return err
	}
	r.Base, r.OriginDigest = nb.Digest(), origin.Digest()
	r.Applied = append(r.Applied, time.Now().UTC().Truncate(time.Second))
	return rs.store.save(&r.Record, map[string]Manifest{baseManifest: nb, originManifest: origin, gitManifest: git})
}
