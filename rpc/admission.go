package rpc

import (
	"context"
	"errors"
	"slices"

	"github.com/agentwire/agentwire/jsonrpc"
)

// Admission: how a request gets to run, and why reading never waits for a
// handler.
//
// A request runs in one of three lanes:
//
//	slot     one of MaxConcurrentRequests; ordinary requests and notifications
//	barrier  the ordered lane, one barrier at a time, outside the slots: a
//	         control request is never kept waiting by ordinary work
//	stream   a handler that called Request.Detach: long-lived (a
//	         subscription, a streaming turn), one of MaxStreams, so streams
//	         cannot starve ordinary requests and ordinary requests cannot
//	         strand a stream's cancellation
//
// A request that finds every slot taken, or that arrives while a barrier
// runs, takes a place in the admission queue (MaxQueuedRequests places,
// MaxQueuedBytes of params) and reading goes on: cancellations and
// responses to our own calls are read and acted on whatever the handlers
// are doing, because a handler may be waiting for exactly that message. A
// request that finds the queue full too is answered at once with
// BusyError. The one thing that still waits is a notification that needs a
// handler and finds no place: it cannot be refused (it has no reply) and
// must not be dropped, so reading pauses until a place frees.
//
// The state lives under c.mu: running, streams, queued, queuedBytes,
// waiting, held and each request's lane. A finishing handler that frees a
// slot hands it straight to the first waiting request.

// lane is the budget a request holds.
type lane uint8

const (
	laneNone    lane = iota // nothing (finished, refused, or dropped)
	laneQueued              // a place in the admission queue (held or waiting)
	laneSlot                // one of MaxConcurrentRequests
	laneBarrier             // the ordered lane
	laneStream              // one of MaxStreams
)

// ErrTooManyStreams is returned by Request.Detach when the connection's
// MaxStreams long-lived requests are all open. A handler that returns it
// (or an error wrapping it) is answered with -32000 and data
// {"reason":"too_many_streams","limit":N}.
var ErrTooManyStreams = errors.New("rpc: too many open streams")

// errNotDetachable is Detach's answer outside a running ordinary handler.
var errNotDetachable = errors.New("rpc: only a running, non-barrier handler can be detached")

// dispatch admits one request or notification: it takes a lane (or a place
// in the queue), registers the id, and runs the handler inline (or, inside
// a batch, on its own goroutine). While a barrier runs, the request is held
// instead, to be dispatched in receive order once the barrier is done. It
// reports whether the calling goroutine is still the reader.
func (c *Conn) dispatch(msg *jsonrpc.Message, b *batch, note any) bool {
	req := &Request{conn: c, batch: b, note: note}
	if m, escaped := msg.MethodRaw(); escaped {
		req.Method = msg.MethodName()
	} else {
		req.Method = bytesString(m)
	}
	if msg.Params != nil {
		req.Params = msg.Params[:len(msg.Params):len(msg.Params)]
	}
	if msg.Kind == jsonrpc.KindRequest {
		req.ID = jsonrpc.ID(bytesString(msg.ID))
	}
	if c.ordered.Load() && c.hold(req) {
		return true
	}
	if c.isBarrier(req.Method) {
		if _, ok := c.take(req, laneBarrier); !ok || !c.admit(req, false) {
			return true
		}
		c.ordered.Store(true)
		if b != nil {
			// Inside a batch the reader must go on with the batch's
			// other elements, which are held behind the barrier like
			// the lines that follow it.
			go func() {
				c.run(req, false)
				c.barrierDone()
			}()
			return true
		}
		stillReader := c.runInline(req)
		c.barrierDone()
		return stillReader
	}
	queued, ok := c.take(req, laneSlot)
	if !ok || !c.admit(req, false) {
		return true
	}
	switch {
	case queued:
		c.wait(req)
		return true
	case b != nil || c.opts.InlineBudget < 0:
		c.goRun(req)
		return true
	case c.push:
		// The transport's goroutine waits for its message's answer; with
		// no reader to hand over to, no watchdog, and two frames fewer
		// under a long-lived handler.
		c.run(req, true)
		return true
	default:
		return c.runInline(req)
	}
}

func (c *Conn) isBarrier(method string) bool {
	return c.opts.IsBarrier != nil && c.opts.IsBarrier(method)
}

