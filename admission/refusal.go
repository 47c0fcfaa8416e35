package admission

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/cordon-run/cordon/capabilities"
	"github.com/cordon-run/cordon/refusal"
	"github.com/cordon-run/cordon/substrate"
)

// Sentinels for [errors.Is]. The first four are policy refusals (the CLI
// exits 3); the rest are failures.
var (
	// ErrInvalidDeclaration: the declaration does not decode or validate.
	ErrInvalidDeclaration = refusal.InvalidDeclaration
	// ErrCapabilityRefused: a capability cannot be granted (it is
	// malformed, forbidden, or no mechanism on this host enforces it).
	ErrCapabilityRefused = refusal.CapabilityRefused
	// ErrArtifactRefused: the tool's files, module or command are refused.
	ErrArtifactRefused = refusal.ArtifactRefused
	// ErrInputRefused: a run's input does not match the tool's input_schema.
	ErrInputRefused = refusal.InputRefused
	// ErrUnknownTool: no tool of that name is registered.
	ErrUnknownTool = refusal.UnknownTool
	// ErrRegistry: the registry cannot be read or written.
	ErrRegistry = refusal.Registry
)

// Reason is one thing admission refused, in words a model can act on: what
// was asked for, what blocked it, and what it could ask for instead.
type Reason struct {
	Check      string `json:"check"`                // the pipeline check that refused: "decode", "validate", "resolve", ...
	Capability string `json:"capability,omitempty"` // the capability as given, when the reason is about one
	Field      string `json:"field,omitempty"`      // the declaration field, when the reason is about one
	Blocked    string `json:"reason"`               // what blocked it
	Instead    string `json:"instead,omitempty"`    // what to ask for instead, when something can be
	Err        error  `json:"-"`                    // ErrInvalidDeclaration, ErrCapabilityRefused or ErrArtifactRefused
}

// String prints the reason on one line.
func (r Reason) String() string {
	var b strings.Builder
	switch {
	case r.Capability != "":
		fmt.Fprintf(&b, "%s: ", r.Capability)
	case r.Field != "":
		fmt.Fprintf(&b, "%s: ", r.Field)
	}
	b.WriteString(r.Blocked)
	if r.Instead != "" {
		fmt.Fprintf(&b, "; instead: %s", r.Instead)
	}
	return b.String()
}

// Refusal is admission's "no": the tool is not registered, and every
// reason is listed. It wraps the sentinels of its reasons.
type Refusal struct {
	Tool    string   // the tool's name, when the declaration got that far
	Source  string   // where the declaration came from (a file name, or "-")
	Reasons []Reason // at least one
}

func (r *Refusal) Error() string {
	var b strings.Builder
	b.WriteString("refusing to admit ")
	if r.Tool != "" {
		fmt.Fprintf(&b, "tool %q", r.Tool)
	} else {
		fmt.Fprintf(&b, "the declaration")
	}
	if r.Source != "" {
		fmt.Fprintf(&b, " from %s", r.Source)
	}
	fmt.Fprintf(&b, " — %d %s:", len(r.Reasons), plural(len(r.Reasons), "reason", "reasons"))
	for _, reason := range r.Reasons {
		b.WriteString("\n  - ")
		b.WriteString(reason.String())
	}
	return b.String()
}

// Unwrap returns the sentinels of the reasons, that of the first reason
// first, so that [refusal.Of] names the refusal by what the pipeline found
// first.
func (r *Refusal) Unwrap() []error {
	var out []error
	for _, reason := range r.Reasons {
		if reason.Err != nil && !slices.Contains(out, reason.Err) {
			out = append(out, reason.Err)
		}
	}
	if len(out) == 0 {
		out = append(out, ErrInvalidDeclaration)
	}
	return out
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// capabilityReason turns an error about one capability into a Reason.
func capabilityReason(check, input string, err error) Reason {
	r := Reason{Check: check, Capability: input, Err: ErrCapabilityRefused}
	var ce *capabilities.Error
	var ue *substrate.UnenforceableError
	switch {
	case errors.As(err, &ce):
		r.Blocked = ce.Reason
		if r.Capability == "" {
			r.Capability = ce.Input
		}
	case errors.As(err, &ue):
		r.Blocked = ue.Reason
		if len(ue.Instead) > 0 {
			r.Instead = strings.Join(ue.Instead, " or ")
		} else {
			r.Instead = "leave " + ue.Capability.String() + " out"
		}
	default:
		r.Blocked = err.Error()
	}
	return r
}

func asCapErr(err error, target **capabilities.Error) bool { return errors.As(err, target) }

// unjoin splits an errors.Join result into its parts.
func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, unjoin(e)...)
		}
		return out
	}
	return []error{err}
}

func sortStrings(s []string) { slices.Sort(s) }
