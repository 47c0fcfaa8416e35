// Package capabilities is cordon's vocabulary of what a tool may do: plain
// values that parse from, and print to, one canonical string each.
//
// # The vocabulary
//
//	fs.read:workspace          read the workspace (harness state excluded)
//	fs.write:workspace         write the workspace (harness state excluded)
//	net:none                   no network at all (the default when nothing is asked)
//	net:host                   the host's network, unfiltered
//	net.connect:tcp:PORT       outgoing TCP connections to PORT (1–65535) only
//	net.connect:host:NAME      outgoing connections to the host NAME only
//	env:NAME                   the caller's environment variable NAME
//	time:DURATION              wall-clock limit, e.g. 10s, 1m30s (0 < d ≤ 24h)
//	output:SIZE                bytes kept of stdout and of stderr, e.g. 64KiB
//	memory:SIZE                memory limit, e.g. 256MiB
//	pids:N                     at most N processes (1–65536)
//	cpu:DURATION               at most DURATION of processor time (e.g. 10s)
//	wasm.import:MODULE/NAME    a host function a WebAssembly module may import
//
// Sizes are plain bytes ("65536") or a whole number of KiB, MiB, GiB or TiB
// ("64KiB"); durations use Go's syntax ("1m30s", "500ms"). A value out of
// range — a zero or negative duration, a port above 65535, a size that
// overflows — is an error ([ErrRange]), never clamped. [Capability.String]
// prints the canonical spelling ("65536" prints as "64KiB", "90s" as
// "1m30s"), so two spellings of one capability compare equal.
//
// A [Set] is a list with canonical order in which duplicates and
// contradictions (net:none with net:host, two time: values) are errors.
// Anything a set does not hold is denied: an empty set grants nothing.
//
// # Limitations
//
// The package says what a capability means, not whether anything can
// enforce it: that is the business of the substrates and of admission, which
// refuse what no mechanism on the host can enforce. Host names in
// net.connect:host are checked for syntax only.
package capabilities
