package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cordon-run/cordon/harness"
	"github.com/cordon-run/cordon/internal/testenv"
	"github.com/cordon-run/cordon/internal/wasmtest"
	"github.com/cordon-run/cordon/substrate/bwrap"
)

// TestMain lets the test binary act as cordon itself when the tests run it
// as a subprocess (to give cordon a real environment, a PATH, signals).
func TestMain(m *testing.M) {
	if secret := os.Getenv("CORDON_TEST_SESSION_KEY"); secret != "" {
		withSessionKey(secret)
	}
	if os.Getenv(envNoUserNS) == "1" {
		denyNamespaces()
	}
	if os.Getenv("CORDON_TEST_AS_CORDON") == "1" {
		if os.Getenv(envSignalAdmitted) == "1" {
			admittedHook = signalAdmitted
		}
		os.Exit(doMain(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
	}
	// cordon's per-user key store and cache, for every test and every
	// cordon process the tests start, in a temporary directory.
	dir, err := os.MkdirTemp("", "cordon-cli-test-")
	if err != nil {
		panic(err)
	}
	os.Setenv(harness.EnvStateDir, filepath.Join(dir, "state"))
	os.Setenv(harness.EnvCacheDir, filepath.Join(dir, "cache"))
	os.Setenv(harness.EnvRootsDir, filepath.Join(dir, "roots"))
	os.Unsetenv(harness.EnvConfig)
	code := m.Run()
	wasmtest.RemoveBuilds()
	os.RemoveAll(dir)
	os.Exit(code)
}

func needBwrap(t testing.TB) {
	t.Helper()
	bin, err := bwrap.Find(os.Getenv("PATH"))
	testenv.Require(t, err == nil, "bubblewrap: %v", err)
	err = bwrap.Detect(context.Background(), bin)
	testenv.Require(t, err == nil, "a working bubblewrap sandbox: %v", err)
}

// tempWorkspace returns a canonical workspace directory.
func tempWorkspace(t *testing.T) string {
	t.Helper()
	ws, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return ws
}

// cordonMain runs doMain and returns its exit code and output.
func cordonMain(t *testing.T, stdin string, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := doMain(args, strings.NewReader(stdin), &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

// cordonProcess returns the test binary set up to run as cordon with args,
// in the environment env (which replaces the test's).
func cordonProcess(t *testing.T, env []string, args ...string) *exec.Cmd {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self, args...)
	cmd.Env = append(append(env, "CORDON_TEST_AS_CORDON=1"), stateEnv()...)
	return cmd
}

// stateEnv is the environment that points a cordon process at the tests'
// per-user state, cache and roots (TestMain's temporary directories).
func stateEnv() []string {
	var env []string
	for _, name := range []string{harness.EnvStateDir, harness.EnvCacheDir, harness.EnvRootsDir} {
		env = append(env, name+"="+os.Getenv(name))
	}
	return env
}

func procExit(err error) int {
	if err == nil {
		return 0
	}
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	return -1
}

func TestExecUsageErrors(t *testing.T) {
	ws := tempWorkspace(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"exec"}, "exec needs a command"},
		{[]string{"exec", "--"}, "exec needs a command"},
		{[]string{"exec", "--timeout", "-1s", "--", "true"}, "--timeout must be a positive duration"},
		{[]string{"exec", "--timeout", "0", "--", "true"}, "--timeout must be a positive duration"},
		{[]string{"exec", "--timeout", "soon", "--", "true"}, "invalid argument \"soon\""},
		{[]string{"exec", "--max-output", "1.5MiB", "--", "true"}, "--max-output: invalid size"},
		{[]string{"exec", "--max-output", "0", "--", "true"}, "--max-output must be positive"},
		{[]string{"exec", "--max-output", "lots", "--", "true"}, "--max-output: invalid size"},
		{[]string{"exec", "--net", "wifi", "--", "true"}, "--net: unknown network \"wifi\""},
		{[]string{"exec", "--substrate", "chroot", "--", "true"}, "unknown substrate \"chroot\""},
		{[]string{"exec", "--no-sandbox", "--net", "none", "--", "true"}, "--no-sandbox cannot restrict the network"},
		{[]string{"exec", "--no-sandbox", "--substrate", "bwrap", "--", "true"}, "drop --substrate or --no-sandbox"},
		{[]string{"exec", "--frobnicate", "--", "true"}, "unknown flag: --frobnicate"},
		{[]string{"exec", "--autonomy", "high", "--", "true"}, "unknown autonomy level \"high\": want supervised or unattended"},
		{[]string{"exec", "--env", "A=B", "--", "true"}, `--env "A=B": not a variable's name`},
		{[]string{"exec", "--env", "", "--", "true"}, `--env "": not a variable's name`},
	} {
		code, stdout, stderr := cordonMain(t, "", append([]string{"-w", ws}, tc.args...)...)
		if code != exitUsage || !strings.Contains(stderr, tc.want) || stdout != "" {
			t.Errorf("cordon %q: exit %d, stderr %q; want exit 2 and %q", tc.args, code, stderr, tc.want)
		}
	}
}

// TestExecRefusesEnvNames: a name no sandbox passes in is a refusal of
// the policy (EnvRefused, exit 3) naming the variable, not a usage error
// — on every substrate, --no-sandbox and mcp alike.
func TestExecRefusesEnvNames(t *testing.T) {
	ws := tempWorkspace(t)
	for _, tc := range []struct {
		args []string
		name string
	}{
		{[]string{"exec", "--env", "LD_PRELOAD", "--", "true"}, "LD_PRELOAD"},
		{[]string{"exec", "--env", "PATH", "--", "true"}, "PATH"},
		{[]string{"exec", "--env", "BASH_ENV", "--", "true"}, "BASH_ENV"},
		{[]string{"exec", "--no-sandbox", "--env", "GIT_DIR", "--", "true"}, "GIT_DIR"},
		{[]string{"mcp", "--env", "LD_PRELOAD"}, "LD_PRELOAD"},
	} {
		code, stdout, stderr := cordonMain(t, "", append([]string{"-w", ws, "--json"}, tc.args...)...)
		var got errorJSON
		if err := json.Unmarshal([]byte(stdout), &got); err != nil {
			t.Errorf("cordon %q: stdout %q is not one JSON object: %v (stderr %q)", tc.args, stdout, err, stderr)
			continue
		}
		if code != exitRefused || got.Error != "EnvRefused" || got.Op != "pass" || got.Path != tc.name ||
			!strings.Contains(got.Message, "--env: refusing to pass "+tc.name+" into the sandbox") {
			t.Errorf("cordon %q: exit %d, %+v; want exit 3, EnvRefused, op pass, path %s", tc.args, code, got, tc.name)
		}
	}
}

func TestExecHelp(t *testing.T) {
	code, stdout, _ := cordonMain(t, "", "exec", "--help")
	if code != exitOK || !strings.HasPrefix(stdout, "usage: cordon exec") {
		t.Errorf("exec --help: exit %d, %q", code, stdout)
	}
}

func TestExecCannotRunThis(t *testing.T) {
	ws := tempWorkspace(t)
	t.Setenv("PATH", t.TempDir()) // no OCI runtime in it
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"exec", "--substrate", "oci", "--", "true"}, "no OCI runtime runs a bundle here (runc: not found; crun: not found); install runc"},
	} {
		code, _, stderr := cordonMain(t, "", append([]string{"-w", ws}, tc.args...)...)
		if code != exitCannotRun || !strings.Contains(stderr, tc.want) {
			t.Errorf("cordon %q: exit %d, stderr %q; want exit 125 and %q", tc.args, code, stderr, tc.want)
		}
	}
}

