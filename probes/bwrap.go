package probes

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/cordon-run/cordon/capabilities"
	"github.com/cordon-run/cordon/substrate"
	"github.com/cordon-run/cordon/substrate/bwrap"
	"github.com/cordon-run/cordon/substrate/landlock"
	"github.com/cordon-run/cordon/substrate/oci"
)

// The bubblewrap probes. Each makes a workspace of its own (a git
// repository in shape, so that git's paths are protected as in a real one)
// and runs /bin/sh in a sandbox built exactly as a run builds it
// ([bwrap.PolicyOf], [bwrap.Run]); what the escape did is checked from the
// host, not taken from the sandbox's word.
func init() {
	register(
		Probe{Name: "bwrap/sandbox", Substrate: bwrap.Name,
			Mechanisms: ids(bwrap.UnshareUser, bwrap.UnsharePID, bwrap.UnshareIPC, bwrap.NoInheritedFDs),
			Expected:   "a sandbox starts: the command is PID 2 of a PID namespace of its own",
			run:        probeSandbox},
		Probe{Name: "bwrap/write-outside", Substrate: bwrap.Name,
			Mechanisms: ids(bwrap.ReadOnlyRoot, bwrap.BindWorkspace),
			Expected:   "a write to a host directory outside the workspace fails; one inside succeeds",
			run:        probeWriteOutside},
		Probe{Name: "bwrap/read-only-workspace", Substrate: bwrap.Name,
			Mechanisms: ids(bwrap.ReadOnlyWorkspace),
			Expected:   "with fs.read only, a write into the workspace fails",
			run:        probeReadOnlyWorkspace},
		Probe{Name: "bwrap/harness-state", Substrate: bwrap.Name,
			Mechanisms: ids(bwrap.ReadOnlyHarness),
			Expected:   "harness state is read-only, also where it did not exist before the run",
			run:        probeHarnessState},
		Probe{Name: "bwrap/write-later", Substrate: bwrap.Name,
			Mechanisms: ids(bwrap.ReadOnlyWriteLater, bwrap.PinParents),
			Expected:   "git's configuration and hooks and the editor settings are read-only, present or absent; .git cannot be moved away",
			run:        probeWriteLater},
		Probe{Name: "bwrap/no-capabilities", Substrate: bwrap.Name,
			Mechanisms: ids(bwrap.CapDrop, bwrap.UnshareUser),
			Expected:   "the command holds no capability, and cannot make a user namespace to get some",
			run:        probeNoCapabilities},
		Probe{Name: "bwrap/net-none", Substrate: bwrap.Name,
			Mechanisms: ids(bwrap.UnshareNet),
			Expected:   "under net:none a listener on the host's loopback is not reached",
			run:        probeNetNone},
		Probe{Name: "bwrap/deadline", Substrate: bwrap.Name,
			Mechanisms: []string{"proc/deadline", "proc/kill-tree", id(bwrap.UnsharePID), id(bwrap.NewSession)},
			Expected:   "a double-forking tree that ignores SIGTERM is gone at its deadline",
			run:        probeDeadline},
		Probe{Name: "bwrap/environment", Substrate: bwrap.Name,
			Mechanisms: ids(bwrap.ClearEnv, bwrap.EmptyHome),
			Expected:   "the environment holds only the allow-list and the granted names",
			run:        probeEnvironment},
		Probe{Name: "bwrap/trusted-state", Substrate: bwrap.Name,
			Mechanisms: ids(bwrap.HideTrustedState, bwrap.HideHomes),
			Expected:   "cordon's key store and code cache are empty inside the sandbox",
			run:        probeTrustedState},
		Probe{Name: "bwrap/output-and-tmp", Substrate: bwrap.Name,
			Mechanisms: []string{"proc/bounded-output", id(bwrap.TmpfsTmp(0)), id(bwrap.ReadOnlyDev)},
			Expected:   "output is kept to its bound and counted; /tmp is fresh and capped; /dev is read-only",
			run:        probeOutputAndTmp},
	)
}

func id(m substrate.Mechanism) string { return m.Substrate + "/" + m.Name }

func ids(ms ...substrate.Mechanism) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = id(m)
	}
	return out
}

