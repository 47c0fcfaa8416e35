// Package runtime runs what admission prepared — an admitted tool or an
// ad-hoc command with its capability set ([admission.Prepared]) — on the
// substrate its grant names, and returns one [Result]. Every front end
// calls it: cordon exec, cordon run, a library program, the MCP server.
//
// # Running
//
// [Runtime.Run] turns the grant into the substrate's own policy and runs
// it there: a native tool or command in a bubblewrap sandbox
// ([bwrap.PolicyOf], [bwrap.Run]), on the host when the grant names the
// host substrate (cordon exec --no-sandbox; never chosen silently), a
// WebAssembly tool in process ([wasm.Engine]), whose compiled code the
// Runtime keeps across runs and in the per-user cache directory. Time and
// output are bounded by the grant; the whole process tree is gone when Run
// returns.
//
// Everything that ran is a Result — an exit code, a timeout, a signal, a
// command not found (127) or not executable (126), a trap (134) — never a
// panic. An error means nothing ran (the sandbox is unavailable or could
// not be set up, a protected path cannot be protected, the workspace is
// refused), and the Result that comes with it never reads as a success:
// its exit code is the error's ([refusal.ExitCode]) and it is not
// sandboxed. Errors carry a [refusal.Kind].
//
// A resident Runtime hands the last step of a native run — giving up the
// workspace's run lock and, when no other run holds it, removing the
// placeholders — to a goroutine, so that the Result comes back sooner;
// [Runtime.Close] waits for every such step.
//
// # Result
//
// The [substrate.Outcome] (exit code, signal, timed out, canceled, the
// bounded stdout and stderr with exact byte counts, duration, notes), the
// substrate, whether it was sandboxed, the mechanisms that confined it (as
// the grant quotes them), the tool and its digest, whether the grant was
// made again for a changed host, and for a module its trap, its cordon/log
// lines and what the guard refused it. Notes say what cordon did after the
// run that the caller should know: a repository the run entered in the
// index as a submodule was moved to quarantine, say.
//
// # Limitations
//
//   - Inside the sandbox, a command killed by a signal is reported as bwrap
//     reports it, exit code 128+N; the signal field is set only when cordon
//     observed it directly (the host substrate) or sent it (timeout,
//     cancellation).
//   - 126 and 127 follow the shell's convention: a command that itself exits
//     with 127 looks like a command not found.
//   - There is no limit on memory, CPU or process count for native runs
//     yet; the time bound is wall-clock.
//   - Each sandboxed run holds one anonymous keyring while it runs, counted
//     against the user's key quota (kernel/keys/maxkeys, 200 by default for
//     a non-root user): very many concurrent runs of one user fail to start
//     ([bwrap.ErrSetup]) rather than share the caller's keyring.
//   - Stdin is passed on as it is: when it is a terminal, the command can
//     read it and write to it (it cannot make it its controlling terminal
//     or inject input: it runs in a new session).
//   - Linux only for the sandbox; elsewhere only wasm and the host
//     substrate run.
package runtime
