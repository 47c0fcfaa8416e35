package roots

import (
	"bytes"
	"crypto/hmac"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cordon-run/cordon/harness"
	"github.com/cordon-run/cordon/internal/keystore"
	"github.com/cordon-run/cordon/internal/userdir"
	"github.com/cordon-run/cordon/refusal"
)

// Modes of a root.
const (
	ModeCopy     = "copy"     // a copy of the origin (reflinked where the file system can)
	ModeWorktree = "worktree" // a git worktree of the origin's HEAD on a branch of its own
)

// Record is what makes a directory a root: kept in cordon's state
// directory, outside every workspace and sandbox, and authenticated with
// a key of the key store, so that no directory can claim to be a root and
// no root can claim another origin.
type Record struct {
	Version int       `json:"version"`
	ID      string    `json:"id"`
	Path    string    `json:"path"`   // the root (a directory in the roots directory)
	Origin  string    `json:"origin"` // the directory it was made from
	Mode    string    `json:"mode"`
	Branch  string    `json:"branch,omitempty"` // worktree mode: the root's branch
	Created time.Time `json:"created"`
	// Base is the digest of the root's manifest when it was made, Origin
	// that of the origin's then, Git that of the write-later files of
	// the root's git directory (its configuration, hooks and info).
	Base         string `json:"base_digest"`
	OriginDigest string `json:"origin_digest"`
	Git          string `json:"git_digest,omitempty"`
	Copy         string `json:"copy,omitempty"` // copy mode: "reflink", "copy" or "reflink and copy"
	// HarnessState: the origin's harness state was copied too.
	HarnessState bool `json:"harness_state,omitempty"`
	// Applied lists when changes went back to the origin.
	Applied []time.Time `json:"applied,omitempty"`
}

// sealed is a record file: the record's JSON and its MAC.
type sealed struct {
	Record json.RawMessage `json:"record"`
	MAC    string          `json:"mac"`
}

const (
	recordVersion = 1
	macKey        = "roots" // the key store's key that authenticates records
	maxRecordFile = 1 << 20
	maxManifest   = 256 << 20
)

// nameChar reports whether c may be in a root's name.
func nameChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-'
}

// validID reports whether id may name a root: 1 to 64 of [A-Za-z0-9._-],
// not "." or "..".
func validID(id string) bool {
	if len(id) == 0 || len(id) > 64 || id == "." || id == ".." {
		return false
	}
	for i := range len(id) {
		if !nameChar(id[i]) {
			return false
		}
	}
	return true
}

// store keeps the records: <state dir>/roots/<id>.json, and each root's
// manifests beside it.
type store struct {
	dir  string
	keys *keystore.Store
}

func openStore(h harness.Config) (*store, error) {
	dir, err := userdir.EnsurePath(h.StateDir(), "roots")
	if err != nil {
		return nil, err
	}
	keys, err := keystore.Open(h.StateDir())
	if err != nil {
		return nil, err
	}
	return &store{dir: dir, keys: keys}, nil
}

func (s *store) mac(data []byte) ([]byte, error) {
	return s.keys.MAC(macKey, true, []byte("cordon root record v1\x00"), data)
}

// manifest names of a root's record.
const (
	baseManifest   = "base"
	originManifest = "origin"
	gitManifest    = "git"
)

func (s *store) file(id, what string) string {
	if what == "" {
		return filepath.Join(s.dir, id+".json")
	}
	return filepath.Join(s.dir, id+"."+what+".json")
}

// save writes the record (sealed) and its manifests, each file replaced
// atomically, the manifests first: a record names their digests.
func (s *store) save(r *Record, manifests map[string]Manifest) error {
	for what, m := range manifests {
		data, _ := json.Marshal(m)
		if err := writeAtomic(s.file(r.ID, what), data); err != nil {
			return err
		}
	}
	data, _ := json.Marshal(r)
	mac, err := s.mac(data)
	if err != nil {
		return err
	}
	out, _ := json.Marshal(sealed{Record: data, MAC: hex.EncodeToString(mac)})
	return writeAtomic(s.file(r.ID, ""), append(out, '\n'))
}

