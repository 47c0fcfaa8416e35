package oci

import (
	"os"
	"path/filepath"
	"slices"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/cordon-run/cordon/internal/limits"
	"github.com/cordon-run/cordon/substrate/bwrap"
)

// A Portable is a prepared sandbox as an engine elsewhere needs it, in
// plain values that outlive the sandbox and travel as JSON: the
// runtime-spec configuration of its command, the workspace, the
// placeholders the sandbox's session made (which another engine has to
// stand in for), the limits, the time limit. It is what the cluster
// renderer (substrate/oci/kube, run as the cordon-kube program) takes.
type Portable struct {
	Spec      *specs.Spec `json:"spec"`
	Workspace string      `json:"workspace"`
	// Placeholders are the absent protected paths: each needs a
	// read-only stand-in where the engine runs the command.
	Placeholders []bwrap.Placeholder `json:"placeholders,omitempty"`
	Limits       limits.Spec         `json:"limits"`
	TmpSize      int64               `json:"tmpSize"`
	// Timeout is the run's time limit; Input, that the command reads a
	// tool's input on its standard input.
	Timeout time.Duration `json:"timeout,omitempty"`
	Input   bool          `json:"input,omitempty"`
	// ToolDir is an admitted tool's read-only folder (a host path the
	// command names), ToolFiles what it holds; empty for a command.
	ToolDir   string     `json:"toolDir,omitempty"`
	ToolFiles []ToolFile `json:"toolFiles,omitempty"`
}

// A ToolFile is one of an admitted tool's files: Path relative to its
// folder, '/'-separated; Exec if it runs as a program.
type ToolFile struct {
	Path string `json:"path"`
	Data []byte `json:"data"`
	Exec bool   `json:"exec,omitempty"`
}

// PortableOf returns the Portable of argv run in the sandbox sb, whose
// placeholders it lists: call it before the sandbox is closed.
func PortableOf(sb *bwrap.Sandbox, argv []string, o Options) (*Portable, error) {
	s, err := Spec(sb, argv, o)
	if err != nil {
		return nil, err
	}
	p := sb.Policy()
	held := sb.Placeholders()
	if prot := sb.Protected(); prot != nil {
		// A placeholder that stays in a git directory (commondir): a file
		// with the placeholder's content is one for another engine too,
		// which must not find it absent (a kubelet would make a directory
		// there).
		for _, q := range prot.Paths() {
			if !q.Keep || q.Dir || q.MaskDir || q.Content == "" {
				continue
			}
			path := filepath.Join(p.Workspace(), filepath.FromSlash(q.Rel))
			if data, err := os.ReadFile(path); err == nil && string(data) == q.Content &&
				!slices.ContainsFunc(held, func(h bwrap.Placeholder) bool { return h.Path == path }) {
				held = append(held, bwrap.Placeholder{Path: path, Content: q.Content})
			}
		}
	}
	return &Portable{Spec: s, Workspace: p.Workspace(), Placeholders: held, Limits: p.Limits().Spec, TmpSize: p.TmpSize()}, nil
}

// PodOptions are what a Kubernetes Pod of a sandbox needs beyond the
// sandbox (substrate/oci/kube's Options).
type PodOptions struct {
	// Name is the Pod's (a DNS label); Namespace its namespace, the
	// cluster's default if empty.
	Name      string `json:"name"`
	Namespace string `json:"namespace,omitempty"`
	// Image stands for the host's /: the programs the command finds.
	Image string `json:"image"`
	// RuntimeClass, if set, names the runtime class of a stronger
	// boundary (gVisor, Kata).
	RuntimeClass string `json:"runtimeClass,omitempty"`
	// Claim, if set, is the PersistentVolumeClaim that holds the
	// workspace; otherwise the workspace is the node's directory of the
	// same path (hostPath).
	Claim string `json:"claim,omitempty"`
	// HostUsers runs the Pod in the node's user namespace; by default it
	// gets one of its own (hostUsers: false), as a rootless bundle does.
	HostUsers bool `json:"hostUsers,omitempty"`
	// UID and GID the command runs as: the workspace's owner, so that it
	// can write there.
	UID int64 `json:"uid"`
	GID int64 `json:"gid"`
}

// PodRequest is what cordon oci pod hands the cordon-kube program on its
// standard input: render Sandbox under Options into the directory Out.
type PodRequest struct {
	Sandbox *Portable  `json:"sandbox"`
	Options PodOptions `json:"options"`
	Out     string     `json:"out"`
}

// PodResponse is what cordon-kube prints when it has written the
// manifest: the Pod's name, the seccomp profile's file name, what the
// Pod does not enforce. On failure it prints {"error", "message"}.
type PodResponse struct {
	Dir        string   `json:"dir"`
	Pod        string   `json:"pod"`
	Seccomp    string   `json:"seccomp"`
	Unenforced []string `json:"unenforced"`
}
