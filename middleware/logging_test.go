package middleware_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/agentwire/agentwire/internal/wiretest"
	"github.com/agentwire/agentwire/jsonrpc"
	"github.com/agentwire/agentwire/middleware"
	"github.com/agentwire/agentwire/rpc"
)

func logged() rpc.Methods {
	return rpc.Methods{
		"ok": func(context.Context, *rpc.Request) (any, error) {
			return json.RawMessage(`{"token":"s3cret-result"}`), nil
		},
		"fail": func(context.Context, *rpc.Request) (any, error) {
			return nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "invalid params: need x")
		},
		"boom":       func(context.Context, *rpc.Request) (any, error) { return nil, errors.New("disk on fire") },
		"tools/call": func(context.Context, *rpc.Request) (any, error) { return "done", nil },
		"note":       func(context.Context, *rpc.Request) (any, error) { return nil, nil },
		"wait":       waitHandler,
		"panic":      func(context.Context, *rpc.Request) (any, error) { panic("kaput") },
	}
}

// One record per request, when it ends, with the outcome that decides its
// level; params and results never reach the log.
func TestLoggingRecordsEveryOutcome(t *testing.T) {
	l, logs := textLogger(slog.LevelDebug)
	opts := mws(middleware.Logging(&middleware.LogOptions{Logger: l}))
	bubble(t, func() rpc.Handler { return logged() }, opts, func(w *wiretest.Wire) {
		got := w.Exchange(
			`{"jsonrpc":"2.0","id":1,"method":"ok","params":{"password":"hunter2"}}`,
			`{"jsonrpc":"2.0","id":"a","method":"fail"}`,
			`{"jsonrpc":"2.0","id":3,"method":"boom"}`,
			`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"search","arguments":{"api_key":"hunter2"}}}`,
			`{"jsonrpc":"2.0","method":"note","params":{"password":"hunter2"}}`,
			`{"jsonrpc":"2.0","id":7,"method":"panic"}`,
		)
		if len(got) != 5 {
			t.Fatalf("replies: %q", got)
		}
		if wiretest.ErrCode(t, got[4]) != jsonrpc.CodeInternalError { // id 7, sorted last
			t.Errorf("the panic was answered %s", got[4])
		}
		w.Send(`{"jsonrpc":"2.0","id":6,"method":"wait"}`)
		w.Sleep(2 * time.Second)
		w.Send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":6}}`)
		if got := w.Take(); len(got) != 0 {
			t.Errorf("a silenced request was answered: %q", got)
		}
	})
	lines := logs.Lines()
	equalLines(t, "records", lines, []string{
		`level=DEBUG msg="rpc request" method=ok id=1 duration=0s outcome=ok`,
		`level=WARN msg="rpc request" method=fail id="\"a\"" duration=0s outcome=error code=-32602 error="invalid params: need x"`,
		`level=WARN msg="rpc request" method=boom id=3 duration=0s outcome=error code=-32603 error="disk on fire"`,
		`level=DEBUG msg="rpc request" method=tools/call id=4 tool=search duration=0s outcome=ok`,
		`level=DEBUG msg="rpc notification" method=note duration=0s outcome=ok`,
		`level=WARN msg="rpc request" method=panic id=7 duration=0s outcome=panic code=-32603`,
		`level=INFO msg="rpc request" method=wait id=6 duration=2s outcome=cancelled cause="rpc: request cancelled by the peer"`,
	})
	for _, secret := range []string{"hunter2", "s3cret", "api_key", "password"} {
		if strings.Contains(strings.Join(lines, "\n"), secret) {
			t.Errorf("the log holds %q", secret)
		}
	}
}

// By default an operator at Info sees every failure and cancellation and
// no line per healthy request.
func TestLoggingDefaultLevels(t *testing.T) {
	l, logs := textLogger(slog.LevelInfo)
	opts := mws(middleware.Logging(&middleware.LogOptions{Logger: l}))
	bubble(t, func() rpc.Handler { return logged() }, opts, func(w *wiretest.Wire) {
		w.Exchange(
			`{"jsonrpc":"2.0","id":1,"method":"ok"}`,
			`{"jsonrpc":"2.0","id":2,"method":"fail"}`,
			`{"jsonrpc":"2.0","id":3,"method":"wait"}`,
			`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":3}}`,
		)
	})
	lines := logs.Lines()
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "level=WARN") || !strings.HasPrefix(lines[1], "level=INFO") {
		t.Errorf("records at Info: %q", lines)
	}
}

