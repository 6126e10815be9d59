// Package telemetry is agentwire's OpenTelemetry instrumentation: spans
// and metrics for MCP, ACP and plain JSON-RPC, named and attributed as the
// OpenTelemetry semantic conventions name them, with W3C trace context
// carried in params._meta across processes — over stdio, over Streamable
// HTTP, through agentwire bridge and through agentwire tap. It is a module
// of its own: the core packages import none of its dependencies, and a
// program that does not trace does not compile them.
//
// # The model
//
// Every transport of agentwire serves a connection through rpc, and every
// call it makes goes through rpc too, so tracing is two pieces of ordinary
// rpc middleware:
//
//   - ServerMiddleware (an rpc.Middleware, in rpc.Options.Middleware, or
//     streamable.Options.Conn's for HTTP): a SERVER span per request and
//     per notification the connection receives. It starts when the
//     message's handler is called (after admission: time spent queued for
//     a handler slot is not in it) and ends when the handler returns, just
//     before the response is written. Its parent is the trace context of
//     params._meta, when there is one; otherwise whatever span the
//     handler's context already holds (an HTTP server span, say), or none.
//     When _meta gives the parent and the context holds a span too, that
//     span is linked, as the MCP conventions ask. The handler runs with
//     the span in its context, so the calls it makes are its children.
//   - ClientMiddleware (an rpc.OutboundMiddleware, in rpc.Options.Outbound,
//     or client.Options.Outbound and so host.Options.Transport): a CLIENT
//     span per call and per notification the connection sends, a child of
//     the span of the caller's context, from the call until its answer (or
//     until the notification is queued). Its trace context is written into
//     the params' _meta, replacing any that was there: a bridge forwards a
//     client's _meta as it came, and the server behind it must see the
//     bridge's span as its parent, not the client's.
//
// A chain of processes is thus one trace: agentwire call (CLIENT) ->
// agentwire bridge (SERVER, then CLIENT for the same request) -> the stdio
// server (SERVER). Relay does the same for agentwire tap, a transparent
// proxy of raw lines: each request that passes gets a span between the
// sender's and the receiver's, and the line goes on with that span's
// context in its _meta (see Relay).
//
// # Propagation through _meta
//
// MCP reserves traceparent, tracestate and baggage, unprefixed, at the
// root of params._meta (SEP-414), and ACP's _meta is open to them; the
// Options.Propagator (W3C TraceContext and Baggage by default) reads and
// writes exactly its own keys there. Keys are matched exactly ("_meta",
// "traceparent"; the same names spelled with JSON escapes too, as
// encoding/json decodes them, "trace\u0070arent"), never by case folding,
// and the same way everywhere: Extract and Inject, ServerMiddleware and
// Relay (which parse params only when they hold one of the keys, or a
// \u00XX escape of one of the keys' letters). Inject and Extract
// are the same splice for any raw params: Inject keeps every other byte as
// it was, creates _meta (and the params object) when there is none, and
// refuses params that are not an object (ErrNotObject); the middleware
// then sends the call without trace context rather than failing it. Plain
// JSON-RPC (Protocol JSONRPC) reserves no member, so ClientMiddleware
// leaves its params alone; inbound _meta trace context is honoured for
// every protocol.
//
// # Names and attributes
//
// MCP (Protocol MCP) follows the MCP conventions (the GenAI semantic
// conventions' "Semantic conventions for Model Context Protocol"); ACP and
// plain JSON-RPC follow the RPC and JSON-RPC conventions:
//
//	                      MCP                                ACP, JSONRPC
//	span name             "{method} {tool or prompt}",       "{method}"; "jsonrpc" for a method
//	                      else "{method}"                    the protocol does not define
//	span kind             SERVER (ServerMiddleware), CLIENT (ClientMiddleware, Relay)
//	method                mcp.method.name                    rpc.method, rpc.system.name "jsonrpc";
//	                                                         rpc.method "_OTHER" and
//	                                                         rpc.method_original for a method
//	                                                         the protocol does not define
//	request id            jsonrpc.request.id (a string id's contents, a number as written; none for a notification)
//	JSON-RPC version      none (the conventions want it      jsonrpc.protocol.version "2.0"
//	                      only when it is not 2.0)
//	tool                  gen_ai.tool.name,
//	                      gen_ai.operation.name "execute_tool"
//	prompt                gen_ai.prompt.name
//	resource              mcp.resource.uri (resources/read, /subscribe, /unsubscribe,
//	                      notifications/resources/updated; never in the span name)
//	protocol version      mcp.protocol.version: the _meta's (2026-07-28), the HTTP route's,
//	                      or what initialize agreed on the connection (legacy)
//	era                   agentwire.mcp.era "modern" | "legacy"
//	session               mcp.session.id (an HTTP session's  agentwire.acp.session.id (params.sessionId)
//	                      digest, below)
//	caller                agentwire.client.owner: the verified OAuth identity of a protected
//	                      HTTP endpoint (auth.IdentityFrom), its issuer and subject
//	transport             network.transport (Options.Transport: pipe, tcp, unix);
//	                      network.protocol.name "http" with Options.HTTP
//	server                server.address, server.port (client side, Options.ServerAddress/Port)
//	error                 error.type and rpc.response.status_code: the JSON-RPC error code
//	                      ("-32602"); status Error with the error's message
//
// error.type is also "tool_error" for a tools/call answered with isError
// true (the result is scanned only when it contains "isError", and only
// when the span records or metrics are taken), "cancelled" for a request
// whose context was cancelled first (by the peer, the caller, the
// connection's shutdown) or a relayed request its sender cancelled,
// "timeout" for an expired deadline, and "_OTHER" on the calling side for
// a call that failed without an answer (the connection lost). A handler's
// error that is not a *jsonrpc.Error, and a handler panic, are the -32603
// rpc answers with. rpc.ErrNoResponse is not an error.
//
// The span is started with the method alone as its name and attributes
// are added once it is known to record: samplers see the method, the kind
// and, for ACP and JSON-RPC, rpc.system.name.
//
// Every string a peer chooses that a span carries — the method, the tool
// or prompt name, the resource URI, the protocol version, the request id,
// the ACP session id, an error's message (the status description) — is
// cut at MaxSpanValueBytes (256 bytes, at a UTF-8 boundary), in the span
// name too (so a span name is at most 513 bytes), whatever the SDK's
// limits: a message can be megabytes, and a batch of spans that large
// holds memory while the collector is slow and fails at its size limit.
// Start's provider also cuts any attribute value at
// DefaultAttributeValueLengthLimit (4096 bytes) unless
// OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT or OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT
// says otherwise. A method ACP or plain JSON-RPC does not define (the acp
// package's methods; none for JSON-RPC, beyond Options.Methods) is
// recorded as the RPC conventions say: the span is named "jsonrpc",
// rpc.method is "_OTHER" and rpc.method_original has the method. MCP's
// conventions name the span by mcp.method.name, which keeps the method as
// sent (cut).
//
// mcp.session.id identifies the session a legacy Streamable HTTP or
// HTTP+SSE request is served in (streamable.SessionIDFrom); a stateless
// request has none. It is not the Mcp-Session-Id itself but its digest:
// the first 16 bytes of its SHA-256, in hex (32 characters). The id is a
// bearer capability — whoever presents it joins an unauthenticated
// session, and over HTTP+SSE it is in the endpoint's URL — and traces are
// read by more people, and kept longer, than a server trusts with its
// sessions; the digest still groups one session's requests, and whoever
// holds an id can compute its digest to find them. Not recorded: client.address/client.port (the HTTP request's
// remote address does not reach rpc's handler) and
// network.protocol.version (not known to rpc).
//
// # Metrics
//
// The middleware also records the operation durations the conventions
// name, as histograms in seconds with the conventions' buckets and only
// their low-cardinality attributes (method, tool or prompt name,
// gen_ai.operation.name, mcp.protocol.version, agentwire.mcp.era,
// error.type, rpc.response.status_code, network.*, server.*):
// mcp.server.operation.duration and mcp.client.operation.duration for MCP
// ([0.01 ... 300]), rpc.server.call.duration and rpc.client.call.duration
// for ACP and JSON-RPC ([0.005 ... 10]); and the requests in flight,
// agentwire.rpc.server.active_requests and
// agentwire.rpc.client.active_requests (UpDownCounters with the static
// attributes only). A peer cannot grow them without bound, on either
// side, whatever it sends, requests and notifications alike; every
// attribute a peer influences is taken from a closed list:
//
//   - the method (mcp.method.name, rpc.method) only when the protocol
//     defines it — for MCP the methods of both eras (the mcp package's
//     and the specification's: initialize, ping, notifications/...,
//     tools/..., resources/..., prompts/..., completion/complete,
//     logging/setLevel, sampling/createMessage, elicitation/create,
//     roots/list, tasks/..., server/discover, subscriptions/listen), for
//     ACP the acp package's, for plain JSON-RPC none — or Options.Methods
//     lists it, and (serving side) the handler knew it (not -32601);
//     any other is "_OTHER";
//   - mcp.protocol.version only when agentwire speaks it
//     (mcp.ModernVersions, mcp.LegacyVersions), else "_OTHER";
//   - the tool or prompt name only when the call found it: it was
//     answered with a result (isError true included), never a JSON-RPC
//     error (-32602 unknown tool, -32600 before initialize, a limiter's or
//     a timeout's) or a cancellation; cut at MaxMetricNameBytes (128
//     bytes); on the calling side the same rule reads the peer's answer;
//   - error.type and rpc.response.status_code only for a known JSON-RPC
//     code (JSON-RPC's own; -32800; -32000, -32001, -32002, -32042 and
//     MCP 2026-07-28's -32020 to -32022; ACP's -33000 and agentwire's
//     -33001), else "_OTHER" for both: a peer, or an upstream a bridge
//     forwards, chooses the code it answers with. An application's own
//     codes are thus "_OTHER" in the metrics; the span keeps every code.
//
// The span keeps what was sent (cut, above). The metrics read from the
// runtime's counters (output queues, restarts, refusals, ...) are
// Metrics'.
//
// # Cost
//
// Nothing configured, nothing runs: a connection without middleware pays
// nothing. With the middleware, a request that is not traced costs what
// the TracerProvider's Start costs and little else: params are searched
// for the propagator's keys (bytes.Contains, and one scan for a
// backslash) and parsed only when they hold one, or a \u00XX escape of
// one of their letters, and a request's params are read for its attributes only when
// its span records or metrics are taken (the no-op MeterProvider takes
// none). With the no-op TracerProvider no span is started at all (trace
// context in _meta still passes through the handler's context, so that
// the calls it makes carry it on where ClientMiddleware runs; see below).
// The SDK's Start of a span its sampler drops
// costs about 250 ns and two allocations, 8 to 13 % of an in-process echo
// round trip over rpc.Pipe (BenchmarkServerMiddlewareDropSamplerUnknown):
// given the sampler (Options.Sampler; Setup passes it) and one that drops
// every root (NeverSample, TraceIDRatioBased(0), or ParentBased over
// either), a request with no trace context to continue starts none, and
// the middleware costs some 50 ns and no allocation, within the noise of
// that round trip (BenchmarkServerMiddlewareDropSampler). A request that
// carries trace context always gets its span from the provider, whose
// decision may follow the parent's: parsing _meta, extracting and
// starting the dropped span cost some 700 ns and six allocations.
//
// Over the no-op TracerProvider and metric/noop's MeterProvider (what
// Setup makes when nothing is exported) ServerMiddleware and
// ClientMiddleware are nil, which rpc and every agentwire list of
// middleware skip: a connection with tracing and metrics off pays nothing.
// A process that does not trace then carries no caller's trace context
// on to the calls it makes; one that wants that without tracing itself
// keeps metrics on (a MeterProvider that is not metric/noop's), or uses a
// TracerProvider whose sampler drops everything.
//
// # Relay
//
// Relay is for a proxy that sees raw lines, not rpc calls. Its spans are
// CLIENT spans (the relay is the client of the hop it makes), with
// agentwire.relay true and agentwire.relay.direction; a response from the
// other side with the request's id ends one, with its error's code; a
// cancellation from the sender (notifications/cancelled,
// $/cancel_request) ends it as cancelled. At most MaxRelaySpans (4096)
// are open at once: past that the oldest is ended as abandoned
// (agentwire.relay.outcome "abandoned", RelayStats.Abandoned, logged once
// per burst), and Close ends what is left as unanswered; an id longer than
// 64 bytes is held as its SHA-256. Options.Sampler is honoured as by
// ServerMiddleware: under a sampler that drops every root, a request
// without trace context passes unchanged and starts no span; over the
// no-op TracerProvider every line passes unchanged, unparsed.
package telemetry
