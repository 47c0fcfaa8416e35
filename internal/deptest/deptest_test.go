// Package deptest checks the direction of cordon's imports: the libraries
// (capabilities, substrate/..., runtime, admission) never import the front
// end (cmd/...) or its CLI framework, and capabilities imports nothing of
// the project.
package deptest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

const module = "github.com/cordon-run/cordon"

// moduleRoot finds the go.mod above the working directory, or "" when the
// test binary runs away from the source (the unprivileged re-run).
func moduleRoot() string {
	dir, _ := os.Getwd()
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}

func deps(t *testing.T, root, pkg string) []string {
	t.Helper()
	cmd := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", pkg)
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps %s: %v", pkg, err)
	}
	return strings.Fields(string(out))
}

func TestImportDirection(t *testing.T) {
	root := moduleRoot()
	if root == "" {
		t.Skip("a static check of the source tree; it runs where the source is (the root pass of scripts/test)")
	}
	if _, err := exec.LookPath("go"); err != nil {
		t.Fatalf("go command not found: %v", err)
	}
	forbidden := []string{module + "/cmd/", "github.com/spf13/pflag"}
	for _, pkg := range []string{"capabilities", "substrate/...", "runtime/...", "admission/..."} {
		for _, dep := range deps(t, root, "./"+pkg) {
			for _, f := range forbidden {
				if strings.HasPrefix(dep, f) {
					t.Errorf("%s imports %s; libraries must not depend on the front end", pkg, dep)
				}
			}
		}
	}
	for _, dep := range deps(t, root, "./capabilities") {
		if strings.HasPrefix(dep, module) && dep != module+"/capabilities" {
			t.Errorf("capabilities imports %s; it must import nothing of the project", dep)
		}
	}
}
