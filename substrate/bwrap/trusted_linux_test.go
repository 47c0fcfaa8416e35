package bwrap

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cordon-run/cordon/harness"
	"github.com/cordon-run/cordon/internal/mountinfo"
	"github.com/cordon-run/cordon/internal/testenv"
	"github.com/cordon-run/cordon/refusal"
	"github.com/cordon-run/cordon/substrate"
)

// usrProgram makes dir/usr/bin/bwrap, a program in a directory of
// /var/tmp (a file system whose change times this machine sets), removed
// when the test ends, and returns dir, dir/usr and the program.
func usrProgram(t *testing.T) (dir, top, bin string) {
	t.Helper()
	dir, err := os.MkdirTemp("/var/tmp", "cordon-trusted-")
	testenv.Require(t, err == nil, "a directory in /var/tmp: %v", err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	top = filepath.Join(dir, "usr")
	bin = filepath.Join(top, "bin", "bwrap")
	os.MkdirAll(filepath.Dir(bin), 0o755)
	os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755)
	return dir, top, bin
}

// bwrapCopy copies this machine's bwrap to dir/bin/bwrap, dir a directory
// of /var/tmp removed when the test ends, and returns dir, the copy and
// its content.
func bwrapCopy(t *testing.T) (dir, bin string, data []byte) {
	t.Helper()
	real, err := Find(os.Getenv("PATH"))
	if err != nil {
		t.Fatal(err)
	}
	if data, err = os.ReadFile(real); err != nil {
		t.Fatal(err)
	}
	dir, _, _ = usrProgram(t)
	bin = filepath.Join(dir, "bin", "bwrap")
	os.MkdirAll(filepath.Dir(bin), 0o755)
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir, bin, data
}

// TestTrustedProgramUnderABind: a workspace that is a directory above the
// program under another path (a bind mount of it: of /usr, of /) is
// refused as the workspace's own path would be, by the whole check and
// by a check that remembers the program passed before.
func TestTrustedProgramUnderABind(t *testing.T) {
	h := testenv.Harness(t)
	_, top, bin := usrProgram(t)
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
// command write a directory above the program through a mount — a bind of
// that directory inside the workspace (bwrap binds the workspace with
// every mount below it), or the program's own path through a bind of a
// directory of the workspace, or a bind of the program itself — is
// refused, also when the mount came into the workspace by a rename after
// a run found it clean.
func TestTrustedProgramThroughAMount(t *testing.T) {
	h := testenv.Harness(t)
	dir, top, bin := usrProgram(t)
	refused := func(what, prog, ws, why string) {
		t.Helper()
		_, err := TrustedProgram(prog, ws, h)
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
			refused("a bind of "+above+" inside the workspace", bin, ws, "a mount inside the workspace")
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
		refused("the program through a bind of a directory of the workspace", filepath.Join(alias, "bin", "bwrap"), ws, "under another path")
	})

	// A bind of the program itself inside the workspace.
	fileWS := t.TempDir()
	f := filepath.Join(fileWS, "f")
	os.WriteFile(f, nil, 0o644)
	testenv.WithBind(t, bin, f, func() {
		refused("a bind of the program inside the workspace", bin, fileWS, "it is writable in the sandbox through")
	})

	// A workspace found to expose nothing, then a mount inside it: asked
	// anew (a directory holding a mount, renamed into the workspace,
	// moves the mount with no event of the namespace).
	later := t.TempDir()
	inside := filepath.Join(later, "tools")
	os.Mkdir(inside, 0o755)
	spare, point := t.TempDir(), t.TempDir()
	testenv.WithBind(t, spare, point, func() { // a mount namespace of this thread
		if _, err := exposes(bin, later); err != nil {
			t.Errorf("a workspace beside the program: %v", err)
		}
		held := filepath.Join(t.TempDir(), "held")
		os.Mkdir(held, 0o755)
		if err := unix.Mount(top, held, "", unix.MS_BIND, ""); err != nil {
			t.Errorf("bind mount: %v", err)
			return
		}
		if _, err := exposes(bin, later); err != nil {
			t.Errorf("a workspace beside a bind of the program's directory: %v", err)
		}
		if err := os.Rename(filepath.Dir(held), filepath.Join(later, "moved")); err != nil {
			t.Errorf("rename a directory holding the bind into the workspace: %v", err)
			return
		}
		if _, err := exposes(bin, later); !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "a mount inside the workspace") {
			t.Errorf("a bind of %s renamed into the workspace after it was asked about: %v", top, err)
		}
	})
}

