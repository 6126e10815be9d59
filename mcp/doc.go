// Package mcp is the vocabulary of the Model Context Protocol in both of
// its eras, as agentwire speaks it: the stateless 2026-07-28 revision,
// where every request carries its version, client identity and
// capabilities in _meta and server/discover describes the server, and the
// legacy revisions (2025-11-25 and earlier) with their initialize
// handshake. It holds what both sides of a connection name and nothing
// that runs: protocol versions, method names, _meta keys and error codes;
// Tool, Content, ToolResult and the resource and prompt types; SchemaFor;
// the x-mcp-header annotations and the Streamable HTTP header names; and
// the reading of a request's params (RequestParams, CheckModernMeta).
//
// The packages below it hold one idea each:
//
//	mcp/server      the dual-era server: tools, resources, prompts, input
//	mcp/host        the negotiating client: Session, the era probe and cache
//	mcp/streamable  Streamable HTTP, both sides: Handler and Connect
//	mcp/bridge      a stdio server behind one Session, served over HTTP
//
// Their seams are exported types of their own: host.Transport is what a
// Session needs of a transport (a stream, or streamable's HTTP client),
// streamable.Backend what the HTTP handler needs of what it serves (a
// server.Server or a bridge.Bridge), and Routed what a transport learned
// of a request before its handler runs (rpc.Request.Note carries it, so
// that a request routed over HTTP is parsed once).
//
// # Eras
//
// One vocabulary names the eras everywhere. An Era is a fact, what a
// request, a connection or a session speaks: Legacy or Modern
// (EraUnknown before it is decided); EraOf maps a protocol version to its
// era. Eras is a setting, which eras a server serves (server.Options.Eras)
// or a client will speak (host.Options.Eras): BothEras (the default),
// ModernOnly or LegacyOnly. They are two types so that a setting cannot be
// mistaken for a decision: a BothEras server still serves each request in
// one Era. Both print as the command line writes them ("legacy",
// "modern"; "both"), ParseEras reads the latter, and an Era marshals as
// text, so a host.EraEntry stores its Era as "legacy" or "modern".
//
// Nothing here keeps state or starts goroutines; every value may be
// shared by any number of goroutines once built (RequestParams is filled
// in by one goroutine, then only read).
package mcp
