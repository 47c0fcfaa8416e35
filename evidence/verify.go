package evidence

import (
	"crypto/ed25519"
	"fmt"
	"path/filepath"
	"sort"

	"golang.org/x/sys/unix"
)

// Kind is the kind of tampering, or damage, a [Problem] shows.
type Kind string

// The kinds of [Problem].
const (
	// Unexpected: a file in the log directory that is not a receipt (nor a
	// writer's temporary file).
	Unexpected Kind = "unexpected-file"
	// Unreadable: a receipt file that cannot be read, or is not a whole
	// DSSE envelope (torn or truncated), or is not a regular file.
	Unreadable Kind = "unreadable"
	// EditedPayload: the payload (or its type) was edited after signing.
	EditedPayload Kind = "edited-payload"
	// EditedSignature: the signature was edited, removed, added to, or made
	// by another key under this key's ID; the payload is as signed.
	EditedSignature Kind = "edited-signature"
	// BadSignature: the signature does not verify, and nothing tells
	// whether the payload or the signature was edited.
	BadSignature Kind = "bad-signature"
	// ForeignKey: signed by another key.
	ForeignKey Kind = "foreign-key"
	// Malformed: signed by this key, and not a valid receipt.
	Malformed Kind = "malformed"
	// Reordered: the file holds another receipt than its name says:
	// receipts were swapped, renamed or renumbered.
	Reordered Kind = "reordered"
	// Gap: receipts are missing from the middle of the log (deleted).
	Gap Kind = "gap"
	// BrokenChain: a receipt does not name the receipt before it: one of
	// the two was replaced by another receipt of the same number.
	BrokenChain Kind = "broken-chain"
	// Truncated: the log ends before the head the trusted directory
	// records: its last receipts were deleted.
	Truncated Kind = "truncated"
	// Inserted: receipts after the head the trusted directory records.
	Inserted Kind = "inserted"
	// Replaced: the receipt at the head is not the one the head records.
	Replaced Kind = "replaced"
	// ForeignLog: a receipt this key signed for another log: it names
	// another log ID than the head (or, without a head, than the first
	// receipt) — copied or spliced in from another log.
	ForeignLog Kind = "foreign-log"
	// NoHead: the log holds receipts but the trusted directory holds no
	// head for it: cordon never wrote it here (it was copied or moved
	// from another workspace or machine), so neither its end nor its
	// origin can be checked. Only [Log.Verify] reports it; [Verify]
	// without a head notes what it cannot check instead.
	NoHead Kind = "no-head"
)

// Problem is what is wrong with one receipt of a log.
type Problem struct {
	File     string `json:"file"`     // the receipt's file name, "%08d.json"
	Sequence int64  `json:"sequence"` // the receipt's number; 0 for a file that is not a receipt
	Kind     Kind   `json:"kind"`
	Message  string `json:"message"`
}

func (p *Problem) String() string {
	if p == nil {
		return "no problem"
	}
	if p.File == "" {
		return fmt.Sprintf("%s: %s", p.Kind, p.Message)
	}
	return fmt.Sprintf("%s: %s: %s", p.File, p.Kind, p.Message)
}

// Report is what [Verify] found.
type Report struct {
	// OK is true when every receipt verifies, the chain holds, and (with
	// a head) the log ends at the head.
	OK bool `json:"ok"`
	// Count is the number of receipt files in the log.
	Count int `json:"count"`
	// Head is the head the log's end was checked against, nil when none.
	Head *Head `json:"head"`
	// First is the first problem in the log's order, nil when OK.
	First *Problem `json:"problem,omitempty"`
	// Problems are all the problems found, in the log's order (at most
	// maxProblems of them).
	Problems []Problem `json:"problems,omitempty"`
	// Notes say what was not checked, and what was ignored.
	Notes []string `json:"notes,omitempty"`
}

// maxProblems bounds the problems a report lists.
const maxProblems = 1000

// prepend makes p the report's first problem.
func (r *Report) prepend(p Problem) {
	r.Problems = append([]Problem{p}, r.Problems...)
	r.First = &r.Problems[0]
	r.OK = false
}

