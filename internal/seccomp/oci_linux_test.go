package seccomp

import (
	"cmp"
	"maps"
	"os"
	"os/exec"
	"slices"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/cordon-run/cordon/internal/testenv"
)

// TestOCIFormSaysWhatTheProgramDoes: the OCI form of each policy it has
// one for refuses what the program refuses, call for call; under runc
// (as root), the helper's checks answer as they do under the program,
// but for the query of personality(2), which the form refuses too.
func TestOCIFormSaysWhatTheProgramDoes(t *testing.T) {
	native(t)
	for _, p := range []Policy{{Network: NetTCP}, {Network: NetHost}} {
		if _, err := OCI(p); err == nil {
			t.Errorf("%s: an OCI form for an allow-list of families", name(p))
		}
	}
	s, err := OCI(Policy{Network: NetNone})
	if err != nil {
		t.Fatal(err)
	}
	if s.DefaultAction != specs.ActAllow || len(s.Architectures) != 1 {
		t.Errorf("default %s, architectures %q", s.DefaultAction, s.Architectures)
	}
	refused := map[string]bool{}
	for _, sc := range s.Syscalls {
		for _, n := range sc.Names {
			if len(sc.Args) == 0 {
				refused[n] = true
			}
		}
	}
	for _, n := range append(Denied(), "socket", "clone3") {
		if !refused[n] {
			t.Errorf("%s is not refused whatever its arguments", n)
		}
	}
	byFD, err := OCI(Policy{Network: NetNone, Metadata: MetadataNone})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(byFD.Syscalls, func(sc specs.LinuxSyscall) bool { return slices.Contains(sc.Names, "fchmod") }) {
		t.Error("MetadataNone's form does not refuse fchmod")
	}

	if os.Geteuid() != 0 {
		t.Skip("runc runs the helper as root here")
	}
	runc, err := exec.LookPath("runc")
	testenv.Require(t, err == nil, "runc (Debian's runc package): %v", err)
	dir := metadataDir(t)
	listener, _ := loopbackListener(t)
	control := runHelper(t, "control", metadataDir(t), listener)
	got := runcHelper(t, runc, s, dir, listener)
	want := maps.Clone(everyPolicy)
	for name, w := range byNetwork[NetNone] {
		want[name] = cmp.Or(w, control[name])
	}
	for name, w := range byMetadata {
		want[name] = cmp.Or(w[MetadataAll], control[name])
	}
	want["personality(query)"] = "EPERM" // the form's one narrowing that shows here
	for name, want := range want {
		if got[name] != want {
			t.Errorf("under runc: %s: got %q, want %q", name, got[name], want)
		}
	}
}

// runcHelper runs the test binary as the helper in a runc container with
// the host's / read-only, dir bound writable and its working directory,
// no network, and the seccomp filter s; it returns its outcomes.
func runcHelper(t *testing.T, runc string, s *specs.LinuxSeccomp, dir, listener string) map[string]string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	none := []string{}
	spec := specs.Spec{
		Version: specs.Version,
		Root:    &specs.Root{Path: "rootfs", Readonly: true},
		Process: &specs.Process{
			Args:            []string{self, "-test.run=^TestHelperProcess$", "-test.count=1"},
			Env:             []string{"PATH=/usr/bin:/bin", helperEnv + "=oci", listenerEnv + "=" + listener},
			Cwd:             dir,
			NoNewPrivileges: true,
			Capabilities:    &specs.LinuxCapabilities{Bounding: none, Effective: none, Inheritable: none, Permitted: none, Ambient: none},
		},
		Mounts: []specs.Mount{
			{Destination: "/", Type: "bind", Source: "/", Options: []string{"rbind", "rro"}},
			{Destination: "/proc", Type: "proc", Source: "proc"},
			{Destination: "/dev", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "mode=755"}},
			{Destination: dir, Type: "bind", Source: dir, Options: []string{"rbind", "rw"}},
		},
		Linux: &specs.Linux{
			Namespaces: []specs.LinuxNamespace{{Type: specs.MountNamespace}, {Type: specs.PIDNamespace}, {Type: specs.IPCNamespace},
				{Type: specs.UTSNamespace}, {Type: specs.NetworkNamespace}},
			Seccomp: s,
		},
	}
	out, stderr := testenv.RuncRun(t, runc, spec)
	got := outcomes(out)
	if len(got) == 0 {
		t.Fatalf("the helper printed no outcomes under runc:\n%s%s", out, stderr)
	}
	return got
}
