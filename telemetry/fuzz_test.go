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

// FuzzRelayMessage holds Relay.Message to its contract on any pair of
// lines, from either side: it never panics; a line that is not a request
// comes back as it was; a request comes back as the same message — the
// same id, method and every params member but _meta's trace keys, byte for
// byte — with the relay's span in its _meta, on one line; every span is
// ended by its answer or by Close.
//
//	go test -run XXX -fuzz ^FuzzRelayMessage$ -fuzztime 10m -parallel 1 ./telemetry/
func FuzzRelayMessage(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","_meta":{"traceparent":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}}}`,
		`{"jsonrpc":"2.0","id":"a","method":"initialize","params":{"protocolVersion":"2025-11-25"}}`,
		`{"jsonrpc":"2.0","id":1,"result":{}}`, `{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"x"}}`,
		`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}`,
		`{"jsonrpc":"2.0","id":2,"method":"ping"}`, `[{"jsonrpc":"2.0","id":1,"method":"x"}]`, `not json`, ``, `  {} `,
		`{"jsonrpc":"2.0","id":3,"method":"m","params":[1,2]}`, `{"jsonrpc":"2.0","id":4,"method":"m","params":{"_meta":5}}`,
	} {
		f.Add([]byte(s), []byte(`{"jsonrpc":"2.0","id":1,"result":{}}`), false)
	}
	f.Fuzz(func(t *testing.T, first, second []byte, fromServer bool) {
		sr, tp := recorder(t)
		r := telemetry.NewRelay(&telemetry.Options{TracerProvider: tp})
		for n, line := range [][]byte{first, second} {
			dir := telemetry.FromClient
			if fromServer != (n == 1) {
				dir = telemetry.FromServer
			}
			in := append([]byte(nil), line...)
			out := r.Message(dir, line)
			if !bytes.Equal(line, in) {
				t.Fatalf("Message changed its input: %q became %q", in, line)
			}
			msg, err := jsonrpc.Decode(bytes.TrimSpace(in), nil)
			if err != nil || msg.Kind != jsonrpc.KindRequest {
				if !bytes.Equal(out, in) {
					t.Fatalf("a line that is not a request came back changed: %q -> %q", in, out)
				}
				continue
			}
			if bytes.Equal(out, in) {
				continue // params it cannot carry trace context in (an array, a non-object _meta)
			}
			if bytes.IndexByte(out, '\n') >= 0 && bytes.IndexByte(in, '\n') < 0 {
				t.Fatalf("the relayed request spans lines: %q", out)
			}
			got, err := jsonrpc.Decode(bytes.TrimSpace(out), nil)
			if err != nil || got.Kind != jsonrpc.KindRequest || !bytes.Equal(got.ID, msg.ID) || !bytes.Equal(got.Method, msg.Method) {
				t.Fatalf("relayed %q as %q (%v)", in, out, err)
			}
			var before, after map[string]json.RawMessage
			json.Unmarshal(msg.Params, &before)
			if err := json.Unmarshal(got.Params, &after); err != nil {
				t.Fatalf("relayed params are not an object: %s", got.Params)
			}
			for k, v := range before {
				if k != "_meta" && !bytes.Equal(after[k], v) {
					t.Fatalf("member %q changed: %s -> %s", k, v, after[k])
				}
			}
			var meta map[string]json.RawMessage
			if err := json.Unmarshal(after["_meta"], &meta); err != nil || len(meta["traceparent"]) == 0 {
				t.Fatalf("relayed request has no traceparent in _meta: %s", got.Params)
			}
		}
		r.Close()
		if st := r.Stats(); st.Open != 0 {
			t.Fatalf("%d spans open after Close", st.Open)
		}
		for _, s := range sr.Started() {
			if s.(interface{ IsRecording() bool }).IsRecording() {
				t.Fatalf("span %q never ended", s.Name())
			}
		}
	})
}
