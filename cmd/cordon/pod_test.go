package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"sigs.k8s.io/yaml"

	"github.com/cordon-run/cordon/internal/testenv"
)

// kubeProgram returns a cordon-kube built from this source: the one
// scripts/test built beside the test binary for the unprivileged run, or
// one built here.
func kubeProgram(t *testing.T) string {
	t.Helper()
	if p, err := filepath.Abs(filepath.Join("testdata", "cordon-kube")); err == nil {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	_, err := exec.LookPath("go")
	testenv.Require(t, err == nil, "the go command, to build cordon-kube: %v", err)
	out := filepath.Join(t.TempDir(), "cordon-kube")
	if b, err := exec.Command("go", "build", "-o", out, "../cordon-kube").CombinedOutput(); err != nil {
		t.Fatalf("go build cordon-kube: %v\n%s", err, b)
	}
	return out
}

// readPod reads a pod.yaml strictly into the Kubernetes API types.
func readPod(t *testing.T, dir string) (*corev1.Pod, *networkingv1.NetworkPolicy) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "pod.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	docs := bytes.Split(data, []byte("\n---\n"))
	var pod corev1.Pod
	var np networkingv1.NetworkPolicy
	if len(docs) < 2 || yaml.UnmarshalStrict(docs[0], &np) != nil || yaml.UnmarshalStrict(docs[1], &pod) != nil {
		t.Fatalf("pod.yaml does not hold a Pod and a NetworkPolicy:\n%s", data)
	}
	return &pod, &np
}

