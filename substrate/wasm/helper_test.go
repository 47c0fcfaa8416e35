package wasm

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/cordon-run/cordon/internal/testenv"
	"github.com/cordon-run/cordon/internal/wasmtest"
)

// The tests below run parts of themselves in a re-executed copy of the
// test binary: a fresh process is what a memory high-water mark and a
// second cordon process with a cold in-memory cache need.
const helperEnv = "CORDON_WASM_TEST_HELPER"

// helperMain runs the helper named by the environment and reports whether
// it did (then the process must not run the tests).
func helperMain() bool {
	mode := os.Getenv(helperEnv)
	if mode == "" {
		return false
	}
	var out any
	var err error
	switch mode {
	case "grow":
		out, err = helperGrow()
	case "cache":
		out, err = helperCache()
	default:
		err = fmt.Errorf("unknown helper %q", mode)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		os.Exit(1)
	}
	json.NewEncoder(os.Stdout).Encode(out)
	return true
}

// runHelper re-executes the test binary as helper mode.
func runHelper(t *testing.T, mode string, env ...string) []byte {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), append(env, helperEnv+"="+mode)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("helper %s: %v: %s", mode, err, stderr.String())
	}
	return out
}

// growModule grows its memory 16MiB at a time toward 4GiB, writing to
// every new page, until the runtime refuses; it exits with the number of
// 16MiB steps it holds.
func growModule() []byte {
	var m wasmtest.Module
	exit := m.Import(ModuleWASI, "proc_exit", []byte{wasmtest.I32}, nil)
	m.Memory(0, 0)
	u := wasmtest.U32
	shl, shr := []byte{0x74}, []byte{0x76}
	const addr, end = 0, 1
	m.ExportFunc("_start", m.Func(nil, nil, []byte{wasmtest.I32, wasmtest.I32},
		wasmtest.Block, wasmtest.Loop,
		u(256), wasmtest.MemoryGrow, wasmtest.LocalSet(addr),
		wasmtest.LocalGet(addr), u(wasmtest.MaxU32), wasmtest.I32Eq, wasmtest.BrIf(1),
		// Touch every new page of the host (4KiB).
		wasmtest.LocalGet(addr), u(16), shl, wasmtest.LocalSet(addr),
		wasmtest.MemorySize, u(16), shl, wasmtest.LocalSet(end),
		wasmtest.Loop,
		wasmtest.LocalGet(addr), u(1), wasmtest.I32Store(0),
		wasmtest.LocalGet(addr), u(4096), wasmtest.I32Add, wasmtest.LocalSet(addr), // every host page
		wasmtest.LocalGet(addr), wasmtest.LocalGet(end), wasmtest.I32LtU, wasmtest.BrIf(0),
		wasmtest.End,
		wasmtest.Br(0),
		wasmtest.End, wasmtest.End,
		wasmtest.MemorySize, u(8), shr, wasmtest.Call(exit)))
	return m.Bytes()
}

type growReport struct {
	ExitCode     int   `json:"exit_code"`
	HWMBeforeKiB int64 `json:"hwm_before_kib"`
	HWMAfterKiB  int64 `json:"hwm_after_kib"`
	RSSAfterKiB  int64 `json:"rss_after_kib"`
}

func helperGrow() (any, error) {
	limit, err := strconv.ParseInt(os.Getenv("CORDON_WASM_LIMIT"), 10, 64)
	if err != nil {
		return nil, err
	}
	e, err := New(Config{})
	if err != nil {
		return nil, err
	}
	defer e.Close()
	m, err := Load(growModule())
	if err != nil {
		return nil, err
	}
	p := Policy{MemoryLimit: limit, Timeout: DefaultTimeout, OutputLimit: DefaultOutputLimit}
	// Warm up: runtime, host modules, compiled code.
	if _, err := e.Run(context.Background(), Call{Module: m, Policy: Policy{MemoryLimit: PageSize, Timeout: DefaultTimeout, OutputLimit: 1}}); err != nil {
		return nil, err
	}
	var rep growReport
	rep.HWMBeforeKiB = vmStatus("VmHWM:")
	res, err := e.Run(context.Background(), Call{Module: m, Policy: p})
	if err != nil {
		return nil, err
	}
	rep.HWMAfterKiB = vmStatus("VmHWM:")
	rep.RSSAfterKiB = vmStatus("VmRSS:")
	rep.ExitCode = res.ExitCode
	return rep, nil
}

// vmStatus returns a field of /proc/self/status in KiB, or -1.
func vmStatus(field string) int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return -1
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if rest, ok := strings.CutPrefix(s.Text(), field); ok {
			n, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return n
		}
	}
	return -1
}

