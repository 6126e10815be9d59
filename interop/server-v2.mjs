// A dual-era MCP server on the official TypeScript SDK v2 (serveStdio), for
// agentwire's interoperability tests.
import { McpServer } from "@modelcontextprotocol/server";
import { serveStdio } from "@modelcontextprotocol/server/stdio";
import * as z from "zod";

serveStdio(() => {
  const server = new McpServer({ name: "peer-ts-v2", version: "2.0.0" }, { capabilities: { tools: {} } });
  server.registerTool("echo", { inputSchema: z.object({ text: z.string() }) }, async ({ text }) => ({
    content: [{ type: "text", text }],
  }));
  return server;
});
