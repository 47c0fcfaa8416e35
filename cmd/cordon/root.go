package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/cordon-run/cordon/roots"
)

func init() {
	register(command{name: "root", summary: "create|list|diff|apply|discard: disposable roots", usage: rootUsage, run: runRoot, subs: subsOf("create", "list", "diff", "apply", "discard")})
}

const rootUsage = `usage: cordon root create [--from DIR] [--mode copy|worktree] [--copy-harness-state] [--json]
       cordon root list [--json]
       cordon root diff ROOT [--json]
       cordon root apply ROOT [PATH...] [--digest D] [--json]
       cordon root discard ROOT [--json]

A disposable root is a directory cordon makes in its own place (its roots
directory, $CORDON_ROOTS_DIR or ~/.local/share/cordon/roots) from an origin
(--from, default the workspace): a copy (reflinked where the file system can),
or a git worktree of the origin's HEAD on a branch of its own. Its record, in
cordon's state directory and authenticated with the key store, is what makes it
a root. create prints the root's path last. The origin's harness state is not
copied (--copy-harness-state copies it): a root gathers its own evidence.

diff shows what changed in the root as a unified diff (binary files, deletions,
modes) and marks every change to a write-later path, every new or changed
executable, every symlink, and every path where the origin changed since.
apply copies the changes (or those at or below PATH...) back to the origin, all
or nothing, through the origin's workspace guard. It refuses where the origin
changed since the root was made, and symlinks that lead out of the origin; it
leaves out, saying so, write-later paths, content diff could not show (binary,
too large) and files others may write, unless each is named; setuid, setgid and
sticky bits never go back. The root's git directory is never applied. --digest D (the
digest diff prints) applies only if the changes are still the ones reviewed;
apply also refuses while a run of the root is going on. discard removes
a root cordon made, and nothing else. ROOT is a root's path or name.`

func runRoot(e *env, args []string) int {
	if len(args) == 0 {
		return e.usageError("cordon root needs a subcommand\n" + rootUsage)
	}
	sub, rest := args[0], args[1:]
	switch sub {
	case "-h", "--help":
		fmt.Fprintln(e.stdout, rootUsage)
		return exitOK
	case "create", "list", "diff", "apply", "discard":
	default:
		return e.usageError(fmt.Sprintf("unknown root subcommand %q\n%s", sub, rootUsage))
	}
	fs := e.flags("root " + sub)
	from := fs.String("from", "", "the origin")
	mode := fs.String("mode", roots.ModeCopy, "copy or worktree")
	copyState := fs.Bool("copy-harness-state", false, "copy the origin's harness state")
	digest := fs.String("digest", "", "apply only if the changes are those of this diff digest")
	if code := e.parse(fs, rest, rootUsage); code >= 0 {
		return code
	}
	if sub != "create" && (fs.Changed("from") || fs.Changed("mode") || fs.Changed("copy-harness-state")) {
		return e.usageError("--from, --mode and --copy-harness-state are for root create\n" + rootUsage)
	}
	if sub != "apply" && fs.Changed("digest") {
		return e.usageError("--digest is for root apply\n" + rootUsage)
	}
	h, err := e.harnessConfig()
	if err != nil {
		return e.fail(err)
	}
	rs, err := roots.Open(h)
	if err != nil {
		return e.fail(err)
	}
	ctx := context.Background()
	switch sub {
	case "create":
		if fs.NArg() > 0 {
			return e.usageError("root create takes no arguments (the origin is --from)\n" + rootUsage)
		}
		origin := *from
		if origin == "" {
			origin = e.workspaceDir()
		}
		start := time.Now()
		r, err := rs.Create(ctx, roots.CreateOptions{From: origin, Mode: *mode, HarnessState: *copyState})
		if err != nil {
			return e.fail(err)
		}
		if e.json {
			e.printJSON(map[string]any{"root": r, "path": r.Path, "duration_ms": float64(time.Since(start).Microseconds()) / 1000})
			return exitOK
		}
		how := r.Mode
		if r.Copy != "" {
			how += " (" + r.Copy + ")"
		}
		if r.Branch != "" {
			how += " on branch " + r.Branch
		}
		fmt.Fprintf(e.stdout, "root %s: %s of %s\n", r.ID, how, r.Origin)
		fmt.Fprintf(e.stdout, "work there (cordon exec -w ROOT ..., --autonomy unattended after cordon probe -w ROOT), then: cordon root diff %s; cordon root apply %s; cordon root discard %s\n", r.ID, r.ID, r.ID)
		fmt.Fprintln(e.stdout, r.Path)
		return exitOK
	case "list":
		if fs.NArg() > 0 {
			return e.usageError("root list takes no arguments\n" + rootUsage)
		}
		list, err := rs.List()
		if err != nil && len(list) == 0 {
			return e.fail(err)
		}
		if e.json {
			out := map[string]any{"roots": nonNil(list)}
			if err != nil {
				out["problems"] = strings.Split(err.Error(), "\n")
			}
			e.printJSON(out)
			return exitOK
		}
		for _, r := range list {
			state := ""
			if r.Missing {
				state = " (its directory is gone)"
			}
			fmt.Fprintf(e.stdout, "%s\t%s\t%s of %s, %s%s\n", r.ID, r.Path, r.Mode, r.Origin, r.Created.Format(time.RFC3339), state)
		}
		if err != nil {
			fmt.Fprintf(e.stderr, "cordon: %v\n", err)
		}
		return exitOK
	}
	if fs.NArg() == 0 {
		return e.usageError(fmt.Sprintf("root %s needs ROOT (a root's path or name; cordon root list)\n%s", sub, rootUsage))
	}
	if sub != "apply" && fs.NArg() > 1 {
		return e.usageError(fmt.Sprintf("root %s takes one ROOT\n%s", sub, rootUsage))
	}
	r, err := rs.Find(fs.Arg(0))
	if err != nil {
		return e.fail(err)
	}
	switch sub {
	case "diff":
		d, err := rs.Diff(r)
		if err != nil {
			return e.fail(err)
		}
		if e.json {
			e.printJSON(d)
		} else {
			printDiff(e, d)
		}
	case "apply":
		a, err := rs.Apply(ctx, r, roots.ApplyOptions{Paths: fs.Args()[1:], Digest: *digest})
		if err != nil {
			return e.fail(err)
		}
		if e.json {
			e.printJSON(a)
			return exitOK
		}
		for _, c := range a.Applied {
			fmt.Fprintf(e.stdout, "%-8s %s\n", c.Change, roots.Visible(c.Path))
		}
		fmt.Fprintf(e.stdout, "applied %d change(s) of root %s to %s\n", len(a.Applied), r.ID, r.Origin)
		for _, l := range a.Left {
			fmt.Fprintf(e.stderr, "cordon: not applied: %s %s: %s\n", l.Change, roots.Visible(l.Path), l.Why)
		}
	case "discard":
		if err := rs.Discard(ctx, r); err != nil {
			return e.fail(err)
		}
		if e.json {
			e.printJSON(map[string]any{"discarded": r.ID, "path": r.Path})
		} else {
			fmt.Fprintf(e.stdout, "discarded root %s (%s)\n", r.ID, r.Path)
		}
	}
	return exitOK
}

