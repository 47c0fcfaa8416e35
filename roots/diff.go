package roots

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/aymanbagabas/go-udiff"
	"golang.org/x/sys/unix"

	"github.com/cordon-run/cordon/harness"
)

// Change is one path that differs between a root and what it was made
// from.
type Change struct {
	Path   string `json:"path"`
	Change string `json:"change"` // added, modified, deleted, mode (only), type (file became link, ...)
	Old    *Entry `json:"old,omitempty"`
	New    *Entry `json:"new,omitempty"`
	// WriteLater says why the change falls under a protected write-later
	// path, WriteLaterPath which: apply leaves it alone unless it is
	// named.
	WriteLater     string `json:"write_later,omitempty"`
	WriteLaterPath string `json:"write_later_path,omitempty"`
	// Executable: a new executable, a changed one, or a file made
	// executable.
	Executable bool `json:"executable,omitempty"`
	Binary     bool `json:"binary,omitempty"`
	// Conflict says how the origin changed at this path since the root
	// was made: apply refuses the change.
	Conflict string `json:"conflict,omitempty"`
	// Hidden says why the diff does not show the content (binary, too
	// large, unreadable): apply leaves it alone unless it is named.
	Hidden string `json:"hidden,omitempty"`
	// Control: the path, the link's target or the content holds control
	// characters or bidirectional overrides, shown escaped.
	Control bool `json:"control,omitempty"`
	// Mode says what apply does not take of the new mode as it is:
	// setuid, setgid and sticky bits are stripped; a file or directory
	// others may write must be named.
	Mode string `json:"mode,omitempty"`
}

// needsNaming says why apply takes the change only when it is named
// ("" when it does not need to be).
func (c Change) needsNaming() string {
	switch {
	case c.WriteLater != "":
		return c.WriteLater
	case c.Hidden != "":
		return "its content is not shown: " + c.Hidden
	case c.New != nil && c.New.Type != "symlink" && c.New.Mode&0o002 != 0:
		return "others may write it (mode " + fmt.Sprintf("%04o", c.New.Mode&0o777) + ")"
	}
	return ""
}

// Marked reports whether the change is one a reviewer must look at
// twice: a write-later path, an executable, a symlink, content not shown,
// control characters, special mode bits, a conflict.
func (c Change) Marked() bool {
	return c.WriteLater != "" || c.Executable || (c.New != nil && c.New.Type == "symlink") ||
		c.Hidden != "" || c.Control || c.Mode != "" || c.Conflict != ""
}

// Diff is what changed in a root.
type Diff struct {
	Root    *Root    `json:"root"`
	Changes []Change `json:"changes"`
	// Git lists what a root never hands back: changes to the write-later
	// files of its own git directory (configuration, hooks, info), and
	// anything inside a git directory or a harness directory deeper in
	// the tree (a nested repository's configuration runs commands).
	Git []Change `json:"git,omitempty"`
	// OriginChanged lists the origin's paths that changed since the root
	// was made.
	OriginChanged []string `json:"origin_changed,omitempty"`
	// Unified is the unified diff of the changes, git's extended headers
	// included (new, deleted and changed modes; binary files).
	Unified string `json:"unified"`
	// Digest names the changes ("sha256:..." of each path, its change and
	// its new content): apply with it applies exactly what was reviewed.
	Digest string `json:"digest"`

	origin Manifest // the origin as the diff read it, for apply
}

// digestOfChanges names a list of changes by what they make.
func digestOfChanges(cs []Change) string {
	type made struct {
		Path, Change string
		New          *Entry
	}
	var ms []made
	for _, c := range cs {
		ms = append(ms, made{c.Path, c.Change, c.New})
	}
	data, _ := json.Marshal(ms)
	return digestOf(data)
}

// state is a root as it is now, beside what it was made from.
type state struct {
	base, cur, origin0, origin Manifest
	git0, git                  Manifest
	prot                       []*harness.Protected
}