// probeWorkspace makes a workspace under the probe's directory, with a
// git directory in the shape git looks for.
func probeWorkspace(e *Env) (string, error) {
	ws := filepath.Join(e.Dir, "ws")
	for _, d := range []string{".git/objects", ".git/refs/heads", ".git/hooks", "src"} {
		if err := os.MkdirAll(filepath.Join(ws, d), 0o755); err != nil {
			return "", err
		}
	}
	files := map[string]string{
		".git/HEAD":   "ref: refs/heads/main\n",
		".git/config": "[core]\n\trepositoryformatversion = 0\n\tbare = false\n",
		"file.txt":    "original\n",
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(ws, name), []byte(data), 0o644); err != nil {
			return "", err
		}
	}
	return filepath.EvalSymlinks(ws)
}

// sandboxed runs script with /bin/sh in a sandbox that holds the
// capabilities caps on ws: bubblewrap's, or Landlock's for the probes of
// that substrate.
func sandboxed(ctx context.Context, e *Env, ws string, caps []string, script string, opt ...func(*bwrap.Spec)) (substrate.Outcome, error) {
	set, err := capabilities.ParseSet(caps)
	if err != nil {
		return substrate.Outcome{}, err
	}
	if e.substrate == landlock.Name {
		return confined(ctx, e, ws, set, script, opt...)
	}
	if e.substrate == oci.Name {
		s := bwrap.Spec{Command: []string{"/bin/sh", "-c", script}, Environ: e.Environ, Timeout: 5 * time.Second, MaxOutput: 64 << 10}
		for _, o := range opt {
			o(&s)
		}
		return onOCI(ctx, e, ws, set, s)
	}
	pol, err := bwrap.PolicyOf(set, ws, e.Harness)
	if err != nil {
		return substrate.Outcome{}, err
	}
	// System directories only on PATH: the programs a probe runs are the
	// host's read-only ones, never one a command planted in a workspace
	// (a .venv/bin on the caller's PATH, say) to answer for the sandbox.
	pol = pol.WithSystemPath(true)
	s := bwrap.Spec{Policy: pol, Command: []string{"/bin/sh", "-c", script}, Environ: e.Environ,
		Bwrap: e.Bwrap, Timeout: 5 * time.Second, MaxOutput: 64 << 10}
	for _, o := range opt {
		o(&s)
	}
	return bwrap.Run(ctx, s)
}

// lastLine is the last line of a stream, for observations.
func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	if len(s) > 160 {
		s = s[:160] + "..."
	}
	return s
}

func probeSandbox(ctx context.Context, e *Env) (string, bool, error) {
	ws, err := probeWorkspace(e)
	if err != nil {
		return "", false, err
	}
	o, err := sandboxed(ctx, e, ws, []string{"fs.read:workspace"}, `echo "pid=$$"; grep -c . /proc/self/fd/ 2>/dev/null; ls /proc/self/fd | wc -l`)
	if err != nil {
		return "no sandbox: " + err.Error(), false, nil
	}
	lines := strings.Fields(o.Stdout)
	if o.ExitCode != 0 || len(lines) == 0 {
		return fmt.Sprintf("exit %d: %s", o.ExitCode, lastLine(o.Stderr)), false, nil
	}
	// The descriptors of `ls` itself: 0, 1, 2 and the directory it reads.
	fds := lines[len(lines)-1]
	ok := lines[0] == "pid=2" && (fds == "4" || fds == "3")
	return fmt.Sprintf("%s in its own PID namespace, %s descriptors open", lines[0], fds), ok, nil
}

// outsideDir returns a host directory outside the workspace that the
// sandbox sees (not under /tmp, which a sandbox replaces, nor a hidden
// home): /var/tmp, where every user may write.
func outsideDir(e *Env) (string, func(), error) {
	dir, err := os.MkdirTemp("/var/tmp", "cordon-probe-outside-")
	if err != nil {
		return "", nil, fmt.Errorf("no host directory outside the workspace to try: %w", err)
	}
	return dir, func() { os.RemoveAll(dir) }, nil
}

