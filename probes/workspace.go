package probes

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/cordon-run/cordon/refusal"
	"github.com/cordon-run/cordon/substrate/workspace"
)

// The file guard's mechanisms, as the probes name them. Package workspace
// names none of its own: these are the two boundaries its documentation and
// the README's table state (refused with OutsideWorkspace, refused with
// HarnessState).
const (
	// wsMechBeneath: every path resolved beneath the canonical workspace
	// (openat2 RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS), symlinks followed by
	// the guard only while they stay inside.
	wsMechBeneath = "workspace/resolve-beneath"
	// wsMechHarness: harness state refused by every spelling that reaches
	// it (a symlink, "..").
	wsMechHarness = "workspace/harness-state-refused"
)

func init() {
	register(
		Probe{
			Name:       "workspace/symlink-escape",
			Substrate:  "workspace",
			Mechanisms: []string{wsMechBeneath},
			Expected:   "through a symlink to a directory outside the workspace, a read and a write are refused (OutsideWorkspace) and the outside directory is unchanged",
			run:        wsSymlinkEscapeRun(wsGuard),
		},
		Probe{
			Name:       "workspace/harness-alias",
			Substrate:  "workspace",
			Mechanisms: []string{wsMechHarness},
			Expected:   "reads and writes of harness state through a symlink to it, a symlink to the workspace and a \"..\" are refused (HarnessState) and harness state is unchanged",
			run:        wsHarnessAliasRun(wsGuard),
		},
	)
}

// wsFiles is the part of the guard the probes use: the tests put an
// unguarded one in its place to show that the probes fail without it.
type wsFiles interface {
	ReadFile(name string) ([]byte, error)
	WriteFile(name string, data []byte) error
	Close() error
}

// wsOpener opens the workspace directory dir of a probe.
type wsOpener func(dir string, e *Env) (wsFiles, error)

// wsGuard opens dir through the guard with the probe's harness
// configuration, as the file tools do.
func wsGuard(dir string, e *Env) (wsFiles, error) {
	ws, err := workspace.Open(dir, workspace.WithHarness(e.Harness))
	if err != nil {
		return nil, err
	}
	return ws, nil
}

// wsAttempt is one operation a probe tries through the guard.
type wsAttempt struct {
	write bool
	path  string
}

func (a wsAttempt) String() string {
	if a.write {
		return "write " + a.path
	}
	return "read " + a.path
}

// wsTry runs the attempts through the guard and reports each one's
// outcome, and whether every one was refused with want.
func wsTry(ws wsFiles, want *refusal.Kind, attempts ...wsAttempt) (string, bool) {
	var parts []string
	ok := true
	for _, a := range attempts {
		var err error
		if a.write {
			err = ws.WriteFile(a.path, []byte("probe\n"))
		} else {
			_, err = ws.ReadFile(a.path)
		}
		var got string
		switch {
		case err == nil && a.write:
			got = "written"
		case err == nil:
			got = "read"
		default:
			got = refusal.KindOf(err).Name()
		}
		parts = append(parts, a.String()+": "+got)
		ok = ok && errors.Is(err, want)
	}
	return strings.Join(parts, "; "), ok
}

// wsSnapshot returns the names and contents of the files in dir, which
// holds files only.
func wsSnapshot(dir string) (map[string][]byte, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	out := map[string][]byte{}
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		out[e.Name()] = data
	}
	return out, nil
}

func wsSameFiles(a, b map[string][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for name, data := range a {
		if other, ok := b[name]; !ok || !bytes.Equal(data, other) {
			return false
		}
	}
	return true
}

func wsNames(m map[string][]byte) string {
	var names []string
	for name := range m {
		names = append(names, name)
	}
	slices.Sort(names)
	return strings.Join(names, ",")
}

// wsSymlinkEscapeRun builds the workspace ws with ws/link -> outside (an
// absolute symlink to a sibling directory holding secret), then reads
// link/secret and writes link/new through the workspace open opens.
func wsSymlinkEscapeRun(open wsOpener) func(context.Context, *Env) (string, bool, error) {
	return func(ctx context.Context, e *Env) (string, bool, error) {
		dir, outside := filepath.Join(e.Dir, "ws"), filepath.Join(e.Dir, "outside")
		for _, d := range []string{dir, outside} {
			if err := os.Mkdir(d, 0o700); err != nil {
				return "", false, err
			}
		}
		if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("secret\n"), 0o600); err != nil {
			return "", false, err
		}
		if err := os.Symlink(outside, filepath.Join(dir, "link")); err != nil {
			return "", false, err
		}
		before, err := wsSnapshot(outside)
		if err != nil {
			return "", false, err
		}
		ws, err := open(dir, e)
		if err != nil {
			return "", false, err
		}
		defer ws.Close()
		observed, ok := wsTry(ws, refusal.OutsideWorkspace,
			wsAttempt{path: "link/secret"}, wsAttempt{write: true, path: "link/new"})
		after, err := wsSnapshot(outside)
		if err != nil {
			return "", false, err
		}
		if !wsSameFiles(before, after) {
			return observed + "; outside dir changed (now " + wsNames(after) + ")", false, nil
		}
		return observed + "; outside dir unchanged", ok, nil
	}
}

// wsHarnessAliasRun builds a workspace whose harness state directory (the
// first of the harness configuration's) holds x, with the symlinks
// alias -> <state> and sub/root -> .., and tries to read and write harness
// state through them and through "./sub/../<state>", in the workspace open
// opens.
func wsHarnessAliasRun(open wsOpener) func(context.Context, *Env) (string, bool, error) {
	return func(ctx context.Context, e *Env) (string, bool, error) {
		names := e.Harness.State()
		if len(names) == 0 {
			return "", false, errors.New("the harness configuration names no harness state")
		}
		name := names[0]
		dir := filepath.Join(e.Dir, "ws")
		state := filepath.Join(dir, name)
		for _, d := range []string{dir, state, filepath.Join(dir, "sub")} {
			if err := os.Mkdir(d, 0o700); err != nil {
				return "", false, err
			}
		}
		if err := os.WriteFile(filepath.Join(state, "x"), []byte("harness\n"), 0o600); err != nil {
			return "", false, err
		}
		for link, target := range map[string]string{"alias": name, "sub/root": ".."} {
			if err := os.Symlink(target, filepath.Join(dir, link)); err != nil {
				return "", false, err
			}
		}
		before, err := wsSnapshot(state)
		if err != nil {
			return "", false, err
		}
		ws, err := open(dir, e)
		if err != nil {
			return "", false, err
		}
		defer ws.Close()
		observed, ok := wsTry(ws, refusal.HarnessState,
			wsAttempt{path: "alias/x"},
			wsAttempt{write: true, path: "alias/y"},
			wsAttempt{path: "sub/root/" + name + "/x"},
			wsAttempt{write: true, path: "./sub/../" + name + "/y"},
		)
		after, err := wsSnapshot(state)
		if err != nil {
			return "", false, err
		}
		if !wsSameFiles(before, after) {
			return fmt.Sprintf("%s; %s changed (now %s)", observed, name, wsNames(after)), false, nil
		}
		return fmt.Sprintf("%s; %s unchanged", observed, name), ok, nil
	}
}
