//go:build unix

package main

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/hex"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	colmetricspb "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// The observability of the commands, tested from outside as the issue's
// acceptance is: real binaries export over OTLP/HTTP to a receiver the
// test starts, and a Prometheus scrape is parsed by the Prometheus text
// parser. Every process flushes before it exits, so what it exported is
// at the receiver once it has exited: nothing here waits for a delay.

// otlpReceiver is an OTLP/HTTP collector: it decodes every
// ExportTraceServiceRequest posted to /v1/traces and keeps its spans, and
// counts the metric exports.
type otlpReceiver struct {
	*httptest.Server
	mu          sync.Mutex
	spans       []gotSpan
	metricPosts int
	metrics     map[string]bool // "service metric.name" of every metric exported
	bad         []string
}

// gotSpan is one span as the receiver got it, ids in hex.
type gotSpan struct {
	Service               string
	TraceID, ID, ParentID string
	Name                  string
	Kind                  tracepb.Span_SpanKind
	Attrs                 map[string]string
}

func (s gotSpan) String() string {
	return fmt.Sprintf("%s %q (%v) trace %s span %s parent %s %v", s.Service, s.Name, s.Kind, s.TraceID, s.ID, s.ParentID, s.Attrs)
}

func startOTLP(t *testing.T) *otlpReceiver {
	t.Helper()
	r := &otlpReceiver{}
	r.Server = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.Close)
	return r
}

func (r *otlpReceiver) serve(w http.ResponseWriter, req *http.Request) {
	var body io.Reader = req.Body
	if req.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(req.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = zr
	}
	b, err := io.ReadAll(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	switch req.URL.Path {
	case "/v1/metrics":
		var ex colmetricspb.ExportMetricsServiceRequest
		if !r.decode(w, b, &ex) {
			return
		}
		r.mu.Lock()
		r.metricPosts++
		if r.metrics == nil {
			r.metrics = map[string]bool{}
		}
		for _, rm := range ex.ResourceMetrics {
			service := attrString(rm.GetResource().GetAttributes(), "service.name")
			for _, sm := range rm.ScopeMetrics {
				for _, m := range sm.Metrics {
					r.metrics[service+" "+m.Name] = true
				}
			}
		}
		r.mu.Unlock()
		w.Header().Set("Content-Type", "application/x-protobuf")
		out, _ := proto.Marshal(&colmetricspb.ExportMetricsServiceResponse{})
		w.Write(out)
		return
	case "/v1/traces":
		var ex coltracepb.ExportTraceServiceRequest
		if !r.decode(w, b, &ex) {
			return
		}
		r.mu.Lock()
		for _, rs := range ex.ResourceSpans {
			service := attrString(rs.GetResource().GetAttributes(), "service.name")
			for _, ss := range rs.ScopeSpans {
				for _, sp := range ss.Spans {
					attrs := map[string]string{}
					for _, kv := range sp.Attributes {
						attrs[kv.Key] = anyString(kv.Value)
					}
					r.spans = append(r.spans, gotSpan{Service: service, TraceID: hex.EncodeToString(sp.TraceId),
						ID: hex.EncodeToString(sp.SpanId), ParentID: hex.EncodeToString(sp.ParentSpanId),
						Name: sp.Name, Kind: sp.Kind, Attrs: attrs})
				}
			}
		}
		r.mu.Unlock()
	default:
		http.NotFound(w, req)
		return
	}
	w.Header().Set("Content-Type", "application/x-protobuf")
	out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	w.Write(out)
}

// decode unmarshals an export request into msg, or records why it could
// not and answers 400.
func (r *otlpReceiver) decode(w http.ResponseWriter, b []byte, msg proto.Message) bool {
	if err := proto.Unmarshal(b, msg); err != nil {
		r.mu.Lock()
		r.bad = append(r.bad, err.Error())
		r.mu.Unlock()
		http.Error(w, err.Error(), http.StatusBadRequest)
		return false
	}
	return true
}

func attrString(kvs []*commonpb.KeyValue, key string) string {
	for _, kv := range kvs {
		if kv.Key == key {
			return anyString(kv.Value)
		}
	}
	return ""
}

func anyString(v *commonpb.AnyValue) string {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return x.StringValue
	case *commonpb.AnyValue_IntValue:
		return fmt.Sprint(x.IntValue)
	case *commonpb.AnyValue_BoolValue:
		return fmt.Sprint(x.BoolValue)
	case *commonpb.AnyValue_DoubleValue:
		return fmt.Sprint(x.DoubleValue)
	}
	return v.String()
}

