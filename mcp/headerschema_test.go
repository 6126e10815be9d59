package mcp

import (
	"encoding/json"
	"runtime"
	"strings"
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
		{"nested", `{"type":"object","properties":{"cfg":{"type":"object","properties":{"zone":{"type":"boolean","x-mcp-header":"Zone"}}}}}`, true, map[string]string{"cfg" + ArgPathSep + "zone": "Zone"}},
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
		got, valid := SchemaHeaders(json.RawMessage(tc.schema))
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
	if v := ArgAt(args, "cfg"+ArgPathSep+"zone"); string(v) != "true" {
		t.Errorf("ArgAt: %s", v)
	}
}

// Defect: schemaHeaders copied the property path at every level, so a
// schema nested d properties deep (a server's tools/list, read by the
// client) cost O(d²) memory: 5000 levels, under 100 KB, took gigabytes of
// copying. The path is now shared: doubling the depth doubles the work.
func TestRegressionSchemaHeadersDeepPathQuadratic(t *testing.T) {
	deep := func(d int) json.RawMessage {
		return json.RawMessage(strings.Repeat(`{"properties":{"a":`, d) + `{"type":"string","x-mcp-header":"A"}` + strings.Repeat(`}}`, d))
	}
	// The least of a few runs, so that other goroutines' allocations do
	// not count.
	allocated := func(d int) uint64 {
		schema := deep(d)
		least := uint64(1<<64 - 1)
		for range 3 {
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			out, ok := SchemaHeaders(schema)
			runtime.ReadMemStats(&after)
			if !ok || len(out) != 1 {
				t.Fatalf("depth %d: %v %v", d, out, ok)
			}
			least = min(least, after.TotalAlloc-before.TotalAlloc)
		}
		return least
	}
	small, large := allocated(1000), allocated(4000)
	if large > 6*small {
		t.Errorf("4× the depth allocates %.1f× the memory (%d → %d bytes): not linear", float64(large)/float64(small), small, large)
	}
}
