package bwrap

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
)

// Sandbox is a [Policy] made ready on this host: harness directories exist,
// mount points for absent protected paths are in place, and the argument
// list and environment of bwrap are computed. Make one with
// [Policy.Prepare]; Close it after the command has exited.
type Sandbox struct {
	policy  Policy
	args    []string // bwrap's options, up to and excluding "--"
	env     []string
	created []createdPath

	mu      sync.Mutex
	bin     string
	markerR *os.File
	markerW *os.File
	statusR *os.File
	statusW *os.File
	started bool
	checked bool

	initOnce sync.Once
	init     initInfo
}

// initInfo is what bwrap reports first on its status descriptor: the
// host PID of the namespace's init and the namespace.
type initInfo struct {
	PID   int    `json:"child-pid"`
	PIDNS uint64 `json:"pid-namespace"`
}

// createdPath is a mount point cordon created on the host for an absent
// protected path, removed after the run if it is still what was created.
type createdPath struct {
	path string
	info fs.FileInfo
}

// defaultPath is the PATH after <workspace>/.local/bin when the caller's
// environment has none.
const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// Prepare checks the policy against the file system and makes the host side
// ready: it refuses protected paths that are symlinks ([ErrProtectedPath]),
// creates absent harness directories (mode 0700, kept) and mount points for
// absent write-later paths (removed again by [Sandbox.Close] when still
// empty). environ is the caller's environment: the allow-list takes LANG,
// TERM, the granted names and the PATH after <workspace>/.local/bin from it,
// and its HOME is hidden along with the other home directories.
func (p Policy) Prepare(environ []string) (*Sandbox, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	ws := p.workspace
	canon, err := filepath.EvalSymlinks(ws)
	if err != nil {
		return nil, &Error{Op: "start", Path: ws, Root: ws, Err: ErrInvalidPolicy, Cause: err, detail: "cannot resolve the workspace"}
	}
	if canon != ws {
		return nil, invalid("workspace %s is not canonical (it resolves to %s)", ws, canon)
	}
	if st, err := os.Stat(ws); err != nil || !st.IsDir() {
		return nil, invalid("workspace %s is not a directory", ws)
	}
	for _, r := range p.readOnly {
		st, err := os.Lstat(r)
		if err != nil {
			return nil, &Error{Op: "start", Path: r, Root: ws, Err: ErrInvalidPolicy, Cause: err, detail: "cannot bind " + r + " read-only"}
		}
		if st.Mode()&fs.ModeSymlink != 0 {
			return nil, invalid("read-only bind %s is a symlink", r)
		}
	}

	s := &Sandbox{policy: p}
	var pins, protected []string
	if p.access == AccessWrite {
		pins, protected, err = s.protect()
		if err != nil {
			s.Close()
			return nil, err
		}
	}

	hidden := hiddenDirs(environ)
	a := []string{"--unshare-user", "--disable-userns", "--unshare-ipc", "--unshare-pid", "--unshare-uts", "--unshare-cgroup-try"}
	if p.network == NetNone {
		a = append(a, "--unshare-net")
	}
	a = append(a, "--die-with-parent", "--new-session", "--cap-drop", "ALL",
		"--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp", "--dir", Home)
	var inside []string // hidden directories strictly inside the workspace
	for _, h := range hidden {
		a = append(a, "--tmpfs", h)
		if h != ws && within(h, ws) {
			inside = append(inside, h)
		}
	}
	if p.network == NetHost {
		// The resolver configuration often lives under /run: bind the
		// one file back, so that names resolve on the open network.
		for _, f := range []string{"/etc/resolv.conf", "/etc/hosts"} {
			if r, err := filepath.EvalSymlinks(f); err == nil && r != f && underAny(r, hidden) {
				a = append(a, "--ro-bind", r, r)
			}
		}
	}
	switch p.access {
	case AccessNone:
		a = append(a, "--tmpfs", ws)
	case AccessRead:
		a = append(a, "--ro-bind", ws, ws)
	case AccessWrite:
		a = append(a, "--bind", ws, ws)
	}
	for _, h := range inside {
		a = append(a, "--tmpfs", h)
	}
	for _, d := range pins {
		a = append(a, "--bind", d, d)
	}
	for _, d := range protected {
		a = append(a, "--ro-bind", d, d)
	}
	for _, r := range p.readOnly {
		a = append(a, "--ro-bind", r, r)
	}
	s.args = append(a, "--chdir", ws)
	s.env = p.Environment(environ)
	return s, nil
}

