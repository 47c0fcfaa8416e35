// Package mcpserver serves cordon over the Model Context Protocol: the
// workspace's file tools, a sandboxed shell, register_tool, and every
// admitted tool as a tool of its own, each call through the one run path
// (admission, then runtime.Run) — the tool layer of any agent.
//
// What the model cannot choose: the sandbox, the substrate, the network
// policy, harness state and the protected paths, and the autonomy level
// are settings of the server's start ([Config]), fixed for its life. No
// tool argument names any of them; bash's timeout and output bound are
// the only knobs, capped by the configuration.
//
// Refusals stay inside the turn: a refused path or capability, a timeout,
// a command's failure are tool results with isError and the structured
// refusal ({"error","message","op","path"}), never protocol errors.
package mcpserver

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/cordon-run/cordon/admission"
	"github.com/cordon-run/cordon/capabilities"
	"github.com/cordon-run/cordon/refusal"
	"github.com/cordon-run/cordon/runtime"
	"github.com/cordon-run/cordon/substrate/workspace"
)

// Config is the server's start: everything a model cannot change.
type Config struct {
	// Admitter admits and prepares in the workspace; Registry holds its
	// tools; Runtime runs what is prepared; Files is the workspace for
	// the file tools.
	Admitter *admission.Admitter
	Registry *admission.Registry
	Runtime  *runtime.Runtime
	Files    *workspace.Workspace
	// Substrate runs bash: "bwrap", "landlock", or "host" (no sandbox,
	// when the person who started the server said so).
	Substrate string
	// HostNet gives bash the host's network (--net host).
	HostNet bool
	// Hosts, without HostNet, are the net.connect: capabilities bash
	// gets (cordon mcp --allow-host): the named hosts through the egress
	// proxy, and no other network. A tool may be granted these and no
	// other.
	Hosts []capabilities.Capability
	// Timeout and MaxTimeout are bash's default and ceiling; MaxOutput
	// and MaxMaxOutput its output bound's.
	Timeout, MaxTimeout     time.Duration
	MaxOutput, MaxMaxOutput int64
	// Extra capabilities every bash call gets (limits: memory:, pids:).
	Extra []capabilities.Capability
	// MaxToolMemory bounds the memory a tool may be granted (default
	// 1 GiB; a wasm tool runs in the server's own process, and gets at
	// most half of it); MaxToolPids its processes, when the server has
	// a process limit of its own (Extra).
	MaxToolMemory int64
	// Concurrency bounds the runs going on at once (default 8); more
	// calls wait their turn.
	Concurrency int
	// Env names the variables of the server's environment a tool may be
	// granted (env:NAME); a grant of any other is refused, so that a
	// model cannot register a tool that reads the server's secrets.
	Env []string
	// Decide, when set, is asked before every run (bash and every tool):
	// an error refuses the call (the autonomy preconditions of an
	// unattended server, re-checked per call).
	Decide func(ctx context.Context, op string, p *admission.Prepared) error
	// Pool: the Runtime keeps sandboxes made ahead of bash's calls
	// (runtime.Config.Pool); the server has it make them at its start.
	Pool bool
	// Autonomy names the level, for descriptions.
	Autonomy string
	// Version is the server's version.
	Version string
}

// Server is one cordon MCP server.
type Server struct {
	cfg   Config
	srv   *mcp.Server
	mu    sync.Mutex
	tools map[string]bool // admitted tools served
	mine  map[string]bool // tools registered through this server
	slots chan struct{}   // one per run going on
	// files is held by each change through the file tools ([Server.change]).
	files sync.Mutex
	// gone is canceled when the client goes: every call in flight ends,
	// its processes killed.
	gone   context.Context
	goneFn context.CancelFunc
}

// builtin are the server's own tools; no admitted tool takes their names.
var builtin = []string{"read_file", "write_file", "edit_file", "list_dir", "bash", "register_tool"}

