package evidence

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// The formats a receipt is written in: an in-toto Statement v1 in a DSSE
// envelope.
const (
	// PayloadType is the DSSE payload type of every receipt.
	PayloadType = "application/vnd.in-toto+json"
	// StatementType is the in-toto Statement's _type.
	StatementType = "https://in-toto.io/Statement/v1"
	// ProbePredicate is the predicate type of a probe's receipt.
	ProbePredicate = "https://cordon.run/evidence/probe/v1"
	// RunPredicate is the predicate type of a run's receipt (exec, run).
	RunPredicate = "https://cordon.run/evidence/run/v1"
	// AutonomyPredicate is the predicate type of an autonomy decision's
	// receipt: whether a run was let start unattended, and why.
	AutonomyPredicate = "https://cordon.run/evidence/autonomy/v1"
)

// Verdicts of a receipt.
const (
	Pass = "pass" // a probe observed what it expected
	Fail = "fail" // a probe observed something else
	Ran  = "ran"  // a run's receipt: the command or tool ran
	// An autonomy decision's verdicts.
	Allowed = "allowed" // every precondition held: the run started
	Refused = "refused" // a precondition did not hold: nothing ran
)

// Statement is an in-toto Statement v1 whose predicate is a [Receipt].
type Statement struct {
	Type          string    `json:"_type"`
	Subject       []Subject `json:"subject"`
	PredicateType string    `json:"predicateType"`
	Predicate     Receipt   `json:"predicate"`
}

// Subject is what a statement is about: a name and its digests
// ({"sha256": "hex"}).
type Subject struct {
	Name   string            `json:"name"`
	Digest map[string]string `json:"digest"`
}

// Receipt is the predicate of every receipt: who wrote it (cordon's
// binary, on which host), when, the verdict, and either a probe or a run.
// Log names the log it was written for, Sequence and Previous chain it to
// the receipt before it there; PreviousPayload lets [Verify] tell, of a
// receipt whose signature does not verify, whether its payload or its
// signature was edited.
type Receipt struct {
	// Log is the ID of the log the receipt was written for (32 hex
	// digits, made at random when the log was begun, kept in its head):
	// a receipt copied into another log, by the same key, names another.
	Log             string    `json:"log"`
	Sequence        int64     `json:"sequence"`                   // 1 for the first receipt of a log
	Previous        string    `json:"previous,omitempty"`         // "sha256:..." of the previous receipt's file
	PreviousPayload string    `json:"previous_payload,omitempty"` // "sha256:..." of the previous receipt's payload (its statement's JSON)
	Time            time.Time `json:"time"`
	Host            Host      `json:"host"`
	Cordon          Binary    `json:"cordon"`
	Verdict         string    `json:"verdict"`
	Probe           *Probe    `json:"probe,omitempty"`
	Run             *Run      `json:"run,omitempty"`
	Autonomy        *Autonomy `json:"autonomy,omitempty"`
}

// Autonomy is an autonomy decision: the level asked for, where, for what,
// and each precondition with what it rests on.
type Autonomy struct {
	Level         string         `json:"level"`
	Workspace     string         `json:"workspace"`
	Root          string         `json:"root,omitempty"` // the disposable root's ID, when the workspace is one
	Op            string         `json:"op"`             // exec or run
	Substrate     string         `json:"substrate"`
	Command       []string       `json:"command,omitempty"`
	Tool          string         `json:"tool,omitempty"`
	Preconditions []Precondition `json:"preconditions"`
}

// Precondition is one precondition of an autonomy level, checked.
type Precondition struct {
	Name   string `json:"name"`
	Pass   bool   `json:"pass"`
	Detail string `json:"detail"`
	// Evidence lists what the check rests on: receipts ("sha256:..."),
	// mechanisms, the root's record.
	Evidence []string `json:"evidence,omitempty"`
}

