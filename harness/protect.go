package harness

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/cordon-run/cordon/internal/dirfd"
	"github.com/cordon-run/cordon/internal/gitconf"
	"github.com/cordon-run/cordon/refusal"
)

// Mode is how a protected path is held.
type Mode int

const (
	// ReadOnly: no write, create, remove or rename of the path or anything
	// below it. An absent path is masked (a placeholder bound read-only)
	// for native commands and refused to file and wasm tools.
	ReadOnly Mode = iota
	// Pinned: a directory that must stay where it is (a git directory, or
	// a directory on the way to a read-only path): it cannot be removed,
	// renamed or replaced, while what is inside it stays writable.
	Pinned
)

func (m Mode) String() string {
	if m == Pinned {
		return "pinned"
	}
	return "read-only"
}

// Path is one protected path of a workspace.
type Path struct {
	Rel     string // relative to the workspace, clean, '/'-separated
	Dir     bool   // a directory (an absent one is masked by an empty directory)
	Mode    Mode
	Reason  string // why it is protected, for refusals and grants
	Content string // what an absent file's placeholder holds (it means to git what the absence meant)
	// MaskDir: an absent file is masked by an empty directory rather than
	// an empty file — nothing can be created there either, and git ignores
	// an empty directory where it would list an untracked file. Paths git
	// reads as files are masked by files.
	MaskDir bool
	// Keep: a placeholder made for it may stay after the run — it is
	// inside a git directory, where git reads it as it read the absence,
	// and no one lists it.
	Keep bool
}

// Protected is the protected-path policy of one workspace, as found when a
// run (or a file tool) starts: the harness state directories and every
// write-later path, present or absent. Build it with [Config.Protect].
type Protected struct {
	cfg   Config // the configuration it was found by
	root  string
	state []string
	paths []Path
	// The root repository's index and the submodules it named when the
	// set was found ([Protected.Quarantine]).
	index    string
	indexTop string // the work tree its entries' paths are relative to
	hashSize int
	gitlinks []string // relative to the workspace
	nested   []string // the submodules of those, and theirs
	// distrusted are nested ones another run going on did not trust
	// ([Protected.TrustOnly]): new ones after the run.
	distrusted map[string]bool
	entries    map[string]entryID // the P/.git of both, where there was one
	gitdir     string             // the git directory of that repository
	sequences  []string           // the sequenceDirs in it then
	registry   string
	// seen is what each path of the set was as Protect looked for
	// symlinks on the way to it ([Protected.Seen]).
	seen map[string]kind
}

// Root returns the canonical workspace the set belongs to.
func (p *Protected) Root() string { return p.root }

// State returns the harness state directory names.
func (p *Protected) State() []string { return slices.Clone(p.state) }

// Paths returns the write-later paths and the directories pinned on the way
// to them, sorted so that a directory comes before what is inside it.
func (p *Protected) Paths() []Path { return slices.Clone(p.paths) }

// Seen reports what Protect found at rel, a path of the set, as it looked
// for symlinks on the way to it: whether something was there, and whether
// that was a directory (never a symlink: Protect refuses those). ok is
// false when it cannot say; look again then. It is what was there when
// the set was found: a caller that changed the workspace since (made a
// placeholder on the way) looks again.
func (p *Protected) Seen(rel string) (exists, dir, ok bool) {
	switch p.seen[rel] {
	case kindAbsent:
		return false, false, true
	case kindDir:
		return true, true, true
	case kindOther:
		return true, false, true
	}
	return false, false, false
}

// Verdict is what [Protected.Check] says of a path.
type Verdict int

const (
	// Open: an ordinary path of the workspace.
	Open Verdict = iota
	// InState: harness state (no access for file and wasm tools).
	InState
	// InWriteLater: a write-later path, or inside one (read-only).
	InWriteLater
	// IsPinned: a directory that must stay (no remove or rename).
	IsPinned
)

// Check classifies rel, a clean workspace-relative path ("" for the
// workspace itself), comparing names without regard to case. It returns
// the verdict, the protected name or path it falls under, and why.
func (p *Protected) Check(rel string) (Verdict, string, string) {
	if rel == "" || rel == "." {
		return IsPinned, "", "the workspace itself"
	}
	first, _, _ := strings.Cut(rel, "/")
	for _, h := range p.state {
		if strings.EqualFold(first, h) {
			return InState, h, "harness state"
		}
	}
	verdict, name, why := Open, "", ""
	for _, q := range p.paths {
		switch {
		case strings.EqualFold(rel, q.Rel):
			if q.Mode == ReadOnly {
				return InWriteLater, q.Rel, q.Reason
			}
			verdict, name, why = IsPinned, q.Rel, q.Reason
		case q.Mode == ReadOnly && q.Dir && hasPrefixFold(rel, q.Rel+"/"):
			return InWriteLater, q.Rel, q.Reason
		}
	}
	return verdict, name, why
}

func hasPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix)
}

// String lists the set for messages and evidence.
func (p *Protected) String() string {
	var ro, pinned []string
	for _, q := range p.paths {
		name := q.Rel
		if q.Dir {
			name += "/"
		}
		if q.Mode == ReadOnly {
			ro = append(ro, name)
		} else {
			pinned = append(pinned, name)
		}
	}
	return fmt.Sprintf("harness state %s; read-only %s; pinned %s",
		strings.Join(p.state, ","), strings.Join(ro, ","), strings.Join(pinned, ","))
}

// Reasons for the protected paths.
const (
	whyConfig        = "git reads its configuration from it"
	whyHooks         = "git runs hooks from it"
	whyCommondir     = "it moves git to another git directory's configuration and hooks"
	whyNested        = "it holds the git directories of submodules or worktrees, each with configuration and hooks of its own"
	whyHead          = "it keeps the git directory valid, so that git does not look elsewhere for one"
	whyGitPin        = "the git directory must stay valid and in place"
	whyNoGit         = "the workspace has no git directory: one a tool created would be obeyed by the host's git"
	whyBadGit        = "it is not a valid git directory: bound read-only whole, so that no tool makes it one"
	whyRootHead      = "it keeps the workspace root from taking the shape of a git directory"
	whyGitfile       = "it names the git directory git uses"
	whyGitfileTarget = "the .git file names it as the git directory: a tool must not make it one"
	whySubmoduleDir  = "a submodule's git directory: git status at the workspace root enters the submodule, reads its index and obeys its configuration"
	whyRemotes       = "it holds remote configuration git obeys (URLs it pushes to and fetches from)"
	whyInclude       = "git's configuration includes it"
	whyHooksPath     = "git's core.hooksPath names it: git runs hooks from it"
	whyHookConfig    = "a git hook of the repository runs what it configures"
	whyAncestor      = "a protected path is inside it"
	whyStatic        = "an editor, agent or shell runs commands from it later"
)

// hookManagerConfigs are the configuration files of git-hook managers:
// protected when the repository has a hook installed.
var hookManagerConfigs = []string{
	".pre-commit-config.yaml", ".pre-commit-config.yml",
	"lefthook.yml", ".lefthook.yml", "lefthook.yaml", ".lefthook.yaml", "lefthook-local.yml", ".lefthook-local.yml",
	".overcommit.yml", ".husky/",
}

// maxGitDirs bounds the git directories one workspace's protection follows
// (a gitfile, commondir links, the enclosing repository).
const maxGitDirs = 8

// Protect checks that root (an absolute, canonical directory) may be a
// workspace and returns its protected set. It reads, never writes: the
// git directory (or the gitfile naming it, or an enclosing repository's),
// git's configuration of that repository with every file it includes, and
// the system and global git configuration, to find what inside the
// workspace git would read or run later. An error is a refusal: the
// workspace holds cordon's own trusted state ([refusal.WorkspaceRefused]),
// or a protected path cannot be protected ([refusal.ProtectedPath]: a
// symlink, a configuration git itself could not read).
func (c Config) Protect(root string) (*Protected, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if err := c.CheckWorkspace(root); err != nil {
		return nil, err
	}
	pr := &protector{cfg: c, root: root, seen: map[string]bool{}}
	static := c.writeLater
	if isHome(root, c.home) {
		static = appendNew(static, homeWriteLater)
	}
	for _, w := range static {
		rel, _ := cleanRel(w)
		// In a home, an absent start-up or configuration file is masked
		// by an empty file (what a shell or git reads as nothing);
		// elsewhere by an empty directory, which git does not list.
		pr.add(Path{Rel: rel, Dir: strings.HasSuffix(w, "/"), Reason: whyStatic, MaskDir: !slices.Contains(homeWriteLater, w)})
	}
	if err := pr.git(); err != nil {
		return nil, err
	}
	out := &Protected{cfg: c, root: root, state: slices.Clone(c.state),
		index: pr.indexFile, indexTop: pr.indexTop, hashSize: pr.hashSize,
		gitlinks: pr.gitlinks, nested: pr.nested, entries: pr.entries, gitdir: pr.gitdir, sequences: pr.sequences, registry: c.RegistryDir(),
		seen: make(map[string]kind, len(pr.paths))}
	if err := pr.finish(out); err != nil {
		return nil, err
	}
	return out, nil
}

