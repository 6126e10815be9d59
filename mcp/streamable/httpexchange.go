package streamable

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"github.com/agentwire/agentwire/mcp"
	"net/http"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentwire/agentwire/jsonrpc"
	"github.com/agentwire/agentwire/mcp/auth"
	"github.com/agentwire/agentwire/rpc"
)

// The third step of a POST (after the gate in httpserver.go and the route
// in httproute.go): the exchange. The message, decoded once, is pushed
// into a connection of its own over the rpc message seam
// (rpc.NewMessages with no reader), and its handler runs right here, on
// the goroutine net/http gave the request: no pipe, no line buffer, no
// goroutine hand-off. The exchange is the connection's MessageWriter: each
// message arrives whole with its kind, id and error known, so the HTTP
// status of an answer is chosen from its error code before a byte is
// written, and nothing we encoded is decoded again.
//
//	notification (progress, a log line, a listen stream's event)
//	        -> the event stream (started on the first one)
//	server request (legacy sampling, elicitation, roots)
//	        -> the event stream, under an id unique in the process; the
//	           answer arrives as a POST of its own and is pushed back
//	response -> the JSON body with its status, or the stream's last event
//
// The client closing the response cancels the handler (the connection's
// handler contexts are children of the request's): "closing the SSE
// response stream MUST be treated as cancellation".

// exchange is one POST being served.
type exchange struct {
	h    *Handler
	r    *http.Request
	w    http.ResponseWriter
	conn *rpc.Conn
	// in is the body decoded once and what the route learned of it. A
	// stateless exchange lets go of it as its handler starts: the
	// handler keeps what it needs (its rpc.Request, which drops the note
	// when the handler detaches), and an open listen stream keeps its
	// exchange for as long as it is open.
	in *inbound
	id *auth.Identity // the verified caller (Options.Protect)
	// wstate holds, in one word (an exchange fits a size class), what
	// the exchange's writing and those ending it tell each other:
	// wWriting while sendLocked writes to the client, wStopped once
	// unblock has set a deadline that must not be renewed (wHard: now,
	// not after stallGrace), and, from wCloser up, how many closers wait
	// for mu (lockEnding). A closer cuts a write that may be stalled, and
	// waits, the deadline untouched, for mu held an instant by code that
	// is not writing: cutting that kind left the final chunk of the
	// response unwritten, so the client read a stream the server ended as
	// one cut off.
	wstate atomic.Uint32
	// done is set with answered, for the one reader that must not take mu
	// (a stalled write holds it).
	done atomic.Bool
	// quietSince is when the stream was last written to (or the request
	// arrived), as time since the handler's epoch: the handler's one
	// keep-alive clock reads it (see sweepKeepAlives).
	quietSince atomic.Int64

	mu       sync.Mutex
	x        *exchangeExtra // what few exchanges need: made when needed
	started  bool           // the event stream's headers are out
	answered bool           // the response has been written
	closed   bool           // ServeHTTP has returned, or is about to
	timedOut bool           // a write failed at WriteTimeout
	// canSSE: the client takes an event stream. Set once, before the
	// exchange is shared (open); here, where it costs no room.
	canSSE  bool
	modern  bool // in.note.Era == mcp.Modern, kept once in is let go
	pw      pieceWriter
	headers sync.WaitGroup // the helper that writes the stream's headers
}

// inbound is a POST's message, decoded once (msg's slices point into the
// body), and the note its route hands the handler.
type inbound struct {
	msg  jsonrpc.Message
	note mcp.Routed
}

// input returns ex.in, made on first use.
func (ex *exchange) input() *inbound {
	if ex.in == nil {
		ex.in = &inbound{}
	}
	return ex.in
}

// exchangeExtra is what few exchanges need, kept apart, since an open
// listen stream keeps its exchange: the server's own requests sent on a
// stateless stream, or what a session's connection is.
type exchangeExtra struct {
	serverAsks // made by the first server request on a stateless stream

	// In a legacy session (Options.Sessions) the exchange is one
	// connection of the session's streams, written to by the session's
	// writer (deliver); the exchange's conn is nil.
	sess *httpSession
	st   *sseStream    // the stream it carries (a GET's: once attached)
	end  chan struct{} // closed (finishLocked) when the connection is to end
	// cancel stops a GET following a stream of another instance.
	cancel       func()
	ending       bool // end is closed (under mu)
	get          bool // a GET: the standalone stream or a resumption
	mint         bool // an initialize that opens a session
	keepsSession bool // its unanswered request keeps the session busy past it
	pushFailed   bool // the session ended before the request got in (under mu)
}

