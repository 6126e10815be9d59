// A legacy-only MCP server on the official TypeScript SDK v1, for
// agentwire's interoperability tests.
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { z } from "zod";

const server = new McpServer({ name: "peer-ts-v1", version: "1.0.0" });
server.tool("echo", { text: z.string() }, async ({ text }) => ({ content: [{ type: "text", text }] }));
await server.connect(new StdioServerTransport());
