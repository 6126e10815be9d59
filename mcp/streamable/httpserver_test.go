package streamable_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/agentwire/agentwire/mcp"
	"github.com/agentwire/agentwire/mcp/internal/mcptest"
	"github.com/agentwire/agentwire/mcp/server"
	"github.com/agentwire/agentwire/mcp/streamable"
)

// httpRecorder is a ResponseWriter that can be read while the handler still
// writes (event streams).
type httpRecorder struct {
	mu      sync.Mutex
	hdr     http.Header
	status  int
	body    bytes.Buffer
	flushes int
}

func newHTTPRecorder() *httpRecorder { return &httpRecorder{hdr: http.Header{}} }

func (r *httpRecorder) Header() http.Header { return r.hdr }
func (r *httpRecorder) WriteHeader(s int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.status == 0 {
		r.status = s
	}
}
func (r *httpRecorder) Write(b []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.body.Write(b)
}
func (r *httpRecorder) Flush() {
	r.mu.Lock()
	r.flushes++
	r.mu.Unlock()
}
func (r *httpRecorder) Body() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.body.String()
}
func (r *httpRecorder) Status() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.status
}

// events returns the data lines of an event stream.
func events(body string) []string {
	var out []string
	for _, l := range strings.Split(body, "\n") {
		if d, ok := strings.CutPrefix(l, "data: "); ok {
			out = append(out, d)
		}
	}
	return out
}

// modernHeaders mirrors the body as a 2026-07-28 client does; overrides
// replace them, and an override of "" removes a header.
func modernHeaders(body string, overrides map[string]string) http.Header {
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set("Accept", "application/json, text/event-stream")
	var m struct {
		Method string `json:"method"`
		Params struct {
			Name string `json:"name"`
			URI  string `json:"uri"`
			Meta struct {
				V string `json:"io.modelcontextprotocol/protocolVersion"`
			} `json:"_meta"`
		} `json:"params"`
	}
	json.Unmarshal([]byte(body), &m)
	h.Set(mcp.HeaderProtocolVersion, mcp.LatestVersion)
	if m.Params.Meta.V != "" {
		h.Set(mcp.HeaderProtocolVersion, m.Params.Meta.V)
	}
	if m.Method != "" {
		h.Set(mcp.HeaderMethod, m.Method)
	}
	if m.Params.Name != "" {
		h.Set(mcp.HeaderName, m.Params.Name)
	} else if m.Params.URI != "" {
		h.Set(mcp.HeaderName, m.Params.URI)
	}
	for k, v := range overrides {
		if v == "" {
			h.Del(k)
		} else {
			h[http.CanonicalHeaderKey(k)] = []string{v}
		}
	}
	return h
}

func newPost(ctx context.Context, body string, h http.Header) *http.Request {
	req := httptest.NewRequestWithContext(ctx, http.MethodPost, "http://localhost:8080/mcp", strings.NewReader(body))
	req.Header = h
	return req
}

