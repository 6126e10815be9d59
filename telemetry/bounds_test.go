package telemetry_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"unicode/utf8"

	"github.com/agentwire/agentwire/acp"
	"github.com/agentwire/agentwire/jsonrpc"
	"github.com/agentwire/agentwire/mcp"
	"github.com/agentwire/agentwire/rpc"
	"github.com/agentwire/agentwire/telemetry"
	"go.opentelemetry.io/otel/attribute"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/semconv/v1.41.0/mcpconv"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
)

// meter is an SDK MeterProvider read by hand.
func meter(t *testing.T) (*sdkmetric.ManualReader, *sdkmetric.MeterProvider) {
	t.Helper()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { mp.Shutdown(context.Background()) })
	return reader, mp
}

// points are the attribute sets of a histogram's data points, encoded.
func points(t *testing.T, ms map[string]metricdata.Metrics, name string) []string {
	t.Helper()
	h, ok := ms[name].Data.(metricdata.Histogram[float64])
	if !ok {
		t.Fatalf("no histogram %s", name)
	}
	var out []string
	for _, dp := range h.DataPoints {
		out = append(out, dp.Attributes.Encoded(attribute.DefaultEncoder()))
	}
	return out
}

// hasPoint reports whether the histogram has a data point with exactly
// these attributes.
func hasPoint(t *testing.T, ms map[string]metricdata.Metrics, name string, kv map[string]string) bool {
	t.Helper()
	want := setOf(kv)
	h, _ := ms[name].Data.(metricdata.Histogram[float64])
	for _, dp := range h.DataPoints {
		if dp.Attributes.Equals(&want) {
			return true
		}
	}
	return false
}

// bounded answers tools/call of "echo" with a result and of any other
// tool with -32602, junk/... with the error code its params name (as a
// bridge forwards an upstream's), and anything else (a notification)
// with nothing; each notification is counted.
func bounded(notes *atomic.Int64, done chan<- struct{}, want int64) rpc.Handler {
	return rpc.HandlerFunc(func(_ context.Context, r *rpc.Request) (any, error) {
		switch {
		case r.Method == "tools/call":
			if bytes.HasPrefix(r.Params, []byte(`{"name":"echo"`)) {
				return mcp.TextResult("ok"), nil
			}
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "unknown tool"}
		case strings.HasPrefix(r.Method, "junk/"):
			code, _ := strconv.ParseInt(string(bytes.Trim(r.Params, `{"code:}`)), 10, 64)
			return nil, &jsonrpc.Error{Code: code, Message: "junk"}
		case r.ID == "":
			if notes.Add(1) == want {
				close(done)
			}
		}
		return nil, nil
	})
}

