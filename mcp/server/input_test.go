package server_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/agentwire/agentwire/internal/wiretest"
	"github.com/agentwire/agentwire/mcp"
	"github.com/agentwire/agentwire/mcp/host"
	"github.com/agentwire/agentwire/mcp/internal/mcptest"
	"github.com/agentwire/agentwire/mcp/server"
	"github.com/agentwire/agentwire/mcp/streamable"
)

// askServer has a tool that asks for a name over two rounds of state.
func askServer(s *server.Server) {
	s.AddTool(mcp.Tool{Name: "greet", Description: "d"}, func(ctx context.Context, r *server.ToolRequest) (*mcp.ToolResult, error) {
		r.SetState([]byte("round-1"))
		res, err := r.Elicit(ctx, "who", "Your name?", map[string]any{"type": "object", "properties": map[string]any{"name": map[string]any{"type": "string"}}})
		if err != nil {
			return nil, err
		}
		if r.ProtocolVersion == mcp.LatestVersion && string(r.State()) != "round-1" {
			return mcp.ErrorResult("state lost"), nil
		}
		return mcp.TextResult("hello " + res.Content["name"].(string)), nil
	})
}

// SEP-2322 on the wire: input_required with the request and signed state,
// the retry with the answer completes, and tampered state or a malformed
// inputResponses is -32602.
func TestAskModernRoundTrips(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := mcptest.NewServer(nil)
		askServer(s)
		w := wiretest.Start(t, s.Handler(), s.ConnOptions(nil), true)
		defer w.Finish()
		first := mcptest.One(t, w.Exchange(modernReq("1", "tools/call", `"name":"greet"`)))
		var r struct {
			Result struct {
				ResultType    string                     `json:"resultType"`
				InputRequests map[string]json.RawMessage `json:"inputRequests"`
				RequestState  string                     `json:"requestState"`
			} `json:"result"`
		}
		if err := json.Unmarshal([]byte(first), &r); err != nil || r.Result.ResultType != "input_required" || r.Result.RequestState == "" ||
			!strings.Contains(string(r.Result.InputRequests["who"]), `"method":"elicitation/create"`) {
			t.Fatalf("first round: %s", first)
		}
		answer := `"inputResponses":{"who":{"action":"accept","content":{"name":"Ada"}}}`
		retry := func(id, state string) string {
			return mcptest.One(t, w.Exchange(modernReq(id, "tools/call", `"name":"greet",`+answer+`,"requestState":"`+state+`"`)))
		}
		if got := retry("2", r.Result.RequestState); !strings.Contains(got, `"text":"hello Ada"`) || !strings.Contains(got, `"resultType":"complete"`) {
			t.Errorf("retry: %s", got)
		}
		for _, bad := range []string{r.Result.RequestState + "-TAMPERED", "x" + r.Result.RequestState, strings.Replace(r.Result.RequestState, ".", ".A", 1)} {
			if c := wiretest.ErrCode(t, retry("3", bad)); c != -32602 {
				t.Errorf("state %q: code %d", bad, c)
			}
		}
		for _, bad := range []string{`"inputResponses":null`, `"inputResponses":{"who":12345}`} {
			if c := wiretest.ErrCode(t, mcptest.One(t, w.Exchange(modernReq("4", "tools/call", `"name":"greet",`+bad)))); c != -32602 {
				t.Errorf("%s: code %d", bad, c)
			}
		}
		// A wrong key: asked again, not an error.
		if got := mcptest.One(t, w.Exchange(modernReq("5", "tools/call", `"name":"greet","inputResponses":{"other":{"action":"accept"}}`))); !strings.Contains(got, `"input_required"`) {
			t.Errorf("wrong key: %s", got)
		}
	})
}

// The same handler in the legacy era sends elicitation/create to the
// client as a request of its own and uses the answer.
func TestAskLegacySendsServerRequest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := mcptest.NewServer(nil)
		askServer(s)
		w := wiretest.Start(t, s.Handler(), s.ConnOptions(nil), true)
		defer w.Finish()
		w.Exchange(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"elicitation":{}},"clientInfo":{"name":"c","version":"1"}}}`)
		req := mcptest.One(t, w.Exchange(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"greet"}}`))
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		if json.Unmarshal([]byte(req), &m) != nil || m.Method != "elicitation/create" {
			t.Fatalf("server request: %s", req)
		}
		got := mcptest.One(t, w.Exchange(`{"jsonrpc":"2.0","id":`+string(m.ID)+`,"result":{"action":"accept","content":{"name":"Bo"}}}`))
		if !strings.Contains(got, `"text":"hello Bo"`) || strings.Contains(got, "resultType") {
			t.Errorf("result: %s", got)
		}
	})
}

// The client's OnInput serves both eras: the legacy server's own request
// and the 2026-07-28 input_required retries, over stdio-like streams and
// over HTTP.
func TestClientOnInputBothEras(t *testing.T) {
	onInput := func(_ context.Context, req mcp.InputRequest) (any, error) {
		if req.Method != mcp.MethodElicit {
			t.Errorf("asked %s", req.Method)
		}
		return map[string]any{"action": "accept", "content": map[string]any{"name": "Cy"}}, nil
	}
	for _, mode := range []mcp.Eras{mcp.ModernOnly, mcp.LegacyOnly} {
		opts := &host.Options{Eras: mode, OnInput: onInput, Capabilities: map[string]any{"elicitation": map[string]any{}}}
		t.Run("stream-"+mode.String(), func(t *testing.T) {
			s := mcptest.NewServer(nil)
			askServer(s)
			sess, err := mcptest.ConnectServerWith(t, s, opts)
			if err != nil {
				t.Fatal(err)
			}
			res, err := sess.CallTool(t.Context(), "greet", nil)
			if err != nil || res.Content[0].Text != "hello Cy" {
				t.Fatalf("%+v %v", res, err)
			}
		})
		t.Run("http-"+mode.String(), func(t *testing.T) {
			s := mcptest.NewServer(nil)
			askServer(s)
			url, _ := mcptest.StartHTTP(t, s, nil)
			sess, err := streamable.Connect(t.Context(), url, opts, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer sess.Close()
			res, err := sess.CallTool(t.Context(), "greet", nil)
			if err != nil || res.Content[0].Text != "hello Cy" {
				t.Fatalf("%+v %v", res, err)
			}
		})
	}
}
