package runtime_test

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/cordon-run/cordon/runtime"
	"github.com/cordon-run/cordon/substrate/bwrap"
)

// Run a command in the shell sandbox: the workspace writable, no network,
// ten seconds and 64 KiB of each stream at most.
func ExampleRun() {
	ws := "/home/me/project" // absolute and canonical
	res, err := runtime.Run(context.Background(), runtime.Spec{
		Command:   []string{"make", "test"},
		Policy:    bwrap.NewPolicy(ws),
		Timeout:   10 * time.Second,
		MaxOutput: 64 << 10,
	})
	if err != nil {
		// The command did not run: bubblewrap is unavailable, the sandbox
		// could not be set up, or the policy refused to start.
		fmt.Fprintln(os.Stderr, err)
		return
	}
	fmt.Println(res) // "exit 0 after 1.2s on bwrap (sandboxed); stdout 5120 bytes, stderr 0 bytes"
}

// A tool admitted with "fs.read:workspace" and "env:GOPROXY" and nothing
// else: the workspace read-only, its own files bound read-only, no network.
func ExampleSpec_admittedTool() {
	ws := "/home/me/project"
	tool := ws + "/.efferent/tools/3f2a9c"
	policy := bwrap.NewPolicy(ws).
		WithAccess(bwrap.AccessRead).
		WithEnv("GOPROXY").
		WithReadOnly(tool)
	fmt.Println(policy)
	for _, m := range policy.Mechanisms()[:3] {
		fmt.Println(m)
	}
	// Output:
	// bwrap: workspace /home/me/project (read), network none, env PATH HOME LANG TERM GOPROXY, read-only binds /home/me/project/.efferent/tools/3f2a9c
	// bwrap: --unshare-user --disable-userns
	// bwrap: --cap-drop ALL
	// bwrap: --unshare-pid
}
