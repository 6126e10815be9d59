package telemetry

import (
	"context"
	"encoding/json"
	"errors"
	"slices"

	"github.com/agentwire/agentwire/jsonrpc"
	"go.opentelemetry.io/otel/propagation"
)

// Trace context rides in params._meta, under the keys the propagator
// writes (traceparent, tracestate and baggage for W3C; MCP reserves them
// unprefixed at the root of _meta, SEP-414). Keys are matched exactly, as
// JSON-RPC members are case-sensitive: "_meta" and "traceparent", or the
// same keys spelled with escapes (which encoding/json decodes to them),
// never "_Meta" or "TraceParent".

// ErrNotObject is returned by Inject for params that are not a JSON
// object, or whose _meta is neither an object nor null: there is nowhere
// to put the trace context.
var ErrNotObject = errors.New("telemetry: params are not a JSON object")

// ErrInvalidJSON is returned by Inject for params that are not valid JSON.
var ErrInvalidJSON = errors.New("telemetry: params are not valid JSON")

// Inject returns params with the trace context of ctx (as p writes it; nil
// p: W3C trace context and baggage) in their _meta: the keys p writes,
// and every key p owns (p.Fields()) that it does not write, are removed
// from _meta, and what p writes is added. Every other byte of params stays
// as it was: the other members, and the other members of _meta, byte for
// byte. Absent params (nil, empty or null) become {"_meta":{...}}, and a
// _meta that is absent or null becomes an object. When p writes nothing
// (no valid span and no baggage in ctx) params are returned as they are.
//
// Params that are not valid JSON fail with ErrInvalidJSON; params that are
// not an object, or whose _meta is another kind of value, with
// ErrNotObject. Either way params are not changed.
func Inject(ctx context.Context, params json.RawMessage, p propagation.TextMapPropagator) (json.RawMessage, error) {
	p = propagatorOr(p)
	var c metaCarrier
	p.Inject(ctx, &c)
	if len(c.keys) == 0 {
		return params, nil
	}
	if !isAbsent(params) && !jsonrpc.Valid(params) {
		return params, ErrInvalidJSON
	}
	out, err := injectValid(params, &c, p.Fields())
	if err != nil {
		return params, err
	}
	return out, nil
}

// Extract returns ctx with the trace context params._meta carries (read
// by p; nil p: W3C trace context and baggage) added: the remote span
// context a server span is parented to. Only p's own keys are read, as
// JSON strings; params that are not valid JSON, not an object, or carry
// no _meta object leave ctx as it is.
func Extract(ctx context.Context, params json.RawMessage, p propagation.TextMapPropagator) context.Context {
	if isAbsent(params) || !jsonrpc.Valid(params) {
		return ctx
	}
	p = propagatorOr(p)
	return extractValid(ctx, params, p, p.Fields())
}

// extractValid is Extract for params known to be valid JSON (as
// jsonrpc.Decode accepted them): nothing is validated again. fields are
// p.Fields().
func extractValid(ctx context.Context, params []byte, p propagation.TextMapPropagator, fields []string) context.Context {
	meta := metaOf(params)
	if meta == nil {
		return ctx
	}
	return p.Extract(ctx, readCarrier(meta, fields))
}

// readCarrier is the carrier over the _meta object meta, the values of
// fields (the propagator's keys, up to three) read ahead in one walk.
func readCarrier(meta []byte, fields []string) *metaReader {
	c := &metaReader{meta: meta}
	if len(fields) <= len(c.vals) {
		c.keys = fields
		jsonrpc.EachMember(meta, func(k, v []byte) bool {
			for i, f := range fields {
				if string(k) == f {
					c.vals[i] = v // the last, as encoding/json keeps it
				}
			}
			return true
		})
	}
	return c
}

// metaOf returns the _meta object of valid params (the last, as
// encoding/json would keep it), nil when there is none.
func metaOf(params []byte) []byte {
	var meta []byte
	jsonrpc.EachMember(params, func(key, value []byte) bool {
		if string(key) == "_meta" {
			if len(value) > 0 && value[0] == '{' {
				meta = value
			} else {
				meta = nil
			}
		}
		return true
	})
	return meta
}

