package telemetry

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"sync/atomic"
	"time"

	"github.com/agentwire/agentwire/jsonrpc"
	"github.com/agentwire/agentwire/mcp"
	"github.com/agentwire/agentwire/mcp/auth"
	"github.com/agentwire/agentwire/mcp/streamable"
	"github.com/agentwire/agentwire/rpc"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/semconv/v1.41.0/mcpconv"
	"go.opentelemetry.io/otel/semconv/v1.41.0/rpcconv"
	"go.opentelemetry.io/otel/trace"
)

// side is what ServerMiddleware and ClientMiddleware share: the resolved
// options, the start options of their spans and the instruments of their
// metrics.
type side struct {
	cfg       *config
	startOpts []trace.SpanStartOption
	dur       metric.Float64Histogram
	active    metric.Int64UpDownCounter
	activeSet metric.MeasurementOption // the static attributes, for active
}

func newSide(o *Options, client bool) *side {
	c := resolve(o, client)
	s := &side{cfg: c}
	kind := trace.SpanKindServer
	durName, activeName := MetricMCPServerDuration, MetricServerActiveRequests
	durDesc := mcpconv.ServerOperationDuration{}.Description()
	if client {
		kind = trace.SpanKindClient
		durName, activeName = MetricMCPClientDuration, MetricClientActiveRequests
		durDesc = mcpconv.ClientOperationDuration{}.Description()
	}
	buckets := mcpDurationBuckets
	if c.protocol != MCP {
		durName, buckets = MetricRPCServerDuration, rpcDurationBuckets
		durDesc = rpcconv.ServerCallDuration{}.Description()
		if client {
			durName = MetricRPCClientDuration
			durDesc = rpcconv.ClientCallDuration{}.Description()
		}
	}
	s.startOpts = []trace.SpanStartOption{trace.WithSpanKind(kind)}
	if c.protocol != MCP {
		// The RPC conventions want rpc.system.name at creation, for
		// samplers.
		s.startOpts = append(s.startOpts, trace.WithAttributes(KeyRPCSystemName.String(rpcSystemJSONRPC)))
	}
	var err error
	if s.dur, err = c.meter.Float64Histogram(durName, metric.WithUnit("s"), metric.WithDescription(durDesc),
		metric.WithExplicitBucketBoundaries(buckets...)); err != nil {
		c.logger.Warn("telemetry: cannot make an instrument", "name", durName, "error", err)
	}
	what := "Requests this side is serving."
	if client {
		what = "Requests this side has sent and awaits the answer of."
	}
	if s.active, err = c.meter.Int64UpDownCounter(activeName, metric.WithUnit("{request}"), metric.WithDescription(what)); err != nil {
		c.logger.Warn("telemetry: cannot make an instrument", "name", activeName, "error", err)
	}
	s.activeSet = metric.WithAttributeSet(attribute.NewSet(c.static...))
	return s
}

// enabled reports whether the duration histogram takes measurements
// (false for a no-op MeterProvider): what the metrics need of a request is
// then not worked out.
func (s *side) enabled(ctx context.Context) bool {
	return s.dur != nil && s.dur.Enabled(ctx)
}

// mayCarry reports whether params may hold trace context: they contain
// one of the propagator's keys (but tracestate) followed by a quote, as a
// member's name is. A key spelled with escapes is not looked for here
// (Extract reads it).
func (c *config) mayCarry(params []byte) bool {
	for _, p := range c.probes {
		if bytes.Contains(params, p) {
			return true
		}
	}
	return false
}

// request is what a span and its measurement say of one request, worked
// out only when a span records or metrics are taken.
type request struct {
	method      string
	id          jsonrpc.ID
	target      string // the tool or prompt name
	uri         string
	version     string // mcp.protocol.version
	era         string
	session     string // ACP's params.sessionId
	owner       string // agentwire.client.owner
	httpSession string // mcp.session.id: the HTTP session served (streamable.SessionIDFrom)
	tool        bool   // a tools/call: its result's isError counts
}

