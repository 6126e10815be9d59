package rpc_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/agentwire/agentwire/jsonrpc"
	"github.com/agentwire/agentwire/rpc"
)

func req(id any, method, params string) string {
	s := fmt.Sprintf(`{"jsonrpc":"2.0","id":%v,"method":%q`, id, method)
	if params != "" {
		s += `,"params":` + params
	}
	return s + "}"
}

// Handlers run concurrently and answer out of order (guarantee C1): two sleeps
// of 300 ms and 100 ms sent together finish at 100 and 300 ms, not 400.
func TestConcurrentRequestsAnswerOutOfOrder(t *testing.T) {
	runWire(t, nil, nil, func(w *wire) {
		start := time.Now()
		w.Send(req(1, "sleep", `{"ms":300}`), req(2, "sleep", `{"ms":100}`))
		w.Sleep(100 * time.Millisecond)
		if got := w.Take(); !slices.Equal(got, []string{`{"jsonrpc":"2.0","id":2,"result":{"slept":100}}`}) {
			t.Fatalf("at %v got %q", time.Since(start), got)
		}
		w.Sleep(200 * time.Millisecond)
		if got := w.Take(); !slices.Equal(got, []string{`{"jsonrpc":"2.0","id":1,"result":{"slept":300}}`}) {
			t.Fatalf("at %v got %q", time.Since(start), got)
		}
	})
}

// A duplicate id of a request still in flight gets -32600 and the first
// request is unaffected (guarantee W5).
func TestDuplicateInFlightID(t *testing.T) {
	runWire(t, nil, nil, func(w *wire) {
		w.Send(req(1, "sleep", `{"ms":50}`))
		got := w.Exchange(req(1, "echo", `[2]`))
		if len(got) != 1 || errCode(t, got[0]) != jsonrpc.CodeInvalidRequest || field(t, got[0], "id") != "1" {
			t.Fatalf("duplicate got %q", got)
		}
		w.Sleep(50 * time.Millisecond)
		if got := w.Take(); !slices.Equal(got, []string{`{"jsonrpc":"2.0","id":1,"result":{"slept":50}}`}) {
			t.Fatalf("first request got %q", got)
		}
		// Once answered, the id may be used again.
		if got := w.Exchange(req(1, "echo", `[3]`)); !slices.Equal(got, []string{`{"jsonrpc":"2.0","id":1,"result":[3]}`}) {
			t.Fatalf("reused id got %q", got)
		}
	})
}

// Notifications a handler sends reach the wire before its response, in the
// order it sent them (guarantee W8).
func TestHandlerNotificationsPrecedeResponse(t *testing.T) {
	runWire(t, nil, nil, func(w *wire) {
		w.Send(req(1, "notify", `{"count":5}`))
		got := w.Take()
		want := []string{}
		for i := 1; i <= 5; i++ {
			want = append(want, fmt.Sprintf(`{"jsonrpc":"2.0","method":"notify/tick","params":{"i":%d}}`, i))
		}
		want = append(want, `{"jsonrpc":"2.0","id":1,"result":{"sent":5}}`)
		if !slices.Equal(got, want) {
			t.Fatalf("got %q\nwant %q", got, want)
		}
	})
}

// A panicking handler is answered with -32603 naming the panic's type, and
// the connection keeps serving (guarantees C10, W3).
func TestPanicIsAnswered(t *testing.T) {
	runWire(t, nil, nil, func(w *wire) {
		got := w.Exchange(req(1, "panic", ""))
		if len(got) != 1 || errCode(t, got[0]) != jsonrpc.CodeInternalError {
			t.Fatalf("got %q", got)
		}
		if !strings.Contains(got[0], `"data":{"exception":"*errors.errorString","panic":true}`) {
			t.Errorf("panic reply lacks data.exception: %s", got[0])
		}
		if n := w.Conn.Stats().Panics; n != 1 {
			t.Errorf("Stats.Panics = %d", n)
		}
		if got := w.Exchange(req(2, "echo", `[1]`)); len(got) != 1 || errCode(t, got[0]) != 0 {
			t.Fatalf("after panic got %q", got)
		}
	})
}

