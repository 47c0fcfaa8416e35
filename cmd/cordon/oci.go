package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/pflag"

	"github.com/cordon-run/cordon/admission"
	"github.com/cordon-run/cordon/capabilities"
	"github.com/cordon-run/cordon/harness"
	"github.com/cordon-run/cordon/internal/capture"
	"github.com/cordon-run/cordon/internal/userdir"
	"github.com/cordon-run/cordon/refusal"
	"github.com/cordon-run/cordon/runtime"
	"github.com/cordon-run/cordon/substrate/bwrap"
	"github.com/cordon-run/cordon/substrate/oci"
)

func init() {
	register(command{name: "oci", summary: "bundle | pod (--tool T | -- CMD ARGS...): the sandbox as an OCI runtime bundle or a Kubernetes Pod", usage: ociUsage, run: runOCI, subs: map[string]string{"bundle": "", "pod": podUsage}})
}

const ociUsage = `usage: cordon oci bundle [-w DIR] [--out DIR] [--json] (--tool T [--input JSON] | -- CMD ARGS...)
       cordon oci pod --image IMAGE [...] (--tool T [--input JSON] | -- CMD ARGS...): see cordon oci pod --help

Writes the sandbox a run would get — the admitted tool T's under its grant, or
CMD's as cordon exec --substrate oci makes it (the workspace writable, no network,
the default limits) — as an OCI runtime bundle for runc, crun, containerd and the
engines on top of them: DIR/config.json (runtime-spec), DIR/rootfs (empty: the
host's / is bound read-only onto it) and DIR/placeholders (stand-ins for absent
protected paths, bound read-only where they are; the engine leaves their mount
points in the workspace after the run). A tool's input (--input, checked against
its input_schema here) is the container's standard input, which the engine
gives. --out must not exist and must lie outside every workspace (this one, and
any directory that has been one), where a tool could rewrite the bundle before
it runs; without it
the bundle goes to a new directory of cordon's state directory. Prints the
bundle's directory.`

func runOCI(e *env, args []string) int {
	if len(args) == 0 {
		return e.usageError("cordon oci needs a subcommand\n" + ociUsage)
	}
	switch args[0] {
	case "-h", "--help":
		fmt.Fprintln(e.stdout, ociUsage)
		return exitOK
	case "bundle":
		return runOCIBundle(e, args[1:])
	case "pod":
		return runOCIPod(e, args[1:])
	}
	return e.usageError(fmt.Sprintf("unknown oci subcommand %q\n%s", args[0], ociUsage))
}

// ociFlags are the flags every oci subcommand takes: where its output
// goes and what it states.
type ociFlags struct {
	out, tool, input *string
}

func newOCIFlags(fs *pflag.FlagSet) ociFlags {
	fs.SetInterspersed(false)
	return ociFlags{
		out:   fs.String("out", "", "the output's directory (must not exist)"),
		tool:  fs.String("tool", "", "an admitted tool"),
		input: fs.String("input", "", "the tool's input: JSON, @FILE or @-"),
	}
}

// prepare admits what the flags name: the tool under its grant, or the
// command as cordon exec --substrate oci would run it. A negative code is
// success.
func (f ociFlags) prepare(e *env, fs *pflag.FlagSet, op, usage string) (*admission.Prepared, string, int) {
	if (*f.tool == "") == (fs.NArg() == 0) {
		return nil, "", e.usageError(op + " needs --tool T or -- CMD ARGS..., one of them\n" + usage)
	}
	ctx := context.Background()
	a, err := e.admitter(true, *f.tool != "")
	if err != nil {
		return nil, "", e.fail(err)
	}
	if *f.tool != "" {
		data, err := e.toolInput(*f.input, fs.Changed("input"))
		if err != nil {
			return nil, "", e.fail(err)
		}
		reg, err := e.registry()
		if err != nil {
			return nil, "", e.fail(err)
		}
		p, err := a.Prepare(ctx, reg, *f.tool, data)
		if err != nil {
			var hc *admission.HostChangedError
			if errors.As(err, &hc) {
				return nil, "", e.refuse(op, *f.tool, hc.Refusal)
			}
			return nil, "", e.fail(err)
		}
		return p, a.Workspace(), -1
	}
	set, code := e.execCapabilities(false, oci.Name, defaultExecTimeout, capture.FormatSize(defaultExecOutput), "none",
		capture.FormatSize(bwrap.DefaultTmpSize), nil, "", 0, 0)
	if code >= 0 {
		return nil, "", code
	}
	p, err := a.PrepareCommand(ctx, admission.Command{Argv: fs.Args(), Capabilities: set, Substrate: oci.Name})
	if err != nil {
		return nil, "", e.refuse(op, fs.Arg(0), err)
	}
	return p, a.Workspace(), -1
}

