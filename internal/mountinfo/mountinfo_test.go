package mountinfo_test

import (
	"testing"

	"github.com/cordon-run/cordon/internal/mountinfo"
)

func TestFieldsAreSplitAtSpacesAlone(t *testing.T) {
	line := "36 35 98:0 /mnt\\040dir /a\\011b\vc rw,noatime master:1 - ext3 /dev/root rw\n"
	for n, want := range map[int]string{0: "36", 2: "98:0", 3: `/mnt\040dir`, 4: "/a\\011b\vc", 5: "rw,noatime", 10: "rw", 11: ""} {
		if got := mountinfo.Field(line, n); got != want {
			t.Errorf("Field(%d) = %q, want %q", n, got, want)
		}
	}
	for in, want := range map[string]string{`/mnt\040dir`: "/mnt dir", `/a\011b\012c\134d`: "/a\tb\nc\\d", `/x\04`: `/x\04`, `/x\09y`: `/x\09y`, "/plain": "/plain"} {
		if got := mountinfo.Unescape(in); got != want {
			t.Errorf("Unescape(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestWithinIsStrictAndOfOneFileSystem(t *testing.T) {
	p := func(dev, path string) mountinfo.Place { return mountinfo.Place{Dev: dev, Path: path} }
	for _, c := range []struct {
		a, b mountinfo.Place
		want bool
	}{
		{p("8:1", "/home/u/proj/sub"), p("8:1", "/home/u/proj"), true},
		{p("8:1", "/home/u/proj"), p("8:1", "/home/u/proj"), false},
		{p("8:1", "/home/u/project"), p("8:1", "/home/u/proj"), false},
		{p("8:1", "/home/u/proj"), p("8:1", "/home/u/proj/sub"), false},
		{p("8:2", "/home/u/proj/sub"), p("8:1", "/home/u/proj"), false},
		{p("8:1", "/x"), p("8:1", "/"), true},
		{p("", "/x"), p("", "/"), false},
	} {
		if got := c.a.Within(c.b); got != c.want {
			t.Errorf("%v.Within(%v) = %v, want %v", c.a, c.b, got, c.want)
		}
	}
}