func (rs *Roots) state(r *Root) (*state, error) {
	if r.Missing {
		return nil, fmt.Errorf("the root %s is gone: its directory %s does not exist (cordon root discard %s removes its record)", r.ID, r.Path, r.ID)
	}
	var s state
	var err error
	if s.base, err = rs.store.manifest(&r.Record, baseManifest); err != nil {
		return nil, err
	}
	if s.origin0, err = rs.store.manifest(&r.Record, originManifest); err != nil {
		return nil, err
	}
	if s.git0, err = rs.store.manifest(&r.Record, gitManifest); err != nil {
		return nil, err
	}
	if s.cur, err = scanDir(r.Path, rs.treeSkip); err != nil {
		return nil, fmt.Errorf("cannot read the root %s: %w", r.Path, err)
	}
	if s.git, err = scanGit(r.Path); err != nil {
		return nil, err
	}
	if s.origin, err = scanDir(r.Origin, rs.treeSkip); err != nil {
		return nil, fmt.Errorf("cannot read the origin %s: %w", r.Origin, err)
	}
	for _, dir := range []string{r.Origin, r.Path} {
		p, err := rs.h.Protect(dir)
		if err != nil {
			return nil, err
		}
		s.prot = append(s.prot, p)
	}
	return &s, nil
}

// compare lists what differs from a to b, by path.
func compare(a, b Manifest) []Change {
	ai, bi := a.index(), b.index()
	var out []Change
	for _, e := range b {
		old, ok := ai[e.Path]
		switch {
		case !ok:
			out = append(out, Change{Path: e.Path, Change: "added", New: ptr(e)})
		case old.Type != e.Type:
			out = append(out, Change{Path: e.Path, Change: "type", Old: ptr(old), New: ptr(e)})
		case old.Digest != e.Digest || old.Target != e.Target || old.Size != e.Size:
			out = append(out, Change{Path: e.Path, Change: "modified", Old: ptr(old), New: ptr(e)})
		case old.Mode != e.Mode:
			out = append(out, Change{Path: e.Path, Change: "mode", Old: ptr(old), New: ptr(e)})
		}
	}
	for _, e := range a {
		if _, ok := bi[e.Path]; !ok {
			out = append(out, Change{Path: e.Path, Change: "deleted", Old: ptr(e)})
		}
	}
	slices.SortFunc(out, func(x, y Change) int { return strings.Compare(x.Path, y.Path) })
	return out
}

func ptr(e Entry) *Entry { return &e }

// Diff compares the root with what it was made from, and says for each
// change whether the origin changed there since.
func (rs *Roots) Diff(r *Root) (*Diff, error) {
	s, err := rs.state(r)
	if err != nil {
		return nil, err
	}
	d := &Diff{Root: r, origin: s.origin}
	for _, c := range compare(s.git0, s.git) {
		if !mountPoint(c) {
			d.Git = append(d.Git, c)
		}
	}
	for _, c := range compare(s.base, s.cur) {
		if why := rs.neverApplied(c.Path); why != "" {
			c.WriteLater, c.WriteLaterPath = why, c.Path
			d.Git = append(d.Git, c)
			continue
		}
		d.Changes = append(d.Changes, c)
	}
	for _, c := range compare(s.origin0, s.origin) {
		d.OriginChanged = append(d.OriginChanged, c.Path)
	}
	base, origin := s.base.index(), s.origin.index()
	for i := range d.Changes {
		c := &d.Changes[i]
		for _, p := range s.prot {
			if v, what, why := p.Check(c.Path); v == harness.InWriteLater && c.WriteLater == "" {
				c.WriteLater, c.WriteLaterPath = why, what
			}
		}
		if c.New != nil && c.New.Executable() && (c.Old == nil || !c.Old.Executable() || c.Old.Digest != c.New.Digest) {
			c.Executable = true
		}
		if c.New != nil && c.New.Type != "symlink" {
			if c.New.Mode&0o7000 != 0 {
				c.Mode = fmt.Sprintf("setuid, setgid or sticky bits (%04o) are not applied", c.New.Mode&0o7777)
			}
			if c.New.Mode&0o002 != 0 {
				c.Mode = strings.TrimPrefix(c.Mode+"; others may write it", "; ")
			}
		}
		_, c.Control = visible(c.Path)
		if c.New != nil && c.New.Type == "symlink" {
			if _, ctl := visible(c.New.Target); ctl {
				c.Control = true
			}
		}
		c.Conflict = conflict(c.Path, base, origin)
		if c.Conflict == "" && c.Old != nil && c.Old.Type == "dir" && (c.New == nil || c.New.Type != "dir") {
			c.Conflict = conflictBelow(c.Path, base, origin)
		}
		if c.Conflict == "" && (c.New == nil || c.New.Type != "dir") {
			for _, p := range s.prot[:1] {
				if v, what, why := p.Check(c.Path); v == harness.IsPinned {
					c.Conflict = fmt.Sprintf("%s must stay a directory in the origin (%s)", what, why)
				}
			}
		}
	}
	for i := range d.Git {
		d.Git[i].WriteLater, d.Git[i].WriteLaterPath = "the root's git directory: git reads or runs it", ".git"
	}
	d.Digest = digestOfChanges(d.Changes)
	d.Unified, err = rs.unified(r, d.Changes, base, origin)
	if err != nil {
		return nil, err
	}
	return d, nil
}