// Host is what a receipt records of the host it was made on.
type Host struct {
	OS        string `json:"os"`
	Arch      string `json:"arch"`
	Kernel    string `json:"kernel,omitempty"`
	UID       int    `json:"uid"`
	Container bool   `json:"container"`            // inside a container (docker, podman, kubernetes, ...)
	Bwrap     string `json:"bwrap,omitempty"`      // bubblewrap's version, "" when not found
	BwrapPath string `json:"bwrap_path,omitempty"` // the bubblewrap binary the probes used
	// Harness is the digest of the harness configuration the probes ran
	// under (harness state, write-later paths, state and cache
	// directories): another configuration makes their receipts stale.
	Harness     string `json:"harness,omitempty"`
	LandlockABI int    `json:"landlock_abi"`     // 0 when Landlock is not available
	UserNS      bool   `json:"user_namespaces"`  // unprivileged user namespaces can be created
	Seccomp     bool   `json:"seccomp"`          // the kernel has seccomp filters
	Wazero      string `json:"wazero,omitempty"` // the wazero version compiled in
	// OCI is the OCI runtime the oci substrate tries first and its
	// version ("runc: runc version 1.1.5"), "" when there is none;
	// OCIPath the program.
	OCI     string `json:"oci,omitempty"`
	OCIPath string `json:"oci_path,omitempty"`
}

// Digest returns "sha256:" and the hex SHA-256 of the host facts' JSON:
// receipts made under the same facts have the same digest, so a caller can
// tell whether evidence was made on the host as it is now.
func (h Host) Digest() string {
	data, _ := json.Marshal(h) // plain fields: it cannot fail
	return digestOf(data)
}

// Binary is the cordon binary that wrote a receipt.
type Binary struct {
	Digest  string `json:"digest"` // "sha256:..." of the executable
	Version string `json:"version,omitempty"`
}

// Probe is what a probe tried and what it saw.
type Probe struct {
	Name       string   `json:"name"`       // e.g. "bwrap/write-outside"
	Substrate  string   `json:"substrate"`  // e.g. "bwrap"
	Mechanisms []string `json:"mechanisms"` // the mechanism names it proves, e.g. "bwrap: ro-root"
	Expected   string   `json:"expected"`
	Observed   string   `json:"observed"`
	// Degraded names what the substrate works with less of than usual
	// (an older Landlock ABI, no user namespaces).
	Degraded   []string `json:"degraded,omitempty"`
	DurationMS float64  `json:"duration_ms"`
}

// Run is what a run's receipt records: what ran under which grant, and
// what came of it (digests of the output, not the output).
type Run struct {
	Op            string              `json:"op"` // "exec" or "run"
	Command       []string            `json:"command,omitempty"`
	Tool          string              `json:"tool,omitempty"`
	Digest        string              `json:"digest"` // the command's or the tool's "sha256:..."
	Substrate     string              `json:"substrate"`
	Sandboxed     bool                `json:"sandboxed"`
	Capabilities  []string            `json:"capabilities"`
	Mechanisms    map[string][]string `json:"mechanisms,omitempty"`
	Evidence      map[string][]string `json:"evidence,omitempty"` // mechanism -> receipts that proved it
	ExitCode      int                 `json:"exit_code"`
	Signal        string              `json:"signal,omitempty"`
	TimedOut      bool                `json:"timed_out"`
	StdoutDigest  string              `json:"stdout_digest"`
	StderrDigest  string              `json:"stderr_digest"`
	StdoutBytes   int64               `json:"stdout_bytes"`
	StderrBytes   int64               `json:"stderr_bytes"`
	StdoutClipped bool                `json:"stdout_clipped"`
	StderrClipped bool                `json:"stderr_clipped"`
	DurationMS    float64             `json:"duration_ms"`
	// Egress is the egress proxy's log of the run (its substrate has
	// one): every connection it allowed or refused, and the bytes moved.
	Egress []EgressEvent `json:"egress,omitempty"`
	// EgressDropped counts the decisions past the log's bound.
	EgressDropped int `json:"egress_dropped,omitempty"`
}

// EgressEvent is one decision of the egress proxy during a run.
type EgressEvent struct {
	Time    time.Time `json:"time"`
	Method  string    `json:"method"`         // CONNECT, GET, ...
	Name    string    `json:"name"`           // the host as the tool asked for it
	Port    int       `json:"port"`           // and its port
	Addr    string    `json:"addr,omitempty"` // the address dialled
	Allowed bool      `json:"allowed"`
	Reason  string    `json:"reason,omitempty"` // the rule that allowed it, or why it was refused
	Up      int64     `json:"up,omitempty"`     // bytes to the upstream
	Down    int64     `json:"down,omitempty"`   // bytes from it
}

