package middleware_test

import (
	"encoding/json"
	"testing"

	"github.com/agentwire/agentwire/jsonrpc"
	"github.com/agentwire/agentwire/middleware"
)

// FuzzTarget holds Target to a reference reading of the same params with
// encoding/json into map[string]json.RawMessage (exact keys): on any
// params jsonrpc.Decode accepts (what rpc hands a handler), the tool,
// prompt or URI it returns is the string member the method names, or ""
// when there is none; on anything else it must not panic.
//
//	go test -run XXX -fuzz ^FuzzTarget$ -fuzztime 10m -parallel 1 ./middleware/
func FuzzTarget(f *testing.F) {
	for _, s := range []string{
		`{"name":"echo","arguments":{"name":"inner"}}`, `{"Name":"folded"}`, `{"uri":"file:///a","name":"x"}`,
		`{"n\u0061me":"escaped"}`, `{"name":"\u00e9t\u00e9"}`, `{"name":5}`, `{"name":null}`, `{}`, `[]`, `"s"`,
		`{"name":"a","name":"b"}`, `{"a":{"name":"deep"}}`, `{"name":"unterminated`, ``,
	} {
		for _, m := range []string{"tools/call", "prompts/get", "resources/read", "resources/subscribe", "ping"} {
			f.Add(m, []byte(s))
		}
	}
	f.Fuzz(func(t *testing.T, method string, params []byte) {
		name, uri := middleware.Target(method, params)
		line := []byte(`{"jsonrpc":"2.0","id":1,"method":"m","params":` + string(params) + `}`)
		msg, err := jsonrpc.Decode(line, nil)
		if err != nil || len(msg.Params) == 0 || msg.Params[0] != '{' {
			return // not what rpc hands a handler: no panic is the whole contract
		}
		var members map[string]json.RawMessage
		if json.Unmarshal(msg.Params, &members) != nil {
			t.Fatalf("jsonrpc.Decode accepted params encoding/json refuses: %q", msg.Params)
		}
		str := func(key string) string {
			var s string
			if raw, ok := members[key]; ok && json.Unmarshal(raw, &s) == nil && len(raw) > 0 && raw[0] == '"' {
				return s
			}
			return ""
		}
		var wantName, wantURI string
		switch method {
		case "tools/call", "prompts/get":
			wantName = str("name")
		case "resources/read", "resources/subscribe", "resources/unsubscribe":
			wantURI = str("uri")
		}
		if name != wantName || uri != wantURI {
			t.Fatalf("Target(%q, %s) = %q, %q; want %q, %q", method, msg.Params, name, uri, wantName, wantURI)
		}
	})
}
