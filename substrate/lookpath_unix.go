//go:build unix

package substrate

import (
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// LookPath finds name as a shell would in path, relative to dir: it
// returns the program, or 127 (not found) or 126 (not executable) and why.
func LookPath(name, path, dir string) (string, int, string) {
	check := func(p string) int {
		st, err := os.Stat(p)
		switch {
		case err != nil:
			return 127
		case st.IsDir() || st.Mode().Perm()&0o111 == 0 || unix.Access(p, unix.X_OK) != nil:
			return 126
		}
		return 0
	}
	if strings.Contains(name, "/") {
		p := name
		if !filepath.IsAbs(p) {
			p = filepath.Join(dir, p)
		}
		switch check(p) {
		case 127:
			return "", 127, "no such file or directory"
		case 126:
			return "", 126, "permission denied"
		}
		return p, 0, ""
	}
	code := 127
	for _, d := range filepath.SplitList(path) {
		if !filepath.IsAbs(d) {
			continue
		}
		p := filepath.Join(d, name)
		switch check(p) {
		case 0:
			return p, 0, ""
		case 126:
			code = 126
		}
	}
	if code == 126 {
		return "", 126, "permission denied"
	}
	return "", 127, "command not found"
}
