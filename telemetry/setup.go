package telemetry

import (
	"context"
	"errors"
	"net/http"
	"os"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
)

// SetupOptions configures Start. The zero value reads everything from the
// standard OTEL_* environment variables and exports nothing unless they
// name an endpoint.
type SetupOptions struct {
	// ServiceName is the resource's service.name. Default:
	// OTEL_SERVICE_NAME, else service.name in OTEL_RESOURCE_ATTRIBUTES,
	// else "agentwire". A program that wants the environment to name it
	// leaves this empty.
	ServiceName string
	// OTLP is where to export over OTLP/HTTP (a CLI's --otlp URL): a base
	// URL, http://host:4318, to which /v1/traces and /v1/metrics are
	// added, or a URL ending in /v1/traces (or /v1/metrics), whose other
	// signal goes beside it. http or https, with a host, and without
	// credentials, query or fragment (pass credentials in
	// OTEL_EXPORTER_OTLP_HEADERS); anything else is an error matching
	// ErrConfig that shows the URL with such parts replaced by xxxxx. It
	// takes the place of the OTEL_EXPORTER_OTLP_*ENDPOINT variables. ""
	// means those variables: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT and
	// _METRICS_ENDPOINT (as they are), OTEL_EXPORTER_OTLP_ENDPOINT (a base
	// URL); none set, nothing is exported.
	OTLP string
	// Prometheus also makes a Prometheus exposition handler
	// (Setup.Prometheus) over a registry of its own, which also holds the
	// Go runtime's and the process's metrics (go_*, process_*).
	Prometheus bool
	// Getenv reads the environment. Nil: os.Getenv. Tests pass their own.
	Getenv func(string) string
}

// Setup is what Start made: the providers to pass to Options (Setup.Options),
// and a Prometheus handler when one was asked for.
type Setup struct {
	// TracerProvider makes the spans: an SDK provider with a batch span
	// processor and an OTLP/HTTP exporter when traces are exported, a
	// no-op one otherwise.
	TracerProvider trace.TracerProvider
	// MeterProvider makes the instruments: an SDK provider with a periodic
	// OTLP/HTTP reader and a Prometheus reader as asked, a no-op one when
	// neither is.
	MeterProvider metric.MeterProvider
	// Prometheus serves the metrics in the Prometheus exposition format;
	// nil unless SetupOptions.Prometheus. Mount it where the program
	// serves it (the CLI's --metrics ADDR).
	Prometheus http.Handler
	// Tracing is true when spans are exported somewhere: a program
	// installs the tracing middleware only then (with a sampler that
	// drops everything it still runs, to carry the callers' trace context
	// on).
	Tracing bool
	// Metrics is true when metrics are exported or exposed somewhere.
	Metrics bool

	propagator propagation.TextMapPropagator
	sampler    sdktrace.Sampler // the provider's, for Options.Sampler; nil when nothing is traced
	stops      []func(context.Context) error
	once       sync.Once
	err        error
}