// Verify verifies the log in dir (an absolute, clean path, no component
// of it a symlink) as [VerifyAt] does.
func Verify(dir string, pub ed25519.PublicKey, head *Head) Report {
	root, rel, err := splitAbs(dir)
	if err != nil {
		return failed(Problem{Kind: Unreadable, Message: "cannot verify " + dir + ": " + err.Error()})
	}
	return VerifyAt(root, rel, pub, head)
}

// VerifyAt checks the log in the directory rel below root (walked as
// [OpenLogAt] walks it, creating nothing) against the public key pub,
// receipt by receipt in sequence order: each file is named "%08d.json",
// is a DSSE envelope of type [PayloadType] with exactly one signature, by
// pub's key, that verifies; its payload is an in-toto Statement v1 that is
// a valid receipt; its sequence number is its file's; every receipt names
// the same log ID; the numbers run from 1 with no gap; and each receipt's
// Previous is the digest of the file before it. A file in the directory
// that is not a receipt is a problem too; a writer's temporary file is
// noted and ignored.
//
// head is the head the trusted directory records ([ReadHead],
// [Log.Head]); with it, every receipt must name the head's log ID (else
// [ForeignLog]) and the log must end exactly there: ending earlier is
// [Truncated], going on past it is [Inserted]. Without it (nil: verifying
// a log copied from another machine), receipts deleted from the end of the
// log cannot be detected, nor whether the log was written for the
// workspace it is in, and the report's notes say so.
//
// A missing directory is an empty log.
func VerifyAt(root, rel string, pub ed25519.PublicKey, head *Head) Report {
	v, err := newVerifier(pub)
	if err != nil {
		return failed(Problem{Kind: Unreadable, Message: "cannot verify: " + err.Error()})
	}
	fd, err := openLogRead(root, rel)
	if err != nil {
		return failed(Problem{Kind: Unreadable, Message: "cannot verify: " + err.Error()})
	}
	if fd >= 0 {
		defer unix.Close(fd)
	}
	_, rep := v.scan(fd, filepath.Join(root, rel), head)
	return rep
}

func failed(p Problem) Report { return Report{First: &p, Problems: []Problem{p}} }

// record is what verification keeps of one receipt file.
type record struct {
	num           int64
	name          string
	digest        string     // of the file
	payloadDigest string     // of the decoded payload, "" when it does not decode
	st            *Statement // set when the file has no problem of its own
	sig           sigCheck
	problem       *Problem // what is wrong with the file on its own
}

// inspect checks the receipt file name (number num), read as data (or
// failing with readErr), on its own: everything but the chain.
func (v *verifier) inspect(num int64, name string, data []byte, readErr error) record {
	rec := record{num: num, name: name}
	bad := func(k Kind, format string, args ...any) record {
		rec.problem = &Problem{File: name, Sequence: num, Kind: k, Message: fmt.Sprintf(format, args...)}
		return rec
	}
	if readErr != nil {
		return bad(Unreadable, "cannot read the receipt: %v", readErr)
	}
	rec.digest = digestOf(data)
	env, body, st, err := parseReceipt(data)
	if body == nil {
		if env.Payload != "" && env.PayloadType != "" {
			return bad(EditedPayload, "the payload was edited: %v", err)
		}
		return bad(Unreadable, "the file is %v", err)
	}
	rec.payloadDigest = digestOf(body)
	if env.PayloadType != PayloadType {
		return bad(EditedPayload, "the payload type was edited: it is %q, not %q", env.PayloadType, PayloadType)
	}
	switch rec.sig = v.check(&env); rec.sig {
	case sigCount:
		return bad(EditedSignature, "it holds %d signatures; cordon signs each receipt exactly once", len(env.Signatures))
	case sigNoKeyID:
		return bad(EditedSignature, "its signature names no key (an empty keyid); cordon names its key %s", v.keyID)
	case sigForeign:
		return bad(ForeignKey, "it was signed by another key: keyid %s, not this key's %s", env.Signatures[0].KeyID, v.keyID)
	case sigMalformed:
		return bad(EditedSignature, "the signature was edited: it is not the base64 of a %d-byte ed25519 signature", ed25519.SignatureSize)
	case sigInvalid:
		return bad(BadSignature, "the signature does not verify with this key (%s) over the payload: the payload or the signature was edited", v.keyID)
	}
	if err != nil {
		return bad(Malformed, "it is signed by this key but %v", err)
	}
	if err := st.validate(); err != nil {
		return bad(Malformed, "it is signed by this key but is not a valid receipt: %v", err)
	}
	rec.st = &st
	return rec
}

