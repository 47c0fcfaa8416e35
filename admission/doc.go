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
// module's imports) → input-schema (passes the schema rules and compiles,
// no remote references) →
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
// # Input schemas
//
// A tool's input_schema is JSON Schema, draft 2020-12 unless "$schema"
// names draft-07 (any other "$schema" is refused), validated with
// google/jsonschema-go, the validator of the official MCP Go SDK.
// [CompileSchema] runs it first through a short list of named rules
// ([SchemaRules]) that close what that library accepts silently and a
// meta-schema would not: "$schema" and "$id" only at the root; no keyword
// of the other draft (which the validator would ignore); no key that
// differs from a keyword only in case; known type names; counts not
// negative; multipleOf above 0; and no loop of $ref, allOf, anyOf, oneOf,
// not, if/then/else or dependentSchemas that applies a schema to the same
// value again ({"$ref": "#"}), on which the validator would recurse until
// the process died. Each problem is one [Reason]. References resolve
// within the schema; there is no loader, so a "$ref" to another document
// is refused.
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
//   - Input validation stops at the first problem the validator finds (it
//     reports one, with where in the schema it failed, not where in the
//     input). Numbers are compared as float64, so integers beyond 2^53 are
//     compared approximately (the tool still receives the input as
//     written). "pattern" is Go's RE2 syntax, not ECMA 262 (no
//     look-around or back-references); "format" is not asserted.
//   - A schema can make validation slow without looping: anyOf and allOf
//     that branch at every level of a deep input multiply the work (the
//     input is at most [MaxInputSize] bytes and [MaxDepth] levels deep).
package admission
