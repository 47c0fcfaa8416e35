package admission

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/cordon-run/cordon/capabilities"
	"github.com/cordon-run/cordon/substrate"
	"github.com/cordon-run/cordon/substrate/bwrap"
)

// NativeConfig configures the [Native] enforcer.
type NativeConfig struct {
	// Bwrap is the bubblewrap program; empty means "bwrap" on PATH.
	Bwrap string
	// ProbeAtRun leaves the proof that bubblewrap can create a sandbox
	// here to the run that follows: Facts does not create a probe sandbox
	// ([bwrap.Detect], about 7 ms). Every run's prologue proves its own
	// sandbox before the tool starts (PID 2 of a new PID namespace), and a
	// run that cannot start is explained by Detect then, so the tool never
	// runs unconfined. For callers that prepare a tool and run it at once
	// (cordon run); admission without a run keeps the probe.
	ProbeAtRun bool
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

// Facts finds bubblewrap, proves that it can create a sandbox here by
// creating one ([bwrap.Detect]; not with [NativeConfig.ProbeAtRun]), and
// records its version. The result is kept for the life of the enforcer.
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
	prog := n.cfg.Bwrap
	if prog == "" {
		if prog, err = bwrap.Find(os.Getenv("PATH")); err != nil {
			return f, fmt.Errorf("%w: %v; install bubblewrap", substrate.ErrUnavailable, err)
		}
	}
	if !n.cfg.ProbeAtRun {
		if err := bwrap.Detect(ctx, prog); err != nil {
			return f, fmt.Errorf("%w: %v", substrate.ErrUnavailable, err)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, prog, "--version").Output()
	if err != nil {
		return f, fmt.Errorf("%w: %s --version: %v", substrate.ErrUnavailable, prog, err)
	}
	f.Values = map[string]string{
		"bwrap.path":    prog,
		"bwrap.version": strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(string(out)), "bubblewrap")),
	}
	n.facts = &f
	return f, nil
}

// The runtime's mechanisms, applied by [runtime.Run] to every native tool.
var (
	mechDeadline      = substrate.Mechanism{Substrate: "runtime", Name: "deadline", Detail: "deadline %s, then TERM, grace, KILL"}
	mechKillTree      = substrate.Mechanism{Substrate: "runtime", Name: "kill-tree", Detail: "own session and process group, killed as a whole"}
	mechBoundedOutput = substrate.Mechanism{Substrate: "runtime", Name: "bounded-output", Detail: "keep %s of stdout and of stderr, drain the rest"}
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
			return []substrate.Mechanism{bwrap.BindWorkspace, bwrap.ReadOnlyHarness}, nil
		}
		return []substrate.Mechanism{bwrap.ReadOnlyWorkspace}, nil
	case capabilities.KindFSWrite:
		return []substrate.Mechanism{bwrap.BindWorkspace, bwrap.ReadOnlyHarness, bwrap.ReadOnlyWriteLater}, nil
	case capabilities.KindNet:
		if c == capabilities.HostNet() {
			return []substrate.Mechanism{bwrap.ShareNet}, nil
		}
		return []substrate.Mechanism{bwrap.UnshareNet}, nil
	case capabilities.KindNetConnect:
		return nil, refuse("bubblewrap can only cut the network off (--unshare-net) or share the host's; it cannot filter connections by port or host name, and no filtering proxy runs here", "net:none", "net:host")
	case capabilities.KindEnv:
		return []substrate.Mechanism{bwrap.ClearEnv}, nil
	case capabilities.KindTime:
		return []substrate.Mechanism{withDetail(mechDeadline, c.Arg()), mechKillTree, bwrap.UnsharePID, bwrap.DieWithParent}, nil
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
