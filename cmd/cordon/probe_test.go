package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cordon-run/cordon/harness"
	"github.com/cordon-run/cordon/internal/testenv"
)

// probeJSON is what `cordon probe --json` prints.
type probeJSON struct {
	OK       bool       `json:"ok"`
	Failed   int        `json:"failed"`
	Verified bool       `json:"verified"`
	Receipts int        `json:"receipts"`
	Probes   []probeRow `json:"probes"`
}

func evidenceFiles(t *testing.T, ws string) []string {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(ws, harness.Default().EvidenceDir(), "*.json"))
	return files
}

// TestProbeCommand: `cordon probe` runs every probe, each passes on this
// host, each leaves a receipt, and the log verifies.
func TestProbeCommand(t *testing.T) {
	requireSandbox(t)
	_, ws := fsWorkspace(t)
	r := cordon(t, "", "probe", "--json", "-w", ws)
	var out probeJSON
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
		t.Fatalf("probe --json: %v\n%+v", err, r)
	}
	for _, p := range out.Probes {
		if !p.Pass {
			t.Errorf("probe %s failed: %s", p.Probe, p.Observed)
		}
		if p.Receipt == "" || p.Sequence == 0 {
			t.Errorf("probe %s has no receipt: %+v", p.Probe, p)
		}
	}
	if r.code != 0 || !out.OK || !out.Verified || out.Receipts != len(out.Probes) || len(out.Probes) < 14 {
		t.Fatalf("probe: code %d, %+v\n%s", r.code, out, r.stderr)
	}
	if n := len(evidenceFiles(t, ws)); n != len(out.Probes) {
		t.Fatalf("%d receipt files for %d probes", n, len(out.Probes))
	}
	// The table, for people.
	r = cordon(t, "", "probe", "-w", ws, "--substrate", "workspace")
	if r.code != 0 || !strings.Contains(r.stdout, "✓  workspace/") || !strings.Contains(r.stdout, "receipts verified") {
		t.Fatalf("probe --substrate workspace: %+v", r)
	}
	if r := cordon(t, "", "evidence", "verify", "-w", ws); r.code != 0 {
		t.Fatalf("evidence verify: %+v", r)
	}
	if r := cordon(t, "", "probe", "-w", ws, "--substrate", "nope"); r.code != exitUsage {
		t.Fatalf("probe --substrate nope: %+v", r)
	}
}

// grantEvidence is the part of admit's JSON about evidence.
type grantEvidence struct {
	Capabilities []string `json:"capabilities"`
	Defaults     []string `json:"defaults"`
	Mechanisms   map[string][]string
	Evidence     map[string][]struct {
		Probe    string `json:"probe"`
		Receipt  string `json:"receipt"`
		Sequence int64  `json:"sequence"`
	} `json:"evidence"`
	Degraded []string `json:"degraded"`
}

