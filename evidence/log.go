package evidence

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cordon-run/cordon/internal/dirfd"
	"github.com/cordon-run/cordon/internal/userdir"
	"github.com/cordon-run/cordon/refusal"
)

// Names in the trusted directory.
const (
	lockName  = "lock"      // flocked by every append
	indexName = "head.json" // the head and the probe index
)

// Bounds on what the log reads and writes.
const (
	maxReceiptSize = 1 << 20  // one receipt file
	maxIndexSize   = 16 << 20 // the head and index file
	maxFiles       = 1 << 20  // names in the log directory
	// maxAdopt bounds the receipts an append finds beyond the head and
	// adopts: each is one left by an append that linked its receipt and
	// failed (or crashed) before it recorded the head, and the next append
	// adopts it, so more than one is rare.
	maxAdopt = 64
	// lockTimeout bounds the wait for another writer's lock: an append
	// holds it for a few file writes.
	lockTimeout = 30 * time.Second
)

// indexVersion is the version of the head and index file's format: 2
// since the head names the log's ID.
const indexVersion = 2

// Log is the hash-chained log of one workspace's receipts, written by one
// signer. Its methods are safe for concurrent use, and several processes
// may append to the same log at once: every append holds an exclusive
// lock in the trusted directory, and [Log.Verify] a shared one.
type Log struct {
	dir, trusted     string
	root             *dirfd.Dir // the directory the log's path is walked from
	rel              string     // the log directory below root
	dirFd, trustedFd int
	signer           *Signer
	verifier         *verifier // made on first use: see [Signer]
	verifierOnce     sync.Once

	// mu serializes the methods of this Log (its appends wait here before
	// they wait for the file lock) and keeps Close from closing the
	// descriptors under one of them.
	mu     sync.Mutex
	closed bool

	// linked, when set (by tests), runs after an append linked its
	// receipt and before it records the head; an error stops the append
	// there, as a crash would.
	linked func() error
}

// Entry is one receipt as it is in the log.
type Entry struct {
	// Sequence is the number in the file's name; a receipt that verifies
	// holds the same number in its predicate.
	Sequence int64
	// Digest is "sha256:" and the hex SHA-256 of the file: what the next
	// receipt's Previous names.
	Digest string
	// File is the file's name in the log directory, "%08d.json".
	File      string
	Envelope  envelope
	Statement Statement
}

// Head is which log this is and where it ends: the log's ID, its last
// receipt's sequence number, the digest of its file and the digest of its
// payload. The trusted directory holds the head of every append, so that
// [Verify] can tell a log whose last receipts were deleted, and a receipt
// of another log.
type Head struct {
	// Log is the log's ID, which every receipt of the log names: made at
	// random when the log is begun (its first append), before its first
	// receipt is written.
	Log           string `json:"log"`
	Sequence      int64  `json:"sequence"` // 0 for a log begun whose first receipt is not recorded yet
	Digest        string `json:"digest"`
	PayloadDigest string `json:"payload_digest"`
}

// ProbeIndex is the index record of a probe's latest receipt: enough to
// decide whether the evidence is fresh (its time, the host facts and the
// cordon binary it was made under) without reading the log.
type ProbeIndex struct {
	Sequence   int64     `json:"sequence"`
	Digest     string    `json:"digest"`
	Time       time.Time `json:"time"`
	Verdict    string    `json:"verdict"`
	Substrate  string    `json:"substrate"`
	Expected   string    `json:"expected"`
	Observed   string    `json:"observed"`
	Mechanisms []string  `json:"mechanisms"`
	Degraded   []string  `json:"degraded,omitempty"`
	Host       string    `json:"host"`   // [Host.Digest] of the facts it was made under
	Cordon     string    `json:"cordon"` // the cordon binary's digest
}

// index is the file of the trusted directory that holds the head and, by
// probe name, each probe's latest receipt.
type index struct {
	Version int                   `json:"version"`
	Dir     string                `json:"dir"` // the log directory it belongs to
	Head    Head                  `json:"head"`
	Probes  map[string]ProbeIndex `json:"probes"`
}

// record makes receipt st, in a file of digest digest and payload
// digest payload, the head, and indexes it when it is a probe's.
func (x *index) record(st *Statement, digest, payload string) {
	r := &st.Predicate
	x.Head = Head{Log: x.Head.Log, Sequence: r.Sequence, Digest: digest, PayloadDigest: payload}
	if st.PredicateType != ProbePredicate || r.Probe == nil {
		return
	}
	p := r.Probe
	x.Probes[p.Name] = ProbeIndex{
		Sequence: r.Sequence, Digest: digest, Time: r.Time, Verdict: r.Verdict,
		Substrate: p.Substrate, Expected: p.Expected, Observed: p.Observed,
		Mechanisms: p.Mechanisms, Degraded: p.Degraded,
		Host: r.Host.Digest(), Cordon: r.Cordon.Digest,
	}
}

