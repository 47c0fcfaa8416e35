package bwrap

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/cordon-run/cordon/internal/testenv"
	"github.com/cordon-run/cordon/substrate"
)

// tempWorkspace returns a canonical, empty workspace directory.
func tempWorkspace(t *testing.T) string {
	t.Helper()
	ws, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return ws
}

func TestPolicyStringAndMechanisms(t *testing.T) {
	p := NewPolicy("/w")
	want := "bwrap: workspace /w (write; read-only: .efferent, .foundry, .git/hooks/, .git/config, .git/commondir, .git/modules/, .git/worktrees/), network none, env PATH HOME LANG TERM"
	if got := p.String(); got != want {
		t.Errorf("String() = %q\nwant        %q", got, want)
	}
	mechs := p.Mechanisms()
	for _, m := range []substrate.Mechanism{BindWorkspace, ReadOnlyHarness, ReadOnlyWriteLater, PinParents, UnshareNet, CapDrop, UnsharePID, TmpfsTmp, EmptyHome, HideHomes, HideServiceSockets, ClearEnv, NewSession, DieWithParent} {
		if !slices.Contains(mechs, m) {
			t.Errorf("the shell policy does not name %v", m)
		}
	}
	if slices.Contains(mechs, ShareNet) || slices.Contains(mechs, HideWorkspace) {
		t.Errorf("the shell policy names mechanisms it does not apply: %v", mechs)
	}

	q := p.WithAccess(AccessNone).WithNetwork(NetHost).WithEnv("GOPROXY").WithReadOnly("/opt/tool")
	if got := q.String(); got != "bwrap: workspace /w (none), network host, env PATH HOME LANG TERM GOPROXY, read-only binds /opt/tool" {
		t.Errorf("String() = %q", got)
	}
	mechs = q.Mechanisms()
	for _, m := range []substrate.Mechanism{HideWorkspace, ShareNet, ReadOnlyBinds} {
		if !slices.Contains(mechs, m) {
			t.Errorf("policy %v does not name %v", q, m)
		}
	}
	for _, m := range []substrate.Mechanism{BindWorkspace, ReadOnlyHarness, UnshareNet} {
		if slices.Contains(mechs, m) {
			t.Errorf("policy %v names %v, which it does not apply", q, m)
		}
	}
	if p.Access() != AccessWrite || p.Network() != NetNone {
		t.Errorf("With methods changed the original policy: %v", p)
	}
	if got := BindWorkspace.String(); got != "bwrap: --bind <ws> <ws>" {
		t.Errorf("BindWorkspace.String() = %q", got)
	}
}

func TestValidate(t *testing.T) {
	ok := NewPolicy("/srv/ws")
	if err := ok.Validate(); err != nil {
		t.Fatalf("Validate(%v) = %v", ok, err)
	}
	for _, p := range []Policy{
		NewPolicy("relative/ws"),
		NewPolicy("/srv/ws/../x"),
		NewPolicy("/"),
		NewPolicy("/tmp"),
		NewPolicy(Home),
		NewPolicy(Home + "/x"),
		NewPolicy("/proc/1"),
		NewPolicy("/dev"),
		ok.WithAccess(Access(7)),
		ok.WithNetwork(Network(3)),
		ok.WithHarnessState("a/b"),
		ok.WithHarnessState(".."),
		ok.WithWriteLater("../outside"),
		ok.WithWriteLater("/etc/passwd"),
		ok.WithWriteLater(""),
		ok.WithReadOnly("relative"),
		ok.WithReadOnly("/"),
		ok.WithEnv("LD_PRELOAD"),
	} {
		err := p.Validate()
		if err == nil {
			t.Errorf("Validate(%v) = nil, want an error", p)
		} else if !errors.Is(err, ErrInvalidPolicy) && !errors.Is(err, ErrEnvRefused) {
			t.Errorf("Validate(%v) = %v, not a policy error", p, err)
		}
	}
}

func TestCheckEnvName(t *testing.T) {
	for _, name := range []string{"GOPROXY", "MY_TOKEN", "_X", "x1", "TERM_X"} {
		if err := CheckEnvName(name); err != nil {
			t.Errorf("CheckEnvName(%q) = %v", name, err)
		}
	}
	for _, name := range []string{"LD_PRELOAD", "LD_LIBRARY_PATH", "LD_AUDIT", "DYLD_INSERT_LIBRARIES", "BASH_ENV", "ENV",
		"PATH", "HOME", "SHELLOPTS", "PS4", "BASH_FUNC_ls%%", "NODE_OPTIONS", "GOFLAGS", "GIT_DIR", "PYTHONPATH", "ld_preload", "", "1X", "A-B", "A=B"} {
		err := CheckEnvName(name)
		if !errors.Is(err, ErrEnvRefused) {
			t.Errorf("CheckEnvName(%q) = %v, want ErrEnvRefused", name, err)
			continue
		}
		if !strings.HasPrefix(err.Error(), "refusing to pass "+name+" into the sandbox — ") {
			t.Errorf("message %q does not name the operation, the variable and the boundary", err)
		}
	}
}

