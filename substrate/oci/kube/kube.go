// Package kube renders a native sandbox as a Kubernetes Pod: the cluster
// path of the oci substrate. It starts from the runtime-spec configuration
// [oci.Spec] makes of the sandbox — the policy stated once — and says
// each part of it in the Pod's terms, built with the Kubernetes API's Go
// types: the image is the host's / (read-only: readOnlyRootFilesystem),
// the workspace a volume (a hostPath of the node's or a claim), each
// protected path in it a read-only mount of the same volume (subPath) or,
// where it is absent, a read-only empty stand-in, each tmpfs an emptyDir
// in memory with its size, no capability, allowPrivilegeEscalation
// false, the sandbox's seccomp filter as a Localhost profile, the memory
// limit as the container's resources, the time limit as
// activeDeadlineSeconds, and net:none as a NetworkPolicy that admits
// nothing in or out. What the Pod cannot state is listed in
// [Manifest.Unenforced], never dropped in silence: a rendering that
// cannot state a mount fails.
//
// # Limitations
//
// The image is not the host: a command finds the image's programs, not
// the host's, and the host's paths of a read-only bind outside the
// workspace are the node's (hostPath). A Pod has no process limit of its
// own (the kubelet's podPidsLimit is the node's), no processor-time limit
// and no output cap; /dev is the runtime's tmpfs, writable; the read-only
// /proc/sys and the rest of bwrap's read-only /proc are the runtime's
// defaults for an unprivileged container (procMount Default). A
// NetworkPolicy is enforced only where the cluster's network plugin
// enforces it. The seccomp profile has to be on every node, in the
// kubelet's seccomp directory, under [Manifest.SeccompName].
package kube

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"

	"github.com/cordon-run/cordon/substrate/bwrap"
	"github.com/cordon-run/cordon/substrate/oci"
)

// Label names the Pod for its NetworkPolicy.
const Label = "cordon.run/pod"

// Options are what the cluster needs beyond the sandbox.
type Options = oci.PodOptions

// A Manifest is a sandbox rendered for a cluster: the Pod, the objects it
// needs, its seccomp profile and what it cannot enforce.
type Manifest struct {
	Pod *corev1.Pod
	// NetworkPolicy admits nothing in or out of the Pod: net:none.
	NetworkPolicy *networkingv1.NetworkPolicy
	// ConfigMap holds the stand-ins of absent protected files; nil if
	// there are none. ToolFiles holds an admitted tool's files; nil for a
	// command.
	ConfigMap, ToolFiles *corev1.ConfigMap
	// SeccompName is the profile's file name in the kubelet's seccomp
	// directory (named by its digest); Seccomp the profile, JSON.
	SeccompName string
	Seccomp     []byte
	// Unenforced lists what of the grant the Pod does not enforce.
	Unenforced []string
}

