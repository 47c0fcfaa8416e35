// Package admission decides what a model-authored tool may do: it accepts
// a tool declaration and grants only the capabilities it can name an
// enforcement mechanism for, or refuses with reasons a model can act on.
//
// # The pipeline
//
// [Admitter.Admit] runs a declaration through a list of small, named checks
// ([Checks]): decode (strict JSON or YAML, see [Decode]) → validate →
// capabilities (each parses, no duplicates or conflicts) → env (no variable
// that changes how programs load or run) → combinations → files (read
// beneath the declaration's folder through the workspace guard) → command
// (a native command resolves to the tool's own files or a read-only host
// program) → inspect (the substrate reads the artifact, e.g. a wasm
// module's imports) → input-schema (compiles, no remote references) →
// substrate (available on this host) → resolve (every capability, and every
// default limit, resolves to at least one mechanism of the tool's
// substrate, a [substrate.Enforcer]). The result is an [*Admission] holding
// a [Grant], or a [*Refusal] listing every [Reason] — the capability or
// field, what blocked it, what to ask for instead. A tool is refused unless
// every capability it asks for is granted; nothing is granted at a weaker
// strength, and nothing not asked for is granted: an empty capability list
// grants nothing (such a tool still runs, hidden from the workspace and the
// network, under the default time and output limits).
//
// # Native tools
//
// A native declaration names "command" and may bring "files". Paths are
// relative to the declaration's folder (for a declaration on stdin, the
// workspace). An element of command equal to the clean relative path of
// one of the tool's files ("tool.sh" or "./tool.sh") names that file: it
// is rewritten to the file's read-only copy in the registry and recorded in
// [Grant.FileArgs]. Any other program must be a bare name found on
// [SandboxPath] or an absolute path, resolving (symlinks followed) to a
// regular executable outside the workspace and outside writable places
// (/tmp, /home, /root, /run, ...), not writable by everyone. The tool runs
// with the workspace root as its working directory.
//
// For native tools ([Native]): fs.read:workspace binds the workspace
// read-only; fs.write:workspace binds it writable with harness state and
// write-later paths read-only, and must come with fs.read:workspace (a
// bind cannot be write-only; it is not granted silently); without either,
// the workspace is hidden. net:none unshares the network and is the
// default; net:host shares it. net.connect, memory, pids and wasm.import
// are refused: bubblewrap cannot filter connections, and no limit is
// applied that could back the others.
//
// # The registry
//
// [Registry] stores admitted tools content-addressed under
// .efferent/tools: objects/sha256/HEX/{manifest.json, declaration.json,
// files/...} never change once published; grants/NAME.json, the tool's
// [Grant], names its object and is replaced by one atomic rename, so a
// registration is all or nothing and a re-admitted declaration replaces
// the old grant only when it was admitted. [Registry.Load] re-hashes the
// object against the grant's digest.
//
// # Running
//
// [Admitter.Prepare] loads a tool, re-makes its grant when the host's
// [substrate.Facts] differ from those it was made under ([Admitter.Recheck];
// a [*HostChangedError] when the host can no longer enforce it), checks the
// input against the tool's input_schema ([Tool.CheckInput]) and translates
// the grant into a runtime.Spec ([Admitter.Spec]) that holds the tool to it.
//
// # Limitations
//
//   - The mechanisms a grant quotes are descriptions of what the substrate
//     applies; evidence that they work on this host is a separate step.
//   - A native tool with fs.read:workspace can read harness state
//     (read-only), as cordon's shell can: the bwrap substrate binds it
//     read-only, it does not hide it.
//   - The host programs a native command names are checked at admission and
//     again when the host's facts change, not pinned by digest: an update
//     of /usr/bin/python3 by the system is accepted.
//   - Sub-processes of a native tool find programs on the sandbox's PATH,
//     which the bwrap substrate leads with <workspace>/.local/bin.
//   - wasm tools are admitted through the wasm substrate's Enforcer and
//     Inspector when one is configured; [Admitter.Spec] runs native tools
//     only.
//   - The registry uses descriptor-relative Unix calls; it is not built for
//     Windows.
package admission