func probeWriteOutside(ctx context.Context, e *Env) (string, bool, error) {
	ws, err := probeWorkspace(e)
	if err != nil {
		return "", false, err
	}
	out, done, err := outsideDir(e)
	if err != nil {
		return "", false, err
	}
	defer done()
	victim := filepath.Join(out, "victim")
	// The sandbox runs as this user: the owner's permissions let it write
	// here were it not for the read-only root; no other user can.
	if err := os.WriteFile(victim, []byte("host\n"), 0o600); err != nil {
		return "", false, err
	}
	script := fmt.Sprintf(`echo x > %[1]s/new 2>/dev/null && echo new-written; echo x >> %[1]s/victim 2>/dev/null && echo victim-written; echo inside > %[2]s/src/inside.txt && echo inside-written`, out, ws)
	o, err := sandboxed(ctx, e, ws, []string{"fs.read:workspace", "fs.write:workspace"}, script)
	if err != nil {
		return "no sandbox: " + err.Error(), false, nil
	}
	_, newErr := os.Lstat(filepath.Join(out, "new"))
	data, _ := os.ReadFile(victim)
	inside, _ := os.ReadFile(filepath.Join(ws, "src", "inside.txt"))
	var obs []string
	ok := true
	if newErr == nil {
		obs, ok = append(obs, "a new file appeared outside"), false
	}
	if string(data) != "host\n" {
		obs, ok = append(obs, "the host file outside changed"), false
	}
	if string(inside) != "inside\n" {
		obs, ok = append(obs, "the write inside the workspace failed ("+lastLine(o.Stderr)+")"), false
	}
	if ok {
		obs = append(obs, "outside unchanged (new file absent, host file intact); inside written")
	}
	return strings.Join(obs, "; "), ok, nil
}

func probeReadOnlyWorkspace(ctx context.Context, e *Env) (string, bool, error) {
	ws, err := probeWorkspace(e)
	if err != nil {
		return "", false, err
	}
	o, err := sandboxed(ctx, e, ws, []string{"fs.read:workspace"},
		`cat file.txt; echo x >> file.txt 2>/dev/null && echo appended; echo x > new.txt 2>/dev/null && echo created; true`)
	if err != nil {
		return "no sandbox: " + err.Error(), false, nil
	}
	data, _ := os.ReadFile(filepath.Join(ws, "file.txt"))
	_, newErr := os.Lstat(filepath.Join(ws, "new.txt"))
	switch {
	case !strings.HasPrefix(o.Stdout, "original"):
		return "the workspace could not be read: " + lastLine(o.Stderr), false, nil
	case string(data) != "original\n" || newErr == nil:
		return "a write into the read-only workspace landed on the host", false, nil
	}
	return "read it; the append and the new file were refused; host files unchanged", true, nil
}

func probeHarnessState(ctx context.Context, e *Env) (string, bool, error) {
	ws, err := probeWorkspace(e)
	if err != nil {
		return "", false, err
	}
	names := e.Harness.State()
	if len(names) == 0 {
		return "the harness configuration names no harness state", false, nil
	}
	// The first exists before the run, with a file; the others do not.
	present := names[0]
	if err := os.MkdirAll(filepath.Join(ws, present), 0o755); err != nil {
		return "", false, err
	}
	if err := os.WriteFile(filepath.Join(ws, present, "state.json"), []byte("{}\n"), 0o644); err != nil {
		return "", false, err
	}
	var script strings.Builder
	for _, n := range names {
		fmt.Fprintf(&script, "echo x > %[1]q/state.json 2>/dev/null; echo x > %[1]q/planted 2>/dev/null; rm -rf %[1]q 2>/dev/null; mv %[1]q moved-%[2]s 2>/dev/null;\n", n, hex.EncodeToString([]byte(n)))
	}
	script.WriteString("true\n")
	o, err := sandboxed(ctx, e, ws, []string{"fs.read:workspace", "fs.write:workspace"}, script.String())
	if err != nil {
		return "no sandbox: " + err.Error(), false, nil
	}
	_ = o
	var bad []string
	if data, _ := os.ReadFile(filepath.Join(ws, present, "state.json")); string(data) != "{}\n" {
		bad = append(bad, present+"/state.json changed")
	}
	for _, n := range names {
		if _, err := os.Lstat(filepath.Join(ws, n, "planted")); err == nil {
			bad = append(bad, n+"/planted written")
		}
		if _, err := os.Lstat(filepath.Join(ws, "moved-"+hex.EncodeToString([]byte(n)))); err == nil {
			bad = append(bad, n+" moved away")
		}
	}
	if _, err := os.Lstat(filepath.Join(ws, present)); err != nil {
		bad = append(bad, present+" removed")
	}
	if len(bad) > 0 {
		return strings.Join(bad, "; "), false, nil
	}
	return fmt.Sprintf("%s (present) and %s (absent before) unchanged: writes, removal and moves refused",
		present, strings.Join(names[1:], ", ")), true, nil
}

