package wasm

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"sync"
	"syscall"
	"unicode/utf8"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/cordon-run/cordon/capabilities"
	"github.com/cordon-run/cordon/refusal"
	"github.com/cordon-run/cordon/substrate"
	"github.com/cordon-run/cordon/substrate/workspace"
)

// WASI errno values the cordon host module returns (docs/wasm-abi.md).
const (
	errnoSuccess     = 0
	errnoAcces       = 2
	errnoExist       = 20
	errnoFault       = 21
	errnoFbig        = 22
	errnoInval       = 28
	errnoIO          = 29
	errnoIsdir       = 31
	errnoNametoolong = 37
	errnoNoent       = 44
	errnoNospc       = 51
	errnoNotdir      = 54
	errnoRange       = 68
)

// Bounds of the cordon host module.
const (
	maxPath       = 4096     // bytes of a path argument
	maxLogMessage = 1024     // bytes kept of one log message
	maxLogLines   = 1000     // log lines kept per call
	maxLogBytes   = 64 << 10 // log bytes kept per call
	maxRefusals   = 32       // refusals recorded per call
)

// cordonFunc is one function of the cordon host module.
type cordonFunc struct {
	name   string
	params []api.ValueType
	needs  capabilities.Kind // the file-system capability it needs, or ""
	doc    string
	fn     func(ctx context.Context, s *callState, mem api.Memory, stack []uint64) uint32
}

const i32, i64 = api.ValueTypeI32, api.ValueTypeI64

// cordonFuncs is the cordon host module's ABI (docs/wasm-abi.md). Every
// function returns a WASI errno.
var cordonFuncs = []cordonFunc{
	{"read", []api.ValueType{i32, i32, i64, i32, i32, i32}, capabilities.KindFSRead,
		"read(path, path_len, offset: i64, buf, buf_len, nread_ptr): reads a workspace file through the workspace guard", hostRead},
	{"write", []api.ValueType{i32, i32, i32, i32}, capabilities.KindFSWrite,
		"write(path, path_len, buf, buf_len): replaces a workspace file atomically through the workspace guard", hostWrite},
	{"list", []api.ValueType{i32, i32, i32, i32, i32}, capabilities.KindFSRead,
		"list(path, path_len, buf, buf_len, len_ptr): a directory's entries as JSON, through the workspace guard", hostList},
	{"stat", []api.ValueType{i32, i32, i32, i32, i32}, capabilities.KindFSRead,
		"stat(path, path_len, buf, buf_len, len_ptr): a file's type, size, mode and mtime as JSON, through the workspace guard", hostStat},
	{"log", []api.ValueType{i32, i32, i32}, "",
		"log(level, msg, msg_len): a log line, at most 1024 bytes each, 1000 lines and 64KiB per call", hostLog},
	{"error", []api.ValueType{i32, i32, i32}, "",
		"error(buf, buf_len, len_ptr): the call's last refusal as JSON {error, op, path, message}", hostError},
}

func findCordonFunc(name string) (cordonFunc, bool) {
	for _, f := range cordonFuncs {
		if f.name == name {
			return f, true
		}
	}
	return cordonFunc{}, false
}

func (f cordonFunc) signature() signature {
	return signature{valueTypes(f.params), []string{"i32"}}
}

// exportCordon adds the cordon host module's functions to b. They find the
// call they serve in their context: a function called outside a call, or
// whose capability the call lacks, answers ENOTCAPABLE.
func exportCordon(b wazero.HostModuleBuilder) {
	for _, f := range cordonFuncs {
		f := f
		b.NewFunctionBuilder().
			WithGoModuleFunction(api.GoModuleFunc(func(ctx context.Context, mod api.Module, stack []uint64) {
				s, _ := ctx.Value(callKey{}).(*callState)
				if s == nil || !s.allows(f) {
					stack[0] = errnoNotcapable
					return
				}
				stack[0] = uint64(f.fn(ctx, s, mod.Memory(), stack))
			}), f.params, []api.ValueType{i32}).
			WithName(f.name).
			Export(f.name)
	}
}

type callKey struct{}

// callState is what the host functions know of the call they serve.
type callState struct {
	ws     *workspace.Workspace
	policy Policy
	logger *slog.Logger

	mu        sync.Mutex
	log       []LogLine
	logBytes  int
	logDrop   int
	refusals  []Refusal
	refusalsN int
	last      []byte // JSON of the last refusal
}

