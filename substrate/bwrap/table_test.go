//go:build linux

package bwrap

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cordon-run/cordon/internal/testenv"
)

// TestTableSeesMountsComeGoAndMove: the mount table of another namespace,
// held open, shows a mount made in it and one taken away, and a bind
// whose mount point the host renames aside (an editor's save that keeps a
// backup): the mount goes with the renamed file, under the same mount ID,
// and the path it left is the host's new file. The table can still be
// read once the namespace's last process has gone.
func TestTableSeesMountsComeGoAndMove(t *testing.T) {
	unshare, err := exec.LookPath("unshare")
	testenv.Require(t, err == nil, "unshare (util-linux): %v", err)
	dir := t.TempDir()
	os.Chmod(dir, 0o755)
	a, f := filepath.Join(dir, "a"), filepath.Join(dir, "config")
	os.Mkdir(a, 0o755)
	os.WriteFile(f, []byte("[core]\n"), 0o644)
	// In a user and mount namespace of its own (a private one: nothing
	// of it propagates back), the shell mounts a tmpfs on a, takes it
	// down, then binds the file f onto itself read-only, each when told.
	cmd := exec.Command(unshare, "-Urm", "--propagation", "private", "sh", "-c", fmt.Sprintf(
		"read x; mount -t tmpfs none %[1]s && echo mounted; read x; umount %[1]s && echo gone; "+
			"read x; mount --bind %[2]s %[2]s && mount -o remount,bind,ro %[2]s && echo bound; read x", a, f))
	in, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	pid := cmd.Process.Pid
	self, _ := os.Readlink("/proc/self/ns/mnt")
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		// The namespace is the shell's once unshare has exec'd it.
		its, _ := os.Readlink(fmt.Sprintf("/proc/%d/ns/mnt", pid))
		exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
		if its != "" && its != self && !strings.HasSuffix(exe, "unshare") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the namespace was not made within 5s")
		}
	}
	tab, err := openTable(pid)
	if err != nil {
		t.Fatal(err)
	}
	defer tab.close()
	read := func() string {
		t.Helper()
		text, err := tab.text(nil)
		if err != nil {
			t.Fatal(err)
		}
		return string(text)
	}
	step := func(want string) string {
		t.Helper()
		io.WriteString(in, "\n")
		line := make([]byte, 64)
		n, _ := out.Read(line)
		if strings.TrimSpace(string(line[:n])) != want {
			t.Fatalf("the namespace's shell said %q, want %q", line[:n], want)
		}
		return read()
	}
	base := read()
	if same, err := tab.same(base); !same || err != nil {
		t.Fatalf("an unchanged table differs: %v", err)
	}
	mounted := step("mounted")
	if same, _ := tab.same(base); same {
		t.Error("a mount came and the table is the same")
	}
	if got := tableChanges(base, mounted, nil); !slices.Equal(got, []string{"came " + a}) {
		t.Errorf("tableChanges = %q, want [came %s]", got, a)
	}
	if got := missing([]string{a}, step("gone")); !slices.Equal(got, []string{"went " + a}) {
		t.Errorf("missing = %q, want [went %s]", got, a)
	}
	bound := step("bound")
	if got := missing([]string{f}, bound); len(got) != 0 {
		t.Fatalf("the bind of %s is missing: %q", f, got)
	}
	// The host saves the file as an editor that keeps a backup does.
	if err := os.Rename(f, f+"~"); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(f, []byte("[core]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	moved := read()
	if got := missing([]string{f}, moved); !slices.Equal(got, []string{"went " + f}) {
		t.Errorf("after the host renamed %s aside: missing = %q, want [went %s]", f, got, f)
	}
	// Its last process gone, the namespace is held by the table.
	cmd.Process.Kill()
	cmd.Wait()
	if same, err := tab.same(moved); !same || err != nil {
		t.Errorf("the table of a namespace without processes: same %v, %v", same, err)
	}
}
