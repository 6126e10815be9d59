package telemetry_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	colmetricpb "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	"google.golang.org/protobuf/proto"

	"github.com/agentwire/agentwire/process"
	"github.com/agentwire/agentwire/telemetry"
)

// otlpReceiver is an OTLP/HTTP collector the test starts: it decodes what
// arrives at /v1/traces and /v1/metrics under its prefix.
type otlpReceiver struct {
	srv *httptest.Server

	mu      sync.Mutex
	traces  []*coltracepb.ExportTraceServiceRequest
	metrics []*colmetricpb.ExportMetricsServiceRequest
	paths   []string
	headers []http.Header
}

func startOTLPReceiver(t *testing.T, prefix string) *otlpReceiver {
	t.Helper()
	r := &otlpReceiver{}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, err := io.ReadAll(req.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if ct := req.Header.Get("Content-Type"); ct != "application/x-protobuf" {
			http.Error(w, "content type "+ct, http.StatusUnsupportedMediaType)
			return
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		r.paths = append(r.paths, req.URL.Path)
		r.headers = append(r.headers, req.Header.Clone())
		var resp proto.Message
		switch req.URL.Path {
		case prefix + "/v1/traces":
			m := &coltracepb.ExportTraceServiceRequest{}
			if err := proto.Unmarshal(body, m); err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			r.traces = append(r.traces, m)
			resp = &coltracepb.ExportTraceServiceResponse{}
		case prefix + "/v1/metrics":
			m := &colmetricpb.ExportMetricsServiceRequest{}
			if err := proto.Unmarshal(body, m); err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			r.metrics = append(r.metrics, m)
			resp = &colmetricpb.ExportMetricsServiceResponse{}
		default:
			http.NotFound(w, req)
			return
		}
		out, _ := proto.Marshal(resp)
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.Header().Set("Connection", "close") // no keep-alive goroutines left behind
		w.Write(out)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func otlpServiceName(res *resourcepb.Resource) string {
	for _, kv := range res.GetAttributes() {
		if kv.GetKey() == "service.name" {
			return kv.GetValue().GetStringValue()
		}
	}
	return ""
}

func otlpResourceAttr(res *resourcepb.Resource, key string) *commonpb.AnyValue {
	for _, kv := range res.GetAttributes() {
		if kv.GetKey() == key {
			return kv.GetValue()
		}
	}
	return nil
}

// One span and one metric exported over OTLP/HTTP to a receiver the test
// starts, from a base URL with a path prefix: both signals arrive at
// their paths under it, with the resource's service.name and the
// attributes of OTEL_RESOURCE_ATTRIBUTES, the headers of
// OTEL_EXPORTER_OTLP_HEADERS, the span's name and the metric's name.
// Shutdown is what sends them: it flushes within its context.
func TestOTLPExport(t *testing.T) {
	metLeakCheck(t)
	rcv := startOTLPReceiver(t, "/otel")
	ctx := context.Background()
	s, err := telemetry.Start(ctx, telemetry.SetupOptions{
		ServiceName: "otlp-test",
		OTLP:        rcv.srv.URL + "/otel",
		Getenv: metEnv(map[string]string{
			"OTEL_EXPORTER_OTLP_HEADERS": "authorization=Bearer%20secret-token",
			"OTEL_RESOURCE_ATTRIBUTES":   "deployment.environment.name=test,team=wire%2Fteam",
			// No periodic export during the test: Shutdown sends the metrics.
			"OTEL_METRIC_EXPORT_INTERVAL": "3600000",
		}),
	})
	if err != nil {
		t.Fatal(err)
	}
	if !s.Tracing || !s.Metrics || s.Prometheus != nil {
		t.Fatalf("Setup = %+v", s)
	}
	_, span := s.TracerProvider.Tracer("test").Start(ctx, "tools/call echo")
	span.End()
	m, err := telemetry.NewMetrics(s.Options(telemetry.MCP, telemetry.Pipe))
	if err != nil {
		t.Fatal(err)
	}
	m.RecordShutdown(ctx, process.ShutdownResult{Outcome: process.Terminated, Duration: 20 * time.Millisecond})
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := s.Shutdown(sctx); err != nil {
		t.Fatal(err)
	}
	m.Close()

	rcv.mu.Lock()
	defer rcv.mu.Unlock()
	if len(rcv.traces) == 0 || len(rcv.metrics) == 0 {
		t.Fatalf("received %d trace and %d metric requests (paths %v)", len(rcv.traces), len(rcv.metrics), rcv.paths)
	}
	for _, h := range rcv.headers {
		if got := h.Get("Authorization"); got != "Bearer secret-token" {
			t.Errorf("Authorization = %q", got)
		}
	}
	rs := rcv.traces[0].GetResourceSpans()[0]
	if got := otlpServiceName(rs.GetResource()); got != "otlp-test" {
		t.Errorf("the spans' service.name = %q", got)
	}
	if v := otlpResourceAttr(rs.GetResource(), "team"); v.GetStringValue() != "wire/team" {
		t.Errorf("the resource's team = %v", v)
	}
	if v := otlpResourceAttr(rs.GetResource(), "telemetry.sdk.language"); v.GetStringValue() != "go" {
		t.Errorf("the resource's telemetry.sdk.language = %v", v)
	}
	if name := rs.GetScopeSpans()[0].GetSpans()[0].GetName(); name != "tools/call echo" {
		t.Errorf("span name %q", name)
	}
	rm := rcv.metrics[len(rcv.metrics)-1].GetResourceMetrics()[0]
	if got := otlpServiceName(rm.GetResource()); got != "otlp-test" {
		t.Errorf("the metrics' service.name = %q", got)
	}
	var found bool
	for _, sm := range rm.GetScopeMetrics() {
		for _, mt := range sm.GetMetrics() {
			if mt.GetName() == telemetry.MetricShutdowns {
				found = true
				if mt.GetUnit() != "{shutdown}" {
					t.Errorf("unit %q", mt.GetUnit())
				}
				dp := mt.GetSum().GetDataPoints()[0]
				if dp.GetAsInt() != 1 {
					t.Errorf("%s = %d", mt.GetName(), dp.GetAsInt())
				}
			}
		}
	}
	if !found {
		t.Errorf("no %s among the exported metrics", telemetry.MetricShutdowns)
	}
}

// A URL ending in /v1/traces names the traces endpoint; the metrics go
// beside it, to /v1/metrics.
func TestOTLPTracesURLPutsMetricsBesideIt(t *testing.T) {
	metLeakCheck(t)
	rcv := startOTLPReceiver(t, "/collector")
	ctx := context.Background()
	s, err := telemetry.Start(ctx, telemetry.SetupOptions{
		OTLP:   rcv.srv.URL + "/collector/v1/traces",
		Getenv: metEnv(map[string]string{"OTEL_METRIC_EXPORT_INTERVAL": "3600000"}),
	})
	if err != nil {
		t.Fatal(err)
	}
	_, span := s.TracerProvider.Tracer("test").Start(ctx, "ping")
	span.End()
	m, err := telemetry.NewMetrics(s.Options(telemetry.MCP, telemetry.Pipe))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	m.RecordShutdown(ctx, process.ShutdownResult{Outcome: process.Exited})
	if err := s.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	rcv.mu.Lock()
	defer rcv.mu.Unlock()
	if len(rcv.traces) != 1 || len(rcv.metrics) == 0 {
		t.Fatalf("paths %v", rcv.paths)
	}
	if got := otlpServiceName(rcv.traces[0].GetResourceSpans()[0].GetResource()); got != "agentwire" {
		t.Errorf("default service.name = %q", got)
	}
}

// The environment's endpoint, when SetupOptions.OTLP is empty: a
// per-signal one is used as it is.
func TestOTLPEndpointFromTheEnvironment(t *testing.T) {
	metLeakCheck(t)
	rcv := startOTLPReceiver(t, "")
	ctx := context.Background()
	s, err := telemetry.Start(ctx, telemetry.SetupOptions{Getenv: metEnv(map[string]string{
		"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": rcv.srv.URL + "/v1/traces",
		"OTEL_SERVICE_NAME":                  "from-env",
	})})
	if err != nil {
		t.Fatal(err)
	}
	if !s.Tracing || s.Metrics {
		t.Fatalf("Tracing %v Metrics %v: want traces only", s.Tracing, s.Metrics)
	}
	_, span := s.TracerProvider.Tracer("test").Start(ctx, "ping")
	span.End()
	if err := s.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	rcv.mu.Lock()
	defer rcv.mu.Unlock()
	if len(rcv.traces) != 1 {
		t.Fatalf("paths %v", rcv.paths)
	}
	if got := otlpServiceName(rcv.traces[0].GetResourceSpans()[0].GetResource()); got != "from-env" {
		t.Errorf("service.name = %q", got)
	}
}
