package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/cordon-run/cordon/evidence"
	"github.com/cordon-run/cordon/harness"
	"github.com/cordon-run/cordon/internal/dirfd"
	"github.com/cordon-run/cordon/internal/keystore"
	"github.com/cordon-run/cordon/internal/userdir"
	"github.com/cordon-run/cordon/refusal"
)

// evidenceCommand is the evidence command: the workspace's receipts and
// this user's public key.
var evidenceCommand = command{name: "evidence", summary: "list|show|verify|reset|key: the workspace's signed receipts, and the key that signs them", usage: evidenceUsage, run: runEvidence, subs: subsOf("list", "show", "verify", "reset", "key")}

const evidenceUsage = `usage: cordon evidence list [-w DIR] [--json]
       cordon evidence show [-w DIR] [--json] N|DIGEST
       cordon evidence verify [-w DIR] [--json] [--key PUB.pem]
       cordon evidence reset [-w DIR] [--json]
       cordon evidence key [--json]
  The workspace's receipts are its log in .foundry/evidence: one signed
  in-toto statement (a DSSE envelope) per file, each naming the log's ID
  and the digest of the one before it. The log's ID and its head (where it
  ends) are in cordon's per-user state, outside every workspace.
  list     one line per receipt: sequence, time, verdict, what, digest
  show     one receipt's statement, by sequence number (digits, or the
           file name 00000012.json) or digest (a prefix of 8 or more hex
           digits will do; digits alone are a sequence number first);
           shown as written, not verified
  verify   check every receipt's signature, its log ID and the chain.
           Without --key, with this user's key and the head of the log
           cordon recorded in its state, so that receipts deleted from the
           end, and receipts of another log, are found too; a log cordon
           has no head for was not written here (copied or moved from
           another workspace or machine) and does not verify.
           --key PUB.pem checks against that public key (from 'cordon
           evidence key', maybe on another machine): signatures, log ID and
           chain only, since the head is not there. Exit 0 when the log
           holds, 1 when it does not (the first problem is printed).
  reset    move the log aside to .foundry/evidence.reset-<UTC time> and
           its head aside in cordon's state, so that the next receipt
           begins a new log: the way out of a log that was copied here,
           tampered with, or written by an earlier cordon. Nothing is
           deleted; refused when there is nothing to reset.
  key      print this user's public key (PEM); --json adds its key ID`

// evidenceKeyName is the name of the evidence key's seed in the key store.
const evidenceKeyName = "evidence"

// maxKeyFile bounds a --key file.
const maxKeyFile = 64 << 10

func runEvidence(e *env, args []string) int {
	if len(args) > 0 {
		switch args[0] {
		case "list":
			return runEvidenceList(e, args[1:])
		case "show":
			return runEvidenceShow(e, args[1:])
		case "verify":
			return runEvidenceVerify(e, args[1:])
		case "reset":
			return runEvidenceReset(e, args[1:])
		case "key":
			return runEvidenceKey(e, args[1:])
		}
	}
	fs := e.flags("evidence")
	if code := e.parse(fs, args, evidenceUsage); code >= 0 {
		return code
	}
	if fs.NArg() == 0 {
		return e.usageError("evidence needs an operation: list, show, verify, reset or key\n" + evidenceUsage)
	}
	return e.usageError(fmt.Sprintf("unknown evidence operation %q\n%s", fs.Arg(0), evidenceUsage))
}

// evidenceWorkspace returns the canonical workspace, its evidence log's
// directory relative to it and the log directory's path. The package
// evidence opens the log from the workspace one component at a time
// without following a symlink: the log is written by cordon, outside every
// sandbox, and a symlink planted on the way is refused.
func (e *env) evidenceWorkspace() (ws, rel, dir string, err error) {
	h, err := e.harnessConfig()
	if err != nil {
		return "", "", "", err
	}
	ws, err = dirfd.Canonical(e.workspaceDir())
	if err != nil {
		kind := refusal.KindOf(err)
		if errors.Is(err, os.ErrNotExist) {
			kind = refusal.NotFound
		}
		return "", "", "", refusal.Errorf(kind, "cannot open the workspace %s: %w", e.workspaceDir(), err)
	}
	if err := h.CheckWorkspace(ws); err != nil {
		return "", "", "", err
	}
	if err := e.checkConfigOutside(ws); err != nil {
		return "", "", "", err
	}
	rel = h.EvidenceDir()
	if rel == "" {
		return "", "", "", refusal.Errorf(refusal.InvalidPolicy, "the harness configuration names no harness state directory to keep the evidence log in")
	}
	rel = filepath.Clean(rel)
	return ws, rel, filepath.Join(ws, rel), nil
}