// describeMCP reads what an MCP request names from its params (or from
// the HTTP route's note, which has read them already). version is the
// connection's negotiated legacy version, "" when unknown.
func (r *request) describeMCP(params []byte, note *mcp.Routed, version string) {
	var name, uri, metaVersion []byte
	era := mcp.EraUnknown
	if note != nil {
		name, uri = note.Params.Name, note.Params.URI
		era, r.version = note.Era, note.Version
	} else if len(params) > 0 {
		var p mcp.RequestParams
		mcp.ParseRequestParams(params, &p)
		name, uri = p.Name, p.URI
		if p.Meta != nil {
			metaVersion = p.Meta.ProtocolVersion
		}
		if metaVersion != nil {
			era = mcp.Modern
			r.version, _ = jsonrpc.StringValue(metaVersion)
		}
	}
	if era == mcp.EraUnknown {
		era = mcp.Legacy
	}
	if r.version == "" && era == mcp.Legacy {
		r.version = version
	}
	r.era = era.String()
	switch r.method {
	case methodToolsCall:
		r.tool = true
		r.target, _ = jsonrpc.StringValue(name)
	case methodPromptsGet:
		r.target, _ = jsonrpc.StringValue(name)
	default:
		if hasResourceURI(r.method) {
			r.uri, _ = jsonrpc.StringValue(uri)
		}
	}
}

// describeACP reads the session an ACP request names.
func (r *request) describeACP(params []byte) {
	jsonrpc.EachMember(params, func(key, value []byte) bool {
		if string(key) == "sessionId" {
			r.session, _ = jsonrpc.StringValue(value)
			return false
		}
		return true
	})
}

// spanAttributes are the attributes of a span of r, on top of the side's
// static ones.
func (c *config) spanAttributes(r *request, attrs []attribute.KeyValue) []attribute.KeyValue {
	if c.protocol == MCP {
		attrs = append(attrs, KeyMCPMethodName.String(r.method))
		if r.version != "" {
			attrs = append(attrs, KeyMCPProtocolVersion.String(r.version))
		}
		if r.era != "" {
			attrs = append(attrs, KeyEra.String(r.era))
		}
		switch {
		case r.tool:
			attrs = append(attrs, KeyGenAIOperationName.String(operationExecTool))
			if r.target != "" {
				attrs = append(attrs, KeyGenAIToolName.String(r.target))
			}
		case r.method == methodPromptsGet && r.target != "":
			attrs = append(attrs, KeyGenAIPromptName.String(r.target))
		case r.uri != "":
			attrs = append(attrs, KeyMCPResourceURI.String(r.uri))
		}
	} else {
		attrs = append(attrs, KeyRPCMethod.String(r.method), KeyJSONRPCProtocolVersion.String("2.0"))
		if r.session != "" {
			attrs = append(attrs, KeyACPSessionID.String(r.session))
		}
	}
	if r.owner != "" {
		attrs = append(attrs, KeyClientOwner.String(r.owner))
	}
	if r.httpSession != "" {
		attrs = append(attrs, KeyMCPSessionID.String(r.httpSession))
	}
	return append(attrs, c.static...)
}

// idString is the conventions' string representation of a request id: a
// string id's contents, a number as written; "" for none or null.
func idString(id jsonrpc.ID) string {
	if id == "" || id == jsonrpc.NullID {
		return ""
	}
	if id.IsString() {
		s, _ := jsonrpc.StringValue([]byte(id))
		return s
	}
	return string(id)
}

// outcome is how a request ended, as error.type, rpc.response.status_code
// and the span status's description.
type outcome struct {
	errType, code, desc string
}