// New makes the server and its tools, the admitted ones included.
func New(cfg Config) (*Server, error) {
	if cfg.Admitter == nil || cfg.Registry == nil || cfg.Runtime == nil || cfg.Files == nil {
		return nil, errors.New("mcpserver: Admitter, Registry, Runtime and Files are required")
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 2 * time.Minute
	}
	if cfg.MaxTimeout < cfg.Timeout {
		cfg.MaxTimeout = max(cfg.Timeout, 10*time.Minute)
	}
	if cfg.MaxOutput <= 0 {
		cfg.MaxOutput = 256 << 10
	}
	if cfg.MaxMaxOutput < cfg.MaxOutput {
		cfg.MaxMaxOutput = max(cfg.MaxOutput, 4<<20)
	}
	if cfg.MaxToolMemory <= 0 {
		cfg.MaxToolMemory = 1 << 30
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = 8
	}
	s := &Server{cfg: cfg, tools: map[string]bool{}, mine: map[string]bool{}, slots: make(chan struct{}, cfg.Concurrency)}
	s.gone, s.goneFn = context.WithCancel(context.Background())
	s.srv = mcp.NewServer(&mcp.Implementation{Name: "cordon", Version: cfg.Version}, &mcp.ServerOptions{
		Instructions: s.instructions(),
		Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{ListChanged: true}},
	})
	s.addBuiltins()
	if err := s.syncTools(); err != nil {
		return nil, err
	}
	return s, nil
}

// Run serves one session over t until the client goes (or ctx ends);
// then every call still in flight is canceled.
func (s *Server) Run(ctx context.Context, t mcp.Transport) error {
	defer s.goneFn()
	if s.cfg.Pool {
		go s.warm(ctx)
	}
	stop := context.AfterFunc(ctx, s.goneFn)
	defer stop()
	return s.srv.Run(ctx, t)
}

// Serve serves one session on in and out (a client's pipes: the stdio
// transport is Serve(ctx, os.Stdin, os.Stdout)). The end of in is the
// client gone: the calls in flight are canceled at once, their process
// trees killed, before the session winds down.
//
// A line that is not a JSON-RPC message, or is longer than [MaxMessage],
// is answered with a JSON-RPC error and dropped: a malformed message costs
// a reply, not the session.
func (s *Server) Serve(ctx context.Context, in io.ReadCloser, out io.WriteCloser) error {
	w := &lockedWriter{w: out}
	g := &lineGuard{in: in, br: bufio.NewReaderSize(in, 64<<10), out: w, cancel: s.goneFn}
	return s.Run(ctx, &mcp.IOTransport{Reader: g, Writer: w, MaxLineLength: -1})
}

// MaxMessage bounds one message from the client.
const MaxMessage = 32 << 20