// load reads and authenticates the record id. A record whose MAC does
// not hold — edited, forged, made with another key — is
// [refusal.UntrustedState]; a missing one [refusal.NotARoot].
func (s *store) load(id string) (*Record, error) {
	if !validID(id) {
		return nil, refusal.Errorf(refusal.NotARoot, "%q is not the name of a root cordon made", id)
	}
	data, err := readFile(s.file(id, ""), maxRecordFile)
	if errors.Is(err, os.ErrNotExist) {
		return nil, refusal.Errorf(refusal.NotARoot, "no root %s: cordon made no root of that name (cordon root list shows those it made)", id)
	}
	if err != nil {
		return nil, refusal.Errorf(refusal.UntrustedState, "cannot read the record of root %s: %w", id, err)
	}
	var f sealed
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, refusal.Errorf(refusal.UntrustedState, "the record of root %s does not decode: %v", id, err)
	}
	want, err := s.mac(f.Record)
	if err != nil {
		return nil, err
	}
	got, err := hex.DecodeString(f.MAC)
	if err != nil || !hmac.Equal(got, want) {
		return nil, refusal.Errorf(refusal.UntrustedState, "the record of root %s is not authentic (its MAC does not hold): it was not written by cordon with this key store; nothing is done with it", id)
	}
	var r Record
	dec := json.NewDecoder(bytes.NewReader(f.Record))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil || r.ID != id || r.Version != recordVersion {
		return nil, refusal.Errorf(refusal.UntrustedState, "the record of root %s is not one this cordon reads (%v)", id, err)
	}
	return &r, nil
}

// manifest reads one manifest of r and checks it against the digest the
// record names.
func (s *store) manifest(r *Record, what string) (Manifest, error) {
	want := map[string]string{baseManifest: r.Base, originManifest: r.OriginDigest, gitManifest: r.Git}[what]
	data, err := readFile(s.file(r.ID, what), maxManifest)
	if err != nil {
		return nil, refusal.Errorf(refusal.UntrustedState, "cannot read the %s manifest of root %s: %w", what, r.ID, err)
	}
	var m Manifest
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, refusal.Errorf(refusal.UntrustedState, "the %s manifest of root %s does not decode: %v", what, r.ID, err)
	}
	if m.Digest() != want {
		return nil, refusal.Errorf(refusal.UntrustedState, "the %s manifest of root %s is not the one its record names", what, r.ID)
	}
	return m, nil
}

// ids lists the names of the records.
func (s *store) ids() ([]string, error) {
	names, err := os.ReadDir(s.dir)
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, n := range names {
		id, ok := strings.CutSuffix(n.Name(), ".json")
		if ok && !strings.Contains(id, ".") {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids, nil
}

// remove deletes the record and its manifests.
func (s *store) remove(id string) error {
	var errs []error
	for _, what := range []string{"", baseManifest, originManifest, gitManifest} {
		if err := os.Remove(s.file(id, what)); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// writeAtomic replaces name with data: a temporary file beside it,
// synced, renamed over it.
func writeAtomic(name string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(name), ".tmp-*")
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), name)
	}
	if err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("cannot write %s: %w", name, err)
	}
	return nil
}

// readFile reads a regular file (not through a symlink), at most max
// bytes.
func readFile(name string, max int64) ([]byte, error) {
	fd, err := unix.Open(name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: name, Err: err}
	}
	f := os.NewFile(uintptr(fd), name)
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() || st.Size() > max {
		return nil, fmt.Errorf("%s is not a regular file of at most %d bytes", name, max)
	}
	buf := make([]byte, st.Size())
	_, err = io.ReadFull(f, buf)
	return buf, err
}
