package keystore_test

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cordon-run/cordon/internal/keystore"
	"github.com/cordon-run/cordon/internal/testenv"
	"github.com/cordon-run/cordon/refusal"
)

// The cross-process test runs parts of itself in re-executed copies of the
// test binary: separate processes are what race to create a key file.
const helperEnv = "CORDON_KEYSTORE_TEST_HELPER"

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) != "" {
		os.Exit(helperMain())
	}
	os.Exit(m.Run())
}

// helperMain waits (bounded) for the start file, then creates or reads
// the key "race" in the state directory and prints it in hex.
func helperMain() int {
	state, start := os.Getenv("CORDON_KEYSTORE_STATE"), os.Getenv("CORDON_KEYSTORE_START")
	for i := 0; i < 5000; i++ {
		if _, err := os.Stat(start); err == nil {
			break
		}
		time.Sleep(time.Millisecond)
	}
	s, err := keystore.Open(state)
	if err == nil {
		var k []byte
		if k, err = s.Key("race", true); err == nil {
			fmt.Println(hex.EncodeToString(k))
			return 0
		}
	}
	fmt.Fprintln(os.Stderr, "helper:", err)
	return 1
}

func open(t *testing.T, state string) *keystore.Store {
	t.Helper()
	s, err := keystore.Open(state)
	if err != nil {
		t.Fatalf("Open(%s): %v", state, err)
	}
	return s
}

func TestKeyCreation(t *testing.T) {
	state := filepath.Join(t.TempDir(), "state")
	s := open(t, state)
	if want := filepath.Join(state, "keys"); s.Dir() != want {
		t.Errorf("Dir() = %s, want %s", s.Dir(), want)
	}
	k, err := s.Key("registry", true)
	if err != nil {
		t.Fatalf("Key: %v", err)
	}
	if len(k) != keystore.KeySize || bytes.Equal(k, make([]byte, keystore.KeySize)) {
		t.Fatalf("key %x is not %d random bytes", k, keystore.KeySize)
	}
	for p, want := range map[string]uint32{
		state:                        unix.S_IFDIR | 0o700,
		filepath.Join(state, "keys"): unix.S_IFDIR | 0o700,
		filepath.Join(state, "keys", "registry.key"): unix.S_IFREG | 0o600,
	} {
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			t.Fatal(err)
		}
		if uint32(st.Mode) != want || int(st.Uid) != os.Geteuid() {
			t.Errorf("%s: mode %#o uid %d, want %#o uid %d", p, st.Mode, st.Uid, want, os.Geteuid())
		}
	}
	onDisk, err := os.ReadFile(filepath.Join(state, "keys", "registry.key"))
	if err != nil || !bytes.Equal(onDisk, k) {
		t.Errorf("the key file holds %x (%v), want the key %x", onDisk, err, k)
	}
	if names := dirNames(t, filepath.Join(state, "keys")); len(names) != 1 {
		t.Errorf("the keys directory holds %q, want only registry.key (no temporary file left)", names)
	}

	// The same key, from the same Store, from a new Store, with or
	// without create.
	for i, s := range []*keystore.Store{s, open(t, state), open(t, state)} {
		again, err := s.Key("registry", i == 2)
		if err != nil || !bytes.Equal(again, k) {
			t.Errorf("store %d: Key = %x, %v; want %x", i, again, err, k)
		}
	}

	// Another name is another key.
	other, err := s.Key("evidence", true)
	if err != nil || bytes.Equal(other, k) {
		t.Errorf("Key(evidence) = %x, %v; want a key of its own", other, err)
	}
}

func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

func TestMissingKeyWithoutCreate(t *testing.T) {
	state := filepath.Join(t.TempDir(), "state")
	_, err := open(t, state).Key("registry", false)
	if !errors.Is(err, refusal.UntrustedState) {
		t.Fatalf("Key(create=false) of a missing key: %v, want refusal.UntrustedState", err)
	}
	if names := dirNames(t, filepath.Join(state, "keys")); len(names) != 0 {
		t.Errorf("Key without create made %q", names)
	}
}

