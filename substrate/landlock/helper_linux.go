package landlock

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	goruntime "runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"

	"github.com/cordon-run/cordon/internal/limits"
	"github.com/cordon-run/cordon/internal/seccomp"
	"github.com/cordon-run/cordon/substrate"
)

// The argv[0] of the helpers: a process started with one of them is a
// helper, whatever binary it is (cordon, a test binary, a program that
// embeds the substrate).
const (
	supervisorArg0 = "cordon-landlock-supervisor"
	confinerArg0   = "cordon-landlock-confiner"
)

// The helpers' descriptors: the configuration (read to its end, then
// closed) and the status channel (one line: "started", or "failed CODE
// message").
const (
	configFD = 3
	statusFD = 4
)

func init() {
	if len(os.Args) == 0 {
		return
	}
	switch os.Args[0] {
	case supervisorArg0:
		goruntime.LockOSThread() // never unlocked: the scope domain is this thread's, and it forks and kills
		os.Exit(supervise())
	case confinerArg0:
		goruntime.LockOSThread() // never unlocked: the restrictions are this thread's, and it execs
		os.Exit(confine())
	}
}

// helperEnv is the helpers' own environment: none (the command's is in
// their configuration), but for the race detector's options in a binary
// built with it (race.go).
var helperEnv = []string{}

// config is what the helpers are told, as JSON on configFD.
type config struct {
	Workspace string   `json:"workspace"`
	Argv      []string `json:"argv"`
	Env       []string `json:"env"`
	// Read are host paths readable and executable beneath; Devices are
	// files readable and writable; Write are directories with every
	// access beneath. Spine are workspace-relative directories (""
	// the root) in which nothing may be created, removed or renamed;
	// every entry of them that is neither a spine directory nor in
	// Protected gets write access. Protected are workspace-relative
	// paths that stay read-only.
	Read      []string       `json:"read"`
	Proc      bool           `json:"proc"`
	Devices   []string       `json:"devices"`
	Write     []string       `json:"write"`
	Spine     []string       `json:"spine"`
	Protected []string       `json:"protected"`
	Network   Network        `json:"network"`
	Ports     []int          `json:"ports"`
	Seccomp   seccomp.Policy `json:"seccomp"`
	Limits    limits.Self    `json:"limits"`
	// Scratch is the run's HOME and TMPDIR, which the supervisor removes
	// after the run (cordon does too, unless it died).
	Scratch string `json:"scratch"`
}

func readConfig() (*config, error) {
	f := os.NewFile(configFD, "config")
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, 1<<20))
	if err != nil {
		return nil, err
	}
	var c config
	if err := json.Unmarshal(data, &c); err != nil {
		return nil, fmt.Errorf("bad configuration: %w", err)
	}
	return &c, nil
}

// fail reports a setup failure on the status descriptor and returns the
// exit code.
func fail(status io.Writer, code int, format string, args ...any) int {
	fmt.Fprintf(status, "failed %d %s\n", code, strings.ReplaceAll(fmt.Sprintf(format, args...), "\n", " "))
	return code
}

// supervise is the first helper: the child subreaper of the run. It
// enters a Landlock domain of its own that only scopes signals (D0), so
// that the tool, confined in a domain nested in it, can neither signal it
// nor escape it: kill(-1) from D0 reaches exactly the processes of D0 and
// of the domains nested in it — the run's, whatever their parent,
// session or group — and nothing else of the user's. It starts the
// confiner with the configuration, reports whether the tool started, reaps
// every child (orphans of the tool become its children), and when the tool
// has ended — or cordon says the deadline has come (SIGUSR1) — kills the
// whole domain until no process of it is left, then exits as the tool did.
func supervise() int {
	status := os.NewFile(statusFD, "status")
	cfg, err := readConfig()
	if err != nil {
		return fail(status, 125, "supervisor: %v", err)
	}
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return fail(status, 125, "supervisor: cannot become the child subreaper: %v", err)
	}
	if err := scopeSelf(); err != nil {
		return fail(status, 125, "supervisor: %v", err)
	}
	// TERM, INT and HUP end the tool (cordon sends them to the whole
	// group), not the supervisor, which must outlive the tool's tree;
	// USR1 is cordon's word that the grace period is over. Everything
	// that forks or kills happens on this goroutine, on this thread.
	// USR1 comes too when cordon dies (the supervisor's parent-death
	// signal): the run ends with it. It has a channel of its own, so
	// that a flood of SIGCHLD cannot crowd it out.
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGCHLD)
	usr1 := make(chan os.Signal, 1)
	signal.Notify(usr1, syscall.SIGUSR1)
	data, _ := json.Marshal(cfg)
	cfgR, cfgW, err := os.Pipe()
	if err != nil {
		return fail(status, 125, "supervisor: %v", err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		return fail(status, 125, "supervisor: %v", err)
	}
	confiner, err := os.StartProcess("/proc/self/exe", []string{confinerArg0}, &os.ProcAttr{
		Dir: cfg.Workspace, Env: helperEnv,
		Files: []*os.File{os.Stdin, os.Stdout, os.Stderr, cfgR, errW},
	})
	if err != nil {
		return fail(status, 125, "supervisor: cannot start the confiner: %v", err)
	}
	cfgR.Close()
	errW.Close()
	cfgW.Write(data)
	cfgW.Close()
	msg, _ := io.ReadAll(io.LimitReader(errR, 4096))
	errR.Close()
	if len(msg) > 0 {
		status.Write(msg)
	} else {
		status.Write([]byte("started\n"))
	}
	status.Close()
	code := 125
	for {
		var ws unix.WaitStatus
		pid, err := unix.Wait4(-1, &ws, unix.WNOHANG, nil)
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case err != nil: // ECHILD: nothing left
			if cfg.Scratch != "" {
				os.RemoveAll(cfg.Scratch)
			}
			return code
		case pid == confiner.Pid:
			if ws.Signaled() {
				code = 128 + int(ws.Signal())
			} else {
				code = ws.ExitStatus()
			}
			// The tool is done: what it left dies with it.
			killDomain(true)
			continue
		case pid > 0:
			continue // an orphan of the tool, reaped
		}
		// Children left, none ended: wait for the next one to end, or for
		// cordon's word.
		select {
		case <-sigs:
		case <-usr1:
			killDomain(false)
		}
	}
}