// protect prepares the harness and write-later paths of a writable
// workspace: it returns the directories to pin (bind onto themselves) and
// the paths to bind read-only, creating what is absent.
func (s *Sandbox) protect() (pins, protected []string, err error) {
	p := s.policy
	type entry struct {
		rel     string
		dir     bool
		harness bool
	}
	var entries []entry
	for _, h := range p.harness {
		entries = append(entries, entry{rel: h, dir: true, harness: true})
	}
	for _, w := range p.writeLater {
		entries = append(entries, entry{rel: strings.TrimSuffix(w, "/"), dir: strings.HasSuffix(w, "/")})
	}
	add := func(list *[]string, path string) {
		if !slices.Contains(*list, path) {
			*list = append(*list, path)
		}
	}
	for _, e := range entries {
		comps := strings.Split(e.rel, "/")
		cur := p.workspace
		for i, c := range comps {
			next := filepath.Join(cur, c)
			last := i == len(comps)-1
			rel := strings.Join(comps[:i+1], "/")
			if slices.Contains(protected, next) {
				break // covered: bound read-only as a whole
			}
			fi, err := os.Lstat(next)
			if errors.Is(err, fs.ErrNotExist) {
				err = s.create(next, e.harness, !last || e.dir, placeholder[rel], i == 0)
				if err == nil {
					add(&protected, next)
					break
				}
				if !errors.Is(err, fs.ErrExist) {
					return nil, nil, &Error{Op: "start", Path: rel, Root: p.workspace, Err: ErrSetup, Cause: err,
						detail: fmt.Sprintf("cannot create %s to protect it: %v", rel, err)}
				}
				// Another run of this workspace created it meanwhile:
				// protect it as an existing path.
				fi, err = os.Lstat(next)
			}
			if err != nil {
				return nil, nil, &Error{Op: "start", Path: rel, Root: p.workspace, Err: ErrSetup, Cause: err,
					detail: fmt.Sprintf("cannot inspect %s: %v", rel, err)}
			}
			if fi.Mode()&fs.ModeSymlink != 0 {
				return nil, nil, &Error{Op: "start", Path: rel, Root: p.workspace, Err: ErrProtectedPath, detail: "a symlink"}
			}
			if last || !fi.IsDir() {
				// The path itself, or a file on the way to it (a .git
				// file that points at a worktree's git directory).
				add(&protected, next)
				break
			}
			add(&pins, next)
			cur = next
		}
	}
	// Parents before children, so that each bind lands on top of the one
	// that contains it.
	sort.SliceStable(pins, func(i, j int) bool { return len(pins[i]) < len(pins[j]) })
	sort.SliceStable(protected, func(i, j int) bool { return len(protected[i]) < len(protected[j]) })
	return pins, protected, nil
}