// session is the session whose connection ex is; nil without one.
func (ex *exchange) session() *httpSession {
	if ex.x == nil {
		return nil
	}
	return ex.x.sess
}

// extra returns ex.x, made on first use.
func (ex *exchange) extra() *exchangeExtra {
	if ex.x == nil {
		ex.x = &exchangeExtra{}
	}
	return ex.x
}

// ctl is the response's controller (deadlines, flushes). It is made where
// it is used, on the caller's stack, rather than kept: an open stream
// keeps its exchange.
func (ex *exchange) ctl() *http.ResponseController { return http.NewResponseController(ex.w) }

// serverAsks is what an exchange keeps of the server's own requests sent
// on its stream (a legacy client asked for sampling or elicitation): kept
// apart, since almost no exchange sends any, and an open listen stream
// keeps its exchange.
type serverAsks struct {
	caller string   // who asked: only this client may answer
	ids    []string // the ids they were sent with
}

// jsonContentType is the Content-Type of every JSON answer, shared: net/http
// only reads header values.
var (
	jsonContentType = []string{"application/json"}
	sseContentType  = []string{"text/event-stream"}
	noCache         = []string{"no-cache"}
	no              = []string{"no"}
)

// smallBody is the size up to which net/http sets Content-Length itself.
const smallBody = 2048

var errExchangeClosed = errors.New("mcp: the HTTP exchange is over")

// exchange serves one routed message and writes its answer.
func (h *Handler) exchange(w http.ResponseWriter, r *http.Request, body []byte, ex *exchange, accept acceptable) {
	if !h.open(w, r, ex, accept) {
		return
	}
	// The handler runs here and answers through WriteMessage. What
	// follows is a function of its own: a listen stream's handler runs
	// for as long as the stream is open, with this frame under it.
	in := ex.in
	ex.in = nil
	ex.conn.ReceiveDecoded(body, &in.msg, &in.note)
	h.endExchange(w, r, ex)
}

// endExchange waits for the exchange's handler when it has not answered,
// makes sure a response was written, and forgets the exchange.
//
//go:noinline
func (h *Handler) endExchange(w http.ResponseWriter, r *http.Request, ex *exchange) {
	defer h.running.Done()
	ex.conn.EndInput()
	if !ex.done.Load() {
		// Not answered by its handler: it waits in the admission queue,
		// or chose not to answer. Its connection ends once it is done
		// (or the end-of-input grace runs out); the client may go first.
		select {
		case <-ex.conn.Done():
		case <-r.Context().Done():
			go ex.conn.Close()
		}
	}
	if !ex.done.Load() {
		// A write may be stalled on a client that does not read,
		// holding the lock: it must fail now. (An answered exchange
		// keeps its deadline: net/http still writes the JSON answer.)
		ex.unblock()
	}
	ex.mu.Lock()
	answered := ex.answered
	written := ex.started || answered
	ex.closed = true // nothing more reaches the ResponseWriter
	var asked []string
	if ex.x != nil {
		asked = ex.x.ids
	}
	ex.mu.Unlock()
	if !written && r.Context().Err() == nil {
		httpError(w, http.StatusInternalServerError, "", jsonrpc.CodeInternalError, "Internal error: the request ended without a response", nil)
	}
	for _, id := range asked {
		h.asked.Delete(id)
	}
	h.mu.Lock()
	delete(h.exchanges, ex)
	if len(h.exchanges) == 0 && h.keepAlives != nil {
		h.keepAlives.Stop() // nothing to keep alive: no timer pending
		h.keepAlivesArmed = false
	}
	h.mu.Unlock()
	<-ex.conn.Done()
}