func runOCIBundle(e *env, args []string) int {
	fs := e.flags("oci bundle")
	f := newOCIFlags(fs)
	if code := e.parse(fs, args, ociUsage); code >= 0 {
		return code
	}
	p, ws, code := f.prepare(e, fs, "bundle", ociUsage)
	if code >= 0 {
		return code
	}
	dir, err := e.outDir(*f.out, ws, "bundles", "bundle")
	if err != nil {
		return e.fail(err)
	}
	rt := runtime.New(runtime.Config{})
	defer rt.Close()
	n, err := rt.Bundle(p, dir)
	if err != nil {
		return e.fail(err)
	}
	if e.json {
		e.printJSON(map[string]any{"bundle": dir, "placeholders": n, "substrate": p.Grant.Substrate, "capabilities": capabilitiesOf(p.Grant.All())})
		return exitOK
	}
	fmt.Fprintln(e.stdout, dir)
	return exitOK
}

const podUsage = `usage: cordon oci pod [-w DIR] [--out DIR] [--json] --image IMAGE [--name NAME]
       [--namespace NS] [--runtime-class NAME] [--claim PVC] [--host-users]
       (--tool T [--input JSON] | -- CMD ARGS...)

Renders the same sandbox as cordon oci bundle as a Kubernetes Pod: DIR/pod.yaml
holds the Pod, a NetworkPolicy that admits nothing in or out of it (net:none)
and, when a protected file is absent, a ConfigMap of its stand-in;
DIR/seccomp/NAME.json is the sandbox's seccomp filter, which the Pod names as a
Localhost profile: copy it into the kubelet's seccomp directory
(/var/lib/kubelet/seccomp) of every node. IMAGE stands for the host's /, read-only;
the workspace is the node's directory of the same path (hostPath) or, with
--claim, a PersistentVolumeClaim holding it; the Pod runs as the workspace's
owner, in a user namespace of its own unless --host-users, under a
--runtime-class (gVisor, Kata) if given. What the Pod cannot enforce (a process
limit, processor time, the output cap) is printed as "unenforced:" lines (in
--json, "unenforced"). --out as for cordon oci bundle. Prints the directory.`

func runOCIPod(e *env, args []string) int {
	fs := e.flags("oci pod")
	f := newOCIFlags(fs)
	o := oci.PodOptions{}
	fs.StringVar(&o.Image, "image", "", "the container image: stands for the host's /")
	fs.StringVar(&o.Name, "name", "", "the Pod's name (a DNS label); cordon-CMD-RANDOM if empty")
	fs.StringVar(&o.Namespace, "namespace", "", "the Pod's namespace")
	fs.StringVar(&o.RuntimeClass, "runtime-class", "", "the runtime class (gVisor, Kata)")
	fs.StringVar(&o.Claim, "claim", "", "the PersistentVolumeClaim holding the workspace; the node's directory if empty")
	fs.BoolVar(&o.HostUsers, "host-users", false, "run in the node's user namespace, not one of the Pod's own")
	if code := e.parse(fs, args, podUsage); code >= 0 {
		return code
	}
	if o.Image == "" {
		return e.usageError("oci pod needs --image: the image stands for the host's / and has no default\n" + podUsage)
	}
	if o.Name != "" && !dnsLabel(o.Name) {
		return e.usageError(fmt.Sprintf("--name %q is not a DNS label (at most 63 of a-z, 0-9 and '-', a letter or digit at each end)", o.Name))
	}
	p, ws, code := f.prepare(e, fs, "pod", podUsage)
	if code >= 0 {
		return code
	}
	h, err := e.harnessConfig()
	if err != nil {
		return e.fail(err)
	}
	helper, err := kubeHelper(ws, h)
	if err != nil {
		return e.refuse("pod", "cordon-kube", err)
	}
	if o.Name == "" {
		base := *f.tool
		if base == "" {
			base = filepath.Base(fs.Arg(0))
		}
		o.Name = podName(base)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(ws, &st); err != nil {
		return e.fail(err)
	}
	o.UID, o.GID = int64(st.Uid), int64(st.Gid)
	dir, err := e.outDir(*f.out, ws, "pods", "pod")
	if err != nil {
		return e.fail(err)
	}
	rt := runtime.New(runtime.Config{})
	defer rt.Close()
	in, err := rt.Portable(p)
	if err != nil {
		return e.fail(err)
	}
	resp, err := renderPod(helper, oci.PodRequest{Sandbox: in, Options: o, Out: dir})
	if err != nil {
		return e.fail(err)
	}
	if e.json {
		e.printJSON(map[string]any{"dir": resp.Dir, "pod": resp.Pod, "seccomp": resp.Seccomp, "unenforced": resp.Unenforced,
			"substrate": p.Grant.Substrate, "capabilities": capabilitiesOf(p.Grant.All())})
		return exitOK
	}
	for _, u := range resp.Unenforced {
		fmt.Fprintln(e.stderr, "unenforced:", u)
	}
	fmt.Fprintln(e.stdout, resp.Dir)
	return exitOK
}

// EnvKube names the cordon-kube program; without it, cordon runs the one
// beside its own executable.
const EnvKube = "CORDON_KUBE"

// kubeHelper returns the cordon-kube program to run: $CORDON_KUBE or the
// one beside cordon, refused (a SandboxUnavailable) unless it is a
// program only root or this user could have put there, outside the
// workspace ws and any workspace's harness state.
func kubeHelper(ws string, h harness.Config) (string, error) {
	bin := os.Getenv(EnvKube)
	if bin == "" {
		self, err := os.Executable()
		if err != nil {
			return "", refusal.Errorf(refusal.SandboxUnavailable, "cordon oci pod: cannot find cordon's own executable, beside which cordon-kube is: %v", err)
		}
		bin = filepath.Join(filepath.Dir(self), "cordon-kube")
	}
	if _, err := os.Stat(bin); err != nil {
		return "", refusal.Errorf(refusal.SandboxUnavailable, "cordon oci pod runs cordon-kube, the Pod renderer, and there is none at %s (%v): build it beside cordon (go build -o bin/ ./cmd/...) or name it in $%s", bin, err, EnvKube)
	}
	return bwrap.TrustedProgram(bin, ws, h)
}

// renderPod runs cordon-kube on req and returns what it wrote.
func renderPod(helper string, req oci.PodRequest) (*oci.PodResponse, error) {
	data, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := exec.CommandContext(ctx, helper, "render")
	c.Stdin = bytes.NewReader(data)
	c.Env = []string{}
	var stdout, stderr bytes.Buffer
	c.Stdout, c.Stderr = &stdout, &stderr
	runErr := c.Run()
	var failed struct{ Error, Message string }
	if runErr != nil {
		if json.Unmarshal(stdout.Bytes(), &failed) == nil && failed.Message != "" {
			return nil, refusal.Errorf(refusal.CapabilityRefused, "cordon oci pod: %s", failed.Message)
		}
		return nil, fmt.Errorf("cordon-kube %s: %v: %s", helper, runErr, bytes.TrimSpace(capped(stderr.Bytes(), 4096)))
	}
	var resp oci.PodResponse
	if err := json.Unmarshal(stdout.Bytes(), &resp); err != nil || resp.Dir != req.Out || resp.Pod == "" {
		return nil, fmt.Errorf("cordon-kube %s answered %q (%v)", helper, capped(stdout.Bytes(), 4096), err)
	}
	return &resp, nil
}

func capped(b []byte, n int) []byte {
	if len(b) > n {
		return b[:n]
	}
	return b
}

// dnsLabel reports whether s is a DNS label (RFC 1123), as a Pod's name.
func dnsLabel(s string) bool {
	if s == "" || len(s) > 63 || s[0] == '-' || s[len(s)-1] == '-' {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-') {
			return false
		}
	}
	return true
}

