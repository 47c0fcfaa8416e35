package bwrap

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cordon-run/cordon/capabilities"
	"github.com/cordon-run/cordon/harness"
	"github.com/cordon-run/cordon/internal/limits"
	"github.com/cordon-run/cordon/internal/userdir"
	"github.com/cordon-run/cordon/substrate"
	"github.com/cordon-run/cordon/substrate/egress"
)

// Name is the substrate's name in grants and facts.
const Name = "bwrap"

// EnforcerConfig configures an [Enforcer].
type EnforcerConfig struct {
	// Bwrap is the bubblewrap program; empty means "bwrap" on PATH.
	Bwrap string
	// ProbeAtRun leaves the proof that bubblewrap can create a sandbox
	// here to the run that follows: Facts does not create a probe sandbox
	// ([Detect], about 7 ms). Every run proves its own sandbox before the
	// command starts ([Run]), so the tool never runs unconfined. For
	// callers that prepare a tool and run it at once; admission without a
	// run keeps the probe.
	ProbeAtRun bool
	// Workspace, when set, is the workspace the tools will run in: a
	// bubblewrap found inside it is refused, never run (an earlier
	// command could have written it).
	Workspace string
	// Harness, when set, is the harness configuration: a bubblewrap inside
	// a directory that has been a workspace is refused, and the output of
	// `bwrap --version` is kept in its per-user state directory for the
	// binary it came from, so that a new cordon process need not run it
	// again.
	Harness harness.Config
}

// Enforcer is the bwrap substrate's side of admission: the facts of the
// host, and for each capability the mechanisms that enforce it on a native
// tool — bubblewrap for the file system, network and environment, process
// control (package proc) for time and output. It implements
// [substrate.Enforcer].
type Enforcer struct {
	cfg EnforcerConfig

	mu    sync.Mutex
	facts *substrate.Facts
}

// NewEnforcer returns the enforcer.
func NewEnforcer(cfg EnforcerConfig) *Enforcer { return &Enforcer{cfg: cfg} }

// Name returns "bwrap".
func (n *Enforcer) Name() string { return Name }

// String describes the enforcer.
func (n *Enforcer) String() string {
	bin := n.cfg.Bwrap
	if bin == "" {
		bin = "bwrap"
	}
	return "native tools under bubblewrap (" + bin + ")"
}

// Facts finds bubblewrap, proves that it can create a sandbox here by
// creating one ([Detect]; not with [EnforcerConfig.ProbeAtRun]), and
// records its version. The result is kept for the life of the enforcer.
func (n *Enforcer) Facts(ctx context.Context) (substrate.Facts, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.facts != nil {
		return *n.facts, nil
	}
	f, err := substrate.HostFacts(Name)
	if err != nil {
		return f, Unavailable(err)
	}
	prog := n.cfg.Bwrap
	if prog == "" {
		if prog, err = Find(os.Getenv("PATH")); err != nil {
			return f, Unavailable(fmt.Errorf("%w; install bubblewrap", err))
		}
	}
	if prog, err = trustedProgram(prog, n.cfg.Workspace, n.cfg.Harness); err != nil {
		return f, err
	}
	if !n.cfg.ProbeAtRun {
		if err := Detect(ctx, prog); err != nil {
			return f, err
		}
	}
	var stateDir string
	if !n.cfg.Harness.IsZero() {
		stateDir = n.cfg.Harness.StateDir()
	}
	v, err := version(ctx, prog, stateDir)
	if err != nil {
		return f, err
	}
	f.Values = map[string]string{"bwrap.path": prog, "bwrap.version": v, "limits": limits.Detect().String()}
	n.facts = &f
	return f, nil
}

// The process-control mechanisms every native run gets.
var (
	mechDeadline      = substrate.Mechanism{Substrate: "proc", Name: "deadline", Detail: "deadline %s, then TERM, grace, KILL"}
	mechKillTree      = substrate.Mechanism{Substrate: "proc", Name: "kill-tree", Detail: "the whole tree killed through pidfds, the PID namespace's init outlasted"}
	mechBoundedOutput = substrate.Mechanism{Substrate: "proc", Name: "bounded-output", Detail: "keep %s of stdout and of stderr, drain the rest"}
)

func withDetail(m substrate.Mechanism, args ...any) substrate.Mechanism {
	m.Detail = fmt.Sprintf(m.Detail, args...)
	return m
}

// Mechanisms returns how a native tool is held to c, or why it cannot be.
func (n *Enforcer) Mechanisms(c capabilities.Capability, set capabilities.Set) ([]substrate.Mechanism, error) {
	return mechanismsOf(c, set)
}

