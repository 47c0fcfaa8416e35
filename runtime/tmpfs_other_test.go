//go:build !linux

package runtime_test

import "testing"

func privateMounts(t *testing.T) bool { t.Skip("mount namespaces are Linux's"); return false }

func mountTmpfs(t *testing.T, dir string) { t.Skip("tmpfs mounts are Linux's") }

func exchange(t *testing.T, a, b string) { t.Skip("renameat2 RENAME_EXCHANGE is Linux's") }
