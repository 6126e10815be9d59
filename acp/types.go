package acp

import (
	"encoding/json"
)

// This file holds the ACP v1 wire types both sides of a connection need:
// the agent runtime in this package and the client runtime in
// acp/acpclient. Fields follow the official schema's names; what a type does
// not model is kept raw so that a newer peer's additions pass through.

// Methods an agent calls on its client, and the client-side methods of the
// stable schema that the agent runtime does not serve.
const (
	MethodReadTextFile    = "fs/read_text_file"
	MethodWriteTextFile   = "fs/write_text_file"
	MethodTerminalCreate  = "terminal/create"
	MethodTerminalOutput  = "terminal/output"
	MethodTerminalWait    = "terminal/wait_for_exit"
	MethodTerminalKill    = "terminal/kill"
	MethodTerminalRelease = "terminal/release"
	MethodLogout          = "logout"
	MethodSessionList     = "session/list"
	MethodSessionDelete   = "session/delete"
)

// MaxTurnRequests is the stop reason of a turn that hit the agent's limit
// of requests between user turns.
const MaxTurnRequests StopReason = "max_turn_requests"

// Update kinds: the sessionUpdate discriminator of session/update.
const (
	UpdateUserMessageChunk  = "user_message_chunk"
	UpdateAgentMessageChunk = "agent_message_chunk"
	UpdateAgentThoughtChunk = "agent_thought_chunk"
	UpdateToolCall          = "tool_call"
	UpdateToolCallUpdate    = "tool_call_update"
	UpdatePlan              = "plan"
	UpdateAvailableCommands = "available_commands_update"
	UpdateCurrentMode       = "current_mode_update"
	UpdateConfigOption      = "config_option_update"
	UpdateSessionInfo       = "session_info_update"
	UpdateUsage             = "usage_update"
)

// CodeResourceLimit answers a request refused because a bounded resource
// (terminals, MCP connections) is exhausted; data.reason names it. It is
// deliberately not -32000, which ACP clients read as "authentication
// required".
const CodeResourceLimit int64 = -33000

// ImageBlock returns an image content block (base64 data); uri may be empty.
// An agent accepts it only with promptCapabilities.image.
func ImageBlock(mimeType, data, uri string) ContentBlock {
	return rawBlock(struct {
		Type     string `json:"type"`
		MimeType string `json:"mimeType"`
		Data     string `json:"data"`
		URI      string `json:"uri,omitempty"`
	}{"image", mimeType, data, uri})
}

// AudioBlock returns an audio content block (base64 data). An agent accepts
// it only with promptCapabilities.audio.
func AudioBlock(mimeType, data string) ContentBlock {
	return rawBlock(struct {
		Type     string `json:"type"`
		MimeType string `json:"mimeType"`
		Data     string `json:"data"`
	}{"audio", mimeType, data})
}

// ResourceLinkBlock returns a resource_link block: a reference the agent may
// read itself. Every agent accepts it.
func ResourceLinkBlock(uri, name, mimeType string) ContentBlock {
	return rawBlock(struct {
		Type     string `json:"type"`
		URI      string `json:"uri"`
		Name     string `json:"name"`
		MimeType string `json:"mimeType,omitempty"`
	}{"resource_link", uri, name, mimeType})
}

// TextResourceBlock returns an embedded text resource. An agent accepts it
// only with promptCapabilities.embeddedContext.
func TextResourceBlock(uri, text, mimeType string) ContentBlock {
	return rawBlock(struct {
		Type     string `json:"type"`
		Resource any    `json:"resource"`
	}{"resource", struct {
		URI      string `json:"uri"`
		Text     string `json:"text"`
		MimeType string `json:"mimeType,omitempty"`
	}{uri, text, mimeType}})
}

// BlobResourceBlock returns an embedded binary resource (base64). An agent
// accepts it only with promptCapabilities.embeddedContext.
func BlobResourceBlock(uri, blob, mimeType string) ContentBlock {
	return rawBlock(struct {
		Type     string `json:"type"`
		Resource any    `json:"resource"`
	}{"resource", struct {
		URI      string `json:"uri"`
		Blob     string `json:"blob"`
		MimeType string `json:"mimeType,omitempty"`
	}{uri, blob, mimeType}})
}

func rawBlock(v any) ContentBlock {
	raw, _ := json.Marshal(v) // plain structs of strings: cannot fail
	var t struct {
		Type string `json:"type"`
	}
	_ = json.Unmarshal(raw, &t)
	return ContentBlock{Type: t.Type, Raw: raw}
}

// AuthMethod is one way an agent offers to authenticate. Type is "" (the
// agent's own, passed to authenticate), "terminal" (the client runs the
// agent's command with Args and Env on a terminal and never calls
// authenticate), or a type this package does not know (kept in Raw, such as
// "env_var" with the variables to set).
type AuthMethod struct {
	ID          string            `json:"id"`
	Name        string            `json:"name"`
	Description string            `json:"description,omitempty"`
	Type        string            `json:"type,omitempty"`
	Args        []string          `json:"args,omitempty"`
	Env         map[string]string `json:"env,omitempty"`
	Raw         json.RawMessage   `json:"-"`
}

