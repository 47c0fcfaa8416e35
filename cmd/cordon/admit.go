package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/cordon-run/cordon/admission"
	"github.com/cordon-run/cordon/capabilities"
	"github.com/cordon-run/cordon/harness"
	"github.com/cordon-run/cordon/internal/dirfd"
	"github.com/cordon-run/cordon/refusal"
)

func init() {
	register(command{name: "admit", summary: "FILE|-: admit a tool declaration; prints the grant or the refusal", usage: admitUsage, run: runAdmit})
	register(command{name: "tools", summary: "[list] | remove NAME: list the admitted tools and their grants, or remove one", usage: toolsUsage, run: runTools, subs: subsOf("list", "remove")})
}

const admitUsage = `usage: cordon admit [-w DIR] [--json] FILE|-
  FILE is a tool declaration (JSON or YAML); "-" reads it from stdin.
  Paths in the declaration (module, files) are relative to FILE's folder,
  or to the workspace for "-". A tool of the same name is replaced, and
  cordon says how its grant changed.`

const toolsUsage = `usage: cordon tools [list] [-w DIR] [--json]
       cordon tools remove [-w DIR] [--json] NAME
  tools (or tools list) lists the admitted tools with their grants; with --json
  each grant shows its mechanisms and the workspace's protected paths.
  tools remove NAME removes one tool (its grant, then its files).`

func runAdmit(e *env, args []string) int {
	fs := e.flags("admit")
	if code := e.parse(fs, args, admitUsage); code >= 0 {
		return code
	}
	if fs.NArg() != 1 {
		return e.usageError("admit needs exactly one FILE (or - for stdin)\n" + admitUsage)
	}
	file := fs.Arg(0)
	a, err := e.admitter(false, true)
	if err != nil {
		return e.fail(err)
	}
	reg, err := e.registry()
	if err != nil {
		return e.fail(err)
	}
	src := admission.Source{Name: file}
	if file == "-" {
		src.Data, err = readInput(e.stdin, admission.MaxDeclarationSize)
		src.Dir = e.workspaceDir()
	} else {
		src.Data, err = readFileLimit(file, admission.MaxDeclarationSize)
		src.Dir = filepath.Dir(file)
		switch strings.ToLower(filepath.Ext(file)) {
		case ".json":
			src.Format = admission.FormatJSON
		case ".yaml", ".yml":
			src.Format = admission.FormatYAML
		}
	}
	if err != nil {
		return e.fail(refusal.Errorf(refusal.KindOf(err), "cannot read the declaration %s: %w", file, err))
	}
	adm, err := a.Admit(context.Background(), src)
	if err != nil {
		return e.refuse("admit", file, err)
	}
	old, err := reg.Register(adm)
	if err != nil {
		return e.fail(err)
	}
	g := adm.Grant
	change := replacement(old, g)
	if e.json {
		out := struct {
			*admission.Grant
			Replaced *replacedJSON `json:"replaced,omitempty"`
		}{Grant: g, Replaced: change}
		e.printJSON(out)
		return exitOK
	}
	fmt.Fprintln(e.stdout, g)
	if change != nil {
		fmt.Fprintf(e.stdout, "  replaced the tool %q admitted before (%s): %s\n", g.Tool, change.Digest, strings.Join(change.Changes, "; "))
	}
	return exitOK
}

// replacedJSON says what a registration replaced and how the grant
// changed.
type replacedJSON struct {
	Digest       string   `json:"digest"`
	Capabilities []string `json:"capabilities"`
	Changes      []string `json:"changes"`
}

