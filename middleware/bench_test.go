package middleware_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"testing"
	"time"

	"github.com/agentwire/agentwire/middleware"
	"github.com/agentwire/agentwire/rpc"
)

// What each middleware adds to one request, around a handler that does
// nothing (the connection's own cost is in rpc's benchmarks).
func BenchmarkMiddleware(b *testing.B) {
	info := slog.New(slog.NewTextHandler(discard{}, &slog.HandlerOptions{Level: slog.LevelInfo}))
	debug := slog.New(slog.NewTextHandler(discard{}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	cases := []struct {
		name string
		mw   rpc.Middleware
	}{
		{"none", nil},
		{"logging/below-level", middleware.Logging(&middleware.LogOptions{Logger: info})},
		{"logging/written", middleware.Logging(&middleware.LogOptions{Logger: debug})},
		{"limit/rate", middleware.NewLimit(&middleware.LimitOptions{Default: middleware.Limit{Rate: 1e12}}).Middleware()},
		{"limit/concurrent", middleware.NewLimit(&middleware.LimitOptions{Default: middleware.Limit{Concurrent: 1 << 20}}).Middleware()},
		{"limit/by-conn", middleware.NewLimit(&middleware.LimitOptions{Default: middleware.Limit{Rate: 1e12}, Key: middleware.ByConn}).Middleware()},
		{"timeout", middleware.NewTimeout(&middleware.TimeoutOptions{Default: middleware.Limits{Idle: time.Minute}}).Middleware()},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			var h rpc.Handler = rpc.HandlerFunc(func(context.Context, *rpc.Request) (any, error) { return nil, nil })
			h = rpc.Chain(h, c.mw)
			req := &rpc.Request{ID: "1", Method: "tools/call", Params: json.RawMessage(`{"name":"echo","arguments":{}}`)}
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				h.Handle(ctx, req)
			}
		})
	}
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
