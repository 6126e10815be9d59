package middleware_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentwire/agentwire/internal/wiretest"
	"github.com/agentwire/agentwire/jsonrpc"
	"github.com/agentwire/agentwire/middleware"
	"github.com/agentwire/agentwire/rpc"
)

var quiet = wiretest.Quiet

const idleReply = `{"jsonrpc":"2.0","id":1,"error":{"code":-32001,"message":"Request timed out","data":{"reason":"timeout","limit_ms":1000,"kind":"idle"}}}`

// A handler that makes no progress for Idle has its context cancelled with
// a cause matching ErrTimeout, and the request is answered -32001 with the
// limit in data, exactly at Idle.
func TestTimeoutIdleEndsTheRequest(t *testing.T) {
	to := middleware.NewTimeout(&middleware.TimeoutOptions{Default: middleware.Limits{Idle: time.Second, Max: time.Minute}, Logger: quiet})
	var causes chan error
	h := func() rpc.Handler {
		causes = make(chan error, 1)
		return rpc.Methods{"wait": func(ctx context.Context, _ *rpc.Request) (any, error) {
			<-ctx.Done()
			causes <- context.Cause(ctx)
			return nil, ctx.Err()
		}}
	}
	bubble(t, h, mws(to.Middleware()), func(w *wiretest.Wire) {
		w.Send(`{"jsonrpc":"2.0","id":1,"method":"wait"}`)
		w.Sleep(time.Second - time.Millisecond)
		if got := w.Take(); len(got) != 0 {
			t.Fatalf("answered before the idle limit: %q", got)
		}
		if s := to.Stats(); s.Timed != 1 || s.Running != 1 || s.IdleTimeouts != 0 {
			t.Errorf("stats while running: %+v", s)
		}
		w.Sleep(time.Millisecond)
		equalLines(t, "reply at the idle limit", w.Take(), []string{idleReply})
		cause := <-causes
		var te *middleware.TimeoutError
		if !errors.Is(cause, middleware.ErrTimeout) || !errors.As(cause, &te) ||
			te.Kind != middleware.IdleTimeout || te.Limit != time.Second || te.Method != "wait" {
			t.Errorf("cause = %v", cause)
		}
		if !strings.Contains(cause.Error(), "idle") || !strings.Contains(cause.Error(), "1s") {
			t.Errorf("cause %q does not say which limit", cause)
		}
		if s := to.Stats(); s != (middleware.TimeoutStats{Timed: 1, IdleTimeouts: 1}) {
			t.Errorf("stats after: %+v", s)
		}
	})
}

// A handler that reports progress every Idle/2 outlives Idle many times
// over, and is ended at Max all the same.
func TestTimeoutProgressResetsIdleUntilMax(t *testing.T) {
	to := middleware.NewTimeout(&middleware.TimeoutOptions{Default: middleware.Limits{Idle: time.Second, Max: 5 * time.Second}, Logger: quiet})
	h := func() rpc.Handler {
		return rpc.Methods{"work": func(ctx context.Context, r *rpc.Request) (any, error) {
			for i := 1; ; i++ {
				select {
				case <-ctx.Done():
					return nil, ctx.Err()
				case <-time.After(500 * time.Millisecond):
					if err := r.Notify("notifications/progress", map[string]int{"progress": i}); err != nil {
						return nil, err
					}
				}
			}
		}}
	}
	bubble(t, h, mws(to.Middleware()), func(w *wiretest.Wire) {
		w.Send(`{"jsonrpc":"2.0","id":1,"method":"work"}`)
		w.Sleep(5*time.Second - time.Millisecond)
		got := w.Take()
		if len(got) != 9 {
			t.Fatalf("before Max: %d lines, want 9 progress notifications: %q", len(got), got)
		}
		for _, l := range got {
			if !strings.Contains(l, `"method":"notifications/progress"`) {
				t.Fatalf("before Max: %s", l)
			}
		}
		w.Sleep(time.Millisecond)
		got = w.Take()
		want := `{"jsonrpc":"2.0","id":1,"error":{"code":-32001,"message":"Request timed out","data":{"reason":"timeout","limit_ms":5000,"kind":"max"}}}`
		if len(got) == 0 || got[len(got)-1] != want {
			t.Fatalf("at Max: %q, want the max reply last", got)
		}
		if s := to.Stats(); s.MaxTimeouts != 1 || s.IdleTimeouts != 0 || s.Running != 0 {
			t.Errorf("stats: %+v", s)
		}
	})
}