// got is every span received so far.
func (r *otlpReceiver) got(t *testing.T) []gotSpan {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.bad) > 0 {
		t.Errorf("undecodable exports: %v", r.bad)
	}
	return append([]gotSpan(nil), r.spans...)
}

// find returns the one span of service named name with kind, failing the
// test (with everything received) when there is none or several.
func find(t *testing.T, spans []gotSpan, service, name string, kind tracepb.Span_SpanKind, in func(gotSpan) bool) gotSpan {
	t.Helper()
	var found []gotSpan
	for _, s := range spans {
		if s.Service == service && s.Name == name && (kind == tracepb.Span_SPAN_KIND_UNSPECIFIED || s.Kind == kind) && (in == nil || in(s)) {
			found = append(found, s)
		}
	}
	if len(found) != 1 {
		var all strings.Builder
		for _, s := range spans {
			all.WriteString("\n  " + s.String())
		}
		t.Fatalf("%d spans %q (%v) of %q, want 1; received:%s", len(found), name, kind, service, all.String())
	}
	return found[0]
}

// otelEnv is the test's environment without any OpenTelemetry setting of
// the machine's, plus extra.
func otelEnv(extra ...string) []string {
	return append(envWithout("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
		"OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", "OTEL_SERVICE_NAME", "OTEL_SDK_DISABLED", "OTEL_TRACES_EXPORTER",
		"OTEL_METRICS_EXPORTER", "OTEL_TRACES_SAMPLER", "OTEL_RESOURCE_ATTRIBUTES", "TRACEPARENT", "TRACESTATE", "BAGGAGE"), extra...)
}

// runCmd runs `agentwire args...` with env and returns its stdout, failing
// the test unless it exits 0.
func runCmd(t *testing.T, env []string, args ...string) string {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Env = env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("agentwire %q: %v\nstdout: %s\nstderr: %s", args, err, stdout.String(), stderr.String())
	}
	return stdout.String()
}

// childOf checks that child is parent's child in parent's trace.
func childOf(t *testing.T, child, parent gotSpan) {
	t.Helper()
	if child.TraceID != parent.TraceID || child.ParentID != parent.ID {
		t.Errorf("%s\n  is not a child of\n%s", child, parent)
	}
}

// mcpAttrs checks the attributes every span of the echo tool's call has,
// and, onWire, those of a span that saw the message its connection sent
// or read (the request's id, the negotiated version).
func mcpAttrs(t *testing.T, s gotSpan, onWire bool) {
	t.Helper()
	want := map[string]string{"mcp.method.name": "tools/call", "gen_ai.tool.name": "echo", "gen_ai.operation.name": "execute_tool"}
	for k, v := range want {
		if s.Attrs[k] != v {
			t.Errorf("%s: %s = %q, want %q", s, k, s.Attrs[k], v)
		}
	}
	if onWire && (s.Attrs["jsonrpc.request.id"] == "" || s.Attrs["mcp.protocol.version"] == "") {
		t.Errorf("%s: no jsonrpc.request.id or mcp.protocol.version", s)
	}
}

// The acceptance: one tools/call from `agentwire call --otlp`
// through `agentwire bridge --otlp` to a stdio server built with agentwire
// is one trace with spans from all three processes, parented across both
// wires: call CLIENT -> bridge SERVER -> bridge CLIENT -> serve SERVER. The
// server is given no flag: the bridge tells it the collector in its
// environment.
//
// The 2025 client of a bridge with --sessions is served on another path
// (a session's long-lived connection, not an exchange): traced the same.
func TestOTLPTraceThroughBridge(t *testing.T) {
	t.Run("modern", func(t *testing.T) { traceThroughBridge(t, nil, nil) })
	t.Run("legacy session", func(t *testing.T) {
		traceThroughBridge(t, []string{"--sessions"}, []string{"--era", "legacy"})
	})
}

