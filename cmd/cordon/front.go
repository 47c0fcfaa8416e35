//go:build cordon_front

package main

// frontEnd is true: this is cordon's front end, built with the tag
// cordon_front. It runs exec and fs itself and links neither the
// WebAssembly engine, the MCP server, the YAML and JSON-schema decoders,
// nor the DSSE library, whose initialisation every process of a binary
// pays before main (~1 ms here); every other command, and exec with a
// receipt or unattended, it hands to the full binary beside it
// ([env.handOff]).
const frontEnd = true

// runMCP is never reached: mcp is not a front command, and the front end
// hands it off before it would run.
func runMCP(e *env, _ []string) int { return e.handOff() }
