package main

import (
	"context"
	"fmt"
	"os"

	"github.com/cordon-run/cordon/admission"
	"github.com/cordon-run/cordon/autonomy"
	"github.com/cordon-run/cordon/evidence"
	"github.com/cordon-run/cordon/internal/capture"
	"github.com/cordon-run/cordon/refusal"
	"github.com/cordon-run/cordon/roots"
	"github.com/cordon-run/cordon/runtime"
	"github.com/cordon-run/cordon/substrate/bwrap"
	"github.com/cordon-run/cordon/substrate/landlock"
	"github.com/cordon-run/cordon/substrate/oci"
)

func init() {
	register(command{name: "autonomy", summary: "check the preconditions of an autonomy level", usage: autonomyUsage, run: runAutonomy, subs: subsOf("check")})
}

const autonomyUsage = `usage: cordon autonomy check [--level supervised|unattended] [-w DIR] [--json]
                               [--substrate bwrap|landlock|oci] [--no-sandbox] [--net none|host]
                               [--memory SIZE] [--pids N] [--timeout D]

Prints each precondition of the level for a command run in the workspace with
those flags (as cordon exec takes them), with pass or fail and the evidence
behind it, and exits 0 when all hold, 3 when one does not. Unattended needs:
the workspace is a disposable root cordon made (cordon root create); fresh
passing receipts of the substrate's probes in it (cordon probe -w ROOT); the
sandbox on, and working here; harness state kept out by two independent
mechanisms; no network; a memory and a process limit; a deadline of at most 1h.`

func runAutonomy(e *env, args []string) int {
	if len(args) == 0 || args[0] != "check" {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help") {
			fmt.Fprintln(e.stdout, autonomyUsage)
			return exitOK
		}
		return e.usageError("cordon autonomy check ...\n" + autonomyUsage)
	}
	fs := e.flags("autonomy check")
	level := fs.String("level", autonomy.Unattended, "the level")
	substrateName := fs.String("substrate", bwrap.Name, "the substrate")
	noSandbox := fs.Bool("no-sandbox", false, "without a sandbox")
	netName := fs.String("net", "none", "none or host")
	memory := fs.String("memory", "", "memory limit")
	pids := fs.Int("pids", 0, "process limit")
	timeout := fs.Duration("timeout", defaultExecTimeout, "wall-clock bound")
	if code := e.parse(fs, args[1:], autonomyUsage); code >= 0 {
		return code
	}
	if fs.NArg() > 0 {
		return e.usageError("autonomy check takes no arguments\n" + autonomyUsage)
	}
	lvl, err := autonomy.ParseLevel(*level)
	if err != nil {
		return e.fail(err)
	}
	sub := *substrateName
	if *noSandbox {
		sub = "host"
	} else if sub != bwrap.Name && sub != landlock.Name && sub != oci.Name {
		return e.usageError(fmt.Sprintf("unknown substrate %q: want bwrap, landlock or oci", sub))
	}
	set, code := e.execCapabilities(fs.Changed("net"), sub, *timeout, capture.FormatSize(defaultExecOutput), *netName, capture.FormatSize(bwrap.DefaultTmpSize), nil, *memory, *pids, 0)
	if code >= 0 {
		return code
	}
	a, err := e.admitter(true, false)
	if err != nil {
		return e.fail(err)
	}
	p, err := a.PrepareCommand(context.Background(), admission.Command{Argv: []string{"true"}, Capabilities: set, Substrate: sub})
	if err != nil {
		return e.refuse("autonomy", "true", err)
	}
	rep, err := e.autonomyReport(context.Background(), lvl, p)
	if err != nil {
		return e.fail(err)
	}
	if e.json {
		e.printJSON(rep)
	} else {
		printReport(e, rep)
	}
	if !rep.Allowed {
		return exitRefused
	}
	return exitOK
}