// neverApplied says why a path of the root never goes back ("" when it
// may): it is inside a git directory (or is a gitfile), or inside a
// harness directory, at any depth.
func (rs *Roots) neverApplied(p string) string {
	for _, c := range strings.Split(p, "/") {
		if strings.EqualFold(c, ".git") {
			return "inside a git directory, or a gitfile: a nested repository's configuration and hooks run commands"
		}
		if isState(rs.h.State(), c) {
			return "harness state"
		}
	}
	return ""
}

// conflictBelow says how the origin changed below dir since the root was
// made ("" when it did not): removing dir, or turning it into a file,
// would remove that work.
func conflictBelow(dir string, base, origin map[string]Entry) string {
	var changed []string
	for p, o := range origin {
		if strings.HasPrefix(p, dir+"/") {
			if b, ok := base[p]; !ok || !b.same(o) {
				changed = append(changed, p)
			}
		}
	}
	for p := range base {
		if _, ok := origin[p]; !ok && strings.HasPrefix(p, dir+"/") {
			changed = append(changed, p)
		}
	}
	if len(changed) == 0 {
		return ""
	}
	slices.Sort(changed)
	if len(changed) > 5 {
		changed = append(changed[:5], "...")
	}
	return "the origin changed inside it since the root was made: " + strings.Join(changed, ", ")
}

// Visible returns s as a terminal may show it: control characters (but
// tab and newline), DEL, C1 controls, bidirectional overrides and invalid
// UTF-8 escaped as \\xNN or \\uNNNN.
func Visible(s string) string { v, _ := visible(s); return v }