// take gives req its lane (a barrier always gets the ordered lane; anything
// else a slot, or a place in the queue when none is free), registers its
// id and gives it its context, all under one lock. queued says it got a
// place in the queue rather than a lane; ok is false when the request was
// answered instead (busy, duplicate id) or dropped (shutting down).
func (c *Conn) take(req *Request, want lane) (queued, ok bool) {
	for {
		c.mu.Lock()
		if c.stopping {
			c.mu.Unlock()
			c.unanswered(req)
			return false, false
		}
		if req.ID != "" {
			if c.inflight.get(req.ID) != nil {
				c.mu.Unlock()
				c.answerDup(req)
				return false, false
			}
		}
		switch {
		case want == laneBarrier:
			req.lane = laneBarrier
		case c.running < c.opts.MaxConcurrentRequests:
			c.running++
			req.lane = laneSlot
		case c.opts.RejectWhenBusy && req.ID != "":
			c.mu.Unlock()
			c.refuseBusy(req, "every handler slot is taken")
			return false, false
		case c.queueRoomLocked(len(req.Params)):
			c.reserveLocked(req)
			queued = true
		case req.ID != "":
			c.mu.Unlock()
			c.refuseBusy(req, "every handler slot is taken and the admission queue is full")
			return false, false
		default:
			// A notification waits for a place; see above.
			if !c.waitRoom() {
				c.unanswered(req)
				return false, false
			}
			continue
		}
		c.registerLocked(req)
		c.mu.Unlock()
		return queued, true
	}
}

// unqueue takes a request that has not started out of the queue (waiting
// for a slot, or held behind a barrier); it reports whether it did.
func (c *Conn) unqueue(req *Request) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if req.lane != laneQueued {
		return false
	}
	for _, q := range []*[]*Request{&c.waiting, &c.held} {
		if i := slices.Index(*q, req); i >= 0 {
			*q = slices.Delete(*q, i, i+1)
			c.unreserveLocked(req)
			return true
		}
	}
	return false // between its reservation and its place: it starts normally
}

// queueRoomLocked reports whether a request with size bytes of params fits
// in the queue. A single request larger than MaxQueuedBytes fits an empty
// queue, so that no request is too large to ever run.
func (c *Conn) queueRoomLocked(size int) bool {
	if c.queueClosed || c.queued >= c.opts.MaxQueuedRequests {
		return false
	}
	return c.queued == 0 || c.queuedBytes+size <= c.opts.MaxQueuedBytes
}

func (c *Conn) reserveLocked(req *Request) {
	c.queued++
	c.queuedBytes += len(req.Params)
	req.lane = laneQueued
}

// unreserveLocked gives back req's place in the queue.
func (c *Conn) unreserveLocked(req *Request) {
	c.queued--
	c.queuedBytes -= len(req.Params)
	req.lane = laneNone
	if c.room != nil {
		close(c.room)
		c.room = nil
	}
}

// waitRoom is called with c.mu held and returns with it released, once the
// queue has shrunk (true) or the connection is shutting down (false). The
// reader flushes first: the replies it holds may be what the peer waits for
// before it reads on.
func (c *Conn) waitRoom() bool {
	if c.room == nil {
		c.room = make(chan struct{})
	}
	room := c.room
	c.mu.Unlock()
	c.out.flush()
	select {
	case <-room:
		return true
	case <-c.cancelledCh():
		return false
	}
}

func (c *Conn) refuseBusy(req *Request, why string) {
	c.count().busy.Add(1)
	c.refusals(&c.busyLog).Refused("rpc: request refused: "+why, "method", req.Method,
		"limit", c.opts.MaxConcurrentRequests, "queue", c.opts.MaxQueuedRequests)
	c.answerDirect(req, c.opts.busyError())
}

// admit runs Options.Admit; a refused request is answered and everything
// it held given back. With locked, the caller holds c.mu (hold: checking
// the barrier, admitting and queueing are one step); it is released before
// a refusal is answered, and kept otherwise.
func (c *Conn) admit(req *Request, locked bool) bool {
	if c.opts.Admit == nil {
		return true
	}
	if err := c.opts.Admit(req); err != nil {
		if locked {
			c.mu.Unlock()
		}
		c.refuseAdmitted(req, err)
		return false
	}
	return true
}

// refuseAdmitted answers a registered request that Admit refused, and
// gives back everything it held.
func (c *Conn) refuseAdmitted(req *Request, err error) {
	req.cancel(nil)
	c.forget(req)
	c.finish(req)
	var je *jsonrpc.Error
	if !errors.As(err, &je) {
		je = errorObject(req, err)
	}
	c.answerDirect(req, je)
}