func (s *callState) allows(f cordonFunc) bool {
	if !s.policy.granted(ModuleCordon, f.name) {
		return false
	}
	switch f.needs {
	case capabilities.KindFSRead:
		return s.ws != nil && (s.policy.Read || s.policy.Write)
	case capabilities.KindFSWrite:
		return s.ws != nil && s.policy.Write
	}
	return true
}

// LogLine is one line a module logged through cordon/log.
type LogLine = substrate.LogLine

// Refusal is one operation of a module that the boundary refused.
type Refusal = substrate.Refusal

// refuse records err (a refusal of op on path) and returns the errno for
// it.
func (s *callState) refuse(op, path string, err error) uint32 {
	r := Refusal{Error: "Error", Op: op, Path: path, Message: err.Error()}
	var pe *workspace.PathError
	if errors.As(err, &pe) {
		r.Op, r.Path = pe.Op, pe.Path
	}
	k := refusal.Of(err)
	if k != nil {
		r.Error = k.Name()
	}
	data, _ := json.Marshal(r)
	s.mu.Lock()
	s.last = data
	s.refusalsN++
	if len(s.refusals) < maxRefusals {
		s.refusals = append(s.refusals, r)
	}
	s.mu.Unlock()
	if k != nil && (k.Class() == refusal.Policy) && s.logger != nil {
		s.logger.Info("wasm: refused", "op", r.Op, "path", r.Path, "error", r.Error)
	}
	return errnoOf(err)
}

// note records a refusal of the guarded WASI file system.
func (s *callState) note(op, path string, err error) { s.refuse(op, path, err) }

// errnoOf maps a guard error to the errno of the cordon ABI: policy
// refusals are ENOTCAPABLE; the message is available from cordon/error.
func errnoOf(err error) uint32 {
	if k := refusal.Of(err); k != nil && (k.Class() == refusal.Policy) {
		return errnoNotcapable
	}
	switch {
	case errors.Is(err, workspace.ErrNotFound):
		return errnoNoent
	case errors.Is(err, workspace.ErrIsDir):
		return errnoIsdir
	case errors.Is(err, workspace.ErrNotDir):
		return errnoNotdir
	case errors.Is(err, workspace.ErrTooLarge):
		return errnoFbig
	case errors.Is(err, workspace.ErrInvalid), errors.Is(err, workspace.ErrNotRegular):
		return errnoInval
	case errors.Is(err, syscall.EACCES), errors.Is(err, syscall.EPERM):
		return errnoAcces
	case errors.Is(err, syscall.EINVAL):
		return errnoInval
	case errors.Is(err, syscall.EEXIST):
		return errnoExist
	case errors.Is(err, syscall.ENOSPC):
		return errnoNospc
	}
	return errnoIO
}

// guestPath copies a path out of guest memory. The copy is what is
// validated and used: the guest cannot change it afterwards.
func guestPath(mem api.Memory, ptr, n uint32) (string, uint32) {
	if n > maxPath {
		return "", errnoNametoolong
	}
	b, ok := mem.Read(ptr, n)
	if !ok {
		return "", errnoFault
	}
	return string(b), errnoSuccess // string() copies
}

// guestRange checks that [ptr, ptr+n) lies in guest memory and returns a
// view of it.
func guestRange(mem api.Memory, ptr, n uint32) ([]byte, bool) {
	return mem.Read(ptr, n)
}

func hostRead(ctx context.Context, s *callState, mem api.Memory, stack []uint64) uint32 {
	pathPtr, pathLen, off := uint32(stack[0]), uint32(stack[1]), int64(stack[2])
	bufPtr, bufLen, nPtr := uint32(stack[3]), uint32(stack[4]), uint32(stack[5])
	name, e := guestPath(mem, pathPtr, pathLen)
	if e != errnoSuccess {
		return e
	}
	buf, ok := guestRange(mem, bufPtr, bufLen)
	if !ok {
		return errnoFault
	}
	if _, ok := guestRange(mem, nPtr, 4); !ok {
		return errnoFault
	}
	if off < 0 {
		return errnoInval
	}
	f, err := s.ws.OpenFile(name, os.O_RDONLY, 0)
	if err != nil {
		return s.refuse("read", name, err)
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return errnoIsdir
	}
	// Read straight into the guest's buffer, bounded by its length: the
	// host allocates nothing in proportion to the file.
	n, err := f.ReadAt(buf, off)
	if err != nil && err != io.EOF {
		return errnoIO
	}
	mem.WriteUint32Le(nPtr, uint32(n))
	return errnoSuccess
}

