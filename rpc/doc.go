// Package rpc is agentwire's connection runtime: one JSON-RPC 2.0 connection
// over a pair of byte streams or over whole messages, the piece every
// transport shares (stdio, sockets, and each request of Streamable HTTP). It serves requests with a Handler,
// sends calls and notifications to the peer, and owns the connection's
// lifecycle. It knows nothing about methods (guarantee W7).
//
// # Transports: byte streams and whole messages
//
// New runs a connection over a pair of byte streams with line framing
// (stdio, sockets): lines are read through framing's LineReader and
// written through framing.Output, a bounded queue whose replies to a burst
// leave in one write. NewMessages runs the same connection over whole
// messages: a MessageReader hands over one message at a time (the
// connection keeps it, no copy, no line buffer), and a MessageWriter is
// handed one Outbound per message, with its kind, id, method and error
// known, so a transport routes it (or picks an HTTP status) without
// decoding what was encoded. With a nil MessageReader the transport pushes
// messages itself — Receive, or ReceiveDecoded for a message it has
// already decoded (with a Note for the handler, Request.Note) — and ends
// input with EndInput; a request's handler then runs on the goroutine that
// pushed it. This is how each Streamable HTTP POST is served: one pushed
// connection per request, its handler on the goroutine net/http gave it,
// its context a child of the request's. Such a transport prepares its
// options once (Prepare) and makes each connection from them
// (Prepared.NewMessages, with the request's context as the handlers'
// parent): the connections share the resolved options, and a pushed Conn
// is a single 640-byte object.
//
// Everything below holds on both. What differs is output: over messages
// there is no queue to coalesce writes in, so each message is one
// WriteMessage call, OutputQueueBytes and WriteChunkBytes do not apply,
// and the writer's own blocking is the backpressure; a writer bounds its
// waiting (the HTTP transport gives each write a no-progress deadline),
// and at shutdown a writer that is an io.Closer is closed after the
// handlers' bound, which ends a write that never returns. Every wire test
// of rpc, mcp and acp runs over both (internal/wiretest's
// RerunOverMessages).
//
// # Reading and dispatch
//
// One goroutine at a time reads input. For each request it takes a handler
// slot (MaxConcurrentRequests, 256) and runs the handler itself, inline:
// most handlers finish in microseconds, and a goroutine hand-off per request
// would cost a stdio server most of its throughput. If the handler is still
// running after one to two InlineBudgets (100 µs), a watchdog hands input to a
// new reading goroutine and the old one finishes the handler as an ordinary
// goroutine, the way the Go scheduler hands off a processor from a blocked
// system call. The watchdog ticks only while the reader is busy and disarms
// itself when it is idle: a timer Reset and Stop per request would leave
// stale timers that wake the network poller, which measured at about 8 µs per
// sequential round trip. The reader's own writes run under the same watchdog,
// so a peer that stops reading our output cannot stop us from seeing its end
// of input.
// So short requests cost no hand-off, slow ones run concurrently, and replies
// go out in completion order (guarantee C1).
//
// Options.Admit, when set, sees every message in receive order before its
// handler can start, and may refuse it with an error reply: a protocol
// reserves resources there (ACP reserves a session's prompt, so a cancel
// right behind it finds the reservation).
//
// # Admission: slots, the queue, barriers and streams
//
// Reading never waits for a handler. A request that finds every slot taken
// takes a place in the admission queue (MaxQueuedRequests, default
// MaxConcurrentRequests; MaxQueuedBytes of params, 4 MiB) and runs, in
// receive order, as soon as a slot frees; meanwhile cancellations and
// responses to our own calls are read and acted on, because a running
// handler may be waiting for exactly those. A request that finds the queue
// full too is answered at once with BusyError (-32000, data.reason
// "connection_busy"), counted in Stats.Rejected and logged once per burst,
// so goroutines and memory stay bounded however many requests arrive. With
// RejectWhenBusy there is no queue for requests: a request that finds no
// slot is refused at once. The one thing that still pauses reading is
// a notification that needs a handler and finds no place in the queue: it
// has no reply to refuse with, and dropping it would lose data (so a peer
// that floods such notifications while every handler waits on its answers
// can still stall itself). A request cancelled while it waits in the queue
// never starts (a non-silencing cancellation answers it -32800), except
// with an Admit hook, whose reservations only the handler releases.
//
// Barriers run in a lane of their own, one at a time and outside the slots,
// so a control request is never kept waiting by ordinary work. A handler
// that will live long — a subscription, a streaming turn — calls
// Request.Detach: it gives back its slot and counts against MaxStreams
// (256) instead, so streams cannot starve ordinary requests; beyond the
// budget Detach returns ErrTooManyStreams, answered -32000 with data.reason
// "too_many_streams" (Stats.StreamsRefused). A detached request lets go of
// its Note (read it before detaching), so that a stream open for hours
// does not keep what the transport decoded. At shutdown, requests still in
// the queue never start.
//
// Replies of inline handlers are queued without a write, and the reader
// writes everything queued just before it would wait for input: a burst of
// pipelined requests is answered with one write (guarantee P2).
//
// # Middleware
//
// Options.Middleware wraps the connection's handler (Chain, the first
// outermost) and sees each request and notification — method, id, params —
// and its result or error; Options.Outbound wraps what this side sends
// (every Call, CallWithID and Notify), may replace a call's params (trace
// context in _meta) and reads its id once sent. Request.OnNotify tells a
// middleware of each notification the handler sends for its request, so a
// timeout can reset on progress. Both are composed once (Outbound per set
// of options, Middleware per connection) and cost nothing when absent: a
// connection without them calls its handler, and encodes its calls,
// exactly as before. A middleware runs where the handler runs — inline on
// the reader for a short request — and must not block longer than the
// handler would. Package middleware builds logging, timeouts and limits on
// these hooks; the telemetry module builds OpenTelemetry tracing.
//
// # Barriers
//
// IsBarrier marks ordered methods (legacy MCP "initialize", ACP control
// requests). A barrier's handler finishes, and its response is queued,
// before any later request or notification is dispatched (guarantee C2). If it
// runs long, reading goes on: responses to the barrier's own calls and
// cancellations are processed, and later requests are held, in receive order
// and bounded, until the barrier is done. Requests already running are not
// affected.
//
// # Output
//
// Every message goes through one bounded queue (framing.Output, 1 MiB).
// Writers wait for room before copying; while the queue is full the
// connection stops reading, and error replies to bad input wait like any
// other write, so a peer that never reads cannot build an unbounded backlog
// (guarantee C3). Stats.OutputQueued is what waits in the queue now and
// Stats.BlockedOnOutput the time writers and the reader have waited for
// room, summed over them: the backpressure a slow peer puts on us. A handler's notifications (Request.Notify) are queued in the
// order it sends them and before its response (guarantee W8).
//
// # Cancellation
//
// A handler's context is cancelled when the peer cancels the request
// (Options.Cancel: MCP's notifications/cancelled and ACP's $/cancel_request
// by default), when the connection shuts down, or on Close. A silencing
// cancellation (MCP) also suppresses everything the request would still
// write: no notification, no response (guarantee C8). A non-silencing one (ACP)
// leaves the response to the handler; a handler that returns its context's
// error is answered -32800. Unknown or finished ids are ignored.
//
// Outbound, Call returns as soon as its context ends, forgets the id, and
// sends Options.OutboundCancel without waiting; a response that arrives later
// is dropped and counted (Stats.LateResponses).
//
// # Bad input
//
// One bad line costs at most one error reply and reading continues (guarantee
// W4): -32700 (id null) for a line that is not JSON, -32600 for JSON that is
// not a valid message (with its id when readable), for an empty or oversized
// batch, for a duplicate id of a request in flight, and for a line over
// MaxMessageBytes (16 MiB), which is skipped without being buffered.
// Responses, even broken ones, are never answered, and neither are broken
// notifications (a "method" and no "id"): they are dropped and logged. A
// handler panic is
// recovered and answered -32603 (guarantee C10). Every case is counted in Stats and
// reported to OnViolation; QuietOnBadInput suppresses the replies, as the
// client side of a connection must.
//
// # Shutdown
//
// Input EOF is a half-close (guarantee C4). Admitted requests go on for up to
// EndOfStreamTimeout (5 s) and their replies are written; then their
// contexts are cancelled (cause ErrEndOfStream) and they get ShutdownTimeout
// (5 s) more. Finally queued output is drained: each write must make progress
// within ShutdownTimeout, and the whole linger after EOF stays within grace +
// shutdown (10 s). A reply that a handler produces after that is dropped.
//
// Close, a read error and a write error skip the grace (guarantee C6), also when
// they happen during it: contexts are cancelled at once, then the same
// shutdown bound applies. A write error is noticed whoever was writing
// (framing.OutputOptions.OnError). When input and output are one stream (a
// socket), input is shut with CloseRead, or left open until output is
// drained, so the last replies are not lost. A failed
// write ends output for good: nothing is written after it (guarantee C5). When
// everything is done, Done is closed and Wait returns nil for a clean end, or
// the transport error. Calls still pending fail with ErrConnectionLost.
//
// Every timer comes from the time package, so the bounds are tested with
// testing/synctest and a fake clock (guarantee C7). A reader blocked in a Read
// that cannot be interrupted (a terminal, say) is left to return on its own;
// streams that implement io.Closer are closed to unblock it.
//
// # Memory
//
// Each message is copied once out of the read buffer; the request's id,
// method and params point into that copy, which nothing writes to again.
// A request costs a handful of small allocations and no buffer of 4 KiB or
// more (guarantee P3).
//
// Numbers such as C3 cite the guarantees in the repository's
// docs/guarantees.md.
package rpc