// A handler's plain error is -32603 with data.exception naming its Go type.
func TestHandlerErrorNamesItsType(t *testing.T) {
	h := rpc.Methods{"boom": func(context.Context, *rpc.Request) (any, error) {
		return nil, fmt.Errorf("wrapped: %w", errors.New("boom"))
	}}
	runWire(t, h, nil, func(w *wire) {
		got := w.Exchange(req(1, "boom", ""))
		want := `{"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"Internal error: wrapped: boom","data":{"exception":"*fmt.wrapError"}}}`
		if !slices.Equal(got, []string{want}) {
			t.Fatalf("got %q", got)
		}
	})
}

// A result json.Marshal cannot encode is an error reply, not a broken line.
func TestUnencodableResult(t *testing.T) {
	h := rpc.Methods{
		"chan": func(context.Context, *rpc.Request) (any, error) { return make(chan int), nil },
		"raw":  func(context.Context, *rpc.Request) (any, error) { return json.RawMessage("{\n\"a\" :\n1}"), nil },
		"bad":  func(context.Context, *rpc.Request) (any, error) { return json.RawMessage("{"), nil },
	}
	runWire(t, h, nil, func(w *wire) {
		got := w.Exchange(req(1, "chan", ""), req(2, "raw", ""), req(3, "bad", ""))
		if len(got) != 3 || errCode(t, got[0]) != jsonrpc.CodeInternalError || errCode(t, got[2]) != jsonrpc.CodeInternalError {
			t.Fatalf("got %q", got)
		}
		if got[1] != `{"jsonrpc":"2.0","id":2,"result":{"a":1}}` {
			t.Errorf("raw result with newlines was not compacted: %q", got[1])
		}
	})
}

// Cancellation in (guarantee C8): notifications/cancelled cancels the handler and
// silences it; nothing more is written for that request.
func TestCancelSilencesRequest(t *testing.T) {
	for _, form := range []string{
		`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7,"reason":"user"}}`,
		`{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":7}}`, // echo silences both
	} {
		t.Run(strings.Split(form, `"`)[7], func(t *testing.T) {
			runWire(t, nil, nil, func(w *wire) {
				w.Send(req(7, "sleep", `{"ms":10000}`))
				w.Sleep(time.Millisecond) // the handler is running
				w.Send(form)
				w.Sleep(20 * time.Second)
				if got := w.Take(); len(got) != 0 {
					t.Fatalf("cancelled request was answered: %q", got)
				}
				if n := w.Conn.Stats().Cancelled; n != 1 {
					t.Errorf("Stats.Cancelled = %d", n)
				}
				// The id is free again at once.
				if got := w.Exchange(req(7, "echo", `[1]`)); !slices.Equal(got, []string{`{"jsonrpc":"2.0","id":7,"result":[1]}`}) {
					t.Fatalf("reused id got %q", got)
				}
			})
		})
	}
}

// A cancel that arrives right behind its request, before the handler looks
// at its context, still cancels it; unknown and finished ids are ignored.
func TestCancelBeforeHandlerRunsAndUnknownIDs(t *testing.T) {
	var sawCancel atomic.Bool
	h := rpc.Methods{"wait": func(ctx context.Context, r *rpc.Request) (any, error) {
		<-ctx.Done()
		sawCancel.Store(errors.Is(context.Cause(ctx), rpc.ErrCancelledByPeer))
		if err := r.Notify("late", nil); !errors.Is(err, rpc.ErrRequestSilenced) {
			t.Errorf("Notify after cancel = %v, want ErrRequestSilenced", err)
		}
		return "too late", nil
	}}
	runWire(t, h, nil, func(w *wire) {
		got := w.Exchange(req(1, "wait", ""),
			`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}`,
			`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"nobody"}}`,
			`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{}}`,
			`{"jsonrpc":"2.0","method":"notifications/cancelled"}`)
		if len(got) != 0 {
			t.Fatalf("got %q", got)
		}
		if !sawCancel.Load() {
			t.Fatal("handler context was not cancelled by the peer")
		}
	})
}

