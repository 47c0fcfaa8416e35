package workspace

import (
	"testing"

	"github.com/cordon-run/cordon/internal/testenv"
)

// TestMain keeps the tests' changes, which record themselves in the
// default state directory's registry of runs, out of the real one.
func TestMain(m *testing.M) { testenv.MainPrivateXDG(m) }
