package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"sync/atomic"
	"syscall"

	"github.com/spf13/pflag"

	"github.com/cordon-run/cordon/admission"
	"github.com/cordon-run/cordon/harness"
	"github.com/cordon-run/cordon/probes"
	"github.com/cordon-run/cordon/refusal"
	"github.com/cordon-run/cordon/runtime"
	"github.com/cordon-run/cordon/substrate"
	"github.com/cordon-run/cordon/substrate/bwrap"
	"github.com/cordon-run/cordon/substrate/host"
	"github.com/cordon-run/cordon/substrate/landlock"
	"github.com/cordon-run/cordon/substrate/oci"
	"github.com/cordon-run/cordon/substrate/workspace"
)

// env is what a command runs with: its streams and the flags every command
// shares.
type env struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	getenv         func(string) string

	workspace   string
	harnessAdd  []string
	json        bool
	harness     harness.Config
	harnessFile string

	// prov is the evidence prover, opened once per command; closers run
	// when the command returns.
	prov    *probes.Prover
	closers []func()

	// args is the whole command line, for a front end's hand-off of it
	// to the full binary ([env.handOff]).
	args []string
}

// command is one command of the CLI.
type command struct {
	name    string
	summary string
	usage   string
	run     func(e *env, args []string) int
	// front: cordon's front end runs the command itself (exec and fs);
	// it hands every other one to the full binary.
	front bool
	// subs names the command's subcommands, each with its own usage, or
	// "" where the command's usage is its (`cordon help CMD SUB`).
	subs map[string]string
}

var commands []command

func register(c command) { commands = append(commands, c) }

func lookup(name string) (command, bool) {
	for _, c := range commands {
		if c.name == name {
			return c, true
		}
	}
	return command{}, false
}

const usageText = `usage: cordon [-w DIR] [--json] COMMAND [ARGS]

commands:
%s
flags every command takes:
  -w, --workspace DIR          the workspace (default: the current directory)
      --json                   print one JSON object (errors too)
      --harness-state NAMES    comma-separated harness directories to protect besides the configured ones

  cordon help COMMAND [SUBCOMMAND], or COMMAND [SUBCOMMAND] --help, shows its usage; cordon --version the build.
  The harness configuration (its state directories, write-later paths, and where cordon keeps its
  key store and code cache) comes from the JSON file $CORDON_CONFIG, and $CORDON_STATE_DIR and
  $CORDON_CACHE_DIR; see README.md.
`

func usage(w io.Writer) {
	var b strings.Builder
	for _, c := range commands {
		fmt.Fprintf(&b, "  %-28s %s\n", c.name, c.summary)
	}
	fmt.Fprintf(w, usageText, b.String())
}

func doMain(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	e := &env{stdin: stdin, stdout: stdout, stderr: stderr, getenv: os.Getenv, args: args}
	e.json = wantsJSON(args)
	fs := e.flags("cordon")
	fs.SetInterspersed(false)
	help := fs.BoolP("help", "h", false, "show help")
	version := fs.Bool("version", false, "show the version")
	if err := fs.Parse(args); err != nil {
		return e.usageError(err.Error())
	}
	switch {
	case *help:
		usage(stdout)
		return exitOK
	case *version:
		return e.version()
	}
	rest := fs.Args()
	if len(rest) == 0 {
		if e.json {
			return e.usageError("no command given; run 'cordon help'")
		}
		usage(stderr)
		return exitUsage
	}
	if rest[0] == "help" {
		return e.help(rest[1:])
	}
	c, ok := lookup(rest[0])
	if !ok {
		return e.usageError(fmt.Sprintf("unknown command %q", rest[0]))
	}
	if frontEnd && !c.front {
		return e.handOff()
	}
	defer func() {
		for _, f := range e.closers {
			f()
		}
	}()
	return c.run(e, rest[1:])
}

// wantsJSON reports whether --json comes before "--" in args, so that an
// error found while parsing is reported as JSON too.
func wantsJSON(args []string) bool {
	for _, a := range args {
		if a == "--" {
			return false
		}
		if a == "--json" || a == "--json=true" {
			return true
		}
	}
	return false
}

