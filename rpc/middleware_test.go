package rpc_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/agentwire/agentwire/internal/wiretest"
	"github.com/agentwire/agentwire/jsonrpc"
	"github.com/agentwire/agentwire/rpc"
)

// trace returns a middleware that appends "name>" before and "<name" after
// the request it wraps.
func trace(name string, log *[]string, mu *sync.Mutex) rpc.Middleware {
	return func(next rpc.Handler) rpc.Handler {
		return rpc.HandlerFunc(func(ctx context.Context, r *rpc.Request) (any, error) {
			mu.Lock()
			*log = append(*log, name+">"+r.Method)
			mu.Unlock()
			res, err := next.Handle(ctx, r)
			mu.Lock()
			*log = append(*log, "<"+name)
			mu.Unlock()
			return res, err
		})
	}
}

// Options.Middleware wraps the handler, first outermost, for requests and
// notifications alike, on the wire; a nil entry is skipped.
func TestMiddlewareWrapsTheHandlerFirstOutermost(t *testing.T) {
	var mu sync.Mutex
	var log []string
	h := rpc.HandlerFunc(func(ctx context.Context, r *rpc.Request) (any, error) {
		mu.Lock()
		log = append(log, "handler")
		mu.Unlock()
		return map[string]string{"ok": r.Method}, nil
	})
	opts := &rpc.Options{Middleware: []rpc.Middleware{trace("a", &log, &mu), nil, trace("b", &log, &mu)}}
	wiretest.Run(t, h, opts, func(w *wiretest.Wire) {
		got := w.Exchange(`{"jsonrpc":"2.0","id":1,"method":"m"}`)
		if len(got) != 1 || got[0] != `{"jsonrpc":"2.0","id":1,"result":{"ok":"m"}}` {
			t.Fatalf("answered %q", got)
		}
		w.Send(`{"jsonrpc":"2.0","method":"n"}`)
		w.Settle()
	})
	want := "a>m,b>m,handler,<b,<a,a>n,b>n,handler,<b,<a"
	if got := strings.Join(log, ","); got != want {
		t.Errorf("ran %s, want %s", got, want)
	}
}

// A middleware that answers without calling next answers the request
// itself: a *jsonrpc.Error goes out as it is and the handler never runs.
func TestMiddlewareCanRefuseARequest(t *testing.T) {
	ran := false
	h := rpc.HandlerFunc(func(context.Context, *rpc.Request) (any, error) { ran = true; return "x", nil })
	refuse := func(next rpc.Handler) rpc.Handler {
		return rpc.HandlerFunc(func(ctx context.Context, r *rpc.Request) (any, error) {
			return nil, jsonrpc.NewError(-32000, "refused", map[string]any{"reason": "rate_limited"})
		})
	}
	wiretest.Run(t, h, &rpc.Options{Middleware: []rpc.Middleware{refuse}}, func(w *wiretest.Wire) {
		got := w.Exchange(`{"jsonrpc":"2.0","id":"r","method":"m"}`)
		if len(got) != 1 || got[0] != `{"jsonrpc":"2.0","id":"r","error":{"code":-32000,"message":"refused","data":{"reason":"rate_limited"}}}` {
			t.Fatalf("answered %q", got)
		}
	})
	if ran {
		t.Error("the handler ran behind a refusing middleware")
	}
}