func TestParseNetwork(t *testing.T) {
	for s, want := range map[string]Network{"none": NetNone, "host": NetHost} {
		if n, err := ParseNetwork(s); err != nil || n != want || n.String() != s {
			t.Errorf("ParseNetwork(%q) = %v, %v", s, n, err)
		}
	}
	if _, err := ParseNetwork("wifi"); err == nil {
		t.Errorf("ParseNetwork(wifi) succeeded")
	}
}

// index returns the position of the flag sequence seq in args, or -1.
func index(args []string, seq ...string) int {
	for i := 0; i+len(seq) <= len(args); i++ {
		if slices.Equal(args[i:i+len(seq)], seq) {
			return i
		}
	}
	return -1
}

func TestArgsOrderAndEnvironment(t *testing.T) {
	ws := tempWorkspace(t)
	os.MkdirAll(filepath.Join(ws, ".git/hooks"), 0o755)
	os.WriteFile(filepath.Join(ws, ".git/config"), nil, 0o644)
	tool := filepath.Join(ws, ".efferent/tools/t1")
	environ := []string{"PATH=/usr/bin:relative:/bin", "LANG=C.UTF-8", "SECRET_TOKEN=hunter2", "GOPROXY=off", "HOME=/nonexistent-home"}
	p := NewPolicy(ws).WithEnv("GOPROXY", "UNSET_NAME")
	if err := os.MkdirAll(tool, 0o755); err != nil {
		t.Fatal(err)
	}
	p = p.WithReadOnly(tool)
	sb, err := p.Prepare(environ)
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	args := sb.Args([]string{"--bind", "/", "/x"})
	order := [][]string{
		{"--unshare-user", "--disable-userns"},
		{"--unshare-net"},
		{"--cap-drop", "ALL"},
		{"--ro-bind", "/", "/"},
		{"--tmpfs", "/tmp"},
		{"--tmpfs", "/run"},
		{"--bind", ws, ws},
		{"--bind", ws + "/.git", ws + "/.git"},
		{"--ro-bind", ws + "/.efferent", ws + "/.efferent"},
		{"--ro-bind", ws + "/.git/hooks", ws + "/.git/hooks"},
		{"--ro-bind", tool, tool},
		{"--chdir", ws},
		{"--", "/bin/sh", "-c", prologue, "cordon", "--bind", "/", "/x"},
	}
	last := -1
	for _, seq := range order {
		i := index(args, seq...)
		if i < 0 {
			t.Fatalf("args lack %q:\n%q", seq, args)
		}
		if i < last {
			t.Errorf("%q comes before the mount it must cover:\n%q", seq, args)
		}
		last = i
	}
	if i := index(args, "--ro-bind", ws+"/.git", ws+"/.git"); i >= 0 {
		t.Errorf(".git is bound read-only as a whole although it exists; only its hooks and config are: %q", args)
	}
	if i := index(args, "--"); i != index(args, "--", "/bin/sh") {
		t.Errorf("the command's own \"--\" ended bwrap's options early: %q", args)
	}
	for _, a := range args {
		if strings.Contains(a, "hunter2") || strings.Contains(a, "off") {
			t.Errorf("an environment value is on bwrap's command line: %q", a)
		}
	}
	if str := sb.String(); !strings.HasPrefix(str, "bwrap --unshare-user --disable-userns ") || !strings.Contains(str, " --chdir "+ws) {
		t.Errorf("String() = %q", str)
	}
	if got := shellQuote("it's a b"); got != `'it'\''s a b'` {
		t.Errorf("shellQuote = %s", got)
	}
	env := sb.Env()
	want := []string{"PATH=" + ws + "/.local/bin:/usr/bin:/bin", "HOME=" + Home, "LANG=C.UTF-8", "GOPROXY=off"}
	if !slices.Equal(env, want) {
		t.Errorf("Env() = %q\nwant    %q", env, want)
	}
}