// scan reads and checks every file of the log directory fd (-1: none)
// (named dir) against v, then the chain, then (when head is not nil) the log's end.
// It returns the records in sequence order and the report.
func (v *verifier) scan(fd int, dir string, head *Head) ([]record, Report) {
	var names dirNames
	if fd >= 0 {
		var err error
		if names, err = listDir(fd, dir); err != nil {
			return nil, failed(Problem{Kind: Unreadable, Message: "cannot list the log: " + err.Error()})
		}
	}
	rep := Report{Head: head}
	var problems []Problem
	for _, n := range names.others {
		problems = append(problems, Problem{File: n, Kind: Unexpected, Message: "the log directory holds a file that is not a receipt (receipts are named 00000001.json, 00000002.json, ...)"})
	}
	for _, n := range names.temps {
		rep.Notes = append(rep.Notes, fmt.Sprintf("ignored %s: a receipt being written, or left by a writer that stopped", n))
	}
	recs := make([]record, 0, len(names.receipts))
	for _, n := range names.receipts {
		name := receiptName(n)
		data, err := readFileAt(fd, name)
		recs = append(recs, v.inspect(n, name, data, err))
	}
	rep.Count = len(recs)

	// failed[i] is set once recs[i] has a problem: the chain check of the
	// receipt after it is then not reported again.
	failedAt := make([]bool, len(recs))
	expected := int64(1)
	// logID is the log every receipt must name: the head's, or without
	// one, the first receipt's that verifies (named by logFrom).
	logID, logFrom := "", ""
	if head != nil && head.Log != "" {
		logID, logFrom = head.Log, "the head in the trusted directory"
	}
	for i := range recs {
		rec := &recs[i]
		if rec.num > expected {
			problems = append(problems, gapProblem(expected, rec.num))
		}
		expected = rec.num + 1
		if rec.problem != nil {
			p := *rec.problem
			if rec.sig == sigInvalid {
				refineSignature(&p, recs, i, head)
			}
			problems = append(problems, p)
			failedAt[i] = true
			continue
		}
		r := &rec.st.Predicate
		if r.Sequence != rec.num {
			problems = append(problems, Problem{File: rec.name, Sequence: rec.num, Kind: Reordered,
				Message: fmt.Sprintf("the file holds receipt %d, not %d: receipts were swapped, renamed or renumbered", r.Sequence, rec.num)})
			failedAt[i] = true
			continue
		}
		if logID == "" {
			logID, logFrom = r.Log, rec.name
		}
		if r.Log != logID {
			problems = append(problems, Problem{File: rec.name, Sequence: rec.num, Kind: ForeignLog,
				Message: fmt.Sprintf("it is a receipt of the log %s, but %s names the log %s: it was copied or spliced in from another log of this key", r.Log, logFrom, logID)})
			failedAt[i] = true
			continue
		}
		if p := chainProblem(recs, failedAt, i); p != nil {
			problems = append(problems, *p)
			failedAt[i] = true
		}
	}
	if head != nil {
		problems = append(problems, headProblems(recs, failedAt, head)...)
	} else {
		rep.Notes = append(rep.Notes, "no head to check the end against: receipts deleted from the end of the log cannot be detected, nor whether the log was written for the workspace it is in")
	}

	sort.SliceStable(problems, func(i, j int) bool { return problems[i].Sequence < problems[j].Sequence })
	if len(problems) > maxProblems {
		rep.Notes = append(rep.Notes, fmt.Sprintf("%d more problems are not listed", len(problems)-maxProblems))
		problems = problems[:maxProblems]
	}
	rep.Problems = problems
	if len(problems) > 0 {
		rep.First = &rep.Problems[0]
	}
	rep.OK = len(problems) == 0
	return recs, rep
}

func gapProblem(from, next int64) Problem {
	return Problem{File: receiptName(from), Sequence: from, Kind: Gap,
		Message: fmt.Sprintf("%s missing (the next file is %s): deleted from the middle of the log", receipts(from, next-1, "is", "are"), receiptName(next))}
}

