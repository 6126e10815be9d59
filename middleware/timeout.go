package middleware

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentwire/agentwire/internal/refusal"
	"github.com/agentwire/agentwire/jsonrpc"
	"github.com/agentwire/agentwire/rpc"
)

// Defaults of TimeoutOptions.
const (
	// DefaultIdle is how long a request may go without progress: the
	// request timeout MCP's SDKs use (60 s).
	DefaultIdle = 60 * time.Second
	// DefaultMax bounds a request however much progress it makes.
	DefaultMax = 10 * time.Minute
	// CodeRequestTimeout is the code a timed-out request is answered
	// with: -32001 "Request timed out", as MCP's SDKs name it.
	CodeRequestTimeout int64 = -32001
)

// ErrTimeout is matched (errors.Is) by the cause of the context of a
// request that timed out, and by the error Timeouts answers it with. The
// cause is a *TimeoutError, which says which limit fired.
var ErrTimeout = errors.New("middleware: request timed out")

// TimeoutKind is the limit that ended a request.
type TimeoutKind uint8

const (
	// IdleTimeout: no progress for Limits.Idle.
	IdleTimeout TimeoutKind = iota + 1
	// MaxTimeout: running for Limits.Max.
	MaxTimeout
)

func (k TimeoutKind) String() string {
	switch k {
	case IdleTimeout:
		return "idle"
	case MaxTimeout:
		return "max"
	}
	return "timeout"
}

// TimeoutError is the cause a timed-out request's context is cancelled
// with. It matches ErrTimeout.
type TimeoutError struct {
	Method string
	Kind   TimeoutKind
	Limit  time.Duration
}

func (e *TimeoutError) Error() string {
	if e.Kind == IdleTimeout {
		return "middleware: request timed out: " + e.Method + " made no progress for " + e.Limit.String() + " (idle limit)"
	}
	return "middleware: request timed out: " + e.Method + " still running after " + e.Limit.String() + " (max limit)"
}

// Is matches ErrTimeout.
func (e *TimeoutError) Is(target error) bool { return target == ErrTimeout }

// Limits bounds how long a request may run. A zero field takes the
// default's value (TimeoutOptions.Default's for a method of Methods,
// DefaultIdle and DefaultMax for Default); a negative one means no bound.
type Limits struct {
	// Idle is how long the handler may go without sending a notification
	// for the request (Request.Notify: progress, log lines); each one
	// starts the wait again.
	Idle time.Duration
	// Max bounds the request however much progress it makes.
	Max time.Duration
}

// TimeoutOptions configures NewTimeout. The zero value, or a nil
// *TimeoutOptions, bounds every request at DefaultIdle without progress and
// DefaultMax in all, except the methods that wait on a person, a model, a
// task or a command by design (subscriptions/listen, elicitation/create,
// sampling/createMessage, tasks/result, ACP's session/prompt,
// session/request_permission and terminal/wait_for_exit), which are not
// timed unless Methods names them.
type TimeoutOptions struct {
	// Default is the limits of every method Methods does not name.
	Default Limits
	// Methods holds the limits of particular methods, in place of
	// Default's (a zero field still takes Default's). Limits{Idle: -1,
	// Max: -1} exempts a method.
	Methods map[string]Limits
	// Code is the error code a timed-out request is answered with.
	// Default CodeRequestTimeout (-32001).
	Code int64
	// Logger receives a line when a request times out, one per burst
	// (at most one per 10 s, with the number suppressed). Nil means
	// slog.Default().
	Logger *slog.Logger
	// Clock is the clock limits are measured on. Nil: the time package's.
	Clock Clock
}

// TimeoutStats counts what Timeouts did.
type TimeoutStats struct {
	Timed        int64 // requests that ran under a limit
	Running      int64 // of those, running now
	IdleTimeouts int64 // requests ended by their idle limit
	MaxTimeouts  int64 // requests ended by their max limit
	// Lingering is the timed-out requests whose handler has not returned
	// yet: a handler that ignores its context holds its request, and its
	// connection's handler slot, until it does.
	Lingering int64
	// OutboundTimeouts counts the calls this side made that Outbound ended
	// at their max limit.
	OutboundTimeouts int64
}

// Timeouts bounds the time requests run, per method, with an idle limit
// that every notification the handler sends for its request resets and an
// absolute maximum. Make one with NewTimeout; it is safe for concurrent use
// by any number of connections.
type Timeouts struct {
	def     Limits
	methods map[string]Limits
	code    int64
	clock   Clock
	log     refusal.Log

	timed, running, idle, max, lingering, outbound atomic.Int64
}

