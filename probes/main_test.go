package probes

import (
	"testing"

	"github.com/cordon-run/cordon/internal/testenv"
)

// TestMain keeps the probes' runs and changes, which record themselves in
// the default state directory's registry of runs when a test gives no
// harness, out of the real one.
func TestMain(m *testing.M) { testenv.MainPrivateXDG(m) }
