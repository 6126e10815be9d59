package telemetry

import (
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/exemplar"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// ErrConfig is matched by every error Start returns for a setting it
// cannot use: an OTLP URL, an OTEL_* variable.
var ErrConfig = errors.New("telemetry: invalid configuration")

func configError(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrConfig}, args...)...)
}

// The OTLP/HTTP paths of the two signals (the OTLP specification's).
const (
	tracesPath  = "/v1/traces"
	metricsPath = "/v1/metrics"
)

// Defaults the OpenTelemetry specification gives the variables.
const (
	defaultOTLPTimeout    = 10 * time.Second
	defaultExportInterval = 60 * time.Second
	defaultExportTimeout  = 30 * time.Second
	defaultLocalEndpoint  = "http://localhost:4318"
	protocolHTTPProtobuf  = "http/protobuf"
	defaultServiceName    = "agentwire"
	defaultPropagators    = "tracecontext,baggage"
	defaultTracesSampler  = "parentbased_always_on"
)

// exportConfig is what one signal's OTLP/HTTP exporter is given.
type exportConfig struct {
	url     string // "" when the signal is not exported
	headers map[string]string
	timeout time.Duration
	gzip    bool
}

// setupConfig is everything Start reads from SetupOptions and the
// environment, checked, before it builds anything.
type setupConfig struct {
	disabled   bool
	resource   []attribute.KeyValue // service.name last
	propagator propagation.TextMapPropagator

	traces  exportConfig
	sampler sdktrace.Sampler
	batch   []sdktrace.BatchSpanProcessorOption
	limits  sdktrace.SpanLimits

	metrics        exportConfig
	interval       time.Duration
	timeout        time.Duration
	temporality    sdkmetric.TemporalitySelector
	aggregation    sdkmetric.AggregationSelector
	exemplarFilter exemplar.Filter
}

// env reads variables through Getenv, trimmed; "" is unset (as the
// specification says an empty value is).
type env func(string) string

func (e env) get(k string) string { return strings.TrimSpace(e(k)) }

// first returns the first of keys that is set, and its name.
func (e env) first(keys ...string) (value, key string) {
	for _, k := range keys {
		if v := e.get(k); v != "" {
			return v, k
		}
	}
	return "", ""
}

func readConfig(o SetupOptions, e env) (*setupConfig, error) {
	c := &setupConfig{}
	var err error
	if c.disabled, err = e.boolean("OTEL_SDK_DISABLED"); err != nil {
		return nil, err
	}
	if c.propagator, err = propagatorFrom(e); err != nil {
		return nil, err
	}
	if c.disabled {
		// Nothing is exported; a bad URL from the program is still an
		// error, so a typo does not wait for the day the SDK is on.
		if o.OTLP != "" {
			if _, _, err := otlpURLs(o.OTLP); err != nil {
				return nil, err
			}
		}
		return c, nil
	}
	if c.resource, err = resourceFrom(o.ServiceName, e); err != nil {
		return nil, err
	}
	tracesOn, err := exporterWanted(e, "OTEL_TRACES_EXPORTER")
	if err != nil {
		return nil, err
	}
	metricsOn, err := exporterWanted(e, "OTEL_METRICS_EXPORTER")
	if err != nil {
		return nil, err
	}
	tracesURL, metricsURL, err := endpoints(o.OTLP, e, tracesOn, metricsOn)
	if err != nil {
		return nil, err
	}
	if tracesURL != "" {
		if c.traces, err = exportFrom(e, "TRACES", tracesURL); err != nil {
			return nil, err
		}
		if c.sampler, err = samplerFrom(e); err != nil {
			return nil, err
		}
		if c.batch, err = batchFrom(e); err != nil {
			return nil, err
		}
		if c.limits, err = spanLimitsFrom(e); err != nil {
			return nil, err
		}
	}
	if metricsURL != "" {
		if c.metrics, err = exportFrom(e, "METRICS", metricsURL); err != nil {
			return nil, err
		}
		if c.temporality, err = temporalityFrom(e); err != nil {
			return nil, err
		}
		if c.aggregation, err = aggregationFrom(e); err != nil {
			return nil, err
		}
	}
	if c.interval, err = e.millis("OTEL_METRIC_EXPORT_INTERVAL", defaultExportInterval); err != nil {
		return nil, err
	}
	if c.timeout, err = e.millis("OTEL_METRIC_EXPORT_TIMEOUT", defaultExportTimeout); err != nil {
		return nil, err
	}
	if c.exemplarFilter, err = exemplarFrom(e); err != nil {
		return nil, err
	}
	return c, nil
}

