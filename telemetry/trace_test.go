package telemetry_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"

	"github.com/agentwire/agentwire/jsonrpc"
	"github.com/agentwire/agentwire/mcp"
	"github.com/agentwire/agentwire/mcp/auth"
	"github.com/agentwire/agentwire/rpc"
	"github.com/agentwire/agentwire/telemetry"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
)

// recorder is an SDK TracerProvider that keeps every ended span in
// memory.
func recorder(t *testing.T) (*tracetest.SpanRecorder, *sdktrace.TracerProvider) {
	t.Helper()
	sr := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sr))
	t.Cleanup(func() { tp.Shutdown(context.Background()) })
	return sr, tp
}

func attrsOf(s sdktrace.ReadOnlySpan) map[attribute.Key]string {
	m := map[attribute.Key]string{}
	for _, kv := range s.Attributes() {
		m[kv.Key] = kv.Value.Emit()
	}
	return m
}

// wantAttrs checks that s carries want (key: value), and none of absent.
func wantAttrs(t *testing.T, s sdktrace.ReadOnlySpan, want map[attribute.Key]string, absent ...attribute.Key) {
	t.Helper()
	got := attrsOf(s)
	for k, v := range want {
		if got[k] != v {
			t.Errorf("span %q: %s = %q, want %q (all: %v)", s.Name(), k, got[k], v, got)
		}
	}
	for _, k := range absent {
		if v, ok := got[k]; ok {
			t.Errorf("span %q: %s = %q, want none", s.Name(), k, v)
		}
	}
}

func onlySpan(t *testing.T, sr *tracetest.SpanRecorder) sdktrace.ReadOnlySpan {
	t.Helper()
	spans := sr.Ended()
	if len(spans) != 1 {
		t.Fatalf("%d spans ended, want 1: %v", len(spans), names(spans))
	}
	return spans[0]
}

func names(spans []sdktrace.ReadOnlySpan) []string {
	var out []string
	for _, s := range spans {
		out = append(out, s.Name()+"/"+s.SpanKind().String())
	}
	return out
}

// wire serves h on a connection fed raw lines: send writes one, recv
// reads the next line the connection writes.
type wire struct {
	in   *io.PipeWriter
	out  *bufio.Reader
	conn *rpc.Conn
}

func newWire(t *testing.T, h rpc.Handler, o *rpc.Options) *wire {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	var opts rpc.Options
	if o != nil {
		opts = *o
	}
	opts.Logger = quiet
	w := &wire{in: inW, out: bufio.NewReader(outR)}
	w.conn = rpc.New(inR, outW, h, &opts)
	t.Cleanup(func() {
		inW.Close()
		go io.Copy(io.Discard, outR)
		w.conn.Wait()
	})
	return w
}

func (w *wire) send(t *testing.T, line string) {
	t.Helper()
	if _, err := io.WriteString(w.in, line+"\n"); err != nil {
		t.Fatal(err)
	}
}

func (w *wire) recv(t *testing.T) string {
	t.Helper()
	line, err := w.out.ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSuffix(line, "\n")
}

const (
	hostTrace  = "4bf92f3577b34da6a3ce929d0e0e4736"
	hostSpan   = "00f067aa0ba902b7"
	hostParent = "00-" + hostTrace + "-" + hostSpan + "-01"
)

// tools answers tools/call with an encoded result (isError when the tool
// is "broken"), prompts/get, and an unknown method with -32601.
func tools(inner func(ctx context.Context)) rpc.Handler {
	return rpc.HandlerFunc(func(ctx context.Context, r *rpc.Request) (any, error) {
		if inner != nil {
			inner(ctx)
		}
		switch r.Method {
		case "tools/call":
			var p struct{ Name string }
			json.Unmarshal(r.Params, &p)
			res := &mcp.ToolResult{Content: []mcp.Content{{Type: "text", Text: "ok"}}, IsError: p.Name == "broken"}
			e := jsonrpc.Encoded(res.AppendJSON(nil, nil))
			return &e, nil
		case "prompts/get", "resources/read", "ping", "notifications/initialized":
			return map[string]any{}, nil
		case "initialize":
			return map[string]any{"protocolVersion": "2025-06-18", "capabilities": map[string]any{}}, nil
		case "tools/list":
			return json.RawMessage(`{"tools":[]}`), nil
		case "fail":
			return nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "invalid params: no")
		case "boom":
			return nil, errors.New("something broke")
		case "panic":
			panic("handler panic")
		}
		return nil, jsonrpc.Errorf(jsonrpc.CodeMethodNotFound, "method not found: %s", r.Method)
	})
}