// lockedWriter serializes whole writes: the SDK writes each message in
// one, and lineGuard its errors.
type lockedWriter struct {
	mu sync.Mutex
	w  io.WriteCloser
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func (l *lockedWriter) Close() error { return l.w.Close() }

// lineGuard passes on the client's lines that are JSON-RPC messages and
// answers the others; its end is the client gone (cancel).
type lineGuard struct {
	in      io.ReadCloser
	br      *bufio.Reader
	out     *lockedWriter
	cancel  context.CancelFunc
	pending []byte
	err     error
}

func (g *lineGuard) Read(p []byte) (int, error) {
	for len(g.pending) == 0 {
		if g.err != nil {
			g.cancel()
			return 0, g.err
		}
		line, tooLong, err := readLine(g.br, MaxMessage)
		g.err = err
		msg := bytes.TrimSpace(line)
		switch {
		case tooLong:
			g.reply(jsonrpc.CodeInvalidRequest, fmt.Sprintf("message longer than %d bytes: dropped", MaxMessage))
		case len(msg) == 0:
		case msg[0] == '[':
			// The protocol's versions since 2025-06-18 have no batches,
			// and the SDK ends a session that sends one.
			g.reply(jsonrpc.CodeInvalidRequest, "JSON-RPC batches are not part of this protocol: dropped")
		case !wellFormed(msg):
			g.reply(jsonrpc.CodeParseError, "not a JSON-RPC 2.0 message: dropped")
		default:
			g.pending = append(msg, '\n')
		}
	}
	n := copy(p, g.pending)
	g.pending = g.pending[n:]
	return n, nil
}

func (g *lineGuard) Close() error { return g.in.Close() }

func (g *lineGuard) reply(code int64, msg string) {
	data, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": nil, "error": map[string]any{"code": code, "message": msg}})
	g.out.Write(append(data, '\n'))
}

// wellFormed reports whether msg is a JSON-RPC message as the SDK
// decodes it.
func wellFormed(msg []byte) bool {
	_, err := jsonrpc.DecodeMessage(msg)
	return err == nil
}

// readLine reads one line of at most max bytes; a longer one is read to
// its end and dropped (tooLong).
func readLine(br *bufio.Reader, max int) (line []byte, tooLong bool, err error) {
	for {
		chunk, err := br.ReadSlice('\n')
		if len(line)+len(chunk) > max {
			tooLong, line = true, nil
		} else if !tooLong {
			line = append(line, chunk...)
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		return line, tooLong, err
	}
}

// callContext is a call's context that also ends when the client goes.
func (s *Server) callContext(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(s.gone, cancel)
	return ctx, func() { stop(); cancel() }
}

// MCP returns the SDK's server, for other transports.
func (s *Server) MCP() *mcp.Server { return s.srv }

func (s *Server) rule() string {
	ws := s.cfg.Admitter.Workspace()
	net := "no network (not even the host's loopback)"
	switch {
	case s.cfg.HostNet:
		net = "the host's network"
	case len(s.cfg.Hosts) > 0:
		net = "no network but " + s.hostList() + " through cordon's egress proxy (HTTP_PROXY/HTTPS_PROXY; other names and direct connections are refused)"
	}
	sandbox := "in a " + s.cfg.Substrate + " sandbox: the host read-only, the workspace the one writable tree, " + net
	if s.cfg.Substrate == "host" {
		sandbox = "WITHOUT a sandbox (the server was started with --no-sandbox)"
	}
	return fmt.Sprintf("Workspace %s. Paths are workspace-relative; a path or symlink that leads outside is refused, harness state (%s) is unavailable, and write-later paths (git's hooks and config, editor and agent settings, .envrc) are read-only. Commands run %s. These are fixed when the server starts; no argument changes them.",
		ws, strings.Join(s.cfg.Files.HarnessState(), ", "), sandbox)
}

// hostList names the hosts of the server's start, for a model to read.
func (s *Server) hostList() string {
	var hosts []string
	for _, c := range s.cfg.Hosts {
		hosts = append(hosts, strings.TrimPrefix(c.String(), "net.connect:"))
	}
	return strings.Join(hosts, ", ")
}

func (s *Server) instructions() string {
	return "cordon: sandboxed tools for this workspace. " + s.rule() + " Autonomy: " + s.cfg.Autonomy + "."
}

// schema builds a JSON schema object with properties and required names.
func schema(props map[string]any, required ...string) json.RawMessage {
	m := map[string]any{"type": "object", "properties": props, "additionalProperties": false}
	if len(required) > 0 {
		m["required"] = required
	}
	data, _ := json.Marshal(m)
	return data
}

func str(desc string) map[string]any { return map[string]any{"type": "string", "description": desc} }

func (s *Server) addBuiltins() {
	rule := s.rule()
	ro := &mcp.ToolAnnotations{ReadOnlyHint: true}
	s.srv.AddTool(&mcp.Tool{Name: "read_file", Annotations: ro,
		Description: "Read a regular file of the workspace (at most 16 MiB; text, or base64 for other bytes). " + rule,
		InputSchema: schema(map[string]any{"path": str("workspace-relative path")}, "path")}, s.readFile)
	s.srv.AddTool(&mcp.Tool{Name: "write_file",
		Description: "Replace or create a file of the workspace with content, atomically; missing parents are created. " + rule,
		InputSchema: schema(map[string]any{"path": str("workspace-relative path"), "content": str("the new content (UTF-8 text)")}, "path", "content")}, s.writeFile)
	s.srv.AddTool(&mcp.Tool{Name: "edit_file",
		Description: "Replace the one occurrence of old with new in a file of the workspace (refused when old occurs 0 or 2+ times; new \"\" deletes it). " + rule,
		InputSchema: schema(map[string]any{"path": str("workspace-relative path"), "old": str("the text to replace, exactly once in the file"), "new": str("its replacement")}, "path", "old", "new")}, s.editFile)
	s.srv.AddTool(&mcp.Tool{Name: "list_dir", Annotations: ro,
		Description: "List a directory of the workspace (\".\" for its top; harness state left out). " + rule,
		InputSchema: schema(map[string]any{"path": str("workspace-relative directory, default \".\"")})}, s.listDir)
	s.srv.AddTool(&mcp.Tool{Name: "bash",
		Description: fmt.Sprintf("Run a shell command (/bin/sh -c) in the workspace, %s. timeout_seconds defaults to %v (at most %v); max_output_bytes, kept of each of stdout and stderr, defaults to %d (at most %d). A timeout, a non-zero exit and a refusal come back as errors with the structured result. %s",
			"each call in a fresh sandbox", s.cfg.Timeout, s.cfg.MaxTimeout, s.cfg.MaxOutput, s.cfg.MaxMaxOutput, rule),
		InputSchema: schema(map[string]any{
			"command":          str("the shell command"),
			"timeout_seconds":  map[string]any{"type": "number", "description": "wall-clock bound, seconds"},
			"max_output_bytes": map[string]any{"type": "integer", "description": "bytes kept of each of stdout and stderr"},
		}, "command")}, s.bash)
	s.srv.AddTool(&mcp.Tool{Name: "register_tool",
		Description: "Admit a tool you wrote, as cordon admit does: declaration is the JSON declaration (name, description, kind native|wasm, command or module, files, capabilities, input_schema); files maps each file the declaration names (the module, a native tool's files) to its content in base64. cordon grants only capabilities it can enforce here, and answers with the grant or the refusal and its reasons. An admitted tool appears as a tool of its own (tools/list_changed). Its name may not be one of " + strings.Join(builtin, ", ") + ".",
		InputSchema: schema(map[string]any{
			"declaration": map[string]any{"type": "object", "description": "the tool's declaration"},
			"files":       map[string]any{"type": "object", "description": "NAME → base64 content", "additionalProperties": map[string]any{"type": "string"}},
		}, "declaration")}, s.registerTool)
}

// decode reads a call's arguments strictly into v.
func decode(req *mcp.CallToolRequest, v any) error {
	args := req.Params.Arguments
	if len(args) == 0 {
		args = []byte("{}")
	}
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return refusal.Errorf(refusal.Invalid, "%s: invalid arguments: %v", req.Params.Name, err)
	}
	return nil
}

// refused is a tool result for err: isError, the structured refusal as
// JSON text and structured content.
func refused(op, p string, err error) *mcp.CallToolResult {
	k := refusal.KindOf(err)
	out := map[string]any{"error": k.Name(), "message": err.Error(), "op": op}
	if p != "" {
		out["path"] = p
	}
	var r *admission.Refusal
	if errors.As(err, &r) {
		out["tool"], out["reasons"] = r.Tool, r.Reasons
	}
	return result(out, true)
}

func result(v any, isError bool) *mcp.CallToolResult {
	data, _ := json.Marshal(v)
	// One copy only: the JSON as text (structured content would double
	// what an output of megabytes costs).
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(data)}}, IsError: isError}
}

