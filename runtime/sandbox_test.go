package runtime_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cordon-run/cordon/capabilities"
	"github.com/cordon-run/cordon/internal/testenv"
	"github.com/cordon-run/cordon/refusal"
	"github.com/cordon-run/cordon/runtime"
	"github.com/cordon-run/cordon/substrate/bwrap"
	"github.com/cordon-run/cordon/substrate/landlock"
	"github.com/cordon-run/cordon/substrate/oci"
)

func TestWorkspaceIsWritable(t *testing.T) {
	substrates(t, func(t *testing.T, sub string) {
		ws := workspace(t, base(t))
		script := `echo hello > a.txt && mkdir -p sub/dir && mv a.txt sub/dir/b.txt && echo ok`
		want := "ok\n"
		if sub == landlock.Name {
			// Landlock cannot carve read-only paths out of a writable
			// root: nothing is created at the top level, everything
			// below an existing directory is writable.
			os.Mkdir(filepath.Join(ws, "sub"), 0o755)
			script = `echo hello > sub/a.txt && mkdir -p sub/dir && mv sub/a.txt sub/dir/b.txt && echo ok; echo x > top.txt 2>/dev/null || echo refused`
			want = "ok\nrefused\n"
		}
		res := run(t, newPolicy(ws), script, on(sub))
		if res.ExitCode != 0 || res.Stdout != want {
			t.Fatalf("result %v, stdout %q, stderr %q", res, res.Stdout, res.Stderr)
		}
		data, err := os.ReadFile(filepath.Join(ws, "sub/dir/b.txt"))
		if err != nil || string(data) != "hello\n" {
			t.Fatalf("the write inside the sandbox did not reach the workspace: %q, %v", data, err)
		}
		if !res.Sandboxed || res.Substrate != sub {
			t.Fatalf("result says sandboxed=%v substrate=%q", res.Sandboxed, res.Substrate)
		}
	})
}

// TestWritingOutsideTheWorkspaceFails tries every way of changing a host
// file next to the workspace, and a new file in /etc, and checks that
// nothing on the host changed.
func TestWritingOutsideTheWorkspaceFails(t *testing.T) {
	substrates(t, func(t *testing.T, sub string) {
		b := base(t)
		ws := workspace(t, b)
		out := filepath.Join(b, "outside")
		writeFile(t, filepath.Join(out, "victim.txt"), "original\n")
		before := snapshot(t, out)
		probe := fmt.Sprintf("/etc/cordon-probe-%d", time.Now().UnixNano())
		t.Cleanup(func() { os.Remove(probe) })

		v := filepath.Join(out, "victim.txt")
		script := attempt("overwrite", "echo evil > "+v) +
			attempt("append", "echo evil >> "+v) +
			attempt("truncate", ": > "+v) +
			attempt("rm", "rm -f "+v) +
			attempt("mv", "mv "+v+" "+v+".moved") +
			attempt("chmod", "chmod 777 "+v) +
			attempt("touch", "touch -d 2001-01-01 "+v) +
			attempt("create", "echo evil > "+filepath.Join(out, "new.txt")) +
			attempt("mkdir", "mkdir "+filepath.Join(out, "newdir")) +
			attempt("symlink", "ln -s /etc/passwd "+filepath.Join(out, "link")) +
			attempt("hardlink", "ln "+v+" "+filepath.Join(ws, "hard")) +
			attempt("etc", "echo evil > "+probe) +
			attempt("visible", "cat "+v) // the positive control: reads work
		if sub == landlock.Name {
			// Landlock hides the file's contents (EACCES) but not its
			// existence: the control is a stat.
			script = strings.Replace(script, "cat "+v, "test -f "+v, 1)
		}
		res := run(t, newPolicy(ws), script, on(sub))
		st := statuses(t, res.Stdout)
		for name, rc := range st {
			if name == "visible" {
				if rc != "0" {
					t.Errorf("reading the host file failed (rc %s): the test cannot tell a refusal from a missing file", rc)
				}
				continue
			}
			if rc == "0" {
				t.Errorf("%s outside the workspace succeeded", name)
			}
		}
		if len(st) != 13 {
			t.Fatalf("script did not run every attempt: %q %q", res.Stdout, res.Stderr)
		}
		if d := diff(before, snapshot(t, out)); len(d) > 0 {
			t.Errorf("the host changed outside the workspace: %v", d)
		}
		if _, err := os.Lstat(probe); err == nil {
			t.Errorf("the sandbox created %s on the host", probe)
		}
	})
}