// finish completes the paths found into p's: each looked at for symlinks
// on the way to it, the targets of the links inside them and the
// directories on their way added, and looked at again; sorted, with what
// each was as it was looked at.
func (pr *protector) finish(p *Protected) error {
	// Looked at for symlinks first: a directory found absent has no
	// links to list.
	for _, q := range pr.paths {
		if err := pr.noSymlink(q.Rel); err != nil {
			return err
		}
	}
	pr.linkTargets()
	pr.pinAncestors()
	for _, q := range pr.paths {
		if err := pr.noSymlink(q.Rel); err != nil {
			return err
		}
	}
	sortPaths(pr.paths)
	p.paths = pr.paths
	for _, q := range pr.paths {
		if k, ok := pr.kinds[q.Rel]; ok {
			p.seen[q.Rel] = k
		}
	}
	return nil
}

// sortPaths sorts protected paths shallowest first, then by name: a
// directory comes before what is inside it.
func sortPaths(paths []Path) {
	slices.SortStableFunc(paths, func(a, b Path) int {
		if d := strings.Count(a.Rel, "/") - strings.Count(b.Rel, "/"); d != 0 {
			return d
		}
		return strings.Compare(a.Rel, b.Rel)
	})
}

// CheckWorkspace refuses a workspace that is, contains or lies inside
// cordon's per-user state or cache directory, or that is the file system
// root.
func (c Config) CheckWorkspace(root string) error {
	if root == "/" {
		return refusal.Errorf(refusal.WorkspaceRefused, "refusing workspace / — a workspace is one project directory, not the whole file system")
	}
	state, cache := c.resolvedDirs()
	for _, d := range []struct{ what, dir, canon string }{
		{"key store and run state", c.stateDir, state}, {"compiled-code cache", c.cacheDir, cache}} {
		canon := d.canon
		for _, dir := range []string{d.dir, canon} {
			if within(dir, root) || within(root, dir) {
				return refusal.Errorf(refusal.WorkspaceRefused,
					"refusing workspace %s — it overlaps cordon's %s %s, which no tool may reach; choose a project directory, or move the state with %s and %s",
					root, d.what, d.dir, EnvStateDir, EnvCacheDir)
			}
		}
	}
	return nil
}

// resolveExisting returns p with the symlinks of its longest existing
// prefix resolved and the rest joined on as spelled: where p leads, or
// will lead once it is created.
func resolveExisting(p string) string {
	rest := ""
	for cur := filepath.Clean(p); ; {
		if r, err := filepath.EvalSymlinks(cur); err == nil {
			return filepath.Join(r, rest)
		}
		parent := filepath.Dir(cur)
		if parent == cur {
			return p
		}
		rest = filepath.Join(filepath.Base(cur), rest)
		cur = parent
	}
}

// isHome reports whether root is a home directory: the caller's, root's,
// or one directly under /home. A shell, ssh and the user's PATH read from
// one.
func isHome(root, home string) bool {
	if home != "" && root == resolveExisting(home) {
		return true
	}
	return root == "/root" || filepath.Dir(root) == "/home"
}

// within reports whether p is dir or inside it (clean absolute paths).
func within(p, dir string) bool {
	return p == dir || dir == "/" || strings.HasPrefix(p, dir+"/")
}

type protector struct {
	cfg     Config
	root    string
	paths   []Path
	globals []*gitconf.Config // the system and global configuration, once read
	seen    map[string]bool   // git directories visited
	dirs    int
	kinds   map[string]kind // workspace-relative path → what it was
	// The root repository's index and its gitlinks, when the repository
	// is the workspace's own.
	indexFile string
	indexTop  string
	entries   map[string]entryID
	nested    []string
	gitdir    string
	sequences []string
	hashSize  int
	gitlinks  []string
}

// add records q unless a read-only directory already covers it; a
// read-only path replaces a pin of the same name.
func (pr *protector) add(q Path) {
	for i, o := range pr.paths {
		if o.Rel == q.Rel {
			if q.Mode == ReadOnly && o.Mode == Pinned {
				pr.paths[i] = q
			}
			return
		}
		if o.Mode == ReadOnly && o.Dir && strings.HasPrefix(q.Rel, o.Rel+"/") {
			return
		}
	}
	// A read-only directory covers what was recorded inside it.
	if q.Mode == ReadOnly && q.Dir {
		pr.paths = slices.DeleteFunc(pr.paths, func(o Path) bool { return strings.HasPrefix(o.Rel, q.Rel+"/") })
	}
	pr.paths = append(pr.paths, q)
}

// rel returns abs relative to the workspace, and whether it is inside.
func (pr *protector) rel(abs string) (string, bool) {
	abs = filepath.Clean(abs)
	if abs == pr.root {
		return "", true
	}
	if !strings.HasPrefix(abs, pr.root+"/") {
		return "", false
	}
	return filepath.ToSlash(abs[len(pr.root)+1:]), true
}