func TestExecJSON(t *testing.T) {
	needBwrap(t)
	ws := tempWorkspace(t)
	code, stdout, stderr := cordonMain(t, "from stdin\n", "-w", ws, "exec", "--json", "--max-output", "16", "--",
		"sh", "-c", `cat; echo err >&2; head -c 100 /dev/zero | tr '\0' y; exit 7`)
	if code != 7 {
		t.Fatalf("exit %d, want the command's 7 (stderr %q)", code, stderr)
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(stdout), &got); err != nil {
		t.Fatalf("stdout is not one JSON object: %v\n%s", err, stdout)
	}
	for _, k := range []string{"exit_code", "signal", "timed_out", "stdout", "stderr", "stdout_bytes", "stderr_bytes",
		"stdout_clipped", "stderr_clipped", "duration_ms", "substrate", "sandboxed"} {
		if _, ok := got[k]; !ok {
			t.Errorf("JSON lacks %q: %s", k, stdout)
		}
	}
	want := map[string]any{"exit_code": 7.0, "timed_out": false, "stdout_bytes": 111.0, "stdout_clipped": true,
		"stderr": "err\n", "substrate": "bwrap", "sandboxed": true}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
	if s, _ := got["stdout"].(string); !strings.HasPrefix(s, "from std") || !strings.Contains(s, "[... 95 bytes dropped ...]") || !strings.HasSuffix(s, "yyyyyyyy") {
		t.Errorf("stdout %q: want head, dropped count, tail", s)
	}
}

