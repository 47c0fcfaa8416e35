package evidence

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/secure-systems-lab/go-securesystemslib/dsse"
)

// logSize is the number of receipts every tampering case starts from.
const logSize = 6

// file returns the path of receipt n of l.
func file(l *Log, n int64) string { return filepath.Join(l.Dir(), receiptName(n)) }

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// flipField changes one base64 character in the middle of the string
// value of field ("payload" or "sig") in the receipt file at path, in
// place: the file stays a well-formed envelope, one byte of it differs.
func flipField(t *testing.T, path, field string) {
	t.Helper()
	data := readFile(t, path)
	key := []byte(`"` + field + `":"`)
	i := bytes.Index(data, key)
	if i < 0 {
		t.Fatalf("%s has no %s", path, field)
	}
	start := i + len(key)
	end := start + bytes.IndexByte(data[start:], '"')
	pos := start + (end-start)/2
	if data[pos] == 'A' {
		data[pos] = 'B'
	} else {
		data[pos] = 'A'
	}
	writeFile(t, path, data)
}

// writeEnvelope writes env as the receipt file at path, as Append does.
func writeEnvelope(t *testing.T, path string, env dsse.Envelope) {
	t.Helper()
	data, err := json.Marshal(env)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, path, append(data, '\n'))
}

// resign signs receipt n's statement with s, under keyID when it is not
// empty, and writes it over the file.
func resign(t *testing.T, l *Log, n int64, s *Signer, keyID string) {
	t.Helper()
	resignFile(t, file(l, n), s, keyID)
}

func resignFile(t *testing.T, path string, s *Signer, keyID string) {
	t.Helper()
	_, _, st, err := parseReceipt(readFile(t, path))
	if err != nil {
		t.Fatal(err)
	}
	env, _, err := s.sign(st)
	if err != nil {
		t.Fatal(err)
	}
	if keyID != "" {
		env.Signatures[0].KeyID = keyID
	}
	writeEnvelope(t, path, env)
}

func itoa64(n int64) string { return strconv.FormatInt(n, 10) }

