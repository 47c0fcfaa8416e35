package main

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/cordon-run/cordon/internal/testenv"
	"github.com/cordon-run/cordon/internal/wasmtest"
	"github.com/cordon-run/cordon/substrate/oci"
)

// mcpSession starts `cordon mcp` in ws as a real process and connects
// the SDK's client to it over its stdin and stdout.
func mcpSession(t *testing.T, ws string, changed chan<- struct{}, args ...string) *mcp.ClientSession {
	t.Helper()
	cmd := cordonProcess(t, []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}, append([]string{"-w", ws, "mcp"}, args...)...)
	cmd.Stderr = os.Stderr
	opts := &mcp.ClientOptions{}
	if changed != nil {
		opts.ToolListChangedHandler = func(context.Context, *mcp.ToolListChangedRequest) {
			select {
			case changed <- struct{}{}:
			default:
			}
		}
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "cordon-test", Version: "1"}, opts)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// call calls a tool and returns its result's text and whether it is an
// error; a protocol error fails the test.
func call(t *testing.T, s *mcp.ClientSession, name string, args any) (string, bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: a protocol error: %v", name, err)
	}
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String(), res.IsError
}

func errorKind(t *testing.T, text string) string {
	t.Helper()
	var e struct{ Error string }
	json.Unmarshal([]byte(text), &e)
	return e.Error
}