// wait puts an admitted request with a place in the queue behind the
// others, unless a slot has freed since it took the place.
func (c *Conn) wait(req *Request) {
	c.mu.Lock()
	switch {
	case c.queueClosed:
		c.unreserveLocked(req)
		c.mu.Unlock()
		c.drop(req)
		return
	case c.slotForQueuedLocked(req):
		c.mu.Unlock()
		c.goRun(req)
		return
	}
	c.waiting = append(c.waiting, req)
	c.count().queued.Add(1)
	c.mu.Unlock()
}

// slotForQueuedLocked moves a request from its place in the queue to a free
// slot, if there is one.
func (c *Conn) slotForQueuedLocked(req *Request) bool {
	if c.running >= c.opts.MaxConcurrentRequests {
		return false
	}
	c.unreserveLocked(req)
	c.running++
	req.lane = laneSlot
	return true
}

// drop ends a registered request that will never run.
func (c *Conn) drop(req *Request) {
	req.cancel(nil)
	c.forget(req)
	c.finish(req)
	c.unanswered(req)
}

// finish gives back what req holds, hands a freed slot to the first
// waiting request, and accounts for the end of an admitted request.
func (c *Conn) finish(req *Request) {
	var next *Request
	c.mu.Lock()
	switch req.lane {
	case laneSlot:
		next = c.freeSlotLocked()
	case laneStream:
		c.streams--
	case laneQueued:
		c.unreserveLocked(req)
	}
	req.lane = laneNone
	c.unlinkLocked(req)
	c.active--
	if c.active == 0 && c.idle != nil {
		close(c.idle)
		c.idle = nil
	}
	c.mu.Unlock()
	if next != nil {
		c.goRun(next)
	}
}

// freeSlotLocked frees a slot, or hands it to the first waiting request,
// which the caller then runs.
func (c *Conn) freeSlotLocked() *Request {
	if len(c.waiting) == 0 || c.queueClosed {
		c.running--
		return nil
	}
	next := c.waiting[0]
	c.waiting[0] = nil
	c.waiting = c.waiting[1:]
	if len(c.waiting) == 0 {
		c.waiting = nil
	}
	c.unreserveLocked(next)
	next.lane = laneSlot
	return next
}

// detach moves a running request from its slot to the stream budget.
func (c *Conn) detach(req *Request) error {
	c.mu.Lock()
	switch req.lane {
	case laneStream:
		c.mu.Unlock()
		return nil
	case laneSlot:
	default:
		c.mu.Unlock()
		return errNotDetachable
	}
	if c.streams >= c.opts.MaxStreams {
		c.mu.Unlock()
		c.count().streamsRefused.Add(1)
		c.refusals(&c.streamsLog).Refused("rpc: stream refused: every stream is taken", "method", req.Method, "limit", c.opts.MaxStreams)
		return ErrTooManyStreams
	}
	c.streams++
	next := c.freeSlotLocked()
	req.lane = laneStream
	req.note = nil // read by now; a stream should not keep it (Note)
	c.mu.Unlock()
	c.streamsOpened.Add(1)
	if next != nil {
		c.goRun(next)
	}
	return nil
}

// hold queues a request behind a running barrier. It reports false when the
// barrier has finished meanwhile (dispatch normally). Checking that a
// barrier still runs and queueing happen under one lock, so barrierDone
// cannot miss a request it should dispatch. Held requests take places in
// the admission queue like waiting ones: a request that finds none is
// refused, a notification waits.
func (c *Conn) hold(req *Request) bool {
	for {
		c.mu.Lock()
		if !c.ordered.Load() {
			c.mu.Unlock()
			return false
		}
		if c.queueRoomLocked(len(req.Params)) {
			break
		}
		if c.queueClosed {
			c.mu.Unlock()
			c.unanswered(req)
			return true
		}
		if req.ID != "" {
			c.mu.Unlock()
			c.refuseBusy(req, "a barrier is running and the admission queue is full")
			return true
		}
		if !c.waitRoom() {
			c.unanswered(req)
			return true
		}
	}
	// c.mu is held.
	if ok, dup := c.registerLocked(req); !ok {
		c.mu.Unlock()
		if dup {
			c.answerDup(req)
		} else {
			c.unanswered(req)
		}
		return true
	}
	c.reserveLocked(req)
	// Admission happens here, under the lock, so that checking the barrier
	// and queueing stay one step (see above). A refused request is not yet
	// in held, so nothing else can reach it before it is given back.
	if !c.admit(req, true) {
		return true
	}
	c.held = append(c.held, req)
	c.mu.Unlock()
	return true
}

