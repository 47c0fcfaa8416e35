package placeholder

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
	"strings"
)

// locksTable is the kernel's table of locks (a test reads another).
var locksTable = "/proc/locks"

// flocksOf reads the kernel's table of locks and reports whether a
// shared and whether an exclusive flock is held on the file id; false ok
// when the table cannot be read. A line of /proc/locks reads
// "1: FLOCK  ADVISORY  READ 1234 fe:00:246947 0 EOF" (major and minor in
// hex, the inode in decimal); a lock being waited for has "->" after the
// number and is not held.
func flocksOf(id lockID) (shared, exclusive, ok bool) {
	data, err := os.ReadFile(locksTable)
	if err != nil {
		return false, false, false
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 6 || f[1] != "FLOCK" {
			continue
		}
		parts := strings.Split(f[5], ":")
		if len(parts) != 3 {
			continue
		}
		major, err1 := strconv.ParseUint(parts[0], 16, 32)
		minor, err2 := strconv.ParseUint(parts[1], 16, 32)
		ino, err3 := strconv.ParseUint(parts[2], 10, 64)
		if err1 != nil || err2 != nil || err3 != nil || (lockID{uint32(major), uint32(minor), ino}) != id {
			continue
		}
		switch f[3] {
		case "READ":
			shared = true
		case "WRITE":
			exclusive = true
		}
	}
	return shared, exclusive, sc.Err() == nil
}