// With a non-silencing cancel (ACP's $/cancel_request by default) the
// request is still answered exactly once: -32800 when the handler returns
// its context's error.
func TestNonSilencingCancelStillAnswers(t *testing.T) {
	h := rpc.Methods{"wait": func(ctx context.Context, _ *rpc.Request) (any, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	}}
	runWire(t, h, nil, func(w *wire) {
		got := w.Exchange(req(1, "wait", ""), `{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":1}}`)
		want := `{"jsonrpc":"2.0","id":1,"error":{"code":-32800,"message":"Request cancelled"}}`
		if !slices.Equal(got, []string{want}) {
			t.Fatalf("got %q", got)
		}
	})
}

// Barriers (guarantee C2): a later request is not dispatched until the barrier's
// handler has finished, while other requests already running go on, and the
// reader still delivers responses to the barrier's own calls.
func TestBarrierOrdersLaterMessages(t *testing.T) {
	var order []string
	var initDone atomic.Bool
	h := rpc.Methods{
		"init": func(ctx context.Context, r *rpc.Request) (any, error) {
			// A call back to the peer: its response must be read even
			// though later requests are held.
			res, err := r.Conn().Call(ctx, "client/ask", nil)
			if err != nil {
				return nil, err
			}
			order = append(order, "init")
			initDone.Store(true)
			return res, nil
		},
		"work": func(context.Context, *rpc.Request) (any, error) {
			if !initDone.Load() {
				t.Error("work dispatched before the barrier finished")
			}
			order = append(order, "work")
			return "done", nil
		},
		"sleep": func(ctx context.Context, r *rpc.Request) (any, error) {
			time.Sleep(time.Second)
			return "slept", nil
		},
	}
	opts := &rpc.Options{IsBarrier: func(m string) bool { return m == "init" }}
	runWire(t, h, opts, func(w *wire) {
		w.Send(req(1, "sleep", ""), req(2, "init", ""), req(3, "work", ""))
		got := w.Take()
		if len(got) != 1 || !strings.Contains(got[0], `"method":"client/ask"`) {
			t.Fatalf("want the barrier's call to the client, got %q", got)
		}
		id := field(t, got[0], "id")
		w.Send(`{"jsonrpc":"2.0","id":` + id + `,"result":"yes"}`)
		got = w.Take()
		want := []string{`{"jsonrpc":"2.0","id":2,"result":"yes"}`, `{"jsonrpc":"2.0","id":3,"result":"done"}`}
		if !slices.Equal(got, want) {
			t.Fatalf("got %q want %q", got, want)
		}
		w.Sleep(time.Second)
		if got := w.Take(); !slices.Equal(got, []string{`{"jsonrpc":"2.0","id":1,"result":"slept"}`}) {
			t.Fatalf("the earlier request got %q", got)
		}
		if !slices.Equal(order, []string{"init", "work"}) {
			t.Errorf("order %q", order)
		}
	})
}

// RejectWhenBusy answers excess work at once with the busy error (guarantee C1,
// A4) and the connection keeps serving.
func TestRejectWhenBusy(t *testing.T) {
	runWire(t, nil, &rpc.Options{MaxConcurrentRequests: 2, RejectWhenBusy: true}, func(w *wire) {
		got := w.Exchange(req(1, "sleep", `{"ms":100}`), req(2, "sleep", `{"ms":100}`), req(3, "sleep", `{"ms":100}`))
		want := `{"jsonrpc":"2.0","id":3,"error":{"code":-32000,"message":"server busy: too many requests in flight","data":{"limit":2,"reason":"connection_busy"}}}`
		if !slices.Equal(got, []string{want}) {
			t.Fatalf("got %q", got)
		}
		w.Sleep(100 * time.Millisecond)
		if got := w.Take(); len(got) != 2 {
			t.Fatalf("the admitted requests got %q", got)
		}
		if n := w.Conn.Stats().Rejected; n != 1 {
			t.Errorf("Stats.Rejected = %d", n)
		}
	})
}

