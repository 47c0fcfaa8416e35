package gitconf_test

import (
	"bytes"
	"errors"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/cordon-run/cordon/internal/gitconf"
)

// FuzzParse checks that Parse never panics, gives the same answer twice,
// names a line of the file in every syntax error, and reads back what it
// read: the entries written out again in git's canonical form parse to the
// same keys and values.
func FuzzParse(f *testing.F) {
	for _, tc := range syntaxCases {
		f.Add([]byte(tc.in))
	}
	for _, tc := range malformedCases {
		f.Add([]byte(tc.in))
	}
	f.Add([]byte("[include]\n\tpath = ~/x\n[includeIf \"gitdir:~/w/\"]\n\tpath = ../y\n"))
	f.Add([]byte("[core]\n\tfsmonitor = \"./a\\\\b\" ; c\n[alias]\n\tx = !sh -c \"echo \\\"hi\\\"\"\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		entries, err := gitconf.Parse("f", data)
		again, err2 := gitconf.Parse("f", data)
		if !reflect.DeepEqual(entries, again) || (err == nil) != (err2 == nil) || err != nil && err.Error() != err2.Error() {
			t.Fatalf("Parse is not deterministic: %q, %v then %q, %v", render(entries), err, render(again), err2)
		}
		lines := 1 + bytes.Count(data, []byte{'\n'})
		if err != nil {
			var ce *gitconf.Error
			if entries != nil || !errors.As(err, &ce) || ce.File != "f" || ce.Line < 1 || ce.Line > lines {
				t.Fatalf("Parse error %#v (entries %q) is not an *Error for a line of f (1..%d)", err, render(entries), lines)
			}
			return
		}
		for _, e := range entries {
			if e.File != "f" || e.Line < 1 || e.Line > lines || !validName.MatchString(e.Key) || e.NoValue && e.Value != "" {
				t.Fatalf("bad entry %#v", e)
			}
		}
		out, ok := canonical(entries)
		if !ok || len(out) > 1<<20 {
			return
		}
		back, err := gitconf.Parse("f", out)
		if err != nil {
			t.Fatalf("Parse of the canonical form %q: %v", out, err)
		}
		if got, want := withoutLines(render(back)), withoutLines(render(entries)); !reflect.DeepEqual(got, want) {
			t.Fatalf("canonical form %q reads back as\n %q\nnot\n %q", out, got, want)
		}
	})
}

// validName is a key whose name (after the last dot, or the whole key) is
// git's: a lower-case letter, then letters, digits and dashes.
var validName = regexp.MustCompile(`(^|\.)[a-z][a-z0-9-]*$`)

var (
	sectionName = regexp.MustCompile(`^[a-z0-9-]+$`)
	valueEscape = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`, "\t", `\t`, "\b", `\b`)
	subEscape   = strings.NewReplacer(`\`, `\\`, `"`, `\"`)
)

// canonical writes entries as git config --add would, one header per
// entry; ok is false when a key has no section git could write.
func canonical(entries []gitconf.Entry) ([]byte, bool) {
	var b bytes.Buffer
	for _, e := range entries {
		section, rest, found := strings.Cut(e.Key, ".")
		if !found || !sectionName.MatchString(section) {
			return nil, false
		}
		b.WriteString("[" + section)
		if i := strings.LastIndexByte(rest, '.'); i >= 0 {
			b.WriteString(` "` + subEscape.Replace(rest[:i]) + `"`)
			rest = rest[i+1:]
		}
		b.WriteString("]\n\t" + rest)
		if !e.NoValue {
			b.WriteString(` = "` + valueEscape.Replace(e.Value) + `"`)
		}
		b.WriteString("\n")
	}
	return b.Bytes(), true
}