// TestPinsExistingGitDirectory: with .git present, .git is pinned (bound
// onto itself, so it cannot be renamed away), not made read-only, and the
// absent write-later paths get placeholders that mean to git what their
// absence meant, and that stay (another run may have them mounted).
func TestPinsExistingGitDirectory(t *testing.T) {
	ws := tempWorkspace(t)
	os.MkdirAll(filepath.Join(ws, ".git/hooks"), 0o755)
	sb, err := NewPolicy(ws).Prepare(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	args := sb.Args([]string{"true"})
	if index(args, "--bind", ws+"/.git", ws+"/.git") < 0 {
		t.Errorf(".git is not pinned: %q", args)
	}
	if index(args, "--ro-bind", ws+"/.git", ws+"/.git") >= 0 {
		t.Errorf(".git is read-only as a whole although it exists: %q", args)
	}
	// .git/config was absent: a mount point was made for it.
	if st, err := os.Lstat(filepath.Join(ws, ".git/config")); err != nil || !st.Mode().IsRegular() || st.Size() != 0 {
		t.Errorf(".git/config mount point: %v %v", st, err)
	}
	if got, err := os.ReadFile(filepath.Join(ws, ".git/commondir")); err != nil || string(got) != ".\n" {
		t.Errorf(".git/commondir placeholder = %q, %v; want the git directory itself", got, err)
	}
	for _, d := range []string{".git/modules", ".git/worktrees"} {
		if st, err := os.Lstat(filepath.Join(ws, d)); err != nil || !st.IsDir() {
			t.Errorf("%s placeholder: %v %v", d, st, err)
		}
		if index(args, "--ro-bind", ws+"/"+d, ws+"/"+d) < 0 {
			t.Errorf("%s is not bound read-only: %q", d, args)
		}
	}
	sb.Close()
	if _, err := os.Lstat(filepath.Join(ws, ".git/commondir")); err != nil {
		t.Errorf("Close removed the .git/commondir placeholder, which another run may have mounted: %v", err)
	}
	if _, err := os.Lstat(filepath.Join(ws, ".git/hooks")); err != nil {
		t.Errorf("Close removed .git/hooks, which existed before: %v", err)
	}
}

func TestPrepareCreatesAndCleansUp(t *testing.T) {
	ws := tempWorkspace(t)
	sb, err := NewPolicy(ws).Prepare(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range DefaultHarnessState {
		st, err := os.Lstat(filepath.Join(ws, h))
		if err != nil || !st.IsDir() || st.Mode().Perm() != 0o700 {
			t.Errorf("harness directory %s: %v %v; want a 0700 directory", h, st, err)
		}
	}
	if st, err := os.Lstat(filepath.Join(ws, ".git")); err != nil || !st.IsDir() {
		t.Fatalf("no .git mount point was made: %v", err)
	}
	if err := sb.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(filepath.Join(ws, ".git")); err == nil {
		t.Errorf("Close left the empty .git mount point behind")
	}
	for _, h := range DefaultHarnessState {
		if _, err := os.Lstat(filepath.Join(ws, h)); err != nil {
			t.Errorf("Close removed harness directory %s: %v", h, err)
		}
	}

	// A mount point that something else filled meanwhile stays.
	sb, err = NewPolicy(ws).Prepare(nil)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(ws, ".git/HEAD"), []byte("ref: refs/heads/main\n"), 0o644)
	sb.Close()
	if _, err := os.Lstat(filepath.Join(ws, ".git/HEAD")); err != nil {
		t.Errorf("Close removed a .git that is no longer empty: %v", err)
	}
}

// TestConcurrentPreparesProtectAlike prepares many sandboxes of one fresh
// workspace at once: whichever creates a placeholder first, every one of
// them starts and binds every protected path read-only.
func TestConcurrentPreparesProtectAlike(t *testing.T) {
	for round := 0; round < 20; round++ {
		ws := tempWorkspace(t)
		os.MkdirAll(filepath.Join(ws, ".git"), 0o755) // a .git whose protected paths are all absent
		var wg sync.WaitGroup
		errs := make([]error, 8)
		args := make([][]string, 8)
		for i := range errs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				sb, err := NewPolicy(ws).Prepare(nil)
				if err != nil {
					errs[i] = err
					return
				}
				defer sb.Close()
				args[i] = sb.Args([]string{"true"})
			}()
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Fatalf("round %d: Prepare %d: %v", round, i, err)
			}
			for _, p := range []string{".efferent", ".foundry", ".git/hooks", ".git/config", ".git/commondir", ".git/modules", ".git/worktrees"} {
				if index(args[i], "--ro-bind", ws+"/"+p, ws+"/"+p) < 0 {
					t.Fatalf("round %d: sandbox %d does not bind %s read-only: %q", round, i, p, args[i])
				}
			}
		}
	}
}

