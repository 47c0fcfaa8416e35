package bwrap

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cordon-run/cordon/harness"
	"github.com/cordon-run/cordon/internal/mountinfo"
	"github.com/cordon-run/cordon/internal/placeholder"
	"github.com/cordon-run/cordon/internal/testenv"
	"github.com/cordon-run/cordon/refusal"
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

// testHarness is the default harness configuration with the per-user
// directories in the test's temporary directory.
var testHarness harness.Config

func TestMain(m *testing.M) { testenv.Main(m, &testHarness) }

// newPolicy is NewPolicy under the test's harness configuration.
func newPolicy(ws string) Policy { return NewPolicy(ws, testHarness) }

// makeGitDir makes dir a valid, empty git directory.
func makeGitDir(t *testing.T, dir string) {
	t.Helper()
	for _, d := range []string{"objects", "refs/heads"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "HEAD"), []byte("ref: refs/heads/main\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestPolicyStringAndMechanisms(t *testing.T) {
	p := newPolicy("/w")
	want := "bwrap: workspace /w (write; harness state .efferent, .foundry read-only; write-later paths read-only), network none, tmp 512MiB, env PATH HOME LANG TERM"
	if got := p.String(); got != want {
		t.Errorf("String() = %q\nwant        %q", got, want)
	}
	mechs := p.Mechanisms()
	for _, m := range []substrate.Mechanism{BindWorkspace, ReadOnlyHarness, ReadOnlyWriteLater, PinParents, UnshareNet, CapDrop, UnsharePID, TmpfsTmp(DefaultTmpSize), ReadOnlyDev, EmptyHome, HideHomes, HideServiceSockets, HideTrustedState, ClearEnv, NewSession, DieWithParent} {
		if !slices.Contains(mechs, m) {
			t.Errorf("the shell policy does not name %v", m)
		}
	}
	if slices.Contains(mechs, ShareNet) || slices.Contains(mechs, HideWorkspace) {
		t.Errorf("the shell policy names mechanisms it does not apply: %v", mechs)
	}

	q := p.WithAccess(AccessNone).WithNetwork(NetHost).WithEnv("GOPROXY").WithReadOnly("/opt/tool").WithTmpSize(1 << 20).WithSystemPath(true)
	if got := q.String(); got != "bwrap: workspace /w (none), network host, tmp 1MiB, env PATH HOME LANG TERM GOPROXY, system PATH, read-only binds /opt/tool" {
		t.Errorf("String() = %q", got)
	}
	mechs = q.Mechanisms()
	for _, m := range []substrate.Mechanism{HideWorkspace, ShareNet, ReadOnlyBinds, TmpfsTmp(1 << 20), SystemPath} {
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
	ok := newPolicy("/srv/ws")
	if err := ok.Validate(); err != nil {
		t.Fatalf("Validate(%v) = %v", ok, err)
	}
	for _, p := range []Policy{
		newPolicy("relative/ws"),
		newPolicy("/srv/ws/../x"),
		newPolicy("/"),
		newPolicy("/tmp"),
		newPolicy(Home),
		newPolicy(Home + "/x"),
		newPolicy("/proc/1"),
		newPolicy("/dev"),
		newPolicy(testHarness.StateDir()),
		newPolicy(filepath.Dir(testHarness.CacheDir())),
		NewPolicy("/srv/ws", harness.Config{}),
		NewPolicy("/srv/ws", testHarness.WithState("a/b")),
		NewPolicy("/srv/ws", testHarness.WithState("..")),
		NewPolicy("/srv/ws", testHarness.WithWriteLater("../outside")),
		NewPolicy("/srv/ws", testHarness.WithWriteLater("/etc/passwd")),
		NewPolicy("/srv/ws", testHarness.WithWriteLater("")),
		ok.WithAccess(Access(7)),
		ok.WithNetwork(Network(3)),
		ok.WithTmpSize(0),
		ok.WithReadOnly("relative"),
		ok.WithReadOnly("/"),
		ok.WithEnv("LD_PRELOAD"),
	} {
		err := p.Validate()
		if err == nil {
			t.Errorf("Validate(%v) = nil, want an error", p)
		} else if !errors.Is(err, ErrInvalidPolicy) && !errors.Is(err, ErrEnvRefused) && !errors.Is(err, refusal.WorkspaceRefused) {
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
	makeGitDir(t, filepath.Join(ws, ".git"))
	os.MkdirAll(filepath.Join(ws, ".git/hooks"), 0o755)
	os.WriteFile(filepath.Join(ws, ".git/config"), nil, 0o644)
	tool := filepath.Join(ws, ".efferent/tools/t1")
	environ := []string{"PATH=/usr/bin:relative:/bin", "LANG=C.UTF-8", "SECRET_TOKEN=hunter2", "GOPROXY=off", "HOME=/nonexistent-home"}
	p := newPolicy(ws).WithEnv("GOPROXY", "UNSET_NAME")
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
		{"--dev", "/dev"},
		{"--size", strconv.Itoa(DefaultTmpSize), "--tmpfs", "/dev/shm"},
		{"--size", strconv.Itoa(DefaultTmpSize), "--tmpfs", "/tmp"},
		{"--size", strconv.Itoa(hiddenSize), "--tmpfs", "/run"},
		{"--bind", ws, ws},
		{"--bind", ws + "/.git", ws + "/.git"},
		{"--bind", ws + "/.git/objects", ws + "/.git/objects"},
		{"--ro-bind", ws + "/.efferent", ws + "/.efferent"},
		{"--ro-bind", ws + "/.git/hooks", ws + "/.git/hooks"},
		{"--ro-bind", tool, tool},
		{"--remount-ro", "/run"},
		{"--remount-ro", "/dev"},
		{"--chdir", ws},
		{"--block-fd", "3", "--sync-fd", "7", "--json-status-fd", "4", "--seccomp", "6", "--", "--bind", "/", "/x"},
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
	if i := index(args, "--"); i != index(args, "--", "--bind", "/", "/x") {
		t.Errorf("the command's own \"--\" ended bwrap's options early: %q", args)
	}
	for _, ro := range []string{".git/HEAD", ".git/config", ".git/commondir", ".git/modules", ".git/worktrees", ".vscode", ".mcp.json"} {
		if index(args, "--ro-bind", ws+"/"+ro, ws+"/"+ro) < 0 {
			t.Errorf("%s is not bound read-only: %q", ro, args)
		}
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

// TestPinsExistingGitDirectory: with a valid .git present, .git and its
// objects and refs are pinned (bound onto themselves, so they cannot be
// removed or renamed away), not made read-only; its HEAD and the
// write-later paths are read-only, and the absent ones get placeholders
// that mean to git what their absence meant. Those inside .git stay (no
// one lists them); those in the workspace go with the last run.
func TestPinsExistingGitDirectory(t *testing.T) {
	ws := tempWorkspace(t)
	makeGitDir(t, filepath.Join(ws, ".git"))
	os.MkdirAll(filepath.Join(ws, ".git/hooks"), 0o755)
	sb, err := newPolicy(ws).Prepare(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	args := sb.Args([]string{"true"})
	for _, pin := range []string{".git", ".git/objects", ".git/refs"} {
		if index(args, "--bind", ws+"/"+pin, ws+"/"+pin) < 0 {
			t.Errorf("%s is not pinned: %q", pin, args)
		}
		if index(args, "--ro-bind", ws+"/"+pin, ws+"/"+pin) >= 0 {
			t.Errorf("%s is read-only as a whole although it is a valid git directory: %q", pin, args)
		}
	}
	// The root's HEAD too: whatever happens to .git, the root never takes
	// the shape of a git directory.
	if index(args, "--ro-bind", ws+"/HEAD", ws+"/HEAD") < 0 {
		t.Errorf("the root's HEAD is not protected: %q", args)
	}
	// .git/config was absent: a mount point was made for it.
	if st, err := os.Lstat(filepath.Join(ws, ".git/config")); err != nil || !st.Mode().IsRegular() || st.Size() != 0 {
		t.Errorf(".git/config mount point: %v %v", st, err)
	}
	if got, err := os.ReadFile(filepath.Join(ws, ".git/commondir")); err != nil || string(got) != ".\n" {
		t.Errorf(".git/commondir placeholder = %q, %v; want the git directory itself", got, err)
	}
	for _, d := range []string{".git/modules", ".git/worktrees", ".vscode", ".mcp.json"} {
		if st, err := os.Lstat(filepath.Join(ws, d)); err != nil || !st.IsDir() {
			t.Errorf("%s placeholder: %v %v", d, st, err)
		}
		if index(args, "--ro-bind", ws+"/"+d, ws+"/"+d) < 0 {
			t.Errorf("%s is not bound read-only: %q", d, args)
		}
	}
	sb.Close()
	for _, gone := range []string{".vscode", ".mcp.json", ".claude"} {
		if _, err := os.Lstat(filepath.Join(ws, gone)); err == nil {
			t.Errorf("Close left the placeholder %s behind", gone)
		}
	}
	for _, kept := range []string{".git/commondir", ".git/config", ".git/modules"} {
		if _, err := os.Lstat(filepath.Join(ws, kept)); err != nil {
			t.Errorf("Close removed %s, a placeholder inside the git directory: %v", kept, err)
		}
	}
	if _, err := os.Lstat(filepath.Join(ws, ".git/hooks")); err != nil {
		t.Errorf("Close removed .git/hooks, which existed before: %v", err)
	}
}

// TestPlaceholdersOutliveTheirRun: a placeholder stays while another run
// of the workspace may have it mounted, and goes with the last run.
func TestPlaceholdersOutliveTheirRun(t *testing.T) {
	ws := tempWorkspace(t)
	first, err := newPolicy(ws).Prepare(nil)
	if err != nil {
		t.Fatal(err)
	}
	second, err := newPolicy(ws).Prepare(nil)
	if err != nil {
		t.Fatal(err)
	}
	first.Close()
	for _, p := range []string{".git", "HEAD", ".vscode"} {
		if _, err := os.Lstat(filepath.Join(ws, p)); err != nil {
			t.Errorf("the first run to end removed %s while the second still protects it: %v", p, err)
		}
	}
	second.Close()
	for _, p := range []string{".git", "HEAD", ".vscode"} {
		if _, err := os.Lstat(filepath.Join(ws, p)); err == nil {
			t.Errorf("the last run to end left %s behind", p)
		}
	}
}

func TestPrepareCreatesAndCleansUp(t *testing.T) {
	ws := tempWorkspace(t)
	sb, err := newPolicy(ws).Prepare(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range testHarness.State() {
		st, err := os.Lstat(filepath.Join(ws, h))
		if err != nil || !st.IsDir() || st.Mode().Perm() != 0o700 {
			t.Errorf("harness directory %s: %v %v; want a 0700 directory", h, st, err)
		}
	}
	for _, p := range []string{".git", "HEAD"} {
		if st, err := os.Lstat(filepath.Join(ws, p)); err != nil || !st.IsDir() {
			t.Fatalf("no %s mount point was made: %v", p, err)
		}
	}
	if err := sb.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(filepath.Join(ws, ".git")); err == nil {
		t.Errorf("Close left the empty .git mount point behind")
	}
	for _, h := range testHarness.State() {
		if _, err := os.Lstat(filepath.Join(ws, h)); err != nil {
			t.Errorf("Close removed harness directory %s: %v", h, err)
		}
	}

	// A mount point that something else filled meanwhile stays.
	sb, err = newPolicy(ws).Prepare(nil)
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
		makeGitDir(t, filepath.Join(ws, ".git")) // a .git whose protected paths are all absent
		var wg sync.WaitGroup
		errs := make([]error, 8)
		args := make([][]string, 8)
		for i := range errs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				sb, err := newPolicy(ws).Prepare(nil)
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
			for _, p := range []string{".efferent", ".foundry", ".git/hooks", ".git/config", ".git/commondir", ".git/modules", ".git/worktrees", ".git/HEAD", ".vscode", ".claude"} {
				if index(args[i], "--ro-bind", ws+"/"+p, ws+"/"+p) < 0 {
					t.Fatalf("round %d: sandbox %d does not bind %s read-only: %q", round, i, p, args[i])
				}
			}
		}
	}
}

func TestPrepareRefusesSymlinks(t *testing.T) {
	for _, tc := range []struct {
		git  bool
		link string
	}{
		{false, ".efferent"},
		{false, ".foundry"},
		{false, ".git"},
		{false, ".vscode"},
		{true, ".git/hooks"},
		{true, ".git/config"},
	} {
		ws := tempWorkspace(t)
		if tc.git {
			makeGitDir(t, filepath.Join(ws, ".git"))
		}
		os.Symlink("/etc", filepath.Join(ws, tc.link))
		sb, err := newPolicy(ws).Prepare(nil)
		if err == nil {
			sb.Close()
			t.Errorf("%s a symlink: Prepare succeeded", tc.link)
			continue
		}
		if !errors.Is(err, ErrProtectedPath) || !strings.Contains(err.Error(), tc.link) {
			t.Errorf("%s a symlink: Prepare = %v, want ErrProtectedPath naming it", tc.link, err)
		}
	}
	// With read access nothing is re-bound, so nothing is refused.
	ws := tempWorkspace(t)
	os.Symlink("/etc", filepath.Join(ws, ".efferent"))
	sb, err := newPolicy(ws).WithAccess(AccessRead).Prepare(nil)
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
		"not canonical":    newPolicy(link),
		"missing":          newPolicy(filepath.Join(ws, "missing")),
		"missing ro bind":  newPolicy(ws).WithReadOnly(filepath.Join(ws, "missing")),
		"symlink ro bind":  newPolicy(ws).WithReadOnly(link),
		"refused env name": newPolicy(ws).WithEnv("LD_PRELOAD"),
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
		dirs := hiddenDirs([]string{"HOME=" + tc.home}, testHarness)
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

// TestBinOfRemembersWhatItChecks: the bwrap a run (or Ahead) found in a
// PATH value is used again while it is an executable file, and looked for
// anew once it is not; every run still checks that it is trusted.
func TestBinOfRemembersWhatItChecks(t *testing.T) {
	first, second := t.TempDir(), t.TempDir()
	for _, d := range []string{first, second} {
		if err := os.WriteFile(filepath.Join(d, "bwrap"), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	path := first + ":" + second
	s := Spec{Policy: newPolicy(tempWorkspace(t)), Environ: []string{"PATH=" + path}}
	// Ahead remembers what a run would: the checks below are of it.
	Ahead(s.Environ)
	if v, ok := foundIn.Load(path); !ok || v.(string) != filepath.Join(first, "bwrap") {
		t.Fatalf("Ahead remembered %v for PATH %s; want the first bwrap in it", v, path)
	}
	bin := func() string {
		t.Helper()
		got, err := binOf(s)
		if err != nil {
			t.Fatalf("binOf: %v", err)
		}
		return got
	}
	if got := bin(); got != filepath.Join(first, "bwrap") {
		t.Fatalf("binOf = %s; want the first in PATH", got)
	}
	if err := os.Chmod(filepath.Join(first, "bwrap"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := bin(); got != filepath.Join(second, "bwrap") {
		t.Fatalf("binOf = %s after the first lost its x bits; want the second", got)
	}
	if err := os.Remove(filepath.Join(second, "bwrap")); err != nil {
		t.Fatal(err)
	}
	if _, err := binOf(s); err == nil || !strings.Contains(err.Error(), "bwrap not found in PATH") {
		t.Fatalf("binOf with no bwrap left = %v", err)
	}
	// Remembered, and still refused when it is no longer trusted: its
	// directory writable by others.
	if err := os.WriteFile(filepath.Join(second, "bwrap"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	bin()
	if err := os.Chmod(second, 0o777); err != nil {
		t.Fatal(err)
	}
	if _, err := binOf(s); err == nil || !strings.Contains(err.Error(), "writable by group or others") {
		t.Fatalf("binOf of a remembered bwrap in a directory writable by others = %v", err)
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

// TestRunProvesTheSandbox: the command runs as PID 2 of the PID namespace
// bwrap reported and verified, and holds only its standard streams — not
// the block, status or args descriptors.
func TestRunProvesTheSandbox(t *testing.T) {
	bin, err := Find(os.Getenv("PATH"))
	testenv.Require(t, err == nil, "bubblewrap: %v", err)
	testenv.Require(t, Detect(context.Background(), bin) == nil, "a working bubblewrap sandbox")
	ws := tempWorkspace(t)
	o, err := Run(context.Background(), Spec{Policy: newPolicy(ws), Bwrap: bin,
		Command: []string{"sh", "-c", "echo $$; ls /proc/self/fd"}})
	if err != nil || o.ExitCode != 0 {
		t.Fatalf("Run = %v, %v", o, err)
	}
	lines := strings.Fields(o.Stdout)
	if len(lines) == 0 || lines[0] != "2" {
		t.Errorf("the command is not PID 2 of its namespace: %q", o.Stdout)
	}
	// 0, 1, 2 and the descriptor ls opens.
	if fds := lines[1:]; !slices.Equal(fds, []string{"0", "1", "2", "3"}) {
		t.Errorf("the command holds descriptors %v", fds)
	}
	sb, err := newPolicy(ws).Prepare(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	if _, err := sb.command(bin, []string{"true"}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := sb.command(bin, []string{"true"}, nil); err == nil {
		t.Errorf("a second Command on one Sandbox succeeded")
	}
}

// TestRunRefusesWhatIsNotASandbox: a "bwrap" that runs the command on the
// host, or reports a process that shares cordon's namespaces, is refused
// with ErrUnavailable: the run never reads as sandboxed.
func TestRunRefusesWhatIsNotASandbox(t *testing.T) {
	dir := t.TempDir()
	fake := func(name, script string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("#!/bin/sh\n"+script), 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	ws := tempWorkspace(t)
	for name, bin := range map[string]string{
		// Runs what follows "--" on the host.
		"runs on the host": fake("onhost", "while [ \"$1\" != -- ]; do shift; done; shift; exec \"$@\"\n"),
		// Reports itself, a process in cordon's own namespaces.
		"reports itself": fake("liar", "printf '{ \"child-pid\": %d }\\n' $$ >&4; read x <&3; while [ \"$1\" != -- ]; do shift; done; shift; exec \"$@\"\n"),
	} {
		o, err := Run(context.Background(), Spec{Policy: newPolicy(ws), Bwrap: bin, Command: []string{"echo", "ran"}, Timeout: 5 * time.Second})
		if !errors.Is(err, ErrUnavailable) || strings.Contains(err.Error(), "refusing to run") {
			t.Errorf("%s: Run = %v, %v; want ErrUnavailable from the check of its sandbox", name, o, err)
		}
	}
}

// TestRunRefusesABwrapInTheWorkspace: a bwrap that an earlier command
// planted in the workspace (found through a PATH entry like
// <ws>/.local/bin, or through a symlink) is never run, and the refused run
// leaves nothing in the workspace or the state directory: harness state
// made there, or a record of its runs, would mark it a workspace above
// the bwrap of every later run (a workspace of /usr, or a bind of it).
func TestRunRefusesABwrapInTheWorkspace(t *testing.T) {
	ws := tempWorkspace(t)
	marker := filepath.Join(t.TempDir(), "ran-on-the-host")
	bin := filepath.Join(ws, ".local", "bin")
	os.MkdirAll(bin, 0o755)
	os.WriteFile(filepath.Join(bin, "bwrap"), []byte("#!/bin/sh\ntouch "+marker+"\n"), 0o755)
	link := filepath.Join(t.TempDir(), "bwrap")
	os.Symlink(filepath.Join(bin, "bwrap"), link)
	defer func() {
		if names, _ := os.ReadDir(ws); len(names) != 1 {
			t.Errorf("the refused runs left %v in the workspace; want .local alone", names)
		}
		if _, err := os.Lstat(filepath.Join(testHarness.StateDir(), "runs", placeholder.Key(ws))); err == nil {
			t.Errorf("the refused runs left a record of runs of the workspace")
		}
	}()
	for _, spec := range []Spec{
		{Environ: []string{"PATH=" + bin + ":/usr/bin:/bin"}},
		{Bwrap: link},
	} {
		spec.Policy, spec.Command = newPolicy(ws), []string{"true"}
		_, err := Run(context.Background(), spec)
		if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "inside the workspace") {
			t.Errorf("Run with bwrap %q, PATH %q = %v; want ErrUnavailable naming the workspace", spec.Bwrap, spec.Environ, err)
		}
	}
	if _, err := os.Stat(marker); err == nil {
		t.Errorf("the planted bwrap ran on the host")
	}
}

func TestSetupFailureIsNotTheCommandsFailure(t *testing.T) {
	bin, err := Find(os.Getenv("PATH"))
	testenv.Require(t, err == nil, "bubblewrap: %v", err)
	testenv.Require(t, Detect(context.Background(), bin) == nil, "a working bubblewrap sandbox")
	ws := tempWorkspace(t)
	gone := filepath.Join(t.TempDir(), "tool")
	os.Mkdir(gone, 0o755)
	// The bind source vanishes between Prepare and bwrap: a fake program
	// that reads its options to the end (they come once the host side is
	// prepared), removes the source, then runs the real bwrap with them.
	dir := t.TempDir()
	wrapper, opts := filepath.Join(dir, "bwrap"), filepath.Join(dir, "options")
	// (Other calls, bwrap --version and the diagnosis of its failure,
	// go straight through.)
	os.WriteFile(wrapper, []byte(fmt.Sprintf("#!/bin/sh\n[ \"$1\" = --args ] || exec %[3]s \"$@\"\n"+
		"cat <&%[1]d >%[2]s || exit 99\nrmdir %[4]s\nexec %[3]s \"$@\" %[1]d<%[2]s\n",
		argsFD, opts, bin, gone)), 0o755)
	o, err := Run(context.Background(), Spec{Policy: newPolicy(ws).WithReadOnly(gone), Bwrap: wrapper,
		Command: []string{"sh", "-c", "echo ran; exit 1"}})
	if err == nil || strings.Contains(o.Stdout, "ran") {
		t.Fatalf("Run = %v, %v after bwrap failed to set up", o, err)
	}
	if !errors.Is(err, ErrSetup) || !strings.Contains(err.Error(), gone) || !strings.Contains(err.Error(), ws) {
		t.Errorf("Run = %v; want ErrSetup with bwrap's message and the workspace", err)
	}
}

func TestNotFoundAndNotExecutable(t *testing.T) {
	bin, err := Find(os.Getenv("PATH"))
	testenv.Require(t, err == nil, "bubblewrap: %v", err)
	testenv.Require(t, Detect(context.Background(), bin) == nil, "a working bubblewrap sandbox")
	ws := tempWorkspace(t)
	os.WriteFile(filepath.Join(ws, "noexec"), []byte("#!/bin/sh\n"), 0o644)
	for cmd, want := range map[string]int{"no-such-command-anywhere": 127, "./noexec": 126, "/": 126} {
		o, err := Run(context.Background(), Spec{Policy: newPolicy(ws), Bwrap: bin, Command: []string{cmd}})
		if err != nil || o.ExitCode != want {
			t.Errorf("Run(%s) = %v, %v; want exit %d", cmd, o, err, want)
		}
	}
}

// TestVersionIsKeptPerBinary: a new Enforcer (a new cordon process) reads
// bubblewrap's version from the state directory while the binary is the
// one it was read from, and runs `bwrap --version` again once it changed.
func TestVersionIsKeptPerBinary(t *testing.T) {
	real, err := Find(os.Getenv("PATH"))
	testenv.Require(t, err == nil, "bubblewrap: %v", err)
	dir := t.TempDir()
	calls := filepath.Join(dir, "calls")
	wrapper := filepath.Join(dir, "bwrap")
	script := "#!/bin/sh\necho x >> " + calls + "\nexec " + real + " \"$@\"\n"
	os.WriteFile(wrapper, []byte(script), 0o755)
	state := filepath.Join(dir, "state")
	count := func() int {
		b, _ := os.ReadFile(calls)
		return strings.Count(string(b), "x")
	}
	facts := func() string {
		f, err := NewEnforcer(EnforcerConfig{Bwrap: wrapper, ProbeAtRun: true, Harness: harness.Default().WithStateDir(state)}).Facts(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return f.Values["bwrap.version"]
	}
	v := facts()
	if v == "" || count() != 1 {
		t.Fatalf("first Facts: version %q after %d runs of bwrap, want one run", v, count())
	}
	if again := facts(); again != v || count() != 1 {
		t.Errorf("second Facts: version %q after %d runs of bwrap; want %q from the record, no new run", again, count(), v)
	}
	// The binary changes: the record no longer applies.
	os.WriteFile(wrapper, []byte(script+"# changed\n"), 0o755)
	if again := facts(); again != v || count() != 2 {
		t.Errorf("Facts after the binary changed: version %q after %d runs; want it run again", again, count())
	}
}

// TestTrustedProgram: the bwrap cordon runs is the resolved file, and one
// that someone else — a sandboxed command, another user — could have put
// there is refused.
func TestTrustedProgram(t *testing.T) {
	dir := t.TempDir()
	prog := func(rel string) string {
		p := filepath.Join(dir, rel)
		os.MkdirAll(filepath.Dir(p), 0o755)
		os.WriteFile(p, []byte("#!/bin/sh\n"), 0o755)
		return p
	}
	good := prog("ok/bin/bwrap")
	link := filepath.Join(dir, "link")
	os.Symlink(good, link)
	if got, err := trustedProgram(link, "", testHarness); err != nil || got != good {
		t.Errorf("trustedProgram(a link to %s) = %q, %v; want the resolved path", good, got, err)
	}
	// Inside a directory that has been a workspace (another one's too):
	// it holds harness state, of this configuration or the default one's,
	// or this user's state directory has a record of its runs.
	other := prog("proj/tools/bin/bwrap")
	os.MkdirAll(filepath.Join(dir, "proj", ".efferent"), 0o700)
	foundry := prog("proj2/bin/bwrap")
	os.MkdirAll(filepath.Join(dir, "proj2", ".foundry"), 0o700)
	ran := prog("proj3/bin/bwrap")
	os.MkdirAll(filepath.Join(testHarness.StateDir(), "runs", placeholder.Key(filepath.Join(dir, "proj3"))), 0o700)
	// Writable by group or others, or on the way through such a directory.
	shared := prog("shared/bwrap")
	os.Chmod(filepath.Join(dir, "shared"), 0o777)
	groupw := prog("gw/bwrap")
	os.Chmod(groupw, 0o775)
	was := "a workspace where sandboxed commands may have run"
	cases := map[string]string{other: was, foundry: was, ran: was, shared: "writable by group or others", groupw: "writable by group or others"}
	if os.Geteuid() == 0 {
		theirs := prog("theirs/bwrap")
		os.Chown(filepath.Dir(theirs), 65534, 65534)
		cases[theirs] = "belongs to uid 65534"
	}
	for p, why := range cases {
		if got, err := trustedProgram(p, "", testHarness); !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), why) {
			t.Errorf("trustedProgram(%s) = %q, %v; want ErrUnavailable: %s", p, got, err, why)
		}
	}
	if _, err := trustedProgram(good, filepath.Join(dir, "ok"), testHarness); err == nil || !strings.Contains(err.Error(), "inside the workspace") {
		t.Errorf("trustedProgram inside the workspace: %v", err)
	}
}

// TestSwappedBwrapLinkNeverRuns: a link <ws>/.local/bin/bwrap that a
// concurrent run keeps switching between the real bwrap and a program of
// its own never gets its program run: cordon runs the file it checked.
func TestSwappedBwrapLinkNeverRuns(t *testing.T) {
	real, err := Find(os.Getenv("PATH"))
	testenv.Require(t, err == nil, "bubblewrap: %v", err)
	testenv.Require(t, Detect(context.Background(), real) == nil, "a working bubblewrap sandbox")
	ws := tempWorkspace(t)
	marker := filepath.Join(t.TempDir(), "ran-on-the-host")
	bin := filepath.Join(ws, ".local", "bin")
	os.MkdirAll(bin, 0o755)
	evil := filepath.Join(bin, "evil")
	os.WriteFile(evil, []byte("#!/bin/sh\necho x >> "+marker+"\nexec "+real+" \"$@\"\n"), 0o755)
	link := filepath.Join(bin, "bwrap")
	os.Symlink(real, link)
	done := make(chan struct{})
	swapped := make(chan struct{})
	go func() {
		defer close(swapped)
		for i := 0; ; i++ {
			select {
			case <-done:
				return
			default:
			}
			target := real
			if i%2 == 1 {
				target = evil
			}
			tmp := filepath.Join(bin, "t")
			os.Remove(tmp)
			os.Symlink(target, tmp)
			os.Rename(tmp, link)
		}
	}()
	for range 30 {
		Run(context.Background(), Spec{Environ: []string{"PATH=" + bin + ":/usr/bin:/bin"}, Policy: newPolicy(ws), Command: []string{"true"}})
	}
	close(done)
	<-swapped
	if data, err := os.ReadFile(marker); err == nil {
		t.Errorf("the swapped-in program ran on the host %d times", strings.Count(string(data), "x"))
	}
}

// TestABwrapThatDiesBeforeItsOptionsEndsTheRun: a bwrap that exits
// without reading its options, which do not fit in a pipe, ends the run
// at once — the write of the options fails (EPIPE) rather than wait for
// a reader that is gone — and nothing ran.
func TestABwrapThatDiesBeforeItsOptionsEndsTheRun(t *testing.T) {
	dir := t.TempDir()
	fake := filepath.Join(dir, "quits")
	if err := os.WriteFile(fake, []byte("#!/bin/sh\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	ws := tempWorkspace(t)
	// Read-only binds enough for options well past a pipe's 64 KiB.
	long := filepath.Join(t.TempDir(), strings.Repeat("d", 200))
	var ro []string
	for i := range 600 {
		p := fmt.Sprintf("%s-%03d", long, i)
		if err := os.Mkdir(p, 0o755); err != nil {
			t.Fatal(err)
		}
		ro = append(ro, p)
	}
	done := make(chan error, 1)
	go func() {
		_, err := Run(context.Background(), Spec{Policy: newPolicy(ws).WithReadOnly(ro...), Bwrap: fake, Command: []string{"true"}, Timeout: 5 * time.Second})
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("Run of a bwrap that quit before its options succeeded")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run hangs on a bwrap that quit before its options")
	}
}

// TestACanceledRunNeverStarts: a run whose context is done before it
// begins never lets its command start, however fast bwrap reports its
// sandbox (the report and the cancellation both wait at once; a select
// between them picks either).
func TestACanceledRunNeverStarts(t *testing.T) {
	needBwrap(t)
	ws := tempWorkspace(t)
	ran := filepath.Join(ws, "ran")
	for i := range 60 {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, err := Run(ctx, Spec{Policy: newPolicy(ws), Command: []string{"touch", ran}, Timeout: 5 * time.Second})
		if err == nil {
			t.Errorf("run %d: a canceled run reads as run", i)
		}
		if _, err := os.Stat(ran); err == nil {
			t.Fatalf("run %d: a canceled run's command ran", i)
		}
	}
}

// TestLocalTimes: a check is remembered only on file systems whose change
// times this machine's clock sets: the temporary directory's (ext4 or
// tmpfs here), not /proc's.
func TestLocalTimes(t *testing.T) {
	if !localTimes(t.TempDir()) {
		t.Errorf("%s is not a file system of local change times", t.TempDir())
	}
	if localTimes("/proc/self") {
		t.Error("/proc is taken for a file system of local change times")
	}
}

// TestTrustedProgramRemembered: a program that passed is passed again by
// what the check saw, without the whole check — until any of it changes:
// harness state made in a directory above it, a record of runs of one,
// a directory above it made writable by others, the program replaced;
// and a workspace that is (through a link) a directory above it is
// refused still. What changed less than a second before a check is not
// remembered (the file system's clock may not have moved since). The
// programs are under /var/tmp, not /tmp, whose change time every test
// that makes a temporary directory moves (a check then is whole again).
func TestTrustedProgramRemembered(t *testing.T) {
	h := testenv.Harness(t)
	dir, err := os.MkdirTemp("/var/tmp", "cordon-trusted-")
	testenv.Require(t, err == nil, "a directory in /var/tmp: %v", err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	prog := func(rel string) string {
		p := filepath.Join(dir, rel, "bin", "bwrap")
		os.MkdirAll(filepath.Dir(p), 0o755)
		os.WriteFile(p, []byte("#!/bin/sh\n"), 0o755)
		return p
	}
	os.MkdirAll(filepath.Join(h.StateDir(), "runs"), 0o700)
	progs := map[string]string{}
	for _, name := range []string{"state", "record", "shared", "replaced", "linked"} {
		progs[name] = prog(name)
	}
	full := 0
	fullCheckHook = func() { full++ }
	defer func() { fullCheckHook = nil }()
	check := func(name, ws string) error {
		_, err := trustedProgram(progs[name], ws, h)
		return err
	}
	for range 2 {
		if err := check("state", ""); err != nil {
			t.Fatal(err)
		}
	}
	if full != 2 {
		t.Errorf("a program made a moment ago: %d whole checks of 2; want 2 (it is not remembered)", full)
	}
	// Remembered at once from now on: every change below is one the
	// check sees whatever the clock (a new inode, a link count, a mode).
	defer func(was time.Duration) { settleFor = was }(settleFor)
	settleFor = 0
	full = 0
	elsewhere := filepath.Join(dir, "elsewhere")
	os.Mkdir(elsewhere, 0o755)
	for name := range progs {
		for _, ws := range []string{"", elsewhere, t.TempDir()} {
			if err := check(name, ws); err != nil {
				t.Fatal(err)
			}
		}
	}
	if full != len(progs) {
		t.Errorf("%d whole checks of %d programs checked three times; want one each", full, len(progs))
	}

	was := "a workspace where sandboxed commands may have run"
	os.MkdirAll(filepath.Join(dir, "state", ".efferent"), 0o700)
	os.Chmod(filepath.Join(dir, "shared"), 0o777)
	os.WriteFile(progs["replaced"]+".new", []byte("#!/bin/sh\n"), 0o755)
	os.Rename(progs["replaced"]+".new", progs["replaced"])
	link := filepath.Join(t.TempDir(), "ws")
	os.Symlink(filepath.Join(dir, "linked"), link)
	for name, why := range map[string]string{"state": was, "shared": "writable by group or others"} {
		if err := check(name, ""); !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), why) {
			t.Errorf("%s changed: %v, want ErrUnavailable: %s", name, err, why)
		}
	}
	if err := check("linked", link); !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "inside the workspace") {
		t.Errorf("a workspace linked to a directory above the program: %v", err)
	}
	// A path that leads nowhere, but names a directory above the program
	// once cleaned, as the whole check reads it.
	if err := check("record", dir+"/record/bin/missing/.."); !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "inside the workspace") {
		t.Errorf("a workspace path through a missing directory to one above the program: %v", err)
	}
	full = 0
	if err := check("replaced", ""); err != nil || full != 1 {
		t.Errorf("the program replaced: %v after %d whole checks; want it checked whole", err, full)
	}
	os.MkdirAll(filepath.Join(h.StateDir(), "runs", placeholder.Key(filepath.Join(dir, "record"))), 0o700)
	if err := check("record", ""); !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), was) {
		t.Errorf("a directory above the program recorded as a workspace: %v", err)
	}
}

// TestTrustedProgramRememberedAtOnce: checks of one program running at
// once while harness state appears in a directory above it — a check
// that began before may remember what it saw after — never pass it once
// the state is there.
func TestTrustedProgramRememberedAtOnce(t *testing.T) {
	h := testenv.Harness(t)
	dir, err := os.MkdirTemp("/var/tmp", "cordon-trusted-")
	testenv.Require(t, err == nil, "a directory in /var/tmp: %v", err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	bin := filepath.Join(dir, "p", "bin", "bwrap")
	os.MkdirAll(filepath.Dir(bin), 0o755)
	os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755)
	defer func(was time.Duration) { settleFor = was }(settleFor)
	settleFor = 0 // a directory's link count changes with the state made in it, whatever the clock
	state := filepath.Join(dir, "p", ".efferent")
	for round := range 50 {
		os.Remove(state)
		if _, err := trustedProgram(bin, "", h); err != nil {
			t.Fatal(err)
		}
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				for {
					select {
					case <-stop:
						return
					default:
						trustedProgram(bin, "", h)
					}
				}
			})
		}
		os.Mkdir(state, 0o700)
		for range 20 {
			if _, err := trustedProgram(bin, "", h); err == nil {
				t.Errorf("round %d: passed with harness state above it", round)
			}
		}
		close(stop)
		wg.Wait()
	}
}

// TestExposedBy: a sandbox's mount exposes bwrap when it is writable, not
// hidden by the sandbox's layers, on bwrap's file system, and its root is
// bwrap, a directory above it, or holds one (a root escaped in the table
// read as the path it is).
func TestExposedBy(t *testing.T) {
	places := []placed{
		{"/usr/bin/bwrap", mountinfo.Place{Dev: "254:0", Path: "/usr/bin/bwrap"}},
		{"/usr/bin", mountinfo.Place{Dev: "254:0", Path: "/usr/bin"}},
		{"/usr", mountinfo.Place{Dev: "254:0", Path: "/usr"}},
		{"/", mountinfo.Place{Dev: "254:0", Path: "/"}},
		{"/opt/a b", mountinfo.Place{Dev: "254:0", Path: "/opt/a b"}},
	}
	layers := []layer{{point: "/"}, {point: "/tmp", hides: true}, {point: "/ws"}}
	line := func(dev, root, point, opts string) string {
		return "100 1 " + dev + " " + root + " " + point + " " + opts + " shared:1 - ext4 /dev/vda rw\n"
	}
	for _, tc := range []struct {
		name, table, want string
	}{
		{"a writable bind of bwrap's directory in the workspace", line("254:0", "/usr/bin", "/ws/late", "rw,relatime"), "/usr/bin/bwrap"},
		{"of bwrap itself", line("254:0", "/usr/bin/bwrap", "/ws/f", "rw"), "/usr/bin/bwrap"},
		{"of the file system's root", line("254:0", "/", "/ws/root", "rw"), "/usr/bin/bwrap"},
		{"an escaped root", line("254:0", `/opt/a\040b`, "/ws/x", "rw"), "/opt/a b"},
		{"read-only", line("254:0", "/usr", "/ws/ro", "ro,relatime"), ""},
		{"another file system", line("0:42", "/usr/bin", "/ws/other", "rw"), ""},
		{"a directory beside bwrap's", line("254:0", "/usr/share", "/ws/share", "rw"), ""},
		{"hidden by the sandbox's /tmp", line("254:0", "/usr/bin", "/tmp/late", "rw"), ""},
		{"the workspace's own bind", line("254:0", "/ws", "/ws", "rw"), ""},
	} {
		if got, _ := exposedBy(tc.table, layers, places); got != tc.want {
			t.Errorf("%s: exposes %q; want %q", tc.name, got, tc.want)
		}
	}
}
