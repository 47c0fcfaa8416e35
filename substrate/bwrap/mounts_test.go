package bwrap

import (
	"slices"
	"testing"
)

// TestTableChanges: a mount that went is named; one that came is named
// unless it is read-only or lies in one of the sandbox's own tmpfs, whose
// contents the sandbox cannot see; escaped paths are read back.
func TestTableChanges(t *testing.T) {
	base := "21 1 0:1 / / ro,nosuid - ext4 /dev/vda rw\n" +
		"22 21 0:2 / /run rw - tmpfs tmpfs rw\n" +
		"23 21 0:1 /ws /ws rw - ext4 /dev/vda rw\n" +
		"24 23 0:1 /ws/a\\040b/.git/config /ws/a\\040b/.git/config ro - ext4 /dev/vda rw\n"
	now := "21 1 0:1 / / ro,nosuid - ext4 /dev/vda rw\n" +
		"22 21 0:2 / /run rw - tmpfs tmpfs rw\n" +
		"23 21 0:1 /ws /ws rw - ext4 /dev/vda rw\n" +
		"30 21 0:9 / /run/user/1000 rw - tmpfs tmpfs rw\n" + // under the hidden /run
		"31 21 0:9 / /media/stick ro - vfat /dev/sdb ro\n" + // read-only
		"32 23 0:9 / /ws/mnt rw - tmpfs tmpfs rw\n" // in the workspace: a hole
	got := tableChanges(base, now, []layer{{point: "/"}, {point: "/run", hides: true}, {point: "/tmp", hides: true}, {point: "/ws"}, {point: "/ws/a b/.git/config"}})
	want := []string{"came /ws/mnt", "went /ws/a b/.git/config"}
	if !slices.Equal(got, want) {
		t.Errorf("tableChanges = %q, want %q", got, want)
	}
	// A workspace under the hidden /tmp, bound again at its own path: a
	// mount of the host in it comes twice, into the host tree beneath the
	// tmpfs and into the bind, where the command sees it.
	under := "21 1 0:1 / / ro,nosuid - ext4 /dev/vda rw\n" +
		"22 21 0:2 / /tmp rw - tmpfs tmpfs rw\n" +
		"23 22 0:1 /tmp/ws /tmp/ws rw - ext4 /dev/vda rw\n"
	came := under +
		"40 21 0:9 / /tmp/ws/mnt rw - tmpfs tmpfs rw\n" + // beneath the tmpfs
		"41 23 0:9 / /tmp/ws/mnt rw - tmpfs tmpfs rw\n" + // in the workspace's bind
		"42 21 0:9 / /tmp/other rw - tmpfs tmpfs rw\n" // beneath the tmpfs alone
	layers := []layer{{point: "/"}, {point: "/tmp", hides: true}, {point: "/tmp/ws"}}
	if got := tableChanges(under, came, layers); !slices.Equal(got, []string{"came /tmp/ws/mnt", "came /tmp/ws/mnt"}) {
		t.Errorf("tableChanges of a mount in a workspace under a hidden tmpfs = %q", got)
	}
	// The workspace that is itself a hidden directory (a home): hidden
	// first, then bound at the same path on top.
	layers = []layer{{point: "/"}, {point: "/tmp/ws", hides: true}, {point: "/tmp/ws"}}
	if got := tableChanges(under, came, layers); !slices.Equal(got, []string{"came /tmp/other", "came /tmp/ws/mnt", "came /tmp/ws/mnt"}) {
		t.Errorf("tableChanges of a mount in a workspace bound over its own tmpfs = %q", got)
	}
	// A host mount under /dev or /proc lies beneath bwrap's own.
	dev := under + "50 21 0:9 / /dev/hugepages rw - hugetlbfs hugetlbfs rw\n" + "51 21 0:9 / /proc/fs/x rw - tmpfs tmpfs rw\n"
	layers = []layer{{point: "/"}, {point: "/dev", hides: true, own: true}, {point: "/proc", hides: true, own: true}, {point: "/proc/sys"}}
	if got := tableChanges(under, dev, layers); len(got) != 0 {
		t.Errorf("tableChanges of host mounts beneath /dev and /proc = %q", got)
	}
	if m := missing([]string{"/ws", "/ws/a b/.git/config"}, base); len(m) != 0 {
		t.Errorf("missing in the base: %q", m)
	}
	if m := missing([]string{"/ws", "/ws/a b/.git/config"}, now); !slices.Equal(m, []string{"went /ws/a b/.git/config"}) {
		t.Errorf("missing = %q", m)
	}
	sb := &Sandbox{args: []string{"--ro-bind", "/", "/", "--size", "10", "--tmpfs", "/tmp", "--dir", "/tmp/home", "--bind", "/ws", "/ws", "--remount-ro", "/tmp"}}
	if got := sb.mountPoints(); !slices.Equal(got, []string{"/", "/tmp", "/ws"}) {
		t.Errorf("mountPoints = %q", got)
	}
	if got := sb.layers(); !slices.Equal(got, []layer{{point: "/"}, {point: "/tmp", hides: true}, {point: "/ws"}}) {
		t.Errorf("layers = %v", got)
	}
}

// TestTableFieldsAreTheKernels: the kernel separates mountinfo's fields
// by one space and escapes only space, tab, newline and backslash in a
// path, so a path may hold a \v, a \r or a no-break space. Split on any
// white space, such a root field would shift the mount point and the
// options of its line: a missing mount read as present, a writable one
// that came read as read-only.
func TestTableFieldsAreTheKernels(t *testing.T) {
	base := "21 1 0:1 / / ro,nosuid - ext4 /dev/vda rw\n" +
		"23 21 0:1 /x\v/etc /ws/a rw - ext4 /dev/vda rw\n" +
		"24 21 0:1 / /ws/b\u00a0c ro - ext4 /dev/vda rw\n"
	if m := missing([]string{"/ws/a", "/ws/b\u00a0c"}, base); len(m) != 0 {
		t.Errorf("missing(present mount points) = %q", m)
	}
	if m := missing([]string{"/etc"}, base); !slices.Equal(m, []string{"went /etc"}) {
		t.Errorf("missing(/etc, which only a root field names) = %q; want it gone", m)
	}
	if m := missing([]string{"/ws/a"}, base+"\n"+"25 21\n"); len(m) != 0 {
		t.Errorf("missing with a short line = %q", m)
	}
	now := base + "30 23 0:9 /y\vro /ws/a/mnt rw - tmpfs tmpfs rw\n"
	if got := tableChanges(base, now, nil); !slices.Equal(got, []string{"came /ws/a/mnt"}) {
		t.Errorf("tableChanges = %q; want the writable mount that came", got)
	}
}
