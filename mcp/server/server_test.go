package server_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/agentwire/agentwire/internal/wiretest"
	"github.com/agentwire/agentwire/jsonrpc"
	"github.com/agentwire/agentwire/mcp"
	"github.com/agentwire/agentwire/mcp/internal/mcptest"
	"github.com/agentwire/agentwire/mcp/server"
	"github.com/agentwire/agentwire/rpc"
)

const serverInfo = `"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"test-server","version":"0.1"}}`

// runMCP builds the server inside the synctest bubble: the channels it
// makes (tool-set changes) must belong to the bubble.
func runMCP(t *testing.T, opts *server.Options, f func(w *wiretest.Wire, s *server.Server)) {
	t.Helper()
	synctest.Test(t, func(t *testing.T) {
		s := mcptest.NewServer(opts)
		w := wiretest.Start(t, s.Handler(), s.ConnOptions(nil), true)
		defer w.Finish()
		f(w, s)
	})
}

// discover returns the versions, capabilities and cache fields the
// 2026-07-28 schema requires, with serverInfo in _meta (guarantee E1).
func TestDiscover(t *testing.T) {
	runMCP(t, &server.Options{Instructions: "be nice", CacheTTL: time.Minute}, func(w *wiretest.Wire, _ *server.Server) {
		got := mcptest.One(t, w.Exchange(`{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{`+mcptest.Meta+`}}`))
		mcptest.JSONEq(t, got, `{"jsonrpc":"2.0","id":1,"result":{"resultType":"complete",
			"supportedVersions":["2026-07-28","2025-11-25","2025-06-18","2025-03-26","2024-11-05"],
			"capabilities":{"tools":{"listChanged":true}},"instructions":"be nice","ttlMs":60000,"cacheScope":"public",`+serverInfo+`}}`)
	})
}

// per-request _meta validation.
func TestModernMetaValidation(t *testing.T) {
	cases := []struct {
		name, in, want string
	}{
		{"unsupported version", `{"jsonrpc":"2.0","id":2,"method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2099-01-01","io.modelcontextprotocol/clientCapabilities":{}}}}`,
			`{"jsonrpc":"2.0","id":2,"error":{"code":-32022,"message":"Unsupported protocol version","data":{"supported":["2026-07-28"],"requested":"2099-01-01"}}}`},
		{"legacy version in modern meta", `{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2025-11-25","io.modelcontextprotocol/clientCapabilities":{}}}}`,
			`{"jsonrpc":"2.0","id":2,"error":{"code":-32022,"message":"Unsupported protocol version","data":{"supported":["2026-07-28"],"requested":"2025-11-25"}}}`},
		{"missing capabilities", `{"jsonrpc":"2.0","id":3,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`,
			`{"jsonrpc":"2.0","id":3,"error":{"code":-32602,"message":"invalid params: _meta[\"io.modelcontextprotocol/clientCapabilities\"] is required and must be an object"}}`},
		{"version not a string", `{"jsonrpc":"2.0","id":3,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":20260728,"io.modelcontextprotocol/clientCapabilities":{}}}}`,
			`{"jsonrpc":"2.0","id":3,"error":{"code":-32602,"message":"invalid params: _meta[\"io.modelcontextprotocol/protocolVersion\"] must be a string"}}`},
		{"removed method", `{"jsonrpc":"2.0","id":"p1","method":"ping","params":{` + mcptest.Meta + `}}`,
			`{"jsonrpc":"2.0","id":"p1","error":{"code":-32601,"message":"method not found: ping (not available in protocol version 2026-07-28)"}}`},
		// A feature the server lacks is not a method the version lacks.
		{"feature the server lacks", `{"jsonrpc":"2.0","id":"r1","method":"resources/list","params":{` + mcptest.Meta + `}}`,
			`{"jsonrpc":"2.0","id":"r1","error":{"code":-32601,"message":"method not found: resources/list (this server offers no resources)"}}`},
		{"prompts the server lacks", `{"jsonrpc":"2.0","id":"r2","method":"prompts/get","params":{` + mcptest.Meta + `}}`,
			`{"jsonrpc":"2.0","id":"r2","error":{"code":-32601,"message":"method not found: prompts/get (this server offers no prompts)"}}`},
		{"unknown method", `{"jsonrpc":"2.0","id":"r3","method":"no/such","params":{` + mcptest.Meta + `}}`,
			`{"jsonrpc":"2.0","id":"r3","error":{"code":-32601,"message":"method not found: no/such"}}`},
		{"discover without meta", `{"jsonrpc":"2.0","id":4,"method":"server/discover"}`,
			`{"jsonrpc":"2.0","id":4,"error":{"code":-32602,"message":"invalid params: server/discover needs _meta[\"io.modelcontextprotocol/protocolVersion\"] and _meta[\"io.modelcontextprotocol/clientCapabilities\"]"}}`},
		{"batch", `[{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{` + mcptest.Meta + `}}]`,
			`{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request: batches are not supported"}}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			runMCP(t, nil, func(w *wiretest.Wire, _ *server.Server) {
				mcptest.JSONEq(t, mcptest.One(t, w.Exchange(tc.in)), tc.want)
			})
		})
	}
}

// a cancel of an unknown id is ignored, and tools/list answers with
// the cache fields; tools are listed with their schemas.
func TestToolsListModern(t *testing.T) {
	runMCP(t, nil, func(w *wiretest.Wire, _ *server.Server) {
		got := mcptest.One(t, w.Exchange(
			`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":999,"reason":"test"}}`,
			`{"jsonrpc":"2.0","id":5,"method":"tools/list","params":{`+mcptest.Meta+`}}`))
		mcptest.JSONEq(t, got, `{"jsonrpc":"2.0","id":5,"result":{"resultType":"complete","ttlMs":0,"cacheScope":"public",`+serverInfo+`,"tools":[
			{"name":"echo","description":"echoes","inputSchema":{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}},
			{"name":"slow","inputSchema":{"type":"object","properties":{"steps":{"type":"integer"}},"required":["steps"]}},
			{"name":"fails","inputSchema":{"type":"object"}}]}}`)
	})
}