// TestProtectedPaths replays every way of touching harness state and the
// write-now-execute-later paths against several layouts, and checks the
// host tree after each.
func TestProtectedPaths(t *testing.T) {
	substrates(t, func(t *testing.T, sub string) {
		type layout struct {
			name  string
			setup func(t *testing.T, ws string)
			// attacks are shell commands run in the workspace; each must fail.
			attacks map[string]string
			// absent lists paths that must not exist on the host afterwards.
			absent []string
			// empty lists directories that must be empty afterwards (bwrap's
			// placeholders; absent on Landlock).
			empty []string
			// vacuous lists attacks that succeed on Landlock without changing
			// anything: the removal of an absent path.
			vacuous map[string]bool
		}
		for _, l := range []layout{{
			name: "harness state present",
			setup: func(t *testing.T, ws string) {
				writeFile(t, filepath.Join(ws, ".efferent/credentials"), "secret\n")
				writeFile(t, filepath.Join(ws, ".foundry/evidence/0001.json"), "{}\n")
			},
			attacks: map[string]string{
				"write-new":       "echo x > .efferent/planted",
				"overwrite":       "echo x > .efferent/credentials",
				"append":          "echo x >> .efferent/credentials",
				"rm-file":         "rm -f .foundry/evidence/0001.json",
				"rm-dir":          "rm -rf .efferent",
				"mv-dir":          "mv .efferent moved",
				"mv-into":         "mv .foundry/evidence .foundry/gone",
				"mkdir":           "mkdir .foundry/new",
				"chmod":           "chmod 777 .efferent",
				"symlink-inside":  "ln -s /etc .efferent/etc",
				"replace-by-file": "rm -rf .foundry 2>/dev/null; echo x > .foundry",
			},
		}, {
			name:  "harness state absent",
			setup: func(t *testing.T, ws string) {},
			attacks: map[string]string{
				"write":   "echo x > .efferent/planted",
				"mkdir":   "mkdir .foundry/evidence",
				"rmdir":   "rmdir .efferent",
				"mv":      "mv .foundry f2",
				"replace": "rmdir .efferent; mkdir .efferent && echo x > .efferent/planted",
			},
		}, {
			name: "git repository",
			setup: func(t *testing.T, ws string) {
				makeGitDir(t, filepath.Join(ws, ".git"))
				writeFile(t, filepath.Join(ws, ".git/hooks/pre-commit.sample"), "#!/bin/sh\n")
				writeFile(t, filepath.Join(ws, ".git/config"), "[core]\n\tbare = false\n")
			},
			attacks: map[string]string{
				"hook-write":     "echo 'touch /tmp/pwned' > .git/hooks/pre-commit",
				"hook-chmod":     "chmod +x .git/hooks/pre-commit.sample",
				"hooks-rm":       "rm -rf .git/hooks",
				"hooks-mv":       "mv .git/hooks .git/hooks.old",
				"config-write":   "printf '[core]\\n\\tfsmonitor = touch /tmp/pwned\\n' >> .git/config",
				"config-replace": "echo x > .git/config.new && mv .git/config.new .git/config",
				"config-rm":      "rm -f .git/config",
				"git-mv-aside":   "mv .git .git.old",
				"git-rm":         "rm -rf .git",
				"git-config":     "git config core.hooksPath /tmp/hooks",
				"commondir":      "echo ../evil > .git/commondir",
				"commondir-mv":   "echo ../evil > cd && mv cd .git/commondir",
				"modules-plant":  "mkdir -p .git/modules/sub/hooks",
				"modules-rm":     "rm -rf .git/modules",
				"worktrees":      "mkdir -p .git/worktrees/wt",
				"head-write":     "echo 'ref: refs/heads/evil' > .git/HEAD",
				"head-rm":        "rm -f .git/HEAD",
				"objects-rm":     "rm -rf .git/objects",
				"refs-mv":        "mv .git/refs .git/refs.old",
				"worktree-cfg":   "echo '[core]' > .git/config.worktree",
			},
			vacuous: map[string]bool{"modules-rm": true},
		}, {
			name: "git repository without hooks",
			setup: func(t *testing.T, ws string) {
				makeGitDir(t, filepath.Join(ws, ".git"))
				writeFile(t, filepath.Join(ws, ".git/config"), "[core]\n\tbare = false\n")
			},
			attacks: map[string]string{
				"hooks-mkdir": "mkdir .git/hooks",
				"hooks-plant": "mkdir -p .git/hooks && echo x > .git/hooks/pre-commit",
				"hooks-rmdir": "rmdir .git/hooks",
			},
			// Placeholders inside the git directory stay, empty: git reads
			// them as it read their absence.
			empty: []string{".git/hooks", ".git/modules", ".git/worktrees"},
		}, {
			name: "a git directory that is not valid",
			setup: func(t *testing.T, ws string) {
				writeFile(t, filepath.Join(ws, ".git/config"), "[core]\n\tbare = false\n")
			},
			attacks: map[string]string{
				"make-valid":  "echo 'ref: refs/heads/main' > .git/HEAD && mkdir .git/objects .git/refs",
				"hooks-plant": "mkdir -p .git/hooks && echo x > .git/hooks/pre-commit",
				"config":      "echo '[core]' >> .git/config",
				"root-shape":  "echo 'ref: refs/heads/main' > HEAD",
			},
			absent: []string{".git/HEAD", "HEAD", "objects", "refs"},
		}, {
			name:  "no git repository",
			setup: func(t *testing.T, ws string) {},
			attacks: map[string]string{
				"git-init":     "git init -q .",
				"mkdir-hooks":  "mkdir -p .git/hooks",
				"write-config": "echo '[core]' > .git/config",
				"rmdir-git":    "rmdir .git",
				"mv-git":       "mv .git g",
				"root-head":    "echo 'ref: refs/heads/main' > HEAD",
				"root-bare":    "rmdir HEAD && echo 'ref: refs/heads/main' > HEAD",
				"vscode":       "mkdir -p .vscode && echo '{}' > .vscode/tasks.json",
				"mcp":          "echo '{}' > .mcp.json",
				"claude":       "mkdir -p .claude && echo '{}' > .claude/settings.json",
				"envrc":        "echo 'touch /tmp/pwned' > .envrc",
			},
			absent: []string{".git", "HEAD", ".vscode", ".mcp.json", ".claude", ".envrc"},
		}, {
			name: "git worktree pointer",
			setup: func(t *testing.T, ws string) {
				writeFile(t, filepath.Join(ws, ".git"), "gitdir: /somewhere/else\n")
			},
			attacks: map[string]string{
				"repoint": "echo 'gitdir: /tmp/evil' > .git",
				"rm":      "rm -f .git",
				"mv":      "mv .git g",
			},
		}} {
			t.Run(l.name, func(t *testing.T) {
				ws := workspace(t, base(t))
				l.setup(t, ws)
				// The harness directories exist before the snapshot: creating
				// them is the preparation's job, which the next check covers.
				res := run(t, newPolicy(ws), "true", on(sub))
				if res.ExitCode != 0 {
					t.Fatalf("preparation run: %v %q", res, res.Stderr)
				}
				for _, h := range []string{".efferent", ".foundry"} {
					st, err := os.Lstat(filepath.Join(ws, h))
					if err != nil || !st.IsDir() || st.Mode().Perm() != 0o700 && l.name == "harness state absent" {
						t.Fatalf("harness directory %s not created 0700 before the run: %v %v", h, st, err)
					}
				}
				before := protectedSnapshot(t, ws)
				var script strings.Builder
				for name, cmd := range l.attacks {
					script.WriteString(attempt(name, cmd))
				}
				res = run(t, newPolicy(ws), script.String(), on(sub))
				st := statuses(t, res.Stdout)
				if len(st) != len(l.attacks) {
					t.Fatalf("not every attack ran: %q %q", res.Stdout, res.Stderr)
				}
				for name, rc := range st {
					// (Removing an absent path succeeds: on bwrap a
					// placeholder stands there, on Landlock nothing.)
					if rc == "0" && !(sub == landlock.Name && l.vacuous[name]) {
						t.Errorf("attack %s (%s) succeeded", name, l.attacks[name])
					}
				}
				if d := diff(before, protectedSnapshot(t, ws)); len(d) > 0 {
					t.Errorf("the workspace's protected paths changed: %v", d)
				}
				for _, a := range l.absent {
					if _, err := os.Lstat(filepath.Join(ws, a)); err == nil {
						t.Errorf("%s exists on the host after the run", a)
					}
				}
				for _, d := range l.empty {
					if sub == landlock.Name {
						// No placeholder: the path stays absent.
						if _, err := os.Lstat(filepath.Join(ws, d)); err == nil {
							t.Errorf("%s exists on the host after the run", d)
						}
						continue
					}
					if des, err := os.ReadDir(filepath.Join(ws, d)); err != nil || len(des) > 0 {
						t.Errorf("%s after the run: %v %v; want an empty directory", d, des, err)
					}
				}
			})
		}
	})
}

