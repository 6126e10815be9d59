package telemetry_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.uber.org/goleak"

	"github.com/agentwire/agentwire/client"
	"github.com/agentwire/agentwire/mcp"
	"github.com/agentwire/agentwire/mcp/host"
	"github.com/agentwire/agentwire/mcp/server"
	"github.com/agentwire/agentwire/mcp/streamable"
	"github.com/agentwire/agentwire/middleware"
	"github.com/agentwire/agentwire/process"
	"github.com/agentwire/agentwire/rpc"
	"github.com/agentwire/agentwire/telemetry"
)

var metQuiet = slog.New(slog.DiscardHandler)

// metLeakCheck fails the test if it leaves a goroutine behind, checked
// after its cleanups (goroutines running before it began are ignored:
// the package's tests share a binary without a TestMain).
func metLeakCheck(t *testing.T) {
	t.Helper()
	opt := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, opt) })
}

// newMetTestMetrics returns Metrics over a MeterProvider with a manual
// reader, and the reader.
func newMetTestMetrics(t *testing.T) (*telemetry.Metrics, *sdkmetric.ManualReader) {
	t.Helper()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	m, err := telemetry.NewMetrics(&telemetry.Options{MeterProvider: mp})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	return m, reader
}

// metCollected is one collection, by metric name.
type metCollected map[string]metricdata.Metrics

func metCollect(t *testing.T, r *sdkmetric.ManualReader) metCollected {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := metCollected{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			out[m.Name] = m
		}
	}
	return out
}

// value returns the value of name's series whose attributes include
// every one of want, and whether there is one. Sums of int64 and float64
// and histograms (their count) are read.
func (c metCollected) value(name string, want ...attribute.KeyValue) (float64, bool) {
	m, ok := c[name]
	if !ok {
		return 0, false
	}
	match := func(set attribute.Set) bool {
		for _, kv := range want {
			if v, ok := set.Value(kv.Key); !ok || v != kv.Value {
				return false
			}
		}
		return true
	}
	switch d := m.Data.(type) {
	case metricdata.Sum[int64]:
		for _, p := range d.DataPoints {
			if match(p.Attributes) {
				return float64(p.Value), true
			}
		}
	case metricdata.Sum[float64]:
		for _, p := range d.DataPoints {
			if match(p.Attributes) {
				return p.Value, true
			}
		}
	case metricdata.Histogram[float64]:
		for _, p := range d.DataPoints {
			if match(p.Attributes) {
				return float64(p.Count), true
			}
		}
	}
	return 0, false
}

func (c metCollected) want(t *testing.T, name string, v float64, attrs ...attribute.KeyValue) {
	t.Helper()
	got, ok := c.value(name, attrs...)
	if !ok {
		t.Fatalf("%s%v: no series", name, attrs)
	}
	if got != v {
		t.Fatalf("%s%v = %v, want %v", name, attrs, got, v)
	}
}

var metSide = attribute.String("side", "server")

// The output queue of a connection whose peer stopped reading, and the
// time its writer waited (rpc.Stats.OutputQueued, BlockedOnOutput), read
// from a real connection: the gauge shows the bytes waiting, the counter
// the seconds blocked. Once the connection is no longer observed its
// seconds stay counted and its queue is gone.
func TestMetricsReadBackpressureFromAConn(t *testing.T) {
	metLeakCheck(t)
	synctest.Test(t, func(t *testing.T) {
		m, reader := newMetTestMetrics(t)
		release := make(chan struct{})
		peer := rpc.Methods{"tick": func(ctx context.Context, r *rpc.Request) (any, error) {
			<-release
			return nil, nil
		}}
		client, srv := rpc.Pipe(nil, peer,
			&rpc.Options{Logger: metQuiet, OutputQueueBytes: 256},
			&rpc.Options{Logger: metQuiet, MaxConcurrentRequests: 1, MaxQueuedRequests: 1})
		stop := m.ObserveConn(srv, metSide)
		sent := make(chan error, 1)
		go func() {
			for range 20 {
				if err := srv.Notify(context.Background(), "tick", map[string]string{"pad": strings.Repeat("x", 100)}); err != nil {
					sent <- err
					return
				}
			}
			sent <- nil
		}()
		synctest.Wait()
		time.Sleep(2 * time.Second)

		c := metCollect(t, reader)
		queued, ok := c.value(telemetry.MetricRPCOutputQueued, metSide)
		if !ok || queued <= 0 || queued > 256 {
			t.Fatalf("%s = %v (%v), want 1..256 bytes", telemetry.MetricRPCOutputQueued, queued, ok)
		}
		blocked, _ := c.value(telemetry.MetricRPCOutputBlocked, metSide)
		if blocked < 1.999 || blocked > 2 {
			t.Fatalf("%s = %v s, want about 2", telemetry.MetricRPCOutputBlocked, blocked)
		}
		if m := c[telemetry.MetricRPCOutputBlocked]; m.Unit != "s" {
			t.Errorf("unit %q", m.Unit)
		}
		if m := c[telemetry.MetricRPCOutputQueued]; m.Unit != "By" {
			t.Errorf("unit %q", m.Unit)
		}
		if _, ok := c.value(telemetry.MetricRPCPromotions, metSide); !ok {
			t.Errorf("no %s series", telemetry.MetricRPCPromotions)
		}

		close(release)
		if err := <-sent; err != nil {
			t.Fatal(err)
		}
		client.Close()
		srv.Close()
		stop()
		stop() // twice is once

		c = metCollect(t, reader)
		if after, _ := c.value(telemetry.MetricRPCOutputBlocked, metSide); after != blocked {
			t.Fatalf("after stop, %s = %v, want the %v counted before", telemetry.MetricRPCOutputBlocked, after, blocked)
		}
		if v, ok := c.value(telemetry.MetricRPCOutputQueued, metSide); ok {
			t.Fatalf("after stop, %s still reports %v", telemetry.MetricRPCOutputQueued, v)
		}
	})
}

