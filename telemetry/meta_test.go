package telemetry_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/agentwire/agentwire/telemetry"
	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// traced is a context with a fixed, sampled span context.
func traced() (context.Context, string) {
	tid, _ := trace.TraceIDFromHex("0af7651916cd43dd8448eb211c80319c")
	sid, _ := trace.SpanIDFromHex("b7ad6b7169203331")
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled})
	return trace.ContextWithSpanContext(context.Background(), sc), `"traceparent":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"`
}

// Inject splices the trace context into _meta and keeps every other byte:
// the other members, the other keys of _meta, the white space around
// them, keys spelled with escapes; what the propagator owns is replaced.
func TestInject(t *testing.T) {
	ctx, tp := traced()
	for _, c := range []struct{ in, want string }{
		{``, `{"_meta":{` + tp + `}}`},
		{`null`, `{"_meta":{` + tp + `}}`},
		{`{}`, `{"_meta":{` + tp + `}}`},
		{` { } `, ` {"_meta":{` + tp + `} } `},
		{`{"name":"x"}`, `{"name":"x","_meta":{` + tp + `}}`},
		{"{\n  \"name\" : \"x\" ,\n  \"n\": [1, {\"_meta\": 2}]\n}", "{\n  \"name\" : \"x\" ,\n  \"n\": [1, {\"_meta\": 2}],\"_meta\":{" + tp + "}\n}"},
		{`{"_meta":{"progressToken":1,"traceparent":"00-old","tracestate":"a=b","baggage":"k=v"},"name":"t"}`, `{"_meta":{"progressToken":1,` + tp + `},"name":"t"}`},
		{`{"_meta":{"traceparent":"00-old"}}`, `{"_meta":{` + tp + `}}`},
		{`{"_meta":{"TraceParent":"keep","io.modelcontextprotocol/protocolVersion":"2026-07-28"}}`, `{"_meta":{"TraceParent":"keep","io.modelcontextprotocol/protocolVersion":"2026-07-28",` + tp + `}}`},
		{`{"\u005fmeta":{"a" : 1}}`, `{"\u005fmeta":{"a" : 1,` + tp + `}}`},
		{`{"_meta":{"trace\u0070arent":"00-old","x":{"traceparent":"nested"}}}`, `{"_meta":{"x":{"traceparent":"nested"},` + tp + `}}`},
		{`{"_meta":null,"a":1}`, `{"_meta":{` + tp + `},"a":1}`},
		{`{"_meta":{"a":1},"_meta":{"b":2}}`, `{"_meta":{"a":1,` + tp + `},"_meta":{"b":2,` + tp + `}}`},
		{`{"_Meta":{"a":1}}`, `{"_Meta":{"a":1},"_meta":{` + tp + `}}`},
	} {
		got, err := telemetry.Inject(ctx, json.RawMessage(c.in), nil)
		if err != nil || string(got) != c.want {
			t.Errorf("Inject(%s)\n = %s, %v\nwant %s", c.in, got, err, c.want)
		}
	}
}

func TestInjectRefuses(t *testing.T) {
	ctx, _ := traced()
	for in, want := range map[string]error{
		`[1,2]`:                 telemetry.ErrNotObject,
		`"x"`:                   telemetry.ErrNotObject,
		`{"_meta":5}`:           telemetry.ErrNotObject,
		`{"_meta":[]}`:          telemetry.ErrNotObject,
		`{"a":`:                 telemetry.ErrInvalidJSON,
		`{"a":1}x`:              telemetry.ErrInvalidJSON,
		"{\"a\":\"\xff\"}":      telemetry.ErrInvalidJSON,
		`{"_meta":{"a":1,"a"}}`: telemetry.ErrInvalidJSON,
	} {
		got, err := telemetry.Inject(ctx, json.RawMessage(in), nil)
		if !errors.Is(err, want) || string(got) != in {
			t.Errorf("Inject(%s) = %s, %v; want it unchanged and %v", in, got, err, want)
		}
	}
}

// With nothing to propagate (no span, no baggage) params are returned as
// they are, even a _meta that holds an old traceparent.
func TestInjectNothing(t *testing.T) {
	in := json.RawMessage(`{"_meta":{"traceparent":"00-old"}}`)
	got, err := telemetry.Inject(context.Background(), in, nil)
	if err != nil || string(got) != string(in) {
		t.Errorf("got %s, %v", got, err)
	}
}

// Baggage rides in _meta.baggage, both ways.
func TestInjectExtractBaggage(t *testing.T) {
	m, _ := baggage.NewMember("user", "alice")
	b, _ := baggage.New(m)
	ctx := baggage.ContextWithBaggage(context.Background(), b)
	got, err := telemetry.Inject(ctx, nil, nil)
	if err != nil || string(got) != `{"_meta":{"baggage":"user=alice"}}` {
		t.Fatalf("got %s, %v", got, err)
	}
	back := baggage.FromContext(telemetry.Extract(context.Background(), got, nil))
	if back.Member("user").Value() != "alice" {
		t.Errorf("baggage %v", back)
	}
}

// Extract reads the propagator's keys at the root of _meta, as JSON
// strings, exactly: not other spellings, not nested ones, not other
// kinds of value; the last _meta wins, as encoding/json keeps it.
func TestExtract(t *testing.T) {
	const tp = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	for in, want := range map[string]bool{
		`{"_meta":{"traceparent":"` + tp + `"}}`:                                true,
		`{"\u005fmeta":{"trace\u0070arent":"` + tp + `"}}`:                      true,
		`{"_meta":{"traceparent":"00-1"},"_meta":{"traceparent":"` + tp + `"}}`: true,
		`{"_meta":{"TraceParent":"` + tp + `"}}`:                                false,
		`{"_Meta":{"traceparent":"` + tp + `"}}`:                                false,
		`{"arguments":{"_meta":{"traceparent":"` + tp + `"}}}`:                  false,
		`{"_meta":{"traceparent":["` + tp + `"]}}`:                              false,
		`{"_meta":"traceparent"}`:                                               false,
		`{"_meta":{"traceparent":"` + tp + `"}`:                                 false, // not JSON
		`["_meta",{"traceparent":"` + tp + `"}]`:                                false,
		``:                                                                      false,
	} {
		sc := trace.SpanContextFromContext(telemetry.Extract(context.Background(), json.RawMessage(in), nil))
		if sc.IsValid() != want || (want && (sc.SpanID().String() != "b7ad6b7169203331" || !sc.IsRemote())) {
			t.Errorf("Extract(%s) = %v, want valid %v", in, sc, want)
		}
	}
}

// What Inject writes, Extract reads back, with any propagator.
func TestInjectExtractRoundTrip(t *testing.T) {
	ctx, _ := traced()
	for _, p := range []propagation.TextMapPropagator{nil, propagation.TraceContext{}} {
		out, err := telemetry.Inject(ctx, json.RawMessage(`{"name":"x"}`), p)
		if err != nil {
			t.Fatal(err)
		}
		got := trace.SpanContextFromContext(telemetry.Extract(context.Background(), out, p))
		if got.TraceID() != trace.SpanContextFromContext(ctx).TraceID() || got.SpanID() != trace.SpanContextFromContext(ctx).SpanID() {
			t.Errorf("round trip %v", got)
		}
	}
}
