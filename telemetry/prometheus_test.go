package telemetry_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"runtime"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/agentwire/agentwire/process"
	"github.com/agentwire/agentwire/rpc"
	"github.com/agentwire/agentwire/telemetry"
)

// metEnv is a Getenv over a map: the tests never read the process's
// environment.
func metEnv(vars map[string]string) func(string) string {
	return func(k string) string { return vars[k] }
}

// scrape fetches the exposition and parses it with the Prometheus text
// parser.
func metScrape(t *testing.T, h http.Handler) map[string]*dto.MetricFamily {
	t.Helper()
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
	req.Header.Set("Accept", "text/plain; version=0.0.4")
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		t.Fatalf("scrape: %d %s", rec.Code, rec.Body)
	}
	if ct := rec.Header().Get("Content-Type"); ct == "" || ct[:10] != "text/plain" {
		t.Fatalf("Content-Type %q", ct)
	}
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(rec.Body)
	if err != nil {
		t.Fatalf("the exposition does not parse: %v", err)
	}
	return fams
}

func metLabel(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// family returns the family called name, of type typ.
func metFamily(t *testing.T, fams map[string]*dto.MetricFamily, name string, typ dto.MetricType) *dto.MetricFamily {
	t.Helper()
	f, ok := fams[name]
	if !ok {
		var names []string
		for n := range fams {
			names = append(names, n)
		}
		t.Fatalf("no family %s; have %v", name, names)
	}
	if f.GetType() != typ {
		t.Fatalf("%s is a %s, want %s", name, f.GetType(), typ)
	}
	return f
}

// A Prometheus scrape of a Setup's handler, parsed by the Prometheus text
// parser: agentwire's metrics under their translated names (the unit and
// _total added, dots made underscores), attributes as labels, the
// shutdown histogram with its buckets, and the resource's service.name
// in target_info.
func TestPrometheusScrape(t *testing.T) {
	metLeakCheck(t)
	ctx := context.Background()
	s, err := telemetry.Start(ctx, telemetry.SetupOptions{
		ServiceName: "agentwire-test",
		Prometheus:  true,
		Getenv:      metEnv(nil),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown(ctx)
	if s.Prometheus == nil || !s.Metrics || s.Tracing {
		t.Fatalf("Setup = %+v", s)
	}
	m, err := telemetry.NewMetrics(s.Options(telemetry.MCP, telemetry.Pipe))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()

	client, srv := rpc.Pipe(rpc.Methods{"echo": func(ctx context.Context, r *rpc.Request) (any, error) {
		return r.Params, nil
	}}, nil, &rpc.Options{Logger: metQuiet}, &rpc.Options{Logger: metQuiet})
	defer client.Close()
	defer srv.Close()
	stop := m.ObserveConn(srv, metSide)
	defer stop()
	if _, err := client.Call(ctx, "echo", []int{1}); err != nil {
		t.Fatal(err)
	}
	m.RecordShutdown(ctx, process.ShutdownResult{Outcome: process.Killed, Duration: 1500 * time.Millisecond}, metSide)

	fams := metScrape(t, s.Prometheus)

	queued := metFamily(t, fams, "agentwire_rpc_output_queued_bytes", dto.MetricType_GAUGE)
	if len(queued.Metric) != 1 || metLabel(queued.Metric[0], "side") != "server" || queued.Metric[0].GetGauge().GetValue() != 0 {
		t.Fatalf("queued bytes: %v", queued.Metric)
	}
	metFamily(t, fams, "agentwire_rpc_output_blocked_seconds_total", dto.MetricType_COUNTER)
	refusals := metFamily(t, fams, "agentwire_rpc_refusals_total", dto.MetricType_COUNTER)
	reasons := map[string]bool{}
	for _, mt := range refusals.Metric {
		reasons[metLabel(mt, "agentwire_refusal_reason")] = true
	}
	for _, r := range []string{"connection_busy", "too_many_streams", "message_too_long"} {
		if !reasons[r] {
			t.Errorf("no refusals series with reason %q: %v", r, reasons)
		}
	}

	// The runtime's and the process's own families are in the exposition.
	if g := metFamily(t, fams, "go_goroutines", dto.MetricType_GAUGE); g.Metric[0].GetGauge().GetValue() < 1 {
		t.Errorf("go_goroutines = %v", g.Metric[0].GetGauge().GetValue())
	}
	metFamily(t, fams, "go_memstats_stack_inuse_bytes", dto.MetricType_GAUGE)
	if runtime.GOOS == "linux" {
		metFamily(t, fams, "process_resident_memory_bytes", dto.MetricType_GAUGE)
	}

	shut := metFamily(t, fams, "agentwire_process_shutdowns_total", dto.MetricType_COUNTER)
	if len(shut.Metric) != 1 || metLabel(shut.Metric[0], "agentwire_shutdown_outcome") != "killed" || shut.Metric[0].GetCounter().GetValue() != 1 {
		t.Fatalf("shutdowns: %v", shut.Metric)
	}
	hist := metFamily(t, fams, "agentwire_process_shutdown_duration_seconds", dto.MetricType_HISTOGRAM)
	h := hist.Metric[0].GetHistogram()
	if h.GetSampleCount() != 1 || h.GetSampleSum() != 1.5 {
		t.Fatalf("histogram count %d sum %v", h.GetSampleCount(), h.GetSampleSum())
	}
	// The _bucket series: 1.5 s is above le=1 and within le=2.5.
	buckets := map[float64]uint64{}
	for _, b := range h.GetBucket() {
		buckets[b.GetUpperBound()] = b.GetCumulativeCount()
	}
	if buckets[1] != 0 || buckets[2.5] != 1 || len(buckets) < 10 {
		t.Fatalf("buckets %v", buckets)
	}

	info := metFamily(t, fams, "target_info", dto.MetricType_GAUGE)
	if got := metLabel(info.Metric[0], "service_name"); got != "agentwire-test" {
		t.Fatalf("target_info service_name = %q", got)
	}
}

// Two Setups never share a registry (neither is the default one): each
// exposition has its own metrics.
func TestPrometheusRegistriesAreSeparate(t *testing.T) {
	metLeakCheck(t)
	ctx := context.Background()
	var setups [2]*telemetry.Setup
	for i := range setups {
		s, err := telemetry.Start(ctx, telemetry.SetupOptions{Prometheus: true, Getenv: metEnv(nil)})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Shutdown(ctx)
		setups[i] = s
	}
	m, err := telemetry.NewMetrics(setups[0].Options(telemetry.MCP, telemetry.Pipe))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	m.RecordShutdown(ctx, process.ShutdownResult{Outcome: process.Exited, Duration: time.Millisecond})
	if _, ok := metScrape(t, setups[0].Prometheus)["agentwire_process_shutdowns_total"]; !ok {
		t.Fatal("the first Setup lacks its metric")
	}
	if _, ok := metScrape(t, setups[1].Prometheus)["agentwire_process_shutdowns_total"]; ok {
		t.Fatal("the second Setup shows the first one's metric")
	}
}
