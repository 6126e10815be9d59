// Package interop holds agentwire's interoperability tests against real
// peers: the official TypeScript MCP SDKs (v1 @modelcontextprotocol/sdk, v2
// @modelcontextprotocol/client and /server), @modelcontextprotocol/
// server-everything, the MCP Inspector CLI, and the official TypeScript ACP
// SDK (@agentclientprotocol/sdk). The peers are installed by the
// tests themselves with npm from this directory's package-lock.json
// (pinned versions); their sources are never committed. client.mjs,
// server-v1.mjs and server-v2.mjs are small drivers of our own on top of
// them; acp-client.mjs drives agentwire serve acp.
package interop
