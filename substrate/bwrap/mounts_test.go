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
	got := tableChanges(base, now, []string{"/run", "/tmp"})
	want := []string{"came /ws/mnt", "went /ws/a b/.git/config"}
	if !slices.Equal(got, want) {
		t.Errorf("tableChanges = %q, want %q", got, want)
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
	if got := sb.tmpfsPoints(); !slices.Equal(got, []string{"/tmp"}) {
		t.Errorf("tmpfsPoints = %q", got)
	}
}
