package oci

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/cordon-run/cordon/harness"
	"github.com/cordon-run/cordon/internal/limits"
	"github.com/cordon-run/cordon/internal/testenv"
	"github.com/cordon-run/cordon/refusal"
	"github.com/cordon-run/cordon/substrate/bwrap"
)

var testHarness harness.Config

func TestMain(m *testing.M) { testenv.Main(m, &testHarness) }

// gitWorkspace returns a canonical workspace holding a git repository.
func gitWorkspace(t *testing.T) string {
	t.Helper()
	ws, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(ws, 0o755)
	if out, err := exec.Command("git", "init", "-q", ws).CombinedOutput(); err != nil {
		t.Skipf("git init: %v %s", err, out)
	}
	return ws
}

// prepared is the bwrap sandbox of a writable workspace ws, its
// placeholders made until the test ends.
func prepared(t *testing.T, ws string) *bwrap.Sandbox {
	t.Helper()
	sb, err := bwrap.NewPolicy(ws, testHarness).Prepare(os.Environ())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sb.Close() })
	return sb
}

// schema compiles the runtime-spec's JSON schema of config.json, from the
// module this package is built with.
func schema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	// A copy beside the test binary where it runs without the module
	// cache (scripts/test, as an unprivileged user); the module's own
	// otherwise.
	dir := filepath.Join("testdata", "runtime-spec-schema")
	if _, err := os.Stat(dir); err != nil {
		out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/opencontainers/runtime-spec").Output()
		testenv.Require(t, err == nil, "the runtime-spec module's directory (go list -m): %v", err)
		dir = filepath.Join(strings.TrimSpace(string(out)), "schema")
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft4) // the schema files without a $schema are draft 4, as config-schema.json says
	c.UseLoader(specSchemaLoader{})
	abs, _ := filepath.Abs(filepath.Join(dir, "config-schema.json"))
	sch, err := c.Compile(abs)
	if err != nil {
		t.Fatal(err)
	}
	return sch
}

// specSchemaLoader reads the runtime-spec's schema files, with the one
// reference of defs.json that is not a JSON pointer ("#definitions/uint32",
// which the spec's own validator, gojsonschema, lets through) written as
// one.
type specSchemaLoader struct{}

func (specSchemaLoader) Load(url string) (any, error) {
	data, err := os.ReadFile(strings.TrimPrefix(url, "file://"))
	if err != nil {
		return nil, err
	}
	return jsonschema.UnmarshalJSON(bytes.NewReader(bytes.ReplaceAll(data, []byte(`"#definitions/`), []byte(`"#/definitions/`))))
}