func TestMCPServer(t *testing.T) {
	needBwrap(t)
	ws := tempWorkspace(t)
	os.WriteFile(filepath.Join(ws, "a.txt"), []byte("hello\nTODO one\nTODO two\n"), 0o644)
	outside := filepath.Join(t.TempDir(), "outside.txt")
	os.WriteFile(outside, []byte("host\n"), 0o644)
	changed := make(chan struct{}, 4)
	s := mcpSession(t, ws, changed)

	tools, err := s.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range tools.Tools {
		names = append(names, tl.Name)
		if tl.Name == "bash" && !strings.Contains(tl.Description, "no argument changes them") {
			t.Errorf("bash's description does not carry the rule: %s", tl.Description)
		}
	}
	for _, want := range []string{"read_file", "write_file", "edit_file", "list_dir", "bash", "register_tool"} {
		if !slices.Contains(names, want) {
			t.Errorf("tools/list lacks %s: %v", want, names)
		}
	}

	if got, isErr := call(t, s, "read_file", map[string]any{"path": "a.txt"}); isErr || !strings.HasPrefix(got, "hello") {
		t.Errorf("read_file: %q %v", got, isErr)
	}
	for _, p := range []string{"../" + filepath.Base(filepath.Dir(outside)) + "/outside.txt", outside, ".efferent/x"} {
		got, isErr := call(t, s, "read_file", map[string]any{"path": p})
		if !isErr || (errorKind(t, got) != "OutsideWorkspace" && errorKind(t, got) != "HarnessState") {
			t.Errorf("read_file %s: %q %v; want a refusal as a tool result", p, got, isErr)
		}
	}
	if _, isErr := call(t, s, "write_file", map[string]any{"path": "notes/b.txt", "content": "new\n"}); isErr {
		t.Error("write_file failed")
	}
	if _, isErr := call(t, s, "edit_file", map[string]any{"path": "notes/b.txt", "old": "new", "new": "edited"}); isErr {
		t.Error("edit_file failed")
	}
	if data, _ := os.ReadFile(filepath.Join(ws, "notes/b.txt")); string(data) != "edited\n" {
		t.Errorf("notes/b.txt = %q", data)
	}
	if got, isErr := call(t, s, "write_file", map[string]any{"path": ".git/hooks/pre-commit", "content": "evil"}); !isErr || errorKind(t, got) == "" {
		t.Errorf("write_file of a hook: %q %v", got, isErr)
	}
	if got, isErr := call(t, s, "list_dir", map[string]any{}); isErr || !strings.Contains(got, "a.txt") {
		t.Errorf("list_dir: %q %v", got, isErr)
	}

	// bash: sandboxed, and no argument can make it otherwise.
	got, isErr := call(t, s, "bash", map[string]any{"command": "echo hi > out.txt && cat out.txt"})
	if isErr || !strings.Contains(got, `"stdout":"hi\n"`) || !strings.Contains(got, `"sandboxed":true`) {
		t.Errorf("bash: %q %v", got, isErr)
	}
	got, isErr = call(t, s, "bash", map[string]any{"command": "echo pwned > " + outside})
	if !isErr || !strings.Contains(got, `"sandboxed":true`) {
		t.Errorf("bash writing outside: %q %v", got, isErr)
	}
	if data, _ := os.ReadFile(outside); string(data) != "host\n" {
		t.Fatal("bash wrote a host file")
	}
	for _, widen := range []map[string]any{
		{"command": "true", "no_sandbox": true},
		{"command": "true", "net": "host"},
		{"command": "true", "substrate": "host"},
	} {
		if got, isErr := call(t, s, "bash", widen); !isErr || errorKind(t, got) != "Invalid" {
			t.Errorf("bash %v: %q %v; want the argument refused", widen, got, isErr)
		}
	}
	if got, isErr := call(t, s, "bash", map[string]any{"command": "sleep 30", "timeout_seconds": 0.5}); !isErr || !strings.Contains(got, `"timed_out":true`) {
		t.Errorf("bash past its timeout: %q %v", got, isErr)
	}
	// An unknown tool is the protocol's error (invalid params); the
	// server goes on.
	if res, err := s.CallTool(context.Background(), &mcp.CallToolParams{Name: "no_such_tool"}); err == nil && !res.IsError {
		t.Errorf("unknown tool: %+v", res)
	}

	// Concurrent calls.
	var wg sync.WaitGroup
	errs := make(chan string, 8)
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := s.CallTool(context.Background(), &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{"command": "echo " + string(rune('a'+i))}})
			if err != nil || res.IsError {
				errs <- "a concurrent call failed"
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}

	// bash's calls take the sandboxes the server made ahead (its pool
	// refills after each call, off the call's path).
	pooled := false
	for i := 0; i < 100 && !pooled; i++ {
		got, isErr := call(t, s, "bash", map[string]any{"command": "echo in-pool"})
		if isErr || !strings.Contains(got, `"stdout":"in-pool\n"`) || !strings.Contains(got, `"sandboxed":true`) {
			t.Fatalf("bash: %q %v", got, isErr)
		}
		pooled = strings.Contains(got, `"pooled":true`)
		time.Sleep(20 * time.Millisecond)
	}
	if !pooled {
		t.Error("no bash call ran in a pooled sandbox")
	}

	// register_tool: a wasm tool the model wrote, then called.
	decl := json.RawMessage(wasmtest.Declaration(t, "examples/count-lines"))
	module := wasmtest.Go(t, "examples/count-lines")
	got, isErr = call(t, s, "register_tool", map[string]any{"declaration": decl, "files": map[string]string{"tool.wasm": base64.StdEncoding.EncodeToString(module)}})
	if isErr || !strings.Contains(got, `"tool":"count-lines"`) {
		t.Fatalf("register_tool: %q %v", got, isErr)
	}
	select {
	case <-changed:
	case <-time.After(10 * time.Second):
		t.Error("no notifications/tools/list_changed after register_tool")
	}
	tools, _ = s.ListTools(context.Background(), nil)
	if !slices.ContainsFunc(tools.Tools, func(tl *mcp.Tool) bool { return tl.Name == "count-lines" }) {
		t.Fatal("the registered tool is not listed")
	}
	if got, isErr := call(t, s, "count-lines", map[string]any{"pattern": "TODO"}); isErr || !strings.Contains(got, "2") {
		t.Errorf("count-lines: %q %v", got, isErr)
	}
	if got, isErr := call(t, s, "count-lines", map[string]any{"pattern": 3}); !isErr || errorKind(t, got) != "InputRefused" {
		t.Errorf("count-lines with bad input: %q %v", got, isErr)
	}
	// A refused declaration comes back with its reasons.
	got, isErr = call(t, s, "register_tool", map[string]any{"declaration": map[string]any{"name": "fetch", "kind": "wasm", "module": "m.wasm", "capabilities": []string{"net.connect:host:example.com"}}, "files": map[string]string{"m.wasm": base64.StdEncoding.EncodeToString(module)}})
	if !isErr || !strings.Contains(got, `"reasons"`) {
		t.Errorf("a refused registration: %q %v", got, isErr)
	}
	if got, isErr := call(t, s, "register_tool", map[string]any{"declaration": map[string]any{"name": "bash", "kind": "wasm", "module": "m.wasm", "capabilities": []string{}}}); !isErr || !strings.Contains(got, "may not be named") {
		t.Errorf("a tool named bash: %q %v", got, isErr)
	}
	// A schema MCP cannot carry is refused, and the server goes on.
	got, isErr = call(t, s, "register_tool", map[string]any{"declaration": map[string]any{"name": "sch", "kind": "native", "command": []string{"sh", "-c", "true"}, "capabilities": []string{"time:5s"}, "input_schema": map[string]any{"type": "string"}}})
	if !isErr || errorKind(t, got) != "InvalidDeclaration" {
		t.Errorf("a tool whose input is not an object: %q %v", got, isErr)
	}
	// Nor more time or output than the server's ceilings.
	got, isErr = call(t, s, "register_tool", map[string]any{"declaration": map[string]any{"name": "long", "kind": "native", "command": []string{"sh", "-c", "true"}, "capabilities": []string{"time:24h"}}})
	if !isErr || errorKind(t, got) != "CapabilityRefused" || !strings.Contains(got, "longest run") {
		t.Errorf("a tool asking for a day: %q %v", got, isErr)
	}
	// A tool a person admitted is not replaced from the conversation.
	os.WriteFile(filepath.Join(ws, "fmt.yaml"), []byte("name: fmt\ndescription: a person's\nkind: native\ncommand: [sh, -c, \"echo person\"]\ncapabilities: [time:5s]\n"), 0o644)
	if code, stdout, stderr := cordonMain(t, "", "-w", ws, "admit", filepath.Join(ws, "fmt.yaml")); code != 0 {
		t.Fatalf("admit fmt: %d %s %s", code, stdout, stderr)
	}
	s2 := mcpSession(t, ws, nil)
	got, isErr = call(t, s2, "register_tool", map[string]any{"declaration": map[string]any{"name": "fmt", "kind": "native", "command": []string{"sh", "-c", "echo model"}, "capabilities": []string{"time:5s"}}})
	if !isErr || errorKind(t, got) != "Exists" {
		t.Errorf("replacing a person's tool: %q %v", got, isErr)
	}
	// A batch is answered and dropped, not the end of the session.
	if got, isErr := call(t, s2, "read_file", map[string]any{"path": "a.txt"}); isErr || !strings.HasPrefix(got, "hello") {
		t.Errorf("the second session: %q %v", got, isErr)
	}

	// Under the server's limits, a native tool must declare them too.
	s3 := mcpSession(t, ws, nil, "--memory", "256MiB", "--pids", "16")
	got, isErr = call(t, s3, "register_tool", map[string]any{"declaration": map[string]any{"name": "forky", "kind": "native", "command": []string{"sh", "-c", "true"}, "capabilities": []string{"time:5s"}}})
	if !isErr || errorKind(t, got) != "CapabilityRefused" || !strings.Contains(got, "runs everything under") {
		t.Errorf("a tool without the server's limits: %q %v", got, isErr)
	}
	got, isErr = call(t, s3, "register_tool", map[string]any{"declaration": map[string]any{"name": "forky", "kind": "native", "command": []string{"sh", "-c", "true"}, "capabilities": []string{"time:5s", "memory:128MiB", "pids:8"}}})
	if isErr {
		t.Errorf("a tool within the server's limits: %q", got)
	}

	// A tool cannot widen the server's start: no network under --net none.
	got, isErr = call(t, s, "register_tool", map[string]any{"declaration": map[string]any{"name": "online", "kind": "native", "command": []string{"sh", "-c", "true"}, "capabilities": []string{"net:host", "time:5s"}}})
	if !isErr || errorKind(t, got) != "CapabilityRefused" || !strings.Contains(got, "--net none") {
		t.Errorf("a tool asking for the network: %q %v", got, isErr)
	}
	got, isErr = call(t, s, "register_tool", map[string]any{"declaration": map[string]any{"name": "snoop", "kind": "native", "command": []string{"sh", "-c", "echo $SECRET_TOKEN"}, "capabilities": []string{"env:SECRET_TOKEN", "time:5s"}}})
	if !isErr || errorKind(t, got) != "CapabilityRefused" || !strings.Contains(got, "--env SECRET_TOKEN") {
		t.Errorf("a tool asking for the server's environment: %q %v", got, isErr)
	}
}