// UnmarshalJSON keeps the raw method beside the fields it knows.
func (m *AuthMethod) UnmarshalJSON(data []byte) error {
	type plain AuthMethod
	var p plain
	if err := json.Unmarshal(data, &p); err != nil {
		return err
	}
	*m = AuthMethod(p)
	m.Raw = append(json.RawMessage(nil), data...)
	return nil
}

// PromptCapabilities says which content blocks beyond text and
// resource_link an agent accepts in a prompt.
type PromptCapabilities struct {
	Image           bool `json:"image,omitempty"`
	Audio           bool `json:"audio,omitempty"`
	EmbeddedContext bool `json:"embeddedContext,omitempty"`
}

// MCPCapabilities says which MCP server transports an agent connects to
// (stdio always); ACP is MCP carried over the ACP connection itself.
type MCPCapabilities struct {
	HTTP bool `json:"http,omitempty"`
	SSE  bool `json:"sse,omitempty"`
	ACP  bool `json:"acp,omitempty"`
}

// SessionCapabilities lists the optional session methods an agent serves;
// a non-nil member means the method is offered.
type SessionCapabilities struct {
	List                  json.RawMessage `json:"list,omitempty"`
	Close                 json.RawMessage `json:"close,omitempty"`
	Resume                json.RawMessage `json:"resume,omitempty"`
	Delete                json.RawMessage `json:"delete,omitempty"`
	Fork                  json.RawMessage `json:"fork,omitempty"`
	AdditionalDirectories json.RawMessage `json:"additionalDirectories,omitempty"`
}

// AgentCapabilities is what initialize's result says the agent can do.
type AgentCapabilities struct {
	LoadSession         bool                `json:"loadSession,omitempty"`
	PromptCapabilities  PromptCapabilities  `json:"promptCapabilities"`
	MCPCapabilities     MCPCapabilities     `json:"mcpCapabilities"`
	SessionCapabilities SessionCapabilities `json:"sessionCapabilities"`
	Auth                struct {
		Logout json.RawMessage `json:"logout,omitempty"`
	} `json:"auth"`
}

// offered reports whether an optional capability object is present and not
// null or false.
func offered(raw json.RawMessage) bool {
	s := string(raw)
	return len(raw) > 0 && s != "null" && s != "false"
}

// Offers reports whether the agent advertises an optional method, by its
// method name (session/list, session/close, session/resume, session/delete,
// session/load, logout).
func (c AgentCapabilities) Offers(method string) bool {
	switch method {
	case MethodSessionLoad:
		return c.LoadSession
	case MethodSessionList:
		return offered(c.SessionCapabilities.List)
	case MethodSessionClose:
		return offered(c.SessionCapabilities.Close)
	case MethodSessionResume:
		return offered(c.SessionCapabilities.Resume)
	case MethodSessionDelete:
		return offered(c.SessionCapabilities.Delete)
	case MethodLogout:
		return offered(c.Auth.Logout)
	}
	return false
}

// FileSystemCapabilities says which fs/* methods a client serves.
type FileSystemCapabilities struct {
	ReadTextFile  bool `json:"readTextFile"`
	WriteTextFile bool `json:"writeTextFile"`
}

// ClientCapabilities is what a client declares in initialize: exactly the
// agent-to-client methods it serves.
type ClientCapabilities struct {
	FS       FileSystemCapabilities `json:"fs"`
	Terminal bool                   `json:"terminal"`
	Auth     struct {
		Terminal bool `json:"terminal,omitempty"`
	} `json:"auth"`
}

// EnvVariable is one {name, value} pair of an MCP server's or a terminal's
// environment, or an HTTP header.
type EnvVariable struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// MCPServer is one entry of session/new's mcpServers. Type "" is a stdio
// server (Command, Args, Env); "http" and "sse" use URL and Headers; "acp"
// is served by the client over the ACP connection itself, named by ServerID
// (the unstable MCP-over-ACP extension).
type MCPServer struct {
	Type     string        `json:"type,omitempty"`
	Name     string        `json:"name"`
	Command  string        `json:"command,omitempty"`
	Args     []string      `json:"args,omitempty"`
	Env      []EnvVariable `json:"env,omitempty"`
	URL      string        `json:"url,omitempty"`
	Headers  []EnvVariable `json:"headers,omitempty"`
	ServerID string        `json:"serverId,omitempty"`
}

