package telemetry

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"sync"

	"github.com/agentwire/agentwire/internal/refusal"
	"github.com/agentwire/agentwire/jsonrpc"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// Direction is which side of a Relay a line comes from.
type Direction uint8

const (
	// FromClient: a line the host (the client) sent, on its way to the
	// server.
	FromClient Direction = iota
	// FromServer: a line the server sent, on its way to the host.
	FromServer
)

func (d Direction) String() string {
	if d == FromServer {
		return "server"
	}
	return "client"
}

func (d Direction) other() Direction { return 1 - d }

// MaxRelaySpans bounds the spans a Relay holds open, waiting for their
// responses. Past it the oldest open span is ended as abandoned
// (RelayStats.Abandoned, logged once per burst), so that a peer that never
// answers cannot grow a relay's memory without bound.
const MaxRelaySpans = 4096

// Relay traces a transparent proxy of raw JSON-RPC lines between a host and
// a server (agentwire tap): every request that passes, from either side,
// gets a span of its own, parented to the trace context of its
// params._meta, and the line goes on with that context replaced by the
// relay span's, so that the receiver's span is the relay span's child.
// The span ends with the response from the other side (its error status
// from the error's code), or as cancelled by the sender's cancellation
// (notifications/cancelled, $/cancel_request).
//
// The relay span is a CLIENT span (the MCP conventions name only client
// and server spans; the relay is the client of the hop it makes), named and
// attributed as ClientMiddleware's are, plus agentwire.relay true and
// agentwire.relay.direction ("client" for a host's request, "server" for a
// server's). Notifications, responses, batches and lines that are not
// JSON pass unchanged and start nothing.
//
// A Relay is safe for concurrent use (one goroutine per direction).
type Relay struct {
	cfg       *config
	startOpts []trace.SpanStartOption
	log       refusal.Log

	mu         sync.Mutex
	open       map[relayKey]*relaySpan
	queue      []*relaySpan // open spans, oldest first (ended ones are skipped)
	version    string       // what a legacy initialize through the relay agreed
	closed     bool
	abandoned  int64
	unanswered int64
}

// RelayStats counts a Relay's spans.
type RelayStats struct {
	// Open is the number of spans waiting for their responses.
	Open int
	// Abandoned counts spans ended without a response because
	// MaxRelaySpans newer ones were open (or a request reused the id of
	// one still open): agentwire.relay.outcome "abandoned".
	Abandoned int64
	// Unanswered counts spans still open when the relay was closed:
	// agentwire.relay.outcome "unanswered".
	Unanswered int64
}

type relayKey struct {
	dir Direction // who sent the request
	id  string    // its raw id (relayID)
}

// maxRelayIDBytes is the longest raw id a relay keeps as it is; a longer
// one is kept as its SHA-256, so that MaxRelaySpans open requests with
// message-sized ids do not hold their ids.
const maxRelayIDBytes = 64

// relayID is the key of a raw id: the id itself, or "sha256:" and its
// digest past maxRelayIDBytes (a raw id, a JSON string or number, never
// starts with an "s").
func relayID(raw []byte) string {
	if len(raw) <= maxRelayIDBytes {
		return string(raw)
	}
	sum := sha256.Sum256(raw)
	return "sha256:" + hex.EncodeToString(sum[:])
}

type relaySpan struct {
	key   relayKey
	span  trace.Span
	req   request
	ended bool
}

// NewRelay returns a relay tracing with o (nil: the defaults). Options'
// Transport is network.transport of its spans.
func NewRelay(o *Options) *Relay {
	c := resolve(o, false)
	r := &Relay{cfg: c, open: map[relayKey]*relaySpan{}}
	r.log.Logger = c.logger
	r.startOpts = []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(KeyRelay.Bool(true))}
	if c.protocol != MCP {
		r.startOpts = append(r.startOpts, trace.WithAttributes(KeyRPCSystemName.String(rpcSystemJSONRPC)))
	}
	return r
}

// Stats returns the relay's counts.
func (r *Relay) Stats() RelayStats {
	r.mu.Lock()
	defer r.mu.Unlock()
	return RelayStats{Open: len(r.open), Abandoned: r.abandoned, Unanswered: r.unanswered}
}

