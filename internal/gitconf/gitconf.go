// Package gitconf reads a repository's git configuration file the way git
// does, without running git, so that cordon can learn before a sandboxed run
// which files the host's git would later read as configuration or run as a
// program: the files the config includes ([Config.Files]), the programs it
// names ([Config.Commands]) and the hooks directory ([Config.HooksPath]).
//
// # Syntax
//
// [Parse] follows git's own parser (config.c, git_parse_source) step by
// step, so that every file git accepts yields the same variables, in the
// same order, with the same values:
//
//   - "[section]", `[section "subsection"]` (the subsection as written,
//     with \" and \\ escapes; a backslash before any other character is
//     dropped) and the deprecated "[section.subsection]" (lower-cased);
//   - variable names of ASCII letters, digits and '-', starting with a
//     letter, case-insensitive; a name alone, without '=', is git's boolean
//     true ([Entry.NoValue]);
//   - values with surrounding whitespace trimmed and inner whitespace kept,
//     double quotes, the escapes \\ \" \n \t \b, a backslash at the end of a
//     line continuing the value, and '#' or ';' comments outside quotes;
//   - CRLF line ends, a variable on the same line as its section header, and
//     a UTF-8 byte order mark at the start of the file.
//
// Keys are git's flat "section.subsection.name", section and name
// lower-cased; [Config.Get] compares keys as git does.
//
// # Includes
//
// [Read] follows include.path and every includeIf.<condition>.path, whatever
// the condition: reading a file git would skip only widens what the caller
// protects. A relative include is resolved against the directory of the
// file that names it, "~/" against [Options.Home]. Included files that do
// not exist are not an error, but they are listed in [Config.Files]: a
// sandboxed tool could create them. Paths are spelled as git would open
// them, never cleaned lexically; the caller resolves and confines them.
//
// # Bounds
//
// A file larger than 1 MiB, more than 131072 entries, more than 100 files
// tried, or includes nested deeper than [Options.MaxDepth] (git's 10 by
// default, at most 16) are refused with [ErrLimit]. Only regular files are
// read: a FIFO or a directory where a config file should be is refused with
// [ErrNotRegular], without blocking.
//
// # Errors
//
// Every error is fail-closed: the caller refuses to run. It is an [*Error]
// naming the operation, the file and, for syntax, the line; its sentinel
// ([ErrSyntax], [ErrUnsupported], [ErrLimit], [ErrNotRegular]) can be
// matched with [errors.Is], and an I/O errno stays reachable. An error in an
// included file is wrapped in one naming the include directive.
//
// # Limitations
//
//   - Whitespace inside an unquoted value is kept verbatim, as git 2.45 and
//     later keep it; earlier git turns each such tab or CR into a space.
//   - A NUL byte anywhere in a file is refused with [ErrUnsupported]; git
//     accepts one in a comment and silently truncates a value or a key
//     at it.
//   - Include paths starting with "~user/" or "%(prefix)/" are refused with
//     [ErrUnsupported]: the account database and git's install prefix are
//     the host's, not the file's. So is "~" when [Options.Home] is empty.
//   - An empty include path, and a valueless include.path, are refused with
//     [ErrSyntax]; git also fails on them when the including file's name has
//     a directory.
//   - More is refused than git refuses: includes git would skip (a false
//     condition) still count towards the depth bound, and the size and
//     count bounds are cordon's.
//   - Error line numbers are those of the offending character; at the end of
//     a file, and for a section header cut short by a newline, git's count
//     can be one higher.
//   - Only the file given to [Read] and its includes are read: the global
//     and system files, config.worktree (extensions.worktreeConfig), a
//     linked worktree's common directory and GIT_CONFIG_* environment
//     variables are the caller's to consider. Files git reads as data rather
//     than configuration (core.excludesFile, core.attributesFile,
//     commit.template, mailmap.file, ...) are not reported.
package gitconf

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/cordon-run/cordon/internal/dirfd"
)