// boolean reads a boolean variable: "true" (any case) is true; unset,
// empty and "false" are false; anything else is an error (the
// specification only asks for a warning, but a typo that leaves the SDK
// on is worth stopping for).
func (e env) boolean(k string) (bool, error) {
	switch v := strings.ToLower(e.get(k)); v {
	case "true":
		return true, nil
	case "", "false":
		return false, nil
	}
	// The specification: any value other than true is false, with a
	// warning — a typo must not stop the program it configures. (The
	// value is not echoed: it may be anything a user put there.)
	slog.Default().Warn("telemetry: " + k + " is neither true nor false: taken as false")
	return false, nil
}

// millis reads a duration in milliseconds, a positive integer.
func (e env) millis(k string, def time.Duration) (time.Duration, error) {
	v := e.get(k)
	if v == "" {
		return def, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n <= 0 || n > int64(1<<62)/int64(time.Millisecond) {
		return 0, configError("%s=%q: want a positive number of milliseconds", k, v)
	}
	return time.Duration(n) * time.Millisecond, nil
}

// count reads a non-negative integer (a queue size, a limit).
func (e env) count(def int, keys ...string) (int, error) {
	v, k := e.first(keys...)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, configError("%s=%q: want a non-negative integer", k, v)
	}
	return n, nil
}

// propagatorFrom reads OTEL_PROPAGATORS: tracecontext and baggage (the
// default, both), or none. The others of the specification (b3, b3multi,
// jaeger, xray, ottrace) are not offered: an error says so.
func propagatorFrom(e env) (propagation.TextMapPropagator, error) {
	v := e.get("OTEL_PROPAGATORS")
	if v == "" {
		v = defaultPropagators
	}
	var ps []propagation.TextMapPropagator
	var tc, bg, none bool
	for _, name := range strings.Split(v, ",") {
		switch name = strings.ToLower(strings.TrimSpace(name)); name {
		case "tracecontext":
			if !tc {
				ps, tc = append(ps, propagation.TraceContext{}), true
			}
		case "baggage":
			if !bg {
				ps, bg = append(ps, propagation.Baggage{}), true
			}
		case "none":
			none = true
		case "":
		default:
			return nil, configError("OTEL_PROPAGATORS=%q: propagator %q is not supported (tracecontext, baggage or none)", v, name)
		}
	}
	if none && len(ps) > 0 {
		return nil, configError("OTEL_PROPAGATORS=%q: none cannot be combined with another propagator", v)
	}
	return propagation.NewCompositeTextMapPropagator(ps...), nil
}

// resourceFrom reads OTEL_RESOURCE_ATTRIBUTES (key=value pairs, values
// percent-encoded) and OTEL_SERVICE_NAME. service.name is, in order:
// name, OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES' service.name,
// "agentwire".
func resourceFrom(name string, e env) ([]attribute.KeyValue, error) {
	var attrs []attribute.KeyValue
	fromAttrs := ""
	if v := e.get("OTEL_RESOURCE_ATTRIBUTES"); v != "" {
		for i, pair := range strings.Split(v, ",") {
			if strings.TrimSpace(pair) == "" {
				continue
			}
			k, val, ok := strings.Cut(pair, "=")
			k = strings.TrimSpace(k)
			if !ok || k == "" {
				// The value is not repeated: it may be anything.
				return nil, configError("OTEL_RESOURCE_ATTRIBUTES: entry %d is not key=value", i+1)
			}
			dec, err := url.PathUnescape(strings.TrimSpace(val))
			if err != nil {
				return nil, configError("OTEL_RESOURCE_ATTRIBUTES: the value of %q is not percent-encoded", k)
			}
			if k == "service.name" {
				fromAttrs = dec
				continue
			}
			attrs = append(attrs, attribute.String(k, dec))
		}
	}
	switch {
	case name != "":
	case e.get("OTEL_SERVICE_NAME") != "":
		name = e.get("OTEL_SERVICE_NAME")
	case fromAttrs != "":
		name = fromAttrs
	default:
		name = defaultServiceName
	}
	return append(attrs, attribute.String("service.name", name)), nil
}

