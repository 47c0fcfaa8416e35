package gitconf_test

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/cordon-run/cordon/internal/gitconf"
	"github.com/cordon-run/cordon/internal/testenv"
)

// syntaxCases are valid files and the entries git reads from them, one
// "LINE KEY=VALUE" (or "LINE KEY" for a name without '=') per entry. Every
// case is also replayed against git itself by TestParseMatchesGit.
var syntaxCases = []struct {
	name string
	in   string
	want []string
}{
	{"empty", "", nil},
	{"comments and blank lines", "# one\n; two\n\n   \t\n", nil},
	{"section and variable", "[core]\n\tbare = false\n", []string{"2 core.bare=false"}},
	{"section and name are case-insensitive", "[CoRe]\n\tBaRe = true\n", []string{"2 core.bare=true"}},
	{"subsection is case-sensitive", "[Remote \"Origin\"]\n\tURL = x\n", []string{"2 remote.Origin.url=x"}},
	{"subsection escapes", "[a \"q\\\"b\\\\c\\d\\n\"]\n\tx = 1\n", []string{`2 a.q"b\cdn.x=1`}},
	{"subsection keeps dots and spaces", "[url \"https://a.b/c d\"]\n\tinsteadOf = e\n", []string{"2 url.https://a.b/c d.insteadof=e"}},
	{"subsection after several blanks", "[a \t \"S\"]\nx=1\n", []string{"2 a.S.x=1"}},
	{"legacy subsection is lower-cased", "[Branch.Main]\n\tRemote = origin\n", []string{"2 branch.main.remote=origin"}},
	{"dotted section with subsection", "[a.B \"C\"]\nx=1\n", []string{"2 a.b.C.x=1"}},
	{"subsection without section", "[ \"x\"]\ny=1\n", []string{"2 .x.y=1"}},
	{"dot section", "[.]\ny=1\n", []string{"2 ..y=1"}},
	{"variable before any section", "foo = bar\n[a]x=1\n", []string{"1 foo=bar", "2 a.x=1"}},
	{"variable on the header line", "[a] x = 1\n[b]y\n", []string{"1 a.x=1", "2 b.y"}},
	{"name alone is true", "[a]\n\tflag\n\tother\t\n", []string{"2 a.flag", "3 a.other"}},
	{"empty value is not true", "[a]\n\tflag =\n\tq = \"\"\n", []string{"2 a.flag=", "3 a.q="}},
	{"names with digits and dashes", "[a]\nx-1 = 2\nY2-z=3\n", []string{"2 a.x-1=2", "3 a.y2-z=3"}},
	{"blanks around =", "[a]\n  x \t=\t  y\n", []string{"2 a.x=y"}},
	{"inner whitespace kept", "[a]\nx =   a  \t b   \n", []string{"2 a.x=a  \t b"}},
	{"value keeps =", "[a]\nx = a=b==c\n", []string{"2 a.x=a=b==c"}},
	{"quotes keep whitespace", "[a]\nx = \" a \"\n", []string{"2 a.x= a "}},
	{"quotes inside a value", "[a]\nx = a\" b \"c\n", []string{"2 a.x=a b c"}},
	{"empty quotes before whitespace", "[a]\nx = \"\" b\n", []string{"2 a.x=b"}},
	{"quoted then unquoted blanks", "[a]\n\tx\t=\t\"a\" \"\" b\n", []string{"2 a.x=a  b"}},
	{"trailing blanks after quotes kept", "[a]\nx = a \"  \"\n", []string{"2 a.x=a   "}},
	{"blanks after closing quote trimmed", "[a]\nx = \"a\"   \n", []string{"2 a.x=a"}},
	{"escapes", "[a]\nx = 1\\t2\\n3\\\\4\\\"5\\b6\n", []string{"2 a.x=1\t2\n3\\4\"5\b6"}},
	{"escapes in quotes", "[a]\nx = \"\\t\\\"\\\\\"\n", []string{"2 a.x=\t\"\\"}},
	{"escaped tab is not trimmed", "[a]\nx = a\\t\n", []string{"2 a.x=a\t"}},
	{"comments", "[a] # c\nx = 1 # c\ny = 2;c\nz = \"3#;\" ; c\nw = 4# \"c\n", []string{"2 a.x=1", "3 a.y=2", "4 a.z=3#;", "5 a.w=4"}},
	{"comment right after =", "[a]\nx = # c\n", []string{"2 a.x="}},
	{"continuation", "[a]\nx = a\\\n  b\ny = 1\n", []string{"2 a.x=a  b", "4 a.y=1"}},
	{"continuation in quotes", "[a]\nx = \"a\\\nb\"\n", []string{"2 a.x=ab"}},
	{"a backslash in a comment continues nothing", "[a]\nx = 1 # c \\\ny = 2\n", []string{"2 a.x=1", "3 a.y=2"}},
	{"backslash at end of file", "[a]\nx = a\\", []string{"2 a.x=a"}},
	{"no newline at end", "[a]\nx = 1", []string{"2 a.x=1"}},
	{"CRLF", "[a]\r\nx = 1\r\ny = \"2 \"\r\nz = a\\\r\nb\r\n", []string{"2 a.x=1", "3 a.y=2 ", "4 a.z=ab"}},
	{"lone CR is whitespace", "[a]\nx = a\rb\r\n", []string{"2 a.x=a\rb"}},
	{"BOM", "\xef\xbb\xbf[a]\nx = 1\n", []string{"2 a.x=1"}},
	{"UTF-8 values and subsections", "[a \"é\"]\nx = ü\n", []string{"2 a.é.x=ü"}},
	{"repeated keys in order", "[a]\nx=1\n[A]\nX=2\n", []string{"2 a.x=1", "4 a.x=2"}},
	{"section change", "[a]\nx=1\n[b \"c\"]\nx=2\n[a]\ny=3\n", []string{"2 a.x=1", "4 b.c.x=2", "6 a.y=3"}},
}