func text(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}

func (s *Server) readFile(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var a struct{ Path string }
	if err := decode(req, &a); err != nil {
		return refused("read", "", err), nil
	}
	data, err := s.cfg.Files.ReadFile(a.Path)
	if err != nil {
		return refused("read", a.Path, err), nil
	}
	if utf8.Valid(data) {
		return text(string(data)), nil
	}
	return result(map[string]any{"path": a.Path, "encoding": "base64", "data": base64.StdEncoding.EncodeToString(data)}, false), nil
}

func (s *Server) writeFile(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var a struct{ Path, Content string }
	if err := decode(req, &a); err != nil {
		return refused("write", "", err), nil
	}
	notes, err := s.change(func() error { return s.cfg.Files.WriteFile(a.Path, []byte(a.Content)) })
	if err != nil {
		return refused("write", a.Path, err), nil
	}
	return result(withNotes(map[string]any{"path": a.Path, "bytes": len(a.Content)}, notes), false), nil
}

// change makes one change through the file tools, one at a time: the
// workspace kept open for the server's life finds its protected set anew
// for it, as the workspace is now (a run since may have entered a
// submodule in the index, whose entry a write must not make), and what
// the change left in the git index is quarantined after it, as after a
// run ([harness.Protected.QuarantineNotes]); it returns the notes.
func (s *Server) change(f func() error) ([]string, error) {
	s.files.Lock()
	defer s.files.Unlock()
	s.cfg.Files.Renew()
	// And after it: the workspace leaves the registry of runs, where a
	// change is present from its first write until renewed
	// ([workspace.Workspace.Protected]).
	defer s.cfg.Files.Renew()
	if err := f(); err != nil {
		return nil, err
	}
	p := s.cfg.Files.Found()
	if p == nil {
		return nil, nil // no change could be made: there is nothing to quarantine
	}
	return p.QuarantineNotes(), nil
}