// Error is a failure to open, read or append to a log: the operation, the
// file or directory, and what went wrong. It wraps its cause; a log or
// trusted directory that cannot be trusted matches
// [refusal.UntrustedState], a receipt that is not valid matches
// [refusal.Invalid].
type Error struct {
	Op   string // "open", "append", "read", "lock", "record the head"
	Path string
	Err  error
}

func (e *Error) Error() string { return fmt.Sprintf("evidence: %s %s: %v", e.Op, e.Path, e.Err) }

func (e *Error) Unwrap() error { return e.Err }

// OpenLog opens the log in dir (an absolute, clean path) as [OpenLogAt]
// does, walking dir from the root directory: no component of dir may be a
// symlink.
func OpenLog(dir, trustedDir string, s *Signer) (*Log, error) {
	root, rel, err := splitAbs(dir)
	if err != nil {
		return nil, &Error{Op: "open", Path: dir, Err: err}
	}
	return OpenLogAt(root, rel, trustedDir, s)
}

// OpenLogAt opens the log in the directory rel (relative and clean;
// cordon's is .foundry/evidence) below root (an absolute, clean path the
// caller trusts; cordon's is the workspace it resolved), whose receipts s
// signs. From root, which is opened as it is, each component of rel is
// opened with openat(2) and O_NOFOLLOW|O_DIRECTORY, and one that is
// missing is made (mode 0755) first: a symlink anywhere below root is
// refused, not followed, whoever plants it and whenever.
//
// trustedDir is a directory only this user can write, outside every
// workspace (created mode 0700 when missing): it holds the lock every
// writer takes and the head and index of the log. A sandboxed process can
// reach the log's directory, never this one: it could lock a file there to
// stall every writer, or rewrite a head.
//
// A trusted directory that is a symlink, belongs to another user, is open
// to others or holds the head of another log directory is refused.
func OpenLogAt(root, rel, trustedDir string, s *Signer) (*Log, error) {
	dir := filepath.Join(root, rel)
	if s == nil {
		return nil, &Error{Op: "open", Path: dir, Err: refusal.Errorf(refusal.Invalid, "no signer")}
	}
	if err := checkRootRel(root, rel); err != nil {
		return nil, &Error{Op: "open", Path: dir, Err: err}
	}
	rd, err := dirfd.Open(root)
	if err != nil {
		return nil, &Error{Op: "open", Path: root, Err: err}
	}
	ld, err := openDirAt(rd, root, rel, true)
	if err != nil {
		rd.Close()
		return nil, err
	}
	tfd, err := userdir.Ensure(trustedDir)
	if err != nil {
		ld.Close()
		rd.Close()
		return nil, &Error{Op: "open", Path: trustedDir, Err: err}
	}
	l := &Log{dir: dir, trusted: trustedDir, root: rd, rel: rel, dirFd: ld.Fd(), trustedFd: tfd, signer: s}
	if _, err := l.readIndex(); err != nil {
		l.Close()
		return nil, err
	}
	return l, nil
}

// Dir returns the log's directory.
func (l *Log) Dir() string { return l.dir }

// TrustedDir returns the trusted directory of the log's lock and head.
func (l *Log) TrustedDir() string { return l.trusted }

// Signer returns the signer of the log's receipts.
func (l *Log) Signer() *Signer { return l.signer }

// Close releases the log's directory descriptors.
func (l *Log) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil
	}
	l.closed = true
	err := unix.Close(l.dirFd)
	if e := unix.Close(l.trustedFd); err == nil {
		err = e
	}
	if e := l.root.Close(); err == nil {
		err = e
	}
	return err
}

// splitAbs splits the absolute, clean path dir into the root directory
// and the path below it.
func splitAbs(dir string) (root, rel string, err error) {
	if !filepath.IsAbs(dir) || filepath.Clean(dir) != dir || dir == string(filepath.Separator) {
		return "", "", refusal.Errorf(refusal.Invalid, "the log directory is not an absolute, clean path below the root")
	}
	return string(filepath.Separator), dir[1:], nil
}

