//go:build unix

package substrate

import (
	"os"
	"runtime"

	"golang.org/x/sys/unix"
)

// HostFacts returns the facts every substrate shares — OS, architecture,
// kernel release, user — for the substrate name; a substrate adds its own
// to Values.
func HostFacts(name string) (Facts, error) {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return Facts{}, err
	}
	return Facts{
		Substrate: name,
		OS:        runtime.GOOS,
		Arch:      runtime.GOARCH,
		Kernel:    unix.ByteSliceToString(u.Release[:]),
		UID:       os.Geteuid(),
	}, nil
}