func heapNow() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// 10,000 distinct methods (notifications and requests), protocol
// versions, tool names and error codes, each 2 KiB, over one connection,
// grow neither the series of the duration histograms (server and client
// side) nor the heap. Regression (H1): each became a series of its own
// (up to the SDK's 2000 per instrument), holding its value, for the life
// of the process.
func TestMetricsStayBoundedWhateverThePeerSends(t *testing.T) {
	reader, mp := meter(t)
	o := &telemetry.Options{MeterProvider: mp, TracerProvider: tracenoop.NewTracerProvider()}
	const n = 10000
	var notes atomic.Int64
	done := make(chan struct{})
	// One connection: the server side's handler, and the client side's
	// invoker, which hands each call to it as the wire would.
	srv := telemetry.ServerMiddleware(o)(bounded(&notes, done, n+1))
	id := 0
	wire := func(ctx context.Context, c *rpc.OutboundCall) (json.RawMessage, error) {
		req := &rpc.Request{Method: c.Method}
		if !c.Notification {
			id++
			req.ID = jsonrpc.ID(fmt.Sprint(id))
			c.ID = req.ID
		}
		if c.Params != nil {
			req.Params, _ = jsonrpc.RawValue(c.Params)
		}
		res, err := srv.Handle(ctx, req)
		if err != nil {
			return nil, err
		}
		b, _ := json.Marshal(res)
		return b, nil
	}
	call := telemetry.ClientMiddleware(o)(wire)
	ctx := context.Background()
	pad := strings.Repeat("x", 2048)
	send := func(i int) {
		call(ctx, &rpc.OutboundCall{Method: fmt.Sprintf("notifications/junk-%d-%s", i, pad), Notification: true})
		call(ctx, &rpc.OutboundCall{Method: "tools/call", Params: json.RawMessage(fmt.Sprintf(
			`{"name":"tool-%d-%s","_meta":{"io.modelcontextprotocol/protocolVersion":"v-%d-%s"}}`, i, pad, i, pad))})
		call(ctx, &rpc.OutboundCall{Method: fmt.Sprintf("junk/%d-%s", i, pad), Params: json.RawMessage(fmt.Sprintf(`{"code":%d}`, -40000-i))})
	}
	send(-1) // the series every later message falls into
	collect(t, reader)
	before := heapNow()
	for i := range n {
		send(i)
	}
	<-done
	after := heapNow()
	ms := collect(t, reader)
	for _, name := range []string{telemetry.MetricMCPServerDuration, telemetry.MetricMCPClientDuration} {
		if got := points(t, ms, name); len(got) > 4 {
			t.Errorf("%s: %d series after %d distinct junk values, want at most 4: %.400s", name, len(got), n, strings.Join(got, "\n"))
		}
	}
	if !hasPoint(t, ms, telemetry.MetricMCPServerDuration, map[string]string{"mcp.method.name": "_OTHER", "agentwire.mcp.era": "legacy", "network.transport": "pipe"}) {
		t.Errorf("no _OTHER series for the notifications: %v", points(t, ms, telemetry.MetricMCPServerDuration))
	}
	if !hasPoint(t, ms, telemetry.MetricMCPClientDuration, map[string]string{"mcp.method.name": "_OTHER", "agentwire.mcp.era": "legacy",
		"error.type": "_OTHER", "rpc.response.status_code": "_OTHER", "network.transport": "pipe"}) {
		t.Errorf("no _OTHER series for the junk calls: %v", points(t, ms, telemetry.MetricMCPClientDuration))
	}
	if !hasPoint(t, ms, telemetry.MetricMCPServerDuration, map[string]string{"mcp.method.name": "tools/call", "gen_ai.operation.name": "execute_tool",
		"mcp.protocol.version": "_OTHER", "agentwire.mcp.era": "modern", "error.type": "-32602", "rpc.response.status_code": "-32602", "network.transport": "pipe"}) {
		t.Errorf("no series for the refused calls: %v", points(t, ms, telemetry.MetricMCPServerDuration))
	}
	t.Logf("heap: %d KiB before, %d KiB after", before>>10, after>>10)
	if after > before && after-before > 4<<20 {
		t.Errorf("the heap grew by %d KiB over %d junk messages", (after-before)>>10, 3*n)
	}
}

