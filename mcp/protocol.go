package mcp

import (
	"encoding/base64"
	"encoding/json"
	"slices"

	"github.com/agentwire/agentwire/jsonrpc"
)

// Protocol versions. Modern versions carry version, identity and
// capabilities in every request's _meta; legacy versions use the initialize
// handshake (MCP 2026-07-28 overview, and the 2025-11-25 lifecycle:
// https://modelcontextprotocol.io/specification/2025-11-25/basic/lifecycle).
const (
	LatestVersion       = "2026-07-28"
	LatestLegacyVersion = "2025-11-25"
)

// ModernVersions and LegacyVersions are the versions agentwire speaks,
// newest first.
var (
	ModernVersions = []string{"2026-07-28"}
	LegacyVersions = []string{"2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"}
)

// IsModern reports whether v is a modern (per-request metadata) version.
func IsModern(v string) bool { return slices.Contains(ModernVersions, v) }

// Reserved _meta keys (MCP 2026-07-28, "_meta":
// https://modelcontextprotocol.io/specification/2026-07-28/basic).
const (
	MetaProtocolVersion    = "io.modelcontextprotocol/protocolVersion"
	MetaClientCapabilities = "io.modelcontextprotocol/clientCapabilities"
	MetaClientInfo         = "io.modelcontextprotocol/clientInfo"
	MetaLogLevel           = "io.modelcontextprotocol/logLevel"
	MetaServerInfo         = "io.modelcontextprotocol/serverInfo"
	MetaSubscriptionID     = "io.modelcontextprotocol/subscriptionId"
	MetaProgressToken      = "progressToken"
)

// MCP error codes (MCP 2026-07-28, Error Handling:
// https://modelcontextprotocol.io/specification/2026-07-28/basic).
const (
	CodeHeaderMismatch                  int64 = -32020
	CodeMissingRequiredClientCapability int64 = -32021
	CodeUnsupportedProtocolVersion      int64 = -32022
	// CodeServerNotInitialized answers a legacy request before
	// initialize (JSON-RPC's Invalid Request).
	CodeServerNotInitialized int64 = -32600
)

// A 2026-07-28 result's resultType, and the cacheScope of results every
// client may share.
const (
	ResultTypeComplete      = "complete"
	ResultTypeInputRequired = "input_required"
	CacheScopePublic        = "public"
)

// The methods both sides of agentwire name.
const (
	MethodDiscover         = "server/discover"
	MethodInitialize       = "initialize"
	MethodInitialized      = "notifications/initialized"
	MethodPing             = "ping"
	MethodToolsList        = "tools/list"
	MethodToolsCall        = "tools/call"
	MethodListen           = "subscriptions/listen"
	MethodCancelled        = "notifications/cancelled"
	MethodProgress         = "notifications/progress"
	MethodAcknowledged     = "notifications/subscriptions/acknowledged"
	MethodToolsListChanged = "notifications/tools/list_changed"
)

// Implementation identifies a client or a server.
type Implementation struct {
	Name    string `json:"name"`
	Version string `json:"version"`
	Title   string `json:"title,omitempty"`
}

// Tool describes a tool in tools/list.
type Tool struct {
	Name         string           `json:"name"`
	Title        string           `json:"title,omitempty"`
	Description  string           `json:"description,omitempty"`
	InputSchema  json.RawMessage  `json:"inputSchema"`
	OutputSchema json.RawMessage  `json:"outputSchema,omitempty"`
	Annotations  *ToolAnnotations `json:"annotations,omitempty"`
	// Execution says whether the tool runs as a task (see TaskSupport);
	// nil means it never does.
	Execution *ToolExecution `json:"execution,omitempty"`
	// Scopes are the OAuth scopes a call of the tool needs, on a server
	// whose HTTP endpoint is protected (streamable.Options.Protect): a
	// token without all of them gets 403 insufficient_scope. Declared
	// with the tool, never sent: tools/list does not carry them.
	Scopes []string `json:"-"`
}

// ToolAnnotations are hints about a tool's behaviour. A nil hint is left
// out and takes the spec's default (destructiveHint and openWorldHint
// default to true), so each is a pointer: use Hint(false) to say false.
type ToolAnnotations struct {
	ReadOnlyHint    *bool `json:"readOnlyHint,omitempty"`
	DestructiveHint *bool `json:"destructiveHint,omitempty"`
	IdempotentHint  *bool `json:"idempotentHint,omitempty"`
	OpenWorldHint   *bool `json:"openWorldHint,omitempty"`
}

// Hint returns a pointer to b, for ToolAnnotations.
func Hint(b bool) *bool { return &b }