// TestMCPServerSurvivesBadInput: malformed JSON and a client that leaves
// mid-call; the call's processes die with it.
func TestMCPServerSurvivesBadInput(t *testing.T) {
	needBwrap(t)
	ws := tempWorkspace(t)
	marker := filepath.Join(ws, "still-running")
	// A client that sends a call and goes (closes the server's stdin).
	cmd := cordonProcess(t, []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}, "-w", ws, "mcp")
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	io.WriteString(stdin, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`+"\n")
	line, _ := bufio.NewReader(stdout).ReadString('\n')
	if !strings.Contains(line, `"serverInfo"`) {
		t.Fatalf("initialize: %q", line)
	}
	io.WriteString(stdin, `{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n")
	// The command writes its marker 5s after it starts, unless it dies with
	// its client; the marker is looked for 6s after the call was sent, so
	// a server slow to start the call or to end on a loaded host does not
	// let the command write it before it is killed.
	called := time.Now()
	io.WriteString(stdin, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"bash","arguments":{"command":"sleep 5; echo alive > `+marker+`","timeout_seconds":30}}}`+"\n")
	// The call's, and the pool's waiting sandboxes (on a loaded host, under
	// the race detector, they can take more than half a second to come).
	time.Sleep(500 * time.Millisecond)
	for deadline := time.Now().Add(10 * time.Second); len(processesIn(ws)) == 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no process of the server's sandboxes runs in the workspace after 10s")
		}
	}
	start := time.Now()
	stdin.Close()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		cmd.Process.Kill()
		t.Fatal("the server outlived its client by 10s")
	}
	// A server that let the call run on would take the rest of its 5s:
	// 3s tells the two apart (1.7s was seen under CI's load, the sandbox
	// killed, its pool's and cgroups put away, against 1.5s allowed before).
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("the server took %v to end after its client went", d)
	}
	time.Sleep(time.Until(called.Add(6 * time.Second)))
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the call's command outlived its client")
	}
	if left := processesIn(ws); len(left) > 0 {
		t.Fatalf("processes of the server's sandboxes (its pool's) outlived it: %v", left)
	}

	// Raw malformed lines, a message too long, a request before
	// initialize, then a valid request: the server answers each and goes on.
	cmd = cordonProcess(t, []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}, "-w", ws, "mcp")
	stdin, _ = cmd.StdinPipe()
	stdout, _ = cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	go func() {
		io.WriteString(stdin, "{not json\n")
		io.WriteString(stdin, `{"a":1}`+"\n")
		io.WriteString(stdin, strings.Repeat("x", 40<<20)+"\n")
		io.WriteString(stdin, `[{"jsonrpc":"2.0","id":9,"method":"ping"}]`+"\n")
		io.WriteString(stdin, `{"jsonrpc":"2.0","id":7,"method":"nope"}`+"\n")
		io.WriteString(stdin, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`+"\n")
	}()
	br := bufio.NewReader(stdout)
	var got []string
	for len(got) < 6 {
		line, err := br.ReadString('\n')
		if err != nil {
			break
		}
		got = append(got, line)
	}
	stdin.Close()
	all := strings.Join(got, "")
	if strings.Count(all, `"code":-32700`) != 2 || !strings.Contains(all, "longer than") || !strings.Contains(all, "batches") || !strings.Contains(all, `"id":7`) || !strings.Contains(all, `"serverInfo"`) {
		t.Errorf("answers to bad input, then initialize: %.600s", all)
	}
}