func mechanismsOf(c capabilities.Capability, set capabilities.Set) ([]substrate.Mechanism, error) {
	refuse := func(reason string, instead ...string) error {
		return &substrate.UnenforceableError{Substrate: Name, Capability: c, Reason: reason, Instead: instead}
	}
	switch c.Kind() {
	case capabilities.KindFSRead:
		if set.Has(capabilities.WriteWorkspace()) {
			return []substrate.Mechanism{BindWorkspace, ReadOnlyHarness}, nil
		}
		return []substrate.Mechanism{ReadOnlyWorkspace}, nil
	case capabilities.KindFSWrite:
		return []substrate.Mechanism{BindWorkspace, ReadOnlyHarness, PinParents, ReadOnlyWriteLater}, nil
	case capabilities.KindNet:
		if c == capabilities.HostNet() {
			return []substrate.Mechanism{ShareNet}, nil
		}
		return []substrate.Mechanism{UnshareNet}, nil
	case capabilities.KindNetConnect:
		rules, err := EgressRules(set)
		if err != nil {
			return nil, refuse(err.Error(), "net.connect:host:NAME[:PORT]", "net:none")
		}
		return []substrate.Mechanism{UnshareNet, EgressProxy(rules)}, nil
	case capabilities.KindEnv:
		return []substrate.Mechanism{ClearEnv}, nil
	case capabilities.KindTime:
		return []substrate.Mechanism{withDetail(mechDeadline, c.Arg()), mechKillTree, UnsharePID, DieWithParent}, nil
	case capabilities.KindOutput:
		return []substrate.Mechanism{withDetail(mechBoundedOutput, c.Arg())}, nil
	case capabilities.KindTmp:
		return []substrate.Mechanism{TmpfsTmp(c.Size()), ReadOnlyDev}, nil
	case capabilities.KindMemory, capabilities.KindPids, capabilities.KindCPU:
		return limitMechanisms(c, set, Name, sandboxProcesses)
	case capabilities.KindWasmImport:
		return nil, refuse("native tools do not import host functions; only wasm modules do", "no wasm.import: capability for a native tool")
	}
	return nil, refuse("unknown capability kind")
}

// sandboxProcesses is the number of bubblewrap's own processes that count
// with the tool's in a process limit: bwrap and the sandbox's init.
const sandboxProcesses = 2

// limitMechanisms returns the mechanisms that hold a native run to the
// limit c (memory:, pids:, cpu:) of set on this host, with extra processes
// of the substrate's own counted beside the tool's; a limit the host can
// enforce in no way is an [*substrate.UnenforceableError] of the
// substrate name.
func limitMechanisms(c capabilities.Capability, set capabilities.Set, name string, extra int) ([]substrate.Mechanism, error) {
	m, err := limits.Detect().MechanismsOf(c, set, name, extra)
	if err != nil {
		return nil, &substrate.UnenforceableError{Substrate: name, Capability: c, Reason: err.Error(),
			Instead: []string{"no " + string(c.Kind()) + ": capability (the run then has the default limits only)"}}
	}
	if name == Name && c.Kind() == capabilities.KindPids {
		m = initBound(m, c.Count())
	}
	return m, nil
}

// PolicyOf returns the sandbox that holds a native command to the
// capabilities set on the workspace (absolute, canonical) under the
// harness configuration h: the workspace hidden, read-only or writable as
// fs.read and fs.write say, the network cut off unless net:host, the
// granted env names, /tmp capped by tmp: (or [DefaultTmpSize]). Time and
// output are bounds of the run ([Spec]). It fails for a capability the
// substrate cannot enforce, as [Enforcer.Mechanisms] does.
func PolicyOf(set capabilities.Set, workspace string, h harness.Config) (Policy, error) {
	p := NewPolicy(workspace, h).WithAccess(AccessNone)
	for _, c := range set.All() {
		if _, err := mechanismsOf(c, set); err != nil {
			return Policy{}, err
		}
		switch c.Kind() {
		case capabilities.KindFSRead:
			if p.access == AccessNone {
				p.access = AccessRead
			}
		case capabilities.KindFSWrite:
			p.access = AccessWrite
		case capabilities.KindNet:
			if c == capabilities.HostNet() {
				p.network = NetHost
			}
		case capabilities.KindEnv:
			p.env = append(p.env, c.Name())
		case capabilities.KindTmp:
			p.tmpSize = c.Size()
		}
	}
	if rules, err := EgressRules(set); err != nil {
		return Policy{}, err
	} else if len(rules) > 0 {
		p = p.WithEgress(rules...)
	}
	plan, err := limits.Detect().Plan(limits.SpecOf(set))
	if err != nil {
		return Policy{}, err
	}
	p.limits = plan
	return p, nil
}

