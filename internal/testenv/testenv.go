// Package testenv holds helpers for cordon's tests: what to do when a kernel
// feature or system package a test needs is missing, the harness
// configuration tests run under, and processes tests start and find.
package testenv

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cordon-run/cordon/harness"
)

// InCI reports whether the tests run in CI (CI=true), where a missing
// feature or package is a failure, not a reason to skip.
func InCI() bool { return os.Getenv("CI") == "true" }

// Require stops the test when ok is false: it fails in CI, where .ci/run
// installs everything the tests need, and skips with the reason elsewhere.
func Require(t testing.TB, ok bool, format string, args ...any) {
	t.Helper()
	if ok {
		return
	}
	if InCI() {
		t.Fatalf("missing in CI: "+format, args...)
	}
	t.Skipf("skipping: "+format, args...)
}

// Harness returns the default harness configuration with the per-user
// state and cache directories in temporary directories of the test, so
// that no test writes cordon's real key store or cache.
func Harness(t testing.TB) harness.Config {
	t.Helper()
	dir := t.TempDir()
	return harness.Default().WithStateDir(filepath.Join(dir, "state")).WithCacheDir(filepath.Join(dir, "cache")).WithRootsDir(filepath.Join(dir, "roots"))
}

// IsolateHarness points the CLI's harness configuration (CORDON_STATE_DIR,
// CORDON_CACHE_DIR) at temporary directories for the rest of the test and
// returns the configuration.
func IsolateHarness(t *testing.T) harness.Config {
	t.Helper()
	h := Harness(t)
	t.Setenv(harness.EnvStateDir, h.StateDir())
	t.Setenv(harness.EnvCacheDir, h.CacheDir())
	t.Setenv(harness.EnvRootsDir, h.RootsDir())
	t.Setenv(harness.EnvConfig, "")
	return h
}

// Main runs a package's tests (from TestMain) with *h set to the default
// harness configuration whose per-user state and cache directories are in
// one temporary directory of the test binary, removed afterwards, runs
// cleanups (what the tests left in temporary directories of their own),
// and exits with their status.
func Main(m *testing.M, h *harness.Config, cleanups ...func()) {
	dir, err := os.MkdirTemp("", "cordon-test-")
	if err != nil {
		panic(err)
	}
	*h = harness.Default().WithStateDir(filepath.Join(dir, "state")).WithCacheDir(filepath.Join(dir, "cache")).WithRootsDir(filepath.Join(dir, "roots"))
	code := m.Run()
	os.RemoveAll(dir)
	for _, c := range cleanups {
		c()
	}
	os.Exit(code)
}

// OtherUser returns a uid and gid that are not the test's (nobody's,
// 65534), to give a file to another user; it skips unless the test runs
// as root, which alone may.
func OtherUser(t testing.TB) (uid, gid int) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("skipping: giving a file to another user needs root")
	}
	return 65534, 65534
}

// PrivateXDG points the per-user directories of harness.Default in this
// test binary ($XDG_STATE_HOME, $XDG_CACHE_HOME, $XDG_DATA_HOME) at a
// temporary directory, for a package whose tests use the default
// configuration, and returns the directory's removal: no test writes the
// real ones (a file tool's change records itself in the state directory's
// registry of runs, making it).
func PrivateXDG() func() {
	dir, err := os.MkdirTemp("", "cordon-xdg-")
	if err != nil {
		panic(err)
	}
	for _, env := range []string{"XDG_STATE_HOME", "XDG_CACHE_HOME", "XDG_DATA_HOME"} {
		os.Setenv(env, filepath.Join(dir, strings.ToLower(strings.TrimSuffix(strings.TrimPrefix(env, "XDG_"), "_HOME"))))
	}
	return func() { os.RemoveAll(dir) }
}

// MainPrivateXDG runs a package's tests (from TestMain) with
// [PrivateXDG], and exits with their status.
func MainPrivateXDG(m *testing.M) {
	done := PrivateXDG()
	code := m.Run()
	done()
	os.Exit(code)
}