func probeWriteLater(ctx context.Context, e *Env) (string, bool, error) {
	ws, err := probeWorkspace(e)
	if err != nil {
		return "", false, err
	}
	// Present: git's configuration. Absent: a hook, editor and agent
	// settings, direnv's file. .git itself must stay where it is.
	absent := []string{".git/hooks/pre-commit", ".vscode/settings.json", ".envrc"}
	for _, w := range e.Harness.WriteLater() {
		if !strings.HasSuffix(w, "/") && !strings.Contains(w, "*") && !slices.Contains(absent, w) && len(absent) < 6 {
			if _, err := os.Lstat(filepath.Join(ws, w)); errors.Is(err, os.ErrNotExist) {
				absent = append(absent, w)
			}
		}
	}
	var script strings.Builder
	script.WriteString("echo '[core] hooksPath = /tmp/evil' >> .git/config 2>/dev/null;\n")
	for _, a := range absent {
		fmt.Fprintf(&script, "mkdir -p \"$(dirname %[1]q)\" 2>/dev/null; printf '#!/bin/sh\\necho pwned\\n' > %[1]q 2>/dev/null;\n", a)
	}
	script.WriteString("mv .git .git-away 2>/dev/null; mkdir .git-away 2>/dev/null; mv .git/config .git/config.old 2>/dev/null; true\n")
	if _, err := sandboxed(ctx, e, ws, []string{"fs.read:workspace", "fs.write:workspace"}, script.String()); err != nil {
		return "no sandbox: " + err.Error(), false, nil
	}
	var bad []string
	if data, _ := os.ReadFile(filepath.Join(ws, ".git/config")); !bytes.Equal(data, []byte("[core]\n\trepositoryformatversion = 0\n\tbare = false\n")) {
		bad = append(bad, ".git/config changed or moved")
	}
	for _, a := range absent {
		if st, err := os.Lstat(filepath.Join(ws, a)); err == nil && (st.Mode().IsRegular() || st.Size() > 0) {
			bad = append(bad, a+" written")
		}
	}
	if st, err := os.Lstat(filepath.Join(ws, ".git")); err != nil || !st.IsDir() {
		bad = append(bad, ".git moved away")
	}
	if len(bad) > 0 {
		return strings.Join(bad, "; "), false, nil
	}
	return fmt.Sprintf(".git/config unchanged; %s not created; .git in place", strings.Join(absent, ", ")), true, nil
}

func probeNoCapabilities(ctx context.Context, e *Env) (string, bool, error) {
	ws, err := probeWorkspace(e)
	if err != nil {
		return "", false, err
	}
	script := `grep -E '^Cap(Inh|Prm|Eff|Bnd|Amb):' /proc/self/status; ` +
		`if command -v unshare >/dev/null; then unshare -U true 2>/dev/null && echo userns=yes || echo userns=no; else echo userns=untried; fi`
	o, err := sandboxed(ctx, e, ws, []string{"fs.read:workspace"}, script)
	if err != nil {
		return "no sandbox: " + err.Error(), false, nil
	}
	var held []string
	caps := 0
	for _, line := range strings.Split(o.Stdout, "\n") {
		name, val, found := strings.Cut(line, ":\t")
		if !found || !strings.HasPrefix(name, "Cap") {
			continue
		}
		caps++
		if strings.Trim(val, "0") != "" {
			held = append(held, name+"="+val)
		}
	}
	userns := "userns=untried"
	if strings.Contains(o.Stdout, "userns=yes") {
		userns = "userns=yes"
	} else if strings.Contains(o.Stdout, "userns=no") {
		userns = "userns=no"
	}
	switch {
	case caps != 5:
		return fmt.Sprintf("could not read the capability sets (exit %d: %s)", o.ExitCode, lastLine(o.Stderr)), false, nil
	case len(held) > 0:
		return "holds " + strings.Join(held, " "), false, nil
	case userns == "userns=yes":
		return "no capability, but it created a user namespace", false, nil
	}
	return "CapInh, CapPrm, CapEff, CapBnd, CapAmb all 0; a new user namespace: " + strings.TrimPrefix(userns, "userns="), true, nil
}

