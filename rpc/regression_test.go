package rpc_test

// Regression tests for defects found in review. Each names the bug it pins.

import (
	"bufio"
	"context"
	"io"
	"net"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/agentwire/agentwire/rpc"
)

// Bug: hold checked that a barrier was running, unlocked, then appended; a
// finishing barrier could miss the request, which was never answered.
func TestRegressionHeldRequestIsNeverStranded(t *testing.T) {
	iterations := 300
	if testing.Short() {
		iterations = 30
	}
	for iter := range iterations {
		release := make(chan struct{})
		h := rpc.HandlerFunc(func(ctx context.Context, r *rpc.Request) (any, error) {
			if r.Method == "init" {
				<-release
			}
			return "ok", nil
		})
		n := 5 + iter%50
		inR, inW := io.Pipe()
		outR, outW := io.Pipe()
		conn := rpc.New(inR, outW, h, &rpc.Options{Logger: quiet, MaxConcurrentRequests: 1 + iter%4,
			IsBarrier: func(m string) bool { return m == "init" }})
		lines := make(chan string, 128)
		go func() {
			br := bufio.NewReader(outR)
			for {
				l, err := br.ReadString('\n')
				if err != nil {
					close(lines)
					return
				}
				lines <- l
			}
		}()
		io.WriteString(inW, req(0, "init", "")+"\n")
		for conn.Stats().Promotions == 0 {
			time.Sleep(20 * time.Microsecond)
		}
		var b strings.Builder
		for i := 1; i <= n; i++ {
			b.WriteString(req(i, "echo", "") + "\n")
		}
		go func() {
			close(release)
			io.WriteString(inW, b.String())
		}()
		got := 0
		timeout := time.After(5 * time.Second)
	loop:
		for got < n+1 {
			select {
			case <-lines:
				got++
			case <-timeout:
				break loop
			}
		}
		inW.Close()
		conn.Wait()
		for range lines {
		}
		if got != n+1 {
			t.Fatalf("iteration %d: %d of %d requests answered", iter, got, n+1)
		}
	}
}

// Bug: a write error found while flushing was recorded but nobody stopped
// the connection (guarantee C6), so it kept reading and running handlers.
func TestRegressionWriteErrorStopsTheConnection(t *testing.T) {
	for _, budget := range []time.Duration{0, -1} {
		synctest.Test(t, func(t *testing.T) {
			inR, inW := io.Pipe()
			outR, outW := io.Pipe()
			outR.Close() // the peer is gone: every write fails
			conn := rpc.New(inR, outW, nil, &rpc.Options{Logger: quiet, InlineBudget: budget})
			go io.WriteString(inW, req(1, "echo", "[1]")+"\n")
			<-conn.Done()
			if err := conn.Wait(); err == nil || !strings.Contains(err.Error(), "writing output") {
				t.Errorf("budget %v: Wait = %v", budget, err)
			}
			inW.Close()
		})
	}
}

// Bug: Close during the end-of-stream grace waited out the grace instead of
// skipping it (guarantee C6).
func TestRegressionCloseDuringGraceSkipsIt(t *testing.T) {
	runWire(t, nil, nil, func(w *wire) {
		w.Send(req(1, "sleep", `{"ms":60000}`))
		w.Sleep(time.Millisecond)
		w.In.Close() // EOF: the grace starts
		w.Sleep(time.Millisecond)
		start := time.Now()
		w.Conn.Close()
		if d := time.Since(start); d != 0 {
			t.Errorf("Close during the grace took %v", d)
		}
	})
}

