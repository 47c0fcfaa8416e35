package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/cordon-run/cordon/admission"
	"github.com/cordon-run/cordon/runtime"
	"github.com/cordon-run/cordon/substrate"
	"github.com/cordon-run/cordon/substrate/bwrap"
)

func init() {
	register(command{name: "run", summary: "TOOL [--input JSON|@FILE]: run an admitted tool under its grant", run: runRun})
}

const runUsage = `usage: cordon run [-w DIR] [--json] TOOL [--input JSON|@FILE]
  --input JSON     the tool's input, checked against its input_schema (default {})
  --input @FILE    read the input from FILE in the workspace`

func runRun(e *env, args []string) int {
	fs := e.flags("run")
	input := fs.String("input", "", "the tool's input: JSON, or @FILE")
	autonomy := fs.String("autonomy", "", "autonomy level (not available yet)")
	if err := fs.Parse(args); err != nil {
		return e.usageError(err.Error() + "\n" + runUsage)
	}
	if fs.NArg() != 1 {
		return e.usageError("run needs exactly one TOOL\n" + runUsage)
	}
	if fs.Changed("autonomy") {
		return e.failCode(fmt.Errorf("autonomy levels are not available yet (--autonomy %s); run without it", *autonomy), exitCannotRun)
	}
	name := fs.Arg(0)
	data := []byte(*input)
	if file, ok := strings.CutPrefix(*input, "@"); ok {
		ws, err := e.openWorkspace()
		if err != nil {
			return e.fail(err)
		}
		data, err = ws.ReadFile(file)
		ws.Close()
		if err != nil {
			return e.fail(err)
		}
	}
	a, reg, err := e.admitter(true)
	if err != nil {
		return e.fail(err)
	}

	// SIGINT and SIGTERM end the run like a timeout does: the whole tree
	// dies before cordon exits.
	ctx, intr := interruptible()
	defer intr.stop()

	p, err := a.Prepare(ctx, admission.RunConfig{Registry: reg, Environ: os.Environ()}, name, data)
	if err != nil {
		var hc *admission.HostChangedError
		switch {
		case errors.As(err, &hc):
			return e.refuse("run", name, hc.Refusal)
		case errors.Is(err, substrate.ErrUnavailable):
			return e.failCode(err, exitCannotRun)
		}
		return e.fail(err)
	}
	if p.Grant.Kind == admission.KindWasm {
		return e.runWasm(ctx, p, intr)
	}
	res, err := runtime.Run(ctx, p.Spec)
	if err != nil {
		switch {
		case errors.Is(err, bwrap.ErrUnavailable), errors.Is(err, bwrap.ErrSetup), errors.Is(err, runtime.ErrInvalidSpec):
			return e.failCode(err, exitCannotRun)
		}
		return e.fail(err)
	}
	if e.json {
		out, _ := json.Marshal(res)
		var m map[string]any
		json.Unmarshal(out, &m)
		m["tool"], m["digest"], m["regranted"] = p.Grant.Tool, p.Grant.Digest, p.Rechecked
		e.printJSON(m)
	} else {
		fmt.Fprint(e.stdout, res.Stdout)
		fmt.Fprint(e.stderr, res.Stderr)
		if res.TimedOut {
			fmt.Fprintf(e.stderr, "cordon: tool %q ran out of its time (%v); the process tree was killed (%s)\n", name, p.Grant.Time(), res.Signal)
		}
	}
	return intr.exitOf(res)
}