// TestOCIPod: cordon oci pod renders a command's and an admitted tool's
// sandbox as a Pod through cordon-kube, prints what the Pod cannot
// enforce, and refuses — as structured values — a missing image, an
// output directory inside the workspace, a wasm tool, and a cordon-kube
// that is absent or lies where a sandboxed command could have written it.
func TestOCIPod(t *testing.T) {
	t.Setenv(EnvKube, kubeProgram(t))
	ws := toolWorkspace(t)
	os.Mkdir(filepath.Join(ws, ".git"), 0o755)
	os.WriteFile(filepath.Join(ws, ".git", "config"), []byte("[core]\n"), 0o644)
	out := t.TempDir()

	cmd := filepath.Join(out, "cmd")
	r := cordon(t, "", "oci", "pod", "-w", ws, "--image", "debian:stable-slim", "--out", cmd, "--", "sh", "-c", "echo $(HOME) > out")
	if r.code != 0 || strings.TrimSpace(r.stdout) != cmd || !strings.Contains(r.stderr, "unenforced: pids:") {
		t.Fatalf("oci pod: %+v", r)
	}
	pod, np := readPod(t, cmd)
	c := pod.Spec.Containers[0]
	checkManifest(t, pod)
	if !slices.Equal(c.Command, []string{"sh", "-c", "echo $$(HOME) > out"}) || c.WorkingDir != ws || c.Stdin || c.Image != "debian:stable-slim" {
		t.Errorf("container %s: command %q in %s, stdin %v", c.Image, c.Command, c.WorkingDir, c.Stdin)
	}
	if !strings.HasPrefix(pod.Name, "cordon-sh-") || np.Spec.PodSelector.MatchLabels["cordon.run/pod"] != pod.Name {
		t.Errorf("pod %q, its policy selects %v", pod.Name, np.Spec.PodSelector.MatchLabels)
	}
	// What covers .git/config: the deepest mount at or above it.
	var config *corev1.VolumeMount
	for i, m := range c.VolumeMounts {
		if p := filepath.Join(ws, ".git", "config"); (p == m.MountPath || strings.HasPrefix(p, m.MountPath+"/")) && (config == nil || len(m.MountPath) > len(config.MountPath)) {
			config = &c.VolumeMounts[i]
		}
	}
	if config == nil || !config.ReadOnly || config.SubPath == "" || !strings.HasPrefix(".git/config", config.SubPath) {
		t.Errorf("what covers .git/config is %+v, want a read-only subPath of the workspace", config)
	}
	prof := pod.Spec.SecurityContext.SeccompProfile
	if prof == nil || prof.LocalhostProfile == nil {
		t.Fatalf("no seccomp profile: %+v", pod.Spec.SecurityContext)
	}
	if _, err := os.Stat(filepath.Join(cmd, "seccomp", *prof.LocalhostProfile)); err != nil {
		t.Errorf("the profile the pod names: %v", err)
	}
	if pod.Spec.ActiveDeadlineSeconds == nil || *pod.Spec.ActiveDeadlineSeconds != int64(defaultExecTimeout.Seconds()) {
		t.Errorf("activeDeadlineSeconds %v, want exec's default %v", pod.Spec.ActiveDeadlineSeconds, defaultExecTimeout)
	}

	if r := cordon(t, "", "admit", "-w", ws, filepath.Join(ws, "tools", "count.yaml")); r.code != 0 {
		t.Fatalf("admit: %+v", r)
	}
	tool := filepath.Join(out, "tool")
	r = cordon(t, "", "oci", "pod", "-w", ws, "--json", "--image", "img", "--name", "count", "--claim", "work", "--runtime-class", "gvisor",
		"--out", tool, "--tool", "count-lines", "--input", `{"file": "notes.txt"}`)
	var resp struct {
		Dir, Pod, Seccomp string
		Unenforced        []string
	}
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &resp) != nil || resp.Dir != tool || resp.Pod != "count" || len(resp.Unenforced) == 0 {
		t.Fatalf("oci pod --tool: %+v", r)
	}
	pod, _ = readPod(t, tool)
	checkManifest(t, pod)
	c = pod.Spec.Containers[0]
	if !c.Stdin || !c.StdinOnce || *pod.Spec.ActiveDeadlineSeconds != 10 || *pod.Spec.RuntimeClassName != "gvisor" {
		t.Errorf("the tool's pod: stdin %v, deadline %v, runtime class %v", c.Stdin, *pod.Spec.ActiveDeadlineSeconds, *pod.Spec.RuntimeClassName)
	}
	for _, m := range c.VolumeMounts {
		if m.MountPath == ws && !m.ReadOnly {
			t.Errorf("under fs.read:workspace the workspace is mounted writable")
		}
	}
	// The tool's files travel with it: a ConfigMap mounted read-only at
	// the folder its command names.
	data, _ := os.ReadFile(filepath.Join(tool, "pod.yaml"))
	docs := bytes.Split(data, []byte("\n---\n"))
	var files corev1.ConfigMap
	if err := yaml.UnmarshalStrict(docs[len(docs)-1], &files); err != nil || files.Name != "count-tool" {
		t.Fatalf("the last document is not the tool's files (%v):\n%s", err, docs[len(docs)-1])
	}
	script, _ := os.ReadFile(filepath.Join(ws, "tools", "count.sh"))
	if len(c.Command) != 2 || !slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool {
		return m.ReadOnly && strings.HasPrefix(c.Command[1], m.MountPath+"/") && m.Name == "tool-files"
	}) || !slices.ContainsFunc(mapValues(files.BinaryData), func(b []byte) bool { return bytes.Equal(b, script) }) {
		t.Errorf("command %q, mounts %+v: the tool's files are not where its command names them", c.Command, c.VolumeMounts)
	}

	// A directory that has been a workspace: it holds harness state.
	other := filepath.Join(out, "other")
	os.MkdirAll(filepath.Join(other, ".efferent"), 0o755)
	for _, c := range []struct {
		name string
		env  string
		args []string
		code int
		kind string
	}{
		{"no image", "", []string{"--out", filepath.Join(out, "a"), "--", "true"}, exitUsage, "Usage"},
		{"a bad name", "", []string{"--image", "x", "--name", "Not_A_Label", "--out", filepath.Join(out, "b"), "--", "true"}, exitUsage, "Usage"},
		{"out in the workspace", "", []string{"--image", "x", "--out", filepath.Join(ws, "pod"), "--", "true"}, exitUsage, "Usage"},
		{"out in another workspace", "", []string{"--image", "x", "--out", filepath.Join(other, "pod"), "--", "true"}, exitUsage, "Usage"},
		{"out exists", "", []string{"--image", "x", "--out", cmd, "--", "true"}, exitUsage, "Usage"},
		{"no cordon-kube", filepath.Join(out, "none"), []string{"--image", "x", "--out", filepath.Join(out, "c"), "--", "true"}, 125, "SandboxUnavailable"},
		{"cordon-kube in the workspace", filepath.Join(ws, "cordon-kube"), []string{"--image", "x", "--out", filepath.Join(out, "d"), "--", "true"}, 125, "SandboxUnavailable"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.env != "" {
				if strings.HasPrefix(c.env, ws) {
					// A program a sandboxed command could have written.
					os.WriteFile(c.env, []byte("#!/bin/sh\necho PLANTED > "+filepath.Join(out, "planted")+"\n"), 0o755)
				}
				t.Setenv(EnvKube, c.env)
			}
			r := cordon(t, "", append([]string{"oci", "pod", "-w", ws, "--json"}, c.args...)...)
			var e struct{ Error, Message string }
			if r.code != c.code || json.Unmarshal([]byte(r.stdout), &e) != nil || e.Error != c.kind || e.Message == "" {
				t.Errorf("exit %d, %s%s; want exit %d, %s", r.code, r.stdout, r.stderr, c.code, c.kind)
			}
			if _, err := os.Stat(filepath.Join(out, "planted")); err == nil {
				t.Errorf("cordon ran the planted cordon-kube")
			}
		})
	}
}

func mapValues[K comparable, V any](m map[K]V) []V {
	var out []V
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

// checkManifest: one mount per path, each naming a volume, every volume
// mounted (what the API server refuses otherwise).
func checkManifest(t *testing.T, pod *corev1.Pod) {
	t.Helper()
	vols := map[string]bool{}
	for _, v := range pod.Spec.Volumes {
		if vols[v.Name] {
			t.Errorf("volume %q twice", v.Name)
		}
		vols[v.Name] = true
	}
	paths, used := map[string]bool{}, map[string]bool{}
	for _, m := range pod.Spec.Containers[0].VolumeMounts {
		if paths[m.MountPath] {
			t.Errorf("mount path %s twice", m.MountPath)
		}
		if !vols[m.Name] {
			t.Errorf("mount of %s names no volume (%q)", m.MountPath, m.Name)
		}
		paths[m.MountPath], used[m.Name] = true, true
	}
	for v := range vols {
		if !used[v] {
			t.Errorf("volume %q mounted nowhere", v)
		}
	}
}
