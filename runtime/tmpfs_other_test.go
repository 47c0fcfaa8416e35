//go:build !linux

package runtime_test

import "testing"

func mountTmpfs(t *testing.T, dir string) { t.Skip("tmpfs mounts are Linux's") }