func serve(h http.Handler, req *http.Request) *httpRecorder {
	rec := newHTTPRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// errCode returns error.code and id of a JSON-RPC error body.
func errCode(t *testing.T, body string) (int64, string) {
	t.Helper()
	var m struct {
		ID    json.RawMessage `json:"id"`
		Error *struct {
			Code int64 `json:"code"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(body), &m); err != nil || m.Error == nil {
		t.Fatalf("not a JSON-RPC error: %q", body)
	}
	return m.Error.Code, string(m.ID)
}

func withMeta(params string) string {
	if params == "" {
		return "{" + mcptest.Meta + "}"
	}
	return "{" + mcptest.Meta + "," + params + "}"
}

// T2: the status codes and error codes of the 2026-07-28 Streamable HTTP transport, one raw HTTP
// exchange per row, against a dual-era server.
func TestHTTPStatusAndErrorCodes(t *testing.T) {
	const disc = `{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{` + mcptest.Meta + `}}`
	call := func(name string) string {
		return `{"jsonrpc":"2.0","id":"c","method":"tools/call","params":` + withMeta(`"name":"`+name+`","arguments":{"text":"hi"}`) + `}`
	}
	cases := []struct {
		name      string
		method    string
		body      string
		headers   map[string]string
		status    int
		code      int64  // 0: a result
		id        string // the error's id, when code != 0
		bodyCheck string // a substring of the body
	}{
		{name: "discover", body: disc, status: 200, bodyCheck: `"supportedVersions":["2026-07-28"`},
		{name: "tools/call", body: call("echo"), status: 200, bodyCheck: `"text":"hi"`},
		{name: "missing _meta", body: `{"jsonrpc":"2.0","id":101,"method":"server/discover","params":{}}`, status: 400, code: -32602, id: "101"},
		{name: "missing protocolVersion in _meta", body: `{"jsonrpc":"2.0","id":102,"method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/clientCapabilities":{}}}}`, status: 400, code: -32602, id: "102"},
		{name: "missing clientCapabilities", body: `{"jsonrpc":"2.0","id":104,"method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`, status: 400, code: -32602, id: "104"},
		{name: "unsupported version in header and body", body: `{"jsonrpc":"2.0","id":301,"method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"v999.0.0","io.modelcontextprotocol/clientCapabilities":{}}}}`, status: 400, code: -32022, id: "301", bodyCheck: `"requested":"v999.0.0"`},
		{name: "header version differs from body", body: `{"jsonrpc":"2.0","id":302,"method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"v999.0.0","io.modelcontextprotocol/clientCapabilities":{}}}}`, headers: map[string]string{"MCP-Protocol-Version": "2026-07-28"}, status: 400, code: -32020, id: "302"},
		{name: "missing MCP-Protocol-Version", body: disc, headers: map[string]string{"MCP-Protocol-Version": ""}, status: 400, code: -32020, id: "1"},
		{name: "missing Mcp-Method", body: disc, headers: map[string]string{"Mcp-Method": ""}, status: 400, code: -32020, id: "1"},
		{name: "Mcp-Method mismatch", body: disc, headers: map[string]string{"Mcp-Method": "tools/list"}, status: 400, code: -32020, id: "1"},
		{name: "Mcp-Method values are case-sensitive", body: disc, headers: map[string]string{"Mcp-Method": "SERVER/DISCOVER"}, status: 400, code: -32020, id: "1"},
		{name: "header names are not", body: disc, headers: map[string]string{"mcp-method": "server/discover"}, status: 200},
		{name: "Mcp-Name mismatch", body: call("echo"), headers: map[string]string{"Mcp-Name": "wrong_tool_name"}, status: 400, code: -32020, id: `"c"`},
		{name: "missing Mcp-Name", body: call("echo"), headers: map[string]string{"Mcp-Name": ""}, status: 400, code: -32020, id: `"c"`},
		{name: "Mcp-Name with surrounding whitespace", body: call("echo"), headers: map[string]string{"Mcp-Name": "  echo  "}, status: 200},
		{name: "Mcp-Name in base64", body: call("echo"), headers: map[string]string{"Mcp-Name": "=?base64?ZWNobw==?="}, status: 200},
		{name: "Mcp-Name in broken base64", body: call("echo"), headers: map[string]string{"Mcp-Name": "=?base64?ZWNobw?="}, status: 400, code: -32020, id: `"c"`},
		{name: "unknown method", body: `{"jsonrpc":"2.0","id":601,"method":"unknown/method","params":{` + mcptest.Meta + `}}`, status: 404, code: -32601, id: "601"},
		{name: "removed method initialize", body: `{"jsonrpc":"2.0","id":500,"method":"initialize","params":{` + mcptest.Meta + `}}`, status: 404, code: -32601, id: "500"},
		{name: "removed method ping", body: `{"jsonrpc":"2.0","id":500,"method":"ping","params":{` + mcptest.Meta + `}}`, status: 404, code: -32601, id: "500"},
		{name: "removed method resources/subscribe", body: `{"jsonrpc":"2.0","id":500,"method":"resources/subscribe","params":{` + mcptest.Meta + `}}`, status: 404, code: -32601, id: "500"},
		{name: "unknown tool", body: call("nope"), status: 400, code: -32602, id: `"c"`},
		{name: "tool error is a result", body: call("fails"), status: 200, bodyCheck: `"isError":true`},
		{name: "notification", body: `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}`, status: 202},
		{name: "a response from a modern client", body: `{"jsonrpc":"2.0","id":1,"result":{}}`, status: 400, code: -32600},
		{name: "parse error", body: `{"jsonrpc":"2.0",`, status: 400, code: -32700, id: "null"},
		{name: "batch", body: `[` + disc + `]`, status: 400, code: -32600},
		{name: "null id", body: `{"jsonrpc":"2.0","id":null,"method":"server/discover","params":{` + mcptest.Meta + `}}`, status: 400, code: -32600},
		{name: "wrong content type", body: disc, headers: map[string]string{"Content-Type": "text/plain"}, status: 415, code: -32600},
		{name: "accepts neither", body: disc, headers: map[string]string{"Accept": "text/html"}, status: 406, code: -32600},
		{name: "GET", method: http.MethodGet, body: "", status: 405, code: -32600},
		{name: "DELETE", method: http.MethodDelete, body: "", status: 405, code: -32600},
		{name: "evil origin", body: disc, headers: map[string]string{"Origin": "http://evil.example"}, status: 403, code: -32600},
		{name: "loopback origin", body: disc, headers: map[string]string{"Origin": "http://localhost:8080"}, status: 200},
		{name: "ignored Mcp-Session-Id", body: disc, headers: map[string]string{"Mcp-Session-Id": "abc"}, status: 200},
		// Legacy (2025-11-25 and earlier) clients, served statelessly.
		{name: "legacy initialize", body: `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}`, headers: map[string]string{"MCP-Protocol-Version": "", "Mcp-Method": ""}, status: 200, bodyCheck: `"protocolVersion":"2025-06-18"`},
		{name: "legacy tools/list without a session", body: `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`, headers: map[string]string{"MCP-Protocol-Version": "2025-11-25", "Mcp-Method": ""}, status: 200, bodyCheck: `"name":"echo"`},
		{name: "legacy tools/call", body: `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{"text":"old"}}}`, headers: map[string]string{"MCP-Protocol-Version": "2025-11-25"}, status: 200, bodyCheck: `"text":"old"`},
		{name: "legacy unknown method is 200", body: `{"jsonrpc":"2.0","id":4,"method":"nope"}`, headers: map[string]string{"MCP-Protocol-Version": "2025-11-25"}, status: 200, code: -32601, id: "4"},
		{name: "legacy ping", body: `{"jsonrpc":"2.0","id":5,"method":"ping"}`, headers: map[string]string{"MCP-Protocol-Version": "2025-06-18"}, status: 200, bodyCheck: `"result":{}`},
		{name: "unknown legacy version", body: `{"jsonrpc":"2.0","id":6,"method":"tools/list"}`, headers: map[string]string{"MCP-Protocol-Version": "1999-01-01"}, status: 400, code: -32022, id: "6"},
		{name: "legacy initialized notification", body: `{"jsonrpc":"2.0","method":"notifications/initialized"}`, headers: map[string]string{"MCP-Protocol-Version": "2025-11-25"}, status: 202},
		{name: "legacy client answering", body: `{"jsonrpc":"2.0","id":9,"result":{}}`, headers: map[string]string{"MCP-Protocol-Version": "2025-11-25"}, status: 202},
	}
	h := streamable.NewHandler(mcptest.NewServer(nil), nil)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req := newPost(t.Context(), tc.body, modernHeaders(tc.body, tc.headers))
			if tc.method != "" {
				req.Method = tc.method
			}
			rec := serve(h, req)
			body := rec.Body()
			if rec.Status() != tc.status {
				t.Fatalf("status %d, want %d; body %s", rec.Status(), tc.status, body)
			}
			if tc.status == 202 {
				if body != "" {
					t.Errorf("202 with a body: %q", body)
				}
				return
			}
			if ct := rec.hdr.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type %q", ct)
			}
			if sid := rec.hdr.Get(mcp.HeaderSessionID); sid != "" {
				t.Errorf("a session id was minted: %q", sid)
			}
			if tc.code != 0 {
				code, id := errCode(t, body)
				if code != tc.code {
					t.Errorf("code %d, want %d: %s", code, tc.code, body)
				}
				if tc.id != "" && id != tc.id {
					t.Errorf("id %s, want %s", id, tc.id)
				}
			} else if !strings.Contains(body, `"result"`) {
				t.Errorf("no result: %s", body)
			}
			if !strings.Contains(body, tc.bodyCheck) {
				t.Errorf("body lacks %s: %s", tc.bodyCheck, body)
			}
			if tc.status == 405 && rec.hdr.Get("Allow") != "POST" {
				t.Errorf("Allow: %q", rec.hdr.Get("Allow"))
			}
		})
	}
}

