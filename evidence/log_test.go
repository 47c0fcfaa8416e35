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
// and a trusted directory under a fresh temporary directory.
func logDirs(t testing.TB) (dir, trusted string) {
	root := t.TempDir()
	return filepath.Join(root, "ws", ".foundry", "evidence"), filepath.Join(root, "state", "evidence", "0123456789abcdef")
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
	if h == nil || *h != (Head{Sequence: 3, Digest: prev, PayloadDigest: prevPayload}) {
		t.Errorf("Head() = %+v, want receipt 3 %s %s", h, prev, prevPayload)
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

// TestAppendAdoptsHeadlessLog: a log that the trusted directory holds no
// head for (a workspace moved) is continued when it verifies with this
// key, and refused when it does not.
func TestAppendAdoptsHeadlessLog(t *testing.T) {
	s := mustSigner(t, 1)
	dir, trusted := logDirs(t)
	appendN(t, openLog(t, dir, trusted, s), 3)

	moved := openLog(t, dir, filepath.Join(t.TempDir(), "new-trusted"), s)
	if h := head(t, moved); h != nil {
		t.Fatalf("a new trusted directory has a head: %+v", h)
	}
	e := appendN(t, moved, 1)[0]
	if e.Sequence != 4 {
		t.Errorf("the headless log continued at %d, want 4", e.Sequence)
	}
	if p, ok, _ := moved.LatestProbe("p/3"); !ok || p.Sequence != 3 {
		t.Errorf("adopting did not index the log's probes: %+v %v", p, ok)
	}
	if rep := Verify(dir, s.Public(), head(t, moved)); !rep.OK || rep.Count != 4 {
		t.Errorf("Verify = %+v", rep)
	}

	stranger := openLog(t, dir, filepath.Join(t.TempDir(), "stranger"), mustSigner(t, 2))
	subj, pt, r := probeReceipt("x", Pass)
	if _, err := stranger.Append(subj, pt, r); !errors.Is(err, refusal.UntrustedState) || !strings.Contains(err.Error(), "foreign-key") {
		t.Errorf("another key's Append to a headless log = %v, want UntrustedState naming the foreign key", err)
	}
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
