package bwrap

import (
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
	"strconv"
	"strings"
	"sync"

	"github.com/cordon-run/cordon/harness"
	"github.com/cordon-run/cordon/internal/limits"
	"github.com/cordon-run/cordon/internal/placeholder"
	"github.com/cordon-run/cordon/internal/proc"
	"github.com/cordon-run/cordon/internal/seccomp"
	"github.com/cordon-run/cordon/substrate"
	"github.com/cordon-run/cordon/substrate/egress"
)

// Sandbox is a [Policy] made ready on this host: harness directories exist,
// mount points for absent protected paths are in place, and the argument
// list and environment of bwrap are computed. Make one with
// [Policy.Prepare]; Close it after the command has exited.
type Sandbox struct {
	policy    Policy
	protected *harness.Protected // nil unless the workspace is writable
	args      []string           // bwrap's options, up to and excluding "--"
	env       []string
	session   *placeholder.Session
	idOnce    sync.Once
	id        string // the run's placeholder session's, known before the session begins

	mu      sync.Mutex
	bin     string
	blockW  *os.File // written once the sandbox is verified: the command may start
	blockR  *os.File
	statusR *os.File
	statusW *os.File
	argsR   *os.File
	argsW   *os.File
	filterR *os.File // the seccomp program, written whole into a pipe
	scriptR *os.File // a pooled command's script (scriptFD), or nil
	// egressCtl is the forwarder's end of the egress control socket, or
	// nil: handed to bwrap, closed here once it runs.
	egressCtl *os.File
	status    chan statusRecord
	used      bool
	// early: the options may go before bwrap has started ([Sandbox.sendEarly]);
	// built: they are; sent: they went.
	early, built, sent bool
}

// statusRecord is one JSON document bwrap writes on its status descriptor:
// first the init of the new namespaces, last the command's exit code.
type statusRecord struct {
	ChildPID int    `json:"child-pid"`
	PIDNS    uint64 `json:"pid-namespace"`
	MntNS    uint64 `json:"mnt-namespace"`
	NetNS    uint64 `json:"net-namespace"`
	IPCNS    uint64 `json:"ipc-namespace"`
	UTSNS    uint64 `json:"uts-namespace"`
	ExitCode *int   `json:"exit-code"`
}

// defaultPath is the PATH of the sandbox when the caller's environment has
// none, and the whole PATH of an admitted tool ([Policy.WithSystemPath]).
const defaultPath = substrate.SystemPath

// namespaceArgs are the namespace and process flags of every sandbox,
// [Detect]'s included: new user (no further user namespaces), IPC, PID,
// UTS and cgroup namespaces, the network cut off unless net is NetHost,
// killed with bwrap, in a new session, every capability dropped.
func namespaceArgs(net Network) []string {
	a := []string{"--unshare-user", "--disable-userns", "--unshare-ipc", "--unshare-pid", "--unshare-uts", "--unshare-cgroup-try"}
	if net == NetNone {
		a = append(a, "--unshare-net")
	}
	return append(a, "--die-with-parent", "--new-session", "--cap-drop", "ALL")
}

// baseArgs is the file system every sandbox starts from, [Detect]'s
// included: the host read-only, a read-only /dev of device nodes with a
// capped /dev/shm, /proc of the new PID namespace with /proc/sys
// read-only, a fresh capped /tmp.
//
// /proc/sys: the kernel lets uid 0 write a sysctl whatever its
// capabilities (the check is the owner's mode bits), and a command run
// by root is uid 0 in the sandbox — kernel.core_pattern, written, runs a
// program of the workspace as the host's root at the next crash. bwrap
// covers /proc/sysrq-trigger, /proc/irq and /proc/bus itself, but not
// /proc/sys (its write test of the directory fails, so it leaves it
// alone). The bind's source is the host's /proc/sys: the per-namespace
// sysctls (net, ipc, uts) answer for the namespaces of the process that
// reads them, the sandbox's.
func baseArgs(tmpSize int64) []string {
	size := strconv.FormatInt(tmpSize, 10)
	return []string{"--ro-bind", "/", "/", "--dev", "/dev", "--perms", "1777", "--size", size, "--tmpfs", "/dev/shm",
		"--proc", "/proc", "--ro-bind", "/proc/sys", "/proc/sys", "--size", size, "--tmpfs", "/tmp"}
}