func TestPrepareRefusesSymlinks(t *testing.T) {
	for _, tc := range []struct{ dirs, link string }{
		{"", ".efferent"},
		{"", ".foundry"},
		{"", ".git"},
		{".git", ".git/hooks"},
		{".git", ".git/config"},
	} {
		ws := tempWorkspace(t)
		if tc.dirs != "" {
			os.MkdirAll(filepath.Join(ws, tc.dirs), 0o755)
		}
		os.Symlink("/etc", filepath.Join(ws, tc.link))
		sb, err := NewPolicy(ws).Prepare(nil)
		if err == nil {
			sb.Close()
			t.Errorf("%s a symlink: Prepare succeeded", tc.link)
			continue
		}
		var e *Error
		if !errors.Is(err, ErrProtectedPath) || !errors.As(err, &e) || e.Path != tc.link || e.Root != ws {
			t.Errorf("%s a symlink: Prepare = %v, want ErrProtectedPath naming it", tc.link, err)
		}
	}
	// With read access nothing is re-bound, so nothing is refused.
	ws := tempWorkspace(t)
	os.Symlink("/etc", filepath.Join(ws, ".efferent"))
	sb, err := NewPolicy(ws).WithAccess(AccessRead).Prepare(nil)
	if err != nil {
		t.Fatalf("read access with a symlinked harness directory: %v", err)
	}
	sb.Close()
}

func TestPrepareChecksTheFileSystem(t *testing.T) {
	ws := tempWorkspace(t)
	link := filepath.Join(t.TempDir(), "link")
	os.Symlink(ws, link)
	for name, p := range map[string]Policy{
		"not canonical":    NewPolicy(link),
		"missing":          NewPolicy(filepath.Join(ws, "missing")),
		"missing ro bind":  NewPolicy(ws).WithReadOnly(filepath.Join(ws, "missing")),
		"symlink ro bind":  NewPolicy(ws).WithReadOnly(link),
		"refused env name": NewPolicy(ws).WithEnv("LD_PRELOAD"),
	} {
		if sb, err := p.Prepare(nil); err == nil {
			sb.Close()
			t.Errorf("%s: Prepare(%v) succeeded", name, p)
		}
	}
}

func TestHiddenDirs(t *testing.T) {
	home := t.TempDir() // under /tmp, already fresh: not listed again
	other, err := os.MkdirTemp("/var/tmp", "cordon-home-")
	if err != nil {
		t.Skipf("no /var/tmp: %v", err)
	}
	defer os.RemoveAll(other)
	for _, tc := range []struct {
		home    string
		has     string
		hasNot  string
		comment string
	}{
		{home, "/run", home, "a home under /tmp is hidden by the fresh /tmp"},
		{other, other, "", "a home elsewhere is hidden"},
		{"/usr/sbin", "/root", "/usr/sbin", "a system directory is never hidden"},
		{"/", "/home", "/", "/ is never hidden"},
	} {
		dirs := hiddenDirs([]string{"HOME=" + tc.home})
		if tc.has != "" && !slices.Contains(dirs, tc.has) && !underAny(tc.has, dirs) {
			t.Errorf("%s: hiddenDirs(HOME=%s) = %v lacks %s", tc.comment, tc.home, dirs, tc.has)
		}
		if tc.hasNot != "" && slices.Contains(dirs, tc.hasNot) {
			t.Errorf("%s: hiddenDirs(HOME=%s) = %v holds %s", tc.comment, tc.home, dirs, tc.hasNot)
		}
		for i, d := range dirs {
			for j, e := range dirs {
				if i != j && within(d, e) {
					t.Errorf("hiddenDirs lists %s inside %s", d, e)
				}
			}
		}
	}
}

func TestFind(t *testing.T) {
	empty, full, noexec := t.TempDir(), t.TempDir(), t.TempDir()
	os.WriteFile(filepath.Join(full, "bwrap"), []byte("#!/bin/sh\n"), 0o755)
	os.WriteFile(filepath.Join(noexec, "bwrap"), []byte("#!/bin/sh\n"), 0o644)
	got, err := Find(strings.Join([]string{"", "relative", empty, noexec, full}, ":"))
	if err != nil || got != filepath.Join(full, "bwrap") {
		t.Errorf("Find = %q, %v; want %s", got, err, filepath.Join(full, "bwrap"))
	}
	if _, err := Find(empty + ":" + noexec); err == nil || !strings.Contains(err.Error(), "bwrap not found in PATH") {
		t.Errorf("Find without bwrap = %v", err)
	}
}

