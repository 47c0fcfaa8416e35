package bwrap

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cordon-run/cordon/internal/testenv"
)

// TestTrustedProgramUnderABind: a workspace that is a directory above the
// program under another path (a bind mount of it: of /usr, of /) is
// refused as the workspace's own path would be, by the whole check and
// by a check that remembers the program passed before.
func TestTrustedProgramUnderABind(t *testing.T) {
	h := testenv.Harness(t)
	dir, err := os.MkdirTemp("/var/tmp", "cordon-trusted-")
	testenv.Require(t, err == nil, "a directory in /var/tmp: %v", err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	top := filepath.Join(dir, "usr")
	bin := filepath.Join(top, "bin", "bwrap")
	os.MkdirAll(filepath.Dir(bin), 0o755)
	os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755)
	defer func(was time.Duration) { settleFor = was }(settleFor)
	settleFor = 0 // remembered at once: the second check of each pair goes by what the first saw
	for _, above := range []string{top, filepath.Dir(bin)} {
		alias := t.TempDir()
		testenv.WithBind(t, above, alias, func() {
			for _, first := range []string{alias, ""} {
				checkedPrograms.Clear()
				trustedProgram(bin, first, h)
				_, err := trustedProgram(bin, alias, h)
				if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "under another path") {
					t.Errorf("the workspace %s, a bind of %s above the program (checked after one with workspace %q): %v; want ErrUnavailable naming the bind",
						alias, above, first, err)
				}
			}
			// The bind's own directories are not the program's.
			other := t.TempDir()
			if _, err := trustedProgram(bin, other, h); err != nil {
				t.Errorf("a workspace beside the bind: %v", err)
			}
		})
	}
}