// Bounds on what one [Read] takes in.
const (
	maxFileSize  = 1 << 20 // bytes of one file
	maxEntries   = 1 << 17 // entries of all files together
	maxFiles     = 100     // files tried, present or not
	defaultDepth = 10      // git's MAX_INCLUDE_DEPTH
	maxDepth     = 16      // the largest Options.MaxDepth
)

var (
	// ErrSyntax is a file git would refuse to parse, or an include
	// directive git would refuse to follow.
	ErrSyntax = errors.New("bad config syntax")
	// ErrUnsupported is a construct git accepts that this package refuses
	// rather than guess at (see the Limitations).
	ErrUnsupported = errors.New("unsupported config construct")
	// ErrLimit is a file, an entry count, a file count or an include depth
	// beyond the package's bounds.
	ErrLimit = errors.New("config limit exceeded")
	// ErrNotRegular is a config path that names a directory, FIFO, socket
	// or device.
	ErrNotRegular = errors.New("not a regular file")
)

// Error is a config file that could not be read, parsed or followed.
type Error struct {
	Op   string // "parse", "read" or "include"
	File string // the file, as spelled by the caller or the include
	Line int    // the line in File, 0 when the error is not about one
	Err  error  // a sentinel, a wrapped errno or a nested *Error
}

func (e *Error) Error() string {
	where := e.Op + " git config " + e.File
	if e.Op == "include" {
		where = "follow include in " + e.File
	}
	if e.Line > 0 {
		where += " line " + strconv.Itoa(e.Line)
	}
	return where + ": " + e.Err.Error()
}

func (e *Error) Unwrap() error { return e.Err }

// Entry is one variable of a config file.
type Entry struct {
	// Key is git's "section.subsection.name" ("section.name" without a
	// subsection), with section and name lower-cased and the subsection as
	// written (lower-cased in the "[section.subsection]" form).
	Key string
	// Value is the value after unquoting and unescaping; "" for NoValue.
	Value string
	// NoValue reports a name standing alone, without '=': git's boolean
	// true, distinct from an empty value.
	NoValue bool
	File    string // the file, as given to Parse or Read
	Line    int    // the line the name starts on
}

// Options configures [Read].
type Options struct {
	// Home replaces a leading "~" of an include path; empty refuses one.
	Home string
	// MaxDepth bounds how deeply includes nest: 0 means git's 10, and at
	// most 16 is accepted.
	MaxDepth int
}

// Config is what [Read] found.
type Config struct {
	// Entries are the variables of all files in the order git sees them:
	// an included file's entries follow the directive that includes it.
	Entries []Entry
	// Files are every file read or tried, once each, in the order first
	// tried; the first is the path given to Read. Missing files are listed.
	Files []string
}

// Parse parses one config file's bytes; name is the file's name for
// entries and messages. It follows no includes.
func Parse(name string, data []byte) ([]Entry, error) {
	if len(data) > maxFileSize {
		return nil, &Error{Op: "parse", File: name, Err: fmt.Errorf("%w: larger than %d bytes", ErrLimit, maxFileSize)}
	}
	if i := bytes.IndexByte(data, 0); i >= 0 {
		line := 1 + bytes.Count(data[:i], []byte{'\n'})
		return nil, &Error{Op: "parse", File: name, Line: line, Err: fmt.Errorf("%w: NUL byte", ErrUnsupported)}
	}
	p := &parser{name: name, data: data, line: 1}
	if err := p.parse(); err != nil {
		return nil, err
	}
	return p.entries, nil
}

// Read reads the config file at path and, recursively, the files it
// includes. A missing file at path is not an error: the Config has no
// entries and lists path in Files.
func Read(path string, opt Options) (*Config, error) {
	depth := opt.MaxDepth
	if depth == 0 {
		depth = defaultDepth
	}
	if depth < 0 || depth > maxDepth {
		return nil, &Error{Op: "read", File: path, Err: fmt.Errorf("%w: include depth %d is outside 1..%d", ErrLimit, opt.MaxDepth, maxDepth)}
	}
	r := &reader{home: opt.Home, maxDepth: depth, seen: map[string]bool{}}
	data, ok, err := r.load(path)
	if err != nil {
		return nil, err
	}
	if ok {
		if err := r.file(path, data, 0); err != nil {
			return nil, err
		}
	}
	return &r.cfg, nil
}

