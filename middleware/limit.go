package middleware

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/agentwire/agentwire/internal/refusal"
	"github.com/agentwire/agentwire/jsonrpc"
	"github.com/agentwire/agentwire/mcp/auth"
	"github.com/agentwire/agentwire/rpc"
)

// DefaultMaxKeys bounds the per-key state of a Limiter.
const DefaultMaxKeys = 10000

// The reasons a Limiter refuses, as data.reason and LimitError.Reason say.
const (
	ReasonRateLimited        = "rate_limited"
	ReasonConcurrencyLimited = "concurrency_limited"
)

// ErrLimited is matched by every refusal of a Limiter (a *LimitError);
// ErrRateLimited and ErrConcurrencyLimited by those of one reason.
var (
	ErrLimited            = errors.New("middleware: over a limit")
	ErrRateLimited        = errors.New("middleware: rate limited")
	ErrConcurrencyLimited = errors.New("middleware: concurrency limited")
)

// LimitError is a Limiter's refusal. Inbound, it answers the request (rpc
// sends the *jsonrpc.Error it wraps); outbound, it is the error of the call
// that was not sent.
type LimitError struct {
	Reason string // ReasonRateLimited or ReasonConcurrencyLimited
	Method string
	// Limit is the limit that refused: requests per second for a rate,
	// handlers at once for concurrency.
	Limit float64
	// RetryAfter is, for a rate limit, when the next request would be
	// let through.
	RetryAfter time.Duration
	// Outbound is true for a call this side did not send.
	Outbound bool

	rpcErr *jsonrpc.Error
}

func (e *LimitError) Error() string {
	if e.Reason == ReasonRateLimited {
		return "middleware: rate limited: " + e.Method + " over " + strconv.FormatFloat(e.Limit, 'g', -1, 64) + " requests/s"
	}
	return "middleware: concurrency limited: " + e.Method + " at its limit of " + strconv.FormatFloat(e.Limit, 'g', -1, 64) + " at once"
}

// Is matches ErrLimited, and ErrRateLimited or ErrConcurrencyLimited by
// reason.
func (e *LimitError) Is(target error) bool {
	switch target {
	case ErrLimited:
		return true
	case ErrRateLimited:
		return e.Reason == ReasonRateLimited
	case ErrConcurrencyLimited:
		return e.Reason == ReasonConcurrencyLimited
	}
	return false
}

// Unwrap returns the JSON-RPC error the refusal is answered with.
func (e *LimitError) Unwrap() error { return e.rpcErr }

// Limit bounds one method (or, as LimitOptions.Default, all the methods
// LimitOptions.Methods does not name, together), per key. The zero Limit
// limits nothing.
type Limit struct {
	// Concurrent bounds the handlers running at once (outbound: the calls
	// awaiting their answer). 0: unlimited.
	Concurrent int
	// Rate is the sustained requests per second, a token bucket refilled
	// continuously. 0: unlimited.
	Rate float64
	// Burst is the bucket's size: how many requests may come at once
	// after a quiet time. Default: Rate rounded up, at least 1.
	Burst int
}

// LimitOptions configures NewLimit. The zero value, or a nil *LimitOptions,
// limits nothing.
type LimitOptions struct {
	// Default bounds every method Methods does not name, together: one
	// budget per key shared by all of them.
	Default Limit
	// Methods bounds particular methods, each with its own budget per key,
	// in place of Default (a method mapped to the zero Limit is not
	// limited).
	Methods map[string]Limit
	// Key names the client a request counts against. Nil: one key for
	// everyone. Recipes: ByConn (per connection, which is per client over
	// stdio and sockets and per session for legacy Streamable HTTP, but
	// per POST for stateless HTTP), ByIdentity (per verified OAuth
	// identity, mcp/auth.IdentityFrom(ctx).Owner(): what a protected HTTP
	// endpoint should use). Keep it cheap and its answers bounded in
	// length: it runs for every request.
	Key func(ctx context.Context, req *rpc.Request) string
	// OutboundKey names the key of an outbound call. Nil: one key.
	// Outbound calls never share state with inbound requests.
	OutboundKey func(ctx context.Context, call *rpc.OutboundCall) string
	// MaxKeys bounds the per-key states kept. Beyond it the least recently
	// used one is forgotten (counted in LimitStats.Evicted), so fresh keys
	// cannot grow memory: a forgotten key starts again with a full bucket.
	// A key with handlers running is never forgotten, so at most the
	// handlers running add to the bound. Default DefaultMaxKeys (10000).
	MaxKeys int
	// Code is the error code of a refusal. Default -32000
	// (jsonrpc.CodeServerBusy), with data.reason, as rpc's own busy
	// answers: it tells the refusal from ACP's -32000 "Authentication
	// required", which has no data.
	Code int64
	// Logger receives a line when a limit refuses, one per burst of each
	// reason (at most one per 10 s, with the number suppressed). Nil
	// means slog.Default().
	Logger *slog.Logger
	// Clock is the clock the token buckets are refilled by. Nil: the time
	// package's.
	Clock Clock
}

