package admission

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/cordon-run/cordon/capabilities"
	"github.com/cordon-run/cordon/harness"
	"github.com/cordon-run/cordon/internal/dirfd"
	"github.com/cordon-run/cordon/probes"
	"github.com/cordon-run/cordon/substrate"
	"github.com/cordon-run/cordon/substrate/bwrap"
	"github.com/cordon-run/cordon/substrate/host"
	"github.com/cordon-run/cordon/substrate/landlock"
	"github.com/cordon-run/cordon/substrate/oci"
	"github.com/cordon-run/cordon/substrate/workspace"
)

// Config configures an [Admitter].
type Config struct {
	// Workspace is the workspace tools run in. Declarations may not reach
	// its harness state.
	Workspace string
	// Harness is the harness configuration: harness state, write-later
	// paths, the per-user state directory (zero: [harness.Default]).
	Harness harness.Config
	// Substrates maps a tool kind ("native", "wasm") to the substrate that
	// runs it; nil means bubblewrap for native tools ([bwrap.Enforcer])
	// and wazero for wasm tools ([wasm.Enforcer]). A kind without a
	// substrate is refused.
	Substrates map[string]substrate.Enforcer
	// Inspectors maps a tool kind to the substrate that reads its artifact
	// before admission (for wasm: the module's imports); nil means each
	// substrate of Substrates that is a [substrate.Inspector].
	Inspectors map[string]substrate.Inspector
	// Lookup resolves a native command's program to a read-only host
	// program; nil means [HostPrograms] with [SandboxPath].
	Lookup func(name string) (string, error)
	// Logger receives one record per decision; nil discards.
	Logger *slog.Logger
	// Now returns the time recorded in grants; nil means time.Now.
	Now func() time.Time
	// Prover finds, for the mechanisms of a grant, the receipts of the
	// probes that proved them on this host, and runs the probes whose
	// receipts are missing or stale first. A capability whose mechanism
	// failed its probe is refused. nil: grants cite no evidence (an
	// embedder that keeps no evidence log; the CLI always sets one).
	Prover *probes.Prover
}

// Admitter runs declarations through the admission pipeline.
type Admitter struct {
	cfg     Config
	root    string // canonical workspace
	harness harness.Config
}