// Message is one line passing through the relay from dir. It returns the
// line to pass on: a request's with the trace context in its
// params._meta replaced by the relay span's (a new slice; every other
// byte as it was), any other line as it is. A request is also passed as
// it is when its span adds nothing to say (tracing is off: no span
// context, or the parent's own), when Options.Sampler drops every root
// and it carries no trace context (no span is started, as
// ServerMiddleware starts none), or when its params are not an object.
// Over the no-op TracerProvider every line is returned as it is, without
// being parsed. line may end in a newline, which is kept.
func (r *Relay) Message(dir Direction, line []byte) []byte {
	if r.cfg.noTracing {
		return line // the no-op provider: no span would say anything
	}
	i, j := trimSpace(line)
	if i == j || line[i] != '{' {
		return line // not an object: a batch, or not a message
	}
	r.mu.Lock()
	closed := r.closed
	r.mu.Unlock()
	if closed {
		return line
	}
	msg, err := jsonrpc.Decode(line[i:j], nil)
	if err != nil {
		return line
	}
	switch msg.Kind {
	case jsonrpc.KindRequest:
		return r.request(dir, line, i, &msg)
	case jsonrpc.KindNotification:
		r.notification(dir, &msg)
	case jsonrpc.KindResult, jsonrpc.KindError:
		r.response(dir, &msg)
	}
	return line
}

func (r *Relay) request(dir Direction, line []byte, i int, msg *jsonrpc.Message) []byte {
	c := r.cfg
	parent := context.Background()
	if c.mayCarry(msg.Params) {
		parent = extractValid(parent, msg.Params, c.prop, c.fields)
	}
	if c.dropsRoots && !trace.SpanContextFromContext(parent).IsValid() {
		// The sampler would drop the span: the line goes on as it came
		// (as ServerMiddleware starts nothing for such a request).
		return line
	}
	method := msg.MethodName()
	ctx, span := c.tracer.Start(parent, c.startName(method), r.startOpts...)
	if span.IsRecording() {
		rs := &relaySpan{key: relayKey{dir, relayID(msg.ID)}, span: span}
		rs.req = c.newRequest(method, "")
		switch c.protocol {
		case MCP:
			r.mu.Lock()
			v := r.version
			r.mu.Unlock()
			rs.req.describeMCP(msg.Params, nil, v)
		case ACP:
			rs.req.describeACP(msg.Params)
		}
		if c.protocol == MCP && rs.req.target != "" {
			span.SetName(spanName(rs.req.method, rs.req.target))
		}
		attrs := make([]attribute.KeyValue, 0, 12+len(c.static))
		attrs = append(attrs, KeyRelayDirection.String(dir.String()))
		if id := idString(jsonrpc.ID(msg.ID)); id != "" {
			attrs = append(attrs, KeyJSONRPCRequestID.String(id))
		}
		span.SetAttributes(c.spanAttributes(&rs.req, attrs)...)
		r.track(rs)
	}
	sc := span.SpanContext()
	if !sc.IsValid() || sc.Equal(trace.SpanContextFromContext(parent)) {
		return line
	}
	var carrier metaCarrier
	c.prop.Inject(ctx, &carrier)
	if len(carrier.keys) == 0 {
		return line
	}
	return spliceParams(line, i, &carrier, c.fields)
}

// spliceParams returns line (a request object starting at line[i]) with
// the trace context of carrier in its params._meta, or line itself when
// its params are not an object.
func spliceParams(line []byte, i int, carrier *metaCarrier, drop []string) []byte {
	var pm member
	found := false
	closing := eachMember(line, i, func(m member) bool {
		if keyIs(line[m.keyStart:m.keyEnd], "params") {
			pm, found = m, true
		}
		return true
	})
	if !found {
		meta, _ := injectValid(nil, carrier, drop)
		out := make([]byte, 0, len(line)+len(meta)+10)
		out = append(out, line[:closing]...)
		out = append(out, `,"params":`...)
		out = append(out, meta...)
		return append(out, line[closing:]...)
	}
	p, err := injectValid(line[pm.valStart:pm.valEnd], carrier, drop)
	if err != nil {
		return line
	}
	out := make([]byte, 0, len(line)-(pm.valEnd-pm.valStart)+len(p))
	out = append(out, line[:pm.valStart]...)
	out = append(out, p...)
	return append(out, line[pm.valEnd:]...)
}

