package telemetry_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"strconv"
	"strings"
	"testing"

	"github.com/agentwire/agentwire/rpc"
	"github.com/agentwire/agentwire/telemetry"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
	"go.uber.org/goleak"
)

// relayLines copies lines from r to w through the relay, as agentwire tap
// does.
func relayLines(rl *telemetry.Relay, dir telemetry.Direction, r io.Reader, w io.WriteCloser) {
	defer w.Close()
	br := bufio.NewReader(r)
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 {
			out := rl.Message(dir, line[:len(line)-1])
			if _, err := w.Write(append(out, '\n')); err != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// The relay puts itself between the two ends: a host's traced call
// through it is host CLIENT -> relay CLIENT (agentwire.relay) -> server
// SERVER, one trace, the relay span ended by the response.
func TestRelayBetweenHostAndServer(t *testing.T) {
	defer goleak.VerifyNone(t)
	sr, tp := recorder(t)
	o := &telemetry.Options{TracerProvider: tp}
	rl := telemetry.NewRelay(o)
	hostOut, toRelay := io.Pipe()   // host -> relay
	relayIn, toServer := io.Pipe()  // relay -> server
	serverOut, fromSrv := io.Pipe() // server -> relay
	relayBack, toHost := io.Pipe()  // relay -> host
	go relayLines(rl, telemetry.FromClient, hostOut, toServer)
	go relayLines(rl, telemetry.FromServer, serverOut, toHost)
	srv := rpc.New(relayIn, fromSrv, tools(nil), &rpc.Options{Logger: quiet, Middleware: []rpc.Middleware{telemetry.ServerMiddleware(o)}})
	host := rpc.New(relayBack, toRelay, nil, &rpc.Options{Logger: quiet, QuietOnBadInput: true,
		Outbound: []rpc.OutboundMiddleware{telemetry.ClientMiddleware(o)}})

	if _, err := host.Call(context.Background(), "tools/call", map[string]any{"name": "echo"}); err != nil {
		t.Fatal(err)
	}
	host.Close()
	host.Wait()
	srv.Wait()
	rl.Close()
	var hostSpan, relaySpan, srvSpan sdktrace.ReadOnlySpan
	for _, s := range sr.Ended() {
		switch {
		case s.SpanKind() == trace.SpanKindServer:
			srvSpan = s
		case attrsOf(s)["agentwire.relay"] == "true":
			relaySpan = s
		default:
			hostSpan = s
		}
	}
	if hostSpan == nil || relaySpan == nil || srvSpan == nil {
		t.Fatalf("spans %v", names(sr.Ended()))
	}
	if relaySpan.Parent().SpanID() != hostSpan.SpanContext().SpanID() || srvSpan.Parent().SpanID() != relaySpan.SpanContext().SpanID() {
		t.Errorf("parenting: host %v, relay %v (parent %v), server parent %v", hostSpan.SpanContext().SpanID(),
			relaySpan.SpanContext().SpanID(), relaySpan.Parent().SpanID(), srvSpan.Parent().SpanID())
	}
	tid := hostSpan.SpanContext().TraceID()
	if relaySpan.SpanContext().TraceID() != tid || srvSpan.SpanContext().TraceID() != tid {
		t.Error("more than one trace")
	}
	if relaySpan.Name() != "tools/call echo" || relaySpan.SpanKind() != trace.SpanKindClient {
		t.Errorf("relay span %q %v", relaySpan.Name(), relaySpan.SpanKind())
	}
	wantAttrs(t, relaySpan, map[attribute.Key]string{"agentwire.relay.direction": "client", "jsonrpc.request.id": "1",
		"gen_ai.tool.name": "echo", "mcp.method.name": "tools/call"}, "agentwire.relay.outcome", "error.type")
	if st := rl.Stats(); st.Open != 0 || st.Unanswered != 0 || st.Abandoned != 0 {
		t.Errorf("stats %+v", st)
	}
}

func relaySpanOf(t *testing.T, spans []sdktrace.ReadOnlySpan, name string) sdktrace.ReadOnlySpan {
	t.Helper()
	for _, s := range spans {
		if s.Name() == name {
			return s
		}
	}
	t.Fatalf("no span %q in %v", name, names(spans))
	return nil
}

// metaOf reads params._meta of a line.
func metaOf(t *testing.T, line []byte) map[string]string {
	t.Helper()
	var m struct {
		Params struct {
			Meta map[string]string `json:"_meta"`
		} `json:"params"`
	}
	if err := json.Unmarshal(line, &m); err != nil {
		t.Fatalf("%s: %v", line, err)
	}
	return m.Params.Meta
}

// What passes unchanged (the very slice), and what a request becomes.
func TestRelayLines(t *testing.T) {
	sr, tp := recorder(t)
	rl := telemetry.NewRelay(&telemetry.Options{TracerProvider: tp})
	defer rl.Close()
	for _, line := range []string{``, `not json`, `[{"jsonrpc":"2.0","id":1,"method":"ping"}]`, `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":1}}`,
		`{"jsonrpc":"2.0","id":99,"result":{}}`, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":[1]}`, `{"id":1,"method":"x"}`} {
		in := []byte(line)
		out := rl.Message(telemetry.FromClient, in)
		if string(out) != line || (len(in) > 0 && &out[0] != &in[0]) {
			t.Errorf("%q became %q", line, out)
		}
	}
	// A request without params gets them; one with params null too; the
	// rest of the line is kept, a trailing \r included.
	for _, c := range []struct{ in, prefix, suffix string }{
		{`{"jsonrpc":"2.0","id":"p","method":"ping"}`, `{"jsonrpc":"2.0","id":"p","method":"ping","params":{"_meta":{"traceparent":"00-`, `"}}}`},
		{`{"jsonrpc":"2.0","id":"q","method":"ping","params":null}` + "\r", `{"jsonrpc":"2.0","id":"q","method":"ping","params":{"_meta":{"traceparent":"00-`, "\"}}}\r"},
		{`{"jsonrpc":"2.0", "params" : {"name":"t", "_meta":{"progressToken":"x","traceparent":"00-` + hostTrace + `-` + hostSpan + `-01"}} ,"id":3,"method":"tools/call"}`,
			`{"jsonrpc":"2.0", "params" : {"name":"t", "_meta":{"progressToken":"x","traceparent":"00-` + hostTrace, `"}} ,"id":3,"method":"tools/call"}`},
	} {
		out := string(rl.Message(telemetry.FromClient, []byte(c.in)))
		if !strings.HasPrefix(out, c.prefix) || !strings.HasSuffix(out, c.suffix) {
			t.Errorf("%s\nbecame %s", c.in, out)
		}
	}
	rl.Message(telemetry.FromServer, []byte(`{"jsonrpc":"2.0","id":3,"result":{"content":[],"isError":true}}`))
	s := relaySpanOf(t, sr.Ended(), "tools/call t")
	if s.Parent().SpanID().String() != hostSpan || s.Parent().TraceID().String() != hostTrace {
		t.Errorf("parent %v", s.Parent())
	}
	wantAttrs(t, s, map[attribute.Key]string{"error.type": "tool_error"})
	if got := rl.Stats().Open; got != 3 { // id 1 (params not an object: traced, passed as it was), "p", "q"
		t.Errorf("open %d", got)
	}
}

// A response ends the span of the request from the other side with its
// id: an error with its code; a cancellation from the sender ends it as
// cancelled; a server's request is answered by the client.
func TestRelayOutcomes(t *testing.T) {
	sr, tp := recorder(t)
	rl := telemetry.NewRelay(&telemetry.Options{TracerProvider: tp})
	defer rl.Close()
	rl.Message(telemetry.FromClient, []byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25"}}`))
	// The same id from the server answers nothing of the client's.
	rl.Message(telemetry.FromClient, []byte(`{"jsonrpc":"2.0","id":1,"result":{}}`))
	rl.Message(telemetry.FromServer, []byte(`{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-06-18","capabilities":{}}}`))
	rl.Message(telemetry.FromClient, []byte(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"nosuch"}}`))
	rl.Message(telemetry.FromServer, []byte(`{"jsonrpc":"2.0","id":2,"error":{"code":-32602,"message":"unknown tool: nosuch"}}`))
	rl.Message(telemetry.FromClient, []byte(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"slow"}}`))
	rl.Message(telemetry.FromClient, []byte(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":3,"reason":"user"}}`))
	rl.Message(telemetry.FromServer, []byte(`{"jsonrpc":"2.0","id":0,"method":"roots/list"}`))
	rl.Message(telemetry.FromClient, []byte(`{"jsonrpc":"2.0","id":0,"result":{"roots":[]}}`))

	spans := sr.Ended()
	if len(spans) != 4 {
		t.Fatalf("spans %v", names(spans))
	}
	wantAttrs(t, relaySpanOf(t, spans, "initialize"), map[attribute.Key]string{"mcp.protocol.version": "2025-06-18"}, "error.type")
	bad := relaySpanOf(t, spans, "tools/call nosuch")
	wantAttrs(t, bad, map[attribute.Key]string{"error.type": "-32602", "rpc.response.status_code": "-32602", "mcp.protocol.version": "2025-06-18", "agentwire.mcp.era": "legacy"})
	if bad.Status().Code != codes.Error || bad.Status().Description != "unknown tool: nosuch" {
		t.Errorf("status %v", bad.Status())
	}
	wantAttrs(t, relaySpanOf(t, spans, "tools/call slow"), map[attribute.Key]string{"error.type": "cancelled"})
	wantAttrs(t, relaySpanOf(t, spans, "roots/list"), map[attribute.Key]string{"agentwire.relay.direction": "server"}, "error.type")
	if st := rl.Stats(); st.Open != 0 {
		t.Errorf("stats %+v", st)
	}
}

// At most MaxRelaySpans are open: the oldest is ended as abandoned; a
// reused id ends the older span too; Close ends the rest as unanswered,
// and the relay passes lines unchanged afterwards.
func TestRelayBound(t *testing.T) {
	sr, tp := recorder(t)
	rl := telemetry.NewRelay(&telemetry.Options{TracerProvider: tp, Logger: quiet})
	for i := range telemetry.MaxRelaySpans + 1 {
		rl.Message(telemetry.FromClient, []byte(`{"jsonrpc":"2.0","id":`+strconv.Itoa(i)+`,"method":"ping"}`))
	}
	if st := rl.Stats(); st.Open != telemetry.MaxRelaySpans || st.Abandoned != 1 {
		t.Fatalf("stats %+v", st)
	}
	first := sr.Ended()[0]
	wantAttrs(t, first, map[attribute.Key]string{"agentwire.relay.outcome": "abandoned", "jsonrpc.request.id": "0"}, "error.type")
	rl.Message(telemetry.FromClient, []byte(`{"jsonrpc":"2.0","id":5,"method":"ping"}`))
	if st := rl.Stats(); st.Open != telemetry.MaxRelaySpans || st.Abandoned != 2 {
		t.Fatalf("stats after a reused id %+v", st)
	}
	rl.Close()
	if st := rl.Stats(); st.Open != 0 || st.Unanswered != telemetry.MaxRelaySpans {
		t.Fatalf("stats after Close %+v", st)
	}
	last := sr.Ended()[len(sr.Ended())-1]
	wantAttrs(t, last, map[attribute.Key]string{"agentwire.relay.outcome": "unanswered"})
	line := []byte(`{"jsonrpc":"2.0","id":"z","method":"ping"}`)
	if out := rl.Message(telemetry.FromClient, line); &out[0] != &line[0] {
		t.Errorf("after Close %s", out)
	}
	if n := len(sr.Ended()); n != telemetry.MaxRelaySpans+2 {
		t.Errorf("%d spans ended", n)
	}
}

// With tracing off (the no-op provider) every line passes unchanged,
// trace context included.
func TestRelayTracingOff(t *testing.T) {
	rl := telemetry.NewRelay(&telemetry.Options{TracerProvider: tracenoop.NewTracerProvider()})
	defer rl.Close()
	for _, line := range []string{`{"jsonrpc":"2.0","id":1,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"x","_meta":{"traceparent":"` + hostParent + `"}}}`} {
		in := []byte(line)
		if out := rl.Message(telemetry.FromClient, in); &out[0] != &in[0] {
			t.Errorf("%s became %s", line, out)
		}
	}
	if st := rl.Stats(); st.Open != 0 {
		t.Errorf("stats %+v", st)
	}
}

// An ACP relay names spans by method, with the RPC attributes.
func TestRelayACP(t *testing.T) {
	sr, tp := recorder(t)
	rl := telemetry.NewRelay(&telemetry.Options{TracerProvider: tp, Protocol: telemetry.ACP})
	defer rl.Close()
	out := rl.Message(telemetry.FromClient, []byte(`{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"sessionId":"s1","prompt":[]}}`))
	if metaOf(t, out)["traceparent"] == "" {
		t.Errorf("no trace context in %s", out)
	}
	rl.Message(telemetry.FromServer, []byte(`{"jsonrpc":"2.0","id":1,"result":{"stopReason":"end_turn"}}`))
	s := onlySpan(t, sr)
	wantAttrs(t, s, map[attribute.Key]string{"rpc.system.name": "jsonrpc", "rpc.method": "session/prompt", "agentwire.acp.session.id": "s1", "agentwire.relay": "true"})
}