// open makes the exchange's connection and registers it, or answers 503
// when the server is draining. It is a function of its own so that its
// frame is not on the stack of a handler that runs for long.
//
//go:noinline
func (h *Handler) open(w http.ResponseWriter, r *http.Request, ex *exchange, accept acceptable) bool {
	ex.h, ex.r, ex.w = h, r, w
	ex.canSSE = accept.sse
	// The client going away cancels the handler; a verified identity is
	// in its context.
	ctx := r.Context()
	if ex.id != nil {
		ctx = auth.WithIdentity(ctx, ex.id)
	}
	ex.conn = h.conns.NewMessages(ctx, nil, ex, h.backend.ExchangeHandler(&ex.in.note))

	h.mu.Lock()
	if h.draining {
		h.mu.Unlock()
		ex.conn.EndInput()
		w.Header().Set("Retry-After", "1")
		httpError(w, http.StatusServiceUnavailable, "", jsonrpc.CodeInternalError, "Service Unavailable: the server is shutting down", nil)
		return false
	}
	// Quiet from now: a body that took long to arrive does not count
	// against the answer's time to become an event stream.
	ex.quietSince.Store(int64(time.Since(h.epoch)))
	h.exchanges[ex] = struct{}{}
	h.armKeepAlivesLocked()
	h.running.Add(1)
	h.mu.Unlock()

	if !accept.json {
		ex.mu.Lock()
		ex.startStreamLocked()
		ex.mu.Unlock()
	}
	return true
}

// WriteMessage receives the connection's messages (rpc.MessageWriter).
func (ex *exchange) WriteMessage(m *rpc.Outbound) error {
	ex.mu.Lock()
	defer ex.mu.Unlock()
	if ex.closed || ex.answered || ex.r.Context().Err() != nil {
		// Over, or the client has gone: a cancelled request gets nothing
		// more, not even its answer.
		return errExchangeClosed
	}
	// What the handler sends is held until the client has it: it is
	// charged to the request budget meanwhile, so that while large
	// answers drain no more requests are admitted to make more (an
	// answer may be many times its request: "<" is encoded as \u003c).
	n := int64(m.Len())
	ex.h.limits.charge(n)
	defer ex.h.limits.release(n)
	switch m.Kind {
	case jsonrpc.KindResult, jsonrpc.KindError:
		ex.answered = true
		ex.done.Store(true)
		if ex.started {
			return ex.eventLocked(m)
		}
		status := http.StatusOK
		if m.Kind == jsonrpc.KindError && m.Error != nil {
			status = statusFor(m.Error.Code, ex.modern)
		}
		hdr := ex.w.Header()
		hdr["Content-Type"] = jsonContentType
		if n+1 > smallBody {
			// A small body net/http measures itself (it holds it in its
			// buffer until the handler returns); a large one would be
			// sent chunked.
			hdr["Content-Length"] = []string{strconv.FormatInt(n+1, 10)}
		}
		ex.w.WriteHeader(status)
		return ex.sendLocked(m, nil, newline)
	case jsonrpc.KindRequest:
		return ex.serverRequestLocked(m)
	}
	// A notification about the request (progress, a log line, a listen
	// stream's change): it needs the event stream. A client that accepts
	// only JSON does not get it.
	if !ex.canSSE {
		return nil
	}
	ex.startStreamLocked()
	return ex.eventLocked(m)
}

// serverRequestLocked sends a request of the handler's (legacy sampling,
// elicitation, roots) on the event stream. Without sessions its answer
// comes back on a POST of its own, so it gets an id unique in the process;
// answerServerRequest routes the answer back.
func (ex *exchange) serverRequestLocked(m *rpc.Outbound) error {
	if !ex.canSSE {
		// Nowhere to send it: the handler's call fails now. (Its answer
		// is delivered, not written: pushing it here is safe.)
		ex.conn.Receive(jsonrpc.AppendErrorResponse(nil, m.ID,
			jsonrpc.NewError(jsonrpc.CodeInternalError, "the client accepts no event stream, so it cannot be asked anything", nil)))
		return nil
	}
	asks := &ex.extra().serverAsks
	if asks.caller == "" {
		asks.caller = callerOf(ex.r)
	}
	// Unguessable, and only its own client (the same credentials) may
	// answer it.
	var nonce [16]byte
	rand.Read(nonce[:])
	id := `"srv-` + hex.EncodeToString(nonce[:]) + `"`
	ex.h.asked.Store(id, askedRequest{ex: ex, id: []byte(m.ID), caller: asks.caller})
	asks.ids = append(asks.ids, id)
	line := append([]byte(`{"jsonrpc":"2.0","id":`), id...)
	line = append(line, `,"method":`...)
	line = jsonrpc.AppendString(line, m.Method)
	if m.Params != nil {
		line = append(line, `,"params":`...)
		line = append(line, m.Params...)
	}
	line = append(line, '}')
	ex.startStreamLocked()
	return ex.sendLocked(nil, eventPrefix, line, eventSuffix)
}