// checkRootRel checks the root and the relative path of a log directory.
func checkRootRel(root, rel string) error {
	if !filepath.IsAbs(root) || filepath.Clean(root) != root {
		return refusal.Errorf(refusal.Invalid, "the directory the log is below (%s) is not an absolute, clean path", root)
	}
	if rel == "" || filepath.IsAbs(rel) || filepath.Clean(rel) != rel || rel == "." || rel == ".." || strings.HasPrefix(rel, "../") {
		return refusal.Errorf(refusal.Invalid, "the log directory %q is not a relative, clean path below %s", rel, root)
	}
	return nil
}

// openDirAt opens the directory rel below the directory root (named
// rootPath), one component at a time with O_NOFOLLOW|O_DIRECTORY; with
// create, a missing component is made (mode 0755) first. A symlink or a
// file on the way is refused with [refusal.UntrustedState]; without
// create, a missing one matches [os.ErrNotExist].
func openDirAt(root *dirfd.Dir, rootPath, rel string, create bool) (*dirfd.Dir, error) {
	dir := filepath.Join(rootPath, rel)
	d, err := root.OpenPath(filepath.ToSlash(rel), create, 0o755)
	if err == nil {
		return d, nil
	}
	at := dir
	var pe *os.PathError
	if errors.As(err, &pe) {
		at = filepath.Clean(pe.Path)
		err = pe.Err
	}
	switch {
	case errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR):
		return nil, &Error{Op: "open", Path: dir, Err: refusal.Errorf(refusal.UntrustedState, "refusing the log directory — %s is a symlink or not a directory", at)}
	case errors.Is(err, unix.ENOENT):
		return nil, &Error{Op: "open", Path: dir, Err: refusal.Errorf(refusal.NotFound, "the log directory does not exist (%s is missing): %w", at, os.ErrNotExist)}
	case create:
		return nil, &Error{Op: "open", Path: dir, Err: fmt.Errorf("cannot create the log directory (at %s): %w", at, err)}
	}
	return nil, &Error{Op: "open", Path: dir, Err: fmt.Errorf("at %s: %w", at, err)}
}

// openLogRead opens the log directory rel below root to read it, as
// openDirAt does without create; -1 when it (or root) is missing.
func openLogRead(root, rel string) (int, error) {
	dir := filepath.Join(root, rel)
	if err := checkRootRel(root, rel); err != nil {
		return -1, &Error{Op: "read", Path: dir, Err: err}
	}
	rd, err := dirfd.Open(root)
	if errors.Is(err, os.ErrNotExist) {
		return -1, nil
	}
	if err != nil {
		return -1, &Error{Op: "read", Path: root, Err: err}
	}
	defer rd.Close()
	d, err := openDirAt(rd, root, rel, false)
	if errors.Is(err, os.ErrNotExist) {
		return -1, nil
	}
	if err != nil {
		return -1, err
	}
	return d.Fd(), nil
}

// checkDir fails unless the log's directory descriptor is still the
// directory its path names: one moved aside ([Reset]) or replaced since
// the log was opened is not the log.
func (l *Log) checkDir() error {
	d, err := openDirAt(l.root, l.root.Name(), l.rel, false)
	if err != nil {
		return err
	}
	defer d.Close()
	var now, open unix.Stat_t
	if err := unix.Fstat(d.Fd(), &now); err != nil {
		return &Error{Op: "open", Path: l.dir, Err: err}
	}
	if err := unix.Fstat(l.dirFd, &open); err != nil {
		return &Error{Op: "open", Path: l.dir, Err: err}
	}
	if now.Dev != open.Dev || now.Ino != open.Ino {
		return &Error{Op: "open", Path: l.dir, Err: refusal.Errorf(refusal.UntrustedState, "the log directory was moved aside or replaced since the log was opened; open it again")}
	}
	return nil
}

