package telemetry

import (
	"context"
	"errors"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

func setupEnv(vars map[string]string) func(string) string {
	return func(k string) string { return vars[k] }
}

func sortedFields(c *setupConfig) []string {
	f := slices.Clone(c.propagator.Fields())
	slices.Sort(f)
	return f
}

// The --otlp URL rules: a base URL gets /v1/traces and /v1/metrics, a
// signal's URL puts the other beside it, http and https only; every
// error matches ErrConfig and shows no credentials.
func TestOTLPURLRules(t *testing.T) {
	for _, c := range []struct {
		in              string
		traces, metrics string
		err             string // a part of the error; "" for none
		secret          string // must not appear in the error
	}{
		{in: "http://collector:4318", traces: "http://collector:4318/v1/traces", metrics: "http://collector:4318/v1/metrics"},
		{in: "http://collector:4318/", traces: "http://collector:4318/v1/traces", metrics: "http://collector:4318/v1/metrics"},
		{in: "HTTPS://collector/prefix", traces: "https://collector/prefix/v1/traces", metrics: "https://collector/prefix/v1/metrics"},
		{in: "http://127.0.0.1:4318/v1/traces", traces: "http://127.0.0.1:4318/v1/traces", metrics: "http://127.0.0.1:4318/v1/metrics"},
		{in: "http://h/otel/v1/traces/", traces: "http://h/otel/v1/traces", metrics: "http://h/otel/v1/metrics"},
		{in: "http://h/otel/v1/metrics", traces: "http://h/otel/v1/traces", metrics: "http://h/otel/v1/metrics"},
		{in: "http://[::1]:4318", traces: "http://[::1]:4318/v1/traces", metrics: "http://[::1]:4318/v1/metrics"},
		{in: "grpc://collector:4317", err: `scheme "grpc" is not supported`},
		{in: "localhost:4318", err: "not supported"},
		{in: "collector", err: "want an http:// or https:// URL"},
		{in: "http:///v1/traces", err: "no host"},
		{in: "http://user:hunter2@collector:4318", err: "credentials in the URL", secret: "hunter2"},
		{in: "http://hunter2@collector:4318", err: "credentials in the URL", secret: "hunter2"},
		{in: "http://collector:4318/v1/traces?token=hunter2", err: "query", secret: "hunter2"},
		{in: "http://collector:4318/#hunter2", err: "fragment", secret: "hunter2"},
		{in: "http://us er:hunter2@collector", err: "not a URL", secret: "hunter2"},
		{in: "http://collector:port", err: "not a URL"},
	} {
		tr, mt, err := otlpURLs(c.in)
		if c.err == "" {
			if err != nil || tr != c.traces || mt != c.metrics {
				t.Errorf("%q: %q %q %v, want %q %q", c.in, tr, mt, err, c.traces, c.metrics)
			}
			continue
		}
		if err == nil {
			t.Errorf("%q: no error, got %q %q", c.in, tr, mt)
			continue
		}
		if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), c.err) {
			t.Errorf("%q: error %q, want ErrConfig and %q", c.in, err, c.err)
		}
		if c.secret != "" && strings.Contains(err.Error(), c.secret) {
			t.Errorf("%q: the error shows the secret: %q", c.in, err)
		}
	}
}

func TestRedactURL(t *testing.T) {
	for in, want := range map[string]string{
		"http://u:p@h:1/x?q=1#f": "http://xxxxx@h:1/x?xxxxx",
		"http://h/x#frag":        "http://h/x#xxxxx",
		"u:p@h":                  "xxxxx@h",
		"http://a@b@h/p@q":       "http://xxxxx@h/p@q",
		"http://h:4318":          "http://h:4318",
	} {
		if got := redactURL(in); got != want {
			t.Errorf("redactURL(%q) = %q, want %q", in, got, want)
		}
	}
}

