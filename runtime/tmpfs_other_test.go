//go:build !linux

package runtime_test

import "testing"

func mountTmpfs(t *testing.T, dir string) { t.Skip("tmpfs mounts are Linux's") }

func exchange(t *testing.T, a, b string) { t.Skip("renameat2 RENAME_EXCHANGE is Linux's") }
