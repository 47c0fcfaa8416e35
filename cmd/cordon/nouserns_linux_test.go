package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"

	"github.com/cordon-run/cordon/internal/testenv"
	"github.com/cordon-run/cordon/substrate/landlock"
)

// envNoUserNS makes a cordon process of the tests (cordonProcess) run
// under a seccomp filter that refuses every new namespace, as on a host
// where user namespaces are off: bubblewrap cannot create a sandbox there.
const envNoUserNS = "CORDON_TEST_NO_USERNS"

// denyNamespaces installs that filter on this process: unshare, setns and
// clone with a CLONE_NEW* flag fail with EPERM, clone3 with ENOSYS (so
// that callers fall back to clone). It is the test's own, not cordon's.
func denyNamespaces() {
	const (
		retAllow = 0x7fff0000
		retErrno = 0x00050000
		newFlags = unix.CLONE_NEWNS | unix.CLONE_NEWCGROUP | unix.CLONE_NEWUTS | unix.CLONE_NEWIPC |
			unix.CLONE_NEWUSER | unix.CLONE_NEWPID | unix.CLONE_NEWNET
	)
	prog, err := bpf.Assemble([]bpf.Instruction{
		bpf.LoadAbsolute{Off: 0, Size: 4}, // nr
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: unix.SYS_UNSHARE, SkipTrue: 6},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: unix.SYS_SETNS, SkipTrue: 5},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: unix.SYS_CLONE3, SkipTrue: 6},
		bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: unix.SYS_CLONE, SkipTrue: 2},
		bpf.LoadAbsolute{Off: 16, Size: 4}, // clone's flags, the low half of arg0
		bpf.JumpIf{Cond: bpf.JumpBitsSet, Val: newFlags, SkipTrue: 1},
		bpf.RetConstant{Val: retAllow},
		bpf.RetConstant{Val: retErrno | uint32(unix.EPERM)},
		bpf.RetConstant{Val: retAllow},
		bpf.RetConstant{Val: retErrno | uint32(unix.ENOSYS)},
	})
	if err != nil {
		panic(err)
	}
	filter := make([]unix.SockFilter, len(prog))
	for i, ins := range prog {
		filter[i] = unix.SockFilter{Code: ins.Op, Jt: ins.Jt, Jf: ins.Jf, K: ins.K}
	}
	fprog := unix.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		panic(err)
	}
	if _, _, e := unix.Syscall(unix.SYS_SECCOMP, 1 /* SET_MODE_FILTER */, 1 /* FLAG_TSYNC */, uintptr(unsafe.Pointer(&fprog))); e != 0 {
		panic(e)
	}
}