// Two connections observed with the same attributes are one series: their
// counts add up (a refusal on each, two refusals), and the reasons are
// series of their own.
func TestMetricsSumObjectsWithTheSameAttributes(t *testing.T) {
	metLeakCheck(t)
	m, reader := newMetTestMetrics(t)
	for range 2 {
		in, w := io.Pipe()
		var out strings.Builder
		c := rpc.New(in, &metSyncWriter{b: &out}, nil, &rpc.Options{Logger: metQuiet, MaxMessageBytes: 16})
		stop := m.ObserveConn(c, metSide)
		if _, err := w.Write([]byte(`{"jsonrpc":"2.0","id":1,"method":"far-too-long-for-the-limit"}` + "\n")); err != nil {
			t.Fatal(err)
		}
		w.Close()
		c.Wait()
		defer stop()
	}
	c := metCollect(t, reader)
	c.want(t, telemetry.MetricRPCRefusals, 2, metSide, telemetry.KeyRefusalReason.String("message_too_long"))
	c.want(t, telemetry.MetricRPCRefusals, 0, metSide, telemetry.KeyRefusalReason.String("connection_busy"))
}

// metSyncWriter is a strings.Builder safe for the connection's writer.
type metSyncWriter struct{ b *strings.Builder }

func (w *metSyncWriter) Write(p []byte) (int, error) { return w.b.Write(p) }

// A client whose server process crashes: the crash is a lost server and
// a restart, the second crash uses the restarts up, the line the server
// wrote on stdout before dying is a stdout violation each time, and the
// shutdown of the dead server is recorded by the step that ended it.
func TestMetricsReadRestartsFromAClient(t *testing.T) {
	metLeakCheck(t)
	m, reader := newMetTestMetrics(t)
	// A real subprocess: it prints a line that is not JSON-RPC on stdout
	// when it gets a request, and exits 3.
	cmd := process.Command{Path: "/bin/sh", Args: []string{"-c", `read line; echo "DEBUG: crashing"; echo fatal >&2; exit 3`}}
	c, err := client.Start(cmd, &client.Options{
		Restart: &client.RestartPolicy{MaxRestarts: 1, Backoff: time.Millisecond},
		Logger:  metQuiet,
		Process: &process.Options{Grace: 300 * time.Millisecond, Logger: metQuiet},
	})
	if err != nil {
		t.Fatal(err)
	}
	stop := m.ObserveClient(c, metSide)
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.Call(ctx, "crash", nil); !errors.Is(err, client.ErrConnectionLost) {
		t.Fatalf("first call: %v", err)
	}
	if err := c.Ready(ctx); err != nil {
		t.Fatalf("not restarted: %v", err)
	}
	col := metCollect(t, reader)
	col.want(t, telemetry.MetricClientLost, 1, metSide)
	col.want(t, telemetry.MetricClientRestarts, 1, metSide, telemetry.KeyRestartOutcome.String("restarted"))
	col.want(t, telemetry.MetricClientRestarts, 0, metSide, telemetry.KeyRestartOutcome.String("exhausted"))
	col.want(t, telemetry.MetricStdoutViolations, 1, metSide)

	if _, err := c.Call(ctx, "crash", nil); !errors.Is(err, client.ErrConnectionLost) {
		t.Fatalf("second call: %v", err)
	}
	select {
	case <-c.Done():
	case <-ctx.Done():
		t.Fatal("the client did not give up")
	}
	col = metCollect(t, reader)
	col.want(t, telemetry.MetricClientLost, 2, metSide)
	col.want(t, telemetry.MetricClientRestarts, 1, metSide, telemetry.KeyRestartOutcome.String("restarted"))
	col.want(t, telemetry.MetricClientRestarts, 1, metSide, telemetry.KeyRestartOutcome.String("exhausted"))
	col.want(t, telemetry.MetricClientRestarts, 0, metSide, telemetry.KeyRestartOutcome.String("failed"))
	col.want(t, telemetry.MetricStdoutViolations, 2, metSide)

	res := c.Close()
	if res.Outcome != process.Exited {
		t.Fatalf("shutdown outcome %q", res.Outcome)
	}
	m.RecordShutdown(ctx, res, metSide)
	col = metCollect(t, reader)
	col.want(t, telemetry.MetricShutdowns, 1, metSide, telemetry.KeyShutdownOutcome.String("exited"))
	col.want(t, telemetry.MetricShutdownDuration, 1, metSide, telemetry.KeyShutdownOutcome.String("exited"))
}

