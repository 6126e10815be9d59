// Drives the example server of docs/server-guide.md with an official
// TypeScript SDK client and prints one JSON summary line.
//
//   node example-client.mjs v1|v2 [legacy|auto] -- CMD ARGS...
//
// Steps: connect, list tools, resources and prompts, call forecast,
// read weather://stations, get plan_trip.
const [sdk, negotiate = "legacy"] = process.argv.slice(2, process.argv.indexOf("--"));
const [command, ...args] = process.argv.slice(process.argv.indexOf("--") + 1);

let Client, StdioClientTransport;
if (sdk === "v1") {
  ({ Client } = await import("@modelcontextprotocol/sdk/client/index.js"));
  ({ StdioClientTransport } = await import("@modelcontextprotocol/sdk/client/stdio.js"));
} else {
  ({ Client } = await import("@modelcontextprotocol/client"));
  ({ StdioClientTransport } = await import("@modelcontextprotocol/client/stdio"));
}
const options = sdk === "v2" ? { versionNegotiation: { mode: negotiate, probe: { timeoutMs: 5000 } } } : {};
const client = new Client({ name: `example-client-${sdk}`, version: "1.0.0" }, options);
const summary = { sdk };
try {
  await client.connect(new StdioClientTransport({ command, args, stderr: "ignore" }));
  summary.era = client.getProtocolEra?.() ?? "legacy";
  summary.tools = (await client.listTools()).tools.map((t) => t.name);
  summary.resources = (await client.listResources()).resources.map((r) => r.uri);
  summary.prompts = (await client.listPrompts()).prompts.map((p) => p.name);
  summary.forecast = (await client.callTool({ name: "forecast", arguments: { city: "Oslo", days: 2 } })).content[0].text;
  summary.stations = (await client.readResource({ uri: "weather://stations" })).contents[0].text;
  summary.prompt = (await client.getPrompt({ name: "plan_trip", arguments: { city: "Lima" } })).messages[0].content.text;
  summary.ok = true;
} catch (e) {
  summary.ok = false;
  summary.error = String(e?.message ?? e);
}
console.log(JSON.stringify(summary));
await client.close().catch(() => {});
process.exit(summary.ok ? 0 : 1);