// before245 is what git before 2.45 reads from the syntaxCases it reads
// differently: it turned each unquoted whitespace character inside a value
// into a space.
var before245 = map[string][]string{
	"inner whitespace kept": {"2 a.x=a    b"},
	"lone CR is whitespace": {"2 a.x=a b"},
}

// render is entries in the form of syntaxCases.
func render(entries []gitconf.Entry) []string {
	var out []string
	for _, e := range entries {
		s := strconv.Itoa(e.Line) + " " + e.Key
		if !e.NoValue {
			s += "=" + e.Value
		}
		out = append(out, s)
	}
	return out
}

func TestParse(t *testing.T) {
	for _, tc := range syntaxCases {
		t.Run(tc.name, func(t *testing.T) {
			entries, err := gitconf.Parse("config", []byte(tc.in))
			if err != nil {
				t.Fatalf("Parse(%q): %v", tc.in, err)
			}
			if got := render(entries); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Parse(%q)\n got %q\nwant %q", tc.in, got, tc.want)
			}
			for _, e := range entries {
				if e.File != "config" {
					t.Errorf("entry %s: File = %q", e.Key, e.File)
				}
			}
		})
	}
}

// malformedCases are files git refuses (unless gitAccepts), with the line
// Parse names; gitLine is git's own count where it differs.
var malformedCases = []struct {
	name       string
	in         string
	line       int
	gitLine    int
	sentinel   error
	gitAccepts bool
}{
	{"comment after a name alone", "[a]\nflag # c\n", 2, 0, gitconf.ErrSyntax, false},
	{"unterminated quote", "[a]\nx = \"abc\n", 2, 0, gitconf.ErrSyntax, false},
	{"unterminated quote at end of file", "[a]\nx = \"abc", 2, 0, gitconf.ErrSyntax, false},
	{"unterminated quote over a continuation", "[a]\nx = \"a\\\nb\ny = 1\n", 3, 0, gitconf.ErrSyntax, false},
	{"unknown escape", "[a]\n\n  x = \\q\n", 3, 0, gitconf.ErrSyntax, false},
	{"octal escape", "[a]\nx = \"\\101\"\n", 2, 0, gitconf.ErrSyntax, false},
	{"escaped blank", "[a]\nx = a\\ b\n", 2, 0, gitconf.ErrSyntax, false},
	{"name starts with a digit", "[a]\nx=1\n\n9=2\n", 4, 0, gitconf.ErrSyntax, false},
	{"underscore in a name", "[a]\n x_y = 1\n", 2, 0, gitconf.ErrSyntax, false},
	{"two words", "[a]\nx=1\n[b]\n  y z\n", 4, 0, gitconf.ErrSyntax, false},
	{"no name", "[a]\n= 1\n", 2, 0, gitconf.ErrSyntax, false},
	{"unterminated header at end of file", "[core", 1, 2, gitconf.ErrSyntax, false},
	{"unterminated header", "[core\nx=1\n", 1, 0, gitconf.ErrSyntax, false},
	{"empty header", "[]\nx=1\n", 1, 0, gitconf.ErrSyntax, false},
	{"unquoted subsection", "[a b]\nx=1\n", 1, 0, gitconf.ErrSyntax, false},
	{"underscore in a section", "[a_b]\nx=1\n", 1, 0, gitconf.ErrSyntax, false},
	{"colon in a legacy subsection", "[includeIf.gitdir:x]\npath=y\n", 1, 0, gitconf.ErrSyntax, false},
	{"newline in a subsection", "[a \"b\nc\"]\n", 1, 0, gitconf.ErrSyntax, false},
	{"escaped newline in a subsection", "[a \"b\\\nc\"]\n", 1, 0, gitconf.ErrSyntax, false},
	{"blank before the closing bracket", "[a \"b\" ]\nx=1\n", 1, 0, gitconf.ErrSyntax, false},
	{"subsection cut by the line end", "[a \"b\"\nx=1\n", 1, 2, gitconf.ErrSyntax, false},
	{"junk after a header", "[a]]\n", 1, 0, gitconf.ErrSyntax, false},
	{"partial BOM", "\xef\xbb[a]\n", 1, 0, gitconf.ErrSyntax, false},
	{"BOM twice", "\xef\xbb\xbf\xef\xbb\xbf[a]\n", 1, 0, gitconf.ErrSyntax, false},
	{"BOM after the start", "\n\xef\xbb\xbf[a]\n", 2, 0, gitconf.ErrSyntax, false},
	{"non-ASCII name", "[a]\nü = 1\n", 2, 0, gitconf.ErrSyntax, false},
	{"CR before =", "[a]\nx\r= 1\n", 2, 0, gitconf.ErrSyntax, false},
	{"error after good lines", "[a]\nx = 1\ny = 2\n[b\n", 4, 0, gitconf.ErrSyntax, false},
	{"NUL in a comment", "[a]\n# \x00\nx=1\n", 2, 0, gitconf.ErrUnsupported, true},
	{"NUL in a value", "[a]\nx=a\x00b\n", 2, 0, gitconf.ErrUnsupported, true},
}

func TestParseMalformed(t *testing.T) {
	for _, tc := range malformedCases {
		t.Run(tc.name, func(t *testing.T) {
			entries, err := gitconf.Parse("/w/.git/config", []byte(tc.in))
			if err == nil {
				t.Fatalf("Parse(%q) = %q, want an error", tc.in, render(entries))
			}
			if entries != nil {
				t.Errorf("Parse(%q) returned entries with its error", tc.in)
			}
			if !errors.Is(err, tc.sentinel) {
				t.Errorf("Parse(%q) = %v, want %v", tc.in, err, tc.sentinel)
			}
			var ce *gitconf.Error
			if !errors.As(err, &ce) || ce.File != "/w/.git/config" || ce.Line != tc.line {
				t.Fatalf("Parse(%q) = %#v, want an *Error for /w/.git/config line %d", tc.in, err, tc.line)
			}
			if want := fmt.Sprintf("parse git config /w/.git/config line %d: ", tc.line); !strings.HasPrefix(err.Error(), want) {
				t.Errorf("message %q does not start with %q", err, want)
			}
		})
	}
}