// MarshalJSON writes the fields each transport requires: a stdio server
// always has args and env arrays (the TypeScript SDK's validation refuses
// them absent), an http or sse one always has headers.
func (s MCPServer) MarshalJSON() ([]byte, error) {
	switch s.Type {
	case "":
		return json.Marshal(struct {
			Name    string        `json:"name"`
			Command string        `json:"command"`
			Args    []string      `json:"args"`
			Env     []EnvVariable `json:"env"`
		}{s.Name, s.Command, nonNil(s.Args), nonNil(s.Env)})
	case "http", "sse":
		return json.Marshal(struct {
			Type    string        `json:"type"`
			Name    string        `json:"name"`
			URL     string        `json:"url"`
			Headers []EnvVariable `json:"headers"`
		}{s.Type, s.Name, s.URL, nonNil(s.Headers)})
	case "acp":
		// serverId is the schema's name; acp-go-sdk (v0.13) reads "id":
		// both are written so that either kind of agent finds the server.
		return json.Marshal(struct {
			Type     string `json:"type"`
			Name     string `json:"name"`
			ServerID string `json:"serverId"`
			ID       string `json:"id"`
		}{s.Type, s.Name, s.ServerID, s.ServerID})
	default:
		type plain MCPServer
		return json.Marshal(plain(s))
	}
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// ContentChunk is a message or thought chunk update.
type ContentChunk struct {
	Content   ContentBlock `json:"content"`
	MessageID string       `json:"messageId,omitempty"`
}

// ToolCallLocation is a file a tool call touches.
type ToolCallLocation struct {
	Path string `json:"path"`
	Line *int   `json:"line,omitempty"`
}

// ToolCallContent is one item of a tool call's content: {"type":"content"}
// with a block, {"type":"diff"} with Path, OldText and NewText, or
// {"type":"terminal"} with a TerminalID the client runs.
type ToolCallContent struct {
	Type       string        `json:"type"`
	Content    *ContentBlock `json:"content,omitempty"`
	Path       string        `json:"path,omitempty"`
	OldText    *string       `json:"oldText,omitempty"`
	NewText    string        `json:"newText,omitempty"`
	TerminalID string        `json:"terminalId,omitempty"`
}

// ToolCall is a tool_call update, and a tool_call_update's fields (all but
// ToolCallID optional there; Status, Kind and Title are empty when
// unchanged).
type ToolCall struct {
	ToolCallID string             `json:"toolCallId"`
	Title      string             `json:"title,omitempty"`
	Kind       string             `json:"kind,omitempty"`   // read, edit, delete, move, search, execute, think, fetch, switch_mode, other
	Status     string             `json:"status,omitempty"` // pending, in_progress, completed, failed
	Content    []ToolCallContent  `json:"content,omitempty"`
	Locations  []ToolCallLocation `json:"locations,omitempty"`
	RawInput   json.RawMessage    `json:"rawInput,omitempty"`
	RawOutput  json.RawMessage    `json:"rawOutput,omitempty"`
}

// PlanEntry is one step of a plan.
type PlanEntry struct {
	Content  string `json:"content"`
	Priority string `json:"priority"` // high, medium, low
	Status   string `json:"status"`   // pending, in_progress, completed
}

// Plan is a plan update: the whole plan, replacing the previous one.
type Plan struct {
	Entries []PlanEntry `json:"entries"`
}

// AvailableCommand is a slash command the agent accepts as prompt text.
type AvailableCommand struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	Input       *struct {
		Hint string `json:"hint"`
	} `json:"input,omitempty"`
}

// AvailableCommands is an available_commands_update.
type AvailableCommands struct {
	AvailableCommands []AvailableCommand `json:"availableCommands"`
}

// CurrentMode is a current_mode_update.
type CurrentMode struct {
	CurrentModeID string `json:"currentModeId"`
}

// ConfigOptions is a config_option_update: the whole list.
type ConfigOptions struct {
	ConfigOptions []ConfigOption `json:"configOptions"`
}

// SessionInfo is a session_info_update.
type SessionInfo struct {
	Title     *string `json:"title,omitempty"`
	UpdatedAt *string `json:"updatedAt,omitempty"`
}

// Usage is a usage_update: tokens in context, the window's size and the
// cumulative cost.
type Usage struct {
	Used int64 `json:"used"`
	Size int64 `json:"size"`
	Cost *struct {
		Amount   float64 `json:"amount"`
		Currency string  `json:"currency"`
	} `json:"cost,omitempty"`
}

// SessionModes is the modes part of a session's setup result.
type SessionModes struct {
	CurrentModeID  string        `json:"currentModeId"`
	AvailableModes []SessionMode `json:"availableModes"`
}

// SessionListEntry is one session of session/list.
type SessionListEntry struct {
	SessionID string  `json:"sessionId"`
	Cwd       string  `json:"cwd"`
	Title     *string `json:"title,omitempty"`
	UpdatedAt *string `json:"updatedAt,omitempty"`
}

// SessionList is session/list's result.
type SessionList struct {
	Sessions   []SessionListEntry `json:"sessions"`
	NextCursor string             `json:"nextCursor,omitempty"`
}
