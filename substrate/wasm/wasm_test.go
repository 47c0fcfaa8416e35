package wasm

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	experimentalsys "github.com/tetratelabs/wazero/experimental/sys"

	"github.com/cordon-run/cordon/capabilities"
	"github.com/cordon-run/cordon/harness"
	"github.com/cordon-run/cordon/internal/testenv"
	"github.com/cordon-run/cordon/internal/wasmtest"
	"github.com/cordon-run/cordon/refusal"
	"github.com/cordon-run/cordon/substrate/workspace"
)

func TestMain(m *testing.M) {
	if helperMain() {
		return
	}
	// The default state directory, where a workspace's change records
	// itself, is the test binary's own.
	done := testenv.PrivateXDG()
	code := m.Run()
	done()
	wasmtest.RemoveBuilds()
	sharedEngine.close()
	os.Exit(code)
}

// sharedEngine compiles each module once for the whole test binary, as a
// long-lived cordon would.
var sharedEngine engineOnce

type engineOnce struct {
	once sync.Once
	e    *Engine
	err  error
}

func (o *engineOnce) get(t testing.TB) *Engine {
	t.Helper()
	o.once.Do(func() { o.e, o.err = New(Config{}) })
	if o.err != nil {
		t.Fatal(o.err)
	}
	return o.e
}

func (o *engineOnce) close() {
	if o.e != nil {
		o.e.Close()
	}
}

