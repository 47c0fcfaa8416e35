package bwrap

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cordon-run/cordon/harness"
	"github.com/cordon-run/cordon/internal/mountinfo"
	"github.com/cordon-run/cordon/internal/placeholder"
	"github.com/cordon-run/cordon/internal/userdir"
	"github.com/cordon-run/cordon/refusal"
)

// TrustedProgram resolves a program cordon runs on the host for a
// sandbox (bubblewrap, an OCI runtime) and returns the path to run, as
// trustedProgram does for bwrap, and refuses it too where the workspace
// exposes it through a mount ([exposes]); a refusal is an
// [ErrUnavailable]. Its message names that program, not bubblewrap.
func TrustedProgram(bin, ws string, h harness.Config) (string, error) {
	real, err := trustedProgram(bin, ws, h)
	if err == nil {
		_, err = exposes(real, ws)
	}
	var e *Error
	if errors.As(err, &e) && e.Cause != nil {
		return "", refusal.Errorf(refusal.SandboxUnavailable, "%v", e.Cause)
	}
	return real, err
}

// trustedProgram resolves the bwrap program bin and returns the path to
// run: the resolved one, so that no link is followed between the check and
// the exec. It refuses a program that someone other than this user and
// root could have put there, since cordon runs it on the host:
//
//   - one inside the workspace ws, by its path or by its directory (a
//     bind mount of a directory above the program is that directory), or
//     inside any directory that has been a cordon workspace — one this
//     user's state directory has a record of runs for, or that holds
//     harness state (of h, or the default names): a sandboxed command
//     could have written it;
//   - one that is, or has a directory above it that is, owned by another
//     user than root and this one, or writable by group or others (a
//     sticky directory, such as /tmp, excepted: only the owner of an entry
//     may replace it there, and that owner is checked next).
func trustedProgram(bin, ws string, h harness.Config) (string, error) {
	return checkProgram(bin, ws, h, true)
}

// TrustedOwner resolves a program cordon runs as itself — the full binary
// beside its front end — and returns the path to run, a refusal being a
// SandboxUnavailable. It refuses one that someone other than root and this
// user could have put there, as [TrustedProgram] does, but not one in a
// directory that has been a workspace: it lies beside the cordon the user
// runs, and a sandboxed command that could write one could write the
// other.
func TrustedOwner(bin string) (string, error) {
	real, err := checkProgram(bin, "", harness.Config{}, false)
	var e *Error
	if errors.As(err, &e) && e.Cause != nil {
		return "", refusal.Errorf(refusal.SandboxUnavailable, "%v", e.Cause)
	}
	return real, err
}

// checkProgram is trustedProgram; workspaces false leaves out its refusal
// of a directory that has been a workspace.
func checkProgram(bin, ws string, h harness.Config, workspaces bool) (string, error) {
	if h.IsZero() {
		h = harness.Default()
	}
	names := stateNames(h)
	key := checkKey(bin, h, names, workspaces)
	if v, ok := checkedPrograms.Load(key); ok {
		if c := v.(*checked); c.still(ws) {
			return c.real, nil
		}
		checkedPrograms.Delete(key)
	}
	if fullCheckHook != nil {
		fullCheckHook()
	}
	real, err := filepath.EvalSymlinks(bin)
	if err == nil && !filepath.IsAbs(real) {
		real, err = filepath.Abs(real)
	}
	if err != nil {
		return "", Unavailable(fmt.Errorf("cannot resolve %s: %w", bin, err))
	}
	refuse := func(why string) error {
		fix := "install bubblewrap from your distribution (root's /usr/bin/bwrap)"
		if filepath.Base(real) != "bwrap" {
			fix = "use a " + filepath.Base(real) + " that only root or you could have put there (your distribution's, owned by root), outside any workspace"
		}
		return Unavailable(fmt.Errorf("refusing to run %s: %s; %s", real, why, fix))
	}
	inWorkspace := func(why string) error { return workspaceRefusal(real, ws, why) }
	if ws != "" {
		if abs, err := filepath.Abs(ws); err == nil {
			ws = abs
		}
		if r, err := filepath.EvalSymlinks(ws); err == nil {
			ws = r
		}
		if within(real, ws) {
			return "", inWorkspace("it is inside the workspace " + ws + ", where sandboxed commands write")
		}
	}
	// And wherever its path leads: a bind mount of a directory above the
	// program (of /usr, of /) is that directory under another path, and
	// the sandbox binds it writable.
	var wsSt unix.Stat_t
	wsKnown := ws != "" && unix.Stat(ws, &wsSt) == nil
	// What the check sees, remembered if it passes (see checked): the
	// workspace records, looked at before the program and its
	// directories, so that a record made meanwhile is seen by a later
	// check.
	c := &checked{real: real, at: time.Now(), runsPath: runsDir(h)} // the clock read before anything is looked at
	runsErr := unix.Lstat(c.runsPath, &c.runs)
	if workspaces {
		// Anything there — a file that says why, or what keeps one from
		// being read — distrusts the program.
		name := distrustFile(real, h)
		var st unix.Stat_t
		if err := unix.Lstat(name, &st); !errors.Is(err, unix.ENOENT) {
			why, rerr := os.ReadFile(name)
			if rerr != nil {
				why = []byte(fmt.Sprintf("%s cannot be read (%v)", name, rerr))
			}
			return "", refuse(fmt.Sprintf("%s; reinstall it (or check it), then remove %s", strings.TrimSpace(string(why)), name))
		}
	}
	euid := uint32(os.Geteuid())
	for p := real; ; p = filepath.Dir(p) {
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			return "", refuse(fmt.Sprintf("cannot inspect %s: %v", p, err))
		}
		c.paths, c.chain = append(c.paths, p), append(c.chain, st)
		if wsKnown && st.Dev == wsSt.Dev && st.Ino == wsSt.Ino {
			return "", inWorkspace(fmt.Sprintf("the workspace %s is %s under another path (a bind mount), where sandboxed commands write", ws, p))
		}
		if st.Uid != 0 && st.Uid != euid {
			return "", refuse(fmt.Sprintf("%s belongs to uid %d, who could replace it", p, st.Uid))
		}
		if st.Mode&0o022 != 0 && (st.Mode&unix.S_IFMT != unix.S_IFDIR || st.Mode&unix.S_ISVTX == 0) {
			return "", refuse(fmt.Sprintf("%s is writable by group or others (mode %#o)", p, st.Mode&0o7777))
		}
		if workspaces && p != real && wasWorkspace(p, h, names) {
			return "", refuse(fmt.Sprintf("it is inside %s, a workspace where sandboxed commands may have run", p))
		}
		if p == "/" {
			if (runsErr == nil || errors.Is(runsErr, unix.ENOENT)) && bin == real && c.settled() {
				checkedPrograms.Store(key, c)
			}
			return real, nil
		}
	}
}