// A method is named in the metrics only when the protocol defines it (or
// Options.Methods lists it), on both sides, for requests and
// notifications; MCP's are every method of the conventions' list and the
// mcp package's, ACP's the acp package's; plain JSON-RPC knows none.
func TestMetricsNameOnlyKnownMethods(t *testing.T) {
	mcpKnown := []string{mcp.MethodDiscover, mcp.MethodListen, mcp.MethodTasksResult, mcp.MethodTasksStatus, mcp.MethodElicit,
		"notifications/elicitation/complete"}
	for _, m := range []mcpconv.MethodNameAttr{
		mcpconv.MethodNameNotificationsCancelled, mcpconv.MethodNameInitialize,
		mcpconv.MethodNameNotificationsInitialized, mcpconv.MethodNameNotificationsProgress,
		mcpconv.MethodNamePing, mcpconv.MethodNameResourcesList, mcpconv.MethodNameResourcesTemplatesList,
		mcpconv.MethodNameResourcesRead, mcpconv.MethodNameNotificationsResourcesListChanged,
		mcpconv.MethodNameResourcesSubscribe, mcpconv.MethodNameResourcesUnsubscribe,
		mcpconv.MethodNameNotificationsResourcesUpdated, mcpconv.MethodNamePromptsList,
		mcpconv.MethodNamePromptsGet, mcpconv.MethodNameNotificationsPromptsListChanged,
		mcpconv.MethodNameToolsList, mcpconv.MethodNameToolsCall, mcpconv.MethodNameNotificationsToolsListChanged,
		mcpconv.MethodNameLoggingSetLevel, mcpconv.MethodNameNotificationsMessage,
		mcpconv.MethodNameSamplingCreateMessage, mcpconv.MethodNameCompletionComplete,
		mcpconv.MethodNameRootsList, mcpconv.MethodNameNotificationsRootsListChanged,
		mcpconv.MethodNameElicitationCreate,
	} {
		mcpKnown = append(mcpKnown, string(m))
	}
	for _, c := range []struct {
		p       telemetry.Protocol
		methods []string // Options.Methods
		known   []string
		key     string
	}{
		{telemetry.MCP, nil, mcpKnown, "mcp.method.name"},
		{telemetry.MCP, []string{"x/mine"}, []string{"x/mine"}, "mcp.method.name"},
		{telemetry.ACP, nil, []string{acp.MethodPrompt, acp.MethodUpdate, acp.MethodTerminalWait, acp.MethodCancelRequest}, "rpc.method"},
		{telemetry.JSONRPC, []string{"echo"}, []string{"echo"}, "rpc.method"},
	} {
		t.Run(c.p.String(), func(t *testing.T) {
			reader, mp := meter(t)
			o := &telemetry.Options{MeterProvider: mp, TracerProvider: tracenoop.NewTracerProvider(), Protocol: c.p, Methods: c.methods}
			ok := rpc.HandlerFunc(func(context.Context, *rpc.Request) (any, error) { return map[string]any{}, nil })
			srv := telemetry.ServerMiddleware(o)(ok)
			cli := telemetry.ClientMiddleware(o)(func(context.Context, *rpc.OutboundCall) (json.RawMessage, error) {
				return json.RawMessage(`{}`), nil
			})
			ctx := context.Background()
			unknown := []string{"nope", "initialize2", "tools/call/x", "notifications/junk", "Tools/Call"}
			if c.p != telemetry.JSONRPC {
				unknown = append(unknown, "echo")
			}
			for _, m := range append(append([]string(nil), c.known...), unknown...) {
				srv.Handle(ctx, &rpc.Request{ID: "1", Method: m})
				srv.Handle(ctx, &rpc.Request{Method: m}) // a notification
				cli(ctx, &rpc.OutboundCall{Method: m})
				cli(ctx, &rpc.OutboundCall{Method: m, Notification: true})
			}
			ms := collect(t, reader)
			for _, name := range []string{"server", "client"} {
				metric := map[string]string{"server": telemetry.MetricMCPServerDuration, "client": telemetry.MetricMCPClientDuration}[name]
				if c.p != telemetry.MCP {
					metric = map[string]string{"server": telemetry.MetricRPCServerDuration, "client": telemetry.MetricRPCClientDuration}[name]
				}
				seen := map[string]uint64{}
				h := ms[metric].Data.(metricdata.Histogram[float64])
				for _, dp := range h.DataPoints {
					v, _ := dp.Attributes.Value(attribute.Key(c.key))
					seen[v.AsString()] += dp.Count
				}
				for _, m := range c.known {
					if seen[m] == 0 {
						t.Errorf("%s: %s %q not recorded by name (have %v)", name, c.key, m, seen)
					}
				}
				for _, m := range unknown {
					if seen[m] != 0 {
						t.Errorf("%s: unknown method %q recorded by name", name, m)
					}
				}
				if want := uint64(2 * len(unknown)); seen["_OTHER"] < want {
					t.Errorf("%s: %d _OTHER, want at least %d", name, seen["_OTHER"], want)
				}
			}
		})
	}
}

