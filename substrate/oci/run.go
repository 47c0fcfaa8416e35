package oci

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"

	"github.com/cordon-run/cordon/harness"
	"github.com/cordon-run/cordon/internal/limits"
	"github.com/cordon-run/cordon/internal/proc"
	"github.com/cordon-run/cordon/internal/userdir"
	"github.com/cordon-run/cordon/refusal"
	"github.com/cordon-run/cordon/substrate"
	"github.com/cordon-run/cordon/substrate/bwrap"
)

// A Runtime is an OCI runtime that runs bundles here.
type Runtime struct {
	Name    string // "runc", "crun"
	Path    string // the resolved, trusted program
	Version string // its first line of --version
}

// runtimes are tried in this order: runc first, which runs the hybrid
// cgroup layout that crun 1.8 refuses ("cgroups in hybrid mode not
// supported").
var runtimes = []string{"runc", "crun"}

var (
	detectMu sync.Mutex
	detected = map[string]detection{} // PATH, workspace and state directory → what Detect found
)

type detection struct {
	rt  Runtime
	err error
}

// Detect returns the first OCI runtime of PATH that runs a bundle here —
// proved by running one, the host's / read-only and `true` in it, or by
// another process's proof of the same file for this kernel and user in
// the last hour (the state directory's facts) — and remembers the answer
// for the life of the process. ws and h: a runtime
// inside a workspace, or one another user could replace, is never run.
// The error matches [refusal.SandboxUnavailable] and says why each one
// failed.
func Detect(ctx context.Context, path, ws string, h harness.Config) (Runtime, error) {
	detectMu.Lock()
	defer detectMu.Unlock()
	key := path + "\x00" + ws + "\x00" + h.StateDir() // the trust check depends on the workspace too
	if d, ok := detected[key]; ok {
		return d.rt, d.err
	}
	var why []string
	for _, name := range runtimes {
		bin, err := lookPath(name, path)
		if err != nil {
			why = append(why, name+": not found")
			continue
		}
		if bin, err = bwrap.TrustedProgram(bin, ws, h); err != nil {
			why = append(why, name+": "+err.Error())
			continue
		}
		rt := Runtime{Name: name, Path: bin}
		if v, ok := proved(h.StateDir(), bin); ok {
			rt.Version = v
			detected[key] = detection{rt: rt}
			return rt, nil
		}
		if err := rt.probe(ctx, h.StateDir()); err != nil {
			why = append(why, name+": "+err.Error())
			continue
		}
		out, _ := exec.CommandContext(ctx, bin, "--version").Output()
		rt.Version, _, _ = strings.Cut(strings.TrimSpace(string(out)), "\n")
		remember(h.StateDir(), bin, rt.Version)
		detected[key] = detection{rt: rt}
		return rt, nil
	}
	err := refusal.Errorf(refusal.SandboxUnavailable, "no OCI runtime runs a bundle here (%s); install runc (Debian's runc package), or use --substrate bwrap",
		strings.Join(why, "; "))
	detected[key] = detection{err: err}
	return Runtime{}, err
}