// The request is answered once the handler returns, not before: a handler
// that ignores its context holds its request (and rpc's slot) until it
// does, is counted as lingering, and its late result is not sent.
func TestTimeoutWaitsForTheHandler(t *testing.T) {
	to := middleware.NewTimeout(&middleware.TimeoutOptions{Default: middleware.Limits{Idle: time.Second}, Logger: quiet})
	var release chan struct{}
	h := func() rpc.Handler {
		release = make(chan struct{})
		return rpc.Methods{"stubborn": func(context.Context, *rpc.Request) (any, error) {
			<-release
			return "finished", nil
		}}
	}
	opts := &rpc.Options{Middleware: []rpc.Middleware{to.Middleware()}, MaxConcurrentRequests: 1, RejectWhenBusy: true}
	bubble(t, h, opts, func(w *wiretest.Wire) {
		w.Send(`{"jsonrpc":"2.0","id":1,"method":"stubborn"}`)
		w.Sleep(3 * time.Second)
		if got := w.Take(); len(got) != 0 {
			t.Fatalf("answered while the handler runs: %q", got)
		}
		if s := to.Stats(); s.Lingering != 1 || s.IdleTimeouts != 1 || s.Running != 1 {
			t.Errorf("stats while the handler lingers: %+v", s)
		}
		// The lingering handler still holds the connection's only slot.
		got := w.Exchange(`{"jsonrpc":"2.0","id":2,"method":"stubborn"}`)
		if len(got) != 1 || !strings.Contains(got[0], `"connection_busy"`) {
			t.Errorf("a second request while the first lingers: %q, want connection_busy", got)
		}
		close(release)
		equalLines(t, "reply once the handler returned", w.Take(), []string{idleReply})
		if s := to.Stats(); s.Lingering != 0 || s.Running != 0 {
			t.Errorf("stats after: %+v", s)
		}
	})
}

// Notifications are not timed.
func TestTimeoutLeavesNotificationsAlone(t *testing.T) {
	to := middleware.NewTimeout(&middleware.TimeoutOptions{Default: middleware.Limits{Idle: time.Second, Max: time.Second}, Logger: quiet})
	var release, cancelled chan struct{}
	h := func() rpc.Handler {
		release, cancelled = make(chan struct{}), make(chan struct{}, 1)
		return rpc.Methods{"bg": func(ctx context.Context, _ *rpc.Request) (any, error) {
			select {
			case <-ctx.Done():
				cancelled <- struct{}{}
			case <-release:
			}
			return nil, nil
		}}
	}
	bubble(t, h, mws(to.Middleware()), func(w *wiretest.Wire) {
		w.Send(`{"jsonrpc":"2.0","method":"bg"}`)
		w.Sleep(10 * time.Second)
		close(release)
		w.Settle()
		select {
		case <-cancelled:
			t.Error("a notification's handler was cancelled")
		default:
		}
		if s := to.Stats(); s.Timed != 0 {
			t.Errorf("stats: %+v", s)
		}
	})
}

// Methods override Default field by field; a negative field is no bound;
// the methods that wait by design are exempt unless named.
func TestTimeoutLimitsPerMethod(t *testing.T) {
	to := middleware.NewTimeout(nil)
	for m, want := range map[string]middleware.Limits{
		"tools/call":             {Idle: middleware.DefaultIdle, Max: middleware.DefaultMax},
		"subscriptions/listen":   {Idle: -1, Max: -1},
		"elicitation/create":     {Idle: -1, Max: -1},
		"sampling/createMessage": {Idle: -1, Max: -1},
		// Regression: a task's result, an ACP turn, a permission question
		// and a terminal's exit wait by design, and were cut at 60 s idle
		// (10 min for a turn) by the defaults.
		"tasks/result":               {Idle: -1, Max: -1},
		"session/prompt":             {Idle: -1, Max: -1},
		"session/request_permission": {Idle: -1, Max: -1},
		"terminal/wait_for_exit":     {Idle: -1, Max: -1},
	} {
		if got := to.Limits(m); got != want {
			t.Errorf("defaults: Limits(%s) = %+v, want %+v", m, got, want)
		}
	}
	to = middleware.NewTimeout(&middleware.TimeoutOptions{
		Default: middleware.Limits{Idle: 5 * time.Second},
		Methods: map[string]middleware.Limits{
			"a":                    {Max: time.Minute},
			"b":                    {Idle: -1, Max: -1},
			"subscriptions/listen": {Idle: time.Hour},
		},
	})
	for m, want := range map[string]middleware.Limits{
		"x":                    {Idle: 5 * time.Second, Max: middleware.DefaultMax},
		"a":                    {Idle: 5 * time.Second, Max: time.Minute},
		"b":                    {Idle: -1, Max: -1},
		"subscriptions/listen": {Idle: time.Hour, Max: middleware.DefaultMax},
	} {
		if got := to.Limits(m); got != want {
			t.Errorf("Limits(%s) = %+v, want %+v", m, got, want)
		}
	}
}