// The environment, read through an injected Getenv: what is exported
// where, and every value Start cannot use is an ErrConfig naming the
// variable (and never a header's value).
func TestSetupEnvironment(t *testing.T) {
	const base = "http://collector:4318"
	for _, c := range []struct {
		name  string
		otlp  string
		vars  map[string]string
		check func(t *testing.T, c *setupConfig)
		err   string // a part of the error
		not   string // must not appear in the error
	}{
		{name: "nothing set exports nothing", check: func(t *testing.T, c *setupConfig) {
			if c.traces.url != "" || c.metrics.url != "" || c.disabled {
				t.Fatalf("%+v", c)
			}
			if got := sortedFields(c); !slices.Equal(got, []string{"baggage", "traceparent", "tracestate"}) {
				t.Fatalf("fields %v", got)
			}
			if c.interval != 60*time.Second || c.timeout != 30*time.Second {
				t.Fatalf("interval %v timeout %v", c.interval, c.timeout)
			}
		}},
		{name: "the flag exports both", otlp: base, check: func(t *testing.T, c *setupConfig) {
			if c.traces.url != base+"/v1/traces" || c.metrics.url != base+"/v1/metrics" {
				t.Fatalf("%q %q", c.traces.url, c.metrics.url)
			}
			if c.traces.timeout != 10*time.Second || c.traces.gzip || len(c.traces.headers) != 0 {
				t.Fatalf("%+v", c.traces)
			}
		}},
		{name: "the flag wins over the environment", otlp: base, vars: map[string]string{
			"OTEL_EXPORTER_OTLP_ENDPOINT": "http://elsewhere:4318",
		}, check: func(t *testing.T, c *setupConfig) {
			if c.traces.url != base+"/v1/traces" {
				t.Fatalf("%q", c.traces.url)
			}
		}},
		{name: "base endpoint", vars: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": base + "/otel/"}, check: func(t *testing.T, c *setupConfig) {
			if c.traces.url != base+"/otel/v1/traces" || c.metrics.url != base+"/otel/v1/metrics" {
				t.Fatalf("%q %q", c.traces.url, c.metrics.url)
			}
		}},
		{name: "per-signal endpoints as they are", vars: map[string]string{
			"OTEL_EXPORTER_OTLP_ENDPOINT":         base,
			"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT":  "https://traces.example/custom",
			"OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": "https://metrics.example",
		}, check: func(t *testing.T, c *setupConfig) {
			if c.traces.url != "https://traces.example/custom" || c.metrics.url != "https://metrics.example/" {
				t.Fatalf("%q %q", c.traces.url, c.metrics.url)
			}
		}},
		{name: "traces only", vars: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": base + "/v1/traces"}, check: func(t *testing.T, c *setupConfig) {
			if c.traces.url == "" || c.metrics.url != "" {
				t.Fatalf("%q %q", c.traces.url, c.metrics.url)
			}
		}},
		{name: "exporter none", otlp: base, vars: map[string]string{"OTEL_TRACES_EXPORTER": "none"}, check: func(t *testing.T, c *setupConfig) {
			if c.traces.url != "" || c.metrics.url == "" {
				t.Fatalf("%q %q", c.traces.url, c.metrics.url)
			}
		}},
		{name: "exporter otlp without an endpoint", vars: map[string]string{"OTEL_METRICS_EXPORTER": "otlp"}, check: func(t *testing.T, c *setupConfig) {
			if c.traces.url != "" || c.metrics.url != "http://localhost:4318/v1/metrics" {
				t.Fatalf("%q %q", c.traces.url, c.metrics.url)
			}
		}},
		{name: "exporter prometheus", vars: map[string]string{"OTEL_METRICS_EXPORTER": "prometheus"}, err: "OTEL_METRICS_EXPORTER"},
		{name: "exporter console", vars: map[string]string{"OTEL_TRACES_EXPORTER": "console"}, err: `exporter "console" is not supported`},
		{name: "headers, timeout, compression", otlp: base, vars: map[string]string{
			"OTEL_EXPORTER_OTLP_HEADERS":             "authorization=Bearer%20tok, x-tenant = a%2Cb",
			"OTEL_EXPORTER_OTLP_METRICS_HEADERS":     "x-only=metrics",
			"OTEL_EXPORTER_OTLP_TIMEOUT":             "2500",
			"OTEL_EXPORTER_OTLP_TRACES_TIMEOUT":      "700",
			"OTEL_EXPORTER_OTLP_COMPRESSION":         "gzip",
			"OTEL_EXPORTER_OTLP_METRICS_COMPRESSION": "none",
		}, check: func(t *testing.T, c *setupConfig) {
			if c.traces.headers["authorization"] != "Bearer tok" || c.traces.headers["x-tenant"] != "a,b" {
				t.Fatalf("traces headers %v", c.traces.headers)
			}
			if len(c.metrics.headers) != 1 || c.metrics.headers["x-only"] != "metrics" {
				t.Fatalf("metrics headers %v (the signal's own replace the general ones)", c.metrics.headers)
			}
			if c.traces.timeout != 700*time.Millisecond || c.metrics.timeout != 2500*time.Millisecond {
				t.Fatalf("timeouts %v %v", c.traces.timeout, c.metrics.timeout)
			}
			if !c.traces.gzip || c.metrics.gzip {
				t.Fatalf("gzip %v %v", c.traces.gzip, c.metrics.gzip)
			}
		}},
		{name: "a bad header hides its value", otlp: base, vars: map[string]string{"OTEL_EXPORTER_OTLP_HEADERS": "authorization=Bearer%zzsecret"},
			err: "OTEL_EXPORTER_OTLP_HEADERS", not: "secret"},
		{name: "a header without =", otlp: base, vars: map[string]string{"OTEL_EXPORTER_OTLP_HEADERS": "a=b,tokensecret"},
			err: "entry 2 is not key=value", not: "secret"},
		{name: "protocol http/protobuf", otlp: base, vars: map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"}},
		{name: "protocol grpc", otlp: base, vars: map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"},
			err: `OTEL_EXPORTER_OTLP_PROTOCOL="grpc": only http/protobuf is supported`},
		{name: "protocol http/json for traces", otlp: base, vars: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/json"},
			err: "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"},
		{name: "protocol grpc while nothing is exported", vars: map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}},
		{name: "a bad endpoint", vars: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "collector:4317"}, err: "OTEL_EXPORTER_OTLP_ENDPOINT"},
		{name: "an endpoint with credentials", vars: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "https://me:hunter2@c/v1/traces"},
			err: "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", not: "hunter2"},
		{name: "a bad timeout", otlp: base, vars: map[string]string{"OTEL_EXPORTER_OTLP_TIMEOUT": "10s"}, err: `OTEL_EXPORTER_OTLP_TIMEOUT="10s"`},
		{name: "a bad compression", otlp: base, vars: map[string]string{"OTEL_EXPORTER_OTLP_COMPRESSION": "zstd"}, err: "OTEL_EXPORTER_OTLP_COMPRESSION"},
		{name: "interval", vars: map[string]string{"OTEL_METRIC_EXPORT_INTERVAL": "1500", "OTEL_METRIC_EXPORT_TIMEOUT": "700"}, check: func(t *testing.T, c *setupConfig) {
			if c.interval != 1500*time.Millisecond || c.timeout != 700*time.Millisecond {
				t.Fatalf("%v %v", c.interval, c.timeout)
			}
		}},
		{name: "a bad interval", vars: map[string]string{"OTEL_METRIC_EXPORT_INTERVAL": "-5"}, err: "OTEL_METRIC_EXPORT_INTERVAL"},
		{name: "propagators tracecontext", vars: map[string]string{"OTEL_PROPAGATORS": "tracecontext"}, check: func(t *testing.T, c *setupConfig) {
			if got := sortedFields(c); !slices.Equal(got, []string{"traceparent", "tracestate"}) {
				t.Fatalf("fields %v", got)
			}
		}},
		{name: "propagators none", vars: map[string]string{"OTEL_PROPAGATORS": "none"}, check: func(t *testing.T, c *setupConfig) {
			if got := c.propagator.Fields(); len(got) != 0 {
				t.Fatalf("fields %v", got)
			}
		}},
		{name: "propagators b3", vars: map[string]string{"OTEL_PROPAGATORS": "tracecontext,b3"}, err: `propagator "b3" is not supported`},
		{name: "propagators none and baggage", vars: map[string]string{"OTEL_PROPAGATORS": "none,baggage"}, err: "none cannot be combined"},
		{name: "sampler default", otlp: base, check: func(t *testing.T, c *setupConfig) {
			if d := c.sampler.Description(); !strings.HasPrefix(d, "ParentBased{root:AlwaysOnSampler") {
				t.Fatalf("sampler %s", d)
			}
		}},
		{name: "sampler ratio", otlp: base, vars: map[string]string{"OTEL_TRACES_SAMPLER": "parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG": "0.25"}, check: func(t *testing.T, c *setupConfig) {
			if d := c.sampler.Description(); !strings.Contains(d, "TraceIDRatioBased{0.25}") {
				t.Fatalf("sampler %s", d)
			}
		}},
		{name: "sampler always_off", otlp: base, vars: map[string]string{"OTEL_TRACES_SAMPLER": "always_off"}, check: func(t *testing.T, c *setupConfig) {
			if d := c.sampler.Description(); d != "AlwaysOffSampler" {
				t.Fatalf("sampler %s", d)
			}
		}},
		{name: "sampler bad ratio", otlp: base, vars: map[string]string{"OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_TRACES_SAMPLER_ARG": "2"}, err: "OTEL_TRACES_SAMPLER_ARG"},
		{name: "sampler jaeger_remote", otlp: base, vars: map[string]string{"OTEL_TRACES_SAMPLER": "jaeger_remote"}, err: `OTEL_TRACES_SAMPLER="jaeger_remote": not supported`},
		{name: "batch and limits", otlp: base, vars: map[string]string{
			"OTEL_BSP_MAX_QUEUE_SIZE":           "10",
			"OTEL_ATTRIBUTE_COUNT_LIMIT":        "7",
			"OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT":   "9",
			"OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT": "100",
			"OTEL_SPAN_EVENT_COUNT_LIMIT":       "3",
		}, check: func(t *testing.T, c *setupConfig) {
			l := c.limits
			if l.AttributeCountLimit != 9 || l.AttributeValueLengthLimit != 100 || l.EventCountLimit != 3 || l.LinkCountLimit != sdktrace.DefaultLinkCountLimit {
				t.Fatalf("limits %+v", l)
			}
			if len(c.batch) != 4 {
				t.Fatalf("batch options %d", len(c.batch))
			}
		}},
		{name: "a bad queue size", otlp: base, vars: map[string]string{"OTEL_BSP_MAX_QUEUE_SIZE": "many"}, err: "OTEL_BSP_MAX_QUEUE_SIZE"},
		{name: "temporality", otlp: base, vars: map[string]string{"OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE": "sideways"}, err: "TEMPORALITY_PREFERENCE"},
		{name: "histogram aggregation", otlp: base, vars: map[string]string{"OTEL_EXPORTER_OTLP_METRICS_DEFAULT_HISTOGRAM_AGGREGATION": "log"}, err: "DEFAULT_HISTOGRAM_AGGREGATION"},
		{name: "exemplar filter", vars: map[string]string{"OTEL_METRICS_EXEMPLAR_FILTER": "sometimes"}, err: "OTEL_METRICS_EXEMPLAR_FILTER"},
		{name: "resource", vars: map[string]string{
			"OTEL_RESOURCE_ATTRIBUTES": "service.name=from-attrs, team=a%20b,",
		}, check: func(t *testing.T, c *setupConfig) {
			got := map[string]string{}
			for _, kv := range c.resource {
				got[string(kv.Key)] = kv.Value.AsString()
			}
			if got["service.name"] != "from-attrs" || got["team"] != "a b" || len(got) != 2 {
				t.Fatalf("resource %v", got)
			}
		}},
		{name: "OTEL_SERVICE_NAME beats the attributes", vars: map[string]string{
			"OTEL_RESOURCE_ATTRIBUTES": "service.name=from-attrs", "OTEL_SERVICE_NAME": "from-env",
		}, check: func(t *testing.T, c *setupConfig) {
			if v := c.resource[len(c.resource)-1]; v.Value.AsString() != "from-env" {
				t.Fatalf("service.name %v", v)
			}
		}},
		{name: "a bad resource attribute", vars: map[string]string{"OTEL_RESOURCE_ATTRIBUTES": "team"}, err: "OTEL_RESOURCE_ATTRIBUTES: entry 1"},
		{name: "disabled", otlp: base, vars: map[string]string{"OTEL_SDK_DISABLED": "TRUE"}, check: func(t *testing.T, c *setupConfig) {
			if !c.disabled || c.traces.url != "" || c.metrics.url != "" {
				t.Fatalf("%+v", c)
			}
		}},
		{name: "not disabled", otlp: base, vars: map[string]string{"OTEL_SDK_DISABLED": "false"}, check: func(t *testing.T, c *setupConfig) {
			if c.disabled || c.traces.url == "" {
				t.Fatalf("%+v", c)
			}
		}},
		{name: "disabled, a bad flag is still an error", otlp: "ftp://collector", vars: map[string]string{"OTEL_SDK_DISABLED": "true"}, err: `scheme "ftp"`},
		// The specification: a value other than true is false (with a
		// warning), never a reason to stop.
		{name: "disabled, misspelt", otlp: base, vars: map[string]string{"OTEL_SDK_DISABLED": "yes"}, check: func(t *testing.T, c *setupConfig) {
			if c.disabled || c.traces.url == "" {
				t.Fatalf("OTEL_SDK_DISABLED=yes: %+v, want enabled", c)
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := readConfig(SetupOptions{OTLP: c.otlp}, env(setupEnv(c.vars)))
			if c.err != "" {
				if err == nil {
					t.Fatalf("no error, want %q", c.err)
				}
				if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("error %q, want ErrConfig and %q", err, c.err)
				}
				if c.not != "" && strings.Contains(err.Error(), c.not) {
					t.Fatalf("the error shows %q: %q", c.not, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.check != nil {
				c.check(t, cfg)
			}
		})
	}
}

// SetupOptions.ServiceName wins over the environment.
func TestSetupServiceNameWins(t *testing.T) {
	cfg, err := readConfig(SetupOptions{ServiceName: "mine"}, env(setupEnv(map[string]string{"OTEL_SERVICE_NAME": "env"})))
	if err != nil {
		t.Fatal(err)
	}
	if v := cfg.resource[len(cfg.resource)-1]; string(v.Key) != "service.name" || v.Value.AsString() != "mine" {
		t.Fatalf("%v", v)
	}
}

// What Start makes: no-op providers when nothing exports (and no
// middleware needed: Tracing false), SDK providers when it does, and a
// disabled SDK still serves an (empty) exposition when one is asked for.
// The sampler is the environment's: with always_off a span is not
// recording, and Tracing is still true (the middleware carries the trace
// context on).
func TestStartBuildsWhatIsAsked(t *testing.T) {
	ctx := context.Background()
	s, err := Start(ctx, SetupOptions{Getenv: setupEnv(nil)})
	if err != nil {
		t.Fatal(err)
	}
	if s.Tracing || s.Metrics || s.Prometheus != nil {
		t.Fatalf("%+v", s)
	}
	if _, span := s.TracerProvider.Tracer("t").Start(ctx, "x"); span.IsRecording() {
		t.Fatal("a no-op provider recorded")
	}
	o := s.Options(ACP, Unix)
	if o.Protocol != ACP || o.Transport != Unix || o.TracerProvider != s.TracerProvider || o.MeterProvider != s.MeterProvider || o.Propagator == nil {
		t.Fatalf("Options %+v", o)
	}
	if err := s.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}

	s, err = Start(ctx, SetupOptions{OTLP: "http://127.0.0.1:1", Getenv: setupEnv(map[string]string{
		"OTEL_TRACES_SAMPLER":   "always_off",
		"OTEL_METRICS_EXPORTER": "none", // a last collection would be sent, and refused
	})})
	if err != nil {
		t.Fatal(err)
	}
	if !s.Tracing || s.Metrics {
		t.Fatalf("%+v", s)
	}
	if _, span := s.TracerProvider.Tracer("t").Start(ctx, "x"); span.IsRecording() {
		t.Fatal("always_off recorded a span")
	}
	// Nothing was recorded: nothing to send, and the shutdown does not
	// wait for the unreachable collector.
	sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := s.Shutdown(sctx); err != nil {
		t.Fatal(err)
	}
	if err := s.Shutdown(sctx); err != nil {
		t.Fatalf("a second Shutdown: %v", err)
	}

	s, err = Start(ctx, SetupOptions{OTLP: "http://127.0.0.1:1", Prometheus: true, Getenv: setupEnv(map[string]string{"OTEL_SDK_DISABLED": "true"})})
	if err != nil {
		t.Fatal(err)
	}
	if s.Tracing || s.Metrics || s.Prometheus == nil {
		t.Fatalf("%+v", s)
	}
	rec := httptest.NewRecorder()
	s.Prometheus.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if rec.Code != 200 || strings.Contains(rec.Body.String(), "agentwire") {
		t.Fatalf("disabled exposition: %d %q", rec.Code, rec.Body)
	}
	if err := s.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}

	if _, err := Start(ctx, SetupOptions{OTLP: "ftp://x", Getenv: setupEnv(nil)}); !errors.Is(err, ErrConfig) {
		t.Fatalf("Start with a bad URL: %v", err)
	}
}
