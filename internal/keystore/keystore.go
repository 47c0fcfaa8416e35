// Package keystore keeps cordon's secret keys in the per-user state
// directory, outside every workspace and hidden from every sandbox: the
// key that authenticates the tool registries of every workspace (and, next,
// the key that signs evidence). A key is 32 random bytes in a file of its
// own, created mode 0600 in a directory of mode 0700 that the user owns;
// anything else — a symlink, another owner, a readable mode, a wrong size —
// is refused, never repaired silently.
package keystore

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/cordon-run/cordon/internal/userdir"
	"github.com/cordon-run/cordon/refusal"
)

// KeySize is the size of every key.
const KeySize = 32

// Store is the key store of one user.
type Store struct {
	dir string

	mu   sync.Mutex
	keys map[string][]byte
}

// Open returns the key store in stateDir/keys, creating the directory
// (mode 0700) when missing.
func Open(stateDir string) (*Store, error) {
	dir, err := userdir.EnsurePath(stateDir, "keys")
	if err != nil {
		return nil, err
	}
	return &Store{dir: dir, keys: map[string][]byte{}}, nil
}

// Dir returns the store's directory.
func (s *Store) Dir() string { return s.dir }

// Key returns the key name, creating it from crypto/rand when create is
// set and it does not exist yet. Without create, a missing key is an
// error matching [refusal.UntrustedState].
func (s *Store) Key(name string, create bool) ([]byte, error) {
	if name == "" || strings.ContainsAny(name, "/\x00") || name == "." || name == ".." {
		return nil, fmt.Errorf("keystore: bad key name %q", name)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if k, ok := s.keys[name]; ok {
		return k, nil
	}
	dfd, err := userdir.Open(s.dir)
	if err != nil {
		return nil, err
	}
	defer unix.Close(dfd)
	file := filepath.Join(s.dir, name+".key")
	k, err := readKey(dfd, name+".key", file)
	if errors.Is(err, os.ErrNotExist) && create {
		k, err = createKey(dfd, name+".key", file)
		if errors.Is(err, errKeyExists) { // another process linked it first
			k, err = readKey(dfd, name+".key", file)
		}
	}
	if errors.Is(err, os.ErrNotExist) {
		return nil, refusal.Errorf(refusal.UntrustedState, "the key %s does not exist in cordon's key store %s", name, s.dir)
	}
	if err != nil {
		return nil, err
	}
	s.keys[name] = k
	return k, nil
}

func readKey(dfd int, base, file string) ([]byte, error) {
	fd, err := unix.Openat(dfd, base, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		if err == unix.ENOENT {
			return nil, os.ErrNotExist
		}
		return nil, refusal.Errorf(refusal.UntrustedState, "cannot open the key %s: %w", file, err)
	}
	f := os.NewFile(uintptr(fd), file)
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, err
	}
	switch {
	case st.Mode&unix.S_IFMT != unix.S_IFREG:
		return nil, refusal.Errorf(refusal.UntrustedState, "refusing the key %s — not a regular file", file)
	case int(st.Uid) != os.Geteuid():
		return nil, refusal.Errorf(refusal.UntrustedState, "refusing the key %s — it belongs to uid %d, not to this user", file, st.Uid)
	case st.Mode&0o077 != 0:
		return nil, refusal.Errorf(refusal.UntrustedState, "refusing the key %s — its mode is %#o, readable by others; it must be 0600", file, st.Mode&0o777)
	case st.Size != KeySize:
		return nil, refusal.Errorf(refusal.UntrustedState, "refusing the key %s — it holds %d bytes, not %d", file, st.Size, KeySize)
	}
	k := make([]byte, KeySize)
	if _, err := io.ReadFull(f, k); err != nil {
		return nil, err
	}
	return k, nil
}

// errKeyExists: another process made the key first.
var errKeyExists = errors.New("keystore: the key exists")

func createKey(dfd int, base, file string) ([]byte, error) {
	k := make([]byte, KeySize)
	if _, err := rand.Read(k); err != nil {
		return nil, err
	}
	// Written under a temporary name, then linked into place: a key file
	// is never seen half written.
	var rnd [8]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return nil, err
	}
	tmp := fmt.Sprintf(".%s.%x.tmp", base, rnd)
	fd, err := unix.Openat(dfd, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("cannot create the key %s: %w", file, err)
	}
	f := os.NewFile(uintptr(fd), file)
	_, err = f.Write(k)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = unix.Linkat(dfd, tmp, dfd, base, 0)
		if err == unix.EEXIST {
			err = errKeyExists
		}
	}
	unix.Unlinkat(dfd, tmp, 0)
	if err != nil {
		return nil, err
	}
	return k, nil
}

// MAC returns the HMAC-SHA256 of parts under the key name (created when
// create is set), each part length-prefixed so that no two lists of parts
// authenticate alike.
func (s *Store) MAC(name string, create bool, parts ...[]byte) ([]byte, error) {
	k, err := s.Key(name, create)
	if err != nil {
		return nil, err
	}
	m := hmac.New(sha256.New, k)
	for _, p := range parts {
		var n [8]byte
		for i := range n {
			n[i] = byte(uint64(len(p)) >> (8 * i))
		}
		m.Write(n[:])
		m.Write(p)
	}
	return m.Sum(nil), nil
}
