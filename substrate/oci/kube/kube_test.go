package kube

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"

	"github.com/cordon-run/cordon/harness"
	"github.com/cordon-run/cordon/internal/limits"
	"github.com/cordon-run/cordon/internal/testenv"
	"github.com/cordon-run/cordon/substrate/bwrap"
	"github.com/cordon-run/cordon/substrate/oci"
)

var testHarness harness.Config

func TestMain(m *testing.M) { testenv.Main(m, &testHarness) }

// sandbox returns the prepared sandbox of a writable workspace holding a
// git repository (its protected paths present and absent), under a
// memory and a process limit, until the test ends.
func sandbox(t *testing.T) (*bwrap.Sandbox, string) {
	t.Helper()
	ws, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(ws, 0o755)
	if out, err := exec.Command("git", "init", "-q", ws).CombinedOutput(); err != nil {
		t.Skipf("git init: %v %s", err, out)
	}
	plan, err := limits.Detect().Plan(limits.Spec{Memory: 256 << 20, Pids: 64})
	if err != nil {
		t.Fatal(err)
	}
	sb, err := bwrap.NewPolicy(ws, testHarness).WithLimits(plan).WithEnv("PRICE").Prepare(append(os.Environ(), "PRICE=$(HOME) and $5"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sb.Close() })
	return sb, ws
}

// portable is the sandbox sb of argv as Render takes it, through JSON as
// cordon hands it to cordon-kube.
func portable(t *testing.T, sb *bwrap.Sandbox, argv []string) *oci.Portable {
	t.Helper()
	in, err := oci.PortableOf(sb, argv, oci.Options{})
	if err != nil {
		t.Fatal(err)
	}
	data, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	var back oci.Portable
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	return &back
}

// decode reads a YAML stream's documents strictly into objs: a field the
// Kubernetes API types do not have is an error.
func decode(t *testing.T, stream []byte, objs ...any) {
	t.Helper()
	docs := bytes.Split(stream, []byte("\n---\n"))
	if len(docs) != len(objs) {
		t.Fatalf("%d documents, want %d:\n%s", len(docs), len(objs), stream)
	}
	for i, d := range docs {
		if err := yaml.UnmarshalStrict(d, objs[i]); err != nil {
			t.Fatalf("document %d does not read into %T: %v\n%s", i, objs[i], err, d)
		}
	}
}

// checkPod is the part of the API server's validation of a Pod that its
// types do not carry: names, references, paths, quantities.
func checkPod(t *testing.T, p *corev1.Pod) {
	t.Helper()
	for _, msg := range validation.IsDNS1123Subdomain(p.Name) {
		t.Errorf("pod name %q: %s", p.Name, msg)
	}
	for k, v := range p.Labels {
		for _, msg := range append(validation.IsQualifiedName(k), validation.IsValidLabelValue(v)...) {
			t.Errorf("label %s=%s: %s", k, v, msg)
		}
	}
	vols := map[string]corev1.Volume{}
	for _, v := range p.Spec.Volumes {
		for _, msg := range validation.IsDNS1123Label(v.Name) {
			t.Errorf("volume %q: %s", v.Name, msg)
		}
		if _, dup := vols[v.Name]; dup {
			t.Errorf("volume %q twice", v.Name)
		}
		vols[v.Name] = v
		if e := v.EmptyDir; e != nil && e.SizeLimit != nil && e.SizeLimit.Sign() <= 0 {
			t.Errorf("volume %q: size limit %s", v.Name, e.SizeLimit)
		}
	}
	if len(p.Spec.Containers) != 1 {
		t.Fatalf("%d containers, want 1", len(p.Spec.Containers))
	}
	c := p.Spec.Containers[0]
	used := map[string]bool{}
	paths := map[string]bool{}
	for _, m := range c.VolumeMounts {
		v, ok := vols[m.Name]
		if !ok {
			t.Errorf("mount of %s names no volume (%q)", m.MountPath, m.Name)
		}
		used[m.Name] = true
		if !path.IsAbs(m.MountPath) || path.Clean(m.MountPath) != m.MountPath || strings.Contains(m.MountPath, ":") {
			t.Errorf("mount path %q", m.MountPath)
		}
		if paths[m.MountPath] {
			t.Errorf("mount path %q twice", m.MountPath)
		}
		paths[m.MountPath] = true
		if m.SubPath != "" && (path.IsAbs(m.SubPath) || slices.Contains(strings.Split(m.SubPath, "/"), "..")) {
			t.Errorf("subPath %q of %s", m.SubPath, m.MountPath)
		}
		if cm := v.ConfigMap; cm != nil && m.SubPath != "" && !slices.ContainsFunc(cm.Items, func(k corev1.KeyToPath) bool { return k.Path == m.SubPath }) {
			t.Errorf("subPath %q of the ConfigMap volume %q is none of its items", m.SubPath, m.Name)
		}
	}
	for name := range vols {
		if !used[name] {
			t.Errorf("volume %q is mounted nowhere", name)
		}
	}
	for _, e := range c.Env {
		for _, msg := range validation.IsEnvVarName(e.Name) {
			t.Errorf("env %q: %s", e.Name, msg)
		}
	}
	for name, q := range c.Resources.Limits {
		if r, ok := c.Resources.Requests[name]; ok && r.Cmp(q) > 0 {
			t.Errorf("%s: request %s over limit %s", name, r.String(), q.String())
		}
	}
}