func lookPath(name, path string) (string, error) {
	for _, dir := range filepath.SplitList(path) {
		if dir == "" || !filepath.IsAbs(dir) {
			continue
		}
		p := filepath.Join(dir, name)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode().Perm()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s not found in PATH %q", name, path)
}

// probe runs a bundle of the host's / read-only and `true`, with the
// namespaces and the user mapping of every run.
func (rt Runtime) probe(ctx context.Context, stateDir string) error {
	none := []string{}
	o := DefaultOptions()
	s := &specs.Spec{
		Version:  Version,
		Root:     &specs.Root{Path: "rootfs", Readonly: true},
		Hostname: "cordon",
		Process: &specs.Process{
			Args: []string{"/bin/true"}, Cwd: "/", Env: []string{"PATH=/usr/bin:/bin"}, NoNewPrivileges: true,
			Capabilities: &specs.LinuxCapabilities{Bounding: none, Effective: none, Inheritable: none, Permitted: none, Ambient: none},
		},
		Mounts: []specs.Mount{
			{Destination: "/", Type: "bind", Source: "/", Options: []string{"rbind", "rro"}},
			{Destination: "/proc", Type: "proc", Source: "proc"},
			{Destination: "/dev", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "mode=755"}},
		},
		Linux: &specs.Linux{Namespaces: []specs.LinuxNamespace{{Type: specs.MountNamespace}, {Type: specs.PIDNamespace},
			{Type: specs.IPCNamespace}, {Type: specs.UTSNamespace}, {Type: specs.NetworkNamespace}}},
	}
	if o.Rootless {
		s.Linux.Namespaces = append(s.Linux.Namespaces, specs.LinuxNamespace{Type: specs.UserNamespace})
		s.Linux.UIDMappings = []specs.LinuxIDMapping{{ContainerID: 0, HostID: uint32(o.UID), Size: 1}}
		s.Linux.GIDMappings = []specs.LinuxIDMapping{{ContainerID: 0, HostID: uint32(o.GID), Size: 1}}
	}
	b, err := newBundle(stateDir, s)
	if err != nil {
		return err
	}
	defer b.remove()
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, rt.Path, "--root", b.state, "run", "--bundle", b.dir, b.id)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	exec.Command(rt.Path, "--root", b.state, "delete", "--force", b.id).Run()
	if err != nil {
		return fmt.Errorf("a bundle of `true` failed: %v: %s", err, firstLine(out.String()))
	}
	return nil
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if l, _, ok := strings.Cut(s, "\n"); ok {
		return l
	}
	return s
}

// A bundle is a bundle directory with its config, the runtime's state
// directory for it, and the container's name.
type bundle struct {
	dir, state, id string
}

// newBundle writes s as a bundle in a directory of the state directory's
// (0700): rootfs, an empty directory, and config.json.
func newBundle(stateDir string, s any) (*bundle, error) {
	base, err := userdir.EnsurePath(stateDir, "oci")
	if err != nil {
		return nil, refusal.Errorf(refusal.SandboxSetup, "cannot make the OCI bundles' directory in %s: %v", stateDir, err)
	}
	var rnd [8]byte
	rand.Read(rnd[:])
	id := "cordon-" + hex.EncodeToString(rnd[:])
	dir := filepath.Join(base, id)
	if err := os.Mkdir(dir, 0o700); err != nil {
		return nil, refusal.Errorf(refusal.SandboxSetup, "cannot make the bundle %s: %v", dir, err)
	}
	b := &bundle{dir: dir, state: filepath.Join(dir, "state"), id: id}
	data, err := json.Marshal(s)
	if err == nil {
		// Whose it is: this process, by PID and start time, for the
		// sweep of another process should this one be killed.
		err = os.WriteFile(filepath.Join(dir, "owner"), []byte(limits.SelfID()), 0o600)
	}
	if err == nil {
		err = os.Mkdir(filepath.Join(dir, "rootfs"), 0o755)
	}
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, "config.json"), data, 0o600)
	}
	if err != nil {
		b.remove()
		return nil, refusal.Errorf(refusal.SandboxSetup, "cannot write the bundle %s: %v", dir, err)
	}
	return b, nil
}

func (b *bundle) remove() { os.RemoveAll(b.dir) }

// sweepAge is how old a bundle without an owner file must be before a
// sweep takes it for abandoned (one being written has none yet).
const sweepAge = time.Minute

var sweepOnce sync.Once

// sweep deletes what killed cordon processes left in the state
// directory: bundles whose owner is gone, each with its container, which
// the runtime left running (--force kills its processes).
func sweep(stateDir string, rt Runtime) {
	base := filepath.Join(stateDir, "oci")
	entries, err := os.ReadDir(base)
	if err != nil {
		return
	}
	for _, e := range entries {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), "cordon-") {
			continue
		}
		dir := filepath.Join(base, e.Name())
		data, err := os.ReadFile(filepath.Join(dir, "owner"))
		if err != nil {
			if info, err := e.Info(); err != nil || time.Since(info.ModTime()) < sweepAge {
				continue
			}
		} else {
			if !limits.Gone(string(data)) {
				continue // alive, or not cordon's to judge
			}
		}
		exec.Command(rt.Path, "--root", filepath.Join(dir, "state"), "delete", "--force", e.Name()).Run()
		os.RemoveAll(dir)
	}
}

