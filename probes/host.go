package probes

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/cordon-run/cordon/evidence"
	"github.com/cordon-run/cordon/harness"
	"github.com/cordon-run/cordon/internal/userdir"
	"github.com/cordon-run/cordon/substrate/bwrap"
	"github.com/cordon-run/cordon/substrate/oci"
)

// HostFacts reads what a receipt records of this host: the kernel, the
// user, whether this is a container, bubblewrap's version (empty when it
// is missing), the OCI runtime and its version (oci.Installed), the
// Landlock ABI, whether user namespaces and seccomp are there, and
// wazero's version.
func HostFacts(ctx context.Context, h harness.Config, bwrapBin string) evidence.Host {
	var u unix.Utsname
	unix.Uname(&u)
	f := evidence.Host{
		OS:          runtime.GOOS,
		Arch:        runtime.GOARCH,
		Kernel:      unix.ByteSliceToString(u.Release[:]),
		UID:         os.Geteuid(),
		Container:   inContainer(),
		LandlockABI: landlockABI(),
		UserNS:      userNamespaces(),
		Seccomp:     seccompFilters(),
		Wazero:      moduleVersion("github.com/tetratelabs/wazero"),
	}
	// The version only (kept in the state directory by the binary's
	// identity): whether bubblewrap makes sandboxes is what the probes
	// find out, and a wasm tool's run should not pay for a sandbox.
	if facts, err := bwrap.NewEnforcer(bwrap.EnforcerConfig{Harness: h, Bwrap: bwrapBin, ProbeAtRun: true}).Facts(ctx); err == nil {
		f.Bwrap, f.BwrapPath = facts.Values["bwrap.version"], facts.Values["bwrap.path"]
	}
	if rt, ok := oci.Installed(ctx, os.Getenv("PATH"), h); ok {
		f.OCI, f.OCIPath = rt.Name+": "+rt.Version, rt.Path
	}
	sum := sha256.Sum256([]byte(h.String()))
	f.Harness = "sha256:" + hex.EncodeToString(sum[:])
	return f
}

// Degraded names what the host lacks that a substrate would use: a
// receipt records it, and so does a grant that relies on the substrate.
func Degraded(h evidence.Host, sub string) []string {
	var d []string
	switch sub {
	case bwrap.Name:
		if h.Bwrap == "" {
			d = append(d, "bubblewrap is missing or cannot create a sandbox")
		}
		if !h.UserNS && h.UID != 0 {
			d = append(d, "unprivileged user namespaces are off")
		}
	}
	if sub == oci.Name && h.OCI == "" {
		d = append(d, "no OCI runtime (runc, crun) is installed where cordon trusts it")
	}
	if h.LandlockABI == 0 && sub == "landlock" {
		d = append(d, "Landlock is not available")
	}
	return d
}

// inContainer reports signs of a container: the files docker and podman
// leave, systemd's $container, a container manager in PID 1's cgroup.
func inContainer() bool {
	for _, f := range []string{"/.dockerenv", "/run/.containerenv"} {
		if _, err := os.Stat(f); err == nil {
			return true
		}
	}
	if os.Getenv("container") != "" {
		return true
	}
	data, _ := os.ReadFile("/proc/1/cgroup")
	for _, w := range []string{"docker", "kubepods", "containerd", "libpod", "lxc"} {
		if strings.Contains(string(data), w) {
			return true
		}
	}
	return false
}

// userNamespaces reports whether an unprivileged user may create a user
// namespace, from the sysctls that switch it off (Debian's, Ubuntu's
// AppArmor restriction, the namespace limit).
func userNamespaces() bool {
	read := func(p string) (int, bool) {
		data, err := os.ReadFile(p)
		if err != nil {
			return 0, false
		}
		n, err := strconv.Atoi(strings.TrimSpace(string(data)))
		return n, err == nil
	}
	if n, ok := read("/proc/sys/user/max_user_namespaces"); ok && n == 0 {
		return false
	}
	if n, ok := read("/proc/sys/kernel/unprivileged_userns_clone"); ok && n == 0 {
		return false
	}
	if n, ok := read("/proc/sys/kernel/apparmor_restrict_unprivileged_userns"); ok && n != 0 {
		return false
	}
	_, err := os.Stat("/proc/self/ns/user")
	return err == nil
}