// TestVerifyTampering writes a log of logSize receipts, checks that it
// verifies, tampers with it for real, and checks that Verify names the
// receipt and the kind of tampering — with the head the trusted directory
// records, and (where it can tell) without.
func TestVerifyTampering(t *testing.T) {
	for _, tc := range []struct {
		name   string
		tamper func(t *testing.T, l *Log)
		// kind and seq are what Verify reports first with the head;
		// noHeadKind ("" for OK) and noHeadSeq without it.
		kind       Kind
		seq        int64
		noHeadKind Kind
		noHeadSeq  int64
	}{{
		name:   "a flipped byte in a payload",
		tamper: func(t *testing.T, l *Log) { flipField(t, file(l, 3), "payload") },
		kind:   EditedPayload, seq: 3, noHeadKind: EditedPayload, noHeadSeq: 3,
	}, {
		// Only the head tells what was edited in the last receipt.
		name:   "a flipped byte in the last payload",
		tamper: func(t *testing.T, l *Log) { flipField(t, file(l, logSize), "payload") },
		kind:   EditedPayload, seq: logSize, noHeadKind: BadSignature, noHeadSeq: logSize,
	}, {
		name:   "a flipped byte in a signature",
		tamper: func(t *testing.T, l *Log) { flipField(t, file(l, 3), "sig") },
		kind:   EditedSignature, seq: 3, noHeadKind: EditedSignature, noHeadSeq: 3,
	}, {
		name:   "a flipped byte in the last signature",
		tamper: func(t *testing.T, l *Log) { flipField(t, file(l, logSize), "sig") },
		kind:   EditedSignature, seq: logSize, noHeadKind: BadSignature, noHeadSeq: logSize,
	}, {
		name: "an edited payload type",
		tamper: func(t *testing.T, l *Log) {
			data := bytes.Replace(readFile(t, file(l, 2)), []byte(PayloadType), []byte("application/json"), 1)
			writeFile(t, file(l, 2), data)
		},
		kind: EditedPayload, seq: 2, noHeadKind: EditedPayload, noHeadSeq: 2,
	}, {
		name: "a payload that is no longer base64",
		tamper: func(t *testing.T, l *Log) {
			data := readFile(t, file(l, 2))
			i := bytes.Index(data, []byte(`"payload":"`)) + len(`"payload":"`) + 10
			data[i] = '*'
			writeFile(t, file(l, 2), data)
		},
		kind: EditedPayload, seq: 2, noHeadKind: EditedPayload, noHeadSeq: 2,
	}, {
		name: "two receipts swapped",
		tamper: func(t *testing.T, l *Log) {
			a, b := readFile(t, file(l, 2)), readFile(t, file(l, 4))
			writeFile(t, file(l, 2), b)
			writeFile(t, file(l, 4), a)
		},
		kind: Reordered, seq: 2, noHeadKind: Reordered, noHeadSeq: 2,
	}, {
		name:   "one deleted from the middle",
		tamper: func(t *testing.T, l *Log) { os.Remove(file(l, 3)) },
		kind:   Gap, seq: 3, noHeadKind: Gap, noHeadSeq: 3,
	}, {
		name:   "the first deleted",
		tamper: func(t *testing.T, l *Log) { os.Remove(file(l, 1)) },
		kind:   Gap, seq: 1, noHeadKind: Gap, noHeadSeq: 1,
	}, {
		// Without the head, a log whose last receipt was deleted is a
		// valid, shorter log: the deletion cannot be detected.
		name:   "the last deleted",
		tamper: func(t *testing.T, l *Log) { os.Remove(file(l, logSize)) },
		kind:   Truncated, seq: logSize, noHeadKind: "",
	}, {
		name: "every receipt deleted",
		tamper: func(t *testing.T, l *Log) {
			for n := int64(1); n <= logSize; n++ {
				os.Remove(file(l, n))
			}
		},
		kind: Truncated, seq: 1, noHeadKind: "",
	}, {
		name: "a middle one deleted and the rest renumbered",
		tamper: func(t *testing.T, l *Log) {
			for n := int64(3); n < logSize; n++ {
				os.Rename(file(l, n+1), file(l, n))
			}
		},
		kind: Reordered, seq: 3, noHeadKind: Reordered, noHeadSeq: 3,
	}, {
		name: "a torn file",
		tamper: func(t *testing.T, l *Log) {
			data := readFile(t, file(l, 4))
			writeFile(t, file(l, 4), data[:len(data)/2])
		},
		kind: Unreadable, seq: 4, noHeadKind: Unreadable, noHeadSeq: 4,
	}, {
		name:   "an empty file",
		tamper: func(t *testing.T, l *Log) { writeFile(t, file(l, 4), nil) },
		kind:   Unreadable, seq: 4, noHeadKind: Unreadable, noHeadSeq: 4,
	}, {
		name: "a symlink for a receipt",
		tamper: func(t *testing.T, l *Log) {
			os.Remove(file(l, 2))
			if err := os.Symlink(receiptName(1), file(l, 2)); err != nil {
				t.Fatal(err)
			}
		},
		kind: Unreadable, seq: 2, noHeadKind: Unreadable, noHeadSeq: 2,
	}, {
		name:   "re-signed by another key",
		tamper: func(t *testing.T, l *Log) { resign(t, l, 3, mustSigner(t, 2), "") },
		kind:   ForeignKey, seq: 3, noHeadKind: ForeignKey, noHeadSeq: 3,
	}, {
		name:   "re-signed by another key under this key's ID",
		tamper: func(t *testing.T, l *Log) { resign(t, l, 3, mustSigner(t, 2), l.signer.KeyID()) },
		kind:   EditedSignature, seq: 3, noHeadKind: EditedSignature, noHeadSeq: 3,
	}, {
		name: "a second signature added",
		tamper: func(t *testing.T, l *Log) {
			env, _, _, _ := parseReceipt(readFile(t, file(l, 3)))
			env.Signatures = append(env.Signatures, env.Signatures[0])
			writeEnvelope(t, file(l, 3), env)
		},
		kind: EditedSignature, seq: 3, noHeadKind: EditedSignature, noHeadSeq: 3,
	}, {
		name: "the signature removed",
		tamper: func(t *testing.T, l *Log) {
			env, _, _, _ := parseReceipt(readFile(t, file(l, 3)))
			env.Signatures = nil
			writeEnvelope(t, file(l, 3), env)
		},
		kind: EditedSignature, seq: 3, noHeadKind: EditedSignature, noHeadSeq: 3,
	}, {
		// A receipt this key signed for this log, appended by a writer
		// that does not take the log's lock or record its head.
		name:   "a receipt inserted at the end",
		tamper: func(t *testing.T, l *Log) { spliced(t, l, l.signer, head(t, l).Log, logSize) },
		kind:   Inserted, seq: logSize + 1, noHeadKind: "",
	}, {
		// The same, signed for another log: a copy of this one that went
		// on under another ID.
		name: "a receipt of another log spliced in at the end",
		tamper: func(t *testing.T, l *Log) {
			id, _ := newLogID()
			spliced(t, l, l.signer, id, logSize)
		},
		kind: ForeignLog, seq: logSize + 1, noHeadKind: ForeignLog, noHeadSeq: logSize + 1,
	}, {
		name: "re-signed for no log",
		tamper: func(t *testing.T, l *Log) {
			_, _, st, _ := parseReceipt(readFile(t, file(l, 3)))
			st.Predicate.Log = ""
			env, _, _ := l.signer.sign(st)
			writeEnvelope(t, file(l, 3), env)
		},
		kind: Malformed, seq: 3, noHeadKind: Malformed, noHeadSeq: 3,
	}, {
		name: "a receipt inserted at the end by another key",
		tamper: func(t *testing.T, l *Log) {
			other := openLog(t, filepath.Join(t.TempDir(), "log"), filepath.Join(t.TempDir(), "trusted"), mustSigner(t, 2))
			e := appendN(t, other, logSize+1)[logSize]
			writeFile(t, file(l, logSize+1), readFile(t, filepath.Join(other.Dir(), e.File)))
		},
		kind: ForeignKey, seq: logSize + 1, noHeadKind: ForeignKey, noHeadSeq: logSize + 1,
	}, {
		// Receipts 4.. moved up by one, and a receipt signed by this key
		// put in the hole with the number and chain it needs.
		name: "a receipt inserted in the middle",
		tamper: func(t *testing.T, l *Log) {
			for n := int64(logSize); n >= 4; n-- {
				os.Rename(file(l, n), file(l, n+1))
			}
			_, _, st, _ := parseReceipt(readFile(t, file(l, 3)))
			prev := readFile(t, file(l, 3))
			_, body, _, _ := parseReceipt(prev)
			st.Predicate.Sequence = 4
			st.Predicate.Previous, st.Predicate.PreviousPayload = digestOf(prev), digestOf(body)
			env, _, _ := l.signer.sign(st)
			writeEnvelope(t, file(l, 4), env)
		},
		kind: Reordered, seq: 5, noHeadKind: Reordered, noHeadSeq: 5,
	}, {
		name: "a receipt replaced by one of another log of this key",
		tamper: func(t *testing.T, l *Log) {
			other := openLog(t, filepath.Join(t.TempDir(), "log"), filepath.Join(t.TempDir(), "trusted"), l.signer)
			appendN(t, other, 1) // the other log is one receipt ahead: its chain differs
			appendN(t, other, 3)
			writeFile(t, file(l, 3), readFile(t, file(other, 3)))
		},
		kind: ForeignLog, seq: 3, noHeadKind: ForeignLog, noHeadSeq: 3,
	}, {
		// The same, re-signed for this log: only the chain tells.
		name: "a receipt replaced by one of another log of this key, re-signed for this log",
		tamper: func(t *testing.T, l *Log) {
			other := openLog(t, filepath.Join(t.TempDir(), "log"), filepath.Join(t.TempDir(), "trusted"), l.signer)
			appendN(t, other, 4)
			_, _, st, _ := parseReceipt(readFile(t, file(other, 3)))
			st.Predicate.Log = head(t, l).Log
			env, _, _ := l.signer.sign(st)
			writeEnvelope(t, file(l, 3), env)
		},
		kind: BrokenChain, seq: 3, noHeadKind: BrokenChain, noHeadSeq: 3,
	}, {
		// The whole log replaced by another log of this key: it verifies
		// on its own; only the head tells, by its ID.
		name: "the log replaced by another of this key",
		tamper: func(t *testing.T, l *Log) {
			other := openLog(t, filepath.Join(t.TempDir(), "log"), filepath.Join(t.TempDir(), "trusted"), l.signer)
			appendN(t, other, logSize)
			for n := int64(1); n <= logSize; n++ {
				writeFile(t, file(l, n), readFile(t, file(other, n)))
			}
		},
		kind: ForeignLog, seq: 1, noHeadKind: "",
	}, {
		// Rewritten with this key under this log's ID: only the head's
		// digest tells.
		name: "the log rewritten with this key",
		tamper: func(t *testing.T, l *Log) {
			id := head(t, l).Log
			prev, prevPayload := "", ""
			for n := int64(1); n <= logSize; n++ {
				_, _, st, _ := parseReceipt(readFile(t, file(l, n)))
				st.Predicate.Time = st.Predicate.Time.Add(time.Second)
				st.Predicate.Log, st.Predicate.Previous, st.Predicate.PreviousPayload = id, prev, prevPayload
				env, body, _ := l.signer.sign(st)
				writeEnvelope(t, file(l, n), env)
				prev, prevPayload = digestOf(readFile(t, file(l, n))), digestOf(body)
			}
		},
		kind: Replaced, seq: logSize, noHeadKind: "",
	}, {
		name:   "an unexpected file",
		tamper: func(t *testing.T, l *Log) { writeFile(t, filepath.Join(l.Dir(), "notes.txt"), []byte("hi")) },
		kind:   Unexpected, seq: 0, noHeadKind: Unexpected, noHeadSeq: 0,
	}, {
		name:   "a receipt renamed out of the pattern",
		tamper: func(t *testing.T, l *Log) { os.Rename(file(l, 2), filepath.Join(l.Dir(), "2.json")) },
		kind:   Unexpected, seq: 0, noHeadKind: Unexpected, noHeadSeq: 0,
	}, {
		name:   "a directory in the log",
		tamper: func(t *testing.T, l *Log) { os.Mkdir(filepath.Join(l.Dir(), "sub"), 0o755) },
		kind:   Unexpected, seq: 0, noHeadKind: Unexpected, noHeadSeq: 0,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			l := newLog(t)
			appendN(t, l, logSize)
			h := head(t, l)
			pub := l.signer.Public()
			if rep := Verify(l.Dir(), pub, h); !rep.OK || rep.Count != logSize || rep.First != nil {
				t.Fatalf("the untampered log: %+v", rep)
			}

			tc.tamper(t, l)

			rep := Verify(l.Dir(), pub, h)
			if rep.OK || rep.First == nil || rep.First.Kind != tc.kind || rep.First.Sequence != tc.seq {
				t.Fatalf("with the head: Verify = %+v\nwant first problem %s at receipt %d", rep, tc.kind, tc.seq)
			}
			if tc.seq > 0 && rep.First.File != receiptName(tc.seq) {
				t.Errorf("with the head: the problem names %s, want %s", rep.First.File, receiptName(tc.seq))
			}
			if rep.First.Message == "" || rep.First != &rep.Problems[0] {
				t.Errorf("with the head: the first problem is not the first listed, or says nothing: %+v", rep)
			}
			t.Logf("with the head: %s", rep.First)

			rep = Verify(l.Dir(), pub, nil)
			if tc.noHeadKind == "" {
				if !rep.OK || len(rep.Notes) == 0 || !strings.Contains(rep.Notes[0], "cannot be detected") {
					t.Errorf("without the head: Verify = %+v, want OK with a note that the end cannot be checked", rep)
				}
				return
			}
			if rep.OK || rep.First.Kind != tc.noHeadKind || rep.First.Sequence != tc.noHeadSeq {
				t.Errorf("without the head: Verify = %+v\nwant first problem %s at receipt %d", rep, tc.noHeadKind, tc.noHeadSeq)
			}
		})
	}
}

