package runtime_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cordon-run/cordon/admission"
	"github.com/cordon-run/cordon/internal/wasmtest"
	"github.com/cordon-run/cordon/refusal"
	"github.com/cordon-run/cordon/runtime"
	"github.com/cordon-run/cordon/substrate/bwrap"
	"github.com/cordon-run/cordon/substrate/landlock"
	wsguard "github.com/cordon-run/cordon/substrate/workspace"
)

// runSubmoduleGuest admits runtime/testdata/submoduleguest as a wasm tool
// of ws with fs.read and fs.write, and runs it in mode.
func runSubmoduleGuest(t *testing.T, ws, mode string) runtime.Result {
	t.Helper()
	ctx := context.Background()
	src := t.TempDir()
	if err := os.WriteFile(filepath.Join(src, "ag.wasm"), wasmtest.Go(t, "runtime/testdata/submoduleguest"), 0o644); err != nil {
		t.Error(err)
		return runtime.Result{}
	}
	a, err := admission.New(admission.Config{Workspace: ws, Harness: testHarness})
	if err != nil {
		t.Error(err)
		return runtime.Result{}
	}
	reg, err := admission.OpenRegistry(admission.RegistryConfig{Workspace: ws, Harness: testHarness})
	if err != nil {
		t.Error(err)
		return runtime.Result{}
	}
	adm, err := a.Admit(ctx, admission.Source{Name: "decl", Dir: src, Data: []byte(fmt.Sprintf(
		`{"name": "ag", "kind": "wasm", "module": "ag.wasm", "args": [%q], "capabilities": ["fs.read:workspace", "fs.write:workspace", "time:60s"], "input_schema": {"type": "object"}}`, mode))})
	if err != nil {
		t.Error(err)
		return runtime.Result{}
	}
	if _, err := reg.Register(adm); err != nil {
		t.Error(err)
		return runtime.Result{}
	}
	p, err := a.Prepare(ctx, reg, "ag", []byte(`{}`))
	if err != nil {
		t.Error(err)
		return runtime.Result{}
	}
	rt := runtime.New(runtime.Config{})
	defer rt.Close()
	res, err := rt.Run(ctx, p)
	if err != nil {
		t.Error(err)
	}
	return res
}

// TestAWasmToolDoesNotWriteASubmoduleAnEndedRunTrusted: a WebAssembly tool
// T finds its workspace's protected set (Protect, the index) once, at its
// first change; it added only the kept sets of the runs going on at each
// later change, and now keeps every set it has seen. Run R trusts the user's submodule P and takes it out of the
// index; T makes its first change (its set names no P; R's kept set guards
// it then); R puts P back and ends (the same inode: passed by). Now no run
// going on trusts P, P is in the index, and T's set, found when P was not,
// does not protect P/.git: T writes core.fsmonitor into P/.git/config. A
// run W then starts, trusts P (the user's inode, no run beside it) and
// takes P out of the index over T's end, so that T's own quarantine finds
// nothing new; W puts P back and ends, passing the same inode by. The
// host's git status ran T's command.
func TestAWasmToolDoesNotWriteASubmoduleAnEndedRunTrusted(t *testing.T) {
	needBwrap(t)
	_, ws, head, marker := submoduleScene(t, "P")
	os.WriteFile(filepath.Join(ws, "e", "fsmon-line"), fmt.Appendf(nil, "[core]\n\tfsmonitor = \"%s\"\n", plantCommand(marker)), 0o644)

	scriptR := outAndBack("P", head, "e/r-ready", "e/t-first")
	scriptW := outAndBack("P", head, "e/w-ready", "e/t-over")

	var resR, resT runtime.Result
	rDone, tDone := make(chan struct{}), make(chan struct{})
	go func() { defer close(rDone); resR = run(t, newPolicy(ws), scriptR) }()
	if !waitFile(filepath.Join(ws, "e", "r-ready")) {
		<-rDone
		t.Fatalf("R did not take P out of the index: %q %q", resR.Stdout, resR.Stderr)
	}
	go func() { defer close(tDone); resT = runSubmoduleGuest(t, ws, "stale") }()
	<-rDone
	os.WriteFile(filepath.Join(ws, "e", "r-over"), nil, 0o644)
	// W starts once T planted (a run going on that trusts P guards it).
	resW := func() runtime.Result {
		wDone := make(chan runtime.Result)
		if !waitFile(filepath.Join(ws, "e", "t-planted")) {
			<-tDone
			t.Fatalf("T did not plant: %q %q", resT.Stdout, resT.Stderr)
		}
		go func() { wDone <- run(t, newPolicy(ws), scriptW) }()
		<-tDone
		os.WriteFile(filepath.Join(ws, "e", "t-over"), nil, 0o644)
		return <-wDone
	}()
	t.Logf("R %q %q notes %q", resR.Stdout, resR.Stderr, resR.Notes)
	t.Logf("T %q %q notes %q refusals %v", resT.Stdout, resT.Stderr, resT.Notes, resT.Refusals)
	t.Logf("W %q %q notes %q", resW.Stdout, resW.Stderr, resW.Notes)
	if !strings.Contains(resR.Stdout, "READDED") || !strings.Contains(resW.Stdout, "READDED") {
		t.Fatalf("the runs did not do their part (the test proves nothing)")
	}
	if strings.Contains(resT.Stdout, "plant-early P/.git/config: ok") {
		t.Errorf("T wrote P/.git/config while R trusted it (the change's own case)")
	}
	if strings.Contains(resT.Stdout, "plant-late P/.git/config: ok") {
		t.Errorf("T wrote P/.git/config, the entry of the user's submodule P, in the index again, with a set found while P was out of it")
	}
	// The refusals reach the result, named: not an I/O error.
	writeLater := 0
	for _, r := range resT.Refusals {
		if r.Error == "WriteLater" && strings.HasSuffix(r.Path, "P/.git/config") {
			writeLater++
		}
	}
	if writeLater != 2 || strings.Contains(resT.Stdout, "errno 29") {
		t.Errorf("T's two writes of P/.git/config: %d WriteLater refusals in %+v; the guest saw %q", writeLater, resT.Refusals, resT.Stdout)
	}
	afterGit(t, ws, marker)
}