// The tool or prompt name is in the metrics only when the call found it
// (answered with a result, isError true included), never on a refusal
// (-32600 before initialize, a limiter's -32000, a timeout) or a
// cancellation, on either side, and cut at MaxMetricNameBytes at a UTF-8
// boundary; mcp.protocol.version only when agentwire knows it; an error
// code only when known. Regression (H1): only -32602 dropped the name.
func TestMetricsToolNameOnlyWhenFound(t *testing.T) {
	reader, mp := meter(t)
	o := &telemetry.Options{MeterProvider: mp, TracerProvider: tracenoop.NewTracerProvider()}
	long := "a" + strings.Repeat("é", 100) // 201 bytes: byte 128 is inside a rune
	answer := func(name string) (any, error) {
		switch name {
		case "early":
			return nil, jsonrpc.Errorf(jsonrpc.CodeInvalidRequest, "tools/call before initialize")
		case "busy":
			return nil, jsonrpc.Errorf(jsonrpc.CodeServerBusy, "limited")
		case "odd":
			return nil, jsonrpc.Errorf(-1234, "an application's code")
		case "slow":
			return nil, context.Canceled
		case "broken":
			return &mcp.ToolResult{Content: []mcp.Content{{Type: "text", Text: "no"}}, IsError: true}, nil
		}
		return mcp.TextResult("ok"), nil
	}
	h := rpc.HandlerFunc(func(_ context.Context, r *rpc.Request) (any, error) {
		var p struct{ Name string }
		json.Unmarshal(r.Params, &p)
		return answer(p.Name)
	})
	srv := telemetry.ServerMiddleware(o)(h)
	cli := telemetry.ClientMiddleware(o)(func(_ context.Context, c *rpc.OutboundCall) (json.RawMessage, error) {
		var p struct{ Name string }
		json.Unmarshal(c.Params.(json.RawMessage), &p)
		res, err := answer(p.Name)
		if err != nil {
			return nil, err
		}
		b, _ := json.Marshal(res)
		return b, nil
	})
	ctx := context.Background()
	for _, name := range []string{"early", "busy", "odd", "slow", "broken", "echo", long} {
		params := json.RawMessage(fmt.Sprintf(`{"name":%q,"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}`, name))
		srv.Handle(ctx, &rpc.Request{ID: "1", Method: "tools/call", Params: params})
		cli(ctx, &rpc.OutboundCall{Method: "tools/call", Params: params})
	}
	srv.Handle(ctx, &rpc.Request{ID: "1", Method: "ping", Params: json.RawMessage(`{"_meta":{"io.modelcontextprotocol/protocolVersion":"1999-01-01"}}`)})
	ms := collect(t, reader)
	cut := "a" + strings.Repeat("é", telemetry.MaxMetricNameBytes/2-1) // 127 bytes
	for _, metric := range []string{telemetry.MetricMCPServerDuration, telemetry.MetricMCPClientDuration} {
		for _, tool := range []string{"early", "busy", "odd", "slow", long} {
			for _, p := range points(t, ms, metric) {
				if strings.Contains(p, "gen_ai.tool.name="+tool+",") {
					t.Errorf("%s: tool %.20q recorded: %s", metric, tool, p)
				}
			}
		}
		base := map[string]string{"mcp.method.name": "tools/call", "gen_ai.operation.name": "execute_tool",
			"mcp.protocol.version": "2026-07-28", "agentwire.mcp.era": "modern", "network.transport": "pipe"}
		with := func(extra map[string]string) map[string]string {
			m := map[string]string{}
			for k, v := range base {
				m[k] = v
			}
			for k, v := range extra {
				m[k] = v
			}
			return m
		}
		for _, want := range []map[string]string{
			with(map[string]string{"gen_ai.tool.name": "echo"}),
			with(map[string]string{"gen_ai.tool.name": "broken", "error.type": "tool_error"}),
			with(map[string]string{"gen_ai.tool.name": cut}),
			with(map[string]string{"error.type": "-32600", "rpc.response.status_code": "-32600"}),
			with(map[string]string{"error.type": "-32000", "rpc.response.status_code": "-32000"}),
			with(map[string]string{"error.type": "_OTHER", "rpc.response.status_code": "_OTHER"}),
			with(map[string]string{"error.type": "cancelled"}),
		} {
			if !hasPoint(t, ms, metric, want) {
				t.Errorf("%s: no series %v; have %v", metric, want, points(t, ms, metric))
			}
		}
	}
	if !hasPoint(t, ms, telemetry.MetricMCPServerDuration, map[string]string{"mcp.method.name": "ping",
		"mcp.protocol.version": "_OTHER", "agentwire.mcp.era": "modern", "network.transport": "pipe"}) {
		t.Errorf("an unknown version recorded as it came: %v", points(t, ms, telemetry.MetricMCPServerDuration))
	}
}