// processesIn lists the processes whose working directory is dir: a
// sandbox's, whose command runs in its workspace.
func processesIn(dir string) []string {
	var out []string
	cwds, _ := filepath.Glob("/proc/[0-9]*/cwd")
	for _, c := range cwds {
		if d, err := os.Readlink(c); err == nil && d == dir {
			cmdline, _ := os.ReadFile(filepath.Join(filepath.Dir(c), "cmdline"))
			out = append(out, filepath.Dir(c)+" "+strings.ReplaceAll(string(cmdline), "\x00", " "))
		}
	}
	return out
}

// bwrapNames returns the program names of the bwrap processes that are
// children of process pid: each names its run (bwrap-run-ID), as the
// sandbox's init, a fork of bwrap, does too.
func bwrapNames(pid int) []string {
	var names []string
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, st := range stats {
		data, _ := os.ReadFile(st)
		i := strings.LastIndexByte(string(data), ')')
		if i < 0 || !strings.HasSuffix(string(data[:i]), "(bwrap") {
			continue
		}
		if f := strings.Fields(string(data[i+1:])); len(f) > 1 && f[1] == strconv.Itoa(pid) {
			cmdline, _ := os.ReadFile(filepath.Join(filepath.Dir(st), "cmdline"))
			name, _, _ := strings.Cut(string(cmdline), "\x00")
			names = append(names, name)
		}
	}
	return names
}

