//go:build !linux

package seccomp

import (
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/net/bpf"
)

// Program returns an error: seccomp is Linux's.
func Program(Policy) ([]bpf.RawInstruction, error) { return nil, errUnsupported() }

// Apply returns an error: seccomp is Linux's.
func Apply(Policy) error { return errUnsupported() }

// OCI returns an error: seccomp is Linux's.
func OCI(Policy) (*specs.LinuxSeccomp, error) { return nil, errUnsupported() }
