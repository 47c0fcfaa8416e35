package admission

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"path/filepath"
	"slices"
	"strings"

	"github.com/cordon-run/cordon/capabilities"
	"github.com/cordon-run/cordon/harness"
	"github.com/cordon-run/cordon/substrate"
)

// HostChangedError is a registered tool whose grant no longer holds on
// this host: run through the pipeline again before it runs (as every tool
// is), it was refused — the host's facts changed since admission, or a
// program it names is gone. It wraps the new [*Refusal].
type HostChangedError struct {
	Tool     string
	Was, Now string // the facts, as [substrate.Facts.String] prints them
	Refusal  *Refusal
}

func (e *HostChangedError) Error() string {
	if e.Was == e.Now {
		return fmt.Sprintf("refusing to run tool %q — its grant no longer holds on this host (%s): %v", e.Tool, e.Now, e.Refusal)
	}
	return fmt.Sprintf("refusing to run tool %q — the host changed since it was admitted (was: %s; now: %s) and its grant no longer holds: %v", e.Tool, e.Was, e.Now, e.Refusal)
}

// Unwrap returns the refusal.
func (e *HostChangedError) Unwrap() error { return e.Refusal }

// Prepared is a tool or command ready to run: its grant current for this
// host, its input checked. Package runtime runs it on the substrate the
// grant names.
type Prepared struct {
	// Grant is the grant in force: for a tool, rechecked and re-registered
	// if the host changed; for a command, made for this run alone.
	Grant *Grant
	// Tool is the registered tool; nil for a command ([Admitter.PrepareCommand]).
	Tool *Tool
	// Rechecked reports that the host's facts had changed and the grant
	// was made again.
	Rechecked bool
	// Command is a native command as it runs: the tool's own files are
	// absolute paths into its read-only folder in the registry.
	Command []string
	// Stdin is the run's standard input: a tool's checked input as JSON.
	Stdin io.Reader
	// Artifact is the tool's artifact as its substrate read it at the
	// check before this run (a *wasm.Module), or nil.
	Artifact any
	// Workspace is the canonical workspace, the working directory.
	Workspace string
	// Harness is the harness configuration the run enforces.
	Harness harness.Config
	// WorkspacePath: the command's PATH starts with
	// <workspace>/.local/bin (cordon exec). An admitted tool's PATH holds
	// system directories only.
	WorkspacePath bool
}

// Prepare loads the tool name from the registry (authenticating its grant
// and verifying its declaration and files against the digest), runs them
// through the pipeline again on this host ([Admitter.Recheck]): when the
// host's facts differ from those the grant was made under, the new grant
// is registered; when they do not, the stored grant must match the new one
// (an edited grant is refused); when the pipeline refuses, so does
// Prepare, with a [*HostChangedError]. Then it checks input against the
// tool's input_schema ([*InputError]).
func (a *Admitter) Prepare(ctx context.Context, reg *Registry, name string, input []byte) (*Prepared, error) {
	t, err := reg.Load(name)
	if err != nil {
		return nil, err
	}
	g := t.Grant
	p := &Prepared{Tool: t, Grant: g, Workspace: a.root, Harness: a.harness}
	e := a.cfg.Substrates[g.Kind]
	if g.Kind == KindNative && (e == nil || e.Name() != g.Substrate) {
		e = a.cfg.Substrates[g.Substrate] // a tool declared for another native substrate
	}
	if e == nil || e.Name() != g.Substrate {
		return nil, fmt.Errorf("%w: tool %q was admitted for the %s substrate, which this cordon does not run", ErrCapabilityRefused, name, g.Substrate)
	}
	facts, err := e.Facts(ctx)
	if err != nil {
		return nil, err
	}
	// The declaration and files were verified against the digest; the
	// grant beside them is checked against a grant made from them now.
	adm, err := a.Recheck(ctx, t)
	if err != nil {
		var r *Refusal
		if errors.As(err, &r) {
			return nil, &HostChangedError{Tool: name, Was: g.Facts.String(), Now: facts.String(), Refusal: r}
		}
		return nil, err
	}
	fresh := adm.Grant
	if facts.Digest() != g.FactsDigest {
		if _, err := reg.Register(adm); err != nil {
			return nil, err
		}
		a.cfg.Logger.Info("grant re-made for a changed host", "tool", name, "was", g.FactsDigest, "now", fresh.FactsDigest)
		g, p.Grant, p.Rechecked = fresh, fresh, true
		t.Grant = g
	} else if what := grantDiff(g, fresh); what != "" {
		return nil, registryErr("load", name, fmt.Errorf("its grant does not match its declaration (%s differ); admit it again", what))
	} else if fresh.Evidence != nil {
		// The run relies on the evidence found now, which may be newer
		// than what the stored grant cites.
		in := *g
		in.Evidence, in.Unproved, in.Degraded = fresh.Evidence, fresh.Unproved, fresh.Degraded
		g, p.Grant = &in, &in
	}
	stdin, err := t.CheckInput(input)
	if err != nil {
		return nil, err
	}
	p.Stdin = bytes.NewReader(stdin)
	p.Artifact = adm.artifact
	if g.Kind == KindNative {
		cmd := slices.Clone(g.Command)
		if len(cmd) == 0 {
			return nil, fmt.Errorf("%w: tool %q has no command", ErrRegistry, g.Tool)
		}
		for _, i := range g.FileArgs {
			if i < 0 || i >= len(cmd) || checkRelPath(cmd[i]) != "" {
				return nil, fmt.Errorf("%w: tool %q: bad file argument %d", ErrRegistry, g.Tool, i)
			}
			cmd[i] = filepath.Join(t.Dir, filepath.FromSlash(cmd[i]))
		}
		p.Command = cmd
	}
	return p, nil
}

