package mcp

import (
	"bytes"
	"encoding/json"
	"testing"
)

// appendJSON writes what encoding/json would, with the suffix spliced in.
func TestToolResultAppendJSON(t *testing.T) {
	for _, r := range []*ToolResult{
		TextResult("hi \"there\"\n<tag>"),
		ErrorResult("failed"),
		{Content: []Content{Text(""), {Type: "image", Data: "AAAA", MimeType: "image/png"}}, StructuredContent: map[string]int{"n": 1}},
		{Content: []Content{}},
	} {
		want, _ := json.Marshal(r)
		got := r.AppendJSON(nil, nil)
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
		withSuffix := r.AppendJSON(nil, []byte(`"resultType":"complete"`))
		var m map[string]any
		if json.Unmarshal(withSuffix, &m) != nil || m["resultType"] != "complete" {
			t.Errorf("with suffix: %s", withSuffix)
		}
	}
}
