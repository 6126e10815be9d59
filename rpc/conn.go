package rpc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"runtime/debug"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentwire/agentwire/framing"
	"github.com/agentwire/agentwire/internal/refusal"
	"github.com/agentwire/agentwire/jsonrpc"
)

// ErrConnectionLost is matched by the error of every call that cannot be
// answered because the connection ended.
var ErrConnectionLost = errors.New("rpc: connection lost")

// ErrClosed is the cause handler contexts see after Close.
var ErrClosed = errors.New("rpc: connection closed")

// ErrEndOfStream is the cause handler contexts see when input ended and the
// grace period ran out.
var ErrEndOfStream = errors.New("rpc: input ended")

// ErrNoResponse, returned by a handler, leaves a request unanswered. It
// exists for servers that must imitate peers which stay silent (a legacy MCP
// server that ignores everything before initialize); a well-behaved handler
// always answers.
var ErrNoResponse = errors.New("rpc: leave the request unanswered")

// ErrProtocolViolation is matched by Wait's error when FatalViolations
// ended the connection.
var ErrProtocolViolation = errors.New("rpc: protocol violation")

// ErrCancelledByPeer is the cause of a handler context cancelled by a
// cancellation notification.
var ErrCancelledByPeer = errors.New("rpc: request cancelled by the peer")

// Conn is one JSON-RPC 2.0 connection over a pair of byte streams. See the
// package documentation for its concurrency, cancellation and shutdown model.
type Conn struct {
	opts    *settings
	handler Handler
	in      *input // nil when the transport pushes messages
	push    bool   // the transport pushes messages (Receive); no reading goroutine
	decode  jsonrpc.DecodeOptions
	// finished: shutdown is complete (guarded by mu; here, where it
	// costs no room).
	finished bool
	// A pushed connection is made per HTTP request: a Conn is kept within
	// 632 bytes, the 640-byte size class with the allocator's header (see
	// TestAPushedConnFitsThe640ByteSizeClass).
	out output

	// parent is Options.Context: every request's context is its child.
	parent context.Context

	// Admission (see admission.go), guarded by mu.
	running     int           // handlers holding one of MaxConcurrentRequests
	streams     int           // handlers detached into MaxStreams
	waiting     []*Request    // admitted, waiting for a slot, in receive order
	queued      int           // places taken in held and waiting (reserved or filled)
	queuedBytes int           // params bytes of those
	queueClosed bool          // shutdown dropped the queue; nothing joins it again
	room        chan struct{} // closed when the queue shrinks, for a notification waiting for a place
	// Refusals are logged once per burst, by kind; each log is made at the
	// first refusal (most connections never refuse anything).
	busyLog    atomic.Pointer[refusal.Log]
	streamsLog atomic.Pointer[refusal.Log]
	limitLog   atomic.Pointer[refusal.Log] // lines and batches over their size limits

	// ordered is true while a barrier runs or the messages held behind it
	// are being dispatched; the reader then appends to held (under mu)
	// instead of dispatching.
	ordered atomic.Bool

	mu        sync.Mutex
	live      *Request      // admitted requests not yet finished, linked through Request.prev/next
	cancelled chan struct{} // made on first use; closed by cancelLive
	// handlersCancelled: cancelLive has run.
	handlersCancelled bool
	inflight          inflightTable
	held              []*Request             // admitted behind a running barrier, in receive order
	pending           map[string]pendingCall // outbound calls by id
	abandoned         map[string]struct{}    // outbound calls given up, for late-response accounting
	active            int                    // admitted handlers not yet finished
	idle              chan struct{}          // closed when active drops to 0 after stopping
	stopping          bool
	hurried           bool          // the grace was cut short (Close or a fault during it)
	hurry             chan struct{} // closed when hurried
	closeCall         bool          // Close was called
	// outputClosed: CloseOutput ended output on purpose; a later failed
	// send is not a transport fault.
	outputClosed bool
	cause        error

	nextID atomic.Int64
	// streamsOpened counts Request.Detach (Stats.Streams), the one
	// counter an HTTP listen stream touches; the others are made on first
	// use (most connections never count anything).
	streamsOpened atomic.Int64
	counts        atomic.Pointer[stats]

	inputDone chan struct{} // made on first use; closed when input has ended or shutdown began

	done chan struct{} // made on first use (Done); closed when finished
	err  error
	// life is Context's, made on first use: most connections never ask,
	// and a pointer keeps the Conn in its size class.
	life *connLife
}