// TestNoUserNamespaces runs cordon where no namespace can be made:
// bubblewrap fails closed (nothing runs), and the landlock substrate still
// confines the command with named mechanisms and passes its probes.
func TestNoUserNamespaces(t *testing.T) {
	err := landlock.Available()
	testenv.Require(t, err == nil, "Landlock ABI %d: %v", landlock.RequiredABI, err)
	ws := tempWorkspace(t)
	os.Mkdir(filepath.Join(ws, "src"), 0o755)
	env := append(os.Environ(), envNoUserNS+"=1")

	// The simulation holds: unshare fails in such a process.
	out, err := cordonProcess(t, env, "-w", ws, "exec", "--no-sandbox", "--", "unshare", "-U", "true").CombinedOutput()
	if err == nil {
		t.Fatalf("unshare -U succeeded under the test's filter (%s): the host is not simulated", out)
	}

	cmd := cordonProcess(t, env, "-w", ws, "exec", "--", "sh", "-c", "echo ran > src/ran")
	out, err = cmd.CombinedOutput()
	if code := procExit(err); code != 125 || !strings.Contains(string(out), "bwrap") {
		t.Errorf("cordon exec on bwrap without namespaces: exit %d, %s; want 125 naming bwrap", code, out)
	}
	if _, err := os.Stat(filepath.Join(ws, "src", "ran")); err == nil {
		t.Errorf("the command ran although bubblewrap could not sandbox it")
	}

	victim := filepath.Join(t.TempDir(), "victim")
	os.WriteFile(victim, []byte("host\n"), 0o644)
	cmd = cordonProcess(t, env, "-w", ws, "exec", "--substrate", "landlock", "--json", "--",
		"sh", "-c", "echo inside > src/out; echo evil > "+victim+"; echo x > .git-planted; grep Seccomp_filters /proc/self/status")
	out, err = cmd.Output()
	var res struct {
		ExitCode   int      `json:"exit_code"`
		Stdout     string   `json:"stdout"`
		Substrate  string   `json:"substrate"`
		Sandboxed  bool     `json:"sandboxed"`
		Mechanisms []string `json:"mechanisms"`
	}
	if jerr := json.Unmarshal(out, &res); jerr != nil {
		t.Fatalf("cordon exec --substrate landlock: %v %s", err, out)
	}
	if res.ExitCode != 0 || res.Substrate != "landlock" || !res.Sandboxed {
		t.Fatalf("result %+v", res)
	}
	// The test's filter and the run's own: two.
	if !strings.Contains(res.Stdout, "Seccomp_filters:\t2") {
		t.Errorf("the command did not run under both filters: %q", res.Stdout)
	}
	if data, _ := os.ReadFile(filepath.Join(ws, "src", "out")); string(data) != "inside\n" {
		t.Errorf("the write inside the workspace failed: %q", data)
	}
	if data, _ := os.ReadFile(victim); string(data) != "host\n" {
		t.Errorf("the host file changed: %q", data)
	}
	if _, err := os.Stat(filepath.Join(ws, ".git-planted")); err == nil {
		t.Errorf("a new top-level entry was created")
	}
	named := map[string]bool{}
	for _, m := range res.Mechanisms {
		named[strings.SplitN(m, ":", 2)[0]] = true
	}
	for _, want := range []string{"landlock"} {
		if !named[want] {
			t.Errorf("no %s mechanism named: %q", want, res.Mechanisms)
		}
	}

	// The probes prove the landlock substrate here; bwrap's fail.
	out, _ = cordonProcess(t, env, "-w", ws, "probe", "--json", "--substrate", "landlock", "--substrate", "bwrap").Output()
	var probe struct {
		Probes []struct {
			Probe, Substrate, Observed string
			Pass                       bool
		} `json:"probes"`
	}
	if err := json.Unmarshal(out, &probe); err != nil {
		t.Fatalf("cordon probe: %v %s", err, out)
	}
	var landlocks int
	for _, p := range probe.Probes {
		switch {
		case p.Substrate == "landlock" && !p.Pass:
			t.Errorf("probe %s failed without user namespaces: %s", p.Probe, p.Observed)
		case p.Substrate == "landlock":
			landlocks++
		case p.Substrate == "bwrap" && p.Pass:
			t.Errorf("probe %s passed although bubblewrap cannot create a sandbox here: %s", p.Probe, p.Observed)
		}
	}
	if landlocks < 10 {
		t.Errorf("only %d landlock probes passed: %s", landlocks, out)
	}
}

// TestKilledCordonLeavesNoProcess SIGKILLs a cordon process while its
// landlock run hops (processes that fork, let the parent exit and call
// setsid, over and over): the supervisor, told by its parent-death signal,
// must end every process of the run.
func TestKilledCordonLeavesNoProcess(t *testing.T) {
	err := landlock.Available()
	testenv.Require(t, err == nil, "Landlock ABI %d: %v", landlock.RequiredABI, err)
	_, err = exec.LookPath("python3")
	testenv.Require(t, err == nil, "python3: %v", err)
	ws := tempWorkspace(t)
	marker := fmt.Sprintf("cordon-killed-hopper-%d-%d", os.Getpid(), time.Now().UnixNano())

	cmd := cordonProcess(t, os.Environ(), "-w", ws, "exec", "--substrate", "landlock", "--timeout", "60s", "--", "python3", "-c", testenv.Hopper, "8", "50", marker)
	var output strings.Builder
	cmd.Stdout, cmd.Stderr = &output, &output
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	found := false
	for range 600 { // the run started: its processes are there (slow under load)
		if len(testenv.PythonProcessesNaming(marker)) > 8 {
			found = true
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !found {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("the hoppers never ran: %s", output.String())
	}
	cmd.Process.Kill()
	cmd.Wait()
	var left []int
	for range 40 {
		if left = testenv.PythonProcessesNaming(marker); len(left) == 0 {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, pid := range left {
		unix.Kill(pid, unix.SIGKILL) // ours: the marker is this test's
	}
	t.Fatalf("%d processes of the run outlived the cordon process killed with SIGKILL", len(left))
}