// A tools/call from the wire, with trace context in _meta, is one SERVER
// span named "tools/call {tool}", a child of the remote span, attributed
// per the MCP conventions; the handler's context holds it.
func TestServerSpanToolCall(t *testing.T) {
	sr, tp := recorder(t)
	var inner trace.SpanContext
	w := newWire(t, tools(func(ctx context.Context) { inner = trace.SpanContextFromContext(ctx) }),
		&rpc.Options{Middleware: []rpc.Middleware{telemetry.ServerMiddleware(&telemetry.Options{TracerProvider: tp})}})
	w.send(t, `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"},"_meta":{"traceparent":"`+hostParent+`","tracestate":"rojo=00f067aa0ba902b7","io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`)
	if got := w.recv(t); !strings.Contains(got, `"id":7,"result"`) {
		t.Fatalf("response %s", got)
	}
	s := onlySpan(t, sr)
	if s.Name() != "tools/call echo" || s.SpanKind() != trace.SpanKindServer {
		t.Errorf("span %q %v", s.Name(), s.SpanKind())
	}
	if s.Parent().TraceID().String() != hostTrace || s.Parent().SpanID().String() != hostSpan || !s.Parent().IsRemote() {
		t.Errorf("parent %v", s.Parent())
	}
	if s.SpanContext().TraceID().String() != hostTrace {
		t.Errorf("trace %v", s.SpanContext().TraceID())
	}
	if s.SpanContext().TraceState().Get("rojo") != "00f067aa0ba902b7" {
		t.Errorf("tracestate %v", s.SpanContext().TraceState())
	}
	if !inner.Equal(s.SpanContext()) {
		t.Errorf("handler's context holds %v, not the span %v", inner, s.SpanContext())
	}
	wantAttrs(t, s, map[attribute.Key]string{
		"mcp.method.name":       "tools/call",
		"jsonrpc.request.id":    "7",
		"gen_ai.tool.name":      "echo",
		"gen_ai.operation.name": "execute_tool",
		"mcp.protocol.version":  "2026-07-28",
		"agentwire.mcp.era":     "modern",
		"network.transport":     "pipe",
	}, "error.type", "rpc.response.status_code", "jsonrpc.protocol.version", "rpc.system.name", "network.protocol.name")
	if s.Status().Code != codes.Unset {
		t.Errorf("status %v", s.Status())
	}
}

// The outcomes: a tool's isError result is error.type tool_error; a
// JSON-RPC error sets the status and records its code; any other error is
// the -32603 rpc answers; a panic too; an unknown method -32601.
func TestServerSpanOutcomes(t *testing.T) {
	sr, tp := recorder(t)
	w := newWire(t, tools(nil), &rpc.Options{Middleware: []rpc.Middleware{telemetry.ServerMiddleware(&telemetry.Options{TracerProvider: tp})}})
	for _, c := range []struct {
		line, name, errType, code, desc string
	}{
		{`{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"broken"}}`, "tools/call broken", "tool_error", "", "tool_error"},
		{`{"jsonrpc":"2.0","id":"b","method":"fail","params":{}}`, "fail", "-32602", "-32602", "invalid params: no"},
		{`{"jsonrpc":"2.0","id":"c","method":"boom"}`, "boom", "-32603", "-32603", "something broke"},
		{`{"jsonrpc":"2.0","id":"d","method":"panic"}`, "panic", "-32603", "-32603", "panic"},
		{`{"jsonrpc":"2.0","id":"e","method":"nope"}`, "nope", "-32601", "-32601", "method not found: nope"},
	} {
		w.send(t, c.line)
		w.recv(t)
		spans := sr.Ended()
		s := spans[len(spans)-1]
		if s.Name() != c.name {
			t.Errorf("span %q, want %q", s.Name(), c.name)
		}
		want := map[attribute.Key]string{"error.type": c.errType}
		var absent []attribute.Key
		if c.code != "" {
			want["rpc.response.status_code"] = c.code
		} else {
			absent = append(absent, "rpc.response.status_code")
		}
		wantAttrs(t, s, want, absent...)
		if s.Status().Code != codes.Error || s.Status().Description != c.desc {
			t.Errorf("%s: status %v", c.name, s.Status())
		}
		// jsonrpc.request.id is a string id's contents.
		if id := attrsOf(s)["jsonrpc.request.id"]; len(id) != 1 {
			t.Errorf("%s: jsonrpc.request.id %q", c.name, id)
		}
	}
}

