package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"github.com/agentwire/agentwire/echo"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/agentwire/agentwire/mcp/streamable"
	"github.com/agentwire/agentwire/process"
	"github.com/agentwire/agentwire/rpc"
	"github.com/agentwire/agentwire/telemetry"
	"go.opentelemetry.io/otel/propagation"
)

// Observability in the commands: --otlp URL exports spans (and metrics)
// over OTLP/HTTP, --metrics ADDR (serve, bridge) serves the Prometheus
// exposition at http://ADDR/metrics, and the standard OTEL_* variables
// are read by telemetry.Start. Nothing configured, nothing is wrapped:
// the connections are built exactly as without this file.

// telemetryFlushTimeout bounds the flush of spans and metrics when a
// command ends, whatever ended it.
const telemetryFlushTimeout = 2 * time.Second

// metricsPath is where --metrics serves the Prometheus exposition.
const metricsPath = "/metrics"

// Environment variables of the OpenTelemetry SDK specification that the
// commands read or set themselves (telemetry.Start reads the rest).
const (
	envServiceName        = "OTEL_SERVICE_NAME"
	envResourceAttributes = "OTEL_RESOURCE_ATTRIBUTES"
	envOTLPEndpoint       = "OTEL_EXPORTER_OTLP_ENDPOINT"
	envTracesEndpoint     = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
	// The trace context of a command started by a traced process (the
	// OpenTelemetry convention for environment variables as carriers).
	envTraceparent = "TRACEPARENT"
	envTracestate  = "TRACESTATE"
	envBaggage     = "BAGGAGE"
)

// otelFlags are --otlp and, where the command serves, --metrics.
type otelFlags struct {
	otlp    *string
	metrics *string // nil where the command has no --metrics
}

func addOTelFlags(fs *flag.FlagSet, withMetrics bool) *otelFlags {
	f := &otelFlags{otlp: fs.String("otlp", "", "export traces and metrics over OTLP/HTTP to this collector URL (http://host:4318, or a URL ending in /v1/traces); default $"+envOTLPEndpoint+" or $"+envTracesEndpoint+", else none")}
	if withMetrics {
		f.metrics = fs.String("metrics", "", "serve the Prometheus exposition at http://[HOST:]PORT"+metricsPath+" (host default 127.0.0.1)")
	}
	return f
}

// check validates the flags' values (a usage error otherwise).
func (f *otelFlags) check() error {
	if *f.otlp != "" {
		u, err := url.Parse(*f.otlp)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			// The value itself is not echoed: a URL may carry credentials
			// (user:password@), and usage errors reach terminals and logs.
			return errors.New("--otlp wants an http:// or https:// URL with a host (the OTLP/HTTP collector, e.g. http://127.0.0.1:4318)")
		}
	}
	if f.metrics != nil && *f.metrics != "" {
		if _, err := httpAddress(*f.metrics); err != nil {
			return fmt.Errorf("--metrics: %v", err)
		}
	}
	return nil
}

// observability is a command's telemetry once started. A nil one (nothing
// configured) answers every method with "nothing": no middleware, no
// observer, nothing to flush.
type observability struct {
	setup   *telemetry.Setup
	metrics *telemetry.Metrics
	otlp    string
	what    string // "agentwire serve mcp", for messages
	stderr  io.Writer

	metricsSrv *http.Server
	served     chan struct{} // closed when metricsSrv has stopped

	mu    sync.Mutex
	stops []func()
	once  sync.Once
}