// withNotes adds the quarantine's notes to a file tool's result.
func withNotes(m map[string]any, notes []string) map[string]any {
	if len(notes) > 0 {
		m["notes"] = notes
	}
	return m
}

func (s *Server) editFile(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var a struct {
		Path string
		Old  string
		New  *string
	}
	if err := decode(req, &a); err != nil {
		return refused("edit", "", err), nil
	}
	if a.New == nil {
		return refused("edit", a.Path, refusal.Errorf(refusal.Invalid, "edit_file needs new (\"\" deletes old)")), nil
	}
	notes, err := s.change(func() error { return s.cfg.Files.Edit(a.Path, a.Old, *a.New) })
	if err != nil {
		return refused("edit", a.Path, err), nil
	}
	return result(withNotes(map[string]any{"path": a.Path, "replaced": 1}, notes), false), nil
}

func (s *Server) listDir(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var a struct{ Path string }
	if err := decode(req, &a); err != nil {
		return refused("list", "", err), nil
	}
	if a.Path == "" {
		a.Path = "."
	}
	entries, truncated, err := s.cfg.Files.List(a.Path)
	if err != nil {
		return refused("list", a.Path, err), nil
	}
	return result(map[string]any{"path": a.Path, "entries": entries, "truncated": truncated}, false), nil
}

// bashSet is the capability set of one bash call: the server's, with the
// call's timeout and output bound within their ceilings.
func (s *Server) bashSet(timeout time.Duration, output int64) (capabilities.Set, error) {
	caps := []capabilities.Capability{capabilities.ReadWorkspace(), capabilities.WriteWorkspace()}
	switch {
	case s.cfg.HostNet || s.cfg.Substrate == "host":
		caps = append(caps, capabilities.HostNet())
	case len(s.cfg.Hosts) > 0:
		caps = append(caps, s.cfg.Hosts...)
	default:
		caps = append(caps, capabilities.NoNet())
	}
	t, err := capabilities.TimeLimit(timeout)
	if err != nil {
		return capabilities.Set{}, err
	}
	o, err := capabilities.OutputLimit(output)
	if err != nil {
		return capabilities.Set{}, err
	}
	caps = append(append(caps, t, o), s.cfg.Extra...)
	return capabilities.NewSet(caps...)
}

func (s *Server) bash(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var a struct {
		Command        string
		TimeoutSeconds float64 `json:"timeout_seconds"`
		MaxOutputBytes int64   `json:"max_output_bytes"`
	}
	if err := decode(req, &a); err != nil {
		return refused("bash", "", err), nil
	}
	if strings.TrimSpace(a.Command) == "" {
		return refused("bash", "", refusal.Errorf(refusal.Invalid, "bash needs a command")), nil
	}
	if strings.ContainsRune(a.Command, 0) {
		return refused("bash", "", refusal.Errorf(refusal.Invalid, "bash: the command holds a NUL byte, which no command line can")), nil
	}
	timeout, output := s.cfg.Timeout, s.cfg.MaxOutput
	if a.TimeoutSeconds > 0 {
		timeout = s.cfg.MaxTimeout
		if a.TimeoutSeconds < s.cfg.MaxTimeout.Seconds() {
			timeout = max(time.Duration(a.TimeoutSeconds*float64(time.Second)), time.Millisecond)
		}
	}
	if a.MaxOutputBytes > 0 {
		output = min(a.MaxOutputBytes, s.cfg.MaxMaxOutput)
	}
	p, err := s.prepareBash(ctx, a.Command, timeout, output)
	if err != nil {
		return refused("bash", "", err), nil
	}
	return s.run(ctx, "bash", p), nil
}