// Without RejectWhenBusy, a request that finds every slot taken waits in
// the admission queue and reading goes on; it runs as soon as a slot frees,
// in receive order.
func TestBusyQueuesAndKeepsReading(t *testing.T) {
	runWire(t, nil, &rpc.Options{MaxConcurrentRequests: 2}, func(w *wire) {
		w.Send(req(1, "sleep", `{"ms":100}`), req(2, "sleep", `{"ms":100}`), req(3, "echo", `[3]`))
		var fourthRead atomic.Bool
		go func() {
			w.Send(req(4, "echo", `[4]`))
			fourthRead.Store(true)
		}()
		w.Settle()
		if !fourthRead.Load() {
			t.Fatal("the server stopped reading with every slot taken")
		}
		if got := w.Take(); len(got) != 0 {
			t.Fatalf("got %q while all slots were taken", got)
		}
		w.Sleep(100 * time.Millisecond)
		got := w.Take()
		i3 := slices.Index(got, `{"jsonrpc":"2.0","id":3,"result":[3]}`)
		i4 := slices.Index(got, `{"jsonrpc":"2.0","id":4,"result":[4]}`)
		if len(got) != 4 || i3 < 0 || i4 < i3 {
			t.Fatalf("got %q", got)
		}
		if n := w.Conn.Stats().Queued; n != 2 {
			t.Errorf("Stats.Queued = %d, want 2", n)
		}
	})
}

// A request that finds every slot taken and the queue full is answered
// with the busy error at once; what was queued still runs.
func TestFullQueueRefusesRequests(t *testing.T) {
	runWire(t, nil, &rpc.Options{MaxConcurrentRequests: 1, MaxQueuedRequests: 1}, func(w *wire) {
		got := w.Exchange(req(1, "sleep", `{"ms":100}`), req(2, "echo", `[2]`), req(3, "echo", `[3]`))
		if len(got) != 1 || field(t, got[0], "id") != "3" || errCode(t, got[0]) != jsonrpc.CodeServerBusy {
			t.Fatalf("got %q", got)
		}
		w.Sleep(100 * time.Millisecond)
		if got := w.Take(); !slices.Equal(got, []string{`{"jsonrpc":"2.0","id":1,"result":{"slept":100}}`, `{"jsonrpc":"2.0","id":2,"result":[2]}`}) {
			t.Fatalf("got %q", got)
		}
		if n := w.Conn.Stats().Rejected; n != 1 {
			t.Errorf("Stats.Rejected = %d", n)
		}
	})
}

// MaxQueuedBytes bounds what the queue holds; a single request larger than
// it still fits an empty queue.
func TestQueueBytesBound(t *testing.T) {
	big := `["` + strings.Repeat("x", 100) + `"]`
	runWire(t, nil, &rpc.Options{MaxConcurrentRequests: 1, MaxQueuedBytes: 64}, func(w *wire) {
		got := w.Exchange(req(1, "sleep", `{"ms":100}`), req(2, "echo", big), req(3, "echo", `[3]`))
		if len(got) != 1 || field(t, got[0], "id") != "3" || errCode(t, got[0]) != jsonrpc.CodeServerBusy {
			t.Fatalf("got %q", got)
		}
		w.Sleep(100 * time.Millisecond)
		if got := w.Take(); len(got) != 2 || field(t, got[1], "id") != "2" {
			t.Fatalf("got %q", got)
		}
	})
}

// waitForCancel is a handler that runs until its request is cancelled: the
// shape of a subscription, or of a tool waiting on the client.
var waitForCancel = rpc.Methods{
	"hang": func(ctx context.Context, r *rpc.Request) (any, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	},
	"stream": func(ctx context.Context, r *rpc.Request) (any, error) {
		if err := r.Detach(); err != nil {
			return nil, err
		}
		<-ctx.Done()
		return nil, ctx.Err()
	},
	"echo": func(ctx context.Context, r *rpc.Request) (any, error) { return r.Params, nil },
}

