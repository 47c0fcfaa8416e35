package admission

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cordon-run/cordon/harness"
	"github.com/cordon-run/cordon/internal/testenv"
	"github.com/cordon-run/cordon/refusal"
	"github.com/cordon-run/cordon/substrate"
	"github.com/cordon-run/cordon/substrate/bwrap"
)

// requireBwrap stops the test when bubblewrap cannot create a sandbox
// here (it fails in CI, where scripts/test installs it).
func requireBwrap(t testing.TB) *bwrap.Enforcer {
	t.Helper()
	n := bwrap.NewEnforcer(bwrap.EnforcerConfig{})
	_, err := n.Facts(context.Background())
	testenv.Require(t, err == nil, "bubblewrap cannot create a sandbox: %v", err)
	return n
}

func newTestAdmitter(t testing.TB, n *bwrap.Enforcer) *Admitter {
	t.Helper()
	a, err := New(Config{Workspace: t.TempDir(), Harness: testHarness, Substrates: map[string]substrate.Enforcer{KindNative: n}})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// want is the expected decision of one corpus case: "admit" or
// "refuse KIND", then lines "reason: TEXT" (each must occur in the
// refusal) or "grant: TEXT" (each must occur in the printed grant).
type want struct {
	admit   bool
	kind    string
	reasons []string
	grant   []string
}

func readWant(t *testing.T, file string) want {
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var w want
	for i, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		switch {
		case i == 0 && line == "admit":
			w.admit = true
		case i == 0 && strings.HasPrefix(line, "refuse "):
			w.kind = strings.TrimPrefix(line, "refuse ")
		case strings.HasPrefix(line, "reason: "):
			w.reasons = append(w.reasons, strings.TrimPrefix(line, "reason: "))
		case strings.HasPrefix(line, "grant: "):
			w.grant = append(w.grant, strings.TrimPrefix(line, "grant: "))
		default:
			t.Fatalf("%s:%d: cannot read %q", file, i+1, line)
		}
	}
	return w
}

// TestCorpus replays every declaration under testdata/decls against its
// expected decision.
func TestCorpus(t *testing.T) {
	n := requireBwrap(t)
	a := newTestAdmitter(t, n)
	files, _ := filepath.Glob("testdata/decls/*.json")
	yamls, _ := filepath.Glob("testdata/decls/*.yaml")
	files = append(files, yamls...)
	if len(files) < 40 {
		t.Fatalf("corpus has only %d cases", len(files))
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			w := readWant(t, file+".want")
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			adm, err := a.Admit(context.Background(), Source{Name: filepath.Base(file), Data: data, Dir: filepath.Dir(file), Format: strings.TrimPrefix(filepath.Ext(file), ".")})
			checkDecision(t, w, adm, err)
		})
	}
}

func checkDecision(t *testing.T, w want, adm *Admission, err error) {
	t.Helper()
	if w.admit {
		if err != nil {
			t.Fatalf("refused, want admitted:\n%v", err)
		}
		g := adm.Grant.String()
		for _, s := range w.grant {
			if !strings.Contains(g, s) {
				t.Errorf("grant does not say %q:\n%s", s, g)
			}
		}
		return
	}
	if err == nil {
		t.Fatalf("admitted, want refused (%s):\n%s", w.kind, adm.Grant)
	}
	var r *Refusal
	if !errors.As(err, &r) {
		t.Fatalf("error is not a *Refusal: %v", err)
	}
	if k := refusal.Of(err); k == nil || k.Name() != w.kind || !(k.Class() == refusal.Policy) {
		t.Errorf("refusal kind %v, want %s (policy)", k, w.kind)
	}
	msg := err.Error()
	for _, s := range w.reasons {
		if !strings.Contains(msg, s) {
			t.Errorf("refusal does not say %q:\n%s", s, msg)
		}
	}
	for _, reason := range r.Reasons {
		if reason.Blocked == "" || reason.Check == "" || reason.Err == nil {
			t.Errorf("incomplete reason %+v", reason)
		}
		if strings.HasSuffix(reason.Blocked, ".") || strings.HasSuffix(reason.Instead, ".") {
			t.Errorf("reason ends with a period: %q", reason.String())
		}
		if len(reason.String()) > 1200 {
			t.Errorf("reason longer than 1200 bytes: %.200s…", reason.String())
		}
	}
}

// TestHugeDeclarations builds declarations too large or too deep to admit
// and checks that each is refused quickly, with a reason.
func TestHugeDeclarations(t *testing.T) {
	n := requireBwrap(t)
	a := newTestAdmitter(t, n)
	deep := strings.Repeat(`{"a":`, 200) + "1" + strings.Repeat("}", 200)
	manyCaps := make([]string, 100)
	for i := range manyCaps {
		manyCaps[i] = fmt.Sprintf(`"env:V%d"`, i)
	}
	for _, tc := range []struct {
		name, data, reason string
		kind               string
	}{
		{"larger than the limit", `{"name": "x", "description": "` + strings.Repeat("a", MaxDeclarationSize) + `"}`, "larger than 1048576 bytes", ""},
		{"deep schema", `{"name": "x", "kind": "native", "command": ["true"], "capabilities": [], "input_schema": ` + deep + `}`, "nested deeper than 32 levels", ""},
		{"deep yaml", "name: x\ninput_schema: " + strings.Repeat("[", 100) + strings.Repeat("]", 100) + "\n", "nested deeper than 32 levels", ""},
		{"long description", `{"name": "x", "kind": "native", "command": ["true"], "capabilities": [], "description": "` + strings.Repeat("a", 5000) + `"}`, "description is longer than 4096 bytes", ""},
		{"many capabilities", `{"name": "x", "kind": "native", "command": ["true"], "capabilities": [` + strings.Join(manyCaps, ",") + `]}`, "more than 64 capabilities", ""},
		{"many arguments", `{"name": "x", "kind": "native", "command": [` + strings.Repeat(`"a",`, 100) + `"a"], "capabilities": []}`, "command has more than 64 elements", ""},
		{"long capability", `{"name": "x", "kind": "native", "command": ["true"], "capabilities": ["env:` + strings.Repeat("A", 1000) + `"]}`, "longer than 512 bytes", "CapabilityRefused"},
		{"invalid utf-8", "{\"name\": \"\xff\"}", "not valid UTF-8", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := a.Admit(context.Background(), Source{Name: tc.name, Data: []byte(tc.data)})
			kind := tc.kind
			if kind == "" {
				kind = "InvalidDeclaration"
			}
			checkDecision(t, want{kind: kind, reasons: []string{tc.reason}}, nil, err)
		})
	}
}

// testHarness is the default harness configuration with the per-user key
// store and cache in a temporary directory of the test binary.
var testHarness harness.Config

func TestMain(m *testing.M) { testenv.Main(m, &testHarness) }