// grantDiff names the parts of a stored grant that differ from one made
// now from the same declaration on the same host, or returns "".
func grantDiff(stored, fresh *Grant) string {
	var diff []string
	if stored.Capabilities.String() != fresh.Capabilities.String() || stored.Defaults.String() != fresh.Defaults.String() {
		diff = append(diff, "capabilities")
	}
	if !slices.Equal(stored.Command, fresh.Command) || !slices.Equal(stored.FileArgs, fresh.FileArgs) || stored.Module != fresh.Module || !slices.Equal(stored.Args, fresh.Args) {
		diff = append(diff, "command")
	}
	if !maps.EqualFunc(stored.Mechanisms, fresh.Mechanisms, slices.Equal) {
		diff = append(diff, "mechanisms")
	}
	if stored.Kind != fresh.Kind || stored.Substrate != fresh.Substrate || stored.Tool != fresh.Tool {
		diff = append(diff, "kind")
	}
	return strings.Join(diff, ", ")
}

// Command is a native command to run under capabilities, outside the
// registry: what cordon exec runs.
type Command struct {
	// Argv is the program and its arguments, looked up in the sandbox's
	// PATH (led by <workspace>/.local/bin).
	Argv []string
	// Capabilities are what the command may do; time: and output: bound
	// it. Nothing else is granted.
	Capabilities capabilities.Set
	// Substrate runs it: "bwrap" (the default) or the host, unconfined
	// ([Admitter.PrepareCommand] needs the host's enforcer among
	// Config.Substrates under the key "host" for that).
	Substrate string
	// Stdin is the command's standard input.
	Stdin io.Reader
}

// PrepareCommand grants a command exactly its capabilities, on the
// substrate it names, or refuses with the reasons: each capability must
// resolve to a mechanism there, as for a tool. The grant is not stored.
func (a *Admitter) PrepareCommand(ctx context.Context, c Command) (*Prepared, error) {
	if len(c.Argv) == 0 || c.Argv[0] == "" {
		return nil, fmt.Errorf("%w: no command to run", ErrInvalidDeclaration)
	}
	sub := c.Substrate
	if sub == "" {
		sub = "bwrap"
	}
	var e substrate.Enforcer
	for _, k := range []string{KindNative, sub} {
		if en := a.cfg.Substrates[k]; en != nil && en.Name() == sub {
			e = en
		}
	}
	if e == nil {
		return nil, fmt.Errorf("%w: the %s substrate is not available in this cordon", substrate.ErrUnavailable, sub)
	}
	s := &state{src: Source{Name: "the command line"}, mechs: map[string][]string{}, set: c.Capabilities, enforcer: e,
		decl: &Declaration{Name: "exec", Kind: KindNative}}
	checkEnv(ctx, a, s)
	checkCombinations(ctx, a, s)
	for _, cap := range c.Capabilities.All() {
		ms, err := e.Mechanisms(cap, c.Capabilities)
		if err != nil {
			s.refuse(capabilityReason("resolve", cap.String(), err))
			continue
		}
		for _, m := range ms {
			s.mechs[cap.String()] = append(s.mechs[cap.String()], m.String())
		}
	}
	if len(s.reasons) > 0 {
		return nil, &Refusal{Tool: "exec", Source: "the command line", Reasons: s.reasons}
	}
	g := &Grant{Tool: "exec", Kind: KindNative, Substrate: e.Name(), Capabilities: c.Capabilities, Mechanisms: s.mechs,
		Command: slices.Clone(c.Argv)}
	stdin := c.Stdin
	if stdin == nil {
		stdin = strings.NewReader("")
	}
	return &Prepared{Grant: g, Command: slices.Clone(c.Argv), Stdin: stdin, Workspace: a.root, Harness: a.harness, WorkspacePath: true}, nil
}