// NewTimeout returns the Timeouts opts describes.
func NewTimeout(opts *TimeoutOptions) *Timeouts {
	var o TimeoutOptions
	if opts != nil {
		o = *opts
	}
	t := &Timeouts{code: o.Code, clock: clockOr(o.Clock)}
	if t.code == 0 {
		t.code = CodeRequestTimeout
	}
	t.def = fill(o.Default, Limits{Idle: DefaultIdle, Max: DefaultMax})
	// The methods that wait by design: a listen stream lives as long as
	// its client wants it, an elicitation waits for a person and a
	// sampling request for a model, tasks/result for a task (which may
	// run for hours), an ACP turn for its agent, a permission question
	// for a person, and terminal/wait_for_exit for a command.
	untimed := [...]string{"subscriptions/listen", "elicitation/create", "sampling/createMessage",
		"tasks/result", "session/prompt", "session/request_permission", "terminal/wait_for_exit"}
	t.methods = make(map[string]Limits, len(o.Methods)+len(untimed))
	for _, m := range untimed {
		t.methods[m] = Limits{Idle: -1, Max: -1}
	}
	for m, l := range o.Methods {
		t.methods[m] = fill(l, t.def)
	}
	t.log = refusal.Log{Logger: o.Logger, Now: t.clock.Now}
	return t
}

// fill takes def's value for each zero field of l.
func fill(l, def Limits) Limits {
	if l.Idle == 0 {
		l.Idle = def.Idle
	}
	if l.Max == 0 {
		l.Max = def.Max
	}
	return l
}

// Timeout returns NewTimeout(opts).Middleware(), for a program that does
// not read its Stats.
func Timeout(opts *TimeoutOptions) rpc.Middleware { return NewTimeout(opts).Middleware() }

// Limits returns the limits a request of method runs under (fields <= 0
// meaning no bound).
func (t *Timeouts) Limits(method string) Limits {
	if l, ok := t.methods[method]; ok {
		return l
	}
	return t.def
}

// Stats returns the counters. A nil *Timeouts has none.
func (t *Timeouts) Stats() TimeoutStats {
	if t == nil {
		return TimeoutStats{}
	}
	return TimeoutStats{
		Timed:        t.timed.Load(),
		Running:      t.running.Load(),
		IdleTimeouts: t.idle.Load(),
		MaxTimeouts:  t.max.Load(),
		Lingering:    t.lingering.Load(),

		OutboundTimeouts: t.outbound.Load(),
	}
}

// Outbound returns the rpc.OutboundMiddleware that bounds the calls this
// side makes (a client's, or a server's calls to its client) by the Max
// limit of their method: when it passes, the call's context is cancelled
// with a *TimeoutError (matching ErrTimeout), which is what the call
// returns; rpc then forgets the id and sends the connection's cancellation
// (notifications/cancelled with the reason, for MCP), as for any call whose
// context ends. Idle limits do not apply: the progress of a call arrives
// as the peer's notifications, which rpc's outbound layer does not tie to
// the call. Notifications are not timed. A nil *Timeouts adds nothing.
func (t *Timeouts) Outbound() rpc.OutboundMiddleware {
	return func(next rpc.Invoker) rpc.Invoker {
		if t == nil {
			return next
		}
		return func(ctx context.Context, c *rpc.OutboundCall) (json.RawMessage, error) {
			l := t.Limits(c.Method)
			if c.Notification || l.Max <= 0 {
				return next(ctx, c)
			}
			ctx, cancel := context.WithCancelCause(ctx)
			defer cancel(nil)
			te := &TimeoutError{Method: c.Method, Kind: MaxTimeout, Limit: l.Max}
			timer := t.clock.AfterFunc(l.Max, func() { cancel(te) })
			res, err := next(ctx, c)
			if !timer.Stop() && errors.Is(context.Cause(ctx), ErrTimeout) && err != nil {
				t.outbound.Add(1)
				t.log.Refused("middleware: outbound call timed out", "method", c.Method, "limit", l.Max)
				return nil, te
			}
			return res, err
		}
	}
}

// Middleware returns the rpc.Middleware that applies the limits. For each
// request (notifications are not timed) it gives the handler a context of
// its own and one timer; when a limit passes, that context is cancelled
// with a *TimeoutError (matching ErrTimeout) and, once the handler has
// returned, the request is answered with Code, "Request timed out" and
// data {"reason":"timeout","limit_ms":N,"kind":"idle"|"max"}, whatever the
// handler returned.
//
// It waits for the handler to return rather than answering at once, so a
// handler must honour its context. Answering early would end the request
// in rpc while its handler still ran: the handler slot would be given back
// (MaxConcurrentRequests would no longer bound the handlers running, and a
// client could pile up stuck ones without limit), and the handler's later
// notifications would race the answer. Waiting keeps rpc's rules whole:
// the slot is held until the work stops, notifications precede the
// response, and a peer that cancels the request meanwhile still silences
// it (no response at all, guarantee C8). A handler that ignores its context
// is counted in TimeoutStats.Lingering while it runs on.
//
// A nil *Timeouts returns a middleware that adds nothing.
func (t *Timeouts) Middleware() rpc.Middleware {
	if t == nil {
		return func(next rpc.Handler) rpc.Handler { return next }
	}
	return func(next rpc.Handler) rpc.Handler {
		return rpc.HandlerFunc(func(ctx context.Context, req *rpc.Request) (any, error) {
			if req.IsNotification() {
				return next.Handle(ctx, req)
			}
			l := t.Limits(req.Method)
			if l.Idle <= 0 && l.Max <= 0 {
				return next.Handle(ctx, req)
			}
			return t.serve(next, ctx, req, l)
		})
	}
}

