package wasm

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/tetratelabs/wazero"

	"github.com/cordon-run/cordon/capabilities"
	"github.com/cordon-run/cordon/substrate"
)

// ImportError refuses a module because of one of its imports.
type ImportError struct {
	Import Import
	Reason string // what is wrong, and what the module could do instead
}

func (e *ImportError) Error() string {
	return fmt.Sprintf("refusing module import %s %q — %s", e.Import.Kind, e.Import.String(), e.Reason)
}

// Unwrap returns [ErrImport].
func (e *ImportError) Unwrap() error { return ErrImport }

// Served is how one import is served under a policy.
type Served struct {
	Import    Import
	By        string // "wazero" (WASI, through the guard where it touches files), "stub" (ENOTCAPABLE: proc_raise), "cordon"
	Mechanism string
}

// Plan says, for every import of a module, how a policy serves it: the
// host functions and stubs behind a grant. It fails with an
// [*ImportError] for the first import nothing serves.
func (p Policy) Plan(m *Module) ([]Served, error) {
	sigs, err := wasiSignatures()
	if err != nil {
		return nil, err
	}
	var plan []Served
	for _, imp := range m.imports {
		if err := checkImport(imp, sigs); err != nil {
			return nil, err
		}
		s := Served{Import: imp}
		switch imp.Module {
		case ModuleWASI:
			if p.served(imp.Name) {
				s.By, s.Mechanism = "wazero", wasiMechanism(imp.Name, p)
			} else {
				s.By, s.Mechanism = "stub", "answers ENOTCAPABLE (errno 76): not offered to modules"
			}
		case ModuleCordon:
			f, _ := findCordonFunc(imp.Name)
			if !p.granted(ModuleCordon, imp.Name) {
				return nil, &ImportError{Import: imp, Reason: "the grant does not hold wasm.import:cordon/" + imp.Name + "; ask for it in the declaration"}
			}
			if need := f.needs; need != "" && !(need == capabilities.KindFSRead && (p.Read || p.Write) || need == capabilities.KindFSWrite && p.Write) {
				return nil, &ImportError{Import: imp, Reason: fmt.Sprintf("cordon/%s needs %s:workspace, which the grant does not hold", imp.Name, need)}
			}
			s.By, s.Mechanism = "cordon", f.doc
		}
		plan = append(plan, s)
	}
	return plan, nil
}

// check refuses imports that p does not serve.
func (p Policy) check(imports []Import) error {
	_, err := p.Plan(&Module{imports: imports})
	return err
}

// checkImport refuses an import that no host module provides, or whose
// type differs from the host function's.
func checkImport(imp Import, sigs map[string]signature) error {
	if imp.Kind != "function" {
		return &ImportError{Import: imp, Reason: "cordon's host modules export functions only; define the " + imp.Kind + " in the module"}
	}
	var sig signature
	switch imp.Module {
	case ModuleWASI:
		s, ok := sigs[imp.Name]
		if !ok {
			return &ImportError{Import: imp, Reason: "WASI preview 1 has no such function"}
		}
		sig = s
	case ModuleCordon:
		f, ok := findCordonFunc(imp.Name)
		if !ok {
			return &ImportError{Import: imp, Reason: "the cordon host module has no such function; it has " + cordonNames()}
		}
		sig = f.signature()
	default:
		return &ImportError{Import: imp, Reason: "no host module provides it; a module may import from wasi_snapshot_preview1 and cordon only"}
	}
	if !sig.equal(imp.Params, imp.Results) {
		got := signature{imp.Params, imp.Results}
		return &ImportError{Import: imp, Reason: fmt.Sprintf("its type is %s, the host function's is %s", got, sig)}
	}
	return nil
}

func cordonNames() string {
	var names []string
	for _, f := range cordonFuncs {
		names = append(names, f.name)
	}
	return strings.Join(names, ", ")
}

func wasiMechanism(name string, p Policy) string {
	switch wasiRules[name] {
	case needRead, needWrite:
		switch {
		case p.Write:
			return MechGuardWrite.String()
		case p.Read:
			return MechGuardRead.String()
		}
		return MechNoMount.String()
	case noSocket:
		return MechNoNet.String()
	}
	switch name {
	case "poll_oneoff":
		return "wazero; sleeps end at the call's deadline"
	case "fd_write", "fd_pwrite":
		if p.Write {
			return "wazero; stdout and stderr bounded, files opened through the guard"
		}
		return "wazero; stdout and stderr bounded, no file is writable"
	case "environ_get", "environ_sizes_get":
		return MechEnviron.String()
	case "random_get":
		return "wazero; crypto/rand"
	}
	return "wazero; acts on the call's own state only"
}

