//go:build !linux

package landlock

import (
	"context"

	"github.com/cordon-run/cordon/refusal"
	"github.com/cordon-run/cordon/substrate"
)

// ABI is 0 outside Linux.
func ABI() int { return 0 }

// Available fails outside Linux.
func Available() error {
	return refusal.Errorf(refusal.SandboxUnavailable, "landlock: Landlock is a Linux feature")
}

// Run fails outside Linux.
func Run(context.Context, Spec) (substrate.Outcome, []substrate.Mechanism, error) {
	return substrate.Outcome{}, nil, Available()
}
