package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/cordon-run/cordon/admission"
	"github.com/cordon-run/cordon/capabilities"
	"github.com/cordon-run/cordon/internal/capture"
	"github.com/cordon-run/cordon/internal/userdir"
	"github.com/cordon-run/cordon/refusal"
	"github.com/cordon-run/cordon/runtime"
	"github.com/cordon-run/cordon/substrate/bwrap"
	"github.com/cordon-run/cordon/substrate/oci"
)

func init() {
	register(command{name: "oci", summary: "bundle (--tool T | -- CMD ARGS...): the sandbox as an OCI runtime bundle", usage: ociUsage, run: runOCI})
}

const ociUsage = `usage: cordon oci bundle [-w DIR] [--out DIR] [--json] (--tool T [--input JSON] | -- CMD ARGS...)

Writes the sandbox a run would get — the admitted tool T's under its grant, or
CMD's as cordon exec --substrate oci makes it (the workspace writable, no network,
the default limits) — as an OCI runtime bundle for runc, crun, containerd and the
engines on top of them: DIR/config.json (runtime-spec), DIR/rootfs (empty: the
host's / is bound read-only onto it) and DIR/placeholders (stand-ins for absent
protected paths, bound read-only where they are; the engine leaves their mount
points in the workspace after the run). A tool's input (--input, checked against
its input_schema here) is the container's standard input, which the engine gives. --out must not exist and must lie outside
the workspace, where a tool could rewrite the bundle before it runs; without it
the bundle goes to a new directory of cordon's state directory. Prints the
bundle's directory.`

func runOCI(e *env, args []string) int {
	if len(args) == 0 {
		return e.usageError("cordon oci needs a subcommand\n" + ociUsage)
	}
	switch args[0] {
	case "-h", "--help":
		fmt.Fprintln(e.stdout, ociUsage)
		return exitOK
	case "bundle":
	default:
		return e.usageError(fmt.Sprintf("unknown oci subcommand %q\n%s", args[0], ociUsage))
	}
	fs := e.flags("oci bundle")
	fs.SetInterspersed(false)
	out := fs.String("out", "", "the bundle's directory (must not exist)")
	tool := fs.String("tool", "", "an admitted tool")
	input := fs.String("input", "", "the tool's input: JSON, @FILE or @-")
	if code := e.parse(fs, args[1:], ociUsage); code >= 0 {
		return code
	}
	if (*tool == "") == (fs.NArg() == 0) {
		return e.usageError("oci bundle needs --tool T or -- CMD ARGS..., one of them\n" + ociUsage)
	}
	ctx := context.Background()
	a, err := e.admitter(true, *tool != "")
	if err != nil {
		return e.fail(err)
	}
	var p *admission.Prepared
	if *tool != "" {
		data, err := e.toolInput(*input, fs.Changed("input"))
		if err != nil {
			return e.fail(err)
		}
		reg, err := e.registry()
		if err != nil {
			return e.fail(err)
		}
		if p, err = a.Prepare(ctx, reg, *tool, data); err != nil {
			var hc *admission.HostChangedError
			if errors.As(err, &hc) {
				return e.refuse("bundle", *tool, hc.Refusal)
			}
			return e.fail(err)
		}
	} else {
		set, code := e.execCapabilities(false, oci.Name, defaultExecTimeout, capture.FormatSize(defaultExecOutput), "none",
			capture.FormatSize(bwrap.DefaultTmpSize), nil, "", 0, 0)
		if code >= 0 {
			return code
		}
		if p, err = a.PrepareCommand(ctx, admission.Command{Argv: fs.Args(), Capabilities: set, Substrate: oci.Name}); err != nil {
			return e.refuse("bundle", fs.Arg(0), err)
		}
	}
	dir, err := e.bundleDir(*out, a.Workspace())
	if err != nil {
		return e.fail(err)
	}
	rt := runtime.New(runtime.Config{})
	defer rt.Close()
	n, err := rt.Bundle(p, dir)
	if err != nil {
		return e.fail(err)
	}
	if e.json {
		e.printJSON(map[string]any{"bundle": dir, "placeholders": n, "substrate": p.Grant.Substrate, "capabilities": capabilitiesOf(p.Grant.All())})
		return exitOK
	}
	fmt.Fprintln(e.stdout, dir)
	return exitOK
}

// bundleDir is where a bundle goes: out, which must not exist nor lie in
// the workspace ws, or a new directory of the state directory's.
func (e *env) bundleDir(out, ws string) (string, error) {
	if out == "" {
		h, err := e.harnessConfig()
		if err != nil {
			return "", err
		}
		base, err := userdir.EnsurePath(h.StateDir(), "bundles")
		if err != nil {
			return "", err
		}
		var rnd [6]byte
		rand.Read(rnd[:])
		return filepath.Join(base, "bundle-"+hex.EncodeToString(rnd[:])), nil
	}
	abs, err := filepath.Abs(out)
	if err != nil {
		return "", err
	}
	parent, err := filepath.EvalSymlinks(filepath.Dir(abs))
	if err != nil {
		return "", refusal.Errorf(refusal.NotFound, "--out %s: its parent directory: %v", out, err)
	}
	abs = filepath.Join(parent, filepath.Base(abs))
	if abs == ws || strings.HasPrefix(abs, ws+string(filepath.Separator)) {
		return "", refusal.Errorf(refusal.UsageError, "--out %s lies inside the workspace %s, where a tool could rewrite the bundle before it runs; give a directory outside it", abs, ws)
	}
	if _, err := os.Lstat(abs); err == nil {
		return "", refusal.Errorf(refusal.UsageError, "--out %s exists; the bundle goes to a new directory", abs)
	}
	return abs, nil
}

// capabilitiesOf lists a set's capabilities as strings.
func capabilitiesOf(set capabilities.Set) []string {
	var out []string
	for _, c := range set.All() {
		out = append(out, c.String())
	}
	return out
}
