package main

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/spf13/pflag"

	"github.com/cordon-run/cordon/internal/capture"
	"github.com/cordon-run/cordon/runtime"
	"github.com/cordon-run/cordon/substrate/bwrap"
)

func init() {
	register(command{name: "exec", summary: "[flags] -- CMD ARGS...: run a native command in the sandbox", run: runExec})
}

const execUsage = `usage: cordon exec [-w DIR] [--timeout D] [--max-output SIZE] [--net none|host] [--env NAME]...
                   [--substrate bwrap] [--no-sandbox] [--json] -- CMD ARGS...
  --timeout D         wall-clock bound, e.g. 30s, 5m (default 2m); exit 124 when it ends the run
  --max-output SIZE   bytes kept of each of stdout and stderr, head and tail (default 1MiB)
  --net none|host     none: no network, not even the host's loopback (default); host: open network
  --env NAME          pass cordon's value of NAME into the sandbox (repeatable; unset names are left out)
  --substrate bwrap   the sandbox (only bwrap in this build)
  --no-sandbox        run on the host without a sandbox (results say "sandboxed": false)`

func runExec(e *env, args []string) int {
	fs := e.flags("exec")
	fs.SetInterspersed(false)
	timeout := fs.Duration("timeout", runtime.DefaultTimeout, "wall-clock bound")
	maxOutput := fs.String("max-output", capture.FormatSize(runtime.DefaultMaxOutput), "bytes kept per stream")
	netName := fs.String("net", "none", "none or host")
	envNames := fs.StringArray("env", nil, "environment variable to pass in")
	noSandbox := fs.Bool("no-sandbox", false, "run on the host without a sandbox")
	substrateName := fs.String("substrate", "bwrap", "the sandbox substrate")
	autonomy := fs.String("autonomy", "", "autonomy level (not available yet)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			fmt.Fprintln(e.stdout, execUsage)
			return exitOK
		}
		return e.usageError(err.Error() + "\n" + execUsage)
	}
	if fs.NArg() == 0 || fs.Arg(0) == "" {
		return e.usageError("exec needs a command: cordon exec [flags] -- CMD ARGS...\n" + execUsage)
	}
	if *timeout <= 0 {
		return e.usageError(fmt.Sprintf("--timeout must be a positive duration such as 30s or 5m, not %v", *timeout))
	}
	size, err := capture.ParseSize(*maxOutput)
	if err != nil {
		return e.usageError("--max-output: " + err.Error())
	}
	if size <= 0 {
		return e.usageError(fmt.Sprintf("--max-output must be positive, not %q", *maxOutput))
	}
	network, err := bwrap.ParseNetwork(*netName)
	if err != nil {
		return e.usageError("--net: " + err.Error())
	}
	for _, name := range *envNames {
		if err := bwrap.CheckEnvName(name); err != nil {
			return e.usageError("--env: " + err.Error())
		}
	}
	if *noSandbox && fs.Changed("substrate") {
		return e.usageError("--no-sandbox runs without a substrate; drop --substrate or --no-sandbox")
	}
	if *noSandbox && fs.Changed("net") && network == bwrap.NetNone {
		return e.usageError("--no-sandbox cannot restrict the network; drop --net none or --no-sandbox")
	}
	if fs.Changed("autonomy") {
		return e.failCode(fmt.Errorf("autonomy levels are not available yet (--autonomy %s); run without it", *autonomy), exitCannotRun)
	}
	switch *substrateName {
	case "bwrap":
	case "landlock", "oci":
		return e.failCode(fmt.Errorf("substrate %s is not available in this build; use --substrate bwrap or --no-sandbox", *substrateName), exitCannotRun)
	default:
		return e.usageError(fmt.Sprintf("unknown substrate %q: want bwrap, landlock or oci", *substrateName))
	}

	ws, err := e.openWorkspace()
	if err != nil {
		return e.fail(err)
	}
	root, harness := ws.Root(), ws.HarnessState()
	ws.Close()
	policy := bwrap.NewPolicy(root).WithHarnessState(harness...).WithNetwork(network).WithEnv(*envNames...)

	// SIGINT and SIGTERM end the run like a timeout does: the whole tree
	// dies before cordon exits.
	ctx, intr := interruptible()
	defer intr.stop()

	res, err := runtime.Run(ctx, runtime.Spec{
		Command:   fs.Args(),
		Policy:    policy,
		NoSandbox: *noSandbox,
		Timeout:   *timeout,
		MaxOutput: size,
		Stdin:     e.stdin,
		Environ:   os.Environ(),
	})
	if err != nil {
		switch {
		case errors.Is(err, bwrap.ErrUnavailable), errors.Is(err, bwrap.ErrSetup),
			errors.Is(err, bwrap.ErrInvalidPolicy), errors.Is(err, runtime.ErrInvalidSpec):
			return e.failCode(err, exitCannotRun)
		}
		return e.fail(err)
	}

	if e.json {
		e.printJSON(res)
	} else {
		fmt.Fprint(e.stdout, res.Stdout)
		fmt.Fprint(e.stderr, res.Stderr)
		if !res.Sandboxed {
			fmt.Fprintln(e.stderr, "cordon: ran without a sandbox (--no-sandbox)")
		}
		if res.TimedOut {
			fmt.Fprintf(e.stderr, "cordon: timed out after %v; the process tree was killed (%s)\n", timeout.Round(time.Millisecond), res.Signal)
		}
	}
	return intr.exitOf(res)
}