// answerServerRequest passes a legacy client's answer to the exchange that
// asked, under the id its handler used.
func (h *Handler) answerServerRequest(msg *jsonrpc.Message, r *http.Request) {
	v, ok := h.asked.Load(string(msg.ID))
	if !ok || v.(askedRequest).caller != callerOf(r) {
		return
	}
	h.asked.Delete(string(msg.ID))
	a := v.(askedRequest)
	line := append([]byte(`{"jsonrpc":"2.0","id":`), a.id...)
	if msg.Kind == jsonrpc.KindError {
		line = append(line, `,"error":`...)
		line = append(line, msg.Error...)
	} else {
		line = append(line, `,"result":`...)
		line = append(line, msg.Result...)
	}
	a.ex.conn.Receive(append(line, '}'))
}

// statusFor maps an error response to its status (MCP 2026-07-28,
// Streamable HTTP): 400 for malformed requests, bad metadata, header mismatches,
// missing capabilities and unsupported versions; 404 for unknown methods
// ("JSON body distinguishes it from a legacy HTTP+SSE 404"). Legacy clients
// expect JSON-RPC errors with 200, except for version trouble.
func statusFor(code int64, modern bool) int {
	switch code {
	case jsonrpc.CodeParseError, jsonrpc.CodeInvalidRequest, mcp.CodeUnsupportedProtocolVersion:
		return http.StatusBadRequest
	}
	if !modern {
		return http.StatusOK
	}
	switch code {
	case jsonrpc.CodeInvalidParams, mcp.CodeHeaderMismatch, mcp.CodeMissingRequiredClientCapability:
		return http.StatusBadRequest
	case jsonrpc.CodeMethodNotFound:
		return http.StatusNotFound
	}
	return http.StatusOK
}

// startStreamLocked makes the response an event stream. In a session
// (which primes the stream: an event id to resume from) it is called with
// the session's wmu held.
func (ex *exchange) startStreamLocked() {
	if ex.started || ex.answered || ex.closed || !ex.canSSE {
		return
	}
	ex.started = true
	// The values are shared, as jsonContentType is: an open stream keeps
	// its header until it ends.
	h := ex.w.Header()
	h["Content-Type"] = sseContentType
	h["Cache-Control"] = noCache
	// "Servers SHOULD send X-Accel-Buffering: no" so that proxies pass
	// events on as they come.
	h["X-Accel-Buffering"] = no
	ex.w.WriteHeader(http.StatusOK)
	// The headers are written out on a goroutine of its own, which this
	// one waits for (so the ResponseWriter is still used by one goroutine
	// at a time). net/http's header writer has a 2.8 KiB stack frame, and
	// a stream starts at the bottom of a handler's stack (its first
	// notification): written from here, the request goroutine's stack
	// would grow to 16 KiB and keep that size for as long as the stream is
	// open, twice what an idle listen stream needs.
	ex.headers.Add(1)
	go ex.writeHeaders()
	ex.headers.Wait()
	if s := ex.session(); s != nil {
		if !ex.x.get {
			s.streams.Add(1) // a GET counts from its admission
		}
		s.primeLocked(ex)
	}
}

// writeHeaders is startStreamLocked's helper goroutine.
func (ex *exchange) writeHeaders() {
	defer ex.headers.Done()
	ex.sendLocked(nil, nil)
}

var (
	newline      = []byte("\n")
	eventPrefix  = []byte("event: message\ndata: ")
	eventSuffix  = []byte("\n\n")
	keepAliveSSE = []byte(":\n\n")
)

func (ex *exchange) eventLocked(m *rpc.Outbound) error {
	return ex.sendLocked(m, eventPrefix, eventSuffix)
}