// T2: Origin allow-list, Host allow-list, bearer token, body cap.
func TestHTTPAccessControl(t *testing.T) {
	const disc = `{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{` + mcptest.Meta + `}}`
	h := streamable.NewHandler(mcptest.NewServer(nil), &streamable.Options{
		AllowedOrigins: []string{"https://app.example.com"},
		AllowedHosts:   []string{"localhost", "127.0.0.1"},
		Token:          "s3cret",
		MaxBodyBytes:   512,
	})
	cases := []struct {
		name    string
		headers map[string]string
		host    string
		body    string
		status  int
		auth    string // expected WWW-Authenticate substring
	}{
		{name: "token", headers: map[string]string{"Authorization": "Bearer s3cret"}, status: 200},
		{name: "no token", status: 401, auth: `Bearer realm="mcp"`},
		{name: "wrong token", headers: map[string]string{"Authorization": "Bearer nope"}, status: 401, auth: `error="invalid_token"`},
		{name: "allowed origin", headers: map[string]string{"Authorization": "Bearer s3cret", "Origin": "https://app.example.com"}, status: 200},
		{name: "other origin before auth", headers: map[string]string{"Origin": "https://evil.example"}, status: 403},
		{name: "rebinding host", host: "evil.example.com:8080", headers: map[string]string{"Authorization": "Bearer s3cret"}, status: 403},
		{name: "body over the cap", headers: map[string]string{"Authorization": "Bearer s3cret"}, body: `{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{` + mcptest.Meta + `,"pad":"` + strings.Repeat("x", 600) + `"}}`, status: 413},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			body := tc.body
			if body == "" {
				body = disc
			}
			req := newPost(t.Context(), body, modernHeaders(body, tc.headers))
			if tc.host != "" {
				req.Host = tc.host
			}
			rec := serve(h, req)
			if rec.Status() != tc.status {
				t.Fatalf("status %d, want %d: %s", rec.Status(), tc.status, rec.Body())
			}
			if got := rec.hdr.Get("WWW-Authenticate"); !strings.Contains(got, tc.auth) || (tc.auth == "") != (got == "") {
				t.Errorf("WWW-Authenticate %q, want %q", got, tc.auth)
			}
		})
	}
}

