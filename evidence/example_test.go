package evidence_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/cordon-run/cordon/evidence"
)

// A probe's receipt appended to a workspace's log, and the log verified
// with the public key and the head from the trusted directory.
func Example() {
	root, err := os.MkdirTemp("", "evidence-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(root)
	dir := filepath.Join(root, "workspace", ".foundry", "evidence")
	trusted := filepath.Join(root, "state", "evidence", "workspace")

	s, err := evidence.NewSigner(bytes.Repeat([]byte{7}, 32)) // cordon's seed comes from its key store
	if err != nil {
		panic(err)
	}
	l, err := evidence.OpenLog(dir, trusted, s)
	if err != nil {
		panic(err)
	}
	defer l.Close()

	cordon := evidence.Subject{Name: "cordon", Digest: map[string]string{"sha256": strings.Repeat("ab", 32)}}
	e, err := l.Append([]evidence.Subject{cordon}, evidence.ProbePredicate, evidence.Receipt{
		Host:    evidence.Host{OS: "linux", Arch: "amd64", LandlockABI: 4},
		Cordon:  evidence.Binary{Digest: "sha256:" + strings.Repeat("ab", 32)},
		Verdict: evidence.Pass,
		Probe: &evidence.Probe{Name: "bwrap/write-outside", Substrate: "bwrap", Mechanisms: []string{"bwrap/ro-root"},
			Expected: "the write fails with EROFS", Observed: "the write failed with EROFS"},
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(e.File, e.Statement.Predicate.Sequence, e.Statement.Predicate.Verdict)

	head, err := l.Head()
	if err != nil {
		panic(err)
	}
	rep := evidence.Verify(dir, s.Public(), head)
	fmt.Println(rep.OK, rep.Count)
	// Output:
	// 00000001.json 1 pass
	// true 1
}
