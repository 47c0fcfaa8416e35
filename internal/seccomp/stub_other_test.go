//go:build !linux

package seccomp

import (
	"errors"
	"testing"
)

// TestUnsupported: without Linux there is no filter, and the error says so.
func TestUnsupported(t *testing.T) {
	if _, err := Program(Policy{}); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("Program: got %v, want an error wrapping errors.ErrUnsupported", err)
	}
	if _, err := Marshal(Policy{}); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("Marshal: got %v, want an error wrapping errors.ErrUnsupported", err)
	}
	if err := Apply(Policy{}); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("Apply: got %v, want an error wrapping errors.ErrUnsupported", err)
	}
	if d := Denied(); d != nil {
		t.Errorf("Denied: %v without a table", d)
	}
	if d := DeniedMetadata(MetadataNone); d != nil {
		t.Errorf("DeniedMetadata: %v without a table", d)
	}
}