func TestExecExitCodes(t *testing.T) {
	needBwrap(t)
	ws := tempWorkspace(t)
	os.WriteFile(filepath.Join(ws, "script.sh"), []byte("#!/bin/sh\n"), 0o644)
	for _, tc := range []struct {
		args []string
		code int
	}{
		{[]string{"exec", "--", "true"}, 0},
		{[]string{"exec", "--", "sh", "-c", "exit 7"}, 7},
		{[]string{"exec", "--", "no-such-program-here"}, exitNotFound},
		{[]string{"exec", "--", "./script.sh"}, exitNotExec},
		{[]string{"exec", "--timeout", "500ms", "--", "sleep", "30"}, exitTimeout},
		// After "--" everything is the command: these are not cordon's
		// flags and not bwrap's.
		{[]string{"exec", "--", "--json"}, exitNotFound},
		{[]string{"exec", "--", "--bind", "/", "/"}, exitNotFound},
		{[]string{"exec", "--no-sandbox", "--", "sh", "-c", "exit 9"}, 9},
	} {
		code, _, stderr := cordonMain(t, "", append([]string{"-w", ws}, tc.args...)...)
		if code != tc.code {
			t.Errorf("cordon %q: exit %d, want %d (stderr %q)", tc.args, code, tc.code, stderr)
		}
	}
	code, stdout, _ := cordonMain(t, "", "-w", ws, "exec", "--", "sh", "-c", `printf '%s|' "$@"`, "sh", "--timeout", "1s", "--json")
	if code != 0 || stdout != "--timeout|1s|--json|" {
		t.Errorf("arguments after -- reached the command as %q (exit %d)", stdout, code)
	}
}

func TestExecRefusesASymlinkedHarnessDirectory(t *testing.T) {
	needBwrap(t)
	ws := tempWorkspace(t)
	os.Symlink("/etc", filepath.Join(ws, ".efferent"))
	code, stdout, _ := cordonMain(t, "", "-w", ws, "--json", "exec", "--", "touch", "ran")
	var r errorJSON
	if err := json.Unmarshal([]byte(stdout), &r); err != nil {
		t.Fatalf("stdout %q: %v", stdout, err)
	}
	if code != exitRefused || r.Error != "ProtectedPath" || r.Path != ".efferent" || !strings.Contains(r.Message, ws) {
		t.Errorf("exit %d, refusal %+v; want exit 3, ProtectedPath naming .efferent and the workspace", code, r)
	}
	if _, err := os.Stat(filepath.Join(ws, "ran")); err == nil {
		t.Errorf("the command ran")
	}
}

