package telemetry_test

import (
	"context"
	"io"
	"net/http/httptest"
	"testing"

	"github.com/agentwire/agentwire/client"
	"github.com/agentwire/agentwire/mcp"
	"github.com/agentwire/agentwire/mcp/bridge"
	"github.com/agentwire/agentwire/mcp/host"
	"github.com/agentwire/agentwire/mcp/server"
	"github.com/agentwire/agentwire/mcp/streamable"
	"github.com/agentwire/agentwire/rpc"
	"github.com/agentwire/agentwire/telemetry"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/goleak"
)

// providers gives each "process" of the chain a TracerProvider of its
// own (service.name tells their spans apart), all recording into sr.
func provider(t *testing.T, sr *tracetest.SpanRecorder, service string) *sdktrace.TracerProvider {
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sr),
		sdktrace.WithResource(resource.NewSchemaless(attribute.String("service.name", service))))
	t.Cleanup(func() { tp.Shutdown(context.Background()) })
	return tp
}

func serviceOf(s sdktrace.ReadOnlySpan) string {
	v, _ := s.Resource().Set().Value("service.name")
	return v.AsString()
}

// One tools/call from a host through a bridge (behind Streamable HTTP) to
// an MCP server on a pipe is one trace: host CLIENT -> bridge SERVER ->
// bridge CLIENT -> server SERVER, each named "tools/call echo" and
// attributed for its hop (HTTP at the bridge's front, a pipe behind it).
func TestChainHostBridgeServer(t *testing.T) {
	defer goleak.VerifyNone(t)
	sr := tracetest.NewSpanRecorder()
	hostTP, bridgeTP, serverTP := provider(t, sr, "host"), provider(t, sr, "bridge"), provider(t, sr, "server")
	ctx := context.Background()

	// The MCP server, on a pipe, traced.
	s := server.New(mcp.Implementation{Name: "srv", Version: "1"}, nil)
	s.AddTool(mcp.Tool{Name: "echo"}, func(_ context.Context, req *server.ToolRequest) (*mcp.ToolResult, error) {
		return mcp.TextResult(string(req.Arguments)), nil
	})
	toServer, clientOut := io.Pipe()
	clientIn, fromServer := io.Pipe()
	conn := rpc.New(toServer, fromServer, s.Handler(), s.ConnOptions(&rpc.Options{Logger: quiet,
		Middleware: []rpc.Middleware{telemetry.ServerMiddleware(&telemetry.Options{TracerProvider: serverTP})}}))

	// The bridge: its session to the server traces what it sends, its
	// HTTP endpoint what it serves.
	upstream, err := host.NewClient(ctx, clientIn, clientOut, &host.Options{Transport: &client.Options{Logger: quiet,
		Outbound: []rpc.OutboundMiddleware{telemetry.ClientMiddleware(&telemetry.Options{TracerProvider: bridgeTP})}}})
	if err != nil {
		t.Fatal(err)
	}
	h := streamable.NewHandler(bridge.New(upstream), &streamable.Options{Logger: quiet, Conn: &rpc.Options{
		Middleware: []rpc.Middleware{telemetry.ServerMiddleware(&telemetry.Options{TracerProvider: bridgeTP, HTTP: true, Transport: telemetry.TCP})}}})
	web := httptest.NewServer(h)

	// The host, over Streamable HTTP, its calls traced as they are sent.
	sess, err := streamable.Connect(ctx, web.URL+"/mcp", &host.Options{Eras: mcp.ModernOnly, Transport: &client.Options{
		Outbound: []rpc.OutboundMiddleware{telemetry.ClientMiddleware(&telemetry.Options{TracerProvider: hostTP,
			HTTP: true, Transport: telemetry.TCP, ServerAddress: "127.0.0.1"})}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	r, err := sess.CallTool(ctx, "echo", map[string]any{"text": "hi"})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Content) != 1 || r.Content[0].Text != `{"text":"hi"}` {
		t.Fatalf("result %+v", r)
	}

	sess.Close()
	h.Shutdown(ctx)
	web.Close()
	upstream.Close()
	conn.Wait()

	hop := map[string]sdktrace.ReadOnlySpan{}
	for _, sp := range sr.Ended() {
		if sp.Name() == "tools/call echo" {
			key := serviceOf(sp) + " " + sp.SpanKind().String()
			if hop[key] != nil {
				t.Errorf("two %s spans", key)
			}
			hop[key] = sp
		}
	}
	hostC, bridgeS, bridgeC, serverS := hop["host client"], hop["bridge server"], hop["bridge client"], hop["server server"]
	if hostC == nil || bridgeS == nil || bridgeC == nil || serverS == nil {
		t.Fatalf("hops %v of spans %v", hop, names(sr.Ended()))
	}
	tid := hostC.SpanContext().TraceID()
	for _, sp := range []sdktrace.ReadOnlySpan{bridgeS, bridgeC, serverS} {
		if sp.SpanContext().TraceID() != tid {
			t.Errorf("%s %s is in trace %v, not %v", serviceOf(sp), sp.SpanKind(), sp.SpanContext().TraceID(), tid)
		}
	}
	for _, link := range []struct{ child, parent sdktrace.ReadOnlySpan }{{bridgeS, hostC}, {bridgeC, bridgeS}, {serverS, bridgeC}} {
		if link.child.Parent().SpanID() != link.parent.SpanContext().SpanID() {
			t.Errorf("%s %s's parent is %v, want %s %s (%v)", serviceOf(link.child), link.child.SpanKind(), link.child.Parent().SpanID(),
				serviceOf(link.parent), link.parent.SpanKind(), link.parent.SpanContext().SpanID())
		}
	}
	if !bridgeS.Parent().IsRemote() || !serverS.Parent().IsRemote() || bridgeC.Parent().IsRemote() {
		t.Error("remote parents are the other processes' spans, the bridge's client span's is local")
	}
	common := map[attribute.Key]string{"mcp.method.name": "tools/call", "gen_ai.tool.name": "echo",
		"gen_ai.operation.name": "execute_tool", "agentwire.mcp.era": "modern", "mcp.protocol.version": mcp.LatestVersion}
	with := func(extra map[attribute.Key]string) map[attribute.Key]string {
		m := map[attribute.Key]string{}
		for k, v := range common {
			m[k] = v
		}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	wantAttrs(t, hostC, with(map[attribute.Key]string{"network.transport": "tcp", "network.protocol.name": "http", "server.address": "127.0.0.1"}), "error.type")
	wantAttrs(t, bridgeS, with(map[attribute.Key]string{"network.transport": "tcp", "network.protocol.name": "http"}), "error.type")
	wantAttrs(t, bridgeC, with(map[attribute.Key]string{"network.transport": "pipe"}), "network.protocol.name", "error.type")
	wantAttrs(t, serverS, with(map[attribute.Key]string{"network.transport": "pipe"}), "network.protocol.name", "error.type")
	for _, sp := range []sdktrace.ReadOnlySpan{hostC, bridgeS, bridgeC, serverS} {
		if attrsOf(sp)["jsonrpc.request.id"] == "" {
			t.Errorf("%s %s has no jsonrpc.request.id", serviceOf(sp), sp.SpanKind())
		}
	}
	if bridgeS.SpanKind() != trace.SpanKindServer || bridgeC.SpanKind() != trace.SpanKindClient {
		t.Error("kinds")
	}
}