// On the wire: a method's own limit applies, an exempt method runs past
// every limit, and the rest take Default.
func TestTimeoutPerMethodOnTheWire(t *testing.T) {
	to := middleware.NewTimeout(&middleware.TimeoutOptions{
		Default: middleware.Limits{Idle: time.Second},
		Methods: map[string]middleware.Limits{"fast": {Idle: 100 * time.Millisecond}},
		Logger:  quiet,
	})
	h := func() rpc.Handler {
		return rpc.Methods{"fast": waitHandler, "slow": waitHandler, "subscriptions/listen": waitHandler}
	}
	bubble(t, h, mws(to.Middleware()), func(w *wiretest.Wire) {
		w.Send(`{"jsonrpc":"2.0","id":1,"method":"fast"}`,
			`{"jsonrpc":"2.0","id":2,"method":"slow"}`,
			`{"jsonrpc":"2.0","id":3,"method":"subscriptions/listen"}`)
		w.Sleep(100 * time.Millisecond)
		equalLines(t, "at 100ms", w.Take(), []string{
			`{"jsonrpc":"2.0","id":1,"error":{"code":-32001,"message":"Request timed out","data":{"reason":"timeout","limit_ms":100,"kind":"idle"}}}`,
		})
		w.Sleep(900 * time.Millisecond)
		equalLines(t, "at 1s", w.Take(), []string{
			`{"jsonrpc":"2.0","id":2,"error":{"code":-32001,"message":"Request timed out","data":{"reason":"timeout","limit_ms":1000,"kind":"idle"}}}`,
		})
		w.Sleep(time.Hour)
		if got := w.Take(); len(got) != 0 {
			t.Errorf("the exempt listen stream was ended: %q", got)
		}
		w.Send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":3}}`)
		w.Settle()
		if s := to.Stats(); s.Timed != 2 || s.IdleTimeouts != 2 || s.Running != 0 {
			t.Errorf("stats: %+v", s)
		}
	})
}

