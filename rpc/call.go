package rpc

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/agentwire/agentwire/jsonrpc"
)

// maxAbandoned bounds the ids of abandoned calls remembered to tell a late
// response from an unknown one.
const maxAbandoned = 4096

// Call sends a request to the peer and waits for its response. The result
// is returned raw; an error response is returned as a *jsonrpc.Error. When ctx
// ends first, Call forgets the id, sends Options.OutboundCancel (if set)
// without waiting for it to be written, and returns ctx's error at once; a
// response that arrives later is dropped and counted as late. When the
// connection ends first the error matches ErrConnectionLost.
func (c *Conn) Call(ctx context.Context, method string, params any) (json.RawMessage, error) {
	return c.CallWithID(ctx, method, params, nil)
}

// CallWithID is Call that first tells onID the request's id, before the
// request is written: for protocols whose later messages refer to it (an
// MCP subscription's notifications carry the listen request's id).
func (c *Conn) CallWithID(ctx context.Context, method string, params any, onID func(jsonrpc.ID)) (json.RawMessage, error) {
	if inv := c.opts.outbound; inv != nil {
		call := getOutboundCall()
		*call = OutboundCall{Method: method, Params: params, conn: c, onID: onID}
		res, err := inv(ctx, call)
		putOutboundCall(call)
		return res, err
	}
	return c.callWithID(ctx, method, params, nil, onID)
}

// callWithID is CallWithID past Options.Outbound; call, when not nil, is
// told the id.
func (c *Conn) callWithID(ctx context.Context, method string, params any, call *OutboundCall, onID func(jsonrpc.ID)) (json.RawMessage, error) {
	msg, id, h, err := c.encodeCall(method, params)
	if err != nil {
		return nil, err
	}
	if call != nil {
		call.ID = jsonrpc.ID(bytesString(id))
	}
	if onID != nil {
		onID(jsonrpc.ID(id))
	}
	h.related = relatedID(ctx, c)
	pc := make(pendingCall, 1)
	// The key views the id in msg, which nothing writes to once encoded
	// (the output copies it): no string is made for it.
	key := bytesString(id)
	c.mu.Lock()
	if c.stopping {
		c.mu.Unlock()
		return nil, ErrConnectionLost
	}
	if c.pending == nil {
		c.pending = make(map[string]pendingCall)
	}
	c.pending[key] = pc
	c.mu.Unlock()

	// Queue without ever writing on the caller's goroutine: a server that
	// pauses its input must not hold a caller past its context (guarantee K1).
	if err := c.out.enqueueContext(ctx, h, msg); err != nil {
		c.dropPending(key)
		if ctx.Err() != nil {
			return nil, context.Cause(ctx)
		}
		return nil, &lostError{err}
	}
	c.out.flushAsync()
	select {
	case r := <-pc:
		return r.result, r.err
	case <-ctx.Done():
		cause := context.Cause(ctx)
		if c.abandon(key) {
			c.sendCancel(id, cause)
		}
		return nil, cause
	}
}

type lostError struct{ err error }

func (e *lostError) Error() string { return "rpc: connection lost: " + e.err.Error() }
func (e *lostError) Unwrap() []error {
	return []error{ErrConnectionLost, e.err}
}

func (c *Conn) encodeCall(method string, params any) (msg, id []byte, h head, err error) {
	n := c.nextID.Add(1)
	msg = make([]byte, 0, 96)
	msg = append(msg, jsonrpc.PrefixID...)
	start := len(msg)
	msg = strconv.AppendInt(msg, n, 10)
	id = msg[start:len(msg):len(msg)]
	msg = append(msg, jsonrpc.MidMethod...)
	msg = jsonrpc.AppendString(msg, method)
	msg, p, err := appendParams(msg, params)
	if err != nil {
		return nil, nil, head{}, err
	}
	msg = append(msg, '}')
	// id and p are re-sliced from the final message: append may have moved it.
	id = msg[start : start+len(id) : start+len(id)]
	if p != nil {
		off := len(msg) - 1 - len(p)
		p = msg[off : off+len(p) : off+len(p)]
	}
	return msg, id, head{kind: jsonrpc.KindRequest, id: jsonrpc.ID(bytesString(id)), method: method, params: p}, nil
}

