package admission

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/cordon-run/cordon/capabilities"
	"github.com/cordon-run/cordon/runtime"
	"github.com/cordon-run/cordon/substrate/bwrap"
)

// RunConfig configures [Admitter.Run].
type RunConfig struct {
	// Registry holds the tools.
	Registry *Registry
	// Environ is the caller's environment, from which granted env:NAME
	// values are drawn (os.Environ() if nil).
	Environ []string
}

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

// Prepared is a tool ready to run: loaded, its grant current for this host,
// its input checked, and the runtime spec that holds it to its grant.
type Prepared struct {
	Tool  *Tool
	Grant *Grant // the grant in force: rechecked and re-registered if the host changed
	// Rechecked reports that the host's facts had changed and the grant
	// was made again.
	Rechecked bool
	// Spec holds a native tool to its grant.
	Spec runtime.Spec
	// Input is the checked input, the tool's stdin. A wasm tool has no
	// Spec: its caller runs the module with the wasm substrate under
	// [Grant.All].
	Input []byte
}

// Prepare loads the tool name from the registry (verifying its declaration
// and files against the digest), runs them through the pipeline again on
// this host ([Admitter.Recheck]): when the host's facts differ from those
// the grant was made under, the new grant is registered; when they do not,
// the stored grant must match the new one (an edited grant is refused);
// when the pipeline refuses, so does Prepare, with a [*HostChangedError].
// Then it checks input against the tool's input_schema ([*InputError]) and
// builds the runtime spec.
func (a *Admitter) Prepare(ctx context.Context, cfg RunConfig, name string, input []byte) (*Prepared, error) {
	t, err := cfg.Registry.Load(name)
	if err != nil {
		return nil, err
	}
	g := t.Grant
	p := &Prepared{Tool: t, Grant: g}
	e := a.cfg.Substrates[g.Kind]
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
		if err := cfg.Registry.Register(adm); err != nil {
			return nil, err
		}
		a.cfg.Logger.Info("grant re-made for a changed host", "tool", name, "was", g.FactsDigest, "now", fresh.FactsDigest)
		g, p.Grant, p.Rechecked = fresh, fresh, true
		t.Grant = g
	} else if what := grantDiff(g, fresh); what != "" {
		return nil, registryErr("load", name, fmt.Errorf("its grant does not match its declaration (%s differ); admit it again", what))
	}
	stdin, err := t.CheckInput(input)
	if err != nil {
		return nil, err
	}
	p.Input = stdin
	if g.Kind == KindWasm {
		return p, nil
	}
	p.Spec, err = a.Spec(t, g, stdin, cfg.Environ)
	if err != nil {
		return nil, err
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
	if !slices.Equal(stored.Command, fresh.Command) || !slices.Equal(stored.FileArgs, fresh.FileArgs) || stored.Module != fresh.Module {
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

// Spec translates a grant into the runtime spec that holds the tool to it
// and nothing more: the workspace hidden, read-only or writable as
// fs.read/fs.write say, the network cut off unless net:host, only the
// granted env names, the granted (or default) time and output limits, the
// tool's own files bound read-only, the workspace as working directory.
func (a *Admitter) Spec(t *Tool, g *Grant, stdin []byte, environ []string) (runtime.Spec, error) {
	if g.Kind != KindNative {
		return runtime.Spec{}, fmt.Errorf("%w: %s tools do not run in this cordon", ErrCapabilityRefused, g.Kind)
	}
	access := bwrap.AccessNone
	switch {
	case g.Has(capabilities.WriteWorkspace()):
		access = bwrap.AccessWrite
	case g.Has(capabilities.ReadWorkspace()):
		access = bwrap.AccessRead
	}
	network := bwrap.NetNone
	if g.HostNet() {
		network = bwrap.NetHost
	}
	policy := bwrap.NewPolicy(a.root).WithHarnessState(a.harness...).WithAccess(access).WithNetwork(network).WithEnv(g.Env()...)
	if len(t.Files) > 0 {
		policy = policy.WithReadOnly(t.Dir)
	}
	cmd := slices.Clone(g.Command)
	if len(cmd) == 0 {
		return runtime.Spec{}, fmt.Errorf("%w: tool %q has no command", ErrRegistry, g.Tool)
	}
	for _, i := range g.FileArgs {
		if i < 0 || i >= len(cmd) || checkRelPath(cmd[i]) != "" {
			return runtime.Spec{}, fmt.Errorf("%w: tool %q: bad file argument %d", ErrRegistry, g.Tool, i)
		}
		cmd[i] = filepath.Join(t.Dir, filepath.FromSlash(cmd[i]))
	}
	if environ == nil {
		environ = os.Environ()
	}
	return runtime.Spec{
		Command:   cmd,
		Policy:    policy,
		Timeout:   g.Time(),
		MaxOutput: g.Output(),
		Stdin:     bytes.NewReader(stdin),
		Environ:   environ,
		Logger:    a.cfg.Logger,
	}, nil
}
