package landlock

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"

	"github.com/cordon-run/cordon/harness"
	"github.com/cordon-run/cordon/internal/placeholder"
	"github.com/cordon-run/cordon/internal/proc"
	"github.com/cordon-run/cordon/refusal"
	"github.com/cordon-run/cordon/substrate"
)

// ABI returns the kernel's Landlock ABI version, 0 when Landlock is off.
func ABI() int {
	v, err := ll.LandlockGetABIVersion()
	if err != nil {
		return 0
	}
	return v
}

// Available returns nil when the substrate can run here, or why not
// ([substrate.ErrUnavailable]).
func Available() error {
	switch abi := ABI(); {
	case abi == 0:
		return refusal.Errorf(refusal.SandboxUnavailable, "landlock: the kernel has no Landlock (not built in, or not in the lsm= list); use the bwrap substrate")
	case abi < RequiredABI:
		return refusal.Errorf(refusal.SandboxUnavailable, "landlock: the kernel's Landlock ABI is %d; the substrate needs %d (Linux 6.12 or newer) to scope signals and abstract unix sockets; use the bwrap substrate", abi, RequiredABI)
	}
	return nil
}

// Run runs the command under the policy and returns what happened and the
// mechanisms applied. An error means it did not run.
func Run(ctx context.Context, s Spec) (substrate.Outcome, []substrate.Mechanism, error) {
	p := s.Policy
	if len(s.Command) == 0 || s.Command[0] == "" {
		return substrate.Outcome{}, nil, refusal.Errorf(refusal.InvalidPolicy, "landlock: no command to run")
	}
	if err := Available(); err != nil {
		return substrate.Outcome{}, nil, err
	}
	ws := p.Workspace
	if canon, err := filepath.EvalSymlinks(ws); err != nil || canon != ws || !filepath.IsAbs(ws) {
		return substrate.Outcome{}, nil, refusal.Errorf(refusal.InvalidPolicy, "landlock: workspace %q is not an absolute, canonical directory", ws)
	}
	for _, name := range p.Env {
		if err := substrate.CheckEnvName(name); err != nil {
			return substrate.Outcome{}, nil, err
		}
	}
	h := s.Harness
	if h.IsZero() {
		h = harness.Default()
	}
	if err := h.CheckWorkspace(ws); err != nil {
		return substrate.Outcome{}, nil, err
	}
	if s.Environ == nil {
		s.Environ = os.Environ()
	}
	if s.Logger == nil {
		s.Logger = slog.New(slog.DiscardHandler)
	}
	read := append(slices.Clone(SystemDirs), p.ReadOnly...)
	if p.Access != AccessNone {
		read = append(read, ws)
	}
	// Landlock only adds access: cordon's own state must lie outside
	// everything the tool may read.
	for _, dir := range resolved(h.StateDir(), h.CacheDir()) {
		for _, r := range resolved(read...) {
			if within(dir, r) {
				return substrate.Outcome{}, nil, refusal.Errorf(refusal.SandboxUnavailable,
					"landlock: cordon's trusted state %s is inside %s, which the tool may read; move it (harness configuration) or use the bwrap substrate", dir, r)
			}
		}
	}

	scratch, err := os.MkdirTemp("", "cordon-landlock-")
	if err != nil {
		return substrate.Outcome{}, nil, refusal.Errorf(refusal.SandboxUnavailable, "landlock: cannot make the run's scratch directory: %w", err)
	}
	defer os.RemoveAll(scratch)
	if scratch, err = filepath.EvalSymlinks(scratch); err != nil || within(scratch, ws) || within(ws, scratch) {
		return substrate.Outcome{}, nil, refusal.Errorf(refusal.InvalidPolicy, "landlock: the scratch directory %s overlaps the workspace %s; set TMPDIR outside it", scratch, ws)
	}
	home, tmp := filepath.Join(scratch, "home"), filepath.Join(scratch, "tmp")
	for _, d := range []string{home, tmp} {
		if err := os.Mkdir(d, 0o700); err != nil {
			return substrate.Outcome{}, nil, refusal.Errorf(refusal.SandboxUnavailable, "landlock: %w", err)
		}
	}
	var lead []string
	if p.Access != AccessNone && !p.SystemPath {
		lead = []string{filepath.Join(ws, ".local", "bin")}
	}
	env := append(reachablePath(substrate.Environment(s.Environ, lead, p.SystemPath, home, p.Env), read), "TMPDIR="+tmp)

	cfg := config{
		Workspace: ws, Argv: s.Command, Env: env, Read: read, Proc: true, Devices: Devices,
		Write: []string{scratch}, Scratch: scratch, Network: p.Network, Ports: p.Ports, Seccomp: p.Seccomp(),
	}
	// The workspace's run lock, as every native run of it holds, whatever
	// its access: no run of an enclosing workspace changes it while the
	// rules are made, and none of a nested one starts meanwhile.
	sess, err := placeholder.Begin(h.StateDir(), ws)
	if err != nil {
		return substrate.Outcome{}, nil, refusal.Errorf(refusal.SandboxUnavailable, "landlock: %w", err)
	}
	defer sess.End()
	var prot *harness.Protected
	if p.Access == AccessWrite {
		// Harness state exists before the run, as on every substrate (the
		// tool could not create it at the top level anyway).
		for _, st := range h.State() {
			if err := os.Mkdir(filepath.Join(ws, st), 0o700); err != nil && !errors.Is(err, os.ErrExist) {
				return substrate.Outcome{}, nil, refusal.Errorf(refusal.SandboxUnavailable, "landlock: cannot create harness state %s: %w", st, err)
			}
		}
		// The submodules trusted as the user's are those every other run
		// going on trusts too, and the entries of those any of them trusts
		// are protected here as well.
		if prot, err = h.ProtectBeside(ws, sess, nil); err != nil {
			var be *harness.BesideError
			if errors.As(err, &be) {
				return substrate.Outcome{}, nil, refusal.Errorf(refusal.SandboxUnavailable, "landlock: %w", err)
			}
			return substrate.Outcome{}, nil, err
		}
		cfg.Spine, cfg.Protected = spineOf(prot)
	}
	grp, err := p.Limits.Start(helperProcesses)
	if err != nil {
		return substrate.Outcome{}, nil, refusal.Errorf(refusal.SandboxUnavailable, "landlock: %w", err)
	}
	defer grp.Close()
	cfg.Limits = grp.Self()
	data, err := json.Marshal(cfg)
	if err != nil {
		return substrate.Outcome{}, nil, err
	}
	cfgR, cfgW, err := os.Pipe()
	if err != nil {
		return substrate.Outcome{}, nil, err
	}
	defer cfgW.Close()
	statusR, statusW, err := os.Pipe()
	if err != nil {
		cfgR.Close()
		return substrate.Outcome{}, nil, err
	}
	defer statusR.Close()
	cmd := &exec.Cmd{
		Path: "/proc/self/exe", Args: []string{supervisorArg0}, Env: helperEnv, Dir: ws,
		ExtraFiles: []*os.File{cfgR, statusW},
		// Should cordon die, the supervisor ends the run as at a deadline:
		// a SIGKILL would leave the tool's processes to init.
		SysProcAttr: &syscall.SysProcAttr{Setsid: true, Pdeathsig: syscall.SIGUSR1},
	}
	s.Logger.Debug("run under landlock", "command", s.Command, "workspace", ws, "access", p.Access, "network", p.Network)
	t, err := proc.Start(proc.Spec{Cmd: cmd, Stdin: s.Stdin, MaxOutput: s.MaxOutput, Timeout: s.Timeout, Grace: s.Grace, Reaper: true, FreshKeyring: true, Logger: s.Logger})
	cfgR.Close()
	statusW.Close()
	if err != nil {
		return substrate.Outcome{}, nil, refusal.Errorf(refusal.SandboxUnavailable, "landlock: cannot start the supervisor: %w", err)
	}
	cfgW.Write(data)
	cfgW.Close()
	grp.Sweep()
	line, _ := bufio.NewReader(io.LimitReader(statusR, 8192)).ReadString('\n')
	o := t.Wait(ctx)
	line = strings.TrimSpace(line)
	mechs := p.Mechanisms(ABI())
	switch {
	case line == "started":
	case o.TimedOut || o.Canceled:
	case strings.HasPrefix(line, "failed "):
		code, msg, _ := strings.Cut(strings.TrimPrefix(line, "failed "), " ")
		if n, _ := strconv.Atoi(code); n == 126 || n == 127 {
			msg := fmt.Sprintf("cordon: %s: %s\n", s.Command[0], msg)
			return substrate.Outcome{ExitCode: n, Stderr: msg, StderrBytes: int64(len(msg)), Duration: o.Duration}, mechs, nil
		}
		return substrate.Outcome{}, nil, refusal.Errorf(refusal.SandboxUnavailable, "landlock: the sandbox could not be set up (the command never started): %s", msg)
	default:
		return substrate.Outcome{}, nil, refusal.Errorf(refusal.SandboxUnavailable, "landlock: the supervisor ended before the command started (%s; stderr %q)", o, o.Stderr)
	}
	if prot != nil {
		o.Notes = prot.QuarantineNotes()
	}
	o.Notes = append(o.Notes, grp.Notes()...)
	return o, mechs, nil
}

