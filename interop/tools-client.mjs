// Lists the tools of a Streamable HTTP MCP server and calls one, with an
// official TypeScript SDK client, and prints one JSON summary line. Used by
// agentwire's interoperability tests to drive `agentwire bridge` in front of
// other people's servers.
//
//   node tools-client.mjs v1|v2 legacy|auto URL TOOL ARGS_JSON
//
// v1 always speaks the legacy era; v2 in auto mode negotiates (and lands on
// 2026-07-28 when the bridge offers it).
const [sdk, negotiate, url, tool, argsJSON = "{}"] = process.argv.slice(2);

let Client, StreamableHTTPClientTransport;
if (sdk === "v1") {
  ({ Client } = await import("@modelcontextprotocol/sdk/client/index.js"));
  ({ StreamableHTTPClientTransport } = await import("@modelcontextprotocol/sdk/client/streamableHttp.js"));
} else {
  ({ Client, StreamableHTTPClientTransport } = await import("@modelcontextprotocol/client"));
}

const options = sdk === "v2" ? { versionNegotiation: { mode: negotiate, probe: { timeoutMs: 5000 } } } : {};
const client = new Client({ name: `peer-ts-tools-client-${sdk}`, version: "1.0.0" }, options);
const summary = { sdk };
// A request the server never answers must fail the run, not hang it.
const requestOptions = { timeout: 15000 };
try {
  await client.connect(new StreamableHTTPClientTransport(new URL(url)));
  summary.protocolVersion = client.getNegotiatedProtocolVersion?.() ?? null;
  summary.era = client.getProtocolEra?.() ?? "legacy";
  summary.server = client.getServerVersion()?.name;
  const listed = await client.listTools(undefined, requestOptions);
  summary.tools = listed.tools.map((t) => t.name);
  const params = { name: tool, arguments: JSON.parse(argsJSON) };
  const res = sdk === "v1"
    ? await client.callTool(params, undefined, requestOptions)
    : await client.callTool(params, requestOptions);
  summary.isError = res.isError ?? false;
  summary.text = (res.content ?? []).filter((c) => c.type === "text").map((c) => c.text).join("\n");
  summary.ok = true;
} catch (e) {
  summary.ok = false;
  summary.error = String(e?.message ?? e);
}
console.log(JSON.stringify(summary));
await client.close().catch(() => {});
process.exit(summary.ok ? 0 : 1);