// connLife is a connection's Context and what cancels it when the
// connection has finished.
type connLife struct {
	ctx    context.Context
	cancel context.CancelFunc
}

// pendingCall is where a call's response is delivered (buffered: the
// reader never waits for the caller).
type pendingCall chan callResult

type callResult struct {
	result json.RawMessage
	err    error
}

// input is where a connection that reads its own input reads it: a byte
// stream cut into lines, or a MessageReader. A pushed connection has none
// (it is made per HTTP request, and is kept small).
type input struct {
	r         io.Reader
	w         io.Writer
	lines     *framing.LineReader // a byte stream's input; nil over messages
	src       MessageReader       // a message transport's input; nil for a stream
	srcClosed atomic.Bool

	// The watchdog of a reading goroutine (see watch). inline holds a
	// positive token while the reader runs a handler (or a flush) itself;
	// the watchdog negates it to hand input to a new reader.
	inline       atomic.Int64
	inlineSeq    int64 // owned by the current reader
	promoteAfter time.Duration
	watchdog     *time.Timer
	watchArmed   atomic.Bool
	watchLast    atomic.Int64 // the inline token seen at the previous tick
}

// New starts a connection that reads requests from r and writes replies to
// w, serving them with h. If r or w has a Close (or CloseWrite) method the
// connection uses it to end that stream when it stops. A nil handler answers
// every request with -32601.
func New(r io.Reader, w io.Writer, h Handler, opts *Options) *Conn {
	s := resolve(opts)
	if h == nil {
		h = Methods(nil)
	}
	c := newConn(h, s)
	c.in = &input{r: r, w: w, lines: framing.NewLineReader(r, s.MaxMessageBytes)}
	c.out.lines = framing.NewOutput(w, &framing.OutputOptions{
		QueueLimit: s.OutputQueueBytes,
		WriteChunk: s.WriteChunkBytes,
		OnError:    c.outputFailed, // a failed write is a transport fault (guarantee C6)
	})
	c.startReading()
	return c
}

// NewMessages starts a connection over whole messages (see MessageReader
// and MessageWriter): no framing, no line buffer, no copy of what the
// reader hands over. With a reader, a goroutine reads from it exactly as
// New reads lines. With a nil reader the transport pushes messages with
// Receive or ReceiveDecoded and ends input with EndInput, and each
// request's handler runs on the goroutine that pushed it (or, when every
// slot is taken, waits in the admission queue as usual). Every guarantee of
// New holds, except that there is no output queue to coalesce writes in:
// each message is one WriteMessage, and OutputQueueBytes and
// WriteChunkBytes do not apply.
func NewMessages(r MessageReader, w MessageWriter, h Handler, opts *Options) *Conn {
	return newMessages(resolve(opts), nil, r, w, h)
}

// NewMessages is rpc.NewMessages with p's options, and with ctx in place
// of their Context as the parent of every handler's context (nil: the
// Context of the options p was prepared from).
func (p *Prepared) NewMessages(ctx context.Context, r MessageReader, w MessageWriter, h Handler) *Conn {
	return newMessages(p.s, ctx, r, w, h)
}

func newMessages(s *settings, ctx context.Context, r MessageReader, w MessageWriter, h Handler) *Conn {
	if h == nil {
		h = Methods(nil)
	}
	c := newConn(h, s)
	if ctx != nil {
		c.parent = ctx
	}
	c.out.mw = w
	c.out.onErr = c.outputFailed
	if r == nil {
		c.push = true
		return c
	}
	c.in = &input{src: r}
	c.startReading()
	return c
}

func newConn(h Handler, s *settings) *Conn {
	if len(s.Middleware) > 0 {
		h = Chain(h, s.Middleware...)
	}
	c := &Conn{
		opts:    s,
		handler: h,
		decode:  jsonrpc.DecodeOptions{AllowNullID: s.AllowNullID},
	}
	parent := s.Context
	if parent == nil {
		parent = context.Background()
	}
	c.parent = parent
	return c
}