// New returns an Admitter for cfg.
func New(cfg Config) (*Admitter, error) {
	if cfg.Workspace == "" {
		return nil, errors.New("admission: no workspace configured")
	}
	root, err := dirfd.Canonical(cfg.Workspace)
	if err != nil {
		return nil, fmt.Errorf("admission: workspace: %w", err)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Harness.IsZero() {
		cfg.Harness = harness.Default()
	}
	if err := cfg.Harness.Validate(); err != nil {
		return nil, err
	}
	if err := cfg.Harness.CheckWorkspace(root); err != nil {
		return nil, err
	}
	if cfg.Substrates == nil {
		cfg.Substrates = map[string]substrate.Enforcer{
			KindNative:    bwrap.NewEnforcer(bwrap.EnforcerConfig{Workspace: root, Harness: cfg.Harness}),
			host.Name:     host.Enforcer{},
			landlock.Name: landlock.Enforcer{},
			oci.Name:      oci.NewEnforcer(oci.EnforcerConfig{Workspace: root, Harness: cfg.Harness}),
		}
		WithWasm(cfg.Substrates)
	}
	if cfg.Inspectors == nil {
		cfg.Inspectors = map[string]substrate.Inspector{}
		for kind, e := range cfg.Substrates {
			if in, ok := e.(substrate.Inspector); ok {
				cfg.Inspectors[kind] = in
			}
		}
	}
	if cfg.Lookup == nil {
		cfg.Lookup = HostPrograms{Workspace: root}.Lookup
	}
	return &Admitter{cfg: cfg, root: root, harness: cfg.Harness}, nil
}

// Workspace returns the canonical workspace.
func (a *Admitter) Workspace() string { return a.root }

// Harness returns the harness configuration.
func (a *Admitter) Harness() harness.Config { return a.harness }

// String describes the admitter: its workspace and the substrates it
// admits tools for.
func (a *Admitter) String() string {
	var kinds []string
	for k, e := range a.cfg.Substrates {
		kinds = append(kinds, k+" on "+e.Name())
	}
	slices.Sort(kinds)
	return fmt.Sprintf("admission for workspace %s (%s)", a.root, strings.Join(kinds, ", "))
}

// Source is a declaration to admit.
type Source struct {
	Name   string // where it came from, for messages: a file name or "-"
	Data   []byte
	Format string // "json", "yaml", or "" to choose by content
	// Dir is the folder the declaration's paths (module, files) are
	// relative to: the declaration file's folder.
	Dir string
}

// File is one file of a tool's artifact.
type File struct {
	Path   string // relative to the tool's folder, clean, '/'-separated
	Data   []byte
	Exec   bool   // runs as a program (the mode had an execute bit)
	Digest string // "sha256:..."
}

// Admission is an admitted tool: its declaration, its artifact and its
// grant, ready to be registered.
type Admission struct {
	Declaration *Declaration
	Files       []File
	Grant       *Grant
	// Manifest is the canonical JSON the artifact digest is taken over.
	Manifest []byte
	// artifact is what the substrate's inspector parsed.
	artifact any
}

// Check is one named step of the pipeline.
type Check struct {
	Name    string
	Summary string
	run     func(ctx context.Context, a *Admitter, s *state) (stop bool)
}

// pipeline is the list of checks every declaration goes through, in order.
// A check that cannot let the next ones work (the declaration did not
// decode) stops the pipeline; the others add their reasons and let the
// rest report too, so a refusal lists every problem at once.
var pipeline = []Check{
	{"decode", "strict JSON or YAML into a Declaration", checkDecode},
	{"validate", "names, kind, paths, sizes", checkValidate},
	{"capabilities", "each capability parses; no duplicates or conflicts", checkCapabilities},
	{"env", "no environment variable that changes how programs load or run", checkEnv},
	{"combinations", "capabilities that only make sense together", checkCombinations},
	{"files", "the tool's files and module, read beneath the declaration's folder", checkFiles},
	{"command", "a native command resolves to the tool's files or a read-only host program", checkCommand},
	{"inspect", "the substrate reads the artifact; what it needs was asked for", checkInspect},
	{"input-schema", "input_schema passes the schema rules and compiles, with no remote references", checkSchema},
	{"substrate", "the tool's substrate is available on this host", checkSubstrate},
	{"resolve", "every capability resolves to at least one mechanism", checkResolve},
	{"evidence", "every mechanism with a probe has a fresh passing receipt on this host", checkEvidence},
}

// Checks lists the pipeline's checks in order.
func Checks() []Check { return slices.Clone(pipeline) }

// state is what the checks of one admission share.
type state struct {
	src      Source
	decl     *Declaration
	set      capabilities.Set
	files    []File
	command  []string
	fileArgs []int
	enforcer substrate.Enforcer
	facts    substrate.Facts
	mechs    map[string][]string
	mechIDs  map[string][]string // capability -> "<substrate>/<name>" of its mechanisms
	proof    *probes.Proof
	defaults capabilities.Set
	reasons  []Reason
	// artifact is what the inspector parsed (a wasm module).
	artifact any
	// preloaded: the files come from the registry, verified against the
	// digest of an authenticated grant.
	preloaded bool
}

func (s *state) refuse(r Reason) { s.reasons = append(s.reasons, r) }

// Admit runs src through the pipeline. It returns the [Admission], or a
// [*Refusal] listing every reason. Nothing is written anywhere: register
// the result with [Registry.Register].
func (a *Admitter) Admit(ctx context.Context, src Source) (*Admission, error) {
	return a.admit(ctx, &state{src: src, mechs: map[string][]string{}})
}

// Recheck runs a registered tool through the pipeline again, on this host
// as it is now, with the declaration and files the registry holds. It
// returns the new admission (same digest, new facts and mechanisms) or a
// [*Refusal] saying what this host can no longer grant.
func (a *Admitter) Recheck(ctx context.Context, t *Tool) (*Admission, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(t.Declaration); err != nil {
		return nil, err
	}
	s := &state{src: Source{Name: "the registry", Data: buf.Bytes(), Format: FormatJSON}, mechs: map[string][]string{},
		files: t.Files, preloaded: true}
	adm, err := a.admit(ctx, s)
	if err != nil {
		return nil, err
	}
	if adm.Grant.Digest != t.Grant.Digest {
		return nil, fmt.Errorf("admission: recheck of %q changed its digest from %s to %s", t.Grant.Tool, t.Grant.Digest, adm.Grant.Digest)
	}
	return adm, nil
}

func (a *Admitter) admit(ctx context.Context, s *state) (*Admission, error) {
	src := s.src
	for _, c := range pipeline {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if c.run(ctx, a, s) {
			break
		}
	}
	name := ""
	if s.decl != nil {
		name = s.decl.Name
	}
	if len(s.reasons) > 0 {
		r := &Refusal{Tool: name, Source: src.Name, Reasons: s.reasons}
		a.cfg.Logger.Info("admission refused", "tool", name, "source", src.Name, "reasons", len(s.reasons))
		return nil, r
	}
	manifest, digest := manifestOf(s.decl, s.files)
	g := &Grant{
		Tool:         s.decl.Name,
		Kind:         s.decl.Kind,
		Digest:       digest,
		Substrate:    s.enforcer.Name(),
		Capabilities: s.set,
		Defaults:     s.defaults,
		Mechanisms:   s.mechs,
		Command:      s.command,
		FileArgs:     s.fileArgs,
		Facts:        s.facts,
		FactsDigest:  s.facts.Digest(),
		AdmittedAt:   a.cfg.Now().UTC().Truncate(time.Second),
	}
	if s.proof != nil {
		g.Evidence, g.Unproved, g.Degraded = citations(s.mechIDs, s.proof), s.proof.Unproved, s.proof.Degraded
	}
	if s.decl.Kind == KindWasm {
		g.Module = path.Clean(s.decl.Module)
		g.Args = slices.Clone(s.decl.Args)
	}
	a.cfg.Logger.Info("admitted", "tool", g.Tool, "digest", g.Digest, "capabilities", g.Capabilities.String())
	return &Admission{Declaration: s.decl, Files: s.files, Grant: g, Manifest: manifest, artifact: s.artifact}, nil
}

func checkDecode(_ context.Context, _ *Admitter, s *state) bool {
	d, err := Decode(s.src.Data, s.src.Format)
	if err != nil {
		r := Reason{Check: "decode", Blocked: err.Error(), Err: ErrInvalidDeclaration,
			Instead: "one JSON object or YAML mapping with the fields " + fieldList()}
		var de *DecodeError
		if errors.As(err, &de) {
			r.Field = de.Field
		}
		s.refuse(r)
		return true
	}
	s.decl = d
	return false
}

func checkValidate(_ context.Context, _ *Admitter, s *state) bool {
	for _, r := range s.decl.Validate() {
		s.refuse(r)
	}
	return false
}

func checkCapabilities(_ context.Context, _ *Admitter, s *state) bool {
	set, rs := s.decl.parseCapabilities()
	s.set = set
	for _, r := range rs {
		s.refuse(r)
	}
	return false
}

func checkEnv(_ context.Context, _ *Admitter, s *state) bool {
	for _, c := range s.set.Of(capabilities.KindEnv) {
		if why := capabilities.EnvHazard(c.Name()); why != "" {
			s.refuse(Reason{Check: "env", Capability: c.String(), Blocked: why, Err: ErrCapabilityRefused,
				Instead: "pass the value in the tool's input, or use a variable of the tool's own name"})
		}
	}
	return false
}

func checkCombinations(_ context.Context, _ *Admitter, s *state) bool {
	if s.set.Has(capabilities.WriteWorkspace()) && !s.set.Has(capabilities.ReadWorkspace()) {
		s.refuse(Reason{Check: "combinations", Capability: "fs.write:workspace", Err: ErrCapabilityRefused,
			Blocked: "writing the workspace gives reading it too (a bind mount cannot be write-only); it is not granted silently",
			Instead: "fs.read:workspace and fs.write:workspace together"})
	}
	return false
}

// checkFiles reads the tool's files (native) or module (wasm) through the
// workspace guard opened on the declaration's folder: paths cannot leave
// it, symlinks are followed only while they stay inside, harness state is
// refused.
func checkFiles(_ context.Context, a *Admitter, s *state) bool {
	if s.preloaded {
		return false
	}
	var names []string
	switch s.decl.Kind {
	case KindNative:
		names = s.decl.Files
	case KindWasm:
		if s.decl.Module != "" {
			names = []string{s.decl.Module}
		}
	}
	if len(names) == 0 {
		return false
	}
	artifact := func(field, name, format string, args ...any) {
		s.refuse(Reason{Check: "files", Field: field, Err: ErrArtifactRefused,
			Blocked: fmt.Sprintf("%q: ", shorten(name)) + fmt.Sprintf(format, args...),
			Instead: "files inside the declaration's folder, outside harness state"})
	}
	field := "files"
	if s.decl.Kind == KindWasm {
		field = "module"
	}
	dir := s.src.Dir
	if dir == "" {
		dir = "."
	}
	canon, err := dirfd.Canonical(dir)
	if err != nil {
		artifact(field, dir, "the declaration's folder cannot be resolved: %v", err)
		return false
	}
	// A folder that holds the workspace would let a path walk into its
	// harness state, which the guard on the folder knows nothing about.
	if canon != a.root && within(a.root, canon) {
		artifact(field, canon, "the declaration's folder contains the workspace %s; move the declaration into the workspace", a.root)
		return false
	}
	opts := []workspace.Option{workspace.WithHarness(a.harness), workspace.WithMaxFileSize(MaxFileSize)}
	if canon != a.root {
		// Outside the workspace, or beneath its top level, no name is
		// harness state; the folder is still refused when it holds
		// cordon's trusted state.
		opts = append(opts, workspace.WithoutHarnessState())
	}
	if rel, ok := relWithin(canon, a.root); ok && rel != "." {
		first, _, _ := strings.Cut(rel, "/")
		for _, h := range a.harness.State() {
			if strings.EqualFold(first, h) {
				artifact(field, canon, "the declaration's folder is harness state")
				return false
			}
		}
	}
	ws, err := workspace.Open(canon, opts...)
	if err != nil {
		artifact(field, dir, "%v", err)
		return false
	}
	defer ws.Close()
	var total int64
	for _, name := range names {
		if checkRelPath(name) != "" {
			continue // validate reported it
		}
		clean := path.Clean(name)
		en, err := ws.Stat(clean)
		if err != nil {
			artifact(field, name, "%v", err)
			continue
		}
		data, err := ws.ReadFile(clean)
		if err != nil {
			artifact(field, name, "%v", err)
			continue
		}
		total += int64(len(data))
		if total > MaxFilesSize {
			artifact(field, name, "the tool's files add up to more than %d bytes", MaxFilesSize)
			return false
		}
		s.files = append(s.files, newFile(clean, data, en.Mode&0o111 != 0))
	}
	slices.SortFunc(s.files, func(x, y File) int { return strings.Compare(x.Path, y.Path) })
	return false
}

// checkCommand resolves a native command: an element equal to the path of
// one of the tool's files names that file (it runs from the tool's
// read-only folder in the registry); otherwise the program must be a
// read-only host program found on [SandboxPath].
func checkCommand(_ context.Context, a *Admitter, s *state) bool {
	if s.decl.Kind != KindNative || len(s.decl.Command) == 0 {
		return false
	}
	own := map[string]File{}
	for _, f := range s.files {
		own[f.Path] = f
	}
	cmd := slices.Clone(s.decl.Command)
	var fileArgs []int
	for i, arg := range cmd {
		if checkRelPath(arg) != "" {
			continue
		}
		if f, ok := own[path.Clean(arg)]; ok {
			cmd[i] = f.Path
			fileArgs = append(fileArgs, i)
		}
	}
	refuse := func(format string, args ...any) {
		s.refuse(Reason{Check: "command", Field: "command", Err: ErrArtifactRefused, Blocked: fmt.Sprintf(format, args...),
			Instead: "a program the tool brings in files (e.g. [\"./tool.sh\"] with \"files\": [\"tool.sh\"]) or a system program such as python3 or sh"})
	}
	if slices.Contains(fileArgs, 0) {
		if !own[cmd[0]].Exec {
			refuse("%q is one of the tool's files but is not executable; make it executable or run it with an interpreter ([\"sh\", %q])", cmd[0], cmd[0])
			return false
		}
	} else {
		prog := cmd[0]
		if !strings.HasPrefix(prog, "/") && strings.Contains(prog, "/") {
			refuse("%q is neither one of the tool's files nor a program on the system PATH", shorten(prog))
			return false
		}
		resolved, err := a.cfg.Lookup(prog)
		if err != nil {
			refuse("%v", err)
			return false
		}
		cmd[0] = resolved
	}
	s.command, s.fileArgs = cmd, fileArgs
	return false
}

func checkInspect(ctx context.Context, a *Admitter, s *state) bool {
	in := a.cfg.Inspectors[s.decl.Kind]
	if in == nil || s.decl.Kind != KindWasm || len(s.files) == 0 {
		return false
	}
	ins, err := in.Inspect(ctx, s.files[0].Data, s.preloaded)
	if err != nil {
		s.refuse(Reason{Check: "inspect", Field: "module", Err: ErrArtifactRefused, Blocked: err.Error(),
			Instead: "a module that imports only host functions cordon grants"})
		return false
	}
	s.artifact = ins.Artifact
	for _, c := range ins.Needs {
		if !s.set.Has(c) {
			s.refuse(Reason{Check: "inspect", Capability: c.String(), Err: ErrArtifactRefused,
				Blocked: fmt.Sprintf("the module needs %s, which the declaration does not ask for", c),
				Instead: fmt.Sprintf("add %q to capabilities, or remove the import from the module", c.String())})
		}
	}
	return false
}

// checkSchema compiles the input_schema ([CompileSchema]); each problem
// the schema rules find is one reason.
func checkSchema(_ context.Context, _ *Admitter, s *state) bool {
	_, err := compileSchema(s.decl.InputSchema)
	if err == nil {
		return false
	}
	problems := []string{err.Error()}
	var se *SchemaError
	if errors.As(err, &se) {
		problems = se.Problems
		if len(problems) > 10 {
			problems = append(problems[:10:10], fmt.Sprintf("and %d more problems", len(problems)-10))
		}
	}
	for _, p := range problems {
		s.refuse(Reason{Check: "input-schema", Field: "input_schema", Err: ErrInvalidDeclaration, Blocked: p,
			Instead: "a self-contained JSON Schema, draft 2020-12 (put shared parts under $defs and refer to them with \"#/$defs/...\")"})
	}
	return false
}

func checkSubstrate(ctx context.Context, a *Admitter, s *state) bool {
	switch s.decl.Kind {
	case KindNative, KindWasm:
	default:
		return true // validate reported it
	}
	e := a.cfg.Substrates[s.decl.Kind]
	if sub := s.decl.Substrate; s.decl.Kind == KindNative && sub != "" && sub != "bwrap" {
		// A native tool on another substrate: the one of that name.
		if e = a.cfg.Substrates[sub]; e != nil && e.Name() != sub {
			e = nil
		}
		if e == nil {
			s.refuse(Reason{Check: "substrate", Field: "substrate", Err: ErrCapabilityRefused,
				Blocked: fmt.Sprintf("the %s substrate is not in this cordon", sub),
				Instead: "\"substrate\": \"bwrap\""})
			return true
		}
	}
	if e == nil {
		s.refuse(Reason{Check: "substrate", Field: "kind", Err: ErrCapabilityRefused,
			Blocked: fmt.Sprintf("no substrate runs %s tools in this cordon", s.decl.Kind),
			Instead: "a tool of another kind"})
		return true
	}
	facts, err := e.Facts(ctx)
	if err != nil {
		s.refuse(Reason{Check: "substrate", Field: "kind", Err: ErrCapabilityRefused,
			Blocked: fmt.Sprintf("the %s substrate is not available on this host: %v", e.Name(), err),
			Instead: "ask the user to install it; no tool of this kind can be admitted until then"})
		return true
	}
	s.enforcer, s.facts = e, facts
	return false
}

// checkResolve asks the substrate for the mechanisms of every capability
// and of every default limit. A capability without one is refused.
func checkResolve(_ context.Context, _ *Admitter, s *state) bool {
	var defaults []capabilities.Capability
	if _, ok := s.set.One(capabilities.KindTime); !ok {
		c, _ := capabilities.TimeLimit(DefaultTime)
		defaults = append(defaults, c)
	}
	if _, ok := s.set.One(capabilities.KindOutput); !ok {
		c, _ := capabilities.OutputLimit(DefaultOutput)
		defaults = append(defaults, c)
	}
	if _, ok := s.set.One(capabilities.KindNet); !ok && len(s.set.Of(capabilities.KindNetConnect)) == 0 {
		defaults = append(defaults, capabilities.NoNet())
	}
	if _, ok := s.set.One(capabilities.KindMemory); !ok && s.decl.Kind == KindWasm {
		c, _ := capabilities.MemoryLimit(DefaultWasmMemory)
		defaults = append(defaults, c)
	}
	s.defaults, _ = capabilities.NewSet(defaults...)
	resolve := func(c capabilities.Capability, def bool) {
		ms, err := s.enforcer.Mechanisms(c, s.set)
		if err == nil && len(ms) == 0 {
			err = &substrate.UnenforceableError{Substrate: s.enforcer.Name(), Capability: c, Reason: s.enforcer.Name() + " names no mechanism for it"}
		}
		if err != nil {
			r := capabilityReason("resolve", c.String(), err)
			if def {
				r.Blocked = "(a default limit) " + r.Blocked
			}
			s.refuse(r)
			return
		}
		for _, m := range ms {
			s.mechs[c.String()] = append(s.mechs[c.String()], m.String())
			if s.mechIDs == nil {
				s.mechIDs = map[string][]string{}
			}
			s.mechIDs[c.String()] = append(s.mechIDs[c.String()], m.Substrate+"/"+m.Name)
		}
	}
	for _, c := range s.set.All() {
		resolve(c, false)
	}
	for _, c := range s.defaults.All() {
		resolve(c, true)
	}
	return false
}

// checkEvidence asks the prover for the receipts that proved every
// mechanism of the grant on this host (running the probes that lack fresh
// ones). A capability one of whose mechanisms failed its probe is
// refused, naming the probe and what it observed.
func checkEvidence(ctx context.Context, a *Admitter, s *state) bool {
	if a.cfg.Prover == nil || len(s.reasons) > 0 || s.enforcer == nil {
		return false
	}
	var ids []string
	for _, c := range append(s.set.All(), s.defaults.All()...) {
		for _, id := range s.mechIDs[c.String()] {
			if !slices.Contains(ids, id) {
				ids = append(ids, id)
			}
		}
	}
	proof, err := a.cfg.Prover.Prove(ctx, s.enforcer.Name(), ids)
	if err != nil {
		s.refuse(Reason{Check: "evidence", Err: ErrCapabilityRefused,
			Blocked: "cannot find or make the evidence that the mechanisms work on this host: " + err.Error(),
			Instead: "run `cordon probe` to see which probe cannot run"})
		return true
	}
	s.proof = proof
	for _, c := range append(s.set.All(), s.defaults.All()...) {
		// One line per failed probe, with the mechanisms it disproved.
		var order []string
		byProbe := map[string][]string{}
		observed := map[string]string{}
		for _, id := range s.mechIDs[c.String()] {
			for _, f := range proof.Failed[id] {
				if _, ok := byProbe[f.Probe]; !ok {
					order = append(order, f.Probe)
				}
				byProbe[f.Probe] = append(byProbe[f.Probe], id)
				observed[f.Probe] = f.Observed
			}
		}
		var failed []string
		for _, pr := range order {
			failed = append(failed, fmt.Sprintf("probe %s failed on this host, disproving %s (observed: %s)", pr, strings.Join(byProbe[pr], " and "), observed[pr]))
		}
		if len(failed) > 0 {
			s.refuse(Reason{Check: "evidence", Capability: c.String(), Err: ErrCapabilityRefused,
				Blocked: "cannot be enforced here: " + strings.Join(failed, "; "),
				Instead: "fix the substrate on this host (`cordon probe` shows every probe), or a tool that does not need it"})
		}
	}
	return false
}

// citations lists for each capability the receipts that proved its
// mechanisms, each receipt once.
func citations(mechIDs map[string][]string, proof *probes.Proof) map[string][]probes.Citation {
	out := map[string][]probes.Citation{}
	for c, ids := range mechIDs {
		seen := map[string]bool{}
		for _, id := range ids {
			for _, cit := range proof.Citations[id] {
				if !seen[cit.Receipt] {
					seen[cit.Receipt] = true
					out[c] = append(out[c], cit)
				}
			}
		}
	}
	return out
}

// manifestOf returns the canonical JSON of a declaration and its files and
// the "sha256:..." digest over it: the artifact's identity.
func manifestOf(d *Declaration, files []File) ([]byte, string) {
	type fileEntry struct {
		Path   string `json:"path"`
		Digest string `json:"digest"`
		Exec   bool   `json:"exec"`
	}
	canon := *d
	if len(canon.InputSchema) > 0 {
		var b bytes.Buffer
		if json.Compact(&b, canon.InputSchema) == nil {
			canon.InputSchema = b.Bytes()
		}
	}
	m := struct {
		Declaration Declaration `json:"declaration"`
		Files       []fileEntry `json:"files"`
	}{Declaration: canon, Files: []fileEntry{}}
	for _, f := range files {
		m.Files = append(m.Files, fileEntry{f.Path, f.Digest, f.Exec})
	}
	data, err := json.Marshal(m)
	if err != nil {
		panic("admission: manifest does not encode: " + err.Error())
	}
	sum := sha256.Sum256(data)
	return data, "sha256:" + hex.EncodeToString(sum[:])
}

// within reports whether p is dir or beneath it; both are clean absolute
// paths. Components are compared whole: /w/app-old is not within /w/app.
func within(p, dir string) bool {
	_, ok := relWithin(p, dir)
	return ok
}

func relWithin(p, dir string) (string, bool) {
	rel, err := filepath.Rel(dir, p)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") || filepath.IsAbs(rel) {
		return "", false
	}
	return filepath.ToSlash(rel), true
}

func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 400 {
		s = s[:400] + "…"
	}
	return s
}

func newFile(p string, data []byte, exec bool) File {
	sum := sha256.Sum256(data)
	return File{Path: p, Data: data, Exec: exec, Digest: "sha256:" + hex.EncodeToString(sum[:])}
}