// metConnect negotiates a session with an in-process MCP server.
func metConnect(t *testing.T, srv *server.Server) *host.Session {
	t.Helper()
	c2sR, c2sW := io.Pipe()
	s2cR, s2cW := io.Pipe()
	conn := rpc.New(c2sR, s2cW, srv.Handler(), srv.ConnOptions(&rpc.Options{Logger: metQuiet}))
	sess, err := host.NewClient(context.Background(), s2cR, c2sW, &host.Options{Transport: &client.Options{Logger: metQuiet}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sess.Close()
		conn.Close()
	})
	return sess
}

// A session's era probe is recorded once, when it is observed: a modern
// server answers server/discover (outcome "result", era modern) and the
// probe's duration lands in the histogram. A connect that failed records
// its probe through RecordConnectError.
func TestMetricsRecordTheEraProbe(t *testing.T) {
	metLeakCheck(t)
	m, reader := newMetTestMetrics(t)
	sess := metConnect(t, server.New(mcp.Implementation{Name: "t", Version: "1"}, nil))
	if sess.Probe() != host.ProbeResult || sess.ProbeDuration() <= 0 {
		t.Fatalf("probe %s in %v", sess.Probe(), sess.ProbeDuration())
	}
	stop := m.ObserveSession(sess, metSide)
	defer stop()
	c := metCollect(t, reader)
	outcome := telemetry.KeyProbeOutcome.String("result")
	c.want(t, telemetry.MetricEraProbes, 1, metSide, outcome, telemetry.KeyEra.String("modern"))
	c.want(t, telemetry.MetricEraProbeDuration, 1, metSide, outcome)
	if u := c[telemetry.MetricEraProbeDuration].Unit; u != "s" {
		t.Errorf("unit %q", u)
	}
	// Over a stream the session's client is observed too.
	c.want(t, telemetry.MetricClientLost, 0, metSide)

	synctest.Test(t, func(t *testing.T) {
		c2sR, c2sW := io.Pipe()
		s2cR, s2cW := io.Pipe()
		go func() { // a server that answers nothing
			_, _ = io.Copy(io.Discard, c2sR)
			s2cW.Close()
		}()
		_, err := host.NewClient(context.Background(), s2cR, c2sW, &host.Options{
			Eras: mcp.ModernOnly, ProbeTimeout: time.Second, Transport: &client.Options{Logger: metQuiet},
		})
		if err == nil {
			t.Fatal("connected to a silent server")
		}
		m.RecordConnectError(context.Background(), err, metSide)
	})
	c = metCollect(t, reader)
	timeout := telemetry.KeyProbeOutcome.String("timeout")
	c.want(t, telemetry.MetricEraProbes, 1, metSide, timeout)
	c.want(t, telemetry.MetricEraProbeDuration, 1, metSide, timeout)
}