// refusals returns the log of one kind of refusal, made on first use.
func (c *Conn) refusals(p *atomic.Pointer[refusal.Log]) *refusal.Log {
	if l := p.Load(); l != nil {
		return l
	}
	p.CompareAndSwap(nil, &refusal.Log{Logger: c.opts.Logger})
	return p.Load()
}

// startReading arms the watchdog and starts the reading goroutine.
func (c *Conn) startReading() {
	c.in.promoteAfter = c.opts.InlineBudget
	if c.in.promoteAfter < 0 {
		c.in.promoteAfter = DefaultInlineBudget
	}
	c.in.watchdog = time.AfterFunc(time.Hour, c.watch)
	c.in.watchdog.Stop()
	go c.readLoop()
}

// InputDone is closed when no more input will be read: at end of input, or
// when shutdown begins. Long-running handlers that serve a stream (an MCP
// subscription, say) use it to end gracefully instead of waiting out the
// end-of-stream grace.
func (c *Conn) InputDone() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.inputDone == nil {
		// Made on first use: a connection of one HTTP request rarely asks.
		c.inputDone = make(chan struct{})
		if c.stopping {
			close(c.inputDone)
		}
	}
	return c.inputDone
}

// Done is closed when the connection has shut down.
func (c *Conn) Done() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done == nil {
		// Made on first use: an open listen stream over HTTP keeps its
		// connection, and nothing asks for this until the stream ends.
		c.done = make(chan struct{})
		if c.finished {
			close(c.done)
		}
	}
	return c.done
}

// Context returns a context that is cancelled once the connection has shut
// down (when Done is closed). It carries the values of the connection's
// parent context (Options.Context, or the ctx given to
// Prepared.NewMessages) but not its cancellation. It is made on first use;
// what is kept for a connection and must go with it (its entry in a table
// of subscribers, say) hooks on it with context.AfterFunc, which costs no
// goroutine while the connection lives, where a goroutine waiting on Done
// would cost one per connection.
func (c *Conn) Context() context.Context {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.life == nil {
		ctx, cancel := context.WithCancel(context.WithoutCancel(c.parent))
		c.life = &connLife{ctx: ctx, cancel: cancel}
		if c.finished {
			cancel()
		}
	}
	return c.life.ctx
}

// Wait blocks until the connection has shut down and returns why: nil after
// a clean end of input or Close, otherwise the transport error.
func (c *Conn) Wait() error {
	<-c.Done()
	return c.err
}

// Close shuts the connection down without the end-of-stream grace (guarantee
// C6): handler contexts are cancelled at once, handlers get ShutdownTimeout
// to return, queued output is drained within the same bound, and both streams
// are closed. It waits for all of that and returns Wait's result. A handler
// that wants to end its own connection should call Close on a new goroutine:
// Close waits for running handlers, the caller included.
func (c *Conn) Close() error {
	c.mu.Lock()
	c.closeCall = true
	c.mu.Unlock()
	c.stop(nil, false)
	return c.Wait()
}

// Stats returns counters of what the connection has seen.
func (c *Conn) Stats() Stats {
	s := c.counts.Load().snapshot()
	s.Streams = c.streamsOpened.Load()
	c.out.addStats(&s)
	return s
}

// count returns the connection's counters, made on first use.
func (c *Conn) count() *stats {
	if s := c.counts.Load(); s != nil {
		return s
	}
	c.counts.CompareAndSwap(nil, new(stats))
	return c.counts.Load()
}

// ----- reading -----

// readLoop is the reading goroutine. There is one at a time: when a handler
// it runs inline outlives InlineBudget, the watchdog starts a successor and this
// goroutine returns once its handler is done.
func (c *Conn) readLoop() {
	for {
		if !c.hasInput() && c.out.queued() {
			// About to wait for input: write what inline handlers queued,
			// so replies to a burst of requests leave in one write.
			if !c.asReader(c.flushOut) {
				return
			}
		}
		if c.out.full() {
			// The peer is not reading replies; stop reading requests
			// until it does (guarantee C3).
			if err := c.out.waitRoom(); err != nil {
				c.outputFailed(err)
				return
			}
		}
		line, owned, err := c.read()
		if err != nil {
			if errors.Is(err, framing.ErrLineTooLong) {
				c.tooLong(err)
				continue
			}
			c.inputEnded(err)
			return
		}
		if isBlank(line) {
			continue
		}
		if !c.handleLine(line, owned) {
			return // promoted: another goroutine reads now
		}
	}
}