// Append signs a receipt about subject with predicate type predicateType
// ([ProbePredicate], [RunPredicate] or [AutonomyPredicate]) and adds it to
// the end of the log.
// It fills in r's Log, Sequence, Previous and PreviousPayload, and its
// Time when zero. The statement must be a valid in-toto Statement v1 (at
// least one subject, each with a digest) and a valid receipt (the probe or
// the run its predicate type names, a verdict): otherwise nothing is
// written and the error matches [refusal.Invalid].
//
// The receipt is written to a temporary file, synced, and linked to its
// name, which is never replaced; then the head is recorded in the trusted
// directory. The log continues from the head the trusted directory
// records, whatever was done to the files since: a receipt deleted or
// replaced stays visible to [Verify] as a gap or a broken chain. A receipt
// found beyond the head is adopted when this key signed it for this log
// (it names the head's log ID) and it chains to the head (an earlier
// append that stopped before it recorded the head); anything else there
// is refused.
//
// The first append to a log begins it: with no head in the trusted
// directory and nothing in the log directory, it makes the log's ID and
// records it (a head at sequence 0) before it writes receipt 1. A log
// directory that holds receipts, or other files, while the trusted
// directory holds no head for it was not written here — it was copied or
// moved there — and is refused with [refusal.UntrustedState]: [Reset]
// moves it aside.
func (l *Log) Append(subject []Subject, predicateType string, r Receipt) (Entry, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return Entry{}, &Error{Op: "append", Path: l.dir, Err: os.ErrClosed}
	}
	unlock, err := l.lock(unix.LOCK_EX)
	if err != nil {
		return Entry{}, err
	}
	defer unlock()

	if err := l.checkDir(); err != nil {
		return Entry{}, err
	}
	x, err := l.readIndex()
	if err != nil {
		return Entry{}, err
	}
	begun := x == nil
	if begun {
		if x, err = l.begin(); err != nil {
			return Entry{}, err
		}
	} else if err := l.catchUp(x); err != nil {
		return Entry{}, err
	}

	r.Log = x.Head.Log
	r.Sequence = x.Head.Sequence + 1
	r.Previous, r.PreviousPayload = x.Head.Digest, x.Head.PayloadDigest
	if r.Time.IsZero() {
		r.Time = time.Now().UTC()
	}
	st := Statement{Type: StatementType, Subject: subject, PredicateType: predicateType, Predicate: r}
	name := receiptName(r.Sequence)
	if err := st.validate(); err != nil {
		return Entry{}, &Error{Op: "append", Path: filepath.Join(l.dir, name), Err: refusal.Errorf(refusal.Invalid, "not a valid receipt: %s", err)}
	}
	env, body, err := l.signer.sign(st)
	if err != nil {
		return Entry{}, err
	}
	data, err := json.Marshal(env)
	if err != nil {
		return Entry{}, &Error{Op: "append", Path: filepath.Join(l.dir, name), Err: err}
	}
	data = append(data, '\n')
	if len(data) > maxReceiptSize {
		return Entry{}, &Error{Op: "append", Path: filepath.Join(l.dir, name), Err: refusal.Errorf(refusal.TooLarge, "the receipt is %d bytes, more than the limit of %d", len(data), maxReceiptSize)}
	}
	if begun {
		// The ID is recorded before receipt 1 exists, so that an append
		// that stops between the two leaves a receipt the next one adopts.
		if err := l.writeIndex(x); err != nil {
			return Entry{}, err
		}
	}
	if err := l.write(name, data); err != nil {
		return Entry{}, err
	}
	if l.linked != nil {
		if err := l.linked(); err != nil {
			return Entry{}, err
		}
	}
	e := Entry{Sequence: r.Sequence, Digest: digestOf(data), File: name, Envelope: env, Statement: st}
	x.record(&st, e.Digest, digestOf(body))
	if err := l.writeIndex(x); err != nil {
		return Entry{}, fmt.Errorf("%w (receipt %d is in the log; the next append records its head)", err, r.Sequence)
	}
	return e, nil
}

// lock takes the lock of the log's writers — exclusive (unix.LOCK_EX) to
// append, shared (unix.LOCK_SH) to read the log and its head as one —
// waiting at most lockTimeout, and returns the function that releases it.
func (l *Log) lock(how int) (func(), error) { return lockAt(l.trustedFd, l.trusted, how) }

// lockAt takes the writers' lock in the trusted directory tfd (named
// trusted) as [Log.lock] does.
func lockAt(tfd int, trusted string, how int) (func(), error) {
	path := filepath.Join(trusted, lockName)
	fd, err := unix.Openat(tfd, lockName, unix.O_RDWR|unix.O_CREAT|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, &Error{Op: "lock", Path: path, Err: refusal.Errorf(refusal.UntrustedState, "cannot open the lock file: %w", err)}
	}
	deadline := time.Now().Add(lockTimeout)
	for wait := time.Millisecond; ; wait = min(2*wait, 4*time.Millisecond) {
		err := unix.Flock(fd, how|unix.LOCK_NB)
		if err == nil {
			return func() {
				unix.Flock(fd, unix.LOCK_UN)
				unix.Close(fd)
			}, nil
		}
		if err != unix.EWOULDBLOCK && err != unix.EINTR {
			unix.Close(fd)
			return nil, &Error{Op: "lock", Path: path, Err: err}
		}
		if time.Now().After(deadline) {
			unix.Close(fd)
			return nil, &Error{Op: "lock", Path: path, Err: fmt.Errorf("another writer has held the lock for more than %v", lockTimeout)}
		}
		time.Sleep(wait)
	}
}