// TestExecFailsClosed runs cordon with a PATH that has no bwrap, and with
// one whose bwrap cannot create a sandbox: exit 125, a message that names
// the fix, and the command does not run. --no-sandbox runs it and says so.
func TestExecFailsClosed(t *testing.T) {
	ws := tempWorkspace(t)
	empty := t.TempDir()
	broken := t.TempDir()
	os.WriteFile(filepath.Join(broken, "bwrap"), []byte("#!/bin/sh\necho 'bwrap: creating new namespace failed: Operation not permitted' >&2\nexit 1\n"), 0o755)
	marker := filepath.Join(ws, "ran")
	for _, tc := range []struct{ name, path, reason string }{
		{"no bwrap", empty + ":/nonexistent", "bwrap not found in PATH"},
		{"broken bwrap", broken + ":/usr/bin:/bin", "Operation not permitted"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, asJSON := range []bool{false, true} {
				args := []string{"-w", ws, "exec", "--", "/bin/sh", "-c", "echo ran > " + marker}
				if asJSON {
					args = append([]string{"--json"}, args...)
				}
				cmd := cordonProcess(t, []string{"PATH=" + tc.path}, args...)
				var stdout, stderr bytes.Buffer
				cmd.Stdout, cmd.Stderr = &stdout, &stderr
				code := procExit(cmd.Run())
				if code != exitCannotRun {
					t.Fatalf("exit %d, want 125 (stdout %q stderr %q)", code, stdout.String(), stderr.String())
				}
				msg := stderr.String()
				if asJSON {
					var r errorJSON
					if err := json.Unmarshal(stdout.Bytes(), &r); err != nil || r.Error != "SandboxUnavailable" {
						t.Fatalf("--json: %q, %v; want a SandboxUnavailable refusal", stdout.String(), err)
					}
					msg = "cordon: " + r.Message
				}
				if !strings.HasPrefix(msg, "cordon: "+bwrap.UnavailableMessage+" (") || !strings.Contains(msg, tc.reason) {
					t.Errorf("message %q: want the fix and the reason %q", msg, tc.reason)
				}
				if _, err := os.Stat(marker); err == nil {
					t.Fatalf("the command ran without a sandbox")
				}
			}
			cmd := cordonProcess(t, []string{"PATH=" + tc.path + ":/usr/bin:/bin"}, "-w", ws, "--json", "exec", "--no-sandbox", "--", "/bin/sh", "-c", "echo ran > "+marker)
			out, err := cmd.Output()
			var res map[string]any
			if err != nil || json.Unmarshal(out, &res) != nil || res["sandboxed"] != false || res["substrate"] != "host" {
				t.Fatalf("--no-sandbox: %v %s", err, out)
			}
			if _, err := os.Stat(marker); err != nil {
				t.Fatalf("--no-sandbox did not run the command: %v", err)
			}
			os.Remove(marker)
		})
	}
}

// TestPlantedBwrapNeverRuns: a command writes a "bwrap" into
// <ws>/.local/bin, which the user's own PATH lists first; cordon exec,
// admit and run refuse it (exit 125) and never run it on the host.
func TestPlantedBwrapNeverRuns(t *testing.T) {
	needBwrap(t)
	ws := tempWorkspace(t)
	marker := filepath.Join(t.TempDir(), "ran-on-the-host")
	plant := "mkdir -p .local/bin && printf '#!/bin/sh\\ntouch " + marker + "\\n' > .local/bin/bwrap && chmod +x .local/bin/bwrap"
	if code, out, errOut := cordonMain(t, "", "-w", ws, "exec", "--", "sh", "-c", plant); code != 0 {
		t.Fatalf("planting: exit %d %s %s", code, out, errOut)
	}
	if _, err := os.Stat(filepath.Join(ws, ".local", "bin", "bwrap")); err != nil {
		t.Fatalf("the command did not plant its bwrap: %v", err)
	}
	os.WriteFile(filepath.Join(ws, "t.json"), []byte(`{"name":"t","kind":"native","command":["true"],"capabilities":["time:5s"]}`), 0o644)
	if out, err := cordonProcess(t, []string{"PATH=/usr/bin:/bin"}, "-w", ws, "admit", filepath.Join(ws, "t.json")).CombinedOutput(); err != nil {
		t.Fatalf("admit with the system PATH: %v %s", err, out)
	}
	path := "PATH=" + filepath.Join(ws, ".local", "bin") + ":/usr/bin:/bin"
	for _, c := range []struct {
		args []string
		code int
		kind string
	}{
		{[]string{"exec", "--", "true"}, exitCannotRun, "SandboxUnavailable"},
		{[]string{"run", "t"}, exitCannotRun, "SandboxUnavailable"},
		// Admission names the substrate it cannot use among its reasons.
		{[]string{"admit", filepath.Join(ws, "t.json")}, exitRefused, "CapabilityRefused"},
	} {
		cmd := cordonProcess(t, []string{path}, append([]string{"-w", ws, "--json"}, c.args...)...)
		out, err := cmd.Output()
		var r errorJSON
		json.Unmarshal(out, &r)
		if code := procExit(err); code != c.code || r.Error != c.kind || !strings.Contains(r.Message, "inside the workspace") {
			t.Errorf("cordon %q: exit %d %s; want %d, %s naming the workspace", c.args, code, out, c.code, c.kind)
		}
	}
	if _, err := os.Stat(marker); err == nil {
		t.Errorf("cordon ran the planted bwrap on the host")
	}
}