// Bug: a barrier inside a batch ran on the reader without the watchdog, so
// neither the response to its own call nor a cancellation was read.
func TestRegressionBarrierInBatchKeepsReading(t *testing.T) {
	var cancelled = make(chan struct{}, 1)
	h := rpc.Methods{
		"init": func(ctx context.Context, r *rpc.Request) (any, error) {
			return r.Conn().Call(ctx, "roots/list", nil)
		},
		"wait": func(ctx context.Context, r *rpc.Request) (any, error) {
			<-ctx.Done()
			cancelled <- struct{}{}
			return nil, ctx.Err()
		},
		"after": func(context.Context, *rpc.Request) (any, error) { return "after", nil },
	}
	opts := &rpc.Options{IsBarrier: func(m string) bool { return m == "init" || m == "wait" }}
	runWire(t, h, opts, func(w *wire) {
		w.Send(`[` + req(1, "init", "") + `,` + req(2, "after", "") + `]`)
		got := w.Take()
		if len(got) != 1 || !strings.Contains(got[0], `"method":"roots/list"`) {
			t.Fatalf("want the barrier's call, got %q", got)
		}
		w.Send(`{"jsonrpc":"2.0","id":` + field(t, got[0], "id") + `,"result":{"roots":[]}}`)
		got = w.Take()
		if len(got) != 1 || len(splitBatch(t, got[0])) != 2 {
			t.Fatalf("want the batch reply with both entries, got %q", got)
		}
		w.Send(`[` + req(3, "wait", "") + `]`)
		w.Send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":3}}`)
		w.Settle()
		select {
		case <-cancelled:
		default:
			t.Fatal("the cancellation was not read while a batched barrier ran")
		}
	})
}

// Bug: Close on a connection whose input and output are one socket closed
// the socket before the handlers' final replies were drained.
func TestRegressionCloseOnASocketDrainsReplies(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sc, cc := net.Pipe()
		started := make(chan struct{})
		h := rpc.HandlerFunc(func(ctx context.Context, r *rpc.Request) (any, error) {
			close(started)
			<-ctx.Done()
			return map[string]string{"stopReason": "cancelled"}, nil
		})
		conn := rpc.New(sc, sc, h, &rpc.Options{Logger: quiet})
		go io.WriteString(cc, req(1, "prompt", "")+"\n")
		<-started
		got := make(chan string, 1)
		go func() {
			l, _ := bufio.NewReader(cc).ReadString('\n')
			got <- l
		}()
		if err := conn.Close(); err != nil {
			t.Errorf("Close = %v", err)
		}
		if l := <-got; !strings.Contains(l, `"stopReason":"cancelled"`) {
			t.Errorf("reply lost: %q", l)
		}
		cc.Close()
	})
}

// Bug: a broken notification (method present, no id) was answered with
// -32600; notifications are never answered (guarantee W4).
func TestRegressionBrokenNotificationsAreNotAnswered(t *testing.T) {
	runWire(t, nil, nil, func(w *wire) {
		got := w.Exchange(
			`{"jsonrpc":"2.0","method":"notify","params":"x"}`,
			`{"jsonrpc":"1.0","method":"notify"}`,
			`{"jsonrpc":"2.0","method":5}`,
			`[{"jsonrpc":"2.0","method":"notify","params":1},`+req(1, "echo", "[1]")+`]`,
		)
		want := `[{"jsonrpc":"2.0","id":1,"result":[1]}]`
		if len(got) != 1 || got[0] != want {
			t.Fatalf("got %q", got)
		}
		if s := w.Conn.Stats(); s.InvalidMessages != 4 {
			t.Errorf("InvalidMessages = %d, want 4", s.InvalidMessages)
		}
	})
}

// Barriers (control requests) are never refused by RejectWhenBusy.
func TestBarrierIsNotRejectedWhenBusy(t *testing.T) {
	h := rpc.Methods{
		"slow": func(ctx context.Context, r *rpc.Request) (any, error) {
			time.Sleep(time.Second)
			return "slow", nil
		},
		"control": func(context.Context, *rpc.Request) (any, error) { return "control", nil },
	}
	opts := &rpc.Options{MaxConcurrentRequests: 1, RejectWhenBusy: true, IsBarrier: func(m string) bool { return m == "control" }}
	runWire(t, h, opts, func(w *wire) {
		w.Send(req(1, "slow", ""))
		w.Sleep(time.Millisecond)
		w.Send(req(2, "control", ""))
		w.Sleep(time.Second)
		got := w.Take()
		if len(got) != 2 || strings.Contains(strings.Join(got, ""), "-32000") {
			t.Fatalf("got %q", got)
		}
	})
}