// reader is one Read: the config it builds and the bounds it keeps.
type reader struct {
	home     string
	maxDepth int
	cfg      Config
	seen     map[string]bool // in cfg.Files
	tries    int
}

// load reads the file at path, reporting ok false when it does not exist.
func (r *reader) load(path string) (data []byte, ok bool, err error) {
	if r.tries >= maxFiles {
		return nil, false, &Error{Op: "read", File: path, Err: fmt.Errorf("%w: more than %d files", ErrLimit, maxFiles)}
	}
	r.tries++
	if !r.seen[path] {
		r.seen[path] = true
		r.cfg.Files = append(r.cfg.Files, path)
	}
	// O_NONBLOCK: a FIFO planted at the path must not block the open.
	data, err = dirfd.ReadSmall(unix.AT_FDCWD, path, 0, maxFileSize+1)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		return nil, false, nil // git's access_error_is_ok
	}
	if errors.Is(err, dirfd.ErrNotRegular) {
		var t fs.FileMode
		if fi, err := os.Stat(path); err == nil {
			t = fi.Mode().Type()
		}
		return nil, false, &Error{Op: "read", File: path, Err: fmt.Errorf("%w (%s)", ErrNotRegular, t)}
	}
	if err != nil {
		return nil, false, &Error{Op: "read", File: path, Err: err}
	}
	if len(data) > maxFileSize {
		return nil, false, &Error{Op: "read", File: path, Err: fmt.Errorf("%w: larger than %d bytes", ErrLimit, maxFileSize)}
	}
	return data, true, nil
}

// file parses one file's data, appends its entries and follows its
// includes; depth is how many includes led to it.
func (r *reader) file(path string, data []byte, depth int) error {
	entries, err := Parse(path, data)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if len(r.cfg.Entries) >= maxEntries {
			return &Error{Op: "parse", File: e.File, Line: e.Line, Err: fmt.Errorf("%w: more than %d entries", ErrLimit, maxEntries)}
		}
		r.cfg.Entries = append(r.cfg.Entries, e)
		if !isInclude(e.Key) {
			continue
		}
		target, err := r.includePath(e)
		if err != nil {
			return &Error{Op: "include", File: e.File, Line: e.Line, Err: err}
		}
		data, ok, err := r.load(target)
		if err != nil {
			return &Error{Op: "include", File: e.File, Line: e.Line, Err: err}
		}
		if !ok {
			continue
		}
		if depth+1 > r.maxDepth {
			return &Error{Op: "include", File: e.File, Line: e.Line,
				Err: fmt.Errorf("%w: includes nested deeper than %d at %s (circular includes?)", ErrLimit, r.maxDepth, target)}
		}
		if err := r.file(target, data, depth+1); err != nil {
			return &Error{Op: "include", File: e.File, Line: e.Line, Err: err}
		}
	}
	return nil
}

// isInclude reports whether git follows key: include.path, or
// includeIf.<condition>.path with any condition.
func isInclude(key string) bool {
	section, _, hasSub, name, ok := splitKey(key)
	if !ok || name != "path" {
		return false
	}
	return section == "include" && !hasSub || section == "includeif" && hasSub
}

