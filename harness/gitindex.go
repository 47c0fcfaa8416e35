package harness

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/cordon-run/cordon/internal/dirfd"
	"github.com/cordon-run/cordon/internal/gitconf"
	"github.com/cordon-run/cordon/refusal"
	"golang.org/x/sys/unix"
)

// maxIndex bounds the git index read for gitlinks.
const maxIndex = 256 << 20

// maxAddedGitlinks bounds the submodules a run may add to the index, and
// maxGitlinks those a workspace's index may name: each one's entry is a
// read-only bind (or placeholder) of every run, and bwrap takes some
// thousands of options at most.
const (
	maxAddedGitlinks = 256
	maxGitlinks      = 1024
)

// gitlinkMode is the mode of an index entry that is a submodule: git
// enters the repository at that path (git status runs git there, and that
// git reads the repository's configuration).
const gitlinkMode = 0o160000

// gitlinks returns the paths of the index's gitlink entries (submodules),
// relative to the work tree. hashSize is 20 (SHA-1) or 32 (SHA-256). A
// missing index has none.
func gitlinks(index string, hashSize int) ([]string, error) {
	data, err := readIndexFile(index)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	links, shared, err := parseGitlinks(data, hashSize)
	if err != nil {
		return nil, err
	}
	if len(shared) == 0 {
		return links, nil
	}
	// A split index: git reads the shared index's entries too (those the
	// split index does not replace or delete; all of them are taken, a
	// superset).
	have := map[string]bool{}
	for _, l := range links {
		have[l] = true
	}
	for _, h := range shared {
		base, err := readIndexFile(filepath.Join(filepath.Dir(index), "sharedindex."+h))
		if err != nil {
			return nil, fmt.Errorf("its shared index: %w", err)
		}
		more, next, err := parseGitlinks(base, hashSize)
		if err != nil {
			return nil, fmt.Errorf("its shared index: %w", err)
		}
		if len(next) > 0 {
			return nil, errors.New("its shared index links to another")
		}
		for _, l := range more {
			if !have[l] {
				have[l] = true
				links = append(links, l)
			}
		}
	}
	return links, nil
}

// readIndexFile reads an index (or shared index) file: a regular file of
// at most maxIndex bytes, never through a symlink, in one buffer of its
// size.
func readIndexFile(name string) ([]byte, error) {
	f, err := os.OpenFile(name, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, errors.New("not a regular file")
	} else if st.Size > maxIndex {
		return nil, fmt.Errorf("larger than %d bytes", maxIndex)
	}
	return readSized(f, st.Size)
}

// readSized reads f, of size bytes when it was looked at (at most
// maxIndex), in one buffer of that size: a file that has grown since is
// read up to size, one that has shrunk is refused.
func readSized(f *os.File, size int64) ([]byte, error) {
	data := make([]byte, size)
	if _, err := io.ReadFull(f, data); err != nil {
		return nil, fmt.Errorf("changed while read: %w", err)
	}
	return data, nil
}

// submodules protects the entry into every submodule the repository's
// index names: P/.git, present or absent. git status at the workspace
// root enters each and runs git there, which obeys that repository's
// configuration; a tool must not make one, or redirect one.
func (pr *protector) submodules(gitdir, top string) error {
	hashSize := hashSizeOf(gitdir)
	links, err := gitlinks(filepath.Join(gitdir, "index"), hashSize)
	if err != nil {
		return pr.protectedErr(".git/index", "cannot be read for the submodules git enters: %v (git reset makes a new one from HEAD)", err)
	}
	if len(links) > maxGitlinks {
		return pr.protectedErr(".git/index", "names %d submodules, over the %d whose entries a sandbox can protect (git reset makes a new index from HEAD)", len(links), maxGitlinks)
	}
	pr.gitlinks, pr.entries = nil, map[string]entryID{}
	for _, l := range links {
		abs := filepath.Join(top, filepath.FromSlash(l))
		if rel, ok := pr.rel(abs); ok && rel != "" && !strings.HasPrefix(rel, "../") {
			pr.gitlinks = append(pr.gitlinks, rel)
			pr.submoduleEntry(abs, rel)
		}
	}
	for _, rel := range pr.gitlinks {
		if err := pr.nestedSubmodules(filepath.Join(pr.root, filepath.FromSlash(rel)), rel, 1); err != nil {
			return err
		}
	}
	pr.indexFile, pr.indexTop = filepath.Join(gitdir, "index"), top
	pr.gitdir, pr.sequences = gitdir, sequencesIn(gitdir)
	// A sequence in progress (the user stopped in a rebase): its to-do
	// list is what the user's --continue runs. No run can go on with it
	// (HEAD is read-only): bound read-only.
	if g, ok := pr.rel(gitdir); ok {
		for _, d := range pr.sequences {
			rel := d
			if g != "" {
				rel = g + "/" + d
			}
			pr.add(Path{Rel: rel, Dir: true, Reason: "a rebase, am, cherry-pick or revert in progress: its --continue runs the exec lines of its to-do list"})
		}
	}
	pr.hashSize = hashSize
	// A submodule whose gitfile names a git directory in the work tree
	// (a clone with --separate-git-dir there, a linked worktree of a
	// repository in the workspace) is obeyed from that directory, which
	// the entry's protection does not cover: protected as the root's.
	for _, rel := range append(slices.Clip(pr.gitlinks), pr.nested...) {
		if err := pr.submoduleGitDir(filepath.Join(pr.root, filepath.FromSlash(rel))); err != nil {
			return err
		}
	}
	return nil
}