// TestPodIsTheSandbox: the manifest of a git workspace's sandbox reads
// back strictly into the Kubernetes API types unchanged, passes the
// checks of names, references and paths, and states the sandbox field
// by field: the image read-only, the workspace the one writable volume,
// each protected path a read-only mount (of the workspace where it is, a
// stand-in where it is absent), each tmpfs an emptyDir of its size, no
// capability, no privilege escalation, the sandbox's own seccomp filter,
// the memory limit, the deadline, no network, the environment and the
// command as given (the kubelet's $(VAR) expansion escaped).
func TestPodIsTheSandbox(t *testing.T) {
	sb, ws := sandbox(t)
	argv := []string{"sh", "-c", `echo "$(HOME)" $HOME`}
	in := portable(t, sb, argv)
	in.Timeout = 90500 * time.Millisecond
	m, err := Render(in, Options{Name: "cordon-sh-1a2b", Image: "debian:stable-slim", UID: 1000, GID: 1000})
	if err != nil {
		t.Fatal(err)
	}
	stream, err := m.YAML()
	if err != nil {
		t.Fatal(err)
	}
	var pod corev1.Pod
	var np networkingv1.NetworkPolicy
	objs := []any{&np, &pod}
	var cm corev1.ConfigMap
	if m.ConfigMap != nil {
		objs = append(objs, &cm)
	}
	decode(t, stream, objs...)
	for i, o := range objs {
		want, _ := json.Marshal([]any{m.NetworkPolicy, m.Pod, m.ConfigMap}[i])
		got, _ := json.Marshal(o)
		if !bytes.Equal(want, got) {
			t.Errorf("document %d does not read back as it was written:\n%s\nread back as\n%s", i, want, got)
		}
	}
	checkPod(t, &pod)
	if pod.APIVersion != "v1" || pod.Kind != "Pod" || np.APIVersion != "networking.k8s.io/v1" || np.Kind != "NetworkPolicy" {
		t.Errorf("kinds: %s %s, %s %s", pod.APIVersion, pod.Kind, np.APIVersion, np.Kind)
	}

	s := in.Spec
	ps, c := pod.Spec, pod.Spec.Containers[0]
	sc := c.SecurityContext
	switch {
	case sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem:
		t.Errorf("the image is not read-only: %+v", sc)
	case sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation, sc.Privileged == nil || *sc.Privileged:
		t.Errorf("privilege: escalation %v, privileged %v", sc.AllowPrivilegeEscalation, sc.Privileged)
	case sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) > 0:
		t.Errorf("capabilities %+v, want all dropped", sc.Capabilities)
	case sc.ProcMount == nil || *sc.ProcMount != corev1.DefaultProcMount:
		t.Errorf("procMount %v, want Default (/proc/sys read-only)", sc.ProcMount)
	}
	for _, prof := range []*corev1.SeccompProfile{sc.SeccompProfile, ps.SecurityContext.SeccompProfile} {
		if prof == nil || prof.Type != corev1.SeccompProfileTypeLocalhost || prof.LocalhostProfile == nil || *prof.LocalhostProfile != m.SeccompName {
			t.Errorf("seccomp profile %+v, want Localhost %s", prof, m.SeccompName)
		}
	}
	var filter specs.LinuxSeccomp
	dec := json.NewDecoder(bytes.NewReader(m.Seccomp))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&filter); err != nil {
		t.Fatalf("the seccomp profile: %v", err)
	}
	if want, _ := json.Marshal(s.Linux.Seccomp); !bytes.Equal(must(json.Marshal(&filter)), want) || filter.DefaultAction == "" || len(filter.Syscalls) == 0 {
		t.Errorf("the seccomp profile is not the sandbox's filter")
	}
	psc := ps.SecurityContext
	if *psc.RunAsUser != 1000 || *psc.RunAsGroup != 1000 || !*psc.RunAsNonRoot || ps.HostUsers == nil || *ps.HostUsers {
		t.Errorf("pod security: uid %d gid %d nonroot %v hostUsers %v", *psc.RunAsUser, *psc.RunAsGroup, *psc.RunAsNonRoot, ps.HostUsers)
	}
	if ps.AutomountServiceAccountToken == nil || *ps.AutomountServiceAccountToken || ps.EnableServiceLinks == nil || *ps.EnableServiceLinks ||
		ps.HostNetwork || ps.HostPID || ps.HostIPC || ps.ShareProcessNamespace != nil || ps.RestartPolicy != corev1.RestartPolicyNever {
		t.Errorf("pod spec shares something: token %v links %v host net/pid/ipc %v %v %v restart %s",
			ps.AutomountServiceAccountToken, ps.EnableServiceLinks, ps.HostNetwork, ps.HostPID, ps.HostIPC, ps.RestartPolicy)
	}
	if ps.ActiveDeadlineSeconds == nil || *ps.ActiveDeadlineSeconds != 91 {
		t.Errorf("activeDeadlineSeconds %v, want 91 (90.5 s rounded up)", ps.ActiveDeadlineSeconds)
	}
	if q := c.Resources.Limits[corev1.ResourceMemory]; q.Cmp(resource.MustParse("256Mi")) != 0 {
		t.Errorf("memory limit %s, want 256Mi", q.String())
	}
	if !slices.ContainsFunc(m.Unenforced, func(u string) bool { return strings.HasPrefix(u, "pids:64 ") }) {
		t.Errorf("unenforced %q does not name pids:64", m.Unenforced)
	}

	// No network: a policy that selects the pod and admits nothing.
	if np.Spec.PodSelector.MatchLabels[Label] != pod.Name || pod.Labels[Label] != pod.Name ||
		!slices.Equal(np.Spec.PolicyTypes, []networkingv1.PolicyType{"Ingress", "Egress"}) || len(np.Spec.Ingress)+len(np.Spec.Egress) > 0 {
		t.Errorf("network policy %+v does not shut pod %s off", np.Spec, pod.Name)
	}

	// Command and environment, as the kubelet will give them: "$$" is "$".
	unescape := func(s string) string { return strings.ReplaceAll(s, "$$", "$") }
	var got []string
	for _, a := range c.Command {
		got = append(got, unescape(a))
	}
	if !slices.Equal(got, argv) || len(c.Args) > 0 || c.WorkingDir != ws || c.Image != "debian:stable-slim" {
		t.Errorf("command %q args %q in %s, want %q in %s", c.Command, c.Args, c.WorkingDir, argv, ws)
	}
	var env []string
	for _, e := range c.Env {
		env = append(env, e.Name+"="+unescape(e.Value))
	}
	if !slices.Equal(env, sb.Env()) || !slices.Contains(env, "PRICE=$(HOME) and $5") {
		t.Errorf("env %q, want the sandbox's %q", env, sb.Env())
	}

	// The mounts.
	vols := map[string]corev1.Volume{}
	for _, v := range ps.Volumes {
		vols[v.Name] = v
	}
	at := map[string]corev1.VolumeMount{}
	for _, vm := range c.VolumeMounts {
		at[vm.MountPath] = vm
	}
	wsm, ok := at[ws]
	if !ok || wsm.ReadOnly || wsm.SubPath != "" || vols[wsm.Name].HostPath == nil || vols[wsm.Name].HostPath.Path != ws {
		t.Fatalf("the workspace's mount %+v, volume %+v", wsm, vols[wsm.Name])
	}
	for _, vm := range c.VolumeMounts {
		if !vm.ReadOnly && vm.Name != wsm.Name && vols[vm.Name].EmptyDir == nil {
			t.Errorf("%s is writable and neither the workspace nor a tmpfs: %+v", vm.MountPath, vols[vm.Name])
		}
	}
	standIn := map[string]bwrap.Placeholder{}
	for _, p := range in.Placeholders {
		standIn[p.Path] = p
	}
	if !slices.ContainsFunc(in.Placeholders, func(p bwrap.Placeholder) bool { return strings.HasSuffix(p.Path, "/.git/commondir") && p.Content != "" }) {
		t.Errorf("the kept commondir placeholder is not a stand-in: %+v", in.Placeholders)
	}
	sawTmp, protected := false, 0
	for _, mt := range s.Mounts[1:] {
		vm, ok := at[mt.Destination]
		switch {
		case mt.Type == "proc" || mt.Type == "devpts" || mt.Destination == "/dev", mt.Type == "tmpfs" && within(mt.Destination, "/sys"):
			continue
		case mt.Type == "tmpfs" && slices.Contains(s.Linux.ReadonlyPaths, mt.Destination) && !within(mt.Destination, ws):
			// What hides the host's homes and state: the image has none.
			if ok {
				t.Errorf("the hidden %s is mounted in the pod: %+v", mt.Destination, vm)
			}
			continue
		case !ok:
			t.Errorf("the sandbox's mount of %s is not in the pod", mt.Destination)
			continue
		}
		v := vols[vm.Name]
		ro := slices.Contains(mt.Options, "ro") || slices.Contains(s.Linux.ReadonlyPaths, mt.Destination)
		if vm.ReadOnly != ro {
			t.Errorf("%s: read-only %v in the pod, %v in the sandbox", mt.Destination, vm.ReadOnly, ro)
		}
		switch {
		case mt.Type == "tmpfs":
			if v.EmptyDir == nil || v.EmptyDir.Medium != corev1.StorageMediumMemory || v.EmptyDir.SizeLimit == nil {
				t.Errorf("tmpfs %s is %+v", mt.Destination, v)
				continue
			}
			if mt.Destination == "/tmp" {
				sawTmp = true
				if v.EmptyDir.SizeLimit.Value() != sb.Policy().TmpSize() {
					t.Errorf("/tmp's size %s, want %d", v.EmptyDir.SizeLimit.String(), sb.Policy().TmpSize())
				}
			}
		case standIn[mt.Source].Path != "":
			p := standIn[mt.Source]
			if !vm.ReadOnly || p.Dir && v.EmptyDir == nil || !p.Dir && (v.ConfigMap == nil || cm.Data[vm.SubPath] != p.Content) {
				t.Errorf("the stand-in of absent %s is %+v %+v", mt.Source, vm, v)
			}
			protected++
		case mt.Destination != ws && within(mt.Source, ws):
			rel, _ := filepath.Rel(ws, mt.Source)
			if vm.Name != wsm.Name || vm.SubPath != filepath.ToSlash(rel) {
				t.Errorf("%s is %+v, want the workspace volume's subPath %s", mt.Destination, vm, rel)
			}
			if vm.ReadOnly {
				protected++
			}
		}
	}
	if !sawTmp || protected < 3 {
		t.Errorf("/tmp seen %v, %d read-only protected paths: want /tmp and the git directory's", sawTmp, protected)
	}
	if _, ok := at["/tmp/home"]; !ok {
		t.Errorf("no HOME (%s) of its own", bwrap.Home)
	}
}