// track holds rs open until its response, ending the oldest open span
// past MaxRelaySpans.
func (r *Relay) track(rs *relaySpan) {
	var evicted []*relaySpan
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		rs.span.End()
		return
	}
	if old := r.open[rs.key]; old != nil {
		old.ended = true
		evicted = append(evicted, old)
	}
	r.open[rs.key] = rs
	r.queue = append(r.queue, rs)
	for len(r.open) > MaxRelaySpans {
		old := r.queue[0]
		r.queue = r.queue[1:]
		if old.ended {
			continue
		}
		old.ended = true
		delete(r.open, old.key)
		evicted = append(evicted, old)
	}
	if len(r.queue) > 2*MaxRelaySpans {
		r.compact()
	}
	r.abandoned += int64(len(evicted))
	r.mu.Unlock()
	for _, old := range evicted {
		r.log.Refused("telemetry: a relay span was ended unanswered: too many requests open", "limit", MaxRelaySpans, "method", old.req.method)
		old.span.SetAttributes(KeyRelayOutcome.String("abandoned"))
		old.span.End()
	}
}

// compact drops the ended spans from the queue (under mu).
func (r *Relay) compact() {
	q := make([]*relaySpan, 0, len(r.open))
	for _, rs := range r.queue {
		if !rs.ended {
			q = append(q, rs)
		}
	}
	r.queue = q
}

// take removes and returns the open span of key, nil when there is none.
func (r *Relay) take(key relayKey) *relaySpan {
	r.mu.Lock()
	defer r.mu.Unlock()
	rs := r.open[key]
	if rs != nil {
		rs.ended = true
		delete(r.open, key)
		if len(r.open) == 0 {
			r.queue = r.queue[:0]
		}
	}
	return rs
}

func (r *Relay) response(dir Direction, msg *jsonrpc.Message) {
	rs := r.take(relayKey{dir.other(), relayID(msg.ID)})
	if rs == nil {
		return
	}
	var o outcome
	if msg.Kind == jsonrpc.KindError {
		if e, err := jsonrpc.ParseError(msg.Error); err == nil {
			code := codeString(e.Code)
			o = outcome{code, code, e.Message}
		} else {
			o = outcome{errType: ErrorTypeOther, desc: "malformed error"}
		}
	} else {
		if rs.req.tool && isToolError(msg.Result) {
			o = outcome{errType: ErrorTypeToolError, desc: ErrorTypeToolError}
		}
		if rs.req.method == methodInitialize && r.cfg.protocol == MCP {
			if v := resultVersion(msg.Result); v != "" {
				r.mu.Lock()
				r.version = v
				r.mu.Unlock()
				rs.span.SetAttributes(KeyMCPProtocolVersion.String(v))
			}
		}
	}
	endSpan(rs.span, true, o)
}

// notification ends the span of a request its sender cancelled.
func (r *Relay) notification(dir Direction, msg *jsonrpc.Message) {
	m, _ := msg.MethodRaw()
	if string(m) != "notifications/cancelled" && string(m) != "$/cancel_request" {
		return
	}
	var id []byte
	jsonrpc.EachMember(msg.Params, func(key, value []byte) bool {
		if string(key) == "requestId" {
			id = value
		}
		return true
	})
	if id == nil {
		return
	}
	if rs := r.take(relayKey{dir, relayID(id)}); rs != nil {
		endSpan(rs.span, true, outcome{errType: ErrorTypeCancelled, desc: "cancelled by the " + dir.String()})
	}
}

// Close ends every span still open, as unanswered (RelayStats.Unanswered);
// the relay passes lines unchanged from then on.
func (r *Relay) Close() {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return
	}
	r.closed = true
	var left []*relaySpan
	for _, rs := range r.queue {
		if !rs.ended {
			rs.ended = true
			left = append(left, rs)
		}
	}
	r.open, r.queue = map[relayKey]*relaySpan{}, nil
	r.unanswered += int64(len(left))
	r.mu.Unlock()
	for _, rs := range left {
		rs.span.SetAttributes(KeyRelayOutcome.String("unanswered"))
		rs.span.End()
	}
}