// includePath is the path git opens for the include directive e
// (interpolate_path and handle_path_include).
func (r *reader) includePath(e Entry) (string, error) {
	p := e.Value
	switch {
	case e.NoValue:
		return "", fmt.Errorf("%w: %s has no value", ErrSyntax, e.Key)
	case p == "":
		return "", fmt.Errorf("%w: %s is empty", ErrSyntax, e.Key)
	case strings.HasPrefix(p, "%(prefix)/"):
		return "", fmt.Errorf("%w: include path %q names git's install prefix", ErrUnsupported, p)
	case p[0] == '~':
		user, rest, _ := strings.Cut(p[1:], "/")
		if user != "" {
			return "", fmt.Errorf("%w: include path %q names another user's home", ErrUnsupported, p)
		}
		if r.home == "" {
			return "", fmt.Errorf("%w: include path %q needs a home directory, and none was given", ErrUnsupported, p)
		}
		p = r.home
		if len(e.Value) > 1 {
			p += "/" + rest
		}
	}
	if p[0] == '/' {
		return p, nil
	}
	// Relative to the including file's directory, spelled as git does.
	if i := strings.LastIndexByte(e.File, '/'); i >= 0 {
		return e.File[:i+1] + p, nil
	}
	return p, nil
}

// Get returns the last value of key, comparing keys as git does: section
// and name case-insensitive, the subsection exact. A valueless entry
// returns "" and true.
func (c *Config) Get(key string) (string, bool) {
	key, ok := canonicalKey(key)
	if !ok {
		return "", false
	}
	for i := len(c.Entries) - 1; i >= 0; i-- {
		if c.Entries[i].Key == key {
			return c.Entries[i].Value, true
		}
	}
	return "", false
}

// HooksPath returns the last core.hooksPath, as written: git expands a
// leading "~/" and resolves a relative path against the directory hooks run
// in (the top of the worktree). It is not one of [Config.Commands]: it names
// the directory whose files git runs as hooks. A valueless core.hooksPath,
// which git refuses, returns "" and true.
func (c *Config) HooksPath() (string, bool) {
	return c.Get("core.hooksPath")
}

// Commands returns, in order, every entry whose value git may run as a
// command or program (a shell command line, a program path, or a name git
// runs as one), with all values of multi-valued keys. "*" is any
// subsection, or any name where it stands last:
//
//   - core.editor, core.pager, core.sshCommand, core.askPass, core.gitProxy,
//     core.alternateRefsCommand, sequence.editor, interactive.diffFilter;
//   - core.fsmonitor and pager.* unless the value is a boolean;
//   - diff.external, diff.*.command, diff.*.textconv, difftool.*.cmd,
//     difftool.*.path, mergetool.*.cmd, mergetool.*.path, merge.*.driver;
//   - filter.*.clean, filter.*.smudge, filter.*.process;
//   - gpg.program, gpg.*.program, gpg.ssh.defaultKeyCommand;
//   - credential.helper, credential.*.helper;
//   - alias.* and alias.*.command starting with '!' (a shell command) or
//     '-' (options to git, such as -c, which can set any of these);
//   - submodule.*.update starting with '!';
//   - hook.*.command, gc.recentObjectsHook, uploadpack.packObjectsHook (git
//     ignores the last in a repository's own config);
//   - sendemail.*cmd and sendemail.*.*cmd (sendmailCmd, toCmd, ccCmd,
//     headerCmd), sendemail.smtpServer and sendemail.*.smtpServer when an
//     absolute path;
//   - web.browser, help.browser, instaweb.browser, instaweb.httpd,
//     browser.*.cmd, browser.*.path, man.viewer, man.*.cmd, man.*.path,
//     guitool.*.cmd, imap.tunnel, tar.*.command, trailer.*.command,
//     trailer.*.cmd;
//   - remote.*.uploadpack, remote.*.receivepack, remote.*.vcs (git runs
//     git-remote-<vcs>);
//   - remote.*.url and remote.*.pushurl of the "<helper>::<address>" form
//     (git runs git-remote-<helper>; "ext::" runs a command line), and
//     url.*.insteadOf and url.*.pushInsteadOf whose subsection has that
//     form (the entry's value is rewritten into it).
//
// Not commands: core.hooksPath ([Config.HooksPath]), remote.*.proxy and
// http.proxy (proxy URLs), ssh.variant. Valueless and empty entries name no
// program and are left out.
func (c *Config) Commands() []Entry {
	var out []Entry
	for _, e := range c.Entries {
		if e.NoValue || e.Value == "" {
			continue
		}
		section, sub, hasSub, name, ok := splitKey(e.Key)
		if ok && isCommand(section, sub, hasSub, name, e.Value) {
			out = append(out, e)
		}
	}
	return out
}