func (pr *protector) protectedErr(rel, format string, args ...any) error {
	return refusal.Errorf(refusal.ProtectedPath, "refusing to start in %s — %s %s; write-later paths must be protected before anything runs", pr.root, rel, fmt.Sprintf(format, args...))
}

// git finds the repository git would use at the workspace root and
// protects what it would read or run.
func (pr *protector) git() error {
	if err := pr.gitRoot(); err != nil {
		return err
	}
	// The root never takes the shape of a git directory: with HEAD
	// protected, it is not one, whatever happens to .git (made invalid,
	// or unreadable by a chmod of its owner) — unless it already is one.
	if !pr.seen[pr.root] {
		pr.add(Path{Rel: "HEAD", Reason: whyRootHead, MaskDir: true})
	}
	return nil
}

// gitRoot finds the repository git would use at the workspace root.
func (pr *protector) gitRoot() error {
	dotgit := filepath.Join(pr.root, ".git")
	fi, err := os.Lstat(dotgit)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		pr.add(Path{Rel: ".git", Dir: true, Reason: whyNoGit})
		if isGitDir(pr.root) {
			return pr.gitDir(pr.root, pr.root)
		}
		return pr.enclosing()
	case err != nil:
		return pr.protectedErr(".git", "cannot be inspected: %v", err)
	case fi.Mode()&fs.ModeSymlink != 0:
		return pr.protectedErr(".git", "is a symlink")
	case fi.Mode().IsRegular():
		pr.add(Path{Rel: ".git", Reason: whyGitfile})
		target, err := readGitfile(dotgit)
		if err != nil {
			return pr.protectedErr(".git", "is a gitfile that cannot be read: %v", err)
		}
		if rel, inside := pr.rel(target); inside {
			if isGitDir(target) {
				return pr.gitDir(target, pr.root)
			}
			// Named but not (yet) a git directory: git refuses to run
			// until it is one, so no tool may make it one.
			if rel != "" {
				pr.add(Path{Rel: rel, Dir: true, Reason: whyGitfileTarget})
			}
			return nil
		}
		if r, err := filepath.EvalSymlinks(target); err == nil {
			target = r
		}
		if !isGitDir(target) {
			return nil // outside and not a git directory: git refuses to run here
		}
		return pr.gitDir(target, pr.root)
	case fi.IsDir() && isGitDir(dotgit):
		return pr.gitDir(dotgit, pr.root)
	case fi.IsDir():
		pr.add(Path{Rel: ".git", Dir: true, Reason: whyBadGit})
		if isGitDir(pr.root) {
			return pr.gitDir(pr.root, pr.root)
		}
		return pr.enclosing()
	}
	return pr.protectedErr(".git", "is neither a directory nor a file")
}

// enclosing protects what the repository enclosing the workspace, if any,
// names inside it: git run at the workspace root would use that one.
func (pr *protector) enclosing() error {
	dir := filepath.Dir(pr.root)
	for range 128 {
		dotgit := filepath.Join(dir, ".git")
		if fi, err := os.Lstat(dotgit); err == nil {
			gitdir := dotgit
			if fi.Mode().IsRegular() {
				t, err := readGitfile(dotgit)
				if errors.Is(err, errLinkBeforeDotDot) {
					return pr.protectedErr(dotgit, "is a gitfile git follows where cordon cannot: %v", err)
				}
				if err == nil {
					gitdir = t
				}
			}
			if r, err := filepath.EvalSymlinks(gitdir); err == nil {
				gitdir = r
			}
			if isGitDir(gitdir) {
				if !pr.owned(dir, gitdir, dotgit) {
					return pr.globalConfig(pr.root) // git refuses it, and looks no further
				}
				return pr.gitDir(gitdir, dir)
			}
		}
		if isGitDir(dir) {
			if !pr.owned("", dir, "") {
				return pr.globalConfig(pr.root)
			}
			return pr.gitDir(dir, dir)
		}
		if dir == "/" {
			break
		}
		dir = filepath.Dir(dir)
	}
	return pr.globalConfig(pr.root)
}