func TestDetect(t *testing.T) {
	dir := t.TempDir()
	fake := func(name, script string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("#!/bin/sh\n"+script), 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	failing := fake("failing", "echo 'bwrap: No permissions to create new namespace' >&2; exit 1\n")
	// A "bwrap" that runs the command on the host, without a sandbox: it
	// succeeds, and Detect must still say no.
	unsandboxed := fake("unsandboxed", "while [ \"$1\" != -- ]; do shift; done; shift; exec \"$@\"\n")
	for bin, want := range map[string]string{
		failing:                       "No permissions to create new namespace",
		unsandboxed:                   "not in a sandbox",
		filepath.Join(dir, "missing"): "cannot run",
	} {
		err := Detect(context.Background(), bin)
		if !errors.Is(err, ErrUnavailable) || !strings.HasPrefix(err.Error(), UnavailableMessage) || !strings.Contains(err.Error(), want) {
			t.Errorf("Detect(%s) = %v; want ErrUnavailable with %q", filepath.Base(bin), err, want)
		}
	}
	// The answer is kept for the binary.
	os.WriteFile(failing, []byte("#!/bin/sh\nexit 0\n"), 0o755)
	if err := Detect(context.Background(), failing); err == nil {
		t.Errorf("Detect did not keep its answer for %s", failing)
	}

	bin, err := Find(os.Getenv("PATH"))
	testenv.Require(t, err == nil, "bubblewrap: %v", err)
	err = Detect(context.Background(), bin)
	testenv.Require(t, err == nil, "a working bubblewrap sandbox: %v", err)
}

func TestCommandReportsInitAndStart(t *testing.T) {
	bin, err := Find(os.Getenv("PATH"))
	testenv.Require(t, err == nil, "bubblewrap: %v", err)
	testenv.Require(t, Detect(context.Background(), bin) == nil, "a working bubblewrap sandbox")
	ws := tempWorkspace(t)
	sb, err := NewPolicy(ws).Prepare(os.Environ())
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	cmd, err := sb.Command(bin, []string{"sh", "-c", "readlink /proc/1/ns/pid; ls /proc/self/fd"})
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sb.Launched()
	pid, ns, ok := sb.Init()
	err = cmd.Wait()
	if err != nil || !ok || pid <= 0 || !sb.Started() {
		t.Fatalf("Init() = %d, %d, %v; Started %v; Wait %v; output %q", pid, ns, ok, sb.Started(), err, out.String())
	}
	if want := "pid:[" + strconv.FormatUint(ns, 10) + "]\n"; !strings.HasPrefix(out.String(), want) {
		t.Errorf("the command's PID namespace is %q, Init reported %q", out.String(), want)
	}
	// The command inherits only 0, 1 and 2 (and the fd ls opens): not the
	// marker or the status descriptor.
	if fds := strings.Fields(strings.SplitN(out.String(), "\n", 2)[1]); !slices.Equal(fds, []string{"0", "1", "2", "3"}) {
		t.Errorf("the command holds descriptors %v", fds)
	}
	if _, err := sb.Command(bin, []string{"true"}); err == nil {
		t.Errorf("a second Command on one Sandbox succeeded")
	}
}

func TestSetupFailureIsNotTheCommandsFailure(t *testing.T) {
	bin, err := Find(os.Getenv("PATH"))
	testenv.Require(t, err == nil, "bubblewrap: %v", err)
	testenv.Require(t, Detect(context.Background(), bin) == nil, "a working bubblewrap sandbox")
	ws := tempWorkspace(t)
	gone := filepath.Join(t.TempDir(), "tool")
	os.Mkdir(gone, 0o755)
	sb, err := NewPolicy(ws).WithReadOnly(gone).Prepare(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	os.Remove(gone) // vanishes between Prepare and bwrap: bwrap cannot bind it
	cmd, _ := sb.Command(bin, []string{"sh", "-c", "echo ran; exit 1"})
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.Start()
	sb.Launched()
	cmd.Wait()
	if sb.Started() || strings.Contains(stdout.String(), "ran") {
		t.Fatalf("Started() = true after bwrap failed to set up (stdout %q)", stdout.String())
	}
	err = sb.Failure(context.Background(), stderr.String())
	if !errors.Is(err, ErrSetup) || !strings.Contains(err.Error(), gone) || !strings.Contains(err.Error(), ws) {
		t.Errorf("Failure = %v; want ErrSetup with bwrap's message and the workspace", err)
	}
}