// help prints the usage of cordon (`cordon help`, `cordon help help`),
// of one command (`cordon help CMD`) or of one of its subcommands
// (`cordon help CMD SUB`). The flags every command takes, and -h, may
// come anywhere.
func (e *env) help(args []string) int {
	var names []string
	for i := 0; i < len(args); i++ {
		switch a := args[i]; {
		case a == "--json" || strings.HasPrefix(a, "--json=") || a == "-h" || a == "--help":
		case a == "-w" || a == "--workspace" || a == "--harness-state":
			i++ // the flags every command takes, and their values: no matter to a usage
		case strings.HasPrefix(a, "--workspace=") || strings.HasPrefix(a, "--harness-state="):
		default:
			if strings.HasPrefix(a, "-") {
				return e.usageError(fmt.Sprintf("help: unknown flag %s", a))
			}
			names = append(names, a)
		}
	}
	if len(names) == 0 || len(names) == 1 && names[0] == "help" {
		usage(e.stdout)
		return exitOK
	}
	c, ok := lookup(names[0])
	if !ok {
		return e.usageError(fmt.Sprintf("unknown command %q", names[0]))
	}
	text := c.usage
	switch {
	case len(names) > 2:
		return e.usageError(fmt.Sprintf("help: too many names (%s); want cordon help COMMAND [SUBCOMMAND]", strings.Join(names, " ")))
	case len(names) == 2:
		sub, ok := c.subs[names[1]]
		if !ok {
			return e.usageError(fmt.Sprintf("%s has no subcommand %q", c.name, names[1]))
		}
		if sub != "" {
			text = sub
		}
	}
	fmt.Fprintln(e.stdout, text)
	return exitOK
}

// subsOf names subcommands whose usage is their command's.
func subsOf(names ...string) map[string]string {
	m := make(map[string]string, len(names))
	for _, n := range names {
		m[n] = ""
	}
	return m
}

// version prints cordon's version, commit and Go version.
func (e *env) version() int {
	v, commit, modified := "(devel)", "unknown", false
	goVersion := "unknown"
	if bi, ok := debug.ReadBuildInfo(); ok {
		goVersion = bi.GoVersion
		if bi.Main.Version != "" {
			v = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				commit = s.Value
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
	}
	if modified {
		commit += "+modified"
	}
	if e.json {
		build := "full"
		if frontEnd {
			build = "front"
		}
		e.printJSON(map[string]any{"version": v, "commit": commit, "go": goVersion, "build": build})
		return exitOK
	}
	front := ""
	if frontEnd {
		front = "; the front end, which runs exec and fs and hands the rest to " + fullName
	}
	fmt.Fprintf(e.stdout, "cordon %s (commit %s, %s%s)\n", v, commit, goVersion, front)
	return exitOK
}

// flags returns a flag set holding the flags every command shares; values
// already set (by flags before the command name) are the defaults.
func (e *env) flags(name string) *pflag.FlagSet {
	fs := pflag.NewFlagSet(name, pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVarP(&e.workspace, "workspace", "w", e.workspace, "workspace directory")
	fs.StringSliceVar(&e.harnessAdd, "harness-state", e.harnessAdd, "harness state directories to add")
	fs.BoolVar(&e.json, "json", e.json, "print JSON")
	return fs
}

// parse parses a command's flags. It returns -1 when the command should go
// on, otherwise the exit code: 0 after printing the usage asked for with
// -h/--help, 2 after a usage error.
func (e *env) parse(fs *pflag.FlagSet, args []string, usageText string) int {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			fmt.Fprintln(e.stdout, usageText)
			return exitOK
		}
		return e.usageError(err.Error() + "\n" + usageText)
	}
	return -1
}

func (e *env) workspaceDir() string {
	if e.workspace == "" {
		return "."
	}
	return e.workspace
}

// harnessConfig returns the harness configuration: the environment's
// (CORDON_CONFIG, CORDON_STATE_DIR, CORDON_CACHE_DIR), with the names
// --harness-state adds.
func (e *env) harnessConfig() (harness.Config, error) {
	if !e.harness.IsZero() {
		return e.harness, nil
	}
	h, file, err := harness.FromEnv(e.getenv)
	if err != nil {
		return h, err
	}
	for _, n := range e.harnessAdd {
		if n == "" {
			return h, refusal.Errorf(refusal.UsageError, "--harness-state: an empty name")
		}
	}
	h = h.AddState(e.harnessAdd...)
	if err := h.Validate(); err != nil {
		return h, refusal.Errorf(refusal.UsageError, "--harness-state: %w", err)
	}
	e.harness, e.harnessFile = h, file
	return h, nil
}

// openWorkspace opens the workspace the flags name for the file tools:
// refused where they could reach cordon's state, cache, roots or
// configuration, by its path or through a mount ([bwrap.OwnExposure]).
func (e *env) openWorkspace() (*workspace.Workspace, error) {
	return e.openWorkspaceFor("the file tools", false)
}

// openWorkspaceToWrite is openWorkspace for file tools that write, which
// refuse as well a workspace that holds cordon itself: the next start of
// a binary they rewrote would run what they wrote, on the host.
func (e *env) openWorkspaceToWrite() (*workspace.Workspace, error) {
	return e.openWorkspaceFor("the file tools that write", true)
}

