package acp

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/agentwire/agentwire/internal/wiretest"
	"github.com/agentwire/agentwire/jsonrpc"
)

// FuzzDecodePrompt holds session/prompt's fast decoder to encoding/json:
// for params rpc would accept (one valid object), whatever it reads must be
// what encoding/json reads, and what it refuses goes to the slow path.
func FuzzDecodePrompt(f *testing.F) {
	for _, s := range []string{
		`{"sessionId":"s1","prompt":[{"type":"text","text":"hi"}]}`,
		`{"sessionId":"s\u0031","prompt":[{"type":"text","text":"a\nb"},{"type":"image","data":"AA==","mimeType":"image/png"}]}`,
		`{"prompt":[],"sessionId":"x"}`,
		`{"sessionId":1,"prompt":[]}`,
		`{"sessionId":"s","prompt":[{"type":"text","text":5}]}`,
		`{"sessionId":"s","prompt":[1]}`,
		`{"sessionId":"s","prompt":{}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, params []byte) {
		if !jsonrpc.Valid(params) || len(bytes.TrimSpace(params)) == 0 || bytes.TrimSpace(params)[0] != '{' || wiretest.RepeatsAKey(params) {
			return
		}
		sid, prompt, n, ok := decodePrompt(params)
		if !ok {
			return
		}
		var want struct {
			SessionID string            `json:"sessionId"`
			Prompt    []json.RawMessage `json:"prompt"`
		}
		if err := json.Unmarshal(params, &want); err != nil {
			t.Fatalf("fast path accepted what encoding/json refuses (%v): %s", err, params)
		}
		if string(sid) != want.SessionID || n != len(want.Prompt) {
			t.Fatalf("sid %q n %d; encoding/json: %q %d", sid, n, want.SessionID, len(want.Prompt))
		}
		blocks := make([]ContentBlock, n)
		fillBlocks(prompt, blocks)
		for i, raw := range want.Prompt {
			var b struct {
				Type string `json:"type"`
				Text string `json:"text"`
			}
			if err := json.Unmarshal(raw, &b); err != nil {
				t.Fatalf("block %d accepted by the fast path, refused by encoding/json: %v", i, err)
			}
			if blocks[i].Type != b.Type || blocks[i].Text != b.Text {
				t.Fatalf("block %d: %q/%q; encoding/json %q/%q", i, blocks[i].Type, blocks[i].Text, b.Type, b.Text)
			}
		}
	})
}

// FuzzConfigOption: any JSON is decoded or refused without a panic, and
// what decodes encodes to something that decodes to the same option.
func FuzzConfigOption(f *testing.F) {
	for _, s := range []string{
		`{"id":"model","name":"Model","type":"select","currentValue":"fast","options":[{"value":"fast","name":"Fast"}]}`,
		`{"id":"v","name":"Verbose","type":"boolean","currentValue":true}`,
		`{"id":"g","name":"G","type":"select","currentValue":"a","options":[{"group":"x","name":"X","options":[{"value":"a","name":"A"}]}]}`,
		`{"id":1}`, `[]`, `null`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var o ConfigOption
		if json.Unmarshal(data, &o) != nil {
			return
		}
		enc, err := json.Marshal(o)
		if err != nil {
			t.Fatalf("a decoded option does not encode: %v (%+v)", err, o)
		}
		var back ConfigOption
		if err := json.Unmarshal(enc, &back); err != nil {
			t.Fatalf("its encoding does not decode: %v: %s", err, enc)
		}
		typ := o.Type
		if typ == "" {
			typ = "select" // the schema's default, written out
		}
		if back.ID != o.ID || back.Type != typ || back.CurrentValue != o.CurrentValue || len(back.Options) != len(o.Options) {
			t.Fatalf("round trip changed the option: %+v → %s → %+v", o, enc, back)
		}
	})
}