// isAbsent reports whether params say nothing: nil, white space only, or
// null.
func isAbsent(params []byte) bool {
	i, j := trimSpace(params)
	return i == j || string(params[i:j]) == "null"
}

func trimSpace(b []byte) (int, int) {
	i, j := 0, len(b)
	for i < j && isSpace(b[i]) {
		i++
	}
	for j > i && isSpace(b[j-1]) {
		j--
	}
	return i, j
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// metaReader is the propagation.TextMapCarrier Extract reads: one _meta
// object, its keys exact (no canonicalization, unlike
// propagation.HeaderCarrier), the propagator's own read ahead.
type metaReader struct {
	meta []byte
	keys []string  // the keys read ahead (the propagator's Fields)
	vals [3][]byte // their raw values, nil when absent
}

// Get returns the JSON string value of key in the _meta ("" for none or
// another kind of value; the last occurrence, as encoding/json keeps it).
func (c *metaReader) Get(key string) string {
	for i, k := range c.keys {
		if k == key {
			v, _ := jsonrpc.StringValue(c.vals[i])
			return v
		}
	}
	var v string
	jsonrpc.EachMember(c.meta, func(k, value []byte) bool {
		if string(k) == key {
			v, _ = jsonrpc.StringValue(value)
		}
		return true
	})
	return v
}

// Set is not for a carrier being read.
func (c *metaReader) Set(string, string) {}

// Keys lists the keys of the _meta.
func (c *metaReader) Keys() []string {
	var keys []string
	jsonrpc.EachMember(c.meta, func(k, _ []byte) bool {
		keys = append(keys, string(k))
		return true
	})
	return keys
}

// metaCarrier is the propagation.TextMapCarrier Inject writes: it collects
// what the propagator writes, in order.
type metaCarrier struct {
	keys, vals []string
}

// Get returns what was written for key.
func (c *metaCarrier) Get(key string) string {
	if i := slices.Index(c.keys, key); i >= 0 {
		return c.vals[i]
	}
	return ""
}

// Set records a key the propagator writes (replacing an earlier value of
// the same key).
func (c *metaCarrier) Set(key, value string) {
	if i := slices.Index(c.keys, key); i >= 0 {
		c.vals[i] = value
		return
	}
	c.keys = append(c.keys, key)
	c.vals = append(c.vals, value)
}

// Keys lists the keys written.
func (c *metaCarrier) Keys() []string { return c.keys }

// member is one member of a JSON object, by offsets into the object's
// bytes: the key token (quotes included) and the value.
type member struct {
	keyStart, keyEnd, valStart, valEnd int
}

// eachMember calls fn with each member of the object that starts at b[i]
// (valid JSON), in order; fn returns false to stop. It returns the offset
// of the object's closing brace (-1 when fn stopped).
func eachMember(b []byte, i int, fn func(m member) bool) (closing int) {
	i = skipWS(b, i+1)
	for i < len(b) && b[i] == '"' {
		var m member
		m.keyStart = i
		m.keyEnd = skipString(b, i)
		i = skipWS(b, m.keyEnd)
		i = skipWS(b, i+1) // past ':'
		m.valStart = i
		m.valEnd = skipValue(b, i)
		if !fn(m) {
			return -1
		}
		i = skipWS(b, m.valEnd)
		if i < len(b) && b[i] == ',' {
			i = skipWS(b, i+1)
		}
	}
	return i
}

func skipWS(b []byte, i int) int {
	for i < len(b) && isSpace(b[i]) {
		i++
	}
	return i
}

// skipString returns the offset past the string token at b[i] (valid).
func skipString(b []byte, i int) int {
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return len(b)
}

// skipValue returns the offset past the value at b[i] (valid).
func skipValue(b []byte, i int) int {
	if i >= len(b) {
		return i
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for ; i < len(b); i++ {
			switch b[i] {
			case '"':
				i = skipString(b, i) - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1
				}
			}
		}
		return len(b)
	}
	for i < len(b) {
		switch b[i] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			return i
		}
		i++
	}
	return i
}