// evidenceTrustedDir returns the directory in this user's state that
// holds the lock and the head of the workspace ws's log, creating it
// (mode 0700) when missing: evidence/<the first 16 bytes of the SHA-256
// of ws, in hex>.
func evidenceTrustedDir(h harness.Config, ws string) (string, error) {
	sum := sha256.Sum256([]byte(ws))
	return userdir.EnsurePath(h.StateDir(), "evidence", hex.EncodeToString(sum[:16]))
}

// evidenceSigner returns this user's evidence signer, its seed from the
// key store; with create, a missing key is created.
func (e *env) evidenceSigner(create bool) (*evidence.Signer, error) {
	h, err := e.harnessConfig()
	if err != nil {
		return nil, err
	}
	store, err := keystore.Open(h.StateDir())
	if err != nil {
		return nil, err
	}
	seed, err := store.Key(evidenceKeyName, create)
	if err != nil {
		return nil, err
	}
	return evidence.NewSigner(seed)
}

// evidenceLog opens the workspace's evidence log, signed with this user's
// key (created when missing with create), and returns it with its
// directory. The caller closes it.
func (e *env) evidenceLog(create bool) (*evidence.Log, string, error) {
	ws, rel, dir, err := e.evidenceWorkspace()
	if err != nil {
		return nil, "", err
	}
	s, err := e.evidenceSigner(create)
	if err != nil {
		return nil, "", err
	}
	h, _ := e.harnessConfig()
	trusted, err := evidenceTrustedDir(h, ws)
	if err != nil {
		return nil, "", err
	}
	l, err := evidence.OpenLogAt(ws, rel, trusted, s)
	if err != nil {
		return nil, "", err
	}
	return l, dir, nil
}

// receiptJSON is one receipt as list --json shows it.
type receiptJSON struct {
	Sequence      int64     `json:"sequence"`
	File          string    `json:"file"`
	Digest        string    `json:"digest"`
	Time          time.Time `json:"time"`
	Verdict       string    `json:"verdict"`
	PredicateType string    `json:"predicate_type"`
	Probe         string    `json:"probe,omitempty"`
	Op            string    `json:"op,omitempty"`
	Tool          string    `json:"tool,omitempty"`
	Command       []string  `json:"command,omitempty"`
	Autonomy      string    `json:"autonomy,omitempty"` // the level of an autonomy decision
}

func receiptOf(en evidence.Entry) receiptJSON {
	r := en.Statement.Predicate
	out := receiptJSON{Sequence: en.Sequence, File: en.File, Digest: en.Digest, Time: r.Time, Verdict: r.Verdict, PredicateType: en.Statement.PredicateType}
	if r.Probe != nil {
		out.Probe = r.Probe.Name
	}
	if r.Run != nil {
		out.Op, out.Tool, out.Command = r.Run.Op, r.Run.Tool, r.Run.Command
	}
	if a := r.Autonomy; a != nil {
		out.Autonomy, out.Op, out.Tool, out.Command = a.Level, a.Op, a.Tool, a.Command
	}
	return out
}

// what says in a few words what a receipt is about.
func (r receiptJSON) what() string {
	switch {
	case r.Probe != "":
		return "probe " + r.Probe
	case r.Autonomy != "":
		return r.Autonomy + " " + r.Op + " (autonomy decision)"
	case r.Tool != "":
		return r.Op + " " + r.Tool
	case len(r.Command) > 0:
		c := strings.Join(r.Command, " ")
		if len(c) > 60 {
			c = c[:57] + "..."
		}
		return r.Op + " " + c
	}
	return r.PredicateType
}

func runEvidenceList(e *env, args []string) int {
	fs := e.flags("evidence list")
	if code := e.parse(fs, args, evidenceUsage); code >= 0 {
		return code
	}
	if fs.NArg() != 0 {
		return e.usageError("evidence list takes no arguments\n" + evidenceUsage)
	}
	ws, rel, dir, err := e.evidenceWorkspace()
	if err != nil {
		return e.fail(err)
	}
	entries, readErr := evidence.ReadLogAt(ws, rel)
	if readErr != nil && len(entries) == 0 {
		return e.fail(readErr)
	}
	receipts := []receiptJSON{}
	for _, en := range entries {
		receipts = append(receipts, receiptOf(en))
	}
	code := exitOK
	if readErr != nil {
		code = exitError
	}
	if e.json {
		out := map[string]any{"dir": dir, "receipts": receipts}
		if readErr != nil {
			out["unreadable"] = strings.Split(readErr.Error(), "\n")
		}
		e.printJSON(out)
		return code
	}
	if len(receipts) == 0 && readErr == nil {
		fmt.Fprintf(e.stdout, "no receipts in %s\n", dir)
	}
	for _, r := range receipts {
		fmt.Fprintf(e.stdout, "%6d  %s  %-4s  %-40s  %s\n", r.Sequence, r.Time.UTC().Format(time.RFC3339), shown(r.Verdict), shown(r.what()), shortDigest(r.Digest))
	}
	if readErr != nil {
		for _, line := range strings.Split(readErr.Error(), "\n") {
			fmt.Fprintf(e.stderr, "cordon: %s\n", shown(line))
		}
		fmt.Fprintln(e.stderr, "cordon: run 'cordon evidence verify' to check the log")
	}
	return code
}