// read returns the next line of a stream (a slice of the read buffer) or
// the next message of a MessageReader (owned: the connection keeps it).
func (c *Conn) read() (msg []byte, owned bool, err error) {
	if c.in.src == nil {
		msg, err = c.in.lines.ReadLine()
		return msg, false, err
	}
	msg, err = c.in.src.ReadMessage()
	if err == nil && len(msg) > c.opts.MaxMessageBytes {
		return nil, false, errMessageTooLong
	}
	return msg, true, err
}

// hasInput reports whether more input is ready without a read. A
// MessageReader cannot say, and has no output queue to flush first.
func (c *Conn) hasInput() bool { return c.in != nil && c.in.lines != nil && c.in.lines.HasLine() }

// tooLong refuses a message over MaxMessageBytes.
func (c *Conn) tooLong(err error) {
	c.violation(ViolationTooLong, nil, err)
	c.refusals(&c.limitLog).Refused("rpc: line over MaxMessageBytes skipped", "limit", c.opts.MaxMessageBytes)
	c.replyBad(jsonrpc.NullID, jsonrpc.NewError(jsonrpc.CodeInvalidRequest,
		"Invalid Request: message exceeds "+strconv.Itoa(c.opts.MaxMessageBytes)+" bytes",
		map[string]any{"limit": c.opts.MaxMessageBytes}))
}

// Receive processes one whole message pushed by the transport of a
// connection made with NewMessages and a nil reader, as the reading
// goroutine would process a line: a response is delivered to its call, a
// cancellation acted on, and a request's handler runs on the calling
// goroutine (or waits in the admission queue when every slot is taken).
// The connection owns msg from then on. Receive may be called from several
// goroutines; messages pushed by one goroutine are processed in the order
// it pushes them. It returns ErrInputEnded after EndInput or once shutdown
// has begun, and ErrNotPushed on a connection that reads its own input.
func (c *Conn) Receive(msg []byte) error {
	if err := c.pushable(); err != nil {
		return err
	}
	if len(msg) > c.opts.MaxMessageBytes {
		c.tooLong(errMessageTooLong)
		return nil
	}
	if !isBlank(msg) {
		c.handleLine(msg, true)
	}
	return nil
}

// ReceiveDecoded is Receive for a message the transport has already
// decoded with jsonrpc.Decode (under the connection's AllowNullID): msg's
// slices point into raw, which the connection owns from then on, so a
// message is decoded once however many layers look at it. note, if not
// nil, is handed to the request's handler as Request.Note: what the
// transport learned of the message (the MCP HTTP transport hands down the
// params it parsed and the era it decided).
func (c *Conn) ReceiveDecoded(raw []byte, msg *jsonrpc.Message, note any) error {
	if err := c.pushable(); err != nil {
		return err
	}
	// Straight to handleMessage, and a request straight to dispatch (all
	// handleMessage would do with it): the frames under a long-lived
	// handler stay on its stack for as long as it runs.
	if msg.Kind == jsonrpc.KindRequest {
		c.dispatch(msg, nil, note)
		return nil
	}
	c.handleMessage(msg, raw, nil, note)
	return nil
}

// EndInput ends the input of a pushed connection, as EOF ends a stream's:
// admitted requests get the end-of-stream grace (guarantee C4), then the
// connection shuts down.
func (c *Conn) EndInput() error {
	if !c.push {
		return ErrNotPushed
	}
	c.inputEnded(io.EOF)
	return nil
}

func (c *Conn) pushable() error {
	if !c.push {
		return ErrNotPushed
	}
	c.mu.Lock()
	stopping := c.stopping
	c.mu.Unlock()
	if stopping {
		return ErrInputEnded
	}
	return nil
}