// Content is one block of a tool result or a prompt message: text, image,
// audio (Data base64-encoded, with MimeType), an embedded resource
// (Resource), or a link to a resource (resource_link: URI, Name, ...).
type Content struct {
	Type     string `json:"type"`
	Text     string `json:"text,omitempty"`
	Data     string `json:"data,omitempty"`
	MimeType string `json:"mimeType,omitempty"`
	// Resource is the embedded resource of a "resource" block.
	Resource *ResourceContents `json:"resource,omitempty"`
	// URI, Name, Title and Description describe a "resource_link" block.
	URI         string `json:"uri,omitempty"`
	Name        string `json:"name,omitempty"`
	Title       string `json:"title,omitempty"`
	Description string `json:"description,omitempty"`
}

// MarshalJSON writes the members the block's type requires: a text block
// always has "text", even when it is empty (TextContent requires it).
func (c Content) MarshalJSON() ([]byte, error) {
	switch c.Type {
	case "text":
		return json.Marshal(struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}{c.Type, c.Text})
	case "image", "audio":
		return json.Marshal(struct {
			Type     string `json:"type"`
			Data     string `json:"data"`
			MimeType string `json:"mimeType"`
		}{c.Type, c.Data, c.MimeType})
	case "resource":
		r := c.Resource
		if r == nil {
			r = &ResourceContents{}
		}
		return json.Marshal(struct {
			Type     string            `json:"type"`
			Resource *ResourceContents `json:"resource"`
		}{c.Type, r})
	case "resource_link":
		return json.Marshal(struct {
			Type        string `json:"type"`
			URI         string `json:"uri"`
			Name        string `json:"name"`
			Title       string `json:"title,omitempty"`
			Description string `json:"description,omitempty"`
			MimeType    string `json:"mimeType,omitempty"`
		}{c.Type, c.URI, c.Name, c.Title, c.Description, c.MimeType})
	}
	type plain Content
	return json.Marshal(plain(c))
}

// Text returns a text content block.
func Text(s string) Content { return Content{Type: "text", Text: s} }

// Image returns an image block (data is sent base64-encoded).
func Image(data []byte, mimeType string) Content {
	return Content{Type: "image", Data: base64.StdEncoding.EncodeToString(data), MimeType: mimeType}
}

// Audio returns an audio block (data is sent base64-encoded).
func Audio(data []byte, mimeType string) Content {
	return Content{Type: "audio", Data: base64.StdEncoding.EncodeToString(data), MimeType: mimeType}
}

// EmbeddedResource returns a block carrying a resource's contents.
func EmbeddedResource(r ResourceContents) Content { return Content{Type: "resource", Resource: &r} }

// ResourceLink returns a block pointing at a resource the client may read.
func ResourceLink(r Resource) Content {
	return Content{Type: "resource_link", URI: r.URI, Name: r.Name, Title: r.Title, Description: r.Description, MimeType: r.MIMEType}
}

// ToolResult is the result of tools/call. A tool that fails in a way the
// model should see (bad arguments, a failed lookup) returns IsError: true
// rather than a protocol error.
type ToolResult struct {
	Content           []Content `json:"content"`
	StructuredContent any       `json:"structuredContent,omitempty"`
	IsError           bool      `json:"isError,omitempty"`
}

// AppendJSON encodes the result without reflection for the common blocks;
// suffix, when not empty, is spliced in as the last members (a modern
// result's resultType and _meta).
func (r *ToolResult) AppendJSON(dst []byte, suffix []byte) json.RawMessage {
	// A large text is encoded into room made for it at once: appending
	// it escape by escape would reallocate the buffer over and over (a
	// 4 MiB text of "<", 24 MiB encoded, cost 120 MiB of allocations).
	need := 0
	for _, c := range r.Content {
		if c.Type == "text" && len(c.Text) > 4<<10 {
			need += jsonrpc.EncodedLen(c.Text)
		}
	}
	if need > 0 {
		dst = slices.Grow(dst, need+len(suffix)+256)
	}
	dst = append(dst, `{"content":[`...)
	for i, c := range r.Content {
		if i > 0 {
			dst = append(dst, ',')
		}
		switch c.Type {
		case "text":
			dst = append(dst, `{"type":"text","text":`...)
			dst = jsonrpc.AppendString(dst, c.Text)
			dst = append(dst, '}')
		default:
			b, err := c.MarshalJSON()
			if err != nil {
				b = []byte(`{"type":"text","text":""}`)
			}
			dst = append(dst, b...)
		}
	}
	dst = append(dst, ']')
	if r.StructuredContent != nil {
		if b, err := json.Marshal(r.StructuredContent); err == nil {
			dst = append(dst, `,"structuredContent":`...)
			dst = append(dst, b...)
		}
	}
	if r.IsError {
		dst = append(dst, `,"isError":true`...)
	}
	if len(suffix) > 0 {
		dst = append(dst, ',')
		dst = append(dst, suffix...)
	}
	return append(dst, '}')
}

// TextResult is a one-block text result.
func TextResult(s string) *ToolResult { return &ToolResult{Content: []Content{Text(s)}} }

// ErrorResult is a one-block text result with IsError set.
func ErrorResult(s string) *ToolResult {
	return &ToolResult{Content: []Content{Text(s)}, IsError: true}
}
