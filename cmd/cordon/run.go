package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/cordon-run/cordon/admission"
	"github.com/cordon-run/cordon/autonomy"
	"github.com/cordon-run/cordon/runtime"
)

func init() {
	register(command{name: "run", summary: "TOOL [--input JSON|@FILE|@-]: run an admitted tool under its grant", usage: runUsage, run: runRun})
}

const runUsage = `usage: cordon run [-w DIR] [--json] [--receipt] [--autonomy supervised|unattended] TOOL [--input JSON|@FILE|@-]
  --input JSON     the tool's input, checked against its input_schema
  --input @FILE    read the input from FILE in the workspace
  --input @-       read the input from stdin
  --receipt        append a signed receipt of the run to the evidence log (cordon evidence list)
  --autonomy L     unattended: start only where every precondition holds (cordon autonomy check),
                   else exit 3 listing what failed; the decision is a receipt
  Without --input, piped stdin is the input; with neither, the input is {}.`

// maxInput bounds a tool's input.
const maxInput = 1 << 20

func runRun(e *env, args []string) int {
	fs := e.flags("run")
	input := fs.String("input", "", "the tool's input: JSON, @FILE or @-")
	autonomyLevel := fs.String("autonomy", "supervised", "autonomy level: supervised or unattended")
	receipt := fs.Bool("receipt", false, "append a signed receipt of the run to the evidence log")
	if code := e.parse(fs, args, runUsage); code >= 0 {
		return code
	}
	if fs.NArg() != 1 {
		return e.usageError("run needs exactly one TOOL\n" + runUsage)
	}
	if _, err := autonomy.ParseLevel(*autonomyLevel); err != nil {
		return e.usageError(err.Error())
	}
	name := fs.Arg(0)
	data, err := e.toolInput(*input, fs.Changed("input"))
	if err != nil {
		return e.fail(err)
	}
	// SIGINT and SIGTERM end the run like a timeout does: the whole tree
	// dies before cordon exits. They are caught while the admitter and
	// the registry open (not while the input is read: a signal then ends
	// cordon at once), and before the tool is prepared.
	ctx, intr := interruptibleSoon()
	defer intr.stop()
	a, err := e.admitter(true, true)
	if err != nil {
		return e.fail(err)
	}
	reg, err := e.registry()
	if err != nil {
		return e.fail(err)
	}

	if code, ok := intr.admitted(); ok {
		return code // while the tool was looked up: it never starts
	}
	p, err := a.Prepare(ctx, reg, name, data)
	if err != nil {
		if code, ok := intr.interrupted(); ok {
			return code
		}
		var hc *admission.HostChangedError
		if errors.As(err, &hc) {
			return e.refuse("run", name, hc.Refusal)
		}
		return e.fail(err)
	}
	if *receipt {
		if _, err := e.prover(); err != nil { // before the run, as exec
			return e.fail(err)
		}
	}
	if code := e.admitUnattended(ctx, *autonomyLevel, "run", p); code >= 0 {
		return code
	}
	rt := runtime.New(runtime.Config{OneShot: true})
	defer rt.Close()
	res, err := rt.Run(ctx, p)
	if err != nil {
		if code, ok := intr.interrupted(); ok {
			return code // before the tool started: runtime.Run says so
		}
		return e.fail(err)
	}
	entry, receiptErr := e.recordRun(ctx, *receipt, "run", p, res)
	if e.json {
		out := resultJSON(res)
		addReceipt(out, entry, receiptErr)
		e.printJSON(out)
		return intr.exitOf(res)
	}
	defer printReceipt(e, entry, receiptErr)
	fmt.Fprint(e.stdout, res.Stdout)
	fmt.Fprint(e.stderr, res.Stderr)
	for _, l := range res.Log {
		fmt.Fprintf(e.stderr, "cordon: %s log: %s\n", l.Level, l.Message)
	}
	for _, r := range res.Refusals {
		fmt.Fprintf(e.stderr, "cordon: refused: %s\n", r.Message)
	}
	for _, n := range res.Notes {
		fmt.Fprintf(e.stderr, "cordon: %s\n", n)
	}
	switch {
	case res.TimedOut:
		fmt.Fprintf(e.stderr, "cordon: tool %q ran out of its time (%v); it was stopped (%s)\n", name, p.Grant.Time(), res.Signal)
	case res.Trap != "":
		fmt.Fprintf(e.stderr, "cordon: tool %q trapped: %s\n", name, res.Trap)
	}
	return intr.exitOf(res)
}

// toolInput returns a run's input: the --input value (JSON, @FILE read
// through the workspace guard, @- for stdin), else stdin when it is not a
// terminal, else nothing (the tool gets {}).
func (e *env) toolInput(input string, given bool) ([]byte, error) {
	switch {
	case input == "@-":
		return readInput(e.stdin, maxInput)
	case strings.HasPrefix(input, "@"):
		ws, err := e.openWorkspace()
		if err != nil {
			return nil, err
		}
		defer ws.Close()
		return ws.ReadFile(input[1:])
	case given:
		return []byte(input), nil
	}
	if piped(e.stdin) {
		return readInput(e.stdin, maxInput)
	}
	return nil, nil
}

// piped reports whether r is input that was piped in or redirected: not a
// terminal, and not cordon's own stdin when that is a terminal.
func piped(r io.Reader) bool {
	f, ok := r.(*os.File)
	if !ok {
		return r != nil
	}
	st, err := f.Stat()
	if err != nil {
		return false
	}
	return st.Mode()&os.ModeCharDevice == 0
}