func (e *env) openWorkspaceFor(what string, binaries bool) (*workspace.Workspace, error) {
	h, err := e.harnessConfig()
	if err != nil {
		return nil, err
	}
	ws, err := workspace.Open(e.workspaceDir(), workspace.WithHarness(h))
	if err != nil {
		return nil, err
	}
	if err := bwrap.OwnExposure(what, ws.Root(), h, binaries); err != nil {
		ws.Close()
		return nil, err
	}
	return ws, nil
}

// checkConfigOutside refuses a workspace that holds the configuration
// file as the kernel reaches it — a link on its way (one into a
// repository of dotfiles) or what it resolves to: a tool could rewrite
// what protects it. For the commands that neither run nor open the
// workspace's files; those ask [bwrap.OwnExposure], which refuses that
// and every other of cordon's own, by path and through a mount.
func (e *env) checkConfigOutside(root string) error {
	f := e.harnessFile
	if f == "" {
		return nil
	}
	links, resolved := bwrap.LinksOn(f)
	for _, p := range append(links, resolved) {
		if p != "" && (p == root || strings.HasPrefix(p, root+"/")) {
			return refusal.Errorf(refusal.WorkspaceRefused, "refusing workspace %s — it holds cordon's configuration %s (as %s), which a tool could rewrite; keep the configuration outside every workspace", root, f, p)
		}
	}
	return nil
}

// admitter returns the admission pipeline of the workspace. With toRun,
// the native substrate does not probe bubblewrap before the run: the run's
// own sandbox is the proof ([bwrap.EnforcerConfig.ProbeAtRun]).
//
// With cite, grants cite the receipts that proved their mechanisms on this
// host (the probes that lack fresh ones run first): admit and run. exec
// makes a grant for one command and cites none.
func (e *env) admitter(toRun, cite bool) (*admission.Admitter, error) {
	h, err := e.harnessConfig()
	if err != nil {
		return nil, err
	}
	var prover *probes.Prover
	if cite {
		if prover, err = e.prover(); err != nil {
			return nil, err
		}
	}
	a, err := admission.New(admission.Config{
		Workspace: e.workspaceDir(),
		Harness:   h,
		Prover:    prover,
		Substrates: admission.WithWasm(map[string]substrate.Enforcer{
			admission.KindNative: bwrap.NewEnforcer(bwrap.EnforcerConfig{ProbeAtRun: toRun, Workspace: e.workspaceDir(), Harness: h}),
			host.Name:            host.Enforcer{},
			landlock.Name:        landlock.Enforcer{},
			oci.Name:             oci.NewEnforcer(oci.EnforcerConfig{Workspace: e.workspaceDir(), Harness: h}),
		}),
	})
	if err != nil {
		return nil, err
	}
	if err := e.checkConfigOutside(a.Workspace()); err != nil {
		return nil, err
	}
	return a, nil
}

// registry returns the workspace's tool registry.
func (e *env) registry() (*admission.Registry, error) {
	h, err := e.harnessConfig()
	if err != nil {
		return nil, err
	}
	reg, err := admission.OpenRegistry(admission.RegistryConfig{Workspace: e.workspaceDir(), Harness: h})
	if err != nil {
		return nil, err
	}
	if err := e.checkConfigOutside(reg.Workspace()); err != nil {
		return nil, err
	}
	return reg, nil
}

// printJSON writes v as one JSON object on stdout.
func (e *env) printJSON(v any) {
	enc := json.NewEncoder(e.stdout)
	enc.SetEscapeHTML(false)
	enc.Encode(v)
}

// errorJSON is the contract's shape of an error: its kind, the message,
// and the operation and path where there is one.
type errorJSON struct {
	Error   string `json:"error"`
	Op      string `json:"op,omitempty"`
	Path    string `json:"path,omitempty"`
	Message string `json:"message"`
}

// exitCode is the one rule for an error's exit code: its kind's
// ([refusal.ExitCode]): 3 refused by policy, 125 could not run, 2 usage,
// 1 anything else.
func exitCode(err error) int { return refusal.ExitCode(err) }

// fail reports err — one JSON object on stdout with --json, a line on
// stderr otherwise — and returns its exit code.
func (e *env) fail(err error) int {
	e.report(err)
	return exitCode(err)
}

// report prints err as fail does.
func (e *env) report(err error) {
	r := errorJSON{Error: refusal.KindOf(err).Name(), Message: err.Error()}
	r.Op, r.Path = opPath(err)
	if e.json {
		e.printJSON(r)
		return
	}
	fmt.Fprintf(e.stderr, "cordon: %s\n", r.Message)
}