// T2: a request that asks for progress is answered with an event stream:
// progress events, then the result; X-Accel-Buffering: no.
func TestHTTPProgressStream(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := streamable.NewHandler(mcptest.NewServer(nil), nil)
		body := `{"jsonrpc":"2.0","id":"p","method":"tools/call","params":{` + strings.TrimSuffix(mcptest.Meta, "}") + `,"progressToken":"tok"},"name":"slow","arguments":{"steps":3}}}`
		rec := serve(h, newPost(t.Context(), body, modernHeaders(body, nil)))
		if rec.hdr.Get("Content-Type") != "text/event-stream" || rec.hdr.Get("X-Accel-Buffering") != "no" {
			t.Fatalf("headers %v", rec.hdr)
		}
		ev := events(rec.Body())
		if len(ev) != 4 {
			t.Fatalf("events %q", ev)
		}
		for i, e := range ev[:3] {
			if !strings.Contains(e, `"method":"notifications/progress"`) || !strings.Contains(e, `"progress":`+string(rune('1'+i))) {
				t.Errorf("event %d: %s", i, e)
			}
		}
		if !strings.Contains(ev[3], `"id":"p","result"`) {
			t.Errorf("last event %s", ev[3])
		}
		h.Shutdown(t.Context())
	})
}

// T2: a client that accepts only JSON gets the result without the
// progress it cannot receive.
func TestHTTPJSONOnlyClientGetsNoStream(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := streamable.NewHandler(mcptest.NewServer(nil), nil)
		body := `{"jsonrpc":"2.0","id":"p","method":"tools/call","params":{` + strings.TrimSuffix(mcptest.Meta, "}") + `,"progressToken":"tok"},"name":"slow","arguments":{"steps":2}}}`
		rec := serve(h, newPost(t.Context(), body, modernHeaders(body, map[string]string{"Accept": "application/json"})))
		if rec.hdr.Get("Content-Type") != "application/json" || !strings.Contains(rec.Body(), `"text":"done"`) || strings.Contains(rec.Body(), "progress") {
			t.Fatalf("%v %s", rec.hdr, rec.Body())
		}
	})
}

