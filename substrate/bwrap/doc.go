// Package bwrap is cordon's bubblewrap substrate: it turns a [Policy] into
// the argument list of the system's bwrap(1) binary, prepares the host side
// of the mount table, and tells a sandbox that could not be created from a
// command that failed.
//
// # The mount table is the policy
//
// A sandboxed command sees, in this order of mounts:
//
//   - the host's / read-only ([ReadOnlyRoot]), a fresh /dev and a /proc of
//     its own PID namespace;
//   - a fresh tmpfs on /tmp for every call ([TmpfsTmp]) and an empty HOME,
//     /tmp/home, on it ([EmptyHome]);
//   - empty tmpfs over /home, /root and the caller's own home directory
//     ([HideHomes]), and over /run and /var/run where host services keep
//     their sockets ([HideServiceSockets]);
//   - the workspace: the one writable bind ([BindWorkspace]), a read-only
//     bind ([ReadOnlyWorkspace]) or an empty tmpfs ([HideWorkspace]),
//     depending on [Access];
//   - with write access, harness state (".efferent", ".foundry") re-bound
//     read-only on top ([ReadOnlyHarness]), and the write-now-execute-later
//     paths (".git/hooks", ".git/config", ".git/commondir", ".git/modules",
//     ".git/worktrees": [DefaultWriteLater]) too ([ReadOnlyWriteLater]), with
//     the directories on the way to them (".git") bound onto themselves so
//     that they cannot be renamed away and replaced ([PinParents]);
//   - the extra read-only binds the policy names ([ReadOnlyBinds]), on top
//     of everything else, so a tool's own files under .efferent are visible
//     even when the workspace is hidden.
//
// Harness directories that do not exist yet are created (mode 0700) before
// the sandbox starts, so that a tool cannot plant them. An absent
// write-later path is masked by a read-only placeholder that cordon creates
// as the mount point: an empty directory, an empty file, or for
// ".git/commondir" a file naming the git directory itself (".") — what
// git reads as if it were absent. Placeholders inside an existing ".git"
// stay (another run of the workspace may have them mounted); an empty
// ".git" made for a workspace that has none is removed after the run when
// it is still empty (a tool cannot "git init" a repository whose
// configuration would run commands later).
// A harness or write-later path that is a symlink, or has a symlink on the
// way to it, is refused with [ErrProtectedPath]: bubblewrap would follow
// it.
//
// The process runs in new user, PID, IPC, UTS and cgroup namespaces with
// every capability dropped and no further user namespaces allowed
// ([UnshareUser], [CapDrop], [UnsharePID], [UnshareIPC]), in a new session
// ([NewSession]), killed when bwrap dies ([DieWithParent]). The network is
// unshared unless the policy says [NetHost] ([UnshareNet], [ShareNet]).
// The environment is exactly PATH (led by <workspace>/.local/bin), HOME,
// LANG, TERM and the names the policy grants ([ClearEnv]); it reaches bwrap
// as its environment, never on its command line. The command inherits no
// descriptor but its standard streams: [Sandbox.Command] marks every other
// descriptor of the calling process close-on-exec, since bwrap passes on
// what it inherits ([NoInheritedFDs]).
//
// The same flags hold when cordon runs as root: bwrap then maps root onto
// itself in the new user namespace, where it holds no capability and cannot
// remount anything.
//
// # Failing closed
//
// [Sandbox.Command] runs the command through a small /bin/sh prologue
// inside the sandbox that checks it runs as PID 2 of a new PID namespace
// (a "bwrap" that runs it on the host fails here), reports on a pipe that
// the sandbox was set up, then executes the command (so a command that is
// not found or not executable exits 127 or 126, as in a shell). A run whose
// prologue never reported was never sandboxed: the command did not start.
// [Detect] answers whether bubblewrap can create a sandbox on this host by
// creating one, and remembers the answer for each bwrap binary for the life
// of the process; a command that started in a sandbox is such an answer
// too. [Find] and [Unavailable] build the error every caller reports when
// it cannot: [ErrUnavailable], whose message names the fix.
//
// # Limitations
//
//   - Reads through the sandbox see every host file the caller may read
//     outside the hidden directories. When cordon runs as root, that
//     includes files only root may read (/etc/shadow): the sandboxed process
//     is uid 0 without capabilities, and owner permissions still apply.
//   - Host sockets outside /run, /var/run, /tmp and the hidden homes remain
//     reachable by path; with [NetHost] abstract Unix sockets and every
//     network service are reachable too.
//   - A writable .git still lets a tool change data later git commands
//     read — the index, refs, objects, packed-refs, info/attributes — and a
//     tool can plant a whole new repository in any subdirectory of the
//     workspace, whose configuration runs when someone runs git there. A
//     harness that runs git after a tool with write access should protect
//     all of ".git/" with [Policy.WithWriteLater] and treat nested
//     repositories as untrusted.
//   - An empty .git that cordon made for a workspace without one stays on
//     the host if cordon is killed before it can remove it (git ignores
//     it); placeholders inside an existing .git always stay.
//   - No limit on memory, disk (the tmpfs /tmp is bounded by the kernel's
//     default of half the RAM) or process count yet.
//   - bubblewrap and user namespaces are Linux only; elsewhere [Detect]
//     reports the sandbox unavailable.
package bwrap
