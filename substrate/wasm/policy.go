package wasm

import (
	"fmt"
	"strings"
	"time"

	"github.com/cordon-run/cordon/capabilities"
	"github.com/cordon-run/cordon/substrate"
)

// Defaults for a call whose grant sets no limit.
const (
	DefaultTimeout     = 10 * time.Second
	DefaultMemoryLimit = 64 << 20 // 1024 pages
	DefaultOutputLimit = 64 << 10
	// PageSize is the size of a WebAssembly memory page.
	PageSize = 65536
	// MaxMemoryLimit is the largest memory a 32-bit module can address.
	MaxMemoryLimit = 65536 * PageSize
)

// Policy is what one call of a module may do: the part of a grant that
// the wasm substrate enforces. Build it from a grant's capabilities with
// [PolicyOf].
type Policy struct {
	Read        bool          // fs.read:workspace: the workspace is mounted read-only
	Write       bool          // fs.write:workspace: mounted read-write (implies Read)
	Imports     []string      // granted host functions, "cordon/log"
	Env         []string      // env:NAME: variables passed from the caller's environment
	MemoryLimit int64         // memory:SIZE in bytes, a multiple of PageSize
	Timeout     time.Duration // time:DURATION
	OutputLimit int64         // output:SIZE, bytes kept of stdout and of stderr each
}

// PolicyOf builds the policy of a capability set, with the defaults for
// limits the set does not hold. It fails for a capability the wasm
// substrate cannot enforce, with the same error as [Enforcer.Mechanisms].
func PolicyOf(set capabilities.Set) (Policy, error) {
	p := Policy{MemoryLimit: DefaultMemoryLimit, Timeout: DefaultTimeout, OutputLimit: DefaultOutputLimit}
	for _, c := range set.All() {
		if _, err := mechanisms(c, set); err != nil {
			return Policy{}, err
		}
		switch c.Kind() {
		case capabilities.KindFSRead:
			p.Read = true
		case capabilities.KindFSWrite:
			p.Read, p.Write = true, true
		case capabilities.KindWasmImport:
			m, n := c.Import()
			p.Imports = append(p.Imports, m+"/"+n)
		case capabilities.KindEnv:
			p.Env = append(p.Env, c.Name())
		case capabilities.KindMemory:
			p.MemoryLimit = c.Size()
		case capabilities.KindTime:
			p.Timeout = c.Duration()
		case capabilities.KindOutput:
			p.OutputLimit = c.Size()
		}
	}
	return p, nil
}

// pages returns the memory limit in pages.
func (p Policy) pages() uint32 { return uint32(p.MemoryLimit / PageSize) }

func (p Policy) validate() error {
	if p.MemoryLimit < PageSize || p.MemoryLimit > MaxMemoryLimit || p.MemoryLimit%PageSize != 0 {
		return fmt.Errorf("wasm: memory limit %d is not a whole number of 64KiB pages between 64KiB and 4GiB", p.MemoryLimit)
	}
	if p.Timeout <= 0 {
		return fmt.Errorf("wasm: timeout %v is not positive", p.Timeout)
	}
	if p.OutputLimit <= 0 {
		return fmt.Errorf("wasm: output limit %d is not positive", p.OutputLimit)
	}
	return nil
}

func (p Policy) granted(module, name string) bool {
	for _, i := range p.Imports {
		if i == module+"/"+name {
			return true
		}
	}
	return false
}

// String describes the policy for messages and evidence, e.g.
// "workspace read-only, memory 1024 pages, time 10s, output 64KiB, imports cordon/log".
func (p Policy) String() string {
	var parts []string
	switch {
	case p.Write:
		parts = append(parts, "workspace read-write")
	case p.Read:
		parts = append(parts, "workspace read-only")
	default:
		parts = append(parts, "no workspace")
	}
	parts = append(parts, fmt.Sprintf("memory %d pages", p.pages()),
		"time "+capabilities.FormatDuration(p.Timeout), "output "+capabilities.FormatSize(p.OutputLimit))
	if len(p.Env) > 0 {
		parts = append(parts, "env "+strings.Join(p.Env, ","))
	}
	if len(p.Imports) > 0 {
		parts = append(parts, "imports "+strings.Join(p.Imports, ","))
	}
	return strings.Join(parts, ", ")
}

// The mechanisms the wasm substrate names in grants.
var (
	MechGuardRead = substrate.Mechanism{Substrate: Name, Name: "wasi-guard-ro",
		Detail: "WASI file system at / is the workspace through the workspace guard (openat2 RESOLVE_BENEATH), read-only: writable opens, path_create_directory, path_unlink_file, path_remove_directory, path_rename, path_symlink, path_link and time changes answered EROFS"}
	MechGuardWrite = substrate.Mechanism{Substrate: Name, Name: "wasi-guard-rw",
		Detail: "WASI file system at / is the workspace through the workspace guard (openat2 RESOLVE_BENEATH), read-write; no write through a hard link"}
	MechHarnessAbsent = substrate.Mechanism{Substrate: Name, Name: "harness-absent",
		Detail: "harness state absent from the guest file system (not listed, ENOENT to open, EACCES to create)"}
	MechWriteLater = substrate.Mechanism{Substrate: Name, Name: "write-later-refused",
		Detail: "write-later paths (git's configuration, hooks and HEAD, editor and agent settings, ...) refused by the workspace guard, present or absent: EACCES"}
	MechLinksInside = substrate.Mechanism{Substrate: Name, Name: "links-not-followed-out",
		Detail: "path_symlink may write any target, as a native tool may; the guard never follows a link out of the workspace; path_link refuses protected files and directories"}
	MechNoMount = substrate.Mechanism{Substrate: Name, Name: "wasi-no-mount",
		Detail: "no directory is preopened: every WASI path_* function answers EBADF (or ENOTDIR for stdio)"}
	MechNoNet = substrate.Mechanism{Substrate: Name, Name: "wasi-no-socket",
		Detail: "no socket is preopened and none can be opened: sock_accept, sock_recv, sock_send, sock_shutdown answer EBADF or ENOTSOCK"}
	MechDeadline = substrate.Mechanism{Substrate: Name, Name: "close-on-deadline",
		Detail: "module closed when the call's deadline passes (wazero WithCloseOnContextDone); poll_oneoff sleeps end at the deadline"}
	MechOutput = substrate.Mechanism{Substrate: Name, Name: "bounded-stdio",
		Detail: "stdout and stderr written to bounded head+tail captures"}
	MechNoProcesses = substrate.Mechanism{Substrate: Name, Name: "no-processes",
		Detail: "a module runs in cordon's process and cannot create processes"}
	MechEnviron = substrate.Mechanism{Substrate: Name, Name: "environ",
		Detail: "environ holds only the granted variables"}
	MechFreshInstance = substrate.Mechanism{Substrate: Name, Name: "fresh-instance",
		Detail: "a new module instance per call: no memory, globals or descriptors survive a call"}
)

// MechMemory names the memory cap of a policy.
func MechMemory(pages uint32) substrate.Mechanism {
	return substrate.Mechanism{Substrate: Name, Name: "memory-limit",
		Detail: fmt.Sprintf("memory limited to %d pages (wazero WithMemoryLimitPages)", pages)}
}
