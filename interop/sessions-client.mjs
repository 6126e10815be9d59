// A TypeScript SDK v1 (2025-11-25) client holding a Streamable HTTP
// session, driven line by line for agentwire's interoperability tests.
//
//   node sessions-client.mjs http://HOST:PORT/mcp
//
// It connects (the SDK opens the session's GET stream after
// notifications/initialized) and prints one JSON line per event:
//   {"ready":true,"session":ID,"protocolVersion":V}   once connected
//   {"notification":METHOD,"params":{...}}            each list change or resource update
//   {"done":N,"result":...} / {"done":N,"error":"..."} for each command
//   {"error":"..."}                                   a transport error (the SDK reconnects on its own)
// Commands on stdin, one JSON object per line:
//   {"n":1,"op":"subscribe","uri":"test://watched-resource"}
//   {"n":2,"op":"call","name":"test_trigger_tool_change","arguments":{}}
//   {"n":3,"op":"close"}
import { createInterface } from "node:readline";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import {
  ToolListChangedNotificationSchema,
  PromptListChangedNotificationSchema,
  ResourceUpdatedNotificationSchema,
} from "@modelcontextprotocol/sdk/types.js";

const say = (o) => process.stdout.write(JSON.stringify(o) + "\n");
const transport = new StreamableHTTPClientTransport(new URL(process.argv[2]), {
  // Reconnect quickly and keep trying: the test holds the stream's
  // reconnection back for a while on purpose.
  reconnectionOptions: { initialReconnectionDelay: 200, maxReconnectionDelay: 1000, reconnectionDelayGrowFactor: 1.5, maxRetries: 50 },
});
transport.onerror = (e) => say({ error: String(e?.message ?? e) });
const client = new Client({ name: "agentwire-sessions-test", version: "1.0.0" }, { capabilities: {} });
for (const schema of [ToolListChangedNotificationSchema, PromptListChangedNotificationSchema, ResourceUpdatedNotificationSchema]) {
  client.setNotificationHandler(schema, (n) => say({ notification: n.method, params: n.params ?? {} }));
}
await client.connect(transport);
say({ ready: true, session: transport.sessionId ?? null, protocolVersion: transport.protocolVersion ?? null });

for await (const line of createInterface({ input: process.stdin })) {
  if (!line.trim()) continue;
  const cmd = JSON.parse(line);
  try {
    let result;
    switch (cmd.op) {
      case "subscribe":
        result = await client.subscribeResource({ uri: cmd.uri });
        break;
      case "call":
        result = await client.callTool({ name: cmd.name, arguments: cmd.arguments ?? {} });
        break;
      case "close":
        await client.close();
        say({ done: cmd.n, result: {} });
        process.exit(0);
      default:
        throw new Error("unknown op " + cmd.op);
    }
    say({ done: cmd.n, result });
  } catch (e) {
    say({ done: cmd.n, error: String(e?.message ?? e) });
  }
}
