// Package streamable is MCP's Streamable HTTP transport, both sides
// (guarantees T2, T3;
// https://modelcontextprotocol.io/specification/2026-07-28/basic/transports/streamable-http).
//
// # Server: Handler
//
// NewHandler returns an http.Handler for one MCP endpoint, serving a
// Backend: a *server.Server, or a *bridge.Bridge to a stdio server. Every
// message is a POST; GET and DELETE get 405. A POST goes through three
// steps, a file each: the gate (httpserver.go: path, host, origin,
// authorization, method, media types, the limits, the body), the route
// (httproute.go: the body decoded once, its params parsed once, its era
// decided once, the mirroring headers checked; what it learned travels on
// as an mcp.Routed) and the exchange (httpexchange.go: the message pushed
// into a connection of its own over the rpc message seam, made from
// options prepared once (rpc.Prepared.NewMessages), and served on the
// request's goroutine, so handlers keep every guarantee they have on
// stdio: panics are answered, output is bounded, W8 order).
// The answer is one JSON object, or an event stream (X-Accel-Buffering:
// no, a keep-alive comment once it has been quiet for KeepAlive) once the
// request asked for progress, the handler sent a notification, the answer
// took longer than KeepAlive, or the request is subscriptions/listen; its
// status is chosen from the error before a byte is encoded. Notifications
// get 202. One clock serves the keep-alives of every open exchange (it
// runs every quarter of KeepAlive while any is open, so a comment goes out
// 1 to 1.25 KeepAlive after the last write): a request costs no timer.
//
// Before a modern request reaches its handler, MCP-Protocol-Version,
// Mcp-Method, Mcp-Name and the Mcp-Param- headers of x-mcp-header
// arguments are compared with the body (400 and -32020 when one is missing
// or differs); error responses map to 400 (-32602, -32020, -32021, -32022)
// and 404 (-32601). A request without the 2026-07-28 _meta and header is
// legacy: initialize is answered, no Mcp-Session-Id is minted, and every
// other request is served at the version its header names (2025-03-26
// when it has none), as if initialize had happened on its own connection.
// A legacy request need not send the mirroring headers, but those it
// sends are checked the same way. The path (Options.Path, /mcp; 404
// elsewhere), Origin (403 unless absent, loopback or allowed), Host (403
// when AllowedHosts is set and it is not listed), the bearer token (401
// with WWW-Authenticate) and the body size (413) are checked first; 401,
// 403 and 413 close the connection (a 403 for a missing scope does not:
// its client is known).
//
// # Authorization
//
// Options.Token requires one fixed bearer token. Options.Protect makes
// the endpoint an OAuth 2.1 resource server instead (the two are
// exclusive): every POST must carry Authorization: Bearer with a token
// that Protection.Verifier accepts (401 with WWW-Authenticate: Bearer
// resource_metadata="...", scope="..." without one, with
// error="invalid_token" added for a refused one; 503 with Retry-After
// when the verifier itself fails, its error logged and never sent), and
// with the scopes the request needs: Protection.Scopes, and those a
// ScopedBackend requires of its method and tool (a *server.Server:
// Options.MethodScopes, mcp.Tool.Scopes), checked once the method and
// name are known and checked against Mcp-Method and Mcp-Name (403 with
// error="insufficient_scope" and every scope the request needs). The
// handler serves the protected resource metadata document, unauthenticated,
// at /.well-known/oauth-protected-resource followed by the resource's path
// (and by Path, and at the root), and names its absolute URL, derived from
// Metadata.Resource, in every challenge. The verified identity is in the
// handler's context (auth.IdentityFrom). See docs/auth.md.
//
// # Concurrency and limits
//
// Each request runs on the goroutine net/http gave it, on its own
// rpc.Conn, so requests are served concurrently with no hand-off. Every
// resource a client can hold is bounded, and every refusal is counted
// (Handler.Stats) and logged once per burst. The handler, however it is
// mounted, admits at most MaxInFlight requests (256) and MaxStreams
// subscriptions/listen streams (256) at once, across all clients, and at
// most MaxBufferedBytes (16 MiB) of request bodies and of answers being
// written; beyond, a request gets 503 with Retry-After: 1 before its body
// is read. Each write to a client must progress within WriteTimeout
// (30 s): a stalled reader is cut off and its request cancelled, a slow
// one is served, and an event stream may last as long as its call. A
// refused request's connection is closed after the rest of its body is
// read and dropped, so that the client, still sending, reads its answer
// instead of a reset. Handler.Serve adds the connection limits: MaxConns
// connections (1024, at most half the open-file limit), a new one over
// the cap closing the oldest connection that has sent nothing once it has
// had a quarter of ReadHeaderTimeout (at most 250 ms) to send, and being
// answered 503 when every connection is serving a request;
// ReadHeaderTimeout (10 s, or IdleTimeout when shorter) for a request's
// headers, IdleTimeout (30 s) between requests, MaxHeaderBytes (64 KiB);
// accept errors such as EMFILE pause the accept loop (5 ms, doubling to
// 1 s) instead of spinning it.
//
// # Cancellation and shutdown
//
// The client closing the response cancels the handler: "closing the SSE
// response stream MUST be treated as cancellation", and nothing more is
// written for it. Handler.Shutdown ends every exchange's input: listen
// streams finish with their final result, other handlers get the
// end-of-stream grace, and new requests get 503; the servers of Serve stop
// with it. When Shutdown's context ends first, the remaining handlers are
// cancelled. http.Server.Shutdown alone would wait for open event streams
// forever.
//
// # Client: Connect
//
// Connect is the client side: a host.Session whose messages are sent as
// POSTs with the request-metadata headers, event streams read as they
// come (notifications are routed like those on stdio), a call's
// cancellation closing its stream (and, to a legacy server,
// notifications/cancelled). Its transport implements host.Transport: it
// learns the tools' x-mcp-header arguments and mirrors them in Mcp-Param-
// headers, opens a legacy server's standalone stream once connected, and
// reads a failed probe as "HTTP era detection" says: a result or a modern
// error is modern; a legacy server's JSON-RPC error, or 400/404/405
// without a modern error, falls back to initialize (echoing any
// Mcp-Session-Id the legacy server mints); 401, 403, 5xx, timeouts and
// network errors (ErrHTTPTransport) end the connect, never a reason to
// fall back. A legacy server's request on a call's stream is answered on a
// POST of its own; when the server refuses that POST (a stateless server
// answers 400: it has nowhere to route the answer), the call fails at once
// with an *AnswerRefusedError carrying the status instead of waiting for a
// result that cannot come. Session.Close ends every call and stream in
// flight and closes the transport's own connection pool.
package streamable