func traceThroughBridge(t *testing.T, bridgeFlags, callFlags []string) {
	recv := startOTLP(t)
	args := append(append([]string{"bridge", "--otlp", recv.URL, "--http", "127.0.0.1:0"}, bridgeFlags...), "--", binary, "serve", "mcp")
	bridge := exec.Command(binary, args...)
	bridge.Env = otelEnv()
	url, stop := startBridgeCmd(t, bridge)
	args = append(append([]string{"call", "--otlp", recv.URL, "--url", url}, callFlags...), "--tool", "echo", "--args", `{"text":"traced"}`)
	out := runCmd(t, otelEnv(), args...)
	if !strings.Contains(out, "traced") {
		t.Fatalf("call: %s", out)
	}
	stop() // the bridge flushes, and so does its server, at stdin EOF

	spans := recv.got(t)
	for _, s := range spans {
		t.Log(s)
	}
	const name = "tools/call echo"
	call := find(t, spans, "agentwire call", name, tracepb.Span_SPAN_KIND_CLIENT, nil)
	if call.ParentID != "" {
		t.Errorf("the call's span is not a root: %s", call)
	}
	inTrace := func(s gotSpan) bool { return s.TraceID == call.TraceID }
	bridgeIn := find(t, spans, "agentwire bridge", name, tracepb.Span_SPAN_KIND_SERVER, inTrace)
	bridgeOut := find(t, spans, "agentwire bridge", name, tracepb.Span_SPAN_KIND_CLIENT, inTrace)
	server := find(t, spans, "agentwire serve", name, tracepb.Span_SPAN_KIND_SERVER, inTrace)
	childOf(t, bridgeIn, call)
	childOf(t, bridgeOut, bridgeIn)
	childOf(t, server, bridgeOut)
	// Over HTTP the request is sent by the transport, not a connection
	// whose middleware would see its id.
	mcpAttrs(t, call, false)
	for _, s := range []gotSpan{bridgeIn, bridgeOut, server} {
		mcpAttrs(t, s, true)
	}
	wantEra := "modern"
	if slices.Contains(callFlags, "legacy") {
		wantEra = "legacy"
	}
	if call.Attrs["agentwire.mcp.era"] != wantEra || bridgeIn.Attrs["agentwire.mcp.era"] != wantEra {
		t.Errorf("the call's era: %s\n%s", call, bridgeIn)
	}
	if bridgeIn.Attrs["network.protocol.name"] != "http" {
		t.Errorf("the bridge's HTTP side: network.protocol.name %q", bridgeIn.Attrs["network.protocol.name"])
	}
	if server.Attrs["network.transport"] != "pipe" {
		t.Errorf("the server on stdio: network.transport %q", server.Attrs["network.transport"])
	}
	var traces []string
	for _, s := range spans {
		if s.Name == name && s.TraceID != call.TraceID {
			traces = append(traces, s.String())
		}
	}
	if len(traces) > 0 {
		t.Errorf("spans of the call in another trace: %v", traces)
	}
}

// A tap in front of a stdio server is a hop of the trace: the request's
// span in the tap is the call's child and the server's parent.
func TestOTLPTraceThroughTap(t *testing.T) {
	recv := startOTLP(t)
	out := runCmd(t, otelEnv(), "call", "--otlp", recv.URL, "--tool", "echo", "--args", `{"text":"tapped"}`, "--",
		binary, "tap", "--log", os.DevNull, "--otlp", recv.URL, "--", binary, "serve", "mcp", "--otlp", recv.URL)
	if !strings.Contains(out, "tapped") {
		t.Fatalf("call: %s", out)
	}
	spans := recv.got(t)
	const name = "tools/call echo"
	call := find(t, spans, "agentwire call", name, tracepb.Span_SPAN_KIND_CLIENT, nil)
	inTrace := func(s gotSpan) bool { return s.TraceID == call.TraceID }
	tap := find(t, spans, "agentwire tap", name, tracepb.Span_SPAN_KIND_UNSPECIFIED, inTrace)
	server := find(t, spans, "agentwire serve", name, tracepb.Span_SPAN_KIND_SERVER, inTrace)
	childOf(t, tap, call)
	childOf(t, server, tap)
	mcpAttrs(t, call, true)
	mcpAttrs(t, server, true)
}