// scopeSelf puts this thread in a Landlock domain that restricts nothing
// but signals and abstract unix sockets, and checks that it holds: a
// signal to the parent (cordon, outside) must fail. The thread is the
// process's main one, so that a signal to the process is one to the
// domain's member; its other threads belong to no domain, which is
// outside the tool's too.
func scopeSelf() error {
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("cannot set no_new_privs: %v", err)
	}
	attr := ll.RulesetAttr{Scoped: ll.ScopeAbstractUnixSocket | ll.ScopeSignal}
	rs, err := ll.LandlockCreateRuleset(&attr, 0)
	if err != nil {
		return fmt.Errorf("cannot create the scope domain: %v", err)
	}
	defer unix.Close(rs)
	if err := ll.LandlockRestrictSelf(rs, 0); err != nil {
		return fmt.Errorf("cannot enter the scope domain: %v", err)
	}
	if err := unix.Kill(os.Getppid(), 0); !errors.Is(err, unix.EPERM) {
		return fmt.Errorf("the scope domain does not hold: a signal to cordon (process %d) answered %v", os.Getppid(), err)
	}
	return nil
}

// killDomain sends SIGKILL, from the scoped thread, to every process of
// the supervisor's domain and of the domains nested in it (kill(-1) from
// there reaches nothing else): every process of the run, which are all the
// supervisor's descendants. A killed process cannot fork. With reap, it
// reaps them (orphans become the supervisor's children) until the
// supervisor has no child left, which is when the run's last process is
// gone; without, it kills once and leaves the reaping to the main loop.
// Bounded: about 10 s.
func killDomain(reap bool) {
	for range 10000 {
		unix.Kill(-1, unix.SIGKILL)
		if !reap {
			return
		}
		for {
			var ws unix.WaitStatus
			pid, err := unix.Wait4(-1, &ws, unix.WNOHANG, nil)
			if errors.Is(err, unix.ECHILD) {
				return
			}
			if pid <= 0 || err != nil {
				break // children left, none ended yet
			}
		}
		time.Sleep(time.Millisecond)
	}
}

// confine is the second helper: it applies the restrictions to itself and
// executes the tool. Its status descriptor closes on exec: an empty status
// means the tool started.
func confine() int {
	status := os.NewFile(statusFD, "status")
	unix.CloseOnExec(statusFD)
	cfg, err := readConfig()
	if err != nil {
		return fail(status, 125, "confiner: %v", err)
	}
	if err := cfg.Limits.Join(); err != nil {
		return fail(status, 125, "%v", err)
	}
	if err := dropCapabilities(); err != nil {
		return fail(status, 125, "cannot drop capabilities: %v", err)
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fail(status, 125, "cannot set no_new_privs: %v", err)
	}
	if err := restrict(cfg); err != nil {
		return fail(status, 125, "landlock: %v", err)
	}
	if err := seccomp.Apply(cfg.Seccomp); err != nil {
		return fail(status, 125, "seccomp: %v", err)
	}
	path, _ := substrate.LookupEnv(cfg.Env, "PATH")
	prog, code, why := substrate.LookPath(cfg.Argv[0], path, cfg.Workspace)
	if code != 0 {
		return fail(status, code, "%s", why)
	}
	// Nothing but the standard streams reaches the tool: a descriptor
	// this process inherited would be a way around the rules.
	if err := unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC); err != nil {
		return fail(status, 125, "cannot close the inherited descriptors: %v", err)
	}
	if err := cfg.Limits.Apply(); err != nil {
		return fail(status, 125, "%v", err)
	}
	err = syscall.Exec(prog, cfg.Argv, cfg.Env)
	switch {
	case errors.Is(err, unix.ENOENT):
		return fail(status, 127, "command not found")
	case errors.Is(err, unix.EACCES), errors.Is(err, unix.ENOEXEC), errors.Is(err, unix.EISDIR), errors.Is(err, unix.EPERM):
		return fail(status, 126, "permission denied")
	}
	return fail(status, 125, "cannot execute %s: %v", prog, err)
}