// receipts names the receipts from to to, with the verb one or many
// takes: "receipt 3 is", "receipts 3 to 5 are".
func receipts(from, to int64, one, many string) string {
	if from == to {
		return fmt.Sprintf("receipt %d %s", from, one)
	}
	return fmt.Sprintf("receipts %d to %d %s", from, to, many)
}

// refineSignature tells, of receipt i whose signature does not verify,
// whether its payload or its signature was edited: the receipt after it
// (when that one verifies) names the digest of the payload it followed,
// and so does the head for the last receipt.
func refineSignature(p *Problem, recs []record, i int, head *Head) {
	rec := &recs[i]
	want, by := "", ""
	switch {
	case i+1 < len(recs) && recs[i+1].num == rec.num+1 && recs[i+1].st != nil:
		want, by = recs[i+1].st.Predicate.PreviousPayload, "the receipt after it"
	case head != nil && head.Sequence == rec.num:
		want, by = head.PayloadDigest, "the head in the trusted directory"
	}
	switch {
	case want == "":
		return
	case want == rec.payloadDigest:
		p.Kind = EditedSignature
		p.Message = fmt.Sprintf("the signature does not verify with this key, and the payload is the one %s names: the signature was edited, or made by another key under this key's ID", by)
	default:
		p.Kind = EditedPayload
		p.Message = fmt.Sprintf("the signature does not verify with this key, and the payload is not the one %s names (%s, not %s): the payload was edited", by, want, rec.payloadDigest)
	}
}

// chainProblem checks that receipt i, which verifies, names the receipt
// before it; nil when it does, or when that one is missing or failed (its
// own problem is reported).
func chainProblem(recs []record, failedAt []bool, i int) *Problem {
	rec := &recs[i]
	r := &rec.st.Predicate
	if rec.num == 1 {
		if r.Previous != "" || r.PreviousPayload != "" {
			return &Problem{File: rec.name, Sequence: 1, Kind: BrokenChain,
				Message: fmt.Sprintf("the first receipt names a previous one (%s): receipts before it were deleted and the log renumbered, or it comes from another log", r.Previous)}
		}
		return nil
	}
	if i == 0 || recs[i-1].num != rec.num-1 || failedAt[i-1] {
		return nil
	}
	prev := &recs[i-1]
	if r.Previous == prev.digest && (r.PreviousPayload == "" || r.PreviousPayload == prev.payloadDigest) {
		return nil
	}
	return &Problem{File: rec.name, Sequence: rec.num, Kind: BrokenChain,
		Message: fmt.Sprintf("it names %s as the receipt before it, but %s is %s: one of the two was replaced by another receipt of the same number (from another log, or signed again)", r.Previous, prev.name, prev.digest)}
}

// headProblems checks the end of the log against head.
func headProblems(recs []record, failedAt []bool, head *Head) []Problem {
	var out []Problem
	last := int64(0)
	if len(recs) > 0 {
		last = recs[len(recs)-1].num
	}
	if last < head.Sequence {
		what := fmt.Sprintf("the log ends at receipt %d", last)
		if last == 0 {
			what = "the log is empty"
		}
		out = append(out, Problem{File: receiptName(last + 1), Sequence: last + 1, Kind: Truncated,
			Message: fmt.Sprintf("%s, but the head in the trusted directory is receipt %d (%s): %s deleted from its end", what, head.Sequence, head.Digest, receipts(last+1, head.Sequence, "was", "were"))})
	}
	for i := range recs {
		rec := &recs[i]
		switch {
		case rec.num == head.Sequence && !failedAt[i] && rec.digest != head.Digest:
			out = append(out, Problem{File: rec.name, Sequence: rec.num, Kind: Replaced,
				Message: fmt.Sprintf("it is %s, but the head in the trusted directory records %s for receipt %d: the end of the log was rewritten", rec.digest, head.Digest, rec.num)})
		case rec.num > head.Sequence:
			out = append(out, Problem{File: rec.name, Sequence: rec.num, Kind: Inserted,
				Message: fmt.Sprintf("the log goes on past its head in the trusted directory (receipt %d): %s inserted (or left by an append that stopped before it recorded the head: the next append adopts a receipt this key signed for this log and chained)", head.Sequence, receipts(rec.num, last, "was", "were"))})
			return out
		}
	}
	return out
}