// Written to a directory: pod.yaml and the profile under its name, and
// nothing else; a directory that exists is refused.
func TestManifestWrite(t *testing.T) {
	sb, _ := sandbox(t)
	in := portable(t, sb, []string{"true"})
	m, err := Render(in, Options{Name: "cordon-true", Image: "busybox", Claim: "work", Namespace: "tools", RuntimeClass: "gvisor"})
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(m.Pod.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == "workspace" })
	if i < 0 {
		t.Fatalf("no workspace volume in %+v", m.Pod.Spec.Volumes)
	}
	if v := m.Pod.Spec.Volumes[i]; v.PersistentVolumeClaim == nil || v.PersistentVolumeClaim.ClaimName != "work" {
		t.Errorf("with a claim, the workspace volume is %+v", v)
	}
	if rc := m.Pod.Spec.RuntimeClassName; rc == nil || *rc != "gvisor" || m.Pod.Namespace != "tools" || m.NetworkPolicy.Namespace != "tools" {
		t.Errorf("runtime class %v, namespaces %q %q", rc, m.Pod.Namespace, m.NetworkPolicy.Namespace)
	}
	dir := filepath.Join(t.TempDir(), "pod")
	if err := m.Write(dir); err != nil {
		t.Fatal(err)
	}
	y, _ := os.ReadFile(filepath.Join(dir, "pod.yaml"))
	if want, _ := m.YAML(); !bytes.Equal(y, want) {
		t.Errorf("pod.yaml is not the manifest")
	}
	if p, _ := os.ReadFile(filepath.Join(dir, "seccomp", m.SeccompName)); !bytes.Equal(p, m.Seccomp) {
		t.Errorf("the profile is not written under its name")
	}
	if err := m.Write(dir); err == nil {
		t.Errorf("writing over an existing directory succeeded")
	}
	if _, err := Render(in, Options{Name: "x"}); err == nil {
		t.Errorf("a pod without an image rendered")
	}
	if _, err := Render(in, Options{Name: "Not_A_Label", Image: "busybox"}); err == nil {
		t.Errorf("a pod named Not_A_Label rendered")
	}
	if m.Pod.Spec.Containers[0].Stdin || m.Pod.Spec.ActiveDeadlineSeconds != nil || !slices.ContainsFunc(m.Unenforced, func(u string) bool { return strings.HasPrefix(u, "a time limit") }) {
		t.Errorf("without input or time limit: stdin %v, deadline %v, unenforced %q", m.Pod.Spec.Containers[0].Stdin, m.Pod.Spec.ActiveDeadlineSeconds, m.Unenforced)
	}
}