// prepareBash admits one bash call: /bin/sh -c command under the server's
// capabilities and the call's bounds.
func (s *Server) prepareBash(ctx context.Context, command string, timeout time.Duration, output int64) (*admission.Prepared, error) {
	set, err := s.bashSet(timeout, output)
	if err != nil {
		return nil, err
	}
	return s.cfg.Admitter.PrepareCommand(ctx, admission.Command{Argv: []string{"/bin/sh", "-c", command}, Capabilities: set, Substrate: s.cfg.Substrate})
}

// warm has the runtime's pool, if it has one, make bash's sandboxes
// ahead of the first call (a call takes one only when it is exactly the
// sandbox the call would get new).
func (s *Server) warm(ctx context.Context) {
	p, err := s.prepareBash(ctx, "true", s.cfg.Timeout, s.cfg.MaxOutput)
	if err == nil {
		s.cfg.Runtime.Warm(p) // refuses what it does not pool (another substrate): calls then run new
	}
}

// run runs p through the runtime and makes its tool result.
func (s *Server) run(ctx context.Context, op string, p *admission.Prepared) *mcp.CallToolResult {
	ctx, cancel := s.callContext(ctx)
	defer cancel()
	select {
	case s.slots <- struct{}{}:
		defer func() { <-s.slots }()
	case <-ctx.Done():
		return refused(op, "", refusal.Errorf(refusal.Canceled, "canceled before it started: %v", ctx.Err()))
	}
	if s.cfg.Decide != nil {
		if err := s.cfg.Decide(ctx, op, p); err != nil {
			return refused(op, "", err)
		}
	}
	res, err := s.cfg.Runtime.Run(ctx, p)
	if err != nil {
		return refused(op, "", err)
	}
	out := map[string]any{
		"exit_code": res.ExitCode, "signal": res.Signal, "timed_out": res.TimedOut, "canceled": res.Canceled,
		"stdout": res.Stdout, "stderr": res.Stderr, "stdout_bytes": res.StdoutBytes, "stderr_bytes": res.StderrBytes,
		"stdout_clipped": res.StdoutClipped, "stderr_clipped": res.StderrClipped,
		"duration_ms": float64(res.Duration.Microseconds()) / 1000, "substrate": res.Substrate, "sandboxed": res.Sandboxed,
		"pooled": res.Pooled,
		"notes":  res.Notes,
	}
	if res.Tool != "" {
		out["tool"] = res.Tool
	}
	if len(res.Egress) > 0 {
		out["egress"] = res.Egress
	}
	if res.EgressDropped > 0 {
		out["egress_dropped"] = res.EgressDropped
	}
	if res.Trap != "" {
		out["trap"] = res.Trap
	}
	if len(res.Refusals) > 0 {
		out["refusals"] = res.Refusals
	}
	if res.TimedOut {
		out["error"], out["message"] = "Timeout", fmt.Sprintf("timed out; the process tree was killed (%s)", res.Signal)
	}
	return result(out, res.TimedOut || res.ExitCode != 0 || res.Canceled)
}

