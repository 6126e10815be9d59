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
		var want struct {
			SessionID *string         `json:"sessionId"`
			Update    json.RawMessage `json:"update"`
		}
		werr := json.Unmarshal(params, &want)
		if !ok {
			if werr == nil && want.SessionID != nil && len(bytes.TrimSpace(want.Update)) > 0 && bytes.TrimSpace(want.Update)[0] == '{' {
				t.Fatalf("refused params encoding/json reads: %s", params)
			}
			return
		}
		if werr != nil || want.SessionID == nil || string(sid) != *want.SessionID {
			t.Fatalf("sessionId %q; encoding/json: %v %v", sid, want.SessionID, werr)
		}
		var u struct {
			SessionUpdate string `json:"sessionUpdate"`
			Content       struct {
				Type string `json:"type"`
				Text string `json:"text"`
			} `json:"content"`
		}
		uerr := json.Unmarshal(update, &u)
		kind := kindOf(update)
		if uerr == nil && kind != u.SessionUpdate {
			t.Fatalf("kind %q; encoding/json %q", kind, u.SessionUpdate)
		}
		up := Update{Kind: kind, Raw: update}
		text := up.Text()
		switch {
		case uerr != nil:
		case kind != acp.UpdateAgentMessageChunk && kind != acp.UpdateAgentThoughtChunk && kind != acp.UpdateUserMessageChunk:
			if text != "" {
				t.Fatalf("Text of a %s is %q", kind, text)
			}
		case u.Content.Type == "text" && text != u.Content.Text:
			t.Fatalf("Text %q; encoding/json %q", text, u.Content.Text)
		case u.Content.Type != "text" && text != "":
			t.Fatalf("Text of a %q block is %q", u.Content.Type, text)
		}
	})
}
