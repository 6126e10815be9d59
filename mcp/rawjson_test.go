package mcp

import (
	"bytes"
	"encoding/json"
	"testing"
	"unicode/utf8"
)

// members must see what encoding/json sees in an object: every key
// (escapes decoded) with its raw value. (Were a key repeated, both would
// keep the last; jsonrpc.Decode refuses such params before members sees
// them.)
func FuzzMembers(f *testing.F) {
	for _, s := range []string{
		`{}`, `{"a":1}`, ` { "a" : [1,{"b":"}"}] , "c":"x\"y", "d":null } `,
		`{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"},"name":"echo","arguments":{"text":"hi"}}`,
		`{"n\u0061me":"escaped key","name":"later"}`, `[1,2]`, `"str"`, `{"a":{"b":{"c":[[]]}}}`, `{"a":-1.5e3,"b":true}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		var want map[string]json.RawMessage
		if !utf8.Valid(raw) {
			return // encoding/json rewrites invalid UTF-8 in keys; MCP's keys are ASCII
		}
		if json.Unmarshal(raw, &want) != nil || want == nil {
			return // members is only ever given valid JSON; non-objects yield nothing
		}
		got := map[string]json.RawMessage{}
		members(raw, func(key, value []byte) { got[string(key)] = bytes.Clone(value) })
		if len(got) != len(want) {
			t.Fatalf("members saw %d keys, encoding/json %d: %s", len(got), len(want), raw)
		}
		for k, v := range want {
			if !bytes.Equal(bytes.TrimSpace(got[k]), bytes.TrimSpace(v)) {
				t.Fatalf("key %q: members %s, encoding/json %s (in %s)", k, got[k], v, raw)
			}
		}
	})
}

// appendJSON writes what encoding/json would, with the suffix spliced in.
func TestToolResultAppendJSON(t *testing.T) {
	for _, r := range []*ToolResult{
		TextResult("hi \"there\"\n<tag>"),
		ErrorResult("failed"),
		{Content: []Content{Text(""), {Type: "image", Data: "AAAA", MimeType: "image/png"}}, StructuredContent: map[string]int{"n": 1}},
		{Content: []Content{}},
	} {
		want, _ := json.Marshal(r)
		got := r.appendJSON(nil, nil)
		var a, b any
		json.Unmarshal(want, &a)
		if err := json.Unmarshal(got, &b); err != nil {
			t.Fatalf("invalid JSON %s", got)
		}
		wa, _ := json.Marshal(a)
		gb, _ := json.Marshal(b)
		if !bytes.Equal(wa, gb) {
			t.Errorf("appendJSON %s, encoding/json %s", gb, wa)
		}
		withSuffix := r.appendJSON(nil, []byte(`"resultType":"complete"`))
		var m map[string]any
		if json.Unmarshal(withSuffix, &m) != nil || m["resultType"] != "complete" {
			t.Errorf("with suffix: %s", withSuffix)
		}
	}
}
