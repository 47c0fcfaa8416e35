package wasmtest

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/cordon-run/cordon/internal/testenv"
)

var (
	buildMu   sync.Mutex
	buildDir  string
	built     = map[string][]byte{}
	buildErrs = map[string]error{}
)

// Go returns the Go program in the module directory dir (relative to the
// module root, e.g. "examples/count-lines") compiled with GOOS=wasip1
// GOARCH=wasm. A prebuilt testdata/wasm/NAME.wasm in the working
// directory, NAME being dir's last element, is used when present (so
// scripts/test can hand the unprivileged run its modules); otherwise the
// program is built once per process from the source tree. Without either,
// the test fails in CI and skips elsewhere.
func Go(t testing.TB, dir string) []byte {
	t.Helper()
	name := filepath.Base(dir)
	if data, err := os.ReadFile(filepath.Join("testdata", "wasm", name+".wasm")); err == nil {
		return data
	}
	buildMu.Lock()
	defer buildMu.Unlock()
	if data, ok := built[dir]; ok {
		return data
	}
	if err, ok := buildErrs[dir]; ok {
		testenv.Require(t, false, "building %s for wasip1: %v", dir, err)
	}
	data, err := build(dir)
	if err != nil {
		buildErrs[dir] = err
		testenv.Require(t, false, "building %s for wasip1: %v", dir, err)
	}
	built[dir] = data
	return data
}

func build(dir string) ([]byte, error) {
	root, err := moduleRoot()
	if err != nil {
		return nil, err
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		return nil, err
	}
	if buildDir == "" {
		if buildDir, err = os.MkdirTemp("", "cordon-wasm-build-"); err != nil {
			return nil, err
		}
	}
	out := filepath.Join(buildDir, filepath.Base(dir)+".wasm")
	cmd := exec.Command(gobin, "build", "-trimpath", "-o", out, "./"+filepath.ToSlash(dir))
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("%v: %s", err, stderr.Bytes())
	}
	return os.ReadFile(out)
}

// moduleRoot finds the directory of cordon's go.mod above the working
// directory.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && bytes.HasPrefix(data, []byte("module github.com/cordon-run/cordon\n")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no cordon source tree above the working directory (prebuild testdata/wasm/*.wasm with scripts/test)")
		}
		dir = parent
	}
}

// Declaration returns the tool.json beside the Go program in dir (see
// [Go]): testdata/wasm/NAME.json in the working directory when present,
// else the source tree's.
func Declaration(t testing.TB, dir string) []byte {
	t.Helper()
	name := filepath.Base(dir)
	if data, err := os.ReadFile(filepath.Join("testdata", "wasm", name+".json")); err == nil {
		return data
	}
	root, err := moduleRoot()
	if err != nil {
		testenv.Require(t, false, "the declaration of %s: %v", dir, err)
	}
	data, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(dir), "tool.json"))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// RemoveBuilds removes the modules Go built. Call it from TestMain.
func RemoveBuilds() {
	buildMu.Lock()
	defer buildMu.Unlock()
	if buildDir != "" {
		os.RemoveAll(buildDir)
		buildDir = ""
	}
}