// versionRecord is what the state directory keeps of `bwrap --version`:
// the output and the identity of the file it came from.
type versionRecord struct {
	Path    string `json:"path"`
	Dev     uint64 `json:"dev"`
	Ino     uint64 `json:"ino"`
	Size    int64  `json:"size"`
	Mtime   int64  `json:"mtime"`
	Ctime   int64  `json:"ctime"`
	Version string `json:"version"`
}

// version returns the version `prog --version` prints. With a state
// directory, it is read from the record there while prog resolves to the
// same file, unchanged (device, inode, size, mtime and ctime): a stat
// instead of a process for every new cordon process.
func version(ctx context.Context, prog, stateDir string) (string, error) {
	id, idErr := fileIdentity(prog)
	var file string
	if stateDir != "" && idErr == nil {
		if dir, err := userdir.EnsurePath(stateDir, "facts"); err == nil {
			file = filepath.Join(dir, "bwrap-version.json")
			if data, err := readSmall(file); err == nil {
				var rec versionRecord
				if json.Unmarshal(data, &rec) == nil && rec.Version != "" {
					want := id
					want.Version = rec.Version
					if rec == want {
						return rec.Version, nil
					}
				}
			}
		}
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, prog, "--version")
	var out bytes.Buffer
	cmd.Stdout = &limitedWriter{w: &out, n: 256}
	if err := cmd.Run(); err != nil {
		return "", Unavailable(fmt.Errorf("%s --version: %w", prog, err))
	}
	v := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(out.String()), "bubblewrap"))
	if !versionLike(v) {
		return "", Unavailable(fmt.Errorf("%s --version printed %q, not a bubblewrap version", prog, out.String()))
	}
	if file != "" && v != "" {
		id.Version = v
		writeRecord(file, id)
	}
	return v, nil
}

// versionLike reports whether v reads as a version: "0.8.0", "0.11.0-rc1".
func versionLike(v string) bool {
	if v == "" || len(v) > 64 || v[0] < '0' || v[0] > '9' {
		return false
	}
	for _, r := range v {
		if !(r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || strings.ContainsRune(".+~_-", r)) {
			return false
		}
	}
	return true
}

// limitedWriter keeps the first n bytes written to it and drops the rest.
type limitedWriter struct {
	w io.Writer
	n int
}

func (l *limitedWriter) Write(p []byte) (int, error) {
	k := min(len(p), l.n)
	l.w.Write(p[:k])
	l.n -= k
	return len(p), nil
}

// fileIdentity describes the file prog resolves to.
func fileIdentity(prog string) (versionRecord, error) {
	real, err := filepath.EvalSymlinks(prog)
	if err != nil {
		return versionRecord{}, err
	}
	var st unix.Stat_t
	if err := unix.Stat(real, &st); err != nil {
		return versionRecord{}, err
	}
	return versionRecord{Path: real, Dev: uint64(st.Dev), Ino: st.Ino, Size: st.Size,
		Mtime: st.Mtim.Nano(), Ctime: st.Ctim.Nano()}, nil
}

// readSmall reads a record file of at most 4 KiB, not following a link.
func readSmall(p string) ([]byte, error) {
	f, err := os.OpenFile(p, os.O_RDONLY|unix.O_NOFOLLOW, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, 4<<10))
}

// writeRecord replaces the record atomically; failing to is harmless.
func writeRecord(p string, rec versionRecord) {
	data, err := json.Marshal(rec)
	if err != nil {
		return
	}
	tmp, err := os.CreateTemp(filepath.Dir(p), ".bwrap-version-*")
	if err != nil {
		return
	}
	_, err = tmp.Write(data)
	if cerr := tmp.Close(); err == nil && cerr == nil {
		err = os.Rename(tmp.Name(), p)
	}
	if err != nil {
		os.Remove(tmp.Name())
	}
}

// EgressRules returns the egress proxy's rules of the set's net.connect
// capabilities: net.connect:host:TARGET allows that name, wildcard or
// address (and port); net.connect:tcp:PORT any name at that port, never
// an address.
func EgressRules(set capabilities.Set) ([]egress.Rule, error) {
	var rules []egress.Rule
	for _, c := range set.Of(capabilities.KindNetConnect) {
		if port := c.Port(); port != 0 {
			rules = append(rules, egress.Rule{Host: "*", Port: port})
			continue
		}
		host, port := c.Host()
		r, err := egress.ParseRule(host)
		if err != nil {
			return nil, err
		}
		r.Port = port
		rules = append(rules, r)
	}
	return rules, nil
}