// TestSpecIsTheSandbox: the config of a git workspace's sandbox validates
// against the runtime-spec's JSON schema, reads back into its Go types
// unchanged, and states bwrap's policy field by field: the host's /
// read-only first, every bind and tmpfs of the options in their order
// (the workspace writable, each protected path read-only), the remounts
// as read-only paths, the namespaces, the cleared environment, the
// working directory, no capability, no_new_privs.
func TestSpecIsTheSandbox(t *testing.T) {
	ws := gitWorkspace(t)
	sb := prepared(t, ws)
	argv := []string{"sh", "-c", "true"}
	s, err := Spec(sb, argv, Options{})
	if err != nil {
		t.Fatal(err)
	}
	data, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	if err := schema(t).Validate(doc); err != nil {
		t.Errorf("config.json does not validate against the runtime-spec schema: %v\n%s", err, data)
	}
	var back specs.Spec
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	if again, _ := json.MarshalIndent(&back, "", "  "); !bytes.Equal(again, data) {
		t.Errorf("config.json does not read back as it was written:\n%s\nread back as\n%s", data, again)
	}

	if s.Root.Path != "rootfs" || !s.Root.Readonly {
		t.Errorf("root = %+v, want rootfs read-only", s.Root)
	}
	if m := s.Mounts[0]; m.Destination != "/" || m.Source != "/" || m.Type != "bind" || !slices.Equal(m.Options, []string{"rbind", "ro", "rro"}) {
		t.Errorf("the first mount is %+v, want the host's / bound recursively read-only", m)
	}
	mount := func(dst string) *specs.Mount {
		for i := len(s.Mounts) - 1; i >= 0; i-- { // the last one at dst is what the command sees
			if s.Mounts[i].Destination == dst {
				return &s.Mounts[i]
			}
		}
		return nil
	}
	if m := mount(ws); m == nil || m.Source != ws || !slices.Equal(m.Options, []string{"rbind", "rw"}) {
		t.Errorf("the workspace's mount is %+v, want %s bound writable", m, ws)
	}
	for _, rel := range []string{".git/config", ".git/hooks", ".git/HEAD"} {
		p := filepath.Join(ws, rel)
		if m := mount(p); m == nil || m.Source != p || !slices.Contains(m.Options, "rro") {
			t.Errorf("the protected path %s is mounted %+v, want read-only", rel, m)
		}
	}
	// Every bind and tmpfs of bwrap's options, in its order.
	var want []string
	opts := sb.Options()
	for i := 0; i < len(opts); i++ {
		switch opts[i] {
		case "--bind", "--ro-bind":
			if !strings.HasPrefix(opts[i+2], "/proc/") { // the runtime's read-only paths there (below)
				want = append(want, opts[i+2])
			}
			i += 2
		case "--tmpfs", "--proc", "--dir":
			want, i = append(want, opts[i+1]), i+1
		case "--dev":
			want, i = append(want, "/dev", "/dev/pts"), i+1
		}
	}
	var got []string
	for _, m := range s.Mounts {
		got = append(got, m.Destination)
	}
	if !slices.Equal(got, want) {
		t.Errorf("mounts %q\nwant    %q", got, want)
	}
	if m, i := mount("/tmp"), slices.Index(opts, "/tmp"); i < 3 || opts[i-3] != "--size" || m == nil || !slices.Contains(m.Options, "size="+opts[i-2]) {
		t.Errorf("/tmp is %+v, without the sandbox's cap (%q)", m, opts[max(i-3, 0):i+1])
	}
	for _, p := range []string{"/dev", "/home", "/run", "/proc/sys", "/proc/sysrq-trigger", "/proc/irq", "/proc/bus"} {
		if !slices.Contains(s.Linux.ReadonlyPaths, p) {
			t.Errorf("%s is not read-only (readonlyPaths %q)", p, s.Linux.ReadonlyPaths)
		}
	}
	var nss []specs.LinuxNamespaceType
	for _, n := range s.Linux.Namespaces {
		nss = append(nss, n.Type)
	}
	for _, n := range []specs.LinuxNamespaceType{specs.MountNamespace, specs.PIDNamespace, specs.IPCNamespace, specs.UTSNamespace, specs.NetworkNamespace, specs.CgroupNamespace} {
		if !slices.Contains(nss, n) {
			t.Errorf("no %s namespace (%q)", n, nss)
		}
	}
	if slices.Contains(nss, specs.UserNamespace) {
		t.Error("a user namespace where the runtime runs as root")
	}
	p := s.Process
	if !slices.Equal(p.Args, argv) || !slices.Equal(p.Env, sb.Env()) || p.Cwd != ws || !p.NoNewPrivileges || p.User.UID != 0 {
		t.Errorf("process %+v", p)
	}
	if s.Linux.Seccomp == nil || s.Linux.Seccomp.DefaultAction != specs.ActAllow || len(s.Linux.Seccomp.Syscalls) == 0 {
		t.Errorf("seccomp %+v, want the sandbox's filter", s.Linux.Seccomp)
	}
	if lim := sb.Policy().Limits(); lim.Pids == limits.Cgroup1 {
		if r := s.Linux.Resources; r == nil || r.Pids == nil || r.Pids.Limit == nil || *r.Pids.Limit != int64(lim.Spec.Pids) {
			t.Errorf("resources %+v, want pids.limit %d", r, lim.Spec.Pids)
		}
	}
	open, err := bwrap.NewPolicy(gitWorkspace(t), testHarness).WithNetwork(bwrap.NetHost).Prepare(os.Environ())
	if err != nil {
		t.Fatal(err)
	}
	defer open.Close()
	if _, err := Spec(open, argv, Options{}); err == nil {
		t.Error("a spec of a net:host sandbox, whose filter has no OCI form")
	}
	c := p.Capabilities
	if len(c.Bounding)+len(c.Effective)+len(c.Inheritable)+len(c.Permitted)+len(c.Ambient) != 0 {
		t.Errorf("capabilities %+v, want none", c)
	}

	rootless, err := Spec(sb, argv, Options{Rootless: true, UID: 1000, GID: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if l := rootless.Linux; len(l.UIDMappings) != 1 || l.UIDMappings[0] != (specs.LinuxIDMapping{ContainerID: 0, HostID: 1000, Size: 1}) ||
		!slices.ContainsFunc(l.Namespaces, func(n specs.LinuxNamespace) bool { return n.Type == specs.UserNamespace }) {
		t.Errorf("rootless: %+v", l)
	}
	if _, err := Spec(sb, nil, Options{}); err == nil {
		t.Error("a spec without a command")
	}
}

// TestRuncRunsTheSandbox: runc runs the bundle, and in it the workspace
// is writable, the host and the protected paths are not, the home
// directories and the network's interfaces are hidden, HOME and /tmp are
// fresh, and the command holds no capability.
func TestRuncRunsTheSandbox(t *testing.T) {
	runc, err := exec.LookPath("runc")
	testenv.Require(t, err == nil, "runc (Debian's runc package): %v", err)
	ws := gitWorkspace(t)
	sb := prepared(t, ws)
	script := `touch ok && echo ws-writable; touch /etc/cordon-oci 2>/dev/null || echo host-ro; ` +
		`(echo x >> .git/config) 2>/dev/null || echo config-ro; echo home $(ls -A /home | wc -l); ` +
		`echo net $(ls /sys/class/net | wc -l); touch "$HOME/h" /tmp/t && echo home-tmp-writable; ` +
		`grep -E '^(CapEff|NoNewPrivs|Seccomp):' /proc/self/status; echo pid $$; ` +
		`unshare -U true 2>/dev/null || echo no-userns; ` +
		`cur=$(cat /proc/sys/kernel/printk_ratelimit); (echo $cur > /proc/sys/kernel/printk_ratelimit) 2>/dev/null || echo sysctl-ro`
	s, err := Spec(sb, []string{"/bin/sh", "-c", script}, DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	out, errb := testenv.RuncRun(t, runc, s)
	got := out
	for _, want := range []string{"ws-writable", "host-ro", "config-ro", "home 0", "net 0", "home-tmp-writable", "CapEff:\t0000000000000000", "NoNewPrivs:\t1", "Seccomp:\t2", "pid 1", "no-userns", "sysctl-ro"} {
		if !strings.Contains(got, want) {
			t.Errorf("the command in runc's container did not say %q:\n%s%s", want, got, errb)
		}
	}
	if _, err := os.Stat("/etc/cordon-oci"); err == nil {
		os.Remove("/etc/cordon-oci")
		t.Error("the container wrote the host's /etc")
	}
	if data, _ := os.ReadFile(filepath.Join(ws, ".git/config")); bytes.Contains(data, []byte("x\n")) {
		t.Error("the container wrote the workspace's .git/config")
	}
	if _, err := os.Stat(filepath.Join(ws, "ok")); err != nil {
		t.Error("the container's write in the workspace is not on the host")
	}
}

// TestRuncHoldsTheLimits: the container of a sandbox limited to 16
// processes starts no more than 16, however many its command asks for:
// a pids cgroup runc makes (root), or RLIMIT_NPROC in the container's
// own user namespace (rootless).
func TestRuncHoldsTheLimits(t *testing.T) {
	runc, err := exec.LookPath("runc")
	testenv.Require(t, err == nil, "runc (Debian's runc package): %v", err)
	host := limits.Detect()
	spec := limits.Spec{Pids: 16}
	if _, ok := host.V1["memory"]; ok {
		spec.Memory = 64 << 20 // on an rlimit (RLIMIT_AS), too little for python's address space
	}
	plan, err := host.Plan(spec)
	if err != nil {
		t.Fatal(err)
	}
	ws := gitWorkspace(t)
	sb, err := bwrap.NewPolicy(ws, testHarness).WithLimits(plan).Prepare(os.Environ())
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	// A bounded loop of 40 forks of sleepers, which stops at the first
	// that fails; the sleepers end with the container's PID 1.
	const python = "/usr/bin/python3" // the system's: the sandbox hides the home directories
	_, err = os.Stat(python)
	testenv.Require(t, err == nil, "python3 (Debian's python3 package): %v", err)
	script := "import os, time\nn = 0\nfor i in range(40):\n    try:\n        pid = os.fork()\n    except OSError:\n        break\n" +
		"    if pid == 0:\n        time.sleep(3)\n        os._exit(0)\n    n += 1\nprint('forked', n)\n"
	s, err := Spec(sb, []string{python, "-c", script}, DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	switch plan.Pids {
	case limits.Cgroup1:
		if r := s.Linux.Resources; r == nil || r.Memory == nil || *r.Memory.Limit != 64<<20 || *r.Pids.Limit != 16 {
			t.Errorf("resources %+v, want memory.limit 64MiB, pids.limit 16", r)
		}
	case limits.Rlimit:
		if !slices.Contains(s.Process.Rlimits, specs.POSIXRlimit{Type: "RLIMIT_NPROC", Hard: 16, Soft: 16}) {
			t.Errorf("rlimits %+v, want RLIMIT_NPROC 16", s.Process.Rlimits)
		}
	default:
		t.Fatalf("no process limit here: %v", plan.Pids)
	}
	out, _ := testenv.RuncRun(t, runc, s)
	var n int
	if _, err := fmt.Sscanf(strings.TrimSpace(out), "forked %d", &n); err != nil || n != 15 {
		t.Errorf("the container's command said %q, want 15 forks (16 processes with itself)", strings.TrimSpace(out))
	}
}

// TestABundleForAnotherEngine: a bundle written for later runs after the
// session that made it has ended and its placeholders are gone: runc,
// started in another directory, finds the stand-ins in the bundle, the
// absent protected paths stay read-only and .git/config too, and the
// workspace is writable.
func TestABundleForAnotherEngine(t *testing.T) {
	runc, err := exec.LookPath("runc")
	testenv.Require(t, err == nil, "runc (Debian's runc package): %v", err)
	ws := gitWorkspace(t)
	sb, err := bwrap.NewPolicy(ws, testHarness).Prepare(os.Environ())
	if err != nil {
		t.Fatal(err)
	}
	// Absent paths are masked by empty directories (files too: .envrc),
	// which the session made and removes.
	var dirs []string
	for _, p := range sb.Placeholders() {
		if p.Dir {
			dirs = append(dirs, p.Path)
		}
	}
	vscode, envrc := filepath.Join(ws, ".vscode"), filepath.Join(ws, ".envrc")
	if !slices.Contains(dirs, vscode) || !slices.Contains(dirs, envrc) {
		t.Fatalf("no placeholders of .vscode and .envrc to stand in for: %+v", sb.Placeholders())
	}
	script := `touch ok && echo ws-writable; (echo x >> .git/config) 2>/dev/null || echo config-ro; ` +
		`(echo x > .envrc) 2>/dev/null || echo envrc-masked; touch .vscode/tasks.json 2>/dev/null || echo vscode-ro`
	bundle := filepath.Join(t.TempDir(), "bundle")
	if err := WriteBundle(sb, []string{"/bin/sh", "-c", script}, DefaultOptions(), bundle); err != nil {
		t.Fatal(err)
	}
	sb.Close()
	if _, err := os.Lstat(vscode); err == nil {
		t.Fatalf("the placeholder %s outlived its session", vscode)
	}
	var id [6]byte
	rand.Read(id[:])
	name, state := "cordon-test-"+hex.EncodeToString(id[:]), t.TempDir()
	defer exec.Command(runc, "--root", state, "delete", "--force", name).Run()
	cmd := exec.Command(runc, "--root", state, "run", "--bundle", bundle, name)
	cmd.Dir = t.TempDir()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("runc run: %v\n%s", err, out)
	}
	for _, want := range []string{"ws-writable", "config-ro", "envrc-masked", "vscode-ro"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the container did not say %q:\n%s", want, out)
		}
	}
	if _, err := os.Stat(filepath.Join(vscode, "tasks.json")); err == nil {
		t.Error("the container wrote .vscode/tasks.json")
	}
}

// TestDetectTakesAFreshProof: Detect proves a runtime by running a
// bundle and keeps the proof in the state directory; another process
// (here: the cache of this one emptied) takes a proof of the same file
// from the last hour instead of running one, and runs one again when the
// proof is older or of another file.
func TestDetectTakesAFreshProof(t *testing.T) {
	_, err := exec.LookPath("runc")
	testenv.Require(t, err == nil, "runc (Debian's runc package): %v", err)
	h := testenv.Harness(t)
	forget := func() {
		detectMu.Lock()
		clear(detected)
		detectMu.Unlock()
	}
	forget()
	rt, err := Detect(context.Background(), os.Getenv("PATH"), "", h)
	if err != nil {
		t.Fatal(err)
	}
	file := proofFile(h.StateDir(), rt.Path)
	var p proof
	if data, err := os.ReadFile(file); err != nil || json.Unmarshal(data, &p) != nil || p.Path != rt.Path || p.Version != rt.Version {
		t.Fatalf("no proof of %s kept: %v %+v", rt.Path, err, p)
	}
	rewrite := func(f func(*proof)) {
		q := p
		f(&q)
		data, _ := json.Marshal(q)
		os.WriteFile(file, data, 0o600)
		forget()
	}
	rewrite(func(q *proof) { q.Version = "proved elsewhere" })
	if got, err := Detect(context.Background(), os.Getenv("PATH"), "", h); err != nil || got.Version != "proved elsewhere" {
		t.Errorf("a fresh proof was not taken: %+v %v", got, err)
	}
	for name, f := range map[string]func(*proof){
		"older than an hour": func(q *proof) { q.Version, q.At = "proved elsewhere", q.At.Add(-2*time.Hour) },
		"of another file":    func(q *proof) { q.Version, q.Ino = "proved elsewhere", q.Ino+1 },
		"of another user":    func(q *proof) { q.Version, q.UID = "proved elsewhere", q.UID+1 },
	} {
		rewrite(f)
		if got, err := Detect(context.Background(), os.Getenv("PATH"), "", h); err != nil || got.Version == "proved elsewhere" {
			t.Errorf("a proof %s was taken: %+v %v", name, got, err)
		}
	}
}

// TestDetectJudgesEachWorkspace: a runtime detected for one workspace is
// judged again for another: one inside the workspace is never run there,
// whatever an earlier Detect of the same PATH found.
func TestDetectJudgesEachWorkspace(t *testing.T) {
	h := testenv.Harness(t)
	ws := gitWorkspace(t)
	bin := filepath.Join(ws, ".local", "bin")
	os.MkdirAll(bin, 0o755)
	os.WriteFile(filepath.Join(bin, "runc"), []byte("#!/bin/sh\nexit 1\n"), 0o755)
	path := bin + ":/nonexistent"
	if _, err := Detect(context.Background(), path, "", h); err == nil || strings.Contains(err.Error(), "inside the workspace") {
		t.Fatalf("Detect without a workspace: %v", err)
	}
	_, err := Detect(context.Background(), path, ws, h)
	if err == nil || !strings.Contains(err.Error(), "inside the workspace") {
		t.Errorf("Detect for the workspace %s ran (or judged by an earlier answer) the runc inside it: %v", ws, err)
	}
}

// TestCrunRunsOrIsRefusedWithItsReason: with crun alone on PATH, Detect
// either proves it (and a sandbox's bundle then runs under it) or fails
// closed, naming crun and what it said — on a host whose cgroups are in
// the hybrid layout, crun 1.8 refuses them.
func TestCrunRunsOrIsRefusedWithItsReason(t *testing.T) {
	crun, err := exec.LookPath("crun")
	testenv.Require(t, err == nil, "crun (Debian's crun package): %v", err)
	dir := t.TempDir()
	os.Chmod(dir, 0o755)
	if err := os.Symlink(crun, filepath.Join(dir, "crun")); err != nil {
		t.Fatal(err)
	}
	h := testenv.Harness(t)
	rt, err := Detect(context.Background(), dir, "", h)
	if err != nil {
		if !errors.Is(err, refusal.SandboxUnavailable) || !strings.Contains(err.Error(), "crun: a bundle of `true` failed") || !strings.Contains(err.Error(), "runc: not found") {
			t.Fatalf("crun refused without its reason: %v", err)
		}
		t.Logf("crun refused, as it should be where it cannot run a bundle: %v", err)
		if hybridCgroups() && !strings.Contains(err.Error(), "hybrid") {
			t.Errorf("on a hybrid cgroup layout the refusal does not say so: %v", err)
		}
		return
	}
	if rt.Name != "crun" {
		t.Fatalf("Detect found %+v with crun alone on PATH", rt)
	}
	ws := gitWorkspace(t)
	os.WriteFile(filepath.Join(ws, "notes.txt"), []byte("one\n"), 0o644)
	o, err := Run(context.Background(), RunSpec{Spec: bwrap.Spec{Policy: bwrap.NewPolicy(ws, testHarness), Environ: os.Environ(),
		Command: []string{"sh", "-c", "echo two >> notes.txt; (echo x >> .git/config) 2>/dev/null || echo config-ro"}, Timeout: 20 * time.Second, MaxOutput: 1 << 16}, Runtime: rt})
	if err != nil || o.ExitCode != 0 || strings.TrimSpace(o.Stdout) != "config-ro" {
		t.Fatalf("the sandbox under crun: %+v %v", o, err)
	}
	if data, _ := os.ReadFile(filepath.Join(ws, "notes.txt")); string(data) != "one\ntwo\n" {
		t.Errorf("the workspace under crun holds %q", data)
	}
}

// hybridCgroups reports whether cgroup v1 controllers are mounted beside
// a v2 tree (systemd's hybrid layout).
func hybridCgroups() bool {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return false
	}
	s := string(data)
	return strings.Contains(s, " - cgroup2 ") && strings.Contains(s, " - cgroup ")
}
