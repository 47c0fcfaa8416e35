// Package refusal gives cordon's error sentinels a kind that front ends can
// print and map to exit codes.
//
// Every package that refuses something exports its own sentinels (for
// [errors.Is]); each sentinel is a [*Kind] so that a front end can ask any
// error, however deeply wrapped, which kind of refusal it carries and
// whether it was a policy decision (exit 3) or an ordinary failure (exit 1).
package refusal

import "errors"

// Kind is a sentinel error with a stable, model-facing name such as
// "OutsideWorkspace".
type Kind struct {
	name   string
	text   string
	policy bool
}

// Policy returns a sentinel for a decision of the policy: the operation was
// understood and refused because the boundary forbids it.
func Policy(name, text string) *Kind { return &Kind{name: name, text: text, policy: true} }

// Failure returns a sentinel for an error that is not a policy decision
// (a missing file, a file too large, a sandbox that cannot start).
func Failure(name, text string) *Kind { return &Kind{name: name, text: text} }

func (k *Kind) Error() string { return k.text }

// Name is the kind's stable name, the "error" field of a JSON refusal.
func (k *Kind) Name() string { return k.name }

// IsPolicy reports whether the kind is a policy refusal.
func (k *Kind) IsPolicy() bool { return k.policy }

// Of returns the first [*Kind] in err's tree, or nil.
func Of(err error) *Kind {
	var k *Kind
	if errors.As(err, &k) {
		return k
	}
	return nil
}