// TestVerifyForeignKey: a log verifies only with the key that signed it.
func TestVerifyForeignKey(t *testing.T) {
	l := newLog(t)
	appendN(t, l, 2)
	rep := Verify(l.Dir(), mustSigner(t, 9).Public(), nil)
	if rep.OK || rep.First.Kind != ForeignKey || rep.First.Sequence != 1 || len(rep.Problems) != 2 {
		t.Errorf("Verify with another key = %+v, want both receipts signed by another key", rep)
	}
	if rep := Verify(l.Dir(), []byte("short"), nil); rep.OK {
		t.Errorf("Verify with a malformed key = %+v", rep)
	}
}

// TestVerifyIgnoresTempFiles: a writer's temporary file is noted, not a
// problem; a file that only looks like one is.
func TestVerifyIgnoresTempFiles(t *testing.T) {
	l := newLog(t)
	appendN(t, l, 2)
	writeFile(t, filepath.Join(l.Dir(), ".receipt-0123456789abcdef.tmp"), []byte("{"))
	rep := Verify(l.Dir(), l.signer.Public(), head(t, l))
	if !rep.OK || len(rep.Notes) != 1 || !strings.Contains(rep.Notes[0], ".receipt-0123456789abcdef.tmp") {
		t.Errorf("Verify = %+v, want OK with a note on the temporary file", rep)
	}
	writeFile(t, filepath.Join(l.Dir(), ".receipt-nothex.tmp"), nil)
	if rep := Verify(l.Dir(), l.signer.Public(), head(t, l)); rep.OK || rep.First.Kind != Unexpected {
		t.Errorf("Verify = %+v, want the look-alike reported", rep)
	}
}