// LimitStats counts what a Limiter did.
type LimitStats struct {
	Inbound, Outbound LimitCounts
	// Keys is the per-key states held now; Evicted counts those forgotten
	// to stay within MaxKeys.
	Keys    int
	Evicted int64
}

// LimitCounts counts the refusals of one direction.
type LimitCounts struct {
	RateLimited        int64 // requests (calls) refused by a rate
	ConcurrencyLimited int64 // requests (calls) refused by a concurrency limit
	Dropped            int64 // notifications dropped over either
}

// Limiter applies concurrency and rate limits per method and per key to
// inbound requests (Middleware) and outbound calls (Outbound). It never
// waits: a request over a limit is refused at once, and its handler never
// runs. Make one with NewLimit; it is safe for concurrent use by any
// number of connections.
type Limiter struct {
	def     *spec
	methods map[string]*spec
	key     func(context.Context, *rpc.Request) string
	outKey  func(context.Context, *rpc.OutboundCall) string
	maxKeys int
	code    int64
	clock   Clock
	epoch   time.Time

	rateLog, concLog refusal.Log
	counts           [2]struct{ rate, conc, dropped atomic.Int64 }

	mu      sync.Mutex
	states  map[stateKey]*state
	lru     state // sentinel of the idle states' list, most recent first
	idle    int   // states in the list
	evicted int64
}

// spec is one Limit, resolved.
type spec struct {
	id         int32
	concurrent int
	rate       float64 // tokens per nanosecond
	perSecond  float64
	burst      float64
}

const (
	dirIn uint8 = iota
	dirOut
)

type stateKey struct {
	spec int32
	dir  uint8
	key  string
}

// state is one key's use of one spec. A state with handlers running is out
// of the idle list and cannot be evicted; an idle one is kept (no
// allocation for a key seen again) until MaxKeys others are more recent.
type state struct {
	k          stateKey
	inflight   int
	tokens     float64
	last       time.Duration // since epoch, when tokens was computed
	prev, next *state
}

// NewLimit returns the Limiter opts describes.
func NewLimit(opts *LimitOptions) *Limiter {
	var o LimitOptions
	if opts != nil {
		o = *opts
	}
	l := &Limiter{key: o.Key, outKey: o.OutboundKey, maxKeys: o.MaxKeys, code: o.Code, clock: clockOr(o.Clock)}
	if l.maxKeys <= 0 {
		l.maxKeys = DefaultMaxKeys
	}
	if l.code == 0 {
		l.code = jsonrpc.CodeServerBusy
	}
	l.epoch = l.clock.Now()
	var n int32
	resolveSpec := func(lim Limit) *spec {
		hasRate := lim.Rate > 0 && !math.IsInf(lim.Rate, 1) // NaN is no rate either
		if lim.Concurrent <= 0 && !hasRate {
			return nil
		}
		n++
		s := &spec{id: n, concurrent: max(lim.Concurrent, 0)}
		if hasRate {
			s.perSecond = lim.Rate
			s.rate = lim.Rate / float64(time.Second)
			s.burst = float64(lim.Burst)
			if lim.Burst <= 0 {
				s.burst = max(1, math.Ceil(lim.Rate))
			}
		}
		return s
	}
	l.def = resolveSpec(o.Default)
	if len(o.Methods) > 0 {
		l.methods = make(map[string]*spec, len(o.Methods))
		for m, lim := range o.Methods {
			l.methods[m] = resolveSpec(lim)
		}
	}
	l.states = make(map[stateKey]*state)
	l.lru.prev, l.lru.next = &l.lru, &l.lru
	l.rateLog = refusal.Log{Logger: o.Logger, Now: l.clock.Now}
	l.concLog = refusal.Log{Logger: o.Logger, Now: l.clock.Now}
	return l
}