// podName is a Pod name for base: cordon-BASE-RANDOM, base reduced to a
// DNS label's characters.
func podName(base string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(base) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
		case b.Len() > 0 && !strings.HasSuffix(b.String(), "-"):
			b.WriteByte('-')
		}
	}
	name := strings.Trim(b.String(), "-")
	if len(name) > 40 {
		name = strings.Trim(name[:40], "-")
	}
	var rnd [3]byte
	rand.Read(rnd[:])
	if name == "" {
		return "cordon-" + hex.EncodeToString(rnd[:])
	}
	return "cordon-" + name + "-" + hex.EncodeToString(rnd[:])
}

// outDir is where a bundle or a pod goes: out, which must not exist nor
// lie in the workspace ws, or a new directory PREFIX-RANDOM of the state
// directory's sub.
func (e *env) outDir(out, ws, sub, prefix string) (string, error) {
	if out == "" {
		h, err := e.harnessConfig()
		if err != nil {
			return "", err
		}
		base, err := userdir.EnsurePath(h.StateDir(), sub)
		if err != nil {
			return "", err
		}
		var rnd [6]byte
		rand.Read(rnd[:])
		return filepath.Join(base, prefix+"-"+hex.EncodeToString(rnd[:])), nil
	}
	abs, err := filepath.Abs(out)
	if err != nil {
		return "", err
	}
	parent, err := filepath.EvalSymlinks(filepath.Dir(abs))
	if err != nil {
		return "", refusal.Errorf(refusal.NotFound, "--out %s: its parent directory: %v", out, err)
	}
	abs = filepath.Join(parent, filepath.Base(abs))
	if abs == ws || strings.HasPrefix(abs, ws+string(filepath.Separator)) {
		return "", refusal.Errorf(refusal.UsageError, "--out %s lies inside the workspace %s, where a tool could rewrite the bundle before it runs; give a directory outside it", abs, ws)
	}
	h, err := e.harnessConfig()
	if err != nil {
		return "", err
	}
	if w, ok := bwrap.WithinAWorkspace(parent, h); ok {
		return "", refusal.Errorf(refusal.UsageError, "--out %s lies inside %s, a workspace where sandboxed commands may have run and may run again before the output is used; give a directory outside every workspace", abs, w)
	}
	if _, err := os.Lstat(abs); err == nil {
		return "", refusal.Errorf(refusal.UsageError, "--out %s exists; the output goes to a new directory", abs)
	}
	return abs, nil
}

// capabilitiesOf lists a set's capabilities as strings.
func capabilitiesOf(set capabilities.Set) []string {
	var out []string
	for _, c := range set.All() {
		out = append(out, c.String())
	}
	return out
}