func TestToolsCallModern(t *testing.T) {
	runMCP(t, nil, func(w *wiretest.Wire, _ *server.Server) {
		mcptest.JSONEq(t, mcptest.One(t, w.Exchange(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{`+mcptest.Meta+`,"name":"echo","arguments":{"text":"hi"}}}`)),
			`{"jsonrpc":"2.0","id":1,"result":{"resultType":"complete","content":[{"type":"text","text":"hi"}],`+serverInfo+`}}`)
		// A tool's own failure is a result with isError, for the model to read.
		mcptest.JSONEq(t, mcptest.One(t, w.Exchange(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{`+mcptest.Meta+`,"name":"fails"}}`)),
			`{"jsonrpc":"2.0","id":2,"result":{"resultType":"complete","content":[{"type":"text","text":"the lookup failed"}],"isError":true,`+serverInfo+`}}`)
		// Arguments that do not fit the tool are an isError result too.
		got := mcptest.One(t, w.Exchange(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{`+mcptest.Meta+`,"name":"echo","arguments":{"text":5}}}`))
		if !strings.Contains(got, `"isError":true`) || !strings.Contains(got, "invalid arguments for echo") {
			t.Errorf("bad arguments: %s", got)
		}
		// An unknown tool is a protocol error.
		if c := wiretest.ErrCode(t, mcptest.One(t, w.Exchange(`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{`+mcptest.Meta+`,"name":"nope"}}`))); c != jsonrpc.CodeInvalidParams {
			t.Errorf("unknown tool: code %d", c)
		}
	})
}

// Progress (guarantee E6): one notification per step, strictly increasing, all
// before the response; none when no token was given.
func TestProgressBeforeResponse(t *testing.T) {
	runMCP(t, nil, func(w *wiretest.Wire, _ *server.Server) {
		w.Send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{` + strings.TrimSuffix(mcptest.Meta, "}") + `,"progressToken":"tok"},"name":"slow","arguments":{"steps":3}}}`)
		w.Sleep(100 * time.Millisecond)
		got := w.Take()
		want := []string{
			`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":1,"progressToken":"tok","total":3}}`,
			`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":2,"progressToken":"tok","total":3}}`,
			`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":3,"progressToken":"tok","total":3}}`,
		}
		if len(got) != 4 || !slices.Equal(got[:3], want) || !strings.Contains(got[3], `"id":1,"result"`) {
			t.Fatalf("got %q", got)
		}
		w.Send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{` + mcptest.Meta + `,"name":"slow","arguments":{"steps":2}}}`)
		w.Sleep(100 * time.Millisecond)
		if got := w.Take(); len(got) != 1 {
			t.Fatalf("progress without a token: %q", got)
		}
	})
}

// Cancellation (guarantees E6, C8): no progress and no response afterwards.
func TestCancelStopsTool(t *testing.T) {
	runMCP(t, nil, func(w *wiretest.Wire, _ *server.Server) {
		w.Send(`{"jsonrpc":"2.0","id":"c1","method":"tools/call","params":{` + strings.TrimSuffix(mcptest.Meta, "}") + `,"progressToken":1},"name":"slow","arguments":{"steps":100}}}`)
		w.Sleep(25 * time.Millisecond)
		before := w.Take()
		w.Send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"c1","reason":"user"}}`)
		w.Sleep(time.Second)
		if after := w.Take(); len(after) != 0 {
			t.Fatalf("after the cancel: %q (before: %q)", after, before)
		}
		if len(before) != 2 {
			t.Errorf("progress before the cancel: %q", before)
		}
	})
}

