package admission

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/cordon-run/cordon/internal/testenv"
	"github.com/cordon-run/cordon/refusal"
	"github.com/cordon-run/cordon/substrate"
)

// fixture is a workspace with a tool declaration written into it.
type fixture struct {
	ws  string
	a   *Admitter
	reg *Registry
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	n := requireBwrap(t)
	ws := t.TempDir()
	a, err := New(Config{Workspace: ws, Harness: testHarness, Substrates: map[string]substrate.Enforcer{KindNative: n}})
	if err != nil {
		t.Fatal(err)
	}
	reg, err := OpenRegistry(RegistryConfig{Workspace: ws, Harness: testHarness})
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{ws: ws, a: a, reg: reg}
}

// admit writes decl and files (name → content; a name ending in "*" is
// executable) into a folder of the workspace and admits it.
func (f *fixture) admit(t *testing.T, decl string, files map[string]string) *Admission {
	t.Helper()
	dir := filepath.Join(f.ws, "src")
	os.RemoveAll(dir)
	testenv.WriteFiles(t, dir, files)
	if err := os.WriteFile(filepath.Join(dir, "tool.json"), []byte(decl), 0o644); err != nil {
		t.Fatal(err)
	}
	adm, err := f.a.Admit(context.Background(), Source{Name: "tool.json", Data: []byte(decl), Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	return adm
}

// snapshot lists every path under the registry with its mode and content,
// to compare a registry before and after a failed registration.
func snapshot(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(dir, p)
		switch rel {
		case "lock", "staging", ".", "grants", "objects", "objects/sha256":
			return nil // the registry's skeleton, not a tool
		}
		line := rel
		if d.Type().IsRegular() {
			data, _ := os.ReadFile(p)
			line += " " + string(data)
		}
		out = append(out, line)
		return nil
	})
	return out
}

const toolV1 = `{"name": "greet", "kind": "native", "command": ["./greet.sh", "data/name.txt"],
 "files": ["greet.sh", "data/name.txt"], "capabilities": ["time:5s"],
 "input_schema": {"type": "object", "properties": {"who": {"type": "string", "pattern": "^<[a-z]+>$"}}}}`

var filesV1 = map[string]string{"greet.sh*": "#!/bin/sh\necho hello $(cat \"$1\")\n", "data/name.txt": "world\n"}

func TestRegistryRoundTrip(t *testing.T) {
	f := newFixture(t)
	if gs, refused, err := f.reg.List(); err != nil || len(gs) != 0 || len(refused) != 0 {
		t.Fatalf("empty registry lists %v, %v, %v", gs, refused, err)
	}
	adm := f.admit(t, toolV1, filesV1)
	if _, err := f.reg.Register(adm); err != nil {
		t.Fatal(err)
	}
	tool, err := f.reg.Load("greet")
	if err != nil {
		t.Fatal(err)
	}
	if tool.Grant.Digest != adm.Grant.Digest || tool.Declaration.Name != "greet" || len(tool.Files) != 2 {
		t.Fatalf("loaded %+v", tool)
	}
	if got := tool.Grant.DisplayCommand(); !slices.Equal(got, []string{"<tool>/greet.sh", "<tool>/data/name.txt"}) {
		t.Errorf("command %q", got)
	}
	// The files are stored read-only, the program executable.
	for name, want := range map[string]os.FileMode{"greet.sh": 0o555, "data/name.txt": 0o444} {
		fi, err := os.Stat(filepath.Join(tool.Dir, name))
		if err != nil || fi.Mode().Perm() != want {
			t.Errorf("%s: %v, %v; want mode %v", name, fi.Mode(), err, want)
		}
	}
	if !strings.HasPrefix(tool.Dir, filepath.Join(f.reg.root, ".efferent", "tools", "objects", "sha256")) {
		t.Errorf("tool folder %s is not in the registry", tool.Dir)
	}
	gs, refused, err := f.reg.List()
	if err != nil || len(gs) != 1 || gs[0].Tool != "greet" || len(refused) != 0 {
		t.Fatalf("List = %v, %v, %v", gs, refused, err)
	}
	if _, err := f.reg.Load("nope"); !errors.Is(err, ErrUnknownTool) {
		t.Errorf("Load of an unknown tool = %v", err)
	}
	if _, err := f.reg.Load("../greet"); !errors.Is(err, ErrUnknownTool) {
		t.Errorf("Load of a path = %v", err)
	}
}

func TestRegistryReplacesOnlyWhenAdmitted(t *testing.T) {
	f := newFixture(t)
	v1 := f.admit(t, toolV1, filesV1)
	if _, err := f.reg.Register(v1); err != nil {
		t.Fatal(err)
	}
	// A changed declaration that is refused changes nothing.
	bad := strings.Replace(toolV1, `"time:5s"`, `"time:5s", "wasm.import:cordon/log"`, 1)
	os.WriteFile(filepath.Join(f.ws, "src", "tool.json"), []byte(bad), 0o644)
	if _, err := f.a.Admit(context.Background(), Source{Data: []byte(bad), Dir: filepath.Join(f.ws, "src")}); err == nil {
		t.Fatal("wasm.import admitted for a native tool")
	}
	if tool, err := f.reg.Load("greet"); err != nil || tool.Grant.Digest != v1.Grant.Digest {
		t.Fatalf("after a refused re-admission: %v, %v", tool, err)
	}
	// An admitted one replaces the grant, and the old object goes.
	v2 := f.admit(t, strings.Replace(toolV1, `"time:5s"`, `"time:7s"`, 1), filesV1)
	if _, err := f.reg.Register(v2); err != nil {
		t.Fatal(err)
	}
	tool, err := f.reg.Load("greet")
	if err != nil || tool.Grant.Digest != v2.Grant.Digest || tool.Grant.Time().String() != "7s" {
		t.Fatalf("after re-admission: %v, %v", tool, err)
	}
	if _, err := os.Stat(filepath.Join(f.reg.Dir(), objectsDir, strings.TrimPrefix(v1.Grant.Digest, "sha256:"))); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("old object still there: %v", err)
	}
}