// autonomyReport checks the preconditions of level for running p.
func (e *env) autonomyReport(ctx context.Context, level string, p *admission.Prepared) (*autonomy.Report, error) {
	h, err := e.harnessConfig()
	if err != nil {
		return nil, err
	}
	in := autonomy.Input{Level: level, Workspace: p.Workspace, Substrate: p.Grant.Substrate, Time: p.Grant.Time()}
	if level == autonomy.Supervised {
		return autonomy.Check(ctx, in)
	}
	if in.Mechanisms, err = runtime.Plan(p); err != nil {
		return nil, err
	}
	if in.Roots, err = roots.Open(h); err != nil {
		return nil, err
	}
	if in.Prover, err = e.prover(); err != nil {
		return nil, err
	}
	switch in.Substrate {
	case bwrap.Name:
		in.Available = func(ctx context.Context) error {
			bin, err := bwrap.Find(os.Getenv("PATH"))
			if err != nil {
				return err
			}
			return bwrap.Detect(ctx, bin)
		}
	case landlock.Name:
		in.Available = func(context.Context) error { return landlock.Available() }
	case oci.Name:
		in.Available = func(ctx context.Context) error {
			_, err := oci.Detect(ctx, os.Getenv("PATH"), p.Workspace, p.Harness)
			return err
		}
	}
	return autonomy.Check(ctx, in)
}

// admitUnattended decides whether p may run at level, records the
// decision as a receipt, and returns the refusal (printed) when it may
// not: the exit code, or -1 to go on.
func (e *env) admitUnattended(ctx context.Context, level, op string, p *admission.Prepared) int {
	lvl, err := autonomy.ParseLevel(level)
	if err != nil {
		return e.fail(err)
	}
	if lvl == autonomy.Supervised {
		return -1
	}
	rep, err := e.autonomyReport(ctx, lvl, p)
	if err != nil {
		return e.fail(err)
	}
	if _, err := e.decisionReceipt(ctx, op, p, rep); err != nil {
		return e.fail(fmt.Errorf("the autonomy decision could not be recorded, so the run does not start: %w", err))
	}
	if rep.Allowed {
		return -1
	}
	refused := rep.Err()
	if e.json {
		e.printJSON(map[string]any{"error": refusal.KindOf(refused).Name(), "message": refused.Error(), "op": op, "autonomy": rep})
	} else {
		printReport(e, rep)
		failed := 0
		for _, p := range rep.Preconditions {
			if !p.Pass {
				failed++
			}
		}
		fmt.Fprintf(e.stderr, "cordon: refusing to start %s: %d precondition(s) above do not hold; nothing ran (the decision is a receipt in %s's evidence log)\n", rep.Level, failed, rep.Workspace)
	}
	return refusal.ExitCode(refused)
}

// decisionReceipt appends the decision to the workspace's evidence log.
func (e *env) decisionReceipt(ctx context.Context, op string, p *admission.Prepared, rep *autonomy.Report) (evidence.Entry, error) {
	prover, err := e.prover()
	if err != nil {
		return evidence.Entry{}, err
	}
	host, bin, err := prover.Host(ctx)
	if err != nil {
		return evidence.Entry{}, err
	}
	a := &evidence.Autonomy{Level: rep.Level, Workspace: rep.Workspace, Op: op, Substrate: rep.Substrate, Preconditions: rep.Preconditions}
	if rep.Root != nil {
		a.Root = rep.Root.ID
	}
	subject, _ := runSubject(p)
	if p.Tool != nil {
		a.Tool = p.Grant.Tool
	} else {
		a.Command = p.Command
	}
	verdict := evidence.Refused
	if rep.Allowed {
		verdict = evidence.Allowed
	}
	return prover.Log.Append([]evidence.Subject{subject}, evidence.AutonomyPredicate,
		evidence.Receipt{Host: host, Cordon: bin, Verdict: verdict, Autonomy: a})
}

func printReport(e *env, rep *autonomy.Report) {
	w := e.stdout
	if !rep.Allowed {
		w = e.stderr
	}
	fmt.Fprintf(w, "autonomy %s in %s on %s:\n", rep.Level, rep.Workspace, rep.Substrate)
	for _, p := range rep.Preconditions {
		mark := "pass"
		if !p.Pass {
			mark = "FAIL"
		}
		fmt.Fprintf(w, "  %s  %-13s %s\n", mark, p.Name, p.Detail)
		ev := p.Evidence
		if len(ev) > 3 {
			ev = append(ev[:2:2], fmt.Sprintf("... %d more (--json lists them)", len(p.Evidence)-2))
		}
		for _, x := range ev {
			if len(x) > 160 {
				x = x[:157] + "..."
			}
			fmt.Fprintf(w, "        %13s %s\n", "", x)
		}
	}
	if rep.Allowed {
		fmt.Fprintf(w, "every precondition holds: %s runs may start here\n", rep.Level)
	}
}
