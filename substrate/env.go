package substrate

import (
	"path/filepath"
	"slices"
	"strings"

	"github.com/cordon-run/cordon/capabilities"
	"github.com/cordon-run/cordon/refusal"
)

// SystemPath is the PATH of a tool that may run system programs only, and
// the rest of every PATH when the caller's environment has none.
const SystemPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// ErrEnvRefused is the kind of a variable that may not be passed in.
var ErrEnvRefused = refusal.EnvRefused

// EnvError refuses one environment variable.
type EnvError struct {
	Name   string
	Reason string
}

func (e *EnvError) Error() string {
	return "refusing to pass " + e.Name + " into the sandbox — " + e.Reason
}

// Unwrap returns [ErrEnvRefused].
func (e *EnvError) Unwrap() error { return ErrEnvRefused }

// CheckEnvName refuses, with an [*EnvError], a name that is not a valid
// variable name, that changes how programs load or run (LD_*, BASH_ENV,
// GIT_*, ...; [capabilities.EnvHazard]) or that the sandbox sets itself
// (PATH, HOME).
func CheckEnvName(name string) error {
	if !validEnvName(name) {
		return &EnvError{Name: name, Reason: "not a valid environment variable name"}
	}
	if why := capabilities.EnvHazard(name); why != "" {
		return &EnvError{Name: name, Reason: why}
	}
	return nil
}

// ValidEnvName reports whether name is a variable's name: letters,
// digits and underscores, not led by a digit.
func ValidEnvName(name string) bool { return validEnvName(name) }

func validEnvName(name string) bool {
	if name == "" {
		return false
	}
	for i, c := range name {
		switch {
		case c == '_', c >= 'A' && c <= 'Z', c >= 'a' && c <= 'z':
		case c >= '0' && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

// Environment builds the allow-listed environment of a command from the
// caller's environ: PATH (the directories lead, then — unless
// systemOnly — the absolute entries of the caller's PATH, or
// [SystemPath]), HOME=home when home is set, then LANG, TERM and the
// granted names the caller has set. Nothing else passes.
func Environment(environ []string, lead []string, systemOnly bool, home string, names []string) []string {
	path := slices.Clone(lead)
	if systemOnly {
		path = filepath.SplitList(SystemPath)
	} else if v, ok := LookupEnv(environ, "PATH"); ok {
		for _, d := range filepath.SplitList(v) {
			if filepath.IsAbs(d) && !slices.Contains(path, d) {
				path = append(path, d)
			}
		}
	}
	if len(path) == len(lead) && !systemOnly {
		path = append(path, filepath.SplitList(SystemPath)...)
	}
	env := []string{"PATH=" + strings.Join(path, string(filepath.ListSeparator))}
	if home != "" {
		env = append(env, "HOME="+home)
	}
	seen := map[string]bool{}
	for _, n := range append([]string{"LANG", "TERM"}, names...) {
		if seen[n] {
			continue
		}
		seen[n] = true
		if v, ok := LookupEnv(environ, n); ok {
			env = append(env, n+"="+v)
		}
	}
	return env
}

// LookupEnv returns the last value of name in environ, as the C library
// and os/exec read an environment.
func LookupEnv(environ []string, name string) (string, bool) {
	for i := len(environ) - 1; i >= 0; i-- {
		if k, v, ok := strings.Cut(environ[i], "="); ok && k == name {
			return v, true
		}
	}
	return "", false
}
