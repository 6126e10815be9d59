package mcp

import (
	"bytes"
	"encoding/json"
)

// The request path reads the few members MCP needs straight from the raw
// params (which the rpc layer has already checked to be valid JSON),
// without decoding into maps or copying: a tools/call is on the hot path
// of every MCP server. Keys are matched exactly, as JSON-RPC members are
// case-sensitive (encoding/json's case-insensitive matching is not used).
// Keys are unique: jsonrpc.Decode refuses a message whose params repeat a
// key in any object, at any depth (-32600), so the members read here, and
// the arguments a tool decodes with encoding/json, are the ones every
// other reader of the request sees, whichever of two it would have kept.

// params is what a request's params say, as slices of the raw params.
type params struct {
	meta      *requestMeta // nil when there is no _meta object
	metaValue requestMeta
	name      []byte // raw JSON values; nil when absent
	uri       []byte
	arguments []byte
	cursor    []byte
	// A 2026-07-28 retry's answers and state (multi-round-trip requests).
	inputResponses []byte
	requestState   []byte
}

// parseParams reads raw into p (in place: p.meta points into p). Anything
// but an object yields empty params.
func parseParams(raw []byte, p *params) {
	members(raw, func(key, value []byte) {
		switch string(key) {
		case "_meta":
			if len(value) > 0 && value[0] == '{' {
				p.meta = &p.metaValue
				parseMeta(value, p.meta)
			} else {
				p.meta = nil
			}
		case "name":
			p.name = value
		case "uri":
			p.uri = value
		case "arguments":
			p.arguments = value
		case "cursor":
			p.cursor = value
		case "inputResponses":
			p.inputResponses = value
		case "requestState":
			p.requestState = value
		}
	})
}

func parseMeta(raw []byte, m *requestMeta) {
	members(raw, func(key, value []byte) {
		switch string(key) {
		case MetaProtocolVersion:
			m.ProtocolVersion = value
		case MetaClientCapabilities:
			m.ClientCapabilities = value
		case MetaClientInfo:
			m.ClientInfo = value
		case MetaLogLevel:
			var ok bool
			m.LogLevel, ok = rawString(value)
			m.logLevelInvalid = !ok
		case MetaProgressToken:
			m.ProgressToken = value
		}
	})
}

// rawString decodes a JSON string value; ok is false for anything else.
func rawString(value []byte) (string, bool) {
	if len(value) < 2 || value[0] != '"' {
		return "", false
	}
	if bytes.IndexByte(value, '\\') < 0 {
		return string(value[1 : len(value)-1]), true
	}
	var s string
	if json.Unmarshal(value, &s) != nil {
		return "", false
	}
	return s, true
}

// members calls fn with each member of the object raw: the key (decoded
// only when it has escapes) and the raw value. raw must be valid JSON; on
// the request path it is params as jsonrpc.Decode accepted them, which
// hold no repeated key.
func members(raw []byte, fn func(key, value []byte)) {
	i := skipWS(raw, 0)
	if i >= len(raw) || raw[i] != '{' {
		return
	}
	i++
	for {
		i = skipWS(raw, i)
		if i >= len(raw) || raw[i] != '"' {
			return
		}
		kEnd := skipString(raw, i)
		key := raw[i+1 : kEnd-1]
		if bytes.IndexByte(key, '\\') >= 0 {
			var s string
			json.Unmarshal(raw[i:kEnd], &s)
			key = []byte(s)
		}
		i = skipWS(raw, kEnd)
		if i >= len(raw) || raw[i] != ':' {
			return
		}
		i = skipWS(raw, i+1)
		vEnd := skipValue(raw, i)
		fn(key, raw[i:vEnd])
		i = skipWS(raw, vEnd)
		if i >= len(raw) || raw[i] != ',' {
			return
		}
		i++
	}
}

func skipWS(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipString returns the index after the string starting at b[i] ('"').
func skipString(b []byte, i int) int {
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return len(b)
}

// skipValue returns the index after the value starting at b[i].
func skipValue(b []byte, i int) int {
	if i >= len(b) {
		return i
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for ; i < len(b); i++ {
			switch b[i] {
			case '"':
				i = skipString(b, i) - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
		}
		return len(b)
	}
	for i < len(b) {
		switch b[i] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			return i
		}
		i++
	}
	return i
}