// Enforcer is the wasm substrate's side of admission: its host facts, the
// mechanisms behind each capability, and the inspection of a module's
// imports. It implements [substrate.Enforcer] and [substrate.Inspector].
type Enforcer struct{}

// Name returns "wasm".
func (Enforcer) Name() string { return Name }

// String describes the substrate.
func (Enforcer) String() string {
	return "wasm: WebAssembly modules on wazero " + wazeroVersion() + ", in process"
}

// Facts returns the host facts a grant records. wazero needs nothing from
// the host, so the substrate is available wherever cordon runs; the facts
// name the wazero version and whether it compiles to native code here.
func (Enforcer) Facts(ctx context.Context) (substrate.Facts, error) {
	engine := "interpreter"
	if compilerSupported() {
		engine = "compiler"
	}
	return substrate.Facts{
		Substrate: Name,
		OS:        runtime.GOOS,
		Arch:      runtime.GOARCH,
		UID:       os.Getuid(),
		Values:    map[string]string{"wazero.version": wazeroVersion(), "wazero.engine": engine},
	}, nil
}

func compilerSupported() bool {
	return (runtime.GOARCH == "amd64" || runtime.GOARCH == "arm64") &&
		(runtime.GOOS == "linux" || runtime.GOOS == "darwin" || runtime.GOOS == "freebsd" || runtime.GOOS == "windows")
}

func wazeroVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == "github.com/tetratelabs/wazero" {
				if d.Replace != nil {
					return d.Replace.Version
				}
				return d.Version
			}
		}
	}
	return "(devel)"
}

// Mechanisms returns the mechanisms that enforce c for a module granted
// set, or an [*substrate.UnenforceableError].
func (Enforcer) Mechanisms(c capabilities.Capability, set capabilities.Set) ([]substrate.Mechanism, error) {
	return mechanisms(c, set)
}

func mechanisms(c capabilities.Capability, set capabilities.Set) ([]substrate.Mechanism, error) {
	refuse := func(reason string, instead ...string) error {
		return &substrate.UnenforceableError{Substrate: Name, Capability: c, Reason: reason, Instead: instead}
	}
	_, write := set.One(capabilities.KindFSWrite)
	switch c.Kind() {
	case capabilities.KindFSRead:
		if write {
			return []substrate.Mechanism{MechGuardWrite, MechHarnessAbsent}, nil
		}
		return []substrate.Mechanism{MechGuardRead, MechHarnessAbsent}, nil
	case capabilities.KindFSWrite:
		return []substrate.Mechanism{MechGuardWrite, MechHarnessAbsent, MechWriteLater, MechLinksInside}, nil
	case capabilities.KindTmp:
		return nil, refuse("a module has no /tmp: its only file system is the workspace", "no tmp: capability for a wasm tool")
	case capabilities.KindNet:
		if c.Arg() == capabilities.NetNone {
			return []substrate.Mechanism{MechNoNet}, nil
		}
		return nil, refuse("a WebAssembly module has no network: cordon serves it no socket functions", "net:none")
	case capabilities.KindNetConnect:
		return nil, refuse("a WebAssembly module has no network: cordon serves it no socket functions", "net:none")
	case capabilities.KindEnv:
		return []substrate.Mechanism{MechEnviron}, nil
	case capabilities.KindTime:
		return []substrate.Mechanism{MechDeadline}, nil
	case capabilities.KindOutput:
		return []substrate.Mechanism{MechOutput}, nil
	case capabilities.KindMemory:
		n := c.Size()
		switch {
		case n < PageSize:
			return nil, refuse("a module's memory is counted in 64KiB pages and needs at least one", "memory:64KiB")
		case n > MaxMemoryLimit:
			return nil, refuse("a 32-bit module cannot address more than 4GiB", "memory:4GiB")
		case n%PageSize != 0:
			down := n / PageSize * PageSize
			return nil, refuse("a module's memory is counted in 64KiB pages", "memory:"+capabilities.FormatSize(down))
		}
		return []substrate.Mechanism{MechMemory(uint32(n / PageSize))}, nil
	case capabilities.KindPids:
		return []substrate.Mechanism{MechNoProcesses}, nil
	case capabilities.KindCPU:
		return nil, refuse("a module runs on one goroutine of cordon's process, whose processor time cordon does not count apart; its deadline (time:) is what ends it", "time:"+c.Arg())
	case capabilities.KindWasmImport:
		module, name := c.Import()
		switch module {
		case ModuleCordon:
			f, ok := findCordonFunc(name)
			if !ok {
				return nil, refuse("the cordon host module has no function " + name + "; it has " + cordonNames())
			}
			switch f.needs {
			case capabilities.KindFSRead:
				_, read := set.One(capabilities.KindFSRead)
				if !read && !write {
					return nil, refuse("cordon/"+name+" reads the workspace; ask for fs.read:workspace with it", "fs.read:workspace")
				}
			case capabilities.KindFSWrite:
				if !write {
					return nil, refuse("cordon/"+name+" writes the workspace; ask for fs.write:workspace with it", "fs.write:workspace")
				}
			}
			return []substrate.Mechanism{{Substrate: Name, Name: "cordon-" + name, Detail: "cordon." + f.doc}}, nil
		case ModuleWASI:
			sigs, err := wasiSignatures()
			if err != nil {
				return nil, err
			}
			if _, ok := sigs[name]; !ok {
				return nil, refuse("WASI preview 1 has no function " + name)
			}
			return nil, refuse("WASI functions are not granted one by one: a module may import all of them, and fs.read:workspace and fs.write:workspace decide which are served and which answer ENOTCAPABLE; leave this capability out")
		}
		return nil, refuse("no host module " + module + " exists; modules may import from wasi_snapshot_preview1 and cordon")
	}
	return nil, refuse("the wasm substrate does not know this capability")
}