// Render returns the Manifest of the sandbox in: its command, under its
// time limit (activeDeadlineSeconds), reading a tool's input on a
// standard input the caller attaches.
func Render(in *oci.Portable, o Options) (*Manifest, error) {
	if o.Image == "" {
		return nil, fmt.Errorf("kube: no image: it stands for the host's / and has no default")
	}
	if msgs := validation.IsDNS1123Label(o.Name); len(msgs) > 0 {
		return nil, fmt.Errorf("kube: the Pod's name %q: %s", o.Name, strings.Join(msgs, "; "))
	}
	s, ws := in.Spec, in.Workspace
	if s == nil || s.Process == nil || s.Linux == nil || len(s.Mounts) == 0 || ws == "" {
		return nil, fmt.Errorf("kube: the sandbox states no configuration or no workspace")
	}
	if s.Linux.UIDMappings != nil {
		// The Pod's user namespace is hostUsers', the command's uid
		// runAsUser's: a configuration rendered as root's.
		return nil, fmt.Errorf("kube: the sandbox's configuration maps users (rendered for a rootless runtime)")
	}
	m := &Manifest{}
	c := corev1.Container{
		Name:       "tool",
		Image:      o.Image,
		Command:    escapeAll(s.Process.Args),
		WorkingDir: s.Process.Cwd,
		Stdin:      in.Input,
		StdinOnce:  in.Input,
	}
	for _, kv := range s.Process.Env {
		k, v, _ := strings.Cut(kv, "=")
		c.Env = append(c.Env, corev1.EnvVar{Name: k, Value: escape(v)})
	}
	vols, mounts, cm, err := volumes(s, ws, in.Placeholders, o)
	if err != nil {
		return nil, err
	}
	if in.ToolDir != "" {
		// The tool's files are a host path the command names: shipped as a
		// ConfigMap, mounted read-only where they are on the host.
		files, v, err := toolFiles(in, o)
		if err != nil {
			return nil, err
		}
		m.ToolFiles = files
		vols = append(vols, v)
		mounts = append(mounts, corev1.VolumeMount{Name: v.Name, MountPath: in.ToolDir, ReadOnly: true})
	}
	vols, mounts = lastPerPath(vols, mounts)
	// A mount point below a read-only empty directory cannot be made
	// (the runtime mounts by depth, each read-only at once): such a
	// directory is writable — the Pod's own, never the workspace's.
	for i, vm := range mounts {
		v := vols[slices.IndexFunc(vols, func(v corev1.Volume) bool { return v.Name == vm.Name })]
		if vm.ReadOnly && v.EmptyDir != nil && slices.ContainsFunc(mounts, func(o corev1.VolumeMount) bool {
			return within(o.MountPath, vm.MountPath) && o.MountPath != vm.MountPath
		}) {
			mounts[i].ReadOnly = false
			m.Unenforced = append(m.Unenforced, fmt.Sprintf("a read-only %s (an empty directory of the Pod's own, writable: a mount below it needs its mount point made)", vm.MountPath))
		}
	}
	c.VolumeMounts = mounts
	if len(cm) > 0 {
		m.ConfigMap = &corev1.ConfigMap{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
			ObjectMeta: meta(o.Name+"-placeholders", o),
			Data:       cm,
		}
	}

	filter, err := json.MarshalIndent(s.Linux.Seccomp, "", "  ")
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(filter)
	m.Seccomp = append(filter, '\n')
	m.SeccompName = "cordon-" + hex.EncodeToString(sum[:8]) + ".json"
	profile := &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeLocalhost, LocalhostProfile: ptr(m.SeccompName)}
	procMount := corev1.DefaultProcMount
	c.SecurityContext = &corev1.SecurityContext{
		Privileged:               ptr(false),
		AllowPrivilegeEscalation: ptr(false),
		ReadOnlyRootFilesystem:   ptr(true),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		SeccompProfile:           profile,
		ProcMount:                &procMount,
	}

	lp := in.Limits
	if mem := lp.Memory; mem > 0 {
		q := *resource.NewQuantity(mem, resource.BinarySI)
		c.Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: q}
		c.Resources.Requests = corev1.ResourceList{corev1.ResourceMemory: q}
	}
	if lp.Pids > 0 {
		m.Unenforced = append(m.Unenforced, fmt.Sprintf("pids:%d (a Pod has no process limit of its own: the kubelet's podPidsLimit is the node's)", lp.Pids))
	}
	if lp.CPU > 0 {
		m.Unenforced = append(m.Unenforced, fmt.Sprintf("cpu:%s of processor time (a Pod limits a rate of CPU, not an amount)", lp.CPU))
	}
	m.Unenforced = append(m.Unenforced,
		"the output cap (the kubelet keeps and rotates the container's log)",
		"a read-only /dev, /etc/hosts and /dev/termination-log (the runtime's and the kubelet's, writable, the Pod's own)",
		"the cleared environment in full (the image's ENV and the kubelet's KUBERNETES_SERVICE_* come on top)",
		"net:none in full (a NetworkPolicy: enforced only by a network plugin that implements it, added to the namespace's other policies — one that allows egress, DNS say, allows it here — and never to the node; apply it before the Pod, or deny with an AdminNetworkPolicy on "+Label+")",
		"the protected set as the node sees the workspace (it is the rendering machine's: a path git's configuration names there, or a symlink, differs on another tree)")
	if in.Input {
		m.Unenforced = append(m.Unenforced, "the tool's input_schema on what is attached (cordon checked only --input)")
	}
	if o.RuntimeClass != "" {
		m.Unenforced = append(m.Unenforced, "seccomp where the runtime class ignores it (gVisor unless runsc runs with --oci-seccomp; Kata with disable_guest_seccomp)")
	}

	pod := &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: meta(o.Name, o),
		Spec: corev1.PodSpec{
			Containers:                    []corev1.Container{c},
			Volumes:                       vols,
			RestartPolicy:                 corev1.RestartPolicyNever,
			AutomountServiceAccountToken:  ptr(false),
			EnableServiceLinks:            ptr(false),
			TerminationGracePeriodSeconds: ptr(int64(1)),
			Hostname:                      s.Hostname,
			HostUsers:                     ptr(o.HostUsers),
			SecurityContext: &corev1.PodSecurityContext{
				RunAsUser:      ptr(o.UID),
				RunAsGroup:     ptr(o.GID),
				RunAsNonRoot:   ptr(o.UID != 0),
				SeccompProfile: profile,
			},
		},
	}
	pod.Labels[Label] = o.Name
	if o.RuntimeClass != "" {
		pod.Spec.RuntimeClassName = ptr(o.RuntimeClass)
	}
	if in.Timeout > 0 {
		pod.Spec.ActiveDeadlineSeconds = ptr(int64(math.Ceil(in.Timeout.Seconds())))
	} else {
		m.Unenforced = append(m.Unenforced, "a time limit (the grant has none)")
	}
	m.Pod = pod

	if !slices.ContainsFunc(s.Linux.Namespaces, func(n specs.LinuxNamespace) bool { return n.Type == specs.NetworkNamespace }) {
		return nil, fmt.Errorf("kube: the sandbox shares the host's network, which a Pod's network does not state")
	}
	m.NetworkPolicy = &networkingv1.NetworkPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "NetworkPolicy"},
		ObjectMeta: meta(o.Name+"-no-network", o),
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{Label: o.Name}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress},
		},
	}
	return m, nil
}