// owned reports whether git would use the repository enclosing the
// workspace whose work tree is worktree ("" for a bare one), git
// directory gitdir and gitfile (a .git file, or ""): git refuses one that
// another user owns ("dubious ownership", setup.c's
// ensure_valid_ownership) unless safe.directory, in the system or global
// configuration, names it or is "*". Anyone can make /tmp/.git: such a
// repository is not the user's, and cordon neither protects nor moves
// anything for it.
func (pr *protector) owned(worktree, gitdir, gitfile string) bool {
	euid, sudo := uint32(os.Geteuid()), int64(-1)
	if euid == 0 {
		// git run as root through sudo also takes the sudoer's own.
		if v, err := strconv.ParseUint(os.Getenv("SUDO_UID"), 10, 32); err == nil {
			sudo = int64(v)
		}
	}
	ownedBy := func(p string) bool {
		var st unix.Stat_t
		return p == "" || unix.Stat(p, &st) == nil && (st.Uid == euid || int64(st.Uid) == sudo)
	}
	if ownedBy(gitfile) && ownedBy(worktree) && ownedBy(gitdir) {
		return true
	}
	path := worktree
	if path == "" {
		path = gitdir
	}
	if r, err := filepath.EvalSymlinks(path); err == nil {
		path = r
	}
	safe := false
	for _, cfg := range pr.earlyConfigs() {
		for _, e := range cfg.Entries {
			if e.Key != "safe.directory" {
				continue
			}
			switch v := strings.TrimSuffix(e.Value, "/"); {
			case e.Value == "":
				safe = false // an empty value resets the list
			case v == "*" || v == path:
				safe = true
			case strings.HasSuffix(v, "/*") && strings.HasPrefix(path+"/", strings.TrimSuffix(v, "*")):
				safe = true // git 2.46: a prefix
			}
		}
	}
	return safe
}

// earlyConfigs reads the configuration files git reads before it knows
// its repository: the system's and the user's (GIT_CONFIG_SYSTEM,
// GIT_CONFIG_GLOBAL, ~/.gitconfig, $XDG_CONFIG_HOME/git/config).
func (pr *protector) earlyConfigs() []*gitconf.Config {
	var all []*gitconf.Config
	for _, f := range pr.userConfigFiles() {
		if cfg, err := gitconf.Read(f, gitconf.Options{Home: pr.cfg.home}); err == nil {
			all = append(all, cfg)
		}
	}
	return all
}

// userConfigFiles returns the system's and the user's configuration files
// as git finds them: GIT_CONFIG_SYSTEM and GIT_CONFIG_GLOBAL name other
// files than /etc/gitconfig and ~/.gitconfig.
func (pr *protector) userConfigFiles() []string {
	files := []string{"/etc/gitconfig"}
	if f := os.Getenv("GIT_CONFIG_SYSTEM"); f != "" {
		files = []string{f}
	}
	if f := os.Getenv("GIT_CONFIG_GLOBAL"); f != "" {
		files = append(files, f)
	} else if pr.cfg.home != "" {
		files = append(files, filepath.Join(pr.cfg.home, ".gitconfig"))
		xdg := os.Getenv("XDG_CONFIG_HOME")
		if !filepath.IsAbs(xdg) {
			xdg = filepath.Join(pr.cfg.home, ".config")
		}
		files = append(files, filepath.Join(xdg, "git", "config"))
	}
	var abs []string
	for _, f := range files {
		if filepath.IsAbs(f) {
			abs = append(abs, f)
		}
	}
	return abs
}

// gitDir protects the git directory gitdir (absolute, valid), whose work
// tree is top: its own paths when it is inside the workspace, and what its
// configuration names inside the workspace wherever it is.
func (pr *protector) gitDir(gitdir, top string) error {
	if pr.seen[gitdir] {
		return nil
	}
	if pr.dirs++; pr.dirs > maxGitDirs {
		return pr.protectedErr(gitdir, "leads through more than %d git directories", maxGitDirs)
	}
	pr.seen[gitdir] = true
	if g, ok := pr.rel(gitdir); ok {
		join := func(name string) string {
			if g == "" {
				return name
			}
			return g + "/" + name
		}
		if g != "" {
			pr.add(Path{Rel: g, Dir: true, Mode: Pinned, Reason: whyGitPin})
		}
		keep := g != ""
		for _, q := range []Path{
			{Rel: join("config"), Reason: whyConfig, Keep: keep},
			{Rel: join("config.worktree"), Reason: whyConfig, Keep: keep},
			{Rel: join("commondir"), Reason: whyCommondir, Content: ".\n", Keep: keep},
			{Rel: join("hooks"), Dir: true, Reason: whyHooks, Keep: keep},
			{Rel: join("modules"), Dir: true, Reason: whyNested, Keep: keep},
			{Rel: join("worktrees"), Dir: true, Reason: whyNested, Keep: keep},
			{Rel: join("HEAD"), Reason: whyHead, Keep: keep},
			{Rel: join("remotes"), Dir: true, Reason: whyRemotes, Keep: keep},
			{Rel: join("branches"), Dir: true, Reason: whyRemotes, Keep: keep},
			{Rel: join("objects"), Dir: true, Mode: Pinned, Reason: whyGitPin},
			{Rel: join("refs"), Dir: true, Mode: Pinned, Reason: whyGitPin},
		} {
			pr.add(q)
		}
	}
	// The first repository found is the one git uses at the workspace
	// root: the workspace's own, or the one enclosing it, whose
	// submodules inside the workspace git enters as well.
	if pr.indexFile == "" {
		if err := pr.submodules(gitdir, top); err != nil {
			return err
		}
	}
	// commondir moves the configuration and hooks to another directory.
	if common := commonDir(gitdir); filepath.Clean(common) != filepath.Clean(gitdir) {
		if r, err := filepath.EvalSymlinks(common); err == nil && isGitDir(r) {
			if err := pr.gitDir(r, top); err != nil {
				return err
			}
		}
	}
	if err := pr.config(gitdir, top); err != nil {
		return err
	}
	return pr.globalConfig(top)
}

