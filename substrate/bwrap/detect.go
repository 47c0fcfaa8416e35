package bwrap

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// Find returns the bwrap binary found in pathList (a PATH value). Empty
// entries are skipped: the current directory is never searched. The error
// says where it looked; wrap it with [Unavailable].
func Find(pathList string) (string, error) {
	for _, dir := range filepath.SplitList(pathList) {
		if dir == "" || !filepath.IsAbs(dir) {
			continue
		}
		if p := filepath.Join(dir, "bwrap"); executable(p) {
			return p, nil
		}
	}
	return "", fmt.Errorf("bwrap not found in PATH %q", pathList)
}

var (
	detectMu sync.Mutex
	detected = map[string]error{} // bwrap binary -> nil (works) or why not
)

// detectTimeout bounds the sandbox Detect creates.
const detectTimeout = 10 * time.Second

// Detect reports whether the bwrap binary bin can create a sandbox on this
// host, by creating one with the namespaces, flags and base mounts every
// [Policy] uses and checking from inside that it is one (PID 2 of its own PID namespace,
// no capabilities). The answer is kept for bin for the life of the process;
// a command that started in a sandbox made with bin counts as a yes. The
// error matches [ErrUnavailable] and carries the reason.
func Detect(ctx context.Context, bin string) error {
	detectMu.Lock()
	defer detectMu.Unlock()
	if err, ok := detected[bin]; ok {
		return err
	}
	err := probe(ctx, bin)
	if ctx.Err() == nil {
		detected[bin] = err
	}
	return err
}

// remember records that bin created a sandbox.
func remember(bin string, err error) {
	detectMu.Lock()
	defer detectMu.Unlock()
	detected[bin] = err
}

// probeScript prints what only a sandbox shows: its PID (2, under bwrap's
// init) and its effective capabilities (none).
const probeScript = `echo "$$"; grep '^CapEff:' /proc/self/status`

func probe(ctx context.Context, bin string) error {
	ctx, cancel := context.WithTimeout(ctx, detectTimeout)
	defer cancel()
	args := append(namespaceArgs(NetNone), baseArgs(1<<20)...)
	args = append(args, "--remount-ro", "/dev", "--", "/bin/sh", "-c", probeScript)
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = []string{"PATH=" + defaultPath}
	cmd.Dir = "/"
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = time.Second
	err := cmd.Run()
	if err != nil {
		reason := strings.TrimSpace(stderr.String())
		if i := strings.LastIndex(reason, "\n"); i >= 0 {
			reason = reason[i+1:]
		}
		var ee *exec.ExitError
		switch {
		case reason != "":
			return Unavailable(fmt.Errorf("%s: %s", bin, reason))
		case errors.As(err, &ee):
			return Unavailable(fmt.Errorf("%s could not create a sandbox: %v", bin, err))
		default:
			return Unavailable(fmt.Errorf("cannot run %s: %w", bin, err))
		}
	}
	want := "2\nCapEff:\t0000000000000000\n"
	if got := stdout.String(); got != want {
		return Unavailable(fmt.Errorf("%s ran, but not in a sandbox: it printed %q, a sandbox prints %q", bin, got, want))
	}
	return nil
}
