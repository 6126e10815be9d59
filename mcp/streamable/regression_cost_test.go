package streamable_test

// Requests an attacker can send cheaply, and what they cost the server.
// BenchmarkHostileRequest runs each through the whole Streamable HTTP
// handler: none of them, at 4 KiB or less, may cost more than a few
// milliseconds of CPU. The tests beside it pin the defects by behaviour.

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/agentwire/agentwire/mcp"
	"github.com/agentwire/agentwire/mcp/internal/mcptest"
	"github.com/agentwire/agentwire/mcp/server"
	"github.com/agentwire/agentwire/mcp/streamable"
)

// newHeaderServer is a server with one tool whose integer argument
// "count" travels in Mcp-Param-Count too.
func newHeaderServer() *server.Server {
	s := mcptest.NewServer(nil)
	type countIn struct {
		Count json.Number `json:"count"`
	}
	server.AddTool(s, mcp.Tool{Name: "count", InputSchema: json.RawMessage(`{"type":"object","properties":{"count":{"type":"integer","x-mcp-header":"Count"}}}`)},
		func(_ context.Context, _ *server.ToolRequest, in countIn) (*mcp.ToolResult, error) {
			return mcp.TextResult(string(in.Count)), nil
		})
	return s
}

// hostileRequests are bodies (and the Mcp-Param-Count header, when set)
// of at most 4 KiB built to be expensive.
func hostileRequests() []struct{ name, body, count string } {
	call := func(args string) string {
		return `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":` + withMeta(`"name":"count","arguments":`+args) + `}`
	}
	fill := func(prefix, unit, suffix string) string {
		n := (4096 - len(call(prefix+suffix))) / len(unit)
		return prefix + strings.Repeat(unit, n) + suffix
	}
	longExp := "1e" + strings.Repeat("9", 1800)
	keys := func(escaped bool) string {
		var b strings.Builder
		b.WriteString(`{"count":1`)
		for i := 0; b.Len() < 3700; i++ {
			if escaped {
				b.WriteString(`,"\u006b` + string(rune('a'+i%26)) + string(rune('a'+i/26%26)) + string(rune('a'+i/676%26)) + `":0`)
			} else {
				b.WriteString(`,"k` + string(rune('a'+i%26)) + string(rune('a'+i/26%26)) + string(rune('a'+i/676%26)) + `":0`)
			}
		}
		return b.String() + "}"
	}
	return []struct{ name, body, count string }{
		{"exponent", call(`{"count":1e1000000}`), "1e1000000"},
		{"exponent-mismatch", call(`{"count":1e1000000}`), "1e999999"},
		{"negative-exponent", call(`{"count":1e-1000000}`), "1e-1000000"},
		{"long-exponent", call(`{"count":` + longExp + `}`), longExp},
		{"long-mantissa", call(fill(`{"count":1`, "0", `}`)), "1e3800"},
		{"many-keys", call(keys(false)), "1"},
		{"many-escaped-keys", call(keys(true)), "1"},
		{"duplicate-keys", call(fill(`{"count":1`, `,"count":1`, `}`)), "1"},
		{"deep-arguments", call(`{"count":1,"x":` + strings.Repeat("[", 1700) + strings.Repeat("]", 1700) + `}`), "1"},
		{"deep-objects", call(`{"count":1,"x":` + strings.Repeat(`{"a":`, 600) + `1` + strings.Repeat(`}`, 600) + `}`), "1"},
		{"escaped-string", call(fill(`{"count":1,"s":"`, `\u00e9`, `"}`)), "1"},
		{"utf8-string", call(fill(`{"count":1,"s":"`, `日本`, `"}`)), "1"},
		{"escaped-envelope-keys", strings.Replace(call(`{"count":1}`), `{"jsonrpc"`, `{`+strings.Repeat(`"\u0078":0,`, 330)+`"jsonrpc"`, 1), "1"},
	}
}

func BenchmarkHostileRequest(b *testing.B) {
	h := streamable.NewHandler(newHeaderServer(), nil)
	for _, r := range hostileRequests() {
		if len(r.body) > 4096 {
			b.Fatalf("%s: %d bytes", r.name, len(r.body))
		}
		b.Run(r.name, func(b *testing.B) {
			hdr := modernHeaders(r.body, map[string]string{"Mcp-Param-Count": r.count})
			start, ok := processCPU()
			for b.Loop() {
				serve(h, newPost(context.Background(), r.body, hdr.Clone()))
			}
			// CPU time, all goroutines included: what a request costs the
			// machine, whatever else runs on it (ns/op is wall time).
			if end, _ := processCPU(); ok {
				b.ReportMetric(float64(end-start)/float64(b.N), "cpu-ns/op")
			}
		})
	}
}

// Every hostile request gets an answer (the server neither hangs nor
// crashes on it).
func TestHostileRequestsAnswered(t *testing.T) {
	h := streamable.NewHandler(newHeaderServer(), nil)
	for _, r := range hostileRequests() {
		rec := serve(h, newPost(t.Context(), r.body, modernHeaders(r.body, map[string]string{"Mcp-Param-Count": r.count})))
		if rec.Status() != http.StatusOK && rec.Status() != http.StatusBadRequest {
			t.Errorf("%s: status %d: %s", r.name, rec.Status(), rec.Body())
		}
	}
}

// Defect: Mcp-Param-Count: 1e1000000 against "count":1e1000000 made the
// server build two million-digit integers (math/big), ~30 ms of CPU for a
// 231-byte request. The values are compared as sign, digits and exponent:
// equal spellings pass, a different value is -32020, and neither costs
// more than any other request (BenchmarkHostileRequest measures it).
func TestRegressionHTTPParamHeaderHugeExponent(t *testing.T) {
	h := streamable.NewHandler(newHeaderServer(), nil)
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":` + withMeta(`"name":"count","arguments":{"count":1e1000000}`) + `}`
	for _, tc := range []struct {
		header string
		status int
	}{
		{"1e1000000", http.StatusOK},
		{"10e999999", http.StatusOK},
		{"0.1E+1000001", http.StatusOK},
		{"1e999999", http.StatusBadRequest},
		{"1e1000001", http.StatusBadRequest},
		{"-1e1000000", http.StatusBadRequest},
	} {
		rec := serve(h, newPost(t.Context(), body, modernHeaders(body, map[string]string{"Mcp-Param-Count": tc.header})))
		if rec.Status() != tc.status {
			t.Errorf("Mcp-Param-Count: %s: status %d, want %d: %s", tc.header, rec.Status(), tc.status, rec.Body())
		}
		if tc.status == http.StatusBadRequest {
			if code, _ := errCode(t, rec.Body()); code != mcp.CodeHeaderMismatch {
				t.Errorf("Mcp-Param-Count: %s: code %d", tc.header, code)
			}
		}
	}
}