// write writes data as the receipt file name: a temporary file (O_EXCL,
// mode 0644), synced, linked to name — which fails rather than replace a
// file — then the temporary name removed and the directory synced.
func (l *Log) write(name string, data []byte) error {
	path := filepath.Join(l.dir, name)
	tmp, err := tempName(tempPrefix, tempSuffix)
	if err != nil {
		return &Error{Op: "append", Path: path, Err: err}
	}
	fd, err := unix.Openat(l.dirFd, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o644)
	if err != nil {
		return &Error{Op: "append", Path: path, Err: fmt.Errorf("cannot create the temporary file %s: %w", tmp, err)}
	}
	f := os.NewFile(uintptr(fd), filepath.Join(l.dir, tmp))
	err = f.Chmod(0o644) // receipts are for anyone who can read the workspace, whatever the umask
	if err == nil {
		_, err = f.Write(data)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = unix.Linkat(l.dirFd, tmp, l.dirFd, name, 0)
		if err == unix.EEXIST {
			err = refusal.Errorf(refusal.UntrustedState, "the file exists: another writer, which does not take this log's lock, wrote it")
		}
	}
	unix.Unlinkat(l.dirFd, tmp, 0)
	if err == nil {
		err = unix.Fsync(l.dirFd)
	}
	if err != nil {
		return &Error{Op: "append", Path: path, Err: err}
	}
	return nil
}

// catchUp adopts the receipts found beyond x's head that this key signed
// for this log (they name its ID) and that chain to it, and refuses
// anything else there.
func (l *Log) catchUp(x *index) error {
	for i := 0; ; i++ {
		next := x.Head.Sequence + 1
		name := receiptName(next)
		data, err := readFileAt(l.dirFd, name)
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		path := filepath.Join(l.dir, name)
		if i == maxAdopt {
			return &Error{Op: "append", Path: path, Err: refusal.Errorf(refusal.UntrustedState, "more than %d receipts lie beyond the head the trusted directory %s records (receipt %d); run 'cordon evidence verify'", maxAdopt, l.trusted, x.Head.Sequence)}
		}
		rec := l.verify().inspect(next, name, data, err)
		if rec.problem == nil && rec.st.Predicate.Log != x.Head.Log {
			return &Error{Op: "append", Path: path, Err: refusal.Errorf(refusal.UntrustedState, "the file lies beyond the head of the log (receipt %d) and is a receipt of another log (%s, not %s): it was copied here; run 'cordon evidence verify'", x.Head.Sequence, rec.st.Predicate.Log, x.Head.Log)}
		}
		if rec.problem != nil || rec.st.Predicate.Sequence != next || rec.st.Predicate.Previous != x.Head.Digest || rec.st.Predicate.PreviousPayload != x.Head.PayloadDigest {
			return &Error{Op: "append", Path: path, Err: refusal.Errorf(refusal.UntrustedState, "the file lies beyond the head of the log (receipt %d) and is not a receipt of this key chained to it: the log was written without its lock, or tampered with; run 'cordon evidence verify'", x.Head.Sequence)}
		}
		x.record(rec.st, rec.digest, rec.payloadDigest)
	}
}

// begin makes the index of a new log, with a new ID, for a log directory
// the trusted directory has no head for; it refuses a log directory that
// holds anything but a writer's temporary files. Nothing is written.
func (l *Log) begin() (*index, error) {
	names, err := listDir(l.dirFd, l.dir)
	if err != nil {
		return nil, err
	}
	if n := len(names.receipts); n > 0 {
		return nil, &Error{Op: "append", Path: l.dir, Err: refusal.Errorf(refusal.UntrustedState,
			"the log holds %d receipts, but the trusted directory %s holds no head for it: the log was not written by cordon for this workspace on this machine (it was copied or moved here); move it aside with 'cordon evidence reset' to start a new log",
			n, l.trusted)}
	}
	if len(names.others) > 0 {
		return nil, &Error{Op: "append", Path: l.dir, Err: refusal.Errorf(refusal.UntrustedState,
			"the log directory holds files that are not receipts (%s), and the trusted directory %s holds no head for it; move it aside with 'cordon evidence reset' to start a new log",
			strings.Join(names.others, ", "), l.trusted)}
	}
	id, err := newLogID()
	if err != nil {
		return nil, &Error{Op: "append", Path: l.dir, Err: fmt.Errorf("cannot make the log's ID: %w", err)}
	}
	return &index{Version: indexVersion, Dir: l.dir, Head: Head{Log: id}, Probes: map[string]ProbeIndex{}}, nil
}

