package wasm

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
)

// Host module names a module may import from.
const (
	ModuleWASI   = wasi_snapshot_preview1.ModuleName // "wasi_snapshot_preview1"
	ModuleCordon = "cordon"
)

// rule says how a WASI function is served. Every function but proc_raise
// is wazero's own, so that a module sees wazero's answers (EBADF for a bad
// descriptor, ENOTDIR, EINVAL for bad flags) before any refusal; what a
// path or socket function can reach is decided by what the call was given.
type rule int

const (
	always    rule = iota // touches only the call's own state
	needRead              // reaches files: only through the guarded mount, absent without fs.read or fs.write
	needWrite             // changes files: the guard answers EROFS without fs.write, no directory without a grant
	noSocket              // sockets: wazero's, and a call is given no socket, so EBADF or ENOTSOCK
	never                 // a stub answering ENOTCAPABLE
)

// wasiRules covers every function of wazero's WASI preview 1 host module.
// The fd_* functions act only on descriptors the call already holds, and
// without a file-system grant it holds stdio only (without fs.write, no
// descriptor is writable except stdout and stderr).
var wasiRules = map[string]rule{
	"args_get": always, "args_sizes_get": always,
	"environ_get": always, "environ_sizes_get": always,
	"clock_res_get": always, "clock_time_get": always,
	"fd_advise": always, "fd_allocate": always, "fd_close": always, "fd_datasync": always,
	"fd_fdstat_get": always, "fd_fdstat_set_flags": always, "fd_fdstat_set_rights": always,
	"fd_filestat_get": always, "fd_filestat_set_size": always, "fd_filestat_set_times": always,
	"fd_pread": always, "fd_prestat_get": always, "fd_prestat_dir_name": always,
	"fd_pwrite": always, "fd_read": always, "fd_readdir": always, "fd_renumber": always,
	"fd_seek": always, "fd_sync": always, "fd_tell": always, "fd_write": always,
	"path_open": needRead, "path_filestat_get": needRead, "path_readlink": needRead,
	"path_create_directory": needWrite, "path_remove_directory": needWrite,
	"path_unlink_file": needWrite, "path_rename": needWrite, "path_filestat_set_times": needWrite,
	"path_link": needWrite, "path_symlink": needWrite,
	"poll_oneoff": always, "proc_exit": always, "proc_raise": never,
	"sched_yield": always, "random_get": always,
	"sock_accept": noSocket, "sock_recv": noSocket, "sock_send": noSocket, "sock_shutdown": noSocket,
}

// served reports whether the WASI function name is wazero's (not a stub).
// Whether a grant covers what it reaches is the mount's business: absent
// without fs.read, read-only (EROFS) without fs.write.
func (p Policy) served(name string) bool { return wasiRules[name] != never }

// errnoNotcapable is WASI's ENOTCAPABLE: "extension: capabilities
// insufficient".
const errnoNotcapable = 76

// signature is a function's parameter and result types.
type signature struct{ params, results []string }

func (s signature) String() string {
	return "(" + strings.Join(s.params, ",") + ") -> (" + strings.Join(s.results, ",") + ")"
}

func (s signature) equal(params, results []string) bool {
	return slices.Equal(s.params, params) && slices.Equal(s.results, results)
}

func valueTypes(ts []api.ValueType) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = api.ValueTypeName(t)
	}
	return out
}

// wasiSignatures reads the signature of every function wazero's WASI host
// module exports, so that admission can check an import's type without
// instantiating anything.
var wasiSignatures = sync.OnceValues(func() (map[string]signature, error) {
	ctx := context.Background()
	r := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigInterpreter())
	defer r.Close(ctx)
	b := r.NewHostModuleBuilder(ModuleWASI)
	wasi_snapshot_preview1.NewFunctionExporter().ExportFunctions(b)
	cm, err := b.Compile(ctx)
	if err != nil {
		return nil, fmt.Errorf("wasm: compiling the WASI host module: %w", err)
	}
	sigs := map[string]signature{}
	for name, def := range cm.ExportedFunctions() {
		sigs[name] = signature{valueTypes(def.ParamTypes()), valueTypes(def.ResultTypes())}
	}
	for name := range sigs {
		if _, ok := wasiRules[name]; !ok {
			return nil, fmt.Errorf("wasm: wazero's WASI module exports %s, which cordon has no rule for", name)
		}
	}
	return sigs, nil
})

// exportWASI adds wazero's WASI functions to b and replaces each function
// that is never served by a stub of the same signature answering
// ENOTCAPABLE.
func exportWASI(b wazero.HostModuleBuilder, p Policy) error {
	sigs, err := wasiSignatures()
	if err != nil {
		return err
	}
	wasi_snapshot_preview1.NewFunctionExporter().ExportFunctions(b)
	for _, name := range slices.Sorted(maps.Keys(sigs)) {
		if p.served(name) {
			continue
		}
		sig := sigs[name]
		if len(sig.results) != 1 || sig.results[0] != "i32" {
			return fmt.Errorf("wasm: cannot stub %s%s: it returns no errno", name, sig)
		}
		b.NewFunctionBuilder().
			WithGoModuleFunction(api.GoModuleFunc(notCapable), toValueTypes(sig.params), []api.ValueType{api.ValueTypeI32}).
			WithName(name).
			Export(name)
	}
	return nil
}

// notCapable is the stub of every WASI function that is never served.
func notCapable(ctx context.Context, mod api.Module, stack []uint64) {
	stack[0] = errnoNotcapable
}

func toValueTypes(names []string) []api.ValueType {
	out := make([]api.ValueType, len(names))
	for i, n := range names {
		switch n {
		case "i32":
			out[i] = api.ValueTypeI32
		case "i64":
			out[i] = api.ValueTypeI64
		case "f32":
			out[i] = api.ValueTypeF32
		case "f64":
			out[i] = api.ValueTypeF64
		}
	}
	return out
}