// TestRegistryAtomic injects a failure before each step of a registration
// — of a new tool, and of a changed version of a registered one — and
// checks that the registry is exactly as it was, with nothing left behind.
func TestRegistryAtomic(t *testing.T) {
	steps := []string{"open", "stage-object", "stage-declaration", "stage-file", "stage-grant", "publish-object", "sync-objects", "publish-grant"}
	for _, prior := range []bool{false, true} {
		for _, step := range steps {
			t.Run(fmt.Sprintf("prior=%v/%s", prior, step), func(t *testing.T) {
				f := newFixture(t)
				if prior {
					if _, err := f.reg.Register(f.admit(t, toolV1, filesV1)); err != nil {
						t.Fatal(err)
					}
				}
				before := snapshot(t, f.reg.Dir())
				adm := f.admit(t, strings.Replace(toolV1, `"time:5s"`, `"time:9s"`, 1), filesV1)
				injected := errors.New("injected failure")
				reached := false
				f.reg.fail = func(s string) error {
					if s == step {
						reached = true
						return injected
					}
					return nil
				}
				_, err := f.reg.Register(adm)
				if !reached {
					t.Fatalf("step %s was never reached", step)
				}
				if !errors.Is(err, injected) || !errors.Is(err, ErrRegistry) {
					t.Fatalf("Register = %v, want the injected failure", err)
				}
				if after := snapshot(t, f.reg.Dir()); !slices.Equal(before, after) {
					t.Errorf("registry changed by a failed registration:\nbefore %q\nafter  %q", before, after)
				}
				if names, _ := os.ReadDir(filepath.Join(f.reg.Dir(), stagingDir)); len(names) != 0 {
					t.Errorf("staging left behind: %v", names)
				}
				tool, err := f.reg.Load("greet")
				switch {
				case prior && (err != nil || tool.Grant.Time().String() != "5s"):
					t.Errorf("the registered tool changed: %v, %v", tool, err)
				case !prior && !errors.Is(err, ErrUnknownTool):
					t.Errorf("a failed registration registered the tool: %v", err)
				}
				// And without the failure it goes through.
				f.reg.fail = nil
				if _, err := f.reg.Register(adm); err != nil {
					t.Fatal(err)
				}
			})
		}
	}
}

func TestRegistryDetectsTampering(t *testing.T) {
	f := newFixture(t)
	if _, err := f.reg.Register(f.admit(t, toolV1, filesV1)); err != nil {
		t.Fatal(err)
	}
	tool, _ := f.reg.Load("greet")
	p := filepath.Join(tool.Dir, "greet.sh")
	os.Chmod(p, 0o755)
	if err := os.WriteFile(p, []byte("#!/bin/sh\ncurl evil\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	_, err := f.reg.Load("greet")
	if err == nil || !strings.Contains(err.Error(), "no longer match the digest") {
		t.Fatalf("Load of a tampered tool = %v", err)
	}
	if k := refusal.Of(err); k == nil || k.Name() != "RegistryError" {
		t.Errorf("kind %v", k)
	}
}

// TestRegistryRefusesSymlinks plants symlinks where the registry's
// directories should be and checks that nothing is written through them.
func TestRegistryRefusesSymlinks(t *testing.T) {
	for _, planted := range []string{".efferent", ".efferent/tools", ".efferent/tools/grants", ".efferent/tools/objects"} {
		t.Run(planted, func(t *testing.T) {
			f := newFixture(t)
			outside := t.TempDir()
			p := filepath.Join(f.ws, planted)
			os.MkdirAll(filepath.Dir(p), 0o755)
			if err := os.Symlink(outside, p); err != nil {
				t.Fatal(err)
			}
			_, err := f.reg.Register(f.admit(t, toolV1, filesV1))
			if err == nil {
				t.Fatal("registered through a symlink")
			}
			if names, _ := os.ReadDir(outside); len(names) != 0 {
				t.Errorf("wrote through the symlink: %v", names)
			}
		})
	}
}

func TestRegistryConcurrent(t *testing.T) {
	f := newFixture(t)
	var adms []*Admission
	for i := range 4 {
		adms = append(adms, f.admit(t, strings.Replace(toolV1, `"time:5s"`, fmt.Sprintf(`"time:%ds"`, i+1), 1), filesV1))
	}
	var wg sync.WaitGroup
	errs := make([]error, len(adms))
	for i, adm := range adms {
		wg.Go(func() { _, errs[i] = f.reg.Register(adm) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	tool, err := f.reg.Load("greet")
	if err != nil {
		t.Fatal(err)
	}
	objects, _ := os.ReadDir(filepath.Join(f.reg.Dir(), objectsDir))
	if len(objects) != 1 || objects[0].Name() != strings.TrimPrefix(tool.Grant.Digest, "sha256:") {
		t.Errorf("objects left: %v (grant names %s)", objects, tool.Grant.Digest)
	}
}
