package middleware

import (
	"encoding/json"

	"github.com/agentwire/agentwire/jsonrpc"
)

// Target returns what an MCP request names: the tool of tools/call or the
// prompt of prompts/get (params.name), or the resource of resources/read,
// resources/subscribe and resources/unsubscribe (params.uri); both are ""
// for any other method, and for params without that member as a string.
//
// It reads the top level of params only, with exact keys ("Name" is not
// "name", although encoding/json would match it), and stops at the member
// it looks for. params is taken to be valid JSON, as rpc hands a handler
// its params (jsonrpc.EachMember: malformed input is not an error, and
// yields "" or whatever precedes the damage). Nothing is allocated but the
// returned string (and, for a key written with escapes, its decoded copy).
// Request logging uses it; so may telemetry.
func Target(method string, params json.RawMessage) (name string, uri string) {
	var key string
	switch method {
	case "tools/call", "prompts/get":
		key = "name"
	case "resources/read", "resources/subscribe", "resources/unsubscribe":
		key = "uri"
	default:
		return "", ""
	}
	var s string
	jsonrpc.EachMember(params, func(k, v []byte) bool {
		if string(k) != key {
			return true
		}
		s, _ = jsonrpc.StringValue(v)
		return false
	})
	if key == "uri" {
		return "", s
	}
	return s, ""
}

// targetKey is the log attribute Target's answer goes under for method.
func targetKey(method string) string {
	switch method {
	case "tools/call":
		return "tool"
	case "prompts/get":
		return "prompt"
	}
	return "uri"
}