// Verify verifies the log with its signer's public key and the head the
// trusted directory records ([Verify]), holding the writers' lock (shared)
// so that an append under way is not mistaken for tampering.
func (l *Log) Verify() Report {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return failed(Problem{Kind: Unreadable, Message: "cannot verify: the log is closed"})
	}
	unlock, err := l.lock(unix.LOCK_SH)
	if err != nil {
		return failed(Problem{Kind: Unreadable, Message: "cannot verify: " + err.Error()})
	}
	defer unlock()
	if err := l.checkDir(); err != nil {
		return failed(Problem{Kind: Unreadable, Message: "cannot verify: " + err.Error()})
	}
	x, err := l.readIndex()
	if err != nil {
		return failed(Problem{Kind: Unreadable, File: indexName, Message: "cannot verify: " + err.Error()})
	}
	if x != nil {
		_, rep := l.verify().scan(l.dirFd, l.dir, &x.Head)
		return rep
	}
	_, rep := l.verify().scan(l.dirFd, l.dir, nil)
	if rep.Count > 0 {
		rep.prepend(Problem{Kind: NoHead, Message: fmt.Sprintf(
			"the trusted directory %s holds no head for this log of %d receipts: cordon never wrote it here — it was copied or moved from another workspace or machine, and its end and origin cannot be checked; move it aside with 'cordon evidence reset', or verify a copy with --key",
			l.trusted, rep.Count)})
	}
	return rep
}

// Head returns the head the trusted directory records, nil when there is
// none (nothing was appended to this log through it); a head at sequence 0
// is a log begun whose first receipt is not recorded yet.
func (l *Log) Head() (*Head, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil, &Error{Op: "read", Path: l.trusted, Err: os.ErrClosed}
	}
	x, err := l.readIndex()
	if err != nil || x == nil {
		return nil, err
	}
	h := x.Head
	return &h, nil
}

// LatestProbe returns the index record of the latest receipt of the probe
// name, and false when the log holds none (or the trusted directory has no
// head for it yet).
func (l *Log) LatestProbe(name string) (ProbeIndex, bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return ProbeIndex{}, false, &Error{Op: "read", Path: l.trusted, Err: os.ErrClosed}
	}
	x, err := l.readIndex()
	if err != nil || x == nil {
		return ProbeIndex{}, false, err
	}
	p, ok := x.Probes[name]
	return p, ok, nil
}

// ReadHead returns the head that trustedDir records for the log in dir,
// nil when it records none: what [Verify] checks the log's ID and end
// against.
// Read while another process appends, the head and the files may be a
// receipt apart; [Log.Verify] holds the writers' lock for both.
func ReadHead(dir, trustedDir string) (*Head, error) {
	fd, err := userdir.Open(trustedDir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil
		}
		return nil, &Error{Op: "read", Path: trustedDir, Err: err}
	}
	defer unix.Close(fd)
	x, err := readIndex(fd, trustedDir, dir)
	if err != nil || x == nil {
		return nil, err
	}
	h := x.Head
	return &h, nil
}

func (l *Log) readIndex() (*index, error) { return readIndex(l.trustedFd, l.trusted, l.dir) }