// TestGitCannotBeRedirected plays the whole write-now-execute-later attack
// on a real repository: the tool builds a complete git directory of its
// own whose configuration runs a command (core.fsmonitor), and tries every
// way of making the repository's git use it later — commondir, config,
// hooksPath, replacing .git. Afterwards "git status" on the host, as the
// user would run it, must not run the planted command.
func TestGitCannotBeRedirected(t *testing.T) {
	substrates(t, func(t *testing.T, sub string) {
		gitBin, err := exec.LookPath("git")
		testenv.Require(t, err == nil, "git: %v", err)
		ws := workspace(t, base(t))
		git := func(args ...string) string {
			t.Helper()
			cmd := exec.Command(gitBin, args...)
			cmd.Dir = ws
			cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_SYSTEM=/dev/null", "HOME="+ws)
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("git %v: %v %s", args, err, out)
			}
			return string(out)
		}
		git("init", "-q", ".")
		git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "init")
		marker := filepath.Join(filepath.Dir(ws), "pwned")
		evil := "evil"
		if sub == landlock.Name {
			// Nothing is created at the top level on Landlock: the tool
			// builds its git directory in a directory that exists.
			evil = "work/evil"
			os.Mkdir(filepath.Join(ws, "work"), 0o755)
		}
		script := `
		cp -r .git ` + evil + ` 2>/dev/null
		printf '[core]
			fsmonitor = "touch ` + marker + `; false"
		' >> ` + evil + `/config
		` + attempt("commondir", "echo ../"+evil+" > .git/commondir") +
			attempt("commondir-abs", "echo $PWD/"+evil+" > .git/commondir") +
			attempt("config", `printf '[core]
	fsmonitor = "touch `+marker+`; false"
' >> .git/config`) +
			attempt("hookspath", "git config core.hooksPath "+evil+"/hooks") +
			attempt("replace", "mv .git .git.old && mv "+evil+" .git") +
			attempt("gitfile", "echo 'gitdir: evil' > .git")
		res := run(t, newPolicy(ws), script, on(sub))
		for name, rc := range statuses(t, res.Stdout) {
			if rc == "0" {
				t.Errorf("attack %s succeeded inside the sandbox", name)
			}
		}
		if _, err := os.Stat(filepath.Join(ws, evil, "config")); err != nil {
			t.Fatalf("the tool could not even build its git directory (the test does not exercise the boundary): %v %q", err, res.Stderr)
		}
		git("status", "--short")
		git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "after")
		if _, err := os.Stat(marker); err == nil {
			t.Fatalf("git on the host ran the command the tool planted")
		}
	})
}

func TestProtectedSymlinksRefuseToStart(t *testing.T) {
	needBwrap(t)
	for _, tc := range []struct {
		name, link, target string
		pre                string // a directory to create first
	}{
		{"harness", ".efferent", "/etc", ""},
		{"git", ".git", "/etc", ""},
		{"hooks", ".git/hooks", "/etc", ".git"},
		{"config", ".git/config", "/etc/hostname", ".git"},
		{"editor", ".vscode", "/etc", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ws := workspace(t, base(t))
			if tc.pre != "" {
				makeGitDir(t, filepath.Join(ws, tc.pre))
			}
			if err := os.Symlink(tc.target, filepath.Join(ws, tc.link)); err != nil {
				t.Fatal(err)
			}
			_, err := runSpec(context.Background(), Spec{
				Command: []string{"/bin/sh", "-c", "echo ran > ran.txt"}, Policy: newPolicy(ws)})
			if !errors.Is(err, bwrap.ErrProtectedPath) {
				t.Fatalf("Run with %s a symlink = %v, want ErrProtectedPath", tc.link, err)
			}
			if !strings.Contains(err.Error(), tc.link) || !strings.Contains(err.Error(), ws) {
				t.Errorf("message %q does not name the path and the workspace", err)
			}
			if _, err := os.Stat(filepath.Join(ws, "ran.txt")); err == nil {
				t.Errorf("the command ran although the sandbox refused to start")
			}
		})
	}
}

func TestHomeIsEmptyAndRealHomesHidden(t *testing.T) {
	substrates(t, func(t *testing.T, sub string) {
		b := base(t)
		ws := workspace(t, b)
		// A HOME outside /tmp with a secret in it: the caller's HOME is hidden
		// wherever it is.
		fakeHome := filepath.Join(b, "home")
		writeFile(t, filepath.Join(fakeHome, ".ssh/id_ed25519"), "PRIVATE KEY\n")
		env := append(os.Environ(), "HOME="+fakeHome)

		var realFile string
		if u, err := user.Current(); err == nil {
			if entries, err := os.ReadDir(u.HomeDir); err == nil {
				for _, e := range entries {
					p := filepath.Join(u.HomeDir, e.Name())
					if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() {
						if f, err := os.Open(p); err == nil {
							f.Close()
							realFile = p
							break
						}
					}
				}
			}
		}
		script := `echo "HOME=$HOME"; ls -A "$HOME" | wc -l; ls -A /home /root 2>/dev/null | grep -v ':$' | grep -vc '^$'
` + attempt("fake-home-secret", "cat "+filepath.Join(fakeHome, ".ssh/id_ed25519"))
		if realFile != "" {
			script += attempt("real-home-file", "cat "+realFile)
		}
		res := run(t, newPolicy(ws), script, func(s *Spec) { s.Environ = env }, on(sub))
		lines := strings.Split(res.Stdout, "\n")
		home := "HOME=" + bwrap.Home
		if sub == landlock.Name {
			home = "HOME=" + filepath.Join(os.TempDir(), "cordon-landlock-") // and a random part, then /home
		}
		if len(lines) < 3 || !strings.HasPrefix(lines[0], home) || lines[1] != "0" || lines[2] != "0" {
			t.Fatalf("HOME is not an empty directory, or /home and /root are not empty: %q %q", res.Stdout, res.Stderr)
		}
		if strings.Contains(res.Stdout, "PRIVATE KEY") {
			t.Fatalf("the caller's home was readable: %q", res.Stdout)
		}
		for name, rc := range statuses(t, strings.Join(lines[3:], "\n")) {
			if rc == "0" {
				t.Errorf("%s was readable inside the sandbox", name)
			}
		}
		if realFile == "" {
			t.Logf("the real home has no readable file to try")
		}
	})
}

func TestTmpIsFreshPerCall(t *testing.T) {
	needBwrap(t)
	ws := workspace(t, base(t))
	host := filepath.Join(t.TempDir(), "host-tmp-file")
	writeFile(t, host, "host\n")
	p := newPolicy(ws)
	if res := run(t, p, "echo left > /tmp/left-behind && ls /tmp"); res.ExitCode != 0 {
		t.Fatalf("first call: %v %q", res, res.Stderr)
	}
	res := run(t, p, attempt("left-behind", "cat /tmp/left-behind")+attempt("host-tmp", "cat "+host))
	for name, rc := range statuses(t, res.Stdout) {
		if rc == "0" {
			t.Errorf("%s: a file in /tmp survived into another call or came from the host", name)
		}
	}
}