// A legacy connection: the version initialize agreed is the
// mcp.protocol.version of the requests after it, whose era is legacy; a
// prompt's name is the span's target and a resource's URI an attribute
// (never the span name); a notification is a span too, without an id.
func TestServerSpanLegacyConnection(t *testing.T) {
	sr, tp := recorder(t)
	w := newWire(t, tools(nil), &rpc.Options{Middleware: []rpc.Middleware{telemetry.ServerMiddleware(&telemetry.Options{TracerProvider: tp})}})
	w.send(t, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}`)
	w.recv(t)
	w.send(t, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	w.send(t, `{"jsonrpc":"2.0","id":2,"method":"prompts/get","params":{"name":"summarize"}}`)
	w.recv(t)
	w.send(t, `{"jsonrpc":"2.0","id":3,"method":"resources/read","params":{"uri":"file:///a.txt"}}`)
	w.recv(t)
	spans := sr.Ended()
	if len(spans) != 4 {
		t.Fatalf("spans %v", names(spans))
	}
	wantAttrs(t, spans[0], map[attribute.Key]string{"mcp.method.name": "initialize", "mcp.protocol.version": "2025-06-18", "agentwire.mcp.era": "legacy", "jsonrpc.request.id": "1"})
	if spans[1].Name() != "notifications/initialized" || spans[1].SpanKind() != trace.SpanKindServer {
		t.Errorf("notification span %q %v", spans[1].Name(), spans[1].SpanKind())
	}
	wantAttrs(t, spans[1], map[attribute.Key]string{"mcp.method.name": "notifications/initialized"}, "jsonrpc.request.id")
	if spans[2].Name() != "prompts/get summarize" {
		t.Errorf("prompt span %q", spans[2].Name())
	}
	wantAttrs(t, spans[2], map[attribute.Key]string{"gen_ai.prompt.name": "summarize", "mcp.protocol.version": "2025-06-18", "agentwire.mcp.era": "legacy"}, "gen_ai.operation.name", "gen_ai.tool.name")
	if spans[3].Name() != "resources/read" {
		t.Errorf("resource span %q", spans[3].Name())
	}
	wantAttrs(t, spans[3], map[attribute.Key]string{"mcp.resource.uri": "file:///a.txt"})
	for _, s := range spans {
		if s.Parent().IsValid() {
			t.Errorf("%s has a parent %v without trace context", s.Name(), s.Parent())
		}
	}
}

// ACP and plain JSON-RPC follow the RPC conventions: span name = method,
// rpc.system.name "jsonrpc" (given at creation), rpc.method,
// jsonrpc.protocol.version "2.0"; ACP adds the session. Plain JSON-RPC
// defines no method: the application lists its own (Options.Methods).
func TestServerSpanRPCConventions(t *testing.T) {
	for _, p := range []telemetry.Protocol{telemetry.ACP, telemetry.JSONRPC} {
		t.Run(p.String(), func(t *testing.T) {
			sr, tp := recorder(t)
			o := &telemetry.Options{TracerProvider: tp, Protocol: p, Transport: telemetry.Unix}
			if p == telemetry.JSONRPC {
				o.Methods = []string{"session/prompt"}
			}
			w := newWire(t, rpc.HandlerFunc(func(context.Context, *rpc.Request) (any, error) { return map[string]any{}, nil }),
				&rpc.Options{Middleware: []rpc.Middleware{telemetry.ServerMiddleware(o)}})
			w.send(t, `{"jsonrpc":"2.0","id":5,"method":"session/prompt","params":{"sessionId":"sess-1","prompt":[],"_meta":{"traceparent":"`+hostParent+`"}}}`)
			w.recv(t)
			s := onlySpan(t, sr)
			if s.Name() != "session/prompt" || s.Parent().SpanID().String() != hostSpan {
				t.Errorf("span %q parent %v", s.Name(), s.Parent())
			}
			want := map[attribute.Key]string{"rpc.system.name": "jsonrpc", "rpc.method": "session/prompt",
				"jsonrpc.protocol.version": "2.0", "jsonrpc.request.id": "5", "network.transport": "unix"}
			absent := []attribute.Key{"mcp.method.name", "agentwire.mcp.era"}
			if p == telemetry.ACP {
				want["agentwire.acp.session.id"] = "sess-1"
			} else {
				absent = append(absent, "agentwire.acp.session.id")
			}
			wantAttrs(t, s, want, absent...)
		})
	}
}

// A verified identity in the handler's context (a protected HTTP
// endpoint's) is agentwire.client.owner; an ambient span (an HTTP server
// span) is linked when _meta gives the parent, as the MCP conventions
// ask. The middleware is called directly here, with such a context.
func TestServerSpanIdentityAndAmbientLink(t *testing.T) {
	sr, tp := recorder(t)
	h := telemetry.ServerMiddleware(&telemetry.Options{TracerProvider: tp, HTTP: true, Transport: telemetry.TCP})(tools(nil))
	ctx := auth.WithIdentity(context.Background(), &auth.Identity{Issuer: "https://as.example", Subject: "alice"})
	ambient := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1}, SpanID: trace.SpanID{2}, TraceFlags: trace.FlagsSampled})
	ctx = trace.ContextWithSpanContext(ctx, ambient)
	_, err := h.Handle(ctx, &rpc.Request{ID: `"x"`, Method: "ping", Params: json.RawMessage(`{"_meta":{"traceparent":"` + hostParent + `"}}`)})
	if err != nil {
		t.Fatal(err)
	}
	s := onlySpan(t, sr)
	wantAttrs(t, s, map[attribute.Key]string{"agentwire.client.owner": "https://as.example alice",
		"jsonrpc.request.id": "x", "network.protocol.name": "http", "network.transport": "tcp"})
	if s.Parent().SpanID().String() != hostSpan {
		t.Errorf("parent %v", s.Parent())
	}
	if l := s.Links(); len(l) != 1 || l[0].SpanContext.SpanID() != ambient.SpanID() {
		t.Errorf("links %v", l)
	}
	// Without _meta the ambient span is the parent, and nothing is linked.
	if _, err := h.Handle(ctx, &rpc.Request{ID: "1", Method: "ping"}); err != nil {
		t.Fatal(err)
	}
	s = sr.Ended()[1]
	if s.Parent().SpanID() != ambient.SpanID() || len(s.Links()) != 0 {
		t.Errorf("parent %v links %v", s.Parent(), s.Links())
	}
}

// The client side: a CLIENT span per call, its trace context in the
// params' _meta (replacing what was there), the request id once sent, the
// peer's error by its code; the server's span is its child.
func TestClientSpanInjects(t *testing.T) {
	sr, tp := recorder(t)
	var seen json.RawMessage
	var mu sync.Mutex
	srv := rpc.HandlerFunc(func(ctx context.Context, r *rpc.Request) (any, error) {
		if r.Method == "tools/call" {
			mu.Lock()
			seen = append(json.RawMessage(nil), r.Params...)
			mu.Unlock()
		}
		return tools(nil).Handle(ctx, r)
	})
	o := &telemetry.Options{TracerProvider: tp, ServerAddress: "example.com", ServerPort: 443}
	cl, sv := rpc.Pipe(srv, nil,
		&rpc.Options{Logger: quiet, Middleware: []rpc.Middleware{telemetry.ServerMiddleware(&telemetry.Options{TracerProvider: tp})}},
		&rpc.Options{Logger: quiet, Outbound: []rpc.OutboundMiddleware{telemetry.ClientMiddleware(o)}})
	defer func() { cl.Close(); sv.Close(); cl.Wait(); sv.Wait() }()

	ctx, root := tp.Tracer("test").Start(context.Background(), "root")
	params := map[string]any{"name": "echo", "arguments": map[string]any{"text": "x"},
		"_meta": map[string]any{"traceparent": hostParent, "progressToken": 3, "io.modelcontextprotocol/protocolVersion": "2026-07-28"}}
	if _, err := cl.Call(ctx, "tools/call", params); err != nil {
		t.Fatal(err)
	}
	_, err := cl.Call(ctx, "fail", nil)
	var je *jsonrpc.Error
	if !errors.As(err, &je) {
		t.Fatalf("error %v", err)
	}
	root.End()
	spans := sr.Ended()
	if len(spans) != 5 {
		t.Fatalf("spans %v", names(spans))
	}
	srvSpan, cliSpan := spans[0], spans[1]
	if cliSpan.Name() != "tools/call echo" || cliSpan.SpanKind() != trace.SpanKindClient {
		t.Errorf("client span %q %v", cliSpan.Name(), cliSpan.SpanKind())
	}
	if cliSpan.Parent().SpanID() != root.SpanContext().SpanID() {
		t.Errorf("client span's parent %v, want the caller's span", cliSpan.Parent())
	}
	if srvSpan.Parent().SpanID() != cliSpan.SpanContext().SpanID() || srvSpan.SpanContext().TraceID() != root.SpanContext().TraceID() {
		t.Errorf("server span's parent %v, want the client span %v", srvSpan.Parent(), cliSpan.SpanContext())
	}
	wantAttrs(t, cliSpan, map[attribute.Key]string{"mcp.method.name": "tools/call", "gen_ai.tool.name": "echo",
		"jsonrpc.request.id": "1", "server.address": "example.com", "server.port": "443", "agentwire.mcp.era": "modern",
		"mcp.protocol.version": "2026-07-28", "network.transport": "pipe"})
	var p struct {
		Meta map[string]json.RawMessage `json:"_meta"`
	}
	mu.Lock()
	json.Unmarshal(seen, &p)
	mu.Unlock()
	want := `"00-` + cliSpan.SpanContext().TraceID().String() + `-` + cliSpan.SpanContext().SpanID().String() + `-01"`
	if string(p.Meta["traceparent"]) != want || string(p.Meta["progressToken"]) != "3" {
		t.Errorf("the server saw _meta %v, want traceparent %s and the rest kept", p.Meta, want)
	}
	failSpan := spans[3]
	wantAttrs(t, failSpan, map[attribute.Key]string{"error.type": "-32602", "rpc.response.status_code": "-32602", "jsonrpc.request.id": "2"})
	if failSpan.Status().Code != codes.Error || failSpan.Status().Description != "invalid params: no" {
		t.Errorf("status %v", failSpan.Status())
	}
}

// A call whose context ends first is error.type cancelled (timeout for a
// deadline); a notification is a CLIENT span without an id and gets _meta
// too; plain JSON-RPC params are left alone.
func TestClientSpanCancelledNotifyAndJSONRPC(t *testing.T) {
	sr, tp := recorder(t)
	release := make(chan struct{})
	got := make(chan json.RawMessage, 4)
	srv := rpc.HandlerFunc(func(ctx context.Context, r *rpc.Request) (any, error) {
		got <- append(json.RawMessage(nil), r.Params...)
		if r.Method == "slow" {
			select {
			case <-release:
			case <-ctx.Done():
			}
		}
		return "ok", nil
	})
	for _, p := range []telemetry.Protocol{telemetry.MCP, telemetry.JSONRPC} {
		cl, sv := rpc.Pipe(srv, nil, &rpc.Options{Logger: quiet},
			&rpc.Options{Logger: quiet, Outbound: []rpc.OutboundMiddleware{telemetry.ClientMiddleware(&telemetry.Options{TracerProvider: tp, Protocol: p,
				Methods: []string{"slow", "notifications/initialized"}})}}) // JSON-RPC knows no method of its own
		ctx, cancel := context.WithCancel(context.Background())
		go func() { <-got; cancel() }()
		if _, err := cl.Call(ctx, "slow", map[string]any{"a": 1}); !errors.Is(err, context.Canceled) {
			t.Fatalf("error %v", err)
		}
		if err := cl.Notify(context.Background(), "notifications/initialized", nil); err != nil {
			t.Fatal(err)
		}
		params := <-got
		if p == telemetry.MCP && !strings.Contains(string(params), `{"_meta":{"traceparent":"00-`) {
			t.Errorf("MCP notification params %s", params)
		}
		if p == telemetry.JSONRPC && len(params) != 0 {
			t.Errorf("JSON-RPC notification params %s: nothing should be added", params)
		}
		cl.Close()
		sv.Close()
		cl.Wait()
		sv.Wait()
	}
	var slow, note []sdktrace.ReadOnlySpan
	for _, s := range sr.Ended() {
		switch s.Name() {
		case "slow":
			slow = append(slow, s)
		case "notifications/initialized":
			note = append(note, s)
		}
	}
	if len(slow) != 2 || len(note) != 2 {
		t.Fatalf("spans %v", names(sr.Ended()))
	}
	for _, s := range slow {
		wantAttrs(t, s, map[attribute.Key]string{"error.type": "cancelled"}, "rpc.response.status_code")
		if s.Status().Code != codes.Error {
			t.Errorf("status %v", s.Status())
		}
	}
	for _, s := range note {
		wantAttrs(t, s, nil, "jsonrpc.request.id", "error.type")
	}
	wantAttrs(t, slow[1], map[attribute.Key]string{"rpc.system.name": "jsonrpc", "rpc.method": "slow"})
}

