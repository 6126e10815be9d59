package telemetry

import (
	"log/slog"
	"strconv"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
)

// Protocol says how spans and metrics are named and attributed: by the
// MCP conventions, or by the RPC conventions for ACP and plain JSON-RPC.
type Protocol uint8

const (
	// MCP: spans "{mcp.method.name} {target}", mcp.* and gen_ai.*
	// attributes, mcp.*.operation.duration.
	MCP Protocol = iota
	// ACP: the RPC conventions (rpc.system.name "jsonrpc", rpc.method,
	// span name = method, rpc.*.call.duration), plus
	// agentwire.acp.session.id.
	ACP
	// JSONRPC: the RPC conventions, nothing protocol-specific. Outbound
	// params are not given a _meta (plain JSON-RPC reserves no member for
	// it); inbound _meta trace context is still honoured.
	JSONRPC
)

func (p Protocol) String() string {
	switch p {
	case MCP:
		return "mcp"
	case ACP:
		return "acp"
	case JSONRPC:
		return "jsonrpc"
	}
	return "Protocol(" + strconv.Itoa(int(p)) + ")"
}

// Transport is the network.transport of the connection: "pipe" for stdio,
// "tcp" for a TCP socket and for HTTP, "unix" for a Unix socket.
type Transport string

const (
	Pipe Transport = "pipe"
	TCP  Transport = "tcp"
	Unix Transport = "unix"
)

// Options configures ServerMiddleware, ClientMiddleware and Relay (and the
// metrics of Metrics). The zero value, or nil, means the documented
// defaults: the global providers, W3C trace context and baggage, MCP over
// a pipe.
type Options struct {
	// TracerProvider makes the spans. Nil: otel.GetTracerProvider().
	TracerProvider trace.TracerProvider
	// MeterProvider makes the instruments. Nil: otel.GetMeterProvider().
	MeterProvider metric.MeterProvider
	// Propagator reads and writes the trace context in params._meta.
	// Nil: W3C TraceContext and Baggage (traceparent, tracestate,
	// baggage), the keys MCP reserves.
	Propagator propagation.TextMapPropagator
	// Protocol names and attributes spans and metrics. Default MCP.
	Protocol Protocol
	// Transport is network.transport. Default Pipe.
	Transport Transport
	// HTTP says requests ride HTTP (Streamable HTTP): network.protocol.name
	// "http".
	HTTP bool
	// ServerAddress and ServerPort are server.address and server.port of
	// the client side's spans and metrics (the server behind any proxy);
	// "" and 0 leave them out.
	ServerAddress string
	ServerPort    int
	// Logger receives diagnostics (a Relay ending spans past its bound,
	// once per burst). Nil: slog.Default().
	Logger *slog.Logger
	// Methods are the application's own methods, beside the protocol's:
	// the metrics name a method (mcp.method.name, rpc.method) only when
	// the protocol defines it (MCP's methods of both eras, the acp
	// package's for ACP, none for plain JSON-RPC) or it is listed here,
	// and record any other as _OTHER, so that a peer cannot grow them
	// without bound; for ACP and JSON-RPC a span of any other method is
	// named "jsonrpc" with rpc.method _OTHER and rpc.method_original (the
	// RPC conventions). A JSON-RPC server lists the methods it serves.
	Methods []string
	// Sampler, when set, is the sampler TracerProvider was made with
	// (sdktrace.WithSampler's; Setup sets it). When it drops every root
	// span (sdktrace.NeverSample, TraceIDRatioBased(0), or ParentBased
	// with either as its root), a request that has no trace context to
	// continue (none in params._meta, no span in its context) starts no
	// span at all, in ServerMiddleware, ClientMiddleware and Relay (which
	// then passes its line unchanged): the provider would only make one to drop it, at a cost
	// of about 250 ns and two allocations. A Sampler that is not the
	// provider's makes the middleware skip spans the provider would have
	// kept: leave it nil when unsure.
	Sampler sdktrace.Sampler
}

// dropsRoots reports whether s drops every span without a parent.
func dropsRoots(s sdktrace.Sampler) bool {
	if s == nil {
		return false
	}
	d := s.Description()
	for _, never := range []string{"AlwaysOffSampler", "TraceIDRatioBased{0}"} {
		if d == never || strings.HasPrefix(d, "ParentBased{root:"+never+",") {
			return true
		}
	}
	return false
}

