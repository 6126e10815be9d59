//go:build unix

package mcp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/agentwire/agentwire/client"
	"github.com/agentwire/agentwire/mcp"
	"github.com/agentwire/agentwire/process"
)

// receivedLines waits until the recording server's stderr holds at least
// n "received" lines (and a moment more), and returns them.
func receivedLines(t *testing.T, p *process.Process, n int) []string {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		var lines []string
		for _, l := range strings.Split(p.StderrTail(), "\n") {
			if rest, ok := strings.CutPrefix(l, "received "); ok {
				lines = append(lines, rest)
			}
		}
		if len(lines) >= n || time.Now().After(deadline) {
			return lines
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// noParamsNull fails the test for every received line whose params is
// null (or is there but not an object or array).
func noParamsNull(t *testing.T, lines []string) {
	t.Helper()
	for _, l := range lines {
		var m map[string]json.RawMessage
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Errorf("not a JSON object: %s", l)
			continue
		}
		if p, ok := m["params"]; ok && (len(p) == 0 || (p[0] != '{' && p[0] != '[')) {
			t.Errorf(`the server received "params": %s: %s`, p, l)
		}
	}
}

// The defect: params that encode as null (a nil json.RawMessage, an empty
// one, a nil map or pointer) went out as "params":null, which JSON-RPC
// does not allow and TypeScript SDK servers drop without an answer. The
// rpc layer checked only for an untyped nil. Every call and notification
// the client sends with such params now leaves them out.
func TestRegressionParamsNullIsNeverWritten(t *testing.T) {
	c, err := client.Start(serverCommand(t, "recorder"), &client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	values := []any{nil, json.RawMessage(nil), json.RawMessage{}, json.RawMessage("null"), []byte(nil),
		map[string]any(nil), (*struct{ X int })(nil), []int(nil)}
	for i, v := range values {
		if _, err := c.Call(ctx, "echo", v); err != nil {
			t.Errorf("call %d (%T): %v", i, v, err)
		}
		if err := c.Notify(ctx, "notifications/note", v); err != nil {
			t.Errorf("notify %d (%T): %v", i, v, err)
		}
	}
	lines := receivedLines(t, c.Process(), 2*len(values))
	if len(lines) != 2*len(values) {
		t.Fatalf("the server received %d lines, want %d:\n%s", len(lines), 2*len(values), strings.Join(lines, "\n"))
	}
	noParamsNull(t, lines)
	for _, l := range lines {
		if strings.Contains(l, `"params"`) {
			t.Errorf("params that encode as null were sent: %s", l)
		}
	}
}

// The same through an MCP session: Request with params that are nil in
// any form sends none, in both eras (the modern era adds _meta).
func TestRegressionSessionRequestWithNilParams(t *testing.T) {
	for _, mode := range []mcp.Eras{mcp.LegacyOnly, mcp.ModernOnly} {
		t.Run(fmt.Sprint(mode), func(t *testing.T) {
			sess, rec := recordedSession(t, mcp.BothEras, &mcp.ClientOptions{Eras: mode})
			for _, v := range []any{nil, json.RawMessage(nil), map[string]any(nil)} {
				if _, err := sess.Request(t.Context(), "tools/list", v); err != nil {
					t.Errorf("tools/list with %T: %v", v, err)
				}
			}
			noParamsNull(t, rec.received())
		})
	}
}

// Regression: the bridge sent a request without arguments
// (tools/list, prompts/list, resources/list, ping, or one whose params
// held only the _meta keys the bridge removes for a legacy server) to the
// stdio server as "params":null: joinParams returned a nil RawMessage.
// TypeScript SDK servers drop such a request, and the HTTP client waited
// for its timeout. The recording shows every line the bridge wrote: none
// has params null, and every request was answered.
func TestRegressionBridgeForwardsParamsNull(t *testing.T) {
	for _, era := range []mcp.Eras{mcp.LegacyOnly, mcp.BothEras} {
		t.Run(fmt.Sprint(era)+" server", func(t *testing.T) {
			child, rec := recordedSession(t, era, nil)
			h := mcp.NewBridge(child).HTTPHandler(nil)
			srv := httptest.NewServer(h)
			defer func() {
				h.Shutdown(context.Background())
				srv.Close()
			}()
			url := srv.URL + "/mcp"
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
			defer cancel()

			// agentwire's own clients, both eras.
			for _, mode := range []mcp.Eras{mcp.LegacyOnly, mcp.ModernOnly} {
				sess, err := mcp.ConnectHTTP(ctx, url, &mcp.ClientOptions{Eras: mode}, nil)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := sess.ListTools(ctx); err != nil {
					t.Errorf("%s ListTools: %v", mode, err)
				}
				if _, err := sess.ListPrompts(ctx); err != nil {
					t.Errorf("%s ListPrompts: %v", mode, err)
				}
				if _, err := sess.ListResources(ctx); err != nil {
					t.Errorf("%s ListResources: %v", mode, err)
				}
				sess.Close()
			}
			// Raw POSTs as other clients write them: no params at all,
			// params {}, params null, and params holding only _meta.
			meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"raw","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}`
			for _, tc := range []struct{ version, body string }{
				{"2025-11-25", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`},
				{"2025-11-25", `{"jsonrpc":"2.0","id":2,"method":"prompts/list","params":{}}`},
				{"2025-11-25", `{"jsonrpc":"2.0","id":3,"method":"resources/list","params":{"_meta":{}}}`},
				{"2025-11-25", `{"jsonrpc":"2.0","id":4,"method":"ping"}`},
				{"2025-11-25", `{"jsonrpc":"2.0","id":7,"method":"tools/list","params":null}`}, // read as absent
				{"2026-07-28", `{"jsonrpc":"2.0","id":5,"method":"tools/list","params":{` + meta + `}}`},
				{"2026-07-28", `{"jsonrpc":"2.0","id":6,"method":"resources/templates/list","params":{` + meta + `}}`},
			} {
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(tc.body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Accept", "application/json, text/event-stream")
				req.Header.Set(mcp.HeaderProtocolVersion, tc.version)
				if tc.version == "2026-07-28" {
					var m struct{ Method string }
					json.Unmarshal([]byte(tc.body), &m)
					req.Header.Set(mcp.HeaderMethod, m.Method)
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatalf("%s: %v", tc.body, err)
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK || !bytes.Contains(b, []byte(`"result"`)) {
					t.Errorf("%s: %d %s", tc.body, resp.StatusCode, b)
				}
			}
			lines := rec.received()
			noParamsNull(t, lines)
			forwarded := 0
			for _, l := range lines {
				for _, m := range []string{"tools/list", "prompts/list", "resources/list", "resources/templates/list"} {
					if strings.Contains(l, fmt.Sprintf(`"method":%q`, m)) {
						forwarded++
					}
				}
			}
			if forwarded < 7 {
				t.Errorf("only %d list requests reached the server:\n%s", forwarded, strings.Join(lines, "\n"))
			}
		})
	}
}