// commandKeys are the patterns of Commands: "section.name" has no
// subsection, "section.*.name" any subsection ("section.sub.name" that
// one); a name "*" is any name and "*suffix" any name ending so. when, if
// set, decides by subsection and value.
var commandKeys = []struct {
	pattern string
	when    func(sub, value string) bool
}{
	{"core.editor", nil},
	{"core.pager", nil},
	{"core.sshcommand", nil},
	{"core.askpass", nil},
	{"core.gitproxy", nil},
	{"core.alternaterefscommand", nil},
	{"core.fsmonitor", notBool},
	{"sequence.editor", nil},
	{"interactive.difffilter", nil},
	{"pager.*", notBool},
	{"diff.external", nil},
	{"diff.*.command", nil},
	{"diff.*.textconv", nil},
	{"difftool.*.cmd", nil},
	{"difftool.*.path", nil},
	{"mergetool.*.cmd", nil},
	{"mergetool.*.path", nil},
	{"merge.*.driver", nil},
	{"filter.*.clean", nil},
	{"filter.*.smudge", nil},
	{"filter.*.process", nil},
	{"gpg.program", nil},
	{"gpg.*.program", nil},
	{"gpg.ssh.defaultkeycommand", nil},
	{"credential.helper", nil},
	{"credential.*.helper", nil},
	{"alias.*", shellOrOptions},
	{"alias.*.command", shellOrOptions},
	{"submodule.*.update", shell},
	{"hook.*.command", nil},
	{"gc.recentobjectshook", nil},
	{"uploadpack.packobjectshook", nil},
	{"sendemail.*cmd", nil},
	{"sendemail.*.*cmd", nil},
	{"sendemail.smtpserver", absolute},
	{"sendemail.*.smtpserver", absolute},
	{"web.browser", nil},
	{"help.browser", nil},
	{"instaweb.browser", nil},
	{"instaweb.httpd", nil},
	{"browser.*.cmd", nil},
	{"browser.*.path", nil},
	{"man.viewer", nil},
	{"man.*.cmd", nil},
	{"man.*.path", nil},
	{"guitool.*.cmd", nil},
	{"imap.tunnel", nil},
	{"tar.*.command", nil},
	{"trailer.*.command", nil},
	{"trailer.*.cmd", nil},
	{"remote.*.uploadpack", nil},
	{"remote.*.receivepack", nil},
	{"remote.*.vcs", nil},
	{"remote.*.url", helperURL},
	{"remote.*.pushurl", helperURL},
	{"url.*.insteadof", helperBase},
	{"url.*.pushinsteadof", helperBase},
}

func isCommand(section, sub string, hasSub bool, name, value string) bool {
	for _, k := range commandKeys {
		ks, rest, _ := strings.Cut(k.pattern, ".")
		ksub, kname, kHasSub := strings.Cut(rest, ".")
		if !kHasSub {
			kname = rest
		}
		if ks != section || kHasSub != hasSub || kHasSub && ksub != "*" && ksub != sub {
			continue
		}
		if suffix, wild := strings.CutPrefix(kname, "*"); wild && !strings.HasSuffix(name, suffix) || !wild && kname != name {
			continue
		}
		if k.when == nil || k.when(sub, value) {
			return true
		}
	}
	return false
}

// notBool reports a value git does not read as a boolean. It errs towards
// "not": git also takes "0x1" or "1k" as true, which this reports.
func notBool(_, v string) bool {
	switch asciiLower(v) {
	case "", "true", "false", "yes", "no", "on", "off":
		return false
	}
	digits := strings.TrimPrefix(v, "-")
	return digits == "" || strings.Trim(digits, "0123456789") != ""
}