// serverOutcome classifies what a handler returned: a JSON-RPC error by
// its code; a cancelled or expired context; ErrNoResponse as no error (the
// handler chose not to answer); any other error as the -32603 rpc answers
// it with; a tools/call result with isError true as "tool_error".
func serverOutcome(r *request, result any, err error) outcome {
	if err != nil {
		var je *jsonrpc.Error
		switch {
		case errors.As(err, &je):
			c := codeString(je.Code)
			return outcome{c, c, je.Message}
		case errors.Is(err, rpc.ErrNoResponse):
			return outcome{}
		case errors.Is(err, context.Canceled):
			return outcome{errType: ErrorTypeCancelled, desc: err.Error()}
		case errors.Is(err, context.DeadlineExceeded):
			return outcome{errType: ErrorTypeTimeout, desc: err.Error()}
		}
		c := codeString(jsonrpc.CodeInternalError)
		return outcome{c, c, err.Error()}
	}
	if r.tool && isToolError(result) {
		return outcome{errType: ErrorTypeToolError, desc: ErrorTypeToolError}
	}
	return outcome{}
}

// clientOutcome classifies what a call returned: the peer's JSON-RPC error
// by its code, a cancelled or expired context, any other failure (the
// connection lost) as _OTHER; a tools/call result with isError true as
// "tool_error".
func clientOutcome(r *request, res json.RawMessage, err error) outcome {
	if err != nil {
		var je *jsonrpc.Error
		switch {
		case errors.As(err, &je):
			c := codeString(je.Code)
			return outcome{c, c, je.Message}
		case errors.Is(err, context.Canceled):
			return outcome{errType: ErrorTypeCancelled, desc: err.Error()}
		case errors.Is(err, context.DeadlineExceeded):
			return outcome{errType: ErrorTypeTimeout, desc: err.Error()}
		}
		return outcome{errType: ErrorTypeOther, desc: err.Error()}
	}
	if r.tool && isToolError(res) {
		return outcome{errType: ErrorTypeToolError, desc: ErrorTypeToolError}
	}
	return outcome{}
}

var isErrorMember = []byte(`"isError"`)

// isToolError reports whether a tools/call result has isError true. Raw
// results are scanned only when they contain "isError" at all.
func isToolError(result any) bool {
	var b []byte
	switch r := result.(type) {
	case *jsonrpc.Encoded:
		if r != nil {
			b = *r
		}
	case jsonrpc.Encoded:
		b = r
	case json.RawMessage:
		b = r
	case *json.RawMessage:
		if r != nil {
			b = *r
		}
	case []byte:
		b = r
	case *mcp.ToolResult:
		return r != nil && r.IsError
	case mcp.ToolResult:
		return r.IsError
	case map[string]json.RawMessage:
		return string(r["isError"]) == "true"
	case map[string]any:
		v, _ := r["isError"].(bool)
		return v
	default:
		return false
	}
	if !bytes.Contains(b, isErrorMember) {
		return false
	}
	isErr := false
	jsonrpc.EachMember(b, func(key, value []byte) bool {
		if string(key) == "isError" {
			isErr = string(value) == "true"
		}
		return true
	})
	return isErr
}

// end records the outcome on the span (when it records) and ends it.
func endSpan(span trace.Span, rec bool, o outcome) {
	if rec && o.errType != "" {
		attrs := make([]attribute.KeyValue, 0, 2)
		attrs = append(attrs, KeyErrorType.String(o.errType))
		if o.code != "" {
			attrs = append(attrs, KeyRPCResponseStatusCode.String(o.code))
		}
		span.SetAttributes(attrs...)
		span.SetStatus(codes.Error, o.desc)
	}
	span.End()
}

