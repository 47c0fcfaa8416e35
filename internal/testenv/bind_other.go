//go:build !linux

package testenv

import "testing"

// PrivateMounts skips the test: mount namespaces are Linux's.
func PrivateMounts(t *testing.T) bool {
	t.Skip("mount namespaces are Linux's")
	return false
}