// timed is one request running under limits.
type timed struct {
	t      *Timeouts
	method string
	lim    Limits
	start  time.Time
	cancel context.CancelCauseFunc
	last   atomic.Int64 // time of the last progress, since start

	mu      sync.Mutex
	timer   Timer
	stopped bool
	fired   *TimeoutError
}

func (t *Timeouts) serve(next rpc.Handler, ctx context.Context, req *rpc.Request, l Limits) (res any, err error) {
	r := &timed{t: t, method: req.Method, lim: l}
	ctx, r.cancel = context.WithCancelCause(ctx)
	r.start = t.clock.Now()
	t.timed.Add(1)
	t.running.Add(1)
	r.mu.Lock()
	r.timer = t.clock.AfterFunc(r.firstWait(), r.check)
	r.mu.Unlock()
	if l.Idle > 0 {
		req.OnNotify(r.progress)
	}
	defer func() {
		if te := r.stop(); te != nil {
			res, err = nil, t.answer(te)
		}
	}()
	return next.Handle(ctx, req)
}

func (r *timed) firstWait() time.Duration {
	switch {
	case r.lim.Idle <= 0:
		return r.lim.Max
	case r.lim.Max <= 0:
		return r.lim.Idle
	}
	return min(r.lim.Idle, r.lim.Max)
}

// progress notes a notification of the handler's. The timer is not
// touched: when it fires it looks at the time of the last progress and
// waits again if there was some, so a chatty handler costs one clock
// reading per notification.
func (r *timed) progress(string) {
	r.last.Store(int64(r.t.clock.Now().Sub(r.start)))
}

// check runs when the timer fires: it ends the request if a limit has
// passed, and otherwise waits until the next one could.
func (r *timed) check() {
	now := r.t.clock.Now().Sub(r.start)
	r.mu.Lock()
	if r.stopped || r.fired != nil {
		r.mu.Unlock()
		return
	}
	var te *TimeoutError
	wait := time.Duration(1<<63 - 1)
	if r.lim.Max > 0 {
		if now >= r.lim.Max {
			te = &TimeoutError{Method: r.method, Kind: MaxTimeout, Limit: r.lim.Max}
		}
		wait = r.lim.Max - now
	}
	if te == nil && r.lim.Idle > 0 {
		due := time.Duration(r.last.Load()) + r.lim.Idle
		if now >= due {
			te = &TimeoutError{Method: r.method, Kind: IdleTimeout, Limit: r.lim.Idle}
		}
		wait = min(wait, due-now)
	}
	if te == nil {
		r.timer.Reset(wait)
		r.mu.Unlock()
		return
	}
	r.fired = te
	r.mu.Unlock()
	if te.Kind == IdleTimeout {
		r.t.idle.Add(1)
	} else {
		r.t.max.Add(1)
	}
	r.t.lingering.Add(1)
	r.cancel(te)
	r.t.log.Refused("middleware: request timed out", "method", r.method, "kind", te.Kind.String(), "limit", te.Limit)
}

// stop ends the timing once the handler has returned, and reports the
// limit that fired, if one did.
func (r *timed) stop() *TimeoutError {
	r.mu.Lock()
	r.stopped = true
	r.timer.Stop()
	te := r.fired
	r.mu.Unlock()
	r.cancel(nil)
	r.t.running.Add(-1)
	if te != nil {
		r.t.lingering.Add(-1)
	}
	return te
}

// timeoutAnswer is the error a timed-out request is answered with: the
// *jsonrpc.Error rpc sends, and the *TimeoutError for outer middleware.
type timeoutAnswer struct {
	te *TimeoutError
	je *jsonrpc.Error
}

func (a *timeoutAnswer) Error() string   { return a.te.Error() }
func (a *timeoutAnswer) Unwrap() []error { return []error{a.te, a.je} }

func (t *Timeouts) answer(te *TimeoutError) error {
	data := make([]byte, 0, 64)
	data = append(data, `{"reason":"timeout","limit_ms":`...)
	data = strconv.AppendInt(data, te.Limit.Milliseconds(), 10)
	data = append(data, `,"kind":"`...)
	data = append(data, te.Kind.String()...)
	data = append(data, `"}`...)
	return &timeoutAnswer{te: te, je: &jsonrpc.Error{Code: t.code, Message: "Request timed out", Data: data}}
}