// With the no-op TracerProvider (tracing off here) nothing is started,
// and trace context passes through: the handler's context carries the
// remote span context of _meta, so the calls it makes carry it on.
func TestNoopProviderPassesTraceContextThrough(t *testing.T) {
	var seen trace.SpanContext
	h := telemetry.ServerMiddleware(&telemetry.Options{TracerProvider: tracenoop.NewTracerProvider()})(
		rpc.HandlerFunc(func(ctx context.Context, _ *rpc.Request) (any, error) {
			seen = trace.SpanContextFromContext(ctx)
			return nil, nil
		}))
	h.Handle(context.Background(), &rpc.Request{ID: "1", Method: "ping", Params: json.RawMessage(`{"_meta":{"traceparent":"` + hostParent + `"}}`)})
	if seen.SpanID().String() != hostSpan || !seen.IsRemote() {
		t.Errorf("handler saw %v, want the remote parent", seen)
	}
	// And a client on the no-op provider injects that context as it is.
	var out json.RawMessage
	inv := telemetry.ClientMiddleware(&telemetry.Options{TracerProvider: tracenoop.NewTracerProvider()})(
		func(_ context.Context, c *rpc.OutboundCall) (json.RawMessage, error) {
			out = c.Params.(json.RawMessage)
			return nil, nil
		})
	inv(trace.ContextWithRemoteSpanContext(context.Background(), seen), &rpc.OutboundCall{Method: "ping"})
	if string(out) != `{"_meta":{"traceparent":"`+hostParent+`"}}` {
		t.Errorf("params %s", out)
	}
}