// Known returns the submodules the protected set trusts as the user's —
// those the index named as it was found, less what [Protected.TrustOnly]
// took back — with their entries as they are ([Protected.entryKey]), for
// the other runs of the workspace to hold theirs against: a JSON object of
// path to entry (a path is the index's, and can hold any byte but NUL).
func (p *Protected) Known() []byte {
	m := map[string]string{}
	for _, rel := range p.gitlinks {
		m[rel] = p.entryKey(rel)
	}
	for _, rel := range p.nested {
		if !p.distrusted[rel] {
			m[rel] = p.entryKey(rel)
		}
	}
	data, _ := json.Marshal(m)
	return data
}

// entryKey names a submodule's entry (P/.git) as it was found: its device
// and inode, or "-" when it is absent or an empty directory — another
// run's placeholder for an absent one, which the quarantine takes for
// absent too.
func (p *Protected) entryKey(rel string) string {
	e, ok := p.entries[rel]
	if !ok {
		return "-"
	}
	path := filepath.Join(p.root, filepath.FromSlash(rel), ".git")
	if fi, err := os.Lstat(path); err == nil && fi.IsDir() {
		if empty, err := dirfd.IsEmpty(unix.AT_FDCWD, path, unix.O_NOFOLLOW); err == nil && empty {
			return "-"
		}
	}
	return fmt.Sprintf("%d:%d", e.dev, e.ino)
}

// TrustOnly takes back the trust the protected set gave each submodule
// the index named as it was found — that it is the user's, passed by
// after a run while its entry is the same file — unless every other run
// of the workspace going on now trusted it too, with the same entry
// (others: what each kept of [Protected.Known]; one that cannot be read
// trusts nothing). Those taken back are new ones at the end of this run:
// their entries are moved out of git's way. Two runs at once handed a
// submodule over otherwise: the first's command entered a repository in
// the index (one it made, or one an earlier run left untracked) and took
// it out before it ended, once the second had started and taken it for
// the user's; the second's put it back. The caller reads the index
// (Protect) before it looks for the others' sets: a run that has kept
// none yet has let no command start. It returns the submodules taken
// back.
func (p *Protected) TrustOnly(others [][]byte) []string {
	if p == nil || len(others) == 0 {
		return nil
	}
	sets := make([]map[string]string, len(others))
	for i, o := range others {
		if json.Unmarshal(o, &sets[i]) != nil {
			sets[i] = nil // trusts nothing
		}
	}
	var taken []string
	trusted := func(rel string) bool {
		id := p.entryKey(rel)
		for _, set := range sets {
			if kept, ok := set[rel]; !ok || kept != id {
				taken = append(taken, rel)
				return false
			}
		}
		return true
	}
	p.gitlinks = slices.DeleteFunc(slices.Clone(p.gitlinks), func(rel string) bool { return !trusted(rel) })
	for _, rel := range p.nested {
		if !p.distrusted[rel] && !trusted(rel) {
			if p.distrusted == nil {
				p.distrusted = map[string]bool{}
			}
			p.distrusted[rel] = true // still looked at after the run, as a new one
		}
	}
	return taken
}

// Beside is what the runs of one workspace going on at once share, for
// the submodules each trusts (the placeholder session of a run is one):
// a lock that orders their looks, what each kept, and keeping one's own.
type Beside interface {
	// Trusting takes the workspace's trust lock and returns its release.
	Trusting() (func(), error)
	// OthersKept returns the sets the other runs going on kept: those
	// skip does not name, and all; an error when they cannot all be read.
	OthersKept(skip func(id string) bool) (kept, all [][]byte, err error)
	// Keep leaves this run's set for the others.
	Keep(data []byte) error
}

