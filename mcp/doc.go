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
// (guarantee E1): a request whose _meta carries
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
// it with the graceful final result (guarantee E6). A listen stream holds no
// handler slot: it detaches into the connection's stream budget
// (rpc.Options.MaxStreams, 256), so open streams never keep ordinary
// requests waiting; one beyond the budget is answered -32000 with
// data.reason "too_many_streams". Through a Bridge, HTTP clients that ask
// for the same notifications share one stream on the server.
//
// The typed AddTool checks a call's arguments against the InputSchema the
// tool publishes (inferred by SchemaFor, or its own) before the handler
// runs: required members, types, properties and items at any depth,
// additionalProperties, enum and const. Arguments that do not conform are
// a tool execution error, as the specification has it for input errors:
// a result with isError whose text names every problem ("invalid arguments
// for echo: argument "text" is required but missing."), which the model
// can read to correct its call. The handler is not called.
//
// Beyond tools a server has resources (AddResource, AddResourceTemplate
// with {var} and {+var} templates, ResourceUpdated for legacy
// subscribers), prompts (AddPrompt; required arguments are checked before
// the handler runs), completion (SetCompletion) and logging
// (ToolRequest.Log: a legacy connection's logging/setLevel threshold,
// "info" until set; in 2026-07-28 only when the request's _meta asked).
// Capabilities follow what is registered. Lists are paged when
// ServerOptions.PageSize is set. Methods removed in 2026-07-28 (ping,
// logging/setLevel, resources/subscribe) are unknown to modern requests.
//
// # Asking the client for input
//
// ToolRequest and PromptRequest have Ask, Elicit, State and SetState, one
// API for both eras. In the legacy era Ask sends the server's own request
// (elicitation/create, sampling/createMessage, roots/list) on the
// connection and waits for the answer; over stateless HTTP the request
// goes out on the call's event stream under a process-unique id, and the
// answer, which the client POSTs separately, is routed back. In the
// 2026-07-28 era there are no server requests (SEP-2322): Ask returns the
// answers the client sent with its retry (inputResponses), or
// ErrInputRequired, which the handler returns and which becomes an
// input_required result carrying the unanswered requests and, if the
// handler called SetState, a requestState signed with HMAC-SHA256 over the
// method, the tool or prompt name and a digest of its arguments, valid for
// an hour (ServerOptions.StateKey, random per Server by default). The retry
// runs the handler again from the start; State then returns the verified
// state, and altered, foreign or expired state is -32602. Over stateless
// HTTP a legacy server request gets a random id, and only a POST with the
// same credentials and address may answer it. logging/setLevel and
// resources/subscribe are accepted from legacy HTTP clients but cannot
// outlast their POST (there is no session): the default threshold applies
// and no update notification can be sent.
//
// # Client
//
// StartServer (a subprocess) and NewClient (any stream) negotiate the era
// (guarantees E2–E5). With ClientOptions.Eras BothEras, the default, the
// client probes with server/discover first:
// a result is modern (a mutually supported version is chosen); -32022 is
// modern at another version and is never a reason to fall back; any other
// error, silence past ProbeTimeout (plus ProcessStartupAllowance on a fresh
// process's first probe, all within ConnectTimeout), a malformed answer, or
// the server dying on the probe (it is restarted) leads to initialize. The
// fallback is never keyed to one error code. ModernOnly does not fall back
// and LegacyOnly does not probe. Session.Era says what was negotiated.
//
// # Eras
//
// One vocabulary names the eras everywhere. An Era is a fact,
// what a request, a connection or a session speaks: Legacy or Modern
// (EraUnknown before it is decided); EraOf maps a protocol version to its
// era. Eras is a setting, which eras a server serves
// (ServerOptions.Eras) or a client will speak (ClientOptions.Eras):
// BothEras (the default), ModernOnly or LegacyOnly. They are two types so
// that a setting cannot be mistaken for a decision: a BothEras server
// still serves each request in one Era. Both print as the command line
// writes them ("legacy", "modern"; "both"), ParseEras reads the latter,
// and an Era marshals as text, so an EraEntry stores its Era as
// "legacy" or "modern".
//
// An EraCache remembers eras by server identity (the command line). Only a
// definitive rejection of the probe, or a discover result listing only
// legacy versions, is cached as legacy, and the in-memory cache forgets it
// 5 minutes later even while legacy connections keep succeeding, so an
// upgraded server is probed again. Silence, crashes and malformed answers
// are never cached. Modern entries stay until forgotten, which happens when
// a negotiation based on them fails.
//
// Typed calls cover the surface: ListTools, CallTool (WithProgress,
// WithLogLevel, Retryable), ListResources, ListResourceTemplates,
// ReadResource, ListPrompts, GetPrompt, Complete, SetLogLevel, and Request
// for anything else; lists follow nextCursor. ClientOptions.OnInput
// answers what a server asks in both eras (legacy server requests, and
// input_required results, answered and retried with the server's
// requestState); OnLog receives log messages. Tools whose x-mcp-header
// annotations are invalid are dropped from ListTools on every transport
// (their calls could not be mirrored if the server were reached over HTTP),
// and over HTTP annotated arguments are mirrored in Mcp-Param- headers.
//
// Session.Listen opens a subscriptions/listen stream (modern era only),
// returns once the server acknowledges it, and passes every notification
// carrying its subscription id to a callback. The server may end it with a
// final result or with notifications/cancelled; both are accepted as its
// end. When the server process is lost and the restart policy starts a new
// one, the stream is opened again on it.
//
// # Streamable HTTP
//
// Server.HTTPHandler is an http.Handler for one MCP endpoint (guarantee T2;
// https://modelcontextprotocol.io/specification/2026-07-28/basic/transports/streamable-http). Every message is a POST; GET and DELETE get 405.
// Each request runs on its own rpc.Conn whose input is the request line and
// whose output becomes the response, so handlers keep every guarantee they
// have on stdio: panics are answered, output is bounded, and the handler's
// context is cancelled when the client closes the response ("closing the
// SSE response stream MUST be treated as cancellation"). The answer is one
// JSON object, or an event stream (X-Accel-Buffering: no, a keep-alive
// comment every KeepAlive) once the request asked for progress, the
// handler sent a notification, the answer took longer than KeepAlive, or
// the request is subscriptions/listen. Notifications get 202.
//
// Before a modern request reaches its handler, MCP-Protocol-Version,
// Mcp-Method, Mcp-Name and the Mcp-Param- headers of x-mcp-header
// arguments are compared with the body (400 and -32020 when one is missing
// or differs); error responses map to 400 (-32602, -32020, -32021, -32022)
// and 404 (-32601). A request without the 2026-07-28 _meta and header is
// legacy: initialize is answered, no Mcp-Session-Id is minted, and every
// other request is served at the version its header names (2025-03-26 when
// it has none), as if initialize had happened on its own connection. A
// legacy request need not send the mirroring headers, but those it sends
// are checked the same way. The path (HTTPOptions.Path, /mcp; 404
// elsewhere), Origin (403 unless absent, loopback or allowed), Host (403
// when AllowedHosts is set and it is not listed), the bearer token (401
// with WWW-Authenticate) and the body size (413) are checked first; 401,
// 403 and 413 close the connection.
//
// Every resource a client can hold is bounded, and every refusal is
// counted (HTTPHandler.Stats) and logged once per burst. The handler,
// however it is mounted, admits at most MaxInFlight requests (256) and
// MaxStreams subscriptions/listen streams (256) at once, across all
// clients, and at most MaxBufferedBytes (16 MiB) of request bodies and of
// answers being written; beyond, a request gets 503 with Retry-After: 1
// before its body is read. Each write to a client must progress within
// WriteTimeout (30 s): a stalled reader is cut off and its request
// cancelled, a slow one is served, and an event stream may last as long
// as its call. A refused request's connection is closed after the rest
// of its body is read and dropped, so that the client, still sending,
// reads its answer instead of a reset. HTTPHandler.Serve adds the
// connection limits: MaxConns connections (1024, at most half the
// open-file limit), a new one over the cap closing the oldest connection
// that has sent nothing once it has had a quarter of ReadHeaderTimeout
// (at most 250 ms) to send, and being answered 503 when every connection
// is serving a request; ReadHeaderTimeout (10 s, or IdleTimeout when
// shorter) for a request's headers, IdleTimeout (30 s) between requests,
// MaxHeaderBytes (64 KiB); accept errors such as EMFILE pause the accept
// loop (5 ms, doubling to 1 s) instead of spinning it.
//
// HTTPHandler.Shutdown ends every exchange's input: listen streams finish
// with their final result, other handlers get the end-of-stream grace, and
// new requests get 503; the servers of Serve stop with it.
// http.Server.Shutdown alone would wait for open event streams forever.
//
// ConnectHTTP is the client side: the same Session, its messages sent as
// POSTs with the request-metadata headers, event streams read as they come
// (notifications are routed like those on stdio), a call's cancellation
// closing its stream (and, to a legacy server, notifications/cancelled).
// A legacy server's request on a call's stream is answered on a POST of
// its own; when the server refuses that POST (a stateless server answers
// 400: it has nowhere to route the answer), the call fails at once with an
// *AnswerRefusedError carrying the status instead of waiting for a result
// that cannot come.
// The era probe follows "HTTP era detection": a result or a modern error
// is modern; a legacy server's JSON-RPC error, or 400/404/405 without a
// modern error, falls back to initialize (echoing any Mcp-Session-Id the
// legacy server mints); 401, 403, 5xx, timeouts and network errors
// (ErrHTTPTransport) end the connect, never a reason to fall back.
//
// A Bridge serves a stdio server, reached through a Session, to HTTP
// clients of both eras: one process for all of them (restarted by the
// session's restart policy, a legacy server's initialize replayed before
// any request reaches the new process), requests translated between eras
// where client and server differ, and progress tokens and subscription ids
// renamed so that clients never see each other's notifications. A request
// without arguments, or whose params held only the _meta keys a legacy
// server must not see, reaches the server with no params member at all:
// agentwire never writes "params": null, which JSON-RPC does not allow and
// which TypeScript SDK servers drop without an answer. The interop tests
// drive the bridge in front of the npm reference servers (filesystem,
// memory, everything) with the TypeScript clients and the Inspector.
package mcp
