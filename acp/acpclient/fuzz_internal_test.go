package acpclient

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/agentwire/agentwire/acp"
	"github.com/agentwire/agentwire/internal/wiretest"
	"github.com/agentwire/agentwire/jsonrpc"
)

// FuzzSplitUpdate holds the session/update reader (splitUpdate, kindOf and
// Update.Text, which skip encoding/json) to encoding/json, for params rpc
// would accept: whatever it reads is what encoding/json reads.
func FuzzSplitUpdate(f *testing.F) {
	for _, s := range []string{
		`{"sessionId":"s1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"hi"}}}`,
		`{"update":{"content":{"text":"a\u00e9","type":"text"},"sessionUpdate":"agent_thought_chunk"},"sessionId":"s\u0031"}`,
		`{"sessionId":"s","update":{"sessionUpdate":"tool_call","toolCallId":"t"}}`,
		`{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"image","data":"AA=="}}}`,
		`{"sessionId":"s","update":{"sessionUpdate":"future_kind"}}`,
		`{"sessionId":"s","update":[]}`, `{"sessionId":2,"update":{}}`, `{"update":{}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, params []byte) {
		trimmed := bytes.TrimSpace(params)
		if !jsonrpc.Valid(params) || len(trimmed) == 0 || trimmed[0] != '{' || wiretest.RepeatsAKey(params) {
			return
		}
		sid, update, ok := splitUpdate(trimmed)
		// The oracle reads keys exactly, as JSON and the schema do
		// (encoding/json's struct decoding would also match "Update").
		var top map[string]json.RawMessage
		if json.Unmarshal(params, &top) != nil {
			if ok {
				t.Fatalf("read params encoding/json refuses: %s", params)
			}
			return
		}
		var wantSID string
		sidOK := json.Unmarshal(top["sessionId"], &wantSID) == nil && top["sessionId"] != nil && string(top["sessionId"]) != "null"
		wantUpdate := bytes.TrimSpace(top["update"])
		readable := sidOK && len(wantUpdate) > 0 && wantUpdate[0] == '{'
		if ok != readable {
			t.Fatalf("splitUpdate ok=%v; encoding/json says %v: %s", ok, readable, params)
		}
		if !ok {
			return
		}
		if string(sid) != wantSID {
			t.Fatalf("sessionId %q; encoding/json %q", sid, wantSID)
		}
		var u map[string]json.RawMessage
		if json.Unmarshal(update, &u) != nil {
			t.Fatalf("update %s does not decode", update)
		}
		var wantKind string
		json.Unmarshal(u["sessionUpdate"], &wantKind)
		kind := kindOf(update)
		if kind != wantKind {
			t.Fatalf("kind %q; encoding/json %q", kind, wantKind)
		}
		var content map[string]json.RawMessage
		json.Unmarshal(u["content"], &content)
		var ctype, ctext string
		typeOK := json.Unmarshal(content["type"], &ctype) == nil
		textOK := json.Unmarshal(content["text"], &ctext) == nil
		want := ""
		switch kind {
		case acp.UpdateAgentMessageChunk, acp.UpdateAgentThoughtChunk, acp.UpdateUserMessageChunk:
			if typeOK && ctype == "text" && textOK {
				want = ctext
			}
		}
		if got := (&Update{Kind: kind, Raw: update}).Text(); got != want {
			t.Fatalf("Text %q; encoding/json %q (%s)", got, want, update)
		}
	})
}