// With Options.Sampler dropping every root, a request with no trace
// context starts no span (the handler's context has none); one with a
// parent still gets a span from the provider (its decision may follow the
// parent).
func TestDroppingSamplerSkipsRoots(t *testing.T) {
	sr := tracetest.NewSpanRecorder()
	pb := sdktrace.ParentBased(sdktrace.NeverSample())
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(pb), sdktrace.WithSpanProcessor(sr))
	defer tp.Shutdown(context.Background())
	var seen trace.SpanContext
	h := telemetry.ServerMiddleware(&telemetry.Options{TracerProvider: tp, Sampler: pb})(
		rpc.HandlerFunc(func(ctx context.Context, _ *rpc.Request) (any, error) {
			seen = trace.SpanContextFromContext(ctx)
			return nil, nil
		}))
	h.Handle(context.Background(), &rpc.Request{ID: "1", Method: "ping"})
	if seen.IsValid() {
		t.Errorf("a root request got span context %v", seen)
	}
	h.Handle(context.Background(), &rpc.Request{ID: "2", Method: "ping", Params: json.RawMessage(`{"_meta":{"traceparent":"` + hostParent + `"}}`)})
	if seen.TraceID().String() != hostTrace || seen.SpanID().String() == hostSpan || !seen.IsSampled() {
		t.Errorf("a request with a sampled parent got %v, want a sampled child", seen)
	}
	if len(sr.Ended()) != 1 {
		t.Errorf("spans %v", names(sr.Ended()))
	}
}