// Prepare checks the policy against the file system and makes the host side
// ready: it finds the workspace's protected set ([harness.Config.Protect]),
// refuses protected paths that are symlinks ([ErrProtectedPath]), creates
// absent harness directories (mode 0700, kept) and placeholders for absent
// write-later paths (removed again by the last run of the workspace to
// end; see package placeholder). environ is the caller's environment: the
// allow-list takes LANG, TERM, the granted names and (for cordon exec) the
// PATH after <workspace>/.local/bin from it, and its HOME is hidden along
// with the other home directories.
func (p Policy) Prepare(environ []string) (*Sandbox, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	s := &Sandbox{policy: p}
	if err := s.prepare(environ); err != nil {
		return nil, err
	}
	return s, nil
}

// prepare does Prepare's work on the host and computes bwrap's options.
// On an error the sandbox is closed.
func (s *Sandbox) prepare(environ []string) error {
	if err := s.build(environ); err != nil {
		s.Close()
		return err
	}
	return nil
}

// build is prepare without the closing: [Run] calls it while bwrap starts,
// and cleans up itself.
func (s *Sandbox) build(environ []string) error {
	p := s.policy
	ws := p.workspace
	canon, err := filepath.EvalSymlinks(ws)
	if err != nil {
		return &Error{Op: "start", Path: ws, Root: ws, Err: ErrInvalidPolicy, Cause: err, detail: "cannot resolve the workspace"}
	}
	if canon != ws {
		return invalid("workspace %s is not canonical (it resolves to %s)", ws, canon)
	}
	if st, err := os.Stat(ws); err != nil || !st.IsDir() {
		return invalid("workspace %s is not a directory", ws)
	}
	for _, r := range p.readOnly {
		st, err := os.Lstat(r)
		if err != nil {
			return &Error{Op: "start", Path: r, Root: ws, Err: ErrInvalidPolicy, Cause: err, detail: "cannot bind " + r + " read-only"}
		}
		if st.Mode()&fs.ModeSymlink != 0 {
			return invalid("read-only bind %s is a symlink", r)
		}
	}

	// Every run holds the workspace's run lock, so that no run of an
	// enclosing workspace changes what it binds while it is set up.
	if err := s.begin(); err != nil {
		return err
	}
	var pins, protected []string
	if p.access == AccessWrite {
		// Found under the run lock: no run of an enclosing workspace
		// changes what it reads meanwhile. The submodules trusted as the
		// user's are those every other run going on trusts too (a sandbox
		// made ahead, its command not given, has run nothing), and the
		// entries of those any of them trusts are protected here as well.
		if s.protected, err = p.harness.ProtectBeside(ws, s.session, idleAhead); err != nil {
			var be *harness.BesideError
			if errors.As(err, &be) {
				return &Error{Op: "start", Root: ws, Err: ErrSetup, Cause: be.Err, detail: be.Error()}
			}
			return err
		}
		if pins, protected, err = s.protect(); err != nil {
			return err
		}
	}

	hidden := hiddenDirs(environ, p.harness)
	a := append(namespaceArgs(p.network), baseArgs(p.tmpSize)...)
	a = append(a, "--dir", Home)
	if len(p.egress) > 0 {
		self, err := forwarderProgram()
		if err != nil {
			return err
		}
		a = append(a, "--ro-bind", self, ForwarderPath)
	}
	var inside, remount []string // hidden directories strictly inside the workspace; read-only tmpfs
	for _, h := range hidden {
		a = append(a, "--size", strconv.Itoa(hiddenSize), "--tmpfs", h)
		remount = append(remount, h)
		if h != ws && within(h, ws) {
			inside = append(inside, h)
		}
	}
	if p.network == NetNone {
		// /sys lists the host's network interfaces and their addresses,
		// whatever namespace reads it: hidden when the network is.
		for _, d := range netSysDirs() {
			a = append(a, "--size", strconv.Itoa(hiddenSize), "--tmpfs", d)
			remount = append(remount, d)
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
		a = append(a, "--size", strconv.Itoa(hiddenSize), "--tmpfs", ws)
		remount = append(remount, ws)
	case AccessRead:
		a = append(a, "--ro-bind", ws, ws)
	case AccessWrite:
		a = append(a, "--bind", ws, ws)
	}
	for _, h := range inside {
		a = append(a, "--size", strconv.Itoa(hiddenSize), "--tmpfs", h)
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
	// Read-only last: bubblewrap creates the mount points of the binds
	// above inside these tmpfs first.
	for _, d := range append(remount, "/dev") {
		a = append(a, "--remount-ro", d)
	}
	s.mu.Lock()
	s.args = append(a, "--chdir", ws)
	s.built = true
	if s.env == nil {
		s.env = p.Environment(environ)
	}
	s.mu.Unlock()
	return nil
}

// netSysDirs returns the directories of /sys that list the host's network
// interfaces: /sys/class/net and the net directory of each interface's
// device (/sys/devices/virtual/net, /sys/devices/pci.../net). Found once.
var netSysDirs = sync.OnceValue(func() []string {
	dirs := []string{"/sys/class/net"}
	// Each entry is sysfs's relative link into /sys/devices
	// (../../devices/virtual/net/lo), whose directories are no links:
	// resolved by its text, one readlink where EvalSymlinks looks at
	// every component of every entry.
	links, _ := filepath.Glob("/sys/class/net/*")
	for _, l := range links {
		t, err := os.Readlink(l)
		if err != nil {
			continue
		}
		if !filepath.IsAbs(t) {
			t = filepath.Join(filepath.Dir(l), t)
		}
		if strings.HasPrefix(t, "/sys/devices/") {
			if d := filepath.Dir(t); !slices.Contains(dirs, d) {
				dirs = append(dirs, d)
			}
		}
	}
	if _, err := os.Stat(dirs[0]); err != nil {
		return nil
	}
	sort.Strings(dirs[1:])
	return dirs
})

// begin creates the harness directories of a writable workspace (mode
// 0700, kept) and takes the workspace's run lock: every run of the
// workspace holds it, also one that creates no placeholder (those another
// run made are mounted here too, and must outlast this run), and no run
// starts while one of an enclosing or a nested workspace is going on (its
// tool could swap what this one binds).
func (s *Sandbox) begin() error {
	p := s.policy
	ws := p.workspace
	for _, h := range p.harness.State() {
		if p.access != AccessWrite {
			break // a command that cannot write could not plant them
		}
		path := filepath.Join(ws, h)
		fi, err := os.Lstat(path)
		if errors.Is(err, fs.ErrNotExist) {
			if err = os.Mkdir(path, 0o700); err == nil || errors.Is(err, fs.ErrExist) {
				fi, err = os.Lstat(path)
			}
		}
		if err != nil {
			return &Error{Op: "start", Path: h, Root: ws, Err: ErrSetup, Cause: err, detail: fmt.Sprintf("cannot create harness state %s: %v", h, err)}
		}
		if fi.Mode()&fs.ModeSymlink != 0 || !fi.IsDir() {
			return &Error{Op: "start", Path: h, Root: ws, Err: ErrProtectedPath, detail: "a symlink or not a directory"}
		}
	}
	sess, err := placeholder.BeginAs(p.harness.StateDir(), ws, s.runID())
	if errors.Is(err, placeholder.ErrNested) {
		return &Error{Op: "start", Root: ws, Err: ErrSetup, Cause: err,
			detail: err.Error() + ", and the commands of the enclosing one could change the nested one while its sandbox is set up; run one at a time"}
	}
	if err != nil {
		return &Error{Op: "start", Root: ws, Err: ErrSetup, Cause: err, detail: err.Error()}
	}
	s.session = sess
	return nil
}

// protect prepares the protected set of a writable workspace: it returns
// the directories to pin (bind onto themselves) and the paths to bind
// read-only, creating placeholders for what is absent.
func (s *Sandbox) protect() (pins, protected []string, err error) {
	p := s.policy
	ws := p.workspace
	for _, h := range s.protected.State() {
		protected = append(protected, filepath.Join(ws, h))
	}
	// Placeholders first: a directory made on the way to one (an absent
	// parent of an absent include) is pinned like any other. What Protect
	// found a moment ago, under the same run lock, is not looked at
	// again: that something is there (it was no symlink), or that a path
	// is absent. The paths come parents first, and a placeholder makes
	// only the directories on the way to it: none made before a path
	// lies at it. (The second loop looks again at a path found absent.)
	paths := s.protected.Paths()
	made := map[string]bool{} // placeholders made just now: no symlink, no need to look again
	for _, q := range paths {
		if q.Mode != harness.ReadOnly {
			continue
		}
		path := filepath.Join(ws, filepath.FromSlash(q.Rel))
		if exists, _, ok := s.protected.Seen(q.Rel); ok && exists {
			continue
		} else if !ok {
			if _, err := os.Lstat(path); !errors.Is(err, fs.ErrNotExist) {
				continue
			}
		}
		switch err := s.placeholder(q); {
		case err == nil:
			made[path] = true
		case !errors.Is(err, fs.ErrExist):
			return nil, nil, &Error{Op: "start", Path: q.Rel, Root: ws, Err: ErrSetup, Cause: err,
				detail: fmt.Sprintf("cannot protect %s: %v", q.Rel, err)}
		}
	}
	for _, q := range paths {
		path := filepath.Join(ws, filepath.FromSlash(q.Rel))
		if made[path] {
			protected = append(protected, path) // read-only, as made
			continue
		}
		if exists, dir, ok := s.protected.Seen(q.Rel); ok && exists {
			if q.Mode == harness.Pinned {
				if dir {
					pins = append(pins, path)
				}
				continue
			}
			protected = append(protected, path)
			continue
		}
		fi, err := os.Lstat(path)
		if errors.Is(err, fs.ErrNotExist) && q.Mode == harness.Pinned {
			continue // nothing there to keep in place
		}
		if err != nil {
			return nil, nil, &Error{Op: "start", Path: q.Rel, Root: ws, Err: ErrSetup, Cause: err,
				detail: fmt.Sprintf("cannot protect %s: %v", q.Rel, err)}
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			return nil, nil, &Error{Op: "start", Path: q.Rel, Root: ws, Err: ErrProtectedPath, detail: "a symlink"}
		}
		if q.Mode == harness.Pinned {
			if fi.IsDir() {
				pins = append(pins, path)
			}
			continue
		}
		protected = append(protected, path)
	}
	// Parents before children, so that each bind lands on top of the one
	// that contains it.
	sort.SliceStable(pins, func(i, j int) bool { return len(pins[i]) < len(pins[j]) })
	sort.SliceStable(protected, func(i, j int) bool { return len(protected[i]) < len(protected[j]) })
	return pins, protected, nil
}

// placeholder creates the mount point of an absent read-only path, and the
// directories on the way to it, recording each in the workspace's
// placeholder session.
func (s *Sandbox) placeholder(q harness.Path) error {
	comps := strings.Split(q.Rel, "/")
	cur := s.policy.workspace
	for i, c := range comps {
		cur = filepath.Join(cur, c)
		last := i == len(comps)-1
		if !last {
			fi, err := os.Lstat(cur)
			if err == nil {
				if !fi.IsDir() {
					return fmt.Errorf("%s is in the way and not a directory", cur)
				}
				continue
			}
		}
		dir := !last || q.Dir || q.MaskDir
		var err error
		if q.Keep {
			err = placeholder.CreateKept(cur, dir, q.Content)
		} else {
			err = s.session.Create(cur, dir, q.Content)
		}
		if err != nil && (last || !errors.Is(err, fs.ErrExist)) {
			return err
		}
	}
	return nil
}

// hiddenDirs returns the directories to cover with an empty, read-only
// tmpfs: /home, /root, /run, /var/run, the caller's home, and cordon's
// per-user state and cache directories — resolved, existing, outside /tmp
// (already fresh) and the system directories, and not inside one another.
func hiddenDirs(environ []string, h harness.Config) []string {
	cands := []string{"/home", "/root", "/run", "/var/run"}
	if home, ok := lookupEnv(environ, "HOME"); ok {
		cands = append(cands, home)
	}
	if home := userHome(); home != "" {
		cands = append(cands, home)
	}
	trusted := []string{h.StateDir(), h.CacheDir()}
	var dirs []string
	for _, c := range append(cands, trusted...) {
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
		if r == "/" || within(r, "/tmp") || (systemDir(r) && !slices.Contains(trusted, c)) || slices.Contains(dirs, r) {
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

// userHome is the home directory of the user cordon runs as, from the
// user database (the caller's HOME may name another): looked up once.
var userHome = sync.OnceValue(func() string {
	if u, err := user.Current(); err == nil {
		return u.HomeDir
	}
	return ""
})

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
// drawn from the caller's environ: exactly PATH, HOME ([Home]), LANG, TERM
// and the granted names the caller has set. PATH is, for cordon exec,
// <workspace>/.local/bin then the absolute entries of the caller's PATH;
// with [Policy.WithSystemPath], the system directories alone.
func (p Policy) Environment(environ []string) []string {
	var lead []string
	if p.access != AccessNone && !p.systemPath {
		lead = []string{filepath.Join(p.workspace, ".local", "bin")}
	}
	env := substrate.Environment(environ, lead, p.systemPath, Home, p.env)
	if len(p.egress) > 0 {
		env = append(env, egress.ProxyEnv()...)
	}
	return env
}

// ForwarderPath is where a sandbox with egress sees the forwarder: this
// binary, bound read-only into its /tmp.
const ForwarderPath = "/tmp/.cordon/egress-forward"

// forwarderProgram is this binary, which holds the forwarder (it imports
// package egress): the resolved file, as bound into the sandbox.
func forwarderProgram() (string, error) {
	self, err := os.Executable()
	if err == nil {
		self, err = filepath.EvalSymlinks(self)
	}
	if err != nil {
		return "", &Error{Op: "start", Err: ErrSetup, Cause: err, detail: "cannot find this binary, the egress forwarder: " + err.Error()}
	}
	return self, nil
}

func lookupEnv(environ []string, name string) (string, bool) {
	return substrate.LookupEnv(environ, name)
}

// The descriptors of bwrap's side channels: the first of
// exec.Cmd.ExtraFiles. bwrap reads its options and the command from
// argsFD (--args), blocks on blockFD before it starts the command
// (--block-fd), and reports the sandbox's init and the command's exit on
// statusFD (--json-status-fd). None of them reaches the command.
const (
	blockFD   = 3
	statusFD  = 4
	argsFD    = 5
	seccompFD = 6
	// holdFD is the writing end of blockFD's pipe, which bwrap keeps as
	// its --sync-fd: in the sandbox's init, and in the command's process
	// until just before it executes the command. While bwrap waits on
	// blockFD, the pipe so has a writer that is not this process: should
	// this process die before it releases the sandbox, bwrap's read does
	// not end (it would at end of file, and bwrap goes on whatever its
	// read returns) and the command never starts. Without it a cordon
	// killed during the setup let the sandbox go on, unsupervised, its
	// bwrap parent killed with cordon before the init had bound its life
	// to it (--die-with-parent comes after blockFD in bwrap).
	holdFD = 7
	// scriptFD is where a sandbox made ahead by a [Pool] gets its script:
	// the waiting command reads it with shell builtins and closes it
	// before it executes the script (see trampoline).
	scriptFD = 8
)

// filters holds the seccomp program of each policy, made once.
var filters sync.Map // seccomp.Policy → []byte

// seccompFilter returns a pipe from which bwrap reads the seccomp program
// of p (--seccomp): the program is written whole, the writing end closed.
func seccompFilter(p seccomp.Policy) (*os.File, error) {
	prog, err := filterOf(p)
	if err != nil {
		return nil, err
	}
	r, w, err := proc.Pipe(false, false)
	if err != nil {
		return nil, err
	}
	defer w.Close()
	if _, err := w.Write(prog); err != nil {
		r.Close()
		return nil, fmt.Errorf("cannot hand bwrap its seccomp filter: %w", err)
	}
	return r, nil
}

// filterOf returns the seccomp program of p, made once per process.
func filterOf(p seccomp.Policy) ([]byte, error) {
	if prog, ok := filters.Load(p); ok {
		return prog.([]byte), nil
	}
	b, err := seccomp.Marshal(p)
	if err != nil {
		return nil, err
	}
	prog, _ := filters.LoadOrStore(p, b)
	return prog.([]byte), nil
}

// Args returns bwrap's argument list (without the program name) for argv,
// as [Sandbox.Command] runs it: the options and side channels, then "--"
// and argv, which are never read as options of bwrap. (Command hands the
// options to bwrap on a descriptor, --args, and argv on its command line.)
func (s *Sandbox) Args(argv []string) []string {
	a := append(s.sideArgs(), "--")
	return append(a, argv...)
}

func (s *Sandbox) sideArgs() []string {
	return append(slices.Clone(s.args), "--block-fd", strconv.Itoa(blockFD), "--sync-fd", strconv.Itoa(holdFD),
		"--json-status-fd", strconv.Itoa(statusFD), "--seccomp", strconv.Itoa(seccompFD))
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

// A Placeholder stands for an absent protected path while the sandbox's
// session lasts: an empty directory, or a file holding Content, which
// the last run of the workspace to end removes.
type Placeholder struct {
	Path    string // absolute
	Dir     bool
	Content string
}

// Placeholders returns the placeholders this sandbox's session made (not
// those that stay, inside a git directory, nor another run's).
func (s *Sandbox) Placeholders() []Placeholder {
	s.mu.Lock()
	sess, prot := s.session, s.protected
	s.mu.Unlock()
	if sess == nil {
		return nil
	}
	content := map[string]string{}
	if prot != nil {
		for _, q := range prot.Paths() {
			content[filepath.Join(s.policy.workspace, filepath.FromSlash(q.Rel))] = q.Content
		}
	}
	var out []Placeholder
	for _, e := range sess.Created() {
		out = append(out, Placeholder{Path: e.Path, Dir: e.Dir, Content: content[e.Path]})
	}
	return out
}

// Protected returns the protected set the sandbox enforces (nil unless the
// workspace is writable).
func (s *Sandbox) Protected() *harness.Protected { return s.protected }

// command returns the command that runs argv in the sandbox with the bwrap
// binary bin, for [Run]. The command does not start until release: bwrap
// reads its options (sendArgs), sets the namespaces up, reports its init
// on the status descriptor and blocks. Run starts it, calls launched,
// verifies the init, releases it, waits, and asks ran whether the command
// ran at all. A Sandbox makes one command.
//
// Command marks every descriptor of the calling process above 2
// close-on-exec: bwrap hands whatever it inherits to the command, and a
// descriptor the process inherited from its own parent (an open directory
// outside the workspace, a socket) would otherwise reach the sandbox. The
// command gets its standard streams and nothing else.
//
// script, when not nil, is handed to the command as descriptor scriptFD
// (a pooled sandbox's); command keeps it until launched.
func (s *Sandbox) command(bin string, argv []string, script *os.File) (*exec.Cmd, error) {
	if len(argv) == 0 {
		return nil, invalid("no command to run")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.used {
		return nil, invalid("a sandbox runs one command")
	}
	s.used = true
	setup := func(err error) error {
		return &Error{Op: "start", Root: s.policy.workspace, Err: ErrSetup, Cause: err, detail: err.Error()}
	}
	if err := closeOnExecAll(); err != nil {
		return nil, &Error{Op: "start", Root: s.policy.workspace, Err: ErrSetup, Cause: err,
			detail: "cannot keep this process's descriptors out of the sandbox: " + err.Error()}
	}
	// bwrap reads its options from a pipe: it can start (exec, link, set
	// itself up) while this process is still preparing the sandbox, and
	// waits for them (see Run).
	args, argsW, err := proc.Pipe(false, false)
	if err != nil {
		return nil, setup(err)
	}
	// The options go only once the caller has put bwrap in the run's
	// limits ([Run]): bwrap forks the sandbox right after reading them,
	// and a child forked before would be outside the cgroups and rlimits.
	s.argsW = argsW
	filter, err := seccompFilter(s.policy.Seccomp())
	if err != nil {
		args.Close()
		return nil, setup(err)
	}
	br, bw, err := proc.Pipe(false, false)
	if err != nil {
		args.Close()
		filter.Close()
		return nil, setup(err)
	}
	sr, sw, err := proc.Pipe(true, false)
	if err != nil {
		args.Close()
		filter.Close()
		br.Close()
		bw.Close()
		return nil, setup(err)
	}
	s.bin, s.blockR, s.blockW, s.statusR, s.statusW, s.argsR, s.filterR = bin, br, bw, sr, sw, args, filter
	s.scriptR = script
	s.status = make(chan statusRecord, 2)
	go s.readStatus(sr)
	extra := []*os.File{br, sw, args, filter, bw} // blockFD, statusFD, argsFD, seccompFD, holdFD
	if script != nil {
		extra = append(extra, script) // scriptFD
	}
	if s.egressCtl != nil {
		// The forwarder's control socket, the one descriptor beyond the
		// standard three that reaches the command; the forwarder keeps it
		// from the tool it runs.
		extra = append(extra, s.egressCtl)
		// An address-space limit is the tool's: the forwarder sets it
		// just before it executes the tool (see [Group.AddLeavingAS]).
		argv = egress.Forwarder(ForwarderPath, 3+len(extra)-1, s.policy.toolAS(), argv)
	}
	return &exec.Cmd{
		Path: bin,
		Args: append([]string{argv0(s.runID()), "--args", strconv.Itoa(argsFD), "--"}, argv...),
		Env:  s.Env(),
		// The workspace, where the command may write anyway: a bwrap
		// that ignored its --chdir (or every flag) would otherwise run
		// the command in /, as root in the host's root directory.
		Dir:        s.policy.workspace,
		ExtraFiles: extra,
	}, nil
}

// note records the sandbox's init and bwrap (their [limits.ProcessID]s;
// bwrap's, read while bwrap was setting the sandbox up) in the run's
// record in the registry of runs, in one write.
func (s *Sandbox) note(initPID, bwrapPID int, bwrapID string) error {
	s.mu.Lock()
	sess := s.session
	s.mu.Unlock()
	if sess == nil {
		return errors.New("no placeholder session")
	}
	initID := limits.ProcessID(initPID)
	if initID == "" {
		return fmt.Errorf("process %d is gone", initPID)
	}
	if bwrapID == "" {
		return fmt.Errorf("process %d is gone", bwrapPID)
	}
	return sess.Note(initID, bwrapID)
}

// runID is the ID of the run's placeholder session: bwrap starts under a
// name that carries it ([argv0]) before the session begins.
func (s *Sandbox) runID() string {
	s.idOnce.Do(func() { s.id = placeholder.NewID() })
	return s.id
}

// argv0 is the program name bwrap runs under in a run whose placeholder
// session is id: what of the sandbox a killed cordon left still carries it
// in its command line (bwrap and its forks, the sandbox's init, execute
// nothing else), for a later run to end ([sweepOrphans]). bwrap itself
// uses the name in its usage text alone. A random name, it tells the
// command, which sees its init's command line, nothing.
func argv0(id string) string { return "bwrap-run-" + id }

// sendArgs writes bwrap's options, NUL-separated, on its --args pipe and
// closes it, unless they went early ([Sandbox.sendEarly]): bwrap reads them
// to the end before it does anything.
func (s *Sandbox) sendArgs() error { return s.writeArgs(false) }

// sendEarly hands bwrap its options as soon as they are built and their
// pipe is made — before bwrap has started, it may be — for a run whose
// bwrap is under every limit of the run from its birth (it is born in the
// run's cgroups, and the plan sets no rlimit: [limits.Plan.BornLimited]),
// so that nothing is left to do to bwrap before it sets the sandbox up.
// It then need not wait for the thread that forked it to run again: on a
// host whose processors are busy (the host side being prepared on one,
// bwrap loading on the other), that thread, woken when bwrap executes,
// waited for a processor longer than anything else the start of a run
// takes. Only options that fit in the empty pipe go (the write cannot
// block); larger ones go once bwrap has started, as every run's did.
func (s *Sandbox) sendEarly() {
	s.mu.Lock()
	ok := s.early && s.built
	s.mu.Unlock()
	if ok {
		s.writeArgs(true)
	}
}

func (s *Sandbox) writeArgs(early bool) error {
	s.mu.Lock()
	w := s.argsW
	if w == nil {
		sent := s.sent
		s.mu.Unlock()
		if sent {
			return nil
		}
		return errors.New("bwrap: there is no pipe for the options")
	}
	args := s.sideArgs()
	n := 0
	for _, a := range args {
		n += len(a) + 1
	}
	if early {
		size, err := pipeCapacity(w.Fd())
		if err != nil || n > size {
			s.mu.Unlock()
			return nil // they go once bwrap has started
		}
	}
	s.argsW, s.sent = nil, true
	s.mu.Unlock()
	defer w.Close()
	b := make([]byte, 0, n)
	for _, a := range args {
		b = append(append(b, a...), 0)
	}
	_, err := w.Write(b)
	return err
}

// readStatus decodes bwrap's status records until bwrap closes the
// descriptor, then closes the channel.
func (s *Sandbox) readStatus(r io.Reader) {
	defer close(s.status)
	dec := json.NewDecoder(io.LimitReader(r, 64<<10))
	for range 2 {
		var rec statusRecord
		if err := dec.Decode(&rec); err != nil {
			return
		}
		s.status <- rec
	}
}

// launched closes this process's copies of the descriptors the command
// inherited, but for the reading end of the seccomp pipe, which
// [Sandbox.releaseTaken] asks about. Call it once the command's Start has
// returned, and before bwrap gets its options: with no reading end of
// its own, this process's write of the options fails (EPIPE) should
// bwrap die first, rather than wait for ever on a full pipe.
func (s *Sandbox) launched() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, f := range []*os.File{s.blockR, s.statusW, s.argsR, s.scriptR, s.egressCtl} {
		if f != nil {
			f.Close()
		}
	}
	s.blockR, s.statusW, s.argsR, s.scriptR, s.egressCtl = nil, nil, nil, nil, nil
}

// release lets the command start: bwrap reads one byte on its block
// descriptor. Call it only once the sandbox's init is verified.
func (s *Sandbox) release() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.blockW == nil {
		return errors.New("bwrap: the sandbox was released already")
	}
	_, err := s.blockW.Write([]byte{1})
	s.blockW.Close()
	s.blockW = nil
	return err
}

// watchRelease returns a channel closed once the sandbox's init has read
// from its seccomp pipe — right after it takes its release — and the end
// of that watch ([watchRead]); nil when it cannot be watched. Call it
// before the release.
func (s *Sandbox) watchRelease() (<-chan struct{}, func()) {
	s.mu.Lock()
	f := s.filterR
	s.mu.Unlock()
	if f == nil {
		return nil, func() {}
	}
	rc, err := f.SyscallConn()
	if err != nil {
		return nil, func() {}
	}
	var ch <-chan struct{}
	stop := func() {}
	rc.Control(func(fd uintptr) { ch, stop = watchRead(fd) })
	return ch, stop
}

// releaseTaken reports whether the sandbox's init has taken its release
// ([Sandbox.release]): bwrap mounts nothing after it reads the byte on its
// block descriptor, and right after that it reads its seccomp program to
// the end — so once nothing waits in the seccomp pipe (FIONREAD on a
// reading end this process keeps: one syscall, where reading the init's
// children in /proc is three), the sandbox's mount table is final. Nothing
// in the sandbox can write to that pipe: its one writing end was this
// process's, closed once the program was in, and the init closes its
// reading end before it starts the command. (The block pipe will not do:
// the command reaches its writing end, the init's --sync-fd, through
// /proc/1/fd, and could keep a byte in it.)
func (s *Sandbox) releaseTaken() bool {
	s.mu.Lock()
	f, released := s.filterR, s.blockW == nil
	s.mu.Unlock()
	if f == nil || !released {
		return false
	}
	c, err := f.SyscallConn()
	if err != nil {
		return false
	}
	n, ioErr := -1, error(nil)
	if err := c.Control(func(fd uintptr) { n, ioErr = pipeUnread(int(fd)) }); err != nil || ioErr != nil {
		return false
	}
	return n == 0
}

// takeSession hands over the sandbox's placeholder session, which Close
// then leaves alone.
func (s *Sandbox) takeSession() *placeholder.Session {
	s.mu.Lock()
	defer s.mu.Unlock()
	sess := s.session
	s.session = nil
	return sess
}

// Close releases the side channels and ends the workspace's placeholder
// session: the last run of the workspace to end removes the placeholders.
func (s *Sandbox) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, f := range []*os.File{s.blockR, s.blockW, s.statusR, s.statusW, s.argsR, s.argsW, s.filterR, s.scriptR} {
		if f != nil {
			f.Close()
		}
	}
	s.blockR, s.blockW, s.statusR, s.statusW, s.argsR, s.argsW, s.filterR, s.scriptR = nil, nil, nil, nil, nil, nil, nil, nil
	if s.session != nil {
		err := s.session.End()
		s.session = nil
		return err
	}
	return nil
}