func TestParseTooLarge(t *testing.T) {
	data := bytes.Repeat([]byte("# padding\n"), 1<<20/10+1)
	_, err := gitconf.Parse("big", data)
	if !errors.Is(err, gitconf.ErrLimit) {
		t.Fatalf("Parse of %d bytes = %v, want ErrLimit", len(data), err)
	}
	if _, err := gitconf.Parse("big", data[:1<<20]); err != nil {
		t.Fatalf("Parse of exactly 1 MiB: %v", err)
	}
}

func TestParseTooManyEntries(t *testing.T) {
	data := append([]byte("[a]\n"), bytes.Repeat([]byte("x\n"), 1<<17+1)...)
	_, err := gitconf.Parse("many", data)
	var ce *gitconf.Error
	if !errors.Is(err, gitconf.ErrLimit) || !errors.As(err, &ce) || ce.Line != 1<<17+2 {
		t.Fatalf("Parse of %d entries = %v, want ErrLimit at line %d", 1<<17+1, err, 1<<17+2)
	}
}

func TestGet(t *testing.T) {
	entries, err := gitconf.Parse("config", []byte(`
[core]
	hooksPath = first
	HOOKSPATH = second
	bare
[remote "Origin"]
	url = upper
[remote "origin"]
	url = lower
[Branch.Main]
	remote = legacy
`))
	if err != nil {
		t.Fatal(err)
	}
	c := &gitconf.Config{Entries: entries}
	for _, tc := range []struct {
		key, value string
		ok         bool
	}{
		{"core.hookspath", "second", true},
		{"CORE.HooksPath", "second", true},
		{"core.bare", "", true},
		{"remote.Origin.URL", "upper", true},
		{"REMOTE.origin.url", "lower", true},
		{"remote.ORIGIN.url", "", false},
		{"branch.main.remote", "legacy", true},
		{"branch.Main.remote", "", false}, // git lower-cases legacy subsections when reading
		{"core.missing", "", false},
		{"core", "", false},
		{"core.", "", false},
		{"", "", false},
	} {
		v, ok := c.Get(tc.key)
		if v != tc.value || ok != tc.ok {
			t.Errorf("Get(%q) = %q, %v; want %q, %v", tc.key, v, ok, tc.value, tc.ok)
		}
	}
	if v, ok := c.HooksPath(); v != "second" || !ok {
		t.Errorf("HooksPath() = %q, %v; want second, true", v, ok)
	}
	if _, ok := (&gitconf.Config{}).HooksPath(); ok {
		t.Errorf("HooksPath() of an empty config is set")
	}
}

func TestCommands(t *testing.T) {
	in := `
[core]
	editor = vim
	pager = less -R
	sshCommand = ssh -i key
	askPass = /bin/ask
	gitProxy = proxy for example.com
	alternateRefsCommand = ./refs
	hooksPath = .githooks
	fsmonitor = ./watch
	fsmonitor = true
	fsmonitor = 0
	bare = false
[sequence]
	editor = ed
[interactive]
	diffFilter = ./filter
[diff]
	external = ./ext
	tool = meld
[diff "pdf"]
	textconv = ./pdf2txt
	command = ./pdfdiff
	xfuncname = ^x
[difftool "meld"]
	cmd = meld "$LOCAL"
	path = /opt/meld
[mergetool "x"]
	cmd = ./x
	path = ./xp
	trustExitCode = true
[merge "ours"]
	driver = true
	name = keep ours
[filter "lfs"]
	clean = git-lfs clean -- %f
	smudge = git-lfs smudge -- %f
	process = git-lfs filter-process
	required = true
[gpg]
	program = ./gpg
	format = ssh
[gpg "ssh"]
	program = ./ssh-keygen
	defaultKeyCommand = ./key
	allowedSignersFile = signers
[credential]
	helper = store
	helper =
[credential "https://example.com"]
	helper = !./cred
	username = me
[alias]
	st = status
	x = !./run
	lp = -c core.pager=./p log
[alias "sub name"]
	command = !sh
[submodule "m"]
	update = !./update
	url = ../m
[submodule "n"]
	update = rebase
[hook "lint"]
	command = ./lint
	event = pre-commit
[gc]
	recentObjectsHook = ./recent
	auto = 0
[uploadpack]
	packObjectsHook = ./pack
[pager]
	log = ./mypager
	diff = false
	status
[sendemail]
	sendmailCmd = ./sendmail
	smtpServer = /usr/bin/msmtp
	smtpServer = smtp.example.com
	toCmd = ./to
[sendemail "work"]
	ccCmd = ./cc
	smtpServer = /opt/send
	from = me
[web]
	browser = firefox
[browser "ff"]
	cmd = ./ff
	path = ./ffp
[man]
	viewer = woman
[man "w"]
	cmd = ./w
[remote "origin"]
	url = https://example.com/r
	url = ext::sh -c ./evil
	pushurl = hg::https://example.com/r
	uploadpack = ./up
	receivepack = ./rp
	vcs = foo
	proxy = http://proxy
	fetch = +refs/heads/*:refs/remotes/origin/*
[url "ext::./helper "]
	insteadOf = https://example.com/
[url "https://mirror/"]
	insteadOf = https://example.com/
[tar "tgz"]
	command = gzip -cn
[trailer "sign"]
	command = ./sign
	key = Signed-off-by
[imap]
	tunnel = ./tunnel
[guitool "t"]
	cmd = ./gt
[instaweb]
	httpd = ./httpd
[ssh]
	variant = ssh
[http]
	proxy = http://proxy
`
	entries, err := gitconf.Parse("config", []byte(in))
	if err != nil {
		t.Fatal(err)
	}
	c := &gitconf.Config{Entries: entries}
	var got []string
	for _, e := range c.Commands() {
		got = append(got, e.Key+"="+e.Value)
	}
	want := []string{
		"core.editor=vim",
		"core.pager=less -R",
		"core.sshcommand=ssh -i key",
		"core.askpass=/bin/ask",
		"core.gitproxy=proxy for example.com",
		"core.alternaterefscommand=./refs",
		"core.fsmonitor=./watch",
		"sequence.editor=ed",
		"interactive.difffilter=./filter",
		"diff.external=./ext",
		"diff.pdf.textconv=./pdf2txt",
		"diff.pdf.command=./pdfdiff",
		"difftool.meld.cmd=meld $LOCAL",
		"difftool.meld.path=/opt/meld",
		"mergetool.x.cmd=./x",
		"mergetool.x.path=./xp",
		"merge.ours.driver=true",
		"filter.lfs.clean=git-lfs clean -- %f",
		"filter.lfs.smudge=git-lfs smudge -- %f",
		"filter.lfs.process=git-lfs filter-process",
		"gpg.program=./gpg",
		"gpg.ssh.program=./ssh-keygen",
		"gpg.ssh.defaultkeycommand=./key",
		"credential.helper=store",
		"credential.https://example.com.helper=!./cred",
		"alias.x=!./run",
		"alias.lp=-c core.pager=./p log",
		"alias.sub name.command=!sh",
		"submodule.m.update=!./update",
		"hook.lint.command=./lint",
		"gc.recentobjectshook=./recent",
		"uploadpack.packobjectshook=./pack",
		"pager.log=./mypager",
		"sendemail.sendmailcmd=./sendmail",
		"sendemail.smtpserver=/usr/bin/msmtp",
		"sendemail.tocmd=./to",
		"sendemail.work.cccmd=./cc",
		"sendemail.work.smtpserver=/opt/send",
		"web.browser=firefox",
		"browser.ff.cmd=./ff",
		"browser.ff.path=./ffp",
		"man.viewer=woman",
		"man.w.cmd=./w",
		"remote.origin.url=ext::sh -c ./evil",
		"remote.origin.pushurl=hg::https://example.com/r",
		"remote.origin.uploadpack=./up",
		"remote.origin.receivepack=./rp",
		"remote.origin.vcs=foo",
		"url.ext::./helper .insteadof=https://example.com/",
		"tar.tgz.command=gzip -cn",
		"trailer.sign.command=./sign",
		"imap.tunnel=./tunnel",
		"guitool.t.cmd=./gt",
		"instaweb.httpd=./httpd",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Commands():\n got %q\nwant %q", got, want)
	}
	if v, ok := c.HooksPath(); v != ".githooks" || !ok {
		t.Errorf("HooksPath() = %q, %v", v, ok)
	}
}

