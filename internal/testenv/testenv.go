// Package testenv holds helpers for cordon's tests: what to do when a kernel
// feature or system package a test needs is missing, and how to run a piece
// of a test in a re-executed copy of the test binary.
package testenv

import (
	"os"
	"testing"
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