// sendLocked writes prefix, the message m (if any), then the other parts
// and flushes them, each piece of at most writePiece bytes under a renewed
// WriteTimeout: a client that reads slowly is served, one that has
// stopped reading fails the write (and with it the request) once
// WriteTimeout passes without progress. The deadline is renewed when a
// send starts and after every writePiece bytes, not for every part (the
// clock is read a few times per request, not per part). A JSON answer is
// not flushed: it is the last thing written, and net/http writes it when
// the handler returns.
func (ex *exchange) sendLocked(m *rpc.Outbound, prefix []byte, parts ...[]byte) error {
	pw := &ex.pw // a field: handing it to WriteTo costs no allocation
	defer ex.wstate.And(^uint32(wWriting))
	if ex.wstate.Or(wWriting) >= wCloser {
		// A closer waits for mu and did not see this write start: the
		// connection is ending, and a write that stalls must not keep it.
		ex.unblockAfter(stallGrace)
	}
	start := ex.renewDeadline()
	ex.quietSince.Store(int64(start.Sub(ex.h.epoch)))
	*pw = pieceWriter{ex: ex, start: start}
	if _, err := pw.Write(prefix); err != nil {
		return err
	}
	if m != nil {
		if _, err := m.WriteTo(pw); err != nil {
			return err
		}
	}
	for _, b := range parts {
		if _, err := pw.Write(b); err != nil {
			return err
		}
	}
	if ex.answered && !ex.started {
		return nil
	}
	if pw.since > 0 {
		pw.start = ex.renewDeadline()
	}
	if err := ex.ctl().Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return ex.writeFailed(err, pw.start)
	}
	return nil
}

// pieceWriter writes to an exchange's client under ex.mu, renewing the
// deadline after every writePiece bytes.
type pieceWriter struct {
	ex    *exchange
	start time.Time // when the deadline was last renewed
	since int       // bytes written since
}

func (pw *pieceWriter) Write(b []byte) (int, error) {
	total := len(b)
	for len(b) > 0 {
		if pw.since >= writePiece {
			pw.start, pw.since = pw.ex.renewDeadline(), 0
		}
		n := min(len(b), writePiece-pw.since)
		if _, err := pw.ex.w.Write(b[:n]); err != nil {
			return total - len(b), pw.ex.writeFailed(err, pw.start)
		}
		pw.since += n
		b = b[n:]
	}
	return total, nil
}

// renewDeadline gives the next write WriteTimeout to make progress,
// unless unblock has ended the exchange's writing (its deadline in the
// past must stand). It returns when the deadline was set.
func (ex *exchange) renewDeadline() time.Time {
	now := time.Now()
	d := ex.h.opts.WriteTimeout
	if d <= 0 || ex.wstate.Load()&wStopped != 0 {
		return now
	}
	ex.ctl().SetWriteDeadline(now.Add(d))
	if ex.wstate.Load()&wStopped != 0 {
		// unblock ran meanwhile: its deadline must stand, and a past one
		// is as good (this race is rare, and the connection is ending).
		ex.ctl().SetWriteDeadline(time.Now())
	}
	return now
}

// writeFailed counts a write cut off by WriteTimeout, once per exchange:
// one that failed at its deadline, WriteTimeout after it was set (unblock's
// deadline, which ends a write early, does not count).
func (ex *exchange) writeFailed(err error, start time.Time) error {
	d := ex.h.opts.WriteTimeout
	if !ex.timedOut && d > 0 && errors.Is(err, os.ErrDeadlineExceeded) && time.Since(start) >= d {
		ex.timedOut = true
		ex.h.limits.refused(refWriteTimeout, "timeout", d)
	}
	return err
}

// tick sends an SSE comment on a quiet stream, turning a slow JSON answer
// into an event stream first (clients "must ignore comment lines").
func (ex *exchange) tick() {
	// A write in progress (perhaps stalled on a client that does not
	// read) holds the lock; the stream is not quiet then.
	if ex.mu.TryLock() {
		// A sweep that waited on another stream's write may come late:
		// this one may have been written to meanwhile.
		quiet := time.Since(ex.h.epoch) - time.Duration(ex.quietSince.Load())
		s := ex.session()
		if ex.closed || ex.answered || !ex.canSSE || quiet < ex.h.opts.KeepAlive || (s != nil && ex.x.ending) {
			ex.mu.Unlock()
			return
		}
		if !ex.started && s != nil {
			// A session's stream starts with its priming event, whose
			// place among the session's events the writer's lock keeps;
			// a writer at work means the stream is not quiet.
			if !s.wmu.TryLock() {
				ex.mu.Unlock()
				return
			}
			ex.startStreamLocked()
			s.wmu.Unlock()
		}
		ex.startStreamLocked()
		ex.sendLocked(nil, keepAliveSSE)
		ex.mu.Unlock()
	}
}