// exporterWanted reads OTEL_TRACES_EXPORTER or OTEL_METRICS_EXPORTER:
// unset (-1: export when an endpoint is configured), "otlp" (1: export,
// to http://localhost:4318 when no endpoint is configured) or "none" (0).
func exporterWanted(e env, k string) (int, error) {
	v := e.get(k)
	if v == "" {
		return -1, nil
	}
	want := -1
	for _, name := range strings.Split(v, ",") {
		switch name = strings.ToLower(strings.TrimSpace(name)); name {
		case "otlp":
			want = 1
		case "none":
			if want == 1 {
				return 0, configError("%s=%q: none cannot be combined with an exporter", k, v)
			}
			want = 0
		case "":
		default:
			return 0, configError("%s=%q: exporter %q is not supported (otlp or none; a Prometheus exposition is asked for by SetupOptions.Prometheus)", k, v, name)
		}
	}
	return want, nil
}

// endpoints decides the two signals' URLs: from flag (SetupOptions.OTLP)
// when set, otherwise from OTEL_EXPORTER_OTLP_TRACES_ENDPOINT and
// _METRICS_ENDPOINT (used as they are) or OTEL_EXPORTER_OTLP_ENDPOINT (a
// base URL); "" for a signal that is not exported.
func endpoints(flag string, e env, tracesOn, metricsOn int) (traces, metrics string, err error) {
	if flag != "" {
		traces, metrics, err = otlpURLs(flag)
		if err != nil {
			return "", "", err
		}
	} else {
		var base string
		if v := e.get("OTEL_EXPORTER_OTLP_ENDPOINT"); v != "" {
			if base, err = checkURL(v, "OTEL_EXPORTER_OTLP_ENDPOINT"); err != nil {
				return "", "", err
			}
			base = strings.TrimSuffix(base, "/")
		}
		traces, err = signalURL(e, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", base, tracesPath, tracesOn)
		if err != nil {
			return "", "", err
		}
		metrics, err = signalURL(e, "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", base, metricsPath, metricsOn)
		if err != nil {
			return "", "", err
		}
	}
	if tracesOn == 0 {
		traces = ""
	}
	if metricsOn == 0 {
		metrics = ""
	}
	return traces, metrics, nil
}

func signalURL(e env, k, base, path string, on int) (string, error) {
	if v := e.get(k); v != "" {
		u, err := checkURL(v, k)
		if err != nil {
			return "", err
		}
		if _, rest, _ := strings.Cut(u, "://"); !strings.Contains(rest, "/") {
			u += "/" // no path: the root path, as the specification says
		}
		return u, nil
	}
	if base != "" {
		return base + path, nil
	}
	if on == 1 {
		return defaultLocalEndpoint + path, nil
	}
	return "", nil
}

// otlpURLs applies the rules of an OTLP URL given by the program (the
// CLI's --otlp): a base URL gets /v1/traces and /v1/metrics; a URL ending
// in /v1/traces (or /v1/metrics) names that signal's endpoint, and the
// other's is beside it. http and https only, with a host, and no
// credentials, query or fragment (the exporter would drop them
// silently); an error shows the URL with any credentials and query
// replaced by xxxxx.
func otlpURLs(raw string) (traces, metrics string, err error) {
	u, err := checkURL(raw, "")
	if err != nil {
		return "", "", err
	}
	u = strings.TrimSuffix(u, "/")
	switch {
	case strings.HasSuffix(u, tracesPath):
		return u, strings.TrimSuffix(u, tracesPath) + metricsPath, nil
	case strings.HasSuffix(u, metricsPath):
		return strings.TrimSuffix(u, metricsPath) + tracesPath, u, nil
	}
	return u + tracesPath, u + metricsPath, nil
}

// checkURL checks an OTLP/HTTP URL and returns it normalized (scheme and
// host as given, the path cleaned of nothing). name is the variable it
// came from, or "" for SetupOptions.OTLP.
func checkURL(raw, name string) (string, error) {
	what := fmt.Sprintf("OTLP URL %q", redactURL(raw))
	if name != "" {
		what = fmt.Sprintf("%s=%q", name, redactURL(raw))
	}
	u, err := url.Parse(raw)
	if err != nil {
		// url.Parse's own error repeats the URL, credentials included.
		return "", configError("%s: not a URL", what)
	}
	switch strings.ToLower(u.Scheme) {
	case "http", "https":
	case "":
		return "", configError("%s: want an http:// or https:// URL (such as http://localhost:4318)", what)
	default:
		return "", configError("%s: scheme %q is not supported: want an http:// or https:// URL (OTLP/HTTP, such as http://localhost:4318)", what, u.Scheme)
	}
	if u.Opaque != "" || u.Host == "" {
		return "", configError("%s: no host", what)
	}
	if u.User != nil {
		return "", configError("%s: credentials in the URL are not sent by OTLP/HTTP; pass them in OTEL_EXPORTER_OTLP_HEADERS", what)
	}
	if u.RawQuery != "" || u.ForceQuery || u.Fragment != "" {
		return "", configError("%s: a query or fragment is not supported", what)
	}
	return strings.ToLower(u.Scheme) + "://" + u.Host + u.EscapedPath(), nil
}

// redactURL returns raw with what may be secret replaced by xxxxx: the
// user information before the host, the query and the fragment. It
// works on the string, so a URL that does not parse is redacted too.
func redactURL(raw string) string {
	s := raw
	tail := ""
	if i := strings.IndexAny(s, "?#"); i >= 0 {
		s, tail = s[:i], s[i:i+1]+"xxxxx"
	}
	rest, prefix := s, ""
	if i := strings.Index(s, "://"); i >= 0 {
		prefix, rest = s[:i+3], s[i+3:]
	}
	authority, path := rest, ""
	if i := strings.IndexByte(rest, '/'); i >= 0 {
		authority, path = rest[:i], rest[i:]
	}
	if i := strings.LastIndexByte(authority, '@'); i >= 0 {
		authority = "xxxxx" + authority[i:]
	}
	return prefix + authority + path + tail
}

// exportFrom reads what an exporter of one signal (TRACES or METRICS) is
// given: headers, timeout, compression, and the protocol, which must be
// http/protobuf.
func exportFrom(e env, signal, u string) (exportConfig, error) {
	c := exportConfig{url: u}
	p, pk := e.first("OTEL_EXPORTER_OTLP_"+signal+"_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL")
	if p != "" && p != protocolHTTPProtobuf {
		return c, configError("%s=%q: only %s is supported (OTLP over HTTP)", pk, p, protocolHTTPProtobuf)
	}
	var err error
	if c.headers, err = headersFrom(e, "OTEL_EXPORTER_OTLP_"+signal+"_HEADERS", "OTEL_EXPORTER_OTLP_HEADERS"); err != nil {
		return c, err
	}
	tk := "OTEL_EXPORTER_OTLP_" + signal + "_TIMEOUT"
	if e.get(tk) == "" {
		tk = "OTEL_EXPORTER_OTLP_TIMEOUT"
	}
	if c.timeout, err = e.millis(tk, defaultOTLPTimeout); err != nil {
		return c, err
	}
	cv, ck := e.first("OTEL_EXPORTER_OTLP_"+signal+"_COMPRESSION", "OTEL_EXPORTER_OTLP_COMPRESSION")
	switch strings.ToLower(cv) {
	case "", "none":
	case "gzip":
		c.gzip = true
	default:
		return c, configError("%s=%q: want gzip or none", ck, cv)
	}
	return c, nil
}

// headersFrom reads the first set of keys as a list of key=value pairs
// (values percent-encoded). A signal's own variable replaces the general
// one. Errors never repeat a value: headers carry credentials.
func headersFrom(e env, keys ...string) (map[string]string, error) {
	v, k := e.first(keys...)
	h := map[string]string{}
	if v == "" {
		return h, nil
	}
	for i, pair := range strings.Split(v, ",") {
		if strings.TrimSpace(pair) == "" {
			continue
		}
		name, val, ok := strings.Cut(pair, "=")
		name = strings.TrimSpace(name)
		if !ok || name == "" {
			return nil, configError("%s: entry %d is not key=value", k, i+1)
		}
		dec, err := url.PathUnescape(strings.TrimSpace(val))
		if err != nil {
			return nil, configError("%s: the value of %q is not percent-encoded", k, name)
		}
		h[name] = dec
	}
	return h, nil
}

// samplerFrom reads OTEL_TRACES_SAMPLER and OTEL_TRACES_SAMPLER_ARG.
func samplerFrom(e env) (sdktrace.Sampler, error) {
	name := strings.ToLower(e.get("OTEL_TRACES_SAMPLER"))
	if name == "" {
		name = defaultTracesSampler
	}
	ratio := func() (float64, error) {
		v := e.get("OTEL_TRACES_SAMPLER_ARG")
		if v == "" {
			return 1, nil
		}
		r, err := strconv.ParseFloat(v, 64)
		if err != nil || r < 0 || r > 1 {
			return 0, configError("OTEL_TRACES_SAMPLER_ARG=%q: want a ratio from 0 to 1", v)
		}
		return r, nil
	}
	switch name {
	case "always_on":
		return sdktrace.AlwaysSample(), nil
	case "always_off":
		return sdktrace.NeverSample(), nil
	case "parentbased_always_on":
		return sdktrace.ParentBased(sdktrace.AlwaysSample()), nil
	case "parentbased_always_off":
		return sdktrace.ParentBased(sdktrace.NeverSample()), nil
	case "traceidratio", "parentbased_traceidratio":
		r, err := ratio()
		if err != nil {
			return nil, err
		}
		if name == "traceidratio" {
			return sdktrace.TraceIDRatioBased(r), nil
		}
		return sdktrace.ParentBased(sdktrace.TraceIDRatioBased(r)), nil
	}
	return nil, configError("OTEL_TRACES_SAMPLER=%q: not supported (always_on, always_off, traceidratio, parentbased_always_on, parentbased_always_off, parentbased_traceidratio)", e.get("OTEL_TRACES_SAMPLER"))
}

// batchFrom reads the batch span processor's OTEL_BSP_* variables.
func batchFrom(e env) ([]sdktrace.BatchSpanProcessorOption, error) {
	delay, err := e.millis("OTEL_BSP_SCHEDULE_DELAY", sdktrace.DefaultScheduleDelay*time.Millisecond)
	if err != nil {
		return nil, err
	}
	timeout, err := e.millis("OTEL_BSP_EXPORT_TIMEOUT", sdktrace.DefaultExportTimeout*time.Millisecond)
	if err != nil {
		return nil, err
	}
	queue, err := e.count(sdktrace.DefaultMaxQueueSize, "OTEL_BSP_MAX_QUEUE_SIZE")
	if err != nil {
		return nil, err
	}
	batch, err := e.count(sdktrace.DefaultMaxExportBatchSize, "OTEL_BSP_MAX_EXPORT_BATCH_SIZE")
	if err != nil {
		return nil, err
	}
	return []sdktrace.BatchSpanProcessorOption{
		sdktrace.WithBatchTimeout(delay), sdktrace.WithExportTimeout(timeout),
		sdktrace.WithMaxQueueSize(queue), sdktrace.WithMaxExportBatchSize(batch),
	}, nil
}

// DefaultAttributeValueLengthLimit is the longest attribute value (in
// bytes; the SDK cuts at a UTF-8 boundary) of the spans of Start's
// TracerProvider when neither OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT nor
// OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT is set (the SDK's own default is no
// limit). The middleware cuts what a peer chooses shorter still
// (MaxSpanValueBytes); this bounds the rest.
const DefaultAttributeValueLengthLimit = 4096

// spanLimitsFrom reads the span limits' variables (a span's own before
// the general ones).
func spanLimitsFrom(e env) (sdktrace.SpanLimits, error) {
	var l sdktrace.SpanLimits
	var err error
	// The value length: the SDK's default is no limit, and the values a
	// peer chooses (a URI, a tool's name) can be message-sized, so that a
	// slow collector lets the batch processor's queue hold gigabytes;
	// DefaultAttributeValueLengthLimit unless a variable says otherwise.
	v, k := e.first("OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT", "OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT")
	l.AttributeValueLengthLimit = DefaultAttributeValueLengthLimit
	if v != "" {
		n, perr := strconv.Atoi(v)
		if perr != nil || n < 0 {
			return l, configError("%s=%q: want a non-negative integer", k, v)
		}
		l.AttributeValueLengthLimit = n
	}
	for _, f := range []struct {
		dst  *int
		def  int
		keys []string
	}{
		{&l.AttributeCountLimit, sdktrace.DefaultAttributeCountLimit, []string{"OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT", "OTEL_ATTRIBUTE_COUNT_LIMIT"}},
		{&l.EventCountLimit, sdktrace.DefaultEventCountLimit, []string{"OTEL_SPAN_EVENT_COUNT_LIMIT"}},
		{&l.LinkCountLimit, sdktrace.DefaultLinkCountLimit, []string{"OTEL_SPAN_LINK_COUNT_LIMIT"}},
		{&l.AttributePerEventCountLimit, sdktrace.DefaultAttributePerEventCountLimit, []string{"OTEL_EVENT_ATTRIBUTE_COUNT_LIMIT"}},
		{&l.AttributePerLinkCountLimit, sdktrace.DefaultAttributePerLinkCountLimit, []string{"OTEL_LINK_ATTRIBUTE_COUNT_LIMIT"}},
	} {
		if *f.dst, err = e.count(f.def, f.keys...); err != nil {
			return l, err
		}
	}
	return l, nil
}

// temporalityFrom reads OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE:
// cumulative (the default), delta or lowmemory.
func temporalityFrom(e env) (sdkmetric.TemporalitySelector, error) {
	const k = "OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE"
	switch v := strings.ToLower(e.get(k)); v {
	case "", "cumulative":
		return sdkmetric.DefaultTemporalitySelector, nil
	case "delta":
		return func(ik sdkmetric.InstrumentKind) metricdata.Temporality {
			switch ik {
			case sdkmetric.InstrumentKindUpDownCounter, sdkmetric.InstrumentKindObservableUpDownCounter:
				return metricdata.CumulativeTemporality
			}
			return metricdata.DeltaTemporality
		}, nil
	case "lowmemory":
		return func(ik sdkmetric.InstrumentKind) metricdata.Temporality {
			switch ik {
			case sdkmetric.InstrumentKindCounter, sdkmetric.InstrumentKindHistogram:
				return metricdata.DeltaTemporality
			}
			return metricdata.CumulativeTemporality
		}, nil
	}
	return nil, configError("%s=%q: want cumulative, delta or lowmemory", k, e.get(k))
}

// aggregationFrom reads
// OTEL_EXPORTER_OTLP_METRICS_DEFAULT_HISTOGRAM_AGGREGATION.
func aggregationFrom(e env) (sdkmetric.AggregationSelector, error) {
	const k = "OTEL_EXPORTER_OTLP_METRICS_DEFAULT_HISTOGRAM_AGGREGATION"
	switch v := strings.ToLower(e.get(k)); v {
	case "", "explicit_bucket_histogram":
		return sdkmetric.DefaultAggregationSelector, nil
	case "base2_exponential_bucket_histogram":
		return func(ik sdkmetric.InstrumentKind) sdkmetric.Aggregation {
			if ik == sdkmetric.InstrumentKindHistogram {
				return sdkmetric.AggregationBase2ExponentialHistogram{MaxSize: 160, MaxScale: 20}
			}
			return sdkmetric.DefaultAggregationSelector(ik)
		}, nil
	}
	return nil, configError("%s=%q: want explicit_bucket_histogram or base2_exponential_bucket_histogram", k, e.get(k))
}

// exemplarFrom reads OTEL_METRICS_EXEMPLAR_FILTER: trace_based (the
// default), always_on or always_off.
func exemplarFrom(e env) (exemplar.Filter, error) {
	const k = "OTEL_METRICS_EXEMPLAR_FILTER"
	switch v := strings.ToLower(e.get(k)); v {
	case "", "trace_based":
		return exemplar.TraceBasedFilter, nil
	case "always_on":
		return exemplar.AlwaysOnFilter, nil
	case "always_off":
		return exemplar.AlwaysOffFilter, nil
	}
	return nil, configError("%s=%q: want trace_based, always_on or always_off", k, e.get(k))
}