// dropCapabilities empties the ambient, inheritable, permitted and
// effective sets — of any caller, not only root: a user may hold ambient
// capabilities — and, where this process may (CAP_SETPCAP, as root),
// the bounding set, locking SECBIT_NOROOT so that root gains nothing when
// it executes the tool. It then checks that no capability is left.
func dropCapabilities() error {
	var hdr = unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return fmt.Errorf("capget: %w", err)
	}
	const capSetpcap = 8
	privileged := data[0].Effective&(1<<capSetpcap) != 0
	if privileged {
		for c := 0; c <= lastCap(); c++ {
			if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil && !errors.Is(err, unix.EINVAL) {
				return fmt.Errorf("PR_CAPBSET_DROP %d: %w", c, err)
			}
		}
		// <linux/securebits.h>: NOROOT, NO_SETUID_FIXUP, KEEP_CAPS (locked
		// only) and NO_CAP_AMBIENT_RAISE, each with its lock.
		const (
			noRoot, noRootLocked            = 1 << 0, 1 << 1
			noSetuidFixup, noSetuidLocked   = 1 << 2, 1 << 3
			keepCapsLocked                  = 1 << 5
			noAmbientRaise, noAmbientLocked = 1 << 6, 1 << 7
		)
		const bits = noRoot | noRootLocked | noSetuidFixup | noSetuidLocked | keepCapsLocked | noAmbientRaise | noAmbientLocked
		if err := unix.Prctl(unix.PR_SET_SECUREBITS, bits, 0, 0, 0); err != nil {
			return fmt.Errorf("PR_SET_SECUREBITS: %w", err)
		}
	}
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil {
		return fmt.Errorf("PR_CAP_AMBIENT_CLEAR_ALL: %w", err)
	}
	data = [2]unix.CapUserData{} // everything zero: no capability at all
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return fmt.Errorf("capset: %w", err)
	}
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return fmt.Errorf("capget: %w", err)
	}
	for _, d := range data {
		if d.Effective|d.Permitted|d.Inheritable != 0 {
			return fmt.Errorf("capabilities remain: %+v", data)
		}
	}
	return nil
}

func lastCap() int {
	data, err := os.ReadFile("/proc/sys/kernel/cap_last_cap")
	if n, perr := strconv.Atoi(strings.TrimSpace(string(data))); err == nil && perr == nil {
		return n
	}
	return 63
}

// The access rights the rules grant.
const (
	readRights  = ll.AccessFSExecute | ll.AccessFSReadFile | ll.AccessFSReadDir
	fileRights  = ll.AccessFSExecute | ll.AccessFSReadFile | ll.AccessFSWriteFile | ll.AccessFSTruncate
	deviceRight = ll.AccessFSReadFile | ll.AccessFSWriteFile | ll.AccessFSTruncate
	// handledFS is every file system right of ABI 6 (the first 16 bits).
	handledFS = uint64(1<<16 - 1)
	// dirRights is every right but device ioctls.
	dirRights = handledFS &^ ll.AccessFSIoctlDev
)

