package middleware_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/agentwire/agentwire/internal/wiretest"
	"github.com/agentwire/agentwire/jsonrpc"
	"github.com/agentwire/agentwire/mcp/auth"
	"github.com/agentwire/agentwire/middleware"
	"github.com/agentwire/agentwire/rpc"
)

// A request over a concurrency limit is answered at once, on the wire,
// and its handler never runs; once a handler returns, the next one gets
// its place.
func TestLimitConcurrencyRefusalNeverReachesTheHandler(t *testing.T) {
	lim := middleware.NewLimit(&middleware.LimitOptions{Methods: map[string]middleware.Limit{"work": {Concurrent: 1}}, Logger: quiet})
	var calls atomic.Int64
	var release chan struct{}
	h := func() rpc.Handler {
		release = make(chan struct{})
		return rpc.Methods{
			"work": func(context.Context, *rpc.Request) (any, error) {
				calls.Add(1)
				<-release
				return "done", nil
			},
			"other": func(context.Context, *rpc.Request) (any, error) { return "free", nil },
		}
	}
	bubble(t, h, mws(lim.Middleware()), func(w *wiretest.Wire) {
		w.Send(`{"jsonrpc":"2.0","id":1,"method":"work"}`)
		equalLines(t, "over the limit", w.Exchange(
			`{"jsonrpc":"2.0","id":2,"method":"work"}`,
			`{"jsonrpc":"2.0","id":3,"method":"other"}`,
		), []string{
			`{"jsonrpc":"2.0","id":2,"error":{"code":-32000,"message":"too many concurrent requests","data":{"reason":"concurrency_limited","method":"work","limit":1}}}`,
			`{"jsonrpc":"2.0","id":3,"result":"free"}`,
		})
		if n := calls.Load(); n != 1 {
			t.Errorf("handler called %d times, want 1: a refusal reached it", n)
		}
		close(release)
		equalLines(t, "first answered", w.Take(), []string{`{"jsonrpc":"2.0","id":1,"result":"done"}`})
		equalLines(t, "after release", w.Exchange(`{"jsonrpc":"2.0","id":4,"method":"work"}`),
			[]string{`{"jsonrpc":"2.0","id":4,"result":"done"}`})
		if s := lim.Stats(); s.Inbound != (middleware.LimitCounts{ConcurrencyLimited: 1}) || s.Keys != 1 {
			t.Errorf("stats: %+v", s)
		}
	})
}

// The token bucket: Burst at once, then Rate per second, refilled with
// time; a refusal says when to retry.
func TestLimitRateTokenBucket(t *testing.T) {
	lim := middleware.NewLimit(&middleware.LimitOptions{Default: middleware.Limit{Rate: 2, Burst: 2}, Logger: quiet})
	var calls atomic.Int64
	h := func() rpc.Handler {
		return rpc.HandlerFunc(func(context.Context, *rpc.Request) (any, error) { calls.Add(1); return 1, nil })
	}
	refused := func(id int, retry int) string {
		return `{"jsonrpc":"2.0","id":` + strconv.Itoa(id) + `,"error":{"code":-32000,"message":"rate limited","data":{"reason":"rate_limited","method":"a","limit":2,"retry_after_ms":` + strconv.Itoa(retry) + `}}}`
	}
	bubble(t, h, mws(lim.Middleware()), func(w *wiretest.Wire) {
		equalLines(t, "a burst", w.Exchange(
			`{"jsonrpc":"2.0","id":1,"method":"a"}`,
			`{"jsonrpc":"2.0","id":2,"method":"b"}`, // Default is shared by the methods Methods does not name
			`{"jsonrpc":"2.0","id":3,"method":"a"}`,
		), []string{
			`{"jsonrpc":"2.0","id":1,"result":1}`,
			`{"jsonrpc":"2.0","id":2,"result":1}`,
			refused(3, 500),
		})
		w.Sleep(200 * time.Millisecond)
		equalLines(t, "after 200ms", w.Exchange(`{"jsonrpc":"2.0","id":4,"method":"a"}`), []string{refused(4, 300)})
		w.Sleep(300 * time.Millisecond)
		equalLines(t, "after 500ms", w.Exchange(`{"jsonrpc":"2.0","id":5,"method":"a"}`, `{"jsonrpc":"2.0","id":6,"method":"a"}`),
			[]string{`{"jsonrpc":"2.0","id":5,"result":1}`, refused(6, 500)})
		w.Sleep(time.Hour) // refills to Burst, not beyond
		got := w.Exchange(`{"jsonrpc":"2.0","id":7,"method":"a"}`, `{"jsonrpc":"2.0","id":8,"method":"a"}`, `{"jsonrpc":"2.0","id":9,"method":"a"}`)
		if len(got) != 3 || got[2] != refused(9, 500) {
			t.Errorf("after an hour: %q", got)
		}
		if n := calls.Load(); n != 5 {
			t.Errorf("handler called %d times, want 5", n)
		}
		if s := lim.Stats(); s.Inbound.RateLimited != 4 || s.Keys != 1 {
			t.Errorf("stats: %+v", s)
		}
	})
}

