package probes

import (
	"os"
	"testing"

	"github.com/cordon-run/cordon/internal/testenv"
)

// TestMain keeps the probes' runs and changes, which record themselves in
// the default state directory's registry of runs when a test gives no
// harness, out of the real one.
func TestMain(m *testing.M) {
	done := testenv.PrivateXDG()
	code := m.Run()
	done()
	os.Exit(code)
}
