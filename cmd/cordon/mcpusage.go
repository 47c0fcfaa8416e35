package main

// The mcp command, registered in every build: the front end lists and
// describes it, and hands it to the full binary (mcp.go is the full
// binary's, front.go the front end's runMCP).

func init() {
	register(command{name: "mcp", summary: "serve the workspace's tools over the Model Context Protocol (stdio)", usage: mcpUsage, run: runMCP})
}

const mcpUsage = `usage: cordon mcp [-w DIR] [--autonomy supervised|unattended] [--net none|host]
                  [--substrate bwrap|landlock|oci] [--no-sandbox] [--memory SIZE] [--pids N]
                  [--timeout D] [--max-timeout D] [--env NAME]... [--pool N] [--allow-host H]...

Serves the workspace over MCP on stdin/stdout: read_file, write_file, edit_file,
list_dir, bash (each call in a fresh sandbox), register_tool, and every admitted
tool as a tool of its own (tools/list_changed when the set changes). The
sandbox, substrate, network, limits, harness state and autonomy level are fixed
here, for the server's life: no tool argument changes them, and no tool
registered from the conversation is granted the network under --net none, or a
variable of the server's environment that --env does not name. With --autonomy
unattended the server starts only where every precondition holds (cordon
autonomy check), and checks them again before every run.

--allow-host H (repeatable; bwrap) gives bash, in place of no network, the
host H alone through cordon's egress proxy, as cordon exec --allow-host does;
a registered tool may be granted those hosts and no other network. Such calls
are not pooled. The results carry the proxy's log ("egress").

On bwrap the server keeps --pool sandboxes (default 4) made ahead of bash's
calls: each is exactly the sandbox a call would get new — checked again at the
call, the protected paths included — and serves one call.

An MCP client's configuration:
  {"mcpServers": {"cordon": {"command": "cordon", "args": ["mcp", "-w", "/path/to/workspace"]}}}`