func TestBadKeyNames(t *testing.T) {
	top := t.TempDir()
	s := open(t, filepath.Join(top, "state"))
	for _, name := range []string{"", ".", "..", "../escape", "a/b", "nul\x00"} {
		if k, err := s.Key(name, true); err == nil {
			t.Errorf("Key(%q) = %x, want an error", name, k)
		}
	}
	if _, err := os.Lstat(filepath.Join(top, "state", "escape.key")); err == nil {
		t.Errorf("Key(\"../escape\") created a key outside the keys directory")
	}
	if names := dirNames(t, s.Dir()); len(names) != 0 {
		t.Errorf("refused names created %q", names)
	}
}

// TestRefusedKeyFiles plants a key file that is not what cordon creates and
// expects every Store to refuse it, and to leave it as it is.
func TestRefusedKeyFiles(t *testing.T) {
	good := bytes.Repeat([]byte{7}, keystore.KeySize)
	cases := []struct {
		name  string
		plant func(t *testing.T, top, file string)
	}{
		{name: "symlink to a good key", plant: func(t *testing.T, top, file string) {
			target := filepath.Join(top, "planted.key")
			if err := os.WriteFile(target, good, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(target, file); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "dangling symlink", plant: func(t *testing.T, top, file string) {
			if err := os.Symlink(filepath.Join(top, "absent.key"), file); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "mode 0644", plant: func(t *testing.T, top, file string) {
			writeMode(t, file, good, 0o644)
		}},
		{name: "mode 0640", plant: func(t *testing.T, top, file string) {
			writeMode(t, file, good, 0o640)
		}},
		{name: "too short", plant: func(t *testing.T, top, file string) {
			writeMode(t, file, good[:16], 0o600)
		}},
		{name: "too long", plant: func(t *testing.T, top, file string) {
			writeMode(t, file, append(good, 0), 0o600)
		}},
		{name: "empty", plant: func(t *testing.T, top, file string) {
			writeMode(t, file, nil, 0o600)
		}},
		{name: "a directory", plant: func(t *testing.T, top, file string) {
			if err := os.Mkdir(file, 0o700); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "a FIFO", plant: func(t *testing.T, top, file string) {
			if err := unix.Mkfifo(file, 0o600); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "another user's key", plant: func(t *testing.T, top, file string) {
			uid, gid := testenv.OtherUser(t)
			writeMode(t, file, good, 0o600)
			if err := os.Chown(file, uid, gid); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			top := t.TempDir()
			state := filepath.Join(top, "state")
			s := open(t, state)
			file := filepath.Join(s.Dir(), "registry.key")
			c.plant(t, top, file)
			before := describe(t, file)
			for _, create := range []bool{false, true} {
				k, err := s.Key("registry", create)
				if !errors.Is(err, refusal.UntrustedState) {
					t.Errorf("Key(create=%v) = %x, %v; want refusal.UntrustedState", create, k, err)
				}
				if _, err := s.MAC("registry", create, []byte("x")); !errors.Is(err, refusal.UntrustedState) {
					t.Errorf("MAC(create=%v): %v; want refusal.UntrustedState", create, err)
				}
			}
			if after := describe(t, file); after != before {
				t.Errorf("the refused key file changed from %s to %s: a refusal never repairs", before, after)
			}
			if _, err := os.Lstat(filepath.Join(top, "absent.key")); err == nil {
				t.Errorf("Key created a file where a symlink points")
			}
		})
	}
}

func writeMode(t *testing.T, file string, data []byte, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(file, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(file, mode); err != nil {
		t.Fatal(err)
	}
}

// describe says what is at p without following a symlink: type, mode,
// owner, size and, for a regular file, its bytes.
func describe(t *testing.T, p string) string {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Lstat(p, &st); err != nil {
		t.Fatal(err)
	}
	d := fmt.Sprintf("mode %#o uid %d size %d", st.Mode, st.Uid, st.Size)
	if st.Mode&unix.S_IFMT == unix.S_IFREG {
		b, _ := os.ReadFile(p)
		d += " " + hex.EncodeToString(b)
	}
	return d
}

// TestRefusedKeysDirectory plants a keys directory that is not what cordon
// creates: Open and Key refuse it, and nothing is written through it.
func TestRefusedKeysDirectory(t *testing.T) {
	cases := []struct {
		name  string
		plant func(t *testing.T, top, keys string)
	}{
		{name: "mode 0755", plant: func(t *testing.T, top, keys string) {
			if err := os.Chmod(keys, 0o755); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "mode 0710", plant: func(t *testing.T, top, keys string) {
			if err := os.Chmod(keys, 0o710); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "symlink to a private directory", plant: func(t *testing.T, top, keys string) {
			if err := os.Remove(keys); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(filepath.Join(top, "elsewhere"), keys); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "another user's directory", plant: func(t *testing.T, top, keys string) {
			uid, gid := testenv.OtherUser(t)
			if err := os.Chown(keys, uid, gid); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			top := t.TempDir()
			state := filepath.Join(top, "state")
			if err := os.Mkdir(filepath.Join(top, "elsewhere"), 0o700); err != nil {
				t.Fatal(err)
			}
			// A Store opened while the directory was good, and one opened
			// after the change: both refuse.
			early := open(t, state)
			c.plant(t, top, filepath.Join(state, "keys"))
			if s, err := keystore.Open(state); !errors.Is(err, refusal.UntrustedState) {
				t.Errorf("Open: %v (store %v), want refusal.UntrustedState", err, s)
			}
			if k, err := early.Key("registry", true); !errors.Is(err, refusal.UntrustedState) {
				t.Errorf("Key from a store opened before: %x, %v; want refusal.UntrustedState", k, err)
			}
			if names := dirNames(t, filepath.Join(top, "elsewhere")); len(names) != 0 {
				t.Errorf("a key was written through the symlink: %q", names)
			}
		})
	}
}

func TestMAC(t *testing.T) {
	top := t.TempDir()
	state := filepath.Join(top, "state")
	mac := func(s *keystore.Store, parts ...string) string {
		t.Helper()
		var bs [][]byte
		for _, p := range parts {
			bs = append(bs, []byte(p))
		}
		m, err := s.MAC("registry", true, bs...)
		if err != nil {
			t.Fatalf("MAC(%q): %v", parts, err)
		}
		if len(m) != 32 {
			t.Fatalf("MAC(%q) is %d bytes, want 32 (HMAC-SHA256)", parts, len(m))
		}
		return hex.EncodeToString(m)
	}
	s := open(t, state)
	abC := mac(s, "ab", "c")
	if again := mac(open(t, state), "ab", "c"); again != abC {
		t.Errorf("MAC is not deterministic across stores: %s, then %s", abC, again)
	}
	distinct := map[string][]string{abC: {"ab", "c"}}
	for _, parts := range [][]string{{"a", "bc"}, {"abc"}, {"abc", ""}, {"", "abc"}, {}, {""}, {"", ""}, {"c", "ab"}} {
		m := mac(s, parts...)
		if prev, ok := distinct[m]; ok {
			t.Errorf("MAC(%q) == MAC(%q): different part lists authenticate alike", parts, prev)
		}
		distinct[m] = parts
	}

	// Another key (another state directory, or another name) gives
	// another MAC of the same parts.
	if other := mac(open(t, filepath.Join(top, "state2")), "ab", "c"); other == abC {
		t.Errorf("two stores with different keys give the same MAC %s", abC)
	}
	m, err := s.MAC("evidence", true, []byte("ab"), []byte("c"))
	if err != nil || hex.EncodeToString(m) == abC {
		t.Errorf("MAC under another key name = %x, %v; want one of its own", m, err)
	}
}

// TestConcurrentCreationInOneProcess has goroutines, each with a Store of
// its own on one state directory, ask for the same absent key at once:
// every one of them must get it, and the same one.
func TestConcurrentCreationInOneProcess(t *testing.T) {
	const rounds, goroutines = 50, 8
	for r := range rounds {
		state := filepath.Join(t.TempDir(), "state")
		stores := make([]*keystore.Store, goroutines)
		for i := range stores {
			stores[i] = open(t, state)
		}
		keys := make([][]byte, goroutines)
		errs := make([]error, goroutines)
		var start, done sync.WaitGroup
		start.Add(1)
		for i := range goroutines {
			done.Add(1)
			go func() {
				defer done.Done()
				start.Wait()
				keys[i], errs[i] = stores[i].Key("registry", true)
			}()
		}
		start.Done()
		done.Wait()
		for i := range goroutines {
			if errs[i] != nil {
				t.Fatalf("round %d: goroutine %d: Key: %v", r, i, errs[i])
			}
			if !bytes.Equal(keys[i], keys[0]) {
				t.Fatalf("round %d: goroutine %d got key %x, goroutine 0 %x", r, i, keys[i], keys[0])
			}
		}
		onDisk, _ := os.ReadFile(filepath.Join(state, "keys", "registry.key"))
		if !bytes.Equal(onDisk, keys[0]) {
			t.Fatalf("round %d: the key file holds %x, the goroutines got %x", r, onDisk, keys[0])
		}
	}
}

// TestConcurrentCreationAcrossProcesses starts processes that ask for the
// same absent key at once: all print the same key, the one on disk.
func TestConcurrentCreationAcrossProcesses(t *testing.T) {
	const rounds, procs = 5, 6
	for r := range rounds {
		top := t.TempDir()
		state := filepath.Join(top, "state")
		start := filepath.Join(top, "start")
		var outs [procs]bytes.Buffer
		var errs [procs]strings.Builder
		cmds := make([]*exec.Cmd, procs)
		for i := range cmds {
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), helperEnv+"=1", "CORDON_KEYSTORE_STATE="+state, "CORDON_KEYSTORE_START="+start)
			cmd.Stdout, cmd.Stderr = &outs[i], &errs[i]
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			cmds[i] = cmd
		}
		if err := os.WriteFile(start, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		for i, cmd := range cmds {
			if err := cmd.Wait(); err != nil {
				t.Errorf("round %d: process %d: %v: %s", r, i, err, errs[i].String())
			}
		}
		onDisk, err := os.ReadFile(filepath.Join(state, "keys", "race.key"))
		if err != nil {
			t.Fatal(err)
		}
		want := hex.EncodeToString(onDisk)
		for i := range outs {
			if got := strings.TrimSpace(outs[i].String()); got != want {
				t.Errorf("round %d: process %d printed key %q, the key file holds %s", r, i, got, want)
			}
		}
		if names := dirNames(t, filepath.Join(state, "keys")); len(names) != 1 {
			t.Errorf("round %d: the keys directory holds %q, want only race.key", r, names)
		}
	}
}

// TestStaleTemporaryFile leaves the temporary file a creation killed
// between writing and linking leaves behind, under the name this process
// would use (its PID, as a later process in a fresh container may have
// too): creation must still succeed.
func TestStaleTemporaryFile(t *testing.T) {
	state := filepath.Join(t.TempDir(), "state")
	s := open(t, state)
	stale := filepath.Join(s.Dir(), fmt.Sprintf(".registry.key.%d.tmp", os.Getpid()))
	if err := os.WriteFile(stale, []byte("half"), 0o600); err != nil {
		t.Fatal(err)
	}
	k, err := s.Key("registry", true)
	if err != nil {
		t.Fatalf("Key with a stale temporary file in the store: %v", err)
	}
	if len(k) != keystore.KeySize {
		t.Fatalf("key of %d bytes", len(k))
	}
}
