package telemetry

import (
	"context"
	"errors"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/agentwire/agentwire/client"
	"github.com/agentwire/agentwire/mcp/host"
	"github.com/agentwire/agentwire/process"
	"github.com/agentwire/agentwire/rpc"
)

// Metrics turns the counters agentwire's objects keep (their Stats) into
// OpenTelemetry instruments. Every instrument it makes is asynchronous
// (observable) but the two duration histograms: one callback, registered
// once per Metrics, reads the Stats of every observed object when the
// MeterProvider collects (a periodic OTLP export, a Prometheus scrape).
// Between collections nothing runs: observing an object costs its
// requests nothing.
//
// ObserveConn, ObserveClient and the others add an object to the set the
// callback reads, and return a function that removes it. The counts of a
// removed object are kept, so a counter never goes backwards when a
// connection ends; what it holds now (the output queue, tasks running)
// goes with it. Objects observed with the same attributes are summed.
//
// Make one Metrics per MeterProvider: two would register two callbacks
// observing the same series. A nil *Metrics observes nothing: its methods
// do nothing and its stop functions are no-ops, so a program can pass one
// around whether or not metrics are on.
//
// The era probe and shutdown histograms are synchronous, recorded when
// the probe or the shutdown is over (ObserveSession, RecordConnectError,
// RecordShutdown): an asynchronous instrument cannot be a histogram, and
// a probe happens once per session, before there is a session to observe.
type Metrics struct {
	meter        metric.Meter
	observables  [numMetricIDs]metric.Observable
	registration metric.Registration

	probes       metric.Int64Counter
	probeTime    metric.Float64Histogram
	shutdowns    metric.Int64Counter
	shutdownTime metric.Float64Histogram

	mu      sync.Mutex // held through a collection: a source is read, or retired, never both
	sources map[*metricSource]struct{}
	retired map[pointKey]*point // the final counts of removed sources
}

// metricSource is one observed object: its attributes, and how to read
// its Stats into points.
type metricSource struct {
	attrs []attribute.KeyValue
	read  func(e *emitter)
}

// NewMetrics makes the instruments with o.MeterProvider (nil Options, or a
// nil MeterProvider: otel.GetMeterProvider()) and registers their
// callback. The other fields of Options are not used. Close unregisters
// it.
func NewMetrics(o *Options) (*Metrics, error) {
	var mp metric.MeterProvider
	if o != nil {
		mp = o.MeterProvider
	}
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	m := &Metrics{
		meter:   mp.Meter(instrumentationName),
		sources: make(map[*metricSource]struct{}),
		retired: make(map[pointKey]*point),
	}
	var errs []error
	for id, d := range metricDefs {
		obs, err := d.make(m.meter)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		m.observables[id] = obs
	}
	var err error
	m.probes, err = m.meter.Int64Counter(MetricEraProbes, metric.WithUnit("{probe}"),
		metric.WithDescription("Era probes (server/discover) of MCP sessions, by outcome."))
	errs = append(errs, err)
	m.probeTime, err = m.meter.Float64Histogram(MetricEraProbeDuration, metric.WithUnit("s"),
		metric.WithDescription("Time an MCP session waited for its era probe (server/discover), every attempt included."),
		metric.WithExplicitBucketBoundaries(probeDurationBuckets...))
	errs = append(errs, err)
	m.shutdowns, err = m.meter.Int64Counter(MetricShutdowns, metric.WithUnit("{shutdown}"),
		metric.WithDescription("Server processes stopped by the shutdown ladder, by the step that ended them."))
	errs = append(errs, err)
	m.shutdownTime, err = m.meter.Float64Histogram(MetricShutdownDuration, metric.WithUnit("s"),
		metric.WithDescription("Time from the start of the shutdown ladder to the server process's exit."),
		metric.WithExplicitBucketBoundaries(shutdownDurationBuckets...))
	errs = append(errs, err)
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	list := make([]metric.Observable, 0, numMetricIDs)
	for _, obs := range m.observables {
		list = append(list, obs)
	}
	m.registration, err = m.meter.RegisterCallback(m.collect, list...)
	if err != nil {
		return nil, err
	}
	return m, nil
}

// Close unregisters the callback: later collections read nothing more.
// The synchronous instruments (RecordShutdown, the era probe) keep what
// they recorded.
func (m *Metrics) Close() error {
	if m == nil || m.registration == nil {
		return nil
	}
	return m.registration.Unregister()
}

// observe adds a source to the set and returns the function that removes
// it, keeping its final counts.
func (m *Metrics) observe(attrs []attribute.KeyValue, read func(e *emitter)) (stop func()) {
	if m == nil {
		return func() {}
	}
	s := &metricSource{attrs: append([]attribute.KeyValue(nil), attrs...), read: read}
	m.mu.Lock()
	m.sources[s] = struct{}{}
	m.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			m.mu.Lock()
			defer m.mu.Unlock()
			delete(m.sources, s)
			// The counts so far stay in the cumulative counters; what the
			// object held now goes with it.
			s.read(&emitter{points: m.retired, base: s.attrs, cumulativeOnly: true})
		})
	}
}

// collect is the one callback: it sums the points of every source (and of
// those removed) by instrument and attribute set, and observes each once.
func (m *Metrics) collect(_ context.Context, o metric.Observer) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	points := make(map[pointKey]*point, len(m.retired)+8*len(m.sources))
	for k, p := range m.retired {
		points[k] = &point{set: p.set, v: p.v}
	}
	e := emitter{points: points}
	for s := range m.sources {
		e.base = s.attrs
		s.read(&e)
	}
	for k, p := range points {
		switch obs := m.observables[k.id].(type) {
		case metric.Int64Observable:
			o.ObserveInt64(obs, int64(p.v), metric.WithAttributeSet(p.set))
		case metric.Float64Observable:
			o.ObserveFloat64(obs, p.v, metric.WithAttributeSet(p.set))
		}
	}
	return nil
}

