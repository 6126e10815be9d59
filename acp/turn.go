package acp

// A turn's side of the connection: the updates it streams, and the
// requests it makes of the client (fs/*, terminal/*, permissions). The
// fs and terminal methods are refused here, before anything is sent, when
// the client's initialize did not declare them: a client MUST answer a
// method it did not declare with -32601 at best, and some never answer.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/agentwire/agentwire/jsonrpc"
	"github.com/agentwire/agentwire/rpc"
)

// ErrClientCapability is returned (wrapped with the method name) by a Turn
// or Terminal call whose method the client did not declare in its
// clientCapabilities: nothing is sent.
var ErrClientCapability = errors.New("the client did not declare this capability")

// Turn is one prompt turn as the agent's Prompt function sees it. Its
// methods may be called from several goroutines; updates keep the order of
// the calls.
type Turn struct {
	Session *Session
	Prompt  []ContentBlock
	req     *rpc.Request
	c       *conn

	// mu guards enc and buf. enc is the header a notification's params
	// are handed to rpc in: a pointer to a field of the (already
	// allocated) Turn is passed where a slice boxed in an interface would
	// cost an allocation per update. buf is the chunks' encoding buffer,
	// reused: Notify copies params into the message it queues, and a
	// MessageWriter sees them only during its call, so nothing refers to
	// buf once Notify has returned.
	mu  sync.Mutex
	enc jsonrpc.Encoded
	buf []byte
}

// maxKeptBuffer bounds the encoding buffer a turn keeps between chunks, so
// that one huge chunk does not pin its size for the rest of the turn.
const maxKeptBuffer = 64 << 10

// ClientCapabilities returns what the client declared in initialize.
func (t *Turn) ClientCapabilities() ClientCapabilities { return t.c.clientCapabilities() }

// ClientCapabilitiesRaw returns initialize's clientCapabilities as the
// client sent them (members this package does not model included); nil
// when absent.
func (t *Turn) ClientCapabilitiesRaw() json.RawMessage {
	if p := t.c.client.Load(); p != nil {
		return p.raw
	}
	return nil
}

// notify sends one session/update whose params are msg, which must be
// valid JSON without a newline (our encoders' output).
func (t *Turn) notify(msg []byte) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.notifyLocked(msg)
}

func (t *Turn) notifyLocked(msg []byte) error {
	t.enc = msg
	err := t.req.Notify(MethodUpdate, &t.enc)
	t.enc = nil
	return err
}

// updateMessage encodes session/update's params for any update value.
func updateMessage(sessionID string, update any) ([]byte, error) {
	raw, err := json.Marshal(update)
	if err != nil {
		return nil, fmt.Errorf("acp: session/update cannot be encoded: %w", err)
	}
	msg := make([]byte, 0, 32+len(sessionID)+len(raw))
	msg = append(msg, `{"sessionId":`...)
	msg = jsonrpc.AppendString(msg, sessionID)
	msg = append(msg, `,"update":`...)
	msg = append(msg, raw...)
	return append(msg, '}'), nil
}

// Update streams one session/update for this turn; updates reach the
// client in order and before the prompt's response (guarantee A2).
func (t *Turn) Update(update any) error {
	msg, err := updateMessage(t.Session.ID, update)
	if err != nil {
		return err
	}
	return t.notify(msg)
}

// MessageChunk streams an agent_message_chunk with text. It is the most
// frequent message of a turn, so it is encoded directly rather than
// through maps and reflection.
func (t *Turn) MessageChunk(text string) error { return t.chunk(UpdateAgentMessageChunk, text) }

// ThoughtChunk streams an agent_thought_chunk with text: the agent's
// reasoning, which clients show apart from the reply.
func (t *Turn) ThoughtChunk(text string) error { return t.chunk(UpdateAgentThoughtChunk, text) }

func (t *Turn) chunk(kind, text string) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	msg := t.buf[:0]
	if n := 96 + len(kind) + len(t.Session.ID) + jsonrpc.EncodedLen(text); cap(msg) < n {
		msg = make([]byte, 0, n)
	}
	msg = append(msg, `{"sessionId":`...)
	msg = jsonrpc.AppendString(msg, t.Session.ID)
	msg = append(msg, `,"update":{"sessionUpdate":"`...)
	msg = append(msg, kind...)
	msg = append(msg, `","content":{"type":"text","text":`...)
	msg = jsonrpc.AppendString(msg, text)
	msg = append(msg, `}}}`...)
	err := t.notifyLocked(msg)
	if cap(msg) <= maxKeptBuffer {
		t.buf = msg[:0]
	} else {
		t.buf = nil
	}
	return err
}