// flushOut writes what is queued; a failure reaches outputFailed through
// the Output's OnError.
func (c *Conn) flushOut() { _ = c.out.flush() }

func isBlank(line []byte) bool {
	for _, b := range line {
		if b != ' ' && b != '\t' && b != '\r' {
			return false
		}
	}
	return true
}

// handleLine decodes and processes one message and reports whether the
// calling goroutine is still the reader. owned says the connection may
// keep line (a MessageReader's, or a pushed message).
func (c *Conn) handleLine(line []byte, owned bool) bool {
	// One copy per line of a stream: everything the request keeps (id,
	// method, params, the result of a response) points into it, and nothing
	// writes to it again. A whole message is already such a copy.
	own := line
	if !owned {
		own = bytes.Clone(line)
	}
	msg, err := jsonrpc.Decode(own, &c.decode)
	if err != nil {
		c.badMessage(own, err, nil)
		return true
	}
	return c.handleMessage(&msg, own, nil, nil)
}

// handleMessage acts on one decoded message, on its own or as an element
// of batch b: a response goes to its call, a cancellation to its request,
// anything else to dispatch. It reports whether the calling goroutine is
// still the reader.
func (c *Conn) handleMessage(msg *jsonrpc.Message, own []byte, b *batch, note any) bool {
	switch msg.Kind {
	case jsonrpc.KindResult, jsonrpc.KindError:
		c.deliver(msg, own)
		return true
	case jsonrpc.KindBatch:
		if b == nil {
			c.handleBatch(own)
			return true
		}
		c.badMessage(own, &jsonrpc.DecodeError{Code: jsonrpc.CodeInvalidRequest, Reason: "a batch may not contain a batch"}, b)
		return true
	case jsonrpc.KindNotification:
		if cm := c.cancelMethod(msg); cm != nil {
			c.cancelRequest(msg, cm)
			return true
		}
	case jsonrpc.KindRequest:
		if b != nil {
			b.expect()
		}
	}
	return c.dispatch(msg, b, note)
}

// badMessage counts and answers a message that could not be decoded: on
// its own line, or as an element of batch b (its answer then goes into
// the batch's reply).
func (c *Conn) badMessage(line []byte, err error, b *batch) {
	var de *jsonrpc.DecodeError
	if !errors.As(err, &de) {
		return
	}
	kind := ViolationInvalid
	if de.Code == jsonrpc.CodeParseError {
		kind = ViolationParse
	}
	c.violation(kind, line, err)
	if de.Response || de.Notification || c.opts.QuietOnBadInput {
		// Never answer a response, even a broken one; a broken
		// notification is dropped and logged (guarantee W4).
		return
	}
	id := jsonrpc.NullID
	if de.ID != nil {
		id = jsonrpc.ID(de.ID)
	}
	msg := "Parse error"
	if de.Code == jsonrpc.CodeInvalidRequest {
		msg = "Invalid Request"
	}
	e := &jsonrpc.Error{Code: de.Code, Message: msg + ": " + de.Reason}
	if b != nil {
		b.expect()
		b.add(jsonrpc.AppendErrorResponse(nil, id, e))
		return
	}
	c.replyBad(id, e)
}

// replyBad answers bad input. It waits for room like any other write (guarantee
// C3), unless the connection is configured to stay quiet.
func (c *Conn) replyBad(id jsonrpc.ID, e *jsonrpc.Error) {
	if c.opts.QuietOnBadInput {
		return
	}
	_ = c.send(errorHead(id, e), jsonrpc.AppendErrorResponse(nil, id, e))
}

func (c *Conn) violation(kind ViolationKind, line []byte, err error) {
	c.count().count(kind)
	if c.opts.FatalViolations {
		defer func() {
			show := line
			if len(show) > 120 {
				show = show[:120]
			}
			c.stop(fmt.Errorf("%w: %s: %q", ErrProtocolViolation, kind, show), false)
		}()
	}
	c.opts.Logger.Debug("rpc: bad input", "kind", kind.String(), "error", err)
	if c.opts.OnViolation != nil {
		if len(line) > 256 {
			line = line[:256]
		}
		c.opts.OnViolation(Violation{Kind: kind, Line: bytes.Clone(line), Err: err})
	}
}