// TestAWorkspaceKeptOpenGuardsWhatAnEndedRunTrusted: the same as
// TestAWasmToolDoesNotWriteASubmoduleAnEndedRunTrusted, with the
// workspace guard used as a WebAssembly tool's run uses it (open once, changes,
// then Protected().QuarantineNotes() at the end), on bwrap.
func TestAWorkspaceKeptOpenGuardsWhatAnEndedRunTrusted(t *testing.T) {
	needBwrap(t)
	_, ws, head, marker := submoduleScene(t, "P")
	scriptR := outAndBack("P", head, "e/r-ready", "e/t-first")
	scriptW := outAndBack("P", head, "e/w-ready", "e/t-over")
	endR := background(t, newPolicy(ws), scriptR, filepath.Join(ws, "e", "r-ready"), "R did not take P out of the index")
	files, err := wsguard.Open(ws, wsguard.WithHarness(testHarness))
	if err != nil {
		t.Fatal(err)
	}
	if err := files.WriteFile("x.txt", []byte("x")); err != nil {
		t.Fatal(err)
	}
	config, _ := files.ReadFile("P/.git/config")
	planted := fmt.Appendf(config, "[core]\n\tfsmonitor = \"%s\"\n", plantCommand(marker))
	errEarly := files.WriteFile("P/.git/config", planted)
	os.WriteFile(filepath.Join(ws, "e", "t-first"), nil, 0o644)
	resR := endR()
	errLate := files.WriteFile("P/.git/config", planted)
	endW := background(t, newPolicy(ws), scriptW, filepath.Join(ws, "e", "w-ready"), "W did not take P out of the index")
	var notes []string
	if p, err := files.Protected(); err == nil {
		notes = p.QuarantineNotes()
	}
	files.Close()
	os.WriteFile(filepath.Join(ws, "e", "t-over"), nil, 0o644)
	resW := endW()
	t.Logf("early %v; late %v; T notes %q; R %q notes %q; W %q notes %q", errEarly, errLate, notes, resR.Stdout, resR.Notes, resW.Stdout, resW.Notes)
	if !strings.Contains(resR.Stdout, "READDED") || !strings.Contains(resW.Stdout, "READDED") {
		t.Fatalf("the runs did not do their part (the test proves nothing)")
	}
	if errLate == nil {
		t.Errorf("the kept-open workspace wrote P/.git/config, P in the index, with a set found while P was out of it")
	}
	afterGit(t, ws, marker)
}