// seccompFilters reports whether the kernel has seccomp filters.
func seccompFilters() bool {
	data, _ := os.ReadFile("/proc/self/status")
	return strings.Contains(string(data), "\nSeccomp_filters:") || strings.Contains(string(data), "\nSeccomp:")
}

func moduleVersion(path string) string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	for _, d := range bi.Deps {
		if d.Path == path {
			return d.Version
		}
	}
	return ""
}

// Version is this build's version: the module version and VCS revision
// the binary was built from, where the build recorded them.
func Version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	v := bi.Main.Version
	for _, s := range bi.Settings {
		if s.Key == "vcs.revision" && len(s.Value) >= 12 {
			v += "+" + s.Value[:12]
		}
	}
	return v
}

var (
	binaryMu   sync.Mutex
	binaryDone map[string]evidence.Binary
)

// BinaryOf returns the digest of the running executable (the image this
// process runs, not the file now at its path). Hashing it costs
// milliseconds, so the digest is kept in cordon's per-user state
// directory (outside every workspace and every sandbox), keyed by the
// file's identity — device, inode, size, modification and change time,
// which no one can set back without the change time moving — and reused
// while that identity holds.
func BinaryOf(stateDir string) (evidence.Binary, error) {
	// /proc/self/exe is the image that runs, even when the file at its
	// path was replaced since (an upgrade while this process lives).
	const exe = "/proc/self/exe"
	binaryMu.Lock()
	defer binaryMu.Unlock()
	if b, ok := binaryDone[exe]; ok {
		return b, nil
	}
	f, err := os.Open(exe)
	if err != nil {
		return evidence.Binary{}, fmt.Errorf("cannot read cordon's own executable: %w", err)
	}
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return evidence.Binary{}, err
	}
	type record struct {
		Dev, Ino        uint64
		Size            int64
		Mtime, Ctime    int64
		Digest, Version string
	}
	id := record{Dev: uint64(st.Dev), Ino: st.Ino, Size: st.Size, Mtime: st.Mtim.Nano(), Ctime: st.Ctim.Nano()}
	var cache string
	if stateDir != "" {
		if dir, err := userdir.EnsurePath(stateDir, "evidence"); err == nil {
			cache = filepath.Join(dir, fmt.Sprintf("binary-%x-%x.json", id.Dev, id.Ino))
		}
	}
	if cache != "" {
		if data, err := os.ReadFile(cache); err == nil {
			var r record
			if json.Unmarshal(data, &r) == nil && r.Digest != "" {
				want := r
				want.Digest, want.Version = "", ""
				if want == id {
					b := evidence.Binary{Digest: r.Digest, Version: Version()}
					remember(exe, b)
					return b, nil
				}
			}
		}
	}
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return evidence.Binary{}, fmt.Errorf("cannot read cordon's own executable: %w", err)
	}
	b := evidence.Binary{Digest: "sha256:" + hex.EncodeToString(h.Sum(nil)), Version: Version()}
	var after unix.Stat_t
	if cache != "" && unix.Fstat(int(f.Fd()), &after) == nil && after.Ctim == st.Ctim && after.Size == st.Size {
		id.Digest = b.Digest
		if data, err := json.Marshal(id); err == nil {
			tmp := cache + ".tmp-" + strconv.Itoa(os.Getpid())
			if os.WriteFile(tmp, data, 0o600) == nil {
				os.Rename(tmp, cache)
			}
		}
	}
	remember(exe, b)
	return b, nil
}

func remember(exe string, b evidence.Binary) {
	if binaryDone == nil {
		binaryDone = map[string]evidence.Binary{}
	}
	binaryDone[exe] = b
}