// Regression (found in review): at shutdown, handler contexts were
// cancelled before the admission queue closed, so a handler that returned
// at once handed its slot to a queued request, which then ran, cancelled,
// although queued requests never start once shutdown begins.
func TestRegressionQueuedRequestStartsAfterClose(t *testing.T) {
	var started atomic.Int64
	h := rpc.Methods{
		"block": func(ctx context.Context, r *rpc.Request) (any, error) { <-ctx.Done(); return nil, ctx.Err() },
		"mark":  func(ctx context.Context, r *rpc.Request) (any, error) { started.Add(1); return nil, nil },
	}
	for range 3000 {
		inR, inW := io.Pipe()
		outR, outW := io.Pipe()
		go io.Copy(io.Discard, outR)
		c := rpc.New(inR, outW, h, &rpc.Options{MaxConcurrentRequests: 1, InlineBudget: -1, Logger: quiet})
		io.WriteString(inW, `{"jsonrpc":"2.0","id":1,"method":"block"}`+"\n"+`{"jsonrpc":"2.0","id":2,"method":"mark"}`+"\n")
		for c.Stats().Queued == 0 {
			runtime.Gosched()
		}
		c.Close()
		inW.Close()
		outR.Close()
	}
	if n := started.Load(); n != 0 {
		t.Fatalf("a queued request started after Close in %d of 3000 runs", n)
	}
}

// A request cancelled while it waits in the queue never starts; a
// non-silencing cancellation answers it -32800 at once.
func TestCancelledWhileQueuedNeverStarts(t *testing.T) {
	var started atomic.Int64
	h := rpc.Methods{
		"hang": func(ctx context.Context, r *rpc.Request) (any, error) { <-ctx.Done(); return nil, ctx.Err() },
		"mark": func(ctx context.Context, r *rpc.Request) (any, error) { started.Add(1); return "ran", nil },
	}
	runWire(t, h, &rpc.Options{MaxConcurrentRequests: 1, MaxQueuedRequests: 4}, func(w *wire) {
		w.Send(req(1, "hang", ""), req(2, "mark", ""), req(3, "mark", ""))
		w.Settle()
		got := w.Exchange(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":2}}`,
			`{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":3}}`)
		if !slices.Equal(got, []string{`{"jsonrpc":"2.0","id":3,"error":{"code":-32800,"message":"Request cancelled"}}`}) {
			t.Fatalf("got %q", got)
		}
		w.Send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}`)
		w.Settle()
		if got := w.Exchange(req(4, "mark", "")); !slices.Equal(got, []string{`{"jsonrpc":"2.0","id":4,"result":"ran"}`}) {
			t.Fatalf("after the cancels: %q", got)
		}
		if n := started.Load(); n != 1 {
			t.Errorf("%d marks ran, want only the last", n)
		}
	})
}

// With an Admit hook a request cancelled while queued still runs, cancelled:
// what Admit reserved for it, only its handler releases.
func TestCancelledWhileQueuedRunsWithAdmit(t *testing.T) {
	var reserved atomic.Int64
	h := rpc.Methods{
		"hang": func(ctx context.Context, r *rpc.Request) (any, error) { <-ctx.Done(); return nil, ctx.Err() },
		"mark": func(ctx context.Context, r *rpc.Request) (any, error) {
			defer reserved.Add(-1) // the handler releases what Admit took
			return nil, context.Cause(ctx)
		},
	}
	opts := &rpc.Options{MaxConcurrentRequests: 1, MaxQueuedRequests: 4, Admit: func(r *rpc.Request) error {
		if r.Method == "mark" {
			reserved.Add(1)
		}
		return nil
	}}
	runWire(t, h, opts, func(w *wire) {
		w.Send(req(1, "hang", ""), req(2, "mark", ""))
		w.Settle()
		w.Send(`{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":2}}`,
			`{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":1}}`)
		got := w.Exchange()
		if len(got) != 2 || !strings.Contains(strings.Join(got, "\n"), `"id":2,"error":{"code":-32800`) {
			t.Fatalf("got %q", got)
		}
		if n := reserved.Load(); n != 0 {
			t.Errorf("%d reservations left", n)
		}
	})
}