// TestAFileToolOfANestedWorkspaceWaitsForARunOfTheEnclosingOne: a run W
// of the workspace ws (a repository) trusts the user's submodule sub/P;
// its command takes sub/P out of the index. A file tool whose workspace is
// ws/sub read the kept sets of the runs of ws/sub only — runs of nested
// workspaces never overlap, but a file tool is no run — and the index
// (ws's, the one enclosing ws/sub) named no sub/P: it wrote core.fsmonitor
// into P/.git/config; W put sub/P back and passed the same inode by, and
// the host's git status at ws ran it. A file tool's change is now refused
// while a run of an enclosing or a nested workspace is going on.
func TestAFileToolOfANestedWorkspaceWaitsForARunOfTheEnclosingOne(t *testing.T) {
	substrates(t, func(t *testing.T, sub string) {
		_, ws, head, marker := submoduleScene(t, "sub/P")
		inner := filepath.Join(ws, "sub")
		scriptW := outAndBack("sub/P", head, "e/w-ready", "e/r-over")
		endW := background(t, newPolicy(ws), scriptW, filepath.Join(ws, "e", "w-ready"), "W did not take sub/P out of the index", on(sub))
		// The same write to ws's own file tool is refused (the change).
		outer, err := wsguard.Open(ws, wsguard.WithHarness(testHarness))
		if err != nil {
			t.Fatal(err)
		}
		config, _ := outer.ReadFile("sub/P/.git/config")
		planted := fmt.Appendf(config, "[core]\n\tfsmonitor = \"%s\"\n", plantCommand(marker))
		errOuter := outer.WriteFile("sub/P/.git/config", planted)
		outer.Close()
		files, err := wsguard.Open(inner, wsguard.WithHarness(testHarness))
		if err != nil {
			t.Fatal(err)
		}
		errWrite := files.WriteFile("P/.git/config", planted)
		var notes []string
		if p, err := files.Protected(); err == nil {
			notes = p.QuarantineNotes()
		}
		files.Close()
		os.WriteFile(filepath.Join(ws, "e", "r-over"), nil, 0o644)
		resW := endW()
		t.Logf("%s: outer write: %v; inner write: %v (notes %q); W %q %q notes %q", sub, errOuter, errWrite, notes, resW.Stdout, resW.Stderr, resW.Notes)
		if !strings.Contains(resW.Stdout, "READDED") {
			t.Fatalf("W did not put sub/P back in the index (the test proves nothing): %q %q", resW.Stdout, resW.Stderr)
		}
		if !errors.Is(errOuter, wsguard.ErrWriteLater) {
			t.Errorf("the workspace's own file tool wrote sub/P/.git/config: %v", errOuter)
		}
		if errWrite == nil {
			t.Errorf("a file tool of the nested workspace wrote P/.git/config, the entry of a submodule W (of the enclosing workspace) trusts")
		} else if k := refusal.KindOf(errWrite); k != refusal.WorkspaceRefused {
			t.Errorf("the write was refused as %v, not WorkspaceRefused: %v", k, errWrite)
		}
		afterGit(t, ws, marker)
	})
}

