package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/cordon-run/cordon/admission"
	"github.com/cordon-run/cordon/internal/refusal"
	"github.com/cordon-run/cordon/substrate"
	"github.com/cordon-run/cordon/substrate/wasm"
)

func init() {
	register(command{name: "admit", summary: "FILE|-: admit a tool declaration; prints the grant or the refusal", run: runAdmit})
	register(command{name: "tools", summary: "list the admitted tools and their grants", run: runTools})
}

const admitUsage = `usage: cordon admit [-w DIR] [--json] FILE|-
  FILE is a tool declaration (JSON or YAML); "-" reads it from stdin.
  Paths in the declaration (module, files) are relative to FILE's folder,
  or to the workspace for "-".`

// harnessDir is the harness directory the tool registry lives in.
func (e *env) harnessDir() string {
	if len(e.harness) > 0 {
		return e.harness[0]
	}
	return ".efferent"
}

func (e *env) workspaceDir() string {
	if e.workspace == "" {
		return "."
	}
	return e.workspace
}

// admitter returns the admission pipeline and the registry of the
// workspace, with the substrates of this build. With toRun, the native
// substrate does not probe bubblewrap before the run: the run's own
// sandbox is the proof ([admission.NativeConfig.ProbeAtRun]).
func (e *env) admitter(toRun bool) (*admission.Admitter, *admission.Registry, error) {
	a, err := admission.New(admission.Config{
		Workspace:    e.workspaceDir(),
		HarnessState: e.harness,
		Substrates: map[string]substrate.Enforcer{
			admission.KindNative: admission.NewNative(admission.NativeConfig{ProbeAtRun: toRun}),
			admission.KindWasm:   wasm.Enforcer{},
		},
		Inspectors: map[string]substrate.Inspector{admission.KindWasm: wasm.Enforcer{}},
	})
	if err != nil {
		return nil, nil, err
	}
	reg, err := admission.OpenRegistry(admission.RegistryConfig{Workspace: e.workspaceDir(), Harness: e.harnessDir()})
	if err != nil {
		return nil, nil, err
	}
	return a, reg, nil
}

func runAdmit(e *env, args []string) int {
	fs := e.flags("admit")
	if err := fs.Parse(args); err != nil {
		return e.usageError(err.Error() + "\n" + admitUsage)
	}
	if fs.NArg() != 1 {
		return e.usageError("admit needs exactly one FILE (or - for stdin)\n" + admitUsage)
	}
	file := fs.Arg(0)
	a, reg, err := e.admitter(false)
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
		return e.fail(fmt.Errorf("cannot read the declaration %s: %w", file, err))
	}
	adm, err := a.Admit(context.Background(), src)
	if err != nil {
		return e.refuse("admit", file, err)
	}
	if err := reg.Register(adm); err != nil {
		return e.fail(err)
	}
	if e.json {
		e.printJSON(adm.Grant)
		return exitOK
	}
	fmt.Fprintln(e.stdout, adm.Grant)
	return exitOK
}

// refuse reports an admission refusal with its reasons: one JSON object
// with --json ({"error","op","path","message","tool","reasons"}), the
// message on stderr otherwise. Other errors go to fail.
func (e *env) refuse(op, path string, err error) int {
	var r *admission.Refusal
	if !errors.As(err, &r) {
		return e.fail(err)
	}
	code := exitRefused
	k := refusal.Of(err)
	if k != nil && !k.IsPolicy() {
		code = exitError
	}
	if !e.json {
		fmt.Fprintf(e.stderr, "cordon: %s\n", r.Error())
		return code
	}
	out := struct {
		refusalJSON
		Tool    string             `json:"tool,omitempty"`
		Reasons []admission.Reason `json:"reasons"`
	}{refusalJSON: refusalJSON{Error: "Refused", Op: op, Path: path, Message: r.Error()}, Tool: r.Tool, Reasons: r.Reasons}
	if k != nil {
		out.Error = k.Name()
	}
	e.printJSON(out)
	return code
}

func readFileLimit(name string, max int64) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > max {
		return nil, fmt.Errorf("larger than the limit of %d bytes", max)
	}
	return data, nil
}

func runTools(e *env, args []string) int {
	fs := e.flags("tools")
	if err := fs.Parse(args); err != nil {
		return e.usageError(err.Error() + "\nusage: cordon tools [-w DIR] [--json]")
	}
	if fs.NArg() != 0 {
		return e.usageError("tools takes no arguments\nusage: cordon tools [-w DIR] [--json]")
	}
	reg, err := admission.OpenRegistry(admission.RegistryConfig{Workspace: e.workspaceDir(), Harness: e.harnessDir()})
	if err != nil {
		return e.fail(err)
	}
	grants, err := reg.List()
	if err != nil {
		return e.fail(err)
	}
	if e.json {
		if grants == nil {
			grants = []*admission.Grant{}
		}
		e.printJSON(map[string]any{"tools": grants})
		return exitOK
	}
	if len(grants) == 0 {
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
	return exitOK
}