// noSymlink refuses a protected path that is a symlink, or has one on the
// way: it could not be bound read-only where it points, and a write
// through it would change what the host reads by its name. Each component
// is looked at once per Protect.
func (pr *protector) noSymlink(rel string) error {
	if pr.kinds == nil {
		pr.kinds = map[string]kind{}
	}
	cur := ""
	for _, c := range strings.Split(rel, "/") {
		if cur == "" {
			cur = c
		} else {
			cur += "/" + c
		}
		k, ok := pr.kinds[cur]
		if !ok {
			k = kindOf(filepath.Join(pr.root, cur))
			pr.kinds[cur] = k
		}
		switch k {
		case kindAbsent:
			pr.kinds[rel] = kindAbsent
			return nil // absent from here on: masked
		case kindUnknown:
			return nil // not to be looked at: nothing to bind through
		case kindLink:
			what := "is a symlink"
			if cur != rel {
				what = "has a symlink on the way (" + cur + ")"
			}
			return pr.protectedErr(rel, "%s", what)
		}
	}
	return nil
}

// kind is what a path of the workspace was when Protect looked at it.
type kind uint8

const (
	kindUnknown kind = iota // lstat failed, not for its absence
	kindAbsent
	kindLink
	kindDir
	kindOther // a file, or anything else that is no directory or symlink
)

// kindOf looks at path, not following a symlink.
func kindOf(path string) kind {
	fi, err := os.Lstat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return kindAbsent
	case err != nil:
		return kindUnknown
	case fi.Mode()&fs.ModeSymlink != 0:
		return kindLink
	case fi.IsDir():
		return kindDir
	}
	return kindOther
}

// config reads gitdir's configuration (and what it includes) and protects
// every file it reads, the hooks directory it names and the programs it
// runs, where they are inside the workspace. top is the work tree, against
// which git resolves relative program and hook paths.
func (pr *protector) config(gitdir, top string) error {
	opt := gitconf.Options{Home: pr.cfg.home}
	var all []*gitconf.Config
	for _, name := range []string{"config", "config.worktree"} {
		cfg, err := gitconf.Read(filepath.Join(gitdir, name), opt)
		if err != nil {
			return refusal.Errorf(refusal.ProtectedPath, "refusing to start in %s — cannot read git's configuration to learn what it runs later: %w", pr.root, err)
		}
		all = append(all, cfg)
	}
	return pr.protectConfig(all, top, filepath.Join(gitdir, "hooks"))
}

// globalConfig protects what the system and global git configuration name
// inside the workspace, for the work tree top: its relative paths
// (core.hooksPath, programs) are relative to the top git runs in — the
// root's, and each submodule's when git enters it. The files are read once
// per Protect. A file that cannot be parsed is git's problem (it refuses
// to run), not a route into the workspace: it is skipped.
func (pr *protector) globalConfig(top string) error {
	key := "\x00global\x00" + top
	if pr.seen[key] {
		return nil
	}
	pr.seen[key] = true
	if pr.globals == nil {
		pr.globals = []*gitconf.Config{}
		opt := gitconf.Options{Home: pr.cfg.home}
		for _, f := range pr.userConfigFiles() {
			cfg, err := gitconf.Read(f, opt)
			if err == nil {
				pr.globals = append(pr.globals, cfg)
				continue
			}
			// Unreadable: git refuses to run. But a file inside the
			// workspace is the workspace's, and must stay as it is.
			pr.protectFileAt(f, whyInclude)
		}
	}
	return pr.protectConfig(pr.globals, top, "")
}