func (c *Conn) goRun(req *Request) {
	go c.run(req, false)
}

// runInline runs the handler on the reading goroutine. If it outlives
// InlineBudget, the watchdog hands input to a new goroutine and this one returns
// false after finishing the request.
func (c *Conn) runInline(req *Request) bool {
	return c.asReader(func() { c.run(req, true) })
}

// asReader runs f, which may block, on the reading goroutine under the
// watchdog: if f is still running after the inline budget, a new reader
// takes over input and asReader returns false once f is done. Handlers run
// this way, and so does the reader's own flush, so a peer that stops reading
// our output cannot keep us from seeing its end of input.
func (c *Conn) asReader(f func()) bool {
	if c.push {
		// The transport's own goroutine pushed the message and waits for
		// it; there is no reading goroutine to hand input to.
		f()
		return true
	}
	c.in.inlineSeq++
	tok := c.in.inlineSeq
	c.in.inline.Store(tok)
	if !c.in.watchArmed.Load() && c.in.watchArmed.CompareAndSwap(false, true) {
		c.in.watchdog.Reset(c.in.promoteAfter)
	}
	f()
	if c.in.inline.CompareAndSwap(tok, 0) {
		return true
	}
	// Promoted while f ran. A response may have been queued without a
	// flush; the new reader may already be waiting for input.
	c.out.flush()
	return false
}

// watch is the watchdog's tick. It re-arms itself while the reader keeps
// running inline work and disarms when the reader is idle, so an idle
// connection has no timer and a busy one ticks once per budget instead of
// touching a timer for every request (a Reset and Stop per request leaves
// stale timers that wake the network poller: measured at ~8 µs per
// sequential round trip). Inline work seen at two consecutive ticks has run
// for at least one budget: it is promoted. A new reader takes over input and
// the old goroutine finishes its handler as an ordinary one, the way the Go
// scheduler hands off a processor from a blocked system call.
func (c *Conn) watch() {
	tok := c.in.inline.Load()
	if tok > 0 && tok == c.in.watchLast.Load() && c.in.inline.CompareAndSwap(tok, -tok) {
		c.count().promotions.Add(1)
		go c.readLoop()
		tok = 0
	}
	c.in.watchLast.Store(tok)
	if tok > 0 {
		c.in.watchdog.Reset(c.in.promoteAfter)
		return
	}
	// Idle: disarm, then look again, because the reader arms only when it
	// sees the watchdog disarmed.
	c.in.watchArmed.Store(false)
	if c.in.inline.Load() > 0 && c.in.watchArmed.CompareAndSwap(false, true) {
		c.in.watchdog.Reset(c.in.promoteAfter)
	}
}

// run calls the handler and answers. inline means the caller is (or was
// when it started) the reader, which flushes before it next waits for input.
func (c *Conn) run(req *Request, inline bool) {
	defer c.finish(req)
	result, err := c.call(req)
	req.cancel(nil)
	if req.ID == "" {
		c.notified(req, err)
		return
	}
	c.answer(req, result, err, inline)
}

// notified ends a notification's handling. It is out of run's line, as
// answer is, because run's frame stays on the stack of a long-lived
// handler (an MCP listen stream lives on its HTTP request's goroutine).
//
//go:noinline
func (c *Conn) notified(req *Request, err error) {
	if err != nil {
		c.opts.Logger.Debug("rpc: notification handler failed", "method", req.Method, "error", err)
	}
	c.forget(req)
}

func (c *Conn) call(req *Request) (result any, err error) {
	defer func() {
		if p := recover(); p != nil {
			c.count().panics.Add(1)
			c.opts.Logger.Error("rpc: handler panicked", "method", req.Method, "panic", p, "stack", string(debug.Stack()))
			result = nil
			err = &panicError{value: p}
		}
	}()
	return c.handler.Handle(req.ctx, req)
}

type panicError struct{ value any }

func (p *panicError) Error() string { return fmt.Sprintf("handler panicked: %v", p.value) }