// A BesideError is a failure of [Beside] in [Config.ProtectBeside]: the
// run cannot be set up, which is no refusal of its workspace.
type BesideError struct {
	Op  string // "present", "lock", "look" or "keep"
	Err error
}

func (e *BesideError) Error() string {
	switch e.Op {
	case "present":
		return "cannot enter the change in the registry of runs: " + e.Err.Error()
	case "lock":
		return "cannot take the workspace's trust lock: " + e.Err.Error()
	case "look":
		return "cannot read what the runs beside it trust: " + e.Err.Error()
	}
	return "cannot keep the submodules this run trusts for the runs beside it: " + e.Err.Error()
}

func (e *BesideError) Unwrap() error { return e.Err }

// ProtectBeside is [Config.Protect] for a run of root that others may go
// on beside: under the workspace's trust lock, from the index's read
// until what the run trusts is kept, it trusts only the submodules every
// other run trusts too ([Protected.TrustOnly]; skip names runs left out
// of that, a sandbox made ahead and idle), protects the entries of those
// any other trusts ([Protected.GuardOthers]), and keeps what it trusts
// for the runs that start later ([Protected.Known]) — before its command
// can start.
func (c Config) ProtectBeside(root string, b Beside, skip func(id string) bool) (*Protected, error) {
	unlock, err := b.Trusting()
	if err != nil {
		return nil, &BesideError{Op: "lock", Err: err}
	}
	defer unlock()
	p, err := c.Protect(root)
	if err != nil {
		return nil, err
	}
	trusting, all, err := b.OthersKept(skip)
	if err != nil {
		return nil, &BesideError{Op: "look", Err: err}
	}
	p.TrustOnly(trusting)
	if err := p.GuardOthers(all); err != nil {
		return nil, err
	}
	if err := b.Keep(p.Known()); err != nil {
		return nil, &BesideError{Op: "keep", Err: err}
	}
	return p, nil
}

// GuardOthers protects, besides the set's own paths, the entry of every
// submodule another run of the workspace going on trusts (others: what
// each kept of [Protected.Known], a sandbox made ahead and idle too) that
// this run's index did not name: its P/.git read-only, with the git
// directory a gitfile there names in the workspace, as for the index's
// own. A run that started while a tool of another had taken P out of the
// index could otherwise write into P/.git — core.fsmonitor into its
// config — and the other, whose tool put P back, passed it by at its end:
// the same inode it trusted. An entry another run found absent ("-") is
// left alone: one found there at that run's end is moved. Call it after
// [Protected.TrustOnly], with every other run's set. An error is a
// refusal: a symlink on the way to an entry.
func (p *Protected) GuardOthers(others [][]byte) error {
	if p == nil || len(others) == 0 {
		return nil
	}
	var rels []string
	for _, o := range others {
		var set map[string]string
		if json.Unmarshal(o, &set) != nil {
			continue // it trusts nothing: there is nothing of it to guard
		}
		for rel, key := range set {
			if key == "-" || !localRel(rel) || slices.Contains(rels, rel) {
				continue
			}
			if _, ok := p.entries[rel]; ok || slices.Contains(p.gitlinks, rel) || slices.Contains(p.nested, rel) {
				continue // this run's own: protected already
			}
			rels = append(rels, rel)
		}
	}
	if len(rels) == 0 {
		return nil
	}
	if len(rels) > maxGitlinks {
		return refusal.Errorf(refusal.ProtectedPath, "refusing to change %s — the runs beside this change trust %d submodules its index does not name, over the %d whose entries cordon protects; wait for them to end", p.root, len(rels), maxGitlinks)
	}
	slices.Sort(rels)
	pr := &protector{cfg: p.cfg, root: p.root, paths: slices.Clone(p.paths), seen: map[string]bool{},
		indexFile: p.index, entries: map[string]entryID{}}
	for _, rel := range rels {
		abs := filepath.Join(p.root, filepath.FromSlash(rel))
		pr.add(Path{Rel: rel + "/.git", Dir: true, Reason: "a submodule's entry another run of the workspace trusts: git status at the workspace root enters it once that run puts it back in the index"})
		if err := pr.submoduleGitDir(abs); err != nil {
			return err
		}
	}
	return pr.finish(p)
}

// Guarded returns a copy of p that also protects the entries of the
// submodules other runs of the workspace trust ([Protected.GuardOthers]:
// others is what each kept), for a change that is no run — a file tool's;
// p itself is unchanged. With no sets, it is p.
func (p *Protected) Guarded(others [][]byte) (*Protected, error) {
	if p == nil || len(others) == 0 {
		return p, nil
	}
	c := *p
	c.paths, c.seen = slices.Clone(p.paths), maps.Clone(p.seen)
	if err := c.GuardOthers(others); err != nil {
		return nil, err
	}
	return &c, nil
}