func shell(_, v string) bool { return strings.HasPrefix(strings.TrimLeft(v, " \t\n"), "!") }

func shellOrOptions(sub, v string) bool {
	return shell(sub, v) || strings.HasPrefix(strings.TrimLeft(v, " \t\n"), "-")
}

func absolute(_, v string) bool { return strings.HasPrefix(v, "/") }

func helperURL(_, v string) bool { return isHelperURL(v) }

func helperBase(sub, _ string) bool { return isHelperURL(sub) }

// isHelperURL reports a URL git hands to a remote helper: a scheme of
// letters, digits, '+', '-' and '.', starting with a letter, then "::"
// (transport_get).
func isHelperURL(u string) bool {
	i := 0
	for i < len(u) && (isAlpha(u[i]) || i > 0 && (isDigit(u[i]) || u[i] == '+' || u[i] == '-' || u[i] == '.')) {
		i++
	}
	return i > 0 && strings.HasPrefix(u[i:], "::")
}

// splitKey splits a flat key as git's parse_config_key does: the section
// runs to the first dot, the name from the last, the subsection between.
func splitKey(key string) (section, sub string, hasSub bool, name string, ok bool) {
	first := strings.IndexByte(key, '.')
	if first < 0 {
		return "", "", false, "", false
	}
	last := strings.LastIndexByte(key, '.')
	if last > first {
		sub, hasSub = key[first+1:last], true
	}
	return key[:first], sub, hasSub, key[last+1:], true
}

// canonicalKey lower-cases a key's section and name (git_config_parse_key).
func canonicalKey(key string) (string, bool) {
	first := strings.IndexByte(key, '.')
	last := strings.LastIndexByte(key, '.')
	if first < 0 || last == len(key)-1 {
		return "", false
	}
	return asciiLower(key[:first]) + key[first:last] + asciiLower(key[last:]), true
}

// parser is git_parse_source over one file's bytes.
type parser struct {
	name    string
	data    []byte
	pos     int
	eof     bool
	line    int  // of the last character returned
	afterNL bool // the last character returned ended a line
	entries []Entry
}

// next returns the next character as git's get_next_char does: CRLF reads
// as '\n', and the end of the data as '\n' with eof set.
func (p *parser) next() byte {
	if p.afterNL {
		p.line++
		p.afterNL = false
	}
	if p.pos >= len(p.data) {
		p.eof = true
		return '\n'
	}
	c := p.data[p.pos]
	p.pos++
	if c == '\r' && p.pos < len(p.data) && p.data[p.pos] == '\n' {
		c = '\n'
		p.pos++
	}
	p.afterNL = c == '\n'
	return c
}

func (p *parser) errorf(format string, args ...any) error {
	return &Error{Op: "parse", File: p.name, Line: p.line, Err: fmt.Errorf("%w: "+format, append([]any{ErrSyntax}, args...)...)}
}

var utf8BOM = []byte{0xef, 0xbb, 0xbf}

func (p *parser) parse() error {
	if bytes.HasPrefix(p.data, utf8BOM) {
		p.pos = len(utf8BOM)
	}
	var section string // the last header, as git's var buffer holds it
	comment := false
	for {
		c := p.next()
		switch {
		case c == '\n':
			if p.eof {
				return nil
			}
			comment = false
		case comment || isSpace(c):
		case c == '#' || c == ';':
			comment = true
		case c == '[':
			var err error
			if section, err = p.header(); err != nil {
				return err
			}
		case isAlpha(c):
			if err := p.variable(c, section); err != nil {
				return err
			}
		default:
			return p.errorf("unexpected %q", c)
		}
	}
}