// Notifications over a limit are dropped and counted, never handled.
func TestLimitDropsNotifications(t *testing.T) {
	lim := middleware.NewLimit(&middleware.LimitOptions{Methods: map[string]middleware.Limit{"tick": {Rate: 1, Burst: 1}}, Logger: quiet})
	var calls atomic.Int64
	h := func() rpc.Handler {
		return rpc.Methods{"tick": func(context.Context, *rpc.Request) (any, error) { calls.Add(1); return nil, nil }}
	}
	bubble(t, h, mws(lim.Middleware()), func(w *wiretest.Wire) {
		got := w.Exchange(`{"jsonrpc":"2.0","method":"tick"}`, `{"jsonrpc":"2.0","method":"tick"}`, `{"jsonrpc":"2.0","method":"tick"}`)
		if len(got) != 0 {
			t.Errorf("notifications were answered: %q", got)
		}
		if n := calls.Load(); n != 1 {
			t.Errorf("handler called %d times, want 1", n)
		}
		if s := lim.Stats(); s.Inbound != (middleware.LimitCounts{Dropped: 2}) {
			t.Errorf("stats: %+v", s)
		}
	})
}

// Each key has its own budget: ByConn makes each connection a client.
func TestLimitPerConnection(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lim := middleware.NewLimit(&middleware.LimitOptions{Default: middleware.Limit{Rate: 1, Burst: 1}, Key: middleware.ByConn, Logger: quiet})
		h := rpc.HandlerFunc(func(context.Context, *rpc.Request) (any, error) { return "ok", nil })
		opts := &rpc.Options{Logger: quiet, Middleware: []rpc.Middleware{lim.Middleware()}}
		c1, s1 := rpc.Pipe(h, nil, opts, &rpc.Options{Logger: quiet})
		c2, s2 := rpc.Pipe(h, nil, opts, &rpc.Options{Logger: quiet})
		defer func() { c1.Close(); s1.Close(); c2.Close(); s2.Close() }()
		ctx := context.Background()
		if _, err := c1.Call(ctx, "m", nil); err != nil {
			t.Fatal(err)
		}
		if _, err := c1.Call(ctx, "m", nil); !errors.Is(err, jsonrpc.NewError(-32000, "", nil)) {
			t.Errorf("second call on one connection: %v, want -32000", err)
		}
		if _, err := c2.Call(ctx, "m", nil); err != nil {
			t.Errorf("another connection was limited by the first: %v", err)
		}
		if s := lim.Stats(); s.Keys != 2 || s.Inbound.RateLimited != 1 {
			t.Errorf("stats: %+v", s)
		}
	})
}

// ByIdentity keys by the verified OAuth identity's owner.
func TestLimitByIdentity(t *testing.T) {
	lim := middleware.NewLimit(&middleware.LimitOptions{Default: middleware.Limit{Rate: 1, Burst: 1}, Key: middleware.ByIdentity, Logger: quiet, Clock: newFakeClock()})
	h := lim.Middleware()(rpc.HandlerFunc(func(context.Context, *rpc.Request) (any, error) { return "ok", nil }))
	alice := auth.WithIdentity(context.Background(), &auth.Identity{Issuer: "https://as", Subject: "alice"})
	bob := auth.WithIdentity(context.Background(), &auth.Identity{Issuer: "https://as", Subject: "bob"})
	for _, c := range []struct {
		ctx  context.Context
		fail bool
	}{{alice, false}, {alice, true}, {bob, false}, {context.Background(), false}, {context.Background(), true}} {
		_, err := h.Handle(c.ctx, &rpc.Request{ID: "1", Method: "m"})
		if (err != nil) != c.fail || (err != nil && !errors.Is(err, middleware.ErrRateLimited)) {
			t.Errorf("%v: err = %v, want refused %v", auth.IdentityFrom(c.ctx).Owner(), err, c.fail)
		}
	}
}