// readIndex reads the head and index in the trusted directory tfd (named
// trusted) of the log dir; nil when there is none.
func readIndex(tfd int, trusted, dir string) (*index, error) {
	path := filepath.Join(trusted, indexName)
	data, err := readFileLimit(tfd, indexName, maxIndexSize)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, &Error{Op: "read", Path: path, Err: refusal.Errorf(refusal.UntrustedState, "cannot read the head of the log: %w", err)}
	}
	var x index
	if err := json.Unmarshal(data, &x); err != nil {
		return nil, &Error{Op: "read", Path: path, Err: refusal.Errorf(refusal.UntrustedState, "the head of the log does not parse: %w", err)}
	}
	switch {
	case x.Version == 1:
		return nil, &Error{Op: "read", Path: path, Err: refusal.Errorf(refusal.UntrustedState, "the head was written by an earlier cordon, whose receipts name no log; move the log and its head aside with 'cordon evidence reset' to start a new log")}
	case x.Version != indexVersion:
		return nil, &Error{Op: "read", Path: path, Err: refusal.Errorf(refusal.UntrustedState, "the head's format is version %d, not %d", x.Version, indexVersion)}
	case x.Dir != dir:
		return nil, &Error{Op: "read", Path: path, Err: refusal.Errorf(refusal.UntrustedState, "the head belongs to the log %s, not %s", x.Dir, dir)}
	case !validLogID(x.Head.Log):
		return nil, &Error{Op: "read", Path: path, Err: refusal.Errorf(refusal.UntrustedState, "the head names no log ID (%q)", x.Head.Log)}
	case x.Head.Sequence < 0 || (x.Head.Sequence > 0) != (x.Head.Digest != ""):
		return nil, &Error{Op: "read", Path: path, Err: refusal.Errorf(refusal.UntrustedState, "the head (receipt %d, %q) is not a log's end", x.Head.Sequence, x.Head.Digest)}
	}
	if x.Probes == nil {
		x.Probes = map[string]ProbeIndex{}
	}
	return &x, nil
}

// writeIndex replaces the head and index file with x: a temporary file
// (mode 0600), synced and renamed into place, the directory synced.
func (l *Log) writeIndex(x *index) error {
	path := filepath.Join(l.trusted, indexName)
	data, err := json.Marshal(x)
	if err != nil {
		return &Error{Op: "record the head", Path: path, Err: err}
	}
	tmp, err := tempName(".head-", ".tmp")
	if err != nil {
		return &Error{Op: "record the head", Path: path, Err: err}
	}
	fd, err := unix.Openat(l.trustedFd, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return &Error{Op: "record the head", Path: path, Err: err}
	}
	f := os.NewFile(uintptr(fd), filepath.Join(l.trusted, tmp))
	_, err = f.Write(append(data, '\n'))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = unix.Renameat(l.trustedFd, tmp, l.trustedFd, indexName)
	}
	if err != nil {
		unix.Unlinkat(l.trustedFd, tmp, 0)
		return &Error{Op: "record the head", Path: path, Err: err}
	}
	if err := unix.Fsync(l.trustedFd); err != nil {
		return &Error{Op: "record the head", Path: path, Err: err}
	}
	return nil
}

// ReadLog reads the receipts in dir (an absolute, clean path, no
// component of it a symlink) as [ReadLogAt] does.
func ReadLog(dir string) ([]Entry, error) {
	root, rel, err := splitAbs(dir)
	if err != nil {
		return nil, &Error{Op: "read", Path: dir, Err: err}
	}
	return ReadLogAt(root, rel)
}

// ReadLogAt reads the receipts in the log directory rel below root (as
// [OpenLogAt] walks it, creating nothing) in sequence order without
// verifying them (see [Verify]): for listing and showing. A missing
// directory is an empty log. Files it cannot read as receipts are left
// out, and the error (non-nil then) names each; names that are not
// receipts are ignored.
func ReadLogAt(root, rel string) ([]Entry, error) {
	dir := filepath.Join(root, rel)
	fd, err := openLogRead(root, rel)
	if err != nil {
		return nil, err
	}
	if fd < 0 {
		return nil, nil
	}
	defer unix.Close(fd)
	names, err := listDir(fd, dir)
	if err != nil {
		return nil, err
	}
	var out []Entry
	var errs []error
	for _, n := range names.receipts {
		name := receiptName(n)
		data, err := readFileAt(fd, name)
		var env envelope
		var st Statement
		if err == nil {
			env, _, st, err = parseReceipt(data)
		}
		if err != nil {
			errs = append(errs, &Error{Op: "read", Path: filepath.Join(dir, name), Err: err})
			continue
		}
		out = append(out, Entry{Sequence: n, Digest: digestOf(data), File: name, Envelope: env, Statement: st})
	}
	return out, errors.Join(errs...)
}

// parseReceipt parses a receipt file: the envelope, its payload and the
// statement the payload holds. Nothing is verified.
func parseReceipt(data []byte) (envelope, []byte, Statement, error) {
	var env envelope
	var st Statement
	if err := json.Unmarshal(data, &env); err != nil {
		return env, nil, st, fmt.Errorf("not a complete DSSE envelope (a torn or truncated file?): %w", err)
	}
	if env.PayloadType == "" && env.Payload == "" && len(env.Signatures) == 0 {
		return env, nil, st, fmt.Errorf("not a DSSE envelope: it has no payloadType, payload or signatures")
	}
	body, err := base64.StdEncoding.Strict().DecodeString(env.Payload)
	if err != nil {
		return env, nil, st, fmt.Errorf("its payload is not base64: %w", err)
	}
	if err := json.Unmarshal(body, &st); err != nil {
		return env, body, st, fmt.Errorf("its payload is not an in-toto statement: %w", err)
	}
	return env, body, st, nil
}