// TestSecretsInTheEnvironmentStayOut sets a secret in the environment the
// run draws from and looks for it by every route inside: the environment,
// every process's environ and command line.
func TestSecretsInTheEnvironmentStayOut(t *testing.T) {
	substrates(t, func(t *testing.T, sub string) {
		ws := workspace(t, base(t))
		secret := "s3cr3t-" + strconv.FormatInt(time.Now().UnixNano(), 36)
		env := append(os.Environ(), "SECRET_TOKEN="+secret, "GRANTED_VAR=granted-value", "LANG=C.UTF-8")
		// PID 1 is bwrap's init: its environment is exactly what the sandbox
		// was given, before any shell inside adds PWD or SHLVL.
		script := `tr '\0' '\n' < /proc/1/environ; echo ---; env; cat /proc/*/environ /proc/*/cmdline 2>/dev/null | tr '\0' '\n'`
		if sub == landlock.Name {
			// No PID namespace: the shell's own initial environment is
			// what the tool was given.
			script = strings.Replace(script, "/proc/1/environ", "/proc/$$/environ", 1)
		}
		res := run(t, newPolicy(ws).WithEnv("GRANTED_VAR"), script, func(s *Spec) { s.Environ = env }, on(sub))
		if strings.Contains(res.Stdout, secret) || strings.Contains(res.Stderr, secret) {
			t.Fatalf("the secret reached the sandbox:\n%s", res.Stdout)
		}
		given, _, ok := strings.Cut(res.Stdout, "---\n")
		if !ok {
			t.Fatalf("unexpected output %q %q", res.Stdout, res.Stderr)
		}
		var names []string
		for _, line := range strings.Split(strings.TrimSpace(given), "\n") {
			k, _, _ := strings.Cut(line, "=")
			names = append(names, k)
		}
		sort.Strings(names)
		want := []string{"GRANTED_VAR", "HOME", "LANG", "PATH"}
		if _, ok := os.LookupEnv("TERM"); ok {
			want = append(want, "TERM")
		}
		if sub == landlock.Name {
			want = append(want, "TMPDIR")
		}
		sort.Strings(want)
		if !slices.Equal(names, want) {
			t.Errorf("the sandbox's environment holds %v, want exactly %v", names, want)
		}
		if !strings.Contains(given, "GRANTED_VAR=granted-value\n") {
			t.Errorf("a granted variable did not reach the sandbox:\n%s", given)
		}
		if !strings.Contains(given, "PATH="+filepath.Join(ws, ".local/bin")+":") {
			t.Errorf("PATH is not led by <workspace>/.local/bin:\n%s", given)
		}
	})
}

func TestHostProcessesAreInvisible(t *testing.T) {
	needBwrap(t)
	ws := workspace(t, base(t))
	me := os.Getpid()
	res := run(t, newPolicy(ws), fmt.Sprintf(`ls /proc | grep -c '^[0-9]*$'; kill -0 %d; echo "kill $?"; echo "self $$"`, me))
	lines := strings.Split(strings.TrimSpace(res.Stdout), "\n")
	if len(lines) != 3 {
		t.Fatalf("unexpected output %q %q", res.Stdout, res.Stderr)
	}
	if n, _ := strconv.Atoi(lines[0]); n > 5 {
		t.Errorf("the sandbox sees %d processes; a private PID namespace shows only its own", n)
	}
	if lines[1] == "kill 0" {
		t.Errorf("the sandbox could signal the host PID %d", me)
	}
	if lines[2] != "self 2" {
		t.Errorf("the command is %q; under bwrap's init it is PID 2", lines[2])
	}
}

func TestNoCapabilitiesInside(t *testing.T) {
	substrates(t, func(t *testing.T, sub string) {
		b := base(t)
		ws := workspace(t, b)
		victim := filepath.Join(b, "victim.txt")
		writeFile(t, victim, "original\n")
		script := `grep '^CapEff:' /proc/self/status; grep '^CapBnd:' /proc/self/status; grep '^NoNewPrivs:' /proc/self/status
` + attempt("remount-root", "mount -o remount,rw /") +
			attempt("remount-then-write", "mount -o remount,rw "+b+" && echo evil > "+victim) +
			attempt("new-userns", "unshare -U -r true") +
			attempt("new-mountns", "unshare -m true") +
			attempt("sysctl", "echo 1 > /proc/sys/kernel/sysrq") +
			// A sysctl with no capability check of its own (as
			// kernel.core_pattern, which runs a program as the host's
			// root at a crash): uid 0 may write it by its mode alone. Its
			// own value, written back: harmless should it go through.
			attempt("sysctl-by-mode", "cur=$(cat /proc/sys/kernel/printk_ratelimit) && echo $cur > /proc/sys/kernel/printk_ratelimit") +
			attempt("sysrq", "echo h > /proc/sysrq-trigger") +
			attempt("bind-over", "mount --bind "+ws+" "+b)
		res := run(t, newPolicy(ws), script, on(sub))
		lines := strings.SplitN(res.Stdout, "\n", 4)
		bnd := "CapBnd:\t0000000000000000"
		if sub == landlock.Name && os.Geteuid() != 0 && len(lines) > 1 {
			// Without a user namespace only root may empty the bounding
			// set; a user who holds no capability and has no_new_privs
			// cannot gain one through it.
			bnd = lines[1]
		}
		if len(lines) < 4 || lines[0] != "CapEff:\t0000000000000000" || lines[1] != bnd || lines[2] != "NoNewPrivs:\t1" {
			t.Fatalf("the sandboxed process holds capabilities (running as uid %d): %q", os.Geteuid(), res.Stdout)
		}
		for name, rc := range statuses(t, lines[3]) {
			if rc == "0" {
				t.Errorf("%s succeeded inside the sandbox", name)
			}
		}
		if data, _ := os.ReadFile(victim); string(data) != "original\n" {
			t.Errorf("the host file changed: %q", data)
		}
	})
}

// TestNetworkNone opens a listener on the host's loopback and tries to
// reach it from inside, with the network off (must fail) and on (must
// work: the control that shows the attempt is real).
func TestNetworkNone(t *testing.T) {
	substrates(t, func(t *testing.T, sub string) {
		needProgram(t, "python3")
		ws := workspace(t, base(t))
		port, accepted := testenv.LoopbackListener(t, "hello from the host\n")
		script := fmt.Sprintf(`python3 -c '
import socket
s = socket.create_connection(("127.0.0.1", %d), timeout=5)
print(s.recv(100).decode().strip())'`, port)

		res := run(t, newPolicy(ws), script, on(sub))
		if res.ExitCode == 0 || strings.Contains(res.Stdout, "hello from the host") {
			t.Fatalf("with --net none the host's listener was reachable: %v %q", res, res.Stdout)
		}
		select {
		case <-accepted:
			t.Fatalf("the listener accepted a connection from a sandbox without network")
		default:
		}
		if sub == oci.Name {
			// The open network's filter has no OCI form here: refused at
			// admission, never run with a weaker one.
			open := Spec{Command: []string{"/bin/sh", "-c", script}, Policy: newPolicy(ws).WithNetwork(bwrap.NetHost), Substrate: sub}
			if _, err := runSpec(context.Background(), open); !errors.Is(err, refusal.CapabilityRefused) {
				t.Fatalf("net:host on oci: %v, want CapabilityRefused", err)
			}
			return
		}
		res = run(t, newPolicy(ws).WithNetwork(bwrap.NetHost), script, on(sub))
		if res.ExitCode != 0 || !strings.Contains(res.Stdout, "hello from the host") {
			t.Fatalf("with --net host the listener was not reachable (the control failed): %v %q %q", res, res.Stdout, res.Stderr)
		}
	})
}