// Start builds the providers SetupOptions and the environment describe.
//
// The variables it reads, through SetupOptions.Getenv: OTEL_SDK_DISABLED
// (true: no-op providers and nothing exported, SetupOptions.OTLP
// included; a Prometheus handler asked for serves an empty exposition;
// the propagators are still honoured, so trace context passes through); OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES (the
// resource, with the SDK's telemetry.sdk.* attributes);
// OTEL_TRACES_EXPORTER and OTEL_METRICS_EXPORTER (otlp or none; otlp
// without an endpoint exports to http://localhost:4318);
// OTEL_EXPORTER_OTLP_ENDPOINT, _TRACES_ENDPOINT, _METRICS_ENDPOINT,
// _HEADERS, _TIMEOUT, _COMPRESSION and _PROTOCOL, and their per-signal
// forms (the protocol must be http/protobuf); OTEL_TRACES_SAMPLER and
// _ARG; OTEL_PROPAGATORS (tracecontext, baggage or none);
// OTEL_BSP_*; the span limits (OTEL_SPAN_*_LIMIT, OTEL_ATTRIBUTE_*_LIMIT,
// OTEL_EVENT_ATTRIBUTE_COUNT_LIMIT, OTEL_LINK_ATTRIBUTE_COUNT_LIMIT; the
// attribute value length is DefaultAttributeValueLengthLimit, 4096 bytes,
// when neither of its variables is set, where the SDK would keep any);
// OTEL_METRIC_EXPORT_INTERVAL and _TIMEOUT;
// OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE and
// _DEFAULT_HISTOGRAM_AGGREGATION; OTEL_METRICS_EXEMPLAR_FILTER. Each is
// passed to the SDK as an explicit option, so what the SDK would read
// from the process environment by itself is overridden. A value Start
// cannot use is an error matching ErrConfig, which never repeats a header
// value or a URL's credentials. The SDK still reads, from the process
// environment itself, the TLS files (OTEL_EXPORTER_OTLP_*CERTIFICATE,
// _CLIENT_KEY) and its experimental OTEL_GO_X_* switches.
//
// Start sets no global OpenTelemetry state: it does not call
// otel.SetTracerProvider, SetMeterProvider, SetTextMapPropagator or
// SetErrorHandler, which are a program's to set (a library must not). A
// program that wants other instrumentation to use these providers sets
// them itself. Failed exports are reported to the global error handler
// (by default, a line on stderr through the log package).
//
// Nothing connects at Start: the exporters send when there is something
// to send (spans in batches, metrics every OTEL_METRIC_EXPORT_INTERVAL,
// 60 s). Shutdown flushes both.
func Start(ctx context.Context, o SetupOptions) (*Setup, error) {
	getenv := o.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	c, err := readConfig(o, env(getenv))
	if err != nil {
		return nil, err
	}
	s := &Setup{
		TracerProvider: tracenoop.NewTracerProvider(),
		MeterProvider:  metricnoop.NewMeterProvider(),
		propagator:     c.propagator,
	}
	if c.disabled {
		if o.Prometheus {
			// Asked for, it is served, and empty: the SDK is off.
			s.Prometheus = promhttp.HandlerFor(prometheus.NewRegistry(), promhttp.HandlerOpts{})
		}
		return s, nil
	}
	res, err := resource.New(ctx, resource.WithTelemetrySDK(), resource.WithAttributes(c.resource...))
	if err != nil {
		return nil, err
	}
	if c.traces.url != "" {
		exp, err := otlptracehttp.New(ctx, traceExportOptions(c.traces)...)
		if err != nil {
			return nil, err
		}
		tp := sdktrace.NewTracerProvider(
			sdktrace.WithResource(res),
			sdktrace.WithSampler(c.sampler),
			sdktrace.WithRawSpanLimits(c.limits),
			sdktrace.WithSpanProcessor(sdktrace.NewBatchSpanProcessor(exp, c.batch...)),
		)
		s.TracerProvider, s.Tracing, s.sampler = tp, true, c.sampler
		s.stops = append(s.stops, tp.Shutdown)
	}
	mopts := []sdkmetric.Option{sdkmetric.WithResource(res), sdkmetric.WithExemplarFilter(c.exemplarFilter)}
	if c.metrics.url != "" {
		exp, err := otlpmetrichttp.New(ctx, metricExportOptions(c.metrics, c.temporality, c.aggregation)...)
		if err != nil {
			s.shutdownAll(ctx)
			return nil, err
		}
		mopts = append(mopts, sdkmetric.WithReader(sdkmetric.NewPeriodicReader(exp,
			sdkmetric.WithInterval(c.interval), sdkmetric.WithTimeout(c.timeout))))
	}
	if o.Prometheus {
		// A registry of its own, never the default one: the exposition has
		// this provider's metrics and the process's (below), nothing a
		// library registered globally, and two Setups do not collide.
		reg := prometheus.NewRegistry()
		// The Go runtime's and the process's own metrics (go_*, process_*:
		// goroutines, stacks, heap, GC, resident memory, descriptors), which
		// an operator reads beside agentwire's when a process grows.
		reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
		exp, err := otelprom.New(otelprom.WithRegisterer(reg))
		if err != nil {
			s.shutdownAll(ctx)
			return nil, err
		}
		mopts = append(mopts, sdkmetric.WithReader(exp))
		s.Prometheus = promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
	}
	if c.metrics.url != "" || o.Prometheus {
		mp := sdkmetric.NewMeterProvider(mopts...)
		s.MeterProvider, s.Metrics = mp, true
		s.stops = append(s.stops, mp.Shutdown)
	}
	return s, nil
}

func traceExportOptions(c exportConfig) []otlptracehttp.Option {
	opts := []otlptracehttp.Option{
		otlptracehttp.WithEndpointURL(c.url),
		otlptracehttp.WithHeaders(c.headers),
		otlptracehttp.WithTimeout(c.timeout),
		otlptracehttp.WithCompression(otlptracehttp.NoCompression),
	}
	if c.gzip {
		opts = append(opts, otlptracehttp.WithCompression(otlptracehttp.GzipCompression))
	}
	return opts
}

func metricExportOptions(c exportConfig, t sdkmetric.TemporalitySelector, a sdkmetric.AggregationSelector) []otlpmetrichttp.Option {
	opts := []otlpmetrichttp.Option{
		otlpmetrichttp.WithEndpointURL(c.url),
		otlpmetrichttp.WithHeaders(c.headers),
		otlpmetrichttp.WithTimeout(c.timeout),
		otlpmetrichttp.WithCompression(otlpmetrichttp.NoCompression),
		otlpmetrichttp.WithTemporalitySelector(t),
		otlpmetrichttp.WithAggregationSelector(a),
	}
	if c.gzip {
		opts = append(opts, otlpmetrichttp.WithCompression(otlpmetrichttp.GzipCompression))
	}
	return opts
}

// Options returns Options that use the Setup's providers and propagator
// (OTEL_PROPAGATORS), for protocol p over transport t. Set the other
// fields (HTTP, ServerAddress) on the result.
func (s *Setup) Options(p Protocol, t Transport) *Options {
	return &Options{
		TracerProvider: s.TracerProvider,
		MeterProvider:  s.MeterProvider,
		Propagator:     s.propagator,
		Sampler:        s.sampler,
		Protocol:       p,
		Transport:      t,
	}
}

// Propagator is the propagator OTEL_PROPAGATORS names (W3C trace context
// and baggage by default).
func (s *Setup) Propagator() propagation.TextMapPropagator { return s.propagator }

// Shutdown flushes what is buffered (spans in the batch processor, a last
// collection of metrics) to the exporters and stops them, within ctx;
// later spans and measurements are dropped. It returns the first call's
// result on every call.
func (s *Setup) Shutdown(ctx context.Context) error {
	s.once.Do(func() { s.err = s.shutdownAll(ctx) })
	return s.err
}

func (s *Setup) shutdownAll(ctx context.Context) error {
	var errs []error
	for _, stop := range s.stops {
		errs = append(errs, stop(ctx))
	}
	s.stops = nil
	return errors.Join(errs...)
}
