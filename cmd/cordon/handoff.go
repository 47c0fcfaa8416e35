package main

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"github.com/cordon-run/cordon/refusal"
	"github.com/cordon-run/cordon/substrate/bwrap"
)

// fullName is the full binary's name: the one a front end hands its
// other commands to, beside its own executable.
const fullName = "cordon-full"

// handOff replaces this process, a front end's, with the full binary run
// on the same command line: same arguments, environment, descriptors and
// process, so that exit codes, signals and standard streams are the full
// binary's own. It returns only when that binary cannot be run: missing,
// refused (a program someone other than root or this user could have put
// there), or a front end itself.
func (e *env) handOff() int {
	bin, err := fullProgram(e)
	if err == nil {
		err = syscall.Exec(bin, append([]string{bin}, e.args...), os.Environ())
		err = refusal.Errorf(refusal.SandboxUnavailable, "cannot run the full cordon binary %s: %v", bin, err)
	}
	return e.fail(err)
}

// fullProgram returns the full binary to run: cordon-full beside this
// executable, resolved, and refused unless only root or this user could
// have put it there ([bwrap.TrustedOwner]).
func fullProgram(e *env) (string, error) {
	self, err := os.Executable()
	if err != nil {
		return "", refusal.Errorf(refusal.SandboxUnavailable, "cannot find cordon's own executable, beside which %s is: %v", fullName, err)
	}
	if self, err = filepath.EvalSymlinks(self); err != nil {
		return "", refusal.Errorf(refusal.SandboxUnavailable, "cannot resolve cordon's own executable: %v", err)
	}
	if filepath.Base(os.Args[0]) == fullName {
		// Run as cordon-full by a front end: a front end was
		// installed under that name, and would hand off to itself.
		return "", refusal.Errorf(refusal.SandboxUnavailable, "%s is a front end of cordon (built with the tag cordon_front), not the full binary: build the full one there (go build -o %s ./cmd/cordon)", self, self)
	}
	bin := filepath.Join(filepath.Dir(self), fullName)
	if _, err := os.Stat(bin); err != nil {
		return "", refusal.Errorf(refusal.SandboxUnavailable, "this cordon is its front end, which runs exec and fs, and hands every other command to the full binary, %s; there is none there (%v): build it beside cordon (go build -o %s ./cmd/cordon)", bin, err, bin)
	}
	real, err := bwrap.TrustedOwner(bin)
	if err != nil {
		return "", fmt.Errorf("the full cordon binary: %w", err)
	}
	return real, nil
}
