// Package refusal is cordon's error model: every refusal and failure that
// cordon reports carries one [*Kind] — a stable, model-facing name such as
// "OutsideWorkspace", a [Class], and the exit code the CLI uses for it.
//
// # Matching
//
// Each kind is one sentinel, defined here and re-exported under the name of
// the package that returns it (workspace.ErrOutsideWorkspace is
// [OutsideWorkspace]): match with [errors.Is] against either spelling, or ask
// any error, however deeply wrapped, for its kind with [Of]. Every error of
// cordon wraps its kind with %w, and keeps the underlying cause (an errno, a
// bwrap message) reachable the same way.
//
// # Classes and exit codes
//
//   - [Policy]: the operation was understood and refused because the boundary
//     forbids it (exit 3). A model should ask for something else.
//   - [CannotRun]: cordon could not run the command or tool at all — the
//     sandbox is unavailable or could not be set up, a substrate is missing
//     (exit 125). Nothing ran.
//   - [Usage]: the command line is wrong (exit 2).
//   - [Failure]: anything else — a file not found, a file too large, a
//     registry that cannot be read (exit 1).
//
// [ExitCode] is the one rule every front end uses. [Kinds] lists every kind,
// for documentation and for tests that keep the documentation complete.
package refusal

import (
	"errors"
	"fmt"
	"slices"
)

// Class is what kind of "no" a [Kind] is.
type Class int

const (
	// Failure is an ordinary error: not a decision of the policy.
	Failure Class = iota
	// Policy is a refusal by the boundary.
	Policy
	// CannotRun means nothing ran: the sandbox or substrate is unavailable.
	CannotRun
	// Usage is a malformed command line or call.
	Usage
)

func (c Class) String() string {
	switch c {
	case Failure:
		return "failure"
	case Policy:
		return "policy"
	case CannotRun:
		return "cannot run"
	case Usage:
		return "usage"
	}
	return fmt.Sprintf("Class(%d)", int(c))
}

// ExitCode is the CLI's exit code for the class: 1, 3, 125 or 2.
func (c Class) ExitCode() int {
	switch c {
	case Policy:
		return 3
	case CannotRun:
		return 125
	case Usage:
		return 2
	}
	return 1
}

// Kind is a sentinel error with a stable name, a class and a one-line
// description.
type Kind struct {
	name  string
	text  string
	class Class
}

func (k *Kind) Error() string { return k.text }

// Name is the kind's stable name, the "error" field of a JSON refusal.
func (k *Kind) Name() string { return k.name }

// Class is the kind's class.
func (k *Kind) Class() Class { return k.class }

// ExitCode is the CLI's exit code for the kind.
func (k *Kind) ExitCode() int { return k.class.ExitCode() }

// Description says in a few words what the kind means.
func (k *Kind) Description() string { return k.text }

var kinds []*Kind

func newKind(class Class, name, text string) *Kind {
	k := &Kind{name: name, text: text, class: class}
	kinds = append(kinds, k)
	return k
}

