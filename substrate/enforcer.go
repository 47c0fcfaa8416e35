package substrate

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/cordon-run/cordon/capabilities"
	"github.com/cordon-run/cordon/refusal"
)

// Enforcer is what a substrate offers admission: the facts of the host it
// would run on, and for each capability the mechanisms that enforce it.
//
// Admission grants a capability only when the tool's substrate names at
// least one mechanism for it; an Enforcer never answers with a weaker
// mechanism than the capability asks for — it refuses instead.
type Enforcer interface {
	// Name is the substrate's name, as in [Mechanism.Substrate].
	Name() string
	// Facts probes the host. An error means the substrate is not available
	// here; it wraps [ErrUnavailable] and names the fix.
	Facts(ctx context.Context) (Facts, error)
	// Mechanisms returns the mechanisms that enforce c when it is granted
	// together with the rest of set (a substrate may enforce fs.read
	// differently when fs.write is granted too). An error means the
	// substrate cannot enforce c: an [*UnenforceableError].
	Mechanisms(c capabilities.Capability, set capabilities.Set) ([]Mechanism, error)
}

// Inspector is implemented by substrates that read a tool's artifact (a
// WebAssembly module) before admission: it returns the capabilities the
// artifact needs (for a module, one wasm.import capability per host
// function it imports), which admission checks against those the
// declaration asks for. An error means the artifact is malformed or uses
// something no capability can grant.
//
// With admitted, the artifact is the one an authenticated grant names
// (its digest matched before every run): the inspector still reads what it
// needs, but need not repeat a validation it did at admission.
type Inspector interface {
	Inspect(ctx context.Context, artifact []byte, admitted bool) (Inspection, error)
}

// Inspection is what an [Inspector] found in an artifact.
type Inspection struct {
	// Needs are the capabilities the artifact needs.
	Needs []capabilities.Capability
	// Artifact is the parsed artifact, handed on to the run so that it is
	// read once (a *wasm.Module).
	Artifact any
}

// Sentinels for [errors.Is].
var (
	// ErrUnenforceable: the substrate has no mechanism for a capability.
	ErrUnenforceable = refusal.CapabilityRefused
	// ErrUnavailable: the substrate cannot run on this host.
	ErrUnavailable = refusal.SandboxUnavailable
)

// UnenforceableError is a capability a substrate cannot enforce, with the
// reason and what a tool could ask for instead.
type UnenforceableError struct {
	Substrate  string
	Capability capabilities.Capability
	Reason     string   // what blocks it, e.g. "bwrap can only unshare the network entirely"
	Instead    []string // capabilities that could be granted instead, possibly none
}

func (e *UnenforceableError) Error() string {
	msg := fmt.Sprintf("cannot grant %s: %s", e.Capability, e.Reason)
	if len(e.Instead) > 0 {
		msg += "; ask for " + orList(e.Instead) + " instead"
	}
	return msg
}

// Unwrap returns [ErrUnenforceable].
func (e *UnenforceableError) Unwrap() error { return ErrUnenforceable }

func orList(s []string) string {
	switch len(s) {
	case 1:
		return s[0]
	case 2:
		return s[0] + " or " + s[1]
	}
	return strings.Join(s[:len(s)-1], ", ") + " or " + s[len(s)-1]
}

// Facts describes the host as a substrate sees it: what a grant was made
// under. When the facts of the host differ from those a grant recorded
// (another kernel, another bwrap, another user), the grant is re-checked
// before the tool runs.
type Facts struct {
	Substrate string `json:"substrate"`
	OS        string `json:"os"`
	Arch      string `json:"arch"`
	Kernel    string `json:"kernel,omitempty"` // kernel release, e.g. "6.8.0-45-generic"
	UID       int    `json:"uid"`
	// Values holds substrate-specific facts, e.g. "bwrap.version": "0.8.0",
	// "landlock.abi": "4", "wazero.version": "v1.9.0".
	Values map[string]string `json:"values,omitempty"`
}

// Digest returns "sha256:" and the hex SHA-256 of the facts' canonical
// JSON encoding (fields in declaration order, Values sorted by key): equal
// facts have equal digests on every host.
func (f Facts) Digest() string {
	data, err := json.Marshal(f)
	if err != nil {
		panic("substrate: facts do not encode: " + err.Error()) // strings and ints always encode
	}
	sum := sha256.Sum256(data)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// String prints the facts on one line, e.g.
// "bwrap on linux/amd64, kernel 6.8.0, uid 0, bwrap.version=0.8.0".
func (f Facts) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s on %s/%s", f.Substrate, f.OS, f.Arch)
	if f.Kernel != "" {
		fmt.Fprintf(&b, ", kernel %s", f.Kernel)
	}
	fmt.Fprintf(&b, ", uid %d", f.UID)
	for _, k := range slices.Sorted(maps.Keys(f.Values)) {
		fmt.Fprintf(&b, ", %s=%s", k, f.Values[k])
	}
	return b.String()
}
