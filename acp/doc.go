// Package acp is an agent-side runtime for the Agent Client Protocol v1
// over agentwire's JSON-RPC connection, with a concurrent dispatch model
// (guarantees A1–A8 in docs/guarantees.md).
//
// Control requests (initialize, authenticate, session/new, session/load,
// session/resume, session/set_mode, session/set_config_option,
// session/close, and the session/cancel notification) are barriers: they run
// in receive order and update the connection's authoritative context before
// the next message is dispatched. Background requests (session/prompt and
// mcp/*) run concurrently on that context; their responses may come out of
// order, and a prompt's session/update notifications stay in order and
// precede its response.
//
// Admission happens in receive order, before a handler can start: at most
// MaxBackground (32) background requests per connection (the excess gets
// -32000 with data.reason "connection_busy" and data.limit), and one prompt
// per session (-32000, data.reason "prompt_in_progress"). -32000 is ACP's
// AuthRequired code too; data.reason tells them apart. A prompt reserves its
// session's cancellation token at admission, so a session/cancel sent right
// behind it (even in the same write) still cancels it; the next turn gets a
// fresh token. A cancelled prompt answers stopReason "cancelled", never an
// error. Control requests never wait behind the background lane.
//
// $/cancel_request cancels one background request, which still answers
// (ACP: "the receiver still MUST send exactly one response"). At end of
// input the active prompts are cancelled at once so their finalizers run,
// background work gets ShutdownGrace (5 s) to finish, and the connection's
// shutdown bound applies after that. Reservations are released on
// completion, on panic and on abort. Idle sessions are forgotten after
// IdleSessionTimeout, never one with an active prompt.
//
// MCP bridges (bridge.go; guarantee A7): mcp/connect {serverId} starts an MCP
// server a session declared in mcpServers (a stdio entry, matched by name)
// through agentwire's MCP client and answers {connectionId}; mcp/message
// {connectionId, method, params} forwards (concurrently, on the background
// lane) and returns the inner result or error; mcp/disconnect ends the
// bridge with the stdio shutdown ladder, as do session/close and the end of
// the connection. A message for a bridge that is not connected gets -32602.
// The extension is unstable; bridge.go says which generation this follows.
//
// MCP over ACP in the schema's direction (mcpcaller.go): Turn.ConnectMCP
// reaches a server the client declared as {"type":"acp"} (Agent.MCPOverACP
// advertises mcpCapabilities.acp), sending mcp/connect, mcp/message and
// mcp/disconnect to the client; the client's mcp/message notifications
// reach MCPConnection.OnNotification. A serverId the session did not
// declare is refused locally (ErrMCPNotDeclared), nothing sent.
//
// The client's methods (turn.go): Turn.ReadTextFile, WriteTextFile and
// CreateTerminal (with the Terminal's Output, WaitForExit, Kill and
// Release) are refused locally with ErrClientCapability when the client did
// not declare them; Turn.ToolCall, UpdateToolCall, Plan and ThoughtChunk
// encode the matching session/update kinds.
//
// session/load (when Agent.LoadSession is set) replays the history as
// session/update notifications, all before its response. session/resume
// reattaches a session without a replay: one this connection holds answers
// its modes and config options; another is asked of LoadSession, with a
// replay that discards; an unknown one gets -32002.
// session/set_config_option changes Agent.ConfigOptions per session, a
// "select" option to one of its values, a "boolean" one ({"type":"boolean",
// "value":true}) to true or false.
//
// initialize keeps the client's clientCapabilities (Turn.ClientCapabilities;
// a member of the wrong shape falls back to its default, as the schema
// says) and answers Agent.AuthMethods (default []; "terminal" methods only
// to a client that declared auth.terminal) and agentCapabilities:
// Agent.Capabilities with what the runtime serves merged in
// (sessionCapabilities close and resume, loadSession, mcpCapabilities.acp
// with Agent.MCPOverACP). With Agent.RequireAuth, session/new, session/load,
// session/resume and session/prompt get -32000 "Authentication required",
// without data, until an authenticate succeeds; a methodId that
// AuthMethods does not list gets -32602.
//
// A turn calls its client through Turn (turn.go): ReadTextFile,
// WriteTextFile and CreateTerminal (then the Terminal's Output,
// WaitForExit, Kill and Release) are refused before anything is sent, with
// ErrClientCapability, unless the client declared fs.readTextFile,
// fs.writeTextFile or terminal. ThoughtChunk, ToolCall, UpdateToolCall and
// Plan encode the other common updates.
//
// Cost: a prompt answered with one text chunk costs about 14 allocations
// on the agent side, each further chunk 2 (BenchmarkPromptAllocs). The
// prompt's params are read without encoding/json (its blocks alias them),
// a turn has one context, results are pre-encoded, and MessageChunk reuses
// one encoding buffer per turn.
//
// Middleware: Options.Middleware wraps the dispatch of every request and
// notification with a Call naming the method and the session (a prompt's
// whole turn runs inside next), composed once per connection and absent
// at no cost. One that refuses a prompt without calling next releases the
// prompt's reservation, so the session stays free (A3, A5). The telemetry
// module traces ACP at rpc's layer (rpc.Options.Middleware and Outbound).
//
// Numbers such as C3 cite the guarantees in the repository's
// docs/guarantees.md.
package acp