func cancelLine(id int) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":%d}}`, id)
}

// Regression: with every slot held by a handler that ends only when
// cancelled, the reader waited for a slot and never read the cancellations
// queued behind the next request, so no slot ever freed and the connection
// was wedged for good. Cancellations are now read whatever the slots.
func TestRegressionFullSlotsStrandCancellations(t *testing.T) {
	runWire(t, waitForCancel, &rpc.Options{MaxConcurrentRequests: 2}, func(w *wire) {
		w.Send(req(1, "hang", ""), req(2, "hang", ""), req(3, "echo", `[3]`), req(4, "hang", ""))
		w.Send(cancelLine(1), cancelLine(2))
		w.Settle()
		if got := w.Take(); !slices.Equal(got, []string{`{"jsonrpc":"2.0","id":3,"result":[3]}`}) {
			t.Fatalf("got %q", got)
		}
		w.Send(cancelLine(4))
		if got := w.Exchange(req(5, "echo", `[5]`)); !slices.Equal(got, []string{`{"jsonrpc":"2.0","id":5,"result":[5]}`}) {
			t.Fatalf("got %q", got)
		}
	})
}

// Detached handlers hold no slot: more streams than slots leave ordinary
// requests served; beyond MaxStreams, Detach is refused with a clear error.
func TestDetachedStreamsDoNotStarveRequests(t *testing.T) {
	runWire(t, waitForCancel, &rpc.Options{MaxConcurrentRequests: 2, MaxStreams: 3}, func(w *wire) {
		w.Send(req(1, "stream", ""), req(2, "stream", ""), req(3, "stream", ""))
		got := w.Exchange(req(4, "stream", ""), req(5, "echo", `[5]`))
		want := []string{
			`{"jsonrpc":"2.0","id":4,"error":{"code":-32000,"message":"server busy: too many open streams","data":{"limit":3,"reason":"too_many_streams"}}}`,
			`{"jsonrpc":"2.0","id":5,"result":[5]}`,
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Fatalf("got %q\nwant %q", got, want)
		}
		st := w.Conn.Stats()
		if st.Streams != 3 || st.StreamsRefused != 1 {
			t.Errorf("Stats = %+v", st)
		}
		w.Send(cancelLine(1))
		w.Settle()
		if got := w.Exchange(req(6, "stream", ""), req(7, "echo", `[7]`)); !slices.Equal(got, []string{`{"jsonrpc":"2.0","id":7,"result":[7]}`}) {
			t.Fatalf("after a stream ended got %q", got)
		}
	})
}

// A barrier cannot be detached: it would hold the ordered lane forever.
func TestBarrierCannotDetach(t *testing.T) {
	opts := &rpc.Options{IsBarrier: func(m string) bool { return m == "stream" }}
	runWire(t, waitForCancel, opts, func(w *wire) {
		got := w.Exchange(req(1, "stream", ""))
		if len(got) != 1 || errCode(t, got[0]) != jsonrpc.CodeInternalError {
			t.Fatalf("got %q", got)
		}
	})
}

// A notification that needs a handler and finds no place waits (it cannot
// be refused): reading resumes once the queue has room, and nothing is lost.
func TestNotificationWaitsForQueuePlace(t *testing.T) {
	var seen atomic.Int64
	h := rpc.Methods{
		"sleep": func(ctx context.Context, r *rpc.Request) (any, error) {
			time.Sleep(100 * time.Millisecond)
			return "ok", nil
		},
		"note": func(ctx context.Context, r *rpc.Request) (any, error) { seen.Add(1); return nil, nil },
	}
	runWire(t, h, &rpc.Options{MaxConcurrentRequests: 1, MaxQueuedRequests: 1}, func(w *wire) {
		note := `{"jsonrpc":"2.0","method":"note"}`
		w.Send(req(1, "sleep", ""), note)
		var thirdRead atomic.Bool
		go func() {
			w.Send(note) // read, and waits for a place
			w.Send(note) // not read until then
			thirdRead.Store(true)
		}()
		w.Settle()
		if thirdRead.Load() {
			t.Fatal("a notification was read with no place for it")
		}
		w.Sleep(100 * time.Millisecond)
		if !thirdRead.Load() || seen.Load() != 3 {
			t.Fatalf("read %v, handled %d notifications", thirdRead.Load(), seen.Load())
		}
	})
}

