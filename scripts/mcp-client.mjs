// An independent MCP client on the official TypeScript SDK, run by
// scripts/test against `cordon mcp`: it lists the tools, reads a file,
// gets a refusal, runs bash, registers a wasm tool, sees
// notifications/tools/list_changed, and calls the tool.
//
//   node scripts/mcp-client.mjs CORDON WORKSPACE MODULE.wasm DECLARATION.json
// (NODE_PATH names the folder holding node_modules/@modelcontextprotocol/sdk)
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";

const [cordon, ws, wasm, decl] = process.argv.slice(2);
const require = createRequire(path.join(process.env.NODE_PATH || process.cwd(), "x.js"));
const { Client } = await import(require.resolve("@modelcontextprotocol/sdk/client/index.js"));
const { StdioClientTransport } = await import(require.resolve("@modelcontextprotocol/sdk/client/stdio.js"));
const { ToolListChangedNotificationSchema } = await import(require.resolve("@modelcontextprotocol/sdk/types.js"));

function fail(msg) {
  console.error("mcp-client: FAIL: " + msg);
  process.exit(1);
}
const text = (res) => res.content.map((c) => c.text || "").join("");

const client = new Client({ name: "cordon-ts-test", version: "1" });
let changed = 0;
client.setNotificationHandler(ToolListChangedNotificationSchema, () => { changed++; });
await client.connect(new StdioClientTransport({ command: cordon, args: ["-w", ws, "mcp"], env: process.env, stderr: "inherit" }));

const names = (await client.listTools()).tools.map((t) => t.name);
for (const want of ["read_file", "write_file", "edit_file", "list_dir", "bash", "register_tool"]) {
  if (!names.includes(want)) fail(`tools/list lacks ${want}: ${names}`);
}
let res = await client.callTool({ name: "read_file", arguments: { path: "a.txt" } });
if (res.isError || !text(res).includes("TODO")) fail("read_file: " + JSON.stringify(res));
res = await client.callTool({ name: "read_file", arguments: { path: "../../etc/passwd" } });
if (!res.isError || JSON.parse(text(res)).error !== "OutsideWorkspace") fail("no refusal: " + JSON.stringify(res));
res = await client.callTool({ name: "bash", arguments: { command: "echo from-bash; touch /etc/cordon-ts-probe" } });
const out = JSON.parse(text(res));
if (!out.stdout.includes("from-bash") || out.sandboxed !== true || !res.isError) fail("bash: " + JSON.stringify(out));
res = await client.callTool({
  name: "register_tool",
  arguments: { declaration: JSON.parse(readFileSync(decl, "utf8")), files: { "tool.wasm": readFileSync(wasm).toString("base64") } },
});
if (res.isError) fail("register_tool: " + text(res));
for (let i = 0; i < 50 && changed === 0; i++) await new Promise((r) => setTimeout(r, 100));
if (changed === 0) fail("no notifications/tools/list_changed");
if (!(await client.listTools()).tools.some((t) => t.name === "count-lines")) fail("count-lines is not listed");
res = await client.callTool({ name: "count-lines", arguments: { pattern: "TODO" } });
if (res.isError || !text(res).includes("2")) fail("count-lines: " + JSON.stringify(res));
await client.close();
console.log("mcp-client: ok (TypeScript SDK): tools listed, a file read, a refusal, bash sandboxed, a wasm tool registered and called");