// toolCallUpdate is a ToolCall with its discriminator.
type toolCallUpdate struct {
	SessionUpdate string `json:"sessionUpdate"`
	ToolCall
}

// ToolCall announces a tool call (sessionUpdate tool_call). ToolCallID and
// Title are required.
func (t *Turn) ToolCall(tc ToolCall) error {
	if tc.ToolCallID == "" || tc.Title == "" {
		return errors.New("acp: a tool_call needs a toolCallId and a title")
	}
	return t.Update(toolCallUpdate{UpdateToolCall, tc})
}

// UpdateToolCall reports progress of an announced tool call
// (tool_call_update): only ToolCallID is required; empty fields are
// unchanged.
func (t *Turn) UpdateToolCall(tc ToolCall) error {
	if tc.ToolCallID == "" {
		return errors.New("acp: a tool_call_update needs a toolCallId")
	}
	return t.Update(toolCallUpdate{UpdateToolCallUpdate, tc})
}

// Plan sends the whole plan, replacing the one sent before.
func (t *Turn) Plan(p Plan) error {
	return t.Update(struct {
		SessionUpdate string      `json:"sessionUpdate"`
		Entries       []PlanEntry `json:"entries"`
	}{UpdatePlan, nonNil(p.Entries)})
}

// RequestPermission asks the client (session/request_permission) and
// returns the chosen option id, or "" when the client answered cancelled.
func (t *Turn) RequestPermission(ctx context.Context, toolCall any, options []PermissionOption) (string, error) {
	res, err := t.req.Conn().Call(ctx, MethodRequestPermission, map[string]any{
		"sessionId": t.Session.ID, "toolCall": toolCall, "options": options,
	})
	if err != nil {
		return "", err
	}
	var r struct {
		Outcome struct {
			Outcome  string `json:"outcome"`
			OptionID string `json:"optionId"`
		} `json:"outcome"`
	}
	if err := json.Unmarshal(res, &r); err != nil {
		return "", fmt.Errorf("acp: malformed permission outcome: %w", err)
	}
	if r.Outcome.Outcome != "selected" {
		return "", nil
	}
	return r.Outcome.OptionID, nil
}

// callClient sends an agent-to-client request when declared is true and
// decodes its result into out (when not nil).
func callClient(ctx context.Context, rc *rpc.Conn, declared bool, method string, params, out any) error {
	if !declared {
		return fmt.Errorf("acp: %s: %w", method, ErrClientCapability)
	}
	res, err := rc.Call(ctx, method, params)
	if err != nil {
		return fmt.Errorf("acp: %s: %w", method, err)
	}
	if out != nil {
		if err := json.Unmarshal(res, out); err != nil {
			return fmt.Errorf("acp: %s: malformed result: %w", method, err)
		}
	}
	return nil
}

// ReadTextFile reads a text file through the client (fs/read_text_file),
// which sees its editor's unsaved changes. line (1-based) and limit (a
// number of lines) are left out when 0. It needs fs.readTextFile.
func (t *Turn) ReadTextFile(ctx context.Context, path string, line, limit int) (string, error) {
	p := struct {
		SessionID string `json:"sessionId"`
		Path      string `json:"path"`
		Line      int    `json:"line,omitempty"`
		Limit     int    `json:"limit,omitempty"`
	}{t.Session.ID, path, line, limit}
	var r struct {
		Content *string `json:"content"`
	}
	if err := callClient(ctx, t.req.Conn(), t.ClientCapabilities().FS.ReadTextFile, MethodReadTextFile, p, &r); err != nil {
		return "", err
	}
	if r.Content == nil {
		return "", fmt.Errorf("acp: %s: the result has no content", MethodReadTextFile)
	}
	return *r.Content, nil
}