// T2: "closing the SSE response stream MUST be treated as cancellation":
// the handler's context ends and nothing more is written.
func TestHTTPClientDisconnectCancelsHandler(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := mcptest.NewServer(nil)
		started := make(chan struct{})
		cancelled := make(chan error, 1)
		s.AddTool(mcp.Tool{Name: "wait"}, func(ctx context.Context, _ *server.ToolRequest) (*mcp.ToolResult, error) {
			close(started)
			<-ctx.Done()
			cancelled <- context.Cause(ctx)
			return nil, ctx.Err()
		})
		h := streamable.NewHandler(s, nil)
		ctx, cancel := context.WithCancel(t.Context())
		body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":` + withMeta(`"name":"wait"`) + `}`
		done := make(chan *httpRecorder)
		go func() { done <- serve(h, newPost(ctx, body, modernHeaders(body, nil))) }()
		<-started
		cancel()
		rec := <-done
		if err := <-cancelled; err == nil {
			t.Fatal("the handler was not cancelled")
		}
		if rec.Body() != "" {
			t.Errorf("wrote after the client left: %q", rec.Body())
		}
		h.Shutdown(t.Context())
	})
}

// T2, E6: subscriptions/listen over HTTP is a long-lived event stream: the
// acknowledgment first, change notifications with the subscription id,
// and the final result when the server shuts down.
func TestHTTPListenStream(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := mcptest.NewServer(nil)
		h := streamable.NewHandler(s, nil)
		body := `{"jsonrpc":"2.0","id":"L","method":"subscriptions/listen","params":` + withMeta(`"notifications":{"toolsListChanged":true}`) + `}`
		rec := newHTTPRecorder()
		done := make(chan struct{})
		go func() {
			h.ServeHTTP(rec, newPost(t.Context(), body, modernHeaders(body, nil)))
			close(done)
		}()
		synctest.Wait()
		ev := events(rec.Body())
		if len(ev) != 1 || !strings.Contains(ev[0], "notifications/subscriptions/acknowledged") {
			t.Fatalf("first events %q", ev)
		}
		s.RemoveTool("fails")
		synctest.Wait()
		ev = events(rec.Body())
		if len(ev) != 2 || !strings.Contains(ev[1], `"method":"notifications/tools/list_changed","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":"L"}}`) {
			t.Fatalf("after a change %q", ev)
		}
		if err := h.Shutdown(t.Context()); err != nil {
			t.Fatal(err)
		}
		<-done
		ev = events(rec.Body())
		if len(ev) != 3 || !strings.Contains(ev[2], `"id":"L","result":{`) || !strings.Contains(ev[2], `"resultType":"complete"`) {
			t.Fatalf("at shutdown %q", ev)
		}
		// After Shutdown, new requests get 503.
		disc := `{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{` + mcptest.Meta + `}}`
		if r := serve(h, newPost(t.Context(), disc, modernHeaders(disc, nil))); r.Status() != 503 {
			t.Errorf("after shutdown: %d", r.Status())
		}
	})
}

// T2: a slow answer becomes an event stream carrying keep-alive comments,
// so proxies do not cut a silent connection.
func TestHTTPKeepAliveOnSlowAnswer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := mcptest.NewServer(nil)
		s.AddTool(mcp.Tool{Name: "nap"}, func(ctx context.Context, _ *server.ToolRequest) (*mcp.ToolResult, error) {
			time.Sleep(35 * time.Second)
			return mcp.TextResult("rested"), nil
		})
		h := streamable.NewHandler(s, &streamable.Options{KeepAlive: 10 * time.Second})
		body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":` + withMeta(`"name":"nap"`) + `}`
		rec := serve(h, newPost(t.Context(), body, modernHeaders(body, nil)))
		if rec.hdr.Get("Content-Type") != "text/event-stream" {
			t.Fatalf("Content-Type %q", rec.hdr.Get("Content-Type"))
		}
		if n := strings.Count(rec.Body(), ":\n\n"); n != 3 {
			t.Errorf("%d keep-alive comments: %q", n, rec.Body())
		}
		if ev := events(rec.Body()); len(ev) != 1 || !strings.Contains(ev[0], "rested") {
			t.Errorf("events %q", ev)
		}
	})
}