// instrumentationName is the name of the tracer and meter, the module's
// path.
const instrumentationName = "github.com/agentwire/agentwire/telemetry"

// config is Options resolved once, by the middleware constructors.
type config struct {
	tracer     trace.Tracer
	meter      metric.Meter
	prop       propagation.TextMapPropagator
	fields     []string // prop.Fields(): the _meta keys Inject replaces
	probes     [][]byte // the fields whose presence in raw params is worth a parse
	protocol   Protocol
	transport  string
	http       bool
	serverAddr string
	serverPort int
	logger     *slog.Logger
	// noTracing: the TracerProvider is the no-op one, so no span is
	// started (trace context in _meta still passes through the handler's
	// context). dropsRoots: its sampler drops every span without a parent
	// (Options.Sampler), so none is started for such a request.
	noTracing, dropsRoots bool
	// noMetrics: the MeterProvider is metric/noop's.
	noMetrics bool
	// methods are the protocol's methods (shared, read-only), extra
	// Options.Methods.
	methods, extra map[string]bool
	// escaped marks the bytes of the probed keys: a \u00XX escape of one
	// of them in params may spell a key (mayCarry).
	escaped [256]bool
	// static are the attributes every span and measurement of this side
	// carries (network.*, server.*, rpc.system.name).
	static []attribute.KeyValue
}

var defaultPropagator = propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})

func resolve(o *Options, client bool) *config {
	var s Options
	if o != nil {
		s = *o
	}
	c := &config{protocol: s.Protocol, http: s.HTTP, logger: s.Logger}
	tp := s.TracerProvider
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	mp := s.MeterProvider
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	c.tracer = tp.Tracer(instrumentationName)
	_, c.noTracing = tp.(tracenoop.TracerProvider)
	c.dropsRoots = dropsRoots(s.Sampler)
	c.meter = mp.Meter(instrumentationName)
	_, c.noMetrics = mp.(metricnoop.MeterProvider)
	switch c.protocol {
	case MCP:
		c.methods = mcpMethods
	case ACP:
		c.methods = acpMethods
	}
	if len(s.Methods) > 0 {
		c.extra = stringSet(s.Methods...)
	}
	c.prop = propagatorOr(s.Propagator)
	c.fields = c.prop.Fields()
	for _, f := range c.fields {
		if f == "tracestate" {
			continue // meaningless without a traceparent
		}
		// The key and its closing quote: a needle that starts with a
		// byte as common in JSON as '"' would stop at every string.
		c.probes = append(c.probes, []byte(f+`"`))
		for i := 0; i < len(f); i++ {
			c.escaped[f[i]] = true
		}
	}
	c.transport = string(s.Transport)
	if c.transport == "" {
		c.transport = string(Pipe)
	}
	if c.logger == nil {
		c.logger = slog.Default()
	}
	if c.protocol != MCP {
		c.static = append(c.static, KeyRPCSystemName.String(rpcSystemJSONRPC))
	}
	c.static = append(c.static, KeyNetworkTransport.String(c.transport))
	if c.http {
		c.static = append(c.static, KeyNetworkProtocolName.String("http"))
	}
	if client {
		c.serverAddr, c.serverPort = s.ServerAddress, s.ServerPort
		if c.serverAddr != "" {
			c.static = append(c.static, KeyServerAddress.String(c.serverAddr))
			if c.serverPort > 0 {
				c.static = append(c.static, KeyServerPort.Int(c.serverPort))
			}
		}
	}
	return c
}

// known reports whether method is one the protocol defines or
// Options.Methods lists.
func (c *config) known(method string) bool {
	return c.methods[method] || c.extra[method]
}

// startName is the name a span of method starts with: for MCP the method
// (cut at MaxSpanValueBytes); for ACP and JSON-RPC the method when known,
// else "jsonrpc" (rpc.system.name, as the RPC conventions name a span of
// an unrecognised method).
func (c *config) startName(method string) string {
	if c.protocol == MCP {
		return clip(method, MaxSpanValueBytes)
	}
	if c.known(method) {
		return method
	}
	return rpcSystemJSONRPC
}

func propagatorOr(p propagation.TextMapPropagator) propagation.TextMapPropagator {
	if p == nil {
		return defaultPropagator
	}
	return p
}
