// Package mcp speaks the Model Context Protocol in both of its eras over
// agentwire's JSON-RPC runtime: the stateless 2026-07-28 revision, where
// every request carries its version, client identity and capabilities in
// _meta and server/discover describes the server, and the legacy revisions
// (2025-11-25 and earlier) with their initialize handshake.
//
// # Server
//
// NewServer and AddTool build a server; Handler gives each connection its
// own handler and ConnOptions the connection options MCP needs (initialize
// is a barrier, batches are rejected, notifications/cancelled silences a
// request). A dual-era server (the default) picks the era per request
// (SPEC E1): a request whose _meta carries
// io.modelcontextprotocol/protocolVersion is modern and is validated on its
// own (a missing or malformed required field is -32602; an unknown version
// is -32022 with data.supported and data.requested) and served statelessly,
// with resultType, _meta serverInfo, and ttlMs/cacheScope on cacheable
// results. Anything else is legacy: initialize (version negotiation as the
// 2025-11-25 lifecycle says), notifications/initialized and ping, with
// tools served once initialize is done. Answering server/discover pins
// nothing, so a client may probe and then fall back to initialize on the
// same pipe; legacy state lives per connection.
//
// Tools get a ToolRequest: Progress sends notifications/progress when the
// client asked for it (strictly increasing, always before the result), and
// the context is cancelled by notifications/cancelled, after which nothing
// more is written for the request. subscriptions/listen is acknowledged
// first; every notification on it carries the subscription id; it announces
// tool-set changes; a client cancel ends it silently and end of input ends
// it with the graceful final result (SPEC E6).
//
// # Client
//
// StartServer (a subprocess) and NewClient (any stream) negotiate the era
// (SPEC E2–E5). In Auto mode the client probes with server/discover first:
// a result is modern (a mutually supported version is chosen); -32022 is
// modern at another version and is never a reason to fall back; any other
// error, silence past ProbeTimeout (plus ProcessStartupAllowance on a fresh
// process's first probe, all within ConnectTimeout), a malformed answer, or
// the server dying on the probe (it is restarted) leads to initialize. The
// fallback is never keyed to one error code. Modern and Legacy modes do not
// fall back and do not probe, respectively.
//
// An EraCache remembers eras by server identity (the command line). Only a
// definitive rejection of the probe, or a discover result listing only
// legacy versions, is cached as legacy, and the in-memory cache forgets it
// 5 minutes later even while legacy connections keep succeeding, so an
// upgraded server is probed again. Silence, crashes and malformed answers
// are never cached. Modern entries stay until forgotten, which happens when
// a negotiation based on them fails.
//
// Session.Listen opens a subscriptions/listen stream (modern era only),
// returns once the server acknowledges it, and passes every notification
// carrying its subscription id to a callback. The server may end it with a
// final result or with notifications/cancelled; both are accepted as its
// end. A stream does not survive a restart of the server.
package mcp
