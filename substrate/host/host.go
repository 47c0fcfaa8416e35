// Package host is the explicit no-sandbox substrate: a native command runs
// on the host, in the workspace, unconfined — only its environment is
// allow-listed and its time, output and process tree are bounded. It is
// what `cordon exec --no-sandbox` runs on, never a fallback: every result
// says "sandboxed": false.
//
// # The process tree
//
// Where the kernel allows it (as root, or through a user namespace that
// maps the caller's own IDs), the command runs in a private PID namespace
// under /bin/sh as its init: the command is PID 2, so that its own signals
// and exit statuses are what they would be on the host (a command that
// kills itself with SIGKILL exits 137), and when the command ends, the
// namespace — every background process it left — ends with it. Where no
// namespace can be made, the tree is the command's process group and its
// descendants by parent; the result's mechanisms say which applied.
//
// # Limitations
//
//   - Nothing is confined: the command can read and write whatever the user
//     can, reach the network, and change the workspace's harness state and
//     write-later paths. The file tools keep their guards.
//   - In the PID namespace, /proc still shows the host, setuid programs
//     such as sudo gain no privileges (through the user namespace), and a
//     command killed by a signal is reported as its shell init reports it,
//     exit code 128+N.
//   - Without a namespace, a process that both leaves the group and loses
//     its parent can outlive the run.
package host

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/cordon-run/cordon/capabilities"
	"github.com/cordon-run/cordon/internal/proc"
	"github.com/cordon-run/cordon/refusal"
	"github.com/cordon-run/cordon/substrate"
)

// Name is the substrate's name in results.
const Name = "host"

// The mechanisms of a host run.
var (
	MechNoSandbox = substrate.Mechanism{Substrate: Name, Name: "no-sandbox", Detail: "no sandbox (explicit --no-sandbox)"}
	MechGroup     = substrate.Mechanism{Substrate: Name, Name: "process-group", Detail: "own session and process group"}
	MechPIDNS     = substrate.Mechanism{Substrate: Name, Name: "pid-namespace", Detail: "PID 2 under /bin/sh as PID 1 of a private PID namespace: the tree dies with the command"}
	MechPIDNSUser = substrate.Mechanism{Substrate: Name, Name: "pid-namespace", Detail: "PID 2 under /bin/sh as PID 1 of a private PID namespace (in a user namespace mapping the caller's IDs): the tree dies with the command"}
	MechNoNS      = substrate.Mechanism{Substrate: Name, Name: "no-pid-namespace", Detail: "no PID namespace could be created: a process that leaves the group and loses its parent can outlive the run"}
	MechEnv       = substrate.Mechanism{Substrate: Name, Name: "clearenv", Detail: "environment: PATH=<ws>/.local/bin:..., the caller's HOME, LANG, TERM and granted names only"}
)

// Spec is one command to run on the host.
type Spec struct {
	// Workspace is the working directory (absolute).
	Workspace string
	// Command is the program and its arguments, looked up in the PATH of
	// the command's environment.
	Command []string
	// Env names the caller's variables passed in beyond PATH, HOME, LANG
	// and TERM.
	Env []string
	// Environ is the caller's environment (os.Environ() if nil).
	Environ []string
	// Stdin is the command's standard input (empty if nil).
	Stdin io.Reader
	// Timeout, Grace and MaxOutput bound the run (package proc's defaults
	// if zero).
	Timeout, Grace time.Duration
	MaxOutput      int64
	// Logger receives debug records (discarded if nil).
	Logger *slog.Logger
}

// shellInit runs the command as the child of /bin/sh, PID 1 of the
// namespace, and exits with its status: the command is never PID 1 itself,
// whose signals the kernel would ignore.
const shellInit = `"$@"; exit $?`

