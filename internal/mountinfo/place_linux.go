package mountinfo

import (
	"bufio"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Of returns the place of the directory at path (absolute, canonical: no
// symbolic link on the way): the mount the path leads into, by its ID
// (statx), looked up in the calling thread's table of mounts, and the rest of
// the path below that mount's point, from the mount's root. False where
// it cannot be told (no mount ID from the kernel, an unreadable table, a
// mount's root that is no path: deleted, or of another namespace's file
// system).
func Of(path string) (Place, bool) {
	var st unix.Statx_t
	if unix.Statx(unix.AT_FDCWD, path, unix.AT_SYMLINK_NOFOLLOW, unix.STATX_MNT_ID, &st) != nil || st.Mask&unix.STATX_MNT_ID == 0 {
		return Place{}, false
	}
	f, err := os.Open("/proc/thread-self/mountinfo")
	if err != nil {
		return Place{}, false
	}
	defer f.Close()
	id := strconv.FormatUint(st.Mnt_id, 10) + " "
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, id) {
			continue
		}
		dev, root, point := Field(line, 2), Unescape(Field(line, 3)), Unescape(Field(line, 4))
		rest, ok := below(path, point)
		if !ok || !strings.HasPrefix(root, "/") || strings.HasSuffix(root, "//deleted") {
			return Place{}, false
		}
		return Place{Dev: dev, Path: filepath.Join(root, rest)}, true
	}
	return Place{}, false
}

// below returns the part of path below the mount point point ("" at it).
func below(path, point string) (string, bool) {
	if path == point {
		return "", true
	}
	if rest, ok := strings.CutPrefix(path, strings.TrimSuffix(point, "/")+"/"); ok {
		return rest, true
	}
	return "", false
}