// sandboxesOf lists what is left of sandboxes: the processes whose
// working directory is the workspace ws, and the bwrap processes whose
// program name is one of names (a sandbox's init, set up past its root's
// change, works in the sandbox's root).
func sandboxesOf(names []string, ws string) []string {
	left := processesIn(ws)
	cmdlines, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, c := range cmdlines {
		cmdline, _ := os.ReadFile(c)
		name, _, _ := strings.Cut(string(cmdline), "\x00")
		if slices.Contains(names, name) {
			p := filepath.Dir(c) + " " + strings.ReplaceAll(string(cmdline), "\x00", " ")
			if !slices.Contains(left, p) {
				left = append(left, p)
			}
		}
	}
	return left
}

// TestMCPServerKilledLeavesNoSandbox: a server killed outright (SIGKILL,
// no Close) leaves none of the sandboxes its pool made ahead running:
// bwrap dies with the thread that forked it, and what a sandbox being set
// up then leaves the next cordon process ends.
func TestMCPServerKilledLeavesNoSandbox(t *testing.T) {
	needBwrap(t)
	ws := tempWorkspace(t)
	cmd := cordonProcess(t, []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}, "-w", ws, "mcp", "--pool", "2")
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	io.WriteString(stdin, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`+"\n")
	if line, _ := bufio.NewReader(stdout).ReadString('\n'); !strings.Contains(line, `"serverInfo"`) {
		t.Fatalf("initialize: %q", line)
	}
	io.WriteString(stdin, `{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n")
	// The pool warms at the server's start: two sandboxes. The server is
	// killed as soon as it has started both bwraps, while they set up.
	for i := 0; len(bwrapNames(cmd.Process.Pid)) < 2; i++ {
		if i > 500 {
			t.Fatalf("the server's pool made no sandbox: %v", processesIn(ws))
		}
		time.Sleep(10 * time.Millisecond)
	}
	names := bwrapNames(cmd.Process.Pid)
	cmd.Process.Kill()
	cmd.Wait()
	for end := time.Now().Add(2 * time.Second); len(sandboxesOf(names, ws)) > 0 && time.Now().Before(end); {
		time.Sleep(10 * time.Millisecond)
	}
	left := sandboxesOf(names, ws)
	if len(left) == 0 {
		return
	}
	// A sandbox bwrap was still setting up when the server died can
	// outlive it: bwrap's child, reparented to init, waits for ever for
	// a release that never comes, or (released already) binds its life
	// to bwrap only after bwrap died. The next run finds the killed
	// server's records and ends what is named after them.
	t.Logf("left by the killed server: %v; the next cordon process ends them", left)
	next := cordonProcess(t, []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}, "-w", tempWorkspace(t), "exec", "--", "sleep", "0.5")
	began := time.Now()
	if out, err := next.CombinedOutput(); err != nil {
		t.Fatalf("the next cordon process: %v %s", err, out)
	}
	defer func() { t.Logf("ended %v after the next cordon process began", time.Since(began)) }()
	for end := time.Now().Add(3 * time.Second); len(sandboxesOf(names, ws)) > 0; {
		if time.Now().After(end) {
			t.Fatalf("sandboxes outlived their killed server, and the next cordon process: %v", sandboxesOf(names, ws))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestMCPServerOnOCI: with --substrate oci, bash runs in a runc container
// of the same sandbox: its write in the workspace lands, its write of
// .git/config does not, and the result says the substrate.
func TestMCPServerOnOCI(t *testing.T) {
	_, err := oci.Detect(context.Background(), os.Getenv("PATH"), "", testenv.Harness(t))
	testenv.Require(t, err == nil, "an OCI runtime (runc): %v", err)
	ws := tempWorkspace(t)
	os.Mkdir(filepath.Join(ws, ".git"), 0o755)
	os.WriteFile(filepath.Join(ws, ".git", "config"), []byte("[core]\n"), 0o644)
	s := mcpSession(t, ws, nil, "--substrate", "oci")
	got, isErr := call(t, s, "bash", map[string]any{"command": "echo hi > out.txt && cat out.txt; (echo x >> .git/config) 2>/dev/null || echo config-ro"})
	if isErr || !strings.Contains(got, `hi\nconfig-ro`) || !strings.Contains(got, `"substrate":"oci"`) {
		t.Fatalf("bash on oci: %s", got)
	}
	if data, _ := os.ReadFile(filepath.Join(ws, ".git", "config")); string(data) != "[core]\n" {
		t.Errorf(".git/config is %q", data)
	}
}

// TestMCPServerAllowHost: a server started with --allow-host gives bash
// that host alone through the egress proxy — another name is refused, a
// direct connection fails, the result carries the proxy's log — and a
// registered tool may be granted that host, never another.
func TestMCPServerAllowHost(t *testing.T) {
	needBwrap(t)
	curl, err := exec.LookPath("curl")
	testenv.Require(t, err == nil, "curl: %v", err)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "hello") }))
	defer srv.Close()
	u, _ := url.Parse(srv.URL)
	ws := tempWorkspace(t)
	s := mcpSession(t, ws, nil, "--allow-host", u.Host)
	if init := s.InitializeResult(); init == nil || !strings.Contains(init.Instructions, u.Host+" through cordon's egress proxy") {
		t.Errorf("the instructions do not say which hosts bash reaches: %+v", init)
	}
	script := fmt.Sprintf(`%[1]s -sS -m 5 %[2]s/; echo
%[1]s -sS -m 5 -o /dev/null -w '%%{http_code}\n' http://other.example.test/
%[1]s -sS -m 2 --noproxy '*' %[2]s/ >/dev/null 2>&1 || echo direct-failed`, curl, srv.URL)
	got, isErr := call(t, s, "bash", map[string]any{"command": script})
	var res struct {
		Stdout string
		Egress []struct {
			Name    string
			Allowed bool
		}
	}
	if isErr || json.Unmarshal([]byte(got), &res) != nil || res.Stdout != "hello\n403\ndirect-failed\n" ||
		len(res.Egress) != 2 || !res.Egress[0].Allowed || res.Egress[1].Allowed || res.Egress[1].Name != "other.example.test" {
		t.Fatalf("bash with an allowed host: %v %s", isErr, got)
	}
	for host, ok := range map[string]bool{u.Host: true, "other.example.test": false} {
		got, isErr := call(t, s, "register_tool", map[string]any{"declaration": map[string]any{"name": "fetch", "kind": "native",
			"command": []string{curl, "-sS", "-m", "5", srv.URL + "/"}, "capabilities": []string{"net.connect:host:" + host}}})
		if isErr == ok || !ok && !strings.Contains(got, "--allow-host hosts alone") {
			t.Errorf("register a tool granted %s: %v %s", host, isErr, got)
		}
	}
	if got, isErr := call(t, s, "fetch", map[string]any{}); isErr || !strings.Contains(got, `"stdout":"hello"`) {
		t.Errorf("the tool granted the server's host: %v %s", isErr, got)
	}
	if code, _, stderr := cordonMain(t, "", "-w", ws, "mcp", "--allow-host", u.Host, "--substrate", "landlock"); code != exitUsage {
		t.Errorf("--allow-host on landlock: exit %d (%s), want usage", code, stderr)
	}
}