// widens says how a grant would reach past the server's start ("" when
// it does not): the network, when the server was started without it.
func (s *Server) widens(g *admission.Grant) string {
	for _, c := range g.All().All() {
		switch {
		case !s.cfg.HostNet && c.Kind() == capabilities.KindNetConnect && slices.Contains(s.cfg.Hosts, c):
			// a host the server was started with
		case !s.cfg.HostNet && len(s.cfg.Hosts) > 0 && (c.Kind() == capabilities.KindNetConnect || c.Kind() == capabilities.KindNet && c != capabilities.NoNet()):
			return fmt.Sprintf("it is granted %s, and this server was started with the network of its --allow-host hosts alone (%s): no tool gets more than the server's start", c, s.hostList())
		case !s.cfg.HostNet && (c.Kind() == capabilities.KindNetConnect || c.Kind() == capabilities.KindNet && c != capabilities.NoNet()):
			return fmt.Sprintf("it is granted %s, and this server was started without the network (cordon mcp --net none): no tool gets more than the server's start", c)
		case c.Kind() == capabilities.KindEnv && !slices.Contains(s.cfg.Env, c.Name()):
			return fmt.Sprintf("it is granted %s, and this server was not started with --env %s: no tool reads more of the server's environment than its start names", c, c.Name())
		case c.Kind() == capabilities.KindTime && c.Duration() > s.cfg.MaxTimeout:
			return fmt.Sprintf("it is granted %s, more than this server's longest run (%v)", c, s.cfg.MaxTimeout)
		case c.Kind() == capabilities.KindOutput && c.Size() > s.cfg.MaxMaxOutput:
			return fmt.Sprintf("it is granted %s, more than this server's largest output (%d bytes)", c, s.cfg.MaxMaxOutput)
		case c.Kind() == capabilities.KindMemory && c.Size() > s.maxMemory(g):
			return fmt.Sprintf("it is granted %s, more than this server lets a tool have (%d bytes)", c, s.maxMemory(g))
		}
	}
	// The server's own limits hold for every native tool: one that asks
	// for none is not run without them.
	if g.Kind == admission.KindNative {
		for _, x := range s.cfg.Extra {
			if x.Kind() != capabilities.KindMemory && x.Kind() != capabilities.KindPids {
				continue
			}
			have := g.All().Of(x.Kind())
			if len(have) == 0 {
				return fmt.Sprintf("this server runs everything under %s; declare %s (or less) for the tool", x, x)
			}
			if x.Kind() == capabilities.KindMemory && have[0].Size() > x.Size() || x.Kind() == capabilities.KindPids && have[0].Count() > x.Count() {
				return fmt.Sprintf("it is granted %s, more than this server's %s", have[0], x)
			}
		}
	}
	return ""
}

// maxMemory is the most memory a tool may be granted here.
func (s *Server) maxMemory(g *admission.Grant) int64 {
	if g.Kind == admission.KindWasm {
		return s.cfg.MaxToolMemory / 2
	}
	return s.cfg.MaxToolMemory
}

// syncTools serves every admitted tool, and stops serving removed ones.
func (s *Server) syncTools() error {
	grants, _, err := s.cfg.Registry.List()
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	seen := map[string]bool{}
	for _, g := range grants {
		if slices.Contains(builtin, g.Tool) {
			continue
		}
		seen[g.Tool] = true
		t, err := s.cfg.Registry.Load(g.Tool)
		if err != nil {
			continue
		}
		s.serveTool(t)
	}
	for name := range s.tools {
		if !seen[name] {
			s.srv.RemoveTools(name)
			delete(s.tools, name)
		}
	}
	return nil
}

// objectSchema returns the tool's input schema as MCP takes it (a JSON
// object of type "object"), or why it cannot.
func objectSchema(raw json.RawMessage) (json.RawMessage, error) {
	if len(raw) == 0 {
		return json.RawMessage(`{"type":"object"}`), nil
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil || m["type"] != "object" {
		return nil, refusal.Errorf(refusal.InvalidDeclaration, "the tool's input_schema must be a JSON schema object of type \"object\" to be served over MCP (its input is a JSON object)")
	}
	return raw, nil
}

// serveTool adds (or replaces) the MCP tool of an admitted tool; a tool
// whose schema MCP cannot carry is not served.
func (s *Server) serveTool(t *admission.Tool) {
	name := t.Grant.Tool
	in, err := objectSchema(t.Declaration.InputSchema)
	if err != nil {
		return
	}
	desc := strings.TrimSpace(t.Declaration.Description)
	desc += fmt.Sprintf(" (an admitted %s tool on %s, granted: %s; it runs under exactly that grant)", t.Grant.Kind, t.Grant.Substrate, t.Grant.All().String())
	s.srv.AddTool(&mcp.Tool{Name: name, Description: desc, InputSchema: in}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		input := []byte(req.Params.Arguments)
		if len(input) == 0 {
			input = []byte("{}")
		}
		p, err := s.cfg.Admitter.Prepare(ctx, s.cfg.Registry, name, input)
		if err != nil {
			return refused("run", name, err), nil
		}
		if why := s.widens(p.Grant); why != "" {
			return refused("run", name, refusal.Errorf(refusal.CapabilityRefused, "refusing to run %s: %s", name, why)), nil
		}
		return s.run(ctx, "run", p), nil
	})
	s.tools[name] = true
}

