// Package bwrap is cordon's bubblewrap substrate: its [Enforcer] (what a
// native tool's capabilities become, and the host facts a grant records),
// the [Policy] that turns a grant into bwrap(1)'s options, the host side of
// the mount table (the protected set, placeholders, the run lock), and
// [Run], which proves the sandbox before the command starts.
//
// # The mount table is the policy
//
// A sandboxed command sees, in this order of mounts:
//
//   - the host's / read-only ([ReadOnlyRoot]), a /dev whose only writable
//     part is a capped /dev/shm, a /proc of its own PID namespace (its
//     /proc/sys read-only: uid 0 writes sysctls by their mode bits);
//   - a fresh tmpfs on /tmp for every call, capped ([DefaultTmpSize],
//     [Policy.WithTmpSize]), and an empty HOME, /tmp/home, on it;
//   - empty, read-only, 1 MiB tmpfs over /home, /root and the caller's own
//     home ([HideHomes]), over /run and /var/run where host services keep
//     their sockets ([HideServiceSockets]), and over cordon's per-user
//     state and cache directories;
//   - the workspace: the one writable bind ([BindWorkspace]), a read-only
//     bind ([ReadOnlyWorkspace]) or an empty tmpfs ([HideWorkspace]),
//     depending on [Access];
//   - with write access, the workspace's protected set
//     ([harness.Config.Protect]): harness state and every write-later path
//     (git's, found from the repository's shape and configuration, and the
//     editors' and agents') bound read-only on top, absent ones masked by
//     a read-only placeholder cordon creates as the mount point, and the
//     directories on the way to them (.git, objects, refs) bound onto
//     themselves, so that they cannot be renamed away and replaced;
//   - the extra read-only binds the policy names, on top of everything
//     else, so a tool's own files under .efferent are visible even when
//     the workspace is hidden.
//
// A harness or write-later path that is a symlink, or has a symlink on the
// way to it, is refused with [ErrProtectedPath]: bubblewrap would follow
// it. Placeholders are shared by the runs of a workspace and removed by
// the last one (package internal/placeholder explains the lock); a run does
// not start while a run of an enclosing or a nested workspace is going on.
//
// The process runs in new user, PID, IPC, UTS and cgroup namespaces with
// every capability dropped and no further user namespaces allowed, in a
// new session, killed when bwrap dies. The network is unshared unless the
// policy says [NetHost]. The environment is exactly PATH (led by
// <workspace>/.local/bin, or the system directories only with
// [Policy.WithSystemPath]), HOME, LANG, TERM, PWD and the names the policy
// grants; it reaches bwrap as its environment and the options on a pipe,
// never on its command line. The command inherits no descriptor but its
// standard streams ([NoInheritedFDs]). The same flags hold when cordon runs
// as root: root maps onto itself in the new user namespace, where it holds
// no capability and cannot remount anything.
//
// # Failing closed
//
// [Run] starts bwrap with --json-status-fd and --block-fd: bwrap reports
// the sandbox's init as soon as the namespaces exist and waits. Run checks
// from outside that this process lives in namespaces of its own, not
// cordon's, and only then lets bwrap finish and start the command, as PID 2
// of that PID namespace. bwrap reports an exit code only for a command it
// executed in the finished sandbox: a run without one never started. A
// bwrap program inside the workspace is refused, never run. [Detect]
// answers whether bubblewrap can create a sandbox on this host by creating
// one with the same namespace flags, and remembers the answer for each
// bwrap binary for the life of the process; a run that started is such an
// answer too. [Find] and [Unavailable] build the error every caller
// reports when it cannot: [ErrUnavailable], whose message names the fix.
//
// # Limitations
//
//   - Reads through the sandbox see every host file the caller may read
//     outside the hidden directories. When cordon runs as root, that
//     includes files only root may read (/etc/shadow): the sandboxed process
//     is uid 0 without capabilities, and owner permissions still apply.
//   - Host sockets outside the hidden directories remain reachable by path;
//     with [NetHost] abstract Unix sockets and every network service are
//     reachable too.
//   - The rest of .git — the index, refs, objects, packed-refs — is data a
//     command may change, and a command can plant a whole new repository in
//     any subdirectory of the workspace, whose configuration runs when
//     someone runs git there.
//   - No limit on memory, CPU or process count yet; tmpfs caps are in
//     bytes, not inodes.
//   - bubblewrap and user namespaces are Linux only; elsewhere [Detect]
//     reports the sandbox unavailable.
package bwrap