// A request the peer cancels before its limit is not a timeout, and stays
// silent (guarantee C8).
func TestTimeoutPeerCancelFirst(t *testing.T) {
	to := middleware.NewTimeout(&middleware.TimeoutOptions{Default: middleware.Limits{Idle: time.Second}, Logger: quiet})
	bubble(t, func() rpc.Handler { return rpc.Methods{"wait": waitHandler} }, mws(to.Middleware()), func(w *wiretest.Wire) {
		w.Send(`{"jsonrpc":"2.0","id":1,"method":"wait"}`)
		w.Sleep(500 * time.Millisecond)
		w.Send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}`)
		w.Sleep(2 * time.Second)
		if got := w.Take(); len(got) != 0 {
			t.Errorf("a cancelled request was answered: %q", got)
		}
		if s := to.Stats(); s != (middleware.TimeoutStats{Timed: 1}) {
			t.Errorf("stats: %+v", s)
		}
	})
}

// Timeouts are logged once per burst, with what was suppressed.
func TestTimeoutLogsOncePerBurst(t *testing.T) {
	l, logs := textLogger(slog.LevelDebug)
	to := middleware.NewTimeout(&middleware.TimeoutOptions{Default: middleware.Limits{Idle: time.Second}, Logger: l})
	bubble(t, func() rpc.Handler { return rpc.Methods{"wait": waitHandler} }, mws(to.Middleware()), func(w *wiretest.Wire) {
		w.Send(`{"jsonrpc":"2.0","id":1,"method":"wait"}`,
			`{"jsonrpc":"2.0","id":2,"method":"wait"}`,
			`{"jsonrpc":"2.0","id":3,"method":"wait"}`)
		w.Sleep(time.Second)
		if got := w.Take(); len(got) != 3 {
			t.Fatalf("replies: %q", got)
		}
		equalLines(t, "first burst", logs.Lines(), []string{
			`level=WARN msg="middleware: request timed out" method=wait kind=idle limit=1s`,
		})
		w.Sleep(20 * time.Second)
		w.Send(`{"jsonrpc":"2.0","id":4,"method":"wait"}`)
		w.Sleep(time.Second)
		equalLines(t, "next burst", logs.Lines(), []string{
			`level=WARN msg="middleware: request timed out" method=wait kind=idle limit=1s suppressed=2`,
		})
	})
}

// Logging outside Timeouts records the error the peer got; inside, the
// cancellation and its cause.
func TestTimeoutUnderLogging(t *testing.T) {
	l, logs := textLogger(slog.LevelDebug)
	to := middleware.NewTimeout(&middleware.TimeoutOptions{Default: middleware.Limits{Idle: time.Second}, Logger: quiet})
	opts := mws(middleware.Logging(&middleware.LogOptions{Logger: l}), to.Middleware(),
		middleware.Logging(&middleware.LogOptions{Logger: l.With("inner", true)}))
	bubble(t, func() rpc.Handler { return rpc.Methods{"wait": waitHandler} }, opts, func(w *wiretest.Wire) {
		w.Send(`{"jsonrpc":"2.0","id":1,"method":"wait"}`)
		w.Sleep(time.Second)
		equalLines(t, "reply", w.Take(), []string{idleReply})
	})
	equalLines(t, "records", logs.Lines(), []string{
		`level=INFO msg="rpc request" inner=true method=wait id=1 duration=1s outcome=cancelled cause="middleware: request timed out: wait made no progress for 1s (idle limit)"`,
		`level=WARN msg="rpc request" method=wait id=1 duration=1s outcome=error code=-32001 error="middleware: request timed out: wait made no progress for 1s (idle limit)"`,
	})
}

// fakeClock is a Clock whose time moves only when told to; Advance runs
// the timers that fall due, in the caller's goroutine.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []*fakeTimer
}

type fakeTimer struct {
	c      *fakeClock
	at     time.Time
	f      func()
	active bool
}

func newFakeClock() *fakeClock { return &fakeClock{now: time.Unix(1_000_000, 0)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) AfterFunc(d time.Duration, f func()) middleware.Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &fakeTimer{c: c, at: c.now.Add(d), f: f, active: true}
	c.timers = append(c.timers, t)
	return t
}

func (t *fakeTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	was := t.active
	t.active = false
	return was
}

func (t *fakeTimer) Reset(d time.Duration) bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	was := t.active
	t.at, t.active = t.c.now.Add(d), true
	return was
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	var due []*fakeTimer
	for _, t := range c.timers {
		if t.active && !t.at.After(c.now) {
			t.active = false
			due = append(due, t)
		}
	}
	c.mu.Unlock()
	for _, t := range due {
		t.f()
	}
}

// The limits run on TimeoutOptions.Clock when one is given.
func TestTimeoutInjectedClock(t *testing.T) {
	clock := newFakeClock()
	to := middleware.NewTimeout(&middleware.TimeoutOptions{Default: middleware.Limits{Idle: -1, Max: time.Second}, Clock: clock, Logger: quiet})
	started := make(chan struct{})
	h := to.Middleware()(rpc.HandlerFunc(func(ctx context.Context, r *rpc.Request) (any, error) {
		close(started) // the timer is armed before the handler runs
		return waitHandler(ctx, r)
	}))
	done := make(chan error, 1)
	go func() {
		_, err := h.Handle(context.Background(), &rpc.Request{ID: "1", Method: "m"})
		done <- err
	}()
	<-started
	clock.Advance(time.Second - time.Nanosecond)
	select {
	case err := <-done:
		t.Fatalf("ended before Max: %v", err)
	default:
	}
	clock.Advance(time.Nanosecond)
	err := <-done
	var je *jsonrpc.Error
	if !errors.Is(err, middleware.ErrTimeout) || !errors.As(err, &je) || je.Code != middleware.CodeRequestTimeout ||
		string(je.Data) != `{"reason":"timeout","limit_ms":1000,"kind":"max"}` {
		t.Errorf("err = %v", err)
	}
}

// A nil *Timeouts adds nothing; Code is an option.
func TestTimeoutNilAndCode(t *testing.T) {
	var none *middleware.Timeouts
	h := rpc.HandlerFunc(func(context.Context, *rpc.Request) (any, error) { return "x", nil })
	if res, err := none.Middleware()(h).Handle(context.Background(), &rpc.Request{ID: "1"}); res != "x" || err != nil {
		t.Errorf("nil Timeouts: %v, %v", res, err)
	}
	if none.Stats() != (middleware.TimeoutStats{}) {
		t.Error("nil Timeouts has stats")
	}
	to := middleware.NewTimeout(&middleware.TimeoutOptions{Default: middleware.Limits{Idle: time.Second}, Code: -32050, Logger: quiet})
	bubble(t, func() rpc.Handler { return rpc.Methods{"wait": waitHandler} }, mws(to.Middleware()), func(w *wiretest.Wire) {
		w.Send(`{"jsonrpc":"2.0","id":1,"method":"wait"}`)
		w.Sleep(time.Second)
		got := w.Take()
		if len(got) != 1 || wiretest.ErrCode(t, got[0]) != -32050 {
			t.Errorf("reply: %q", got)
		}
	})
}
