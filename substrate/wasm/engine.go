package wasm

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/sys"

	"github.com/cordon-run/cordon/internal/capture"
	"github.com/cordon-run/cordon/refusal"
	"github.com/cordon-run/cordon/substrate/workspace"
)

// Name is the substrate's name in mechanisms and facts.
const Name = "wasm"

// Sentinels for [errors.Is].
var (
	// ErrImport refuses a module whose imports the grant does not cover.
	ErrImport = refusal.ImportRefused
	// ErrModule is a module cordon cannot run: malformed, or not a command.
	ErrModule = refusal.InvalidModule
	// ErrCanceled: the caller canceled the call before it finished.
	ErrCanceled = refusal.Canceled
)

// Config configures an [Engine].
type Config struct {
	// CacheDir holds compiled code across processes; empty: in memory
	// only. A module's code is run from it, so no tool may write it: use
	// [CacheDir], the per-user cache outside every workspace.
	CacheDir string
	// Logger receives module log lines and refusals; nil discards them.
	Logger *slog.Logger
}

// Engine compiles and runs modules. It keeps one wazero runtime per
// distinct memory limit and file-system grant, shares compiled code
// between them through the compilation cache, and is safe for concurrent
// use. Close releases it.
type Engine struct {
	cfg   Config
	cache wazero.CompilationCache

	mu       sync.Mutex
	runtimes map[runtimeKey]*runtimeEntry
	closed   bool
}

// newRuntimeMu serializes wazero.NewRuntimeWithConfig across engines:
// wazero v1.12.0 caches its version string in a package variable without
// synchronization when a compilation cache makes its first engine, a data
// race between two engines made at once (the race detector caught it
// between two probes).
var newRuntimeMu sync.Mutex

type runtimeKey struct {
	pages       uint32
	read, write bool
}

type runtimeEntry struct {
	once sync.Once
	err  error
	rt   wazero.Runtime

	mu       sync.Mutex
	compiled map[string]*compiledEntry // by module digest
}

type compiledEntry struct {
	once sync.Once
	cm   wazero.CompiledModule
	err  error
}

// New returns an engine.
func New(cfg Config) (*Engine, error) {
	e := &Engine{cfg: cfg, runtimes: map[runtimeKey]*runtimeEntry{}}
	if cfg.CacheDir != "" {
		c, err := wazero.NewCompilationCacheWithDir(cfg.CacheDir)
		if err != nil {
			return nil, fmt.Errorf("wasm: compilation cache %s: %w", cfg.CacheDir, err)
		}
		e.cache = c
	} else {
		e.cache = wazero.NewCompilationCache()
	}
	return e, nil
}

// Close closes every runtime and the cache.
func (e *Engine) Close() error {
	ctx := context.Background()
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil
	}
	e.closed = true
	var errs []error
	for _, r := range e.runtimes {
		if r.rt != nil {
			errs = append(errs, r.rt.Close(ctx))
		}
	}
	errs = append(errs, e.cache.Close(ctx))
	return errors.Join(errs...)
}

// Module is a module read and checked once, ready to run many times.
type Module struct {
	bin     []byte
	digest  string
	imports []Import
}

// Digest is "sha256:" and the hex SHA-256 of the module's bytes.
func (m *Module) Digest() string { return m.digest }

// Imports returns the module's imports.
func (m *Module) Imports() []Import { return append([]Import(nil), m.imports...) }

// Load reads a module's imports. The bytes are kept, not copied: do not
// change them afterwards.
func Load(bin []byte) (*Module, error) {
	imports, err := readImports(bin)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrModule, err)
	}
	sum := sha256.Sum256(bin)
	return &Module{bin: bin, digest: "sha256:" + hex.EncodeToString(sum[:]), imports: imports}, nil
}

// runtime returns the runtime for a policy, creating it and its host
// modules on first use.
func (e *Engine) runtime(ctx context.Context, p Policy) (*runtimeEntry, error) {
	key := runtimeKey{pages: p.pages(), read: p.Read || p.Write, write: p.Write}
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil, errors.New("wasm: engine closed")
	}
	r, ok := e.runtimes[key]
	if !ok {
		r = &runtimeEntry{compiled: map[string]*compiledEntry{}}
		e.runtimes[key] = r
	}
	e.mu.Unlock()
	r.once.Do(func() {
		cfg := wazero.NewRuntimeConfig().
			WithCloseOnContextDone(true).
			WithMemoryLimitPages(key.pages).
			WithCompilationCache(e.cache)
		newRuntimeMu.Lock() // see newRuntimeMu
		rt := wazero.NewRuntimeWithConfig(context.Background(), cfg)
		newRuntimeMu.Unlock()
		hostPolicy := Policy{Read: key.read, Write: key.write}
		wb := rt.NewHostModuleBuilder(ModuleWASI)
		if err := exportWASI(wb, hostPolicy); err != nil {
			r.err = err
			return
		}
		if _, err := wb.Instantiate(context.Background()); err != nil {
			r.err = fmt.Errorf("wasm: instantiating the WASI host module: %w", err)
			return
		}
		cb := rt.NewHostModuleBuilder(ModuleCordon)
		exportCordon(cb)
		if _, err := cb.Instantiate(context.Background()); err != nil {
			r.err = fmt.Errorf("wasm: instantiating the cordon host module: %w", err)
			return
		}
		r.rt = rt
	})
	return r, r.err
}

