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
		// The oracle reads keys exactly, as JSON and the schema do
		// (encoding/json's struct decoding would also match "Prompt").
		var top map[string]json.RawMessage
		if err := json.Unmarshal(params, &top); err != nil {
			t.Fatalf("fast path accepted what encoding/json refuses (%v): %s", err, params)
		}
		var wantSID string
		var wantPrompt []json.RawMessage
		if json.Unmarshal(top["sessionId"], &wantSID) != nil || json.Unmarshal(top["prompt"], &wantPrompt) != nil {
			t.Fatalf("fast path accepted a sessionId or prompt encoding/json refuses: %s", params)
		}
		if string(sid) != wantSID || n != len(wantPrompt) {
			t.Fatalf("sid %q n %d; encoding/json: %q %d", sid, n, wantSID, len(wantPrompt))
		}
		blocks := make([]ContentBlock, n)
		fillBlocks(prompt, blocks)
		for i, raw := range wantPrompt {
			var b map[string]json.RawMessage
			if err := json.Unmarshal(raw, &b); err != nil {
				t.Fatalf("block %d accepted by the fast path, refused by encoding/json: %v", i, err)
			}
			var typ, text string
			if v, ok := b["type"]; ok && json.Unmarshal(v, &typ) != nil {
				t.Fatalf("block %d: a type that is not a string was accepted", i)
			}
			if v, ok := b["text"]; ok && json.Unmarshal(v, &text) != nil {
				t.Fatalf("block %d: a text that is not a string was accepted", i)
			}
			if blocks[i].Type != typ || blocks[i].Text != text {
				t.Fatalf("block %d: %q/%q; encoding/json %q/%q", i, blocks[i].Type, blocks[i].Text, typ, text)
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
		cur := o.CurrentValue
		if typ == "boolean" && cur == "" {
			cur = "false" // a boolean option's unset value, written out
		}
		if back.ID != o.ID || back.Type != typ || back.CurrentValue != cur || len(back.Options) != len(o.Options) {
			t.Fatalf("round trip changed the option: %+v → %s → %+v", o, enc, back)
		}
	})
}

// FuzzClientCapabilities: a client's clientCapabilities, whatever its
// shape, costs it at most the capabilities it malformed: each one read is
// true only where the client sent exactly true.
func FuzzClientCapabilities(f *testing.F) {
	for _, s := range []string{
		`{"fs":{"readTextFile":true,"writeTextFile":true},"terminal":true,"auth":{"terminal":true}}`,
		`{"fs":{"readTextFile":"yes"},"terminal":1}`, `{"fs":[]}`, `null`, `[]`, `{"terminal":true,"fs":null}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		caps := decodeClientCapabilities(raw)
		var m map[string]json.RawMessage
		json.Unmarshal(raw, &m)
		var fs, auth map[string]json.RawMessage
		json.Unmarshal(m["fs"], &fs)
		json.Unmarshal(m["auth"], &auth)
		exactlyTrue := func(v json.RawMessage) bool { return string(bytes.TrimSpace(v)) == "true" }
		if caps.FS.ReadTextFile && !exactlyTrue(fs["readTextFile"]) ||
			caps.FS.WriteTextFile && !exactlyTrue(fs["writeTextFile"]) ||
			caps.Terminal && !exactlyTrue(m["terminal"]) ||
			caps.Auth.Terminal && !exactlyTrue(auth["terminal"]) {
			t.Fatalf("declared %+v from %s", caps, raw)
		}
	})
}