// checkBounded fails for a span whose name or any string attribute is
// longer than the bounds allow, or not valid UTF-8 where the input was.
func checkBounded(t *testing.T, s sdktrace.ReadOnlySpan) {
	t.Helper()
	if len(s.Name()) > 2*telemetry.MaxSpanValueBytes+1 || !utf8.ValidString(s.Name()) {
		t.Errorf("span name of %d bytes: %.80q", len(s.Name()), s.Name())
	}
	for _, kv := range s.Attributes() {
		if v := kv.Value.Emit(); len(v) > telemetry.MaxSpanValueBytes || !utf8.ValidString(v) {
			t.Errorf("span %.40q: %s of %d bytes", s.Name(), kv.Key, len(v))
		}
	}
	if d := s.Status().Description; len(d) > telemetry.MaxSpanValueBytes {
		t.Errorf("span %.40q: status description of %d bytes", s.Name(), len(d))
	}
}

// Every string a peer chooses is cut at MaxSpanValueBytes, at a UTF-8
// boundary, in span names and attributes, on the server side, the client
// side and the relay: a 1 MiB method, tool name, URI, version, request
// id, ACP session id and error message. The span of an unknown ACP or
// JSON-RPC method is "jsonrpc", with rpc.method _OTHER and
// rpc.method_original. Regression (H2): they were kept whole.
func TestSpansCutWhatThePeerSends(t *testing.T) {
	big := "a" + strings.Repeat("é", 1<<19) // 1 MiB, the bound inside a rune
	bigCut := big[:telemetry.MaxSpanValueBytes-1]
	bigJSON, _ := json.Marshal(big)
	q := string(bigJSON)
	fail := rpc.HandlerFunc(func(_ context.Context, r *rpc.Request) (any, error) {
		return nil, jsonrpc.Errorf(jsonrpc.CodeInvalidRequest, "%s", big)
	})
	lines := []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":` + q + `,"_meta":{"io.modelcontextprotocol/protocolVersion":` + q + `}}}`,
		`{"jsonrpc":"2.0","id":2,"method":"prompts/get","params":{"name":` + q + `}}`,
		`{"jsonrpc":"2.0","id":3,"method":"resources/read","params":{"uri":` + q + `}}`,
		`{"jsonrpc":"2.0","id":` + q + `,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":5,"method":` + q + `,"params":{"sessionId":` + q + `}}`,
		`{"jsonrpc":"2.0","method":` + q + `}`,
	}
	for _, p := range []telemetry.Protocol{telemetry.MCP, telemetry.ACP} {
		t.Run(p.String(), func(t *testing.T) {
			sr, tp := recorder(t)
			o := &telemetry.Options{TracerProvider: tp, Protocol: p}
			srv := telemetry.ServerMiddleware(o)(fail)
			rl := telemetry.NewRelay(o)
			ctx := context.Background()
			for _, line := range lines {
				msg, err := jsonrpc.Decode([]byte(line), nil)
				if err != nil {
					t.Fatal(err)
				}
				srv.Handle(ctx, &rpc.Request{ID: jsonrpc.ID(msg.ID), Method: msg.MethodName(), Params: msg.Params})
				rl.Message(telemetry.FromClient, []byte(line))
				if msg.Kind == jsonrpc.KindRequest {
					rl.Message(telemetry.FromServer, []byte(`{"jsonrpc":"2.0","id":`+string(msg.ID)+`,"error":{"code":-32600,"message":`+q+`}}`))
				}
				cli := telemetry.ClientMiddleware(o)(func(context.Context, *rpc.OutboundCall) (json.RawMessage, error) {
					return nil, &jsonrpc.Error{Code: -32600, Message: big}
				})
				cli(ctx, &rpc.OutboundCall{Method: msg.MethodName(), Params: msg.Params, Notification: msg.Kind == jsonrpc.KindNotification})
			}
			rl.Close()
			spans := sr.Ended()
			if len(spans) < 3*len(lines)-1 {
				t.Fatalf("%d spans: %v", len(spans), len(names(spans)))
			}
			for _, s := range spans {
				checkBounded(t, s)
			}
			cutSeen := 0
			for _, s := range spans {
				a := attrsOf(s)
				if p == telemetry.ACP {
					// None of these is an ACP method.
					if s.Name() != "jsonrpc" || a["rpc.method"] != "_OTHER" || a["rpc.method_original"] == "" {
						t.Errorf("span %.40q: rpc.method %q, rpc.method_original %.40q", s.Name(), a["rpc.method"], a["rpc.method_original"])
					}
					if a["rpc.method_original"] == bigCut {
						cutSeen++
					}
					continue
				}
				switch {
				case strings.HasPrefix(s.Name(), "tools/call "):
					if s.Name() != "tools/call "+bigCut || a["gen_ai.tool.name"] != bigCut {
						t.Errorf("tools/call span %.40q", s.Name())
					}
					cutSeen++
				case strings.HasPrefix(s.Name(), "a"):
					if s.Name() != bigCut || a["mcp.method.name"] != bigCut {
						t.Errorf("span %.40q: mcp.method.name %.40q", s.Name(), a["mcp.method.name"])
					}
					cutSeen++
				}
			}
			if want := map[telemetry.Protocol]int{telemetry.MCP: 8, telemetry.ACP: 5}[p]; cutSeen < want {
				t.Errorf("%d spans of the 1 MiB values, want at least %d", cutSeen, want)
			}
		})
	}
}

