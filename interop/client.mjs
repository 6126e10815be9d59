// Drives a stdio MCP server with an official TypeScript SDK client and
// prints one JSON summary line. Used by agentwire's interoperability tests.
//
//   node client.mjs v1|v2 [legacy|auto] [listen] -- CMD ARGS...
//   node client.mjs v1|v2 [legacy|auto] [listen] -- http://HOST:PORT/mcp
//
// Steps: connect (stdio, or Streamable HTTP when given a URL), tools/list,
// tools/call echo, a slow_report call with progress, a slow_report call
// aborted after 300 ms, tools/list again; with "listen" (v2, modern era) a
// subscriptions/listen stream that must announce a tool-list change made
// by calling test_trigger_tool_change.
const [sdk, negotiate = "legacy", extra] = process.argv.slice(2, process.argv.indexOf("--"));
const [command, ...args] = process.argv.slice(process.argv.indexOf("--") + 1);
const overHTTP = /^https?:/.test(command);

let Client, StdioClientTransport, StreamableHTTPClientTransport;
if (sdk === "v1") {
  ({ Client } = await import("@modelcontextprotocol/sdk/client/index.js"));
  ({ StdioClientTransport } = await import("@modelcontextprotocol/sdk/client/stdio.js"));
  ({ StreamableHTTPClientTransport } = await import("@modelcontextprotocol/sdk/client/streamableHttp.js"));
} else {
  ({ Client, StreamableHTTPClientTransport } = await import("@modelcontextprotocol/client"));
  ({ StdioClientTransport } = await import("@modelcontextprotocol/client/stdio"));
}

const options = sdk === "v2" ? { versionNegotiation: { mode: negotiate, probe: { timeoutMs: 5000 } } } : {};
const client = new Client({ name: `peer-ts-client-${sdk}`, version: "1.0.0" }, options);
const summary = { sdk };
try {
  await client.connect(overHTTP
    ? new StreamableHTTPClientTransport(new URL(command))
    : new StdioClientTransport({ command, args, stderr: "ignore" }));
  summary.protocolVersion = client.getNegotiatedProtocolVersion?.() ?? null;
  summary.era = client.getProtocolEra?.() ?? "legacy";
  summary.server = client.getServerVersion()?.name;
  summary.tools = (await client.listTools()).tools.map((t) => t.name);
  summary.echo = (await client.callTool({ name: "echo", arguments: { text: "hello" } })).content[0].text;

  let progress = 0;
  const onprogress = () => progress++;
  const slowArgs = { name: "slow_report", arguments: { steps: 3, delay_ms: 30 } };
  const slow = sdk === "v1"
    ? await client.callTool(slowArgs, undefined, { onprogress })
    : await client.callTool(slowArgs, { onprogress });
  summary.slow = slow.content[0].text;
  summary.progress = progress;

  const ac = new AbortController();
  setTimeout(() => ac.abort(new Error("cancelled by the peer client")), 300);
  const cancelArgs = { name: "slow_report", arguments: { steps: 40, delay_ms: 50 } };
  try {
    if (sdk === "v1") await client.callTool(cancelArgs, undefined, { signal: ac.signal });
    else await client.callTool(cancelArgs, { signal: ac.signal });
    summary.cancelled = false;
  } catch {
    summary.cancelled = true;
  }
  summary.alive = (await client.listTools()).tools.length > 0;
  if (extra === "listen") {
    let changed;
    const seen = new Promise((resolve) => (changed = resolve));
    client.setNotificationHandler("notifications/tools/list_changed", () => changed(true));
    const sub = await client.listen({ toolsListChanged: true });
    // Behind a load balancer the trigger may reach another instance than
    // the stream's: trigger until the stream announces a change.
    summary.listen = false;
    for (let i = 0; i < 50 && !summary.listen; i++) {
      await client.callTool({ name: "test_trigger_tool_change", arguments: {} });
      summary.listen = await Promise.race([seen, new Promise((r) => setTimeout(() => r(false), 200))]);
    }
    await sub.close();
  }
  summary.ok = true;
} catch (e) {
  summary.ok = false;
  summary.error = String(e?.message ?? e);
}
console.log(JSON.stringify(summary));
await client.close().catch(() => {});
process.exit(summary.ok ? 0 : 1);