// ended is a span processor that records ended spans and says when one
// ends.
type ended struct {
	*tracetest.SpanRecorder
	names chan string
}

func (e *ended) OnEnd(s sdktrace.ReadOnlySpan) {
	e.SpanRecorder.OnEnd(s)
	e.names <- s.Name()
}

func endedRecorder(t *testing.T) (*ended, *sdktrace.TracerProvider) {
	e := &ended{SpanRecorder: tracetest.NewSpanRecorder(), names: make(chan string, 64)}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(e))
	t.Cleanup(func() { tp.Shutdown(context.Background()) })
	return e, tp
}

// waitSpan waits until a span of that name has ended.
func (e *ended) waitSpan(t *testing.T, name string) sdktrace.ReadOnlySpan {
	t.Helper()
	for n := range e.names {
		if n == name {
			spans := e.Ended()
			for i := len(spans) - 1; i >= 0; i-- {
				if spans[i].Name() == name {
					return spans[i]
				}
			}
		}
	}
	t.Fatalf("no span %q", name)
	return nil
}

// A handler that runs long is one span from its start to its end, and a
// cancellation by the peer (notifications/cancelled) ends it as
// cancelled.
func TestServerSpanCancelledByPeer(t *testing.T) {
	e, tp := endedRecorder(t)
	started := make(chan struct{})
	w := newWire(t, rpc.HandlerFunc(func(ctx context.Context, _ *rpc.Request) (any, error) {
		close(started)
		<-ctx.Done()
		return nil, ctx.Err()
	}), &rpc.Options{Middleware: []rpc.Middleware{telemetry.ServerMiddleware(&telemetry.Options{TracerProvider: tp})}})
	w.send(t, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"slow"}}`)
	<-started
	w.send(t, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}`)
	s := e.waitSpan(t, "tools/call slow")
	wantAttrs(t, s, map[attribute.Key]string{"error.type": "cancelled"}, "rpc.response.status_code")
	if s.Status().Code != codes.Error {
		t.Errorf("status %v", s.Status())
	}
}

