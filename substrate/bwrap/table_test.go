//go:build linux

package bwrap

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cordon-run/cordon/internal/testenv"
)

// TestTableSeesAMountComeAndGo: a mount table of another namespace, held
// open, is listed by mount ID where the kernel can (it must, on Linux
// 6.11 and later), with as many mounts as its text has lines; a mount
// made in the namespace and one taken away each change what the table
// says — listed and read as text alike — and the table can still be
// looked at once the namespace's last process has gone.
func TestTableSeesAMountComeAndGo(t *testing.T) {
	unshare, err := exec.LookPath("unshare")
	testenv.Require(t, err == nil, "unshare (util-linux): %v", err)
	for _, listed := range []bool{true, false} {
		t.Run(fmt.Sprintf("listed=%v", listed), func(t *testing.T) {
			dir := t.TempDir()
			os.Chmod(dir, 0o755)
			a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
			os.Mkdir(a, 0o755)
			os.Mkdir(b, 0o755)
			// In a user and mount namespace of its own (a private one:
			// nothing of it propagates back), the shell mounts a tmpfs
			// on a, then takes it down, each when told to.
			cmd := exec.Command(unshare, "-Urm", "--propagation", "private", "sh", "-c",
				fmt.Sprintf("read x; mount -t tmpfs none %s && echo mounted; read x; umount %s && echo gone; read x", a, a))
			in, _ := cmd.StdinPipe()
			out, _ := cmd.StdoutPipe()
			cmd.Stderr = os.Stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() { cmd.Process.Kill(); cmd.Wait() }()
			pid := cmd.Process.Pid
			var tab *table
			for deadline := time.Now().Add(5 * time.Second); ; {
				// The namespace is the shell's once unshare has exec'd
				// it.
				if self, _ := os.Readlink("/proc/self/ns/mnt"); self != "" {
					if its, _ := os.Readlink(fmt.Sprintf("/proc/%d/ns/mnt", pid)); its != "" && its != self {
						exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
						if !strings.HasSuffix(exe, "unshare") {
							break
						}
					}
				}
				if time.Now().After(deadline) {
					t.Fatal("the namespace was not made within 5s")
				}
				time.Sleep(time.Millisecond)
			}
			if tab, err = openTable(pid); err != nil {
				t.Fatal(err)
			}
			defer tab.close()
			if kernelAtLeast(6, 11) { // listmount(2) of another namespace by its ID
				testenv.Require(t, tab.listed(), "this kernel lists another namespace's mounts, and this table is not listed")
			}
			if !tab.listed() && listed {
				t.Skip("this kernel does not list another namespace's mounts")
			}
			if !listed && tab.listed() {
				tab.ns.Close()
				tab.ns, tab.nsID = nil, 0
			}
			base, err := tab.snapshot()
			if err != nil {
				t.Fatal(err)
			}
			if lines := strings.Count(base.text, "\n"); listed && len(base.ids) != lines {
				t.Errorf("%d mounts listed, %d in the text", len(base.ids), lines)
			}
			if same, err := tab.same(base); !same || err != nil {
				t.Fatalf("an unchanged table differs: %v", err)
			}
			step := func(want string) *snapshot {
				t.Helper()
				io.WriteString(in, "\n")
				line := make([]byte, 64)
				n, _ := out.Read(line)
				if strings.TrimSpace(string(line[:n])) != want {
					t.Fatalf("the namespace's shell said %q, want %q", line[:n], want)
				}
				s, err := tab.snapshot()
				if err != nil {
					t.Fatal(err)
				}
				return s
			}
			mounted := step("mounted")
			if same, _ := tab.same(base); same {
				t.Error("a mount came and the table is the same")
			}
			if got := tableChanges(base.text, mounted.text, nil); len(got) != 1 || got[0] != "came "+a {
				t.Errorf("tableChanges = %q, want [came %s]", got, a)
			}
			gone := step("gone")
			if same, _ := tab.same(mounted); same {
				t.Error("a mount went and the table is the same")
			}
			if m := missing([]string{a}, gone.text); len(m) != 1 {
				t.Errorf("missing = %q, want [went %s]", m, a)
			}
			// Its last process gone, the namespace is held by the table.
			cmd.Process.Kill()
			cmd.Wait()
			if same, err := tab.same(gone); !same || err != nil {
				t.Errorf("the table of a namespace without processes: same %v, %v", same, err)
			}
		})
	}
}