// distrust marks the program real not to be trusted again for the state
// directory of h: a file in its runs directory, which a check of real
// refuses while it is there, and which says why. Adding it changes the
// runs directory, which every remembered check looks at.
func distrust(real string, h harness.Config, why string) error {
	if h.IsZero() {
		h = harness.Default()
	}
	name := distrustFile(real, h)
	fd, err := unix.Open(name, unix.O_WRONLY|unix.O_CREAT|unix.O_TRUNC|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return &os.PathError{Op: "open", Path: name, Err: err}
	}
	f := os.NewFile(uintptr(fd), name)
	_, err = f.WriteString(why + "\n")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// distrustFile is the file of [distrust] for real.
func distrustFile(real string, h harness.Config) string {
	sum := sha256.Sum256([]byte(real))
	return filepath.Join(runsDir(h), "distrusted-"+hex.EncodeToString(sum[:16]))
}

// fullCheckHook, set by tests alone, runs as checkProgram checks a
// program whole, not by what it remembers.
var fullCheckHook func()

// checkedPrograms holds, per process, what checkProgram saw of the
// programs it passed (checkKey → *checked).
var checkedPrograms sync.Map

// checkKey names a check of bin: its path, this process's user, the
// state directory, the harness state names and whether directories that
// have been workspaces are refused.
func checkKey(bin string, h harness.Config, names []string, workspaces bool) string {
	return fmt.Sprintf("%t\x00%d\x00%s\x00%s\x00%s", workspaces, os.Geteuid(), bin, h.StateDir(), strings.Join(names, "\x00"))
}

// runsDir is the directory of the state directory's records of
// workspaces ([wasWorkspace]).
func runsDir(h harness.Config) string { return filepath.Join(h.StateDir(), "runs") }

// checked is what a check that passed saw: the program (bin itself, not
// a link to it) and every directory above it, as lstat saw each, and the
// state directory's runs directory. A check of the same program passes
// it again at once if none of that changed ([checked.still]): every way
// the check's answer can change changes one of them — the program or a
// directory replaced, moved, chowned or chmodded (its inode or its
// change time), harness state made in a directory above it (that
// directory's change time), a directory above it recorded as a
// workspace (the runs directory gains an entry) — or is the workspace
// of the call, looked at every time.
type checked struct {
	real     string
	at       time.Time     // when the check began
	paths    []string      // real, then each directory above it to /
	chain    []unix.Stat_t // as lstat saw them
	runsPath string
	runs     unix.Stat_t // the runs directory (zero: there was none)
}

// settleFor is how much older than the check's start every change time
// it saw must be for the check to be remembered; a variable for tests
// alone. A change made after the check looked gets a change time of at
// least the file system's clock then, rounded down to its step: with a
// step of up to two seconds (ext4 with small inodes: one; FAT: two), over
// the change time the check saw. What changed less than that before the
// check could change again unseen (what git calls racily clean).
var settleFor = 3 * time.Second

// settled reports whether every change time c saw is over settleFor
// older than the check's start, and every file it saw is on a file
// system whose change times this machine's clock sets (not a network's,
// whose server's clock may lag).
func (c *checked) settled() bool {
	before := c.at.Add(-settleFor).UnixNano()
	if c.runs.Ino != 0 && (c.runs.Ctim.Nano() >= before || !localTimes(c.runsPath)) {
		return false
	}
	for i, st := range c.chain {
		if st.Ctim.Nano() >= before || !localTimes(c.paths[i]) {
			return false
		}
	}
	return true
}

// still reports whether what c saw is unchanged, and the workspace ws is
// neither the program nor a directory above it.
func (c *checked) still(ws string) bool {
	var st unix.Stat_t
	if err := unix.Lstat(c.runsPath, &st); err != nil {
		if !errors.Is(err, unix.ENOENT) || c.runs.Ino != 0 {
			return false
		}
	} else if !sameInode(st, c.runs) {
		return false
	}
	for i, p := range c.paths {
		if unix.Lstat(p, &st) != nil || !sameInode(st, c.chain[i]) {
			return false
		}
	}
	if ws != "" {
		// The workspace is not one of them: by its path, as the whole
		// check has it, and wherever its path leads.
		if abs, err := filepath.Abs(ws); err != nil || within(c.real, abs) {
			return false
		}
		if unix.Stat(ws, &st) != nil {
			return false
		}
		for _, seen := range c.chain {
			if st.Dev == seen.Dev && st.Ino == seen.Ino {
				return false
			}
		}
	}
	return true
}

// exposes returns the refusal of the program real (a path [checkProgram]
// passed) for the workspace ws when ws lets a sandboxed command write the
// program, or a directory above it, through a mount ([exposedIn]); nil
// when it does not, or when the kernel cannot tell (before 5.8). Asked
// anew every time: a directory holding a mount, renamed into the
// workspace by the host, moves the mount with no event of the namespace.
//
// A run asks before its sandbox is released, not before bwrap starts:
// what this refuses is this run's command writing the program, and every
// run before it asked too. (The workspace that is a directory above the
// program by another path, [checkProgram] refuses before anything runs:
// the run would make its harness state there.)
func exposes(real, ws string) ([]placed, error) {
	if ws == "" {
		return nil, nil
	}
	p, via, places, err := exposedIn(ws, pathsOf(real))
	switch {
	case p != "":
		return nil, workspaceRefusal(real, ws, exposure(p, real, via, ws))
	case errors.Is(err, mountinfo.ErrUnsupported):
		return nil, nil // a kernel that cannot tell (docs/sandbox.md)
	case err != nil:
		// The program or a directory above it gone since it was
		// checked is no less a refusal.
		return nil, workspaceRefusal(real, ws, "cannot tell whether the workspace exposes it through a mount: "+err.Error())
	}
	return places, nil
}

// pathsOf returns the program real and the directories above it, "/"
// last.
func pathsOf(real string) []string {
	paths := []string{real}
	for d := filepath.Dir(real); ; d = filepath.Dir(d) {
		paths = append(paths, d)
		if d == "/" || d == "." {
			return paths
		}
	}
}

// laterPaths returns, of what a later run's start of the bwrap found in
// the PATH value path depends on besides the program itself, what exists
// now, each with the directories above it: the path found, unresolved (a
// link there can be replaced), every link on its way, and the PATH
// directories searched before its own (a bwrap put in one is found
// first), placed alike ([reachedPaths]). None for bin "" (a
// program given, not searched for). Left out: what lies inside the
// workspace ws by its path — a later run's own check refuses a program
// found in a directory that has been a workspace ([checkProgram]); only a
// mount shows it under another path.
func laterPaths(path, bin, ws string) []string {
	if bin == "" {
		return nil
	}
	var out []string
	seen := map[string]bool{}
	add := func(p string) {
		for _, q := range reachedPaths(p) { // each existed as it was walked
			if !seen[q] && !within(q, ws) {
				seen[q] = true
				out = append(out, q)
			}
		}
	}
	add(bin)
	for _, d := range filepath.SplitList(path) {
		if d = filepath.Clean(d); !filepath.IsAbs(d) {
			continue // Find skips it too
		}
		if d == filepath.Dir(bin) {
			break
		}
		add(d)
	}
	return out
}

// Exposure refuses a run on another substrate — Landlock, an OCI
// runtime; what names it, "a landlock run" — in the workspace ws when its
// command could write the bwrap that later runs on this host start (the
// one the PATH value path finds, resolved) or a directory above it, plant
// one where PATH would find it first, or replace the link it was found
// by: the workspace holds it, or a mount inside ws is it or holds it, or
// ws itself is one of them by another path ([exposedIn]; such a run's
// command writes the workspace with every mount below it, as a bwrap
// run's does) — or cordon's own ([OwnExposure]). nil
// when it could not, when no bwrap is found (then the program this
// process runs alone is asked about), or when the kernel cannot tell
// (before 5.8). A bwrap run asks the same of its own program before its
// release ([exposesAll]). The refusal is a [refusal.WorkspaceRefused].
func Exposure(what, ws, path string, h harness.Config) error {
	own, err := ownPaths(h, true)
	if err != nil {
		return cannotTellOwn(what, ws, err)
	}
	if err := secondNameIn(what, ws); err != nil {
		return err
	}
	bin, err := findIn(path)
	var real string
	if err == nil {
		real, err = filepath.EvalSymlinks(bin) // gone since it was found: none either
	}
	if err != nil {
		return ownExposure(what, ws, own, h) // no bwrap for a later run to start: cordon's own alone
	}
	bw := append(pathsOf(real), laterPaths(path, bin, ws)...)
	p, via, _, err := exposedIn(ws, append(slices.Clone(bw), own...))
	const fix = "use a workspace that holds neither bwrap nor a directory on its way (or install bubblewrap outside it, first on PATH)"
	switch {
	case p != "" && !slices.Contains(bw, p):
		return ownRefusal(what, ws, p, via, h)
	case p != "":
		return refusal.Errorf(refusal.WorkspaceRefused, "refusing %s in the workspace %s: later runs on this host start %s, and %s; %s",
			what, ws, bin, exposureOf(p, bin, real, via, ws), fix)
	case errors.Is(err, mountinfo.ErrUnsupported):
		return nil
	case unplacedIn(err, own):
		return ownUntold(what, ws, err)
	case err != nil:
		return refusal.Errorf(refusal.WorkspaceRefused, "refusing %s in the workspace %s: later runs on this host start %s, and whether the workspace exposes it through a mount cannot be told (%v); %s",
			what, ws, bin, err, fix)
	}
	return nil
}

// exposesAll is [exposes] for the bwrap run of s, whose program is real,
// and it refuses as well a workspace that exposes what a later search for
// the bwrap PATH finds depends on ([laterPaths]) or cordon's own
// ([OwnExposure]): one read of the mount table. It returns
// the places of real and the directories above it.
func exposesAll(s Spec, real string) ([]placed, error) {
	ws := s.Policy.Workspace()
	if ws == "" {
		return nil, nil
	}
	cordons, err := ownPaths(s.Policy.harness, true)
	if err != nil {
		return nil, cannotTellOwn("a bwrap run", ws, err)
	}
	if err := secondNameIn("a bwrap run", ws); err != nil {
		return nil, err
	}
	own := pathsOf(real)
	var bin string
	var later []string
	if s.Bwrap == "" { // searched for: what a later search depends on too
		path, _ := lookupEnv(s.Environ, "PATH")
		if bin, err = findIn(path); err == nil {
			later = laterPaths(path, bin, ws)
		}
	}
	p, via, places, err := exposedIn(ws, slices.Concat(own, later, cordons))
	switch {
	case p != "" && slices.Contains(own, p):
		return nil, workspaceRefusal(real, ws, exposure(p, real, via, ws))
	case p != "" && slices.Contains(later, p):
		return nil, workspaceRefusal(real, ws, exposureOf(p, bin, real, via, ws))
	case p != "":
		return nil, ownRefusal("a bwrap run", ws, p, via, s.Policy.harness)
	case errors.Is(err, mountinfo.ErrUnsupported):
		return nil, nil // a kernel that cannot tell (docs/sandbox.md)
	case unplacedIn(err, cordons):
		return nil, ownUntold("a bwrap run", ws, err)
	case err != nil:
		// A path gone since it was looked at is no less a refusal.
		return nil, workspaceRefusal(real, ws, "cannot tell whether the workspace exposes it, or the way to it, through a mount: "+err.Error())
	}
	return places[:len(own)], nil
}

// existing returns those of paths that exist now: the program this
// process runs may have been removed since it started (an upgrade), and
// the directories above it are what a new one would be put in.
func existing(paths []string) []string {
	var out []string
	for _, p := range paths {
		var st unix.Stat_t
		if unix.Lstat(p, &st) == nil {
			out = append(out, p)
		}
	}
	return out
}

// selfPaths returns the program this process runs, resolved, and
// cordon's other binary beside it: cordon's front end and its full binary
// lie side by side (cmd/cordon), each started by the other, and a file of
// the one bound into a workspace is no directory above the other.
var selfPaths = sync.OnceValues(func() ([]string, error) {
	self, err := os.Executable()
	if err == nil {
		self, err = filepath.EvalSymlinks(self)
	}
	if err != nil {
		return nil, err
	}
	paths := []string{self}
	for _, name := range []string{"cordon", "cordon-full"} {
		if sib := filepath.Join(filepath.Dir(self), name); sib != self {
			paths = append(paths, sib)
		}
	}
	return paths, nil
})

// EnvStartedAs names, for cordon's full binary, the paths its front end
// was started by and runs (a list, as PATH is): the front end hands off to
// the full binary by the latter's own name ([StartedAs]). Set by anyone
// else it only adds paths no run may reach.
const EnvStartedAs = "CORDON_STARTED_AS"

// StartedAs returns the path this process was started by as its argv[0]
// names it (searched for on PATH when it has no slash, a relative PATH
// entry included), absolute and unresolved — a link there (a package
// manager's bin) is what the next start by that name goes through, and
// replaced it leads elsewhere; not cleaned (".." after a link is the
// kernel's) — or "" when it cannot be told.
var StartedAs = sync.OnceValue(func() string {
	arg := os.Args[0]
	if arg == "" {
		return ""
	}
	if !strings.Contains(arg, "/") {
		p, err := exec.LookPath(arg)
		if err != nil && !errors.Is(err, exec.ErrDot) {
			return ""
		}
		arg = p
	}
	if !filepath.IsAbs(arg) {
		wd, err := syscall.Getwd() // the kernel's, not $PWD
		if err != nil {
			return ""
		}
		arg = wd + "/" + arg
	}
	return arg
})

// startedBy returns the paths this process was started by: [StartedAs],
// and those of the front end that handed off to this one ([EnvStartedAs]).
func startedBy() []string {
	var out []string
	if s := StartedAs(); s != "" {
		out = append(out, s)
	}
	for _, s := range filepath.SplitList(os.Getenv(EnvStartedAs)) {
		// A program's name: a directory (a value set by hand) is none.
		if st, err := os.Stat(s); filepath.IsAbs(s) && err == nil && !st.IsDir() {
			out = append(out, s)
		}
	}
	return out
}

// LinksOn returns the symbolic links that resolving p goes through, in
// the kernel's order — each as its directory resolved and its own name
// (what replacing it changes) — and what p resolves to: its existing part
// resolved, the rest as named (cleaned); at most 40 links (the kernel's
// bound: then "" resolved).
func LinksOn(p string) (links []string, resolved string) {
	links, existing, rest := walkLinks(p)
	if existing == "" || rest == "" {
		return links, existing
	}
	return links, filepath.Join(existing, rest)
}

// walkLinks walks p as [LinksOn] says: the links on its way, the part of
// it that exists, resolved ("" past 40 links, or a link it cannot read),
// and the rest as named ("": none).
func walkLinks(p string) (links []string, existing, rest string) {
	if !filepath.IsAbs(p) {
		wd, err := syscall.Getwd() // the kernel's, not $PWD
		if err != nil {
			return nil, "", ""
		}
		p = wd + "/" + p
	}
	todo := strings.Split(p, "/") // not cleaned: ".." after a link is the kernel's
	cur := "/"
	for hops := 0; len(todo) > 0; {
		c := todo[0]
		todo = todo[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			cur = filepath.Dir(cur)
			continue
		}
		next := filepath.Join(cur, c)
		var st unix.Stat_t
		if unix.Lstat(next, &st) != nil {
			// What does not exist yet is reached, once made, where the
			// rest names it.
			return links, cur, filepath.Join(append([]string{c}, todo...)...)
		}
		if st.Mode&unix.S_IFMT != unix.S_IFLNK {
			cur = next
			continue
		}
		target, err := os.Readlink(next)
		if hops++; err != nil || hops > 40 {
			return links, "", ""
		}
		links = append(links, next)
		if filepath.IsAbs(target) {
			cur = "/"
		}
		todo = append(strings.Split(target, "/"), todo...)
	}
	return links, cur, ""
}

// reachedPaths returns what the kernel goes through to reach p, each with
// the directories above it: every link on its way, as its directory
// resolved and its own name — a name that, replaced, leads elsewhere (a
// PATH entry or a state directory through a link into another mount, a
// link to a link in a repository of dotfiles) — and what of p exists,
// resolved ([LinksOn]). Each existed as it was walked.
func reachedPaths(p string) []string {
	links, existing, _ := walkLinks(p)
	var out []string
	for _, l := range links {
		out = append(out, pathsOf(l)...)
	}
	if existing != "" {
		out = append(out, pathsOf(existing)...)
	}
	return out
}

// ownPaths returns what cordon itself later reads, or starts, that no run
// may reach — each with the directories above it, as they exist now: the
// state directory of h (its keys, the registry of runs, the marks of
// programs it no longer trusts), its cache (compiled code it runs), its
// roots directory (the trees of disposable roots, which an apply copies
// into their origins; a run inside one of them is below it, not
// exposing it) and the configuration file it was read from (what
// protects the workspace),
// each placed as the kernel reaches it ([reachedPaths]); and with
// binaries the program this process runs and cordon's other binary
// beside it ([selfPaths]), and the paths it was started by ([startedBy]).
func ownPaths(h harness.Config, binaries bool) ([]string, error) {
	if h.IsZero() {
		h = harness.Default()
	}
	var out []string
	add := func(paths []string) {
		for _, p := range paths {
			if !slices.Contains(out, p) {
				out = append(out, p)
			}
		}
	}
	if binaries {
		self, err := selfPaths()
		if err != nil {
			return nil, err
		}
		for _, p := range self {
			add(existing(pathsOf(p))) // resolved already; removed since (an upgrade) is none
		}
		for _, s := range startedBy() {
			add(reachedPaths(s))
		}
	}
	for _, d := range []string{h.StateDir(), h.CacheDir(), h.RootsDir(), h.File()} {
		if d != "" {
			add(reachedPaths(d))
		}
	}
	return out, nil
}

// OwnExposure refuses a run, a file tool or a module — what names it, "a
// landlock run" — in the workspace ws that could reach cordon's own
// ([ownPaths]: its state and cache, and with binaries the program this
// process runs): it lies inside ws, a mount inside ws is it or holds it,
// or ws is one of them by another path ([exposedIn]). Nothing checks the
// binaries before their next start, which would run what was written, on
// the host, unconfined; the state holds the keys that sign evidence and
// the marks that keep a program distrusted. A bwrap run asks it beside
// bwrap's start ([exposesAll]), [Exposure] with bwrap's. The refusal is a
// [refusal.WorkspaceRefused].
func OwnExposure(what, ws string, h harness.Config, binaries bool) error {
	own, err := ownPaths(h, binaries)
	if err != nil {
		return cannotTellOwn(what, ws, err)
	}
	if binaries {
		if err := secondNameIn(what, ws); err != nil {
			return err
		}
	}
	return ownExposure(what, ws, own, h)
}

// secondNameIn refuses what in ws when one of cordon's programs
// ([selfPaths], and where the paths it was started by lead) has another
// name (a hard link) that a command of the run could write: the file has
// more than one name, this user could write it ([userdir.Writable]: a
// read-only store's are none), and it lies on the file system of ws or
// of a mount inside it, where alone another name of it could lie. cordon
// guards its own by their names: a second name in the workspace (a
// binary linked into a project's bin, not copied) would let a command
// rewrite cordon-full, which the next hand-off starts, on the host. A
// sandboxed command cannot make such a link (the file is outside its
// writable tree, and a link across mounts fails); a user can, before the
// run. (A configuration file with a second name this user could write is
// refused as it is read: [harness.FromEnv].)
func secondNameIn(what, ws string) error {
	self, _ := selfPaths() // known by now: ownPaths asked
	files := slices.Clone(self)
	for _, s := range startedBy() {
		if real, err := filepath.EvalSymlinks(s); err == nil {
			files = append(files, real)
		}
	}
	var devs []uint64
	for _, f := range files {
		var st unix.Stat_t
		if unix.Stat(f, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG || uint64(st.Nlink) < 2 || !userdir.Writable(f) {
			continue
		}
		if devs == nil {
			devs = devicesIn(ws)
		}
		if devs != nil && !slices.Contains(devs, uint64(st.Dev)) {
			continue
		}
		return refusal.Errorf(refusal.WorkspaceRefused, "refusing %s in the workspace %s: %s, one of cordon's own, has %d names, and another of them could lie in the workspace (it is on the workspace's file system), where a command could rewrite it — cordon guards its own by their names; keep one name for it (copy it where you linked it)",
			what, ws, f, st.Nlink)
	}
	return nil
}

// devicesIn returns the devices of ws and of every mount inside it, or
// nil when the mount table cannot be read (then any device may be one).
func devicesIn(ws string) []uint64 {
	var st unix.Stat_t
	if unix.Stat(ws, &st) != nil {
		return nil
	}
	devs := []uint64{uint64(st.Dev)}
	t, err := readMounts()
	if err != nil {
		return nil
	}
	for _, m := range t.Below(ws) {
		if unix.Stat(m.Point, &st) != nil {
			return nil
		}
		devs = append(devs, uint64(st.Dev))
	}
	return devs
}

func ownExposure(what, ws string, own []string, h harness.Config) error {
	p, via, _, err := exposedIn(ws, own)
	switch {
	case p != "":
		return ownRefusal(what, ws, p, via, h)
	case errors.Is(err, mountinfo.ErrUnsupported):
		return nil
	case err != nil:
		return ownUntold(what, ws, err)
	}
	return nil
}

// ownUntold refuses what in ws: whether ws exposes cordon's own cannot
// be told (err).
func ownUntold(what, ws string, err error) error {
	return refusal.Errorf(refusal.WorkspaceRefused, "refusing %s in the workspace %s: whether it exposes cordon's own binaries, state or configuration through a mount cannot be told (%v)", what, ws, err)
}

// cannotTellOwn refuses what in ws: where cordon's own binaries are
// cannot be told (err).
func cannotTellOwn(what, ws string, err error) error {
	return refusal.Errorf(refusal.WorkspaceRefused, "refusing %s in the workspace %s: cannot tell which program this process runs, which the workspace must not expose: %v", what, ws, err)
}

// ownRefusal refuses what in ws, which exposes p — one of cordon's own
// ([ownPaths] of h) — through via.
func ownRefusal(what, ws, p, via string, h harness.Config) error {
	if h.IsZero() {
		h = harness.Default()
	}
	self, _ := selfPaths() // known: p came from it, or from h
	var it, then string
	switch {
	case len(self) > 0 && p == self[0]:
		it, then = p+", the program this process runs,", "its next start would run what was written, on the host"
	case slices.Contains(self, p):
		it, then = p+", cordon's binary beside the program this process runs ("+self[0]+"),", "its next start would run what was written, on the host"
	case len(self) > 0 && within(self[0], p):
		it, then = p+", a directory above "+self[0]+" (the program this process runs),", "a program put there would be started next, on the host"
	case slices.ContainsFunc(startedBy(), func(s string) bool { return reachedBy(p, s) }):
		it, then = p+", on the way this program was started ("+strings.Join(startedBy(), ", ")+"),", "its next start by that name would run what was put there, on the host"
	case reachedBy(p, h.File()):
		it, then = p+", the configuration cordon reads ("+h.File()+"), where it leads or a directory above it,", "a tool could rewrite what cordon reads at its next start (the harness state it protects, where its state lies)"
	case reachedBy(p, h.RootsDir()):
		it, then = p+", cordon's roots directory or a directory above it,", "a tool could change another root's tree, which its apply copies into that root's origin"
	case reachedBy(p, h.StateDir()) || reachedBy(p, h.CacheDir()):
		it, then = p+", cordon's state or cache, or a directory above it,", "a tool could read its keys, or undo what cordon keeps there (the marks of distrusted programs, the registry of runs, compiled code it runs)"
	default:
		it, then = p+", one of cordon's own paths,", "a tool could change what cordon later reads or starts, on the host"
	}
	return refusal.Errorf(refusal.WorkspaceRefused, "refusing %s in the workspace %s: %s lies where it could be reached (%s), and %s; install cordon and keep its state and configuration outside the workspace",
		what, ws, it, placeOf(p, via, ws), then)
}

// reachedBy reports whether p is one of the paths [ownPaths] places for
// own (a directory or file of h; "": none).
func reachedBy(p, own string) bool {
	return own != "" && slices.Contains(reachedPaths(own), p)
}

// exposureOf says how the workspace ws exposes p — the program real
// (found as bin), a directory above it, or a path a later search for it
// depends on — through the mount point via.
func exposureOf(p, bin, real, via, ws string) string {
	if p != real && p != bin && !within(real, p) {
		if within(bin, p) {
			return fmt.Sprintf("%s, the way PATH finds it, is writable in the sandbox (%s)", p, placeOf(p, via, ws))
		}
		return fmt.Sprintf("%s, a directory PATH searches before bwrap's, is writable in the sandbox (%s): a bwrap put there would be found first", p, placeOf(p, via, ws))
	}
	return exposure(p, real, via, ws)
}

// placeOf says where p lies for the workspace ws, reached through via;
// the workspace's path follows it in every message.
func placeOf(p, via, ws string) string {
	switch {
	case via == ws && within(p, ws):
		return "inside the workspace"
	case via == ws:
		return "under another path in the workspace, a bind mount"
	}
	return "through " + via + ", a mount inside the workspace"
}

// workspaceRefusal is the refusal of the program real because the
// workspace ws would let sandboxed commands write it (why).
func workspaceRefusal(real, ws, why string) error {
	return &Error{Op: "start", Root: ws, Err: ErrUnavailable, detail: workspaceExposes,
		Cause: fmt.Errorf("refusing to run %s: %s; use a workspace that holds neither it nor a directory above it", real, why)}
}

// exposedIn returns the first of paths (a program, then the directories
// above it, "/" last) that the workspace ws lets a sandboxed command
// write, and the mount point it is reached through: one that is ws, or
// lies below it, in its file system — ws reached by another path (a bind
// mount of ws, or of a directory above it), or a file or directory of ws
// on the program's path (a bind mount of it) — or that is, or lies below,
// the root of a mount inside ws (bwrap binds the workspace with every
// mount below it: a bind of the program's directory, or of the program
// itself). Compared by place ([mountinfo.Place]): the file system and the
// path in it — and first by path: what lies inside ws is exposed whatever
// the kernel can tell of mounts (one before 5.8 tells nothing, and the
// mount table's answer is then [mountinfo.ErrUnsupported], which callers
// let pass).
func exposedIn(ws string, paths []string) (path, via string, places []placed, err error) {
	for _, d := range paths {
		if within(d, ws) {
			return d, ws, nil, nil
		}
	}
	t, err := readMounts()
	if err != nil {
		return "", "", nil, err
	}
	wsPlace, err := t.PlaceOf(ws)
	if err != nil {
		return "", "", nil, err
	}
	roots := append([]mountinfo.Mount{{Point: ws, Root: wsPlace}}, t.Below(ws)...)
	for _, d := range paths {
		place, err := t.PlaceOf(d)
		if err != nil {
			return "", "", nil, &unplaced{d, err}
		}
		places = append(places, placed{d, place})
		for _, m := range roots {
			if place == m.Root || place.Within(m.Root) {
				return d, m.Point, places, nil
			}
		}
	}
	return "", "", places, nil
}

// readMounts reads this process's mount table; tests alone replace it
// (with a kernel that cannot tell a path's mount).
var readMounts = mountinfo.Read

// unplaced is a path whose place could not be told: what the refusal
// then names.
type unplaced struct {
	path string
	err  error
}

func (u *unplaced) Error() string { return u.err.Error() }
func (u *unplaced) Unwrap() error { return u.err }

// unplacedIn reports whether err says a path of paths could not be
// placed.
func unplacedIn(err error, paths []string) bool {
	var u *unplaced
	return errors.As(err, &u) && slices.Contains(paths, u.path)
}

// placed is a path and its place.
type placed struct {
	path  string
	place mountinfo.Place
}

// exposedBy returns the first of places (a program's and its
// directories') that a mount of the table (mountinfo text) lets a command
// of the sandbox write — a writable mount, not hidden by the sandbox's
// layers, whose root is it or holds it — and that mount's point.
func exposedBy(table string, layers []layer, places []placed) (path, point string) {
	// The first look of every run reads this: the file system first,
	// which most lines are not on, and the rest only of what is.
	for l := range strings.Lines(table) {
		dev := mountinfo.Field(l, 2)
		if !slices.ContainsFunc(places, func(p placed) bool { return p.place.Dev == dev }) {
			continue
		}
		root := mountinfo.Field(l, 3)
		if strings.Contains(root, "\\") {
			root = mountinfo.Unescape(root)
		}
		for _, p := range places {
			if p.place != (mountinfo.Place{Dev: dev, Path: root}) && !p.place.Within(mountinfo.Place{Dev: dev, Path: root}) {
				continue
			}
			if pt := mountPoint(l); writable(l) && !coveredBy(pt, layers) {
				return p.path, pt
			}
			break
		}
	}
	return "", ""
}

// exposure says how the workspace ws exposes p, the program real or a
// directory above it, through the mount point via ([exposedIn]).
func exposure(p, real, via, ws string) string {
	what := p + ", a directory above it,"
	if p == real {
		what = "it"
	}
	if via == ws && within(p, ws) {
		return fmt.Sprintf("%s is inside the workspace %s, where sandboxed commands write", what, ws)
	}
	if via == ws {
		return fmt.Sprintf("%s is in the workspace %s under another path (a bind mount), where sandboxed commands write", what, ws)
	}
	return fmt.Sprintf("%s is writable in the sandbox through %s, a mount inside the workspace %s", what, via, ws)
}

// sameInode reports whether a and b are the same inode, unchanged.
func sameInode(a, b unix.Stat_t) bool {
	return a.Dev == b.Dev && a.Ino == b.Ino && a.Mode == b.Mode && a.Uid == b.Uid && a.Gid == b.Gid &&
		a.Nlink == b.Nlink && a.Size == b.Size && a.Ctim == b.Ctim && a.Mtim == b.Mtim
}

// WithinAWorkspace returns the directory at or above p that has been a
// cordon workspace (see wasWorkspace), if there is one: a place where a
// sandboxed command may have written, or may write later.
func WithinAWorkspace(p string, h harness.Config) (string, bool) {
	if h.IsZero() {
		h = harness.Default()
	}
	names := stateNames(h)
	for d := p; ; d = filepath.Dir(d) {
		if wasWorkspace(d, h, names) {
			return d, true
		}
		if d == "/" || d == "." {
			return "", false
		}
	}
}

// stateNames are the harness state names of h and of the default
// configuration, each once.
func stateNames(h harness.Config) []string {
	names := h.State()
	for _, n := range defaultStateNames() {
		if !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	return names
}

// defaultStateNames are the default harness state names, read once: a
// new harness.Default() looks up the home directory and the XDG variables
// to make the directories too.
var defaultStateNames = sync.OnceValue(func() []string { return harness.Default().State() })

// wasWorkspace reports whether dir has been a cordon workspace: this
// user's state directory keeps a record of its runs, or it holds harness
// state named in names ([stateNames] of h).
func wasWorkspace(dir string, h harness.Config, names []string) bool {
	var st unix.Stat_t
	for _, key := range []string{placeholder.Key(dir), placeholder.LegacyKey(dir)} {
		if unix.Lstat(filepath.Join(h.StateDir(), "runs", key), &st) == nil {
			return true // (a record made before runs were named by their directory: by its path)
		}
	}
	for _, name := range names {
		if unix.Lstat(filepath.Join(dir, name), &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR {
			return true
		}
	}
	return false
}
