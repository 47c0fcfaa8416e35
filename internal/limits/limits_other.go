//go:build !linux

package limits

import (
	"errors"
	"os"
)

// Detect reports no cgroups: outside Linux, limits are not applied.
func Detect() Host {
	return Host{UID: os.Getuid(), Why: map[string]string{"memory": "not Linux", "pids": "not Linux"}}
}

// Group is the limits of one run.
type Group struct{}

var errNotLinux = errors.New("limits: resource limits of native runs need Linux")

// Start fails outside Linux.
func (p Plan) Start(extra int) (*Group, error) { return nil, errNotLinux }

// Add fails outside Linux.
func (g *Group) Add(pid int) error { return errNotLinux }

// AddLeavingAS fails outside Linux.
func (g *Group) AddLeavingAS(pid int) error { return errNotLinux }

// Enter is a no-op without Linux's cgroups.
func (g *Group) Enter() (leave func(), err error) { return func() {}, nil }

func (g *Group) exists() bool { return false }

// MemoryExceeded is false outside Linux.
func (g *Group) MemoryExceeded() bool { return false }

// PidsExceeded is false outside Linux.
func (g *Group) PidsExceeded() bool { return false }

// Sweep does nothing outside Linux.
func (g *Group) Sweep() {}

// Close does nothing outside Linux.
func (g *Group) Close() error { return nil }

func physicalMemory() int64 { return 1 << 30 }

// Self is what the run's first process applies to itself.
type Self struct{}

// Self returns nothing outside Linux.
func (g *Group) Self() Self { return Self{} }

// Join fails outside Linux.
func (s Self) Join() error { return errNotLinux }

// Apply fails outside Linux.
func (s Self) Apply() error { return errNotLinux }

// Notes is empty outside Linux.
func (g *Group) Notes() []string { return nil }