// shortDigest is "sha256:" and the first 12 hex digits of a digest.
func shortDigest(d string) string {
	if len(d) > len("sha256:")+12 {
		return d[:len("sha256:")+12]
	}
	return d
}

func runEvidenceShow(e *env, args []string) int {
	fs := e.flags("evidence show")
	if code := e.parse(fs, args, evidenceUsage); code >= 0 {
		return code
	}
	if fs.NArg() != 1 {
		return e.usageError("evidence show needs exactly one N or DIGEST\n" + evidenceUsage)
	}
	want := fs.Arg(0)
	ws, rel, dir, err := e.evidenceWorkspace()
	if err != nil {
		return e.fail(err)
	}
	entries, readErr := evidence.ReadLogAt(ws, rel)
	en, err := findReceipt(entries, want)
	if err != nil {
		if readErr != nil {
			err = fmt.Errorf("%w (and some receipts cannot be read: %v)", err, readErr)
		}
		return e.fail(err)
	}
	keyID := ""
	if len(en.Envelope.Signatures) > 0 {
		keyID = en.Envelope.Signatures[0].KeyID
	}
	if e.json {
		e.printJSON(map[string]any{"sequence": en.Sequence, "file": en.File, "digest": en.Digest, "key_id": keyID, "statement": en.Statement})
		return exitOK
	}
	pretty, err := json.MarshalIndent(en.Statement, "", "  ")
	if err != nil {
		return e.fail(err)
	}
	fmt.Fprintf(e.stdout, "receipt %d: %s, %s, signed by key %s (not verified here: run 'cordon evidence verify')\n%s\n", en.Sequence, filepath.Join(dir, en.File), en.Digest, keyID, pretty)
	return exitOK
}

// findReceipt finds the receipt want names: a sequence number (digits)
// or a file name ("%08d.json"), or a digest ("sha256:" and hex, or hex
// alone) or a prefix of one, of 8 hex digits at least, that only one
// receipt has. Digits alone are a sequence number first — "00000001" is
// receipt 1 — and a digest prefix only when no receipt has that number.
func findReceipt(entries []evidence.Entry, want string) (evidence.Entry, error) {
	num, isFile := strings.CutSuffix(want, ".json")
	if num != "" && strings.Trim(num, "0123456789") == "" {
		seq := num
		if n, err := strconv.ParseInt(num, 10, 64); err == nil {
			for _, en := range entries {
				if en.Sequence == n {
					return en, nil
				}
			}
			seq = strconv.FormatInt(n, 10)
		}
		if isFile || len(num) < 8 {
			return evidence.Entry{}, refusal.Errorf(refusal.NotFound, "the log holds no receipt %s", seq)
		}
		if en, err := findDigest(entries, num); !errors.Is(err, refusal.NotFound) {
			return en, err
		}
		return evidence.Entry{}, refusal.Errorf(refusal.NotFound, "the log holds no receipt %s, nor one whose digest begins %s", seq, num)
	}
	return findDigest(entries, want)
}

// findDigest finds the receipt whose digest is, or begins with, want
// ("sha256:" and hex, or hex alone; 8 hex digits at least).
func findDigest(entries []evidence.Entry, want string) (evidence.Entry, error) {
	hexPart := strings.TrimPrefix(want, "sha256:")
	if _, err := hex.DecodeString(hexPart + strings.Repeat("0", len(hexPart)%2)); err != nil || len(hexPart) < 8 {
		return evidence.Entry{}, refusal.Errorf(refusal.UsageError, "%q is neither a receipt's number nor a digest (sha256:HEX, 8 hex digits at least)", want)
	}
	var found []evidence.Entry
	for _, en := range entries {
		if strings.HasPrefix(en.Digest, "sha256:"+strings.ToLower(hexPart)) {
			found = append(found, en)
		}
	}
	switch len(found) {
	case 0:
		return evidence.Entry{}, refusal.Errorf(refusal.NotFound, "no receipt in the log has the digest %s", want)
	case 1:
		return found[0], nil
	}
	return evidence.Entry{}, refusal.Errorf(refusal.Invalid, "%d receipts have a digest that begins %s; give more of it", len(found), want)
}