// With --otlp the tap passes whole lines through its relay; what is not a
// request comes out byte for byte all the same (garbage, CRLF, invalid
// UTF-8, a line longer than a read, responses, no final newline).
// Without --otlp every byte passes untouched, a request's trace context
// included (TestTapIsByteExact has the rest).
func TestTapRelayKeepsBytes(t *testing.T) {
	recv := startOTLP(t)
	rng := rand.New(rand.NewPCG(3, 4))
	var in bytes.Buffer
	for i := range 2000 {
		switch rng.IntN(5) {
		case 0:
			in.WriteString("not json at all\r\n")
		case 1:
			b := make([]byte, rng.IntN(200))
			for j := range b {
				if b[j] = byte(rng.IntN(256)); b[j] == '\n' {
					b[j] = 0xfe
				}
			}
			in.Write(append(b, '\n'))
		case 2:
			in.WriteString(strings.Repeat("z", 100000+i) + "\n")
		default:
			fmt.Fprintf(&in, `{"jsonrpc":"2.0","id":%d,"result":{"n":%d}}`+"\n", i, i)
		}
	}
	in.WriteString(`{"jsonrpc":"2.0","id":"last","result":{}}`) // no newline
	for _, args := range [][]string{
		{"tap", "--log", os.DevNull, "--otlp", recv.URL, "--", "cat"},
		{"tap", "--log", os.DevNull, "--", "cat"},
	} {
		cmd := exec.Command(binary, args...)
		cmd.Env = otelEnv()
		cmd.Stdin = bytes.NewReader(in.Bytes())
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%q: %v", args, err)
		}
		if !bytes.Equal(out, in.Bytes()) {
			t.Errorf("%q: the output differs from the input (%d vs %d bytes)", args, len(out), len(in.Bytes()))
		}
	}
	request := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","_meta":{"traceparent":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}}}` + "\n"
	cmd := exec.Command(binary, "tap", "--log", os.DevNull, "--", "head", "-c", fmt.Sprint(len(request)))
	cmd.Env = otelEnv()
	cmd.Stdin = strings.NewReader(request)
	if out, err := cmd.Output(); err != nil || string(out) != request {
		t.Errorf("without --otlp a request was changed: %v %q", err, out)
	}
}

var metricsLine = regexp.MustCompile(`metrics at (http://\S+)`)

// startServing runs `agentwire args...` and returns the URLs of its
// --metrics line and of its endpoint line, and a function that stops it
// with SIGTERM and returns its stderr.
func startServing(t *testing.T, env []string, args ...string) (metricsURL, url string, stop func() string) {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Env = env
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(stderr)
	var log strings.Builder
	for metricsURL == "" || url == "" {
		line, err := br.ReadString('\n')
		log.WriteString(line)
		if err != nil {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("no metrics and endpoint lines: %v\n%s", err, log.String())
		}
		if m := metricsLine.FindStringSubmatch(line); m != nil {
			metricsURL = m[1]
		} else if m := endpoint.FindStringSubmatch(line); m != nil {
			url = m[1]
		}
	}
	rest := make(chan string, 1)
	go func() { b, _ := io.ReadAll(br); rest <- string(b) }()
	var once sync.Once
	var all string
	stop = func() string {
		once.Do(func() {
			cmd.Process.Signal(syscall.SIGTERM)
			all = log.String() + <-rest
			cmd.Wait()
		})
		return all
	}
	t.Cleanup(func() { stop() })
	return metricsURL, url, stop
}

// scrape fetches and parses a Prometheus exposition.
func scrape(t *testing.T, url string) map[string]*familyView {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("the exposition does not parse: %v", err)
	}
	out := map[string]*familyView{}
	for name, f := range fams {
		v := &familyView{Type: f.GetType().String()}
		for _, m := range f.Metric {
			labels := map[string]string{}
			for _, l := range m.Label {
				labels[l.GetName()] = l.GetValue()
			}
			count := uint64(0)
			if h := m.GetHistogram(); h != nil {
				count = h.GetSampleCount()
			}
			value := m.GetGauge().GetValue() + m.GetCounter().GetValue()
			v.Series = append(v.Series, series{Labels: labels, Count: count, Value: value})
		}
		out[name] = v
	}
	return out
}

