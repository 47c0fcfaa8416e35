package bwrap

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cordon-run/cordon/internal/testenv"
)

// TestTrustedProgramUnderABind: a workspace that is a directory above the
// program under another path (a bind mount of it: of /usr, of /) is
// refused as the workspace's own path would be, by the whole check and
// by a check that remembers the program passed before.
func TestTrustedProgramUnderABind(t *testing.T) {
	h := testenv.Harness(t)
	dir, err := os.MkdirTemp("/var/tmp", "cordon-trusted-")
	testenv.Require(t, err == nil, "a directory in /var/tmp: %v", err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	top := filepath.Join(dir, "usr")
	bin := filepath.Join(top, "bin", "bwrap")
	os.MkdirAll(filepath.Dir(bin), 0o755)
	os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755)
	defer func(was time.Duration) { settleFor = was }(settleFor)
	settleFor = 0 // remembered at once: the second check of each pair goes by what the first saw
	for _, above := range []string{top, filepath.Dir(bin)} {
		alias := t.TempDir()
		testenv.WithBind(t, above, alias, func() {
			for _, first := range []string{alias, ""} {
				checkedPrograms.Clear()
				trustedProgram(bin, first, h)
				_, err := trustedProgram(bin, alias, h)
				if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "under another path") {
					t.Errorf("the workspace %s, a bind of %s above the program (checked after one with workspace %q): %v; want ErrUnavailable naming the bind",
						alias, above, first, err)
				}
			}
			// The bind's own directories are not the program's.
			other := t.TempDir()
			if _, err := trustedProgram(bin, other, h); err != nil {
				t.Errorf("a workspace beside the bind: %v", err)
			}
		})
	}
}

// TestTrustedProgramThroughAMount: a workspace that lets a sandboxed
// command write a directory above the program through a mount is refused
// — a bind of that directory inside the workspace (bwrap binds the
// workspace with every mount below it), or the program's own path through
// a bind of a directory of the workspace — by the whole check, and by a
// check that remembers the program, also when the mount comes after the
// workspace was found to expose nothing.
func TestTrustedProgramThroughAMount(t *testing.T) {
	h := testenv.Harness(t)
	dir, err := os.MkdirTemp("/var/tmp", "cordon-trusted-")
	testenv.Require(t, err == nil, "a directory in /var/tmp: %v", err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	top := filepath.Join(dir, "usr")
	bin := filepath.Join(top, "bin", "bwrap")
	os.MkdirAll(filepath.Dir(bin), 0o755)
	os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755)
	defer func(was time.Duration) { settleFor = was }(settleFor)
	settleFor = 0 // remembered at once
	refused := func(what, prog, ws, why string) {
		t.Helper()
		_, err := trustedProgram(prog, ws, h)
		if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), why) {
			t.Errorf("%s: %v; want ErrUnavailable: %s", what, err, why)
		}
	}

	// A bind of the program's directory, or of one above it, inside the
	// workspace.
	for _, above := range []string{top, filepath.Dir(bin)} {
		ws := t.TempDir()
		inside := filepath.Join(ws, "tools")
		os.Mkdir(inside, 0o755)
		testenv.WithBind(t, above, inside, func() {
			for _, first := range []string{ws, ""} {
				checkedPrograms.Clear()
				trustedProgram(bin, first, h)
				refused("a bind of "+above+" inside the workspace (after a check with workspace "+first+")", bin, ws, "a mount inside the workspace")
			}
		})
	}

	// The program reached through a bind of a directory of the workspace.
	ws := t.TempDir()
	tools := filepath.Join(ws, "tools", "bin")
	os.MkdirAll(tools, 0o755)
	os.WriteFile(filepath.Join(tools, "bwrap"), []byte("#!/bin/sh\n"), 0o755)
	alias := filepath.Join(dir, "opt")
	os.Mkdir(alias, 0o755)
	testenv.WithBind(t, filepath.Join(ws, "tools"), alias, func() {
		prog := filepath.Join(alias, "bin", "bwrap")
		for _, first := range []string{ws, ""} {
			checkedPrograms.Clear()
			trustedProgram(prog, first, h)
			refused("the program through a bind of a directory of the workspace (after a check with workspace "+first+")", prog, ws, "under another path")
		}
	})

	// A workspace found to expose nothing, then a mount inside it.
	later := t.TempDir()
	inside := filepath.Join(later, "tools")
	os.Mkdir(inside, 0o755)
	testenv.WithBind(t, later, later, func() { // a mount namespace of this thread
		checkedPrograms.Clear()
		full := 0
		fullCheckHook = func() { full++ }
		defer func() { fullCheckHook = nil }()
		for range 2 {
			if _, err := trustedProgram(bin, later, h); err != nil {
				t.Errorf("a workspace beside the program: %v", err)
			}
		}
		if full != 1 {
			t.Errorf("%d whole checks of a workspace checked twice; want one (the second remembered)", full)
		}
		if err := unix.Mount(top, inside, "", unix.MS_BIND, ""); err != nil {
			t.Errorf("bind mount: %v", err)
			return
		}
		refused("a bind of "+top+" made inside the workspace after it was checked", bin, later, "a mount inside the workspace")
	})
}