func hostWrite(ctx context.Context, s *callState, mem api.Memory, stack []uint64) uint32 {
	pathPtr, pathLen, bufPtr, bufLen := uint32(stack[0]), uint32(stack[1]), uint32(stack[2]), uint32(stack[3])
	name, e := guestPath(mem, pathPtr, pathLen)
	if e != errnoSuccess {
		return e
	}
	if int64(bufLen) > workspace.DefaultMaxFileSize {
		return errnoFbig
	}
	view, ok := guestRange(mem, bufPtr, bufLen)
	if !ok {
		return errnoFault
	}
	data := append([]byte(nil), view...)
	if err := s.ws.WriteFile(name, data); err != nil {
		return s.refuse("write", name, err)
	}
	return errnoSuccess
}

func hostList(ctx context.Context, s *callState, mem api.Memory, stack []uint64) uint32 {
	name, e := guestPath(mem, uint32(stack[0]), uint32(stack[1]))
	if e != errnoSuccess {
		return e
	}
	entries, truncated, err := s.ws.List(name)
	if err != nil {
		return s.refuse("list", name, err)
	}
	if entries == nil {
		entries = []workspace.Entry{}
	}
	data, _ := json.Marshal(struct {
		Entries   []workspace.Entry `json:"entries"`
		Truncated bool              `json:"truncated"`
	}{entries, truncated})
	return putJSON(mem, data, uint32(stack[2]), uint32(stack[3]), uint32(stack[4]))
}

func hostStat(ctx context.Context, s *callState, mem api.Memory, stack []uint64) uint32 {
	name, e := guestPath(mem, uint32(stack[0]), uint32(stack[1]))
	if e != errnoSuccess {
		return e
	}
	en, err := s.ws.Stat(name)
	if err != nil {
		return s.refuse("stat", name, err)
	}
	data, _ := json.Marshal(struct {
		workspace.Entry
		Mode string `json:"mode"`
	}{en, en.Mode.Perm().String()})
	return putJSON(mem, data, uint32(stack[2]), uint32(stack[3]), uint32(stack[4]))
}

// putJSON writes data to the guest buffer and its length to lenPtr. When
// the buffer is too small it writes only the length needed and returns
// ERANGE.
func putJSON(mem api.Memory, data []byte, bufPtr, bufLen, lenPtr uint32) uint32 {
	if _, ok := guestRange(mem, lenPtr, 4); !ok {
		return errnoFault
	}
	if _, ok := guestRange(mem, bufPtr, bufLen); !ok {
		return errnoFault
	}
	mem.WriteUint32Le(lenPtr, uint32(len(data)))
	if uint32(len(data)) > bufLen {
		return errnoRange
	}
	mem.Write(bufPtr, data)
	return errnoSuccess
}

var levels = []string{"debug", "info", "warn", "error"}

func hostLog(ctx context.Context, s *callState, mem api.Memory, stack []uint64) uint32 {
	level, ptr, n := uint32(stack[0]), uint32(stack[1]), uint32(stack[2])
	if level >= uint32(len(levels)) {
		return errnoInval
	}
	keep := n
	if keep > maxLogMessage {
		keep = maxLogMessage
	}
	if _, ok := guestRange(mem, ptr, n); !ok {
		return errnoFault
	}
	b, _ := mem.Read(ptr, keep)
	msg := string(b)
	for !utf8.ValidString(msg) && len(msg) > 0 && keep < n {
		msg = msg[:len(msg)-1] // a character cut at the bound
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.log) >= maxLogLines || s.logBytes+len(msg) > maxLogBytes {
		s.logDrop++
		return errnoSuccess
	}
	s.log = append(s.log, LogLine{Level: levels[level], Message: msg})
	s.logBytes += len(msg)
	if s.logger != nil {
		s.logger.Log(ctx, slog.Level(int(level)*4-4), msg, "source", "wasm")
	}
	return errnoSuccess
}

func hostError(ctx context.Context, s *callState, mem api.Memory, stack []uint64) uint32 {
	s.mu.Lock()
	data := s.last
	s.mu.Unlock()
	if data == nil {
		data = []byte("null")
	}
	return putJSON(mem, data, uint32(stack[0]), uint32(stack[1]), uint32(stack[2]))
}