// layouts are trees of files replayed against Read. In a tree, "$T" is the
// test's directory; a content "=> target" makes the name a symlink, a name
// "d/" a directory and "f|" a FIFO. Read starts at ws/.git/config with Options.Home $T/home.
var layouts = []struct {
	name     string
	tree     map[string]string
	maxDepth int
	entries  []string // want Entries, "FILE:LINE KEY=VALUE", FILE relative to $T
	files    []string // want Files, relative to $T
	sentinel error    // want an error matching it
	errAt    string   // the innermost error's "FILE:LINE" (LINE 0: about no line)
	git      bool     // git --includes must agree (the same entries, or an error too)
}{
	{
		name:  "missing config",
		tree:  map[string]string{"ws/.git/": ""},
		files: []string{"ws/.git/config"},
		git:   true,
	},
	{
		name: "relative, nested and missing includes",
		tree: map[string]string{
			"ws/.git/config":   "[core]\n\tbare = false\n[include]\n\tpath = sub/a\n\tpath = missing\n[user]\n\tname = me\n",
			"ws/.git/sub/a":    "[a]\nx = 1\n[include]\npath = b\npath = ../../../outside\n",
			"ws/.git/sub/b":    "[b]\nx = 2\n",
			"outside":          "[o]\nx = 3\n",
			"ws/.git/sub/file": "",
		},
		entries: []string{
			"ws/.git/config:2 core.bare=false",
			"ws/.git/config:4 include.path=sub/a",
			"ws/.git/sub/a:2 a.x=1",
			"ws/.git/sub/a:4 include.path=b",
			"ws/.git/sub/b:2 b.x=2",
			"ws/.git/sub/a:5 include.path=../../../outside",
			"ws/.git/sub/../../../outside:2 o.x=3",
			"ws/.git/config:5 include.path=missing",
			"ws/.git/config:7 user.name=me",
		},
		files: []string{"ws/.git/config", "ws/.git/sub/a", "ws/.git/sub/b", "ws/.git/sub/../../../outside", "ws/.git/missing"},
		git:   true,
	},
	{
		name: "absolute and home includes",
		tree: map[string]string{
			"ws/.git/config":  "[include]\n\tpath = $T/abs\n\tpath = ~/.extra\n\tpath = ~/none\n",
			"abs":             "[abs]\nx=1\n",
			"home/.extra":     "[home]\nx=2\n",
			"home/.gitconfig": "[never]\nread=1\n",
		},
		entries: []string{
			"ws/.git/config:2 include.path=$T/abs",
			"abs:2 abs.x=1",
			"ws/.git/config:3 include.path=~/.extra",
			"home/.extra:2 home.x=2",
			"ws/.git/config:4 include.path=~/none",
		},
		files: []string{"ws/.git/config", "abs", "home/.extra", "home/none"},
		git:   true,
	},
	{
		name: "every includeIf is followed",
		tree: map[string]string{
			"ws/.git/config": "[includeIf \"gitdir:/nowhere/\"]\n\tpath = a\n[includeIf \"onbranch:x\"]\n\tpath = b\n[includeIf \"unknown:y\"]\n\tpath = c\n" +
				"[includeif \"hasconfig:remote.*.url:z\"]\n\tpath = d\n[includeIf]\n\tpath = never\n[include \"x\"]\n\tpath = never\n",
			"ws/.git/a": "[a]\nx=1\n",
			"ws/.git/b": "[b]\nx=1\n",
		},
		entries: []string{
			"ws/.git/config:2 includeif.gitdir:/nowhere/.path=a",
			"ws/.git/a:2 a.x=1",
			"ws/.git/config:4 includeif.onbranch:x.path=b",
			"ws/.git/b:2 b.x=1",
			"ws/.git/config:6 includeif.unknown:y.path=c",
			"ws/.git/config:8 includeif.hasconfig:remote.*.url:z.path=d",
			"ws/.git/config:10 includeif.path=never",
			"ws/.git/config:12 include.x.path=never",
		},
		files: []string{"ws/.git/config", "ws/.git/a", "ws/.git/b", "ws/.git/c", "ws/.git/d"},
	},
	{
		name: "a file listed once",
		tree: map[string]string{
			"ws/.git/config": "[include]\npath = x\npath = x\npath = y\npath = y\n",
			"ws/.git/y":      "[y]\nv=1\n",
		},
		entries: []string{
			"ws/.git/config:2 include.path=x",
			"ws/.git/config:3 include.path=x",
			"ws/.git/config:4 include.path=y",
			"ws/.git/y:2 y.v=1",
			"ws/.git/config:5 include.path=y",
			"ws/.git/y:2 y.v=1",
		},
		files: []string{"ws/.git/config", "ws/.git/x", "ws/.git/y"},
		git:   true,
	},
	{
		name: "not a directory is missing",
		tree: map[string]string{
			"ws/.git/config": "[include]\npath = file/x\n",
			"ws/.git/file":   "",
		},
		entries: []string{"ws/.git/config:2 include.path=file/x"},
		files:   []string{"ws/.git/config", "ws/.git/file/x"},
		git:     true,
	},
	{
		name: "symlinked include is read, and listed as spelled",
		tree: map[string]string{
			"ws/.git/config":   "[include]\npath = link\npath = dangling\n",
			"ws/.git/link":     "=> $T/elsewhere/real",
			"elsewhere/real":   "[real]\nx=1\n",
			"ws/.git/dangling": "=> $T/nothing",
		},
		entries: []string{
			"ws/.git/config:2 include.path=link",
			"ws/.git/link:2 real.x=1",
			"ws/.git/config:3 include.path=dangling",
		},
		files: []string{"ws/.git/config", "ws/.git/link", "ws/.git/dangling"},
		git:   true,
	},
	{
		name: "cycle",
		tree: map[string]string{
			"ws/.git/config": "[include]\npath = a\n",
			"ws/.git/a":      "[include]\npath = b\n",
			"ws/.git/b":      "[include]\npath = a\n",
		},
		files:    []string{"ws/.git/config", "ws/.git/a", "ws/.git/b"},
		sentinel: gitconf.ErrLimit,
		errAt:    "ws/.git/b:2",
		git:      true,
	},
	{
		name:     "self include",
		tree:     map[string]string{"ws/.git/config": "[x]\ny=1\n[include]\npath = config\n"},
		files:    []string{"ws/.git/config"},
		sentinel: gitconf.ErrLimit,
		errAt:    "ws/.git/config:4",
		git:      true,
	},
	{
		name:     "depth bound",
		tree:     chain(3),
		maxDepth: 2,
		files:    []string{"ws/.git/config", "ws/.git/1", "ws/.git/2", "ws/.git/3"},
		sentinel: gitconf.ErrLimit,
		errAt:    "ws/.git/2:1",
	},
	{
		name:    "git's depth is allowed",
		tree:    chain(10),
		entries: chainEntries(10),
		files:   chainFiles(10),
		git:     true,
	},
	{
		name:     "one deeper than git's depth",
		tree:     chain(11),
		files:    chainFiles(11),
		sentinel: gitconf.ErrLimit,
		errAt:    "ws/.git/10:1",
		git:      true,
	},
	{
		name: "syntax error in an included file",
		tree: map[string]string{
			"ws/.git/config": "[include]\npath = a\n",
			"ws/.git/a":      "[a]\nx = \"open\n",
		},
		files:    []string{"ws/.git/config", "ws/.git/a"},
		sentinel: gitconf.ErrSyntax,
		errAt:    "ws/.git/a:2",
		git:      true,
	},
	{
		name:     "syntax error in the config",
		tree:     map[string]string{"ws/.git/config": "[a]\nx = 1\n[b\n"},
		files:    []string{"ws/.git/config"},
		sentinel: gitconf.ErrSyntax,
		errAt:    "ws/.git/config:3",
		git:      true,
	},
	{
		name:     "include without a value",
		tree:     map[string]string{"ws/.git/config": "[include]\n\tpath\n"},
		files:    []string{"ws/.git/config"},
		sentinel: gitconf.ErrSyntax,
		errAt:    "ws/.git/config:2",
		git:      true,
	},
	{
		name:     "empty include",
		tree:     map[string]string{"ws/.git/config": "[include]\n\tpath = \"\"\n"},
		files:    []string{"ws/.git/config"},
		sentinel: gitconf.ErrSyntax,
		errAt:    "ws/.git/config:2",
		git:      true,
	},
	{
		name:     "another user's home",
		tree:     map[string]string{"ws/.git/config": "[include]\n\tpath = ~root/x\n"},
		files:    []string{"ws/.git/config"},
		sentinel: gitconf.ErrUnsupported,
		errAt:    "ws/.git/config:2",
	},
	{
		name:     "git's prefix",
		tree:     map[string]string{"ws/.git/config": "[include]\n\tpath = %(prefix)/etc/x\n"},
		files:    []string{"ws/.git/config"},
		sentinel: gitconf.ErrUnsupported,
		errAt:    "ws/.git/config:2",
	},
	{
		name:     "included directory",
		tree:     map[string]string{"ws/.git/config": "[include]\n\tpath = d\n", "ws/.git/d/": ""},
		files:    []string{"ws/.git/config", "ws/.git/d"},
		sentinel: gitconf.ErrNotRegular,
		errAt:    "ws/.git/d:0",
		git:      true,
	},
	{
		name:     "included FIFO does not block",
		tree:     map[string]string{"ws/.git/config": "[include]\n\tpath = fifo\n", "ws/.git/fifo|": ""},
		files:    []string{"ws/.git/config", "ws/.git/fifo"},
		sentinel: gitconf.ErrNotRegular,
		errAt:    "ws/.git/fifo:0",
	},
	{
		name:     "config is a FIFO",
		tree:     map[string]string{"ws/.git/config|": ""},
		files:    []string{"ws/.git/config"},
		sentinel: gitconf.ErrNotRegular,
		errAt:    "ws/.git/config:0",
	},
	{
		name: "included file too large",
		tree: map[string]string{
			"ws/.git/config": "[include]\n\tpath = big\n",
			"ws/.git/big":    strings.Repeat("#", 1<<20+1),
		},
		files:    []string{"ws/.git/config", "ws/.git/big"},
		sentinel: gitconf.ErrLimit,
		errAt:    "ws/.git/big:0",
	},
	{
		name:     "too many files",
		tree:     map[string]string{"ws/.git/config": "[include]\n" + strings.Repeat("path = nothing\n", 100)},
		files:    []string{"ws/.git/config", "ws/.git/nothing"},
		sentinel: gitconf.ErrLimit,
		errAt:    "ws/.git/nothing:0",
	},
}