// The keys named here are the semantic conventions' (as the Go semconv
// package spells them).
func TestKeysAreTheConventions(t *testing.T) {
	for ours, theirs := range map[attribute.Key]attribute.Key{
		telemetry.KeyMCPMethodName:          semconv.McpMethodNameKey,
		telemetry.KeyMCPProtocolVersion:     semconv.McpProtocolVersionKey,
		telemetry.KeyMCPSessionID:           semconv.McpSessionIDKey,
		telemetry.KeyMCPResourceURI:         semconv.McpResourceURIKey,
		telemetry.KeyJSONRPCRequestID:       semconv.JSONRPCRequestIDKey,
		telemetry.KeyJSONRPCProtocolVersion: semconv.JSONRPCProtocolVersionKey,
		telemetry.KeyGenAIToolName:          semconv.GenAIToolNameKey,
		telemetry.KeyGenAIPromptName:        semconv.GenAIPromptNameKey,
		telemetry.KeyGenAIOperationName:     semconv.GenAIOperationNameKey,
		telemetry.KeyErrorType:              semconv.ErrorTypeKey,
		telemetry.KeyRPCResponseStatusCode:  semconv.RPCResponseStatusCodeKey,
		telemetry.KeyRPCSystemName:          semconv.RPCSystemNameKey,
		telemetry.KeyRPCMethod:              semconv.RPCMethodKey,
		telemetry.KeyNetworkTransport:       semconv.NetworkTransportKey,
		telemetry.KeyNetworkProtocolName:    semconv.NetworkProtocolNameKey,
		telemetry.KeyNetworkProtocolVersion: semconv.NetworkProtocolVersionKey,
		telemetry.KeyServerAddress:          semconv.ServerAddressKey,
		telemetry.KeyServerPort:             semconv.ServerPortKey,
	} {
		if ours != theirs {
			t.Errorf("%s is %s in the conventions", ours, theirs)
		}
	}
	if string(semconv.NetworkTransportPipe.Value.AsString()) != string(telemetry.Pipe) ||
		semconv.NetworkTransportTCP.Value.AsString() != string(telemetry.TCP) ||
		semconv.NetworkTransportUnix.Value.AsString() != string(telemetry.Unix) {
		t.Error("transport values differ from the conventions'")
	}
}

// A propagator of the caller's choice reads and writes its own keys.
func TestCustomPropagator(t *testing.T) {
	sr, tp := recorder(t)
	h := telemetry.ServerMiddleware(&telemetry.Options{TracerProvider: tp, Propagator: propagation.TraceContext{}})(tools(nil))
	h.Handle(context.Background(), &rpc.Request{ID: "1", Method: "ping", Params: json.RawMessage(`{"_meta":{"traceparent":"` + hostParent + `","baggage":"k=v"}}`)})
	if s := onlySpan(t, sr); s.Parent().SpanID().String() != hostSpan {
		t.Errorf("parent %v", s.Parent())
	}
}
