package middleware_test

import (
	"encoding/json"
	"testing"

	"github.com/agentwire/agentwire/middleware"
)

func TestTarget(t *testing.T) {
	cases := []struct {
		method, params string
		name, uri      string
	}{
		{"tools/call", `{"name":"search","arguments":{"q":"x"}}`, "search", ""},
		{"tools/call", `{"arguments":{"name":"inner"},"name":"outer"}`, "outer", ""}, // top level only
		{"tools/call", `{"arguments":{"name":"inner"}}`, "", ""},
		{"tools/call", `{"Name":"search"}`, "", ""}, // exact keys, unlike encoding/json
		{"tools/call", `{"n\u0061me":"esc"}`, "esc", ""},
		{"tools/call", `{"name":"caf\u00e9"}`, "café", ""},
		{"tools/call", `{"name":42}`, "", ""},
		{"tools/call", `{"name":null}`, "", ""},
		{"tools/call", `["search"]`, "", ""},
		{"tools/call", ``, "", ""},
		{"tools/call", `{"name":"trunc`, "", ""}, // malformed: nothing, no panic
		{"prompts/get", `{"name":"greet","arguments":{}}`, "greet", ""},
		{"resources/read", `{"uri":"file:///a.txt"}`, "", "file:///a.txt"},
		{"resources/subscribe", `{"uri":"db://x"}`, "", "db://x"},
		{"resources/unsubscribe", `{"uri":"db://x"}`, "", "db://x"},
		{"resources/read", `{"name":"not this"}`, "", ""},
		{"tools/list", `{"name":"search"}`, "", ""},
		{"completion/complete", `{"ref":{"name":"x"}}`, "", ""},
	}
	for _, c := range cases {
		name, uri := middleware.Target(c.method, json.RawMessage(c.params))
		if name != c.name || uri != c.uri {
			t.Errorf("Target(%s, %s) = %q, %q; want %q, %q", c.method, c.params, name, uri, c.name, c.uri)
		}
	}
}

// Target allocates the returned string and nothing else.
func TestTargetAllocations(t *testing.T) {
	params := json.RawMessage(`{"name":"search","arguments":{"query":"a long query that is not copied"}}`)
	if n := testing.AllocsPerRun(100, func() { middleware.Target("tools/call", params) }); n > 1 {
		t.Errorf("Target: %v allocations, want at most 1", n)
	}
	if n := testing.AllocsPerRun(100, func() { middleware.Target("tools/list", params) }); n != 0 {
		t.Errorf("Target of a method without target: %v allocations, want 0", n)
	}
}