// replacement describes how grant g differs from old, the grant it
// replaced; nil when there was none.
func replacement(old, g *admission.Grant) *replacedJSON {
	if old == nil {
		return nil
	}
	r := &replacedJSON{Digest: old.Digest, Capabilities: capStrings(old)}
	was, now := capStrings(old), capStrings(g)
	for _, c := range now {
		if !slices.Contains(was, c) {
			r.Changes = append(r.Changes, "+"+c)
		}
	}
	for _, c := range was {
		if !slices.Contains(now, c) {
			r.Changes = append(r.Changes, "-"+c)
		}
	}
	if !slices.Equal(old.Command, g.Command) || old.Module != g.Module {
		r.Changes = append(r.Changes, "command: "+strings.Join(old.DisplayCommand(), " ")+old.Module+" → "+strings.Join(g.DisplayCommand(), " ")+g.Module)
	}
	if old.Digest != g.Digest && len(r.Changes) == 0 {
		r.Changes = append(r.Changes, "files or declaration changed (digest "+g.Digest+")")
	}
	if len(r.Changes) == 0 {
		r.Changes = []string{"the same grant"}
	}
	return r
}

func capStrings(g *admission.Grant) []string {
	var out []string
	for _, c := range g.Capabilities.All() {
		out = append(out, c.String())
	}
	return out
}

// refuse reports an admission refusal with its reasons: one JSON object
// with --json ({"error","op","path","message","tool","reasons"}), the
// message on stderr otherwise. Other errors go to fail.
func (e *env) refuse(op, path string, err error) int {
	var r *admission.Refusal
	if !errors.As(err, &r) {
		return e.fail(err)
	}
	if !e.json {
		fmt.Fprintf(e.stderr, "cordon: %s\n", r.Error())
		return exitCode(err)
	}
	out := struct {
		errorJSON
		Tool    string             `json:"tool,omitempty"`
		Reasons []admission.Reason `json:"reasons"`
	}{errorJSON: errorJSON{Error: refusal.KindOf(err).Name(), Op: op, Path: path, Message: r.Error()}, Tool: r.Tool, Reasons: r.Reasons}
	e.printJSON(out)
	return exitCode(err)
}

func readFileLimit(name string, max int64) ([]byte, error) {
	f, err := os.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0) // a FIFO does not block the open
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, refusal.Errorf(refusal.NotFound, "%w", err)
		}
		return nil, err
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		return nil, refusal.Errorf(refusal.NotRegular, "%s is not a regular file", name)
	}
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > max {
		return nil, refusal.Errorf(refusal.TooLarge, "larger than the limit of %d bytes", max)
	}
	return data, nil
}

func runTools(e *env, args []string) int {
	if len(args) > 0 && args[0] == "remove" {
		return runToolsRemove(e, args[1:])
	}
	if len(args) > 0 && args[0] == "list" {
		args = args[1:] // as evidence list and root list
	}
	fs := e.flags("tools")
	if code := e.parse(fs, args, toolsUsage); code >= 0 {
		return code
	}
	if fs.NArg() != 0 {
		return e.usageError(fmt.Sprintf("unknown tools operation %q\n%s", fs.Arg(0), toolsUsage))
	}
	reg, err := e.registry()
	if err != nil {
		return e.fail(err)
	}
	grants, refusedTools, err := reg.List()
	if err != nil {
		return e.fail(err)
	}
	code := exitOK
	if len(refusedTools) > 0 {
		code = exitCode(refusedTools[0])
	}
	if e.json {
		h, _ := e.harnessConfig()
		prot := protectedJSONOf(h, e.workspaceDir())
		type toolJSON struct {
			*admission.Grant
			Protected *protectedJSON `json:"protected,omitempty"`
		}
		tools := []toolJSON{}
		for _, g := range grants {
			tools = append(tools, toolJSON{Grant: g, Protected: prot.forGrant(g)})
		}
		var refused []errorJSON
		for _, err := range refusedTools {
			op, path := opPath(err)
			refused = append(refused, errorJSON{Error: refusal.KindOf(err).Name(), Op: op, Path: path, Message: err.Error()})
		}
		out := map[string]any{"tools": tools}
		if len(refused) > 0 {
			out["refused"] = refused
		}
		e.printJSON(out)
		return code
	}
	if len(grants) == 0 && len(refusedTools) == 0 {
		fmt.Fprintln(e.stdout, "no tools admitted")
		return exitOK
	}
	for _, g := range grants {
		what := strings.Join(g.DisplayCommand(), " ")
		if g.Module != "" {
			what = "<tool>/" + g.Module
		}
		fmt.Fprintf(e.stdout, "%s\t%s\t%s\t%s\n", g.Tool, g.Kind, g.Capabilities, what)
	}
	for _, err := range refusedTools {
		fmt.Fprintf(e.stderr, "cordon: %v\n", err)
	}
	return code
}