// TestInheritedDescriptorsStayOut opens a directory the sandbox hides, in
// this process, without close-on-exec (as a descriptor inherited from a
// parent would be), and tries to use it from inside.
func TestInheritedDescriptorsStayOut(t *testing.T) {
	substrates(t, func(t *testing.T, sub string) {
		ws := workspace(t, base(t))
		hidden, err := os.MkdirTemp("/tmp", "cordon-hidden-")
		if err != nil {
			t.Fatal(err)
		}
		defer os.RemoveAll(hidden)
		writeFile(t, filepath.Join(hidden, "secret"), "SECRET CONTENT\n")
		fd, err := unix.Open(hidden, unix.O_RDONLY|unix.O_DIRECTORY, 0) // no O_CLOEXEC, on purpose
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Close(fd)
		script := fmt.Sprintf("ls /proc/self/fd | tr '\\n' ' '; echo\n") +
			attempt("read", fmt.Sprintf("cat /proc/self/fd/%d/secret", fd)) +
			attempt("write", fmt.Sprintf("echo x > /proc/self/fd/%d/planted", fd))
		res := run(t, newPolicy(ws), script, on(sub))
		if strings.Contains(res.Stdout, "SECRET CONTENT") {
			t.Fatalf("the inherited descriptor let the sandbox read a hidden file")
		}
		fds, rest, _ := strings.Cut(res.Stdout, "\n")
		if fields := strings.Fields(fds); len(fields) > 4 {
			t.Errorf("the command holds descriptors %v; want 0, 1, 2 and the one ls opens", fields)
		}
		for name, rc := range statuses(t, rest) {
			if rc == "0" {
				t.Errorf("%s through the inherited descriptor succeeded", name)
			}
		}
		if _, err := os.Stat(filepath.Join(hidden, "planted")); err == nil {
			t.Errorf("the sandbox wrote into a hidden host directory")
		}
	})
}

// TestHostSocketsAreUnreachable listens on Unix sockets where host agents
// keep theirs (under /tmp, under the caller's home) and in the workspace,
// and tries to connect from inside: the mount table hides the first two,
// and the seccomp filter refuses socket(AF_UNIX) for all three; a
// socketpair, which reaches nothing outside, is the control that shows the
// attempt ran.
func TestHostSocketsAreUnreachable(t *testing.T) {
	substrates(t, func(t *testing.T, sub string) {
		needProgram(t, "python3")
		b := base(t)
		ws := workspace(t, b)
		tmp, err := os.MkdirTemp("/tmp", "cordon-agent-")
		if err != nil {
			t.Fatal(err)
		}
		defer os.RemoveAll(tmp)
		home := filepath.Join(b, "home")
		os.MkdirAll(filepath.Join(home, ".gnupg"), 0o700)
		sockets := map[string]string{
			"tmp-agent":  filepath.Join(tmp, "agent.sock"),
			"home-agent": filepath.Join(home, ".gnupg", "S.gpg-agent"),
			"workspace":  filepath.Join(ws, "control.sock"),
		}
		for _, path := range sockets {
			ln, err := net.Listen("unix", path)
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			go func() {
				for {
					c, err := ln.Accept()
					if err != nil {
						return
					}
					c.Write([]byte("hello\n"))
					c.Close()
				}
			}()
		}
		var script strings.Builder
		script.WriteString("ls -A /run | wc -l\n")
		for name, path := range sockets {
			script.WriteString(attempt(name, fmt.Sprintf(`python3 -c 'import socket; s = socket.socket(socket.AF_UNIX); s.connect("%s"); assert s.recv(10)'`, path)))
		}
		script.WriteString(attempt("pair", `python3 -c 'import socket; a, b = socket.socketpair(); a.send(b"x"); assert b.recv(1) == b"x"'`))
		env := append(os.Environ(), "HOME="+home)
		res := run(t, newPolicy(ws), script.String(), func(s *Spec) { s.Environ = env }, on(sub))
		first, rest, _ := strings.Cut(res.Stdout, "\n")
		if first != "0" {
			t.Errorf("/run is not empty inside: %q", res.Stdout)
		}
		st := statuses(t, rest)
		if st["pair"] != "0" {
			t.Fatalf("python could not make a socketpair inside (%q %q): the test cannot tell", res.Stdout, res.Stderr)
		}
		// The seccomp filter refuses socket(AF_UNIX) itself: not even the
		// workspace's own socket is reachable.
		for _, name := range []string{"tmp-agent", "home-agent", "workspace"} {
			if st[name] == "0" {
				t.Errorf("the host socket %s (%s) was reachable from inside", name, sockets[name])
			}
		}
	})
}

// TestTimeoutKillsTheWholeTree runs a tree that ignores SIGTERM, whose
// grandchildren call setsid and double-fork, and checks that the timeout
// ends all of it and that Run returns promptly.
func TestTimeoutKillsTheWholeTree(t *testing.T) {
	everyMode(t, func(t *testing.T, sub string) {
		needProgram(t, "setsid")
		ws := workspace(t, base(t))
		marker := testenv.MarkedSleep(t, ws)
		// Each process that should die runs the marked sleep; all
		// ignore SIGTERM.
		script := fmt.Sprintf(`trap '' TERM
setsid sh -c 'trap "" TERM; sh -c "trap \"\" TERM; exec %[1]s 300" & exec %[1]s 300' &
sh -c '(trap "" TERM; exec %[1]s 300) & exit 0'
%[1]s 300 &
while [ "$(grep -l '^%[1]s' /proc/[0-9]*/cmdline 2>/dev/null | wc -l)" -lt 4 ]; do sleep 0.05; done
echo started
wait`, marker)
		start := time.Now()
		res := run(t, newPolicy(ws), script, in(sub), func(s *Spec) {
			s.Timeout, s.Grace = 3*time.Second, 300*time.Millisecond
			s.Logger = testLogger(t)
		})
		elapsed := time.Since(start)
		if !res.TimedOut || res.ExitCode != 124 || res.Signal != "SIGKILL" {
			t.Errorf("result %v: want timed out, exit 124, SIGKILL", res)
		}
		if res.Stdout != "started\n" {
			t.Errorf("stdout %q: the tree did not start as planned (stderr %q)", res.Stdout, res.Stderr)
		}
		if elapsed > 20*time.Second {
			t.Errorf("Run took %v after a 3s timeout", elapsed)
		}
		if left := testenv.ProcessesWith(marker); len(left) > 0 {
			t.Errorf("processes of the run outlived it: %v", left)
		}
	})
}