// localRel reports whether rel is a clean path inside the workspace, as
// the index's paths of submodules are.
func localRel(rel string) bool {
	return rel != "" && rel != "." && !filepath.IsAbs(rel) && path.Clean(rel) == rel && rel != ".." && !strings.HasPrefix(rel, "../")
}

// submoduleGitDir protects what git obeys in the submodule at abs, beyond
// its entry: the git directory its .git gitfile names in the workspace,
// whole and read-only where no read-only path covers it yet (one under the
// root's .git/modules is) — its configuration, hooks and index (a tool
// that wrote the index would enter submodules of its own there, which the
// quarantine, reading that index once, never sees) — and, wherever that
// git directory is (the embedded P/.git, .git/modules/P, one outside),
// what its configuration names in the workspace: the files it includes,
// the hooks directory and the programs it runs, as for the root's.
func (pr *protector) submoduleGitDir(abs string) error {
	dotgit := filepath.Join(abs, ".git")
	fi, err := os.Lstat(dotgit)
	switch {
	case err != nil:
		return nil // absent: git enters nothing
	case fi.IsDir():
		if !isGitDir(dotgit) {
			return nil
		}
		return pr.submoduleConfig(dotgit, abs)
	case !fi.Mode().IsRegular():
		return nil
	}
	target, err := readGitfile(dotgit)
	if errors.Is(err, errLinkBeforeDotDot) {
		return pr.protectedErr(dotgit, "is a submodule's gitfile git follows where cordon cannot: %v", err)
	}
	if err != nil {
		return nil // git cannot enter it either
	}
	rel, inside := pr.rel(target)
	if inside && rel != "" && !pr.covered(rel) {
		if !isGitDir(target) {
			// Named but not a git directory yet: git refuses to enter it
			// until it is one, so no tool may make it one.
			pr.add(Path{Rel: rel, Dir: true, Reason: whyGitfileTarget})
			return nil
		}
		pr.add(Path{Rel: rel, Dir: true, Reason: whySubmoduleDir})
		return pr.gitDir(target, abs)
	}
	if !isGitDir(target) {
		return nil
	}
	return pr.submoduleConfig(target, abs)
}

// submoduleConfig protects what the configuration git obeys in the
// submodule at top names in the workspace: its git directory's, and the
// system's and the user's, whose relative paths are the submodule's there.
func (pr *protector) submoduleConfig(gitdir, top string) error {
	if err := pr.config(gitdir, top); err != nil {
		return err
	}
	return pr.globalConfig(top)
}

// covered reports whether a read-only directory already protected holds
// rel.
func (pr *protector) covered(rel string) bool {
	for _, o := range pr.paths {
		if o.Mode == ReadOnly && o.Dir && (rel == o.Rel || strings.HasPrefix(rel, o.Rel+"/")) {
			return true
		}
	}
	return false
}

// submoduleEntry protects the entry of the submodule at abs (rel in the
// workspace), and notes what it is now.
func (pr *protector) submoduleEntry(abs, rel string) {
	var st unix.Stat_t
	dotgit := filepath.Join(abs, ".git")
	if unix.Lstat(dotgit, &st) == nil {
		// An empty directory is absent, as the quarantine and entryKey take
		// it: another run's placeholder for an absent one, which a run that
		// found it out of its index could fill, and which would otherwise
		// pass for the entry this run trusted.
		if empty, err := dirfd.IsEmpty(unix.AT_FDCWD, dotgit, unix.O_NOFOLLOW); st.Mode&unix.S_IFMT != unix.S_IFDIR || err != nil || !empty {
			pr.entries[rel] = entryID{dev: uint64(st.Dev), ino: st.Ino}
		}
	}
	pr.add(Path{Rel: rel + "/.git", Dir: true, Reason: "a submodule's entry: git status at the workspace root enters it and obeys its configuration"})
}

// maxNesting bounds how deep submodules of submodules are followed.
const maxNesting = 4

