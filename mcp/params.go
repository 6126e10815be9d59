package mcp

import (
	"encoding/json"
	"strings"

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
	// Ambiguous is a member that equals "name", "uri", "arguments" or
	// "_meta" only under case folding ("Name"), and MetaAmbiguous one of
	// _meta that equals a key read in RequestMeta that way; "" when there
	// is none. A handler decoding into a Go struct matches keys
	// case-insensitively, a server behind a bridge exactly: a transport
	// that routes on these members refuses such a request, and learns it
	// in the same walk that reads them.
	Ambiguous, MetaAmbiguous string
}

// routedNames and metaNames are the members whose case-folded twins are
// Ambiguous and MetaAmbiguous.
var (
	routedNames = [...]string{"name", "uri", "arguments", "_meta"}
	metaNames   = [...]string{MetaProtocolVersion, MetaClientCapabilities, MetaClientInfo, MetaLogLevel, MetaProgressToken}
)

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
				parseMeta(value, p)
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
		default:
			if p.Ambiguous == "" {
				p.Ambiguous = foldedTwin(key, routedNames[:])
			}
		}
		return true
	})
}

// foldedTwin returns key when it equals one of names only under case
// folding, "" otherwise.
func foldedTwin(key []byte, names []string) string {
	for _, name := range names {
		if string(key) != name && equalFold(key, name) {
			return string(key)
		}
	}
	return ""
}

// equalFold is strings.EqualFold for a key of bytes against one of our
// ASCII member names, without converting the key: an ASCII key (all the
// usual ones) is compared in place, any other as strings.EqualFold does
// (Unicode folding: the Kelvin sign folds to "k").
func equalFold(key []byte, name string) bool {
	for _, c := range key {
		if c >= 0x80 {
			return strings.EqualFold(string(key), name)
		}
	}
	if len(key) != len(name) {
		return false // ASCII folds to ASCII of the same length
	}
	for i, c := range key {
		if d := name[i]; c != d && (c|0x20 != d|0x20 || c|0x20 < 'a' || c|0x20 > 'z') {
			return false
		}
	}
	return true
}

func parseMeta(raw []byte, p *RequestParams) {
	m := p.Meta
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
		default:
			if p.MetaAmbiguous == "" {
				p.MetaAmbiguous = foldedTwin(key, metaNames[:])
			}
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