// barrierDone is called by the goroutine that ran a barrier, after its
// response was queued. It dispatches what was held behind the barrier in
// receive order; a held barrier runs right here before the next is looked
// at, and a held request that finds no slot moves to the waiting queue,
// keeping its place.
func (c *Conn) barrierDone() {
	for {
		c.mu.Lock()
		if len(c.held) == 0 {
			c.held = nil
			c.ordered.Store(false)
			c.mu.Unlock()
			return
		}
		req := c.held[0]
		c.held[0] = nil
		c.held = c.held[1:]
		switch {
		case c.queueClosed:
			c.unreserveLocked(req)
			c.mu.Unlock()
			c.drop(req)
		case c.isBarrier(req.Method):
			c.unreserveLocked(req)
			req.lane = laneBarrier
			c.mu.Unlock()
			c.run(req, false)
		case c.slotForQueuedLocked(req):
			c.mu.Unlock()
			c.goRun(req)
		default:
			c.waiting = append(c.waiting, req)
			c.count().queued.Add(1)
			c.mu.Unlock()
		}
	}
}

// dropQueued is called once handler contexts are cancelled at shutdown:
// requests still waiting for a slot never start.
func (c *Conn) dropQueued() {
	c.mu.Lock()
	c.queueClosed = true
	waiting := c.waiting
	c.waiting = nil
	for _, req := range waiting {
		c.unreserveLocked(req)
	}
	c.mu.Unlock()
	for _, req := range waiting {
		c.drop(req)
	}
}

// registerLocked enters a request in the in-flight table (rejecting a
// duplicate id), gives it its context, links it among the live requests
// and counts it as active. It reports false when the request must not run.
//
// A request's context is a child of Options.Context, not of a context of
// the connection's: shutdown cancels the live requests one by one
// (cancelLive). A connection thus costs no context of its own, nor a
// children map for every request to enter and leave under the parent's
// lock; it matters for the connection of one HTTP request.
func (c *Conn) registerLocked(req *Request) (ok, dup bool) {
	if c.stopping {
		return false, false
	}
	if req.ID != "" {
		if c.inflight.get(req.ID) != nil {
			return false, true
		}
		c.inflight.put(req)
	}
	var cc context.Context
	cc, req.cancel = context.WithCancelCause(c.parent)
	req.vctx = requestContext{Context: cc, req: req}
	req.ctx = &req.vctx
	req.prev, req.next = nil, c.live
	if c.live != nil {
		c.live.prev = req
	}
	c.live = req
	c.active++
	return true, false
}

// unlinkLocked takes a finished request out of the live list.
func (c *Conn) unlinkLocked(req *Request) {
	if req.prev != nil {
		req.prev.next = req.next
	} else if c.live == req {
		c.live = req.next
	}
	if req.next != nil {
		req.next.prev = req.prev
	}
	req.prev, req.next = nil, nil
}

// cancelLive cancels the context of every live request with cause, once:
// the moment handler contexts end at shutdown (guarantees C4, C6). No
// request registers after it (the connection is stopping).
func (c *Conn) cancelLive(cause error) {
	var few [8]*Request
	c.mu.Lock()
	c.handlersCancelled = true
	if c.cancelled != nil {
		close(c.cancelled)
	}
	live := few[:0]
	for r := c.live; r != nil; r = r.next {
		live = append(live, r)
	}
	c.mu.Unlock()
	for _, r := range live {
		r.cancel(cause)
	}
}

// cancelledCh is closed when shutdown has cancelled the handlers.
func (c *Conn) cancelledCh() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cancelled == nil {
		c.cancelled = make(chan struct{})
		if c.handlersCancelled {
			close(c.cancelled)
		}
	}
	return c.cancelled
}

func (c *Conn) answerDup(req *Request) {
	c.answerDirect(req, jsonrpc.Errorf(jsonrpc.CodeInvalidRequest,
		"Invalid Request: id %s is already in use by a request in flight", req.ID))
}

// unanswered accounts for a request that will get no response: inside a
// batch, the batch reply must not wait for it.
func (c *Conn) unanswered(req *Request) {
	if req.batch != nil && req.ID != "" {
		req.batch.drop()
	}
}