// An attacker with fresh keys cannot grow the per-key state: 100k distinct
// keys leave at most MaxKeys states, the rest counted as evicted; the
// least recently used go first, so a busy key keeps its (empty) bucket.
func TestLimitBoundsPerKeyState(t *testing.T) {
	clock := newFakeClock()
	key := func(ctx context.Context, r *rpc.Request) string { return string(r.Params) }
	lim := middleware.NewLimit(&middleware.LimitOptions{Default: middleware.Limit{Rate: 1, Burst: 1}, Key: key, Logger: quiet, Clock: clock})
	h := lim.Middleware()(rpc.HandlerFunc(func(context.Context, *rpc.Request) (any, error) { return nil, nil }))
	ctx := context.Background()
	call := func(k string) error {
		_, err := h.Handle(ctx, &rpc.Request{ID: "1", Method: "m", Params: json.RawMessage(k)})
		return err
	}
	if err := call(`"victim"`); err != nil {
		t.Fatal(err)
	}
	for i := range 100_000 {
		if i%1000 == 0 {
			if err := call(`"victim"`); !errors.Is(err, middleware.ErrRateLimited) {
				t.Fatalf("the victim's drained bucket was forgotten after %d keys: %v", i, err)
			}
		}
		if err := call(strconv.Itoa(i)); err != nil {
			t.Fatalf("fresh key %d: %v", i, err)
		}
	}
	s := lim.Stats()
	if s.Keys != middleware.DefaultMaxKeys {
		t.Errorf("Keys = %d, want the bound %d", s.Keys, middleware.DefaultMaxKeys)
	}
	if want := int64(100_001 - middleware.DefaultMaxKeys); s.Evicted != want {
		t.Errorf("Evicted = %d, want %d", s.Evicted, want)
	}
	// The oldest fresh key was forgotten: it starts again with a full bucket.
	if err := call("0"); err != nil {
		t.Errorf("an evicted key: %v", err)
	}
	if err := call("99999"); !errors.Is(err, middleware.ErrRateLimited) {
		t.Errorf("a recent key was forgotten: %v", err)
	}
}