// TestBackgroundJobsDieWithTheCommand: a command that leaves a background
// job holding its output returns at once, and the job is gone.
func TestBackgroundJobsDieWithTheCommand(t *testing.T) {
	everyMode(t, func(t *testing.T, sub string) {
		needProgram(t, "setsid")
		ws := workspace(t, base(t))
		marker := testenv.MarkedSleep(t, ws)
		start := time.Now()
		res := run(t, newPolicy(ws), fmt.Sprintf(`setsid %[1]s 300 & %[1]s 300 & echo done`, marker), in(sub))
		if res.ExitCode != 0 || res.Stdout != "done\n" || res.TimedOut {
			t.Fatalf("result %v %q %q", res, res.Stdout, res.Stderr)
		}
		if elapsed := time.Since(start); elapsed > 10*time.Second {
			t.Errorf("Run took %v while background jobs held the output pipes", elapsed)
		}
		if left := testenv.ProcessesWith(marker); len(left) > 0 {
			t.Errorf("background jobs outlived the run: %v", left)
		}
	})
}

func TestCancellationKillsTheTree(t *testing.T) {
	substrates(t, func(t *testing.T, sub string) {
		ws := workspace(t, base(t))
		marker := testenv.MarkedSleep(t, ws)
		ctx, cancel := context.WithCancel(context.Background())
		go func() {
			for len(testenv.ProcessesWith(marker)) == 0 {
				time.Sleep(10 * time.Millisecond)
			}
			cancel()
		}()
		res, err := runSpec(ctx, Spec{Substrate: sub,
			Command: []string{"/bin/sh", "-c", marker + " 300"},
			Policy:  newPolicy(ws), Timeout: time.Minute, Grace: 200 * time.Millisecond,
		})
		if err != nil {
			t.Fatal(err)
		}
		if !res.Canceled || res.TimedOut {
			t.Fatalf("result %v: want canceled", res)
		}
		if left := testenv.ProcessesWith(marker); len(left) > 0 {
			t.Errorf("processes outlived the canceled run: %v", left)
		}
	})
}

// TestAnEndedContextStartsNothing runs a command with a context canceled
// before the call, on every substrate: nothing starts (on the host or
// Landlock the command would have run until the cancel reached it), and
// the error is a Canceled one with a result that does not read as success.
func TestAnEndedContextStartsNothing(t *testing.T) {
	everyMode(t, func(t *testing.T, sub string) {
		ws := workspace(t, base(t))
		ran := filepath.Join(ws, "ran")
		p := prepared(t, newPolicy(ws), "touch "+ran, in(sub))
		rt := runtime.New(runtime.Config{})
		defer rt.Close()
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		res, err := rt.Run(ctx, p)
		if !errors.Is(err, refusal.Canceled) || !errors.Is(err, context.Canceled) {
			t.Errorf("error %v, want a Canceled refusal wrapping context.Canceled", err)
		}
		if res.ExitCode == 0 || res.Sandboxed {
			t.Errorf("result %+v reads as a run that happened", res)
		}
		rt.Close() // whatever the run had started is over
		if _, err := os.Stat(ran); err == nil {
			t.Error("the command ran")
		}
	})
}

// TestFloodKeepsMemoryFlat captures a 1 GiB flood: every byte is counted,
// a bounded head and tail are kept, and the heap does not grow with it.
func TestFloodKeepsMemoryFlat(t *testing.T) {
	needBwrap(t)
	ws := workspace(t, base(t))
	const flood = 1 << 30
	const limit = 1 << 20
	before := heapAllocated()
	res := run(t, newPolicy(ws), fmt.Sprintf("echo BEGIN; head -c %d /dev/zero | tr '\\0' x; echo; echo END; echo err >&2", flood),
		func(s *Spec) { s.MaxOutput = limit })
	grew := heapAllocated() - before
	want := int64(flood + len("BEGIN\n") + len("\nEND\n"))
	if res.StdoutBytes != want || !res.StdoutClipped {
		t.Fatalf("stdout_bytes %d clipped %v; want %d, true", res.StdoutBytes, res.StdoutClipped, want)
	}
	if !strings.HasPrefix(res.Stdout, "BEGIN\nxxx") || !strings.HasSuffix(res.Stdout, "xxx\nEND\n") {
		t.Errorf("the kept head and tail are not the flood's start and end")
	}
	dropped := want - limit
	if !strings.Contains(res.Stdout, fmt.Sprintf("[... %d bytes dropped ...]", dropped)) {
		t.Errorf("the clipped stream does not say that %d bytes were dropped", dropped)
	}
	if len(res.Stdout) > limit+64 {
		t.Errorf("kept %d bytes of stdout, more than the %d limit", len(res.Stdout), limit)
	}
	if res.Stderr != "err\n" || res.StderrClipped {
		t.Errorf("stderr %q clipped %v", res.Stderr, res.StderrClipped)
	}
	// The run allocates its read buffers and the kept bytes; a flood that
	// were stored would allocate the whole gigabyte.
	if grew > 32<<20 {
		t.Errorf("capturing a 1 GiB flood allocated %d bytes", grew)
	}
}

func TestNotFoundAndNotExecutable(t *testing.T) {
	bothModes(t, func(t *testing.T, sandboxed bool) {
		ws := workspace(t, base(t))
		writeFile(t, filepath.Join(ws, "not-executable.sh"), "#!/bin/sh\necho hi\n")
		writeFile(t, filepath.Join(ws, ".local/bin/from-local-bin"), "#!/bin/sh\necho local\n")
		os.Chmod(filepath.Join(ws, ".local/bin/from-local-bin"), 0o755)
		for _, tc := range []struct {
			argv []string
			code int
			out  string
		}{
			{[]string{"no-such-program-here"}, 127, ""},
			{[]string{"./no-such-file"}, 127, ""},
			{[]string{"--help"}, 127, ""},
			{[]string{"./not-executable.sh"}, 126, ""},
			{[]string{ws}, 126, ""},
			{[]string{"from-local-bin"}, 0, "local\n"},
			{[]string{"printf", "%s|", "a b", "$HOME", "--x", "-c", ""}, 0, "a b|$HOME|--x|-c||"},
			{[]string{"sh", "-c", "exit 7"}, 7, ""},
		} {
			res, err := runSpec(context.Background(), Spec{Command: tc.argv, Policy: newPolicy(ws), NoSandbox: !sandboxed})
			if err != nil {
				t.Errorf("%q: %v", tc.argv, err)
				continue
			}
			if res.ExitCode != tc.code || (tc.out != "" && res.Stdout != tc.out) {
				t.Errorf("%q: exit %d stdout %q stderr %q; want exit %d stdout %q", tc.argv, res.ExitCode, res.Stdout, res.Stderr, tc.code, tc.out)
			}
		}
	})
}