func (pr *protector) protectConfig(all []*gitconf.Config, top, defaultHooks string) error {
	protectFile := func(abs, why string) error {
		pr.protectFileAt(abs, why)
		return nil
	}
	hooks := defaultHooks
	for _, cfg := range all {
		for _, f := range cfg.Files {
			if err := protectFile(f, whyInclude); err != nil {
				return err
			}
		}
		if hp, ok := cfg.HooksPath(); ok && hp != "" {
			hooks = pr.resolve(hp, top)
			if rel, ok := pr.rel(hooks); ok && rel != "" {
				pr.add(Path{Rel: rel, Dir: true, Reason: whyHooksPath})
			}
		}
		for _, e := range cfg.Commands() {
			for i, word := range commandWords(e.Value) {
				switch {
				case i == 0 && !strings.Contains(word, "/"):
					continue // looked up in PATH
				case i > 0 && strings.HasPrefix(word, "-"):
					continue // an option
				case i > 0 && !strings.Contains(word, "/"):
					// An argument naming a file at the top: the script
					// "sh fsmon.sh" runs.
					if fi, err := os.Lstat(filepath.Join(top, word)); err != nil || !fi.Mode().IsRegular() {
						continue
					}
				}
				if err := protectFile(pr.resolve(word, top), "git runs it ("+e.Key+")"); err != nil {
					return err
				}
			}
		}
	}
	if hooks != "" && hasHooks(hooks) {
		for _, name := range hookManagerConfigs {
			abs := filepath.Join(top, strings.TrimSuffix(name, "/"))
			if rel, ok := pr.rel(abs); ok && rel != "" {
				pr.add(Path{Rel: rel, Dir: strings.HasSuffix(name, "/"), Reason: whyHookConfig})
			}
		}
	}
	return nil
}

// protectFileAt protects the file abs, read by git later, when it is in
// the workspace.
func (pr *protector) protectFileAt(abs, why string) {
	rel, ok := pr.rel(abs)
	if !ok {
		rel, ok = pr.rel(resolveExisting(abs)) // reached through a link outside
	}
	if ok && rel != "" {
		pr.add(Path{Rel: rel, Reason: why})
	}
}

// resolve makes a path from git's configuration absolute: "~/" is the
// home directory, a relative path is relative to the work tree.
func (pr *protector) resolve(p, top string) string {
	switch {
	case p == "~" || strings.HasPrefix(p, "~/"):
		if pr.cfg.home == "" {
			return ""
		}
		p = filepath.Join(pr.cfg.home, strings.TrimPrefix(p, "~"))
	case !filepath.IsAbs(p):
		p = filepath.Join(top, p)
	}
	p = filepath.Clean(p)
	if _, inside := pr.rel(p); inside {
		// Kept as git spells it: the names on the way are what git will
		// follow later, so they are protected (and refused as symlinks),
		// not only where they lead today.
		return p
	}
	// Outside the workspace as spelled (a top that is a symlink, a path
	// through a link on the host): where it leads, or will once created.
	return resolveExisting(p)
}

// commandWords splits a configured command into its words — the program
// first, without an alias's "!" — as far as the shell's quotes go: what
// git runs, and the files it hands them (a script run through "sh").
// Words after a shell operator (;, |, &&, ...) are words too.
func commandWords(v string) []string {
	v = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), "!"))
	var words []string
	var cur strings.Builder
	quote := byte(0)
	flush := func() {
		if cur.Len() > 0 {
			words = append(words, cur.String())
			cur.Reset()
		}
	}
	for i := 0; i < len(v); i++ {
		c := v[i]
		switch {
		case quote != 0 && c == quote:
			quote = 0
		case quote != 0:
			cur.WriteByte(c)
		case c == '"' || c == '\'':
			quote = c
		case strings.IndexByte(" \t;|&<>()", c) >= 0:
			flush()
		default:
			cur.WriteByte(c)
		}
	}
	flush()
	return words
}

// hasHooks reports whether dir holds a hook git would run: a regular file
// that is not one of git's ".sample" files.
func hasHooks(dir string) bool {
	entries, err := dirfd.ReadEntries(unix.AT_FDCWD, dir, 0)
	if err != nil {
		return false
	}
	for _, e := range entries {
		if !strings.HasSuffix(e.Name, ".sample") && !e.IsDir() {
			return true
		}
	}
	return false
}

// maxScan bounds the entries linkTargets looks at in one protected
// directory tree.
const maxScan = 2000