// spineOf returns the workspace's spine directories — the root, and every
// directory on the way to a protected path — and its read-only paths:
// harness state and the write-later set.
func spineOf(prot *harness.Protected) (spine, protected []string) {
	add := func(rel string) {
		for d := path.Dir(rel); ; d = path.Dir(d) {
			if d == "." {
				d = ""
			}
			if !slices.Contains(spine, d) {
				spine = append(spine, d)
			}
			if d == "" {
				return
			}
		}
	}
	spine = []string{""}
	for _, st := range prot.State() {
		protected = append(protected, st)
	}
	for _, q := range prot.Paths() {
		add(q.Rel)
		if q.Mode == harness.ReadOnly {
			protected = append(protected, q.Rel)
		}
	}
	slices.Sort(spine)
	return spine, protected
}

// resolved returns each path as given and, where it differs, with its
// symlinks resolved: a directory is inside another if either form is.
func resolved(paths ...string) []string {
	var out []string
	for _, p := range paths {
		out = append(out, p)
		if r, err := filepath.EvalSymlinks(p); err == nil && r != p {
			out = append(out, r)
		}
	}
	return out
}

// reachablePath drops from env's PATH the directories the tool cannot
// read: a program found there (a shim under the caller's home) could
// only fail with "permission denied", hiding the system's.
func reachablePath(env []string, read []string) []string {
	for i, kv := range env {
		v, ok := strings.CutPrefix(kv, "PATH=")
		if !ok {
			continue
		}
		var keep []string
		for _, d := range filepath.SplitList(v) {
			for _, r := range read {
				if filepath.IsAbs(d) && within(filepath.Clean(d), r) {
					keep = append(keep, d)
					break
				}
			}
		}
		env[i] = "PATH=" + strings.Join(keep, ":")
	}
	return env
}

// within reports whether p is dir or inside it.
func within(p, dir string) bool {
	return p == dir || dir == "/" || strings.HasPrefix(p, dir+"/")
}