// nestedSubmodules protects the entries of the submodules of the
// submodule at abs (rel), and theirs, to maxNesting: git status at the
// workspace root enters a submodule and, from there, those its own index
// names (a submodule checked out without --recursive leaves them empty,
// for a tool to fill). Their indexes lie in git directories a run cannot
// write (.git/modules, or a protected P/.git): read once, here.
func (pr *protector) nestedSubmodules(abs, rel string, depth int) error {
	dotgit := filepath.Join(abs, ".git")
	fi, err := os.Lstat(dotgit)
	if err != nil {
		return nil // not checked out: git enters nothing below it
	}
	gitdir := dotgit
	switch {
	case fi.Mode().IsRegular():
		if gitdir, err = readGitfile(dotgit); errors.Is(err, errLinkBeforeDotDot) {
			return pr.protectedErr(rel+"/.git", "is a submodule's gitfile git follows where cordon cannot: %v", err)
		} else if err != nil {
			return nil // git cannot enter it either
		}
	case !fi.IsDir():
		return nil
	}
	if !isGitDir(gitdir) {
		return nil
	}
	links, err := gitlinks(filepath.Join(gitdir, "index"), hashSizeOf(gitdir))
	if err != nil {
		return pr.protectedErr(rel+"/.git", "names an index that cannot be read for the submodules git enters: %v", err)
	}
	if depth > maxNesting && len(links) > 0 {
		// git status enters them too, to any depth: refused, not left
		// unprotected.
		return pr.protectedErr(rel+"/.git", "names submodules of its own, below the %d levels of submodules of submodules whose entries a sandbox protects (git status enters them all)", maxNesting)
	}
	for _, l := range links {
		nabs := filepath.Join(abs, filepath.FromSlash(l))
		nrel, ok := pr.rel(nabs)
		if !ok || nrel == "" || strings.HasPrefix(nrel, "../") || slices.Contains(pr.nested, nrel) || slices.Contains(pr.gitlinks, nrel) {
			continue
		}
		if len(pr.gitlinks)+len(pr.nested) >= maxGitlinks {
			return pr.protectedErr(rel+"/.git", "names submodules beyond the %d whose entries a sandbox can protect", maxGitlinks)
		}
		pr.nested = append(pr.nested, nrel)
		pr.submoduleEntry(nabs, nrel)
		if err := pr.nestedSubmodules(nabs, nrel, depth+1); err != nil {
			return err
		}
	}
	return nil
}

// hashSizeOf returns the size of an object name in the repository of
// gitdir: 32 where its configuration says extensions.objectformat =
// sha256, else 20 (SHA-1).
func hashSizeOf(gitdir string) int {
	if cfg, err := readObjectFormat(commonDir(gitdir)); err == nil && cfg == "sha256" {
		return 32
	}
	return 20
}

// commonDir returns the directory a git directory's commondir file names
// (a linked worktree's: the main repository's git directory, which holds
// the configuration), or gitdir itself.
func commonDir(gitdir string) string {
	data, err := readSmall(filepath.Join(gitdir, "commondir"))
	if err != nil {
		return gitdir
	}
	c := strings.TrimSpace(string(data))
	if c == "" {
		return gitdir
	}
	if !filepath.IsAbs(c) {
		c = filepath.Join(gitdir, c)
	}
	return filepath.Clean(c)
}

// readObjectFormat returns extensions.objectformat of a git directory's
// own configuration (git reads extensions from no other file; a linked
// worktree's from its common directory's), or "".
func readObjectFormat(gitdir string) (string, error) {
	name := filepath.Join(gitdir, "config")
	data, _, err := readBounded(name, 1<<20)
	if err != nil {
		return "", err
	}
	entries, err := gitconf.Parse(name, data)
	if err != nil {
		return "", err
	}
	format := ""
	for _, e := range entries {
		if e.Key == "extensions.objectformat" {
			format = strings.ToLower(e.Value) // the last one wins, as in git
		}
	}
	return format, nil
}

// entryID is the file a submodule's entry (P/.git) was when the
// protected set was found.
type entryID struct{ dev, ino uint64 }

// Quarantine moves away the entry (P/.git) of every repository that the
// index of the repository git uses at the workspace root names as a
// submodule now and that is not the entry it was when the set was found:
// a run (a tool writing the index, or swapping an entry) made the host's
// git status at the workspace root enter a repository whose configuration
// the tool could write. Each goes to <harness dir>/quarantine/<time>/P/.git,
// where the user can look at it; the list of what moved is returned. An
// index that cannot be read for its submodules (git may read what cordon
// cannot) goes there itself: git then enters none. Call it once a run is
// over, with no process of it left.
//
// A submodule of the set is passed by when its entry is the same file as
// then, absent, or an empty directory (a placeholder): another run of the
// workspace at the same time can take the entry away (its own quarantine
// does), and this run put another in its place. P is reached without
// following a symlink, as git reaches it.
func (p *Protected) Quarantine() ([]string, error) { return p.readIndex().quarantine() }