// appendParams appends ,"params":VALUE, or nothing when params is nil or
// encodes as null (a nil json.RawMessage, map or pointer): when present,
// params "MUST be a Structured value" (JSON-RPC 2.0, "Request object";
// docs/guarantees.md#w2), and peers such as the TypeScript MCP SDK drop a
// request whose params are null without answering it.
func appendParams(msg []byte, params any) (out, raw []byte, err error) {
	if params == nil {
		return msg, nil, nil
	}
	raw, err = jsonrpc.RawValue(params)
	if err != nil {
		return nil, nil, err
	}
	if string(raw) == "null" {
		return msg, nil, nil
	}
	msg = append(msg, jsonrpc.MidParams...)
	return append(msg, raw...), raw, nil
}

func (c *Conn) dropPending(key string) {
	c.mu.Lock()
	delete(c.pending, key)
	c.mu.Unlock()
}

// abandon forgets a call whose caller gave up; it reports false when the
// response or the end of the connection got there first.
func (c *Conn) abandon(key string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.pending[key]; !ok {
		return false
	}
	delete(c.pending, key)
	if c.abandoned == nil || len(c.abandoned) >= maxAbandoned {
		c.abandoned = make(map[string]struct{})
	}
	c.abandoned[key] = struct{}{}
	return true
}

// sendCancel tells the peer about an abandoned call without making the
// caller wait for room in the output queue (K2).
func (c *Conn) sendCancel(id []byte, cause error) {
	cm := c.opts.OutboundCancel
	if cm == nil {
		return
	}
	msg := make([]byte, 0, 96)
	msg = append(msg, jsonrpc.PrefixMethod...)
	msg = jsonrpc.AppendString(msg, cm.Method)
	msg = append(msg, jsonrpc.MidParams...)
	start := len(msg)
	msg = append(msg, `{"requestId":`...)
	msg = append(msg, id...)
	if cm.WithReason && cause != nil {
		msg = append(msg, `,"reason":`...)
		msg = jsonrpc.AppendString(msg, cause.Error())
	}
	msg = append(msg, "}}"...)
	h := head{kind: jsonrpc.KindNotification, method: cm.Method, params: msg[start : len(msg)-1]}
	// Queued now when there is room, so a Close right after still drains
	// it; the write itself (which may block on a slow peer) is not ours to
	// wait for.
	if c.out.tryEnqueue(h, msg) {
		c.out.flushAsync()
		return
	}
	go func() { _ = c.out.send(h, msg) }()
}

// deliver hands a response to its waiting call.
func (c *Conn) deliver(msg *jsonrpc.Message, line []byte) {
	key := bytesString(msg.ID)
	c.mu.Lock()
	pc := c.pending[key]
	late := false
	if pc != nil {
		delete(c.pending, key)
	} else if _, late = c.abandoned[key]; late {
		delete(c.abandoned, key)
	}
	c.mu.Unlock()
	if pc == nil {
		kind := ViolationUnknownResponse
		if late {
			kind = ViolationLateResponse
		}
		c.violation(kind, line, nil)
		return
	}
	if msg.Kind == jsonrpc.KindError {
		e, err := jsonrpc.ParseError(msg.Error)
		if err != nil {
			e = jsonrpc.NewError(jsonrpc.CodeInternalError, "malformed error response", nil)
		}
		pc <- callResult{err: e}
		return
	}
	pc <- callResult{result: json.RawMessage(msg.Result[:len(msg.Result):len(msg.Result)])}
}