func runToolsRemove(e *env, args []string) int {
	fs := e.flags("tools remove")
	if code := e.parse(fs, args, toolsUsage); code >= 0 {
		return code
	}
	if fs.NArg() != 1 {
		return e.usageError("tools remove needs exactly one NAME\n" + toolsUsage)
	}
	reg, err := e.registry()
	if err != nil {
		return e.fail(err)
	}
	name := fs.Arg(0)
	old, err := reg.Remove(name)
	if err != nil {
		return e.fail(err)
	}
	if e.json {
		out := map[string]any{"removed": name}
		if old != nil {
			out["digest"] = old.Digest
		}
		e.printJSON(out)
		return exitOK
	}
	fmt.Fprintf(e.stdout, "removed tool %q\n", name)
	return exitOK
}

// protectedJSON is the workspace's protected set as tools --json shows
// it beside each grant: the same paths for every substrate, and how each
// substrate holds them.
type protectedJSON struct {
	HarnessState []string          `json:"harness_state"`
	WriteLater   []string          `json:"write_later"`
	Pinned       []string          `json:"pinned"`
	By           map[string]string `json:"by"`
	Error        string            `json:"error,omitempty"`
}

type protectedSet struct {
	p   *harness.Protected
	err error
}

func protectedJSONOf(h harness.Config, dir string) protectedSet {
	root, err := dirfd.Canonical(dir)
	if err != nil {
		return protectedSet{err: err}
	}
	p, err := h.Protect(root)
	return protectedSet{p: p, err: err}
}

// forGrant shows the protected set for grant g: what its substrate
// enforces of it, and how.
func (s protectedSet) forGrant(g *admission.Grant) *protectedJSON {
	if s.err != nil {
		return &protectedJSON{Error: s.err.Error()}
	}
	out := &protectedJSON{HarnessState: s.p.State(), WriteLater: []string{}, Pinned: []string{}, By: map[string]string{}}
	for _, q := range s.p.Paths() {
		name := q.Rel
		if q.Dir {
			name += "/"
		}
		if q.Mode == harness.ReadOnly {
			out.WriteLater = append(out.WriteLater, name)
		} else {
			out.Pinned = append(out.Pinned, name)
		}
	}
	write := g.Capabilities.Has(capabilities.WriteWorkspace())
	switch g.Substrate {
	case "bwrap":
		out.By["harness_state"] = "bwrap: bound read-only (created first when absent)"
		if write {
			out.By["write_later"] = "bwrap: bound read-only, an absent path masked by a read-only placeholder"
			out.By["pinned"] = "bwrap: bound onto itself: it cannot be removed or renamed"
		} else {
			out.By["write_later"] = "bwrap: the whole workspace is read-only or hidden"
			out.By["pinned"] = "bwrap: the whole workspace is read-only or hidden"
		}
	case "wasm":
		out.By["harness_state"] = "wasm: absent from the guest file system (the workspace guard)"
		if write {
			out.By["write_later"] = "wasm: writes, creation, removal and renames refused by the workspace guard (EACCES), present or absent"
			out.By["pinned"] = "wasm: removal and renames refused by the workspace guard"
		} else {
			out.By["write_later"] = "wasm: the workspace is mounted read-only"
			out.By["pinned"] = "wasm: the workspace is mounted read-only"
		}
	}
	return out
}