type familyView struct {
	Type   string
	Series []series
}

type series struct {
	Labels map[string]string
	Count  uint64  // a histogram's observations
	Value  float64 // a gauge's or a counter's value
}

// family finds the family named name (an OpenTelemetry name as the
// exporter translates it: dots to underscores, the unit's suffix added).
func family(t *testing.T, fams map[string]*familyView, name string) *familyView {
	t.Helper()
	if f, ok := fams[name]; ok {
		return f
	}
	var names []string
	for n := range fams {
		names = append(names, n)
	}
	t.Fatalf("no metric family %s; the families: %v", name, names)
	return nil
}

// --metrics serves the Prometheus exposition on a listener of its own
// (127.0.0.1 by default), /metrics only: after a tools/call through the
// bridge it holds the bridge's client and server operation durations, by
// method and tool, and it parses with the Prometheus text parser.
func TestMetricsScrape(t *testing.T) {
	metricsURL, url, stop := startServing(t, otelEnv(), "bridge", "--metrics", "0", "--http", "127.0.0.1:0", "--", binary, "serve", "mcp")
	if !strings.HasPrefix(metricsURL, "http://127.0.0.1:") || !strings.HasSuffix(metricsURL, "/metrics") {
		t.Fatalf("metrics at %s", metricsURL)
	}
	runCmd(t, otelEnv(), "call", "--url", url, "--tool", "echo", "--args", `{"text":"counted"}`)
	fams := scrape(t, metricsURL)
	for _, name := range []string{"mcp_server_operation_duration_seconds", "mcp_client_operation_duration_seconds"} {
		f := family(t, fams, name)
		if f.Type != "HISTOGRAM" {
			t.Errorf("%s: %s, want a histogram", name, f.Type)
		}
		found := false
		for _, s := range f.Series {
			if s.Labels["mcp_method_name"] == "tools/call" && s.Labels["gen_ai_tool_name"] == "echo" && s.Count == 1 {
				found = true
			}
		}
		if !found {
			t.Errorf("%s: no tools/call echo series with one observation: %+v", name, f.Series)
		}
	}
	// What the bridge, its HTTP endpoint and its session to the server
	// count is there too.
	for _, name := range []string{"agentwire_bridge_sessions", "agentwire_http_connections", "agentwire_mcp_era_probes_total",
		"agentwire_stdio_stdout_violations_total"} {
		family(t, fams, name)
	}
	resp, err := http.Get(strings.TrimSuffix(metricsURL, "/metrics") + "/other")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET /other: %d, want 404", resp.StatusCode)
	}
	// A page that rebinds its own name to 127.0.0.1 sends its own Host.
	req, _ := http.NewRequest(http.MethodGet, metricsURL, nil)
	req.Host = "attacker.example:80"
	if resp, err := http.DefaultClient.Do(req); err != nil {
		t.Fatal(err)
	} else if resp.Body.Close(); resp.StatusCode != http.StatusMisdirectedRequest {
		t.Errorf("GET /metrics with Host attacker.example: %d, want 421", resp.StatusCode)
	}
	if log := stop(); strings.Contains(log, "not a loopback address") {
		t.Errorf("a loopback --metrics warned: %s", log)
	}
}

// serve mcp --http --metrics: the server's own durations.
func TestMetricsScrapeServeHTTP(t *testing.T) {
	metricsURL, url, _ := startServing(t, otelEnv(), "serve", "mcp", "--http", "127.0.0.1:0", "--metrics", "127.0.0.1:0")
	runCmd(t, otelEnv(), "call", "--url", url, "--tool", "echo", "--args", `{"text":"counted"}`)
	f := family(t, scrape(t, metricsURL), "mcp_server_operation_duration_seconds")
	for _, s := range f.Series {
		if s.Labels["mcp_method_name"] == "tools/call" && s.Labels["gen_ai_tool_name"] == "echo" && s.Count == 1 {
			return
		}
	}
	t.Errorf("no tools/call echo series with one observation: %+v", f.Series)
}

