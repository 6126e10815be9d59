package telemetry

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentwire/agentwire/jsonrpc"
	"github.com/agentwire/agentwire/mcp"
	"github.com/agentwire/agentwire/mcp/auth"
	"github.com/agentwire/agentwire/mcp/streamable"
	"github.com/agentwire/agentwire/rpc"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/baggage"
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
// member's name is, or a \u00XX escape of one of those keys' bytes (a key
// spelled with escapes, which Extract and Inject match as encoding/json
// decodes it). Only such params are parsed.
func (c *config) mayCarry(params []byte) bool {
	for _, p := range c.probes {
		if bytes.Contains(params, p) {
			return true
		}
	}
	return c.mayCarryEscaped(params)
}

// mayCarryEscaped reports whether b holds a \u00XX escape of a byte of
// the probed keys. Every other escape, and a \\ pair, is stepped over.
func (c *config) mayCarryEscaped(b []byte) bool {
	for {
		i := bytes.IndexByte(b, '\\')
		if i < 0 || i+1 >= len(b) {
			return false
		}
		b = b[i+1:] // the escape's letter
		if len(b) >= 5 && b[0] == 'u' && b[1] == '0' && b[2] == '0' {
			if hi, lo := unhex(b[3]), unhex(b[4]); hi >= 0 && lo >= 0 && c.escaped[hi<<4|lo] {
				return true
			}
		}
		b = b[1:]
	}
}