// TestMCPFileToolsProtectTheIndexAsItIsNow: the server's file tools found
// the workspace's protected set at their first change and kept it for the
// server's life. A bash call then entered a submodule P in the index (its
// entry absent: nothing for the run's quarantine to move), and write_file
// made P/.git — a git directory whose core.fsmonitor the host's git
// status at the root ran. Each write and edit now finds the set as the
// index is then, and quarantines what it left, as `cordon fs` does.
func TestMCPFileToolsProtectTheIndexAsItIsNow(t *testing.T) {
	needBwrap(t)
	ws := tempWorkspace(t)
	git := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir = ws
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + ws, "GIT_CONFIG_NOSYSTEM=1"}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v %s", args, err, out)
		}
		return string(out)
	}
	git("init", "-q", ".")
	git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "init")
	marker := filepath.Join(t.TempDir(), "pwned")
	s := mcpSession(t, ws, nil)
	if _, isErr := call(t, s, "write_file", map[string]any{"path": "first.txt", "content": "x\n"}); isErr {
		t.Fatal("write_file failed")
	}
	got, isErr := call(t, s, "bash", map[string]any{"command": "git update-index --add --cacheinfo 160000,0123456789abcdef0123456789abcdef01234567,P && echo ADDED"})
	if isErr || !strings.Contains(got, "ADDED") {
		t.Fatalf("bash did not enter P in the index: %q", got)
	}
	wrote := 0
	for path, content := range map[string]string{
		"P/.git/HEAD":            "ref: refs/heads/main\n",
		"P/.git/objects/keep":    "",
		"P/.git/refs/heads/keep": "",
		"P/.git/config":          "[core]\n\trepositoryformatversion = 0\n\tfsmonitor = \"touch " + marker + "; false\"\n",
	} {
		if got, isErr := call(t, s, "write_file", map[string]any{"path": path, "content": content}); !isErr {
			wrote++
		} else {
			t.Logf("write_file %s: %s", path, got)
		}
	}
	if wrote > 0 {
		t.Errorf("write_file made %d files in P/.git, the entry of a submodule the index names", wrote)
	}
	cmd := exec.Command("git", "status", "--short")
	cmd.Dir = ws
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "GIT_CONFIG_NOSYSTEM=1"}
	cmd.CombinedOutput()
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the host's git status ran a command a file tool planted")
	}
}