// Calls in the other direction, with a late response counted (K2-style
// bookkeeping on the server side too) and an unknown one reported.
func TestCallToPeerAndLateResponses(t *testing.T) {
	var violations []rpc.ViolationKind
	h := rpc.Methods{"ask": func(ctx context.Context, r *rpc.Request) (any, error) {
		ctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		_, err := r.Conn().Call(ctx, "client/slow", map[string]int{"n": 1})
		return nil, err
	}}
	opts := &rpc.Options{
		OutboundCancel: &rpc.MCPCancel,
		OnViolation:    func(v rpc.Violation) { violations = append(violations, v.Kind) },
	}
	runWire(t, h, opts, func(w *wire) {
		got := w.Exchange(req(1, "ask", ""))
		if len(got) != 1 || !strings.Contains(got[0], `"method":"client/slow","params":{"n":1}`) {
			t.Fatalf("got %q", got)
		}
		id := field(t, got[0], "id")
		w.Sleep(time.Second)
		got = w.Take()
		cancelLine := `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":` + id + `,"reason":"context deadline exceeded"}}`
		if len(got) != 2 || (got[0] != cancelLine && got[1] != cancelLine) {
			t.Fatalf("want a cancel for %s and the handler's error, got %q", id, got)
		}
		w.Send(`{"jsonrpc":"2.0","id":`+id+`,"result":"late"}`, `{"jsonrpc":"2.0","id":4242,"result":"who"}`)
		w.Settle()
		s := w.Conn.Stats()
		if s.LateResponses != 1 || s.UnknownResponses != 1 {
			t.Errorf("stats %+v", s)
		}
		if !slices.Equal(violations, []rpc.ViolationKind{rpc.ViolationLateResponse, rpc.ViolationUnknownResponse}) {
			t.Errorf("violations %v", violations)
		}
	})
}

// Every bad line is counted and reported to OnViolation.
func TestViolationsAreCounted(t *testing.T) {
	var kinds []string
	opts := &rpc.Options{MaxMessageBytes: 64, OnViolation: func(v rpc.Violation) { kinds = append(kinds, v.Kind.String()) }}
	runWire(t, nil, opts, func(w *wire) {
		w.Exchange("nope", `{"a":1}`, `{"jsonrpc":"2.0","id":1,"method":"echo","params":"`+strings.Repeat("x", 100)+`"}`)
		s := w.Conn.Stats()
		if s.ParseErrors != 1 || s.InvalidMessages != 1 || s.TooLong != 1 {
			t.Errorf("stats %+v", s)
		}
		if !slices.Equal(kinds, []string{"parse", "invalid", "too_long"}) {
			t.Errorf("violations %q", kinds)
		}
	})
}

// A quiet connection (the client side) never answers bad input.
func TestQuietOnBadInput(t *testing.T) {
	runWire(t, nil, &rpc.Options{QuietOnBadInput: true}, func(w *wire) {
		if got := w.Exchange("nope", `{"a":1}`, `[]`, `[1]`); len(got) != 0 {
			t.Fatalf("quiet connection answered %q", got)
		}
	})
}

// RejectBatches (MCP >= 2025-06-18, ACP) answers an array with a single
// -32600 and runs nothing in it.
func TestRejectBatches(t *testing.T) {
	runWire(t, nil, &rpc.Options{RejectBatches: true}, func(w *wire) {
		got := w.Exchange(`[` + req(1, "echo", "[1]") + `,` + req(2, "echo", "[2]") + `]`)
		want := `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request: batches are not supported"}}`
		if !slices.Equal(got, []string{want}) {
			t.Fatalf("got %q", got)
		}
	})
}