// One clock keeps every quiet exchange alive, instead of a timer per
// request: a timer made and stopped for every POST was a twentieth of
// the server's work on a tools/call, and one kept by every open listen
// stream a part of its memory. The clock runs while exchanges are open,
// every quarter of KeepAlive; each run sends a comment on every stream
// that has been quiet for KeepAlive, so one goes out between 1 and 1.25
// KeepAlive after the last write.

// keepAliveEvery is the clock's period.
func (h *Handler) keepAliveEvery() time.Duration { return max(h.opts.KeepAlive/4, time.Millisecond) }

// armKeepAlivesLocked starts the clock if it is not running. Called under
// h.mu with an exchange registered. The timer is made on first use, by
// the goroutine serving a request.
func (h *Handler) armKeepAlivesLocked() {
	if h.opts.KeepAlive <= 0 || h.keepAlivesArmed {
		return
	}
	h.keepAlivesArmed = true
	if h.keepAlives == nil {
		h.keepAlives = time.AfterFunc(h.keepAliveEvery(), h.sweepKeepAlives)
		return
	}
	h.keepAlives.Reset(h.keepAliveEvery())
}

// sweepKeepAlives is one run of the clock.
func (h *Handler) sweepKeepAlives() {
	now := int64(time.Since(h.epoch))
	quiet := int64(h.opts.KeepAlive)
	var due []*exchange
	h.mu.Lock()
	for ex := range h.exchanges {
		if now-ex.quietSince.Load() >= quiet {
			due = append(due, ex)
		}
	}
	h.keepAlivesArmed = false
	if len(h.exchanges) > 0 {
		h.armKeepAlivesLocked()
	}
	h.mu.Unlock()
	for _, ex := range due {
		ex.tick()
	}
}

// abort cancels the request's handler and fails a write stalled on a
// client that does not read (Shutdown ran out of time). Called under h.mu.
func (ex *exchange) abort() {
	ex.unblock()
	if ex.conn == nil {
		// A session's connection: its handlers are the session's, which
		// Shutdown closes; this connection ends.
		go ex.closeStream()
		return
	}
	go ex.conn.Close()
}

// ----- a session's connections -----

// beginStream reports whether a message sent now goes out as an event
// (with an id to resume from), not as the JSON answer, and starts the
// event stream if it has not started: its priming event then takes its
// place in the store, and on the wire, before the message's (a client
// resuming from the priming id is sent the message). Under the session's
// wmu, which keeps it true until deliver.
func (ex *exchange) beginStream(final bool) bool {
	ex.mu.Lock()
	defer ex.mu.Unlock()
	if ex.closed || ex.x.ending || ex.r.Context().Err() != nil || !(ex.started || (!final && ex.canSSE)) {
		return false
	}
	ex.startStreamLocked()
	return ex.started
}