func probeNetNone(ctx context.Context, e *Env) (string, bool, error) {
	ws, err := probeWorkspace(e)
	if err != nil {
		return "", false, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", false, fmt.Errorf("cannot listen on the host's loopback: %w", err)
	}
	defer ln.Close()
	accepted := make(chan bool, 1)
	go func() {
		c, err := ln.Accept()
		if err == nil {
			c.Close()
		}
		accepted <- err == nil
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	// bash's /dev/tcp where there is bash, Python's socket otherwise: the
	// connection is the sandbox's, what the host saw decides.
	script := fmt.Sprintf(`if [ -x /bin/bash ]; then /bin/bash -c 'exec 3<>/dev/tcp/127.0.0.1/%[1]d' 2>/dev/null && echo connected || echo refused;
elif command -v python3 >/dev/null; then python3 -c 'import socket; socket.create_connection(("127.0.0.1", %[1]d), 2)' 2>/dev/null && echo connected || echo refused;
else echo untried; fi`, port)
	o, err := sandboxed(ctx, e, ws, []string{"fs.read:workspace", "net:none"}, script)
	if err != nil {
		return "no sandbox: " + err.Error(), false, nil
	}
	ln.Close()
	reached := <-accepted
	said := strings.TrimSpace(o.Stdout)
	switch {
	case reached:
		return fmt.Sprintf("the host's listener on 127.0.0.1:%d accepted a connection from the sandbox", port), false, nil
	case said == "untried" || said == "":
		return "no bash or python3 in the sandbox to try a connection with", false, nil
	case said == "connected":
		// Only the host's listener was there: a connection it did not
		// see is one the probe cannot account for.
		return fmt.Sprintf("the sandbox connected to 127.0.0.1:%d, which the host's listener did not see", port), false, nil
	}
	return fmt.Sprintf("connecting to the host's 127.0.0.1:%d was refused; the listener saw nothing", port), true, nil
}

// deadlineSlack is how long past its deadline and grace a run may take to
// be gone before the deadline probe fails it. The probe proves that the
// deadline ends a tree that would otherwise sleep for 70 s or more, and
// reports how long it took; a tight bound would prove the host's load
// instead: with four probe runs at once and four busy loops on two cores,
// the deadline's run took up to 2.3 s to be gone, and in CI (two test
// lanes) 7.5 s once before the kill stopped walking /proc.
const deadlineSlack = 10 * time.Second

func probeDeadline(ctx context.Context, e *Env) (string, bool, error) {
	ws, err := probeWorkspace(e)
	if err != nil {
		return "", false, err
	}
	var rnd [4]byte
	rand.Read(rnd[:])
	// A sleep of a length no other process uses: how it is found on the
	// host afterwards.
	marker := fmt.Sprintf("7%d.%d", int(rnd[0])%90+10, int(rnd[1])<<16|int(rnd[2])<<8|int(rnd[3]))
	// The script says first when it started: the deadline counts from
	// the command's release, not from the setting up before it, which
	// under load can take seconds.
	script := fmt.Sprintf(`date +%%s%%N
trap '' TERM
( trap '' TERM; setsid sh -c "trap '' TERM; exec sleep %[1]s" & )
( trap '' TERM; sleep %[1]s & )
exec sleep %[1]s`, marker)
	const limit, grace = 300 * time.Millisecond, 100 * time.Millisecond
	start := time.Now()
	o, err := sandboxed(ctx, e, ws, []string{"fs.read:workspace"}, script, func(s *bwrap.Spec) {
		s.Timeout, s.Grace = limit, grace
	})
	took := time.Since(start)
	if line, _, _ := strings.Cut(o.Stdout, "\n"); err == nil {
		if ns, perr := strconv.ParseInt(line, 10, 64); perr == nil && ns > start.UnixNano() {
			took = time.Since(time.Unix(0, ns))
		}
	}
	// Looked for also when the run is refused: a bwrap that ignores its
	// options has run the script before anyone could check it, and a
	// setsid child may execute its sleep a moment after the run.
	var left []int
	for i := 0; i < 10 && len(left) == 0; i++ {
		if i > 0 {
			time.Sleep(20 * time.Millisecond)
		}
		left = processesWith("sleep", marker)
	}
	if err != nil {
		for _, pid := range left {
			syscall.Kill(pid, syscall.SIGKILL)
		}
		return "no sandbox: " + err.Error(), false, nil
	}
	switch {
	case len(left) > 0:
		// They are this probe's own (their marker is unique to it): it
		// stops them, by PID, so that a failed probe leaves nothing behind.
		for _, pid := range left {
			syscall.Kill(pid, syscall.SIGKILL)
		}
		return fmt.Sprintf("%d process(es) of the tree outlived the run (pids %v)", len(left), left), false, nil
	case !o.TimedOut:
		return fmt.Sprintf("the run ended without its deadline (exit %d) after %v", o.ExitCode, took.Round(time.Millisecond)), false, nil
	case took > limit+grace+deadlineSlack:
		return fmt.Sprintf("the run stopped %v after its command started, against a %v deadline", took.Round(time.Millisecond), limit), false, nil
	}
	return fmt.Sprintf("stopped %v after its command started (deadline %v, %s); no process of the tree left on the host",
		took.Round(time.Millisecond), limit, o.Signal), true, nil
}

// processesWith returns the host processes whose command line is exactly
// prog and arg: only looked at, never signalled.
func processesWith(prog, arg string) []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, ent := range entries {
		var pid int
		if _, err := fmt.Sscanf(ent.Name(), "%d", &pid); err != nil {
			continue
		}
		cmdline, err := os.ReadFile("/proc/" + ent.Name() + "/cmdline")
		if err != nil {
			continue
		}
		args := strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00")
		if len(args) == 2 && filepath.Base(args[0]) == prog && args[1] == arg {
			pids = append(pids, pid)
		}
	}
	return pids
}