// visible returns s with control characters (but tab and newline),
// DEL, C1 controls, bidirectional overrides and invalid UTF-8 escaped as
// \xNN or \uNNNN, and whether it escaped anything: what a terminal shows
// is then what the bytes are.
func visible(s string) (string, bool) {
	clean := true
	for _, r := range s {
		if unsafeRune(r) {
			clean = false
			break
		}
	}
	if clean && utf8.ValidString(s) {
		return s, false
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n <= 1:
			fmt.Fprintf(&b, "\\x%02x", s[i])
		case unsafeRune(r) && r < 0x100:
			fmt.Fprintf(&b, "\\x%02x", r)
		case unsafeRune(r):
			fmt.Fprintf(&b, "\\u%04x", r)
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String(), true
}

func unsafeRune(r rune) bool {
	switch {
	case r == '\t' || r == '\n':
		return false
	case r < 0x20, r == 0x7f, r >= 0x80 && r < 0xa0:
		return true
	case r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069, r == 0x200e, r == 0x200f, r == 0x061c:
		return true
	}
	return false
}

// mountPoint reports whether a change of the git directory is one of
// the mount points a sandboxed run leaves there for paths git would read
// if they existed: an empty file or directory, or a commondir naming the
// git directory itself (bwrap binds them read-only; they stay).
func mountPoint(c Change) bool {
	if c.Change != "added" || c.New == nil {
		return false
	}
	switch {
	case c.New.Type == "dir":
		return true
	case c.New.Type == "file" && c.New.Size == 0:
		return true
	case c.Path == ".git/commondir" && c.New.Digest == digestOf([]byte(".\n")):
		return true
	}
	return false
}

// conflict says how the origin differs, at path, from what the root was
// made from ("" when it does not): applying there would overwrite it.
func conflict(path string, base, origin map[string]Entry) string {
	b, inBase := base[path]
	o, inOrigin := origin[path]
	switch {
	case !inBase && !inOrigin:
		return ""
	case !inBase:
		return "the origin has a " + o.Type + " there now"
	case !inOrigin:
		return "the origin's " + b.Type + " is gone"
	case !b.same(o):
		if b.Type == "dir" && o.Type == "dir" {
			return "" // a directory's mode: its entries are judged one by one
		}
		return "the origin's " + o.Type + " changed since the root was made"
	}
	return ""
}

// maxShown bounds the files the unified diff shows the content of.
const maxShown = 8 << 20

func (rs *Roots) unified(r *Root, changes []Change, base, origin map[string]Entry) (string, error) {
	rootF, err := os.OpenFile(r.Path, os.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW, 0)
	if err != nil {
		return "", err
	}
	defer rootF.Close()
	originF, err := os.OpenFile(r.Origin, os.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW, 0)
	if err != nil {
		return "", err
	}
	defer originF.Close()
	var b strings.Builder
	for i := range changes {
		c := &changes[i]
		if (c.Old == nil || c.Old.Type == "dir") && (c.New == nil || c.New.Type == "dir") && c.Change != "mode" {
			qp, _ := visible(c.Path)
			fmt.Fprintf(&b, "diff --cordon a/%s b/%s\n", qp, qp)
			if c.New != nil {
				fmt.Fprintf(&b, "new directory mode %06o\n", 0o040000|c.New.Mode)
			} else {
				fmt.Fprintf(&b, "deleted directory mode %06o\n", 0o040000|c.Old.Mode)
			}
			continue
		}
		qp, _ := visible(c.Path)
		fmt.Fprintf(&b, "diff --cordon a/%s b/%s\n", qp, qp)
		switch {
		case c.Old == nil:
			fmt.Fprintf(&b, "new file mode %06o\n", gitMode(*c.New))
		case c.New == nil:
			fmt.Fprintf(&b, "deleted file mode %06o\n", gitMode(*c.Old))
		case gitMode(*c.Old) != gitMode(*c.New):
			fmt.Fprintf(&b, "old mode %06o\nnew mode %06o\n", gitMode(*c.Old), gitMode(*c.New))
		}
		if c.Change == "mode" {
			continue
		}
		var oldText, newText string
		var oldBin, newBin bool
		qp, _ = visible(c.Path)
		oldLabel, newLabel := "a/"+qp, "b/"+qp
		if c.Old == nil {
			oldLabel = "/dev/null"
		} else {
			t, bin, note := side(int(originF.Fd()), c.Path, *c.Old, origin)
			if note != "" {
				fmt.Fprintf(&b, "# %s\n", note)
			}
			oldText, oldBin = t, bin
		}
		if c.New == nil {
			newLabel = "/dev/null"
		} else {
			t, bin, note := side(int(rootF.Fd()), c.Path, *c.New, map[string]Entry{c.Path: *c.New})
			if note != "" {
				fmt.Fprintf(&b, "# %s\n", note)
				c.Hidden = note
			}
			newText, newBin = t, bin
		}
		if newBin && c.Hidden == "" {
			c.Hidden = fmt.Sprintf("binary (a NUL byte in its first 8000 bytes), %d bytes", c.New.Size)
		}
		if oldBin || newBin {
			c.Binary = true
			fmt.Fprintf(&b, "Binary files %s and %s differ\n", oldLabel, newLabel)
			continue
		}
		oldShown, _ := visible(oldText)
		newShown, ctl := visible(newText)
		if ctl {
			c.Control = true
		}
		b.WriteString(udiff.Unified(oldLabel, newLabel, oldShown, newShown))
	}
	return b.String(), nil
}

// gitMode is the mode git's headers print: 100644, 100755, 120000.
func gitMode(e Entry) uint32 {
	switch e.Type {
	case "symlink":
		return 0o120000
	case "dir":
		return 0o040000 | e.Mode
	}
	return 0o100000 | e.Mode
}

// side returns the text of one side of a change: a symlink's target, or
// a file's content read from dir (no link followed) when it is still the
// content the entry records.
func side(dirfd int, path string, want Entry, now map[string]Entry) (string, bool, string) {
	switch want.Type {
	case "symlink":
		return want.Target + "\n", false, ""
	case "file":
	default:
		return "", false, ""
	}
	if cur, ok := now[path]; !ok || cur.Digest != want.Digest {
		return "", false, "the origin's copy changed since the root was made: its old content cannot be shown"
	}
	if want.Size > maxShown {
		return "", false, fmt.Sprintf("%s: %d bytes, too large to show", path, want.Size)
	}
	data, err := readBeneath(dirfd, path, maxShown)
	if err != nil {
		return "", false, fmt.Sprintf("cannot read %s: %v", path, err)
	}
	if digestOf(data) != want.Digest {
		return "", false, path + " changed while it was read"
	}
	return string(data), isBinary(data), ""
}