func unhex(c byte) int {
	switch {
	case '0' <= c && c <= '9':
		return int(c - '0')
	case 'a' <= c && c <= 'f':
		return int(c-'a') + 10
	case 'A' <= c && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}

// request is what a span and its measurement say of one request, worked
// out only when a span records or metrics are taken.
type request struct {
	method      string // cut at MaxSpanValueBytes
	known       bool   // method is the protocol's or Options.Methods'
	id          jsonrpc.ID
	target      string // the tool or prompt name
	uri         string
	version     string // mcp.protocol.version
	era         string
	session     string // ACP's params.sessionId
	owner       string // agentwire.client.owner
	httpSession string // mcp.session.id: the digest of the HTTP session served (streamable.SessionIDFrom)
	tool        bool   // a tools/call: its result's isError counts
}

// newRequest is the request of method: every string a peer chose in it
// is cut at MaxSpanValueBytes as it is read (here and in describeMCP,
// describeACP), so that neither a span nor a relay's open request keeps a
// message-sized one.
func (c *config) newRequest(method string, id jsonrpc.ID) request {
	return request{method: clip(method, MaxSpanValueBytes), known: c.known(method), id: id}
}

// stringValue is a JSON string value cut at MaxSpanValueBytes.
func stringValue(v []byte) string {
	s, _ := jsonrpc.StringValue(v)
	return clip(s, MaxSpanValueBytes)
}

// describeMCP reads what an MCP request names from its params (or from
// the HTTP route's note, which has read them already). version is the
// connection's negotiated legacy version, "" when unknown.
func (r *request) describeMCP(params []byte, note *mcp.Routed, version string) {
	var name, uri, metaVersion []byte
	era := mcp.EraUnknown
	if note != nil {
		name, uri = note.Params.Name, note.Params.URI
		era, r.version = note.Era, clip(note.Version, MaxSpanValueBytes)
	} else if len(params) > 0 {
		var p mcp.RequestParams
		mcp.ParseRequestParams(params, &p)
		name, uri = p.Name, p.URI
		if p.Meta != nil {
			metaVersion = p.Meta.ProtocolVersion
		}
		if metaVersion != nil {
			era = mcp.Modern
			r.version = stringValue(metaVersion)
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
		r.target = stringValue(name)
	case methodPromptsGet:
		r.target = stringValue(name)
	default:
		if hasResourceURI(r.method) {
			r.uri = stringValue(uri)
		}
	}
}

// describeACP reads the session an ACP request names.
func (r *request) describeACP(params []byte) {
	jsonrpc.EachMember(params, func(key, value []byte) bool {
		if string(key) == "sessionId" {
			r.session = stringValue(value)
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
		if r.known {
			attrs = append(attrs, KeyRPCMethod.String(r.method))
		} else {
			attrs = append(attrs, KeyRPCMethod.String(ErrorTypeOther), KeyRPCMethodOriginal.String(r.method))
		}
		attrs = append(attrs, KeyJSONRPCProtocolVersion.String("2.0"))
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
// string id's contents, a number as written; "" for none or null. It is
// cut at MaxSpanValueBytes.
func idString(id jsonrpc.ID) string {
	if id == "" || id == jsonrpc.NullID {
		return ""
	}
	if id.IsString() {
		return stringValue([]byte(id))
	}
	return clip(string(id), MaxSpanValueBytes)
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
		if errors.Is(err, rpc.ErrNoResponse) {
			return outcome{}
		}
		if o, ok := errorOutcome(err); ok {
			return o
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
		if o, ok := errorOutcome(err); ok {
			return o
		}
		return outcome{errType: ErrorTypeOther, desc: err.Error()}
	}
	if r.tool && isToolError(res) {
		return outcome{errType: ErrorTypeToolError, desc: ErrorTypeToolError}
	}
	return outcome{}
}

// errorOutcome is what both sides read the same way in an error: a
// JSON-RPC error by its code, a cancelled or an expired context.
func errorOutcome(err error) (outcome, bool) {
	var je *jsonrpc.Error
	switch {
	case errors.As(err, &je):
		c := codeString(je.Code)
		return outcome{c, c, je.Message}, true
	case errors.Is(err, context.Canceled):
		return outcome{errType: ErrorTypeCancelled, desc: err.Error()}, true
	case errors.Is(err, context.DeadlineExceeded):
		return outcome{errType: ErrorTypeTimeout, desc: err.Error()}, true
	}
	return outcome{}, false
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
		span.SetStatus(codes.Error, clip(o.desc, MaxSpanValueBytes))
	}
	span.End()
}

// measure records the duration of r with the conventions'
// low-cardinality attributes, each bounded whatever the peer sends: the
// method only when the protocol defines it (or Options.Methods lists it)
// and, on the serving side, the handler knew it (not -32601), else
// _OTHER; the protocol version only when agentwire knows it, else _OTHER;
// the tool or prompt name only when the call found it (it was answered
// with a result, isError true included), cut at MaxMetricNameBytes; an
// error code only when it is a known one (knownCodes), else _OTHER. The
// span keeps what it was sent (cut at MaxSpanValueBytes).
func (s *side) measure(ctx context.Context, r *request, o outcome, d time.Duration, server bool) {
	c := s.cfg
	method := r.method
	if !r.known || (server && o.code == "-32601") {
		method = ErrorTypeOther
	}
	var target string
	if o.code == "" && (o.errType == "" || o.errType == ErrorTypeToolError) {
		target = clip(r.target, MaxMetricNameBytes)
	}
	code, errType := o.code, o.errType
	if code != "" && !knownCodes[code] {
		code = ErrorTypeOther
		if errType == o.code {
			errType = ErrorTypeOther
		}
	}
	attrs := make([]attribute.KeyValue, 0, 8+len(c.static))
	if c.protocol == MCP {
		attrs = append(attrs, KeyMCPMethodName.String(method))
		if r.version != "" {
			v := r.version
			if !mcpVersions[v] {
				v = ErrorTypeOther
			}
			attrs = append(attrs, KeyMCPProtocolVersion.String(v))
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
	if code != "" {
		attrs = append(attrs, KeyRPCResponseStatusCode.String(code))
	}
	if errType != "" {
		attrs = append(attrs, KeyErrorType.String(errType))
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
	if s.cfg.noTracing && s.cfg.noMetrics {
		// Nothing to record: rpc composes nothing, and a connection pays
		// nothing (the trace context a request carries would only reach
		// calls made through a ClientMiddleware, which over the same
		// providers is nil too).
		return nil
	}
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
	// session is the last HTTP session id seen and its digest
	// (mcp.session.id), worked out once per session.
	session atomic.Pointer[[2]string]
}

// Handle keeps little in its own frame: a subscriptions/listen stream
// runs its handler under it for as long as the stream is open, on a stack
// that must stay in its first size (the CLI's
// TestAnIdleListenStreamKeepsASmallStack). What a traced or measured
// request needs is in a pooled serverCall, and the work before and after
// the handler in functions of their own.
func (h *serverConn) Handle(ctx context.Context, req *rpc.Request) (result any, err error) {
	sctx, span, call := h.begin(ctx, req)
	if call == nil {
		// Nothing to attribute or measure (the sampler dropped the span):
		// the handler runs with the span's context, and that is all.
		result, err = h.next.Handle(sctx, req)
		h.endUnobserved(span, req, result, err)
		return result, err
	}
	defer h.end(ctx, call, req, &result, &err)
	result, err = h.next.Handle(sctx, req)
	call.returned = true
	return result, err
}

// serverCall is what a traced or measured request keeps while its
// handler runs.
type serverCall struct {
	r        request
	span     trace.Span
	start    time.Time
	rec      bool // the span records
	measure  bool // the duration is recorded
	returned bool // the handler returned (else it panicked)
}

var serverCalls = sync.Pool{New: func() any { return new(serverCall) }}

// begin extracts the parent, starts the span and, when the request is
// traced or measured, describes it in a serverCall (nil otherwise).
//
//go:noinline
func (h *serverConn) begin(ctx context.Context, req *rpc.Request) (context.Context, trace.Span, *serverCall) {
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
		sctx, span = c.tracer.Start(parent, c.startName(req.Method), s.startOpts...)
	}
	if !measure && (span == nil || !span.IsRecording()) {
		return sctx, span, nil
	}
	if span == nil {
		span = noSpan
	}
	call := serverCalls.Get().(*serverCall)
	*call = serverCall{r: c.newRequest(req.Method, req.ID), span: span, start: start, rec: span.IsRecording(), measure: measure}
	h.describe(ctx, &call.r, req, note, call.rec)
	if call.rec {
		h.startAttributes(ctx, parent, span, &call.r)
	}
	if s.active != nil {
		s.active.Add(ctx, 1, s.activeSet)
	}
	return sctx, span, call
}

// endUnobserved ends a request neither traced nor measured.
//
//go:noinline
func (h *serverConn) endUnobserved(span trace.Span, req *rpc.Request, result any, err error) {
	if span != nil {
		span.End()
	}
	if req.Method == methodInitialize && err == nil && h.s.cfg.protocol == MCP {
		h.learnVersion(result)
	}
}

// end records a traced or measured request's outcome. It is deferred, so
// that a handler's panic, which goes on to rpc (answered -32603), is
// recorded too.
func (h *serverConn) end(ctx context.Context, call *serverCall, req *rpc.Request, result *any, err *error) {
	defer func() {
		*call = serverCall{} // nothing of the request stays in the pool
		serverCalls.Put(call)
	}()
	r := &call.r
	if !call.returned {
		code := codeString(jsonrpc.CodeInternalError)
		h.finish(ctx, call.span, call.rec, call.measure, r, call.start, outcome{code, code, "panic"})
		return
	}
	o := serverOutcome(r, *result, *err)
	if req.Method == methodInitialize && *err == nil && h.s.cfg.protocol == MCP {
		if v := h.learnVersion(*result); v != "" {
			r.version = v
			if call.rec {
				call.span.SetAttributes(KeyMCPProtocolVersion.String(v))
			}
		}
	}
	h.finish(ctx, call.span, call.rec, call.measure, r, call.start, o)
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

// sessionDigest is mcp.session.id of the HTTP session id: not the id
// itself, a bearer capability (see the package's sessionDigest).
func (h *serverConn) sessionDigest(id string) string {
	if p := h.session.Load(); p != nil && p[0] == id {
		return p[1]
	}
	d := sessionDigest(id)
	h.session.Store(&[2]string{id, d})
	return d
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
			if id := streamable.SessionIDFrom(ctx); id != "" {
				r.httpSession = h.sessionDigest(id)
			}
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
			v = stringValue(value)
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
		return clip(who, MaxSpanValueBytes)
	}
	return clip(id.Issuer+" "+who, MaxSpanValueBytes)
}

// ClientMiddleware returns the outbound middleware that traces and
// measures every call and notification a connection sends: a CLIENT span
// per message, a child of whatever span the caller's context holds, whose
// trace context replaces any in the params' _meta (for MCP and ACP; plain
// JSON-RPC params are left as they are). A bridge forwarding a client's
// request with its _meta thereby puts its own span there. The request id
// is recorded once the call is sent, the peer's error by its code. Nil o
// means the defaults (Options).
//
// With tracing and metrics both off — the no-op TracerProvider
// (trace/noop's) and metric/noop's MeterProvider, as Setup makes when
// nothing is exported — it returns nil, which rpc (and every list of
// OutboundMiddleware in agentwire) skips, so that the calls cost nothing.
// The trace context a caller's context holds (a handler's, continued from
// the _meta of the request it serves) is then not written into the
// calls' _meta: a process that does not trace ends the propagation at its
// outbound calls. A caller that composes the middleware by hand checks
// for nil.
func ClientMiddleware(o *Options) rpc.OutboundMiddleware {
	s := newSide(o, true)
	if s.cfg.noTracing && s.cfg.noMetrics {
		return nil
	}
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

// noCarrier is the empty carrier of a call with nothing to inject (never
// written to).
var noCarrier = &metaCarrier{}

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
		sctx, span = c.tracer.Start(ctx, c.startName(call.Method), s.startOpts...)
	}
	rec := span.IsRecording()
	// The carrier is made only when there is something to write: handed
	// to the propagator it escapes, and a request that is not traced
	// (a sampler dropped it, no caller's context) would pay for it.
	carrier := noCarrier
	if c.protocol != JSONRPC && (trace.SpanContextFromContext(sctx).IsValid() || baggage.FromContext(sctx).Len() > 0) {
		// Without a span of our own this is the caller's trace context
		// (tracing off here: it passes through).
		carrier = new(metaCarrier)
		c.prop.Inject(sctx, carrier)
	}
	var raw []byte
	if len(carrier.keys) > 0 || ((rec || measure) && c.protocol != JSONRPC) {
		raw, _ = jsonrpc.RawValue(call.Params)
	}
	var r *request
	if rec || measure {
		rq := c.newRequest(call.Method, "")
		r = &rq
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
		if out, ierr := injectValid(raw, carrier, c.fields); ierr == nil {
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
	done := false
	defer func() {
		if done {
			return
		}
		// next panicked (a Params' MarshalJSON, an inner middleware):
		// the span ends and the call leaves the requests in flight; the
		// panic goes on.
		cc.finish(ctx, span, rec, measure, r, start, call, outcome{errType: ErrorTypeOther, desc: "panic"})
	}()
	res, err = cc.next(sctx, call)
	done = true
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
	cc.finish(ctx, span, rec, measure, r, start, call, clientOutcome(r, res, err))
	return res, err
}

// finish ends the span of a call (with its id, once sent) and records
// its measurement; r is nil when neither is taken.
func (cc *clientChain) finish(ctx context.Context, span trace.Span, rec, measure bool, r *request, start time.Time, call *rpc.OutboundCall, o outcome) {
	s := cc.s
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
}