// The JSON-RPC side of the RPC conventions: an unknown method's span is
// named "jsonrpc" (rpc.system.name) from its start, with rpc.method _OTHER
// and the method in rpc.method_original; a listed one (Options.Methods)
// is named by it. Regression (L1): rpc.method was always the raw method.
func TestRPCUnknownMethodIsOther(t *testing.T) {
	sr, tp := recorder(t)
	o := &telemetry.Options{TracerProvider: tp, Protocol: telemetry.JSONRPC, Methods: []string{"echo"}}
	srv := telemetry.ServerMiddleware(o)(tools(nil))
	srv.Handle(context.Background(), &rpc.Request{ID: "1", Method: "echo"})
	srv.Handle(context.Background(), &rpc.Request{ID: "2", Method: "whatever"})
	spans := sr.Ended()
	if len(spans) != 2 || spans[0].Name() != "echo" || spans[1].Name() != "jsonrpc" {
		t.Fatalf("spans %v", names(spans))
	}
	wantAttrs(t, spans[0], map[attribute.Key]string{"rpc.method": "echo"}, "rpc.method_original")
	wantAttrs(t, spans[1], map[attribute.Key]string{"rpc.method": "_OTHER", "rpc.method_original": "whatever"})
	if telemetry.KeyRPCMethodOriginal != semconv.RPCMethodOriginalKey {
		t.Errorf("%s is %s in the conventions", telemetry.KeyRPCMethodOriginal, semconv.RPCMethodOriginalKey)
	}
}

// Start's TracerProvider cuts attribute values at
// DefaultAttributeValueLengthLimit when no variable sets a limit, and at
// what OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT says when one does. Regression
// (H2): the SDK's default, no limit, was kept.
func TestSetupLimitsAttributeValues(t *testing.T) {
	for _, c := range []struct {
		vars map[string]string
		want int
	}{
		{nil, telemetry.DefaultAttributeValueLengthLimit},
		{map[string]string{"OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT": "100"}, 100},
		{map[string]string{"OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT": "10000", "OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT": "100"}, 10000},
	} {
		recv := startOTLPReceiver(t, "")
		s, err := telemetry.Start(context.Background(), telemetry.SetupOptions{OTLP: recv.srv.URL, Getenv: metEnv(c.vars)})
		if err != nil {
			t.Fatal(err)
		}
		sr := tracetest.NewSpanRecorder()
		s.TracerProvider.(*sdktrace.TracerProvider).RegisterSpanProcessor(sr)
		_, span := s.TracerProvider.Tracer("test").Start(context.Background(), "x")
		span.SetAttributes(attribute.String("v", strings.Repeat("a", 20000)))
		span.End()
		if err := s.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
		if got := len(attrsOf(onlySpan(t, sr))["v"]); got != c.want {
			t.Errorf("%v: a value of %d bytes, want %d", c.vars, got, c.want)
		}
	}
}