// volumes states the spec's mounts, after its read-only root, as the
// Pod's volumes and the container's mounts, and returns the ConfigMap
// data of the file placeholders. A mount it cannot state is an error.
func volumes(s *specs.Spec, ws string, held []bwrap.Placeholder, o Options) ([]corev1.Volume, []corev1.VolumeMount, map[string]string, error) {
	readOnly := map[string]bool{}
	for _, p := range s.Linux.ReadonlyPaths {
		readOnly[p] = true
	}
	stand := map[string]bwrap.Placeholder{}
	for _, p := range held {
		stand[p.Path] = p
	}
	var vols []corev1.Volume
	var mounts []corev1.VolumeMount
	data := map[string]string{}
	wsVolume := false
	add := func(v corev1.Volume, m corev1.VolumeMount) {
		v.Name = fmt.Sprintf("%s-%d", v.Name, len(vols))
		m.Name = v.Name
		vols = append(vols, v)
		mounts = append(mounts, m)
	}
	const wsName = "workspace"
	for i, mt := range s.Mounts {
		ro := slices.Contains(mt.Options, "ro")
		switch {
		case i == 0:
			// The host's / read-only: the image, readOnlyRootFilesystem.
		case mt.Type == "proc" || mt.Type == "devpts" || mt.Destination == "/dev":
			// The runtime's own /proc and /dev.
		case mt.Type == "tmpfs" && within(mt.Destination, "/sys"):
			// What hides the host's network interfaces in the host's /sys:
			// a Pod's /sys is a sysfs of the runtime's, mounted in the
			// Pod's own network namespace, which lists its interfaces
			// alone.
		case strings.Contains(mt.Destination, ":"):
			return nil, nil, nil, fmt.Errorf("kube: cannot state the mount on %s: a Pod's mount path has no ':'", mt.Destination)
		case mt.Type == "tmpfs" && readOnly[mt.Destination] && !within(mt.Destination, ws):
			// What hides the host's homes, service sockets and cordon's
			// state: the image holds none of the host's.
		case mt.Type == "tmpfs":
			v := corev1.Volume{Name: "tmpfs", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}}}
			for _, opt := range mt.Options {
				if size, ok := strings.CutPrefix(opt, "size="); ok {
					n, err := strconv.ParseInt(size, 10, 64)
					if err != nil {
						return nil, nil, nil, fmt.Errorf("kube: tmpfs %s: size %q", mt.Destination, size)
					}
					v.EmptyDir.SizeLimit = resource.NewQuantity(n, resource.BinarySI)
				}
			}
			add(v, corev1.VolumeMount{MountPath: mt.Destination, ReadOnly: readOnly[mt.Destination]})
		case mt.Type != "bind" || mt.Source != mt.Destination:
			return nil, nil, nil, fmt.Errorf("kube: cannot state the mount of %s on %s (%s)", mt.Source, mt.Destination, mt.Type)
		default:
			if p, ok := stand[mt.Source]; ok {
				if p.Dir {
					add(corev1.Volume{Name: "placeholder", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{
						Medium: corev1.StorageMediumMemory, SizeLimit: resource.NewQuantity(4096, resource.BinarySI)}}},
						corev1.VolumeMount{MountPath: mt.Destination, ReadOnly: true})
					continue
				}
				key := fmt.Sprintf("placeholder-%d", len(data))
				data[key] = p.Content
				add(corev1.Volume{Name: "placeholder", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
					LocalObjectReference: corev1.LocalObjectReference{Name: o.Name + "-placeholders"},
					Items:                []corev1.KeyToPath{{Key: key, Path: key, Mode: ptr(int32(0o444))}},
				}}}, corev1.VolumeMount{MountPath: mt.Destination, SubPath: key, ReadOnly: true})
				continue
			}
			rel, err := filepath.Rel(ws, mt.Source)
			if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
				if !ro {
					return nil, nil, nil, fmt.Errorf("kube: cannot state the writable bind of %s outside the workspace", mt.Source)
				}
				typ := corev1.HostPathDirectory
				if st, err := os.Stat(mt.Source); err == nil && !st.IsDir() {
					typ = corev1.HostPathFile
				}
				add(corev1.Volume{Name: "host", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: mt.Source, Type: ptr(typ)}}},
					corev1.VolumeMount{MountPath: mt.Destination, ReadOnly: true, RecursiveReadOnly: ptr(corev1.RecursiveReadOnlyEnabled)})
				continue
			}
			if !wsVolume {
				src := corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: ws, Type: ptr(corev1.HostPathDirectory)}}
				if o.Claim != "" {
					src = corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: o.Claim}}
				}
				vols = append(vols, corev1.Volume{Name: wsName, VolumeSource: src})
				wsVolume = true
			}
			m := corev1.VolumeMount{Name: wsName, MountPath: mt.Destination, ReadOnly: ro}
			if ro {
				m.RecursiveReadOnly = ptr(corev1.RecursiveReadOnlyEnabled) // rro, as the bundle's
			}
			if rel != "." {
				m.SubPath = filepath.ToSlash(rel)
			}
			mounts = append(mounts, m)
		}
	}
	for p := range readOnly {
		switch {
		case within(p, "/sys"):
			// The runtime's sysfs, read-only in every unprivileged
			// container; hidden above.
		case p == "/dev", strings.HasPrefix(p, "/proc/"):
			// The runtime's: Unenforced names /dev; /proc/sys,
			// /proc/sysrq-trigger, /proc/irq and /proc/bus are read-only in
			// every unprivileged container (procMount Default).
			if p != "/dev" && !slices.Contains(runtimeReadOnly, p) {
				return nil, nil, nil, fmt.Errorf("kube: cannot state the read-only %s", p)
			}
		case !within(p, ws):
			// Omitted above: a host directory the image does not hold.
			if !slices.ContainsFunc(s.Mounts, func(m specs.Mount) bool { return m.Destination == p && m.Type == "tmpfs" }) {
				return nil, nil, nil, fmt.Errorf("kube: cannot state the read-only %s", p)
			}
		case !slices.ContainsFunc(mounts, func(m corev1.VolumeMount) bool { return m.MountPath == p && m.ReadOnly }):
			return nil, nil, nil, fmt.Errorf("kube: cannot state the read-only %s", p)
		}
	}
	if len(data) == 0 {
		data = nil
	}
	return vols, mounts, data, nil
}

