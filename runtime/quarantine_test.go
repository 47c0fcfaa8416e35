package runtime_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cordon-run/cordon/internal/testenv"
	"github.com/cordon-run/cordon/refusal"
	"github.com/cordon-run/cordon/runtime"
	"github.com/cordon-run/cordon/substrate/landlock"
	wsguard "github.com/cordon-run/cordon/substrate/workspace"
)

// craftIndex rewrites .git/index with one gitlink (argv[2], object argv[3])
// in a shape git reads and cordon's reader did not: "desync" — an entry
// before it whose name length in its flags runs past its first NUL (git
// trusts the length, cordon the NUL, and the two then read different
// entries); "extended" — a version 2 entry with the extended-flags bit,
// which git reads and cordon refused (a failed read moved nothing);
// "absolute" — the gitlink named by an absolute path into the workspace,
// which git follows and cordon cannot (the index itself goes);
// "terminator" — "sub" with an "x" where its NUL should be (git copies
// that byte with the name: "sub" is "subx" to it); "first-ieot" — an
// entry git reads with three threads in the blocks of the first of two
// IEOT extensions.
const craftIndex = `
import hashlib, struct, sys
mode, path, sha = sys.argv[1], sys.argv[2].encode(), bytes.fromhex(sys.argv[3])
def ent(m, name, flen=None, ext=False, raw=None):
    flen = len(name) if flen is None else flen
    b = struct.pack(">10I", 0,0,0,0,0,0, m, 0,0,0) + sha + struct.pack(">H", flen | (0x4000 if ext else 0)) + (b"\0\0" if ext else b"")
    b += raw if raw is not None else name
    return b + b"\0" * (((62 + (2 if ext else 0) + flen + 8) & ~7) - len(b))
if mode == "desync":
    raw = b"a\0" + ent(0o100644, b"b")
    data = b"DIRC" + struct.pack(">II", 2, 2) + ent(0o100644, b"a", flen=100, raw=raw + b"\0" * (100 - len(raw))) + ent(0o160000, path)
elif mode == "extended":
    data = b"DIRC" + struct.pack(">II", 2, 1) + ent(0o160000, path, ext=True)
elif mode == "absolute":
    data = b"DIRC" + struct.pack(">II", 2, 1) + ent(0o160000, path)
elif mode == "terminator":   # "sub" whose NUL is an "x": git reads "subx"
    e = ent(0o160000, path[:-1])
    e = e[:62 + len(path) - 1] + b"x" + e[62 + len(path):]
    data = b"DIRC" + struct.pack(">II", 2, 2) + e + ent(0o100644, b"zz")
elif mode == "first-ieot":   # the entry in the blocks of the first of two IEOT extensions
    def ext(sig, d): return sig + struct.pack(">I", len(d)) + d
    def ieot(o, n): return ext(b"IEOT", struct.pack(">III", 1, o, n))
    a = ent(0o100644, b"a")
    at = 12 + len(a)
    exts = [ieot(at + 2 * 20 + 8, 1), ieot(12, 1), ext(b"ZZZZ", ent(0o160000, path))]
    h = hashlib.sha1(b"".join(e[:8] for e in exts)).digest()
    data = b"DIRC" + struct.pack(">II", 2, 1) + a + b"".join(exts) + ext(b"EOIE", struct.pack(">I", at) + h)
data += hashlib.sha1(data).digest()
open(".git/index", "wb").write(data)
`

// TestAnIndexOnlyGitCanReadIsNoWayIn: a tool that enters its repository
// as a submodule in an index cordon's reader misreads or cannot read —
// the entry in a split index's shared part (git update-index
// --split-index), an entry whose name length is not where its NUL is, a
// version 2 entry with extended flags, a gitlink named by an absolute
// path or reached through a symlink, a name whose NUL is not one, two
// IEOT extensions — still has it moved out of git's way (or the index
// with it), on every substrate. (On landlock git's own writes of .git
// fail — it makes index.lock, and nothing can be made there — while an
// existing file such as the index can still be written in place:
// TestAGitlinkWrittenThroughAMappingIsQuarantined.)
func TestAnIndexOnlyGitCanReadIsNoWayIn(t *testing.T) {
	needProgram(t, "python3")
	substrates(t, func(t *testing.T, sub string) {
		for _, shape := range []string{"split", "desync", "extended", "absolute", "symlink", "terminator", "first-ieot"} {
			t.Run(shape, func(t *testing.T) {
				b := base(t)
				ws := workspace(t, b)
				gitRepo(t, ws)
				marker := filepath.Join(b, "pwned")
				plant, write := plantSub("sub", marker), ""
				switch shape {
				case "split":
					write = "git update-index --add --cacheinfo 160000,$(git -C sub rev-parse HEAD),sub && git update-index --split-index"
				case "absolute":
					write = fmt.Sprintf("python3 -c '%s' absolute %s/sub $(git -C sub rev-parse HEAD)", craftIndex, ws)
				case "symlink":
					plant = plantSub("d/sub", marker)
					write = "ln -s d lnk && git update-index --add --cacheinfo 160000,$(git -C d/sub rev-parse HEAD),lnk/sub"
				case "terminator", "first-ieot":
					plant = plantSub("subx", marker)
					write = fmt.Sprintf("python3 -c '%s' %s subx $(git -C subx rev-parse HEAD)", craftIndex, shape)
				default:
					write = fmt.Sprintf("python3 -c '%s' %s sub $(git -C sub rev-parse HEAD)", craftIndex, shape)
				}
				plant = strings.Replace(plant, "git init -q d/sub", "mkdir d && git init -q d/sub", 1)
				if sub == landlock.Name {
					plant = strings.ReplaceAll(plant, "git init -q sub", "mkdir -p d/sub && cd d && git init -q sub")
				}
				res := run(t, newPolicy(ws), plant+" && "+write+" && echo ENTERED", on(sub))
				switch entered := strings.Contains(res.Stdout, "ENTERED"); {
				case sub == landlock.Name && entered:
					t.Errorf("on landlock a tool wrote the index: %q", res.Stdout)
				case sub != landlock.Name && !entered:
					t.Fatalf("the command could not write the index (the test proves nothing): %q %q", res.Stdout, res.Stderr)
				case sub != landlock.Name && shape == "split":
					if !strings.Contains(hostGit(t, ws, "ls-files", "-s", "sub"), "160000") {
						t.Fatalf("the host's git does not see the submodule (the test proves nothing)")
					}
					if len(res.Notes) != 1 || !strings.Contains(res.Notes[0], "moved sub/.git") {
						t.Errorf("the result's notes %q do not say the repository was moved", res.Notes)
					}
				}
				afterGit(t, ws, marker)
				hostGit(t, ws, "-c", "index.threads=3", "status", "--short") // git's threaded reading
				if _, err := os.Stat(marker); err == nil {
					t.Fatalf("git on the host (index.threads=3) ran the command a tool planted")
				}
			})
		}
	})
}

