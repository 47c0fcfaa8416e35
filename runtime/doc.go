// Package runtime runs one native command on a substrate, bounds its time
// and its output separately, kills its whole process tree, and returns what
// happened as a [Result] value.
//
// # Running
//
// [Run] takes a [Spec]: the command, the [bwrap.Policy] it runs under, a
// timeout, an output bound per stream and the caller's environment (from
// which the policy's allow-list draws). By default the command runs in a
// bubblewrap sandbox; [Spec.NoSandbox] runs it on the host instead, which
// is never chosen silently: every Result says which substrate ran it and
// whether it was sandboxed. When bubblewrap is missing or cannot create a
// sandbox, Run fails with [bwrap.ErrUnavailable] and the command does not
// run.
//
// Everything that ran is a Result — an exit code, a timeout, a signal, a
// command not found (127) or not executable (126) — never a panic. An
// error means the command did not run: the sandbox is unavailable, the
// policy refused to start ([bwrap.ErrProtectedPath]), or the Spec is
// invalid ([ErrInvalidSpec]).
//
// # The process tree
//
// The command starts in a session and process group of its own. In the
// sandbox it runs under bwrap's init in a private PID namespace: when that
// init dies, the kernel kills every process of the namespace, including
// grandchildren that called setsid(2) and double-forked. On the deadline,
// on cancellation of the context (cordon's CLI cancels it on SIGINT and
// SIGTERM), every descendant gets SIGTERM, then, after [Spec.Grace],
// SIGKILL together with bwrap and its init. When the command exits, its
// namespace dies with it: no process a run started outlives it, background
// jobs included.
//
// # Output
//
// Standard output and error are read to the end through large pipes with
// large reads, and each keeps only a bounded head and tail
// ([capture.Buffer], [Spec.MaxOutput] bytes per stream): memory stays flat
// however much the command prints, the byte counts are exact, and a clipped
// stream says how many bytes were dropped. Should a descriptor of the
// output pipes survive the tree, Run stops reading shortly after the
// command is gone and still returns.
//
// # Limitations
//
//   - On the host substrate the command runs as PID 1 of a private PID
//     namespace when the kernel allows it (as root, or through a user
//     namespace that maps the caller's own IDs). /proc there still shows the
//     host, setuid programs such as sudo do not gain privileges in that user
//     namespace, and a command that ignores SIGTERM as PID 1 is killed at the
//     end of the grace period. Where no namespace can be created the tree is
//     the process group plus the descendants linked by parent, and a process
//     that both leaves the group and loses its parent can outlive the run;
//     the Result's mechanisms say which applied.
//   - Inside the sandbox, a command killed by a signal is reported as bwrap
//     reports it, exit code 128+N; the signal field is set only when cordon
//     observed it directly (the host substrate) or sent it (timeout,
//     cancellation).
//   - 126 and 127 follow the shell's convention: a command that itself exits
//     with 127 looks like a command not found.
//   - There is no limit on memory, CPU or process count yet; the time bound
//     is wall-clock.
//   - Linux only for the sandbox; elsewhere only the host substrate runs.
package runtime