// TestANestedWorkspaceFindsNoSetWhileRefused: a workspace kept open (a
// WebAssembly tool's, of ws/sub) makes its first change while a run R of
// the enclosing ws is going on, which trusts the user's submodule sub/P
// and has taken it out of ws's index. The change is refused; the set was
// found before the runs were read, and kept: a set with no P, and R's set
// is another workspace's. R put sub/P back and ended (the same inode:
// passed by); the workspace then wrote P/.git/config, the entry of a
// submodule in the index, with core.fsmonitor; a run W of ws took sub/P
// out over the tool's end, put it back and passed it by, and the host's
// git status ran the command. No set is found while a change is refused;
// and W does not start while the workspace is kept open for changes.
func TestANestedWorkspaceFindsNoSetWhileRefused(t *testing.T) {
	needBwrap(t)
	_, ws, head, marker := submoduleScene(t, "sub/P")
	inner := filepath.Join(ws, "sub")
	scriptR := outAndBack("sub/P", head, "e/r-ready", "e/t-first")
	scriptW := outAndBack("sub/P", head, "e/w-ready", "e/t-over")

	endR := background(t, newPolicy(ws), scriptR, filepath.Join(ws, "e", "r-ready"), "R did not take sub/P out of the index")
	files, err := wsguard.Open(inner, wsguard.WithHarness(testHarness))
	if err != nil {
		t.Fatal(err)
	}
	errFirst := files.WriteFile("x.txt", []byte("x")) // refused: R is going on
	config, _ := files.ReadFile("P/.git/config")
	planted := fmt.Appendf(config, "[core]\n\tfsmonitor = \"%s\"\n", plantCommand(marker))
	os.WriteFile(filepath.Join(ws, "e", "t-first"), nil, 0o644)
	resR := endR()
	// R ended, sub/P is in ws's index again, no run is going on.
	errLate := files.WriteFile("P/.git/config", planted)
	// A run W of ws would take sub/P out over the tool's end, put it
	// back and pass it by: it does not start while the nested workspace
	// is kept open for changes (present in the registry of runs).
	resW, errW := runSpec(context.Background(), Spec{Command: []string{"/bin/sh", "-c", scriptW}, Policy: newPolicy(ws), Timeout: 60 * time.Second})
	var notes []string
	if p := files.Found(); p != nil { // as a WebAssembly tool's run does at its end
		notes = p.QuarantineNotes()
	}
	files.Close()
	t.Logf("first %v; late %v; notes %q; R %q; W %v %q", errFirst, errLate, notes, resR.Stdout, errW, resW.Stdout)
	if !strings.Contains(resR.Stdout, "READDED") {
		t.Fatalf("R did not do its part (the test proves nothing)")
	}
	if errW == nil || !strings.Contains(errW.Error(), "file tool's change of the workspace "+inner) {
		t.Errorf("a run of ws started beside the open workspace ws/sub: %v %q", errW, resW.Stdout)
	}
	if errFirst == nil {
		t.Fatalf("the first change was not refused while R was going on (the test proves nothing)")
	}
	if errLate == nil {
		t.Errorf("the kept-open nested workspace wrote P/.git/config (sub/P in ws's index), with a set found while R had taken sub/P out and the change was refused")
	}
	afterGit(t, ws, marker)
}

// TestAToolsQuarantineIsNotSkippedBesideANestedRun: the end of a
// WebAssembly tool, cordon fs and the MCP server's change quarantined
// only when Workspace.Protected() succeeded, which it now does not while
// a run of an enclosing or nested workspace is going on. A tool of ws
// made Q a repository whose core.fsmonitor runs a command and entered Q in
// ws's index (no run going on: each change allowed); a run N of the
// nested ws/sub started before the tool ended; the quarantine was
// skipped, with no note, and the host's git status at ws entered Q and
// ran the command. They quarantine against the set found at the first
// change (Workspace.Found), whatever the runs going on; and N does not
// start now while the workspace is kept open for changes.
func TestAToolsQuarantineIsNotSkippedBesideANestedRun(t *testing.T) {
	needBwrap(t)
	b := base(t)
	ws := workspace(t, b)
	gitRepo(t, ws)
	inner := subdir(t, ws)
	marker := filepath.Join(b, "pwned")

	// What the tool will write: a repository, and ws's index naming it.
	stage := t.TempDir()
	q := filepath.Join(stage, "Q")
	os.Mkdir(q, 0o755)
	gitRepo(t, q)
	hostGit(t, q, "config", "core.fsmonitor", plantCommand(marker))
	qhead := strings.TrimSpace(hostGit(t, q, "rev-parse", "HEAD"))
	idx := filepath.Join(stage, "idx")
	data, err := os.ReadFile(filepath.Join(ws, ".git", "index"))
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(idx, data, 0o644)
	cmd := exec.Command("git", "update-index", "--add", "--cacheinfo", "160000,"+qhead+",Q")
	cmd.Dir, cmd.Env = ws, []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "GIT_INDEX_FILE=" + idx, "GIT_CONFIG_NOSYSTEM=1"}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	newIndex, _ := os.ReadFile(idx)

	files, err := wsguard.Open(ws, wsguard.WithHarness(testHarness))
	if err != nil {
		t.Fatal(err)
	}
	if err := files.WriteFile("x.txt", []byte("x")); err != nil { // the first change: the set is found
		t.Fatal(err)
	}
	err = filepath.WalkDir(q, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(stage, path)
		if d.IsDir() {
			if err := files.Mkdir(rel, 0o755); err != nil && !os.IsExist(err) && !strings.Contains(err.Error(), "exist") {
				return err
			}
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return files.WriteFile(rel, b)
	})
	if err != nil {
		t.Fatalf("the tool's writes of Q: %v", err)
	}
	if err := files.WriteFile(".git/index", newIndex); err != nil {
		t.Fatalf("the tool's write of the index: %v", err)
	}
	// A run of the nested workspace ws/sub does not start before the
	// tool ends: the workspace kept open for changes is present in the
	// registry of runs. (It did, and the quarantine was skipped.)
	resN, errN := runSpec(context.Background(), Spec{Command: []string{"/bin/sh", "-c", "echo NDONE"}, Policy: newPolicy(inner), Timeout: 60 * time.Second})
	var notes []string
	if prot := files.Found(); prot != nil {
		notes = prot.QuarantineNotes()
	}
	files.Close()
	t.Logf("N %v %q; notes %q", errN, resN.Stdout, notes)
	if errN == nil || !strings.Contains(errN.Error(), "file tool's change of the workspace "+ws) {
		t.Errorf("a run of the nested workspace ws/sub started beside the open workspace ws: %v %q", errN, resN.Stdout)
	}
	if len(notes) == 0 {
		t.Errorf("the tool's quarantine gave no note")
	}
	if _, err := os.Lstat(filepath.Join(ws, "Q", ".git")); err == nil {
		t.Errorf("Q/.git, a repository the tool made and entered in the index, is still in git's way")
	}
	afterGit(t, ws, marker)
}