// measure records the duration of r with the conventions' low-cardinality
// attributes. A method the peer's registry did not know (-32601) is
// recorded as _OTHER, and the tool or prompt of a refused call (-32602,
// an unknown tool) is left out, so that a peer cannot grow the metrics
// without bound; the span keeps them.
func (s *side) measure(ctx context.Context, r *request, o outcome, d time.Duration, server bool) {
	c := s.cfg
	method, target := r.method, r.target
	if server && o.code == "-32601" {
		method, target = ErrorTypeOther, ""
	}
	if o.code == "-32602" {
		target = ""
	}
	attrs := make([]attribute.KeyValue, 0, 8+len(c.static))
	if c.protocol == MCP {
		attrs = append(attrs, KeyMCPMethodName.String(method))
		if r.version != "" {
			attrs = append(attrs, KeyMCPProtocolVersion.String(r.version))
		}
		if r.era != "" {
			attrs = append(attrs, KeyEra.String(r.era))
		}
		if r.tool {
			attrs = append(attrs, KeyGenAIOperationName.String(operationExecTool))
			if target != "" {
				attrs = append(attrs, KeyGenAIToolName.String(target))
			}
		} else if r.method == methodPromptsGet && target != "" {
			attrs = append(attrs, KeyGenAIPromptName.String(target))
		}
	} else {
		attrs = append(attrs, KeyRPCMethod.String(method))
	}
	if o.code != "" {
		attrs = append(attrs, KeyRPCResponseStatusCode.String(o.code))
	}
	if o.errType != "" {
		attrs = append(attrs, KeyErrorType.String(o.errType))
	}
	attrs = append(attrs, c.static...)
	s.dur.Record(ctx, d.Seconds(), metric.WithAttributes(attrs...))
}

// ServerMiddleware returns the rpc middleware that traces and measures
// every request and notification a connection serves: a SERVER span per
// message, its parent the trace context of params._meta (or, without
// one, whatever span the handler's context holds), the handler running
// with the span in its context, so that the calls it makes are the span's
// children. It records the operation duration and the requests in flight.
// Nil o means the defaults (Options). See the package documentation for
// names, attributes and cost.
func ServerMiddleware(o *Options) rpc.Middleware {
	s := newSide(o, false)
	return func(next rpc.Handler) rpc.Handler {
		return &serverConn{s: s, next: next}
	}
}

// serverConn is ServerMiddleware around one connection's handler (rpc
// composes a connection's middleware once, when it is made).
type serverConn struct {
	s    *side
	next rpc.Handler
	// version is the protocol version a legacy initialize on this
	// connection agreed, for the requests after it.
	version atomic.Pointer[string]
}

func (h *serverConn) Handle(ctx context.Context, req *rpc.Request) (result any, err error) {
	s := h.s
	c := s.cfg
	measure := s.enabled(ctx)
	var start time.Time
	if measure {
		start = time.Now()
	}
	parent := ctx
	var note *mcp.Routed
	if c.protocol == MCP {
		note = mcp.RoutedOf(req.Note())
	}
	if c.mayCarry(req.Params) {
		if note != nil && note.Params.Meta != nil {
			parent = c.prop.Extract(ctx, readCarrier(note.Params.MetaRaw, c.fields))
		} else {
			parent = extractValid(ctx, req.Params, c.prop, c.fields)
		}
	}
	sctx := parent
	var span trace.Span
	if !c.noTracing && (!c.dropsRoots || parent != ctx || trace.SpanContextFromContext(ctx).IsValid()) {
		sctx, span = c.tracer.Start(parent, req.Method, s.startOpts...)
	}
	if !measure && (span == nil || !span.IsRecording()) {
		// Nothing to attribute or measure (the sampler dropped the span):
		// the handler runs with the span's context, and that is all.
		result, err = h.next.Handle(sctx, req)
		if span != nil {
			span.End()
		}
		if req.Method == methodInitialize && err == nil && c.protocol == MCP {
			h.learnVersion(result)
		}
		return result, err
	}
	if span == nil {
		span = noSpan
	}
	rec := span.IsRecording()
	r := &request{method: req.Method, id: req.ID}
	h.describe(ctx, r, req, note, rec)
	if rec {
		h.startAttributes(ctx, parent, span, r)
	}
	if s.active != nil {
		s.active.Add(ctx, 1, s.activeSet)
	}
	done := false
	defer func() {
		if !done { // the handler panicked: rpc answers -32603
			code := codeString(jsonrpc.CodeInternalError)
			h.finish(ctx, span, rec, measure, r, start, outcome{code, code, "panic"})
		}
	}()
	result, err = h.next.Handle(sctx, req)
	done = true
	o := serverOutcome(r, result, err)
	if req.Method == methodInitialize && err == nil && c.protocol == MCP {
		if v := h.learnVersion(result); v != "" {
			r.version = v
			if rec {
				span.SetAttributes(KeyMCPProtocolVersion.String(v))
			}
		}
	}
	h.finish(ctx, span, rec, measure, r, start, o)
	return result, err
}