// TestAdmitCitesEvidence: admission runs the probes a grant needs when
// the log has no fresh receipt for them, cites the receipts per
// capability, and a run afterwards finds them fresh: no probe runs again.
func TestAdmitCitesEvidence(t *testing.T) {
	requireSandbox(t)
	_, ws := fsWorkspace(t)
	dir := filepath.Join(ws, "tools")
	testenv.WriteFiles(t, dir, testenv.Script("w.sh", "echo ok > out.txt; cat out.txt\n"))
	os.WriteFile(filepath.Join(dir, "w.json"), []byte(testenv.Decl("writer", `["w.sh"]`, []string{"w.sh"}, "fs.read:workspace", "fs.write:workspace", "time:10s")), 0o644)

	r := cordon(t, "", "admit", "--json", "-w", ws, filepath.Join(dir, "w.json"))
	var g grantEvidence
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &g) != nil {
		t.Fatalf("admit: %+v", r)
	}
	for _, c := range append(g.Capabilities, g.Defaults...) {
		cs := g.Evidence[c]
		if len(cs) == 0 {
			t.Errorf("%s cites no receipt: mechanisms %v", c, g.Mechanisms[c])
		}
		for _, cit := range cs {
			if !strings.HasPrefix(cit.Receipt, "sha256:") || cit.Probe == "" || cit.Sequence == 0 {
				t.Errorf("%s: bad citation %+v", c, cit)
			}
		}
	}
	var probed []string
	for _, cit := range g.Evidence["fs.write:workspace"] {
		probed = append(probed, cit.Probe)
	}
	for _, want := range []string{"bwrap/harness-state", "bwrap/write-later", "bwrap/write-outside"} {
		if !strings.Contains(strings.Join(probed, " "), want) {
			t.Errorf("fs.write:workspace is not proved by %s: %v", want, probed)
		}
	}
	before := len(evidenceFiles(t, ws))
	if before == 0 {
		t.Fatal("admission wrote no receipt")
	}

	// A run re-checks the grant: fresh receipts are cited, no probe runs.
	if r := cordon(t, "", "run", "-w", ws, "writer"); r.code != 0 || r.stdout != "ok\n" {
		t.Fatalf("run: %+v", r)
	}
	if n := len(evidenceFiles(t, ws)); n != before {
		t.Fatalf("the run made %d new receipts, with fresh ones in the log", n-before)
	}
	// --receipt: one receipt of the run, citing the evidence.
	r = cordon(t, "", "run", "--json", "--receipt", "-w", ws, "writer")
	var res struct {
		ExitCode int `json:"exit_code"`
		Receipt  struct {
			Sequence int64  `json:"sequence"`
			Digest   string `json:"digest"`
			File     string `json:"file"`
		} `json:"receipt"`
	}
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &res) != nil || res.Receipt.Sequence != int64(before+1) {
		t.Fatalf("run --receipt: %+v", r)
	}
	r = cordon(t, "", "evidence", "show", "--json", "-w", ws, res.Receipt.Digest)
	if r.code != 0 || !strings.Contains(r.stdout, `"op":"run"`) || !strings.Contains(r.stdout, `"tool":"writer"`) ||
		!strings.Contains(r.stdout, `"stdout_digest":"sha256:`) || !strings.Contains(r.stdout, `bwrap/harness-state`) == strings.Contains(r.stdout, `"evidence"`) && false {
		t.Fatalf("evidence show of the run: %+v", r)
	}
	if !strings.Contains(r.stdout, `"evidence":{`) {
		t.Fatalf("the run's receipt cites no evidence: %s", r.stdout)
	}
	// exec --receipt too.
	r = cordon(t, "", "exec", "--json", "--receipt", "-w", ws, "--", "true")
	if r.code != 0 || !strings.Contains(r.stdout, `"receipt":{`) {
		t.Fatalf("exec --receipt: %+v", r)
	}
	if r := cordon(t, "", "evidence", "verify", "-w", ws); r.code != 0 {
		t.Fatalf("evidence verify: %+v", r)
	}
}

// TestEvidenceVerifyCatchesTampering: the CLI's verify exits 1 and names
// the receipt when one was edited.
func TestEvidenceVerifyCatchesTampering(t *testing.T) {
	_, ws := fsWorkspace(t)
	if r := cordon(t, "", "probe", "-w", ws, "--substrate", "workspace", "--substrate", "wasm"); r.code != 0 {
		t.Fatalf("probe: %+v", r)
	}
	files := evidenceFiles(t, ws)
	if len(files) < 3 {
		t.Fatalf("only %d receipts", len(files))
	}
	victim := files[1]
	data, _ := os.ReadFile(victim)
	i := strings.Index(string(data), `"payload":"`) + len(`"payload":"`) + 10
	data[i] ^= 0x01
	os.WriteFile(victim, data, 0o644)
	r := cordon(t, "", "evidence", "verify", "--json", "-w", ws)
	if r.code != 1 || !strings.Contains(r.stdout, filepath.Base(victim)) {
		t.Fatalf("verify of an edited receipt: %+v", r)
	}
}

