package acpclient

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/agentwire/agentwire/acp"
	"github.com/agentwire/agentwire/jsonrpc"
	"github.com/agentwire/agentwire/rpc"
)

// UpdateHandler receives session/update notifications, one at a time, in the
// order the agent sent them (across all sessions of a connection), each
// before anything the agent sent after it is dispatched. A handler that
// takes long holds the agent back (reading pauses once MaxQueuedUpdates
// wait) rather than letting updates pile up in memory. It may call the
// connection (a nested Prompt or SetMode returns without waiting for later
// updates, which are held behind it); it must not wait for something its
// own Prompt caller does only after Prompt returns.
type UpdateHandler interface {
	HandleUpdate(ctx context.Context, u *Update) error
}

// UpdateFunc adapts a function to UpdateHandler.
type UpdateFunc func(ctx context.Context, u *Update) error

// HandleUpdate calls f.
func (f UpdateFunc) HandleUpdate(ctx context.Context, u *Update) error { return f(ctx, u) }

// Update is one session/update. Raw is the update object (with its
// sessionUpdate member); it stays valid after the handler returns, but the
// *Update itself is reused for the next update and must not be kept.
type Update struct {
	SessionID string
	// Session is the session it belongs to, nil for one this connection
	// does not know (delivered to Options.Updates).
	Session *Session
	// Kind is the sessionUpdate discriminator: acp.UpdateAgentMessageChunk
	// and the other acp.Update* constants, or a newer kind as sent.
	Kind string
	Raw  json.RawMessage
}

// Text returns the text of a message or thought chunk, "" otherwise.
func (u *Update) Text() string {
	switch u.Kind {
	case acp.UpdateAgentMessageChunk, acp.UpdateAgentThoughtChunk, acp.UpdateUserMessageChunk:
	default:
		return ""
	}
	var content []byte
	jsonrpc.EachMember(u.Raw, func(k, v []byte) bool {
		if string(k) == "content" {
			content = v
			return false
		}
		return true
	})
	if len(content) == 0 || content[0] != '{' {
		return ""
	}
	var typ, text []byte
	jsonrpc.EachMember(content, func(k, v []byte) bool {
		switch string(k) {
		case "type":
			typ = v
		case "text":
			text = v
		}
		return true
	})
	if t, ok := jsonrpc.StringBytes(typ); !ok || string(t) != "text" {
		return ""
	}
	s, _ := jsonrpc.StringValue(text)
	return s
}

// Decode returns the update as its type: *acp.ContentChunk (the three
// chunk kinds), *acp.ToolCall (tool_call and tool_call_update), *acp.Plan,
// *acp.AvailableCommands, *acp.CurrentMode, *acp.ConfigOptions,
// *acp.SessionInfo or *acp.Usage. A kind it does not know is returned as
// its json.RawMessage with a nil error.
func (u *Update) Decode() (any, error) {
	var v any
	switch u.Kind {
	case acp.UpdateAgentMessageChunk, acp.UpdateAgentThoughtChunk, acp.UpdateUserMessageChunk:
		v = new(acp.ContentChunk)
	case acp.UpdateToolCall, acp.UpdateToolCallUpdate:
		v = new(acp.ToolCall)
	case acp.UpdatePlan:
		v = new(acp.Plan)
	case acp.UpdateAvailableCommands:
		v = new(acp.AvailableCommands)
	case acp.UpdateCurrentMode:
		v = new(acp.CurrentMode)
	case acp.UpdateConfigOption:
		v = new(acp.ConfigOptions)
	case acp.UpdateSessionInfo:
		v = new(acp.SessionInfo)
	case acp.UpdateUsage:
		v = new(acp.Usage)
	default:
		return u.Raw, nil
	}
	if err := json.Unmarshal(u.Raw, v); err != nil {
		return nil, fmt.Errorf("acpclient: malformed %s update: %w", u.Kind, err)
	}
	return v, nil
}

// isNested reports a context of an update handler: a call made from it
// must not wait for the updates held behind it.
func isNested(ctx context.Context) bool {
	if r := rpc.RequestFrom(ctx); r != nil && r.Method == acp.MethodUpdate {
		return true
	}
	return ctx.Value(nestedKey{}) != nil
}

// nestedKey marks the context of a parked update's handler, run by
// NewSession rather than by the connection.
type nestedKey struct{}