func runEvidenceVerify(e *env, args []string) int {
	fs := e.flags("evidence verify")
	keyFile := fs.String("key", "", "a PEM public key to verify against (signatures and chain only)")
	if code := e.parse(fs, args, evidenceUsage); code >= 0 {
		return code
	}
	if fs.NArg() != 0 {
		return e.usageError("evidence verify takes no arguments\n" + evidenceUsage)
	}
	ws, rel, dir, err := e.evidenceWorkspace()
	if err != nil {
		return e.fail(err)
	}
	var pub []byte
	var rep evidence.Report
	if fs.Changed("key") {
		data, err := readFileLimit(*keyFile, maxKeyFile)
		if err != nil {
			return e.fail(refusal.Errorf(refusal.KindOf(err), "cannot read the public key %s: %w", *keyFile, err))
		}
		if pub, err = evidence.ParsePublicKey(data); err != nil {
			return e.fail(fmt.Errorf("%s: %w", *keyFile, err))
		}
		rep = evidence.VerifyAt(ws, rel, pub, nil)
	} else {
		l, _, err := e.evidenceLog(false)
		if err != nil {
			if errors.Is(err, refusal.UntrustedState) {
				err = fmt.Errorf("%w; to verify against another key, pass its public key with --key", err)
			}
			return e.fail(err)
		}
		defer l.Close()
		pub = l.Signer().Public()
		rep = l.Verify()
	}
	keyID := evidence.KeyID(pub)
	if e.json {
		out := struct {
			evidence.Report
			Dir   string `json:"dir"`
			KeyID string `json:"key_id"`
		}{rep, dir, keyID}
		e.printJSON(out)
		if !rep.OK {
			return exitError
		}
		return exitOK
	}
	if !rep.OK {
		more := ""
		switch n := len(rep.Problems) - 1; {
		case n == 1:
			more = "\ncordon: and 1 more problem (--json lists it)"
		case n > 1:
			more = fmt.Sprintf("\ncordon: and %d more problems (--json lists them)", n)
		}
		fmt.Fprintf(e.stderr, "cordon: the evidence log %s does not verify with key %s: %s%s\n", dir, keyID, shown(rep.First.String()), more)
		for _, n := range rep.Notes {
			fmt.Fprintf(e.stderr, "cordon: note: %s\n", shown(n))
		}
		return exitError
	}
	end := "signatures, log ID and chain checked"
	if rep.Head != nil {
		end = fmt.Sprintf("signatures, chain, its ID and its end at the head cordon recorded (log %s, receipt %d) checked", rep.Head.Log, rep.Head.Sequence)
	}
	fmt.Fprintf(e.stdout, "ok: %d receipts in %s verify with key %s; %s\n", rep.Count, dir, keyID, end)
	for _, n := range rep.Notes {
		fmt.Fprintf(e.stdout, "note: %s\n", shown(n))
	}
	return exitOK
}

func runEvidenceReset(e *env, args []string) int {
	fs := e.flags("evidence reset")
	if code := e.parse(fs, args, evidenceUsage); code >= 0 {
		return code
	}
	if fs.NArg() != 0 {
		return e.usageError("evidence reset takes no arguments\n" + evidenceUsage)
	}
	ws, rel, dir, err := e.evidenceWorkspace()
	if err != nil {
		return e.fail(err)
	}
	h, _ := e.harnessConfig()
	trusted, err := evidenceTrustedDir(h, ws)
	if err != nil {
		return e.fail(err)
	}
	m, err := evidence.Reset(ws, rel, trusted)
	if err != nil {
		return e.fail(err)
	}
	if e.json {
		e.printJSON(struct {
			Dir string `json:"dir"`
			evidence.Moved
		}{dir, m})
		return exitOK
	}
	switch {
	case m.Dir != "":
		fmt.Fprintf(e.stdout, "moved the evidence log %s (%d receipts) aside to %s\n", dir, m.Receipts, m.Dir)
	default:
		fmt.Fprintf(e.stdout, "the evidence log %s holds nothing to move aside\n", dir)
	}
	if m.Head != "" {
		log := ""
		if m.Log != "" {
			log = " (log " + m.Log + ")"
		}
		fmt.Fprintf(e.stdout, "moved its head%s aside to %s\n", log, m.Head)
	}
	fmt.Fprintln(e.stdout, "the next receipt begins a new log")
	return exitOK
}

func runEvidenceKey(e *env, args []string) int {
	fs := e.flags("evidence key")
	if code := e.parse(fs, args, evidenceUsage); code >= 0 {
		return code
	}
	if fs.NArg() != 0 {
		return e.usageError("evidence key takes no arguments\n" + evidenceUsage)
	}
	s, err := e.evidenceSigner(true)
	if err != nil {
		return e.fail(err)
	}
	pem := evidence.MarshalPublicKey(s.Public())
	if e.json {
		e.printJSON(map[string]string{"key_id": s.KeyID(), "public_key_pem": string(pem)})
		return exitOK
	}
	fmt.Fprint(e.stdout, string(pem))
	return exitOK
}