// maxConfigMap is what a ConfigMap may hold: the API server refuses one
// over 1 MiB.
const maxConfigMap = 1 << 20

// toolFiles returns the ConfigMap of the tool's files and the volume that
// mounts them, each file with its mode (0555 for a program, 0444 else).
func toolFiles(in *oci.Portable, o Options) (*corev1.ConfigMap, corev1.Volume, error) {
	cm := &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: meta(o.Name+"-tool", o),
		BinaryData: map[string][]byte{},
	}
	v := corev1.Volume{Name: "tool-files", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
		LocalObjectReference: corev1.LocalObjectReference{Name: cm.Name}, DefaultMode: ptr(int32(0o444)),
	}}}
	size := 0
	for i, f := range in.ToolFiles {
		if f.Path == "" || path.IsAbs(f.Path) || path.Clean(f.Path) != f.Path || slices.ContainsFunc(strings.Split(f.Path, "/"), func(e string) bool { return strings.HasPrefix(e, "..") }) {
			return nil, v, fmt.Errorf("kube: the tool's file %q is not a path inside its folder", f.Path)
		}
		key := fmt.Sprintf("file-%d", i)
		cm.BinaryData[key] = f.Data
		mode := int32(0o444)
		if f.Exec {
			mode = 0o555
		}
		v.ConfigMap.Items = append(v.ConfigMap.Items, corev1.KeyToPath{Key: key, Path: f.Path, Mode: ptr(mode)})
		size += len(f.Data)
	}
	if size > maxConfigMap-64<<10 {
		return nil, v, fmt.Errorf("kube: the tool's files (%d bytes) do not fit a ConfigMap (1 MiB); build an image that holds them at %s", size, in.ToolDir)
	}
	return cm, v, nil
}

