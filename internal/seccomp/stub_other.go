//go:build !linux

package seccomp

import "golang.org/x/net/bpf"

// Program returns an error: seccomp is Linux's.
func Program(Policy) ([]bpf.RawInstruction, error) { return nil, errUnsupported() }

// Apply returns an error: seccomp is Linux's.
func Apply(Policy) error { return errUnsupported() }
