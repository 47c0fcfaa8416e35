package evidence

import (
	"bytes"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cordon-run/cordon/internal/testenv"
)

// python is the interpreter Debian's python3-securesystemslib is for.
const python = "/usr/bin/python3"

// TestIndependentDSSEVerifier: a receipt, and the public key as
// MarshalPublicKey exports it, verify with python-securesystemslib and a
// PAE computed by testdata/verify_dsse.py — code that shares nothing with
// the Go DSSE library — and a flipped byte in the payload or in the
// signature is rejected there too, and so is a signature by another key
// under this key's ID. Without securesystemslib the test skips, except in
// CI (CI=true), whose setup installs it.
func TestIndependentDSSEVerifier(t *testing.T) {
	out, err := exec.Command(python, "-c", "import securesystemslib.signer").CombinedOutput()
	testenv.Require(t, err == nil, "python3-securesystemslib for %s (%v: %s)", python, err, bytes.TrimSpace(out))
	l := newLog(t)
	entries := appendN(t, l, 2)
	dir := t.TempDir()
	key := filepath.Join(dir, "key.pem")
	writeFile(t, key, MarshalPublicKey(l.signer.Public()))

	// verify runs the script on the envelopes; it returns its exit code
	// and its lines, one per envelope.
	verify := func(envelopes ...string) (int, []string) {
		t.Helper()
		cmd := exec.Command(python, append([]string{filepath.Join("testdata", "verify_dsse.py"), key}, envelopes...)...)
		var out, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &stderr
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		if stderr.Len() > 0 {
			t.Logf("verify_dsse.py: %s", stderr.String())
		}
		return code, strings.Split(strings.TrimSpace(out.String()), "\n")
	}

	var files, want []string
	for _, e := range entries {
		files = append(files, filepath.Join(l.Dir(), e.File))
		want = append(want, "ok "+l.signer.KeyID()+" "+itoa64(e.Sequence))
	}
	if code, lines := verify(files...); code != 0 || strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Errorf("verify_dsse.py on the log: exit %d:\n%s\nwant exit 0:\n%s", code, strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}

	// A flipped byte in the payload, in the signature, and a signature by
	// another key under this key's ID: each is rejected.
	var tampered []string
	for _, what := range []string{"payload", "sig", "other-key"} {
		path := filepath.Join(dir, what+".json")
		writeFile(t, path, readFile(t, files[0]))
		if what == "other-key" {
			resignFile(t, path, mustSigner(t, 2), l.signer.KeyID())
		} else {
			flipField(t, path, what)
		}
		tampered = append(tampered, path)
	}
	code, lines := verify(tampered...)
	if code != 1 || len(lines) != len(tampered) {
		t.Fatalf("verify_dsse.py on tampered receipts: exit %d: %q, want exit 1 and %d lines", code, lines, len(tampered))
	}
	for i, line := range lines {
		if !strings.HasPrefix(line, "rejected: "+tampered[i]+": ") {
			t.Errorf("verify_dsse.py did not reject %s: %q", tampered[i], line)
		}
	}
}
