package telemetry_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/agentwire/agentwire/jsonrpc"
	"github.com/agentwire/agentwire/telemetry"
	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// FuzzInject holds Inject to its contract on any params and any trace
// context: the result is valid JSON; every member other than _meta, and
// every key of _meta other than the propagator's, is byte for byte what it
// was (read back with encoding/json into map[string]json.RawMessage,
// which matches keys exactly); the propagator's keys carry exactly what it
// wrote. Params it refuses are refused for the documented reasons and
// returned unchanged.
//
//	go test -run XXX -fuzz ^FuzzInject$ -fuzztime 10m -parallel 1 ./telemetry/
func FuzzInject(f *testing.F) {
	for _, s := range []string{
		``, `null`, `{}`, ` { } `, `{"name":"x","arguments":{"a":[1,2,{"_meta":3}]}}`,
		`{"_meta":{"progressToken":1,"traceparent":"00-old","tracestate":"a=b","baggage":"k=v"},"name":"t"}`,
		`{"\u005fmeta":{"trace\u0070arent":"x","TraceParent":"y"}}`, `{"_meta":null}`, `{"_meta":5}`,
		`{"_meta":{"a":1},"_meta":{"b":2}}`, `{"a":1,"a":2}`, "{\"a\" :\t1 ,\n\"_meta\" : { \"x\" : [ ] } }",
		`[1]`, `"s"`, `{"a":`, "{\"\xff\":1}", `{"_meta":{"":""}}`,
	} {
		f.Add([]byte(s), []byte("0af7651916cd43dd8448eb211c80319c"), uint64(0xb7ad6b7169203331), true, "user=alice")
	}
	f.Add([]byte(`{"a":1}`), []byte{}, uint64(0), false, "")
	f.Add([]byte(`{"_meta":{"baggage":"x=y"}}`), []byte{}, uint64(0), false, "k=v;p,k2=%20")
	prop := propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})
	f.Fuzz(func(t *testing.T, params, tid []byte, sid uint64, sampled bool, bag string) {
		ctx := context.Background()
		var cfg trace.SpanContextConfig
		copy(cfg.TraceID[:], tid)
		for i := range 8 {
			cfg.SpanID[i] = byte(sid >> (8 * i))
		}
		if sampled {
			cfg.TraceFlags = trace.FlagsSampled
		}
		if sc := trace.NewSpanContext(cfg); sc.IsValid() {
			ctx = trace.ContextWithSpanContext(ctx, sc)
		}
		if b, err := baggage.Parse(bag); err == nil {
			ctx = baggage.ContextWithBaggage(ctx, b)
		}
		wrote := propagation.MapCarrier{}
		prop.Inject(ctx, wrote)

		in := append([]byte(nil), params...)
		out, err := telemetry.Inject(ctx, params, nil)
		if !bytes.Equal(params, in) {
			t.Fatalf("Inject changed its input")
		}
		trimmed := bytes.Trim(params, " \t\r\n") // JSON's white space
		absent := len(trimmed) == 0 || string(trimmed) == "null"
		if len(wrote) == 0 {
			if err != nil || !bytes.Equal(out, params) {
				t.Fatalf("nothing to inject, yet %q, %v", out, err)
			}
			return
		}
		if err != nil {
			if !bytes.Equal(out, params) {
				t.Fatalf("refused (%v) but changed: %q", err, out)
			}
			switch {
			case errors.Is(err, telemetry.ErrInvalidJSON):
				if absent || jsonrpc.Valid(params) {
					t.Fatalf("ErrInvalidJSON for valid params %q", params)
				}
			case errors.Is(err, telemetry.ErrNotObject):
				if !jsonrpc.Valid(params) || (params[firstNonSpace(params)] == '{' && allMetasObjects(params)) {
					t.Fatalf("ErrNotObject for %q", params)
				}
			default:
				t.Fatalf("unexpected error %v", err)
			}
			return
		}
		if !absent && !jsonrpc.Valid(params) {
			t.Fatalf("accepted invalid params %q", params)
		}
		if !json.Valid(out) || !jsonrpc.Valid(out) {
			t.Fatalf("invalid result %q from %q", out, params)
		}
		var before, after map[string]json.RawMessage
		if !absent {
			if err := json.Unmarshal(params, &before); err != nil {
				t.Fatalf("params %q: %v", params, err)
			}
		}
		if err := json.Unmarshal(out, &after); err != nil {
			t.Fatalf("result %q: %v", out, err)
		}
		for k, v := range before {
			if k != "_meta" && !bytes.Equal(after[k], v) {
				t.Fatalf("member %q: %s became %s", k, v, after[k])
			}
		}
		for k := range after {
			if _, ok := before[k]; !ok && k != "_meta" {
				t.Fatalf("member %q added", k)
			}
		}
		var metaBefore, metaAfter map[string]json.RawMessage
		if m, ok := before["_meta"]; ok && string(m) != "null" {
			if err := json.Unmarshal(m, &metaBefore); err != nil {
				t.Fatalf("_meta %s: %v", m, err)
			}
		}
		if err := json.Unmarshal(after["_meta"], &metaAfter); err != nil || metaAfter == nil {
			t.Fatalf("result's _meta %s: %v", after["_meta"], err)
		}
		owned := map[string]bool{}
		for _, k := range prop.Fields() {
			owned[k] = true
		}
		for k, v := range metaBefore {
			if !owned[k] && !bytes.Equal(metaAfter[k], v) {
				t.Fatalf("_meta key %q: %s became %s", k, v, metaAfter[k])
			}
		}
		for k, v := range metaAfter {
			if owned[k] {
				var s string
				if json.Unmarshal(v, &s) != nil || !sameValue(k, s, wrote[k]) {
					t.Fatalf("_meta.%s = %s, want %q", k, v, wrote[k])
				}
			} else if _, ok := metaBefore[k]; !ok {
				t.Fatalf("_meta key %q added", k)
			}
		}
		for k := range wrote {
			if _, ok := metaAfter[k]; !ok {
				t.Fatalf("_meta.%s missing from %s", k, out)
			}
		}
		// What was injected is what Extract reads back.
		got := trace.SpanContextFromContext(telemetry.Extract(context.Background(), out, nil))
		want := trace.SpanContextFromContext(ctx)
		if got.TraceID() != want.TraceID() || got.SpanID() != want.SpanID() || got.TraceFlags() != want.TraceFlags() {
			t.Fatalf("Extract read %v back, want %v", got, want)
		}
	})
}

func firstNonSpace(b []byte) int {
	return len(b) - len(bytes.TrimLeft(b, " \t\r\n"))
}

// allMetasObjects reports whether every _meta member of the valid object
// params (by its decoded key) is an object or null.
func allMetasObjects(params []byte) bool {
	ok := true
	jsonrpc.Members(params, func(key, value []byte) bool {
		if string(key) == "_meta" && value[0] != '{' && string(value) != "null" {
			ok = false
		}
		return true
	})
	return ok
}

// sameValue compares what a propagator wrote for key: baggage by its
// members (the propagator lists them in no fixed order), the rest byte
// for byte.
func sameValue(key, got, want string) bool {
	if key != "baggage" {
		return got == want
	}
	a, errA := baggage.Parse(got)
	b, errB := baggage.Parse(want)
	if errA != nil || errB != nil || a.Len() != b.Len() {
		return false
	}
	for _, m := range b.Members() {
		if a.Member(m.Key()).String() != m.String() {
			return false
		}
	}
	return true
}
