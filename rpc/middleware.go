package rpc

import (
	"context"
	"encoding/json"
	"sync"

	"github.com/agentwire/agentwire/internal/chain"
	"github.com/agentwire/agentwire/jsonrpc"
)

// Middleware wraps the Handler of a connection: it sees every inbound
// request and notification (method, id, params) before the handler and
// its result or error after. It is the layer request logging, timeouts,
// rate limits and tracing are built on (package middleware, and the otel
// module). A Middleware runs where the handler runs — inline on the
// reading goroutine for a short request — so it must not block longer
// than the handler it wraps would; the context it passes on must derive
// from the one it was given (RequestFrom, cancellation by the peer and the
// connection's shutdown all travel in it).
type Middleware func(next Handler) Handler

// Chain returns h wrapped in mw, the first outermost: Chain(h, a, b)
// serves a request as a(b(h)). With no middleware it returns h itself, so
// a connection without any pays nothing.
func Chain(h Handler, mw ...Middleware) Handler {
	h, _ = chain.Compose(h, mw)
	return h
}

// OutboundCall is one request or notification this side sends (Conn.Call,
// Conn.CallWithID, Conn.Notify), as an OutboundMiddleware sees it. It is
// valid until the outermost middleware returns, and is reused afterwards:
// a middleware must not keep it (copy what it needs).
type OutboundCall struct {
	// Method is the method called.
	Method string
	// Params is what will be encoded as params. A middleware may replace
	// it (to add _meta trace context, say) before calling next.
	Params any
	// Notification is true for Conn.Notify: next returns no result.
	Notification bool
	// ID is the request's id, set once it is encoded (before it is
	// written): read it after next returns, or from an inner middleware
	// never. Zero for a notification.
	ID jsonrpc.ID

	conn *Conn
	onID func(jsonrpc.ID)
}

// outboundCalls recycles OutboundCalls: handed to a chain of functions,
// one would escape to the heap on every call, the one allocation outbound
// middleware would add to a call that nothing traces.
var outboundCalls = sync.Pool{New: func() any { return new(OutboundCall) }}

func getOutboundCall() *OutboundCall { return outboundCalls.Get().(*OutboundCall) }

func putOutboundCall(c *OutboundCall) {
	*c = OutboundCall{}
	outboundCalls.Put(c)
}

// Conn is the connection the call is made on; nil when no rpc.Conn sends
// it (a host session over Streamable HTTP runs the same outbound
// middleware for its POSTs).
func (c *OutboundCall) Conn() *Conn { return c.conn }

// Invoker sends an outbound call and waits for its answer: the result of
// a request (nil for a notification) or its error.
type Invoker func(ctx context.Context, call *OutboundCall) (json.RawMessage, error)

// OutboundMiddleware wraps what a connection sends: every Call,
// CallWithID and Notify passes through it, in order, the first outermost
// (Options.Outbound). It runs on the caller's goroutine.
type OutboundMiddleware func(next Invoker) Invoker

// send is the innermost Invoker: the connection's own Call or Notify.
func send(ctx context.Context, call *OutboundCall) (json.RawMessage, error) {
	if call.Notification {
		return nil, call.conn.notify(ctx, call.Method, call.Params)
	}
	return call.conn.callWithID(ctx, call.Method, call.Params, call, call.onID)
}

// outboundChain composes Options.Outbound once per set of options (the
// connection travels in the OutboundCall), so that no connection pays for
// composing it. Nil when there is none.
func outboundChain(mw []OutboundMiddleware) Invoker {
	if inv, ok := chain.Compose(Invoker(send), mw); ok {
		return inv
	}
	return nil
}

// OnNotify registers f to be called after each notification the running
// handler sends for this request (Request.Notify: progress, log lines) is
// queued, with the notification's method. A middleware uses it to tell a
// request that makes progress from one that is stuck (package
// middleware's timeouts reset on progress). Every function registered is
// called, in the order registered (so two middlewares can both listen);
// nil is ignored. f runs on the handler's goroutine and must be short.
func (r *Request) OnNotify(f func(method string)) {
	if f == nil {
		return
	}
	r.mu.Lock()
	if prev := r.onNotify; prev != nil {
		next := f
		f = func(m string) { prev(m); next(m) }
	}
	r.onNotify = f
	r.mu.Unlock()
}