// A key with a handler running is never evicted, so its concurrency count
// survives any number of fresh keys.
func TestLimitNeverEvictsBusyKeys(t *testing.T) {
	key := func(ctx context.Context, r *rpc.Request) string { return string(r.Params) }
	lim := middleware.NewLimit(&middleware.LimitOptions{Default: middleware.Limit{Concurrent: 1, Rate: 1e9}, Key: key, MaxKeys: 10, Logger: quiet})
	release := make(chan struct{})
	started := make(chan struct{})
	h := lim.Middleware()(rpc.HandlerFunc(func(_ context.Context, r *rpc.Request) (any, error) {
		if string(r.Params) == `"busy"` {
			close(started)
			<-release
		}
		return nil, nil
	}))
	ctx := context.Background()
	call := func(k string) error {
		_, err := h.Handle(ctx, &rpc.Request{ID: "1", Method: "m", Params: json.RawMessage(k)})
		return err
	}
	done := make(chan error)
	go func() { done <- call(`"busy"`) }()
	<-started
	for i := range 1000 {
		if err := call(strconv.Itoa(i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := call(`"busy"`); !errors.Is(err, middleware.ErrConcurrencyLimited) {
		t.Errorf("the busy key's count was lost: %v", err)
	}
	if s := lim.Stats(); s.Keys != 11 {
		t.Errorf("Keys = %d, want MaxKeys idle states plus the busy one", s.Keys)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// A handler that panics gives its place back.
func TestLimitPanicReleases(t *testing.T) {
	lim := middleware.NewLimit(&middleware.LimitOptions{Default: middleware.Limit{Concurrent: 1}, Logger: quiet})
	bubble(t, func() rpc.Handler {
		return rpc.Methods{"panic": func(context.Context, *rpc.Request) (any, error) { panic("kaput") }}
	}, mws(lim.Middleware()), func(w *wiretest.Wire) {
		for id := range 3 {
			got := w.Exchange(`{"jsonrpc":"2.0","id":` + strconv.Itoa(id) + `,"method":"panic"}`)
			if len(got) != 1 || wiretest.ErrCode(t, got[0]) != jsonrpc.CodeInternalError {
				t.Fatalf("request %d: %q, want the panic's -32603", id, got)
			}
		}
	})
}

// Outbound, a call over its limit returns the refusal and is never sent.
func TestLimitOutboundIsNotSent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lim := middleware.NewLimit(&middleware.LimitOptions{
			Methods: map[string]middleware.Limit{"echo": {Rate: 1, Burst: 1}, "note": {Rate: 1, Burst: 1}, "wait": {Concurrent: 1}},
			Logger:  quiet,
		})
		var got atomic.Int64
		release := make(chan struct{})
		server := rpc.Methods{
			"echo": func(_ context.Context, r *rpc.Request) (any, error) { got.Add(1); return r.Params, nil },
			"note": func(context.Context, *rpc.Request) (any, error) { got.Add(1); return nil, nil },
			"wait": func(context.Context, *rpc.Request) (any, error) { got.Add(1); <-release; return nil, nil },
		}
		c, s := rpc.Pipe(server, nil, &rpc.Options{Logger: quiet}, &rpc.Options{Logger: quiet, Outbound: []rpc.OutboundMiddleware{lim.Outbound()}})
		defer s.Close()
		defer c.Close()
		ctx := context.Background()
		if _, err := c.Call(ctx, "echo", []int{1}); err != nil {
			t.Fatal(err)
		}
		_, err := c.Call(ctx, "echo", []int{2})
		var le *middleware.LimitError
		var je *jsonrpc.Error
		if !errors.Is(err, middleware.ErrRateLimited) || !errors.Is(err, middleware.ErrLimited) || errors.Is(err, middleware.ErrConcurrencyLimited) ||
			!errors.As(err, &le) || !le.Outbound || le.Method != "echo" || le.RetryAfter != time.Second ||
			!errors.As(err, &je) || je.Code != -32000 {
			t.Errorf("second call: %v", err)
		}
		if err := c.Notify(ctx, "note", nil); err != nil {
			t.Fatal(err)
		}
		if err := c.Notify(ctx, "note", nil); !errors.Is(err, middleware.ErrRateLimited) {
			t.Errorf("second notify: %v", err)
		}
		go c.Call(ctx, "wait", nil)
		synctest.Wait()
		if _, err := c.Call(ctx, "wait", nil); !errors.Is(err, middleware.ErrConcurrencyLimited) {
			t.Errorf("second wait: %v", err)
		}
		close(release)
		synctest.Wait()
		if n := got.Load(); n != 3 {
			t.Errorf("the server saw %d messages, want 3: a refused call was sent", n)
		}
		if s := lim.Stats(); s.Outbound != (middleware.LimitCounts{RateLimited: 1, ConcurrencyLimited: 1, Dropped: 1}) || s.Inbound != (middleware.LimitCounts{}) {
			t.Errorf("stats: %+v", s)
		}
	})
}

// The code of a refusal is an option (ACP's clients read a bare -32000 as
// "authentication required"; the data.reason tells them apart, or pick
// another code).
func TestLimitCode(t *testing.T) {
	lim := middleware.NewLimit(&middleware.LimitOptions{Default: middleware.Limit{Rate: 1, Burst: 1}, Code: -33000, Logger: quiet, Clock: newFakeClock()})
	h := lim.Middleware()(rpc.HandlerFunc(func(context.Context, *rpc.Request) (any, error) { return nil, nil }))
	h.Handle(context.Background(), &rpc.Request{ID: "1", Method: "m"})
	_, err := h.Handle(context.Background(), &rpc.Request{ID: "2", Method: "m"})
	var je *jsonrpc.Error
	if !errors.As(err, &je) || je.Code != -33000 || string(je.Data) != `{"reason":"rate_limited","method":"m","limit":1,"retry_after_ms":1000}` {
		t.Errorf("err = %v", err)
	}
}

// The buckets refill on LimitOptions.Clock.
func TestLimitInjectedClock(t *testing.T) {
	clock := newFakeClock()
	lim := middleware.NewLimit(&middleware.LimitOptions{Default: middleware.Limit{Rate: 0.5}, Logger: quiet, Clock: clock})
	h := lim.Middleware()(rpc.HandlerFunc(func(context.Context, *rpc.Request) (any, error) { return nil, nil }))
	call := func() error { _, err := h.Handle(context.Background(), &rpc.Request{ID: "1", Method: "m"}); return err }
	if err := call(); err != nil { // Burst defaults to Rate rounded up: 1
		t.Fatal(err)
	}
	if err := call(); !errors.Is(err, middleware.ErrRateLimited) {
		t.Fatalf("second: %v", err)
	}
	clock.Advance(1999 * time.Millisecond)
	if err := call(); !errors.Is(err, middleware.ErrRateLimited) {
		t.Fatalf("before 2s: %v", err)
	}
	clock.Advance(time.Millisecond)
	if err := call(); err != nil {
		t.Fatalf("after 2s: %v", err)
	}
}

// Refusals are logged once per burst of each reason.
func TestLimitLogsOncePerBurst(t *testing.T) {
	l, logs := textLogger(slog.LevelDebug)
	clock := newFakeClock()
	lim := middleware.NewLimit(&middleware.LimitOptions{Default: middleware.Limit{Rate: 1, Burst: 1}, Logger: l, Clock: clock})
	h := lim.Middleware()(rpc.HandlerFunc(func(context.Context, *rpc.Request) (any, error) { return nil, nil }))
	for range 5 {
		h.Handle(context.Background(), &rpc.Request{ID: "1", Method: "m"})
	}
	clock.Advance(11 * time.Second)
	for range 3 {
		h.Handle(context.Background(), &rpc.Request{ID: "1", Method: "m"})
	}
	equalLines(t, "log", logs.Lines(), []string{
		`level=WARN msg="middleware: rate_limited" direction=inbound method=m limit=1 notification=false`,
		`level=WARN msg="middleware: rate_limited" direction=inbound method=m limit=1 notification=false suppressed=3`,
	})
}

// Nothing configured, nothing added; a nil *Limiter is usable.
func TestLimitNothingConfigured(t *testing.T) {
	h := rpc.HandlerFunc(func(context.Context, *rpc.Request) (any, error) { return "x", nil })
	inv := rpc.Invoker(func(context.Context, *rpc.OutboundCall) (json.RawMessage, error) { return nil, nil })
	var none *middleware.Limiter
	for _, l := range []*middleware.Limiter{none, middleware.NewLimit(nil),
		middleware.NewLimit(&middleware.LimitOptions{Methods: map[string]middleware.Limit{"m": {}}})} {
		for range 3 {
			if res, err := l.Middleware()(h).Handle(context.Background(), &rpc.Request{ID: "1", Method: "m"}); res != "x" || err != nil {
				t.Errorf("unlimited: %v, %v", res, err)
			}
			if _, err := l.Outbound()(inv)(context.Background(), &rpc.OutboundCall{Method: "m"}); err != nil {
				t.Errorf("unlimited outbound: %v", err)
			}
		}
		if l.Stats() != (middleware.LimitStats{}) {
			t.Errorf("stats: %+v", l.Stats())
		}
	}
}

// Many goroutines on one Limiter: the concurrency bound holds exactly.
func TestLimitConcurrentUse(t *testing.T) {
	lim := middleware.NewLimit(&middleware.LimitOptions{Default: middleware.Limit{Concurrent: 4}, Logger: quiet})
	var running, peak atomic.Int64
	h := lim.Middleware()(rpc.HandlerFunc(func(context.Context, *rpc.Request) (any, error) {
		n := running.Add(1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		time.Sleep(10 * time.Microsecond)
		running.Add(-1)
		return nil, nil
	}))
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			for range 200 {
				h.Handle(context.Background(), &rpc.Request{ID: "1", Method: "m"})
			}
		})
	}
	wg.Wait()
	if p := peak.Load(); p > 4 {
		t.Errorf("peak concurrency %d over the limit of 4", p)
	}
	if s := lim.Stats(); s.Keys != 1 || s.Inbound.ConcurrencyLimited == 0 {
		t.Errorf("stats: %+v", s)
	}
}