// logIDSize is the number of random bytes of a log's ID.
const logIDSize = 16

// newLogID returns a new log ID: logIDSize random bytes in hex.
func newLogID() (string, error) {
	var b [logIDSize]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return hex.EncodeToString(b[:]), nil
}

// validLogID reports whether id is a log ID as newLogID makes them:
// 2*logIDSize lowercase hex digits.
func validLogID(id string) bool {
	if len(id) != 2*logIDSize || strings.ToLower(id) != id {
		return false
	}
	_, err := hex.DecodeString(id)
	return err == nil
}

// digestOf returns "sha256:" and the hex SHA-256 of data, the form of
// every digest a receipt holds.
func digestOf(data []byte) string {
	sum := sha256.Sum256(data)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// digestHexSize is the number of hex digits of a digest the in-toto spec
// knows, by algorithm (in-toto attestation v1, digest_set.md); a subject's
// digest under one of these names must be that many hex digits.
var digestHexSize = map[string]int{
	"md5": 32, "sha1": 40, "sha224": 56, "sha512_224": 56, "sha256": 64, "sha512_256": 64,
	"sha384": 96, "sha512": 128, "sha3_224": 56, "sha3_256": 64, "sha3_384": 96, "sha3_512": 128,
	"gitBlob": 40, "gitCommit": 40, "gitTag": 40, "gitTree": 40, "dirHash": 64,
}

// validate checks what the in-toto Statement v1 requires of st (its type,
// at least one subject, each with a digest, hex digests of the known
// algorithms' sizes, a predicate type) and what a cordon receipt requires
// of its predicate: a known predicate type, its verdict, and the probe or
// the run it records.
func (st *Statement) validate() error {
	if st.Type != StatementType {
		return fmt.Errorf("its _type is %q, not %q", st.Type, StatementType)
	}
	if len(st.Subject) == 0 {
		return fmt.Errorf("it has no subject; an in-toto statement needs at least one")
	}
	for i, s := range st.Subject {
		if len(s.Digest) == 0 {
			return fmt.Errorf("subject %d (%q) has no digest; an in-toto v1 subject needs one", i, s.Name)
		}
		for alg, d := range s.Digest {
			if n, known := digestHexSize[alg]; known {
				if _, err := hex.DecodeString(d); err != nil || len(d) != n {
					return fmt.Errorf("subject %d (%q): its %s digest %q is not %d hex digits", i, s.Name, alg, d, n)
				}
			}
		}
	}
	r := &st.Predicate
	switch st.PredicateType {
	case ProbePredicate:
		if r.Probe == nil || r.Run != nil || r.Autonomy != nil {
			return fmt.Errorf("a %s receipt records a probe and no run", ProbePredicate)
		}
		if r.Probe.Name == "" {
			return fmt.Errorf("its probe has no name")
		}
		if r.Verdict != Pass && r.Verdict != Fail {
			return fmt.Errorf("a probe's verdict is %q or %q, not %q", Pass, Fail, r.Verdict)
		}
	case RunPredicate:
		if r.Run == nil || r.Probe != nil || r.Autonomy != nil {
			return fmt.Errorf("a %s receipt records a run and no probe", RunPredicate)
		}
		if r.Verdict != Ran {
			return fmt.Errorf("a run's verdict is %q, not %q", Ran, r.Verdict)
		}
	case AutonomyPredicate:
		if r.Autonomy == nil || r.Probe != nil || r.Run != nil {
			return fmt.Errorf("a %s receipt records an autonomy decision and no probe or run", AutonomyPredicate)
		}
		if r.Verdict != Allowed && r.Verdict != Refused {
			return fmt.Errorf("an autonomy decision's verdict is %q or %q, not %q", Allowed, Refused, r.Verdict)
		}
	default:
		return fmt.Errorf("its predicate type %q is not %s, %s or %s", st.PredicateType, ProbePredicate, RunPredicate, AutonomyPredicate)
	}
	if !validLogID(r.Log) {
		return fmt.Errorf("it names no log: its log ID is %q, not %d hex digits", r.Log, 2*logIDSize)
	}
	if r.Sequence < 1 {
		return fmt.Errorf("its sequence is %d; receipts are numbered from 1", r.Sequence)
	}
	if r.Time.IsZero() {
		return fmt.Errorf("it has no time")
	}
	return nil
}
