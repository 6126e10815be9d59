package streamable_test

// Ambiguous and malformed params, as raw wire lines: every
// TestRegression* test here fails while the defect it names is present.

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"unicode/utf8"

	"github.com/agentwire/agentwire/internal/wiretest"
	"github.com/agentwire/agentwire/mcp"
	"github.com/agentwire/agentwire/mcp/internal/mcptest"
	"github.com/agentwire/agentwire/mcp/server"
	"github.com/agentwire/agentwire/mcp/streamable"
)

// newDeployServer has a tool "deploy" whose region travels in
// Mcp-Param-Region too; ran counts its runs.
func newDeployServer(ran *atomic.Int32) *server.Server {
	s := mcptest.NewServer(nil)
	type deployIn struct {
		Region string `json:"region"`
		Opts   struct {
			Force bool `json:"force"`
		} `json:"opts"`
	}
	server.AddTool(s, mcp.Tool{Name: "deploy", InputSchema: json.RawMessage(`{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"}}}`)},
		func(_ context.Context, _ *server.ToolRequest, in deployIn) (*mcp.ToolResult, error) {
			ran.Add(1)
			return mcp.TextResult(in.Region), nil
		})
	return s
}

func errMessage(t *testing.T, line string) string {
	t.Helper()
	var e struct {
		Message string `json:"message"`
	}
	json.Unmarshal([]byte(wiretest.Field(t, line, "error")), &e)
	return e.Message
}

// Defect: a key repeated inside params (the tool's name, an argument at any
// depth, a _meta member) was accepted and the last one won, while a
// repeated envelope member was refused: a proxy that reads the first
// "region" (or "name") and the server that reads the last act on different
// requests. Each is now -32600 with the request's id, naming the key, and
// the tool does not run.
func TestRegressionDuplicateKeysInParams(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var ran atomic.Int32
		s := newDeployServer(&ran)
		w := wiretest.Start(t, s.Handler(), s.ConnOptions(nil), true)
		defer w.Finish()
		call := func(id, params string) string {
			return `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{` + params + `}}`
		}
		for _, tc := range []struct{ line, id, key string }{
			{call("1", mcptest.Meta+`,"name":"deploy","arguments":{"region":"us","region":"eu"}`), "1", `"region" in params at "/arguments"`},
			{call(`"n"`, mcptest.Meta+`,"name":"echo","arguments":{"text":"hi"},"name":"deploy"`), `"n"`, `"name" in params`},
			{call("3", mcptest.Meta+`,"name":"deploy","arguments":{"region":"us","opts":{"force":false,"force":true}}`), "3", `"force" in params at "/arguments/opts"`},
			{call("4", `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/protocolVersion":"2025-06-18"},"name":"deploy","arguments":{}`), "4", `"io.modelcontextprotocol/protocolVersion" in params at "/_meta"`},
			{call("5", mcptest.Meta+`,"name":"deploy","arguments":{"region":"us"},"arguments":{"region":"eu"}`), "5", `"arguments" in params`},
			{call("6", mcptest.Meta+`,"name":"deploy","arguments":{"r\u0065gion":"us","region":"eu"}`), "6", `"region" in params at "/arguments"`},
		} {
			got := w.Exchange(tc.line)
			if len(got) != 1 {
				t.Fatalf("%s: got %q", tc.line, got)
			}
			if code, id := wiretest.ErrCode(t, got[0]), wiretest.Field(t, got[0], "id"); code != -32600 || id != tc.id || !strings.Contains(errMessage(t, got[0]), "duplicate key "+tc.key) {
				t.Errorf("%s:\n got %s\nwant -32600, id %s, duplicate key %s", tc.line, got[0], tc.id, tc.key)
			}
		}
		if n := ran.Load(); n != 0 {
			t.Errorf("the tool ran %d times on ambiguous arguments", n)
		}
		// The connection goes on: an unambiguous call runs.
		got := w.Exchange(call("7", mcptest.Meta+`,"name":"deploy","arguments":{"region":"us","opts":{"force":true}}`))
		if len(got) != 1 || !strings.Contains(got[0], `"text":"us"`) || ran.Load() != 1 {
			t.Errorf("clean call: %q", got)
		}
	})
}

// The same over Streamable HTTP, where the proxy is real: it routes on
// Mcp-Param-Region: us, which matches the first region. 400 and -32600,
// before any header is compared.
func TestRegressionHTTPDuplicateKeysInParams(t *testing.T) {
	var ran atomic.Int32
	h := streamable.NewHandler(newDeployServer(&ran), nil)
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":` + withMeta(`"name":"deploy","arguments":{"region":"us","region":"eu"}`) + `}`
	rec := serve(h, newPost(t.Context(), body, modernHeaders(body, map[string]string{"Mcp-Param-Region": "us"})))
	if code, id := errCode(t, rec.Body()); rec.Status() != http.StatusBadRequest || code != -32600 || id != "1" || !strings.Contains(rec.Body(), `duplicate key \"region\"`) {
		t.Errorf("status %d: %s", rec.Status(), rec.Body())
	}
	if ran.Load() != 0 {
		t.Error("the tool ran")
	}
}

// Defect: an id holding bytes that are not UTF-8 was echoed raw, so the
// error reply was not UTF-8 (nor JSON a strict peer accepts). The line is
// now a parse error, answered with id null.
func TestRegressionInvalidUTF8Reply(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var ran atomic.Int32
		s := newDeployServer(&ran)
		w := wiretest.Start(t, s.Handler(), s.ConnOptions(nil), true)
		defer w.Finish()
		for _, line := range []string{
			"{\"jsonrpc\":\"2.0\",\"id\":\"\xff\",\"method\":\"tools/call\",\"params\":{" + mcptest.Meta + ",\"name\":\"deploy\"}}",
			"{\"jsonrpc\":\"2.0\",\"id\":\"\xc3\",\"method\":7}",
			"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{" + mcptest.Meta + ",\"name\":\"deploy\",\"arguments\":{\"region\":\"u\x88s\"}}}",
		} {
			got := w.Exchange(line)
			if len(got) != 1 || !utf8.ValidString(got[0]) || wiretest.ErrCode(t, got[0]) != -32700 || wiretest.Field(t, got[0], "id") != "null" {
				t.Errorf("%q: got %q, want one UTF-8 parse error with id null", line, got)
			}
		}
		if ran.Load() != 0 {
			t.Error("the tool ran")
		}
	})
}