// printDiff prints the marks a reviewer must see first, then the diff.
func printDiff(e *env, d *roots.Diff) {
	r := d.Root
	w := e.stdout
	fmt.Fprintf(w, "root %s (%s), %s of %s made %s\n", r.ID, r.Path, r.Mode, r.Origin, r.Created.Format(time.RFC3339))
	count := map[string]int{}
	for _, c := range d.Changes {
		count[c.Change]++
	}
	var parts []string
	for _, k := range []string{"added", "modified", "deleted", "mode", "type"} {
		if count[k] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", count[k], k))
		}
	}
	if len(d.Changes) == 0 {
		fmt.Fprintln(w, "no changes")
	} else {
		fmt.Fprintf(w, "%d change(s): %s\n", len(d.Changes), strings.Join(parts, ", "))
	}
	for _, c := range d.Changes {
		p := roots.Visible(c.Path)
		if c.WriteLater != "" {
			fmt.Fprintf(w, "!! WRITE-LATER %s (%s): %s — apply leaves it unless it is named\n", p, c.Change, c.WriteLater)
		}
		if c.Executable {
			fmt.Fprintf(w, "!! EXECUTABLE  %s (%s, mode %04o)\n", p, c.Change, c.New.Mode)
		}
		if c.New != nil && c.New.Type == "symlink" {
			fmt.Fprintf(w, "!! SYMLINK     %s -> %s\n", p, roots.Visible(c.New.Target))
		}
		if c.Hidden != "" {
			fmt.Fprintf(w, "!! NOT SHOWN   %s (%s): %s — apply leaves it unless it is named\n", p, c.Change, c.Hidden)
		}
		if c.Control {
			fmt.Fprintf(w, "!! CONTROL     %s: control characters or bidirectional overrides, shown escaped (\\xNN, \\uNNNN)\n", p)
		}
		if c.Mode != "" {
			fmt.Fprintf(w, "!! MODE        %s: %s\n", p, c.Mode)
		}
		if c.Conflict != "" {
			fmt.Fprintf(w, "!! CONFLICT    %s: %s — apply refuses it\n", p, c.Conflict)
		}
	}
	for _, c := range d.Git {
		fmt.Fprintf(w, "!! NEVER       %s (%s): %s — never applied\n", roots.Visible(c.Path), c.Change, c.WriteLater)
	}
	if n := len(d.OriginChanged); n > 0 {
		var ps []string
		for _, p := range d.OriginChanged {
			ps = append(ps, roots.Visible(p))
		}
		fmt.Fprintf(w, "the origin changed at %d path(s) since the root was made: %s\n", n, strings.Join(ps, ", "))
	}
	if len(d.Changes) > 0 {
		fmt.Fprintf(w, "digest %s (cordon root apply %s --digest %s applies exactly these)\n", d.Digest, r.ID, d.Digest)
	}
	if d.Unified != "" {
		fmt.Fprintln(w)
		fmt.Fprint(w, d.Unified)
	}
}
