package middleware_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/agentwire/agentwire/jsonrpc"
	"github.com/agentwire/agentwire/middleware"
	"github.com/agentwire/agentwire/rpc"
)

// exampleLogger writes text records to standard output without the time
// and the duration, so that the output is the same on every run.
func exampleLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{
		Level: slog.LevelDebug,
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if len(groups) == 0 && (a.Key == slog.TimeKey || a.Key == "duration") {
				return slog.Attr{}
			}
			return a
		},
	}))
}

// One record per request: the tool an MCP call names, never its
// arguments; errors at Warn, successes at Debug.
func ExampleLogging() {
	server := rpc.Methods{
		"tools/call": func(context.Context, *rpc.Request) (any, error) { return "sunny", nil },
		"fail": func(context.Context, *rpc.Request) (any, error) {
			return nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "invalid params: city is required")
		},
	}
	logging := middleware.Logging(&middleware.LogOptions{Logger: exampleLogger()})
	c, s := rpc.Pipe(server, nil, &rpc.Options{Middleware: []rpc.Middleware{logging}}, nil)
	defer s.Close()
	defer c.Close()

	ctx := context.Background()
	c.Call(ctx, "tools/call", map[string]any{"name": "forecast", "arguments": map[string]string{"city": "Paris"}})
	c.Call(ctx, "fail", nil)
	// Output:
	// level=DEBUG msg="rpc request" method=tools/call id=1 tool=forecast outcome=ok
	// level=WARN msg="rpc request" method=fail id=2 outcome=error code=-32602 error="invalid params: city is required"
}

// A handler that stops making progress is cancelled with ErrTimeout as its
// context's cause, and the request is answered -32001 once it returns. A
// handler that reports progress (Request.Notify) keeps going, up to Max.
func ExampleNewTimeout() {
	to := middleware.NewTimeout(&middleware.TimeoutOptions{
		Default: middleware.Limits{Idle: 20 * time.Millisecond, Max: time.Minute},
		Logger:  slog.New(slog.DiscardHandler),
	})
	server := rpc.Methods{
		"stuck": func(ctx context.Context, _ *rpc.Request) (any, error) {
			<-ctx.Done()
			fmt.Println("handler:", context.Cause(ctx))
			return nil, ctx.Err()
		},
	}
	c, s := rpc.Pipe(server, nil, &rpc.Options{Middleware: []rpc.Middleware{to.Middleware()}}, nil)
	defer s.Close()
	defer c.Close()

	_, err := c.Call(context.Background(), "stuck", nil)
	fmt.Println("client:", err)
	fmt.Printf("%+v\n", to.Stats())
	// Output:
	// handler: middleware: request timed out: stuck made no progress for 20ms (idle limit)
	// client: jsonrpc error -32001: Request timed out (data: {"reason":"timeout","limit_ms":20,"kind":"idle"})
	// {Timed:1 Running:0 IdleTimeouts:1 MaxTimeouts:0 Lingering:0 OutboundTimeouts:0}
}

// One search at a time per connection, and status at most once a minute
// after a burst of two: what is over a limit is refused at once, without
// reaching the handler.
func ExampleNewLimit() {
	lim := middleware.NewLimit(&middleware.LimitOptions{
		Methods: map[string]middleware.Limit{
			"search": {Concurrent: 1},
			"status": {Rate: 1.0 / 60, Burst: 2},
		},
		Key:    middleware.ByConn,
		Logger: slog.New(slog.DiscardHandler),
	})
	started, release := make(chan struct{}), make(chan struct{})
	server := rpc.Methods{
		"search": func(context.Context, *rpc.Request) (any, error) {
			close(started)
			<-release
			return "found", nil
		},
		"status": func(context.Context, *rpc.Request) (any, error) { return "up", nil },
	}
	c, s := rpc.Pipe(server, nil, &rpc.Options{Middleware: []rpc.Middleware{lim.Middleware()}}, nil)
	defer s.Close()
	defer c.Close()
	ctx := context.Background()

	first := make(chan string)
	go func() {
		res, _ := c.Call(ctx, "search", nil)
		first <- string(res)
	}()
	<-started
	_, err := c.Call(ctx, "search", nil) // while the first runs
	var je *jsonrpc.Error
	if errors.As(err, &je) {
		fmt.Println(je.Code, je.Message, string(je.Data))
	}
	close(release)
	fmt.Println(<-first)

	for range 3 {
		res, err := c.Call(ctx, "status", nil)
		if errors.As(err, &je) {
			fmt.Println(je.Code, je.Message) // data adds the limit and retry_after_ms
			continue
		}
		fmt.Println(string(res))
	}
	fmt.Printf("%+v\n", lim.Stats().Inbound)
	// Output:
	// -32000 too many concurrent requests {"reason":"concurrency_limited","method":"search","limit":1}
	// "found"
	// "up"
	// "up"
	// -32000 rate limited
	// {RateLimited:1 ConcurrencyLimited:1 Dropped:0}
}

// Target reads what an MCP request names, for logs and metrics.
func ExampleTarget() {
	name, uri := middleware.Target("tools/call", []byte(`{"name":"search","arguments":{"query":"go"}}`))
	fmt.Printf("name %q uri %q\n", name, uri)
	name, uri = middleware.Target("resources/read", []byte(`{"uri":"file:///notes.txt"}`))
	fmt.Printf("name %q uri %q\n", name, uri)
	// Output:
	// name "search" uri ""
	// name "" uri "file:///notes.txt"
}
