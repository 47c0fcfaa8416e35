// Package workspace is the guard behind cordon's direct file tools: read,
// write, list, stat and edit files inside one workspace directory, and
// nowhere else.
//
// # The boundary
//
// A [Workspace] is one directory, resolved to its canonical path once by
// [Open]. Every path a caller passes (relative to the workspace, or
// absolute and spelled beneath it) names the file the kernel would name:
// it is resolved beneath the workspace one component at a time, ".." from
// the directory reached so far (after a symlink, the parent of the link's
// target), and a trailing "/" requires a directory. Symlinks inside the
// workspace are followed by this package, never by the kernel, and a
// symlink whose target leaves the workspace, or a ".." above it, is refused
// with [ErrOutsideWorkspace].
//
// Deliberate differences from [os.Root], whose semantics the guard
// otherwise shares (tests replay Go's own os.Root tables and compare the
// two side by side): os.Root refuses every absolute symlink, the guard
// follows one whose target is inside the workspace, as if relative to the
// workspace root; os.Root refuses absolute names, the guard accepts one
// spelled beneath the workspace; [Workspace.WriteFile] creates missing
// parents and replaces the file (a new inode) where os.Root writes in place.
// The file is then opened with openat2(2) and RESOLVE_BENEATH |
// RESOLVE_NO_SYMLINKS relative to a directory descriptor held on the
// workspace, so the check and the open are one kernel operation: a symlink
// swapped in after the check makes the open fail instead of escaping.
// (Where openat2 is missing, the same open is done component by component
// with O_NOFOLLOW.)
//
// Harness state — by default the top-level directories ".efferent" and
// ".foundry" — belongs to the program that embeds cordon, not to the tools
// it runs. Reads and writes that reach it by any spelling ("./.efferent",
// "a/../.efferent", ".EFFERENT", a symlink to it) are refused with
// [ErrHarnessState]. The names are set with [WithHarnessState] by the
// embedding program, never by a tool.
//
// # Writes
//
// [Workspace.WriteFile] writes a temporary file in the target's directory,
// syncs it and renames it into place: a crash leaves the old file or the new
// one, never half of one, and a hard link or symlink at the target is
// replaced, never written through. Missing parent directories inside the
// workspace are created.
//
// # Reads
//
// [Workspace.ReadFile] opens regular files only (a FIFO, socket or device
// planted in the workspace is refused without blocking) and refuses files
// larger than the read limit ([WithMaxFileSize]) with [ErrTooLarge].
//
// # Refusals
//
// Every error is a [*PathError] naming the operation, the path as given and
// the boundary; its sentinel ([ErrOutsideWorkspace], [ErrHarnessState],
// [ErrSymlinkLoop], [ErrNotFound], [ErrNotRegular], [ErrTooLarge], ...) can
// be matched with [errors.Is], and the underlying errno stays reachable.
//
// # Limitations
//
//   - The guard is a path check, not a kernel sandbox: it confines the file
//     tools, not a process. Native commands are confined by the bwrap
//     substrate.
//   - A directory that another, unconfined process moves out of the
//     workspace while an operation holds a descriptor on it is not followed
//     out (the descriptor is), as with [os.Root].
//   - Hard links that already exist inside the workspace and point at a file
//     elsewhere are read like any other file: the guard confines names, not
//     inodes. Writes never go through them.
//   - [Workspace.Edit] reads, replaces and writes; a concurrent writer
//     between the read and the rename loses its change.
//   - Linux is the tested platform; other Unix systems use the
//     component-by-component open. There is no Windows support.
package workspace
