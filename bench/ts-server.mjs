// The TypeScript SDK v2 server of the HTTP benchmark: createMcpHandler
// (2026-07-28, with its stateless fallback for 2025-era clients) on plain
// node:http, serving the echo tool. It prints its endpoint's URL and exits
// when stdin ends, like the Go servers of `bench -serve-http`.
//
// createMcpHandler is web-standard (Request -> Response); the few lines
// below adapt node:http to it, as @modelcontextprotocol/node's
// toNodeHandler would, without another dependency.
import http from "node:http";
import { McpServer, createMcpHandler } from "@modelcontextprotocol/server";
import * as z from "zod";

const handler = createMcpHandler(() => {
  const server = new McpServer({ name: "bench", version: "1" }, { capabilities: { tools: {} } });
  server.registerTool("echo", { inputSchema: z.object({ text: z.string() }) }, async ({ text }) => ({
    content: [{ type: "text", text }],
  }));
  return server;
});

const server = http.createServer(async (req, res) => {
  try {
    const chunks = [];
    for await (const c of req) chunks.push(c);
    const headers = new Headers();
    for (const [k, v] of Object.entries(req.headers)) {
      if (Array.isArray(v)) v.forEach((x) => headers.append(k, x));
      else if (v !== undefined) headers.set(k, v);
    }
    // Closing the response is the client's cancel.
    const abort = new AbortController();
    res.on("close", () => abort.abort());
    const hasBody = req.method !== "GET" && req.method !== "HEAD";
    const response = await handler.fetch(
      new Request(`http://${req.headers.host}${req.url}`, {
        method: req.method,
        headers,
        body: hasBody ? Buffer.concat(chunks) : undefined,
        signal: abort.signal,
      }),
    );
    res.writeHead(response.status, Object.fromEntries(response.headers));
    if (response.body) {
      // Flush each chunk as it comes: event streams must not wait.
      res.flushHeaders();
      for await (const chunk of response.body) res.write(chunk);
    }
    res.end();
  } catch (err) {
    if (!res.headersSent) res.writeHead(500);
    res.end();
  }
});
server.keepAliveTimeout = 60_000;
server.headersTimeout = 70_000;
server.requestTimeout = 0; // event streams last as long as they last
server.listen(0, "127.0.0.1", () => {
  process.stdout.write(`http://127.0.0.1:${server.address().port}/mcp\n`);
});
process.stdin.on("end", () => process.exit(0));
process.stdin.resume();
