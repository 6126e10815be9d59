package telemetry_test

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/agentwire/agentwire/rpc"
	"github.com/agentwire/agentwire/telemetry"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// countingIDs numbers traces and spans 1, 2, 3..., so that the examples
// print the same ids every time.
type countingIDs struct {
	mu   sync.Mutex
	n    uint64
	span uint64
}

func (g *countingIDs) NewIDs(ctx context.Context) (trace.TraceID, trace.SpanID) {
	g.mu.Lock()
	g.n++
	var tid trace.TraceID
	binary.BigEndian.PutUint64(tid[8:], g.n)
	g.mu.Unlock()
	return tid, g.NewSpanID(ctx, tid)
}

func (g *countingIDs) NewSpanID(context.Context, trace.TraceID) trace.SpanID {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.span++
	var sid trace.SpanID
	binary.BigEndian.PutUint64(sid[:], g.span)
	return sid
}

// A server and a client on one connection pair, each traced: the
// client's CLIENT span goes into the request's _meta, and the server's
// SERVER span is its child.
func ExampleServerMiddleware() {
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans), sdktrace.WithIDGenerator(&countingIDs{}))
	defer tp.Shutdown(context.Background())
	o := &telemetry.Options{TracerProvider: tp}

	tools := rpc.Methods{"tools/call": func(context.Context, *rpc.Request) (any, error) {
		return json.RawMessage(`{"content":[{"type":"text","text":"sunny"}]}`), nil
	}}
	cl, sv := rpc.Pipe(tools, nil,
		&rpc.Options{Middleware: []rpc.Middleware{telemetry.ServerMiddleware(o)}},
		&rpc.Options{Outbound: []rpc.OutboundMiddleware{telemetry.ClientMiddleware(o)}})
	defer sv.Close()
	defer cl.Close()

	cl.Call(context.Background(), "tools/call", map[string]any{"name": "forecast", "arguments": map[string]any{"city": "Lyon"}})
	for _, s := range spans.Ended() {
		fmt.Printf("%s %s span %s, parent %s\n", s.SpanKind(), s.Name(), s.SpanContext().SpanID(), s.Parent().SpanID())
	}
	// Output:
	// server tools/call forecast span 0000000000000002, parent 0000000000000001
	// client tools/call forecast span 0000000000000001, parent 0000000000000000
}

// Inject puts the trace context of a context into params._meta, byte for
// byte around it; Extract reads it back.
func ExampleInject() {
	tid, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	sid, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	ctx := trace.ContextWithSpanContext(context.Background(),
		trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled}))

	params, err := telemetry.Inject(ctx, json.RawMessage(`{"name":"get-weather", "_meta":{"progressToken":7}}`), nil)
	fmt.Println(string(params), err)
	fmt.Println(trace.SpanContextFromContext(telemetry.Extract(context.Background(), params, nil)).SpanID())
	// Output:
	// {"name":"get-weather", "_meta":{"progressToken":7,"traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}} <nil>
	// 00f067aa0ba902b7
}

// A relay between a host and a server (agentwire tap) traces each request
// that passes: the line goes on with the relay span in its _meta, and the
// response ends the span.
func ExampleRelay() {
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans), sdktrace.WithIDGenerator(&countingIDs{}))
	defer tp.Shutdown(context.Background())
	relay := telemetry.NewRelay(&telemetry.Options{TracerProvider: tp})
	defer relay.Close()

	fromHost := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","_meta":{"traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}}}`
	fmt.Println(string(relay.Message(telemetry.FromClient, []byte(fromHost))))
	relay.Message(telemetry.FromServer, []byte(`{"jsonrpc":"2.0","id":1,"result":{"content":[]}}`))
	s := spans.Ended()[0]
	fmt.Println(s.SpanKind(), s.Name(), "parent", s.Parent().SpanID(), "open", relay.Stats().Open)
	// Output:
	// {"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","_meta":{"traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000001-01"}}}
	// client tools/call echo parent 00f067aa0ba902b7 open 0
}