// toolIndex returns ws's index with the gitlink rel (commit sha) added,
// as a file tool would write it over .git/index.
func toolIndex(t *testing.T, ws, rel, sha string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(ws, ".git", "index"))
	if err != nil {
		t.Fatal(err)
	}
	idx := filepath.Join(t.TempDir(), "idx")
	os.WriteFile(idx, data, 0o644)
	cmd := exec.Command("git", "update-index", "--add", "--cacheinfo", "160000,"+sha+","+rel)
	cmd.Dir, cmd.Env = ws, []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "GIT_INDEX_FILE=" + idx, "GIT_CONFIG_NOSYSTEM=1"}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	data, err = os.ReadFile(idx)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// toolRepository makes rel a repository whose core.fsmonitor runs
// plantCommand(marker), through the file tools of files, as a tool would.
func toolRepository(t *testing.T, files *wsguard.Workspace, rel, marker string) {
	t.Helper()
	config := fmt.Sprintf("[core]\n\trepositoryformatversion = 0\n\tfsmonitor = \"%s\"\n", plantCommand(marker))
	for _, d := range []string{"", "/.git", "/.git/objects", "/.git/refs", "/.git/refs/heads"} {
		if err := files.Mkdir(rel+d, 0o755); err != nil {
			t.Fatalf("the tool's mkdir %s: %v", rel+d, err)
		}
	}
	for name, data := range map[string]string{"/.git/HEAD": "ref: refs/heads/main\n", "/.git/config": config} {
		if err := files.WriteFile(rel+name, []byte(data)); err != nil {
			t.Fatalf("the tool's write of %s: %v", rel+name, err)
		}
	}
}

// background runs script in a sandbox of p (opts as run's) and returns
// once the script has made the file ready — its first part done — with a
// function that waits for the run's end and returns its result; should
// the script end first, the test fails with what.
func background(t *testing.T, p bwrap.Policy, script, ready, what string, opts ...func(*Spec)) func() runtime.Result {
	t.Helper()
	var res runtime.Result
	done := make(chan struct{})
	go func() { defer close(done); res = run(t, p, script, opts...) }()
	if !waitFile(ready) {
		<-done
		t.Fatalf("%s: %q %q", what, res.Stdout, res.Stderr)
	}
	return func() runtime.Result { <-done; return res }
}

// toolScene makes a workspace that is a repository, with a directory e
// for the signal files of the runs beside the tool, and opens it as a file
// tool keeps it open (a WebAssembly tool's, a server's); it returns the
// workspace, the marker a planted command makes, and the open workspace.
func toolScene(t *testing.T) (ws, marker string, files *wsguard.Workspace) {
	t.Helper()
	b := base(t)
	ws = workspace(t, b)
	gitRepo(t, ws)
	os.Mkdir(filepath.Join(ws, "e"), 0o755)
	files, err := wsguard.Open(ws, wsguard.WithHarness(testHarness))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { files.Close() })
	return ws, filepath.Join(b, "pwned"), files
}

