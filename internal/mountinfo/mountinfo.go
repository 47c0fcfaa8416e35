// Package mountinfo reads the kernel's table of mounts
// (/proc/PID/mountinfo): its fields, its escaped paths, and where a
// directory lies in its file system whichever mount leads to it.
package mountinfo

import "strings"

// Field returns field n (from 0) of a mountinfo line, or "". The kernel
// separates the fields by one space and escapes a space, tab, newline or
// backslash in a path (\040, \011, \012, \134), but no other white space:
// a path may hold a \v, \r or a no-break space, which strings.Fields
// would take for a separator.
func Field(line string, n int) string {
	for range n {
		i := strings.IndexByte(line, ' ')
		if i < 0 {
			return ""
		}
		line = line[i+1:]
	}
	if i := strings.IndexAny(line, " \n"); i >= 0 {
		line = line[:i]
	}
	return line
}

// Unescape undoes the octal escapes of a mountinfo path (\040 for a
// space, \011, \012, \134).
func Unescape(p string) string {
	if !strings.Contains(p, "\\") {
		return p
	}
	var b strings.Builder
	for i := 0; i < len(p); i++ {
		if p[i] == '\\' && i+3 < len(p) && isOctal(p[i+1]) && isOctal(p[i+2]) && isOctal(p[i+3]) {
			b.WriteByte((p[i+1]-'0')<<6 | (p[i+2]-'0')<<3 | (p[i+3] - '0'))
			i += 3
			continue
		}
		b.WriteByte(p[i])
	}
	return b.String()
}

func isOctal(c byte) bool { return c >= '0' && c <= '7' }

// A Place is where a directory lies in its file system, whichever mount
// leads to it: the file system (the device number the table gives its
// mounts, the same for a bind mount of any of its directories, in every
// mount namespace) and the directory's path from the file system's root.
// Two paths to one directory — a bind mount elsewhere, a devcontainer's
// /workspaces/x — have one place; a directory below another lies below
// it in place too, even where no path of this mount namespace leads from
// one to the other (a bind mount of the subdirectory alone).
type Place struct {
	Dev  string // "MAJOR:MINOR"
	Path string // from the file system's root, absolute, clean
}

// String is the place as one word, "MAJOR:MINOR/PATH", which [Parse]
// reads.
func (p Place) String() string { return p.Dev + p.Path }

// Parse reads a place written by [Place.String].
func Parse(s string) (Place, bool) {
	i := strings.IndexByte(s, '/')
	if i <= 0 || strings.Count(s[:i], ":") != 1 {
		return Place{}, false
	}
	return Place{Dev: s[:i], Path: s[i:]}, true
}

// Within reports whether p lies strictly below dir.
func (p Place) Within(dir Place) bool {
	if p.Dev == "" || p.Dev != dir.Dev || p.Path == dir.Path {
		return false
	}
	return strings.HasPrefix(p.Path, strings.TrimSuffix(dir.Path, "/")+"/")
}