// A sandbox on the host's network has no Pod: it is refused, not given
// the cluster's network.
func TestHostNetworkIsRefused(t *testing.T) {
	ws, _ := filepath.EvalSymlinks(t.TempDir())
	sb, err := bwrap.NewPolicy(ws, testHarness).WithNetwork(bwrap.NetHost).Prepare(os.Environ())
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	in, err := oci.PortableOf(sb, []string{"true"}, oci.Options{})
	if err == nil {
		_, err = Render(in, Options{Name: "x", Image: "busybox"})
	}
	if err == nil {
		t.Errorf("a net:host sandbox rendered as a pod")
	}
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}

// An admitted tool's files travel as a ConfigMap mounted read-only at its
// folder, each with its mode; a path out of the folder and files too large
// for a ConfigMap are refused.
func TestToolFilesTravelWithThePod(t *testing.T) {
	sb, _ := sandbox(t)
	in := portable(t, sb, []string{"/state/tools/t/run.sh"})
	in.ToolDir = "/state/tools/t"
	in.ToolFiles = []oci.ToolFile{{Path: "run.sh", Data: []byte("#!/bin/sh\necho hi\n"), Exec: true}, {Path: "lib/data.txt", Data: []byte{0, 1, 2}}}
	m, err := Render(in, Options{Name: "t", Image: "busybox"})
	if err != nil {
		t.Fatal(err)
	}
	stream, err := m.YAML()
	if err != nil {
		t.Fatal(err)
	}
	var pod corev1.Pod
	var np networkingv1.NetworkPolicy
	var cm, files corev1.ConfigMap
	objs := []any{&np, &pod}
	if m.ConfigMap != nil {
		objs = append(objs, &cm)
	}
	decode(t, stream, append(objs, &files)...)
	checkPod(t, &pod)
	if files.Name != "t-tool" || !bytes.Equal(files.BinaryData["file-0"], in.ToolFiles[0].Data) || !bytes.Equal(files.BinaryData["file-1"], in.ToolFiles[1].Data) {
		t.Fatalf("the tool's ConfigMap: %+v", files)
	}
	var v *corev1.Volume
	for i := range pod.Spec.Volumes {
		if cmv := pod.Spec.Volumes[i].ConfigMap; cmv != nil && cmv.Name == "t-tool" {
			v = &pod.Spec.Volumes[i]
		}
	}
	if v == nil || len(v.ConfigMap.Items) != 2 || v.ConfigMap.Items[0].Path != "run.sh" || *v.ConfigMap.Items[0].Mode != 0o555 ||
		v.ConfigMap.Items[1].Path != "lib/data.txt" || *v.ConfigMap.Items[1].Mode != 0o444 {
		t.Fatalf("the tool's volume: %+v", v)
	}
	if !slices.ContainsFunc(pod.Spec.Containers[0].VolumeMounts, func(vm corev1.VolumeMount) bool {
		return vm.Name == v.Name && vm.MountPath == "/state/tools/t" && vm.ReadOnly
	}) {
		t.Errorf("the tool's files are not mounted read-only at its folder: %+v", pod.Spec.Containers[0].VolumeMounts)
	}
	in.ToolFiles = []oci.ToolFile{{Path: "../escape", Data: []byte("x")}}
	if _, err := Render(in, Options{Name: "t", Image: "busybox"}); err == nil {
		t.Errorf("a tool file ../escape rendered")
	}
	in.ToolFiles = []oci.ToolFile{{Path: "big", Data: make([]byte, 1<<20)}}
	if _, err := Render(in, Options{Name: "t", Image: "busybox"}); err == nil || !strings.Contains(err.Error(), "ConfigMap") {
		t.Errorf("1 MiB of tool files rendered: %v", err)
	}
}

