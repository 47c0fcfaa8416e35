package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync/atomic"
	"syscall"

	"github.com/spf13/pflag"

	"github.com/cordon-run/cordon/internal/refusal"
	"github.com/cordon-run/cordon/runtime"
	"github.com/cordon-run/cordon/substrate/bwrap"
	"github.com/cordon-run/cordon/substrate/workspace"
)

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

// env is what a command runs with: its streams and the flags every command
// shares.
type env struct {
	stdin          io.Reader
	stdout, stderr io.Writer

	workspace string
	harness   []string
	json      bool
}

type command struct {
	name    string
	summary string
	run     func(e *env, args []string) int
}

var commands []command

func register(c command) { commands = append(commands, c) }

const usageText = `usage: cordon [-w DIR] COMMAND [ARGS]

commands:
%s
flags every command takes:
  -w, --workspace DIR          the workspace (default: the current directory)
      --harness-state NAMES    comma-separated harness directories (default: .efferent,.foundry)
      --json                   print one JSON object
`

func usage(w io.Writer) {
	var b strings.Builder
	for _, c := range commands {
		fmt.Fprintf(&b, "  %-28s %s\n", c.name, c.summary)
	}
	fmt.Fprintf(w, usageText, b.String())
}

func doMain(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	e := &env{stdin: stdin, stdout: stdout, stderr: stderr}
	fs := e.flags("cordon")
	fs.SetInterspersed(false)
	help := fs.BoolP("help", "h", false, "show help")
	if err := fs.Parse(args); err != nil {
		return e.usageError(err.Error())
	}
	if *help {
		usage(stdout)
		return exitOK
	}
	rest := fs.Args()
	if len(rest) == 0 {
		usage(stderr)
		return exitUsage
	}
	for _, c := range commands {
		if c.name == rest[0] || strings.HasPrefix(c.name, rest[0]+" ") {
			return c.run(e, rest[1:])
		}
	}
	return e.usageError(fmt.Sprintf("unknown command %q", rest[0]))
}

// flags returns a flag set holding the flags every command shares; values
// already set (by flags before the command name) are the defaults.
func (e *env) flags(name string) *pflag.FlagSet {
	fs := pflag.NewFlagSet(name, pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVarP(&e.workspace, "workspace", "w", e.workspace, "workspace directory")
	fs.StringSliceVar(&e.harness, "harness-state", e.harness, "harness state directories")
	fs.BoolVar(&e.json, "json", e.json, "print JSON")
	return fs
}

func (e *env) usageError(msg string) int {
	fmt.Fprintf(e.stderr, "cordon: %s\nrun 'cordon --help' for usage\n", msg)
	return exitUsage
}

// openWorkspace opens the workspace the flags name.
func (e *env) openWorkspace() (*workspace.Workspace, error) {
	dir := e.workspace
	if dir == "" {
		dir = "."
	}
	var opts []workspace.Option
	if e.harness != nil {
		opts = append(opts, workspace.WithHarnessState(e.harness...))
	}
	return workspace.Open(dir, opts...)
}

// printJSON writes v as one JSON object on stdout.
func (e *env) printJSON(v any) {
	enc := json.NewEncoder(e.stdout)
	enc.SetEscapeHTML(false)
	enc.Encode(v)
}

// refusalJSON is the contract's shape of a refusal or error.
type refusalJSON struct {
	Error   string `json:"error"`
	Op      string `json:"op,omitempty"`
	Path    string `json:"path,omitempty"`
	Message string `json:"message"`
}

// fail reports err (as JSON on stdout with --json, as a line on stderr
// otherwise) and returns its exit code: 3 for a policy refusal, 1 otherwise.
func (e *env) fail(err error) int {
	code := exitError
	if k := refusal.Of(err); k != nil && k.IsPolicy() {
		code = exitRefused
	}
	return e.failCode(err, code)
}

// failCode reports err as fail does and returns code.
func (e *env) failCode(err error, code int) int {
	r := refusalJSON{Error: "Error", Message: err.Error()}
	if k := refusal.Of(err); k != nil {
		r.Error = k.Name()
	}
	var pe *workspace.PathError
	var be *bwrap.Error
	switch {
	case errors.As(err, &pe):
		r.Op, r.Path = pe.Op, pe.Path
	case errors.As(err, &be):
		r.Op, r.Path = be.Op, be.Path
	}
	if e.json {
		e.printJSON(r)
	} else {
		fmt.Fprintf(e.stderr, "cordon: %s\n", r.Message)
	}
	return code
}

// readInput reads at most max bytes from r; more is an error.
func readInput(r io.Reader, max int64) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > max {
		return nil, fmt.Errorf("input is larger than the limit of %d bytes", max)
	}
	return data, nil
}

// interrupt cancels a run's context when cordon gets SIGINT or SIGTERM, so
// that the whole tree dies before cordon exits, and remembers the signal.
type interrupt struct {
	cancel context.CancelFunc
	sigs   chan os.Signal
	got    atomic.Value // os.Signal
}

func interruptible() (context.Context, *interrupt) {
	ctx, cancel := context.WithCancel(context.Background())
	i := &interrupt{cancel: cancel, sigs: make(chan os.Signal, 1)}
	signal.Notify(i.sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		select {
		case s := <-i.sigs:
			i.got.Store(s)
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, i
}

func (i *interrupt) stop() {
	signal.Stop(i.sigs)
	i.cancel()
}

// exitOf is the exit code of a finished run: the child's own, 124 when
// its time ran out, 128+N when signal N to cordon ended it.
func (i *interrupt) exitOf(res runtime.Result) int {
	switch {
	case res.TimedOut:
		return exitTimeout
	case res.Canceled:
		return i.code()
	}
	return res.ExitCode
}

// code is the exit code of a run the interrupt canceled: 128+N for signal
// N, as a shell reports it, or 1 when no signal canceled it.
func (i *interrupt) code() int {
	if s, ok := i.got.Load().(syscall.Signal); ok {
		return 128 + int(s)
	}
	return exitError
}
