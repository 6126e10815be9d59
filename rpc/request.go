package rpc

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"unsafe"

	"github.com/agentwire/agentwire/jsonrpc"
)

// Handler serves the requests and notifications a Conn receives. The
// transport knows nothing about methods (guarantee W7): a registry such as Methods
// sits behind this interface.
//
// Handle runs with a context that is cancelled when the peer cancels the
// request, when the connection shuts down, or when Close is called. For a
// request, the result (any value json.Marshal accepts; a json.RawMessage is
// sent byte for byte) or the error becomes the response; an error that is or
// wraps a *jsonrpc.Error is sent as it is, any other error as -32603 with
// data.exception naming its Go type. For a notification both are discarded.
// A panic is recovered and answered with -32603 (guarantee C10).
type Handler interface {
	Handle(ctx context.Context, req *Request) (result any, err error)
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(ctx context.Context, req *Request) (any, error)

// Handle calls f.
func (f HandlerFunc) Handle(ctx context.Context, req *Request) (any, error) { return f(ctx, req) }

// Methods is the simplest registry: a map from method name to function.
// Unknown methods get -32601.
type Methods map[string]HandlerFunc

// Handle dispatches on req.Method.
func (m Methods) Handle(ctx context.Context, req *Request) (any, error) {
	if f, ok := m[req.Method]; ok {
		return f(ctx, req)
	}
	return nil, jsonrpc.Errorf(jsonrpc.CodeMethodNotFound, "method not found: %s", req.Method)
}

// Request is one inbound request or notification.
type Request struct {
	// ID is the request's id exactly as sent; zero for a notification.
	ID jsonrpc.ID
	// Method is the method name.
	Method string
	// Params is the raw params value (an object or an array), nil when
	// absent. It stays valid after the handler returns.
	Params json.RawMessage

	conn   *Conn
	ctx    context.Context // &vctx once registered
	vctx   requestContext
	cancel context.CancelCauseFunc
	batch  *batch
	lane   lane // guarded by conn.mu; see admission.go
	note   any
	// prev and next link the live requests (Conn.live), under conn.mu.
	prev, next *Request

	mu       sync.Mutex
	silenced bool         // cancelled with a silencing CancelMethod
	answered bool         // the response has been queued
	onNotify func(string) // OnNotify's, under mu
}

// Note is what the transport handed over with the message
// (Conn.ReceiveDecoded), nil otherwise: a transport that had to parse a
// message to route it passes on what it learned, so the handler does not
// parse it again. A handler reads it before it detaches: Detach lets go
// of the note (Note is nil from then on), so that what the transport
// decoded is not kept for as long as a stream is open.
func (r *Request) Note() any { return r.note }

// IsNotification reports whether no response is expected.
func (r *Request) IsNotification() bool { return r.ID == "" }

// Conn returns the connection the request arrived on, for calls and
// notifications that are not about this request.
func (r *Request) Conn() *Conn { return r.conn }

// Detach declares the running handler long-lived (a subscription, a
// streaming turn): it gives back its handler slot, so that streams cannot
// starve ordinary requests, and counts against Options.MaxStreams instead
// until the handler returns. It returns ErrTooManyStreams when every stream
// is taken; the handler should then return that error, which is answered
// with -32000 (data.reason "too_many_streams"). Calling it again is a no-op;
// a barrier cannot be detached. A detached request no longer holds its
// Note.
func (r *Request) Detach() error { return r.conn.detach(r) }

// UnmarshalParams decodes Params into v. Invalid params are reported as
// -32602, so a handler can return the error as it is.
func (r *Request) UnmarshalParams(v any) error {
	if len(r.Params) == 0 {
		return jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "invalid params: params are required")
	}
	if err := json.Unmarshal(r.Params, v); err != nil {
		return jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "invalid params: %v", err)
	}
	return nil
}

// ErrRequestSilenced is returned by Notify once the peer has cancelled the
// request with a silencing cancellation, and ErrRequestAnswered once the
// response has been queued: either way the notification would arrive after
// the last message the peer expects for the request (guarantees W8, C8).
var (
	ErrRequestSilenced = errors.New("rpc: request was cancelled by the peer")
	ErrRequestAnswered = errors.New("rpc: request has already been answered")
)

// Notify sends a notification on behalf of the running request (progress,
// log lines). It waits for room in the output queue, so notifications reach
// the wire before the request's response and in the order they were sent
// (guarantee W8). params follows the same rules as a handler's result, except that
// nil, or anything that encodes as null, omits "params".
func (r *Request) Notify(method string, params any) error {
	msg, h, err := encodeNotification(method, params)
	if err != nil {
		return err
	}
	r.mu.Lock()
	if r.silenced {
		r.mu.Unlock()
		return ErrRequestSilenced
	}
	if r.answered {
		r.mu.Unlock()
		return ErrRequestAnswered
	}
	h.related = r.ID
	err = r.conn.send(h, msg)
	f := r.onNotify
	r.mu.Unlock()
	if err != nil {
		return err
	}
	// Told after the lock is released: a listener may itself send (a
	// tracer's event, a log line) without deadlocking on it.
	if f != nil {
		f(method)
	}
	return nil
}

// requestContext is the context a handler runs with: its cancellation
// context, plus the request itself as a value, so that a call or
// notification made with it (or a context derived from it) is known to
// belong to the request (Outbound.Related). It lives inside the Request:
// no allocation per request.
type requestContext struct {
	context.Context
	req *Request
}

type requestKey struct{}

func (c *requestContext) Value(key any) any {
	if key == (requestKey{}) {
		return c.req
	}
	return c.Context.Value(key)
}

// RequestFrom returns the inbound request whose handler's context ctx is
// (or derives from), or nil. A protocol layer uses it to tell a call made
// from inside one of its own handlers (which must not wait for what is held
// behind that handler) from any other, at no cost per request.
func RequestFrom(ctx context.Context) *Request {
	r, _ := ctx.Value(requestKey{}).(*Request)
	return r
}

// relatedID is the id of the running request of conn c that ctx derives
// from, or "" when there is none: a context from another connection's
// handler (a bridge forwarding upstream) relates to nothing here.
func relatedID(ctx context.Context, c *Conn) jsonrpc.ID {
	if r, ok := ctx.Value(requestKey{}).(*Request); ok && r.conn == c {
		return r.ID
	}
	return ""
}

// encodeNotification sizes the message once, and the head's params point
// into the message itself, never into the caller's bytes: a caller may
// reuse its params buffer as soon as Notify returns (an ACP agent's
// chunk encoder does).
func encodeNotification(method string, params any) ([]byte, head, error) {
	var raw []byte
	if params != nil {
		var err error
		if raw, err = jsonrpc.RawValue(params); err != nil {
			return nil, head{}, err
		}
		if string(raw) == "null" {
			raw = nil
		}
	}
	msg := make([]byte, 0, len(jsonrpc.PrefixMethod)+jsonrpc.EncodedLen(method)+len(jsonrpc.MidParams)+len(raw)+1)
	msg = append(msg, jsonrpc.PrefixMethod...)
	msg = jsonrpc.AppendString(msg, method)
	var p []byte
	if raw != nil {
		msg = append(msg, jsonrpc.MidParams...)
		start := len(msg)
		msg = append(msg, raw...)
		p = msg[start:len(msg):len(msg)]
	}
	return append(msg, '}'), head{kind: jsonrpc.KindNotification, method: method, params: p}, nil
}

// bytesString views b as a string without copying. It is used only for
// bytes of a line copy that nothing writes to again, so the string is as
// immutable as any other.
func bytesString(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}