// chain is a config that includes 1, which includes 2, ... up to n.
func chain(n int) map[string]string {
	files := map[string]string{"ws/.git/config": "[include]\npath = 1\n"}
	for i := 1; i <= n; i++ {
		files[fmt.Sprintf("ws/.git/%d", i)] = fmt.Sprintf("[include]path = %d\n[level]n = %d\n", i+1, i)
	}
	files[fmt.Sprintf("ws/.git/%d", n)] = fmt.Sprintf("[level]\nn = %d\n", n)
	return files
}

func chainEntries(n int) []string {
	want := []string{"ws/.git/config:2 include.path=1"}
	for i := 1; i < n; i++ {
		want = append(want, fmt.Sprintf("ws/.git/%d:1 include.path=%d", i, i+1))
	}
	want = append(want, fmt.Sprintf("ws/.git/%d:2 level.n=%d", n, n))
	for i := n - 1; i >= 1; i-- {
		want = append(want, fmt.Sprintf("ws/.git/%d:2 level.n=%d", i, i))
	}
	return want
}

func chainFiles(n int) []string {
	files := []string{"ws/.git/config"}
	for i := 1; i <= n; i++ {
		files = append(files, fmt.Sprintf("ws/.git/%d", i))
	}
	return files
}

// makeTree writes files under a fresh directory and returns it.
func makeTree(t *testing.T, files map[string]string) string {
	t.Helper()
	top, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for name, content := range files {
		content = strings.ReplaceAll(content, "$T", top)
		p := filepath.Join(top, strings.TrimRight(name, "/|"))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		switch {
		case strings.HasSuffix(name, "/"):
			err = os.MkdirAll(p, 0o755)
		case strings.HasSuffix(name, "|"):
			err = syscall.Mkfifo(p, 0o644)
		case strings.HasPrefix(content, "=> "):
			err = os.Symlink(strings.TrimPrefix(content, "=> "), p)
		default:
			err = os.WriteFile(p, []byte(content), 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return top
}

// innermost is the *Error nearest the cause.
func innermost(err error) *gitconf.Error {
	var last *gitconf.Error
	for err != nil {
		if ce, ok := err.(*gitconf.Error); ok {
			last = ce
		}
		err = errors.Unwrap(err)
	}
	return last
}

func TestRead(t *testing.T) {
	for _, tc := range layouts {
		t.Run(tc.name, func(t *testing.T) {
			top := makeTree(t, tc.tree)
			rel := func(p string) string { return strings.TrimPrefix(p, top+"/") }
			c, err := gitconf.Read(filepath.Join(top, "ws/.git/config"), gitconf.Options{Home: filepath.Join(top, "home"), MaxDepth: tc.maxDepth})
			if tc.sentinel != nil {
				if !errors.Is(err, tc.sentinel) {
					t.Fatalf("Read = %v, want %v", err, tc.sentinel)
				}
				if c != nil {
					t.Errorf("Read returned a config with its error")
				}
				in := innermost(err)
				if got := fmt.Sprintf("%s:%d", rel(in.File), in.Line); got != tc.errAt {
					t.Errorf("Read error at %s, want %s: %v", got, tc.errAt, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Read: %v", err)
			}
			var got []string
			for _, e := range c.Entries {
				v := strings.ReplaceAll(e.Value, top, "$T")
				got = append(got, fmt.Sprintf("%s:%d %s=%s", rel(e.File), e.Line, e.Key, v))
			}
			if !reflect.DeepEqual(got, tc.entries) {
				t.Errorf("Entries:\n got %q\nwant %q", got, tc.entries)
			}
			var files []string
			for _, f := range c.Files {
				files = append(files, rel(f))
			}
			if !reflect.DeepEqual(files, tc.files) {
				t.Errorf("Files:\n got %q\nwant %q", files, tc.files)
			}
		})
	}
}

// TestReadErrorsNameTheInclude checks the message chain of an error in an
// included file: each include directive on the way, then the cause.
func TestReadErrorsNameTheInclude(t *testing.T) {
	top := makeTree(t, map[string]string{
		"ws/.git/config": "[include]\npath = a\n",
		"ws/.git/a":      "[ok]\nx=1\n[include]\n\tpath = b\n",
		"ws/.git/b":      "[b]\n  bad_name = 1\n",
	})
	_, err := gitconf.Read(filepath.Join(top, "ws/.git/config"), gitconf.Options{})
	want := fmt.Sprintf("follow include in %[1]s/ws/.git/config line 2: follow include in %[1]s/ws/.git/a line 4: parse git config %[1]s/ws/.git/b line 2: bad config syntax: ", top)
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("Read = %v\nwant a message starting %q", err, want)
	}
}

func TestReadOptions(t *testing.T) {
	top := makeTree(t, map[string]string{"ws/.git/config": "[include]\npath = ~/x\n"})
	path := filepath.Join(top, "ws/.git/config")
	for _, depth := range []int{-1, 17} {
		if _, err := gitconf.Read(path, gitconf.Options{MaxDepth: depth}); !errors.Is(err, gitconf.ErrLimit) {
			t.Errorf("Read with MaxDepth %d = %v, want ErrLimit", depth, err)
		}
	}
	if _, err := gitconf.Read(path, gitconf.Options{}); !errors.Is(err, gitconf.ErrUnsupported) {
		t.Errorf("Read of a ~/ include without Home = %v, want ErrUnsupported", err)
	}
	c, err := gitconf.Read(path, gitconf.Options{Home: "/nonexistent-home", MaxDepth: 16})
	if err != nil || !reflect.DeepEqual(c.Files, []string{path, "/nonexistent-home/x"}) {
		t.Errorf("Read with Home = %v, %v", c, err)
	}
}

// git runs the installed git on config files only: HOME is a fresh
// directory, no system or global file is read, and the environment holds
// nothing else that could add configuration. It returns stdout, stderr and
// the exit code.
func git(t *testing.T, dir string, args ...string) (string, string, int) {
	t.Helper()
	bin, err := exec.LookPath("git")
	testenv.Require(t, err == nil, "git, to compare with: %v", err)
	home := filepath.Join(dir, "home")
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Env = []string{"HOME=" + home, "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=" + filepath.Join(dir, "no-global"),
		"GIT_CEILING_DIRECTORIES=" + filepath.Dir(dir), "LC_ALL=C", "PATH=" + os.Getenv("PATH")}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("git %q: %v", args, err)
	}
	return stdout.String(), stderr.String(), cmd.ProcessState.ExitCode()
}

// gitList is git's --null --list output in the form of render, less the
// line numbers.
func gitList(out string) []string {
	var entries []string
	for _, rec := range strings.Split(strings.TrimSuffix(out, "\x00"), "\x00") {
		if rec == "" {
			continue
		}
		key, value, ok := strings.Cut(rec, "\n")
		if ok {
			key += "=" + value
		}
		entries = append(entries, key)
	}
	return entries
}

func withoutLines(rendered []string) []string {
	var out []string
	for _, s := range rendered {
		_, kv, _ := strings.Cut(s, " ")
		out = append(out, kv)
	}
	return out
}

var badLine = regexp.MustCompile(`bad config line (\d+) in file`)

// gitBefore245 reports whether the installed git is older than 2.45.
func gitBefore245(t *testing.T, dir string) bool {
	out, stderr, code := git(t, dir, "version")
	var major, minor int
	if _, err := fmt.Sscanf(out, "git version %d.%d", &major, &minor); err != nil || code != 0 {
		t.Fatalf("git version: %q %s (%v)", out, stderr, err)
	}
	return major < 2 || major == 2 && minor < 45
}

func TestParseMatchesGit(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "config")
	old := gitBefore245(t, dir)
	for _, tc := range syntaxCases {
		t.Run(tc.name, func(t *testing.T) {
			want := tc.want
			if w, ok := before245[tc.name]; ok && old {
				want = w
			}
			if err := os.WriteFile(f, []byte(tc.in), 0o644); err != nil {
				t.Fatal(err)
			}
			out, stderr, code := git(t, dir, "config", "--file", f, "--null", "--list")
			if code != 0 {
				t.Fatalf("git refuses %q: %s", tc.in, stderr)
			}
			if got, want := gitList(out), withoutLines(want); !reflect.DeepEqual(got, want) {
				t.Errorf("git reads %q as\n %q\nthe table says\n %q", tc.in, got, want)
			}
		})
	}
	for _, tc := range malformedCases {
		t.Run(tc.name, func(t *testing.T) {
			if err := os.WriteFile(f, []byte(tc.in), 0o644); err != nil {
				t.Fatal(err)
			}
			_, stderr, code := git(t, dir, "config", "--file", f, "--null", "--list")
			if tc.gitAccepts {
				if code != 0 {
					t.Errorf("git refuses %q, the table says it accepts it: %s", tc.in, stderr)
				}
				return
			}
			m := badLine.FindStringSubmatch(stderr)
			if code == 0 || m == nil {
				t.Fatalf("git accepts %q (exit %d): %s", tc.in, code, stderr)
			}
			want := tc.line
			if tc.gitLine != 0 {
				want = tc.gitLine
			}
			if m[1] != strconv.Itoa(want) {
				t.Errorf("git refuses %q at line %s, the table says %d", tc.in, m[1], want)
			}
		})
	}
}

// TestParseMatchesGitRandom compares Parse with git on files made of the
// tokens the parser cares about, in random order: git and Parse accept the
// same files and read the same entries from them.
func TestParseMatchesGitRandom(t *testing.T) {
	tokens := []string{"[", "]", `"`, `\`, "\n", "\r\n", "\r", " ", "\t", "\v", "#", ";", "=", "a", "B", "x", "-", ".",
		"1", "_", ":", "é", `\n`, `\t`, `\b`, `\"`, `\\`, "\\\n", "[a]", `[a "b"]`, "[a.B]", "x =", "\xef\xbb\xbf"}
	dir := t.TempDir()
	f := filepath.Join(dir, "config")
	// Git before 2.45 turns unquoted tabs and CRs inside a value into
	// spaces: compare with both made spaces.
	squash := strings.NewReplacer()
	if gitBefore245(t, dir) {
		squash = strings.NewReplacer("\t", " ", "\r", " ")
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 300 {
		var b strings.Builder
		if r.IntN(2) == 0 {
			b.WriteString("[s]\n")
		}
		for range 1 + r.IntN(24) {
			b.WriteString(tokens[r.IntN(len(tokens))])
		}
		in := b.String()
		if err := os.WriteFile(f, []byte(in), 0o644); err != nil {
			t.Fatal(err)
		}
		out, stderr, code := git(t, dir, "config", "--file", f, "--null", "--list")
		entries, err := gitconf.Parse(f, []byte(in))
		if (code == 0) != (err == nil) {
			t.Errorf("%q: git exits %d (%s), Parse says %v", in, code, strings.TrimSpace(stderr), err)
			continue
		}
		if err != nil {
			continue
		}
		got, want := withoutLines(render(entries)), gitList(out)
		for i := range got {
			got[i] = squash.Replace(got[i])
		}
		for i := range want {
			want[i] = squash.Replace(want[i])
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%q: git reads %q, Parse %q", in, want, got)
		}
	}
}

func TestGetMatchesGit(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "config")
	in := "[core]\n\thooksPath = a\n\tHooksPath = \" b \"\n\tbare\n\tempty =\n" +
		"[remote \"Origin\"]\n\turl = upper\n[remote \"origin\"]\n\turl = lower\n" +
		"[Branch.Main]\n\tremote = legacy\n[a.B \"C\"]\n\tx = dotted\n" +
		"[url \"https://a.b/\"]\n\tinsteadOf = x\n[x \"a.b.c\"]\n\ty=1\n"
	if err := os.WriteFile(f, []byte(in), 0o644); err != nil {
		t.Fatal(err)
	}
	entries, err := gitconf.Parse(f, []byte(in))
	if err != nil {
		t.Fatal(err)
	}
	c := &gitconf.Config{Entries: entries}
	for _, key := range []string{
		"core.hookspath", "CORE.HOOKSPATH", "core.bare", "core.empty", "core.none",
		"remote.Origin.url", "remote.origin.URL", "remote.ORIGIN.url",
		"branch.main.remote", "branch.Main.remote", "BRANCH.main.REMOTE",
		"a.b.C.x", "a.B.C.x", "A.b.C.X", "url.https://a.b/.insteadof", "url.https://A.b/.insteadof",
		"x.a.b.c.y", "X.a.b.c.Y", "x.A.b.c.y",
	} {
		out, stderr, code := git(t, dir, "config", "--file", f, "--get", key)
		if code > 1 {
			t.Fatalf("git config --get %s: exit %d: %s", key, code, stderr)
		}
		v, ok := c.Get(key)
		if gitOK := code == 0; ok != gitOK || ok && v+"\n" != out {
			t.Errorf("Get(%q) = %q, %v; git says %q, %v", key, v, ok, out, gitOK)
		}
	}
}

// TestReadMatchesGit replays the layouts git can read with --includes: git
// must read the same entries, or refuse the same files.
func TestReadMatchesGit(t *testing.T) {
	for _, tc := range layouts {
		if !tc.git {
			continue
		}
		t.Run(tc.name, func(t *testing.T) {
			top := makeTree(t, tc.tree)
			path := filepath.Join(top, "ws/.git/config")
			out, stderr, code := git(t, top, "config", "--file", path, "--includes", "--null", "--list")
			if tc.name == "missing config" {
				if code == 0 && out != "" {
					t.Errorf("git lists %q for a missing file", out)
				}
				return
			}
			if tc.sentinel != nil {
				if code == 0 {
					t.Errorf("git accepts what Read refuses: %q", out)
				}
				return
			}
			if code != 0 {
				t.Fatalf("git refuses what Read accepts: %s", stderr)
			}
			var want []string
			for _, w := range tc.entries {
				_, kv, _ := strings.Cut(w, " ")
				want = append(want, strings.ReplaceAll(kv, "$T", top))
			}
			if got := gitList(out); !reflect.DeepEqual(got, want) {
				t.Errorf("git --includes reads\n %q\nthe table says\n %q", got, want)
			}
		})
	}
}

func ExampleRead() {
	dir, _ := os.MkdirTemp("", "gitconf")
	defer os.RemoveAll(dir)
	os.Mkdir(filepath.Join(dir, ".git"), 0o755)
	os.WriteFile(filepath.Join(dir, ".git", "config"), []byte(`
[core]
	hooksPath = .githooks
	fsmonitor = .tools/watch
[include]
	path = ../.gitconfig.local
[alias]
	st = status
	run = !./scripts/run
`), 0o644)

	c, err := gitconf.Read(filepath.Join(dir, ".git", "config"), gitconf.Options{})
	if err != nil {
		panic(err)
	}
	for _, f := range c.Files {
		fmt.Println("file:", strings.TrimPrefix(f, dir))
	}
	for _, e := range c.Commands() {
		fmt.Printf("command: %s = %s (line %d)\n", e.Key, e.Value, e.Line)
	}
	hooks, _ := c.HooksPath()
	fmt.Println("hooks:", hooks)

	_, err = gitconf.Parse("config", []byte("[core]\n\teditor = \"vim\n"))
	fmt.Println(err)
	// Output:
	// file: /.git/config
	// file: /.git/../.gitconfig.local
	// command: core.fsmonitor = .tools/watch (line 4)
	// command: alias.run = !./scripts/run (line 9)
	// hooks: .githooks
	// parse git config config line 2: bad config syntax: unterminated quoted value
}