func policy(t testing.TB, caps ...string) Policy {
	t.Helper()
	set, err := capabilities.ParseSet(caps)
	if err != nil {
		t.Fatal(err)
	}
	p, err := PolicyOf(set)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// layout makes a workspace beside an outside directory with a secret, with
// links out, harness state, a FIFO and a hard link to the secret.
func layout(t testing.TB) (ws *workspace.Workspace, root, outside string) {
	t.Helper()
	base := t.TempDir()
	root = filepath.Join(base, "ws")
	outside = filepath.Join(base, "outside")
	for _, d := range []string{root, outside, filepath.Join(root, "sub"), filepath.Join(root, ".efferent"), filepath.Join(root, ".foundry")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	mustWrite(t, filepath.Join(outside, "secret"), "secret\n")
	mustWrite(t, filepath.Join(root, ".efferent", "key"), "key\n")
	mustWrite(t, filepath.Join(root, "in.txt"), "inside\n")
	for name, target := range map[string]string{"link-out": "../outside", "link-abs": outside, "link-harness": ".efferent"} {
		if err := os.Symlink(target, filepath.Join(root, name)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Link(filepath.Join(outside, "secret"), filepath.Join(root, "hard")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(root, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	ws, err := workspace.Open(root)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close() })
	return ws, root, outside
}

func mustWrite(t testing.TB, p, s string) {
	t.Helper()
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

// assertUntouched checks that the secret outside and the harness state are
// as layout made them.
func assertUntouched(t *testing.T, root, outside string) {
	t.Helper()
	for p, want := range map[string]string{filepath.Join(outside, "secret"): "secret\n", filepath.Join(root, ".efferent", "key"): "key\n"} {
		got, err := os.ReadFile(p)
		if err != nil || string(got) != want {
			t.Errorf("%s: %q, %v; want %q unchanged", p, got, err, want)
		}
	}
	entries, _ := os.ReadDir(outside)
	if len(entries) != 1 {
		t.Errorf("the outside directory changed: %v", entries)
	}
	for _, h := range []string{".efferent", ".foundry"} {
		entries, _ := os.ReadDir(filepath.Join(root, h))
		if h == ".foundry" && len(entries) != 0 || h == ".efferent" && len(entries) != 1 {
			t.Errorf("%s changed: %v", h, entries)
		}
	}
}

func load(t testing.TB, bin []byte) *Module {
	t.Helper()
	m, err := Load(bin)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func run(t testing.TB, c Call) Result {
	t.Helper()
	res, err := sharedEngine.get(t).Run(context.Background(), c)
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	return res
}

func lines(res Result) map[string]string {
	out := map[string]string{}
	for _, l := range strings.Split(string(res.Stdout.Head()), "\n") {
		if k, v, ok := strings.Cut(l, ": "); ok {
			out[k] = v
		}
	}
	return out
}

// A Go tool built by the standard toolchain imports the whole WASI set;
// with fs.read:workspace alone it is admitted, reads, and every write
// attempt fails without changing anything.
func TestGoToolReadOnly(t *testing.T) {
	bin := wasmtest.Go(t, "substrate/wasm/testdata/guest")
	ins, err := Enforcer{}.Inspect(context.Background(), bin, false)
	if err != nil {
		t.Fatalf("inspect: %v", err)
	}
	if len(ins.Needs) != 0 {
		t.Fatalf("a pure WASI tool needs %v, want nothing", ins.Needs)
	}
	if m, ok := ins.Artifact.(*Module); !ok || len(m.Imports()) == 0 {
		t.Fatalf("the inspection's artifact is %T, want the module read", ins.Artifact)
	}
	m := load(t, bin)
	p := policy(t, "fs.read:workspace")
	plan, err := p.Plan(m)
	if err != nil {
		t.Fatalf("plan: %v", err)
	}
	for _, s := range plan {
		if s.By == "stub" {
			t.Errorf("%s is a stub; with fs.read only, every WASI function the module imports is wazero's, and the read-only guard answers changes", s.Import.Name)
		}
		if s.Import.Name == "path_unlink_file" && s.Mechanism != MechGuardRead.String() {
			t.Errorf("path_unlink_file is served by %q, want the read-only guard", s.Mechanism)
		}
	}
	ws, root, outside := layout(t)
	res := run(t, Call{Module: m, Workspace: ws, Policy: p, Args: []string{"guest", "read-then-write"}})
	got := lines(res)
	const eROFS = "errno 69"
	want := map[string]string{
		"read in.txt":   "ok",
		"content":       `"inside\n"`,
		"write out.txt": eROFS, // path_open with O_CREAT: the read-only mount
		"append in.txt": eROFS, // path_open for writing: the read-only mount
		"remove in.txt": eROFS, // path_unlink_file: the read-only mount
		"mkdir d":       eROFS, // path_create_directory: the read-only mount
		"rename in.txt": eROFS, // path_rename: the read-only mount
	}
	refused := 0
	for _, r := range res.Refusals {
		if r.Error == "CapabilityRefused" && strings.Contains(r.Message, "fs.write:workspace") {
			refused++
		}
	}
	if refused != 5 {
		t.Errorf("%d of the 5 changes were recorded as refusals: %+v", refused, res.Refusals)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %q, want %q (stdout %q, stderr %q)", k, got[k], v, res.Stdout.Head(), res.Stderr.Head())
		}
	}
	if res.ExitCode != 0 {
		t.Errorf("exit %d", res.ExitCode)
	}
	if data, _ := os.ReadFile(filepath.Join(root, "in.txt")); string(data) != "inside\n" {
		t.Errorf("in.txt changed: %q", data)
	}
	for _, p := range []string{"out.txt", "d", "moved.txt"} {
		if _, err := os.Lstat(filepath.Join(root, p)); err == nil {
			t.Errorf("%s was created", p)
		}
	}
	assertUntouched(t, root, outside)
}

// The escape cases, from a real Go tool with the strongest grant.
func TestGoToolEscapes(t *testing.T) {
	m := load(t, wasmtest.Go(t, "substrate/wasm/testdata/guest"))
	ws, root, outside := layout(t)
	res := run(t, Call{Module: m, Workspace: ws, Policy: policy(t, "fs.write:workspace"), Args: []string{"guest", "escape"}})
	got := lines(res)
	const eACCES, eNOENT, ePERM = "errno 2", "errno 44", "errno 63"
	want := map[string]string{
		// The guest's "/" is the workspace: ".." at its root stays there, as
		// in a chroot, and this file does not exist in the workspace.
		"read ../outside/secret":         eNOENT,
		"read link-out/secret":           ePERM, // the guard refuses the symlink out
		"read link-abs/secret":           ePERM,
		"read .efferent/key":             eNOENT, // harness state is absent
		"read .EFFERENT/key":             eNOENT,
		"read sub/../.efferent/key":      eNOENT,
		"read link-harness/key":          eNOENT,
		"read /etc/passwd":               eNOENT, // the workspace's etc/passwd
		"read fifo":                      eACCES, // not a regular file, and no blocking on it
		"write link-out/new":             ePERM,
		"write .efferent/new":            eACCES,
		"write link-harness/new":         eACCES,
		"write hard":                     ePERM, // a second hard link: no write through it
		"mkdir .foundry":                 eACCES,
		"rename in.txt -> .efferent/key": eACCES,
		"remove link-out/secret":         ePERM,
		"list .":                         "ok",
		"cwd":                            "/",
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %q, want %q", k, got[k], v)
		}
	}
	names := got["names"]
	for _, h := range []string{".efferent", ".foundry"} {
		if strings.Contains(" "+names+" ", " "+h+" ") {
			t.Errorf("the listing shows harness state %s: %q", h, names)
		}
	}
	if !strings.Contains(names, "in.txt") {
		t.Errorf("the listing misses in.txt: %q", names)
	}
	if res.RefusalsCount == 0 {
		t.Error("no refusal recorded")
	}
	assertUntouched(t, root, outside)
	if _, err := os.Lstat(filepath.Join(root, "in.txt")); err != nil {
		t.Errorf("in.txt: %v", err)
	}
}

func TestGoToolWrites(t *testing.T) {
	m := load(t, wasmtest.Go(t, "substrate/wasm/testdata/guest"))
	ws, root, outside := layout(t)
	res := run(t, Call{Module: m, Workspace: ws, Policy: policy(t, "fs.write:workspace"), Args: []string{"guest", "write"}})
	for k, v := range lines(res) {
		if v != "ok" {
			t.Errorf("%s: %s", k, v)
		}
	}
	if data, err := os.ReadFile(filepath.Join(root, "sub", "d", "new.txt")); err != nil || string(data) != "made by a module\n" {
		t.Errorf("sub/d/new.txt: %q %v", data, err)
	}
	if _, err := os.Lstat(filepath.Join(root, "in.txt")); err == nil {
		t.Error("in.txt was not removed")
	}
	assertUntouched(t, root, outside)
}

// Without any file-system grant nothing is mounted and every path_*
// function is a stub.
func TestGoToolNoFilesystem(t *testing.T) {
	m := load(t, wasmtest.Go(t, "substrate/wasm/testdata/guest"))
	_, root, outside := layout(t)
	res := run(t, Call{Module: m, Policy: policy(t), Args: []string{"guest", "escape"}})
	for k, v := range lines(res) {
		if strings.HasPrefix(k, "read ") || strings.HasPrefix(k, "write ") {
			if v == "ok" {
				t.Errorf("%s succeeded without a file-system grant", k)
			}
		}
	}
	assertUntouched(t, root, outside)
}

func TestGoToolEnv(t *testing.T) {
	m := load(t, wasmtest.Go(t, "substrate/wasm/testdata/guest"))
	env := map[string]string{"GRANTED": "yes", "SECRET_TOKEN": "hunter2"}
	res := run(t, Call{Module: m, Policy: policy(t, "env:GRANTED"), Args: []string{"guest", "env"},
		Getenv: func(k string) string { return env[k] }})
	out := string(res.Stdout.Head())
	if out != "GRANTED=yes\n" {
		t.Errorf("environ: %q, want only the granted variable", out)
	}
}

func TestGoToolExitPanicAndOutput(t *testing.T) {
	m := load(t, wasmtest.Go(t, "substrate/wasm/testdata/guest"))
	if res := run(t, Call{Module: m, Policy: policy(t), Args: []string{"guest", "exit"}}); res.ExitCode != 3 {
		t.Errorf("os.Exit(3): exit %d", res.ExitCode)
	}
	res := run(t, Call{Module: m, Policy: policy(t), Args: []string{"guest", "panic"}})
	if res.ExitCode != 2 || !strings.Contains(res.Stderr.String(), "a tool's bug") {
		t.Errorf("panic: exit %d, stderr %q", res.ExitCode, res.Stderr.String())
	}
	res = run(t, Call{Module: m, Policy: policy(t, "output:4KiB"), Args: []string{"guest", "print"}})
	if res.Stdout.Total() != 64<<20 || !res.Stdout.Clipped() || len(res.Stdout.Head())+len(res.Stdout.Tail()) > 4096 {
		t.Errorf("64MiB of output: total %d, clipped %v, kept %d", res.Stdout.Total(), res.Stdout.Clipped(), len(res.Stdout.Head())+len(res.Stdout.Tail()))
	}
}

// An infinite loop, a Go busy loop and a sleep of an hour all end at the
// deadline.
func TestDeadline(t *testing.T) {
	var loop wasmtest.Module
	loop.Memory(1, 0)
	loop.ExportFunc("_start", loop.Func(nil, nil, nil, wasmtest.Loop, wasmtest.Br(0), wasmtest.End))
	guest := load(t, wasmtest.Go(t, "substrate/wasm/testdata/guest"))
	for _, c := range []struct {
		name string
		m    *Module
		args []string
	}{
		{"loop", load(t, loop.Bytes()), nil},
		{"go spin", guest, []string{"guest", "spin"}},
		{"go sleep", guest, []string{"guest", "sleep"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			res := run(t, Call{Module: c.m, Policy: policy(t, "time:300ms"), Args: c.args})
			if !res.TimedOut || res.ExitCode != ExitTimeout {
				t.Fatalf("timed out %v, exit %d, stdout %q", res.TimedOut, res.ExitCode, res.Stdout.Head())
			}
			if strings.Contains(string(res.Stdout.Head()), "woke") {
				t.Fatal("the sleep finished")
			}
		})
	}
}

func TestTrapIsAResult(t *testing.T) {
	var m wasmtest.Module
	m.Memory(1, 0)
	m.ExportFunc("_start", m.Func(nil, nil, nil, wasmtest.Unreachable))
	res := run(t, Call{Module: load(t, m.Bytes()), Policy: policy(t)})
	if res.ExitCode != ExitTrap || !strings.Contains(res.Trap, "unreachable") {
		t.Fatalf("exit %d, trap %q", res.ExitCode, res.Trap)
	}
	// Out-of-bounds memory access traps too.
	var oob wasmtest.Module
	oob.Memory(1, 0)
	oob.ExportFunc("_start", oob.Func(nil, nil, nil, wasmtest.U32(wasmtest.MaxU32-2), wasmtest.I32Load(0), wasmtest.Drop))
	res = run(t, Call{Module: load(t, oob.Bytes()), Policy: policy(t)})
	if res.ExitCode != ExitTrap || !strings.Contains(res.Trap, "out of bounds") {
		t.Fatalf("exit %d, trap %q", res.ExitCode, res.Trap)
	}
}

// hostCall assembles a module whose _start calls cordon.NAME with args
// (after placing data in memory) and exits with the errno it returned.
func hostCall(name string, data map[uint32][]byte, args ...[]byte) []byte {
	var m wasmtest.Module
	f, _ := findCordonFunc(name)
	params := make([]byte, len(f.params))
	for i, p := range f.params {
		params[i] = byte(p)
	}
	call := m.Import(ModuleCordon, name, params, []byte{wasmtest.I32})
	exit := m.Import(ModuleWASI, "proc_exit", []byte{wasmtest.I32}, nil)
	m.Memory(1, 0)
	for off, d := range data {
		m.Data(off, d)
	}
	body := append([][]byte{}, args...)
	body = append(body, wasmtest.Call(call), wasmtest.Call(exit))
	m.ExportFunc("_start", m.Func(nil, nil, nil, body...))
	return m.Bytes()
}

func TestHostOutOfBounds(t *testing.T) {
	ws, root, outside := layout(t)
	p := policy(t, "fs.write:workspace", "wasm.import:cordon/read", "wasm.import:cordon/write",
		"wasm.import:cordon/list", "wasm.import:cordon/stat", "wasm.import:cordon/log", "wasm.import:cordon/error")
	path := map[uint32][]byte{16: []byte("in.txt")}
	const max = wasmtest.MaxU32
	u := wasmtest.U32
	i64 := wasmtest.I64Const
	cases := []struct {
		name string
		fn   string
		args [][]byte
	}{
		{"read: path beyond memory", "read", [][]byte{u(max - 3), u(6), i64(0), u(1024), u(64), u(2048)}},
		{"read: path length wraps", "read", [][]byte{u(16), u(max), i64(0), u(1024), u(64), u(2048)}},
		{"read: buffer beyond memory", "read", [][]byte{u(16), u(6), i64(0), u(65000), u(1000), u(2048)}},
		{"read: buffer length 4GiB", "read", [][]byte{u(16), u(6), i64(0), u(0), u(max), u(2048)}},
		{"read: result pointer beyond memory", "read", [][]byte{u(16), u(6), i64(0), u(1024), u(64), u(65534)}},
		{"write: buffer beyond memory", "write", [][]byte{u(16), u(6), u(60000), u(10000)}},
		{"write: buffer length 4GiB", "write", [][]byte{u(16), u(6), u(0), u(max)}},
		{"list: buffer beyond memory", "list", [][]byte{u(16), u(1), u(65535), u(2), u(2048)}},
		{"stat: length pointer beyond memory", "stat", [][]byte{u(16), u(6), u(1024), u(64), u(max)}},
		{"log: message beyond memory", "log", [][]byte{u(1), u(65000), u(10000)}},
		{"error: buffer beyond memory", "error", [][]byte{u(max), u(8), u(2048)}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			data := path
			if c.fn == "list" {
				data = map[uint32][]byte{16: []byte(".")}
			}
			res := run(t, Call{Module: load(t, hostCall(c.fn, data, c.args...)), Workspace: ws, Policy: p})
			if res.ExitCode != errnoFault && !(c.fn == "write" && res.ExitCode == errnoFbig) && !(strings.Contains(c.name, "wraps") && res.ExitCode == errnoNametoolong) {
				t.Fatalf("exit %d (trap %q), want EFAULT (21)", res.ExitCode, res.Trap)
			}
		})
	}
	if data, _ := os.ReadFile(filepath.Join(root, "in.txt")); string(data) != "inside\n" {
		t.Errorf("in.txt changed: %q", data)
	}
	assertUntouched(t, root, outside)
}

// The cordon host module's file functions refuse every escape, and
// cordon/error tells the module why.
func TestHostEscapes(t *testing.T) {
	ws, root, outside := layout(t)
	p := policy(t, "fs.write:workspace", "wasm.import:cordon/read", "wasm.import:cordon/write", "wasm.import:cordon/stat")
	u := wasmtest.U32
	for _, c := range []struct {
		path string
		want uint32
	}{
		{"../outside/secret", errnoNotcapable},
		{filepath.Join(outside, "secret"), errnoNotcapable},
		{"link-out/secret", errnoNotcapable},
		{".efferent/key", errnoNotcapable},
		{".Efferent/key", errnoNotcapable},
		{"link-harness/key", errnoNotcapable},
		{"fifo", errnoInval},
		{"in.txt", 0},
	} {
		data := map[uint32][]byte{16: []byte(c.path)}
		n := u(uint32(len(c.path)))
		for _, fn := range []struct {
			name string
			args [][]byte
		}{
			{"read", [][]byte{u(16), n, wasmtest.I64Const(0), u(8192), u(1024), u(4096)}},
			{"stat", [][]byte{u(16), n, u(8192), u(1024), u(4096)}},
			{"write", [][]byte{u(16), n, u(8192), u(5)}},
		} {
			want := c.want
			if fn.name == "stat" && c.path == "fifo" {
				want = 0 // stat describes a FIFO without opening it
			}
			if fn.name == "write" && c.path == "fifo" {
				want = errnoInval // the guard replaces regular files only
			}
			res := run(t, Call{Module: load(t, hostCall(fn.name, data, fn.args...)), Workspace: ws, Policy: p})
			if uint32(res.ExitCode) != want {
				t.Errorf("%s %q: errno %d, want %d", fn.name, c.path, res.ExitCode, want)
			}
		}
	}
	assertUntouched(t, root, outside)
}

// A huge file is read through cordon/read in bounded chunks: the host
// never allocates in proportion to the file, and a Go tool that reads it
// whole runs out of its own memory, not cordon's.
func TestHugeReads(t *testing.T) {
	ws, root, _ := layout(t)
	f, err := os.Create(filepath.Join(root, "huge"))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(1 << 30); err != nil { // sparse: 1GiB that takes no disk
		t.Fatal(err)
	}
	f.Close()
	u := wasmtest.U32
	p := policy(t, "fs.read:workspace", "wasm.import:cordon/read", "memory:64KiB")
	data := map[uint32][]byte{0: []byte("huge")}
	// The whole memory (one page) as the buffer, at an offset past 4GiB.
	mod := load(t, hostCall("read", data, u(0), u(4), wasmtest.I64Const(1<<29), u(0), u(65536), u(8)))
	res := run(t, Call{Module: mod, Workspace: ws, Policy: p})
	if res.ExitCode != 0 {
		t.Fatalf("chunked read: errno %d, trap %q", res.ExitCode, res.Trap)
	}
	guest := load(t, wasmtest.Go(t, "substrate/wasm/testdata/guest"))
	res = run(t, Call{Module: guest, Workspace: ws, Policy: policy(t, "fs.read:workspace", "memory:64MiB"), Args: []string{"guest", "hugeread"}})
	if res.ExitCode == 0 {
		t.Fatalf("a Go tool read 1GiB into 64MiB: stdout %q", res.Stdout.Head())
	}
	if !strings.Contains(res.Stderr.String(), "out of memory") {
		t.Errorf("stderr %q does not say out of memory", res.Stderr.String())
	}
}

func TestAdmissionRefusesImports(t *testing.T) {
	ctx := context.Background()
	build := func(module, name string, params []byte, memoryImport bool) []byte {
		var m wasmtest.Module
		m.Import(module, name, params, []byte{wasmtest.I32})
		m.Memory(1, 0)
		m.ExportFunc("_start", m.Func(nil, nil, nil))
		bin := m.Bytes()
		_ = memoryImport
		return bin
	}
	i32 := wasmtest.I32
	for _, c := range []struct {
		name   string
		bin    []byte
		reason string
	}{
		{"unknown module", build("env", "system", []byte{i32}, false), `"env.system"`},
		{"unknown cordon function", build("cordon", "exec", []byte{i32, i32}, false), `"cordon.exec"`},
		{"unknown WASI function", build("wasi_snapshot_preview1", "sock_open", []byte{i32}, false), `"wasi_snapshot_preview1.sock_open"`},
		{"wrong type", build("wasi_snapshot_preview1", "fd_write", []byte{i32}, false), "its type is"},
	} {
		t.Run(c.name, func(t *testing.T) {
			for _, admitted := range []bool{false, true} {
				_, err := Enforcer{}.Inspect(ctx, c.bin, admitted)
				if !errors.Is(err, ErrImport) || !strings.Contains(err.Error(), c.reason) {
					t.Fatalf("inspect (admitted %v): %v, want an import refusal naming %s", admitted, err, c.reason)
				}
			}
			// Run refuses it too, before linking anything.
			if _, err := sharedEngine.get(t).Run(ctx, Call{Module: load(t, c.bin), Policy: policy(t)}); !errors.Is(err, ErrImport) {
				t.Fatalf("run: %v, want an import refusal", err)
			}
		})
	}
	// A memory import: the host exports functions only.
	mem := []byte("\x00asm\x01\x00\x00\x00\x02\x0f\x01\x03env\x06memory\x02\x00\x01")
	if _, err := (Enforcer{}).Inspect(ctx, mem, false); !errors.Is(err, ErrImport) || !strings.Contains(err.Error(), "memory") {
		t.Fatalf("memory import: %v", err)
	}

	// Granted imports: cordon/write needs wasm.import:cordon/write and
	// fs.write:workspace.
	var w wasmtest.Module
	w.Import("cordon", "write", []byte{i32, i32, i32, i32}, []byte{i32})
	w.Memory(1, 0)
	w.ExportFunc("_start", w.Func(nil, nil, nil))
	ins, err := Enforcer{}.Inspect(ctx, w.Bytes(), false)
	need := ins.Needs
	if err != nil || len(need) != 1 || need[0].String() != "wasm.import:cordon/write" {
		t.Fatalf("inspect: %v %v, want [wasm.import:cordon/write]", need, err)
	}
	m := load(t, w.Bytes())
	if _, err := policy(t, "fs.write:workspace").Plan(m); !errors.Is(err, ErrImport) {
		t.Errorf("cordon/write without its wasm.import: %v", err)
	}
	set := capabilities.MustParseSet("fs.read:workspace", "wasm.import:cordon/write")
	if _, err := (Enforcer{}).Mechanisms(need[0], set); err == nil || !strings.Contains(err.Error(), "fs.write:workspace") {
		t.Errorf("cordon/write with fs.read only: %v, want a refusal naming fs.write:workspace", err)
	}
	if _, err := policy(t, "fs.write:workspace", "wasm.import:cordon/write").Plan(m); err != nil {
		t.Errorf("granted: %v", err)
	}
}

func TestMechanisms(t *testing.T) {
	e := Enforcer{}
	set := capabilities.MustParseSet("fs.read:workspace")
	for _, c := range []struct {
		cap string
		ok  bool
	}{
		{"fs.read:workspace", true}, {"fs.write:workspace", true}, {"net:none", true},
		{"net:host", false}, {"net.connect:tcp:443", false}, {"env:HOME", true},
		{"time:10s", true}, {"output:64KiB", true}, {"memory:64MiB", true},
		{"memory:100000", false}, {"memory:8GiB", false}, {"pids:1", true},
		{"wasm.import:cordon/log", true}, {"wasm.import:cordon/read", true},
		{"wasm.import:cordon/write", false}, {"wasm.import:env/system", false},
		{"wasm.import:wasi_snapshot_preview1/fd_write", false},
	} {
		cap, err := capabilities.Parse(c.cap)
		if err != nil {
			t.Fatal(err)
		}
		ms, err := e.Mechanisms(cap, set)
		if c.ok != (err == nil) {
			t.Errorf("%s: %v %v", c.cap, ms, err)
		}
		if err == nil && len(ms) == 0 {
			t.Errorf("%s: granted without a mechanism", c.cap)
		}
		if err != nil {
			var ue interface{ Unwrap() error }
			if !errors.As(err, &ue) {
				t.Errorf("%s: %T is not an UnenforceableError", c.cap, err)
			}
		}
	}
	f, err := e.Facts(context.Background())
	if err != nil || f.Values["wazero.version"] == "" {
		t.Errorf("facts: %v %v", f, err)
	}
}

// Without fs.write a change reaches wazero's own function and then the
// read-only guard: a real path_unlink_file answers EROFS and removes
// nothing; under fs.write it removes the file.
func TestChangeUnderReadOnlyIsEROFS(t *testing.T) {
	ws, root, _ := layout(t)
	var m wasmtest.Module
	i32 := wasmtest.I32
	unlink := m.Import(ModuleWASI, "path_unlink_file", []byte{i32, i32, i32}, []byte{i32})
	exit := m.Import(ModuleWASI, "proc_exit", []byte{i32}, nil)
	m.Memory(1, 0)
	m.Data(0, []byte("in.txt"))
	m.ExportFunc("_start", m.Func(nil, nil, nil, wasmtest.U32(3), wasmtest.U32(0), wasmtest.U32(6), wasmtest.Call(unlink), wasmtest.Call(exit)))
	mod := load(t, m.Bytes())
	res := run(t, Call{Module: mod, Workspace: ws, Policy: policy(t, "fs.read:workspace")})
	if res.ExitCode != 69 {
		t.Fatalf("path_unlink_file under fs.read: errno %d, want 69 (EROFS)", res.ExitCode)
	}
	if _, err := os.Stat(filepath.Join(root, "in.txt")); err != nil {
		t.Fatalf("in.txt: %v", err)
	}
	// Without any file-system grant nothing is preopened: descriptor 3
	// is no directory, and wazero's answer is EBADF.
	res = run(t, Call{Module: mod, Policy: policy(t)})
	if res.ExitCode != 8 {
		t.Fatalf("path_unlink_file without a grant: errno %d, want 8 (EBADF)", res.ExitCode)
	}
	if _, err := os.Stat(filepath.Join(root, "in.txt")); err != nil {
		t.Fatalf("in.txt: %v", err)
	}
	// The same module under fs.write reaches the guard and removes it.
	res = run(t, Call{Module: mod, Workspace: ws, Policy: policy(t, "fs.write:workspace")})
	if res.ExitCode != 0 {
		t.Fatalf("path_unlink_file under fs.write: errno %d", res.ExitCode)
	}
	if _, err := os.Stat(filepath.Join(root, "in.txt")); err == nil {
		t.Fatal("in.txt was not removed under fs.write")
	}
}

// Errno parity with wazero's own WASI: a bad descriptor is EBADF for the
// socket functions (no socket is ever given), and proc_raise, the one stub,
// answers ENOTCAPABLE.
func TestErrnoParity(t *testing.T) {
	for _, c := range []struct {
		fn     string
		params []byte
		args   [][]byte
		want   int
	}{
		{"sock_shutdown", []byte{wasmtest.I32, wasmtest.I32}, [][]byte{wasmtest.U32(99), wasmtest.U32(2)}, 8},
		// stdout is no socket: wazero answers EBADF too (not ENOTSOCK).
		{"sock_shutdown", []byte{wasmtest.I32, wasmtest.I32}, [][]byte{wasmtest.U32(1), wasmtest.U32(2)}, 8},
		{"proc_raise", []byte{wasmtest.I32}, [][]byte{wasmtest.U32(9)}, errnoNotcapable},
	} {
		var m wasmtest.Module
		fn := m.Import(ModuleWASI, c.fn, c.params, []byte{wasmtest.I32})
		exit := m.Import(ModuleWASI, "proc_exit", []byte{wasmtest.I32}, nil)
		m.Memory(1, 0)
		var body [][]byte
		body = append(body, c.args...)
		body = append(body, wasmtest.Call(fn), wasmtest.Call(exit))
		m.ExportFunc("_start", m.Func(nil, nil, nil, body...))
		res := run(t, Call{Module: load(t, m.Bytes()), Policy: policy(t)})
		if res.ExitCode != c.want {
			t.Errorf("%s%v: errno %d, want %d", c.fn, c.args, res.ExitCode, c.want)
		}
	}
}

// Two tools run at the same time do not see each other's memory, globals,
// output or refusals: every call is a fresh instance.
func TestConcurrentCallsIsolated(t *testing.T) {
	ws, _, _ := layout(t)
	i32 := wasmtest.I32
	// counter: increments a global and a memory word, prints both as two
	// bytes '0'+value, reads "../x" (refused) and prints cordon/error's
	// length class: a fresh instance always prints "11".
	build := func(refuse bool) []byte {
		var m wasmtest.Module
		write := m.Import(ModuleWASI, "fd_write", []byte{i32, i32, i32, i32}, []byte{i32})
		read := m.Import(ModuleCordon, "read", []byte{i32, i32, wasmtest.I64, i32, i32, i32}, []byte{i32})
		errf := m.Import(ModuleCordon, "error", []byte{i32, i32, i32}, []byte{i32})
		m.Memory(1, 0)
		g := m.Global(i32, 0)
		m.Data(200, []byte("../x"))
		m.Data(0, append(wasmtest.Le32(100), wasmtest.Le32(3)...)) // iovec: 3 bytes at 100
		u := wasmtest.U32
		body := [][]byte{
			wasmtest.GlobalGet(g), u(1), wasmtest.I32Add, wasmtest.GlobalSet(g),
			u(104), u(104), wasmtest.I32Load(0), u(1), wasmtest.I32Add, wasmtest.I32Store(0),
			u(100), wasmtest.GlobalGet(g), u('0'), wasmtest.I32Add, wasmtest.I32Store8(0),
			u(101), u(104), wasmtest.I32Load(0), u('0'), wasmtest.I32Add, wasmtest.I32Store8(0),
		}
		if refuse {
			body = append(body, u(200), u(4), wasmtest.I64Const(0), u(300), u(8), u(400), wasmtest.Call(read), wasmtest.Drop)
		}
		// cordon/error: "null" (4 bytes) when this call refused nothing.
		body = append(body, u(500), u(1000), u(408), wasmtest.Call(errf), wasmtest.Drop,
			u(102), u(408), wasmtest.I32Load(0), u(4), wasmtest.I32Eq, u('0'), wasmtest.I32Add, wasmtest.I32Store8(0),
			u(1), u(0), u(1), u(412), wasmtest.Call(write), wasmtest.Drop)
		m.ExportFunc("_start", m.Func(nil, nil, nil, body...))
		return m.Bytes()
	}
	refuser, quiet := load(t, build(true)), load(t, build(false))
	p := policy(t, "fs.read:workspace", "wasm.import:cordon/read", "wasm.import:cordon/error")
	var wg sync.WaitGroup
	errs := make(chan string, 200)
	for i := 0; i < 50; i++ {
		for _, c := range []struct {
			m    *Module
			want string
		}{{refuser, "110"}, {quiet, "111"}} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				res, err := sharedEngine.get(t).Run(context.Background(), Call{Module: c.m, Workspace: ws, Policy: p})
				if err != nil {
					errs <- err.Error()
					return
				}
				if got := string(res.Stdout.Head()); got != c.want {
					errs <- "stdout " + got + ", want " + c.want
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

func TestCordonLogBounded(t *testing.T) {
	var m wasmtest.Module
	i32 := wasmtest.I32
	logf := m.Import(ModuleCordon, "log", []byte{i32, i32, i32}, []byte{i32})
	m.Memory(1, 0)
	m.Data(0, []byte(strings.Repeat("z", 4000)))
	u := wasmtest.U32
	// 5000 lines of 4000 bytes: kept bounded.
	m.ExportFunc("_start", m.Func(nil, nil, []byte{i32},
		wasmtest.Loop,
		u(1), u(0), u(4000), wasmtest.Call(logf), wasmtest.Drop,
		wasmtest.LocalGet(0), u(1), wasmtest.I32Add, wasmtest.LocalSet(0),
		wasmtest.LocalGet(0), u(5000), wasmtest.I32LtU, wasmtest.BrIf(0),
		wasmtest.End))
	res := run(t, Call{Module: load(t, m.Bytes()), Policy: policy(t, "wasm.import:cordon/log")})
	total := 0
	for _, l := range res.Log {
		total += len(l.Message)
		if len(l.Message) > maxLogMessage {
			t.Fatalf("a log line of %d bytes", len(l.Message))
		}
	}
	if total > maxLogBytes || res.LogDropped == 0 || len(res.Log)+res.LogDropped != 5000 {
		t.Fatalf("kept %d lines (%d bytes), dropped %d", len(res.Log), total, res.LogDropped)
	}
	data, _ := json.Marshal(res.Log[0])
	if !strings.Contains(string(data), `"level":"info"`) {
		t.Errorf("log line %s", data)
	}
}

func TestMemoryMinimumAboveCapRefused(t *testing.T) {
	var m wasmtest.Module
	m.Memory(100, 0) // 6.25MiB at start
	m.ExportFunc("_start", m.Func(nil, nil, nil))
	_, err := sharedEngine.get(t).Run(context.Background(), Call{Module: load(t, m.Bytes()), Policy: policy(t, "memory:1MiB")})
	if !errors.Is(err, ErrModule) {
		t.Fatalf("a module whose memory starts above the cap: %v", err)
	}
}

var _ = time.Second

// The compilation cache is machine code cordon runs in its own process:
// CacheDir keeps it in the per-user cache directory, never follows a
// symlink planted where it should be, and refuses a directory another user
// could write.
func TestCacheDirIsTrusted(t *testing.T) {
	base := t.TempDir()
	outside := filepath.Join(base, "outside")
	os.MkdirAll(outside, 0o755)
	h := harness.Default().WithStateDir(filepath.Join(base, "state"))

	cache := filepath.Join(base, "cache")
	if err := os.Symlink(outside, cache); err != nil {
		t.Fatal(err)
	}
	if dir, err := CacheDir(h.WithCacheDir(cache)); err == nil || !errors.Is(err, refusal.UntrustedState) {
		t.Fatalf("CacheDir followed a symlinked cache directory to %s: %v", dir, err)
	}
	os.Remove(cache)
	os.Mkdir(cache, 0o700)
	if err := os.Symlink(outside, filepath.Join(cache, "wasm")); err != nil {
		t.Fatal(err)
	}
	if dir, err := CacheDir(h.WithCacheDir(cache)); err == nil {
		t.Fatalf("CacheDir followed a symlinked wasm directory to %s", dir)
	}
	if entries, _ := os.ReadDir(outside); len(entries) != 0 {
		t.Fatalf("something was created outside: %v", entries)
	}
	os.Remove(filepath.Join(cache, "wasm"))
	os.Chmod(cache, 0o777)
	if _, err := CacheDir(h.WithCacheDir(cache)); !errors.Is(err, refusal.UntrustedState) || !strings.Contains(err.Error(), "0700") {
		t.Fatalf("CacheDir accepted a world-writable cache directory: %v", err)
	}
	os.Chmod(cache, 0o700)
	dir, err := CacheDir(h.WithCacheDir(cache))
	if err != nil || dir != filepath.Join(cache, "wasm") {
		t.Fatalf("CacheDir: %q %v", dir, err)
	}
	if st, err := os.Stat(dir); err != nil || st.Mode().Perm() != 0o700 {
		t.Fatalf("the cache directory is %v, %v; want mode 0700", st, err)
	}
}

// TestGoToolPOSIX: under fs.write a module built by Go's toolchain makes
// symlinks (followed only inside), hard links (never into harness state),
// sets times, and gets the kernel's answer for a trailing slash after a
// file; fixed arguments reach its argv.
func TestGoToolPOSIX(t *testing.T) {
	m := load(t, wasmtest.Go(t, "substrate/wasm/testdata/guest"))
	ws, root, outside := layout(t)
	res := run(t, Call{Module: m, Workspace: ws, Policy: policy(t, "fs.write:workspace"), Args: []string{"guest", "posix", "--flag", "x"}})
	got := lines(res)
	const ePERM, eNOENT, eNOTDIR, eACCES = "errno 63", "errno 44", "errno 54", "errno 2"
	want := map[string]string{
		"args":              "--flag x",
		"symlink ln-in":     "ok",
		"read ln-in":        "ok",
		"through ln-in":     `"inside\n"`,
		"symlink ln-out":    "ok",
		"read ln-out":       ePERM,
		"write ln-out":      ePERM,
		"link in-hard":      "ok",
		"link .efferent/k2": eACCES,
		"chtimes in.txt":    "ok",
		"chtimes in-hard":   ePERM,
		"mtime":             "2001-02-03T04:05:06Z",
		"remove in.txt/":    eNOTDIR,
		"open in.txt/":      eNOTDIR,
		"open .":            "ok",
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %q, want %q (stdout %q, stderr %q)", k, got[k], v, res.Stdout.Head(), res.Stderr.Head())
		}
	}
	if target, err := os.Readlink(filepath.Join(root, "ln-out")); err != nil || target != "../outside/secret" {
		t.Errorf("ln-out: %q, %v", target, err)
	}
	if data, _ := os.ReadFile(filepath.Join(root, "in.txt")); string(data) != "inside\n" {
		t.Errorf("in.txt changed: %q", data)
	}
	if _, err := os.Lstat(filepath.Join(root, ".efferent", "k2")); err == nil {
		t.Error("a hard link was made in harness state")
	}
	assertUntouched(t, root, outside)
}

// TestFileTimesByDescriptor: fd_filestat_set_times sets times through the
// descriptor only on a file opened for writing (which passed the guard's
// checks for a change); on one opened for reading it answers EPERM, and
// wazero falls back to the path, which the guard checks.
func TestFileTimesByDescriptor(t *testing.T) {
	ws, root, _ := layout(t)
	g := &guardFS{ws: ws, write: true}
	const when = int64(981173106) * 1e9
	ro, errno := g.OpenFile("in.txt", experimentalsys.O_RDONLY, 0)
	if errno != 0 {
		t.Fatal(errno)
	}
	defer ro.Close()
	if errno := ro.Utimens(when, when); errno != experimentalsys.EPERM {
		t.Errorf("times through a read-only descriptor: %v, want EPERM", errno)
	}
	rw, errno := g.OpenFile("in.txt", experimentalsys.O_WRONLY, 0)
	if errno != 0 {
		t.Fatal(errno)
	}
	defer rw.Close()
	if errno := rw.Utimens(experimentalsys.UTIME_OMIT, when); errno != 0 {
		t.Fatalf("times through a writable descriptor: %v", errno)
	}
	if fi, err := os.Stat(filepath.Join(root, "in.txt")); err != nil || fi.ModTime().UnixNano() != when {
		t.Errorf("mtime %v (%v), want %d", fi.ModTime(), err, when)
	}
}