// TestExecKeepsCordonsSecretsOut sets a secret in cordon's own environment
// and looks for it inside by every route.
func TestExecKeepsCordonsSecretsOut(t *testing.T) {
	needBwrap(t)
	ws := tempWorkspace(t)
	secret := fmt.Sprintf("tok-%d", time.Now().UnixNano())
	env := append(os.Environ(), "SECRET_TOKEN="+secret, "PASSED_ON="+secret+"-granted")
	cmd := cordonProcess(t, env, "-w", ws, "exec", "--env", "PASSED_ON", "--",
		"sh", "-c", `env; cat /proc/*/environ /proc/*/cmdline 2>/dev/null | tr '\0' '\n'; ls -a "$HOME"`)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if strings.Contains(strings.ReplaceAll(string(out), secret+"-granted", ""), secret) {
		t.Fatalf("SECRET_TOKEN reached the sandbox:\n%s", out)
	}
	if !strings.Contains(string(out), "PASSED_ON="+secret+"-granted") {
		t.Errorf("--env PASSED_ON did not pass the variable in:\n%s", out)
	}
}

// envSignalAdmitted makes a cordon process of the tests send itself SIGINT
// once its command is admitted (signalAdmitted).
const envSignalAdmitted = "CORDON_TEST_SIGNAL_ADMITTED"

// signalAdmitted sends this process SIGINT and returns once it is caught,
// or after 5 s.
func signalAdmitted(i *interrupt) {
	i.wait()
	syscall.Kill(os.Getpid(), syscall.SIGINT)
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if _, ok := i.interrupted(); ok {
			return
		}
	}
}

// TestExecSignalWhileAdmittingStartsNothing sends cordon SIGINT once its
// command is admitted, its signals caught, on every way exec runs a
// command: cordon exits 130 and the command never starts (on the host it
// used to run, for as long as the grace after a cancel, before the
// signal stopped it).
func TestExecSignalWhileAdmittingStartsNothing(t *testing.T) {
	for _, mode := range [][]string{{"--no-sandbox"}, {"--substrate", "bwrap"}, {"--substrate", "landlock"}} {
		t.Run(mode[len(mode)-1], func(t *testing.T) {
			if mode[0] != "--no-sandbox" {
				needBwrap(t)
			}
			ws := tempWorkspace(t)
			ran := filepath.Join(ws, "ran")
			args := append(append([]string{"-w", ws, "exec"}, mode...), "--", "sh", "-c", "trap '' TERM INT; touch "+ran+"; sleep 3")
			cmd := cordonProcess(t, append(os.Environ(), envSignalAdmitted+"=1"), args...)
			out, err := cmd.CombinedOutput()
			if code := procExit(err); code != 128+int(syscall.SIGINT) {
				t.Errorf("cordon exited %d, want %d: %s", code, 128+int(syscall.SIGINT), out)
			}
			if _, err := os.Stat(ran); err == nil {
				t.Error("the command started")
			}
		})
	}
}