// A QuarantineRead is what the index and the git directory held once a
// run was over ([Protected.ReadQuarantine]); [QuarantineRead.Notes]
// quarantines it. The reading moves nothing, so it can go on beside what
// must come before any move (a last look at the sandbox's mounts, which a
// moved entry would change); the moves look at each entry again.
type QuarantineRead struct {
	index     indexRead
	sequences []string // notes of the sequences the run left
}

// ReadQuarantine reads what [Protected.QuarantineNotes] would quarantine.
// Call it once every process of the run is gone.
func (p *Protected) ReadQuarantine() *QuarantineRead {
	return &QuarantineRead{index: p.readIndex(), sequences: p.sequencesLeft()}
}

// Notes quarantines what was read, as [Protected.QuarantineNotes] does.
func (q *QuarantineRead) Notes() []string {
	notes, err := q.index.quarantine()
	if err != nil {
		notes = append(notes, "after the run: "+err.Error())
	}
	return append(notes, q.sequences...)
}

// indexRead is the first part of [Protected.Quarantine]: the submodules
// the index names now, and why the index itself must go, if it must.
type indexRead struct {
	p       *Protected
	links   []string        // relative to the workspace, then the nested submodules
	known   map[string]bool // a submodule of the set, trusted
	why     string
	readErr error
}

func (p *Protected) readIndex() indexRead {
	q := indexRead{p: p}
	if p.index == "" {
		return q
	}
	// Read whatever its stat says: a tool's writes through a shared
	// mapping of the index change its change time once before writeback
	// (on tmpfs never), so an index that looks as it did can name a new
	// submodule.
	read, err := gitlinks(p.index, p.hashSize)
	if err != nil {
		q.readErr = err
		return q
	}
	links := p.inWorkspace(read)
	known := make(map[string]bool, len(p.gitlinks)+len(p.nested))
	for _, l := range p.gitlinks {
		known[l] = true
	}
	total, added := len(links), 0
	// Every directory on the way to a new gitlink is a pinned mount of
	// every later run: counted, not only the gitlinks.
	mounts := map[string]bool{}
	for _, l := range links {
		if known[l] {
			continue
		}
		added++
		for d := l; d != "" && !mounts[d]; {
			mounts[d] = true
			i := strings.LastIndexByte(d, '/')
			if i < 0 {
				break
			}
			d = d[:i]
		}
	}
	// The submodules' own submodules: their indexes no run could write,
	// their entries checked as those of the root's.
	for _, l := range p.nested {
		known[l] = !p.distrusted[l]
	}
	links = append(slices.Clip(links), p.nested...)
	if len(links) == 0 {
		return q
	}
	// Why the index itself must go, if it must: it names more than later
	// runs can mount, or a submodule by a path cordon does not follow, or
	// one whose entry cannot be moved. The entries that can be reached
	// are moved all the same: git reset makes an index from HEAD, where a
	// commit of the run's may name them too.
	why := ""
	if added > maxAddedGitlinks || len(mounts) > 2*maxAddedGitlinks || total > maxGitlinks {
		// Each is a read-only mount point of every later run: thousands
		// would keep them from starting.
		why = fmt.Sprintf("it names %d submodules it did not name before the run (%d in all, %d new directories on their way), over the %d a run may add or the %d an index may name", added, total, len(mounts), maxAddedGitlinks, maxGitlinks)
	}
	q.links, q.known, q.why = links, known, why
	return q
}

// quarantine moves what q found: the second part of [Protected.Quarantine].
func (q indexRead) quarantine() ([]string, error) {
	p, links, known, why := q.p, q.links, q.known, q.why
	if q.readErr != nil {
		return p.quarantineIndex(fmt.Sprintf("it cannot be read for the submodules git would enter (%v)", q.readErr))
	}
	if len(links) == 0 {
		return nil, nil
	}
	root, err := dirfd.Open(p.root)
	if err != nil {
		return nil, fmt.Errorf("cannot open the workspace for the submodules git enters: %w", err)
	}
	defer root.Close()
	var moved []string
	var errs []error
	stamp := ""
	for _, rel := range links {
		entry, err := p.entryOf(root, rel, known[rel])
		if err != nil {
			if !known[rel] && why == "" {
				// A path git resolves in ways this does not follow (a
				// symlink on the way, "..", an absolute path; git writes
				// none of them): no submodule is entered where the index
				// cannot be followed.
				why = fmt.Sprintf("it names the submodule %q by a path git resolves and cordon does not follow (%v)", rel, err)
			}
			continue // a known one as it was: the user's own
		}
		if entry == nil {
			continue
		}
		if stamp == "" {
			stamp = time.Now().UTC().Format("20060102T150405.000000000Z")
		}
		dest, err := p.moveEntry(entry, stamp, rel)
		entry.Close()
		if err != nil {
			// The entry stays: then the index that names it goes.
			if why == "" {
				why = fmt.Sprintf("%s/.git, a repository the run entered in it as a submodule, could not be moved (%v)", rel, err)
			}
			errs = append(errs, err)
			continue
		}
		moved = append(moved, fmt.Sprintf("moved %s/.git — a repository that became a submodule during the run (the run entered it in the index, or put it in place of the one there; or a git on the host did meanwhile), which git at the workspace root would enter and obey — to %s", rel, strings.TrimPrefix(dest, p.root+"/")))
	}
	if why != "" {
		notes, ierr := p.quarantineIndex(why)
		return append(moved, notes...), errors.Join(append(errs, ierr)...)
	}
	return moved, errors.Join(errs...)
}