func TestWorkspaceAccess(t *testing.T) {
	substrates(t, func(t *testing.T, sub string) {
		b := base(t)
		ws := workspace(t, b)
		writeFile(t, filepath.Join(ws, "file.txt"), "content\n")
		tool := filepath.Join(ws, ".efferent/tools/abc/tool.sh")
		writeFile(t, tool, "#!/bin/sh\necho tool ran\n")
		os.Chmod(tool, 0o755)

		res := run(t, newPolicy(ws).WithAccess(bwrap.AccessRead), "cat file.txt\n"+attempt("write", "echo x > new.txt")+attempt("append", "echo x >> file.txt"), on(sub))
		if !strings.HasPrefix(res.Stdout, "content\n") {
			t.Errorf("read access cannot read: %q %q", res.Stdout, res.Stderr)
		}
		for name, rc := range statuses(t, strings.TrimPrefix(res.Stdout, "content\n")) {
			if rc == "0" {
				t.Errorf("read access: %s succeeded", name)
			}
		}

		res = runBwrap(t, newPolicy(ws).WithAccess(bwrap.AccessNone).WithReadOnly(filepath.Dir(tool)),
			fmt.Sprintf("ls -A %s | tr '\\n' ' '; echo; %s\n", ws, tool)+attempt("read", "cat "+filepath.Join(ws, "file.txt"))+attempt("write-tool", "echo x >> "+tool))
		lines := strings.SplitN(res.Stdout, "\n", 3)
		if len(lines) < 3 || lines[0] != ".efferent " || lines[1] != "tool ran" {
			t.Errorf("no access: the workspace should show only the tool's bind: %q %q", res.Stdout, res.Stderr)
		} else {
			for name, rc := range statuses(t, lines[2]) {
				if rc == "0" {
					t.Errorf("no access: %s succeeded", name)
				}
			}
		}

		// With write access, a read-only bind inside harness state works on
		// top of the harness bind.
		res = runBwrap(t, newPolicy(ws).WithReadOnly(filepath.Dir(tool)), tool+"\n"+attempt("write-tool", "echo x >> "+tool))
		if !strings.HasPrefix(res.Stdout, "tool ran\n") || statuses(t, strings.TrimPrefix(res.Stdout, "tool ran\n"))["write-tool"] == "0" {
			t.Errorf("a tool bound read-only inside .efferent: %q %q", res.Stdout, res.Stderr)
		}
	})
}

func TestRefusedEnvironmentNames(t *testing.T) {
	ws := workspace(t, base(t))
	for _, name := range []string{"LD_PRELOAD", "LD_LIBRARY_PATH", "BASH_ENV", "ENV", "PATH", "HOME", "BASH_FUNC_x%%", "1BAD", ""} {
		_, err := bwrap.Run(context.Background(), bwrap.Spec{Command: []string{"true"}, Policy: newPolicy(ws).WithEnv(name)})
		if !errors.Is(err, bwrap.ErrEnvRefused) {
			t.Errorf("WithEnv(%q): Run = %v, want ErrEnvRefused", name, err)
		}
		// Through a grant, the capability is refused before anything runs.
		if _, err := capabilities.Parse("env:" + name); err != nil {
			continue // not a name a grant can hold at all
		}
		if _, err := runSpec(context.Background(), Spec{Command: []string{"true"}, Policy: newPolicy(ws).WithEnv(name)}); refusal.ExitCode(err) != 3 {
			t.Errorf("env:%s through a grant: %v, want a policy refusal", name, err)
		}
	}
}