// Notify sends a notification to the peer. It waits for room in the output
// queue (bounded memory) and fails once the connection is shutting down.
func (c *Conn) Notify(ctx context.Context, method string, params any) error {
	if inv := c.opts.outbound; inv != nil {
		call := getOutboundCall()
		*call = OutboundCall{Method: method, Params: params, Notification: true, conn: c}
		_, err := inv(ctx, call)
		putOutboundCall(call)
		return err
	}
	return c.notify(ctx, method, params)
}

func (c *Conn) notify(ctx context.Context, method string, params any) error {
	msg, h, err := encodeNotification(method, params)
	if err != nil {
		return err
	}
	h.related = relatedID(ctx, c)
	// Like Call: wait for room only as long as ctx allows, and never write
	// on the caller's goroutine (guarantee K1).
	if err := c.out.enqueueContext(ctx, h, msg); err != nil {
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		c.writeFailed(err)
		return err
	}
	c.out.flushAsync()
	return nil
}

// CloseOutput drains what is queued for the peer (within ShutdownTimeout)
// and closes our output stream, while input is still read: the peer sees
// end of input and can answer what it has in flight. It is how a client
// asks a stdio server to exit without losing the messages it queued last
// (a cancellation, say). Later sends fail.
func (c *Conn) CloseOutput() error {
	c.mu.Lock()
	c.outputClosed = true
	c.mu.Unlock()
	err := c.out.closeWithin(c.opts.ShutdownTimeout, c.opts.ShutdownTimeout)
	if err != nil {
		return fmt.Errorf("rpc: closing output: %w", err)
	}
	return nil
}

// Stats counts what a connection has seen.
type Stats struct {
	ParseErrors      int64 // lines that were not JSON
	InvalidMessages  int64 // JSON that was not a valid message
	TooLong          int64 // lines over MaxMessageBytes
	UnknownResponses int64 // responses matching no call
	LateResponses    int64 // responses to calls already abandoned
	Panics           int64 // handler panics recovered
	Cancelled        int64 // requests cancelled by the peer
	Rejected         int64 // requests refused with BusyError (RejectWhenBusy, or the admission queue full)
	Queued           int64 // requests that waited in the admission queue for a slot
	Streams          int64 // handlers detached as long-lived streams (Request.Detach)
	StreamsRefused   int64 // Detach calls refused with ErrTooManyStreams
	Promotions       int64 // inline handlers handed off to their own goroutine

	// OutputQueued is the bytes waiting in the output queue now, behind
	// the block being written (at most OutputQueueBytes, or one larger
	// message). Zero over a MessageWriter, which has no queue.
	OutputQueued int64
	// BlockedOnOutput is the time writers (handlers answering, Call,
	// Notify) and the reader spent waiting for room in a full output
	// queue, summed over them: the backpressure of a peer that reads
	// slower than we write (guarantee C3). Zero over a MessageWriter,
	// whose own blocking is its backpressure.
	BlockedOnOutput time.Duration
}

type stats struct {
	parse, invalid, tooLong, unknown, late atomic.Int64
	panics, cancelled, busy, promotions    atomic.Int64
	queued, streamsRefused                 atomic.Int64
}

func (s *stats) count(k ViolationKind) {
	switch k {
	case ViolationParse:
		s.parse.Add(1)
	case ViolationInvalid:
		s.invalid.Add(1)
	case ViolationTooLong:
		s.tooLong.Add(1)
	case ViolationUnknownResponse:
		s.unknown.Add(1)
	case ViolationLateResponse:
		s.late.Add(1)
	}
}

// snapshot reads the counters; a nil stats has counted nothing.
func (s *stats) snapshot() Stats {
	if s == nil {
		return Stats{}
	}
	return Stats{
		ParseErrors: s.parse.Load(), InvalidMessages: s.invalid.Load(), TooLong: s.tooLong.Load(),
		UnknownResponses: s.unknown.Load(), LateResponses: s.late.Load(), Panics: s.panics.Load(),
		Cancelled: s.cancelled.Load(), Rejected: s.busy.Load(), Promotions: s.promotions.Load(),
		Queued: s.queued.Load(), StreamsRefused: s.streamsRefused.Load(),
	}
}