// lastPerPath keeps the last mount at each path — what the command sees
// there, as in bwrap's order; a Pod holds one mount per path — and the
// volumes those mounts use.
func lastPerPath(vols []corev1.Volume, mounts []corev1.VolumeMount) ([]corev1.Volume, []corev1.VolumeMount) {
	var kept []corev1.VolumeMount
	used := map[string]bool{}
	for i := len(mounts) - 1; i >= 0; i-- {
		if !slices.ContainsFunc(kept, func(m corev1.VolumeMount) bool { return m.MountPath == mounts[i].MountPath }) {
			kept = append(kept, mounts[i])
			used[mounts[i].Name] = true
		}
	}
	slices.Reverse(kept)
	return slices.DeleteFunc(vols, func(v corev1.Volume) bool { return !used[v.Name] }), kept
}

// runtimeReadOnly are the paths containerd and CRI-O make read-only in
// every unprivileged container.
var runtimeReadOnly = []string{"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"}

// within reports whether p is dir or below it.
func within(p, dir string) bool { return p == dir || strings.HasPrefix(p, dir+"/") }

// meta is the object metadata of name: the namespace and cordon's labels.
func meta(name string, o Options) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Namespace: o.Namespace,
		Labels: map[string]string{"app.kubernetes.io/managed-by": "cordon"}}
}

// escape keeps the kubelet from expanding $(VAR) in s: "$$" is a "$".
func escape(s string) string { return strings.ReplaceAll(s, "$", "$$") }

func escapeAll(in []string) []string {
	out := make([]string, len(in))
	for i, s := range in {
		out[i] = escape(s)
	}
	return out
}

func ptr[T any](v T) *T { return &v }

// YAML returns the manifest's objects as one YAML stream: the
// NetworkPolicy, the Pod, then the ConfigMaps of stand-ins and of the tool's files
// where there are any.
func (m *Manifest) YAML() ([]byte, error) {
	var out []byte
	// The policy first: a Pod created before the network plugin has
	// taken in its policy may start unprotected.
	objs := []any{m.NetworkPolicy, m.Pod}
	for _, cm := range []*corev1.ConfigMap{m.ConfigMap, m.ToolFiles} {
		if cm != nil {
			objs = append(objs, cm)
		}
	}
	for i, o := range objs {
		b, err := yaml.Marshal(o)
		if err != nil {
			return nil, err
		}
		if i > 0 {
			out = append(out, "---\n"...)
		}
		out = append(out, b...)
	}
	return out, nil
}

// Write writes the manifest to dir, which must not exist: dir/pod.yaml
// and dir/seccomp/SeccompName, the profile to copy into the kubelet's
// seccomp directory of every node. A manifest that cannot be written
// whole is removed.
func (m *Manifest) Write(dir string) (err error) {
	y, err := m.YAML()
	if err != nil {
		return err
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		return fmt.Errorf("kube: cannot make the manifest's directory: %w", err)
	}
	defer func() {
		if err != nil {
			os.RemoveAll(dir)
		}
	}()
	if err := os.Mkdir(filepath.Join(dir, "seccomp"), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "seccomp", m.SeccompName), m.Seccomp, 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "pod.yaml"), y, 0o644)
}