// E6: listen is acknowledged first, every notification carries the
// subscription id, a tool-set change is announced, and a client cancel ends
// it with nothing more written.
func TestListen(t *testing.T) {
	runMCP(t, nil, func(w *wiretest.Wire, s *server.Server) {
		got := mcptest.One(t, w.Exchange(`{"jsonrpc":"2.0","id":"L1","method":"subscriptions/listen","params":{`+mcptest.Meta+`,"notifications":{"toolsListChanged":true,"promptsListChanged":true}}}`))
		mcptest.JSONEq(t, got, `{"jsonrpc":"2.0","method":"notifications/subscriptions/acknowledged","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":"L1"},"notifications":{"toolsListChanged":true}}}`)
		s.RemoveTool("fails")
		mcptest.JSONEq(t, mcptest.One(t, w.Take()), `{"jsonrpc":"2.0","method":"notifications/tools/list_changed","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":"L1"}}}`)
		w.Send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"L1"}}`)
		w.Settle()
		s.AddTool(mcp.Tool{Name: "new"}, nil)
		if got := w.Take(); len(got) != 0 {
			t.Fatalf("after the cancel: %q", got)
		}
	})
}

// A listen stream ends with the graceful final result when input ends,
// without waiting out the end-of-stream grace. Its id keeps its JSON type.
func TestListenEndsAtEOF(t *testing.T) {
	runMCP(t, nil, func(w *wiretest.Wire, _ *server.Server) {
		w.Exchange(`{"jsonrpc":"2.0","id":7,"method":"subscriptions/listen","params":{` + mcptest.Meta + `,"notifications":{"toolsListChanged":true}}}`)
		w.Sleep(time.Millisecond) // past the inline budget
		start := time.Now()
		w.In.Close()
		<-w.Conn.Done()
		<-w.EOF
		if d := time.Since(start); d != 0 {
			t.Errorf("ended %v after EOF", d)
		}
		mcptest.JSONEq(t, mcptest.One(t, w.Take()), `{"jsonrpc":"2.0","id":7,"result":{"resultType":"complete","_meta":{"io.modelcontextprotocol/subscriptionId":7}}}`)
	})
}

// the legacy handshake, ping before initialize, version
// negotiation, and a probe that does not pin the connection.
func TestLegacyHandshakeAfterProbe(t *testing.T) {
	runMCP(t, nil, func(w *wiretest.Wire, _ *server.Server) {
		w.Exchange(`{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{` + mcptest.Meta + `}}`)
		mcptest.JSONEq(t, mcptest.One(t, w.Exchange(`{"jsonrpc":"2.0","id":"x","method":"ping"}`)), `{"jsonrpc":"2.0","id":"x","result":{}}`)
		if c := wiretest.ErrCode(t, mcptest.One(t, w.Exchange(`{"jsonrpc":"2.0","id":"early","method":"tools/list"}`))); c != jsonrpc.CodeInvalidRequest {
			t.Errorf("tools/list before initialize: code %d", c)
		}
		mcptest.JSONEq(t, mcptest.One(t, w.Exchange(`{"jsonrpc":"2.0","id":2,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}`)),
			`{"jsonrpc":"2.0","id":2,"result":{"protocolVersion":"2025-06-18","capabilities":{"logging":{},"tools":{"listChanged":true}},"serverInfo":{"name":"test-server","version":"0.1"}}}`)
		if got := w.Exchange(`{"jsonrpc":"2.0","method":"notifications/initialized"}`); len(got) != 0 {
			t.Fatalf("initialized answered: %q", got)
		}
		got := mcptest.One(t, w.Exchange(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{"text":"legacy"}}}`))
		mcptest.JSONEq(t, got, `{"jsonrpc":"2.0","id":3,"result":{"content":[{"type":"text","text":"legacy"}]}}`)
		// Modern requests are still served on the same connection.
		if !strings.Contains(mcptest.One(t, w.Exchange(`{"jsonrpc":"2.0","id":4,"method":"tools/list","params":{`+mcptest.Meta+`}}`)), `"resultType":"complete"`) {
			t.Error("modern request after the legacy handshake")
		}
	})
}