// TestARunAlongsideCannotRefillAQuarantinedEntry: run A enters its
// repository X as a submodule; run B starts while A goes on, so that X
// is a submodule B found (its X/.git bound read-only). A ends and its
// quarantine moves X/.git — which detaches B's mount — and B renames a
// repository of its own into X/.git before its mount watch stops it. B's
// quarantine must not pass X by as a submodule that was there before.
func TestARunAlongsideCannotRefillAQuarantinedEntry(t *testing.T) {
	needBwrap(t)
	needProgram(t, "python3")
	b := base(t)
	ws := workspace(t, b)
	gitRepo(t, ws)
	marker := filepath.Join(b, "pwned")
	scriptA := plantSub("X", filepath.Join(b, "pwned-a")) + ` && git update-index --add --cacheinfo 160000,$(git -C X rev-parse HEAD),X && touch a-ready
i=0; while [ ! -e b-started ] && [ $i -lt 400 ]; do sleep 0.05; i=$((i+1)); done; sleep 0.3`
	scriptB := plantSub("Y", marker) + ` && mv Y/.git X/Ygit && touch b-started && python3 -c '
import os, time
t = time.time()
while time.time() - t < 20:
    try:
        os.rename("X/Ygit", "X/.git"); print("RENAMED", flush=True); break
    except OSError: pass
'`
	var wg sync.WaitGroup
	wg.Go(func() { run(t, newPolicy(ws), scriptA) })
	for i := 0; i < 600; i++ {
		if _, err := os.Stat(filepath.Join(ws, "a-ready")); err == nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	res := run(t, newPolicy(ws), scriptB)
	wg.Wait()
	if !strings.Contains(res.Stdout, "RENAMED") {
		t.Logf("B could not rename its repository in (the test proves nothing): %q %q", res.Stdout, res.Stderr)
	}
	afterGit(t, ws, marker)
}

// TestAnEnclosingRepositorysSubmoduleIsProtected: in a workspace inside
// another repository's work tree, git at the workspace root uses that
// repository, and enters its submodules inside the workspace; their
// entries are protected as the workspace's own repository's are.
func TestAnEnclosingRepositorysSubmoduleIsProtected(t *testing.T) {
	substrates(t, func(t *testing.T, sub string) {
		b := base(t)
		outer := filepath.Join(b, "outer")
		ws := filepath.Join(outer, "ws")
		os.MkdirAll(filepath.Join(ws, "d"), 0o755)
		lib := filepath.Join(b, "lib")
		os.Mkdir(lib, 0o755)
		gitRepo(t, lib)
		gitRepo(t, outer)
		if out := outerGit(t, b, outer, "-c", "protocol.file.allow=always", "submodule", "add", "-q", lib, "ws/d/lib"); out != "" {
			t.Fatalf("git submodule add: %s", out)
		}
		outerGit(t, b, outer, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "submodule")
		marker := filepath.Join(b, "pwned")
		script := fmt.Sprintf(`cd d/lib && mkdir -p evil/objects evil/refs/heads && echo 'ref: refs/heads/main' > evil/HEAD &&
printf '[core]\n\trepositoryformatversion = 0\n\tfsmonitor = "%s"\n' > evil/config && echo 'gitdir: evil' > .git`, plantCommand(marker))
		run(t, newPolicy(ws), script, on(sub))
		outerGit(t, b, ws, "status", "--short")
		if _, err := os.Stat(marker); err == nil {
			t.Fatalf("git on the host ran the command a tool planted")
		}
	})
}

// outerGit runs the host's git in dir, finding repositories up to b.
func outerGit(t *testing.T, b, dir string, args ...string) string {
	t.Helper()
	gitBin, err := exec.LookPath("git")
	testenv.Require(t, err == nil, "git: %v", err)
	cmd := exec.Command(gitBin, args...)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CEILING_DIRECTORIES=" + b}
	out, _ := cmd.CombinedOutput()
	return string(out)
}

// TestTheQuarantineFollowsNoLink: a gitlink whose path leads through a
// symlink to a repository outside the workspace does not make cordon move
// that repository's .git.
func TestTheQuarantineFollowsNoLink(t *testing.T) {
	needBwrap(t)
	b := base(t)
	ws := workspace(t, b)
	gitRepo(t, ws)
	victim := filepath.Join(b, "victim", "proj")
	os.MkdirAll(victim, 0o755)
	gitRepo(t, victim)
	res := run(t, newPolicy(ws), fmt.Sprintf("ln -s %s lnk && git update-index --add --cacheinfo 160000,$(git rev-parse HEAD),lnk/proj && echo ENTERED", filepath.Dir(victim)))
	if !strings.Contains(res.Stdout, "ENTERED") {
		t.Fatalf("the command could not enter the gitlink (the test proves nothing): %q %q", res.Stdout, res.Stderr)
	}
	if _, err := os.Lstat(filepath.Join(victim, ".git")); err != nil {
		t.Errorf("a repository outside the workspace lost its .git: %v (notes %q)", err, res.Notes)
	}
}

// TestASequenceLeftInGitIsNoted: a to-do list a tool leaves in .git
// (a rebase in progress: git rebase --continue runs its exec lines) is
// named in the result's notes; one there before the run is not.
func TestASequenceLeftInGitIsNoted(t *testing.T) {
	needBwrap(t)
	b := base(t)
	ws := workspace(t, b)
	gitRepo(t, ws)
	os.MkdirAll(filepath.Join(ws, ".git", "sequencer"), 0o755)
	res := run(t, newPolicy(ws), `mkdir .git/rebase-merge && printf 'exec touch planted\n' > .git/rebase-merge/git-rebase-todo && echo WROTE`)
	if !strings.Contains(res.Stdout, "WROTE") {
		t.Fatalf("the command could not write .git/rebase-merge (the test proves nothing): %q %q", res.Stdout, res.Stderr)
	}
	var noted []string
	for _, n := range res.Notes {
		if strings.Contains(n, "left ") {
			noted = append(noted, n)
		}
	}
	if len(noted) != 1 || !strings.Contains(noted[0], "rebase-merge") {
		t.Errorf("notes %q; want one naming rebase-merge (and none the sequencer there before)", res.Notes)
	}
}

// TestANestedSubmoduleIsProtected: git status at the workspace root
// enters a submodule and, from there, the submodules of its own index
// (a submodule checked out without --recursive leaves them empty): their
// entries are protected as the root's submodules' are.
func TestANestedSubmoduleIsProtected(t *testing.T) {
	substrates(t, func(t *testing.T, sub string) {
		nestedSubmodule(t, sub)
	})
}

func nestedSubmodule(t *testing.T, sub string) {
	b := base(t)
	inner := filepath.Join(b, "inner")
	mid := filepath.Join(b, "mid")
	for _, d := range []string{inner, mid} {
		os.Mkdir(d, 0o755)
		gitRepo(t, d)
	}
	if out := outerGit(t, b, mid, "-c", "protocol.file.allow=always", "submodule", "add", "-q", inner, "n1"); out != "" {
		t.Fatalf("git submodule add: %s", out)
	}
	outerGit(t, b, mid, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "n1")
	ws := workspace(t, b)
	gitRepo(t, ws)
	if out := outerGit(t, b, ws, "-c", "protocol.file.allow=always", "submodule", "add", "-q", mid, "s1"); out != "" {
		t.Fatalf("git submodule add: %s", out)
	}
	outerGit(t, b, ws, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "s1")
	marker := filepath.Join(b, "pwned")
	// n1 is empty: s1 was checked out without --recursive. The tool's
	// repository there must not be one git enters (n1/.git is protected:
	// the planting fails; were it planted, it would be moved).
	run(t, newPolicy(ws), "cd s1 && "+plantSub("n1", marker), on(sub))
	afterGit(t, ws, marker)
}

// TestARebaseInProgressCannotBeRewritten: the user stopped in an
// interactive rebase (an "edit" or a conflict) and runs a tool before
// git rebase --continue. The to-do list there is read-only to the tool:
// it cannot add the exec line the user's --continue would run.
func TestARebaseInProgressCannotBeRewritten(t *testing.T) {
	substrates(t, func(t *testing.T, sub string) {
		rebaseInProgress(t, sub)
	})
}

func rebaseInProgress(t *testing.T, sub string) {
	b := base(t)
	ws := workspace(t, b)
	gitRepo(t, ws)
	id := []string{"-c", "user.name=t", "-c", "user.email=t@t"}
	for _, m := range []string{"2", "3"} {
		os.WriteFile(filepath.Join(ws, "f"), []byte(m), 0o644)
		hostGit(t, ws, "add", "f")
		hostGit(t, ws, append(id, "commit", "-q", "-m", m)...)
	}
	hostGit(t, ws, append(id, "-c", `sequence.editor=sed -i "1s/^pick/edit/"`, "rebase", "-q", "-i", "HEAD~2")...)
	if _, err := os.Stat(filepath.Join(ws, ".git", "rebase-merge", "git-rebase-todo")); err != nil {
		t.Fatalf("no rebase stopped (the test proves nothing): %v", err)
	}
	marker := filepath.Join(b, "pwned")
	res := run(t, newPolicy(ws), fmt.Sprintf(`cd .git/rebase-merge && { echo 'exec %s'; cat git-rebase-todo; } > t && mv t git-rebase-todo && echo WROTE`, plantCommand(marker)), on(sub))
	if strings.Contains(res.Stdout, "WROTE") {
		t.Errorf("a tool rewrote the to-do list of a rebase in progress")
	}
	hostGit(t, ws, append(id, "rebase", "--continue")...)
	if _, err := os.Stat(marker); err == nil {
		t.Fatalf("git rebase --continue on the host ran an exec line a tool added to a rebase in progress (notes %q)", res.Notes)
	}
}

// TestACommittedGitlinkIsMovedWhenTheIndexGoes: a tool commits its
// repository as a submodule on the current branch (git commit works in a
// sandbox) and makes the index one cordon moves away (here: too many
// submodules). The note says git reset makes a new index from HEAD —
// which names the tool's submodule: its entry was moved all the same.
func TestACommittedGitlinkIsMovedWhenTheIndexGoes(t *testing.T) {
	needBwrap(t)
	b := base(t)
	ws := workspace(t, b)
	gitRepo(t, ws)
	marker := filepath.Join(b, "pwned")
	res := run(t, newPolicy(ws), `export GIT_AUTHOR_NAME=t GIT_AUTHOR_EMAIL=t@t GIT_COMMITTER_NAME=t GIT_COMMITTER_EMAIL=t@t; `+
		plantSub("evil", marker)+` && git add evil 2>/dev/null && git commit -q -m vendor && `+
		gitlinksAdded("i=0; while [ $i -lt 300 ]; do echo g$i; i=$((i+1)); done"))
	if !strings.Contains(res.Stdout, "WROTE") {
		t.Fatalf("the command could not commit (the test proves nothing): %q %q", res.Stdout, res.Stderr)
	}
	if !strings.Contains(strings.Join(res.Notes, "\n"), "git reads none now") {
		t.Errorf("notes %q; want the index moved", res.Notes)
	}
	hostGit(t, ws, "reset", "-q")
	afterGit(t, ws, marker)
}

// gitlinksAdded is a shell line that enters each path the shell code
// names prints (one a line) in the index, as a gitlink to HEAD's commit,
// and then prints WROTE.
func gitlinksAdded(names string) string {
	return `h=$(git rev-parse HEAD); { ` + names + `; } | while read -r p; do printf '160000 %s\t%s\n' "$h" "$p"; done | git update-index --index-info && echo WROTE`
}

// TestGitlinksThatWouldStopLaterRunsTakeTheIndex: a run that leaves an
// index naming thousands of absent submodules, or two whose paths are
// 1900 directories deep (within the 256 a run may add, but every
// directory on the way is a pinned mount), would keep every later run
// from starting (bwrap refuses that many options): the index is moved to
// the quarantine, and the next run starts.
func TestGitlinksThatWouldStopLaterRunsTakeTheIndex(t *testing.T) {
	needBwrap(t)
	deep := strings.TrimSuffix(strings.Repeat("a/", 1900), "/")
	for name, names := range map[string]string{
		"many": "i=0; while [ $i -lt 5000 ]; do echo g$i; i=$((i+1)); done",
		"deep": "echo d1/" + deep + "; echo d2/" + deep,
	} {
		t.Run(name, func(t *testing.T) {
			b := base(t)
			ws := workspace(t, b)
			gitRepo(t, ws)
			res := run(t, newPolicy(ws), gitlinksAdded(names))
			if !strings.Contains(res.Stdout, "WROTE") {
				t.Fatalf("the command could not write the index: %q %q", res.Stdout, res.Stderr)
			}
			if len(res.Notes) != 1 || !strings.Contains(res.Notes[0], "git reads none now") {
				t.Errorf("notes %q; want the index moved", res.Notes)
			}
			if _, err := runSpec(context.Background(), Spec{Policy: newPolicy(ws), Command: []string{"true"}}); err != nil {
				t.Fatalf("the next run did not start: %v", err)
			}
		})
	}
}

// mmapFlip is a tool's Python that maps .git/index shared and writable
// and makes the entry name's mode 160000 (a gitlink) through the mapping
// — the size unchanged, and git status checks no checksum. On tmpfs no
// write through a mapping changes the file's ctime; elsewhere only the
// first one before writeback does. ready, if not "", is touched once the
// mapping is dirty, and the flip waits for the file go.
func mmapFlip(name, ready, goFile string) string {
	wait := ""
	if ready != "" {
		wait = fmt.Sprintf(`m[0:1] = m[0:1]
open(%q, "w").close()
t = time.time()
while not os.path.exists(%q) and time.time() - t < 20: time.sleep(0.05)
`, ready, goFile)
	}
	return fmt.Sprintf(`python3 -c '
import mmap, os, struct, time
f = open(".git/index", "r+b")
m = mmap.mmap(f.fileno(), 0)
%si = m.find(b"%s\0", 12)
m[i-62+24:i-62+28] = struct.pack(">I", 0o160000)
print("FLIPPED", flush=True)'`, wait, name)
}

// TestAGitlinkWrittenThroughAMappingIsQuarantined: the index is read after
// every run, whatever its stat says. A tool's write through a shared
// mapping of .git/index leaves its change time as it was — on tmpfs
// always, elsewhere once the mapping's page is dirty — so an index with a
// gitlink flipped in that way passed for unchanged, and the host's git
// entered the repository the tool planted there.
func TestAGitlinkWrittenThroughAMappingIsQuarantined(t *testing.T) {
	needProgram(t, "python3")
	t.Run("tmpfs", func(t *testing.T) {
		if os.Geteuid() != 0 {
			t.Skip("mounting a tmpfs for the workspace needs root (the root lane runs this)")
		}
		if !testenv.PrivateMounts(t) {
			return
		}
		substrates(t, func(t *testing.T, sub string) {
			b := base(t)
			mountTmpfs(t, b)
			ws := workspace(t, b)
			gitRepo(t, ws)
			// Below the top level: on Landlock nothing is made there.
			os.Mkdir(filepath.Join(ws, "d"), 0o755)
			hostGit(t, ws, "update-index", "--add", "--cacheinfo", "100644,e69de29bb2d1d6434b8b29ae775ad8c2e48c5391,d/X")
			time.Sleep(3500 * time.Millisecond) // its change time settled, as an index a user has not touched for a while
			marker := filepath.Join(b, "pwned")
			res := run(t, newPolicy(ws), plantSub("d/X", marker)+" ; "+mmapFlip("d/X", "", ""), on(sub))
			// On every substrate the index itself can be written in place
			// (on Landlock git's own writes fail: they make index.lock).
			if !strings.Contains(res.Stdout, "FLIPPED") {
				t.Fatalf("the tool did not flip the entry (the test proves nothing): %s %s", res.Stdout, res.Stderr)
			}
			if !strings.Contains(hostGit(t, ws, "ls-files", "-s", "d/X"), "160000") {
				t.Fatal("the host's git does not see d/X as a submodule (the test proves nothing)")
			}
			t.Logf("%s: %q", sub, res.Notes)
			afterGit(t, ws, marker)
		})
	})
	t.Run("beside another run", func(t *testing.T) {
		needBwrap(t)
		// Run A dirties its mapping, run B starts and reads the index
		// (settled) 3.5 s later, A flips X and ends, B plants X/.git.
		b := base(t)
		ws := workspace(t, b)
		gitRepo(t, ws)
		marker := filepath.Join(b, "pwned")
		scriptA := "git update-index --add --cacheinfo 100644,e69de29bb2d1d6434b8b29ae775ad8c2e48c5391,X && " + mmapFlip("X", "a-ready", "b-started")
		scriptB := "touch b-started; sleep 2; " + plantSub("X", marker)
		var wg sync.WaitGroup
		var resA runtime.Result
		wg.Go(func() { resA = run(t, newPolicy(ws), scriptA) })
		for i := 0; i < 2000; i++ {
			if _, err := os.Stat(filepath.Join(ws, "a-ready")); err == nil {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		time.Sleep(3500 * time.Millisecond)
		resB := run(t, newPolicy(ws), scriptB)
		wg.Wait()
		if !strings.Contains(resA.Stdout, "FLIPPED") {
			t.Fatalf("run A did not flip the entry: %s %s", resA.Stdout, resA.Stderr)
		}
		t.Logf("B: %s %s %q", resB.Stdout, resB.Stderr, resB.Notes)
		afterGit(t, ws, marker)
	})
}

// TestASubmodulesGitDirInTheWorkTreeIsProtected: a submodule whose .git
// file names a git directory in the work tree (a clone with
// --separate-git-dir there) is obeyed from that directory; its
// configuration is the root's to protect, not only the entry. A tool that
// appended core.fsmonitor to it made the host's git status run it.
func TestASubmodulesGitDirInTheWorkTreeIsProtected(t *testing.T) {
	substrates(t, func(t *testing.T, sub string) {
		b := base(t)
		ws := workspace(t, b)
		gitRepo(t, ws)
		separateSubmodule(t, ws)
		marker := filepath.Join(b, "pwned")
		res := run(t, newPolicy(ws), fmt.Sprintf(`printf '[core]\n\tfsmonitor = "%s"\n' >> gits/P/config && echo WROTE`, plantCommand(marker)), on(sub))
		if strings.Contains(res.Stdout, "WROTE") {
			t.Errorf("%s: a tool wrote the configuration of a submodule's git directory", sub)
		}
		afterGit(t, ws, marker)
	})
}

// waitFile waits for name to exist (20 s at most).
func waitFile(name string) bool {
	for range 2000 {
		if _, err := os.Stat(name); err == nil {
			return true
		}
		time.Sleep(10 * time.Millisecond)
	}
	return false
}

// editIndex is a tool's shell that changes the index with git update-index
// ARGS and writes the result over .git/index in place (no index.lock: on
// Landlock nothing can be made in .git, an existing file can be written).
func editIndex(args string) string {
	return `cp .git/index e/idx && GIT_INDEX_FILE=$PWD/e/idx git update-index ` + args + ` && cat e/idx > .git/index && rm e/idx`
}

// TestASubmoduleHandedBetweenRunsIsQuarantined: two runs of one workspace
// at once. A's command makes d/X/.git (core.fsmonitor its own) and enters
// d/X in the index; B starts and finds d/X named there; A takes it out of
// the index and ends (its quarantine sees nothing new); B puts it back and
// ends. B took d/X for the user's submodule and passed it by, and the
// host's git status ran A's command — unless a run trusts only what every
// other run going on trusted at its start.
func TestASubmoduleHandedBetweenRunsIsQuarantined(t *testing.T) {
	substrates(t, func(t *testing.T, sub string) {
		for _, shape := range []string{"made", "an old directory renamed", "an earlier run's", "a name that forges a line"} {
			t.Run(shape, func(t *testing.T) { handedBetweenRuns(t, sub, shape) })
		}
	})
}

func handedBetweenRuns(t *testing.T, sub, shape string) {
	b := base(t)
	ws := workspace(t, b)
	gitRepo(t, ws)
	os.Mkdir(filepath.Join(ws, "d"), 0o755)
	os.Mkdir(filepath.Join(ws, "e"), 0o755) // on Landlock nothing is made at the top level
	// A directory of the user's, made well before the runs: its birth
	// time is older than theirs.
	os.Mkdir(filepath.Join(ws, "d", "old"), 0o755)
	time.Sleep(50 * time.Millisecond)
	marker := filepath.Join(b, "pwned")
	// By hand: on Landlock git init fails (no chmod).
	plant := fmt.Sprintf(`mkdir -p d/X/.git/objects d/X/.git/refs/heads && echo 'ref: refs/heads/main' > d/X/.git/HEAD && printf '[core]\n\trepositoryformatversion = 0\n\tfsmonitor = "%s"\n' > d/X/.git/config && echo 0123456789012345678901234567890123456789 > e/xsha`, plantCommand(marker))
	switch shape {
	case "an old directory renamed":
		plant = "mkdir d/X && mv d/old d/X/.git && " + plant
	case "an earlier run's":
		// A run before both leaves the repository untracked: nothing to
		// quarantine then. A only enters it in the index.
		res := run(t, newPolicy(ws), plant+" && echo MADE", on(sub))
		if !strings.Contains(res.Stdout, "MADE") {
			t.Fatalf("the earlier run did not make the repository: %q %q", res.Stdout, res.Stderr)
		}
		time.Sleep(50 * time.Millisecond)
		plant = "true"
	case "a name that forges a line":
		// The earlier run also enters a gitlink whose name, written as
		// one line per submodule, would read as a line trusting d/X with
		// its entry: A would keep it.
		forge := `di=$(stat -c '%d	%i' d/X/.git) && name=$(printf 'q\nd/X\t%s\nq' "$di") && cp .git/index e/idx && printf '160000 %s\t%s\0' $(cat e/xsha) "$name" | GIT_INDEX_FILE=$PWD/e/idx git update-index -z --index-info && cat e/idx > .git/index && rm e/idx && echo FORGED`
		res := run(t, newPolicy(ws), plant+" && "+forge, on(sub))
		if !strings.Contains(res.Stdout, "FORGED") {
			t.Fatalf("the earlier run did not forge the name: %q %q", res.Stdout, res.Stderr)
		}
		time.Sleep(50 * time.Millisecond)
		plant = "true"
	}
	scriptA := plant + ` && ` + editIndex(`--add --cacheinfo 160000,$(cat e/xsha),d/X`) + ` && touch e/a-ready
i=0; while [ ! -e e/b-started ] && [ $i -lt 400 ]; do sleep 0.05; i=$((i+1)); done
` + editIndex(`--force-remove d/X`) + ` && echo REMOVED`
	scriptB := `touch e/b-started; i=0; while [ ! -e e/a-over ] && [ $i -lt 400 ]; do sleep 0.05; i=$((i+1)); done
` + editIndex(`--add --cacheinfo 160000,$(cat e/xsha),d/X`) + ` && echo READDED`
	var wg sync.WaitGroup
	var resA, resB runtime.Result
	aDone := make(chan struct{})
	wg.Go(func() { defer close(aDone); resA = run(t, newPolicy(ws), scriptA, on(sub)) })
	if !waitFile(filepath.Join(ws, "e", "a-ready")) {
		<-aDone
		t.Fatalf("run A did not get ready: %q %q", resA.Stdout, resA.Stderr)
	}
	wg.Go(func() { resB = run(t, newPolicy(ws), scriptB, on(sub)) })
	<-aDone // A is over, its quarantine taken
	os.WriteFile(filepath.Join(ws, "e", "a-over"), nil, 0o644)
	wg.Wait()
	if !strings.Contains(resA.Stdout, "REMOVED") || !strings.Contains(resB.Stdout, "READDED") {
		t.Fatalf("the runs did not do their part (the test proves nothing): A %q %q, B %q %q", resA.Stdout, resA.Stderr, resB.Stdout, resB.Stderr)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the marker exists before the host's git ran (the test proves nothing)")
	}
	t.Logf("%s: B's notes %q", sub, resB.Notes)
	afterGit(t, ws, marker)
}

// TestAUsersSubmoduleStaysWhenRunsOverlap: a submodule every run going on
// trusted stays the user's — it stays where it is when runs overlap.
func TestAUsersSubmoduleStaysWhenRunsOverlap(t *testing.T) {
	needBwrap(t)
	b := base(t)
	ws := workspace(t, b)
	gitRepo(t, ws)
	head := userSubmodule(t, ws, "P")
	// And one not checked out: each run puts a placeholder in its entry,
	// which the other must take for the absent entry it is.
	hostGit(t, ws, "update-index", "--add", "--cacheinfo", "160000,"+head+",Q")
	before, err := os.Stat(filepath.Join(ws, "P", ".git"))
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond) // the user's, made a while before the runs
	var wg sync.WaitGroup
	var resA runtime.Result
	wg.Go(func() { resA = run(t, newPolicy(ws), "sleep 1") })
	time.Sleep(300 * time.Millisecond)
	resB := run(t, newPolicy(ws), "true")
	wg.Wait()
	after, err := os.Stat(filepath.Join(ws, "P", ".git"))
	if err != nil || !os.SameFile(before, after) {
		t.Fatalf("P/.git is not the user's any more (%v); notes %q %q", err, resA.Notes, resB.Notes)
	}
	if len(resA.Notes)+len(resB.Notes) > 0 {
		t.Errorf("notes %q %q", resA.Notes, resB.Notes)
	}
}

// TestASubmoduleWrittenWhileOutOfTheIndexIsNotPassedBy: W starts while P
// (the user's submodule, an embedded P/.git) is in the index and trusts
// it — at its end P/.git is passed by while it is the same inode. W's
// command takes P out of the index; R starts, finds no P in the index,
// and tries to write core.fsmonitor into P/.git/config; W puts P back and
// ends. Before GuardOthers, R's write went through (P/.git was protected
// only where the index named P) and the host's git status ran it, on
// every substrate.
func TestASubmoduleWrittenWhileOutOfTheIndexIsNotPassedBy(t *testing.T) {
	substrates(t, func(t *testing.T, sub string) {
		_, ws, head, marker := submoduleScene(t, "P")
		scriptW := outAndBack("P", head, "e/w-ready", "e/r-over")
		scriptR := fmt.Sprintf(`printf '[core]\n\tfsmonitor = "%s"\n' >> P/.git/config && echo PLANTED`, plantCommand(marker))
		endW := background(t, newPolicy(ws), scriptW, filepath.Join(ws, "e", "w-ready"), "W did not take P out of the index", on(sub))
		resR := run(t, newPolicy(ws), scriptR, on(sub))
		os.WriteFile(filepath.Join(ws, "e", "r-over"), nil, 0o644)
		resW := endW()
		t.Logf("%s: R %q %q notes %q; W %q %q notes %q", sub, resR.Stdout, resR.Stderr, resR.Notes, resW.Stdout, resW.Stderr, resW.Notes)
		if !strings.Contains(resW.Stdout, "READDED") {
			t.Fatalf("W did not put P back in the index (the test proves nothing): %q %q", resW.Stdout, resW.Stderr)
		}
		if strings.Contains(resR.Stdout, "PLANTED") {
			t.Errorf("R wrote into P/.git/config, the entry of a submodule W trusts")
		}
		afterGit(t, ws, marker)
	})
}

// TestAFileToolDoesNotWriteASubmoduleARunTrusts: a run W trusts the
// user's submodule P, and its command takes P out of the index; a file
// tool's write (the command line's fs write, a server's write_file, a
// WebAssembly tool: each goes through the workspace's guard), which found
// no P in the index, wrote core.fsmonitor into P/.git/config; W's command
// put P back, and at W's end P/.git was the inode it trusted: passed by,
// and the host's git status ran it. The guard now also protects the
// entries the runs going on trust.
func TestAFileToolDoesNotWriteASubmoduleARunTrusts(t *testing.T) {
	substrates(t, func(t *testing.T, sub string) {
		_, ws, head, marker := submoduleScene(t, "P")
		scriptW := outAndBack("P", head, "e/w-ready", "e/r-over")
		endW := background(t, newPolicy(ws), scriptW, filepath.Join(ws, "e", "w-ready"), "W did not take P out of the index", on(sub))
		files, err := wsguard.Open(ws, wsguard.WithHarness(testHarness))
		if err != nil {
			t.Fatal(err)
		}
		config, err := files.ReadFile("P/.git/config")
		if err != nil {
			t.Fatal(err)
		}
		errWrite := files.WriteFile("P/.git/config", fmt.Appendf(config, "[core]\n\tfsmonitor = \"%s\"\n", plantCommand(marker)))
		files.Close()
		os.WriteFile(filepath.Join(ws, "e", "r-over"), nil, 0o644)
		resW := endW()
		t.Logf("%s: write: %v; W %q %q notes %q", sub, errWrite, resW.Stdout, resW.Stderr, resW.Notes)
		if !strings.Contains(resW.Stdout, "READDED") {
			t.Fatalf("W did not put P back in the index (the test proves nothing): %q %q", resW.Stdout, resW.Stderr)
		}
		if errWrite == nil {
			t.Errorf("a file tool wrote P/.git/config, the entry of a submodule W trusts")
		} else if !errors.Is(errWrite, wsguard.ErrWriteLater) {
			t.Errorf("the write was refused, but not as a write-later path: %v", errWrite)
		}
		afterGit(t, ws, marker)
	})
}

// TestAPooledSandboxsTrustedSubmoduleIsNotWrittenMeanwhile: a sandbox W
// made ahead trusts the user's submodule P from when it was made; its
// command comes much later. Meanwhile a run A takes P out of the index;
// a run R, which finds no P there, tries to write core.fsmonitor into
// P/.git/config, puts P back (so that W's call finds the sandbox's
// identity unchanged and gives W its command), waits for W's command and
// takes P out again (nothing new in its index at its end); W's command
// puts P back. Before GuardOthers (which counts an idle sandbox made ahead
// too), R's write went through and W passed P/.git by at its end, the
// inode it trusted: the host's git status ran it.
func TestAPooledSandboxsTrustedSubmoduleIsNotWrittenMeanwhile(t *testing.T) {
	needBwrap(t)
	_, ws, head, marker := submoduleScene(t, "P")

	rt := pooledRuntime(t, 1, 5*time.Minute)
	scriptW := `touch e/w-started; i=0; while [ ! -e e/r-over ] && [ $i -lt 400 ]; do sleep 0.05; i=$((i+1)); done
` + editIndex(`--add --cacheinfo 160000,`+head+`,P`) + ` && echo READDED`
	pw := prepared(t, newPolicy(ws), scriptW)
	if err := rt.Warm(pw); err != nil {
		t.Fatal(err)
	}
	warmed(t, rt, 1)
	sh := func(s *Spec) { s.Command = []string{"sh", "-c", s.Command[2]} }
	resA := run(t, newPolicy(ws), editIndex(`--force-remove P`)+` && echo REMOVED`, sh)
	if !strings.Contains(resA.Stdout, "REMOVED") {
		t.Fatalf("A did not take P out of the index: %q %q", resA.Stdout, resA.Stderr)
	}
	scriptR := fmt.Sprintf(`printf '[core]\n\tfsmonitor = "%s"\n' >> P/.git/config && echo PLANTED; `, plantCommand(marker)) +
		editIndex(`--add --cacheinfo 160000,`+head+`,P`) + ` && touch e/r-ready
i=0; while [ ! -e e/w-started ] && [ $i -lt 400 ]; do sleep 0.05; i=$((i+1)); done
` + editIndex(`--force-remove P`) + ` && echo R-REMOVED`
	var resR, resW runtime.Result
	var errW error
	rDone := make(chan struct{})
	go func() { defer close(rDone); resR = run(t, newPolicy(ws), scriptR, sh) }()
	if !waitFile(filepath.Join(ws, "e", "r-ready")) {
		<-rDone
		t.Fatalf("R did not put P back in the index: %q %q", resR.Stdout, resR.Stderr)
	}
	wDone := make(chan struct{})
	go func() { defer close(wDone); resW, errW = rt.Run(context.Background(), pw) }()
	<-rDone
	os.WriteFile(filepath.Join(ws, "e", "r-over"), nil, 0o644)
	<-wDone
	t.Logf("R: %q %q notes %q", resR.Stdout, resR.Stderr, resR.Notes)
	t.Logf("W: pooled=%v err=%v %q %q notes %q stats %+v", resW.Pooled, errW, resW.Stdout, resW.Stderr, resW.Notes, rt.PoolStats())
	if !strings.Contains(resR.Stdout, "R-REMOVED") || !strings.Contains(resW.Stdout, "READDED") {
		t.Fatal("the runs did not do their part (the test proves nothing)")
	}
	if strings.Contains(resR.Stdout, "PLANTED") {
		t.Errorf("R wrote into P/.git/config, the entry of a submodule a sandbox made ahead trusts")
	}
	afterGit(t, ws, marker)
}

// TestAPlaceholderAtASubmodulesEntryIsNotTrusted: X starts with the
// user's submodule P in the index but not checked out (P/.git absent), and
// its sandbox makes an empty placeholder directory at P/.git; W starts
// while it is there. X's tool takes P out of the index, and X ends, the
// placeholder staying for W. R starts (no P in its index) and fills the
// placeholder with a git directory whose core.fsmonitor is R's; W's tool
// puts P back. W took the placeholder for P's entry before (its inode):
// passed by at its end, and the host's git status ran R's command. An
// empty directory is absent now: W moves what R left.
func TestAPlaceholderAtASubmodulesEntryIsNotTrusted(t *testing.T) {
	needBwrap(t)
	b := base(t)
	ws := workspace(t, b)
	gitRepo(t, ws)
	os.Mkdir(filepath.Join(ws, "e"), 0o755)
	os.Mkdir(filepath.Join(ws, "P"), 0o755) // a submodule not checked out
	sha := "0123456789012345678901234567890123456789"
	hostGit(t, ws, "update-index", "--add", "--cacheinfo", "160000,"+sha+",P")
	marker := filepath.Join(b, "pwned")

	scriptX := `touch e/x-ready; i=0; while [ ! -e e/w-ready ] && [ $i -lt 400 ]; do sleep 0.05; i=$((i+1)); done
` + editIndex(`--force-remove P`) + ` && echo X-REMOVED`
	scriptW := `touch e/w-ready; i=0; while [ ! -e e/r-over ] && [ $i -lt 400 ]; do sleep 0.05; i=$((i+1)); done
` + editIndex(`--add --cacheinfo 160000,`+sha+`,P`) + ` && echo READDED`
	scriptR := fmt.Sprintf(`mkdir -p P/.git/objects P/.git/refs/heads && echo 'ref: refs/heads/main' > P/.git/HEAD && printf '[core]\n\trepositoryformatversion = 0\n\tfsmonitor = "%s"\n' > P/.git/config && echo PLANTED`, plantCommand(marker))

	var resX, resW runtime.Result
	xDone, wDone := make(chan struct{}), make(chan struct{})
	go func() { defer close(xDone); resX = run(t, newPolicy(ws), scriptX) }()
	if !waitFile(filepath.Join(ws, "e", "x-ready")) {
		<-xDone
		t.Fatalf("X did not start: %q %q", resX.Stdout, resX.Stderr)
	}
	if empty, err := os.ReadDir(filepath.Join(ws, "P", ".git")); err != nil || len(empty) != 0 {
		t.Fatalf("no empty placeholder at P/.git while X runs (%v, %v): the test proves nothing", empty, err)
	}
	go func() { defer close(wDone); resW = run(t, newPolicy(ws), scriptW) }()
	<-xDone
	resR := run(t, newPolicy(ws), scriptR)
	os.WriteFile(filepath.Join(ws, "e", "r-over"), nil, 0o644)
	<-wDone
	t.Logf("X %q %q notes %q; R %q %q notes %q; W %q %q notes %q", resX.Stdout, resX.Stderr, resX.Notes,
		resR.Stdout, resR.Stderr, resR.Notes, resW.Stdout, resW.Stderr, resW.Notes)
	if !strings.Contains(resX.Stdout, "X-REMOVED") || !strings.Contains(resW.Stdout, "READDED") {
		t.Fatal("the runs did not do their part (the test proves nothing)")
	}
	afterGit(t, ws, marker)
}

// TestASubmodulesConfigIncludeInItsWorkTreeIsProtected: the user's
// submodule P's configuration (its embedded P/.git, or .git/modules/P)
// includes a file of P's work tree (include.path ../.gitconfig, a shared
// project configuration). Only the root's configuration was read for the
// files it names: a tool of one run wrote core.fsmonitor into
// P/.gitconfig, and the host's git status at the root entered P and ran
// it, on every substrate.
func TestASubmodulesConfigIncludeInItsWorkTreeIsProtected(t *testing.T) {
	substrates(t, func(t *testing.T, sub string) {
		for _, layout := range []string{"embedded", "modules"} {
			t.Run(layout, func(t *testing.T) {
				b := base(t)
				ws := workspace(t, b)
				gitRepo(t, ws)
				lib := filepath.Join(b, "lib")
				os.Mkdir(lib, 0o755)
				gitRepo(t, lib)
				os.WriteFile(filepath.Join(lib, ".gitconfig"), []byte("[core]\n\tautocrlf = false\n"), 0o644)
				hostGit(t, lib, "add", ".gitconfig")
				hostGit(t, lib, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "cfg")
				p := filepath.Join(ws, "P")
				if layout == "modules" {
					hostGit(t, ws, "-c", "protocol.file.allow=always", "submodule", "add", "-q", lib, "P")
				} else {
					hostGit(t, ws, "clone", "-q", lib, "P")
					head := strings.TrimSpace(hostGit(t, p, "rev-parse", "HEAD"))
					hostGit(t, ws, "update-index", "--add", "--cacheinfo", "160000,"+head+",P")
				}
				hostGit(t, p, "config", "include.path", "../.gitconfig")
				marker := filepath.Join(b, "pwned")
				res := run(t, newPolicy(ws), fmt.Sprintf(`printf '[core]\n\tfsmonitor = "%s"\n' >> P/.gitconfig && echo WROTE`, plantCommand(marker)), on(sub))
				t.Logf("%s: %q %q notes %q", sub, res.Stdout, res.Stderr, res.Notes)
				// In .git/modules/P, ../.gitconfig is .git/modules/.gitconfig
				// (read-only): P/.gitconfig is then no file git reads.
				if layout == "embedded" && strings.Contains(res.Stdout, "WROTE") {
					t.Errorf("a tool wrote P/.gitconfig, which P's configuration includes")
				}
				afterGit(t, ws, marker)
			})
		}
	})
}

// TestASeparateGitDirsIndexIsProtected: the user's submodule P uses a git
// directory elsewhere in the workspace (gits/P, a clone with
// --separate-git-dir). Its configuration was protected, its index not: a
// tool entered a submodule P/N of its own in gits/P/index, with an N/.git
// whose core.fsmonitor it wrote; the quarantine reads P's index once,
// before the run, and the host's git status entered P and then N (bwrap
// and OCI; Landlock refused the mkdir in P). The whole directory is
// read-only now.
func TestASeparateGitDirsIndexIsProtected(t *testing.T) {
	substrates(t, func(t *testing.T, sub string) {
		b := base(t)
		ws := workspace(t, b)
		gitRepo(t, ws)
		head := separateSubmodule(t, ws)
		marker := filepath.Join(b, "pwned")
		script := fmt.Sprintf(`cd P && mkdir -p N/.git/objects N/.git/refs/heads && echo 'ref: refs/heads/main' > N/.git/HEAD && printf '[core]\n\trepositoryformatversion = 0\n\tfsmonitor = "%s"\n' > N/.git/config &&
cp ../gits/P/index ../idx.tmp && GIT_INDEX_FILE=$PWD/../idx.tmp git update-index --add --cacheinfo 160000,%s,N && cat ../idx.tmp > ../gits/P/index && echo WROTE`, plantCommand(marker), head)
		res := run(t, newPolicy(ws), script, on(sub))
		t.Logf("%s: %q %q notes %q", sub, res.Stdout, res.Stderr, res.Notes)
		if strings.Contains(res.Stdout, "WROTE") {
			t.Errorf("a tool wrote gits/P/index, the index of a submodule's git directory")
		}
		afterGit(t, ws, marker)
	})
}

// TestSubmodulesNestedTooDeepRefuseTheRun: the user's submodules nest six
// deep (P1/…/P6, each a gitlink in its parent's index). The entries were
// protected to four levels below the first, and the sixth left alone: a
// tool wrote core.fsmonitor into P6/.git/config, and the host's git
// status, which recurses to any depth, ran it, on every substrate. Such a
// workspace is refused now.
func TestSubmodulesNestedTooDeepRefuseTheRun(t *testing.T) {
	substrates(t, func(t *testing.T, sub string) {
		b := base(t)
		ws := workspace(t, b)
		gitRepo(t, ws)
		chain := []string{"P1", "P2", "P3", "P4", "P5", "P6"}
		dir := ws
		var dirs []string
		for _, c := range chain {
			dir = filepath.Join(dir, c)
			os.Mkdir(dir, 0o755)
			gitRepo(t, dir)
			dirs = append(dirs, dir)
		}
		for i := len(dirs) - 1; i >= 0; i-- {
			parent := ws
			if i > 0 {
				parent = dirs[i-1]
			}
			head := strings.TrimSpace(hostGit(t, dirs[i], "rev-parse", "HEAD"))
			hostGit(t, parent, "update-index", "--add", "--cacheinfo", "160000,"+head+","+chain[i])
		}
		marker := filepath.Join(b, "pwned")
		script := fmt.Sprintf(`printf '[core]\n\tfsmonitor = "%s"\n' >> P1/P2/P3/P4/P5/P6/.git/config && echo WROTE`, plantCommand(marker))
		res, err := runSpec(context.Background(), Spec{Command: []string{"/bin/sh", "-c", script}, Policy: newPolicy(ws), Timeout: time.Minute, Substrate: sub})
		t.Logf("%s: %q %q notes %q err %v", sub, res.Stdout, res.Stderr, res.Notes, err)
		if !errors.Is(err, refusal.ProtectedPath) {
			t.Errorf("%s: the run = %v, want a ProtectedPath refusal", sub, err)
		}
		afterGit(t, ws, marker)
	})
}

// TestTheGlobalConfigIsReadForEveryWorkTree: the user's global git
// configuration says core.hooksPath = .githooks, relative to the work tree
// git runs in. It was read once per run, against the first work tree that
// asked — a submodule's whose git directory lies in the workspace (gits/P)
// before the root's — and the root's .githooks was left writable: a tool
// planted .githooks/pre-commit, and the user's git commit at the root ran
// it, on every substrate.
func TestTheGlobalConfigIsReadForEveryWorkTree(t *testing.T) {
	for _, withSub := range []bool{false, true} {
		t.Run(fmt.Sprintf("separate-gitdir-submodule=%v", withSub), func(t *testing.T) {
			substrates(t, func(t *testing.T, sub string) {
				b, ws := globalConfigScene(t, "[core]\n\thooksPath = .githooks\n")
				os.Mkdir(filepath.Join(ws, ".githooks"), 0o755) // the project's own hook
				os.WriteFile(filepath.Join(ws, ".githooks", "pre-commit"), []byte("#!/bin/sh\nexit 0\n"), 0o755)
				if withSub {
					separateSubmodule(t, ws)
				}
				marker := filepath.Join(b, "pwned")
				res := run(t, newPolicy(ws), fmt.Sprintf(`printf '#!/bin/sh\n%s\n' > .githooks/pre-commit && echo WROTE`, plantCommand(marker)), on(sub))
				t.Logf("%s: %q %q notes %q", sub, res.Stdout, res.Stderr, res.Notes)
				if strings.Contains(res.Stdout, "WROTE") {
					t.Errorf("a tool wrote .githooks/pre-commit, in the hooks directory the global configuration names")
				}
				cmd := exec.Command("git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "after")
				cmd.Dir = ws
				cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=" + os.Getenv("GIT_CONFIG_GLOBAL"), "GIT_CEILING_DIRECTORIES=" + b}
				out, _ := cmd.CombinedOutput()
				t.Logf("git commit: %s", out)
				if _, err := os.Stat(marker); err == nil {
					t.Fatalf("git commit on the host ran the hook a tool planted")
				}
			})
		})
	}
}

// outAndBack is the script of a run that takes the submodule rel (its
// commit head) out of the index, touches ready, waits (up to 20 s) for
// wait, puts rel back and says READDED.
func outAndBack(rel, head, ready, wait string) string {
	return editIndex(`--force-remove `+rel) + ` && touch ` + ready + `
i=0; while [ ! -e ` + wait + ` ] && [ $i -lt 400 ]; do sleep 0.05; i=$((i+1)); done
` + editIndex(`--add --cacheinfo 160000,`+head+`,`+rel) + ` && echo READDED`
}

// separateSubmodule makes P in ws a submodule the user cloned with its
// git directory elsewhere in the workspace (gits/P, --separate-git-dir),
// and returns its commit.
func separateSubmodule(t *testing.T, ws string) string {
	t.Helper()
	os.MkdirAll(filepath.Join(ws, "gits"), 0o755)
	hostGit(t, ws, "clone", "-q", "--separate-git-dir", filepath.Join(ws, "gits", "P"), filepath.Join(ws, ".git"), filepath.Join(ws, "P"))
	head := strings.TrimSpace(hostGit(t, filepath.Join(ws, "P"), "rev-parse", "HEAD"))
	hostGit(t, ws, "update-index", "--add", "--cacheinfo", "160000,"+head+",P")
	return head
}

// submoduleScene makes the scene of the tests of a submodule the user
// made, at rel, well before the runs (its P/.git older than theirs): a
// workspace that is a repository, with a directory e for the runs' signal
// files; it returns the base, the workspace, the submodule's commit and
// the marker a planted command would make.
func submoduleScene(t *testing.T, rel string) (b, ws, head, marker string) {
	t.Helper()
	b = base(t)
	ws = workspace(t, b)
	gitRepo(t, ws)
	os.Mkdir(filepath.Join(ws, "e"), 0o755)
	os.MkdirAll(filepath.Dir(filepath.Join(ws, rel)), 0o755)
	head = userSubmodule(t, ws, rel)
	time.Sleep(50 * time.Millisecond)
	return b, ws, head, filepath.Join(b, "pwned")
}

// userSubmodule makes P in ws an embedded repository with one commit and
// enters it in ws's index as a submodule, as the user would; it returns
// the commit P's gitlink names.
func userSubmodule(t *testing.T, ws, name string) string {
	t.Helper()
	p := filepath.Join(ws, name)
	if err := os.Mkdir(p, 0o755); err != nil {
		t.Fatal(err)
	}
	gitRepo(t, p)
	head := strings.TrimSpace(hostGit(t, p, "rev-parse", "HEAD"))
	hostGit(t, ws, "update-index", "--add", "--cacheinfo", "160000,"+head+","+name)
	return head
}

// globalConfigScene sets the user's global git configuration to config
// (GIT_CONFIG_GLOBAL, for the test) and makes a workspace that is a
// repository; it returns the base and the workspace.
func globalConfigScene(t *testing.T, config string) (b, ws string) {
	t.Helper()
	b = base(t)
	global := filepath.Join(b, "gitconfig")
	if err := os.WriteFile(global, []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("GIT_CONFIG_GLOBAL", global)
	ws = workspace(t, b)
	gitRepo(t, ws)
	return b, ws
}

// TestTheGlobalConfigIsReadForEverySubmodule: the user's global git
// configuration names a program by a path relative to the work tree
// (core.fsmonitor = ./fsmon.sh), which git status at the root runs in the
// root and again in each submodule it enters. It was protected for the
// root, and for a submodule whose git directory lies in the workspace,
// not for an embedded one (or one in .git/modules): a tool wrote
// P/fsmon.sh, and the host's git status ran it in P.
func TestTheGlobalConfigIsReadForEverySubmodule(t *testing.T) {
	substrates(t, func(t *testing.T, sub string) {
		b, ws := globalConfigScene(t, "[core]\n\tfsmonitor = ./fsmon.sh\n")
		userSubmodule(t, ws, "P")
		marker := filepath.Join(b, "pwned")
		res := run(t, newPolicy(ws), fmt.Sprintf(`printf '#!/bin/sh\n%s\n' > P/fsmon.sh && chmod +x P/fsmon.sh && echo WROTE`, plantCommand(marker)), on(sub))
		t.Logf("%s: %q %q notes %q", sub, res.Stdout, res.Stderr, res.Notes)
		if strings.Contains(res.Stdout, "WROTE") {
			t.Errorf("a tool wrote P/fsmon.sh, the program the global configuration runs in P")
		}
		cmd := exec.Command("git", "status", "--short")
		cmd.Dir = ws
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=" + os.Getenv("GIT_CONFIG_GLOBAL"), "GIT_CEILING_DIRECTORIES=" + b}
		out, _ := cmd.CombinedOutput()
		t.Logf("git status: %s", out)
		if _, err := os.Stat(marker); err == nil {
			t.Fatal("the host's git status ran the program a tool planted in the submodule")
		}
	})
}