// pointKey names one series: an instrument and an attribute set.
type pointKey struct {
	id  metricID
	set attribute.Distinct
}

type point struct {
	set attribute.Set
	v   float64
}

// emitter collects the points of the sources being read.
type emitter struct {
	points map[pointKey]*point
	base   []attribute.KeyValue
	// cumulativeOnly: only counters are kept (a source being removed).
	cumulativeOnly bool
	scratch        []attribute.KeyValue
}

// add adds v to the series of id with the source's attributes and extra.
// Zero values of counters are kept: a series that exists reports 0
// rather than nothing.
func (e *emitter) add(id metricID, v float64, extra ...attribute.KeyValue) {
	if e.cumulativeOnly && !metricDefs[id].kind.cumulative() {
		return
	}
	e.scratch = append(append(e.scratch[:0], e.base...), extra...)
	set := attribute.NewSet(e.scratch...)
	k := pointKey{id: id, set: set.Equivalent()}
	if p, ok := e.points[k]; ok {
		p.v += v
		return
	}
	e.points[k] = &point{set: set, v: v}
}

func (e *emitter) addInt(id metricID, v int64, extra ...attribute.KeyValue) {
	e.add(id, float64(v), extra...)
}

// ObserveConn observes a connection's Stats: its output queue and the
// time writers were blocked on it, handlers promoted off the read loop,
// late and unknown responses, refusals, bad input, panics, cancellations.
// Call stop when the connection is done (or keep observing it: a finished
// connection's counts stay as they are).
func (m *Metrics) ObserveConn(c *rpc.Conn, attrs ...attribute.KeyValue) (stop func()) {
	if c == nil {
		return func() {}
	}
	return m.observe(attrs, func(e *emitter) { emitConnStats(e, c.Stats()) })
}

// ObserveClient observes a client's Stats, over every server process it
// ran: lines on a server's stdout that were not messages (stdout
// violations), late and unknown responses, lost servers and what became
// of each (restarted, a restart that failed, the restarts used up).
func (m *Metrics) ObserveClient(c *client.Client, attrs ...attribute.KeyValue) (stop func()) {
	if c == nil {
		return func() {}
	}
	return m.observe(attrs, func(e *emitter) { emitClientStats(e, c.Stats()) })
}

// ObserveSession records the session's era probe — its outcome
// (agentwire.mcp.era_probes) and, when a probe was sent, its duration
// (agentwire.mcp.era_probe.duration) — once, now: a Session exists only
// once its negotiation is over. It then observes the session's client
// (ObserveClient) when the session runs over a stream; stop ends that.
// Observe each session once. A failed connect has no Session: see
// RecordConnectError.
func (m *Metrics) ObserveSession(s *host.Session, attrs ...attribute.KeyValue) (stop func()) {
	if m == nil || s == nil {
		return func() {}
	}
	m.recordProbe(context.Background(), s.Probe(), s.ProbeDuration(), s.Era().String(), attrs)
	if c := s.Client(); c != nil {
		return m.ObserveClient(c, attrs...)
	}
	return func() {}
}

// RecordConnectError records what a failed connect learned: when err is
// (or wraps) a *host.ConnectError, its era probe's outcome and duration
// and, for a server it started, how the server was shut down. Other
// errors record nothing.
func (m *Metrics) RecordConnectError(ctx context.Context, err error, attrs ...attribute.KeyValue) {
	var ce *host.ConnectError
	if m == nil || !errors.As(err, &ce) {
		return
	}
	m.recordProbe(ctx, ce.Probe, ce.ProbeDuration, "", attrs)
	m.RecordShutdown(ctx, ce.Shutdown, attrs...)
}

func (m *Metrics) recordProbe(ctx context.Context, outcome host.ProbeOutcome, d time.Duration, era string, attrs []attribute.KeyValue) {
	if outcome == "" {
		return // no negotiation got as far as choosing
	}
	kv := make([]attribute.KeyValue, 0, len(attrs)+2)
	kv = append(kv, attrs...)
	kv = append(kv, KeyProbeOutcome.String(string(outcome)))
	if era == "modern" || era == "legacy" {
		kv = append(kv, KeyEra.String(era))
	}
	set := metric.WithAttributeSet(attribute.NewSet(kv...))
	m.probes.Add(ctx, 1, set)
	if d > 0 {
		m.probeTime.Record(ctx, d.Seconds(), set)
	}
}

// RecordShutdown records how a shutdown ladder ended a server process
// (agentwire.process.shutdowns by outcome: exited, terminated, killed)
// and how long it took (agentwire.process.shutdown.duration): the result
// of client.Client.Close, host.Session.Close or process.Process.Shutdown.
// A zero result (a client over a stream, which started no process)
// records nothing.
func (m *Metrics) RecordShutdown(ctx context.Context, r process.ShutdownResult, attrs ...attribute.KeyValue) {
	if m == nil || r.Outcome == "" {
		return
	}
	kv := make([]attribute.KeyValue, 0, len(attrs)+1)
	kv = append(kv, attrs...)
	kv = append(kv, KeyShutdownOutcome.String(string(r.Outcome)))
	set := metric.WithAttributeSet(attribute.NewSet(kv...))
	m.shutdowns.Add(ctx, 1, set)
	m.shutdownTime.Record(ctx, r.Duration.Seconds(), set)
}