// A panic in what ClientMiddleware wraps (a params' MarshalJSON, an inner
// middleware) ends the CLIENT span and takes the call out of the requests
// in flight; the panic goes on. Regression (L3): the span never ended and
// the counter stayed up.
func TestClientSpanEndsOnPanic(t *testing.T) {
	sr, tp := recorder(t)
	reader, mp := meter(t)
	inv := telemetry.ClientMiddleware(&telemetry.Options{TracerProvider: tp, MeterProvider: mp})(
		func(context.Context, *rpc.OutboundCall) (json.RawMessage, error) { panic("inner") })
	func() {
		defer func() {
			if p := recover(); p != "inner" {
				t.Errorf("recovered %v, want the inner panic", p)
			}
		}()
		inv(context.Background(), &rpc.OutboundCall{Method: "tools/call", Params: json.RawMessage(`{"name":"echo"}`)})
	}()
	s := onlySpan(t, sr)
	if s.Name() != "tools/call echo" || s.Status().Description != "panic" {
		t.Errorf("span %q status %v", s.Name(), s.Status())
	}
	ms := collect(t, reader)
	sum, ok := ms[telemetry.MetricClientActiveRequests].Data.(metricdata.Sum[int64])
	if !ok || len(sum.DataPoints) != 1 || sum.DataPoints[0].Value != 0 {
		t.Errorf("%s: %+v", telemetry.MetricClientActiveRequests, ms[telemetry.MetricClientActiveRequests].Data)
	}
	if got := points(t, ms, telemetry.MetricMCPClientDuration); len(got) != 1 {
		t.Errorf("%s: %v", telemetry.MetricMCPClientDuration, got)
	}
}

// The Relay honours Options.Sampler as ServerMiddleware does: under a
// sampler that drops every root, a request without trace context passes
// unchanged and starts no span (one with a parent still gets its span);
// with the no-op TracerProvider every line passes unchanged. Regression
// (L4): the relay added a traceparent with flags 00, and params where
// there were none.
func TestRelayHonoursTheSampler(t *testing.T) {
	sr := tracetest.NewSpanRecorder()
	pb := sdktrace.ParentBased(sdktrace.NeverSample())
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(pb), sdktrace.WithSpanProcessor(sr))
	defer tp.Shutdown(context.Background())
	rl := telemetry.NewRelay(&telemetry.Options{TracerProvider: tp, Sampler: pb})
	root := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo"}}`)
	if out := rl.Message(telemetry.FromClient, root); !bytes.Equal(out, root) {
		t.Errorf("a root request under a dropping sampler became %s", out)
	}
	bare := []byte(`{"jsonrpc":"2.0","id":2,"method":"ping"}`)
	if out := rl.Message(telemetry.FromClient, bare); !bytes.Equal(out, bare) {
		t.Errorf("a request without params became %s", out)
	}
	if n := len(sr.Started()); n != 0 {
		t.Errorf("%d spans started for root requests", n)
	}
	child := []byte(`{"jsonrpc":"2.0","id":3,"method":"ping","params":{"_meta":{"traceparent":"` + hostParent + `"}}}`)
	if out := rl.Message(telemetry.FromClient, child); bytes.Contains(out, []byte(hostSpan)) {
		t.Errorf("a request with a sampled parent kept the parent's context: %s", out)
	}
	rl.Close()
	if len(sr.Ended()) != 1 {
		t.Errorf("spans %v", names(sr.Ended()))
	}

	off := telemetry.NewRelay(&telemetry.Options{TracerProvider: tracenoop.NewTracerProvider()})
	defer off.Close()
	for _, line := range [][]byte{root, bare, child, []byte(`{"jsonrpc":"2.0","id":3,"result":{}}`)} {
		if out := off.Message(telemetry.FromClient, line); &out[0] != &line[0] || len(out) != len(line) {
			t.Errorf("the no-op provider's relay changed %s into %s", line, out)
		}
	}
}