// TestARunDoesNotStartWhereTheWorkspaceExposesBwrap: a run whose
// workspace holds a bind of bwrap's directory is refused before its
// sandbox is released — its command never runs — and says why.
func TestARunDoesNotStartWhereTheWorkspaceExposesBwrap(t *testing.T) {
	needBwrap(t)
	if !testenv.PrivateMounts(t) {
		return
	}
	dir, bin, data := bwrapCopy(t)
	ws := tempWorkspace(t)
	tools := filepath.Join(ws, "tools")
	os.Mkdir(tools, 0o755)
	if err := unix.Mount(dir, tools, "", unix.MS_BIND, ""); err != nil {
		t.Fatalf("bind mount: %v", err)
	}
	t.Cleanup(func() { unix.Unmount(tools, unix.MNT_DETACH) })
	marker := filepath.Join(t.TempDir(), "ran")
	_, err := Run(context.Background(), Spec{Policy: newPolicy(ws), Bwrap: bin, Command: []string{"touch", marker}, Timeout: 10 * time.Second})
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "a mount inside the workspace") {
		t.Errorf("Run = %v; want ErrUnavailable naming the mount inside the workspace", err)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Errorf("the command ran")
	}
	if after, _ := os.ReadFile(bin); string(after) != string(data) {
		t.Errorf("bwrap changed")
	}
}

// TestAMountThatExposesBwrapDuringARunDistrustsIt: a bind of bwrap's
// directory the host mounts inside the workspace while a run goes on
// reaches the sandbox (its mounts are slaves of the host's, and the
// workspace here is a shared mount, as / is on a systemd host) — after the
// watch's first look, or between the release's check and that look. The
// watch stops the run, but its command may have written bwrap first:
// bwrap is not trusted again until the file that says why is removed.
func TestAMountThatExposesBwrapDuringARunDistrustsIt(t *testing.T) {
	for _, tc := range []struct {
		name, note string
		early      bool
	}{
		{"after the first look", "came into its sandbox", false},
		{"before the first look", "its first look found", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			needBwrap(t)
			if !testenv.PrivateMounts(t) {
				return
			}
			_, bin, _ := bwrapCopy(t)
			ws := tempWorkspace(t)
			for _, m := range []struct {
				flags uintptr
				src   string
			}{{unix.MS_BIND, ws}, {unix.MS_SHARED, ""}} {
				if err := unix.Mount(m.src, ws, "", m.flags, ""); err != nil {
					t.Fatalf("make the workspace a shared mount: %v", err)
				}
			}
			t.Cleanup(func() { unix.Unmount(ws, unix.MNT_DETACH) })
			late := filepath.Join(ws, "late")
			os.Mkdir(late, 0o755)
			mount := func() {
				if err := unix.Mount(filepath.Dir(bin), late, "", unix.MS_BIND, ""); err != nil {
					t.Errorf("bind mount: %v", err)
				}
			}
			defer unix.Unmount(late, unix.MNT_DETACH)
			var reads atomic.Int64
			tableReadHook = func() { reads.Add(1) }
			defer func() { tableReadHook = nil }()
			if tc.early {
				releaseHook = func(released bool) {
					if released {
						mount()
					}
				}
				defer func() { releaseHook = nil }()
			}
			done := make(chan substrate.Outcome, 1)
			go func() {
				o, err := Run(context.Background(), Spec{Policy: newPolicy(ws), Bwrap: bin, Command: []string{"sleep", "10"}, Timeout: 20 * time.Second})
				if err != nil {
					t.Error(err)
				}
				done <- o
			}()
			if !tc.early {
				firstLook(t, &reads, 0)
				mount()
			}
			file := distrustFile(bin, testHarness)
			defer os.Remove(file)
			select {
			case o := <-done:
				notes := strings.Join(o.Notes, " ")
				if o.ExitCode != 137 || !strings.Contains(notes, "came "+late) || !strings.Contains(notes, tc.note) || !strings.Contains(notes, file) {
					t.Errorf("the run = exit %d, notes %q; want it stopped, naming the mount that came and the file that distrusts bwrap", o.ExitCode, o.Notes)
				}
			case <-time.After(15 * time.Second):
				t.Fatal("the run went on with a writable bind of bwrap's directory in its workspace")
			}
			_, err := trustedProgram(bin, t.TempDir(), testHarness)
			if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "its command may have written it") || !strings.Contains(err.Error(), file) {
				t.Errorf("bwrap after a run its directory was exposed to: %v; want it refused, naming %s", err, file)
			}
			unix.Unmount(late, unix.MNT_DETACH)
			os.Remove(file)
			if _, err := trustedProgram(bin, t.TempDir(), testHarness); err != nil {
				t.Errorf("bwrap once the file is removed: %v", err)
			}
		})
	}
}