// RunSpec is one command to run in a sandbox, as a container.
type RunSpec struct {
	// The sandbox's spec, as bwrap would run it: its policy, command,
	// stdin, environment, time, grace and output bounds, logger and last
	// step (Later). Its Pool, Groups and Bwrap are not used.
	bwrap.Spec
	// Runtime runs the bundle (Detect's).
	Runtime Runtime
}

// Run runs the command in a container of the runtime: the sandbox is
// prepared as bwrap's run prepares it (the run lock, the protected set,
// the placeholders), stated as a bundle ([Spec]) and run by `runtime run`
// in the foreground, its output bounded and its time limited by package
// proc. The runtime deletes the container when its command ends; when
// the runtime itself was killed (the deadline, a cancel), the container
// is deleted (--force: every process of it killed) as soon as it has
// exited. An error
// means the command did not start: the sandbox could not be prepared or
// stated, or the runtime did not create the container (no pid file).
func Run(ctx context.Context, s RunSpec) (substrate.Outcome, error) {
	if len(s.Command) == 0 || s.Command[0] == "" {
		return substrate.Outcome{}, refusal.Errorf(refusal.InvalidPolicy, "oci: no command to run")
	}
	if s.Environ == nil {
		s.Environ = os.Environ()
	}
	sb, err := s.Policy.Prepare(s.Environ)
	if err != nil {
		return substrate.Outcome{}, err
	}
	defer func() {
		if s.Later != nil {
			s.Later(func() { sb.Close() })
		} else {
			sb.Close()
		}
	}()
	spec, err := Spec(sb, s.Command, DefaultOptions())
	if err != nil {
		return substrate.Outcome{}, refusal.Errorf(refusal.SandboxSetup, "%v", err)
	}
	stateDir := s.Policy.Harness().StateDir()
	sweepOnce.Do(func() { sweep(stateDir, s.Runtime) }) // a look at a directory; runc only for what is abandoned
	b, err := newBundle(stateDir, spec)
	if err != nil {
		return substrate.Outcome{}, err
	}
	defer b.remove()
	pidFile := filepath.Join(b.dir, "pid")
	cmd := exec.Command(s.Runtime.Path, "--root", b.state, "run", "--bundle", b.dir, "--pid-file", pidFile, b.id)
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}
	cmd.Dir = b.dir
	t, err := proc.Start(proc.Spec{Cmd: cmd, Stdin: s.Stdin, MaxOutput: s.MaxOutput, Timeout: s.Timeout, Grace: s.Grace,
		FreshKeyring: true, Logger: s.Logger})
	if err != nil {
		return substrate.Outcome{}, refusal.Errorf(refusal.SandboxUnavailable, "cannot run %s: %v", s.Runtime.Path, err)
	}
	// The runtime gone: after its command's end it deleted the container
	// itself (run without --keep); killed at the deadline or at a
	// cancel, it left the container running, which goes now: its
	// processes are killed, and its output ends.
	deleted := make(chan struct{})
	go func() {
		defer close(deleted)
		<-t.Exited()
		if st := cmd.ProcessState; st != nil && st.Exited() {
			return
		}
		exec.Command(s.Runtime.Path, "--root", b.state, "delete", "--force", b.id).Run()
	}()
	o := t.Wait(ctx)
	<-deleted
	// Every process of the container is gone (its PID namespace's init
	// has died): what the run left in the git index is final. A
	// repository it entered there as a submodule is moved out of git's
	// way, as after bwrap's runs.
	var moved []string
	if prot := sb.Protected(); prot != nil {
		moved = prot.QuarantineNotes()
	}
	if _, err := os.Stat(pidFile); errors.Is(err, os.ErrNotExist) && !o.TimedOut && !o.Canceled {
		// A command not found or not executable is an outcome, as for
		// bwrap's runs: the runtime says so for the exec it could not do.
		if code, why := execFailure(o.Stderr); code != 0 {
			msg := fmt.Sprintf("cordon: %s: %s\n", s.Command[0], why)
			return substrate.Outcome{ExitCode: code, Stderr: msg, StderrBytes: int64(len(msg)), Duration: o.Duration, Notes: moved}, nil
		}
		return substrate.Outcome{}, refusal.Errorf(refusal.SandboxSetup, "%s did not create the container: %s", s.Runtime.Name, firstLine(o.Stderr))
	}
	o.Notes = append(moved, o.Notes...)
	return o, nil
}