func TestLegacyVersionNegotiation(t *testing.T) {
	runMCP(t, nil, func(w *wiretest.Wire, _ *server.Server) {
		got := mcptest.One(t, w.Exchange(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2029-01-01","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}`))
		if !strings.Contains(got, `"protocolVersion":"2025-11-25"`) {
			t.Fatalf("got %s", got)
		}
	})
}

// initialize is a barrier (guarantees C2, E1): a request right behind it is
// dispatched only after it.
func TestInitializeIsABarrier(t *testing.T) {
	runMCP(t, nil, func(w *wiretest.Wire, _ *server.Server) {
		got := w.Exchange(
			`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}`,
			`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
		if len(got) != 2 || strings.Contains(strings.Join(got, ""), "error") {
			t.Fatalf("got %q", got)
		}
	})
}

// Era variants: modern-only rejects initialize naming its versions;
// legacy-only does not know server/discover; a silent legacy server answers
// nothing before initialize.
func TestEraVariants(t *testing.T) {
	initLine := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}`
	discover := `{"jsonrpc":"2.0","id":9,"method":"server/discover","params":{` + mcptest.Meta + `}}`
	runMCP(t, &server.Options{Eras: mcp.ModernOnly}, func(w *wiretest.Wire, _ *server.Server) {
		mcptest.JSONEq(t, mcptest.One(t, w.Exchange(initLine)), `{"jsonrpc":"2.0","id":1,"error":{"code":-32022,"message":"Unsupported protocol version: this server speaks only 2026-07-28","data":{"supported":["2026-07-28"],"requested":"2025-11-25"}}}`)
		if !strings.Contains(mcptest.One(t, w.Exchange(discover)), `"supportedVersions":["2026-07-28"]`) {
			t.Error("modern-only discover")
		}
	})
	runMCP(t, &server.Options{Eras: mcp.LegacyOnly}, func(w *wiretest.Wire, _ *server.Server) {
		if c := wiretest.ErrCode(t, mcptest.One(t, w.Exchange(discover))); c != jsonrpc.CodeMethodNotFound {
			t.Errorf("legacy-only discover: code %d", c)
		}
		if got := mcptest.One(t, w.Exchange(initLine)); !strings.Contains(got, `"protocolVersion":"2025-11-25"`) {
			t.Errorf("legacy-only initialize: %s", got)
		}
	})
	runMCP(t, &server.Options{Eras: mcp.LegacyOnly, LegacySilent: true}, func(w *wiretest.Wire, _ *server.Server) {
		if got := w.Exchange(discover, `{"jsonrpc":"2.0","id":2,"method":"ping"}`); len(got) != 0 {
			t.Fatalf("silent server answered %q", got)
		}
		if got := mcptest.One(t, w.Exchange(initLine)); !strings.Contains(got, `"protocolVersion"`) {
			t.Errorf("initialize: %s", got)
		}
	})
}

// a garbage line gets a parse error and the server keeps serving.
func TestGarbageThenDiscover(t *testing.T) {
	runMCP(t, nil, func(w *wiretest.Wire, _ *server.Server) {
		got := w.Exchange(`{not json`, `{"jsonrpc":"2.0","id":7,"method":"server/discover","params":{`+mcptest.Meta+`}}`)
		if len(got) != 2 || wiretest.ErrCode(t, got[1]) != jsonrpc.CodeParseError || !strings.Contains(got[0], `"id":7,"result"`) {
			t.Fatalf("got %q", got)
		}
	})
}

func TestSchemaFor(t *testing.T) {
	type args struct {
		Name  string   `json:"name" description:"who"`
		Count *int     `json:"count"`
		Tags  []string `json:"tags,omitempty"`
		Score float64  `json:"score"`
		skip  int
	}
	got := string(mcp.SchemaFor(args{}))
	want := `{"properties":{"count":{"type":"integer"},"name":{"description":"who","type":"string"},"score":{"type":"number"},"tags":{"items":{"type":"string"},"type":"array"}},"required":["name","score"],"type":"object"}`
	if got != want {
		t.Errorf("SchemaFor = %s", got)
	}
	if got := string(mcp.SchemaFor(3)); got != `{"type":"object"}` {
		t.Errorf("non-struct: %s", got)
	}
}

// A legacy connection hears about tool-set changes (listChanged) without
// a subscription.
func TestLegacyToolsListChanged(t *testing.T) {
	runMCP(t, nil, func(w *wiretest.Wire, s *server.Server) {
		w.Exchange(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}`,
			`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
		s.AddTool(mcp.Tool{Name: "late"}, nil)
		mcptest.JSONEq(t, mcptest.One(t, w.Take()), `{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`)
	})
}

// Regressions (found in review): an empty text block kept its required
// "text"; a null protocol version is a malformed field (-32602), not an
// unsupported version.
func TestRegressionEmptyTextAndNullVersion(t *testing.T) {
	runMCP(t, nil, func(w *wiretest.Wire, _ *server.Server) {
		got := mcptest.One(t, w.Exchange(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{`+mcptest.Meta+`,"name":"echo","arguments":{"text":""}}}`))
		if !strings.Contains(got, `"text":""`) {
			t.Errorf("empty text: %s", got)
		}
		got = mcptest.One(t, w.Exchange(`{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":null,"io.modelcontextprotocol/clientCapabilities":{}}}}`))
		if wiretest.ErrCode(t, got) != jsonrpc.CodeInvalidParams {
			t.Errorf("null version: %s", got)
		}
	})
	b, _ := json.Marshal(mcp.ToolAnnotations{DestructiveHint: mcp.Hint(false)})
	if string(b) != `{"destructiveHint":false}` {
		t.Errorf("annotations: %s", b)
	}
}