// create makes an absent protected path: a harness directory, or a
// directory or file (holding content) to serve as a read-only mount point.
// Only a mount point at the top of the workspace (the whole of an absent
// .git) is removed again by Close, when still empty: one inside an
// existing directory may be a mount point of another run of the same
// workspace, and removing it there would let that run's tool create the
// path. Those placeholders (an empty hooks directory, a commondir naming
// the git directory itself) mean to git what their absence meant.
func (s *Sandbox) create(path string, harness, dir bool, content string, top bool) error {
	if harness {
		return os.Mkdir(path, 0o700)
	}
	if dir {
		if err := os.Mkdir(path, 0o755); err != nil {
			return err
		}
	} else {
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if err != nil {
			return err
		}
		_, err = f.WriteString(content)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	}
	if !top {
		return nil
	}
	info, err := os.Lstat(path)
	if err != nil {
		return err
	}
	s.created = append(s.created, createdPath{path: path, info: info})
	return nil
}

// hiddenDirs returns the directories to cover with an empty tmpfs: /home,
// /root, /run, /var/run and the caller's home, resolved, existing, outside
// /tmp (already fresh) and the system directories, and not inside one
// another.
func hiddenDirs(environ []string) []string {
	cands := []string{"/home", "/root", "/run", "/var/run"}
	if h, ok := lookupEnv(environ, "HOME"); ok {
		cands = append(cands, h)
	}
	if u, err := user.Current(); err == nil {
		cands = append(cands, u.HomeDir)
	}
	var dirs []string
	for _, c := range cands {
		if !filepath.IsAbs(c) {
			continue
		}
		r, err := filepath.EvalSymlinks(c)
		if err != nil {
			continue
		}
		if st, err := os.Stat(r); err != nil || !st.IsDir() {
			continue
		}
		if r == "/" || within(r, "/tmp") || systemDir(r) || slices.Contains(dirs, r) {
			continue
		}
		dirs = append(dirs, r)
	}
	sort.Strings(dirs)
	var out []string
	for _, d := range dirs {
		if !underAny(d, out) {
			out = append(out, d)
		}
	}
	return out
}

// systemDir reports whether d is a directory too broad or too needed to
// hide: a top-level directory other than /home, /root and /run, or one
// inside the system's own trees (a service user's home can be /usr/sbin or
// /var).
func systemDir(d string) bool {
	if strings.Count(d, "/") == 1 && d != "/home" && d != "/root" && d != "/run" {
		return true
	}
	for _, s := range []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/proc", "/dev", "/sys", "/boot"} {
		if within(d, s) {
			return true
		}
	}
	return false
}

func underAny(p string, dirs []string) bool {
	for _, d := range dirs {
		if within(p, d) {
			return true
		}
	}
	return false
}

// Environment returns the environment a command gets under this policy,
// drawn from the caller's environ: exactly PATH (<workspace>/.local/bin,
// then the absolute entries of the caller's PATH), HOME ([Home]), LANG,
// TERM and the granted names the caller has set. Nothing else passes.
func (p Policy) Environment(environ []string) []string {
	var path []string
	if p.access != AccessNone {
		path = append(path, filepath.Join(p.workspace, ".local", "bin"))
	}
	if v, ok := lookupEnv(environ, "PATH"); ok {
		for _, d := range filepath.SplitList(v) {
			if filepath.IsAbs(d) && !slices.Contains(path, d) {
				path = append(path, d)
			}
		}
	}
	if len(path) == 0 || (len(path) == 1 && p.access != AccessNone) {
		path = append(path, filepath.SplitList(defaultPath)...)
	}
	env := []string{"PATH=" + strings.Join(path, string(filepath.ListSeparator)), "HOME=" + Home}
	names := append([]string{"LANG", "TERM"}, p.env...)
	seen := map[string]bool{}
	for _, n := range names {
		if seen[n] {
			continue
		}
		seen[n] = true
		if v, ok := lookupEnv(environ, n); ok {
			env = append(env, n+"="+v)
		}
	}
	return env
}

// lookupEnv returns the last value of name in environ, as the C library
// and os/exec read an environment.
func lookupEnv(environ []string, name string) (string, bool) {
	for i := len(environ) - 1; i >= 0; i-- {
		if k, v, ok := strings.Cut(environ[i], "="); ok && k == name {
			return v, true
		}
	}
	return "", false
}

