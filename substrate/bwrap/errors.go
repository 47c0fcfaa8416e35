package bwrap

import (
	"fmt"

	"github.com/cordon-run/cordon/refusal"
)

// UnavailableMessage is the message of every [ErrUnavailable] error; the
// reason follows it in parentheses.
const UnavailableMessage = "sandbox requested but bubblewrap is unavailable; install bwrap or rerun with --no-sandbox"

// Sentinels for [errors.Is].
var (
	// ErrUnavailable: bubblewrap is missing or cannot create a sandbox on
	// this host. The command did not run.
	ErrUnavailable = refusal.SandboxUnavailable
	// ErrSetup: bubblewrap works on this host, but could not set up this
	// sandbox (a bind source vanished, for instance). The command did not
	// run.
	ErrSetup = refusal.SandboxSetup
	// ErrProtectedPath: a harness or write-later path is a symlink (or has
	// one on the way), so it cannot be bound read-only safely.
	ErrProtectedPath = refusal.ProtectedPath
	// ErrEnvRefused: an environment variable that may not be passed in.
	ErrEnvRefused = refusal.EnvRefused
	// ErrInvalidPolicy: the policy itself is malformed.
	ErrInvalidPolicy = refusal.InvalidPolicy
)

// Error is the error of this package: the operation, the path or name it
// concerns, a sentinel and the underlying cause.
type Error struct {
	Op    string // "start", "pass", "configure"
	Path  string // the path or variable name concerned, if any
	Root  string // the workspace: the boundary
	Err   error  // one of the package's sentinels
	Cause error  // the underlying error, or nil
	// detail says why, in words.
	detail string
}

func (e *Error) Error() string {
	switch e.Err {
	case ErrUnavailable:
		if e.detail == workspaceExposes && e.Cause != nil {
			// Not bubblewrap's absence: the fix is another workspace.
			return fmt.Sprintf("sandbox requested, but bubblewrap may not run for the workspace %s (%v)", e.Root, e.Cause)
		}
		if e.Cause != nil {
			return fmt.Sprintf("%s (%v)", UnavailableMessage, e.Cause)
		}
		return UnavailableMessage
	case ErrSetup:
		why := e.detail
		if why == "" && e.Cause != nil {
			why = e.Cause.Error()
		}
		return fmt.Sprintf("cannot set up the sandbox for workspace %s: %s", e.Root, why)
	case ErrProtectedPath:
		return fmt.Sprintf("refusing to start the sandbox — %s is %s; harness state and write-later paths are bound read-only inside %s and must not be symlinks",
			e.Path, e.detail, e.Root)
	case ErrEnvRefused:
		return fmt.Sprintf("refusing to pass %s into the sandbox — %s", e.Path, e.detail)
	}
	msg := fmt.Sprintf("%s: %s", e.Err, e.detail)
	if e.Cause != nil {
		msg += ": " + e.Cause.Error()
	}
	return msg
}

// Unwrap returns the sentinel and the cause.
func (e *Error) Unwrap() []error {
	if e.Cause == nil {
		return []error{e.Err}
	}
	return []error{e.Err, e.Cause}
}

// workspaceExposes is the detail of an [ErrUnavailable] whose cause is
// the workspace: it would let sandboxed commands write the program.
const workspaceExposes = "the workspace exposes the program"

// Unavailable returns the [ErrUnavailable] error for the reason seen.
func Unavailable(reason error) error {
	return &Error{Op: "start", Err: ErrUnavailable, Cause: reason}
}