// With tracing and metrics both off (the no-op providers) ClientMiddleware
// is nil, which rpc's composition skips: a client pays nothing. Over the
// no-op providers ServerMiddleware adds no allocation (it still carries
// trace context through). Regression: the client side cost two
// allocations a call with tracing off.
func TestOffCostsNothing(t *testing.T) {
	off := &telemetry.Options{TracerProvider: tracenoop.NewTracerProvider(), MeterProvider: metricnoop.NewMeterProvider()}
	if telemetry.ClientMiddleware(off) != nil {
		t.Fatal("ClientMiddleware over the no-op providers is not nil")
	}
	echo := rpc.HandlerFunc(func(_ context.Context, r *rpc.Request) (any, error) { return r.Params, nil })
	cl, sv := rpc.Pipe(echo, nil, &rpc.Options{Logger: quiet},
		&rpc.Options{Logger: quiet, Outbound: []rpc.OutboundMiddleware{telemetry.ClientMiddleware(off)}})
	defer func() { cl.Close(); sv.Close(); cl.Wait(); sv.Wait() }()
	if _, err := cl.Call(context.Background(), "echo", nil); err != nil {
		t.Fatal(err)
	}
	// Tracing on, or metrics on: not nil.
	_, tp := recorder(t)
	_, mp := meter(t)
	if telemetry.ClientMiddleware(&telemetry.Options{TracerProvider: tp, MeterProvider: metricnoop.NewMeterProvider()}) == nil ||
		telemetry.ClientMiddleware(&telemetry.Options{TracerProvider: tracenoop.NewTracerProvider(), MeterProvider: mp}) == nil {
		t.Error("ClientMiddleware is nil with something on")
	}

	if telemetry.ServerMiddleware(off) != nil {
		t.Error("ServerMiddleware over the no-op providers is not nil")
	}
}

// A trace key spelled with JSON escapes ("trace\u0070arent") is matched
// by ServerMiddleware and the Relay as Extract and Inject match it: the
// span continues its trace, and the relay replaces it. Regression (L10):
// the middleware did not look for it (the span became a root) while
// Inject dropped and replaced it.
func TestEscapedTraceKeysAgree(t *testing.T) {
	params := json.RawMessage(`{"_m\u0065ta":{"trace\u0070arent":"` + hostParent + `"},"text":"caf\u00e9"}`)
	if sc := trace.SpanContextFromContext(telemetry.Extract(context.Background(), params, nil)); sc.SpanID().String() != hostSpan {
		t.Fatalf("Extract read %v", sc)
	}
	sr, tp := recorder(t)
	srv := telemetry.ServerMiddleware(&telemetry.Options{TracerProvider: tp})(tools(nil))
	srv.Handle(context.Background(), &rpc.Request{ID: "1", Method: "ping", Params: params})
	if s := onlySpan(t, sr); s.Parent().SpanID().String() != hostSpan {
		t.Errorf("ServerMiddleware's span has parent %v, want the escaped key's", s.Parent())
	}
	// An escaped backslash before "u0070" is no escape: not trace context.
	sr2, tp2 := recorder(t)
	srv2 := telemetry.ServerMiddleware(&telemetry.Options{TracerProvider: tp2})(tools(nil))
	srv2.Handle(context.Background(), &rpc.Request{ID: "1", Method: "ping",
		Params: json.RawMessage(`{"_meta":{"trace\\u0070arent":"` + hostParent + `"}}`)})
	if s := onlySpan(t, sr2); s.Parent().IsValid() {
		t.Errorf("a key with an escaped backslash was read as traceparent: parent %v", s.Parent())
	}

	sr3, tp3 := recorder(t)
	rl := telemetry.NewRelay(&telemetry.Options{TracerProvider: tp3})
	out := rl.Message(telemetry.FromClient, []byte(`{"jsonrpc":"2.0","id":1,"method":"ping","params":`+string(params)+`}`))
	rl.Message(telemetry.FromServer, []byte(`{"jsonrpc":"2.0","id":1,"result":{}}`))
	s := onlySpan(t, sr3)
	if s.Parent().SpanID().String() != hostSpan {
		t.Errorf("the relay's span has parent %v, want the escaped key's", s.Parent())
	}
	if bytes.Contains(out, []byte(hostSpan)) || !bytes.Contains(out, []byte(s.SpanContext().SpanID().String())) {
		t.Errorf("relayed %s", out)
	}
}
