package evidence

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cordon-run/cordon/refusal"
)

// The concurrency test appends from re-executed copies of the test binary
// too: separate processes are what flock must keep apart.
const helperEnv = "CORDON_EVIDENCE_TEST_HELPER"

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) != "" {
		os.Exit(helperMain())
	}
	os.Exit(m.Run())
}

// helperMain waits (bounded) for the start file, then appends
// CORDON_EVIDENCE_COUNT probe receipts named CORDON_EVIDENCE_WRITER/N.
func helperMain() int {
	get := os.Getenv
	for i := 0; i < 5000; i++ {
		if _, err := os.Stat(get("CORDON_EVIDENCE_START")); err == nil {
			break
		}
		time.Sleep(time.Millisecond)
	}
	seed, err := hex.DecodeString(get("CORDON_EVIDENCE_SEED"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		return 1
	}
	n, _ := strconv.Atoi(get("CORDON_EVIDENCE_COUNT"))
	if err := appendProbes(get("CORDON_EVIDENCE_DIR"), get("CORDON_EVIDENCE_TRUSTED"), seed, get("CORDON_EVIDENCE_WRITER"), n); err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		return 1
	}
	return 0
}

// appendProbes opens the log with a Log of its own and appends n probe
// receipts named writer/0, writer/1, ...
func appendProbes(dir, trusted string, seed []byte, writer string, n int) error {
	s, err := NewSigner(seed)
	if err != nil {
		return err
	}
	l, err := OpenLog(dir, trusted, s)
	if err != nil {
		return err
	}
	defer l.Close()
	return appendTo(l, writer, n)
}

// appendTo appends n probe receipts named writer/0, writer/1, ... to l.
func appendTo(l *Log, writer string, n int) error {
	for i := range n {
		subj, pt, r := probeReceipt(fmt.Sprintf("%s/%d", writer, i), Pass)
		if _, err := l.Append(subj, pt, r); err != nil {
			return err
		}
	}
	return nil
}

func seed(b byte) []byte { return bytes.Repeat([]byte{b}, 32) }

