package mcp

import (
	"encoding/json"

	"github.com/agentwire/agentwire/jsonrpc"
)

// The request path reads the few members MCP needs straight from the raw
// params with jsonrpc.EachMember (which walks what jsonrpc.Decode has
// validated without validating it again), without decoding into maps or
// copying: a tools/call is on the hot
// path of every MCP server. Keys are matched exactly, as JSON-RPC members
// are case-sensitive (encoding/json's case-insensitive matching is not
// used). Keys are unique: jsonrpc.Decode refuses a message whose params
// repeat a key in any object, at any depth (-32600), so the members read
// here, and the arguments a tool decodes with encoding/json, are the ones
// every other reader of the request sees, whichever of two it would have
// kept.

// RequestParams is what a request's params say, as slices of the raw
// params: what a transport that has parsed them hands the handler (in
// Routed), so that they are parsed once.
type RequestParams struct {
	Meta      *RequestMeta // nil when there is no _meta object
	metaValue RequestMeta
	MetaRaw   []byte // the _meta object, raw
	Name      []byte // raw JSON values; nil when absent
	URI       []byte
	Arguments []byte
	Cursor    []byte
	// A 2026-07-28 retry's answers and state (multi-round-trip requests).
	InputResponses []byte
	RequestState   []byte
}

// ParseRequestParams reads raw into p (in place: p.Meta points into p).
// raw is params as jsonrpc.Decode accepted them (valid JSON): they are
// walked with jsonrpc.EachMember, not validated once more. Anything but an
// object yields empty params.
func ParseRequestParams(raw []byte, p *RequestParams) {
	jsonrpc.EachMember(raw, func(key, value []byte) bool {
		switch string(key) {
		case "_meta":
			if len(value) > 0 && value[0] == '{' {
				p.Meta, p.MetaRaw = &p.metaValue, value
				parseMeta(value, p.Meta)
			} else {
				p.Meta = nil
			}
		case "name":
			p.Name = value
		case "uri":
			p.URI = value
		case "arguments":
			p.Arguments = value
		case "cursor":
			p.Cursor = value
		case "inputResponses":
			p.InputResponses = value
		case "requestState":
			p.RequestState = value
		}
		return true
	})
}

func parseMeta(raw []byte, m *RequestMeta) {
	jsonrpc.EachMember(raw, func(key, value []byte) bool {
		switch string(key) {
		case MetaProtocolVersion:
			m.ProtocolVersion = value
		case MetaClientCapabilities:
			m.ClientCapabilities = value
		case MetaClientInfo:
			m.ClientInfo = value
		case MetaLogLevel:
			var ok bool
			m.LogLevel, ok = jsonrpc.StringValue(value)
			m.logLevelInvalid = !ok
		case MetaProgressToken:
			m.ProgressToken = value
		}
		return true
	})
}

// RequestMeta is the part of params._meta agentwire reads, raw.
type RequestMeta struct {
	ProtocolVersion    json.RawMessage `json:"io.modelcontextprotocol/protocolVersion"`
	ClientCapabilities json.RawMessage `json:"io.modelcontextprotocol/clientCapabilities"`
	ClientInfo         json.RawMessage `json:"io.modelcontextprotocol/clientInfo"`
	LogLevel           string          `json:"io.modelcontextprotocol/logLevel"`
	logLevelInvalid    bool            // present but not a string
	ProgressToken      json.RawMessage `json:"progressToken"`
}
