package streamable

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/agentwire/agentwire/jsonrpc"
	"github.com/agentwire/agentwire/mcp"
)

// The headers of a POST mirror its params as the server reads them: exact
// keys, JSON strings decoded (escapes included), nothing for a legacy
// request but its version. They are read with the server's own walk of
// the params (mcp.ParseRequestParams), not decoded again by encoding/json.
func TestPostHeadersMirrorTheParamsAsTheServerReadsThem(t *testing.T) {
	const meta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}`
	cases := []struct {
		name, method, params string
		legacyVersion        string
		want                 map[string]string // "" means absent
	}{
		{"tools/call", "tools/call", `{` + meta + `,"name":"ech\u006f","arguments":{"text":"x"}}`, "",
			map[string]string{"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "echo"}},
		{"a key only equal under case folding is not the name", "tools/call", `{` + meta + `,"name":"echo","Name":"other"}`, "",
			map[string]string{"Mcp-Name": "echo"}},
		{"a non-ASCII name is encoded", "prompts/get", `{` + meta + `,"name":"café"}`, "",
			map[string]string{"Mcp-Name": mcp.EncodeHeaderValue("café")}},
		{"resources/read", "resources/read", `{` + meta + `,"uri":"file:///a"}`, "",
			map[string]string{"Mcp-Name": "file:///a", "Mcp-Method": "resources/read"}},
		{"tasks/get", "tasks/get", `{` + meta + `,"taskId":"t-1"}`, "",
			map[string]string{"Mcp-Name": "t-1"}},
		{"legacy", "tools/call", `{"name":"echo"}`, "2025-11-25",
			map[string]string{"Mcp-Protocol-Version": "2025-11-25", "Mcp-Method": "", "Mcp-Name": ""}},
		{"a protocolVersion that is not a string is not modern", "tools/call", `{"_meta":{"io.modelcontextprotocol/protocolVersion":7},"name":"echo"}`, "",
			map[string]string{"Mcp-Protocol-Version": "", "Mcp-Name": ""}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tr := &httpTransport{version: c.legacyVersion}
			req, _ := http.NewRequest(http.MethodPost, "http://example.invalid/mcp", nil)
			tr.setHeaders(req, c.method, []byte(c.params))
			if got := req.Header.Get("Content-Type"); got != "application/json" {
				t.Errorf("Content-Type %q", got)
			}
			if got := req.Header.Get("Accept"); got != "application/json, text/event-stream" {
				t.Errorf("Accept %q", got)
			}
			for k, want := range c.want {
				if got := req.Header.Get(k); got != want {
					t.Errorf("%s = %q, want %q", k, got, want)
				}
			}
			// The shared values are not changed by a caller's Add.
			req.Header.Add("Accept", "text/plain")
			if postAccept[0] != "application/json, text/event-stream" || len(postAccept) != 1 {
				t.Errorf("Header.Add changed the shared Accept value: %q", postAccept)
			}
		})
	}
}

// FuzzPostHeaders holds the headers a modern POST mirrors to what
// encoding/json reads from the same params with exact keys (a map): the
// protocol version and the tool's name. Params a server refuses whatever
// their headers (a key repeated at any depth, which jsonrpc.Decode
// answers -32600) and lone surrogate escapes (encoding/json turns them
// into U+FFFD) are left out.
func FuzzPostHeaders(f *testing.F) {
	f.Add(`{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"},"name":"echo","arguments":{}}`)
	f.Add(`{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026\u002d07-28"},"name":"caf\u00e9","name":"x y"}`)
	f.Add(`{"_meta":[],"name":"echo"}`)
	f.Add(`{"_meta":{"io.modelcontextprotocol/protocolVersion":7},"Name":"a"}`)
	f.Fuzz(func(t *testing.T, params string) {
		if !utf8.ValidString(params) || !json.Valid([]byte(params)) || strings.Contains(strings.ToLower(params), `\ud`) {
			return
		}
		if _, err := jsonrpc.Decode([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":`+params+`}`), nil); err != nil {
			return
		}
		var m map[string]json.RawMessage
		if json.Unmarshal([]byte(params), &m) != nil {
			return // not an object
		}
		version := ""
		var meta map[string]json.RawMessage
		if json.Unmarshal(m["_meta"], &meta) == nil && meta != nil {
			json.Unmarshal(meta["io.modelcontextprotocol/protocolVersion"], &version)
		}
		name := ""
		json.Unmarshal(m["name"], &name)

		tr := &httpTransport{}
		req, _ := http.NewRequest(http.MethodPost, "http://example.invalid/mcp", nil)
		tr.setHeaders(req, "tools/call", []byte(params))
		if got := req.Header.Get("Mcp-Protocol-Version"); got != version {
			t.Fatalf("Mcp-Protocol-Version %q, want %q", got, version)
		}
		wantName := ""
		if version != "" && name != "" {
			wantName = mcp.EncodeHeaderValue(name)
		}
		if got := req.Header.Get("Mcp-Name"); got != wantName {
			t.Fatalf("Mcp-Name %q, want %q", got, wantName)
		}
	})
}