// The standard variables: OTEL_EXPORTER_OTLP_ENDPOINT exports without
// --otlp (the server started inherits it), OTEL_SERVICE_NAME names the
// service, TRACEPARENT parents the call, and OTEL_SDK_DISABLED=true
// exports nothing at all.
func TestOTLPFromEnvironment(t *testing.T) {
	recv := startOTLP(t)
	args := []string{"call", "--tool", "echo", "--args", `{"text":"env"}`, "--", binary, "serve", "mcp"}
	runCmd(t, otelEnv("OTEL_EXPORTER_OTLP_ENDPOINT="+recv.URL), args...)
	spans := recv.got(t)
	call := find(t, spans, "agentwire call", "tools/call echo", tracepb.Span_SPAN_KIND_CLIENT, nil)
	server := find(t, spans, "agentwire serve", "tools/call echo", tracepb.Span_SPAN_KIND_SERVER, nil)
	childOf(t, server, call)
	mcpAttrs(t, call, true)
	recv.mu.Lock()
	posts, metrics := recv.metricPosts, recv.metrics
	recv.mu.Unlock()
	for _, want := range []string{"agentwire call mcp.client.operation.duration", "agentwire call agentwire.process.shutdowns",
		"agentwire call agentwire.mcp.era_probes",
		"agentwire serve mcp.server.operation.duration"} {
		if !metrics[want] {
			t.Errorf("no %s exported (%d exports: %v)", want, posts, metrics)
		}
	}

	recv = startOTLP(t)
	const traceID, parentID = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	runCmd(t, otelEnv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT="+recv.URL+"/v1/traces", "OTEL_SERVICE_NAME=my-host",
		"TRACEPARENT=00-"+traceID+"-"+parentID+"-01"), args...)
	call = find(t, recv.got(t), "my-host", "tools/call echo", tracepb.Span_SPAN_KIND_CLIENT, nil)
	if call.TraceID != traceID || call.ParentID != parentID {
		t.Errorf("TRACEPARENT did not parent the call: %s", call)
	}

	recv = startOTLP(t)
	runCmd(t, otelEnv("OTEL_EXPORTER_OTLP_ENDPOINT="+recv.URL, "OTEL_SDK_DISABLED=true"), args...)
	runCmd(t, otelEnv("OTEL_SDK_DISABLED=true"), append([]string{"call", "--otlp", recv.URL}, args[1:]...)...)
	// Both processes of each call have exited: whatever they would have
	// exported has been.
	if got := recv.got(t); len(got) > 0 {
		t.Errorf("OTEL_SDK_DISABLED=true exported %d spans: %v", len(got), got)
	}
	recv.mu.Lock()
	posts = recv.metricPosts
	recv.mu.Unlock()
	if posts > 0 {
		t.Errorf("OTEL_SDK_DISABLED=true exported metrics %d times", posts)
	}
}

// serve --listen and call --connect: spans on both ends of a TCP
// connection, network.transport tcp, the server's address on the client's.
func TestOTLPTraceOverSocket(t *testing.T) {
	recv := startOTLP(t)
	cmd := exec.Command(binary, "serve", "mcp", "--listen", "tcp:127.0.0.1:0", "--otlp", recv.URL)
	cmd.Env = otelEnv()
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer cmd.Process.Signal(syscall.SIGTERM)
	br := bufio.NewReader(stderr)
	line, err := br.ReadString('\n')
	m := regexp.MustCompile(`listening on tcp:(\S+)`).FindStringSubmatch(line)
	if err != nil || m == nil {
		t.Fatalf("no listening line: %q %v", line, err)
	}
	go io.Copy(io.Discard, br)
	runCmd(t, otelEnv(), "call", "--otlp", recv.URL, "--connect", "tcp:"+m[1], "--tool", "echo", "--args", `{"text":"socket"}`)
	cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("serve --listen after SIGTERM: %v", err)
	}
	spans := recv.got(t)
	call := find(t, spans, "agentwire call", "tools/call echo", tracepb.Span_SPAN_KIND_CLIENT, nil)
	server := find(t, spans, "agentwire serve", "tools/call echo", tracepb.Span_SPAN_KIND_SERVER, nil)
	childOf(t, server, call)
	mcpAttrs(t, call, true)
	mcpAttrs(t, server, true)
	if call.Attrs["network.transport"] != "tcp" || server.Attrs["network.transport"] != "tcp" || call.Attrs["server.address"] != "127.0.0.1" {
		t.Errorf("over TCP:\n%s\n%s", call, server)
	}
}

