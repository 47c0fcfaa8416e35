package admission

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// SandboxPath is the PATH native tools run with and their programs are
// looked up on: system folders only, no folder a tool or the workspace can
// write.
const SandboxPath = "/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin"

// writablePlaces are host folders a program may not come from: places
// that a tool, a user or a sandbox writes, or that the sandbox replaces.
var writablePlaces = []string{"/tmp", "/var/tmp", "/dev", "/proc", "/sys", "/run", "/home", "/root", "/var/home", "/mnt", "/media"}

// HostPrograms looks up a native command's program on the host.
type HostPrograms struct {
	Workspace string // canonical workspace: programs inside it are refused
	Path      string // folders to search; empty means SandboxPath
}

// Lookup resolves name (a bare name searched on the path, or an absolute
// path) to a read-only host program: a regular, executable file that,
// with every symlink on the way resolved, lies outside the workspace and
// outside writable places, and is not writable by everyone.
func (h HostPrograms) Lookup(name string) (string, error) {
	if name == "" {
		return "", fmt.Errorf("the command is empty")
	}
	var candidates []string
	if strings.HasPrefix(name, "/") {
		candidates = []string{filepath.Clean(name)}
	} else {
		dirs := h.Path
		if dirs == "" {
			dirs = SandboxPath
		}
		for _, dir := range filepath.SplitList(dirs) {
			candidates = append(candidates, filepath.Join(dir, name))
		}
	}
	var lastErr error
	for _, c := range candidates {
		err := h.check(c)
		if err == nil {
			return c, nil
		}
		lastErr = err
	}
	if !strings.HasPrefix(name, "/") && os.IsNotExist(lastErr) {
		return "", fmt.Errorf("%q is not a program on the sandbox's PATH (%s)", shorten(name), SandboxPath)
	}
	if os.IsNotExist(lastErr) {
		return "", fmt.Errorf("%q does not exist", shorten(name))
	}
	return "", lastErr
}

func (h HostPrograms) check(p string) error {
	for _, place := range h.forbidden() {
		if within(p, place) {
			return fmt.Errorf("%s is in %s, which a tool or user can write; tools run only system programs or their own files", p, place)
		}
	}
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		return err
	}
	for _, place := range h.forbidden() {
		if within(real, place) {
			return fmt.Errorf("%s leads to %s, in %s, which a tool or user can write; tools run only system programs or their own files", p, real, place)
		}
	}
	fi, err := os.Stat(real)
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file", p)
	}
	if fi.Mode().Perm()&0o111 == 0 {
		return fmt.Errorf("%s is not executable", p)
	}
	if fi.Mode().Perm()&0o002 != 0 {
		return fmt.Errorf("%s is writable by everyone", p)
	}
	for dir := filepath.Dir(real); ; dir = filepath.Dir(dir) {
		di, err := os.Stat(dir)
		if err != nil {
			return err
		}
		if di.Mode().Perm()&0o002 != 0 && di.Mode()&os.ModeSticky == 0 {
			return fmt.Errorf("%s is in %s, which everyone can write", p, dir)
		}
		if dir == "/" {
			break
		}
	}
	return nil
}

func (h HostPrograms) forbidden() []string {
	places := append([]string(nil), writablePlaces...)
	if h.Workspace != "" {
		places = append(places, h.Workspace)
	}
	for _, v := range []string{os.Getenv("TMPDIR"), os.Getenv("HOME")} {
		if v != "" && filepath.IsAbs(v) && filepath.Clean(v) != "/" {
			places = append(places, filepath.Clean(v))
		}
	}
	return places
}