// Inspect reads a module and returns the capabilities it needs: one
// wasm.import:cordon/NAME per cordon host function it imports. WASI
// imports need none (the file-system capabilities decide how each is
// served). It fails with an [*ImportError] for an import no host module
// provides, and for a module that is not a valid WASI command. The
// [*Module] it read is the inspection's Artifact: a run uses it as it is.
//
// A module being admitted is validated whole (wazero compiles it once, in
// its interpreter). An admitted one (its digest matched an authenticated
// grant) has its imports read and checked again — the grant must still
// hold — but is not compiled again here: the run compiles it, or loads its
// compiled code from cordon's cache.
func (Enforcer) Inspect(ctx context.Context, artifact []byte, admitted bool) (substrate.Inspection, error) {
	m, err := Load(artifact)
	if err != nil {
		return substrate.Inspection{}, err
	}
	sigs, err := wasiSignatures()
	if err != nil {
		return substrate.Inspection{}, err
	}
	var need []capabilities.Capability
	for _, imp := range m.imports {
		if err := checkImport(imp, sigs); err != nil {
			return substrate.Inspection{}, err
		}
		if imp.Module == ModuleCordon {
			c, err := capabilities.Import(ModuleCordon, imp.Name)
			if err != nil {
				return substrate.Inspection{}, &ImportError{Import: imp, Reason: err.Error()}
			}
			need = append(need, c)
		}
	}
	if !admitted {
		if err := validate(ctx, artifact); err != nil {
			return substrate.Inspection{}, err
		}
	}
	return substrate.Inspection{Needs: need, Artifact: m}, nil
}

// validate compiles the module without running it (wazero's validation)
// and checks that it is a WASI command: it exports _start and its memory.
func validate(ctx context.Context, bin []byte) error {
	r := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigInterpreter())
	defer r.Close(ctx)
	cm, err := r.CompileModule(ctx, bin)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrModule, err)
	}
	if _, ok := cm.ExportedFunctions()["_start"]; !ok {
		return fmt.Errorf("%w: the module exports no _start function: build a WASI command (GOOS=wasip1 GOARCH=wasm go build)", ErrModule)
	}
	if len(cm.ExportedMemories()) == 0 {
		return fmt.Errorf("%w: the module exports no memory", ErrModule)
	}
	return nil
}