// toolEnd ends a file tool's use of files as a WebAssembly tool's run
// ends: its quarantine, against the set found at its first change, then
// Close. It returns the quarantine's notes.
func toolEnd(files *wsguard.Workspace) []string {
	var notes []string
	if p := files.Found(); p != nil {
		notes = p.QuarantineNotes()
	}
	files.Close()
	return notes
}

// TestASubmoduleHandedToAFileToolIsQuarantined: the hand-over of
// TestASubmoduleHandedBetweenRunsIsQuarantined, with a workspace kept open
// (a WebAssembly tool's, a server's) in the place of the second run. Run
// A's command makes d/X/.git (core.fsmonitor its own) and enters d/X in
// the index; the tool makes its first change, and finds d/X named there;
// A takes d/X out of the index and ends (its quarantine sees nothing
// new); the tool writes the index with d/X back and ends. Its set took
// d/X for the user's submodule, and its quarantine passed the same entry
// by: the host's git status ran A's command. A tool's set trusts only
// what every run going on when it was found trusted too.
func TestASubmoduleHandedToAFileToolIsQuarantined(t *testing.T) {
	substrates(t, func(t *testing.T, sub string) {
		ws, marker, files := toolScene(t)
		os.Mkdir(filepath.Join(ws, "d"), 0o755)
		scriptA := fmt.Sprintf(`mkdir -p d/X/.git/objects d/X/.git/refs/heads && echo 'ref: refs/heads/main' > d/X/.git/HEAD && printf '[core]\n\trepositoryformatversion = 0\n\tfsmonitor = "%s"\n' > d/X/.git/config && `, plantCommand(marker)) +
			editIndex(`--add --cacheinfo 160000,0123456789012345678901234567890123456789,d/X`) + ` && touch e/a-ready
i=0; while [ ! -e e/t-first ] && [ $i -lt 400 ]; do sleep 0.05; i=$((i+1)); done
` + editIndex(`--force-remove d/X`) + ` && echo REMOVED`
		endA := background(t, newPolicy(ws), scriptA, filepath.Join(ws, "e", "a-ready"), "A did not enter d/X in the index", on(sub))
		if err := files.WriteFile("x.txt", []byte("x")); err != nil { // the first change: the set is found
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(ws, "e", "t-first"), nil, 0o644)
		resA := endA()
		errIndex := files.WriteFile(".git/index", toolIndex(t, ws, "d/X", "0123456789012345678901234567890123456789"))
		notes := toolEnd(files)
		t.Logf("%s: index %v; notes %q; A %q notes %q", sub, errIndex, notes, resA.Stdout, resA.Notes)
		if !strings.Contains(resA.Stdout, "REMOVED") || errIndex != nil {
			t.Fatalf("A and the tool did not do their part (the test proves nothing): %q %q %v", resA.Stdout, resA.Stderr, errIndex)
		}
		if _, err := os.Lstat(filepath.Join(ws, "d", "X", ".git")); err == nil {
			t.Errorf("d/X/.git, which A made, is still in git's way after the tool put d/X back in the index")
		}
		afterGit(t, ws, marker)
	})
}

