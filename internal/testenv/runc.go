package testenv

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// RuncRun writes the OCI config spec (a runtime-spec Spec, or anything
// that encodes as one) as a bundle of the test's, runs it with the runc
// program in a state directory of the test's, deletes the container and
// returns its output. A failed run fails the test, with the config.
func RuncRun(t testing.TB, runc string, spec any) (stdout, stderr string) {
	t.Helper()
	bundle := t.TempDir()
	os.Mkdir(filepath.Join(bundle, "rootfs"), 0o755)
	data, _ := json.Marshal(spec)
	if err := os.WriteFile(filepath.Join(bundle, "config.json"), data, 0o600); err != nil {
		t.Fatal(err)
	}
	var id [6]byte
	rand.Read(id[:])
	name, state := "cordon-test-"+hex.EncodeToString(id[:]), t.TempDir()
	defer exec.Command(runc, "--root", state, "delete", "--force", name).Run()
	cmd := exec.Command(runc, "--root", state, "run", "--bundle", bundle, name)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("runc run: %v\n%s%s\n%s", err, out.String(), errb.String(), data)
	}
	return out.String(), errb.String()
}