// opPath returns the operation and path an error is about, if any.
func opPath(err error) (string, string) {
	var pe *workspace.PathError
	var be *bwrap.Error
	var ee *substrate.EnvError
	var re *admission.RegistryError
	switch {
	case errors.As(err, &pe):
		return pe.Op, pe.Path
	case errors.As(err, &be):
		return be.Op, be.Path
	case errors.As(err, &ee):
		return "pass", ee.Name
	case errors.As(err, &re):
		return re.Op, re.Tool
	}
	return "", ""
}

// usageError reports a malformed command line: exit 2.
func (e *env) usageError(msg string) int {
	if e.json {
		e.printJSON(errorJSON{Error: refusal.UsageError.Name(), Message: msg})
		return exitUsage
	}
	fmt.Fprintf(e.stderr, "cordon: %s\nrun 'cordon help' for usage\n", msg)
	return exitUsage
}

// readInput reads at most max bytes from r; more is an error.
func readInput(r io.Reader, max int64) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > max {
		return nil, refusal.Errorf(refusal.TooLarge, "input is larger than the limit of %d bytes", max)
	}
	return data, nil
}

// interrupt cancels a run's context when cordon gets SIGINT or SIGTERM, so
// that the whole tree dies before cordon exits, and remembers the signal.
type interrupt struct {
	cancel context.CancelFunc
	sigs   chan os.Signal
	got    atomic.Value  // os.Signal
	caught chan struct{} // closed once the signals are caught
}

// interruptible catches SIGINT and SIGTERM for a run's context and
// returns once they are caught.
func interruptible() (context.Context, *interrupt) {
	ctx, i := interruptibleSoon()
	i.wait()
	return ctx, i
}

// interruptibleSoon starts catching SIGINT and SIGTERM on a goroutine of
// its own and returns at once: the first signal.Notify of a process
// starts the thread os/signal keeps for its signal mask and hands each
// signal to it, ~0.5 ms of a `cordon exec` here (scratch timeline), which
// the command's way to its run need not wait for. A signal ends cordon as
// it would any program until the goroutine has caught them, and cancels
// the context from then on; before anything a signal must stop starts,
// call wait and then [interrupt.interrupted], so that one that came while
// the command was admitted stops it there.
func interruptibleSoon() (context.Context, *interrupt) {
	ctx, cancel := context.WithCancel(context.Background())
	i := &interrupt{cancel: cancel, sigs: make(chan os.Signal, 1), caught: make(chan struct{})}
	go func() {
		signal.Notify(i.sigs, os.Interrupt, syscall.SIGTERM)
		close(i.caught)
		select {
		case s := <-i.sigs:
			i.got.Store(s)
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, i
}

// admittedHook, set by tests alone, runs in [interrupt.admitted] before
// the wait for the signals' catching: a test signals cordon there.
var admittedHook func(*interrupt)

// wait returns once SIGINT and SIGTERM are caught.
func (i *interrupt) wait() { <-i.caught }

// admitted is called once a command is admitted, before anything a
// signal must stop starts: it waits for the catching, and returns the
// exit code of a signal that came meanwhile (128+N), if one did.
func (i *interrupt) admitted() (int, bool) {
	if admittedHook != nil {
		admittedHook(i)
	}
	i.wait()
	return i.interrupted()
}

// interrupted returns the exit code of a command that SIGINT or SIGTERM
// stopped (128+N), and whether one came.
func (i *interrupt) interrupted() (int, bool) {
	if s, ok := i.got.Load().(syscall.Signal); ok {
		return 128 + int(s), true
	}
	return 0, false
}

// stop ends the catching: at once for the run's context, and in the
// background for the signals (signal.Stop hands each to os/signal's
// thread, ~0.1 ms a one-shot command would wait for before it exits; one
// that comes meanwhile is caught and ignored, the run being over).
func (i *interrupt) stop() {
	i.cancel()
	go func() {
		i.wait()
		signal.Stop(i.sigs)
	}()
}

// exitOf is the exit code of a finished run: the child's own, 124 when
// its time ran out, 128+N when signal N to cordon ended it.
func (i *interrupt) exitOf(res runtime.Result) int {
	switch {
	case res.TimedOut:
		return exitTimeout
	case res.Canceled:
		if code, ok := i.interrupted(); ok {
			return code
		}
		return exitError
	}
	return res.ExitCode
}

// Exit codes of the CLI contract.
const (
	exitOK        = 0
	exitError     = 1
	exitUsage     = 2
	exitRefused   = 3
	exitTimeout   = 124
	exitCannotRun = 125
	exitNotExec   = 126
	exitNotFound  = 127
)