// TestOwnInsideTheWorkspaceWhereTheKernelCannotTellMounts: on a kernel
// that cannot tell a path's mount (before 5.8; the mount table's reader
// replaced to say so), cordon's own that lies inside the workspace by its
// path — its state directory, or its configuration reached through a
// link into a repository of dotfiles — is still refused; what a mount
// alone would expose passes there (docs/sandbox.md).
func TestOwnInsideTheWorkspaceWhereTheKernelCannotTellMounts(t *testing.T) {
	defer func(was func() (*mountinfo.Table, error)) { readMounts = was }(readMounts)
	readMounts = func() (*mountinfo.Table, error) { return nil, mountinfo.ErrUnsupported }
	ws, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	outside := t.TempDir()
	os.MkdirAll(filepath.Join(ws, "dots"), 0o755)
	os.WriteFile(filepath.Join(ws, "dots", "cordon.json"), []byte("{}"), 0o644)
	link := filepath.Join(outside, "cordon.json")
	if err := os.Symlink(filepath.Join(ws, "dots", "cordon.json"), link); err != nil {
		t.Fatal(err)
	}
	fromEnv := func(env map[string]string) harness.Config {
		t.Helper()
		h, _, err := harness.FromEnv(func(k string) string { return env[k] })
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	away := map[string]string{harness.EnvStateDir: filepath.Join(outside, "state"), harness.EnvCacheDir: filepath.Join(outside, "cache")}
	for _, tc := range []struct {
		name string
		h    harness.Config
		want string
	}{
		{"the state directory inside the workspace", harness.Default().WithStateDir(filepath.Join(ws, "state")).WithCacheDir(filepath.Join(outside, "cache")), "cordon's state or cache"},
		{"the configuration through a link into the workspace", fromEnv(map[string]string{harness.EnvConfig: link, harness.EnvStateDir: away[harness.EnvStateDir], harness.EnvCacheDir: away[harness.EnvCacheDir]}), "the configuration cordon reads"},
	} {
		for _, binaries := range []bool{false, true} {
			err := OwnExposure("the file tools", ws, tc.h, binaries)
			if !errors.Is(err, refusal.WorkspaceRefused) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "inside the workspace") {
				t.Errorf("%s (binaries %v): %v; want a WorkspaceRefused naming %s inside the workspace", tc.name, binaries, err, tc.want)
			}
		}
	}
	if err := OwnExposure("the file tools", ws, fromEnv(away), true); err != nil {
		t.Errorf("nothing of cordon's own in the workspace: %v", err)
	}
}
