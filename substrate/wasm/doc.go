// Package wasm is cordon's WebAssembly substrate: model-authored tools
// compiled to WebAssembly run in cordon's own process on wazero, with no
// system package at all. It is the embedded default, the one that works on
// any machine.
//
// # What a module can do
//
// A module can do only what the host exports to it. Two host modules exist:
//
//   - wasi_snapshot_preview1: wazero's WASI preview 1, with the workspace
//     mounted at the guest's "/" through the same guard as the direct file
//     tools ([workspace.Workspace]: resolved beneath the workspace by the
//     kernel, symlinks followed only while they stay inside, harness state
//     absent). wazero's own directory mount follows symlinks out of the
//     mount (wazero #2321) and is never used. The mount is read-only unless
//     fs.write:workspace is granted (writable opens answer EROFS), and
//     absent without a file-system grant. Every WASI function is wazero's
//     own but proc_raise (a stub answering ENOTCAPABLE, errno 76), so a
//     module built by a standard toolchain, which imports the whole WASI
//     set, is admitted with the capabilities it actually uses and sees
//     wazero's errnos (EBADF before anything cordon decides): without a
//     grant nothing is preopened, without fs.write every change answers
//     EROFS, and no socket is ever given.
//   - cordon: read, write, list, stat a workspace file, log, and the last
//     refusal (docs/wasm-abi.md). Each pointer and length is bounds-checked
//     against guest memory and copied out before it is validated.
//
// Any other import — an unknown module or function, a memory, table or
// global import, a function of the wrong type — refuses the module at
// admission ([Enforcer.Inspect], [Policy.Plan]) with a reason naming the
// import, and [Engine.Run] re-checks the imports before it links anything.
//
// # Limits
//
// Memory is capped in 64KiB pages from the memory capability (one wazero
// runtime per distinct limit and file-system grant). Execution stops at
// the deadline: the runtime closes a module when its context is done
// (WithCloseOnContextDone), and the one host function that can block —
// poll_oneoff's sleep — wakes at the deadline. stdout and stderr go to
// bounded head+tail captures. A trap, proc_exit or the deadline is a
// [Result], never a crash of cordon.
//
// Every call gets a fresh module instance: no memory, globals or
// descriptors survive a call or pass between tools. Compiled code is
// reused in process and, with [Config.CacheDir], from disk by a second
// process.
//
// # Limitations
//
//   - The compilation cache is machine code that cordon runs: it lives in
//     the per-user cache directory ([CacheDir]: 0700, owner and mode
//     checked, outside every workspace and hidden from every sandbox), and
//     is trusted on that alone. A command run with --no-sandbox as the same
//     user can write it, and could then run code in cordon's process.
//   - Guest memory lives inside cordon's process, in one anonymous mapping
//     per instance: a module at its cap holds that much of cordon's memory
//     until the call ends (then it is unmapped).
//   - The deadline is checked at function entries and loop back-edges; on
//     tight loops it costs several times the loop's speed (see the README
//     for the measured figure). It is never switched off.
//   - Changes without fs.write answer EROFS, as on a read-only mount;
//     wazero's file-system interface has no ENOTCAPABLE to return.
//   - The guest sees the workspace as "/"; absolute host paths of the
//     workspace do not resolve inside the guest. Modes cannot be changed
//     (ENOSYS). wazero cleans a path lexically before the guard sees it:
//     "a/../b" after a symlink a names "./b", not the kernel's file.
//   - No network: modules get no socket functions, and net:host is refused.
//   - A module that declares a memory maximum above its cap does not run
//     (wazero refuses it when compiling): grant a cap at least its maximum,
//     or build it without one (Go's toolchain declares none).
//   - The engine keeps one wazero runtime, with its own compiled code, per
//     distinct memory cap and file-system grant it has run.
package wasm
