//go:build !cordon_front

package main

import (
	"context"
	"fmt"
	"os"
	"runtime/debug"

	"github.com/cordon-run/cordon/admission"
	"github.com/cordon-run/cordon/autonomy"
	"github.com/cordon-run/cordon/capabilities"
	"github.com/cordon-run/cordon/internal/capture"
	"github.com/cordon-run/cordon/mcpserver"
	"github.com/cordon-run/cordon/runtime"
	"github.com/cordon-run/cordon/substrate/bwrap"
	"github.com/cordon-run/cordon/substrate/host"
	"github.com/cordon-run/cordon/substrate/landlock"
	"github.com/cordon-run/cordon/substrate/oci"
)

func runMCP(e *env, args []string) int {
	fs := e.flags("mcp")
	level := fs.String("autonomy", autonomy.Supervised, "autonomy level")
	netName := fs.String("net", "none", "none or host")
	substrateName := fs.String("substrate", bwrap.Name, "the substrate")
	noSandbox := fs.Bool("no-sandbox", false, "run bash without a sandbox")
	memory := fs.String("memory", "", "memory limit of each bash call")
	pids := fs.Int("pids", 0, "process limit of each bash call")
	timeout := fs.Duration("timeout", defaultExecTimeout, "bash's default timeout")
	maxTimeout := fs.Duration("max-timeout", 0, "bash's longest timeout (default: 10m, or the timeout if longer)")
	envNames := fs.StringArray("env", nil, "a variable bash and tools may be given")
	pool := fs.Int("pool", 4, "bwrap sandboxes kept made ahead of bash's calls (0: none)")
	allowHosts := fs.StringArray("allow-host", nil, "a host bash and tools may reach through the egress proxy")
	if code := e.parse(fs, args, mcpUsage); code >= 0 {
		return code
	}
	if fs.NArg() > 0 {
		return e.usageError("mcp takes no arguments\n" + mcpUsage)
	}
	lvl, err := autonomy.ParseLevel(*level)
	if err != nil {
		return e.usageError(err.Error())
	}
	sub := *substrateName
	switch {
	case *noSandbox:
		sub = host.Name
	case sub != bwrap.Name && sub != landlock.Name && sub != oci.Name:
		return e.usageError(fmt.Sprintf("unknown substrate %q: want bwrap, landlock or oci", sub))
	}
	// bash's fixed capabilities, as cordon exec makes them; a call sets
	// only its timeout and output bound, within the ceilings.
	tmp := capture.FormatSize(bwrap.DefaultTmpSize)
	if sub != bwrap.Name && sub != oci.Name {
		tmp = ""
	}
	set, code := e.execCapabilities(fs.Changed("net"), sub, *timeout, capture.FormatSize(256<<10), *netName, tmp, *envNames, *memory, *pids, 0)
	if code >= 0 {
		return code
	}
	var hosts []capabilities.Capability
	if len(*allowHosts) > 0 {
		if sub != bwrap.Name {
			return e.usageError(fmt.Sprintf("--allow-host: the egress proxy runs on bwrap, not %s", sub))
		}
		if set, code = e.withAllowedHosts(set, *allowHosts, fs.Changed("net") && *netName != "none", *noSandbox); code >= 0 {
			return code
		}
		for _, c := range set.All() {
			if c.Kind() == capabilities.KindNetConnect {
				hosts = append(hosts, c)
			}
		}
		*pool = 0 // a sandbox with egress is not made ahead: its proxy is the call's
	}
	var extra []capabilities.Capability
	for _, c := range set.All() {
		switch c.Kind() {
		case "memory", "pids", "tmp", "env":
			extra = append(extra, c)
		}
	}
	a, err := e.admitter(true, true)
	if err != nil {
		return e.fail(err)
	}
	reg, err := e.registry()
	if err != nil {
		return e.fail(err)
	}
	ws, err := e.openWorkspaceToWrite() // its file tools write
	if err != nil {
		return e.fail(err)
	}
	defer ws.Close()
	ctx, intr := interruptible()
	defer intr.stop()
	if lvl == autonomy.Unattended {
		p, err := a.PrepareCommand(ctx, admission.Command{Argv: []string{"true"}, Capabilities: set, Substrate: sub})
		if err != nil {
			return e.refuse("mcp", "", err)
		}
		if code := e.admitUnattended(ctx, lvl, "mcp", p); code >= 0 {
			return code
		}
	}
	if *pool < 0 || *pool > 64 {
		return e.usageError(fmt.Sprintf("--pool %d: want 0 to 64", *pool))
	}
	if sub != bwrap.Name {
		*pool = 0 // only bwrap sandboxes are made ahead
	}
	rt := runtime.New(runtime.Config{Pool: *pool})
	defer rt.Close()
	cfg := mcpserver.Config{
		Admitter: a, Registry: reg, Runtime: rt, Files: ws, Pool: *pool > 0,
		Substrate: sub, HostNet: *netName == "host", Hosts: hosts, Timeout: *timeout, MaxTimeout: *maxTimeout,
		Extra: extra, Env: *envNames, Autonomy: lvl, Version: versionString(),
	}
	if lvl == autonomy.Unattended {
		cfg.Decide = func(ctx context.Context, op string, p *admission.Prepared) error {
			rep, err := e.autonomyReport(ctx, lvl, p)
			if err != nil {
				return err
			}
			if _, err := e.decisionReceipt(ctx, op, p, rep); err != nil {
				return fmt.Errorf("the autonomy decision could not be recorded, so the run does not start: %w", err)
			}
			return rep.Err()
		}
	}
	srv, err := mcpserver.New(cfg)
	if err != nil {
		return e.fail(err)
	}
	if err := srv.Serve(ctx, os.Stdin, os.Stdout); err != nil && ctx.Err() == nil {
		fmt.Fprintf(e.stderr, "cordon: mcp: %v\n", err)
		return exitError
	}
	return exitOK
}

// versionString is the module's version, as the server names itself.
func versionString() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "(devel)"
}