func mustSigner(t testing.TB, b byte) *Signer {
	t.Helper()
	s, err := NewSigner(seed(b))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// logDirs returns a log directory (as cordon lays it out, in a workspace)
// and a trusted directory under a fresh temporary directory, resolved:
// OpenLog follows no symlink on the way.
func logDirs(t testing.TB) (dir, trusted string) {
	root := tempDir(t)
	return filepath.Join(root, "ws", ".foundry", "evidence"), filepath.Join(root, "state", "evidence", "0123456789abcdef")
}

// tempDir is t.TempDir() with its symlinks resolved.
func tempDir(t testing.TB) string {
	t.Helper()
	d, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func openLog(t testing.TB, dir, trusted string, s *Signer) *Log {
	t.Helper()
	l, err := OpenLog(dir, trusted, s)
	if err != nil {
		t.Fatalf("OpenLog(%s, %s): %v", dir, trusted, err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// newLog opens a log in fresh directories, signed by key 1.
func newLog(t testing.TB) *Log {
	dir, trusted := logDirs(t)
	return openLog(t, dir, trusted, mustSigner(t, 1))
}

var testHost = Host{OS: "linux", Arch: "amd64", Kernel: "6.1.0", UID: 1000, Bwrap: "0.8.0", LandlockABI: 4, UserNS: true, Seccomp: true, Wazero: "v1.12.0"}

var testBinary = Binary{Digest: "sha256:" + strings.Repeat("c0", 32), Version: "(devel)"}

func probeReceipt(name, verdict string) ([]Subject, string, Receipt) {
	subj := []Subject{{Name: "cordon", Digest: map[string]string{"sha256": strings.Repeat("c0", 32)}}}
	return subj, ProbePredicate, Receipt{
		Host: testHost, Cordon: testBinary, Verdict: verdict,
		Probe: &Probe{Name: name, Substrate: "bwrap", Mechanisms: []string{"bwrap/ro-root"}, Expected: "EROFS", Observed: "EROFS", DurationMS: 12.5},
	}
}

func runReceipt(tool string) ([]Subject, string, Receipt) {
	subj := []Subject{{Name: tool, Digest: map[string]string{"sha256": strings.Repeat("ab", 32)}}}
	return subj, RunPredicate, Receipt{
		Host: testHost, Cordon: testBinary, Verdict: Ran,
		Run: &Run{Op: "run", Tool: tool, Digest: "sha256:" + strings.Repeat("ab", 32), Substrate: "wasm", Sandboxed: true,
			Capabilities: []string{"read:workspace"}, ExitCode: 0, StdoutDigest: "sha256:" + strings.Repeat("01", 32), StderrDigest: "sha256:" + strings.Repeat("02", 32)},
	}
}

// appendN appends n receipts, probes and runs by turns: probe p/1, run
// t/2, probe p/3, ...
func appendN(t testing.TB, l *Log, n int) []Entry {
	t.Helper()
	var out []Entry
	for i := 1; i <= n; i++ {
		subj, pt, r := probeReceipt(fmt.Sprintf("p/%d", i), Pass)
		if i%2 == 0 {
			subj, pt, r = runReceipt(fmt.Sprintf("t/%d", i))
		}
		e, err := l.Append(subj, pt, r)
		if err != nil {
			t.Fatalf("Append %d: %v", i, err)
		}
		out = append(out, e)
	}
	return out
}

func head(t testing.TB, l *Log) *Head {
	t.Helper()
	h, err := l.Head()
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// TestAppendLayout: receipts are files %08d.json holding one compact
// envelope and a newline, mode 0644; each names the digest of the file
// before it; the head and the index in the trusted directory follow.
func TestAppendLayout(t *testing.T) {
	l := newLog(t)
	entries := appendN(t, l, 3)
	prev, prevPayload := "", ""
	for i, e := range entries {
		want := fmt.Sprintf("%08d.json", i+1)
		if e.File != want || e.Sequence != int64(i+1) {
			t.Errorf("entry %d: file %s, sequence %d", i, e.File, e.Sequence)
		}
		data, err := os.ReadFile(filepath.Join(l.Dir(), want))
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Count(data, []byte("\n")) != 1 || data[len(data)-1] != '\n' {
			t.Errorf("%s is not one line of JSON with a trailing newline: %q", want, data)
		}
		if got := digestOf(data); got != e.Digest {
			t.Errorf("%s: digest %s, the file's is %s", want, e.Digest, got)
		}
		st, err := os.Stat(filepath.Join(l.Dir(), want))
		if err != nil || st.Mode().Perm() != 0o644 {
			t.Errorf("%s: mode %v (%v), want 0644", want, st.Mode(), err)
		}
		r := e.Statement.Predicate
		if r.Sequence != int64(i+1) || r.Previous != prev || r.PreviousPayload != prevPayload || r.Time.IsZero() {
			t.Errorf("receipt %d: sequence %d, previous %q (want %q), previous payload %q (want %q), time %v", i+1, r.Sequence, r.Previous, prev, r.PreviousPayload, prevPayload, r.Time)
		}
		if e.Statement.Type != StatementType || e.Envelope.PayloadType != PayloadType || len(e.Envelope.Signatures) != 1 || e.Envelope.Signatures[0].KeyID != l.signer.KeyID() {
			t.Errorf("receipt %d: type %q, payload type %q, signatures %v", i+1, e.Statement.Type, e.Envelope.PayloadType, e.Envelope.Signatures)
		}
		_, body, _, err := parseReceipt(data)
		if err != nil {
			t.Fatal(err)
		}
		prev, prevPayload = e.Digest, digestOf(body)
	}
	h := head(t, l)
	if h == nil || !validLogID(h.Log) || *h != (Head{Log: h.Log, Sequence: 3, Digest: prev, PayloadDigest: prevPayload}) {
		t.Fatalf("Head() = %+v, want a log ID and receipt 3 %s %s", h, prev, prevPayload)
	}
	for _, e := range entries {
		if e.Statement.Predicate.Log != h.Log {
			t.Errorf("receipt %d names the log %q, the head %q", e.Sequence, e.Statement.Predicate.Log, h.Log)
		}
	}
	names, _ := os.ReadDir(l.Dir())
	if len(names) != 3 {
		t.Errorf("the log directory holds %d files, want the 3 receipts: %v", len(names), names)
	}
	if h2, err := ReadHead(l.Dir(), l.TrustedDir()); err != nil || *h2 != *h {
		t.Errorf("ReadHead = %+v, %v; Head() = %+v", h2, err, h)
	}
	st, err := os.Stat(filepath.Join(l.TrustedDir(), indexName))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("the head file: %v %v, want mode 0600", st, err)
	}

	read, err := ReadLog(l.Dir())
	if err != nil || len(read) != 3 {
		t.Fatalf("ReadLog: %d entries, %v", len(read), err)
	}
	for i := range read {
		if read[i].Digest != entries[i].Digest || read[i].Statement.Predicate.Sequence != int64(i+1) {
			t.Errorf("ReadLog entry %d = %+v, want %+v", i, read[i], entries[i])
		}
	}
}

// TestLatestProbe: the index holds each probe's latest receipt, with
// the digests of the host facts and the binary it was made under.
func TestLatestProbe(t *testing.T) {
	l := newLog(t)
	if _, ok, err := l.LatestProbe("bwrap/write-outside"); ok || err != nil {
		t.Fatalf("LatestProbe of an empty log: %v %v", ok, err)
	}
	subj, pt, r := probeReceipt("bwrap/write-outside", Pass)
	if _, err := l.Append(subj, pt, r); err != nil {
		t.Fatal(err)
	}
	appendN(t, l, 2)
	subj, pt, r = probeReceipt("bwrap/write-outside", Fail)
	r.Probe.Observed = "the write succeeded"
	r.Host.Kernel = "6.9.0"
	last, err := l.Append(subj, pt, r)
	if err != nil {
		t.Fatal(err)
	}
	p, ok, err := l.LatestProbe("bwrap/write-outside")
	if err != nil || !ok {
		t.Fatalf("LatestProbe: %v %v", ok, err)
	}
	if p.Sequence != 4 || p.Digest != last.Digest || p.Verdict != Fail || p.Observed != "the write succeeded" ||
		p.Host != r.Host.Digest() || p.Host == testHost.Digest() || p.Cordon != testBinary.Digest ||
		!p.Time.Equal(last.Statement.Predicate.Time) || len(p.Mechanisms) != 1 {
		t.Errorf("LatestProbe = %+v; want receipt 4 (%s), its verdict, observation and digests", p, last.Digest)
	}
	if p, ok, _ := l.LatestProbe("p/1"); !ok || p.Sequence != 2 {
		t.Errorf("LatestProbe(p/1) = %+v %v, want receipt 2", p, ok)
	}
	if _, ok, _ := l.LatestProbe("t/2"); ok {
		t.Error("a run's receipt was indexed as a probe")
	}
}

func TestHostDigest(t *testing.T) {
	a := testHost
	b := testHost
	if a.Digest() != b.Digest() || !strings.HasPrefix(a.Digest(), "sha256:") || len(a.Digest()) != len("sha256:")+64 {
		t.Errorf("Digest() = %s, %s", a.Digest(), b.Digest())
	}
	b.LandlockABI = 3
	if a.Digest() == b.Digest() {
		t.Error("host facts that differ have the same digest")
	}
}

// TestAppendRefusesInvalid: a receipt that is not a valid in-toto
// statement or cordon receipt is refused, and nothing is written.
func TestAppendRefusesInvalid(t *testing.T) {
	l := newLog(t)
	for _, tc := range []struct {
		name string
		edit func(*[]Subject, *string, *Receipt)
	}{
		{"no subject", func(s *[]Subject, _ *string, _ *Receipt) { *s = nil }},
		{"a subject without a digest", func(s *[]Subject, _ *string, _ *Receipt) { *s = []Subject{{Name: "x"}} }},
		{"a short sha256", func(s *[]Subject, _ *string, _ *Receipt) {
			*s = []Subject{{Name: "x", Digest: map[string]string{"sha256": "abcd"}}}
		}},
		{"an unknown predicate type", func(_ *[]Subject, pt *string, _ *Receipt) { *pt = "https://example.com/x" }},
		{"a probe receipt with a run", func(_ *[]Subject, _ *string, r *Receipt) { _, _, rr := runReceipt("x"); r.Run = rr.Run }},
		{"no verdict", func(_ *[]Subject, _ *string, r *Receipt) { r.Verdict = "" }},
		{"a run's verdict on a probe", func(_ *[]Subject, _ *string, r *Receipt) { r.Verdict = Ran }},
		{"a probe without a name", func(_ *[]Subject, _ *string, r *Receipt) { r.Probe.Name = "" }},
	} {
		subj, pt, r := probeReceipt("p", Pass)
		tc.edit(&subj, &pt, &r)
		_, err := l.Append(subj, pt, r)
		if !errors.Is(err, refusal.Invalid) {
			t.Errorf("%s: Append = %v, want an error matching refusal.Invalid", tc.name, err)
		}
	}
	if names, _ := os.ReadDir(l.Dir()); len(names) != 0 {
		t.Errorf("refused receipts left files: %v", names)
	}
	if h := head(t, l); h != nil {
		t.Errorf("refused receipts recorded a head: %+v", h)
	}
}

// TestOpenLogRefuses: a log directory that is a symlink, a trusted
// directory open to others, and a trusted directory holding another
// log's head are refused.
func TestOpenLogRefuses(t *testing.T) {
	s := mustSigner(t, 1)
	root := t.TempDir()
	real := filepath.Join(root, "real")
	os.Mkdir(real, 0o755)
	link := filepath.Join(root, "link")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenLog(link, filepath.Join(root, "trusted"), s); !errors.Is(err, refusal.UntrustedState) {
		t.Errorf("OpenLog of a symlinked log directory = %v, want UntrustedState", err)
	}
	open := filepath.Join(root, "open")
	os.Mkdir(open, 0o755)
	if _, err := OpenLog(real, open, s); !errors.Is(err, refusal.UntrustedState) {
		t.Errorf("OpenLog with a trusted directory of mode 0755 = %v, want UntrustedState", err)
	}
	if _, err := OpenLog("relative/dir", filepath.Join(root, "trusted"), s); !errors.Is(err, refusal.Invalid) {
		t.Errorf("OpenLog of a relative directory = %v, want Invalid", err)
	}
	trusted := filepath.Join(root, "trusted")
	appendN(t, openLog(t, real, trusted, s), 1)
	other := filepath.Join(root, "other")
	if _, err := OpenLog(other, trusted, s); !errors.Is(err, refusal.UntrustedState) || !strings.Contains(err.Error(), "belongs to the log "+real) {
		t.Errorf("OpenLog with another log's trusted directory = %v, want UntrustedState naming %s", err, real)
	}
}

// TestAppendAdoptsUnrecordedReceipt: an append that linked its receipt
// and stopped before it recorded the head leaves a receipt the next
// append adopts, head and index included.
func TestAppendAdoptsUnrecordedReceipt(t *testing.T) {
	l := newLog(t)
	appendN(t, l, 2)
	indexFile := filepath.Join(l.TrustedDir(), indexName)
	saved, err := os.ReadFile(indexFile)
	if err != nil {
		t.Fatal(err)
	}
	subj, pt, r := probeReceipt("lost/head", Pass)
	lost, err := l.Append(subj, pt, r)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(indexFile, saved, 0o600); err != nil { // as if the append stopped before its head
		t.Fatal(err)
	}
	if rep := Verify(l.Dir(), l.signer.Public(), head(t, l)); rep.OK || rep.First.Kind != Inserted || rep.First.Sequence != 3 {
		t.Errorf("Verify with the stale head = %+v, want receipt 3 reported as inserted", rep)
	}
	e := appendN(t, l, 1)[0]
	if e.Sequence != 4 || e.Statement.Predicate.Previous != lost.Digest {
		t.Errorf("the append after it is receipt %d after %s, want 4 after %s", e.Sequence, e.Statement.Predicate.Previous, lost.Digest)
	}
	if p, ok, _ := l.LatestProbe("lost/head"); !ok || p.Sequence != 3 {
		t.Errorf("the adopted receipt's probe is not indexed: %+v %v", p, ok)
	}
	if rep := Verify(l.Dir(), l.signer.Public(), head(t, l)); !rep.OK || rep.Count != 4 {
		t.Errorf("Verify = %+v, want 4 receipts OK", rep)
	}
}

// TestAppendRefusesForeignReceiptBeyondHead: a receipt beyond the head
// that this key did not sign (or that does not chain) is not adopted, and
// nothing is written.
func TestAppendRefusesForeignReceiptBeyondHead(t *testing.T) {
	l := newLog(t)
	appendN(t, l, 2)
	other := openLog(t, filepath.Join(t.TempDir(), "log"), filepath.Join(t.TempDir(), "trusted"), mustSigner(t, 2))
	foreign := appendN(t, other, 3)[2]
	data, _ := os.ReadFile(filepath.Join(other.Dir(), foreign.File))
	if err := os.WriteFile(filepath.Join(l.Dir(), foreign.File), data, 0o644); err != nil {
		t.Fatal(err)
	}
	subj, pt, r := probeReceipt("x", Pass)
	if _, err := l.Append(subj, pt, r); !errors.Is(err, refusal.UntrustedState) || !strings.Contains(err.Error(), "00000003.json") {
		t.Errorf("Append over a foreign receipt = %v, want UntrustedState naming 00000003.json", err)
	}
	if names, _ := os.ReadDir(l.Dir()); len(names) != 3 {
		t.Errorf("the log holds %v", names)
	}
}

// TestAppendRefusesTransplantedLog: genuine receipts copied into a
// workspace that never had a log — by a sandboxed tool of an enclosing
// workspace, which can write sub/.foundry — are not adopted: the append
// is refused and writes nothing, the trusted verification reports that
// the log has no head, and only a verification with the key alone (of a
// copy, elsewhere) passes, noting what it cannot check. A log moved with
// its workspace, and a log of another key, are refused alike.
func TestAppendRefusesTransplantedLog(t *testing.T) {
	s := mustSigner(t, 1)
	dir, trusted := logDirs(t)
	appendN(t, openLog(t, dir, trusted, s), 3)

	sub := filepath.Join(filepath.Dir(filepath.Dir(dir)), "sub")
	subDir := filepath.Join(sub, ".foundry", "evidence")
	copyDir(t, dir, subDir)
	for _, tc := range []struct {
		name string
		s    *Signer
	}{{"the same key", s}, {"another key", mustSigner(t, 2)}} {
		l := openLog(t, subDir, filepath.Join(tempDir(t), "trusted-"+tc.s.KeyID()[:8]), tc.s)
		subj, pt, r := probeReceipt("x", Pass)
		_, err := l.Append(subj, pt, r)
		if !errors.Is(err, refusal.UntrustedState) || !strings.Contains(err.Error(), "not written by cordon for this workspace on this machine") || !strings.Contains(err.Error(), "cordon evidence reset") {
			t.Errorf("%s: Append to a transplanted log = %v, want UntrustedState saying it was not written here and how to move it aside", tc.name, err)
		}
		if names, _ := os.ReadDir(subDir); len(names) != 3 {
			t.Errorf("%s: the refused append left %d files", tc.name, len(names))
		}
		if h := head(t, l); h != nil {
			t.Errorf("%s: the refused append recorded a head: %+v", tc.name, h)
		}
		if tc.s != s {
			continue
		}
		rep := l.Verify()
		if rep.OK || rep.First == nil || rep.First.Kind != NoHead || rep.Count != 3 || !strings.Contains(rep.First.Message, "never wrote it here") {
			t.Errorf("Log.Verify of a transplanted log = %+v, want %s first", rep, NoHead)
		}
		rep = Verify(subDir, s.Public(), nil)
		if !rep.OK || len(rep.Notes) == 0 || !strings.Contains(rep.Notes[0], "nor whether the log was written for the workspace") {
			t.Errorf("Verify with the key alone = %+v, want OK with a note that origin and end cannot be checked", rep)
		}
	}

	// An empty log without a head is only nothing written yet.
	empty := openLog(t, filepath.Join(tempDir(t), "ws", ".foundry", "evidence"), filepath.Join(tempDir(t), "trusted"), s)
	if rep := empty.Verify(); !rep.OK || rep.Count != 0 {
		t.Errorf("Log.Verify of an empty log = %+v", rep)
	}
	// A file that is no receipt, in a log without a head, is refused too.
	writeFile(t, filepath.Join(empty.Dir(), "notes.txt"), []byte("hi"))
	subj, pt, r := probeReceipt("x", Pass)
	if _, err := empty.Append(subj, pt, r); !errors.Is(err, refusal.UntrustedState) || !strings.Contains(err.Error(), "notes.txt") {
		t.Errorf("Append to a headless log holding notes.txt = %v", err)
	}
}

// copyDir copies the regular files of from into a new directory to.
func copyDir(t testing.TB, from, to string) {
	t.Helper()
	if err := os.MkdirAll(to, 0o755); err != nil {
		t.Fatal(err)
	}
	names, err := os.ReadDir(from)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		data, err := os.ReadFile(filepath.Join(from, n.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(to, n.Name()), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// spliced signs, with s, receipt n+1 for the log id chained to receipt n
// of l — what a copy of l that went on under another ID would hold —
// and writes it into l.
func spliced(t *testing.T, l *Log, s *Signer, id string, n int64) {
	t.Helper()
	prev := readFile(t, file(l, n))
	_, body, st, err := parseReceipt(prev)
	if err != nil {
		t.Fatal(err)
	}
	st.Predicate.Log, st.Predicate.Sequence = id, n+1
	st.Predicate.Previous, st.Predicate.PreviousPayload = digestOf(prev), digestOf(body)
	env, _, err := s.sign(st)
	if err != nil {
		t.Fatal(err)
	}
	writeEnvelope(t, file(l, n+1), env)
}

// TestAppendRefusesReceiptOfAnotherLog: a receipt beyond the head that
// this key signed and that chains to the head, but for another log, is
// not adopted, and Verify names it; the same receipt for this log is.
func TestAppendRefusesReceiptOfAnotherLog(t *testing.T) {
	l := newLog(t)
	appendN(t, l, 3)
	h := head(t, l)
	other, err := newLogID()
	if err != nil {
		t.Fatal(err)
	}
	spliced(t, l, l.signer, other, 3)
	before := readFile(t, filepath.Join(l.TrustedDir(), indexName))

	subj, pt, r := probeReceipt("x", Pass)
	if _, err := l.Append(subj, pt, r); !errors.Is(err, refusal.UntrustedState) || !strings.Contains(err.Error(), "another log") {
		t.Errorf("Append over a receipt of another log = %v, want UntrustedState naming another log", err)
	}
	if after := readFile(t, filepath.Join(l.TrustedDir(), indexName)); !bytes.Equal(before, after) {
		t.Error("the refused append changed the head")
	}
	for _, hd := range []*Head{h, nil} {
		rep := Verify(l.Dir(), l.signer.Public(), hd)
		if rep.OK || rep.First.Kind != ForeignLog || rep.First.Sequence != 4 || !strings.Contains(rep.First.Message, other) {
			t.Errorf("Verify (head %v) = %+v, want receipt 4 reported as %s", hd != nil, rep, ForeignLog)
		}
	}
	if rep := l.Verify(); rep.OK || rep.First.Kind != ForeignLog {
		t.Errorf("Log.Verify = %+v, want %s", rep, ForeignLog)
	}

	spliced(t, l, l.signer, h.Log, 3) // as an append that stopped before its head leaves it
	if e := appendN(t, l, 1)[0]; e.Sequence != 5 {
		t.Errorf("the append after a receipt of this log is receipt %d, want 5", e.Sequence)
	}
	if rep := l.Verify(); !rep.OK {
		t.Errorf("Log.Verify = %+v", rep)
	}
}

// TestAppendAdoptsUnrecordedFirstReceipt: the first append records the
// log's ID (a head at 0) before it writes receipt 1, so that one which
// stops after it linked receipt 1 and before it recorded its head leaves
// a log the next append continues, not a log without a head.
func TestAppendAdoptsUnrecordedFirstReceipt(t *testing.T) {
	l := newLog(t)
	crash := errors.New("stopped")
	l.linked = func() error { return crash }
	subj, pt, r := probeReceipt("first", Pass)
	if _, err := l.Append(subj, pt, r); err != crash {
		t.Fatalf("Append with a crash after the link = %v", err)
	}
	l.linked = nil
	h := head(t, l)
	if h == nil || h.Sequence != 0 || !validLogID(h.Log) {
		t.Fatalf("the head after the first append stopped: %+v", h)
	}
	first, err := os.ReadFile(file(l, 1))
	if err != nil {
		t.Fatal(err)
	}
	e := appendN(t, l, 1)[0]
	if e.Sequence != 2 || e.Statement.Predicate.Previous != digestOf(first) || e.Statement.Predicate.Log != h.Log {
		t.Errorf("the append after an unrecorded receipt 1 is %d after %s in %s", e.Sequence, e.Statement.Predicate.Previous, e.Statement.Predicate.Log)
	}
	if p, ok, _ := l.LatestProbe("first"); !ok || p.Sequence != 1 {
		t.Errorf("the adopted receipt 1 is not indexed: %+v %v", p, ok)
	}
	if rep := l.Verify(); !rep.OK || rep.Count != 2 {
		t.Errorf("Log.Verify = %+v", rep)
	}
}

// TestAppendRefusesMovedDir: a log directory moved away and replaced
// after the log was opened — by a tool of an enclosing workspace, or a
// reset — is refused: the append does not go on in the directory moved
// away, which the path no longer names.
func TestAppendRefusesMovedDir(t *testing.T) {
	l := newLog(t)
	appendN(t, l, 2)
	if err := os.Rename(l.Dir(), l.Dir()+".moved"); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(l.Dir(), 0o755); err != nil {
		t.Fatal(err)
	}
	subj, pt, r := probeReceipt("x", Pass)
	if _, err := l.Append(subj, pt, r); !errors.Is(err, refusal.UntrustedState) || !strings.Contains(err.Error(), "moved aside or replaced") {
		t.Errorf("Append after the directory was replaced = %v, want UntrustedState", err)
	}
	if names, _ := os.ReadDir(l.Dir() + ".moved"); len(names) != 2 {
		t.Errorf("the directory moved away holds %d files, want the 2 receipts", len(names))
	}
	if rep := l.Verify(); rep.OK || !strings.Contains(rep.First.Message, "moved aside or replaced") {
		t.Errorf("Log.Verify after the directory was replaced = %+v", rep)
	}
}

// TestOpenLogRefusesOldHead: the head of an earlier format, whose
// receipts name no log, is refused with the way out; Reset moves it.
func TestOpenLogRefusesOldHead(t *testing.T) {
	dir, trusted := logDirs(t)
	l := openLog(t, dir, trusted, mustSigner(t, 1))
	appendN(t, l, 1)
	writeFile(t, filepath.Join(trusted, indexName), []byte(`{"version":1,"log":"`+dir+`","head":{"sequence":1,"digest":"sha256:00"},"probes":{}}`))
	if _, err := OpenLog(dir, trusted, mustSigner(t, 1)); !errors.Is(err, refusal.UntrustedState) || !strings.Contains(err.Error(), "cordon evidence reset") {
		t.Errorf("OpenLog with a version 1 head = %v", err)
	}
	root, rel := splitWorkspace(dir)
	if m, err := Reset(root, rel, trusted); err != nil || m.Head == "" || m.Dir == "" {
		t.Fatalf("Reset = %+v, %v", m, err)
	}
	l = openLog(t, dir, trusted, mustSigner(t, 1))
	if e := appendN(t, l, 1)[0]; e.Sequence != 1 {
		t.Errorf("the first append after the reset is receipt %d", e.Sequence)
	}
}

// splitWorkspace splits a log directory as logDirs makes it into its
// workspace and ".foundry/evidence".
func splitWorkspace(dir string) (ws, rel string) {
	ws = filepath.Dir(filepath.Dir(dir))
	return ws, filepath.Join(".foundry", "evidence")
}

// TestAppendContinuesFromHead: after receipts are deleted from the end,
// an append continues from the head the trusted directory records, so
// that the deletion stays visible as a gap.
func TestAppendContinuesFromHead(t *testing.T) {
	l := newLog(t)
	appendN(t, l, 4)
	os.Remove(filepath.Join(l.Dir(), receiptName(4)))
	e := appendN(t, l, 1)[0]
	if e.Sequence != 5 {
		t.Fatalf("the append after a deletion is receipt %d, want 5", e.Sequence)
	}
	rep := Verify(l.Dir(), l.signer.Public(), head(t, l))
	if rep.OK || rep.First.Kind != Gap || rep.First.Sequence != 4 {
		t.Errorf("Verify = %+v, want a gap at 4", rep)
	}
}

// TestConcurrentAppends: 4 goroutines and 2 processes append to one log
// at once — two goroutines through one Log, the others each through a Log
// of their own — while a reader verifies it again and again; every
// receipt lands exactly once, and the log verifies at every moment.
func TestConcurrentAppends(t *testing.T) {
	const goroutines, procs, each = 4, 2, 25
	dir, trusted := logDirs(t)
	sd := seed(1)
	start := filepath.Join(t.TempDir(), "start")
	shared := openLog(t, dir, trusted, mustSigner(t, 1))

	var cmds []*exec.Cmd
	var outs []*bytes.Buffer
	for p := range procs {
		cmd := exec.Command(os.Args[0])
		cmd.Env = append(os.Environ(), helperEnv+"=1",
			"CORDON_EVIDENCE_DIR="+dir, "CORDON_EVIDENCE_TRUSTED="+trusted, "CORDON_EVIDENCE_SEED="+hex.EncodeToString(sd),
			"CORDON_EVIDENCE_START="+start, "CORDON_EVIDENCE_WRITER=proc"+strconv.Itoa(p), "CORDON_EVIDENCE_COUNT="+strconv.Itoa(each))
		out := &bytes.Buffer{}
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds, outs = append(cmds, cmd), append(outs, out)
	}
	var wg sync.WaitGroup
	errs := make(chan error, goroutines+1)
	ready, done := make(chan struct{}), make(chan struct{})
	for g := range goroutines {
		wg.Go(func() {
			<-ready
			writer := "goroutine" + strconv.Itoa(g)
			var err error
			if g < 2 {
				err = appendTo(shared, writer, each)
			} else {
				err = appendProbes(dir, trusted, sd, writer, each)
			}
			if err != nil {
				errs <- err
			}
		})
	}
	verified := 0
	var reader sync.WaitGroup
	reader.Go(func() {
		<-ready
		for {
			select {
			case <-done:
				return
			default:
			}
			if rep := shared.Verify(); !rep.OK {
				errs <- fmt.Errorf("Verify while appending: %s", rep.First)
				return
			}
			verified++
			time.Sleep(10 * time.Millisecond) // let the writers in: a verification holds their lock
		}
	})
	if err := os.WriteFile(start, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	close(ready)
	wg.Wait()
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Errorf("process %d: %v: %s", i, err, outs[i])
		}
	}
	close(done)
	reader.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	t.Logf("verified the log %d times while appending", verified)

	const total = (goroutines + procs) * each
	h, err := ReadHead(dir, trusted)
	if err != nil || h == nil || h.Sequence != total {
		t.Fatalf("head = %+v, %v; want receipt %d", h, err, total)
	}
	rep := Verify(dir, mustSigner(t, 1).Public(), h)
	if !rep.OK || rep.Count != total || len(rep.Notes) != 0 {
		t.Fatalf("Verify = %+v, want %d receipts OK and no notes", rep, total)
	}
	entries, err := ReadLog(dir)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, e := range entries {
		seen[e.Statement.Predicate.Probe.Name]++
	}
	if len(seen) != total {
		t.Errorf("%d distinct receipts in %d, want %d", len(seen), len(entries), total)
	}
	for name, n := range seen {
		if n != 1 {
			t.Errorf("%s is in the log %d times", name, n)
		}
	}
}