// errorObject turns a handler error into the error object of its response.
func errorObject(req *Request, err error) *jsonrpc.Error {
	var je *jsonrpc.Error
	if errors.As(err, &je) {
		return je
	}
	if errors.Is(err, ErrTooManyStreams) {
		return jsonrpc.NewError(jsonrpc.CodeServerBusy, "server busy: too many open streams",
			map[string]any{"reason": "too_many_streams", "limit": req.conn.opts.MaxStreams})
	}
	var pe *panicError
	if errors.As(err, &pe) {
		return jsonrpc.NewError(jsonrpc.CodeInternalError, "Internal error: "+pe.Error(),
			map[string]any{"exception": fmt.Sprintf("%T", pe.value), "panic": true})
	}
	if req.ctx != nil && errors.Is(context.Cause(req.ctx), ErrCancelledByPeer) &&
		(errors.Is(err, context.Canceled) || errors.Is(err, ErrCancelledByPeer)) {
		return jsonrpc.NewError(jsonrpc.CodeRequestCancelled, "Request cancelled", nil)
	}
	return jsonrpc.NewError(jsonrpc.CodeInternalError, "Internal error: "+err.Error(),
		map[string]any{"exception": fmt.Sprintf("%T", err)})
}

// answer queues the response of a request unless the peer silenced it.
func (c *Conn) answer(req *Request, result any, err error, inline bool) {
	if errors.Is(err, ErrNoResponse) {
		req.mu.Lock()
		c.forget(req)
		c.unanswered(req)
		req.mu.Unlock()
		return
	}
	var raw []byte
	var eobj *jsonrpc.Error
	if err != nil {
		eobj = errorObject(req, err)
	} else if raw, err = jsonrpc.RawValue(result); err != nil {
		c.opts.Logger.Error("rpc: handler result cannot be encoded", "method", req.Method, "error", err)
		eobj = jsonrpc.NewError(jsonrpc.CodeInternalError, "Internal error: result cannot be encoded: "+err.Error(),
			map[string]any{"exception": fmt.Sprintf("%T", result)})
	}
	req.mu.Lock()
	defer req.mu.Unlock()
	c.forget(req)
	if req.silenced {
		c.unanswered(req)
		return
	}
	req.answered = true
	id := stringBytes(string(req.ID))
	if req.batch != nil {
		var m []byte
		if eobj != nil {
			m = jsonrpc.AppendErrorResponse(nil, req.ID, eobj)
		} else {
			m = append(append(append(append(append(m, jsonrpc.PrefixID...), id...), jsonrpc.MidResult...), raw...), '}')
		}
		req.batch.add(m)
		return
	}
	var werr error
	switch {
	case eobj != nil:
		werr = c.out.send(errorHead(req.ID, eobj), jsonrpc.AppendErrorResponse(nil, req.ID, eobj))
	case inline:
		werr = c.out.enqueue(resultHead(req.ID), jsonrpc.PrefixID, id, jsonrpc.MidResult, raw, jsonrpc.Suffix)
	default:
		werr = c.out.send(resultHead(req.ID), jsonrpc.PrefixID, id, jsonrpc.MidResult, raw, jsonrpc.Suffix)
	}
	if werr != nil {
		c.writeFailed(werr)
	}
}

// answerDirect answers a request that never reached a handler.
func (c *Conn) answerDirect(req *Request, e *jsonrpc.Error) {
	if req.ID == "" {
		return
	}
	m := jsonrpc.AppendErrorResponse(nil, req.ID, e)
	if req.batch != nil {
		req.batch.add(m)
		return
	}
	_ = c.send(errorHead(req.ID, e), m)
}

// send writes one message; a failure is a transport fault, noticed here
// whoever was writing.
func (c *Conn) send(h head, m []byte) error {
	if err := c.out.send(h, m); err != nil {
		c.writeFailed(err)
		return err
	}
	return nil
}

// forget removes a finished or silenced request from the in-flight table.
func (c *Conn) forget(req *Request) {
	if req.ID == "" {
		return
	}
	c.mu.Lock()
	if c.inflight.get(req.ID) == req {
		c.inflight.remove(req.ID)
	}
	c.mu.Unlock()
}

// ----- cancellation in (guarantee C8) -----