// The levels are options; ParamsSize adds the size of params, not them.
func TestLoggingLevelsAndParamsSize(t *testing.T) {
	l, logs := textLogger(slog.LevelDebug, "duration")
	var ok slog.LevelVar
	ok.Set(slog.LevelInfo)
	opts := mws(middleware.Logging(&middleware.LogOptions{
		Logger: l, Level: &ok, ErrorLevel: slog.LevelError, CancelLevel: slog.LevelWarn, ParamsSize: true,
	}))
	bubble(t, func() rpc.Handler { return logged() }, opts, func(w *wiretest.Wire) {
		w.Exchange(`{"jsonrpc":"2.0","id":1,"method":"ok","params":{"password":"hunter2"}}`)
		w.Exchange(`{"jsonrpc":"2.0","id":2,"method":"fail"}`)
		w.Exchange(`{"jsonrpc":"2.0","id":3,"method":"wait"}`,
			`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":3}}`)
		ok.Set(slog.LevelDebug)
		w.Exchange(`{"jsonrpc":"2.0","id":4,"method":"ok"}`)
	})
	equalLines(t, "records", logs.Lines(), []string{
		`level=INFO msg="rpc request" method=ok id=1 params_bytes=22 outcome=ok`,
		`level=ERROR msg="rpc request" method=fail id=2 params_bytes=0 outcome=error code=-32602 error="invalid params: need x"`,
		`level=WARN msg="rpc request" method=wait id=3 params_bytes=0 outcome=cancelled cause="rpc: request cancelled by the peer"`,
		`level=DEBUG msg="rpc request" method=ok id=4 params_bytes=0 outcome=ok`,
	})
}

// Nil options log to slog.Default(), read when the record is written.
func TestLoggingNilOptionsUseDefaultLogger(t *testing.T) {
	l, logs := textLogger(slog.LevelInfo)
	mw := middleware.Logging(nil)
	prev := slog.Default()
	slog.SetDefault(l)
	defer slog.SetDefault(prev)
	h := mw(logged())
	if _, err := h.Handle(context.Background(), &rpc.Request{ID: "1", Method: "fail"}); err == nil {
		t.Fatal("no error")
	}
	if _, err := h.Handle(context.Background(), &rpc.Request{ID: "2", Method: "ok"}); err != nil {
		t.Fatal(err)
	}
	lines := logs.Lines()
	if len(lines) != 1 || !strings.Contains(lines[0], "outcome=error") {
		t.Errorf("default logger got %q (ok records are at Debug, below the logger's Info)", lines)
	}
}

// Outbound calls are logged on the caller's side: the id the call was
// sent with, the peer's error code, a caller that gave up, and the tool
// of an MCP call read from params that were not raw JSON.
func TestLogOutbound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, logs := textLogger(slog.LevelDebug)
		server := rpc.Methods{
			"echo": func(_ context.Context, r *rpc.Request) (any, error) { return r.Params, nil },
			"fail": func(context.Context, *rpc.Request) (any, error) {
				return nil, jsonrpc.NewError(-32000, "nope", map[string]string{"why": "secret"})
			},
			"tools/call": func(context.Context, *rpc.Request) (any, error) { return "ok", nil },
			"note":       func(context.Context, *rpc.Request) (any, error) { return nil, nil },
			"wait":       waitHandler,
		}
		c, s := rpc.Pipe(server, nil, &rpc.Options{Logger: wiretest.Quiet}, &rpc.Options{
			Logger:   wiretest.Quiet,
			Outbound: []rpc.OutboundMiddleware{middleware.LogOutbound(&middleware.LogOptions{Logger: l, ParamsSize: true})},
		})
		defer s.Close()
		defer c.Close()
		ctx := context.Background()
		if _, err := c.Call(ctx, "echo", map[string]int{"a": 1}); err != nil {
			t.Fatal(err)
		}
		type call struct {
			Name      string         `json:"name"`
			Arguments map[string]any `json:"arguments"`
		}
		if _, err := c.Call(ctx, "tools/call", call{Name: "search", Arguments: map[string]any{"token": "hunter2"}}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Call(ctx, "fail", nil); err == nil {
			t.Fatal("fail did not fail")
		}
		if err := c.Notify(ctx, "note", nil); err != nil {
			t.Fatal(err)
		}
		tctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		if _, err := c.Call(tctx, "wait", nil); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("wait: %v", err)
		}
		synctest.Wait()
		equalLines(t, "records", logs.Lines(), []string{
			`level=DEBUG msg="rpc call" method=echo id=1 params_bytes=7 duration=0s outcome=ok`,
			`level=DEBUG msg="rpc call" method=tools/call id=2 tool=search params_bytes=49 duration=0s outcome=ok`,
			`level=WARN msg="rpc call" method=fail id=3 params_bytes=0 duration=0s outcome=error code=-32000 error=nope`,
			`level=DEBUG msg="rpc notify" method=note params_bytes=0 duration=0s outcome=ok`,
			`level=INFO msg="rpc call" method=wait id=4 params_bytes=0 duration=1s outcome=cancelled cause="context deadline exceeded"`,
		})
	})
}