// restrict builds the ruleset of cfg and applies it to this thread.
func restrict(cfg *config) error {
	abi, err := ll.LandlockGetABIVersion()
	if err != nil {
		return fmt.Errorf("Landlock is not available: %v", err)
	}
	if abi < RequiredABI {
		return fmt.Errorf("the kernel's Landlock ABI is %d; %d is required", abi, RequiredABI)
	}
	attr := ll.RulesetAttr{HandledAccessFS: handledFS, Scoped: ll.ScopeAbstractUnixSocket | ll.ScopeSignal}
	if cfg.Network != NetHost {
		attr.HandledAccessNet = ll.AccessNetBindTCP | ll.AccessNetConnectTCP
	}
	rs, err := ll.LandlockCreateRuleset(&attr, 0)
	if err != nil {
		return fmt.Errorf("cannot create a ruleset: %v", err)
	}
	defer unix.Close(rs)
	add := func(fd int, rights uint64, what string) error {
		if err := ll.LandlockAddPathBeneathRule(rs, &ll.PathBeneathAttr{AllowedAccess: rights, ParentFd: fd}, 0); err != nil {
			return fmt.Errorf("cannot add the rule for %s: %v", what, err)
		}
		return nil
	}
	addPath := func(p string, rights uint64, dirOnly bool) error {
		fd, err := unix.Open(p, unix.O_PATH|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
		if errors.Is(err, unix.ENOENT) {
			return nil // not on this host
		}
		if err != nil {
			return fmt.Errorf("cannot open %s: %v", p, err)
		}
		defer unix.Close(fd)
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			return err
		}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFLNK:
			return nil // a symlink (/lib on a merged-/usr host): its target has its own rule
		case unix.S_IFDIR:
		default:
			if dirOnly {
				return fmt.Errorf("%s is not a directory", p)
			}
			rights &= fileRights | deviceRight
		}
		return add(fd, rights, p)
	}
	for _, p := range cfg.Read {
		if err := addPath(p, readRights, false); err != nil {
			return err
		}
	}
	if cfg.Proc {
		if err := addPath("/proc", ll.AccessFSReadFile|ll.AccessFSReadDir, true); err != nil {
			return err
		}
	}
	for _, p := range cfg.Devices {
		if err := addPath(p, deviceRight, false); err != nil {
			return err
		}
	}
	for _, p := range cfg.Write {
		if err := addPath(p, dirRights, true); err != nil {
			return err
		}
	}
	if err := addSpine(cfg, add); err != nil {
		return err
	}
	for _, port := range cfg.Ports {
		if err := ll.LandlockAddNetPortRule(rs, &ll.NetPortAttr{AllowedAccess: ll.AccessNetConnectTCP, Port: uint64(port)}, 0); err != nil {
			return fmt.Errorf("cannot add the rule for TCP port %d: %v", port, err)
		}
	}
	if err := ll.LandlockRestrictSelf(rs, 0); err != nil {
		return fmt.Errorf("landlock_restrict_self: %v", err)
	}
	return nil
}

// addSpine gives write access to every entry of the spine directories
// that is neither a spine directory nor protected: a directory gets every
// right beneath it, a regular file read, write and truncate; anything else
// (a symlink, a socket) nothing. Directories are opened component by
// component without following symlinks.
func addSpine(cfg *config, add func(fd int, rights uint64, what string) error) error {
	if len(cfg.Spine) == 0 {
		return nil
	}
	root, err := unix.Open(cfg.Workspace, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if err != nil {
		return fmt.Errorf("cannot open the workspace %s: %v", cfg.Workspace, err)
	}
	defer unix.Close(root)
	for _, dir := range cfg.Spine {
		fd, err := openBeneath(root, dir)
		if errors.Is(err, unix.ENOENT) {
			continue // absent: its parent is a spine directory, so it cannot be created
		}
		if err != nil {
			return fmt.Errorf("cannot open %s of the workspace: %v", dir, err)
		}
		f := os.NewFile(uintptr(fd), dir)
		names, err := f.Readdirnames(-1)
		if err != nil {
			f.Close()
			return fmt.Errorf("cannot list %s of the workspace: %v", dir, err)
		}
		for _, name := range names {
			rel := name
			if dir != "" {
				rel = dir + "/" + name
			}
			if slices.Contains(cfg.Spine, rel) || slices.Contains(cfg.Protected, rel) {
				continue
			}
			efd, err := unix.Openat(fd, name, unix.O_PATH|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
			if err != nil {
				continue // gone meanwhile
			}
			var st unix.Stat_t
			err = unix.Fstat(efd, &st)
			switch {
			case err != nil:
			case st.Mode&unix.S_IFMT == unix.S_IFDIR:
				err = add(efd, dirRights, rel)
			case st.Mode&unix.S_IFMT == unix.S_IFREG:
				err = add(efd, fileRights, rel)
			}
			unix.Close(efd)
			if err != nil {
				f.Close()
				return err
			}
		}
		f.Close()
	}
	return nil
}

// openBeneath opens the workspace-relative directory rel below root, one
// component at a time, never following a symlink.
func openBeneath(root int, rel string) (int, error) {
	fd, err := unix.Dup(root)
	if err != nil || rel == "" {
		return fd, err
	}
	for _, part := range strings.Split(rel, "/") {
		next, err := unix.Openat(fd, part, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
		unix.Close(fd)
		if err != nil {
			return -1, err
		}
		fd = next
	}
	return fd, nil
}
