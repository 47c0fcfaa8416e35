package substrate

import (
	"fmt"
	"strings"
	"time"
)

// Outcome is what happened to one run on a substrate: how it ended and
// what it printed, bounded.
type Outcome struct {
	// ExitCode is the exit status; 124 when the deadline ended the run,
	// 126 not executable, 127 not found, 128+N killed by signal N.
	ExitCode int
	// Signal names the signal that ended the run ("SIGKILL") when cordon
	// sent it or saw it directly, or "".
	Signal string
	// TimedOut reports that the deadline ended the run.
	TimedOut bool
	// Canceled reports that the caller's context ended the run.
	Canceled bool
	// Stdout and Stderr are the kept head and tail of each stream, with a
	// line saying how many bytes were dropped in between when clipped.
	Stdout, Stderr string
	// StdoutBytes and StderrBytes count every byte written.
	StdoutBytes, StderrBytes int64
	// StdoutClipped and StderrClipped report that bytes were dropped.
	StdoutClipped, StderrClipped bool
	// Duration is the wall-clock time of the run.
	Duration time.Duration
	// Pooled reports that the run took a sandbox made ahead of the call
	// (a resident server's pool), exactly the one a new run would make.
	Pooled bool
	// Notes say what cordon did to the workspace after the run to keep
	// the host safe (a repository moved out of git's way), one line each.
	Notes []string
}

// String summarizes the outcome in one line.
func (o Outcome) String() string {
	var b strings.Builder
	switch {
	case o.TimedOut:
		fmt.Fprintf(&b, "timed out (%s)", o.Signal)
	case o.Canceled:
		fmt.Fprintf(&b, "canceled (%s)", o.Signal)
	case o.Signal != "":
		fmt.Fprintf(&b, "killed by %s", o.Signal)
	default:
		fmt.Fprintf(&b, "exit %d", o.ExitCode)
	}
	fmt.Fprintf(&b, " after %v; stdout %d bytes", o.Duration.Round(time.Millisecond), o.StdoutBytes)
	if o.StdoutClipped {
		b.WriteString(" (clipped)")
	}
	fmt.Fprintf(&b, ", stderr %d bytes", o.StderrBytes)
	if o.StderrClipped {
		b.WriteString(" (clipped)")
	}
	return b.String()
}

// LogLine is one line a WebAssembly module logged through cordon/log. (The
// type lives here, below the wasm substrate, so that a result can carry it
// in a program built without that substrate.)
type LogLine struct {
	Level   string `json:"level"`
	Message string `json:"message"`
}

// Refusal is one operation of a WebAssembly module that the boundary
// refused.
type Refusal struct {
	Error   string `json:"error"`
	Op      string `json:"op"`
	Path    string `json:"path,omitempty"`
	Message string `json:"message"`
}
