// Package deptest enforces cordon's layering: the table of allowed imports
// in docs/architecture.md, which this test reads, so that the written
// layering and the checked one cannot drift apart.
package deptest

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cordon-run/cordon/internal/testenv"
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

// sourceTree returns the module's root, where the source is, skipping the
// test where it is not (the unprivileged re-run) and requiring the go
// command.
func sourceTree(t *testing.T) string {
	t.Helper()
	root := moduleRoot()
	if root == "" {
		t.Skip("a static check of the source tree; it runs where the source is (the root pass of scripts/test)")
	}
	_, err := exec.LookPath("go")
	testenv.Require(t, err == nil, "the go command: %v", err)
	return root
}

// goList runs go list with args in the source tree root and returns what
// it printed.
func goList(t *testing.T, root string, args ...string) string {
	t.Helper()
	cmd := exec.Command("go", append([]string{"list"}, args...)...)
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list %v: %v", args, err)
	}
	return string(out)
}

// rule is one row of the table.
type rule struct {
	own, third []string
}

// readTable parses the table between the deptest markers of
// docs/architecture.md.
func readTable(t *testing.T, root string) map[string]rule {
	t.Helper()
	f, err := os.Open(filepath.Join(root, "docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rules := map[string]rule{}
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "<!-- deptest:begin -->":
			in = true
			continue
		case line == "<!-- deptest:end -->":
			in = false
		}
		if !in || !strings.HasPrefix(line, "| `") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		if len(cells) != 3 {
			t.Fatalf("docs/architecture.md: a table row needs 3 cells: %q", line)
		}
		names := func(cell string) []string {
			var out []string
			for _, f := range strings.Fields(cell) {
				out = append(out, strings.Trim(f, "`"))
			}
			return out
		}
		pkg := strings.Trim(strings.TrimSpace(cells[0]), "`")
		rules[pkg] = rule{own: names(cells[1]), third: names(cells[2])}
	}
	if len(rules) == 0 {
		t.Fatal("docs/architecture.md holds no table of allowed imports")
	}
	return rules
}

func TestImportsFollowTheLayering(t *testing.T) {
	root := sourceTree(t)
	rules := readTable(t, root)
	out := goList(t, root, "-f", "{{.ImportPath}} {{join .Imports \" \"}}", "./...")
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		fields := strings.Fields(line)
		pkg := strings.TrimPrefix(fields[0], module+"/")
		row, ok := rules[pkg]
		if !ok {
			if parent, _, found := strings.Cut(pkg, "/internal/"); found {
				row, ok = rules[parent] // a package's own internal packages share its row
			}
		}
		if !ok {
			t.Errorf("%s is not in the table of docs/architecture.md: say which layer it belongs to", pkg)
			continue
		}
		for _, imp := range fields[1:] {
			switch {
			case strings.HasPrefix(imp, module+"/"):
				dep := strings.TrimPrefix(imp, module+"/")
				if slices.Contains(row.own, dep) || strings.HasPrefix(dep, pkg+"/internal/") {
					continue
				}
				t.Errorf("%s imports %s, which docs/architecture.md does not allow it", pkg, dep)
			case strings.Contains(strings.SplitN(imp, "/", 2)[0], "."):
				if strings.HasPrefix(imp, "golang.org/x/sys/") {
					continue
				}
				if !slices.ContainsFunc(row.third, func(m string) bool { return imp == m || strings.HasPrefix(imp, m+"/") }) {
					t.Errorf("%s imports the third-party %s, which docs/architecture.md does not allow it", pkg, imp)
				}
			}
		}
	}
}

// The cordon command links no Kubernetes package: their init and size
// cost every process about 1 ms (docs/architecture.md); the Pod renderer
// is the cordon-kube program.
func TestTheCLILinksNoKubernetes(t *testing.T) {
	root := sourceTree(t)
	saw := false
	for _, dep := range strings.Fields(goList(t, root, "-deps", "./cmd/cordon")) {
		saw = saw || dep == module+"/substrate/oci"
		if strings.HasPrefix(dep, "k8s.io/") || strings.HasPrefix(dep, "sigs.k8s.io/") {
			t.Errorf("cmd/cordon links %s", dep)
		}
	}
	if !saw {
		t.Errorf("go list -deps ./cmd/cordon does not list substrate/oci: the check looks at the wrong thing")
	}
}

// cordon's front end (cmd/cordon built with the tag cordon_front) links
// none of what it hands to the full binary: the WebAssembly engine, the MCP
// SDK (and its encoding/gob), the YAML and JSON-schema decoders, the DSSE
// library (and its x/crypto/ssh), whose initialisation every process pays
// before main (docs/architecture.md); the full build links each, so the
// check looks at the right thing.
func TestTheFrontEndLinksNoEngine(t *testing.T) {
	root := sourceTree(t)
	heavy := []string{"github.com/tetratelabs/wazero", "github.com/modelcontextprotocol/go-sdk/mcp",
		"go.yaml.in/yaml/v3", "github.com/google/jsonschema-go/jsonschema", "encoding/gob",
		"github.com/secure-systems-lab/go-securesystemslib/dsse", "golang.org/x/crypto/ssh"}
	front := strings.Fields(goList(t, root, "-tags", "cordon_front", "-deps", "./cmd/cordon"))
	full := strings.Fields(goList(t, root, "-deps", "./cmd/cordon"))
	for _, h := range heavy {
		if slices.Contains(front, h) {
			t.Errorf("cordon's front end links %s", h)
		}
		if !slices.Contains(full, h) {
			t.Errorf("the full cordon does not link %s: the check looks at the wrong thing", h)
		}
	}
	if !slices.Contains(front, module+"/substrate/bwrap") || !slices.Contains(front, module+"/runtime") {
		t.Errorf("go list -deps of the front end lists no bwrap or runtime: the check looks at the wrong thing")
	}
}