// ByConn is a LimitOptions.Key that counts each connection as a client
// (its key is made of the connection's address: one small allocation per
// request).
func ByConn(_ context.Context, req *rpc.Request) string {
	return connKey(req.Conn())
}

// ByIdentity is a LimitOptions.Key that counts each verified OAuth
// identity as a client (mcp/auth.Identity.Owner), and every request
// without one as one more.
func ByIdentity(ctx context.Context, _ *rpc.Request) string {
	return auth.IdentityFrom(ctx).Owner()
}

// connKey names a connection by its address: unique while it lives, and a
// connection that is gone has no handler running that a successor at the
// same address could be confused with.
func connKey(c *rpc.Conn) string {
	p := uint64(uintptr(unsafe.Pointer(c)))
	return strconv.FormatUint(p, 36)
}

// Stats returns the counters. A nil *Limiter has none.
func (l *Limiter) Stats() LimitStats {
	if l == nil {
		return LimitStats{}
	}
	var s LimitStats
	for i, c := range []*LimitCounts{&s.Inbound, &s.Outbound} {
		c.RateLimited = l.counts[i].rate.Load()
		c.ConcurrencyLimited = l.counts[i].conc.Load()
		c.Dropped = l.counts[i].dropped.Load()
	}
	l.mu.Lock()
	s.Keys = len(l.states)
	s.Evicted = l.evicted
	l.mu.Unlock()
	return s
}

func (l *Limiter) specFor(method string) *spec {
	if s, ok := l.methods[method]; ok {
		return s
	}
	return l.def
}

// Middleware returns the rpc.Middleware that limits inbound requests and
// notifications. A request over a limit is answered at once with Code and
// data {"reason":"rate_limited"|"concurrency_limited","method":M,"limit":N}
// (a rate limit adds "retry_after_ms"); a notification over a limit is
// dropped. Either way the handler is not called, the refusal is counted
// (LimitStats.Inbound) and logged once per burst. A nil *Limiter, or one
// without limits, returns a middleware that adds nothing.
func (l *Limiter) Middleware() rpc.Middleware {
	if l == nil || (l.def == nil && len(l.methods) == 0) {
		return func(next rpc.Handler) rpc.Handler { return next }
	}
	return func(next rpc.Handler) rpc.Handler {
		return rpc.HandlerFunc(func(ctx context.Context, req *rpc.Request) (any, error) {
			sp := l.specFor(req.Method)
			if sp == nil {
				return next.Handle(ctx, req)
			}
			var key string
			if l.key != nil {
				key = l.key(ctx, req)
			}
			st, lerr := l.acquire(stateKey{sp.id, dirIn, key}, sp, req.Method, req.IsNotification())
			if lerr != nil {
				return nil, lerr
			}
			if st != nil {
				defer l.release(st, sp)
			}
			return next.Handle(ctx, req)
		})
	}
}

// Outbound returns the rpc.OutboundMiddleware that applies the same limits
// to what this side sends: a call or notification over a limit is not
// sent, and returns a *LimitError (counted in LimitStats.Outbound, logged
// once per burst). Concurrency counts the calls awaiting their answer.
func (l *Limiter) Outbound() rpc.OutboundMiddleware {
	if l == nil || (l.def == nil && len(l.methods) == 0) {
		return func(next rpc.Invoker) rpc.Invoker { return next }
	}
	return func(next rpc.Invoker) rpc.Invoker {
		return func(ctx context.Context, call *rpc.OutboundCall) (json.RawMessage, error) {
			sp := l.specFor(call.Method)
			if sp == nil {
				return next(ctx, call)
			}
			var key string
			if l.outKey != nil {
				key = l.outKey(ctx, call)
			}
			st, lerr := l.acquire(stateKey{sp.id, dirOut, key}, sp, call.Method, call.Notification)
			if lerr != nil {
				return nil, lerr
			}
			if st != nil {
				defer l.release(st, sp)
			}
			return next(ctx, call)
		}
	}
}