// compile returns m compiled for runtime r, compiling it at most once per
// runtime (and, with a cache directory, at most once per machine).
func (r *runtimeEntry) compile(ctx context.Context, m *Module) (wazero.CompiledModule, error) {
	r.mu.Lock()
	c, ok := r.compiled[m.digest]
	if !ok {
		c = &compiledEntry{}
		r.compiled[m.digest] = c
	}
	r.mu.Unlock()
	c.once.Do(func() {
		c.cm, c.err = r.rt.CompileModule(context.Background(), m.bin)
		if c.err != nil {
			c.err = fmt.Errorf("%w: %v", ErrModule, c.err)
		}
	})
	return c.cm, c.err
}

// Call is one run of a module.
type Call struct {
	Module    *Module
	Workspace *workspace.Workspace // needed when the policy grants the file system
	Policy    Policy
	Args      []string // argv; the first is the program name
	Stdin     io.Reader
	// Getenv looks up the variables the policy grants (os.Getenv if nil).
	Getenv func(string) string
}

// Result is what a call did.
type Result struct {
	ExitCode int
	TimedOut bool
	// Trap is the trap that ended the module ("wasm error: unreachable"),
	// or "".
	Trap           string
	Stdout, Stderr *capture.Buffer
	Duration       time.Duration
	Log            []LogLine
	LogDropped     int
	Refusals       []Refusal
	RefusalsCount  int
}

// Exit codes for calls that did not end with proc_exit.
const (
	ExitTimeout = 124 // the deadline passed, as timeout(1)
	ExitTrap    = 134 // the module trapped, as a process that aborted
)

// Run runs the module's _start in a fresh instance under c.Policy and
// returns what happened. A trap, proc_exit or the deadline is a Result;
// an error means cordon could not run the module (an ungranted import,
// a malformed module, a canceled context).
func (e *Engine) Run(ctx context.Context, c Call) (Result, error) {
	p := c.Policy
	if err := p.validate(); err != nil {
		return Result{}, err
	}
	if err := p.check(c.Module.imports); err != nil {
		return Result{}, err
	}
	if (p.Read || p.Write) && c.Workspace == nil {
		return Result{}, errors.New("wasm: the policy grants the workspace but the call has none")
	}
	r, err := e.runtime(ctx, p)
	if err != nil {
		return Result{}, err
	}
	cm, err := r.compile(ctx, c.Module)
	if err != nil {
		return Result{}, err
	}

	res := Result{Stdout: capture.New(p.OutputLimit), Stderr: capture.New(p.OutputLimit)}
	state := &callState{ws: c.Workspace, policy: p, logger: e.cfg.Logger}
	ctx, cancel := context.WithTimeout(ctx, p.Timeout)
	defer cancel()
	ctx = context.WithValue(ctx, callKey{}, state)
	ctx = withMemoryAllocator(ctx)

	stdin := c.Stdin
	if stdin == nil {
		stdin = strings.NewReader("")
	}
	getenv := c.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	mc := wazero.NewModuleConfig().
		WithName("").
		WithArgs(c.Args...).
		WithStdin(stdin).
		WithStdout(res.Stdout).
		WithStderr(res.Stderr).
		WithSysWalltime().
		WithSysNanotime().
		WithRandSource(rand.Reader).
		WithNanosleep(func(ns int64) { sleep(ctx, ns) })
	for _, name := range p.Env {
		mc = mc.WithEnv(name, getenv(name))
	}
	if p.Read || p.Write {
		fsc, err := mountWorkspace(c.Workspace, p.Write, state.note)
		if err != nil {
			return Result{}, err
		}
		mc = mc.WithFSConfig(fsc)
	}

	start := time.Now()
	mod, err := r.rt.InstantiateModule(ctx, cm, mc)
	res.Duration = time.Since(start)
	if mod != nil {
		mod.Close(context.Background())
	}
	state.mu.Lock()
	res.Log, res.LogDropped = state.log, state.logDrop
	res.Refusals, res.RefusalsCount = state.refusals, state.refusalsN
	state.mu.Unlock()

	var exit *sys.ExitError
	switch {
	case err == nil:
		return res, nil
	case errors.As(err, &exit) && exit.ExitCode() == sys.ExitCodeDeadlineExceeded:
		res.ExitCode, res.TimedOut = ExitTimeout, true
		return res, nil
	case errors.As(err, &exit) && exit.ExitCode() == sys.ExitCodeContextCanceled:
		return res, fmt.Errorf("%w: %v", ErrCanceled, context.Cause(ctx))
	case errors.As(err, &exit):
		res.ExitCode = int(exit.ExitCode())
		return res, nil
	case strings.Contains(err.Error(), "wasm error:"):
		res.ExitCode = ExitTrap
		res.Trap = trapMessage(err)
		return res, nil
	}
	return res, fmt.Errorf("wasm: running %s: %w", c.Module.digest, err)
}

// trapMessage returns the first line of a trap error without wazero's
// "module[...] function[...] failed" prefix.
func trapMessage(err error) string {
	msg := err.Error()
	if i := strings.Index(msg, "wasm error:"); i >= 0 {
		msg = msg[i:]
	}
	if i := strings.IndexByte(msg, '\n'); i >= 0 {
		msg = msg[:i]
	}
	return msg
}

// sleep blocks for ns nanoseconds or until ctx is done: a module that asks
// to sleep past its deadline is woken at the deadline (and then closed).
func sleep(ctx context.Context, ns int64) {
	if ns <= 0 {
		return
	}
	t := time.NewTimer(time.Duration(ns))
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