// copySelf copies this test binary (which runs as cordon) to each of
// paths and returns its bytes.
func copySelf(t *testing.T, paths ...string) []byte {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range paths {
		if err := os.WriteFile(p, data, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return data
}

// TestNothingWritesTheWorkspaceThatHoldsCordon runs cordon (this test
// binary, as cordon) from inside its workspace: the file tools and a
// sandboxed command are refused (WorkspaceRefused, exit 3), and the binary
// is unchanged — its next start would run what they wrote, on the host.
func TestNothingWritesTheWorkspaceThatHoldsCordon(t *testing.T) {
	ws := tempWorkspace(t)
	bin := filepath.Join(ws, "bin", "cordon")
	os.Mkdir(filepath.Dir(bin), 0o755)
	data := copySelf(t, bin)
	modes := [][]string{{"fs", "write", "bin/cordon"}, {"exec", "--no-sandbox", "--", "true"}, {"fs", "stat", "bin/cordon"}}
	if _, err := bwrap.Find(os.Getenv("PATH")); err == nil {
		modes = append(modes, []string{"exec", "--", "sh", "-c", "echo x >> bin/cordon"})
	}
	for _, args := range modes {
		cmd := cordonProcess(t, os.Environ(), append([]string{"-w", ws, "--json"}, args...)...)
		cmd.Path = bin
		cmd.Stdin = strings.NewReader("x")
		out, err := cmd.Output()
		code := procExit(err)
		if args[1] == "--no-sandbox" || args[1] == "stat" {
			// On the host nothing is confined: no boundary to keep; and
			// a file tool that only reads writes nothing.
			if code != 0 {
				t.Errorf("%v: exit %d, want 0: %s", args, code, out)
			}
			continue
		}
		if code != exitRefused || !strings.Contains(string(out), "WorkspaceRefused") || !strings.Contains(string(out), "the program this process runs") {
			t.Errorf("%v: exit %d, %s; want a WorkspaceRefused naming the program this process runs", args, code, out)
		}
	}
	if after, _ := os.ReadFile(bin); !bytes.Equal(after, data) {
		t.Error("cordon's binary changed")
	}
}

// TestExecSignalEndsTheTree sends SIGTERM and SIGINT to cordon while its
// command's tree (setsid, double fork, SIGTERM ignored) runs: cordon exits
// 128+signal and nothing of the tree survives.
func TestExecSignalEndsTheTree(t *testing.T) {
	needBwrap(t)
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			ws := tempWorkspace(t)
			marker := testenv.MarkedSleep(t, ws)
			script := fmt.Sprintf(`trap '' TERM INT
setsid sh -c '(trap "" TERM; exec %[1]s 300) & exit 0'
%[1]s 300 &
wait`, marker)
			cmd := cordonProcess(t, os.Environ(), "-w", ws, "exec", "--", "sh", "-c", script)
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			deadline := time.Now().Add(20 * time.Second)
			for len(testenv.ProcessesWith(marker)) < 2 {
				if time.Now().After(deadline) {
					cmd.Process.Kill()
					cmd.Wait()
					t.Fatalf("the tree did not start")
				}
				time.Sleep(20 * time.Millisecond)
			}
			cmd.Process.Signal(sig)
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			select {
			case err := <-done:
				if code := procExit(err); code != 128+int(sig) {
					t.Errorf("cordon exited %d after %v, want %d", code, sig, 128+int(sig))
				}
			case <-time.After(30 * time.Second):
				cmd.Process.Kill()
				t.Fatalf("cordon did not exit after %v", sig)
			}
			if left := testenv.ProcessesWith(marker); len(left) > 0 {
				t.Errorf("processes outlived cordon: %v", left)
			}
		})
	}
}

// TestExecInADirectoryReachedThroughALink: cordon run from a directory its
// shell reached through a link (a home that is a link to another disk;
// $PWD names the link) runs in the workspace as the kernel names it, on
// bwrap and on Landlock, and `-w` relative to it alike. Before, "." was
// made absolute from $PWD: bwrap refused the workspace as not canonical
// (exit 125), Landlock as not a canonical directory.
func TestExecInADirectoryReachedThroughALink(t *testing.T) {
	needBwrap(t)
	top := tempWorkspace(t)
	ws := filepath.Join(top, "real", "proj")
	os.MkdirAll(ws, 0o755)
	link := filepath.Join(top, "home")
	if err := os.Symlink(filepath.Join(top, "real"), link); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ dir, w string }{{"proj", ""}, {"", "proj"}} {
		for _, sub := range []string{"bwrap", "landlock"} {
			args := []string{"exec", "--substrate", sub, "--", "pwd"}
			if c.w != "" {
				args = append([]string{"-w", c.w}, args...)
			}
			cmd := cordonProcess(t, append(os.Environ(), "PWD="+filepath.Join(link, c.dir)), args...)
			cmd.Dir = filepath.Join(link, c.dir)
			out, err := cmd.Output()
			if code := procExit(err); code != 0 || strings.TrimSpace(string(out)) != ws {
				t.Errorf("%s in %s (-w %q): exit %d, %q; want %s", sub, cmd.Dir, c.w, code, out, ws)
			}
		}
	}
}
