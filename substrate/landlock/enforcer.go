package landlock

import (
	"context"
	"strconv"

	"github.com/cordon-run/cordon/capabilities"
	"github.com/cordon-run/cordon/internal/limits"
	"github.com/cordon-run/cordon/substrate"
)

// Enforcer is the landlock substrate's side of admission: the facts of the
// host (the Landlock ABI among them) and, for each capability, the
// mechanisms that enforce it on a native command. It implements
// [substrate.Enforcer].
type Enforcer struct{}

// Name returns "landlock".
func (Enforcer) Name() string { return Name }

// String describes the enforcer.
func (Enforcer) String() string { return "native tools under Landlock and seccomp" }

// Facts returns the host's facts with the Landlock ABI, or why the
// substrate cannot run here.
func (Enforcer) Facts(context.Context) (substrate.Facts, error) {
	f, err := substrate.HostFacts(Name)
	if err != nil {
		return f, err
	}
	if err := Available(); err != nil {
		return f, err
	}
	f.Values = map[string]string{"landlock.abi": strconv.Itoa(ABI()), "limits": limits.Detect().String()}
	return f, nil
}

// Mechanisms returns how a native command is held to c, or why it cannot
// be.
func (Enforcer) Mechanisms(c capabilities.Capability, set capabilities.Set) ([]substrate.Mechanism, error) {
	return mechanismsOf(c, set)
}