// AllowNullID admits plain JSON-RPC requests with id null.
func TestAllowNullID(t *testing.T) {
	runWire(t, nil, &rpc.Options{AllowNullID: true}, func(w *wire) {
		got := w.Exchange(`{"jsonrpc":"2.0","id":null,"method":"echo","params":[1]}`)
		if !slices.Equal(got, []string{`{"jsonrpc":"2.0","id":null,"result":[1]}`}) {
			t.Fatalf("got %q", got)
		}
	})
}

// A batch longer than MaxBatchLength is refused whole, so one line cannot
// make an unbounded reply.
func TestBatchTooLong(t *testing.T) {
	runWire(t, nil, &rpc.Options{MaxBatchLength: 3}, func(w *wire) {
		got := w.Exchange(`[1,2,3,4]`)
		if len(got) != 1 || errCode(t, got[0]) != jsonrpc.CodeInvalidRequest || field(t, got[0], "id") != "null" {
			t.Fatalf("got %q", got)
		}
	})
}

// With a negative InlineBudget every handler gets its own goroutine; the
// wire behaviour is the same.
func TestNoInlineDispatch(t *testing.T) {
	runWire(t, nil, &rpc.Options{InlineBudget: -1}, func(w *wire) {
		got := w.Exchange(req(1, "echo", "[1]"), req(2, "notify", `{"count":1}`))
		want := []string{`{"jsonrpc":"2.0","id":1,"result":[1]}`, `{"jsonrpc":"2.0","id":2,"result":{"sent":1}}`, `{"jsonrpc":"2.0","method":"notify/tick","params":{"i":1}}`}
		if !slices.Equal(got, want) {
			t.Fatalf("got %q", got)
		}
	})
}

// FatalViolations (a strict client) ends the connection at the first bad
// line, with an error that names it.
func TestFatalViolations(t *testing.T) {
	runWire(t, nil, &rpc.Options{FatalViolations: true, QuietOnBadInput: true}, func(w *wire) {
		w.Send(`DEBUG: looking things up...`)
		w.Settle()
		<-w.Conn.Done()
		if err := w.Conn.Wait(); !errors.Is(err, rpc.ErrProtocolViolation) || !strings.Contains(err.Error(), "DEBUG") {
			t.Fatalf("Wait = %v", err)
		}
	})
}