// startTelemetry starts what the flags and the environment ask for, for
// the service "agentwire CMD" (OTEL_SERVICE_NAME, or a service.name in
// OTEL_RESOURCE_ATTRIBUTES, overrides it). It returns
// nil and no error when nothing is asked for; an error is the command's
// to report, with the exit status it returns (a usage error for a bad
// --otlp, a failure for a --metrics address it cannot listen on). When only
// the environment asked and telemetry cannot start, the command runs
// without it and says so on stderr.
func startTelemetry(f *otelFlags, cmd, what string, stderr io.Writer) (*observability, int, error) {
	if f == nil {
		return nil, 0, nil
	}
	metricsAddr := ""
	if f.metrics != nil && *f.metrics != "" {
		metricsAddr, _ = httpAddress(*f.metrics) // checked by check
	}
	// The command's name, unless the environment names the service
	// (OTEL_SERVICE_NAME, or service.name in OTEL_RESOURCE_ATTRIBUTES).
	service := "agentwire " + cmd
	if os.Getenv(envServiceName) != "" || resourceNamesService(os.Getenv(envResourceAttributes)) {
		service = ""
	}
	setup, err := telemetry.Start(context.Background(), telemetry.SetupOptions{
		ServiceName: service,
		OTLP:        *f.otlp,
		Prometheus:  metricsAddr != "",
	})
	if err != nil {
		if *f.otlp == "" && metricsAddr == "" {
			// Only the environment asked: the command is not its victim.
			fmt.Fprintf(stderr, "agentwire %s: telemetry off: %v\n", what, err)
			return nil, 0, nil
		}
		return nil, exitUsage, err
	}
	o := &observability{setup: setup, otlp: *f.otlp, what: what, stderr: stderr}
	if !o.active() && setup.Prometheus == nil {
		setup.Shutdown(context.Background())
		return nil, 0, nil
	}
	if setup.Metrics {
		if o.metrics, err = telemetry.NewMetrics(setup.Options(telemetry.MCP, telemetry.Pipe)); err != nil {
			o.close()
			return nil, exitUsage, err
		}
	}
	if metricsAddr != "" {
		// Served even when there is nothing to show (OTEL_SDK_DISABLED):
		// what was asked for is there.
		if err := o.serveMetrics(metricsAddr); err != nil {
			o.close()
			return nil, exitFailure, err
		}
	}
	return o, 0, nil
}

// active reports whether anything is recorded: spans or metrics exported
// or served somewhere. Only then are connections wrapped.
func (o *observability) active() bool {
	return o != nil && (o.setup.Tracing || o.setup.Metrics)
}

// resourceNamesService reports whether OTEL_RESOURCE_ATTRIBUTES
// (key=value,...) sets service.name.
func resourceNamesService(attrs string) bool {
	for kv := range strings.SplitSeq(attrs, ",") {
		if k, _, ok := strings.Cut(kv, "="); ok && strings.TrimSpace(k) == "service.name" {
			return true
		}
	}
	return false
}