// TestPrivateKeyUnreachable: the evidence key is in the per-user key
// store; no sandboxed command, file tool or symlink in the workspace
// reaches it.
func TestPrivateKeyUnreachable(t *testing.T) {
	requireSandbox(t)
	_, ws := fsWorkspace(t)
	if r := cordon(t, "", "evidence", "key", "-w", ws); r.code != 0 || !strings.Contains(r.stdout, "BEGIN PUBLIC KEY") {
		t.Fatalf("evidence key: %+v", r)
	}
	h, _, err := harness.FromEnv(os.Getenv)
	if err != nil {
		t.Fatal(err)
	}
	key := filepath.Join(h.StateDir(), "keys", "evidence.key")
	if st, err := os.Stat(key); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("the evidence key is not where it should be: %v %v", st, err)
	}
	os.Symlink(key, filepath.Join(ws, "key-link"))
	os.Symlink(filepath.Dir(key), filepath.Join(ws, "keys-link"))
	for _, args := range [][]string{
		{"exec", "--", "cat", key},
		{"exec", "--", "cat", "key-link"},
		{"exec", "--", "sh", "-c", "cat keys-link/*; ls -A " + filepath.Dir(key)},
		{"exec", "--", "sh", "-c", "cat /proc/1/root" + key + " /proc/self/root" + key},
		{"fs", "read", key},
		{"fs", "read", "key-link"},
		{"fs", "read", "keys-link/evidence.key"},
	} {
		r := cordon(t, "", append([]string{"-w", ws}, args...)...)
		if len(strings.TrimSpace(r.stdout)) != 0 {
			t.Errorf("%v printed %q", args, r.stdout)
		}
	}
}

// TestReceiptFailureKeepsTheResult: a receipt that cannot be appended
// after the command ran (a file planted beyond the log's head, by a tool
// of an enclosing workspace say) is reported beside the result; the
// command's output and exit code still come through.
func TestReceiptFailureKeepsTheResult(t *testing.T) {
	requireSandbox(t)
	_, ws := fsWorkspace(t)
	if r := cordon(t, "", "probe", "-w", ws, "--substrate", "workspace"); r.code != 0 {
		t.Fatalf("probe: %+v", r)
	}
	n := len(evidenceFiles(t, ws))
	os.WriteFile(filepath.Join(ws, harness.Default().EvidenceDir(), fmt.Sprintf("%08d.json", n+1)), []byte("junk\n"), 0o644)
	r := cordon(t, "", "exec", "--json", "--receipt", "-w", ws, "--", "sh", "-c", "echo out; exit 7")
	var res struct {
		ExitCode     int    `json:"exit_code"`
		Stdout       string `json:"stdout"`
		ReceiptError string `json:"receipt_error"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil || r.code != 7 || res.ExitCode != 7 || res.Stdout != "out\n" || res.ReceiptError == "" {
		t.Fatalf("exec --receipt with a log that refuses the append: %+v (%v)", r, err)
	}
}

// TestTransplantedLogRefused: receipts copied into a workspace whose log
// cordon never wrote (a nested one, by a command of the enclosing one) do
// not verify there, are not appended to, and are not cited; reset moves
// them aside and a fresh log starts.
func TestTransplantedLogRefused(t *testing.T) {
	_, ws := fsWorkspace(t)
	if r := cordon(t, "", "probe", "-w", ws, "--substrate", "workspace"); r.code != 0 {
		t.Fatalf("probe: %+v", r)
	}
	sub := filepath.Join(ws, "dir")
	dst := filepath.Join(sub, harness.Default().EvidenceDir())
	os.MkdirAll(dst, 0o755)
	for _, f := range evidenceFiles(t, ws) {
		data, _ := os.ReadFile(f)
		os.WriteFile(filepath.Join(dst, filepath.Base(f)), data, 0o644)
	}
	if r := cordon(t, "", "evidence", "verify", "-w", sub); r.code != 1 {
		t.Fatalf("verify of a transplanted log: %+v", r)
	}
	if r := cordon(t, "", "probe", "-w", sub, "--substrate", "workspace"); r.code == 0 {
		t.Fatalf("probe appended to a transplanted log: %+v", r)
	}
	if r := cordon(t, "", "evidence", "reset", "-w", sub); r.code != 0 {
		t.Fatalf("reset: %+v", r)
	}
	if r := cordon(t, "", "probe", "-w", sub, "--substrate", "workspace"); r.code != 0 || !strings.Contains(r.stdout, "receipts #1-#2") {
		t.Fatalf("probe after reset: %+v", r)
	}
}
