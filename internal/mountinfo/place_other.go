//go:build !linux

package mountinfo

import "errors"

// A Table is Linux's table of mounts; elsewhere it holds nothing.
type Table struct{}

// Read returns an empty table: places are Linux's.
func Read() (*Table, error) { return &Table{}, nil }

// ErrUnsupported: places are Linux's.
var ErrUnsupported = errors.New("the kernel does not tell a file's mount")

// ErrNoPlace: the directory has no place in its file system.
var ErrNoPlace = errors.New("the directory has no place in its file system")

// Of is not told on this system.
func Of(path string) (Place, error) { return Place{}, ErrUnsupported }

// Of is not told on this system.
func (t *Table) Of(path string) (Place, error) { return Place{}, ErrUnsupported }

// OfFD is not told on this system.
func (t *Table) OfFD(fd int) (Place, error) { return Place{}, ErrUnsupported }

// A Mount is a mount of a table: where it is mounted, and the place of
// its root.
type Mount struct {
	Point string
	Root  Place
}

// Below returns nothing: places are Linux's.
func (t *Table) Below(dir string) []Mount { return nil }

// PlaceOf is not told on this system.
func (t *Table) PlaceOf(path string) (Place, error) { return Place{}, ErrUnsupported }