// keyIs reports whether the key token tok (quotes included) decodes to
// name: compared in place unless it holds escapes.
func keyIs(tok []byte, name string) bool {
	if len(tok) == len(name)+2 && string(tok[1:len(tok)-1]) == name {
		return true
	}
	if !slices.Contains(tok, '\\') {
		return false
	}
	k, ok := jsonrpc.StringBytes(tok)
	return ok && string(k) == name
}

// injectValid is Inject's splice, for params known to be valid JSON (or
// absent): the _meta members of the params object (every one, so that
// whichever a reader keeps carries the context) get c's keys, without the
// keys of drop or c.
func injectValid(params []byte, c *metaCarrier, drop []string) ([]byte, error) {
	if isAbsent(params) {
		out := make([]byte, 0, 16+metaPairsLen(c))
		out = append(out, `{"_meta":{`...)
		out = appendPairs(out, c, false)
		return append(out, "}}"...), nil
	}
	i, _ := trimSpace(params)
	if params[i] != '{' {
		return nil, ErrNotObject
	}
	var metas []member
	last := -1 // the end of the last member's value
	eachMember(params, i, func(m member) bool {
		if keyIs(params[m.keyStart:m.keyEnd], "_meta") {
			metas = append(metas, m)
		}
		last = m.valEnd
		return true
	})
	out := make([]byte, 0, len(params)+24+metaPairsLen(c))
	if len(metas) == 0 {
		if last < 0 { // {} (with any white space inside)
			out = append(out, params[:i+1]...)
			out = append(out, `"_meta":{`...)
		} else {
			out = append(out, params[:last]...)
			out = append(out, `,"_meta":{`...)
		}
		out = appendPairs(out, c, false)
		out = append(out, '}')
		if last < 0 {
			return append(out, params[i+1:]...), nil
		}
		return append(out, params[last:]...), nil
	}
	from := 0
	for _, m := range metas {
		v := params[m.valStart:m.valEnd]
		out = append(out, params[from:m.valStart]...)
		switch {
		case v[0] == '{':
			out = appendMeta(out, params, m.valStart, c, drop)
		case string(v) == "null":
			out = append(out, '{')
			out = appendPairs(out, c, false)
			out = append(out, '}')
		default:
			return nil, ErrNotObject
		}
		from = m.valEnd
	}
	return append(out, params[from:]...), nil
}

// appendMeta appends the _meta object at b[start] with the members of
// drop and c removed (each other member's bytes as they were, its key's
// spelling included) and c's added after them.
func appendMeta(out, b []byte, start int, c *metaCarrier, drop []string) []byte {
	out = append(out, '{')
	n := 0
	eachMember(b, start, func(m member) bool {
		tok := b[m.keyStart:m.keyEnd]
		if dropped(tok, drop) || dropped(tok, c.keys) {
			return true
		}
		if n > 0 {
			out = append(out, ',')
		}
		out = append(out, b[m.keyStart:m.valEnd]...)
		n++
		return true
	})
	out = appendPairs(out, c, n > 0)
	return append(out, '}')
}

func dropped(tok []byte, keys []string) bool {
	for _, k := range keys {
		if keyIs(tok, k) {
			return true
		}
	}
	return false
}

// appendPairs appends c's keys and values as JSON members, a comma first
// when comma.
func appendPairs(out []byte, c *metaCarrier, comma bool) []byte {
	for i, k := range c.keys {
		if comma || i > 0 {
			out = append(out, ',')
		}
		out = jsonrpc.AppendString(out, k)
		out = append(out, ':')
		out = jsonrpc.AppendString(out, c.vals[i])
	}
	return out
}

func metaPairsLen(c *metaCarrier) int {
	n := 0
	for i, k := range c.keys {
		n += len(k) + len(c.vals[i]) + 6
	}
	return n
}
