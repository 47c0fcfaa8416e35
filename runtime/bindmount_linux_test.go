package runtime_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cordon-run/cordon/harness"
	"github.com/cordon-run/cordon/internal/testenv"
	"github.com/cordon-run/cordon/substrate/bwrap"
	"github.com/cordon-run/cordon/substrate/landlock"
	"github.com/cordon-run/cordon/substrate/oci"
	wsguard "github.com/cordon-run/cordon/substrate/workspace"
)

// bindHelperEnv hands TestABindMountHelper its scene: the directory to
// bind, where, and the harness's state and cache directories, each on a
// line.
const bindHelperEnv = "CORDON_TEST_BIND_HELPER"

// TestNestedRunsThroughABindMountDoNotOverlap: a run of a bind mount of a
// directory inside a workspace (a devcontainer's /workspaces/x of
// ~/proj/sub) does not start while a run of the workspace goes on, though
// no path of the one leads through the other — each would keep what it
// trusts under its own lock, and the enclosing run's command could change
// the nested run's. The nested run is another cordon process, in a mount
// namespace of its own (unshare --mount) where the bind mount is made:
// the host's mounts are never touched. An unprivileged user makes it in a
// user namespace of its own too (--map-root-user), where the user is root
// over that mount namespace alone.
func TestNestedRunsThroughABindMountDoNotOverlap(t *testing.T) {
	needBwrap(t)
	unshare, err := exec.LookPath("unshare")
	testenv.Require(t, err == nil, "unshare (util-linux): %v", err)
	b := base(t)
	outer := workspace(t, b)
	// The command writes below the top level: on Landlock nothing is made
	// there.
	inner, alias := filepath.Join(outer, "sub"), filepath.Join(b, "alias")
	for _, d := range []string{inner, filepath.Join(inner, "d"), alias} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// The nested run on each substrate (all record themselves in the
	// registry of runs), and a file tool's change (a wasm tool's, the MCP
	// server's). In a user namespace of its own (unprivileged), bwrap and
	// the OCI runtime belong to no user it knows, and cordon runs neither.
	subs := []string{landlock.Name, "files"}
	if os.Geteuid() == 0 {
		subs = append(subs, bwrap.Name, oci.Name)
	}
	for _, sub := range subs {
		t.Run(sub, func(t *testing.T) {
			switch sub {
			case landlock.Name:
				err := landlock.Available()
				testenv.Require(t, err == nil, "Landlock ABI %d: %v", landlock.RequiredABI, err)
			case oci.Name:
				needOCI(t)
			}
			marker := filepath.Join(inner, "d", "nested-ran")
			os.Remove(marker)
			nested := func() string {
				t.Helper()
				args := []string{"--mount", "--propagation", "private"}
				if os.Geteuid() != 0 {
					args = append([]string{"--user", "--map-root-user"}, args...)
				}
				cmd := exec.Command(unshare, append(args, os.Args[0], "-test.run", "^TestABindMountHelper$", "-test.v")...)
				cmd.Env = append(os.Environ(), bindHelperEnv+"="+strings.Join([]string{inner, alias, testHarness.StateDir(), testHarness.CacheDir(), sub}, "\n"))
				out, err := cmd.CombinedOutput()
				if err != nil {
					t.Fatalf("the nested run's process: %v\n%s", err, out)
				}
				return string(out)
			}
			var out string
			during(t, newPolicy(outer), "", func() { out = nested() })
			if !strings.Contains(out, "refused: ") || !strings.Contains(out, "workspace "+outer) {
				t.Errorf("a run of %s (a bind mount of %s) while a run of %s goes on: %s; want a refusal naming the enclosing run", alias, inner, outer, out)
			}
			if _, err := os.Stat(marker); err == nil {
				t.Errorf("the nested run's command ran")
			}
			// Once the enclosing run has ended, it starts.
			if out := nested(); !strings.Contains(out, "ran: exit 0") {
				t.Errorf("the run of %s alone: %s", alias, out)
			}
			if _, err := os.Stat(marker); err != nil {
				t.Errorf("the run of %s alone did not run: %v", alias, err)
			}
		})
	}
}

// TestABindMountHelper is the nested run of
// TestNestedRunsThroughABindMountDoNotOverlap, in its own process.
func TestABindMountHelper(t *testing.T) {
	scene, ok := os.LookupEnv(bindHelperEnv)
	if !ok {
		t.Skip("a helper process of TestNestedRunsThroughABindMountDoNotOverlap")
	}
	f := strings.Split(scene, "\n")
	inner, alias := f[0], f[1]
	if err := unix.Mount(inner, alias, "", unix.MS_BIND, ""); err != nil {
		t.Fatalf("bind mount (in this process's own mount namespace): %v", err)
	}
	h := harness.Default().WithStateDir(f[2]).WithCacheDir(f[3])
	if f[4] == "files" {
		files, err := wsguard.Open(alias, wsguard.WithHarness(h))
		if err == nil {
			err = files.WriteFile("d/nested-ran", nil)
			files.Close()
		}
		if err != nil {
			fmt.Printf("refused: %v\n", err)
			return
		}
		fmt.Printf("ran: exit 0\n")
		return
	}
	res, err := runSpec(context.Background(), Spec{Command: []string{"touch", filepath.Join(alias, "d", "nested-ran")}, Policy: bwrap.NewPolicy(alias, h), Timeout: 30 * time.Second, Substrate: f[4]})
	if err != nil {
		fmt.Printf("refused: %v\n", err)
		return
	}
	fmt.Printf("ran: exit %d %s\n", res.ExitCode, res.Stderr)
}