// A stand-in with another mount below it is writable (its mount point
// has to be made in it), and says so; every read-only mount of the
// workspace is recursively read-only.
func TestNestedStandInsAndRecursiveReadOnly(t *testing.T) {
	ws := "/w"
	in := &oci.Portable{Workspace: ws, Spec: &specs.Spec{
		Process: &specs.Process{Args: []string{"true"}, Cwd: ws},
		Linux:   &specs.Linux{Namespaces: []specs.LinuxNamespace{{Type: specs.NetworkNamespace}}},
		Mounts: []specs.Mount{
			{Destination: "/", Source: "/", Type: "bind", Options: []string{"rbind", "ro", "rro"}},
			{Destination: ws, Source: ws, Type: "bind", Options: []string{"rbind", "rw"}},
			{Destination: ws + "/.git/config", Source: ws + "/.git/config", Type: "bind", Options: []string{"rbind", "ro", "rro"}},
			{Destination: ws + "/a", Source: ws + "/a", Type: "bind", Options: []string{"rbind", "ro", "rro"}},
			{Destination: ws + "/a/b.cfg", Source: ws + "/a/b.cfg", Type: "bind", Options: []string{"rbind", "ro", "rro"}},
		},
	}, Placeholders: []bwrap.Placeholder{{Path: ws + "/a", Dir: true}, {Path: ws + "/a/b.cfg", Content: "x\n"}}}
	m, err := Render(in, Options{Name: "n", Image: "busybox"})
	if err != nil {
		t.Fatal(err)
	}
	checkPod(t, m.Pod)
	at := map[string]corev1.VolumeMount{}
	for _, vm := range m.Pod.Spec.Containers[0].VolumeMounts {
		at[vm.MountPath] = vm
	}
	if a := at[ws+"/a"]; a.ReadOnly || !slices.ContainsFunc(m.Unenforced, func(u string) bool { return strings.HasPrefix(u, "a read-only "+ws+"/a ") }) {
		t.Errorf("the stand-in %s/a with a mount below: %+v; unenforced %q", ws, a, m.Unenforced)
	}
	if b := at[ws+"/a/b.cfg"]; !b.ReadOnly || b.SubPath == "" {
		t.Errorf("the file stand-in below it: %+v", b)
	}
	if c := at[ws+"/.git/config"]; !c.ReadOnly || c.RecursiveReadOnly == nil || *c.RecursiveReadOnly != corev1.RecursiveReadOnlyEnabled {
		t.Errorf(".git/config: %+v, want recursively read-only", c)
	}
	if w := at[ws]; w.ReadOnly || w.RecursiveReadOnly != nil {
		t.Errorf("the workspace: %+v", w)
	}
}