// A module that grows its memory toward 4GiB, using every page, stops at
// its cap (64MiB: exactly four 16MiB steps). cordon's own peak memory
// grows by the cap, not by gigabytes, and goes back down when the call
// ends.
func TestMemoryCapHoldsAndCordonStaysFlat(t *testing.T) {
	testenv.Require(t, runtime.GOOS == "linux", "VmHWM is read from /proc")
	const limit = 64 << 20
	var rep growReport
	if err := json.Unmarshal(runHelper(t, "grow", "CORDON_WASM_LIMIT="+strconv.Itoa(limit)), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.ExitCode != 4 {
		t.Fatalf("the module holds %d 16MiB steps, want 4 (the 64MiB cap)", rep.ExitCode)
	}
	grown := (rep.HWMAfterKiB - rep.HWMBeforeKiB) << 10
	t.Logf("peak RSS %d MiB before the call, %d MiB after (+%d MiB for a 64MiB cap); RSS after the call %d MiB",
		rep.HWMBeforeKiB>>10, rep.HWMAfterKiB>>10, grown>>20, rep.RSSAfterKiB>>10)
	if grown > limit+32<<20 {
		t.Errorf("cordon's peak memory grew by %d MiB for a module capped at 64MiB", grown>>20)
	}
	if grown < limit/2 {
		t.Errorf("peak memory grew by %d MiB only: the module did not use its memory, the test proves nothing", grown>>20)
	}
	if rep.RSSAfterKiB<<10 > rep.HWMBeforeKiB<<10+16<<20 {
		t.Errorf("after the call cordon still holds %d MiB (%d MiB before)", rep.RSSAfterKiB>>10, rep.HWMBeforeKiB>>10)
	}
}

type cacheReport struct {
	ExitCode int `json:"exit_code"`
}

func helperCache() (any, error) {
	e, err := New(Config{CacheDir: os.Getenv("CORDON_WASM_CACHE")})
	if err != nil {
		return nil, err
	}
	defer e.Close()
	bin, err := os.ReadFile(os.Getenv("CORDON_WASM_MODULE"))
	if err != nil {
		return nil, err
	}
	m, err := Load(bin)
	if err != nil {
		return nil, err
	}
	res, err := e.Run(context.Background(), Call{Module: m, Policy: Policy{MemoryLimit: DefaultMemoryLimit, Timeout: DefaultTimeout, OutputLimit: DefaultOutputLimit}, Args: []string{"guest", "exit"}})
	if err != nil {
		return nil, err
	}
	return cacheReport{ExitCode: res.ExitCode}, nil
}

// snapshot lists the files under dir with their sizes and modification
// times.
func snapshot(t *testing.T, dir string) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		files = append(files, fmt.Sprintf("%s %d %d", p, fi.Size(), fi.ModTime().UnixNano()))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(files)
	return files
}

// A second process finds the compiled code on disk: the cache directory
// is written by the first process and left exactly as it was by the
// second (wazero writes an entry only when it compiled the module).
func TestDiskCacheServesASecondProcess(t *testing.T) {
	dir := t.TempDir()
	mod := filepath.Join(dir, "guest.wasm")
	var exit3 wasmtest.Module
	exit := exit3.Import(ModuleWASI, "proc_exit", []byte{wasmtest.I32}, nil)
	exit3.Memory(1, 0)
	exit3.ExportFunc("_start", exit3.Func(nil, nil, nil, wasmtest.U32(3), wasmtest.Call(exit)))
	if err := os.WriteFile(mod, exit3.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	cache := filepath.Join(dir, "cache")
	env := []string{"CORDON_WASM_CACHE=" + cache, "CORDON_WASM_MODULE=" + mod}
	var rep cacheReport
	json.Unmarshal(runHelper(t, "cache", env...), &rep)
	if rep.ExitCode != 3 {
		t.Fatalf("first process: exit %d, want 3", rep.ExitCode)
	}
	first := snapshot(t, cache)
	if len(first) == 0 {
		t.Fatal("the first process left nothing in the cache")
	}
	json.Unmarshal(runHelper(t, "cache", env...), &rep)
	if rep.ExitCode != 3 {
		t.Fatalf("second process: exit %d, want 3", rep.ExitCode)
	}
	if second := snapshot(t, cache); strings.Join(first, "\n") != strings.Join(second, "\n") {
		t.Fatalf("the second process rewrote the cache:\n%s\nthen\n%s", strings.Join(first, "\n"), strings.Join(second, "\n"))
	}
}