// noSpan stands for the span not started (tracing off), where metrics
// are still taken.
var noSpan = trace.SpanFromContext(context.Background())

// learnVersion keeps the version a legacy initialize agreed on this
// connection, for the requests after it.
func (h *serverConn) learnVersion(result any) string {
	v := resultVersion(result)
	if v != "" {
		h.version.Store(&v)
	}
	return v
}

func (h *serverConn) describe(ctx context.Context, r *request, req *rpc.Request, note *mcp.Routed, rec bool) {
	switch h.s.cfg.protocol {
	case MCP:
		var v string
		if p := h.version.Load(); p != nil {
			v = *p
		}
		r.describeMCP(req.Params, note, v)
	case ACP:
		r.describeACP(req.Params)
	}
	if rec {
		if id := auth.IdentityFrom(ctx); id != nil {
			r.owner = ownerString(id)
		}
		if h.s.cfg.protocol == MCP {
			r.httpSession = streamable.SessionIDFrom(ctx)
		}
	}
}

// startAttributes names the span and gives it its attributes, and a link
// to the ambient span (an HTTP server span, say) when the parent came from
// _meta, as the MCP conventions ask.
func (h *serverConn) startAttributes(ctx, parent context.Context, span trace.Span, r *request) {
	c := h.s.cfg
	if c.protocol == MCP && r.target != "" {
		span.SetName(spanName(r.method, r.target))
	}
	attrs := make([]attribute.KeyValue, 0, 10+len(c.static))
	if id := idString(r.id); id != "" {
		attrs = append(attrs, KeyJSONRPCRequestID.String(id))
	}
	span.SetAttributes(c.spanAttributes(r, attrs)...)
	if parent != ctx {
		if amb := trace.SpanContextFromContext(ctx); amb.IsValid() && !amb.Equal(trace.SpanContextFromContext(parent)) {
			span.AddLink(trace.Link{SpanContext: amb})
		}
	}
}

func (h *serverConn) finish(ctx context.Context, span trace.Span, rec, measure bool, r *request, start time.Time, o outcome) {
	endSpan(span, rec, o)
	s := h.s
	if measure {
		s.measure(ctx, r, o, time.Since(start), true)
	}
	if s.active != nil {
		s.active.Add(ctx, -1, s.activeSet)
	}
}

// resultVersion reads protocolVersion from an initialize result: raw, or
// any value that encodes as JSON (once per connection).
func resultVersion(result any) string {
	var b []byte
	switch r := result.(type) {
	case nil:
		return ""
	case json.RawMessage:
		b = r
	case *jsonrpc.Encoded:
		if r != nil {
			b = *r
		}
	case jsonrpc.Encoded:
		b = r
	case []byte:
		b = r
	default:
		var err error
		if b, err = json.Marshal(result); err != nil {
			return ""
		}
	}
	var v string
	jsonrpc.EachMember(b, func(key, value []byte) bool {
		if string(key) == "protocolVersion" {
			v, _ = jsonrpc.StringValue(value)
			return false
		}
		return true
	})
	return v
}