// T2: a keep-alive comment goes to a stream that has been quiet for
// KeepAlive, not on a fixed beat: a stream carrying progress every 6 s
// gets none at KeepAlive 10 s, and, once its tool stops reporting, one
// 10 to 12.5 s after its last event.
func TestHTTPKeepAliveOnlyOnAQuietStream(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := mcptest.NewServer(nil)
		s.AddTool(mcp.Tool{Name: "busy"}, func(ctx context.Context, req *server.ToolRequest) (*mcp.ToolResult, error) {
			for i := range 5 {
				time.Sleep(6 * time.Second)
				if err := req.Progress(float64(i+1), 5, ""); err != nil {
					return nil, err
				}
			}
			time.Sleep(12 * time.Second) // quiet: one comment, at 40 to 42.5 s
			return mcp.TextResult("done"), nil
		})
		h := streamable.NewHandler(s, &streamable.Options{KeepAlive: 10 * time.Second})
		body := `{"jsonrpc":"2.0","id":"b","method":"tools/call","params":{` + strings.TrimSuffix(mcptest.Meta, "}") + `,"progressToken":"tok"},"name":"busy"}}`
		rec := serve(h, newPost(t.Context(), body, modernHeaders(body, nil)))
		if n := strings.Count(rec.Body(), ":\n\n"); n != 1 {
			t.Errorf("%d keep-alive comments, want 1: %q", n, rec.Body())
		}
		if ev := events(rec.Body()); len(ev) != 6 || !strings.Contains(ev[5], "done") {
			t.Errorf("events %q", ev)
		}
	})
}

// T2: tools that annotate arguments with x-mcp-header get them checked
// against Mcp-Param- headers.
func TestHTTPParamHeaders(t *testing.T) {
	s := mcptest.NewServer(nil)
	s.AddTool(mcp.Tool{Name: "region", InputSchema: json.RawMessage(`{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"},"n":{"type":"integer","x-mcp-header":"N"}}}`)},
		func(context.Context, *server.ToolRequest) (*mcp.ToolResult, error) { return mcp.TextResult("ok"), nil })
	h := streamable.NewHandler(s, nil)
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":` + withMeta(`"name":"region","arguments":{"region":"Zürich","n":42}`) + `}`
	cases := []struct {
		name    string
		headers map[string]string
		status  int
	}{
		{"both mirrored", map[string]string{"Mcp-Param-Region": mcp.EncodeHeaderValue("Zürich"), "Mcp-Param-N": "42"}, 200},
		{"numeric comparison", map[string]string{"Mcp-Param-Region": mcp.EncodeHeaderValue("Zürich"), "Mcp-Param-N": "42.0"}, 200},
		{"missing header", map[string]string{"Mcp-Param-Region": mcp.EncodeHeaderValue("Zürich")}, 400},
		{"wrong value", map[string]string{"Mcp-Param-Region": "Bern", "Mcp-Param-N": "42"}, 400},
		{"bad base64", map[string]string{"Mcp-Param-Region": "=?base64?SGVs!!!bG8=?=", "Mcp-Param-N": "42"}, 400},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rec := serve(h, newPost(t.Context(), body, modernHeaders(body, tc.headers)))
			if rec.Status() != tc.status {
				t.Fatalf("status %d, want %d: %s", rec.Status(), tc.status, rec.Body())
			}
			if tc.status == 400 {
				if code, _ := errCode(t, rec.Body()); code != mcp.CodeHeaderMismatch {
					t.Errorf("code %d", code)
				}
			}
		})
	}
	if got := mcp.EncodeHeaderValue("plain"); got != "plain" {
		t.Errorf("EncodeHeaderValue(plain) = %q", got)
	}
}

// T2: a modern-only server refuses legacy initialize with 400 and -32022.
func TestHTTPModernOnlyRefusesInitialize(t *testing.T) {
	h := streamable.NewHandler(mcptest.NewServer(&server.Options{Eras: mcp.ModernOnly}), nil)
	body := `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}`
	rec := serve(h, newPost(t.Context(), body, modernHeaders(body, map[string]string{"MCP-Protocol-Version": "", "Mcp-Method": ""})))
	if rec.Status() != 400 {
		t.Fatalf("status %d: %s", rec.Status(), rec.Body())
	}
	if code, _ := errCode(t, rec.Body()); code != mcp.CodeUnsupportedProtocolVersion {
		t.Errorf("code %d", code)
	}
}

// A client that trickles its body in is answered 400 once BodyTimeout
// passes, instead of holding the request forever.
func TestHTTPSlowBodyTimesOut(t *testing.T) {
	h := streamable.NewHandler(mcptest.NewServer(nil), &streamable.Options{BodyTimeout: 100 * time.Millisecond})
	srv := httptest.NewServer(h)
	defer srv.Close()
	defer h.Shutdown(context.Background())
	c, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "POST /mcp HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"jsonrpc\"")
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("status %d", resp.StatusCode)
	}
}