// markerFD is the descriptor on which the sandbox's prologue reports that
// it runs: the first of exec.Cmd.ExtraFiles. statusFD, the second, is
// bwrap's --json-status-fd, on which it reports the namespace's init.
const (
	markerFD = 3
	statusFD = 4
)

// prologue runs inside the finished sandbox as /bin/sh -c PROLOGUE cordon
// CMD ARGS...: it checks that it is PID 2 of its own PID namespace (bwrap's
// init is 1), as [Detect]'s probe does, so that a "bwrap" that ran it on
// the host stops here; then it reports on markerFD, closes it, and executes
// the command, so that a command not found exits 127 and one not
// executable 126, as in a shell. dash's exec takes no options; a command
// that starts with "-" goes through env(1), whose exit codes are the same.
const prologue = `[ "$$" = 2 ] && printf x >&3 && exec 3>&- 4>&- && unset PWD && case $1 in -*) exec /usr/bin/env -- "$@";; esac && exec "$@"`

// Args returns bwrap's argument list (without the program name) for argv,
// as [Sandbox.Command] runs it: the options, the status descriptor, then
// "--", the prologue and argv, which are never read as options of bwrap.
// It expects descriptors 3 and 4 to be the pipes Command sets up.
func (s *Sandbox) Args(argv []string) []string {
	a := slices.Clone(s.args)
	a = append(a, "--json-status-fd", fmt.Sprint(statusFD), "--", "/bin/sh", "-c", prologue, "cordon")
	return append(a, argv...)
}

// Options returns bwrap's options alone, up to and excluding "--": the
// mount table and namespaces of this sandbox, to print or to measure.
func (s *Sandbox) Options() []string { return slices.Clone(s.args) }

// String is the bwrap command line of the sandbox, its options quoted for
// a POSIX shell, for logs and evidence.
func (s *Sandbox) String() string {
	var b strings.Builder
	b.WriteString("bwrap")
	for _, a := range s.args {
		b.WriteByte(' ')
		b.WriteString(shellQuote(a))
	}
	return b.String()
}

func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./=:,+@%") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// Env returns the sandbox's environment: PATH, HOME, LANG, TERM and the
// granted names, nothing else.
func (s *Sandbox) Env() []string { return slices.Clone(s.env) }

// Policy returns the policy the sandbox was prepared from.
func (s *Sandbox) Policy() Policy { return s.policy }

// Command returns the command that runs argv in the sandbox with the bwrap
// binary bin. The caller sets its streams and process attributes, starts
// it, calls [Sandbox.Launched], waits for it, and then asks
// [Sandbox.Started] whether the command ran at all. A Sandbox makes one
// command.
//
// Command marks every descriptor of the calling process above 2
// close-on-exec: bwrap hands whatever it inherits to the command, and a
// descriptor the process inherited from its own parent (an open directory
// outside the workspace, a socket) would otherwise reach the sandbox. The
// command gets its standard streams and nothing else.
func (s *Sandbox) Command(bin string, argv []string) (*exec.Cmd, error) {
	if len(argv) == 0 {
		return nil, invalid("no command to run")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.markerW != nil || s.checked {
		return nil, invalid("a sandbox runs one command")
	}
	if err := closeOnExecAll(); err != nil {
		return nil, &Error{Op: "start", Root: s.policy.workspace, Err: ErrSetup, Cause: err,
			detail: "cannot keep this process's descriptors out of the sandbox: " + err.Error()}
	}
	mr, mw, err := os.Pipe()
	if err != nil {
		return nil, &Error{Op: "start", Root: s.policy.workspace, Err: ErrSetup, Cause: err, detail: err.Error()}
	}
	sr, sw, err := os.Pipe()
	if err != nil {
		mr.Close()
		mw.Close()
		return nil, &Error{Op: "start", Root: s.policy.workspace, Err: ErrSetup, Cause: err, detail: err.Error()}
	}
	s.bin, s.markerR, s.markerW, s.statusR, s.statusW = bin, mr, mw, sr, sw
	return &exec.Cmd{
		Path:       bin,
		Args:       append([]string{"bwrap"}, s.Args(argv)...),
		Env:        s.Env(),
		Dir:        "/",
		ExtraFiles: []*os.File{mw, sw}, // markerFD, statusFD
	}, nil
}

// Launched closes this process's copies of the descriptors the command
// inherited, so that their readers see the end when bwrap and the
// sandbox are gone. Call it once the command's Start has returned.
func (s *Sandbox) Launched() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, f := range []*os.File{s.markerW, s.statusW} {
		if f != nil {
			f.Close()
		}
	}
}