// TestMissingBubblewrapFailsClosed: no bwrap in PATH, one that cannot
// create a sandbox, or one that does not make one, and the command does not
// run.
func TestMissingBubblewrapFailsClosed(t *testing.T) {
	ws := workspace(t, base(t))
	dir := t.TempDir()
	fake := filepath.Join(dir, "bwrap")
	if err := os.WriteFile(fake, []byte("#!/bin/sh\necho 'bwrap: setting up uid map: Permission denied' >&2\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	// A "bwrap" that runs the command on the host: it reports no sandbox
	// that cordon can verify, and the run is refused. (It ran what it was
	// given: no program can be kept from that by the caller of a fake.)
	onHost := filepath.Join(t.TempDir(), "bwrap")
	if err := os.WriteFile(onHost, []byte("#!/bin/sh\nwhile [ \"$1\" != -- ]; do shift; done; shift; exec \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		spec Spec
		want string
	}{
		{"no bwrap in PATH", Spec{Environ: []string{"PATH=" + t.TempDir()}}, "bwrap not found in PATH"},
		{"bwrap that cannot sandbox", Spec{Bwrap: fake}, "Permission denied"},
		{"broken bwrap in PATH", Spec{Environ: []string{"PATH=" + dir}}, "Permission denied"},
		{"bwrap that runs the command on the host", Spec{Bwrap: onHost}, "not in a sandbox"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := tc.spec
			spec.Command = []string{"/bin/sh", "-c", "echo ran > " + filepath.Join(ws, "ran.txt")}
			spec.Policy = newPolicy(ws)
			res, err := runSpec(context.Background(), spec)
			if !errors.Is(err, bwrap.ErrUnavailable) {
				t.Fatalf("Run = %v, %v; want ErrUnavailable", res, err)
			}
			if !strings.HasPrefix(err.Error(), bwrap.UnavailableMessage) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("message %q does not name the fix and the reason %q", err, tc.want)
			}
			if res.Sandboxed || res.ExitCode == 0 {
				t.Errorf("the refused run reads as %v", res)
			}
			if _, err := os.Stat(filepath.Join(ws, "ran.txt")); err == nil && tc.name != "bwrap that runs the command on the host" {
				t.Fatalf("the command ran without a sandbox")
			}
		})
	}
}

func TestNoSandboxSaysSo(t *testing.T) {
	b := base(t)
	ws := workspace(t, b)
	outside := filepath.Join(b, "outside.txt")
	res := run(t, newPolicy(ws), "pwd; echo written > "+outside, func(s *Spec) { s.NoSandbox = true })
	if res.Sandboxed || res.Substrate != "host" || res.ExitCode != 0 {
		t.Fatalf("result %v", res)
	}
	if res.Stdout != ws+"\n" {
		t.Errorf("working directory %q, want the workspace %s", res.Stdout, ws)
	}
	// Without the sandbox nothing confines writes: that is what the flag
	// means, and why every result says so.
	if _, err := os.Stat(outside); err != nil {
		t.Errorf("the host run could not write outside the workspace: %v", err)
	}
	if len(res.Mechanisms) == 0 || !strings.Contains(res.Mechanisms[0], "no sandbox") {
		t.Errorf("mechanisms %q do not say there is no sandbox", res.Mechanisms)
	}
}

func TestInvalidSpecs(t *testing.T) {
	ws := workspace(t, base(t))
	for _, s := range []Spec{
		{Policy: newPolicy(ws)},
		{Command: []string{""}, Policy: newPolicy(ws)},
		{Command: []string{"true"}, Policy: newPolicy(ws), Timeout: -time.Second},
		{Command: []string{"true"}, Policy: newPolicy(ws), MaxOutput: -1},
	} {
		if _, err := runSpec(context.Background(), s); err == nil {
			t.Errorf("Run(%v) succeeded, want an error", s)
		}
	}
}

// protectedSnapshot describes the harness directories, .git/hooks,
// .git/config, and .git itself when it is a file: what no run may change.
func protectedSnapshot(t *testing.T, ws string) map[string]string {
	out := map[string]string{}
	for _, p := range []string{".efferent", ".foundry", ".git/hooks", ".git/config", ".git/commondir", ".git/modules", ".git/worktrees"} {
		for k, v := range snapshot(t, filepath.Join(ws, p)) {
			if !strings.HasPrefix(v, "error: ") {
				out[filepath.Join(p, k)] = v
			}
		}
	}
	if st, err := os.Lstat(filepath.Join(ws, ".git")); err == nil && !st.IsDir() {
		for k, v := range snapshot(t, filepath.Join(ws, ".git")) {
			out[filepath.Join(".git", k)] = v
		}
	}
	return out
}

// testLogger logs the run's life to the test log.
func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

func heapAllocated() int64 {
	var m runtimeMemStats
	readMemStats(&m)
	return int64(m.TotalAlloc)
}

// TestOwnSignalsAndStatuses: a command's own signals and exit statuses are
// what they are on the host, sandboxed or not — it is never PID 1 of its
// namespace, whose signals the kernel would ignore.
func TestOwnSignalsAndStatuses(t *testing.T) {
	bothModes(t, func(t *testing.T, sandboxed bool) {
		ws := workspace(t, base(t))
		for script, want := range map[string]int{
			"kill -KILL $$; echo alive": 137,
			"kill -TERM $$; echo alive": 143,
			"kill -ABRT $$; echo alive": 134,
			"exit 3":                    3,
			"true":                      0,
		} {
			res := run(t, newPolicy(ws), script, func(s *Spec) { s.NoSandbox = !sandboxed })
			if res.ExitCode != want || strings.Contains(res.Stdout, "alive") {
				t.Errorf("%q: exit %d, stdout %q; want exit %d and no output", script, res.ExitCode, res.Stdout, want)
			}
		}
	})
}

// TestAnErrorNeverReadsAsSuccess: when nothing ran, the Result that comes
// with the error has the error's exit code and is not sandboxed.
func TestAnErrorNeverReadsAsSuccess(t *testing.T) {
	ws := workspace(t, base(t))
	os.Symlink("/etc", filepath.Join(ws, ".efferent"))
	res, err := runSpec(context.Background(), Spec{Command: []string{"true"}, Policy: newPolicy(ws)})
	if err == nil {
		t.Fatal("a symlinked harness directory did not stop the run")
	}
	if res.ExitCode != 3 || res.Sandboxed || strings.Contains(res.String(), "exit 0") {
		t.Errorf("the result of a refused run reads %q (exit %d, sandboxed %v)", res, res.ExitCode, res.Sandboxed)
	}
	ws = workspace(t, base(t))
	res, err = runSpec(context.Background(), Spec{Command: []string{"true"}, Policy: newPolicy(ws), Bwrap: "/nonexistent/bwrap"})
	if err == nil || res.ExitCode != 125 || res.Sandboxed {
		t.Errorf("a run without bubblewrap: %v, %v", res, err)
	}
}

// TestTrustedStateIsHidden: cordon's per-user state and cache directories
// — the key store, the records of runs and grants, compiled code — are
// empty inside every sandbox, wherever they are (here under /var/tmp, not
// under the sandbox's own fresh /tmp), while the host sees what is in them.
func TestTrustedStateIsHidden(t *testing.T) {
	substrates(t, func(t *testing.T, sub string) {
		b := base(t)
		testenv.Require(t, !strings.HasPrefix(b, "/tmp/"), "a base directory outside /tmp (/var/tmp)")
		h := testHarness.WithStateDir(filepath.Join(b, "state")).WithCacheDir(filepath.Join(b, "cache"))
		for _, d := range []string{h.StateDir(), h.CacheDir()} {
			os.MkdirAll(d, 0o700)
			os.WriteFile(filepath.Join(d, "secret"), []byte("key"), 0o600)
		}
		ws := workspace(t, b)
		res := run(t, bwrap.NewPolicy(ws, h), fmt.Sprintf("ls -A %s %s; cat %s/secret %s/secret", h.StateDir(), h.CacheDir(), h.StateDir(), h.CacheDir()), on(sub))
		if strings.Contains(res.Stdout, "secret") || strings.Contains(res.Stdout, "key") || strings.Contains(res.Stdout, "runs") {
			t.Errorf("the sandbox sees cordon's state: %q", res.Stdout)
		}
		if entries, _ := os.ReadDir(h.StateDir()); len(entries) < 2 {
			t.Errorf("the state directory on the host holds %d entries; want the secret and the records of the run", len(entries))
		}
	})
}

// TestTheSandboxsInitHasWhatTheToolHas: bubblewrap's PID 1 runs as the
// tool's user and is dumpable, so a tool can run code in it (through
// /proc/1/mem). That gains nothing but the run's exit status only while
// the init has no more than the tool: the same seccomp filters, no
// capabilities, the same no_new_privs, rlimits and namespaces.
func TestTheSandboxsInitHasWhatTheToolHas(t *testing.T) {
	needBwrap(t)
	ws := workspace(t, base(t))
	const fields = `'^(Uid|Gid|Seccomp|Seccomp_filters|NoNewPrivs|CapInh|CapPrm|CapEff|CapBnd|CapAmb):'`
	script := `grep -E ` + fields + ` /proc/1/status; cat /proc/1/limits; for n in /proc/1/ns/*; do readlink $n; done; echo ---; ` +
		`grep -E ` + fields + ` /proc/$$/status; cat /proc/$$/limits; for n in /proc/$$/ns/*; do readlink $n; done`
	res := run(t, newPolicy(ws), script)
	if res.ExitCode != 0 {
		t.Fatalf("%v: %s", res, res.Stderr)
	}
	init, tool, ok := strings.Cut(res.Stdout, "---\n")
	if !ok {
		t.Fatalf("no separator in %q", res.Stdout)
	}
	if init != tool {
		t.Errorf("the sandbox's init differs from the tool:\ninit:\n%s\ntool:\n%s", init, tool)
	}
	for _, want := range []string{"Seccomp:\t2", "CapEff:\t0000000000000000", "CapBnd:\t0000000000000000", "NoNewPrivs:\t1"} {
		if !strings.Contains(init, want) {
			t.Errorf("the sandbox's init lacks %q:\n%s", want, init)
		}
	}
}
