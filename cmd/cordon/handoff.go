package main

import (
	"debug/elf"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/cordon-run/cordon/internal/userdir"
	"github.com/cordon-run/cordon/refusal"
	"github.com/cordon-run/cordon/substrate/bwrap"
)

// fullName is the full binary's name: the one a front end hands its
// other commands to, beside its own executable.
const fullName = "cordon-full"

// handOff replaces this process, a front end's, with the full binary run
// on the same command line: same arguments, environment, descriptors and
// process, so that exit codes, signals and standard streams are the full
// binary's own. Its argv[0] names it as cordon-full beside this program,
// so that a front end reached that way refuses rather than hand off again.
// It returns only when that binary cannot be run ([fullProgram]).
func (e *env) handOff() int {
	bin, argv0, err := fullProgram()
	if err == nil {
		err = syscall.Exec(bin, append([]string{argv0}, e.args...), handOffEnv(os.Environ()))
		err = refusal.Errorf(refusal.SandboxUnavailable, "cannot run the full cordon binary %s: %v", bin, err)
	}
	return e.fail(err)
}

// handOffEnv is env for the full binary, which, started by its own name,
// guards as its own too the path the user started this front end by (a
// link in a package manager's bin) and the front end itself, whatever its
// name ([bwrap.EnvStartedAs]; any value env held is replaced: the first
// of two would be read).
func handOffEnv(env []string) []string {
	var paths []string
	if s := bwrap.StartedAs(); s != "" {
		paths = append(paths, s)
	}
	if self, err := os.Executable(); err == nil {
		paths = append(paths, self)
	}
	env = slices.DeleteFunc(slices.Clone(env), func(kv string) bool { return strings.HasPrefix(kv, bwrap.EnvStartedAs+"=") })
	return append(env, bwrap.EnvStartedAs+"="+strings.Join(paths, string(filepath.ListSeparator)))
}

// fullProgram returns the full binary to run, resolved, and the name to
// run it by: cordon-full beside this executable. It is refused — a
// SandboxUnavailable, since it runs on the host as cordon itself — unless
//
//   - this program is not itself run as cordon-full (a front end installed
//     under that name, or reached by a hand-off, would hand off for ever);
//   - this program's directory is writable by no one but its owner, root
//     or this user (in a sticky directory such as /tmp another user could
//     put a cordon-full, or a link by that name, where there is none);
//   - cordon-full resolves to a regular file in that same directory, with
//     one link, that is not this program: what lies beside the front end
//     the user runs, and nowhere else (a link out into a workspace, or a
//     hard link to a file a sandboxed command could write, is refused);
//   - it, and each directory above it, is owned by root or this user and
//     writable by no one else ([bwrap.TrustedOwner]);
//   - it is an ELF executable whose program interpreter, if it has one,
//     passes the same check (not a script, whose interpreter would be
//     unchecked);
//   - this program is not a mount of its own (a file bind-mounted into
//     another directory, beside another cordon-full), and has one link
//     (handed off, it no longer runs, and another name for it could be
//     written).
//
// It is not refused for lying in a directory that has been a workspace,
// as bwrap is: the front end the user runs lies there too.
func fullProgram() (bin, argv0 string, err error) {
	refuse := func(format string, args ...any) (string, string, error) {
		return "", "", refusal.Errorf(refusal.SandboxUnavailable, format, args...)
	}
	self, err := os.Executable()
	if err == nil {
		self, err = filepath.EvalSymlinks(self)
	}
	if err != nil {
		return refuse("cannot find cordon's own executable, beside which %s is: %v", fullName, err)
	}
	dir := filepath.Dir(self)
	full := filepath.Join(dir, fullName)
	// A front end bind-mounted onto a file in another directory (a
	// container's -v of it into a workspace) shows that directory as its
	// own, where what lies beside it is not what lies beside the install.
	if own, err := mountOfItsOwn(self, dir); err != nil || own {
		return refuse("cordon's front end %s is a mount of its own (a bind mount of the file), or its mount cannot be told (%v): %s beside it need not be the one installed with it; run the front end from where it is installed", self, err, fullName)
	}
	if filepath.Base(os.Args[0]) == fullName {
		return refuse("%s, run as %s, is a front end of cordon (built with the tag cordon_front), not the full binary: build the full one as %s (go build -o %s ./cmd/cordon)", self, fullName, full, full)
	}
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		return refuse("cannot inspect %s: %v", dir, err)
	}
	if st.Mode&0o022 != 0 {
		return refuse("cordon's front end is in %s, which is writable by group or others (mode %#o): another user could put its %s there; install both where only root or you can write", dir, st.Mode&0o7777, fullName)
	}
	if _, err := os.Lstat(full); err != nil {
		return refuse("this cordon is its front end, which runs exec and fs, and hands every other command to the full binary, %s; there is none there (%v): build it beside cordon (go build -o %s ./cmd/cordon)", full, err, full)
	}
	real, err := bwrap.TrustedOwner(full)
	if err != nil {
		return "", "", fmt.Errorf("the full cordon binary: %w", err)
	}
	if err := unix.Stat(real, &st); err != nil {
		return refuse("cannot inspect %s: %v", real, err)
	}
	var me unix.Stat_t
	switch {
	case filepath.Dir(real) != dir:
		return refuse("%s resolves to %s, outside %s: the full binary must lie beside the front end itself", full, real, dir)
	case st.Mode&unix.S_IFMT != unix.S_IFREG:
		return refuse("%s is not a regular file", real)
	case st.Nlink != 1 && userdir.Writable(real):
		return refuse("%s has %d links: another name for it could be written where the front end's directory does not guard it; keep one name for it (copy it where it was linked)", real, st.Nlink)
	case unix.Stat(self, &me) == nil && me.Dev == st.Dev && me.Ino == st.Ino:
		return refuse("%s is this front end itself: build the full binary as %s (go build -o %s ./cmd/cordon)", full, full, full)
	case me.Nlink > 1 && userdir.Writable(self):
		// Handed off, the front end no longer runs: a sandboxed command
		// could write it through another name (ETXTBSY guards it only
		// while it runs).
		return refuse("cordon's front end %s has %d links: another name for it could be written where its directory does not guard it; keep one name for it", self, me.Nlink)
	}
	if err := checkELF(real); err != nil {
		return refuse("%s: %v; build the full binary as %s (go build -o %s ./cmd/cordon)", real, err, full, full)
	}
	return real, full, nil
}

// checkELF refuses a program that is not an ELF executable, or whose
// program interpreter (the dynamic loader of a build with cgo) someone
// other than root and this user could have put there: a script would run
// an interpreter, and whatever that runs, that nothing here checks — one
// in a workspace, which a sandboxed command could rewrite, or the front
// end itself, handing off for ever.
func checkELF(path string) error {
	f, err := elf.Open(path)
	if err != nil {
		return fmt.Errorf("not an ELF executable (%v)", err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type != elf.PT_INTERP {
			continue
		}
		b, err := io.ReadAll(io.LimitReader(p.Open(), 4096))
		if err != nil {
			return fmt.Errorf("cannot read its program interpreter: %v", err)
		}
		interp := strings.TrimRight(string(b), "\x00")
		if _, err := bwrap.TrustedOwner(interp); err != nil {
			return fmt.Errorf("its program interpreter: %w", err)
		}
	}
	return nil
}