// Names in the log directory.
const (
	receiptSuffix = ".json"
	tempPrefix    = ".receipt-" // a receipt being written: ".receipt-<16 hex>.tmp"
	tempSuffix    = ".tmp"
)

// receiptName is the file name of receipt n.
func receiptName(n int64) string { return fmt.Sprintf("%08d%s", n, receiptSuffix) }

// receiptNumber returns the sequence number a receipt's file name holds,
// false for any other name (including another spelling of a number).
func receiptNumber(name string) (int64, bool) {
	digits, ok := strings.CutSuffix(name, receiptSuffix)
	if !ok || digits == "" || strings.Trim(digits, "0123456789") != "" {
		return 0, false
	}
	n, err := strconv.ParseInt(digits, 10, 64)
	if err != nil || n < 1 || receiptName(n) != name {
		return 0, false
	}
	return n, true
}

// isTempName reports whether name is a temporary file of the writer.
func isTempName(name string) bool {
	mid, ok := strings.CutPrefix(name, tempPrefix)
	if !ok {
		return false
	}
	mid, ok = strings.CutSuffix(mid, tempSuffix)
	if !ok || len(mid) != 16 {
		return false
	}
	_, err := hex.DecodeString(mid)
	return err == nil
}

// tempName returns prefix, 16 random hex digits and suffix.
func tempName(prefix, suffix string) (string, error) {
	var rnd [8]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return "", err
	}
	return prefix + hex.EncodeToString(rnd[:]) + suffix, nil
}

// dirNames sorts the names of a log directory.
type dirNames struct {
	receipts []int64  // the receipts' sequence numbers, ascending
	temps    []string // a writer's temporary files
	others   []string // anything else
}

// listDir lists the directory fd (named dir), at most maxFiles names.
func listDir(fd int, dir string) (dirNames, error) {
	var out dirNames
	dfd, err := unix.Openat(fd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return out, &Error{Op: "read", Path: dir, Err: err}
	}
	f := os.NewFile(uintptr(dfd), dir)
	defer f.Close()
	for total := 0; ; {
		names, err := f.Readdirnames(1024)
		total += len(names)
		if total > maxFiles {
			return out, &Error{Op: "read", Path: dir, Err: fmt.Errorf("more than %d files in the log directory", maxFiles)}
		}
		for _, n := range names {
			if seq, ok := receiptNumber(n); ok {
				out.receipts = append(out.receipts, seq)
			} else if isTempName(n) {
				out.temps = append(out.temps, n)
			} else {
				out.others = append(out.others, n)
			}
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return out, &Error{Op: "read", Path: dir, Err: err}
		}
	}
	sort.Slice(out.receipts, func(i, j int) bool { return out.receipts[i] < out.receipts[j] })
	sort.Strings(out.temps)
	sort.Strings(out.others)
	return out, nil
}

// readFileAt reads the receipt file name in the directory fd, refusing a
// symlink, anything but a regular file and a file larger than
// maxReceiptSize. A missing file is [os.ErrNotExist].
func readFileAt(fd int, name string) ([]byte, error) {
	return readFileLimit(fd, name, maxReceiptSize)
}

func readFileLimit(dirFd int, name string, max int64) ([]byte, error) {
	fd, err := unix.Openat(dirFd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	switch {
	case err == unix.ENOENT:
		return nil, os.ErrNotExist
	case err == unix.ELOOP:
		return nil, errors.New("it is a symlink")
	case err != nil:
		return nil, err
	}
	f := os.NewFile(uintptr(fd), name)
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("not a regular file (%s)", st.Mode().Type())
	}
	if st.Size() > max {
		return nil, fmt.Errorf("%d bytes, more than the limit of %d", st.Size(), max)
	}
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > max {
		return nil, fmt.Errorf("more than the limit of %d bytes", max)
	}
	return data, nil
}

// verify returns the log's verifier, made on first use.
func (l *Log) verify() *verifier {
	l.verifierOnce.Do(func() {
		v, err := newVerifier(l.signer.Public())
		if err != nil {
			panic("evidence: a signer's public key does not make a verifier: " + err.Error()) // 32 bytes always do
		}
		l.verifier = v
	})
	return l.verifier
}