// linkTargets protects what a symlink inside a read-only directory points
// at in the workspace (a hook linked to scripts/pre-commit, settings
// linked to a shared file): the host follows the link later, so its target
// is as much a write-later path as the link.
func (pr *protector) linkTargets() {
	seen := 0
	var walk func(rel string, depth int)
	walk = func(rel string, depth int) {
		entries, err := dirfd.ReadEntries(unix.AT_FDCWD, filepath.Join(pr.root, rel), 0)
		if err != nil || depth > 6 {
			return
		}
		for _, e := range entries {
			if seen++; seen > maxScan {
				return
			}
			child := rel + "/" + e.Name
			switch {
			case e.Type == fs.ModeSymlink:
				target, err := os.Readlink(filepath.Join(pr.root, child))
				if err != nil {
					continue
				}
				if !filepath.IsAbs(target) {
					target = filepath.Join(pr.root, rel, target)
				}
				target = filepath.Clean(target)
				if trel, inside := pr.rel(target); inside && trel != "" {
					fi, err := os.Stat(target)
					pr.add(Path{Rel: trel, Dir: err == nil && fi.IsDir(), Reason: "a symlink in a protected directory (" + child + ") points at it"})
				}
			case e.IsDir():
				walk(child, depth+1)
			}
		}
	}
	for _, q := range slices.Clone(pr.paths) {
		if q.Mode == ReadOnly && q.Dir && pr.kinds[q.Rel] != kindAbsent {
			walk(q.Rel, 0)
		}
	}
}

// pinAncestors pins every directory on the way to a read-only path.
func (pr *protector) pinAncestors() {
	for _, q := range slices.Clone(pr.paths) {
		if q.Mode != ReadOnly {
			continue
		}
		for d := q.Rel; strings.Contains(d, "/"); {
			d = d[:strings.LastIndexByte(d, '/')]
			pr.add(Path{Rel: d, Dir: true, Mode: Pinned, Reason: whyAncestor})
		}
	}
}

// isGitDir reports whether dir has the shape git looks for in a git
// directory: a HEAD that names a ref or a commit, and objects and refs
// directories.
func isGitDir(dir string) bool {
	head := filepath.Join(dir, "HEAD")
	fi, err := os.Lstat(head)
	if err != nil {
		return false
	}
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		t, err := os.Readlink(head)
		if err != nil || !strings.HasPrefix(t, "refs/") {
			return false
		}
	case fi.Mode().IsRegular():
		data, err := readSmall(head)
		if err != nil {
			return false
		}
		s := strings.TrimSpace(string(data))
		if !strings.HasPrefix(s, "ref:") && !isHex(s) {
			return false
		}
	default:
		return false
	}
	// objects and refs are the common directory's when commondir names
	// one (a linked worktree's git directory).
	common := commonDir(dir)
	for _, sub := range []string{"objects", "refs"} {
		if st, err := os.Stat(filepath.Join(common, sub)); err != nil || !st.IsDir() {
			return false
		}
	}
	return true
}

func isHex(s string) bool {
	if len(s) != 40 && len(s) != 64 {
		return false
	}
	for _, c := range s {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// readGitfile returns the git directory a gitfile names, absolute (a
// relative one is from the gitfile's own directory, as git takes it).
func readGitfile(p string) (string, error) {
	data, err := readSmall(p)
	if err != nil {
		return "", err
	}
	line, _, _ := strings.Cut(string(data), "\n")
	target, ok := strings.CutPrefix(strings.TrimSpace(line), "gitdir:")
	target = strings.TrimSpace(target)
	if !ok || target == "" {
		return "", errors.New(`it does not start with "gitdir: "`)
	}
	raw := target
	if !filepath.IsAbs(raw) {
		raw = filepath.Dir(p) + "/" + raw // as git: from the gitfile's directory
	}
	if err := noLinkBeforeDotDot(raw); err != nil {
		return "", err
	}
	return filepath.Clean(raw), nil
}

// errLinkBeforeDotDot: a gitfile's target has ".." after a symlink. The
// kernel resolves the ".." from the link's target, where git then finds
// the git directory, while the path cleaned as text names another.
var errLinkBeforeDotDot = errors.New(`its target has ".." after a symlink: the directory git uses is not the one its text names`)

// noLinkBeforeDotDot refuses the path p when a ".." in it follows a
// component that is a symlink.
func noLinkBeforeDotDot(p string) error {
	if !slices.Contains(strings.Split(p, "/"), "..") {
		return nil
	}
	cur, link := "/", false
	for _, c := range strings.Split(p, "/") {
		switch c {
		case "", ".":
		case "..":
			if link {
				return errLinkBeforeDotDot
			}
			cur = filepath.Dir(cur)
		default:
			cur = filepath.Join(cur, c)
			if fi, err := os.Lstat(cur); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
				link = true
			}
		}
	}
	return nil
}

// readSmall reads at most 4 KiB of a regular file.
func readSmall(p string) ([]byte, error) { return dirfd.ReadSmall(unix.AT_FDCWD, p, 0, 4096) }
