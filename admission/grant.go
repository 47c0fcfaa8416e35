package admission

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/cordon-run/cordon/capabilities"
	"github.com/cordon-run/cordon/probes"
	"github.com/cordon-run/cordon/substrate"
)

// Limits a tool runs under when its declaration does not ask for them.
// They restrict; they grant nothing.
const (
	DefaultTime   = 30 * time.Second
	DefaultOutput = 1 << 20 // bytes kept of stdout and of stderr
	// DefaultWasmMemory caps a wasm tool's memory when it asks for none.
	DefaultWasmMemory = 64 << 20
)

// Grant is admission's "yes": what a tool may do, and the mechanisms that
// enforce each of it, on the host whose facts it records.
type Grant struct {
	Tool      string `json:"tool"`
	Kind      string `json:"kind"`
	Digest    string `json:"digest"` // the artifact: "sha256:..." of declaration and files
	Substrate string `json:"substrate"`
	// Capabilities are those the declaration asked for, all granted.
	Capabilities capabilities.Set `json:"capabilities"`
	// Defaults are the limits applied because the declaration did not ask
	// for them: a time limit, an output limit, no network.
	Defaults capabilities.Set `json:"defaults"`
	// Mechanisms quotes, for each capability and default, the mechanisms
	// that enforce it ([substrate.Mechanism.String]).
	Mechanisms map[string][]string `json:"mechanisms"`
	// Command is the native command as it runs: Command[0] is an absolute
	// host program or one of the tool's files; the elements listed in
	// FileArgs are paths of the tool's own files, relative to the tool's
	// read-only folder in the registry.
	Command  []string `json:"command,omitempty"`
	FileArgs []int    `json:"file_args,omitempty"`
	// Module is the wasm module, relative to the tool's folder; Args
	// follow the tool's name in its argv.
	Module string   `json:"module,omitempty"`
	Args   []string `json:"args,omitempty"`
	// Facts are the host's facts when the grant was made; FactsDigest is
	// their digest, compared before every run.
	// Evidence names, for each capability and default, the receipts of
	// the probes that proved its mechanisms on this host; Unproved are
	// the mechanisms no probe covers, Degraded what the host lacks that
	// the substrate would use. Empty when admission kept no evidence.
	Evidence    map[string][]probes.Citation `json:"evidence,omitempty"`
	Unproved    []string                     `json:"unproved,omitempty"`
	Degraded    []string                     `json:"degraded,omitempty"`
	Facts       substrate.Facts              `json:"facts"`
	FactsDigest string                       `json:"facts_digest"`
	AdmittedAt  time.Time                    `json:"admitted_at"`
}

// All returns the capabilities the tool runs under: those granted and the
// default limits applied for those it did not ask for.
func (g *Grant) All() capabilities.Set {
	all, err := capabilities.NewSet(append(g.Capabilities.All(), g.Defaults.All()...)...)
	if err != nil {
		return g.Capabilities // a default never conflicts with what was asked for
	}
	return all
}

// Has reports whether the grant holds c.
func (g *Grant) Has(c capabilities.Capability) bool { return g.Capabilities.Has(c) }

// Time returns the wall-clock limit the tool runs under.
func (g *Grant) Time() time.Duration {
	if c, ok := g.Capabilities.One(capabilities.KindTime); ok {
		return c.Duration()
	}
	if c, ok := g.Defaults.One(capabilities.KindTime); ok {
		return c.Duration()
	}
	return DefaultTime
}

// Output returns the bytes kept of each of stdout and stderr.
func (g *Grant) Output() int64 {
	if c, ok := g.Capabilities.One(capabilities.KindOutput); ok {
		return c.Size()
	}
	if c, ok := g.Defaults.One(capabilities.KindOutput); ok {
		return c.Size()
	}
	return DefaultOutput
}

// HostNet reports whether the grant opens the host's network.
func (g *Grant) HostNet() bool { return g.Capabilities.Has(capabilities.HostNet()) }

// Env returns the names of the environment variables granted.
func (g *Grant) Env() []string {
	var names []string
	for _, c := range g.Capabilities.Of(capabilities.KindEnv) {
		names = append(names, c.Name())
	}
	return names
}

// DisplayCommand prints the command with the tool's files as "<tool>/PATH".
func (g *Grant) DisplayCommand() []string {
	out := slices.Clone(g.Command)
	for _, i := range g.FileArgs {
		if i >= 0 && i < len(out) {
			out[i] = "<tool>/" + out[i]
		}
	}
	return out
}

// String prints the grant over several lines: the tool, the digest, each
// capability with its mechanisms.
func (g *Grant) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "admitted %s tool %q (%s) on %s\n", g.Kind, g.Tool, g.Digest, g.Substrate)
	if len(g.Command) > 0 {
		fmt.Fprintf(&b, "  command: %s\n", strings.Join(g.DisplayCommand(), " "))
	}
	if g.Module != "" {
		fmt.Fprintf(&b, "  module: <tool>/%s\n", g.Module)
	}
	if g.Capabilities.Len() == 0 {
		b.WriteString("  granted: nothing (no capabilities were asked for)\n")
	}
	for _, c := range g.Capabilities.All() {
		fmt.Fprintf(&b, "  %s\n", c)
		for _, m := range g.Mechanisms[c.String()] {
			fmt.Fprintf(&b, "      %s\n", m)
		}
		g.writeEvidence(&b, c.String())
	}
	for _, c := range g.Defaults.All() {
		fmt.Fprintf(&b, "  %s (default)\n", c)
		for _, m := range g.Mechanisms[c.String()] {
			fmt.Fprintf(&b, "      %s\n", m)
		}
		g.writeEvidence(&b, c.String())
	}
	if g.Evidence == nil {
		b.WriteString("  evidence: none cited (this admission keeps no evidence log)\n")
	}
	if len(g.Unproved) > 0 {
		fmt.Fprintf(&b, "  no probe covers: %s\n", strings.Join(g.Unproved, ", "))
	}
	for _, d := range g.Degraded {
		fmt.Fprintf(&b, "  degraded: %s\n", d)
	}
	fmt.Fprintf(&b, "  host: %s", g.Facts)
	return b.String()
}

// writeEvidence prints the receipts that proved capability c's mechanisms.
func (g *Grant) writeEvidence(b *strings.Builder, c string) {
	if g.Evidence == nil {
		return
	}
	cs := g.Evidence[c]
	if len(cs) == 0 {
		return
	}
	var names []string
	for _, cit := range cs {
		names = append(names, fmt.Sprintf("%s #%d", cit.Probe, cit.Sequence))
	}
	fmt.Fprintf(b, "      proved by: %s\n", strings.Join(names, ", "))
}