// loopbackOnly refuses (421) a request whose Host is not a loopback name
// or address: a listener on 127.0.0.1 is reachable from a web page the
// user visits through DNS rebinding (a hostile name that resolves to
// 127.0.0.1), and the Host header is what gives it away.
func loopbackOnly(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host := r.Host
		if h, _, err := net.SplitHostPort(host); err == nil {
			host = h
		}
		if !streamable.IsLoopbackHost(host) {
			http.Error(w, "misdirected request: this listener answers loopback names only", http.StatusMisdirectedRequest)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// serveMetrics serves the Prometheus exposition on its own listener, at
// /metrics only. It has no authentication: it exposes counters and
// histograms (methods, tool names, durations, outcomes), no secrets, and
// binds 127.0.0.1 unless told otherwise.
func (o *observability) serveMetrics(addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("--metrics: %v", err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET "+metricsPath, o.setup.Prometheus)
	var h http.Handler = mux
	if host, _, _ := net.SplitHostPort(addr); streamable.IsLoopbackHost(host) {
		h = loopbackOnly(mux)
	}
	o.metricsSrv = &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 60 * time.Second}
	o.served = make(chan struct{})
	fmt.Fprintf(o.stderr, "agentwire %s: metrics at http://%s%s\n", o.what, ln.Addr(), metricsPath)
	if host, _, _ := net.SplitHostPort(addr); !streamable.IsLoopbackHost(host) {
		fmt.Fprintf(o.stderr, "agentwire %s: --metrics %s is not a loopback address: whoever reaches it reads the metrics (no authentication)\n", o.what, addr)
	}
	go func() {
		defer close(o.served)
		o.metricsSrv.Serve(ln)
	}()
	return nil
}

// echoMethods are the methods of the echo server (package echo).
func echoMethods() []string {
	var ms []string
	if m, ok := echo.Handler().(rpc.Methods); ok {
		for name := range m {
			ms = append(ms, name)
		}
	}
	slices.Sort(ms)
	return ms
}

// options are the telemetry options of one side of a connection.
func (o *observability) options(p telemetry.Protocol, t telemetry.Transport, overHTTP bool, peer string) *telemetry.Options {
	opts := *o.setup.Options(p, t)
	opts.HTTP = overHTTP
	if p == telemetry.JSONRPC {
		// Plain JSON-RPC defines no method: the echo server's are named
		// (serve echo, call --era none), any other is recorded _OTHER.
		opts.Methods = echoMethods()
	}
	if peer != "" {
		host, port, err := net.SplitHostPort(peer)
		if err == nil {
			opts.ServerAddress = host
			opts.ServerPort, _ = strconv.Atoi(port)
		} else if t == telemetry.Unix {
			opts.ServerAddress = peer
		}
	}
	return &opts
}

// serverSide is the middleware of a connection that serves requests: a
// SERVER span per request (nil when nothing is recorded).
func (o *observability) serverSide(p telemetry.Protocol, t telemetry.Transport, overHTTP bool) []rpc.Middleware {
	if !o.active() {
		return nil
	}
	return []rpc.Middleware{telemetry.ServerMiddleware(o.options(p, t, overHTTP, ""))}
}

// clientSide is the outbound middleware of a connection that sends
// requests: a CLIENT span per request, its context in params._meta (nil
// when nothing is recorded). peer is the server's host:port, or a socket
// path.
func (o *observability) clientSide(p telemetry.Protocol, t telemetry.Transport, overHTTP bool, peer string) []rpc.OutboundMiddleware {
	if !o.active() {
		return nil
	}
	return []rpc.OutboundMiddleware{telemetry.ClientMiddleware(o.options(p, t, overHTTP, peer))}
}

// withRPC sets the server and client middleware of a connection on base.
func (o *observability) withRPC(base *rpc.Options, p telemetry.Protocol, t telemetry.Transport, overHTTP bool) {
	if !o.active() {
		return
	}
	base.Middleware = append(base.Middleware, o.serverSide(p, t, overHTTP)...)
	base.Outbound = append(base.Outbound, o.clientSide(p, t, overHTTP, "")...)
}

// observe keeps an observer's stop function, run when the command ends.
func (o *observability) observe(stop func()) {
	if o == nil || stop == nil {
		return
	}
	o.mu.Lock()
	o.stops = append(o.stops, stop)
	o.mu.Unlock()
}

// m is the command's metrics, nil when nothing is recorded.
func (o *observability) m() *telemetry.Metrics {
	if !o.active() {
		return nil
	}
	return o.metrics
}

// recordShutdown records how a server the command started ended.
func (o *observability) recordShutdown(r process.ShutdownResult) {
	if m := o.m(); m != nil && r.Outcome != "" {
		m.RecordShutdown(context.Background(), r)
	}
}

// close stops the observers, flushes and stops the exporters (within
// telemetryFlushTimeout) and the metrics listener. It runs once; later
// calls wait for the first.
func (o *observability) close() {
	if o == nil {
		return
	}
	o.once.Do(func() {
		o.mu.Lock()
		stops := o.stops
		o.stops = nil
		o.mu.Unlock()
		// The observed objects' last counts are kept by the metrics, and
		// collected once more by the shutdown's flush.
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
		ctx, cancel := context.WithTimeout(context.Background(), telemetryFlushTimeout)
		defer cancel()
		if err := o.setup.Shutdown(ctx); err != nil {
			fmt.Fprintf(o.stderr, "agentwire %s: telemetry: %v\n", o.what, err)
		}
		if o.metrics != nil {
			o.metrics.Close()
		}
		if o.metricsSrv != nil {
			if err := o.metricsSrv.Shutdown(ctx); err != nil {
				o.metricsSrv.Close()
			}
			<-o.served
		}
	})
}

// childEnv is the environment of a process the command starts: nil (the
// command's own) unless --otlp was given and the environment names no
// OTLP endpoint, in which case the child is told --otlp's, so that a
// server or agent built with agentwire exports to the same collector.
func (o *observability) childEnv() []string {
	if o == nil || o.otlp == "" || !o.setup.Tracing {
		return nil
	}
	if os.Getenv(envOTLPEndpoint) != "" || os.Getenv(envTracesEndpoint) != "" {
		return nil
	}
	name := envOTLPEndpoint
	if strings.HasSuffix(strings.TrimRight(o.otlp, "/"), "/v1/traces") {
		name = envTracesEndpoint // a full traces URL, used as it is
	}
	return append(os.Environ(), name+"="+o.otlp)
}

// traceRoot is ctx carrying the trace context of the environment
// (TRACEPARENT, TRACESTATE, BAGGAGE), if any: a command started by a
// traced process joins its trace. Without it the command's first span is
// a root.
func (o *observability) traceRoot(ctx context.Context) context.Context {
	if o == nil || !o.setup.Tracing || os.Getenv(envTraceparent) == "" {
		return ctx
	}
	carrier := propagation.MapCarrier{"traceparent": os.Getenv(envTraceparent)}
	if v := os.Getenv(envTracestate); v != "" {
		carrier["tracestate"] = v
	}
	if v := os.Getenv(envBaggage); v != "" {
		carrier["baggage"] = v
	}
	return o.setup.Propagator().Extract(ctx, carrier) // OTEL_PROPAGATORS's
}

// socketTransport is the network.transport of a unix:PATH or
// tcp:HOST:PORT address, and the peer it names.
func socketTransport(addr string) (telemetry.Transport, string) {
	if rest, ok := strings.CutPrefix(addr, "unix:"); ok {
		return telemetry.Unix, rest
	}
	rest, _ := strings.CutPrefix(addr, "tcp:")
	return telemetry.TCP, rest
}

// urlPeer is the host:port of an http(s) URL (the scheme's port when it
// names none).
func urlPeer(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	port := u.Port()
	if port == "" {
		port = "80"
		if u.Scheme == "https" {
			port = "443"
		}
	}
	return net.JoinHostPort(u.Hostname(), port)
}

// flushOnSignal is for a server on stdio, which has no signal handling of
// its own (a signal's default action ends it): while it runs, SIGINT,
// SIGTERM and SIGHUP (those not ignored; not SIGTERM under
// --ignore-sigterm) first flush the telemetry, then end the process as the
// signal would have. stop undoes it.
func (o *observability) flushOnSignal(ignoreTerm bool) (stop func()) {
	if !o.active() {
		return func() {}
	}
	var sigs []os.Signal
	for _, s := range []os.Signal{os.Interrupt, syscall.SIGTERM, syscall.SIGHUP} {
		if signal.Ignored(s) || (ignoreTerm && s == syscall.SIGTERM) {
			continue
		}
		sigs = append(sigs, s)
	}
	if len(sigs) == 0 {
		return func() {}
	}
	ch := make(chan os.Signal, 1)
	done := make(chan struct{})
	signal.Notify(ch, sigs...)
	go func() {
		select {
		case s := <-ch:
			o.close()
			reraise(s)
		case <-done:
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			signal.Stop(ch)
			close(done)
		})
	}
}

// reraise ends the process with s, as its default action would have,
// once the handler that caught it has done its part.
func reraise(s os.Signal) {
	signal.Reset(s)
	if p, err := os.FindProcess(os.Getpid()); err == nil && p.Signal(s) == nil {
		// The runtime, no longer asked to pass it on, ends the process
		// with it (on another thread: wait for that).
		time.Sleep(5 * time.Second)
	}
	os.Exit(signalCode(s))
}