// Regression: each subscriptions/listen held one of the 256 handler slots
// until it was cancelled; with all slots taken the reader waited for one,
// so the cancellations queued behind the 257th listen were never read and
// the connection answered nothing ever again. Streams now count against a
// budget of their own (the excess refused with a clear error), and
// cancellations are always read.
func TestRegressionListenStreamsWedgeConnection(t *testing.T) {
	runMCP(t, nil, func(w *wiretest.Wire, s *server.Server) {
		const n = 300
		lines := make([]string, 0, n)
		for i := range n {
			lines = append(lines, fmt.Sprintf(`{"jsonrpc":"2.0","id":"L%d","method":"subscriptions/listen","params":{%s,"notifications":{"toolsListChanged":true}}}`, i, mcptest.Meta))
		}
		got := w.Exchange(lines...)
		acks, refused := 0, 0
		for _, g := range got {
			switch {
			case strings.Contains(g, "subscriptions/acknowledged"):
				acks++
			case strings.Contains(g, `"too_many_streams"`):
				refused++
			default:
				t.Fatalf("unexpected %q", g)
			}
		}
		if acks != rpc.DefaultMaxStreams || refused != n-rpc.DefaultMaxStreams {
			t.Fatalf("%d acknowledged, %d refused", acks, refused)
		}
		// Ordinary requests are served while every stream is open.
		mcptest.JSONEq(t, mcptest.One(t, w.Exchange(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{`+mcptest.Meta+`,"name":"echo","arguments":{"text":"x"}}}`)),
			`{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"x"}],"resultType":"complete",`+serverInfo+`}}`)
		cancels := make([]string, 0, n)
		for i := range n {
			cancels = append(cancels, fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"L%d"}}`, i))
		}
		w.Send(cancels...)
		w.Settle()
		if got := w.Take(); len(got) != 0 {
			t.Fatalf("cancelled streams wrote %q", got)
		}
		// The budget is whole again.
		mcptest.One(t, w.Exchange(`{"jsonrpc":"2.0","id":"again","method":"subscriptions/listen","params":{`+mcptest.Meta+`,"notifications":{"toolsListChanged":true}}}`))
		mcptest.JSONEq(t, mcptest.One(t, w.Exchange(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{`+mcptest.Meta+`,"name":"echo","arguments":{"text":"y"}}}`)),
			`{"jsonrpc":"2.0","id":2,"result":{"content":[{"type":"text","text":"y"}],"resultType":"complete",`+serverInfo+`}}`)
	})
}