// TestAToolsQuarantineTrustsNoRunThatStartedAfterItsSet: what a run that
// started after the tool's set was found trusts is no reason to pass an
// entry by. The tool makes Q a repository whose core.fsmonitor runs a
// command and enters Q in the index; run R then starts and trusts Q (in
// the index, no run beside it); the tool changes a file again (R's set
// guards Q now) and ends. Its quarantine moves Q/.git, new to its set.
func TestAToolsQuarantineTrustsNoRunThatStartedAfterItsSet(t *testing.T) {
	needBwrap(t)
	ws, marker, files := toolScene(t)
	if err := files.WriteFile("x.txt", []byte("x")); err != nil { // the first change: the set is found
		t.Fatal(err)
	}
	toolRepository(t, files, "Q", marker)
	if err := files.WriteFile(".git/index", toolIndex(t, ws, "Q", "0123456789012345678901234567890123456789")); err != nil {
		t.Fatalf("the tool's write of the index: %v", err)
	}
	var resR runtime.Result
	rDone := make(chan struct{})
	go func() {
		defer close(rDone)
		resR = run(t, newPolicy(ws), `touch e/r-ready; i=0; while [ ! -e e/t-over ] && [ $i -lt 400 ]; do sleep 0.05; i=$((i+1)); done; echo RDONE`)
	}()
	if !waitFile(filepath.Join(ws, "e", "r-ready")) {
		<-rDone
		t.Fatalf("R did not start: %q %q", resR.Stdout, resR.Stderr)
	}
	errLate := files.WriteFile("y.txt", []byte("y")) // R's set, trusting Q, is seen
	notes := toolEnd(files)
	os.WriteFile(filepath.Join(ws, "e", "t-over"), nil, 0o644)
	<-rDone
	// (R is stopped: Q/.git, bound read-only in it as an entry it trusts,
	// went from outside.)
	t.Logf("late %v; notes %q; R %q notes %q", errLate, notes, resR.Stdout, resR.Notes)
	if _, err := os.Lstat(filepath.Join(ws, "Q", ".git")); err == nil {
		t.Errorf("Q/.git, which the tool made and entered in the index, is still in git's way")
	}
	afterGit(t, ws, marker)
}

// TestASubmoduleHandedByAFileToolToARunIsQuarantined: the hand-over the
// other way. A workspace kept open (a WebAssembly tool's) makes Q a
// repository whose core.fsmonitor runs a command and enters Q in the
// index; run R starts and finds Q named there; the tool takes Q out of
// the index again and ends (its quarantine finds nothing new); R's
// command puts Q back and R ends. R took Q for the user's submodule: no
// run beside it kept a set that did not trust it.
func TestASubmoduleHandedByAFileToolToARunIsQuarantined(t *testing.T) {
	substrates(t, func(t *testing.T, sub string) {
		ws, marker, files := toolScene(t)
		const sha = "0123456789012345678901234567890123456789"
		original, err := files.ReadFile(".git/index")
		if err != nil {
			t.Fatal(err)
		}
		toolRepository(t, files, "Q", marker)
		if err := files.WriteFile(".git/index", toolIndex(t, ws, "Q", sha)); err != nil {
			t.Fatalf("the tool's write of the index: %v", err)
		}
		var resR runtime.Result
		rDone := make(chan struct{})
		go func() {
			defer close(rDone)
			resR = run(t, newPolicy(ws), `touch e/r-ready; i=0; while [ ! -e e/t-over ] && [ $i -lt 400 ]; do sleep 0.05; i=$((i+1)); done
`+editIndex(`--add --cacheinfo 160000,`+sha+`,Q`)+` && echo READDED`, on(sub))
		}()
		if !waitFile(filepath.Join(ws, "e", "r-ready")) {
			<-rDone
			t.Fatalf("R did not start: %q %q", resR.Stdout, resR.Stderr)
		}
		errOut := files.WriteFile(".git/index", original)
		notes := toolEnd(files)
		os.WriteFile(filepath.Join(ws, "e", "t-over"), nil, 0o644)
		<-rDone
		t.Logf("%s: out %v; tool notes %q; R %q %q notes %q", sub, errOut, notes, resR.Stdout, resR.Stderr, resR.Notes)
		switch {
		case errOut != nil:
			t.Fatalf("the tool did not do its part (the test proves nothing)")
		case sub == landlock.Name && !strings.Contains(resR.Stdout, "READDED"):
			// Landlock's rules hold the index's inode as the run began:
			// the index the tool wrote in its place (a new file) is not
			// the run's to write, and the hand-over cannot be completed.
			t.Logf("landlock: the run could not write the index the tool replaced")
		case !strings.Contains(resR.Stdout, "READDED"):
			t.Fatalf("R did not do its part (the test proves nothing)")
		}
		if _, err := os.Lstat(filepath.Join(ws, "Q", ".git")); err == nil && strings.Contains(resR.Stdout, "READDED") {
			t.Errorf("Q/.git, which the tool made, is still in git's way after R put Q back in the index")
		}
		afterGit(t, ws, marker)
	})
}

