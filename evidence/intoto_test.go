package evidence

import (
	"encoding/base64"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	intoto "github.com/in-toto/attestation/go/v1"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/cordon-run/cordon/internal/testenv"
)

// TestStatementsAreInToto: every statement the log writes — a probe's and
// a run's — parses with the in-toto attestation library's own Statement
// (protojson refuses unknown fields) and passes its Validate: it is a
// valid in-toto Statement v1. The library is a test dependency only.
func TestStatementsAreInToto(t *testing.T) {
	l := newLog(t)
	appendN(t, l, 4)
	entries, err := ReadLog(l.Dir())
	if err != nil || len(entries) != 4 {
		t.Fatalf("ReadLog: %d, %v", len(entries), err)
	}
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(l.Dir(), e.File))
		if err != nil {
			t.Fatal(err)
		}
		env, _, _, err := parseReceipt(data)
		if err != nil {
			t.Fatal(err)
		}
		body, err := base64.StdEncoding.DecodeString(env.Payload)
		if err != nil {
			t.Fatal(err)
		}
		var st intoto.Statement
		if err := protojson.Unmarshal(body, &st); err != nil {
			t.Fatalf("%s: not an in-toto statement: %v\n%s", e.File, err, body)
		}
		if err := st.Validate(); err != nil {
			t.Errorf("%s: in-toto Validate: %v", e.File, err)
		}
		if st.GetType() != intoto.StatementTypeUri || st.GetPredicateType() != e.Statement.PredicateType {
			t.Errorf("%s: _type %q, predicateType %q", e.File, st.GetType(), st.GetPredicateType())
		}
		seq := st.GetPredicate().GetFields()["sequence"].GetNumberValue()
		if int64(seq) != e.Sequence {
			t.Errorf("%s: the predicate's sequence is %v as in-toto reads it", e.File, seq)
		}
	}
}

// TestNoProtobufOutsideTests: the package itself depends on neither the
// in-toto library nor protobuf, whose package initialization costs every
// cordon process start; only the test above uses them.
func TestNoProtobufOutsideTests(t *testing.T) {
	if _, err := os.Stat("../go.mod"); err != nil {
		t.Skip("a static check of the source tree; it runs where the source is")
	}
	_, err := exec.LookPath("go")
	testenv.Require(t, err == nil, "the go command: %v", err)
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		if strings.HasPrefix(dep, "google.golang.org/protobuf") || strings.HasPrefix(dep, "github.com/in-toto/") {
			t.Errorf("package evidence depends on %s", dep)
		}
	}
}