// What a Streamable HTTP handler refused, by limit (413 for a body over
// MaxBodyBytes) and otherwise (404 for another path).
func TestMetricsReadHTTPRefusals(t *testing.T) {
	metLeakCheck(t)
	m, reader := newMetTestMetrics(t)
	srv := server.New(mcp.Implementation{Name: "t", Version: "1"}, nil)
	h := streamable.NewHandler(srv, &streamable.Options{MaxBodyBytes: 64, Logger: metQuiet})
	stop := m.ObserveHTTP(h, metSide)
	defer stop()
	for _, r := range []*http.Request{
		httptest.NewRequest(http.MethodPost, "/elsewhere", strings.NewReader("{}")),
		httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"pad":"`+strings.Repeat("x", 100)+`"}}`)),
	} {
		r.Host = "localhost"
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("Accept", "application/json, text/event-stream")
		h.ServeHTTP(httptest.NewRecorder(), r)
	}
	c := metCollect(t, reader)
	c.want(t, telemetry.MetricHTTPRejections, 1, metSide, telemetry.KeyRejectionReason.String("not_found"))
	c.want(t, telemetry.MetricHTTPRefusals, 1, metSide, telemetry.KeyRefusalReason.String("max_body_bytes"))
	c.want(t, telemetry.MetricHTTPRefusals, 0, metSide, telemetry.KeyRefusalReason.String("max_in_flight"))
	c.want(t, telemetry.MetricHTTPRequests, 0, metSide)
}

// A server's tasks: the series exist from the start, at zero.
func TestMetricsReadTaskStats(t *testing.T) {
	m, reader := newMetTestMetrics(t)
	stop := m.ObserveServer(server.New(mcp.Implementation{Name: "t", Version: "1"}, nil), metSide)
	defer stop()
	c := metCollect(t, reader)
	c.want(t, telemetry.MetricTasksRunning, 0, metSide)
	c.want(t, telemetry.MetricTasksEnded, 0, metSide, telemetry.KeyTaskStatus.String("completed"))
	c.want(t, telemetry.MetricTasksRefusals, 0, metSide, telemetry.KeyRefusalReason.String("max_running"))
}

// A Limiter's refusals, by reason and direction: a second request within
// a rate of one a minute is refused.
func TestMetricsReadLimiterRefusals(t *testing.T) {
	metLeakCheck(t)
	m, reader := newMetTestMetrics(t)
	lim := middleware.NewLimit(&middleware.LimitOptions{Default: middleware.Limit{Rate: 1.0 / 60, Burst: 1}, Logger: metQuiet})
	stop := m.ObserveLimiter(lim, metSide)
	defer stop()
	client, srv := rpc.Pipe(rpc.Methods{"ping": func(context.Context, *rpc.Request) (any, error) { return "pong", nil }}, nil,
		&rpc.Options{Logger: metQuiet, Middleware: []rpc.Middleware{lim.Middleware()}}, &rpc.Options{Logger: metQuiet})
	defer srv.Close()
	defer client.Close()
	if _, err := client.Call(context.Background(), "ping", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := client.Call(context.Background(), "ping", nil); err == nil {
		t.Fatal("the second request was not refused")
	}
	c := metCollect(t, reader)
	in := telemetry.KeyDirection.String("inbound")
	c.want(t, telemetry.MetricLimitRefusals, 1, metSide, in, telemetry.KeyRefusalReason.String("rate_limited"))
	c.want(t, telemetry.MetricLimitRefusals, 0, metSide, in, telemetry.KeyRefusalReason.String("concurrency_limited"))
	c.want(t, telemetry.MetricLimitRefusals, 0, metSide, telemetry.KeyDirection.String("outbound"), telemetry.KeyRefusalReason.String("rate_limited"))
}

// A nil *Metrics observes nothing, and its stop functions are no-ops.
func TestNilMetricsDoNothing(t *testing.T) {
	var m *telemetry.Metrics
	m.ObserveConn(nil)()
	m.ObserveClient(nil)()
	m.ObserveSession(nil)()
	m.ObserveHTTP(nil)()
	m.ObserveBridge(nil)()
	m.ObserveServer(nil)()
	m.ObserveLimiter(nil)()
	m.ObserveTimeouts(nil)()
	m.RecordShutdown(context.Background(), process.ShutdownResult{Outcome: process.Killed})
	m.RecordConnectError(context.Background(), errors.New("x"))
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
}

// After Close nothing is read any more.
func TestMetricsCloseUnregisters(t *testing.T) {
	m, reader := newMetTestMetrics(t)
	stop := m.ObserveServer(server.New(mcp.Implementation{Name: "t", Version: "1"}, nil), metSide)
	defer stop()
	if _, ok := metCollect(t, reader).value(telemetry.MetricTasksRunning, metSide); !ok {
		t.Fatal("no series before Close")
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if v, ok := metCollect(t, reader).value(telemetry.MetricTasksRunning, metSide); ok {
		t.Fatalf("a series after Close: %v", v)
	}
}
