package userdir_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/cordon-run/cordon/internal/testenv"
	"github.com/cordon-run/cordon/internal/userdir"
	"github.com/cordon-run/cordon/refusal"
)

// checkPrivate fails unless p is a real directory of this user, mode 0700.
func checkPrivate(t *testing.T, p string) {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Lstat(p, &st); err != nil {
		t.Fatal(err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR || st.Mode&0o777 != 0o700 || int(st.Uid) != os.Geteuid() {
		t.Fatalf("%s: mode %#o, uid %d; want a directory of mode 0700 owned by uid %d", p, st.Mode, st.Uid, os.Geteuid())
	}
}

// modeOf returns p's permission bits, not following a symlink.
func modeOf(t *testing.T, p string) os.FileMode {
	t.Helper()
	fi, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode()
}

func TestEnsureCreatesPrivateDirectories(t *testing.T) {
	top := t.TempDir()
	dir := filepath.Join(top, "a", "b", "state")
	fd, err := userdir.Ensure(dir)
	if err != nil {
		t.Fatalf("Ensure(%s): %v", dir, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		t.Fatal(err)
	}
	unix.Close(fd)
	var want unix.Stat_t
	unix.Lstat(dir, &want)
	if st.Ino != want.Ino || st.Dev != want.Dev {
		t.Errorf("Ensure's descriptor is not on %s", dir)
	}
	for _, p := range []string{filepath.Join(top, "a"), filepath.Join(top, "a", "b"), dir} {
		checkPrivate(t, p)
	}

	// Ensuring it again opens the same directory and leaves it as it is.
	fd, err = userdir.Ensure(dir)
	if err != nil {
		t.Fatalf("second Ensure(%s): %v", dir, err)
	}
	unix.Close(fd)
	checkPrivate(t, dir)
}

func TestEnsureRefuses(t *testing.T) {
	type setup func(t *testing.T, top, dir string)
	mkdir := func(mode os.FileMode) setup {
		return func(t *testing.T, top, dir string) {
			if err := os.Mkdir(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(dir, mode); err != nil {
				t.Fatal(err)
			}
		}
	}
	cases := []struct {
		name  string
		setup setup
		other bool // needs another user
	}{
		{name: "group readable", setup: mkdir(0o750)},
		{name: "world readable", setup: mkdir(0o755)},
		{name: "group writable only", setup: mkdir(0o720)},
		{name: "others may enter", setup: mkdir(0o701)},
		{name: "symlink to a private directory", setup: func(t *testing.T, top, dir string) {
			real := filepath.Join(top, "real")
			if err := os.Mkdir(real, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(real, dir); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "dangling symlink", setup: func(t *testing.T, top, dir string) {
			if err := os.Symlink(filepath.Join(top, "absent"), dir); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "a file", setup: func(t *testing.T, top, dir string) {
			if err := os.WriteFile(dir, nil, 0o600); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "another user's directory", other: true, setup: func(t *testing.T, top, dir string) {
			uid, gid := testenv.OtherUser(t)
			mkdir(0o700)(t, top, dir)
			if err := os.Chown(dir, uid, gid); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			top := t.TempDir()
			dir := filepath.Join(top, "state")
			c.setup(t, top, dir)
			before := modeOf(t, dir)
			fd, err := userdir.Ensure(dir)
			if err == nil {
				unix.Close(fd)
				t.Fatalf("Ensure(%s) succeeded, want a refusal", dir)
			}
			if !errors.Is(err, refusal.UntrustedState) {
				t.Fatalf("Ensure(%s): %v, want refusal.UntrustedState", dir, err)
			}
			if after := modeOf(t, dir); after != before {
				t.Errorf("the refused %s changed from %v to %v: a refusal never repairs", dir, before, after)
			}
			// Open refuses it the same way.
			if fd, err := userdir.Open(dir); !errors.Is(err, refusal.UntrustedState) {
				if err == nil {
					unix.Close(fd)
				}
				t.Errorf("Open(%s): %v, want refusal.UntrustedState", dir, err)
			}
			// Nothing was made where a symlink points.
			if _, err := os.Lstat(filepath.Join(top, "absent")); err == nil {
				t.Errorf("Ensure created the target of a dangling symlink")
			}
		})
	}
}

func TestEnsureRefusesBadNames(t *testing.T) {
	for _, dir := range []string{"", "/", "relative/state", "./state", "/tmp/x/../state", "/tmp/state/"} {
		fd, err := userdir.Ensure(dir)
		if err == nil {
			unix.Close(fd)
			t.Errorf("Ensure(%q) succeeded, want a refusal", dir)
			continue
		}
		if !errors.Is(err, refusal.InvalidPolicy) {
			t.Errorf("Ensure(%q): %v, want refusal.InvalidPolicy", dir, err)
		}
	}
}

func TestEnsurePath(t *testing.T) {
	top := t.TempDir()
	state := filepath.Join(top, "state")
	got, err := userdir.EnsurePath(state, "runs", "key")
	if err != nil {
		t.Fatalf("EnsurePath: %v", err)
	}
	if want := filepath.Join(state, "runs", "key"); got != want {
		t.Errorf("EnsurePath = %s, want %s", got, want)
	}
	for _, p := range []string{state, filepath.Join(state, "runs"), got} {
		checkPrivate(t, p)
	}
	if got, err := userdir.EnsurePath(state); err != nil || got != state {
		t.Errorf("EnsurePath with no names = %q, %v; want %s", got, err, state)
	}
}

// TestEnsurePathChecksEveryComponent plants one bad directory on the way
// and expects a refusal, with nothing created below or through it.
func TestEnsurePathChecksEveryComponent(t *testing.T) {
	cases := []struct {
		name  string
		setup func(t *testing.T, top, state string)
	}{
		{name: "state open to others", setup: func(t *testing.T, top, state string) {
			os.Chmod(state, 0o755)
		}},
		{name: "middle open to others", setup: func(t *testing.T, top, state string) {
			os.Chmod(filepath.Join(state, "runs"), 0o755)
		}},
		{name: "last open to group", setup: func(t *testing.T, top, state string) {
			os.Mkdir(filepath.Join(state, "runs", "key"), 0o700)
			os.Chmod(filepath.Join(state, "runs", "key"), 0o770)
		}},
		{name: "middle a symlink", setup: func(t *testing.T, top, state string) {
			os.Remove(filepath.Join(state, "runs"))
			if err := os.Symlink(filepath.Join(top, "elsewhere"), filepath.Join(state, "runs")); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "last a symlink", setup: func(t *testing.T, top, state string) {
			if err := os.Symlink(filepath.Join(top, "elsewhere"), filepath.Join(state, "runs", "key")); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "middle a file", setup: func(t *testing.T, top, state string) {
			os.Remove(filepath.Join(state, "runs"))
			os.WriteFile(filepath.Join(state, "runs"), nil, 0o600)
		}},
		{name: "middle another user's", setup: func(t *testing.T, top, state string) {
			uid, gid := testenv.OtherUser(t)
			if err := os.Chown(filepath.Join(state, "runs"), uid, gid); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			top := t.TempDir()
			state := filepath.Join(top, "state")
			if err := os.MkdirAll(filepath.Join(state, "runs"), 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.Mkdir(filepath.Join(top, "elsewhere"), 0o700); err != nil {
				t.Fatal(err)
			}
			c.setup(t, top, state)
			got, err := userdir.EnsurePath(state, "runs", "key", "deeper")
			if err == nil {
				t.Fatalf("EnsurePath succeeded (%s), want a refusal", got)
			}
			if !errors.Is(err, refusal.UntrustedState) {
				t.Fatalf("EnsurePath: %v, want refusal.UntrustedState", err)
			}
			if names, _ := os.ReadDir(filepath.Join(top, "elsewhere")); len(names) != 0 {
				t.Errorf("EnsurePath created %s inside a symlink's target", names[0].Name())
			}
			if _, err := os.Lstat(filepath.Join(state, "runs", "key", "deeper")); err == nil {
				t.Errorf("EnsurePath created a directory below the refused one")
			}
		})
	}
}

func TestSubRefusesMoreThanOneComponent(t *testing.T) {
	top := t.TempDir()
	fd, err := userdir.Ensure(filepath.Join(top, "state"))
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	for _, name := range []string{"", ".", "..", "a/b", "../escape"} {
		sub, err := userdir.Sub(fd, filepath.Join(top, "state"), name)
		if err == nil {
			unix.Close(sub)
			t.Errorf("Sub(%q) succeeded, want an error", name)
		}
	}
	if _, err := os.Lstat(filepath.Join(top, "escape")); err == nil {
		t.Errorf("Sub(\"../escape\") created a directory outside its parent")
	}
	if names, _ := os.ReadDir(filepath.Join(top, "state")); len(names) != 0 {
		t.Errorf("a refused Sub created %s", names[0].Name())
	}
}