// TestVerifyMissingAndSymlinkedDir: a missing log is empty (and, with a
// head, truncated); a symlinked one is not read.
func TestVerifyMissingAndSymlinkedDir(t *testing.T) {
	pub := mustSigner(t, 1).Public()
	missing := filepath.Join(t.TempDir(), "none")
	if rep := Verify(missing, pub, nil); !rep.OK || rep.Count != 0 {
		t.Errorf("Verify of a missing log = %+v", rep)
	}
	if rep := Verify(missing, pub, &Head{Sequence: 2, Digest: "sha256:00"}); rep.OK || rep.First.Kind != Truncated {
		t.Errorf("Verify of a missing log with a head = %+v, want truncated", rep)
	}
	l := newLog(t)
	appendN(t, l, 1)
	link := filepath.Join(t.TempDir(), "link")
	os.Symlink(l.Dir(), link)
	if rep := Verify(link, pub, nil); rep.OK || !strings.Contains(rep.First.Message, "symlink") {
		t.Errorf("Verify of a symlinked log = %+v", rep)
	}
}

// TestVerifyListsEveryProblem: every tampered receipt is listed in order,
// not only the first.
func TestVerifyListsEveryProblem(t *testing.T) {
	l := newLog(t)
	appendN(t, l, logSize)
	h := head(t, l)
	flipField(t, file(l, 2), "sig")
	os.Remove(file(l, 4))
	os.Remove(file(l, logSize))
	rep := Verify(l.Dir(), l.signer.Public(), h)
	var got []string
	for _, p := range rep.Problems {
		got = append(got, string(p.Kind)+"@"+receiptName(p.Sequence))
	}
	want := []string{"edited-signature@00000002.json", "gap@00000004.json", "truncated@00000006.json"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("problems %v, want %v", got, want)
	}
}

// TestSignatureIsOverPAE: the envelope's signature verifies over DSSE's
// PAE of its type and payload with nothing but crypto/ed25519.
func TestSignatureIsOverPAE(t *testing.T) {
	l := newLog(t)
	e := appendN(t, l, 1)[0]
	body, _ := base64.StdEncoding.DecodeString(e.Envelope.Payload)
	sig, _ := base64.StdEncoding.DecodeString(e.Envelope.Signatures[0].Sig)
	pae := []byte("DSSEv1 " + strconv.Itoa(len(PayloadType)) + " " + PayloadType + " " + strconv.Itoa(len(body)) + " " + string(body))
	if !ed25519.Verify(l.signer.Public(), pae, sig) {
		t.Error("the signature does not verify over the PAE")
	}
}