// deliver writes one of a session's messages to this connection, as an
// event with id eid ("" for none) or, for a response on a POST that has
// not become an event stream, as the JSON answer (without the
// Mcp-Session-Id header when dropSession: initialize failed). It reports
// whether it was written. A response ends the connection. Called by the
// session's writer (wmu held).
func (ex *exchange) deliver(m *rpc.Outbound, eid string, dropSession bool) bool {
	ex.mu.Lock()
	defer ex.mu.Unlock()
	if ex.closed || ex.x.ending || ex.r.Context().Err() != nil {
		return false
	}
	n := int64(m.Len())
	ex.h.limits.charge(n)
	defer ex.h.limits.release(n)
	final := m.Kind == jsonrpc.KindResult || m.Kind == jsonrpc.KindError
	var err error
	if final && !ex.started {
		ex.answered = true
		ex.done.Store(true)
		status := http.StatusOK
		if m.Kind == jsonrpc.KindError && m.Error != nil {
			status = statusFor(m.Error.Code, false)
		}
		hdr := ex.w.Header()
		if dropSession {
			hdr.Del(mcp.HeaderSessionID)
		}
		hdr["Content-Type"] = jsonContentType
		if n+1 > smallBody {
			hdr["Content-Length"] = []string{strconv.FormatInt(n+1, 10)}
		}
		ex.w.WriteHeader(status)
		err = ex.sendLocked(m, nil, newline)
	} else {
		if !ex.started {
			if !ex.canSSE {
				return false
			}
			ex.startStreamLocked()
		}
		if final {
			ex.answered = true
			ex.done.Store(true)
		}
		err = ex.sendLocked(m, eventHead(eid), eventSuffix)
	}
	if err != nil || final {
		ex.finishLocked()
	}
	return err == nil
}

// finishLocked tells the connection's goroutine to end it.
func (ex *exchange) finishLocked() {
	if ex.x.ending {
		return
	}
	ex.x.ending = true
	if ex.x.end != nil {
		close(ex.x.end)
	}
	if ex.x.cancel != nil {
		ex.x.cancel()
	}
}

// closeStream ends the connection from outside (a newer connection took
// its stream over, the stream or its session ended), without waiting for
// a write stalled on a client that does not read: that one fails within
// stallGrace (lockEnding).
func (ex *exchange) closeStream() {
	ex.lockEnding()
	ex.finishLocked()
	ex.mu.Unlock()
}

// stallGrace is how long a closer lets a write in progress go on before
// it fails: a write to a client that reads is done in far less (its
// bytes may have reached the client before the flush returns), one to a
// client that does not read would hold the closer until WriteTimeout.
const stallGrace = 250 * time.Millisecond

// lockEnding takes mu to end the connection. A write in progress, which
// may be stalled on a client that does not read, gets stallGrace to end
// and fails then; mu held by anything else (deliver or the writer
// between writes, a keep-alive deciding) is held for an instant and is
// waited for, the deadline untouched, so that the connection still ends
// cleanly: with its last chunk. Both sides write wstate before they
// read it (one word: each sees the other's bit), so a write that starts
// while the closer waits sees the closer and bounds itself.
func (ex *exchange) lockEnding() {
	if ex.mu.TryLock() {
		return
	}
	if ex.wstate.Add(wCloser)&wWriting != 0 {
		ex.unblockAfter(stallGrace)
	}
	ex.mu.Lock()
	ex.wstate.Add(^uint32(wCloser - 1))
}

// retryAndClose ends the connection but not its stream (Shutdown with a
// SessionStore): the retry field first, so that the client resumes
// elsewhere at once.
func (ex *exchange) retryAndClose(retry []byte) {
	if ex.mu.TryLock() {
		if ex.started && !ex.closed && !ex.x.ending {
			ex.sendLocked(nil, retry)
		}
		ex.finishLocked()
		ex.mu.Unlock()
		return
	}
	ex.closeStream()
}

// unblock makes a pending or future write to the client fail at once.
// It does not take ex.mu, which a stalled write holds.
func (ex *exchange) unblock() { ex.unblockAfter(0) }

// unblockAfter makes a pending or future write to the client fail d from
// now (d > 0: stallGrace, capped by WriteTimeout), or at once (d == 0).
// A deadline already set stands, unless this one is at once.
func (ex *exchange) unblockAfter(d time.Duration) {
	if d <= 0 {
		ex.wstate.Or(wStopped | wHard)
		ex.ctl().SetWriteDeadline(time.Now())
		return
	}
	if w := ex.h.opts.WriteTimeout; w > 0 {
		d = min(d, w)
	}
	if ex.wstate.Or(wStopped)&wStopped != 0 {
		return
	}
	ex.ctl().SetWriteDeadline(time.Now().Add(d))
	if ex.wstate.Load()&wHard != 0 { // an unblock at once ran meanwhile
		ex.ctl().SetWriteDeadline(time.Now())
	}
}

// The bits of exchange.wstate.
const (
	wWriting = 1 << iota
	wStopped
	wHard
	wCloser // the unit of the count of closers waiting
)