// TestAFileToolWritesWhereNoStateDirectoryCanBeMade: a file tool whose
// state directory does not exist and cannot be made (a read-only or
// absent home) writes, as before the presences: no run of that state
// directory can start beside it. (Here it lies below a regular file.)
func TestAFileToolWritesWhereNoStateDirectoryCanBeMade(t *testing.T) {
	b := base(t)
	ws := workspace(t, b)
	file := filepath.Join(b, "afile")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	h := testHarness.WithStateDir(filepath.Join(file, "state", "cordon"))
	files, err := wsguard.Open(ws, wsguard.WithHarness(h))
	if err != nil {
		t.Fatal(err)
	}
	defer files.Close()
	if err := files.WriteFile("notes.txt", []byte("hello\n")); err != nil {
		t.Errorf("a file tool's write where no state directory can be made: %v", err)
	}
}

// TestAPresenceGoesWithASetNotFound: the set cannot be found (Protect
// fails: a symlink where a write-later path is). The first change left
// its presence; the second made a new one, which nothing left until the
// workspace was closed: runs of nested and enclosing workspaces were
// refused for as long as the tool lived, though it could make no change.
func TestAPresenceGoesWithASetNotFound(t *testing.T) {
	needBwrap(t)
	b := base(t)
	ws := workspace(t, b)
	inner := subdir(t, ws)
	os.Mkdir(filepath.Join(b, "elsewhere"), 0o755)
	if err := os.Symlink(filepath.Join(b, "elsewhere"), filepath.Join(ws, ".vscode")); err != nil {
		t.Fatal(err)
	}
	files, err := wsguard.Open(ws, wsguard.WithHarness(testHarness))
	if err != nil {
		t.Fatal(err)
	}
	defer files.Close()
	err1 := files.WriteFile("a.txt", []byte("a"))
	err2 := files.WriteFile("b.txt", []byte("b"))
	if err1 == nil || err2 == nil {
		t.Fatalf("the set was found (the test proves nothing): %v / %v", err1, err2)
	}
	res, errN := runSpec(context.Background(), Spec{Command: []string{"/bin/sh", "-c", "echo NDONE"}, Policy: newPolicy(inner), Timeout: 60 * time.Second})
	t.Logf("changes: %v / %v; nested run: %v %q", err1, err2, errN, res.Stdout)
	if errN != nil && strings.Contains(errN.Error(), "file tool's change") {
		t.Errorf("a run of the nested workspace is refused beside a workspace that can make no change: %v", errN)
	}
}

// TestAToolBesideItsOwnPoolLeavesTheUsersNewSubmodule: the MCP server
// keeps a pool of bash sandboxes made ahead (idle: its runs leave them
// out of TrustOnly). The user adds a submodule U on the host; the model
// then writes notes.txt through the server's file tool. Guard.Kept did
// not leave the idle sandbox out: the tool's set distrusted U, and its
// quarantine moved the user's U/.git aside.
func TestAToolBesideItsOwnPoolLeavesTheUsersNewSubmodule(t *testing.T) {
	needBwrap(t)
	b := base(t)
	ws := workspace(t, b)
	gitRepo(t, ws)
	p, err := prepare(context.Background(), Spec{Command: []string{"/bin/sh", "-c", "true"}, Policy: newPolicy(ws), Timeout: 60 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	rt := runtime.New(runtime.Config{Pool: 1})
	defer rt.Close()
	if err := rt.Warm(p); err != nil {
		t.Fatal(err)
	}
	for i := 0; rt.PoolStats().Ready < 1; i++ {
		if i > 200 {
			t.Fatalf("the pool holds %+v", rt.PoolStats())
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The user adds a submodule on the host.
	userSubmodule(t, ws, "U")
	// The server's file tool writes an unrelated file (change: Renew,
	// the write, the quarantine, Renew).
	files, err := wsguard.Open(ws, wsguard.WithHarness(testHarness))
	if err != nil {
		t.Fatal(err)
	}
	defer files.Close()
	files.Renew()
	if err := files.WriteFile("notes.txt", []byte("hello\n")); err != nil {
		t.Fatal(err)
	}
	var notes []string
	if prot := files.Found(); prot != nil {
		notes = prot.QuarantineNotes()
	}
	files.Renew()
	t.Logf("notes %q; pool %+v", notes, rt.PoolStats())
	if _, err := os.Lstat(filepath.Join(ws, "U", ".git")); err != nil {
		t.Errorf("the user's U/.git was moved by a file tool's unrelated write: %v", err)
	}
}
