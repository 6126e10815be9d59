// Package streamable is MCP's Streamable HTTP transport, both sides
// (guarantees T2, T3;
// https://modelcontextprotocol.io/specification/2026-07-28/basic/transports/streamable-http).
//
// # Server: Handler
//
// NewHandler returns an http.Handler for one MCP endpoint, serving a
// Backend: a *server.Server, or a *bridge.Bridge to a stdio server. Every
// message is a POST; GET and DELETE get 405, unless Options.Sessions
// serves legacy clients in sessions (below). A POST goes through three
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
// A subscriptions/listen stream lives on its request's goroutine for as
// long as it is open, so what it keeps is kept small: the exchange lets go
// of the decoded message and the route's note as the handler starts (the
// rpc.Request drops the note when the handler detaches), and every frame
// under the handler (ServeHTTP, the exchange, rpc's dispatch, the server's
// session, the telemetry middleware) keeps its work in functions of its
// own, so that the goroutine's stack shrinks back to 8 KiB: an idle stream
// costs net/http's two goroutines, about 10 KiB of stacks and 32 KiB of
// the process in all (bench/, the CLI's TestAnIdleListenStreamKeepsASmallStack).
//
// Before a modern request reaches its handler, MCP-Protocol-Version,
// Mcp-Method, Mcp-Name and the Mcp-Param- headers of x-mcp-header
// arguments are compared with the body (400 and -32020 when one is missing
// or differs); error responses map to 400 (-32602, -32020, -32021, -32022)
// and 404 (-32601). A request without the 2026-07-28 _meta and header is
// legacy. Without Options.Sessions it is served statelessly: initialize
// is answered, no Mcp-Session-Id is minted, and every other request is
// served at the version its header names (2025-03-26 when it has none),
// as if initialize had happened on its own connection.
// A legacy request need not send the mirroring headers, but those it
// sends are checked the same way. The path (Options.Path, /mcp; 404
// elsewhere), Origin (403 unless absent, loopback or allowed), Host (403
// when AllowedHosts is set and it is not listed), the bearer token (401
// with WWW-Authenticate) and the body size (413) are checked first; 401,
// 403 and 413 close the connection (a 403 for a missing scope does not:
// its client is known).
//
// # Server: sessions for legacy clients
//
// Options.Sessions serves 2025-03-26 .. 2025-11-25 clients as their
// transport describes ("Session Management", "Resumability and
// Redelivery"); a 2026-07-28 request ignores Mcp-Session-Id and is served
// statelessly as before. A legacy initialize without Mcp-Session-Id
// mints a session: 128 random bits in base64url, sent in the
// Mcp-Session-Id header of the initialize response (not when initialize
// is answered with an error: there is no session then), and bound to the
// verified identity when Protect is set (its issuer and subject, or
// client id). Every later legacy message must name it: without the header
// it is 400 (-32000), for a session that does not exist, has ended, or
// belongs to another identity 404 (-32001, which the client answers by
// initializing again; never 403), and initialize on a live session is
// 400. A request without MCP-Protocol-Version is served at the version the
// session negotiated; one whose header names another supported version,
// at that version. DELETE ends the session (200). CORS lets pages send
// and read Mcp-Session-Id and use GET and DELETE.
//
// A session is one long-lived connection of the backend's session
// handler (SessionBackend), as a stdio connection is: what the client
// set up there (logging/setLevel, resources/subscribe, the negotiated
// version and capabilities) lasts as long as the session, and the server
// may send it notifications and requests outside any call. Each POST
// pushes its message into that connection and its handler runs on the
// POST's goroutine, as without sessions, but with the session's context
// (the identity bound at mint), not the request's: a dropped POST is not
// a cancellation. The connection's one writer sends each message on
// exactly one stream: a response on the POST stream of its request; a
// notification or request made for a running request (rpc's
// Outbound.Related) on that request's stream while it is open and
// unanswered and takes an event stream; anything else on the standalone
// stream, the session's GET (text/event-stream required, 406 otherwise).
// A second GET takes the stream over from the first, which ends (the
// latest connection wins). A server request with no GET stream to go on
// fails at once. A client's answer to a server request, and its
// notifications (initialized, cancelled, roots/list_changed), go into
// the connection, then 202.
//
// With an event store (SessionOptions.Events: an in-memory store
// by default, NoEvents for none), events carry ids. A stream that becomes
// an event stream starts, for a 2025-11-25 client, with a priming event
// (an id, the retry delay, empty data: older clients cannot take empty
// data), stored and written before the stream's first message, and what a
// stream carries is stored before it is written from the moment its
// client holds an id of it. A GET with Last-Event-ID is sent again what
// that event's stream carried after it, and only that stream's events; if
// the stream is still live here the connection takes it over, if it is a
// POST's it ends after the response, and if its request runs on another
// instance (an EventFollower store) it is followed there until its
// response (Shutdown and the session's end close such a GET too). An
// unknown id, or one whose successors the store dropped, is 400, never
// 404 (which would end the session). A stream's events outlive its
// response, to the store's retention: a connection that broke after the
// response was written, before its client read it, is resumed with the
// response sent again. A POST whose client goes before its answer while
// holding no event id of its stream cannot be resumed: its request is
// cancelled, as it is without sessions; otherwise it runs on, its output
// stored, until its resume deadline (three times Retry, at least 10 s, at
// most IdleTimeout): when no connection has taken its stream over by
// then, the request is cancelled (logged once per burst) and no longer
// keeps its session busy; its MaxInFlight place is its handler's until
// the handler returns. A server request that can be neither written nor
// stored for a resumption fails at once, as one with no stream to go on
// does.
//
// A session idle for IdleTimeout (10 min), with no request running and no
// stream open, ends; one that sent nothing after initialize ends after
// FirstIdleTimeout (60 s). One timer serves the expiry of every session,
// and an idle session costs no goroutine and no timer. At most
// MaxSessions (4096) live at once: a new one ends the session idle the
// longest (one that sent nothing since initialize first, idle at least a
// second), or gets 503 with Retry-After: 1 when every session is busy. A
// session has at most MaxStreamsPerSession (16) open event streams (503
// for a GET beyond). Sessions, expiries, evictions, refusals, unknown
// sessions, replays and replay gaps are counted in Stats.
//
// With a SessionStore (SessionOptions.Store, and an event store the fleet
// shares), sessions outlive their instance: the session's record (its
// owner, version and the client's messages that built its state:
// initialize, notifications/initialized, the last logging/setLevel, the
// live resources/subscribe, each kept once answered successfully and
// re-encoded with only what restoring needs; at most 1024 subscriptions
// and 256 KiB, what would overflow it left out and logged) is saved when
// it changes and touched while it is used (at most every quarter of
// IdleTimeout). An instance that gets a request for a session it does not
// hold loads the record (concurrent requests for it load it once; an
// unknown id costs nothing else, and a Store that fails is 503 with
// Retry-After: 1, not 404), checks its owner, rebuilds the connection by
// feeding it those messages (their answers dropped), and holds the
// session from then on; an instance that learns that another holds its
// session, or that it ended (at once from a Store that is a
// SessionWatcher, which the Redis store is; else at its next touch of the
// record), drops its copy, whose running handlers finish, their output
// stored. A client's answer
// to a server request made on another instance is not relayed.
//
// # Server: HTTP+SSE (2024-11-05)
//
// Options.SSE also serves the 2024-11-05 transport on two paths beside
// the endpoint (SSEOptions: /sse and /messages). A GET on Path (Accept
// must allow text/event-stream, else 406) opens a session: an event
// stream whose first event, endpoint, names where to POST, as a relative
// reference from Path to MessagePath with ?sessionId=<128 random bits,
// base64url>; it resolves against the URL the client opened, a proxy's
// prefix included, and never names another origin. Every message of the
// server's, responses included, is a message event on that one stream,
// and a quiet stream gets keep-alive comments. A POST to
// MessagePath?sessionId= is answered 202 with an empty body at once (400
// without sessionId, 404 for no live session of the caller's; bodies as
// on the endpoint: one message, no batches, MaxBodyBytes, BodyTimeout,
// MaxBufferedBytes); its message is then pushed into the session's
// connection, one long-lived connection of SessionBackend.SessionHandler
// served as a stdio connection is, and the client's answers to sampling
// or elicitation come back as POSTs. Messages go in in the order their
// POSTs were accepted, so that a client that waits for each 202 (subscribe
// then unsubscribe, setLevel twice, a request then its cancellation) is
// served in the order it sent them: each waits until the one before it is
// done, or has run for the connection's InlineBudget (100 µs), as a stdio
// reader moves on; a response or notifications/cancelled only until the
// request before it has started. At most 64 messages of a session are on
// their way in at once (read, or waiting for their turn); one more gets
// 503 with Retry-After: 1 (SSEStats.QueueFull, logged once per burst).
// A session is legacy only: a 2026-07-28 request gets -32022 with the
// versions it speaks, on the stream, so that a client trying
// server/discover first falls back to initialize. Both paths go through the endpoint's Host, Origin and
// bearer-token checks; with Protect a session is bound to the identity
// that opened it (another identity's POST gets 404) and scopes are checked
// per POST. The GET holds a place among MaxStreams, each POSTed message
// one among MaxInFlight until its handler returns. At most
// SessionOptions.MaxSessions (4096) are open; beyond, a GET gets 503 with
// Retry-After: 1 (Stats.SSE, logged once per burst). A session ends with
// its GET: when the client closes it or a write fails, the session leaves
// the table, the POSTs it accepted hand their messages over (within 1 s;
// a message counts until it is in the connection, its turn included), and
// its running handlers are cancelled. There is no resumption.
// Shutdown ends each session's input: requests in flight are answered on
// the stream, then the stream ends.
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
// 1 s) instead of spinning it. In a session a request is served the same
// way, on its POST's goroutine, pushed into the session's connection
// (whose MaxConcurrentRequests bounds the session's requests); its output
// is written by the session's one writer, in order, to whichever stream
// it belongs to, each write under WriteTimeout, so a stalled connection
// delays its session's other streams for at most that long and never
// another session's. GET streams count against MaxStreams.
//
// # Cancellation and shutdown
//
// The client closing the response cancels the handler: "closing the SSE
// response stream MUST be treated as cancellation" (2026-07-28), and
// nothing more is written for it. In a legacy session it does not, as
// that era's transport says, unless the client holds no event id to
// resume the stream from (see above). Handler.Shutdown ends every exchange's input: listen
// streams finish with their final result, other handlers get the
// end-of-stream grace, and new requests get 503; the servers of Serve stop
// with it. When Shutdown's context ends first, the remaining handlers are
// cancelled. http.Server.Shutdown alone would wait for open event streams
// forever. Shutdown ends the sessions too: their GET streams close and
// their running handlers get the end-of-stream grace, or, with a
// SessionStore, every resumable stream's connection gets a retry field
// and ends without ending its stream (a GET's at once, a POST's when its
// handler returns), and the records and events stay, so that clients
// resume on another instance. A session's DELETE, expiry or
// eviction ends its connection the same way: handlers get the grace, then
// are cancelled.
//
// # Client: Connect
//
// Connect is the client side: a host.Session whose messages are sent as
// POSTs with the request-metadata headers, event streams read as they
// come (notifications are routed like those on stdio; only events of type
// message are messages), a call's cancellation closing its stream (and,
// to a legacy server, notifications/cancelled). Its transport implements
// host.Transport: it learns the tools' x-mcp-header arguments and mirrors
// them in Mcp-Param- headers, and reads a failed probe as "HTTP era
// detection" says: a result or a modern error is modern; a legacy
// server's JSON-RPC error, or 400/404/405 without a modern error, falls
// back to initialize (echoing any Mcp-Session-Id the legacy server
// mints); 401, 403, 5xx, timeouts and network errors (ErrHTTPTransport)
// end the connect, never a reason to fall back. A legacy server's request
// on a call's stream is answered on a POST of its own; when the server
// refuses that POST (a stateless server answers 400: it has nowhere to
// route the answer), the call fails at once with an *AnswerRefusedError
// carrying the status instead of waiting for a result that cannot come.
// At most ClientOptions.MaxServerRequests (16) of the server's requests
// are being answered at once, on all the session's streams; beyond, the
// stream a request came on is not read until an answer is done, so that a
// server streaming requests (pings) is slowed to the pace of the answers
// instead of costing a goroutine and a POST each without end.
// A 404 to a request with an Mcp-Session-Id starts a new session (calls
// that meet it together start one) and sends the request again. A POST
// stream that ends before its response is resumed with GET and
// Last-Event-ID after the server's retry interval (up to 10 times).
// Session.Close ends every call and stream in flight, sends DELETE for a
// legacy session, and closes the transport's own connection pool.
//
// Once connected to a legacy (2025-11-25 and earlier) server, the client
// keeps the session's standalone GET stream open (Connected waits at most
// 1 s for its headers): list changes, resource updates and log messages
// go to host.Options.OnNotification and OnLog, the server's requests to
// OnInput (answered by POST in the session; ping with {}), and a response
// there (a replayed call stream) to the call waiting for it, at once.
// When the server ends the connection, the client reconnects after the
// server's retry field (1 s without one; never under 50 ms) with
// Last-Event-ID, so the server can replay what the drop lost. 405 means
// the server has no stream, and it is never asked again; 404 means the
// session is gone: a new one is started, with a stream of its own; a 4xx
// to a resumption (the server purged the event) opens a fresh stream;
// another 4xx, or a reply that is not an event stream, ends it. Network
// errors, 5xx and 429 are retried with the delay doubling up to 30 s,
// and after ClientOptions.StreamReconnects attempts in a row that brought
// no event (5) the stream is left closed until the session is next
// initialized.
//
// # Client: HTTP+SSE (2024-11-05)
//
// A server still on the 2024-11-05 HTTP+SSE transport is reached by the
// backwards-compatibility procedure: when the initialize POST fails with
// 400, 404 or 405 and no modern JSON-RPC error in the body (go-sdk's
// SSEHandler answers 400 text, mcp-go's SSEServer 405), the client GETs
// the URL (Accept: text/event-stream, the credentials and headers of every
// request) and requires a 200 event stream whose first event is endpoint,
// within the probe timeout (host.Options.ProbeTimeout, 5 s). The
// endpoint is resolved against the URL (RFC 3986) and must have its
// scheme, host and port, so that credentials never leave the origin; it
// is otherwise opaque (the session is the server's query parameter).
// Anything else fails the connect with the initialize error, which says
// what the GET found. From then on every message is POSTed to the
// endpoint (200 or 202 accepts it; the body is ignored), and every answer
// comes on the stream, matched to its call by id: at most
// ClientOptions.MaxPendingCalls calls (1024) wait at once, and one more
// fails with ErrTooManyCalls; an answer no call waits for is dropped.
// Notifications and server requests on the stream are served as on the
// standalone stream (mcp-go's keep-alive pings among them, within
// MaxServerRequests), answers POSTed to the endpoint; a cancelled call
// sends notifications/cancelled.
// The transport has no resumption: when the stream ends, the session has
// ended, the calls waiting fail with an ErrHTTPTransport error, and the
// next call opens a new stream and initializes a new session on it (as it
// does when the endpoint answers 404, after which the call is sent
// again). Close closes the stream; there is no DELETE. Events are bounded
// by MaxMessageBytes, as on every stream.
package streamable