// Init returns the host PID of the sandbox's init (PID 1 of its PID
// namespace) and the namespace's inode number, as bwrap reports them right
// after creating it; ok is false when bwrap ended before that. It blocks
// until then. When the init has exited, every process of the sandbox is
// gone: the kernel kills the namespace first.
func (s *Sandbox) Init() (pid int, pidNS uint64, ok bool) {
	s.initOnce.Do(func() {
		s.mu.Lock()
		r := s.statusR
		s.mu.Unlock()
		if r == nil {
			return
		}
		var info initInfo
		if err := json.NewDecoder(r).Decode(&info); err == nil && info.PID > 0 {
			s.init = info
		}
	})
	return s.init.PID, s.init.PIDNS, s.init.PID > 0
}

// Started reports whether the command began to run inside the sandbox:
// call it once the command has exited. False means bwrap never finished
// setting the sandbox up (or was killed first) and the command did not run;
// [Sandbox.Failure] says why.
func (s *Sandbox) Started() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.checked || s.markerR == nil {
		return s.started
	}
	s.checked = true
	// Every process that held the write end is gone once the command has
	// exited (the PID namespace died with it); the deadline only guards
	// against a descriptor smuggled out.
	s.markerR.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	var b [1]byte
	n, _ := s.markerR.Read(b[:])
	s.started = n == 1 && b[0] == 'x'
	if s.started {
		remember(s.bin, nil)
	}
	return s.started
}

// Failure explains a command that never started: [ErrUnavailable] when
// bubblewrap cannot create any sandbox on this host ([Detect] says why),
// [ErrSetup] with bwrap's own message (taken from stderr) otherwise.
func (s *Sandbox) Failure(ctx context.Context, stderr string) error {
	if err := Detect(ctx, s.bin); err != nil {
		return err
	}
	msg := strings.TrimSpace(stderr)
	if i := strings.LastIndex(msg, "\n"); i >= 0 {
		msg = msg[i+1:]
	}
	if msg == "" {
		msg = "bwrap exited before the command started"
	}
	return &Error{Op: "start", Root: s.policy.workspace, Err: ErrSetup, detail: msg}
}

// Close releases the marker pipe and removes the mount points Prepare
// created that are still as created (an empty directory, an empty file).
func (s *Sandbox) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, f := range []*os.File{s.markerR, s.markerW, s.statusR, s.statusW} {
		if f != nil {
			f.Close()
		}
	}
	var errs []error
	for i := len(s.created) - 1; i >= 0; i-- {
		c := s.created[i]
		now, err := os.Lstat(c.path)
		if err != nil || !os.SameFile(now, c.info) {
			continue
		}
		if now.IsDir() {
			if names, err := readNames(c.path); err != nil || len(names) > 0 {
				continue
			}
		} else if !now.Mode().IsRegular() || now.Size() != 0 {
			continue
		}
		if err := os.Remove(c.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	s.created = nil
	return errors.Join(errs...)
}

func readNames(dir string) ([]string, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	names, err := f.Readdirnames(1)
	if errors.Is(err, io.EOF) {
		err = nil
	}
	return names, err
}