// acquire admits one request under sp for k: it returns the state to
// release when the handler is done (nil when sp bounds no concurrency), or
// the refusal.
func (l *Limiter) acquire(k stateKey, sp *spec, method string, notification bool) (*state, *LimitError) {
	now := l.clock.Now().Sub(l.epoch)
	l.mu.Lock()
	st := l.states[k]
	if st == nil {
		st = &state{k: k, tokens: sp.burst, last: now}
		l.states[k] = st
	} else if st.inflight == 0 {
		l.unlink(st)
	}
	var reason string
	var retry time.Duration
	if sp.concurrent > 0 && st.inflight >= sp.concurrent {
		reason = ReasonConcurrencyLimited
	} else if sp.rate > 0 {
		if el := now - st.last; el > 0 {
			st.tokens = min(sp.burst, st.tokens+float64(el)*sp.rate)
		}
		st.last = now
		if st.tokens < 1 {
			reason = ReasonRateLimited
			retry = time.Duration(math.Ceil((1 - st.tokens) / sp.rate))
		} else {
			st.tokens--
		}
	}
	if reason == "" && sp.concurrent > 0 {
		st.inflight++
		l.mu.Unlock()
		return st, nil
	}
	l.park(st)
	l.mu.Unlock()
	if reason == "" {
		return nil, nil
	}
	return nil, l.refuse(k, reason, method, sp, retry, notification)
}

// release ends one request admitted under a concurrency limit.
func (l *Limiter) release(st *state, sp *spec) {
	l.mu.Lock()
	st.inflight--
	l.park(st)
	l.mu.Unlock()
}

// park puts an idle state at the head of the idle list, evicting the least
// recently used beyond MaxKeys. Under l.mu.
func (l *Limiter) park(st *state) {
	if st.inflight > 0 {
		return
	}
	st.prev, st.next = &l.lru, l.lru.next
	st.next.prev, l.lru.next = st, st
	l.idle++
	for l.idle > l.maxKeys {
		old := l.lru.prev
		l.unlink(old)
		delete(l.states, old.k)
		l.evicted++
	}
}

func (l *Limiter) unlink(st *state) {
	st.prev.next, st.next.prev = st.next, st.prev
	st.prev, st.next = nil, nil
	l.idle--
}

// refuse counts, logs and builds one refusal.
func (l *Limiter) refuse(k stateKey, reason, method string, sp *spec, retry time.Duration, notification bool) *LimitError {
	c := &l.counts[k.dir]
	e := &LimitError{Reason: reason, Method: method, Outbound: k.dir == dirOut}
	log := &l.concLog
	switch {
	case notification:
		c.dropped.Add(1)
	case reason == ReasonRateLimited:
		c.rate.Add(1)
	default:
		c.conc.Add(1)
	}
	if reason == ReasonRateLimited {
		e.Limit, e.RetryAfter = sp.perSecond, retry
		log = &l.rateLog
	} else {
		e.Limit = float64(sp.concurrent)
	}
	data := struct {
		Reason       string  `json:"reason"`
		Method       string  `json:"method"`
		Limit        float64 `json:"limit"`
		RetryAfterMS int64   `json:"retry_after_ms,omitempty"`
	}{reason, method, e.Limit, 0}
	msg := "too many concurrent requests"
	if reason == ReasonRateLimited {
		msg = "rate limited"
		data.RetryAfterMS = max(1, int64(math.Ceil(float64(retry)/float64(time.Millisecond))))
	}
	e.rpcErr = jsonrpc.NewError(l.code, msg, data)
	dirName := "inbound"
	if k.dir == dirOut {
		dirName = "outbound"
	}
	if k.key != "" {
		log.Refused("middleware: "+reason, "direction", dirName, "method", method, "limit", e.Limit, "notification", notification, "key", k.key)
	} else {
		log.Refused("middleware: "+reason, "direction", dirName, "method", method, "limit", e.Limit, "notification", notification)
	}
	return e
}
