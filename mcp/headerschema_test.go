package mcp

import (
	"encoding/json"
	"testing"
)

// SEP-2243's annotation rules, as the conformance suite's invalid tools
// exercise them.
func TestSchemaHeaders(t *testing.T) {
	cases := []struct {
		name, schema string
		valid        bool
		want         map[string]string
	}{
		{"valid", `{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"},"n":{"type":"integer","x-mcp-header":"N"}}}`, true, map[string]string{"region": "Region", "n": "N"}},
		{"nested", `{"type":"object","properties":{"cfg":{"type":"object","properties":{"zone":{"type":"boolean","x-mcp-header":"Zone"}}}}}`, true, map[string]string{"cfg" + pathSep + "zone": "Zone"}},
		{"none", `{"type":"object","properties":{"q":{"type":"string","default":{"x-mcp-header":"data, not schema"}}}}`, true, nil},
		{"empty name", `{"properties":{"a":{"type":"string","x-mcp-header":""}}}`, false, nil},
		{"space", `{"properties":{"a":{"type":"string","x-mcp-header":"My Region"}}}`, false, nil},
		{"colon", `{"properties":{"a":{"type":"string","x-mcp-header":"Region:Primary"}}}`, false, nil},
		{"non-ASCII", `{"properties":{"a":{"type":"string","x-mcp-header":"Région"}}}`, false, nil},
		{"control", `{"properties":{"a":{"type":"string","x-mcp-header":"Region\t1"}}}`, false, nil},
		{"number", `{"properties":{"a":{"type":"number","x-mcp-header":"A"}}}`, false, nil},
		{"object", `{"properties":{"a":{"type":"object","x-mcp-header":"A"}}}`, false, nil},
		{"no type", `{"properties":{"a":{"x-mcp-header":"A"}}}`, false, nil},
		{"duplicate", `{"properties":{"a":{"type":"string","x-mcp-header":"MyField"},"b":{"type":"string","x-mcp-header":"myfield"}}}`, false, nil},
		{"under items", `{"properties":{"a":{"type":"array","items":{"type":"string","x-mcp-header":"A"}}}}`, false, nil},
		{"at the root", `{"type":"string","x-mcp-header":"A"}`, false, nil},
		{"under anyOf", `{"anyOf":[{"properties":{"a":{"type":"string","x-mcp-header":"A"}}}]}`, false, nil},
	}
	for _, tc := range cases {
		got, valid := schemaHeaders(json.RawMessage(tc.schema))
		if valid != tc.valid || len(got) != len(tc.want) {
			t.Errorf("%s: %v %v", tc.name, got, valid)
			continue
		}
		for k, v := range tc.want {
			if got[k] != v {
				t.Errorf("%s: %q -> %q, want %q", tc.name, k, got[k], v)
			}
		}
	}
	args := map[string]json.RawMessage{"cfg": json.RawMessage(`{"zone":true,"x":1}`)}
	if v := argAt(args, "cfg"+pathSep+"zone"); string(v) != "true" {
		t.Errorf("argAt: %s", v)
	}
}