// Outbound middleware sees every Call and Notify, may replace the params
// (what reaches the peer is the replacement), and reads the request's id
// once next returns.
func TestOutboundMiddlewareReplacesParamsAndSeesTheID(t *testing.T) {
	got := make(chan string, 4)
	server := rpc.HandlerFunc(func(ctx context.Context, r *rpc.Request) (any, error) {
		got <- r.Method + " " + string(r.Params)
		return json.RawMessage(`{"echo":true}`), nil
	})
	var ids []jsonrpc.ID
	var mu sync.Mutex
	stamp := func(next rpc.Invoker) rpc.Invoker {
		return func(ctx context.Context, c *rpc.OutboundCall) (json.RawMessage, error) {
			c.Params = map[string]any{"stamped": c.Method, "notification": c.Notification}
			res, err := next(ctx, c)
			mu.Lock()
			ids = append(ids, c.ID)
			mu.Unlock()
			return res, err
		}
	}
	client, srv := rpc.Pipe(server, nil, nil, &rpc.Options{Outbound: []rpc.OutboundMiddleware{stamp}})
	defer client.Close()
	defer srv.Close()
	res, err := client.Call(t.Context(), "call", map[string]int{"a": 1})
	if err != nil || string(res) != `{"echo":true}` {
		t.Fatalf("Call = %s, %v", res, err)
	}
	if s := <-got; s != `call {"notification":false,"stamped":"call"}` {
		t.Errorf("the server received %s", s)
	}
	if err := client.Notify(t.Context(), "note", nil); err != nil {
		t.Fatal(err)
	}
	if s := <-got; s != `note {"notification":true,"stamped":"note"}` {
		t.Errorf("the server received %s", s)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(ids) != 2 || ids[0] != "1" || ids[1] != "" {
		t.Errorf("ids seen after next: %q, want [1 \"\"]", ids)
	}
}

// An outbound middleware's error is the call's, and nothing is sent.
func TestOutboundMiddlewareErrorSendsNothing(t *testing.T) {
	received := make(chan string, 1)
	server := rpc.HandlerFunc(func(ctx context.Context, r *rpc.Request) (any, error) {
		received <- r.Method
		return nil, nil
	})
	errLimited := errors.New("limited")
	deny := func(next rpc.Invoker) rpc.Invoker {
		return func(ctx context.Context, c *rpc.OutboundCall) (json.RawMessage, error) {
			if c.Method == "denied" {
				return nil, errLimited
			}
			return next(ctx, c)
		}
	}
	client, srv := rpc.Pipe(server, nil, nil, &rpc.Options{Outbound: []rpc.OutboundMiddleware{deny}})
	defer client.Close()
	defer srv.Close()
	if _, err := client.Call(t.Context(), "denied", nil); !errors.Is(err, errLimited) {
		t.Fatalf("Call = %v, want the middleware's error", err)
	}
	if _, err := client.Call(t.Context(), "allowed", nil); err != nil {
		t.Fatal(err)
	}
	if m := <-received; m != "allowed" {
		t.Errorf("the server received %q first", m)
	}
}

// OnNotify is told of each notification the handler sends for its
// request, after it is queued, in order; two listeners both hear it (a
// timeout and a tracer on one request).
func TestOnNotifyHearsTheHandlersNotifications(t *testing.T) {
	var heard []string
	inner := rpc.HandlerFunc(func(ctx context.Context, r *rpc.Request) (any, error) {
		r.Notify("notifications/progress", map[string]int{"progress": 1})
		r.Notify("notifications/message", map[string]string{"level": "info"})
		return "done", nil
	})
	listen := func(next rpc.Handler) rpc.Handler {
		return rpc.HandlerFunc(func(ctx context.Context, r *rpc.Request) (any, error) {
			r.OnNotify(func(m string) { heard = append(heard, m) })
			r.OnNotify(nil)
			r.OnNotify(func(m string) { heard = append(heard, "again "+m) })
			return next.Handle(ctx, r)
		})
	}
	wiretest.Run(t, inner, &rpc.Options{Middleware: []rpc.Middleware{listen}}, func(w *wiretest.Wire) {
		if got := w.Exchange(`{"jsonrpc":"2.0","id":1,"method":"work"}`); len(got) != 3 {
			t.Fatalf("got %q, want two notifications and the result", got)
		}
	})
	if got := strings.Join(heard, ","); got != "notifications/progress,again notifications/progress,notifications/message,again notifications/message" {
		t.Errorf("OnNotify heard %s", got)
	}
}

// No middleware, no cost: Chain with none returns the handler itself.
func TestChainWithoutMiddlewareIsTheHandler(t *testing.T) {
	h := &countingHandler{}
	if got := rpc.Chain(h); got != rpc.Handler(h) {
		t.Fatal("Chain without middleware wrapped the handler")
	}
	if got := rpc.Chain(h, nil, nil); got != rpc.Handler(h) {
		t.Fatal("Chain of nil middleware wrapped the handler")
	}
}

type countingHandler struct{ n int }

func (c *countingHandler) Handle(context.Context, *rpc.Request) (any, error) { c.n++; return nil, nil }

// Regression: OnNotify's functions ran under the request's lock, so one
// that sent a notification itself deadlocked the handler.
func TestOnNotifyMaySendANotificationItself(t *testing.T) {
	inner := rpc.HandlerFunc(func(ctx context.Context, r *rpc.Request) (any, error) {
		r.Notify("notifications/progress", map[string]int{"progress": 1})
		return "done", nil
	})
	echoing := func(next rpc.Handler) rpc.Handler {
		return rpc.HandlerFunc(func(ctx context.Context, r *rpc.Request) (any, error) {
			once := false
			r.OnNotify(func(m string) {
				if !once {
					once = true
					r.Notify("notifications/message", map[string]string{"heard": m})
				}
			})
			return next.Handle(ctx, r)
		})
	}
	wiretest.Run(t, inner, &rpc.Options{Middleware: []rpc.Middleware{echoing}}, func(w *wiretest.Wire) {
		got := w.Exchange(`{"jsonrpc":"2.0","id":1,"method":"work"}`)
		if len(got) != 3 || !strings.Contains(got[1], `"heard":"notifications/progress"`) {
			t.Fatalf("got %q, want the progress, the listener's notification and the result", got)
		}
	})
}