// WriteTextFile writes a text file through the client (fs/write_text_file),
// which creates it if needed. It needs fs.writeTextFile.
func (t *Turn) WriteTextFile(ctx context.Context, path, content string) error {
	p := struct {
		SessionID string `json:"sessionId"`
		Path      string `json:"path"`
		Content   string `json:"content"`
	}{t.Session.ID, path, content}
	return callClient(ctx, t.req.Conn(), t.ClientCapabilities().FS.WriteTextFile, MethodWriteTextFile, p, nil)
}

// TerminalRequest is terminal/create's command. Cwd must be absolute when
// set; OutputByteLimit, when set, bounds the output the client keeps
// (cut from the beginning, at a character boundary).
type TerminalRequest struct {
	Command         string
	Args            []string
	Env             []EnvVariable
	Cwd             string
	OutputByteLimit *int
}

// TerminalExit is how a terminal's command ended: an exit code, or the
// signal that killed it.
type TerminalExit struct {
	ExitCode *int    `json:"exitCode"`
	Signal   *string `json:"signal"`
}

// TerminalOutput is terminal/output's result: the output kept so far,
// whether some was cut, and the exit status once the command has ended.
type TerminalOutput struct {
	Output     string        `json:"output"`
	Truncated  bool          `json:"truncated"`
	ExitStatus *TerminalExit `json:"exitStatus,omitempty"`
}

// Terminal is a command the client runs for the agent (terminal/create).
// It stays alive on the client until Release, even after it exits; show it
// in a tool call with ToolCallContent{Type: "terminal", TerminalID: ID()}.
type Terminal struct {
	id        string
	sessionID string
	conn      *rpc.Conn
	declared  bool
}

// CreateTerminal starts req.Command on the client (terminal/create) and
// returns at once, without waiting for it. It needs the terminal
// capability.
func (t *Turn) CreateTerminal(ctx context.Context, req TerminalRequest) (*Terminal, error) {
	if req.Command == "" {
		return nil, fmt.Errorf("acp: %s: a terminal needs a command", MethodTerminalCreate)
	}
	p := struct {
		SessionID       string        `json:"sessionId"`
		Command         string        `json:"command"`
		Args            []string      `json:"args"`
		Env             []EnvVariable `json:"env"`
		Cwd             string        `json:"cwd,omitempty"`
		OutputByteLimit *int          `json:"outputByteLimit,omitempty"`
	}{t.Session.ID, req.Command, nonNil(req.Args), nonNil(req.Env), req.Cwd, req.OutputByteLimit}
	var r struct {
		TerminalID string `json:"terminalId"`
	}
	declared := t.ClientCapabilities().Terminal
	if err := callClient(ctx, t.req.Conn(), declared, MethodTerminalCreate, p, &r); err != nil {
		return nil, err
	}
	if r.TerminalID == "" {
		return nil, fmt.Errorf("acp: %s: the result has no terminalId", MethodTerminalCreate)
	}
	return &Terminal{id: r.TerminalID, sessionID: t.Session.ID, conn: t.req.Conn(), declared: declared}, nil
}

// ID is the client's terminalId.
func (x *Terminal) ID() string { return x.id }

func (x *Terminal) params() any {
	return struct {
		SessionID  string `json:"sessionId"`
		TerminalID string `json:"terminalId"`
	}{x.sessionID, x.id}
}

// Output returns the output so far (terminal/output), without waiting.
func (x *Terminal) Output(ctx context.Context) (TerminalOutput, error) {
	var r TerminalOutput
	err := callClient(ctx, x.conn, x.declared, MethodTerminalOutput, x.params(), &r)
	return r, err
}

// WaitForExit waits until the command has ended (terminal/wait_for_exit).
func (x *Terminal) WaitForExit(ctx context.Context) (TerminalExit, error) {
	var r TerminalExit
	err := callClient(ctx, x.conn, x.declared, MethodTerminalWait, x.params(), &r)
	return r, err
}

// Kill ends the command (terminal/kill); the terminal stays, with its
// output, until Release.
func (x *Terminal) Kill(ctx context.Context) error {
	return callClient(ctx, x.conn, x.declared, MethodTerminalKill, x.params(), nil)
}

// Release kills the command if it still runs and frees the terminal
// (terminal/release); its id is invalid afterwards.
func (x *Terminal) Release(ctx context.Context) error {
	return callClient(ctx, x.conn, x.declared, MethodTerminalRelease, x.params(), nil)
}