func probeEnvironment(ctx context.Context, e *Env) (string, bool, error) {
	ws, err := probeWorkspace(e)
	if err != nil {
		return "", false, err
	}
	const granted, secret = "PROBE_GRANTED_NAME", "PROBE_SECRET_TOKEN"
	env := append(slices.Clone(e.Environ), granted+"=yes", secret+"=leaked", "LD_PRELOAD=/nonexistent/probe.so")
	o, err := sandboxed(ctx, e, ws, []string{"fs.read:workspace", "env:" + granted}, `env -0`, func(s *bwrap.Spec) { s.Environ = env })
	if err != nil {
		return "no sandbox: " + err.Error(), false, nil
	}
	if o.ExitCode != 0 {
		return fmt.Sprintf("env exited %d: %s", o.ExitCode, lastLine(o.Stderr)), false, nil
	}
	allowed := map[string]bool{"PATH": true, "HOME": true, "LANG": true, "LC_ALL": true, "TERM": true, "TMPDIR": true, granted: true, "PWD": true, "SHLVL": true, "_": true, "OLDPWD": true}
	var names, extra []string
	for _, kv := range strings.Split(strings.TrimRight(o.Stdout, "\x00"), "\x00") {
		name, val, _ := strings.Cut(kv, "=")
		names = append(names, name)
		if !allowed[name] {
			extra = append(extra, name)
		}
		if name == "HOME" && val != bwrap.Home {
			extra = append(extra, "HOME="+val)
		}
	}
	slices.Sort(names)
	switch {
	case len(extra) > 0:
		return "the sandbox's environment holds " + strings.Join(extra, ", "), false, nil
	case !slices.Contains(names, granted):
		return "the granted " + granted + " is missing", false, nil
	}
	return "only " + strings.Join(names, ", ") + " (" + secret + " and LD_PRELOAD held back)", true, nil
}