// header reads a section header after its '[' (get_base_var,
// get_extended_base_var) and returns the section as the key's stem.
func (p *parser) header() (string, error) {
	var b []byte
	for {
		c := p.next()
		switch {
		case p.eof:
			return "", p.errorf("unterminated section header")
		case c == ']':
			if len(b) == 0 {
				return "", p.errorf("empty section name")
			}
			return string(b), nil
		case isSpace(c):
			return p.subsection(b, c)
		case !isKeyChar(c) && c != '.':
			return "", p.errorf("unexpected %q in section name", c)
		}
		b = append(b, asciiLowerByte(c))
	}
}

// subsection reads `"subsection"]` after the whitespace c that ended the
// section name.
func (p *parser) subsection(b []byte, c byte) (string, error) {
	for isSpace(c) {
		if c == '\n' {
			return "", p.errorf("section header cut by a newline")
		}
		c = p.next()
	}
	if c != '"' {
		return "", p.errorf("unexpected %q in section header, want a quoted subsection", c)
	}
	b = append(b, '.')
	for {
		c := p.next()
		if c == '\\' {
			c = p.next()
		} else if c == '"' {
			break
		}
		if c == '\n' {
			return "", p.errorf("section header cut by a newline")
		}
		b = append(b, c)
	}
	if c := p.next(); c != ']' {
		return "", p.errorf("unexpected %q after subsection, want ']'", c)
	}
	return string(b), nil
}

// variable reads a variable whose name starts with c (get_value).
func (p *parser) variable(c byte, section string) error {
	if len(p.entries) >= maxEntries {
		return &Error{Op: "parse", File: p.name, Line: p.line, Err: fmt.Errorf("%w: more than %d entries", ErrLimit, maxEntries)}
	}
	e := Entry{File: p.name, Line: p.line}
	name := []byte{asciiLowerByte(c)}
	for {
		c = p.next()
		if p.eof || !isKeyChar(c) {
			break
		}
		name = append(name, asciiLowerByte(c))
	}
	for c == ' ' || c == '\t' {
		c = p.next()
	}
	switch {
	case c == '\n':
		e.NoValue = true
	case c != '=':
		return p.errorf("unexpected %q after variable name, want '=' or the end of the line", c)
	default:
		v, err := p.value()
		if err != nil {
			return err
		}
		e.Value = v
	}
	e.Key = string(name)
	if section != "" {
		e.Key = section + "." + e.Key // git's var buffer: a file may set a variable before any header
	}
	p.entries = append(p.entries, e)
	return nil
}

// value reads a value after its '=' up to the end of its line (parse_value).
func (p *parser) value() (string, error) {
	var v []byte
	quote, comment := false, false
	trim := 0 // when >0, where trailing whitespace starts
	for {
		c := p.next()
		if c == '\n' {
			if quote {
				return "", p.errorf("unterminated quoted value")
			}
			if trim > 0 {
				v = v[:trim]
			}
			return string(v), nil
		}
		if comment {
			continue
		}
		if isSpace(c) && !quote {
			if trim == 0 {
				trim = len(v)
			}
			if len(v) > 0 {
				v = append(v, c)
			}
			continue
		}
		if !quote && (c == ';' || c == '#') {
			comment = true
			continue
		}
		trim = 0
		switch c {
		case '\\':
			switch c = p.next(); c {
			case '\n':
				continue // a continued line
			case 't':
				c = '\t'
			case 'b':
				c = '\b'
			case 'n':
				c = '\n'
			case '\\', '"':
			default:
				return "", p.errorf("unknown escape \\%c", c)
			}
		case '"':
			quote = !quote
			continue
		}
		v = append(v, c)
	}
}

// Character classes of git's sane_ctype: ASCII only, whatever the locale.

func isSpace(c byte) bool   { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }
func isAlpha(c byte) bool   { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }
func isDigit(c byte) bool   { return '0' <= c && c <= '9' }
func isKeyChar(c byte) bool { return isAlpha(c) || isDigit(c) || c == '-' }
func asciiLowerByte(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

func asciiLower(s string) string {
	b := []byte(s)
	for i, c := range b {
		b[i] = asciiLowerByte(c)
	}
	return string(b)
}