// A stdio server flushes its spans however it ends: at the end of its
// input, and on the SIGTERM of a client's shutdown ladder, after which it
// ends as the signal would have ended it.
func TestServeFlushesOnEOFAndSignal(t *testing.T) {
	for _, how := range []string{"eof", "sigterm"} {
		t.Run(how, func(t *testing.T) {
			recv := startOTLP(t)
			cmd := exec.Command(binary, "serve", "echo", "--otlp", recv.URL)
			cmd.Env = otelEnv()
			stdin, _ := cmd.StdinPipe()
			stdout, _ := cmd.StdoutPipe()
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			io.WriteString(stdin, `{"jsonrpc":"2.0","id":7,"method":"echo","params":{"x":1}}`+"\n")
			if line, err := bufio.NewReader(stdout).ReadString('\n'); err != nil || !strings.Contains(line, `"id":7`) {
				t.Fatalf("no answer: %q %v", line, err)
			}
			if how == "eof" {
				stdin.Close()
			} else {
				cmd.Process.Signal(syscall.SIGTERM)
			}
			err := cmd.Wait()
			ws := cmd.ProcessState.Sys().(syscall.WaitStatus)
			switch {
			case how == "eof" && err != nil:
				t.Errorf("exit at EOF: %v; stderr: %s", err, stderr.String())
			case how == "sigterm" && (!ws.Signaled() || ws.Signal() != syscall.SIGTERM):
				t.Errorf("after SIGTERM: %v, want the signal's end; stderr: %s", cmd.ProcessState, stderr.String())
			}
			s := find(t, recv.got(t), "agentwire serve", "echo", tracepb.Span_SPAN_KIND_SERVER, nil)
			if s.Attrs["jsonrpc.request.id"] != "7" || s.Attrs["rpc.method"] != "echo" {
				t.Errorf("the echo span: %s", s)
			}
		})
	}
}

// The flags are checked before anything starts: a bad --otlp or
// --metrics is a usage error, and --metrics is for the serving commands.
func TestTelemetryFlagsRefused(t *testing.T) {
	for _, args := range [][]string{
		{"call", "--otlp", "ftp://collector", "--", "true"},
		{"call", "--otlp", "collector:4318", "--", "true"},
		{"call", "--metrics", "0", "--", "true"},
		{"tap", "--otlp", "://", "--", "cat"},
		{"acp", "--otlp", "nope", "--prompt", "hi", "--", "true"},
		{"serve", "echo", "--metrics", "a:b:c"},
		{"bridge", "--http", "0", "--otlp", "http://", "--", "true"},
	} {
		cmd := exec.Command(binary, args...)
		cmd.Env = otelEnv()
		out, err := cmd.CombinedOutput()
		if err == nil || cmd.ProcessState.ExitCode() != 2 {
			t.Errorf("agentwire %q: %v %s", args, err, out)
		}
	}
}

// acp --otlp: the ACP requests of a turn are spans named by method, the
// agent's (serve acp --otlp) their children.
func TestOTLPTraceACP(t *testing.T) {
	recv := startOTLP(t)
	runCmd(t, otelEnv(), "acp", "--otlp", recv.URL, "--prompt", "hi", "--quiet", "--", binary, "serve", "acp", "--otlp", recv.URL)
	spans := recv.got(t)
	client := find(t, spans, "agentwire acp", "session/prompt", tracepb.Span_SPAN_KIND_CLIENT, nil)
	agent := find(t, spans, "agentwire serve", "session/prompt", tracepb.Span_SPAN_KIND_SERVER, nil)
	childOf(t, agent, client)
	if agent.Attrs["rpc.method"] != "session/prompt" {
		t.Errorf("the agent's span: %s", agent)
	}
}