// Run runs the command and returns what happened. An error means it did
// not run: the spec is invalid ([refusal.InvalidPolicy]) or a variable is
// refused ([substrate.ErrEnvRefused]). A command that is not found (127) or
// not executable (126) is an outcome.
func Run(ctx context.Context, s Spec) (substrate.Outcome, []substrate.Mechanism, error) {
	mechs := []substrate.Mechanism{MechNoSandbox}
	if len(s.Command) == 0 || s.Command[0] == "" {
		return substrate.Outcome{}, mechs, refusal.Errorf(refusal.InvalidPolicy, "cannot run: no command to run")
	}
	if !filepath.IsAbs(s.Workspace) {
		return substrate.Outcome{}, mechs, refusal.Errorf(refusal.InvalidPolicy, "cannot run: workspace %q is not an absolute path", s.Workspace)
	}
	for _, name := range s.Env {
		if err := substrate.CheckEnvName(name); err != nil {
			return substrate.Outcome{}, mechs, err
		}
	}
	if s.Environ == nil {
		s.Environ = os.Environ()
	}
	if s.Logger == nil {
		s.Logger = slog.New(slog.DiscardHandler)
	}
	home, _ := substrate.LookupEnv(s.Environ, "HOME")
	env := substrate.Environment(s.Environ, []string{filepath.Join(s.Workspace, ".local", "bin")}, false, home, s.Env)
	path, _ := substrate.LookupEnv(env, "PATH")
	prog, code, why := substrate.LookPath(s.Command[0], path, s.Workspace)
	if code != 0 {
		msg := fmt.Sprintf("cordon: %s: %s\n", s.Command[0], why)
		return substrate.Outcome{ExitCode: code, Stderr: msg, StderrBytes: int64(len(msg))}, mechs, nil
	}
	var t *proc.Tree
	var err error
	for _, ns := range []bool{true, false} {
		attr, used := procAttr(ns)
		if attr == nil {
			continue
		}
		cmd := &exec.Cmd{Path: prog, Args: s.Command, Env: env, Dir: s.Workspace, SysProcAttr: attr}
		if ns {
			cmd.Path = "/bin/sh"
			cmd.Args = append([]string{"sh", "-c", shellInit, "cordon", prog}, s.Command[1:]...)
		}
		mechs = append([]substrate.Mechanism{MechNoSandbox, MechGroup}, used...)
		s.Logger.Debug("run on the host", "command", s.Command, "pid-namespace", ns)
		t, err = proc.Start(proc.Spec{Cmd: cmd, Stdin: s.Stdin, MaxOutput: s.MaxOutput, Timeout: s.Timeout, Grace: s.Grace, Logger: s.Logger})
		if err == nil || !nsRefused(err) {
			break
		}
	}
	mechs = append(mechs, MechEnv)
	if err != nil {
		code := 0
		switch {
		case errors.Is(err, os.ErrNotExist):
			code = 127
		case errors.Is(err, os.ErrPermission), isExecError(err):
			code = 126
		default:
			return substrate.Outcome{}, mechs, refusal.Errorf(refusal.InvalidPolicy, "cannot start %s: %w", s.Command[0], err)
		}
		msg := fmt.Sprintf("cordon: %s: %v\n", s.Command[0], err)
		return substrate.Outcome{ExitCode: code, Stderr: msg, StderrBytes: int64(len(msg))}, mechs, nil
	}
	return t.Wait(ctx), mechs, nil
}

// Enforcer is the host substrate's side of admission for cordon exec
// --no-sandbox: it names what holds a command on the host, which is
// nothing but the environment allow-list and process control. It refuses
// what only a sandbox could enforce.
type Enforcer struct{}

// Name returns "host".
func (Enforcer) Name() string { return Name }

// Facts returns the host's facts.
func (Enforcer) Facts(context.Context) (substrate.Facts, error) { return substrate.HostFacts(Name) }

// Mechanisms returns how a command on the host is held to c.
func (Enforcer) Mechanisms(c capabilities.Capability, set capabilities.Set) ([]substrate.Mechanism, error) {
	refuse := func(reason string, instead ...string) error {
		return &substrate.UnenforceableError{Substrate: Name, Capability: c, Reason: reason, Instead: instead}
	}
	switch c.Kind() {
	case capabilities.KindFSRead, capabilities.KindFSWrite, capabilities.KindTmp:
		if c.Kind() == capabilities.KindFSRead && !set.Has(capabilities.WriteWorkspace()) {
			return nil, refuse("without a sandbox the command can write wherever the user can", "fs.write:workspace with --no-sandbox, or a sandbox")
		}
		return []substrate.Mechanism{MechNoSandbox}, nil
	case capabilities.KindNet:
		if c == capabilities.HostNet() {
			return []substrate.Mechanism{MechNoSandbox}, nil
		}
		return nil, refuse("without a sandbox the network cannot be restricted", "net:host with --no-sandbox, or a sandbox")
	case capabilities.KindEnv:
		return []substrate.Mechanism{MechEnv}, nil
	case capabilities.KindTime:
		return []substrate.Mechanism{{Substrate: "proc", Name: "deadline", Detail: "deadline " + c.Arg() + ", then TERM, grace, KILL"}}, nil
	case capabilities.KindOutput:
		return []substrate.Mechanism{{Substrate: "proc", Name: "bounded-output", Detail: "keep " + c.Arg() + " of stdout and of stderr, drain the rest"}}, nil
	}
	return nil, refuse("nothing on the host enforces it without a sandbox")
}