func (c *Conn) cancelMethod(msg *jsonrpc.Message) *CancelMethod {
	m, _ := msg.MethodRaw()
	for i := range c.opts.Cancel {
		if string(m) == c.opts.Cancel[i].Method {
			return &c.opts.Cancel[i]
		}
	}
	return nil
}

func (c *Conn) cancelRequest(msg *jsonrpc.Message, cm *CancelMethod) {
	var p struct {
		RequestID jsonrpc.ID `json:"requestId"`
	}
	if msg.Params == nil || json.Unmarshal(msg.Params, &p) != nil || p.RequestID == "" {
		c.opts.Logger.Debug("rpc: cancellation without a usable requestId", "method", cm.Method)
		return
	}
	c.mu.Lock()
	req := c.inflight.get(p.RequestID)
	if req != nil && cm.Silence {
		// The peer has forgotten the id; it may reuse it at once.
		c.inflight.remove(p.RequestID)
	}
	c.mu.Unlock()
	if req == nil {
		return // unknown or finished: ignored silently
	}
	if cm.Silence {
		req.mu.Lock()
		req.silenced = true
		req.mu.Unlock()
	}
	c.count().cancelled.Add(1)
	req.cancel(ErrCancelledByPeer)
	// A request cancelled while it waits in the queue never starts: its
	// handler would only see a cancelled context (and one that ignores it
	// would act). Not with an Admit hook: what Admit reserved, only the
	// handler releases, so there the handler runs, cancelled.
	if c.opts.Admit == nil && c.unqueue(req) {
		c.forget(req)
		c.finish(req)
		if cm.Silence {
			c.unanswered(req)
		} else {
			c.answerDirect(req, jsonrpc.NewError(jsonrpc.CodeRequestCancelled, "Request cancelled", nil))
		}
	}
}

// ----- batches (guarantee W6) -----

type batch struct {
	c     *Conn
	mu    sync.Mutex
	count int // requests not yet answered, plus one while dispatching
	buf   []byte
}

func (b *batch) add(m []byte) {
	b.mu.Lock()
	if len(b.buf) == 0 {
		b.buf = append(b.buf, '[')
	} else {
		b.buf = append(b.buf, ',')
	}
	b.buf = append(b.buf, m...)
	b.count--
	b.finishLocked()
}

func (b *batch) finishLocked() {
	if b.count > 0 {
		b.mu.Unlock()
		return
	}
	out := b.buf
	b.buf = nil
	b.mu.Unlock()
	if len(out) > 0 {
		_ = b.c.send(head{kind: jsonrpc.KindBatch}, append(out, ']'))
	}
}

// expect counts one more entry the batch's reply waits for.
func (b *batch) expect() {
	b.mu.Lock()
	b.count++
	b.mu.Unlock()
}

// drop counts a request of the batch that will not produce an entry.
func (b *batch) drop() {
	b.mu.Lock()
	b.count--
	b.finishLocked()
}

func (c *Conn) handleBatch(line []byte) {
	if c.opts.RejectBatches {
		c.replyBad(jsonrpc.NullID, jsonrpc.Errorf(jsonrpc.CodeInvalidRequest, "Invalid Request: batches are not supported"))
		return
	}
	n := jsonrpc.Batch(line, nil)
	switch {
	case n == 0:
		c.replyBad(jsonrpc.NullID, jsonrpc.Errorf(jsonrpc.CodeInvalidRequest, "Invalid Request: empty batch"))
		return
	case n > c.opts.MaxBatchLength:
		c.count().invalid.Add(1)
		c.refusals(&c.limitLog).Refused("rpc: batch over MaxBatchLength refused", "elements", n, "limit", c.opts.MaxBatchLength)
		c.replyBad(jsonrpc.NullID, jsonrpc.Errorf(jsonrpc.CodeInvalidRequest,
			"Invalid Request: batch of %d elements exceeds the limit of %d", n, c.opts.MaxBatchLength))
		return
	}
	b := &batch{c: c, count: 1}
	jsonrpc.Batch(line, func(elem []byte) {
		msg, err := jsonrpc.Decode(elem, &c.decode)
		if err != nil {
			c.badMessage(elem, err, b)
			return
		}
		c.handleMessage(&msg, elem, b, nil)
	})
	b.drop() // the dispatching guard
}