// The kinds. Policy refusals first, then what stops a run, then failures.
var (
	// OutsideWorkspace: a path resolves outside the workspace.
	OutsideWorkspace = newKind(Policy, "OutsideWorkspace", "outside the workspace")
	// HarnessState: a path reaches the harness's own state.
	HarnessState = newKind(Policy, "HarnessState", "harness state")
	// WriteLater: a write to a path that runs or configures something
	// later, outside the sandbox (git's hooks and config, editor and agent
	// settings).
	WriteLater = newKind(Policy, "WriteLater", "write-later path")
	// SymlinkLoop: too many symlinks on the way.
	SymlinkLoop = newKind(Policy, "SymlinkLoop", "too many symlinks")
	// HardLink: a write would go through a file with more than one name.
	HardLink = newKind(Policy, "HardLink", "more than one hard link")
	// ProtectedPath: a protected path cannot be protected as it is (it is
	// a symlink, or the git configuration naming it cannot be read).
	ProtectedPath = newKind(Policy, "ProtectedPath", "protected path cannot be protected")
	// EnvRefused: an environment variable that may not be passed in.
	EnvRefused = newKind(Policy, "EnvRefused", "environment variable refused")
	// CapabilityRefused: a capability cannot be granted.
	CapabilityRefused = newKind(Policy, "CapabilityRefused", "capability refused")
	// InvalidDeclaration: a tool declaration does not decode or validate.
	InvalidDeclaration = newKind(Policy, "InvalidDeclaration", "invalid tool declaration")
	// ArtifactRefused: a tool's files, module or command are refused.
	ArtifactRefused = newKind(Policy, "ArtifactRefused", "tool artifact refused")
	// InputRefused: a run's input does not match the tool's input_schema.
	InputRefused = newKind(Policy, "InputRefused", "tool input refused")
	// ImportRefused: a module imports what its grant does not serve.
	ImportRefused = newKind(Policy, "ImportRefused", "import not served")
	// UntrustedState: state cordon keeps (a grant in the registry, the
	// key store, the code cache) is not authentic, or not where it must
	// be.
	UntrustedState = newKind(Policy, "UntrustedState", "untrusted state")
	// WorkspaceRefused: the directory cannot be a workspace (it contains
	// cordon's trusted state, or is a system directory).
	WorkspaceRefused = newKind(Policy, "WorkspaceRefused", "workspace refused")
	// NotARoot: the directory is not a disposable root cordon made (no
	// record of it, or a record of another directory).
	NotARoot = newKind(Policy, "NotARoot", "not a disposable root")
	// OriginChanged: applying a root would overwrite what changed in its
	// origin since the root was made.
	OriginChanged = newKind(Policy, "OriginChanged", "the origin changed since the root was made")
	// AutonomyRefused: a precondition of the autonomy level asked for
	// does not hold; nothing ran.
	AutonomyRefused = newKind(Policy, "AutonomyRefused", "autonomy preconditions not met")

	// SandboxUnavailable: the substrate cannot create a sandbox on this
	// host. Nothing ran.
	SandboxUnavailable = newKind(CannotRun, "SandboxUnavailable", "sandbox unavailable")
	// SandboxSetup: the substrate works here but could not set up this
	// sandbox. Nothing ran.
	SandboxSetup = newKind(CannotRun, "SandboxSetup", "the sandbox could not be set up")
	// InvalidPolicy: a sandbox policy or run specification is malformed.
	InvalidPolicy = newKind(CannotRun, "InvalidPolicy", "invalid sandbox policy")
	// InvalidModule: a WebAssembly module cordon cannot run.
	InvalidModule = newKind(CannotRun, "InvalidModule", "invalid module")

	// UsageError: a malformed command line.
	UsageError = newKind(Usage, "Usage", "usage error")

	// NotFound and the kinds below are ordinary failures.
	NotFound     = newKind(Failure, "NotFound", "not found")
	NotRegular   = newKind(Failure, "NotRegular", "not a regular file")
	IsDirectory  = newKind(Failure, "IsDirectory", "is a directory")
	NotDirectory = newKind(Failure, "NotDirectory", "not a directory")
	TooLarge     = newKind(Failure, "TooLarge", "too large")
	NoMatch      = newKind(Failure, "NoMatch", "old text not found")
	NotUnique    = newKind(Failure, "NotUnique", "old text is not unique")
	Invalid      = newKind(Failure, "Invalid", "invalid argument")
	Exists       = newKind(Failure, "Exists", "already exists")
	UnknownTool  = newKind(Failure, "UnknownTool", "no such tool")
	Registry     = newKind(Failure, "RegistryError", "tool registry error")
	Canceled     = newKind(Failure, "Canceled", "canceled")
	// Other is the kind of an error that carries none of the others.
	Other = newKind(Failure, "Error", "error")
)

// Kinds returns every kind, in the order above.
func Kinds() []*Kind { return slices.Clone(kinds) }

// Of returns the first [*Kind] in err's tree, or nil.
func Of(err error) *Kind {
	var k *Kind
	if errors.As(err, &k) {
		return k
	}
	return nil
}

// KindOf returns the kind of err: [Of], or [Other] when err carries none.
func KindOf(err error) *Kind {
	if k := Of(err); k != nil {
		return k
	}
	return Other
}

// ExitCode is the exit code of err: 0 for nil, the kind's exit code
// otherwise (1 for an error without a kind).
func ExitCode(err error) int {
	if err == nil {
		return 0
	}
	return KindOf(err).ExitCode()
}

// Errorf returns an error of kind k with a message: fmt.Errorf's format
// and arguments, where %w may wrap a cause. The result matches k with
// [errors.Is] and prints only the message.
func Errorf(k *Kind, format string, args ...any) error {
	return &kindError{kind: k, err: fmt.Errorf(format, args...)}
}

type kindError struct {
	kind *Kind
	err  error
}

func (e *kindError) Error() string   { return e.err.Error() }
func (e *kindError) Unwrap() []error { return []error{e.kind, e.err} }
