//go:build !linux

package probes

// landlockABI is 0: Landlock is Linux's.
func landlockABI() int { return 0 }
