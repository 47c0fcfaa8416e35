package admission

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/cordon-run/cordon/capabilities"
	"github.com/cordon-run/cordon/substrate"
)

// NativeConfig configures the [Native] enforcer.
type NativeConfig struct {
	// Bwrap is the bubblewrap program; empty means "bwrap" on PATH.
	Bwrap string
}

// Native is the enforcer of native tools: bubblewrap for the file system,
// network and environment, cordon's runtime for time and output. It
// implements [substrate.Enforcer].
type Native struct {
	cfg NativeConfig

	mu    sync.Mutex
	facts *substrate.Facts
}

// NewNative returns the native enforcer.
func NewNative(cfg NativeConfig) *Native { return &Native{cfg: cfg} }

// Name returns "bwrap".
func (n *Native) Name() string { return "bwrap" }

// String describes the enforcer.
func (n *Native) String() string { return "native tools under bubblewrap (" + n.bwrap() + ")" }

func (n *Native) bwrap() string {
	if n.cfg.Bwrap != "" {
		return n.cfg.Bwrap
	}
	return "bwrap"
}

// Facts finds bubblewrap, records its version, and proves that it can
// create a sandbox here by creating one. The result is cached.
func (n *Native) Facts(ctx context.Context) (substrate.Facts, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.facts != nil {
		return *n.facts, nil
	}
	f, err := substrate.HostFacts(n.Name())
	if err != nil {
		return f, fmt.Errorf("%w: %v", substrate.ErrUnavailable, err)
	}
	prog, err := exec.LookPath(n.bwrap())
	if err != nil {
		return f, fmt.Errorf("%w: bubblewrap not found (%v); install bubblewrap", substrate.ErrUnavailable, err)
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, prog, "--version").Output()
	if err != nil {
		return f, fmt.Errorf("%w: %s --version: %v", substrate.ErrUnavailable, prog, err)
	}
	var stderr bytes.Buffer
	probe := exec.CommandContext(ctx, prog, "--ro-bind", "/", "/", "--unshare-net", "--unshare-pid", "--die-with-parent", "--", "true")
	probe.Stderr = &stderr
	if err := probe.Run(); err != nil {
		return f, fmt.Errorf("%w: bubblewrap cannot create a sandbox here: %v: %s", substrate.ErrUnavailable, err, strings.TrimSpace(stderr.String()))
	}
	f.Values = map[string]string{
		"bwrap.path":    prog,
		"bwrap.version": strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(string(out)), "bubblewrap")),
	}
	n.facts = &f
	return f, nil
}

// The mechanisms native tools are confined with.
var (
	mechBindWorkspace    = substrate.Mechanism{Substrate: "bwrap", Name: "bind-workspace", Detail: "--bind <ws> <ws>"}
	mechROWorkspace      = substrate.Mechanism{Substrate: "bwrap", Name: "ro-bind-workspace", Detail: "--ro-bind <ws> <ws>"}
	mechROHarness        = substrate.Mechanism{Substrate: "bwrap", Name: "ro-harness", Detail: "--ro-bind <ws>/<harness> <ws>/<harness>"}
	mechUnshareNet       = substrate.Mechanism{Substrate: "bwrap", Name: "unshare-net", Detail: "--unshare-net"}
	mechShareNet         = substrate.Mechanism{Substrate: "bwrap", Name: "share-net", Detail: "network namespace shared with the host (no --unshare-net)"}
	mechClearEnv         = substrate.Mechanism{Substrate: "bwrap", Name: "clearenv", Detail: "--clearenv"}
	mechUnsharePid       = substrate.Mechanism{Substrate: "bwrap", Name: "unshare-pid", Detail: "--unshare-pid --die-with-parent"}
	mechDeadline         = substrate.Mechanism{Substrate: "runtime", Name: "deadline", Detail: "deadline %s, then TERM, grace, KILL"}
	mechKillTree         = substrate.Mechanism{Substrate: "runtime", Name: "kill-tree", Detail: "own session and process group, killed as a whole"}
	mechBoundedOutput    = substrate.Mechanism{Substrate: "runtime", Name: "bounded-output", Detail: "keep %s of stdout and of stderr, drain the rest"}
	mechSetEnvFromCaller = substrate.Mechanism{Substrate: "bwrap", Name: "setenv", Detail: "--setenv %s <the caller's value>"}
)

func withDetail(m substrate.Mechanism, args ...any) substrate.Mechanism {
	m.Detail = fmt.Sprintf(m.Detail, args...)
	return m
}

// Mechanisms returns how a native tool is held to c, or why it cannot be.
func (n *Native) Mechanisms(c capabilities.Capability, set capabilities.Set) ([]substrate.Mechanism, error) {
	refuse := func(reason string, instead ...string) error {
		return &substrate.UnenforceableError{Substrate: n.Name(), Capability: c, Reason: reason, Instead: instead}
	}
	switch c.Kind() {
	case capabilities.KindFSRead:
		if set.Has(capabilities.WriteWorkspace()) {
			return []substrate.Mechanism{mechBindWorkspace, mechROHarness}, nil
		}
		return []substrate.Mechanism{mechROWorkspace}, nil
	case capabilities.KindFSWrite:
		return []substrate.Mechanism{mechBindWorkspace, mechROHarness}, nil
	case capabilities.KindNet:
		if c == capabilities.HostNet() {
			return []substrate.Mechanism{mechShareNet}, nil
		}
		return []substrate.Mechanism{mechUnshareNet}, nil
	case capabilities.KindNetConnect:
		return nil, refuse("bubblewrap can only cut the network off (--unshare-net) or share the host's; it cannot filter connections by port or host name, and no filtering proxy runs here", "net:none", "net:host")
	case capabilities.KindEnv:
		return []substrate.Mechanism{mechClearEnv, withDetail(mechSetEnvFromCaller, c.Name())}, nil
	case capabilities.KindTime:
		return []substrate.Mechanism{withDetail(mechDeadline, c.Arg()), mechKillTree, mechUnsharePid}, nil
	case capabilities.KindOutput:
		return []substrate.Mechanism{withDetail(mechBoundedOutput, c.Arg())}, nil
	case capabilities.KindMemory:
		return nil, refuse("the native substrate applies no memory limit (bubblewrap sets no cgroup or rlimit); granting it would promise a limit nothing enforces", "a wasm tool, whose memory is capped", "no memory: capability (the tool then runs without a memory limit)")
	case capabilities.KindPids:
		return nil, refuse("the native substrate applies no process limit (bubblewrap sets no cgroup or rlimit); granting it would promise a limit nothing enforces", "no pids: capability (the tool's processes still die with it at its deadline)")
	case capabilities.KindWasmImport:
		return nil, refuse("native tools do not import host functions; only wasm modules do", "no wasm.import: capability for a native tool")
	}
	return nil, refuse("unknown capability kind")
}