func probeTrustedState(ctx context.Context, e *Env) (string, bool, error) {
	ws, err := probeWorkspace(e)
	if err != nil {
		return "", false, err
	}
	dirs := []string{e.Harness.StateDir(), e.Harness.CacheDir()}
	if home, ok := substrate.LookupEnv(e.Environ, "HOME"); ok {
		dirs = append(dirs, home)
	}
	// What each directory holds on the host, but for the way down to the
	// probe's own workspace (its mount point shows inside); the sandbox
	// must see none of it.
	hostNames := map[string][]string{}
	var script strings.Builder
	for _, d := range dirs {
		if d == "" || !filepath.IsAbs(d) || hostNames[d] != nil {
			continue
		}
		entries, err := os.ReadDir(d)
		if err != nil {
			continue
		}
		names := []string{}
		for _, ent := range entries {
			p := filepath.Join(d, ent.Name())
			if p == ws || strings.HasPrefix(ws, p+"/") {
				continue
			}
			names = append(names, ent.Name())
		}
		hostNames[d] = names
		fmt.Fprintf(&script, "echo %q; ls -A %q 2>/dev/null; echo;\n", "@"+d, d)
	}
	if script.Len() == 0 {
		if _, err := sandboxed(ctx, e, ws, []string{"fs.read:workspace"}, "true"); err != nil {
			return "no sandbox: " + err.Error(), false, nil
		}
		return "the harness configuration names no state or cache directory that exists: nothing to hide", false, nil
	}
	o, err := sandboxed(ctx, e, ws, []string{"fs.read:workspace"}, script.String())
	if err != nil {
		return "no sandbox: " + err.Error(), false, nil
	}
	seen := map[string][]string{}
	cur := ""
	for _, line := range strings.Split(o.Stdout, "\n") {
		switch {
		case strings.HasPrefix(line, "@"):
			cur = line[1:]
		case line != "" && cur != "":
			seen[cur] = append(seen[cur], line)
		}
	}
	var bad, good []string
	hidden := 0
	for d, names := range hostNames {
		var leaked []string
		for _, n := range seen[d] {
			if slices.Contains(names, n) {
				leaked = append(leaked, n)
			}
		}
		if len(leaked) > 0 {
			bad = append(bad, fmt.Sprintf("%s shows %s", d, strings.Join(leaked, ", ")))
		} else {
			good = append(good, d)
			hidden += len(names)
		}
	}
	slices.Sort(bad)
	slices.Sort(good)
	if len(bad) > 0 {
		return strings.Join(bad, "; "), false, nil
	}
	return fmt.Sprintf("none of the %d host entries visible inside %s", hidden, strings.Join(good, ", ")), true, nil
}

func probeOutputAndTmp(ctx context.Context, e *Env) (string, bool, error) {
	ws, err := probeWorkspace(e)
	if err != nil {
		return "", false, err
	}
	// Names of the probe's own: should the sandbox's /tmp be the host's
	// (a bwrap that ignores its options), what it wrote there goes.
	marker := "cordon-probe-tmp-" + filepath.Base(e.Dir)
	defer os.Remove(filepath.Join("/tmp", marker))
	defer os.Remove(filepath.Join("/tmp", marker+"-big"))
	defer os.Remove(filepath.Join("/dev", marker))
	script := fmt.Sprintf(`echo x > /tmp/%[1]s || echo tmp-failed >&2
head -c 2000000 /dev/zero 2>/dev/null > /tmp/%[1]s-big && echo tmp-uncapped >&2
echo x > /dev/%[1]s 2>/dev/null && echo dev-written >&2
head -c 200000 /dev/zero | tr '\0' 'a'`, marker)
	o, err := sandboxed(ctx, e, ws, []string{"fs.read:workspace", "tmp:1MiB", "output:4KiB"}, script, func(s *bwrap.Spec) { s.MaxOutput = 4 << 10 })
	if err != nil {
		return "no sandbox: " + err.Error(), false, nil
	}
	var bad []string
	if _, err := os.Lstat(filepath.Join("/tmp", marker)); err == nil {
		bad = append(bad, "the sandbox's /tmp is the host's")
	}
	for _, w := range []string{"tmp-failed", "tmp-uncapped", "dev-written"} {
		if strings.Contains(o.Stderr, w) {
			bad = append(bad, w)
		}
	}
	if !o.StdoutClipped || o.StdoutBytes != 200000 || len(o.Stdout) > 8<<10 {
		bad = append(bad, fmt.Sprintf("output not bounded: %d bytes counted, %d kept, clipped %v", o.StdoutBytes, len(o.Stdout), o.StdoutClipped))
	}
	if len(bad) > 0 {
		return strings.Join(bad, "; "), false, nil
	}
	return fmt.Sprintf("200000 bytes counted, %d kept; /tmp private and capped at 1MiB; /dev read-only", len(o.Stdout)), true, nil
}