// inWorkspace returns the index's gitlink paths, relative to the
// workspace, that lie in it, unchanged otherwise: names the index's work
// tree (indexTop) holds outside the workspace are dropped (no run could
// have written there), the rest kept as git would use them — a name git
// itself would never write ("..", an absolute path) included.
func (p *Protected) inWorkspace(links []string) []string {
	prefix := ""
	if p.indexTop != p.root {
		r, err := filepath.Rel(p.indexTop, p.root)
		if err != nil {
			return nil
		}
		prefix = filepath.ToSlash(r) + "/"
	}
	var out []string
	for _, l := range links {
		if strings.HasPrefix(l, "/") || prefix == "" {
			out = append(out, l)
		} else if rel, ok := strings.CutPrefix(l, prefix); ok {
			out = append(out, rel)
		}
	}
	return out
}

// entryOf returns P (rel), opened without following a symlink, when its
// .git is one git would enter and the run may have put there: nil when
// there is none, or when P is a submodule of the set (known) whose entry
// is the file it was, or a placeholder. An error means P cannot be
// reached as a plain path: "..", an absolute path, a symlink on the way;
// a P that is absent is none.
func (p *Protected) entryOf(root *dirfd.Dir, rel string, known bool) (*dirfd.Dir, error) {
	if strings.HasPrefix(rel, "/") || rel == "" {
		return nil, errors.New("not a path inside the work tree")
	}
	parent, err := root.OpenPath(rel, false, 0)
	if errors.Is(err, unix.ENOENT) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var st unix.Stat_t
	if err := unix.Fstatat(parent.Fd(), ".git", &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		parent.Close()
		return nil, nil
	}
	if known {
		id, had := p.entries[rel]
		same := had && id.dev == uint64(st.Dev) && id.ino == st.Ino
		empty := false
		if st.Mode&unix.S_IFMT == unix.S_IFDIR {
			empty, _ = dirfd.IsEmpty(parent.Fd(), ".git", unix.AT_SYMLINK_NOFOLLOW)
		}
		if same || empty {
			parent.Close()
			return nil, nil
		}
	}
	return parent, nil
}

// moveEntry moves P/.git (P open as parent) to the quarantine of stamp,
// and returns where it went: the quarantine, or, where that cannot be
// made or reached (a full disk, another file system under the
// workspace), beside itself (P/.git.quarantined-<stamp>).
func (p *Protected) moveEntry(parent *dirfd.Dir, stamp, rel string) (string, error) {
	// A tool owns what it made, and may have taken permissions away from
	// P (rename needs write and search on it) or from P/.git (moving a
	// directory to another parent rewrites its ".."): given back first.
	userWritable(parent.Fd())
	if fd, err := openNoFollow(parent.Fd(), ".git"); err == nil {
		userWritable(fd)
		unix.Close(fd)
	}
	dest, err := p.quarantineDir(stamp, rel)
	if err == nil {
		var d *dirfd.Dir
		if d, err = dirfd.Open(dest); err == nil {
			err = parent.Rename(".git", d, ".git")
			d.Close()
		}
		if err == nil {
			return dest, nil
		}
	}
	beside := ".git.quarantined-" + stamp
	if err2 := parent.Rename(".git", parent, beside); err2 != nil {
		return "", fmt.Errorf("cannot move %s/.git out of git's way: %w", rel, errors.Join(err, err2))
	}
	return filepath.Join(parent.Name(), beside), nil
}

