package bwrap

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"

	"github.com/cordon-run/cordon/harness"
)

// TestAWorkspaceOfThePathKeyedRegistryIsStillOne: a directory that was a
// workspace when the registry named workspaces by their path (the state
// directory has runs/<sha256(path)>) is still one to WithinAWorkspace and
// trustedProgram: a bwrap a sandboxed command left in it is not trusted.
func TestAWorkspaceOfThePathKeyedRegistryIsStillOne(t *testing.T) {
	top, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	state, ws := filepath.Join(top, "state"), filepath.Join(top, "proj")
	if err := os.MkdirAll(filepath.Join(ws, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte(ws))
	if err := os.MkdirAll(filepath.Join(state, "runs", hex.EncodeToString(sum[:16])), 0o700); err != nil {
		t.Fatal(err)
	}
	h := harness.Default().WithStateDir(state).WithState()
	if d, ok := WithinAWorkspace(filepath.Join(ws, "bin"), h); !ok {
		t.Errorf("%s, a workspace of the path-keyed registry, is not seen as one (got %q): a bwrap a sandboxed command left in it would be trusted", ws, d)
	}
}