// A handler may leave a request unanswered on purpose (ErrNoResponse), and
// InputDone tells long-running handlers that input has ended.
func TestNoResponseAndInputDone(t *testing.T) {
	h := rpc.Methods{
		"silent": func(context.Context, *rpc.Request) (any, error) { return nil, rpc.ErrNoResponse },
		"stream": func(ctx context.Context, r *rpc.Request) (any, error) {
			select {
			case <-r.Conn().InputDone():
				return "input ended", nil
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		},
	}
	runWire(t, h, nil, func(w *wire) {
		if got := w.Exchange(req(1, "silent", "")); len(got) != 0 {
			t.Fatalf("silent answered %q", got)
		}
		w.Send(req(2, "stream", ""))
		w.Sleep(time.Millisecond)
		start := time.Now()
		w.In.Close()
		<-w.Conn.Done()
		if d := time.Since(start); d != 0 {
			t.Errorf("stream ended %v after EOF", d)
		}
		<-w.EOF
		if got := w.Take(); !slices.Equal(got, []string{`{"jsonrpc":"2.0","id":2,"result":"input ended"}`}) {
			t.Fatalf("got %q", got)
		}
	})
}

// Admit runs in receive order before any handler starts, also for messages
// held behind a barrier, and refuses with the error it returns.
func TestAdmitInReceiveOrder(t *testing.T) {
	var order []string
	h := rpc.Methods{
		"barrier": func(context.Context, *rpc.Request) (any, error) { time.Sleep(time.Second); return "b", nil },
		"work":    func(context.Context, *rpc.Request) (any, error) { return "w", nil },
	}
	opts := &rpc.Options{
		IsBarrier: func(m string) bool { return m == "barrier" },
		// Two places: 4 fits only if the refused 3 gave its place back.
		MaxQueuedRequests: 2,
		Admit: func(r *rpc.Request) error {
			order = append(order, string(r.ID))
			if r.ID == "3" {
				return jsonrpc.NewError(-32000, "refused", map[string]string{"reason": "test"})
			}
			return nil
		},
	}
	runWire(t, h, opts, func(w *wire) {
		w.Send(req(1, "barrier", ""), req(2, "work", ""), req(3, "work", ""), req(4, "work", ""))
		w.Sleep(time.Second)
		got := w.Take()
		if strings.Join(order, " ") != "1 2 3 4" {
			t.Errorf("admitted in order %q", order)
		}
		joined := strings.Join(got, "\n")
		if len(got) != 4 || !strings.Contains(joined, `"id":3,"error":{"code":-32000,"message":"refused","data":{"reason":"test"}}`) ||
			!strings.Contains(joined, `{"jsonrpc":"2.0","id":4,"result":"w"}`) {
			t.Fatalf("got %q", got)
		}
	})
}

// Refusals are counted one by one but logged once per burst: a flood of
// oversized lines and of requests beyond the queue costs one warning each.
func TestRefusalsLoggedOncePerBurst(t *testing.T) {
	var logs strings.Builder
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	opts := &rpc.Options{MaxMessageBytes: 96, MaxConcurrentRequests: 1, MaxQueuedRequests: 1, Logger: logger}
	runWire(t, waitForCancel, opts, func(w *wire) {
		long := req(1, "echo", `["`+strings.Repeat("x", 100)+`"]`)
		lines := []string{req(`"s"`, "hang", ""), req(`"q"`, "echo", `[0]`)}
		for i := range 50 {
			lines = append(lines, long, req(100+i, "echo", `[1]`))
		}
		got := w.Exchange(lines...)
		w.Send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"s"}}`)
		got = append(got, w.Exchange()...)
		if len(got) != 101 || !slices.Contains(got, `{"jsonrpc":"2.0","id":"q","result":[0]}`) {
			t.Fatalf("%d replies, the queued one answered: %v", len(got), slices.Contains(got, `{"jsonrpc":"2.0","id":"q","result":[0]}`))
		}
		st := w.Conn.Stats()
		if st.TooLong != 50 || st.Rejected != 50 {
			t.Errorf("Stats %+v", st)
		}
	})
	if n := strings.Count(logs.String(), "over MaxMessageBytes"); n != 1 {
		t.Errorf("%d warnings for oversized lines:\n%s", n, logs.String())
	}
	if n := strings.Count(logs.String(), "request refused"); n != 1 {
		t.Errorf("%d warnings for refused requests:\n%s", n, logs.String())
	}
}

// A notification waiting for a place in the queue does not hold the
// connection past Close: the handlers' contexts end (every live request,
// queued ones included, is cancelled with ErrClosed), the wait ends with
// them, and the connection is done without waiting out any bound.
func TestCloseEndsANotificationWaitingForAPlace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var causes []error
		var mu sync.Mutex
		h := rpc.Methods{
			"wait": func(ctx context.Context, _ *rpc.Request) (any, error) {
				<-ctx.Done()
				mu.Lock()
				causes = append(causes, context.Cause(ctx))
				mu.Unlock()
				return nil, context.Cause(ctx)
			},
		}
		w := startWire(t, h, &rpc.Options{MaxConcurrentRequests: 1, MaxQueuedRequests: 1}, true)
		note := `{"jsonrpc":"2.0","method":"wait"}`
		w.Send(req(1, "wait", ""), note) // one running, one queued
		go w.Send(note)                  // read, and waits for a place
		w.Settle()
		start := time.Now()
		if err := w.Conn.Close(); err != nil {
			t.Errorf("Close = %v", err)
		}
		if d := time.Since(start); d != 0 {
			t.Errorf("Close took %v with a notification waiting for a place", d)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(causes) != 1 || !errors.Is(causes[0], rpc.ErrClosed) {
			t.Errorf("handler causes %v, want the running one cancelled with ErrClosed", causes)
		}
		w.In.Close()
		<-w.EOF
	})
}
