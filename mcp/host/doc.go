// Package host is the client side of MCP: a Session negotiates the era
// with a server and then calls it (guarantees E2–E5). It is named host,
// as the specification names the application that runs MCP clients, so
// that it does not clash with agentwire's JSON-RPC client package, on
// which its stream transport is built.
//
// StartServer (a subprocess) and NewClient (any stream) connect over a
// stream; NewSession connects over any Transport, which is how
// mcp/streamable builds a Session over Streamable HTTP. Transport is the
// seam: what a Session needs of its transport beyond carrying messages
// (restarting a process, mirroring tool arguments in headers, reading a
// failed probe as evidence of the server's era or not) it asks through the
// interface's methods, never by knowing the transport's type; a stream
// answers them as a stream does. This package does not speak HTTP: over
// HTTP, the transport finds a 2024-11-05 HTTP+SSE server on its own, when
// initialize fails, and the Session sees a legacy server (Peer.Reinitialize
// starts a new session when the transport loses one).
//
// # Negotiation
//
// With Options.Eras BothEras, the default, the client probes with
// server/discover first: a result is modern (a mutually supported version
// is chosen); -32022 is modern at another version and is never a reason
// to fall back; any other error, silence past ProbeTimeout (plus
// ProcessStartupAllowance on a fresh process's first probe, all within
// ConnectTimeout), a malformed answer, or the server dying on the probe
// (it is restarted) leads to initialize. What the transport says of an
// error comes first (Transport.Evidence): over HTTP a refusal in front of
// the server (401, 403, 5xx), a network failure or silence ends the
// connect and is never a reason to fall back. The fallback is never keyed
// to one error code. ModernOnly does not fall back and LegacyOnly does not
// probe. Session.Era says what was negotiated.
//
// An EraCache remembers eras by server identity (the command line, or the
// URL). Only a definitive rejection of the probe, or a discover result
// listing only legacy versions, is cached as legacy, and the in-memory
// cache forgets it 5 minutes later even while legacy connections keep
// succeeding, so an upgraded server is probed again. Silence, crashes and
// malformed answers are never cached. Modern entries stay until
// forgotten, which happens when a negotiation based on them fails.
//
// # Calls
//
// Typed calls cover the surface: ListTools, CallTool (WithProgress,
// WithLogLevel, Retryable), ListResources, ListResourceTemplates,
// ReadResource, ListPrompts, GetPrompt, Complete, SetLogLevel, and Request
// for anything else; lists follow nextCursor. Options.OnInput answers
// what a server asks in both eras (legacy server requests, and
// input_required results, answered and retried with the server's
// requestState); OnLog receives log messages, and OnNotification the
// notifications nothing else takes (a legacy server's list changes and
// resource updates, which over HTTP come on the session's GET stream).
// Tools whose x-mcp-header
// annotations are invalid are dropped from ListTools on every transport
// (their calls could not be mirrored if the server were reached over
// HTTP), and the transport learns the others (Transport.LearnTools).
//
// A Session is safe for concurrent use: any number of calls may be in
// flight at once, each with its own context. Cancelling a call's context
// returns at once and cancels the request on the server
// (notifications/cancelled on a stream; over HTTP the call's response is
// closed). A call's progress is routed where it is read and passed to its
// ProgressFunc in order, on a goroutine of its own, before the call
// returns, so a slow function holds only its own call. Other notifications
// (listen streams, logging) are delivered on the transport's reader, so
// those callbacks must not block for long.
//
// Session.Listen opens a subscriptions/listen stream (modern era only),
// returns once the server acknowledges it, and passes every notification
// carrying its subscription id to a callback. The server may end it with
// a final result or with notifications/cancelled; both are accepted as
// its end. When the server process is lost and the restart policy starts
// a new one, the stream is opened again on it.
//
// # Tasks
//
// A server may run a tool as a task. CallTool takes either answer: a
// task is waited for (Task.Wait) and its result returned, and a tool the
// server runs only as a task is started as one; cancelling the call's
// context then cancels the task. StartTool returns the Task itself: its
// ID may be kept and resumed by another session (ResumeTask); Get reads
// its state, Cancel cancels it, and Wait waits for its end — polling
// tasks/get at the server's pollIntervalMs and, where the server
// advertises the extension, listening for notifications/tasks on a
// stream of its own — answering its input requests through OnInput, each
// once. In the 2025-11-25 design Wait waits in tasks/result, on which the
// server asks for input. A Task may be used from several goroutines.
//
// # Shutdown
//
// Session.Close ends the session: calls in flight fail, a started server
// is shut down with the process ladder (end of input, then signals; its
// result is returned), and over HTTP a legacy session ends with DELETE.
// A Session that failed to connect has been closed already
// (*ConnectError).
package host
