package telemetry_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/agentwire/agentwire/jsonrpc"
	"github.com/agentwire/agentwire/rpc"
	"github.com/agentwire/agentwire/telemetry"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/semconv/v1.41.0/mcpconv"
	"go.opentelemetry.io/otel/semconv/v1.41.0/rpcconv"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
)

func collect(t *testing.T, r *sdkmetric.ManualReader) map[string]metricdata.Metrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string]metricdata.Metrics{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			out[m.Name] = m
		}
	}
	return out
}

func setOf(kv map[string]string) attribute.Set {
	var attrs []attribute.KeyValue
	for k, v := range kv {
		attrs = append(attrs, attribute.String(k, v))
	}
	return attribute.NewSet(attrs...)
}

// The operation-duration histograms carry the conventions'
// low-cardinality attributes and buckets; a method the registry did not
// know is _OTHER, and the tool of a refused call is left out; the
// requests in flight return to zero. Metrics are taken with tracing off.
func TestOperationDurationMetrics(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(context.Background())
	o := &telemetry.Options{MeterProvider: mp, TracerProvider: tracenoop.NewTracerProvider()}
	refuse := rpc.HandlerFunc(func(ctx context.Context, r *rpc.Request) (any, error) {
		if r.Method == "tools/call" && string(r.Params) == `{"name":"nosuch"}` {
			return nil, jsonrpcInvalid()
		}
		return tools(nil).Handle(ctx, r)
	})
	cl, sv := rpc.Pipe(refuse, nil,
		&rpc.Options{Logger: quiet, Middleware: []rpc.Middleware{telemetry.ServerMiddleware(o)}},
		&rpc.Options{Logger: quiet, Outbound: []rpc.OutboundMiddleware{telemetry.ClientMiddleware(o)}})
	defer func() { cl.Close(); sv.Close(); cl.Wait(); sv.Wait() }()
	ctx := context.Background()
	cl.Call(ctx, "tools/call", json.RawMessage(`{"name":"echo","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}`))
	cl.Call(ctx, "tools/call", json.RawMessage(`{"name":"broken"}`))
	cl.Call(ctx, "tools/call", json.RawMessage(`{"name":"nosuch"}`))
	cl.Call(ctx, "random/method-1234", nil)

	ms := collect(t, reader)
	srv, ok := ms[telemetry.MetricMCPServerDuration].Data.(metricdata.Histogram[float64])
	if !ok {
		t.Fatalf("no %s: %v", telemetry.MetricMCPServerDuration, ms)
	}
	if ms[telemetry.MetricMCPServerDuration].Unit != "s" {
		t.Errorf("unit %q", ms[telemetry.MetricMCPServerDuration].Unit)
	}
	want := []attribute.Set{
		setOf(map[string]string{"mcp.method.name": "tools/call", "gen_ai.tool.name": "echo", "gen_ai.operation.name": "execute_tool",
			"mcp.protocol.version": "2026-07-28", "agentwire.mcp.era": "modern", "network.transport": "pipe"}),
		setOf(map[string]string{"mcp.method.name": "tools/call", "gen_ai.tool.name": "broken", "gen_ai.operation.name": "execute_tool",
			"agentwire.mcp.era": "legacy", "error.type": "tool_error", "network.transport": "pipe"}),
		setOf(map[string]string{"mcp.method.name": "tools/call", "gen_ai.operation.name": "execute_tool",
			"agentwire.mcp.era": "legacy", "error.type": "-32602", "rpc.response.status_code": "-32602", "network.transport": "pipe"}),
		setOf(map[string]string{"mcp.method.name": "_OTHER", "agentwire.mcp.era": "legacy", "error.type": "-32601",
			"rpc.response.status_code": "-32601", "network.transport": "pipe"}),
	}
	for _, w := range want {
		found := false
		for _, dp := range srv.DataPoints {
			if dp.Attributes.Equals(&w) {
				found = true
				if dp.Count != 1 || len(dp.Bounds) != 14 || dp.Bounds[0] != 0.01 || dp.Bounds[13] != 300 {
					t.Errorf("%v: count %d bounds %v", w.Encoded(attribute.DefaultEncoder()), dp.Count, dp.Bounds)
				}
			}
		}
		if !found {
			var got []string
			for _, dp := range srv.DataPoints {
				got = append(got, dp.Attributes.Encoded(attribute.DefaultEncoder()))
			}
			t.Errorf("no data point %s; have %v", w.Encoded(attribute.DefaultEncoder()), got)
		}
	}
	if _, ok := ms[telemetry.MetricMCPClientDuration].Data.(metricdata.Histogram[float64]); !ok {
		t.Errorf("no %s", telemetry.MetricMCPClientDuration)
	}
	for _, name := range []string{telemetry.MetricServerActiveRequests, telemetry.MetricClientActiveRequests} {
		sum, ok := ms[name].Data.(metricdata.Sum[int64])
		if !ok || len(sum.DataPoints) != 1 || sum.DataPoints[0].Value != 0 || sum.IsMonotonic {
			t.Errorf("%s: %+v", name, ms[name].Data)
		}
	}
}

// The metric names are the conventions'.
func TestMetricNamesAreTheConventions(t *testing.T) {
	for ours, theirs := range map[string]string{
		telemetry.MetricMCPServerDuration: mcpconv.ServerOperationDuration{}.Name(),
		telemetry.MetricMCPClientDuration: mcpconv.ClientOperationDuration{}.Name(),
		telemetry.MetricRPCServerDuration: rpcconv.ServerCallDuration{}.Name(),
		telemetry.MetricRPCClientDuration: rpcconv.ClientCallDuration{}.Name(),
	} {
		if ours != theirs {
			t.Errorf("%s is %s in the conventions", ours, theirs)
		}
	}
	if u := (mcpconv.ServerOperationDuration{}).Unit(); u != "s" {
		t.Errorf("unit %s", u)
	}
}

// ACP and JSON-RPC use the RPC conventions' names and buckets.
func TestRPCCallDurationMetrics(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(context.Background())
	o := &telemetry.Options{MeterProvider: mp, TracerProvider: tracenoop.NewTracerProvider(), Protocol: telemetry.ACP}
	h := telemetry.ServerMiddleware(o)(tools(nil))
	h.Handle(context.Background(), &rpc.Request{ID: "1", Method: "session/prompt", Params: json.RawMessage(`{"sessionId":"s"}`)})
	ms := collect(t, reader)
	hist, ok := ms[telemetry.MetricRPCServerDuration].Data.(metricdata.Histogram[float64])
	if !ok || len(hist.DataPoints) != 1 {
		t.Fatalf("%s: %+v", telemetry.MetricRPCServerDuration, ms)
	}
	dp := hist.DataPoints[0]
	w := setOf(map[string]string{"rpc.system.name": "jsonrpc", "rpc.method": "_OTHER", "error.type": "-32601",
		"rpc.response.status_code": "-32601", "network.transport": "pipe"})
	if !dp.Attributes.Equals(&w) || dp.Bounds[0] != 0.005 || dp.Bounds[len(dp.Bounds)-1] != 10 {
		t.Errorf("data point %s bounds %v", dp.Attributes.Encoded(attribute.DefaultEncoder()), dp.Bounds)
	}
}

func jsonrpcInvalid() error { return jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "unknown tool") }