// ownerString is agentwire.client.owner: the identity's issuer and
// subject (or "client:" and its client id), joined by a space.
func ownerString(id *auth.Identity) string {
	who := id.Subject
	if who == "" {
		who = "client:" + id.ClientID
	}
	if id.Issuer == "" {
		return who
	}
	return id.Issuer + " " + who
}

// ClientMiddleware returns the outbound middleware that traces and
// measures every call and notification a connection sends: a CLIENT span
// per message, a child of whatever span the caller's context holds, whose
// trace context replaces any in the params' _meta (for MCP and ACP; plain
// JSON-RPC params are left as they are). A bridge forwarding a client's
// request with its _meta thereby puts its own span there. The request id
// is recorded once the call is sent, the peer's error by its code. Nil o
// means the defaults (Options).
func ClientMiddleware(o *Options) rpc.OutboundMiddleware {
	s := newSide(o, true)
	return func(next rpc.Invoker) rpc.Invoker {
		cc := &clientChain{s: s, next: next}
		return cc.invoke
	}
}

// clientChain is ClientMiddleware in one composed chain (one set of
// connection options: one client connection, typically).
type clientChain struct {
	s    *side
	next rpc.Invoker
	// version is what a legacy initialize sent through this chain agreed.
	version atomic.Pointer[string]
}

func (cc *clientChain) invoke(ctx context.Context, call *rpc.OutboundCall) (res json.RawMessage, err error) {
	s := cc.s
	c := s.cfg
	measure := s.enabled(ctx)
	var start time.Time
	if measure {
		start = time.Now()
	}
	sctx, span := ctx, noSpan
	if !c.noTracing && (!c.dropsRoots || trace.SpanContextFromContext(ctx).IsValid()) {
		sctx, span = c.tracer.Start(ctx, call.Method, s.startOpts...)
	}
	rec := span.IsRecording()
	var carrier metaCarrier
	if c.protocol != JSONRPC {
		// Without a span of our own this is the caller's trace context
		// (tracing off here: it passes through), or nothing.
		c.prop.Inject(sctx, &carrier)
	}
	var raw []byte
	if len(carrier.keys) > 0 || ((rec || measure) && c.protocol != JSONRPC) {
		raw, _ = jsonrpc.RawValue(call.Params)
	}
	var r *request
	if rec || measure {
		r = &request{method: call.Method}
		switch c.protocol {
		case MCP:
			var v string
			if p := cc.version.Load(); p != nil {
				v = *p
			}
			r.describeMCP(raw, nil, v)
		case ACP:
			r.describeACP(raw)
		}
	}
	if len(carrier.keys) > 0 && raw != nil {
		if out, ierr := injectValid(raw, &carrier, c.fields); ierr == nil {
			call.Params = json.RawMessage(out)
		}
	}
	if rec {
		if c.protocol == MCP && r.target != "" {
			span.SetName(spanName(r.method, r.target))
		}
		span.SetAttributes(c.spanAttributes(r, make([]attribute.KeyValue, 0, 10+len(c.static)))...)
	}
	if measure && s.active != nil {
		s.active.Add(ctx, 1, s.activeSet)
	}
	res, err = cc.next(sctx, call)
	if call.Method == methodInitialize && c.protocol == MCP && err == nil {
		if v := resultVersion(res); v != "" {
			cc.version.Store(&v)
			if r != nil {
				r.version = v
			}
			if rec {
				span.SetAttributes(KeyMCPProtocolVersion.String(v))
			}
		}
	}
	if !rec && !measure {
		span.End()
		return res, err
	}
	o := clientOutcome(r, res, err)
	if rec {
		if id := idString(call.ID); id != "" {
			span.SetAttributes(KeyJSONRPCRequestID.String(id))
		}
	}
	endSpan(span, rec, o)
	if measure {
		s.measure(ctx, r, o, time.Since(start), false)
		if s.active != nil {
			s.active.Add(ctx, -1, s.activeSet)
		}
	}
	return res, err
}