// execFailure reads the runtime's report of an exec it could not do:
// 127 for a command not found, 126 for one not executable.
// Only the exec's own report counts ("exec: \"CMD\": ..."): a mount's
// "no such file or directory" is a setup that failed.
func execFailure(stderr string) (int, string) {
	_, rest, ok := strings.Cut(stderr, "unable to start container process: exec: ")
	if !ok {
		return 0, ""
	}
	rest, _, _ = strings.Cut(rest, "\n")
	switch {
	case strings.HasSuffix(rest, ": executable file not found in $PATH\""), strings.HasSuffix(rest, ": no such file or directory\""):
		return 127, "command not found"
	case strings.HasSuffix(rest, ": permission denied\""):
		return 126, "permission denied"
	}
	return 0, ""
}

// proofAge is how long a runtime's proof counts for other processes.
const proofAge = time.Hour

// proof is what the state directory keeps of a runtime that ran a
// bundle: the file it was, the kernel and user it ran for, and when.
type proof struct {
	Path    string    `json:"path"`
	Dev     uint64    `json:"dev"`
	Ino     uint64    `json:"ino"`
	Size    int64     `json:"size"`
	Mtime   int64     `json:"mtime"`
	Ctime   int64     `json:"ctime"`
	Kernel  string    `json:"kernel"`
	UID     int       `json:"uid"`
	Version string    `json:"version"`
	At      time.Time `json:"at"`
}

func proofOf(bin string) (proof, bool) {
	var st unix.Stat_t
	var u unix.Utsname
	if unix.Stat(bin, &st) != nil || unix.Uname(&u) != nil {
		return proof{}, false
	}
	return proof{Path: bin, Dev: uint64(st.Dev), Ino: st.Ino, Size: st.Size, Mtime: st.Mtim.Nano(), Ctime: st.Ctim.Nano(),
		Kernel: unix.ByteSliceToString(u.Release[:]), UID: os.Geteuid()}, true
}

func proofFile(stateDir, bin string) string {
	return filepath.Join(stateDir, "facts", "oci-"+filepath.Base(bin)+".json")
}

// proved reports whether another process proved bin, unchanged, on this
// kernel for this user within proofAge, and returns its version: a stat
// instead of a container for every new cordon process. A run that then
// fails to create its container says so (SandboxSetup).
func proved(stateDir, bin string) (string, bool) {
	want, ok := proofOf(bin)
	if stateDir == "" || !ok {
		return "", false
	}
	f, err := os.OpenFile(proofFile(stateDir, bin), os.O_RDONLY|unix.O_NOFOLLOW, 0)
	if err != nil {
		return "", false
	}
	defer f.Close()
	var got proof
	if json.NewDecoder(io.LimitReader(f, 4<<10)).Decode(&got) != nil || time.Since(got.At) > proofAge || got.At.After(time.Now()) {
		return "", false
	}
	v := got.Version
	want.Version, want.At = v, got.At
	return v, got == want
}

// remember keeps the proof of bin; failing to is harmless.
func remember(stateDir, bin, version string) {
	p, ok := proofOf(bin)
	if stateDir == "" || !ok {
		return
	}
	dir, err := userdir.EnsurePath(stateDir, "facts")
	if err != nil {
		return
	}
	p.Version, p.At = version, time.Now().UTC()
	data, _ := json.Marshal(p)
	tmp, err := os.CreateTemp(dir, ".oci-proof-*")
	if err != nil {
		return
	}
	_, err = tmp.Write(data)
	if cerr := tmp.Close(); err == nil && cerr == nil {
		err = os.Rename(tmp.Name(), proofFile(stateDir, bin))
	}
	if err != nil {
		os.Remove(tmp.Name())
	}
}