// quarantineIndex moves an index inside the workspace that cannot be read
// for its submodules into the quarantine: git then reads none, and enters
// no submodule. (One outside the workspace no run could write.)
func (p *Protected) quarantineIndex(why string) ([]string, error) {
	rel, err := filepath.Rel(p.root, p.index)
	if err != nil || rel == "." || strings.HasPrefix(rel, "../") {
		return nil, fmt.Errorf("%s: %s", p.index, why)
	}
	if fd, err := openNoFollow(unix.AT_FDCWD, filepath.Dir(p.index)); err == nil {
		userWritable(fd) // a tool may have made .git unwritable, unreadable, unsearchable
		unix.Close(fd)
	}
	note := func(what string) []string {
		return []string{fmt.Sprintf("the git index %s %s — %s; git reads none now (git reset makes one from HEAD: first look at the submodules HEAD names, git ls-tree -r HEAD | grep ^160000, which a commit of the run's may have added)", filepath.ToSlash(rel), what, why)}
	}
	stamp := time.Now().UTC().Format("20060102T150405.000000000Z")
	dest, err := p.quarantineDir(stamp, filepath.ToSlash(filepath.Dir(rel)))
	if err == nil {
		if err = os.Rename(p.index, filepath.Join(dest, filepath.Base(rel))); err == nil {
			return note("was moved to " + strings.TrimPrefix(dest, p.root+"/")), nil
		}
	}
	// Beside it, where git reads no index (the same directory: the same
	// file system).
	beside := p.index + ".quarantined-" + stamp
	err2 := os.Rename(p.index, beside)
	if err2 == nil {
		return note("was renamed to " + strings.TrimPrefix(beside, p.root+"/")), nil
	}
	// At last removed (unlinking needs no space, and changes no other
	// name of the file): git reads none, and git reset makes one.
	if err3 := unix.Unlink(p.index); err3 != nil && !errors.Is(err3, unix.ENOENT) {
		return nil, fmt.Errorf("%s: %s, and it can be neither moved out of git's way nor removed: %w", p.index, why, errors.Join(err, err2, err3))
	}
	return note(fmt.Sprintf("was removed (it could not be moved: %v)", errors.Join(err, err2))), nil
}

// userWritable gives the owner of the file fd (opened by openNoFollow)
// write permission, and of a directory read, write and search: a tool
// that took search away from .git hid the index from cordon (and from
// git, until the user gives it back).
func userWritable(fd int) {
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil {
		return
	}
	want := uint32(unix.S_IWUSR)
	if st.Mode&unix.S_IFMT == unix.S_IFDIR {
		want = unix.S_IRWXU
	}
	if uint32(st.Mode)&want != want {
		chmodFd(fd, uint32(st.Mode)&0o7777|want)
	}
}

// QuarantineNotes calls [Protected.Quarantine] and returns what it did as
// the notes of a result, a failure last ("after the run: ..."). Every
// front end and substrate that lets a run write calls it once the run is
// over.
func (p *Protected) QuarantineNotes() []string { return p.ReadQuarantine().Notes() }

// sequenceDirs are the directories of a git directory that hold a rebase,
// am, cherry-pick or revert in progress: its continue (git rebase
// --continue, git cherry-pick --continue) runs the exec lines of the
// to-do list in them. (A rebase cannot start in a sandbox — HEAD is
// read-only — but a tool can write the files.)
var sequenceDirs = []string{"rebase-merge", "rebase-apply", "sequencer"}

// sequencesIn returns the sequenceDirs present in gitdir.
func sequencesIn(gitdir string) []string {
	var in []string
	for _, d := range sequenceDirs {
		if _, err := os.Lstat(filepath.Join(gitdir, d)); err == nil {
			in = append(in, d)
		}
	}
	return in
}

// sequencesLeft notes each sequence a run left in the git directory that
// was not there before it: what its continue would run is the tool's.
func (p *Protected) sequencesLeft() []string {
	if p.gitdir == "" {
		return nil
	}
	var notes []string
	for _, d := range sequencesIn(p.gitdir) {
		if !slices.Contains(p.sequences, d) {
			notes = append(notes, fmt.Sprintf("the run left %s in the git directory (%s): a rebase, am, cherry-pick or revert in progress whose --continue runs the exec lines of its to-do list, which the run wrote; read it before you continue, or --abort", d, filepath.Join(p.gitdir, d)))
		}
	}
	return notes
}

// quarantineDir makes <root>/<registry>/quarantine/<stamp>/<rel>, one
// component at a time, never following a symlink.
func (p *Protected) quarantineDir(stamp, rel string) (string, error) {
	root, err := dirfd.Open(p.root)
	if err != nil {
		return "", err
	}
	defer root.Close()
	d, err := root.OpenPath(p.registry+"/quarantine/"+stamp+"/"+rel, true, 0o700)
	if err != nil {
		return "", fmt.Errorf("cannot make the quarantine: %w", err)
	}
	defer d.Close()
	return d.Name(), nil
}