// maxFiles bounds the files one registration may bring.
const (
	maxFiles     = 64
	maxFilesSize = 64 << 20
)

func (s *Server) registerTool(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var a struct {
		Declaration json.RawMessage
		Files       map[string]string
	}
	if err := decode(req, &a); err != nil {
		return refused("register", "", err), nil
	}
	var head struct {
		Name    string   `json:"name"`
		Command []string `json:"command"`
	}
	json.Unmarshal(a.Declaration, &head)
	if slices.Contains(builtin, head.Name) {
		return refused("register", "", refusal.Errorf(refusal.InvalidDeclaration, "a tool may not be named %q: the server's own tools are %s", head.Name, strings.Join(builtin, ", "))), nil
	}
	if len(a.Files) > maxFiles {
		return refused("register", "", refusal.Errorf(refusal.TooLarge, "at most %d files", maxFiles)), nil
	}
	// The files go in a private directory of their own, outside the
	// workspace, named as the declaration names them.
	dir, err := os.MkdirTemp("", "cordon-register-")
	if err != nil {
		return refused("register", "", err), nil
	}
	defer os.RemoveAll(dir)
	total := 0
	for name, b64 := range a.Files {
		clean := path.Clean(name)
		if name == "" || path.IsAbs(name) || clean != name || clean == "." || strings.HasPrefix(clean, "../") || clean == ".." {
			return refused("register", name, refusal.Errorf(refusal.Invalid, "file name %q is not a clean relative path", name)), nil
		}
		data, err := base64.StdEncoding.DecodeString(b64)
		if err != nil {
			return refused("register", name, refusal.Errorf(refusal.Invalid, "file %s: not base64: %v", name, err)), nil
		}
		if total += len(data); total > maxFilesSize {
			return refused("register", name, refusal.Errorf(refusal.TooLarge, "the files exceed %d bytes", maxFilesSize)), nil
		}
		mode := os.FileMode(0o644)
		if len(head.Command) > 0 && head.Command[0] == name {
			mode = 0o755
		}
		p := filepath.Join(dir, filepath.FromSlash(clean))
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			return refused("register", name, err), nil
		}
		if err := os.WriteFile(p, data, mode); err != nil {
			return refused("register", name, err), nil
		}
	}
	adm, err := s.cfg.Admitter.Admit(ctx, admission.Source{Name: "register_tool", Data: a.Declaration, Format: admission.FormatJSON, Dir: dir})
	if err != nil {
		return refused("register", "", err), nil
	}
	if _, err := objectSchema(adm.Declaration.InputSchema); err != nil {
		return refused("register", "", err), nil
	}
	// A tool admitted otherwise (a person's cordon admit) is not replaced
	// from the conversation.
	s.mu.Lock()
	_, served := s.tools[adm.Grant.Tool]
	mine := s.mine[adm.Grant.Tool]
	s.mu.Unlock()
	if served && !mine {
		return refused("register", "", refusal.Errorf(refusal.Exists, "a tool %q is admitted already, not through this server: register yours under another name (cordon tools remove %s, by a person, frees the name)", adm.Grant.Tool, adm.Grant.Tool)), nil
	}
	if why := s.widens(adm.Grant); why != "" {
		return refused("register", "", refusal.Errorf(refusal.CapabilityRefused, "refusing to register %s: %s", adm.Grant.Tool, why)), nil
	}
	replaced, err := s.cfg.Registry.Register(adm)
	if err != nil {
		return refused("register", "", err), nil
	}
	s.mu.Lock()
	s.mine[adm.Grant.Tool] = true
	s.mu.Unlock()
	if err := s.syncTools(); err != nil {
		return refused("register", "", err), nil
	}
	out := map[string]any{"grant": adm.Grant}
	if replaced != nil {
		out["replaced"] = replaced.Digest
	}
	return result(out, false), nil
}
