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
// encoding/json decodes them), never by case folding. Inject and Extract
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
//	span name             "{method} {tool or prompt}",       "{method}"
//	                      else "{method}"
//	span kind             SERVER (ServerMiddleware), CLIENT (ClientMiddleware, Relay)
//	method                mcp.method.name                    rpc.method, rpc.system.name "jsonrpc"
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
//	session               mcp.session.id (an HTTP session)   agentwire.acp.session.id (params.sessionId)
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
// mcp.session.id is the session a legacy Streamable HTTP or HTTP+SSE
// request is served in (streamable.SessionIDFrom); a stateless request has
// none. Not recorded: client.address/client.port (the HTTP request's
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
// attributes only). A peer cannot grow them without bound: on the serving
// side a method the handler did not know (-32601) is recorded as "_OTHER",
// and the tool or prompt of a refused call (-32602) is left out; the span
// keeps both. The metrics read from the runtime's counters (output
// queues, restarts, refusals, ...) are Metrics'.
//
// # Cost
//
// Nothing configured, nothing runs: a connection without middleware pays
// nothing. With the middleware, a request that is not traced costs what
// the TracerProvider's Start costs and little else: params are searched
// for the propagator's keys (bytes.Contains) and parsed only when they
// hold one, and a request's params are read for its attributes only when
// its span records or metrics are taken (the no-op MeterProvider takes
// none). With the no-op TracerProvider no span is started at all (trace
// context in _meta still passes through the handler's context, so the
// calls it makes carry it on). The SDK's Start of a span its sampler drops
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
// per burst), and Close ends what is left as unanswered.
package telemetry
