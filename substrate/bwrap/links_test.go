package bwrap

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestLinksOn: every link that resolving a path goes through, in the
// kernel's order and each as its directory resolved and its own name,
// and what the path resolves to — the kernel's "..", after a link, from
// where the link led; what does not exist as named; a loop, nothing.
func TestLinksOn(t *testing.T) {
	top, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"a/b", "c", "real"} {
		os.MkdirAll(filepath.Join(top, d), 0o755)
	}
	os.WriteFile(filepath.Join(top, "real", "f"), nil, 0o644)
	link := func(to, at string) {
		if err := os.Symlink(to, filepath.Join(top, at)); err != nil {
			t.Fatal(err)
		}
	}
	link("../c/mid", "a/first")  // a/first -> c/mid (relative)
	link(top+"/real/f", "c/mid") // c/mid -> real/f (absolute)
	link("a/b", "dir")           // dir -> a/b: dir/.. is a, not top
	link("loop2", "loop1")
	link("loop1", "loop2")
	link("absent", "dangling")
	for _, c := range []struct {
		path     string
		links    []string
		resolved string
	}{
		{"real/f", nil, "real/f"},
		{"a/first", []string{"a/first", "c/mid"}, "real/f"},
		{"dir/../first", []string{"dir", "a/first", "c/mid"}, "real/f"},
		{"loop1", []string{"loop1", "loop2"}, ""},
		{"dangling", []string{"dangling"}, "absent"},
		{"a/absent", nil, "a/absent"},
		{"dir/absent/../x", []string{"dir"}, "a/b/x"},
	} {
		links, resolved := LinksOn(top + "/" + c.path) // not joined: Join cleans the ".."
		var want []string
		for _, l := range c.links {
			want = append(want, filepath.Join(top, l))
		}
		if c.path == "loop1" { // 40 links, the kernel's bound, then nothing
			if len(links) != 40 || links[0] != want[0] || links[1] != want[1] || resolved != "" {
				t.Errorf("LinksOn(%s) = %d links from %q, %q; want 40 from %q, none resolved", c.path, len(links), links[:min(2, len(links))], resolved, want)
			}
			continue
		}
		wantResolved := ""
		if c.resolved != "" {
			wantResolved = filepath.Join(top, c.resolved)
		}
		if !slices.Equal(links, want) || resolved != wantResolved {
			t.Errorf("LinksOn(%s) = %q, %q; want %q, %q", c.path, links, resolved, want, wantResolved)
		}
	}
}
