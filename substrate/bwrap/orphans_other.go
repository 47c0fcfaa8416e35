//go:build !linux

package bwrap

// sweepOrphans has nothing to do where bwrap does not run.
func sweepOrphans(ids []string) {}

func sweepOrphansSoon(ids []string) {}
