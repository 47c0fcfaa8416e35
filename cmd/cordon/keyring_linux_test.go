package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cordon-run/cordon/internal/testenv"
)

// withSessionKey gives this process a fresh session keyring holding a key
// "cordon-test-key" with the secret, then executes itself as cordon: the
// keyring of a user whose agent runs cordon, in miniature.
func withSessionKey(secret string) {
	goruntime.LockOSThread()
	if _, _, e := unix.Syscall(unix.SYS_KEYCTL, unix.KEYCTL_JOIN_SESSION_KEYRING, 0, 0); e != 0 {
		fmt.Fprintln(os.Stderr, "join session keyring:", e)
		os.Exit(99)
	}
	if _, err := unix.AddKey("user", "cordon-test-key", []byte(secret), unix.KEY_SPEC_SESSION_KEYRING); err != nil {
		fmt.Fprintln(os.Stderr, "add key:", err)
		os.Exit(99)
	}
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "CORDON_TEST_SESSION_KEY=") {
			env = append(env, kv)
		}
	}
	self, _ := os.Executable()
	err := syscall.Exec(self, os.Args, append(env, "CORDON_TEST_AS_CORDON=1"))
	fmt.Fprintln(os.Stderr, "exec:", err)
	os.Exit(99)
}

// readKeyScript looks for "cordon-test-key" in the session keyring and
// prints its payload.
const readKeyScript = `import ctypes, platform, sys
nr = {"x86_64": 250, "aarch64": 219}.get(platform.machine())
if nr is None:
    print("unsupported machine"); sys.exit(3)
libc = ctypes.CDLL(None, use_errno=True)
kid = libc.syscall(nr, 10, -3, b"user", b"cordon-test-key", 0)  # KEYCTL_SEARCH in the session keyring
if kid < 0:
    print("not found, errno", ctypes.get_errno()); sys.exit(1)
buf = ctypes.create_string_buffer(256)
n = libc.syscall(nr, 11, kid, buf, 256)  # KEYCTL_READ
print("read", buf.raw[:max(n, 0)].decode())
`

// TestExecKeepsTheSessionKeyringOut runs cordon with a secret in its
// session keyring: the sandbox cannot find it; --no-sandbox, the control,
// can.
func TestExecKeepsTheSessionKeyringOut(t *testing.T) {
	needBwrap(t)
	_, err := exec.LookPath("python3")
	testenv.Require(t, err == nil, "python3: %v", err)
	ws := tempWorkspace(t)
	os.WriteFile(filepath.Join(ws, "readkey.py"), []byte(readKeyScript), 0o644)
	secret := fmt.Sprintf("keyring-secret-%d", time.Now().UnixNano())
	env := append(os.Environ(), "CORDON_TEST_SESSION_KEY="+secret)

	out, err := cordonProcess(t, env, "-w", ws, "exec", "--no-sandbox", "--", "python3", "readkey.py").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "read "+secret) {
		t.Fatalf("control: the host run could not read the key (%v): %s", err, out)
	}
	out, _ = cordonProcess(t, env, "-w", ws, "exec", "--", "python3", "readkey.py").CombinedOutput()
	if strings.Contains(string(out), secret) {
		t.Fatalf("the sandbox read cordon's session keyring: %s", out)
	}
	if !strings.Contains(string(out), "not found") {
		t.Errorf("unexpected output %s", out)
	}
}
