package acp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentwire/agentwire/jsonrpc"
	"github.com/agentwire/agentwire/rpc"
	"github.com/agentwire/agentwire/stdio"
)

// ProtocolVersion is ACP v1.
const ProtocolVersion = 1

// Method names, in one place.
const (
	MethodInitialize        = "initialize"
	MethodAuthenticate      = "authenticate"
	MethodSessionNew        = "session/new"
	MethodSessionLoad       = "session/load"
	MethodSessionResume     = "session/resume"
	MethodSetMode           = "session/set_mode"
	MethodSetConfigOption   = "session/set_config_option"
	MethodSessionClose      = "session/close"
	MethodPrompt            = "session/prompt"
	MethodCancel            = "session/cancel"
	MethodUpdate            = "session/update"
	MethodRequestPermission = "session/request_permission"
	MethodCancelRequest     = "$/cancel_request"
)

// controlMethods run in receive order on the control lane (guarantee A1).
var controlMethods = map[string]bool{
	MethodInitialize: true, MethodAuthenticate: true, MethodSessionNew: true, MethodSessionLoad: true,
	MethodSessionResume: true, MethodSetMode: true, MethodSetConfigOption: true, MethodSessionClose: true,
	MethodCancel: true,
}

// isBackground reports the background lane (guarantee A2): prompts and MCP
// bridge traffic.
func isBackground(method string) bool {
	return method == MethodPrompt || strings.HasPrefix(method, "mcp/")
}

// Error codes.
const (
	// CodeBusy is -32000 with data.reason telling it apart from ACP's
	// AuthRequired, which shares the code (ACP's error codes,
	// https://agentclientprotocol.com/protocol/schema).
	CodeBusy             int64 = -32000
	CodeResourceNotFound int64 = -32002
)

// StopReason ends a prompt turn.
type StopReason string

const (
	EndTurn   StopReason = "end_turn"
	MaxTokens StopReason = "max_tokens"
	Refusal   StopReason = "refusal"
	Cancelled StopReason = "cancelled"
)

// Implementation identifies a client or an agent.
type Implementation struct {
	Name    string `json:"name"`
	Version string `json:"version"`
	Title   string `json:"title,omitempty"`
}

// ContentBlock is one block of a prompt or an update. Blocks other than
// text keep their raw JSON in Raw.
type ContentBlock struct {
	Type string          `json:"type"`
	Text string          `json:"text,omitempty"`
	Raw  json.RawMessage `json:"-"`
}

// UnmarshalJSON keeps the raw block.
func (b *ContentBlock) UnmarshalJSON(data []byte) error {
	var v struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(data, &v); err != nil {
		return err
	}
	b.Type, b.Text, b.Raw = v.Type, v.Text, append(json.RawMessage(nil), data...)
	return nil
}

// MarshalJSON writes a text block, or the raw block.
func (b ContentBlock) MarshalJSON() ([]byte, error) {
	if b.Type == "text" || len(b.Raw) == 0 {
		return json.Marshal(struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}{b.Type, b.Text})
	}
	return b.Raw, nil
}

// TextBlock returns a text content block.
func TextBlock(s string) ContentBlock { return ContentBlock{Type: "text", Text: s} }

// SessionMode is one mode an agent offers.
type SessionMode struct {
	ID          string `json:"id"`
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
}

// PermissionOption is one choice offered by session/request_permission.
type PermissionOption struct {
	OptionID string `json:"optionId"`
	Name     string `json:"name"`
	Kind     string `json:"kind"` // allow_once, allow_always, reject_once, reject_always
}

// Agent is what an agent author provides. Prompt is required; everything
// else has a default.
type Agent struct {
	Info         Implementation
	Capabilities map[string]any // agentCapabilities; default {}
	Modes        []SessionMode  // offered by session/new; the first is current
	// Prompt runs one turn. It streams with turn.Update and sees a context
	// that is cancelled by session/cancel, $/cancel_request, or the end of
	// input. After a cancellation the turn answers stopReason "cancelled"
	// whatever Prompt returns (guarantee A5).
	Prompt func(ctx context.Context, turn *Turn) (StopReason, error)
	// Authenticate checks a method id; nil accepts any.
	Authenticate func(ctx context.Context, methodID string) error
	// LoadSession, if set, enables session/load (and agentCapabilities.
	// loadSession): it replays the session's history with replay (as
	// session/update notifications, all before the response) and reports
	// whether it knows the session.
	LoadSession func(ctx context.Context, s *Session, replay func(update any) error) (bool, error)
	// ConfigOptions are offered by session/new; session/set_config_option
	// changes their current values.
	ConfigOptions []ConfigOption
}

// ConfigOption is a session configuration option of type "select".
type ConfigOption struct {
	ID           string         `json:"id"`
	Name         string         `json:"name"`
	Category     string         `json:"category,omitempty"`
	Type         string         `json:"type"` // "select"
	CurrentValue string         `json:"currentValue"`
	Options      []ConfigChoice `json:"options"`
}

// ConfigChoice is one value of a ConfigOption.
type ConfigChoice struct {
	Value string `json:"value"`
	Name  string `json:"name"`
}

// Options configures the runtime. The zero value (or nil) means the
// defaults.
type Options struct {
	// MaxBackground bounds concurrent prompts and MCP requests per
	// connection; the excess gets -32000 with data.reason
	// "connection_busy" at once (guarantee A4). Default 32.
	MaxBackground int
	// ShutdownGrace is what background work gets after end of input (its
	// prompts are cancelled at once). Default 5 s (guarantee A8).
	ShutdownGrace time.Duration
	// IdleSessionTimeout forgets sessions unused for that long, never one
	// with an active prompt. Default 0: sessions live as long as the
	// connection.
	IdleSessionTimeout time.Duration
	// Logger receives diagnostics. Nil means slog.Default().
	Logger *slog.Logger
}

// DefaultMaxBackground is the background limit of guarantee A4.
const DefaultMaxBackground = 32

func (o *Options) resolve() Options {
	var s Options
	if o != nil {
		s = *o
	}
	if s.MaxBackground <= 0 {
		s.MaxBackground = DefaultMaxBackground
	}
	if s.ShutdownGrace <= 0 {
		s.ShutdownGrace = 5 * time.Second
	}
	if s.Logger == nil {
		s.Logger = slog.Default()
	}
	return s
}

// ConnOptions returns the connection options of the ACP dispatch model on
// top of base, and the handler that goes with them, for one connection.
func ConnOptions(agent *Agent, opts *Options, base *rpc.Options) (rpc.Handler, *rpc.Options) {
	s := opts.resolve()
	c := &conn{agent: agent, opts: s, sessions: map[string]*Session{}, cleaned: make(chan struct{})}
	var o rpc.Options
	if base != nil {
		o = *base
	}
	o.IsBarrier = func(m string) bool { return controlMethods[m] }
	o.RejectBatches = true
	o.Cancel = []rpc.CancelMethod{rpc.ACPCancel}
	o.Admit = c.admit
	o.EndOfStreamTimeout = s.ShutdownGrace
	// The background limit is ours; rpc's slots only need room for it
	// plus the control lane, which never waits behind a prompt.
	o.MaxConcurrentRequests = s.MaxBackground + 16
	o.RejectWhenBusy = false
	return &handler{c: c}, &o
}

// ServeStdio serves one connection on stdin and stdout (stdout guarded).
// Its Wait returns once the connection is done and the MCP servers it
// bridged have been shut down.
func ServeStdio(agent *Agent, opts *Options, base *rpc.Options) (*Conn, error) {
	h, o := ConnOptions(agent, opts, base)
	rc, err := stdio.Serve(h, o, nil)
	if err != nil {
		return nil, err
	}
	return &Conn{Conn: rc, c: h.(*handler).c}, nil
}

// Conn is a served ACP connection.
type Conn struct {
	*rpc.Conn
	c *conn
}

// Wait waits for the connection and for the end-of-input cleanup (bridged
// MCP servers shut down).
func (c *Conn) Wait() error {
	err := c.Conn.Wait()
	if c.c.watching.Load() {
		<-c.c.cleaned
	}
	return err
}

// handler is the rpc.Handler of one connection.
type handler struct{ c *conn }

func (h *handler) Handle(ctx context.Context, req *rpc.Request) (any, error) {
	return h.c.handle(ctx, req)
}

// conn is the authoritative context of one connection (guarantee A1): the
// control lane updates it in receive order; background requests read it.
type conn struct {
	agent *Agent
	opts  Options

	mu          sync.Mutex
	initialized bool
	sessions    map[string]*Session
	background  int
	nextSession atomic.Int64
	watchOnce   sync.Once
	watching    atomic.Bool
	cleaned     chan struct{} // closed when end-of-input cleanup is done
	bridges     bridges
}

// Session is one ACP session.
type Session struct {
	ID   string
	Cwd  string
	mode atomic.Value // string

	config sync.Map    // config option id -> current value
	closed atomic.Bool // session/close or idle cleanup: no new bridges

	// guarded by conn.mu
	active     *reservation
	lastUsed   time.Time
	mcpServers []json.RawMessage
}

// Config returns the current value of a config option.
func (s *Session) Config(id string) string {
	v, _ := s.config.Load(id)
	str, _ := v.(string)
	return str
}

// Mode returns the session's current mode.
func (s *Session) Mode() string {
	m, _ := s.mode.Load().(string)
	return m
}

// reservation is a prompt's claim on its session and its cancellation
// token, made in receive order before the prompt's handler starts (guarantee A5).
type reservation struct {
	req    *rpc.Request // the prompt that holds it
	ctx    context.Context
	cancel context.CancelCauseFunc
}

// errCancelledTurn is the cause of a turn cancelled by session/cancel.
var errCancelledTurn = errors.New("acp: turn cancelled by session/cancel")

func busy(reason string, data map[string]any) *jsonrpc.Error {
	if data == nil {
		data = map[string]any{}
	}
	data["reason"] = reason
	msg := "busy: " + strings.ReplaceAll(reason, "_", " ")
	return jsonrpc.NewError(CodeBusy, msg, data)
}

type sessionParams struct {
	SessionID string `json:"sessionId"`
}

// admit runs in receive order before any handler starts: the background
// limit and the one-prompt-per-session rule are decided here, and a prompt's
// reservation is made here, so that a cancel right behind it finds it.
func (c *conn) admit(req *rpc.Request) error {
	c.watchOnce.Do(func() {
		c.watching.Store(true)
		go c.watchInput(req.Conn())
	})
	if !isBackground(req.Method) || req.IsNotification() {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.background >= c.opts.MaxBackground {
		return busy("connection_busy", map[string]any{"limit": c.opts.MaxBackground})
	}
	if req.Method == MethodPrompt {
		var p sessionParams
		json.Unmarshal(req.Params, &p)
		if s := c.sessions[p.SessionID]; s != nil {
			if s.active != nil {
				return busy("prompt_in_progress", map[string]any{"sessionId": s.ID})
			}
			ctx, cancel := context.WithCancelCause(context.Background())
			s.active = &reservation{req: req, ctx: ctx, cancel: cancel}
		}
	}
	c.background++
	return nil
}

// release ends a background request's claim.
func (c *conn) release(s *Session, r *reservation) {
	c.mu.Lock()
	c.background--
	if s != nil && s.active == r {
		s.active = nil
		s.lastUsed = time.Now()
	}
	c.mu.Unlock()
	if r != nil {
		r.cancel(nil)
	}
}

// releaseFor releases what admit took for a background request that will
// not run its course.
func (c *conn) releaseFor(req *rpc.Request) {
	if !isBackground(req.Method) || req.IsNotification() {
		return
	}
	var s *Session
	var r *reservation
	if req.Method == MethodPrompt {
		var p sessionParams
		json.Unmarshal(req.Params, &p)
		c.mu.Lock()
		if s = c.sessions[p.SessionID]; s != nil && s.active != nil && s.active.req == req {
			r = s.active
		}
		c.mu.Unlock()
	}
	c.release(s, r)
}

// watchInput cancels every active prompt when input ends, so their normal
// finalizers run within the grace (guarantee A8).
func (c *conn) watchInput(rc *rpc.Conn) {
	var tick <-chan time.Time
	if c.opts.IdleSessionTimeout > 0 {
		t := time.NewTicker(c.opts.IdleSessionTimeout / 2)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-rc.InputDone():
			c.mu.Lock()
			for _, s := range c.sessions {
				if s.active != nil {
					s.active.cancel(rpc.ErrEndOfStream)
				}
			}
			c.mu.Unlock()
			c.closeBridges(nil)
			close(c.cleaned)
			return
		case <-tick:
			c.cleanIdle()
		}
	}
}

// cleanIdle forgets idle sessions, never one with an active prompt.
func (c *conn) cleanIdle() {
	cutoff := time.Now().Add(-c.opts.IdleSessionTimeout)
	c.mu.Lock()
	defer c.mu.Unlock()
	for id, s := range c.sessions {
		if s.active == nil && s.lastUsed.Before(cutoff) {
			delete(c.sessions, id)
			s.closed.Store(true)
			go c.closeBridges(s)
		}
	}
}

func (c *conn) session(id string) (*Session, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.sessions[id]
	if s == nil {
		return nil, jsonrpc.NewError(CodeResourceNotFound, "session not found: "+id, map[string]any{"sessionId": id})
	}
	s.lastUsed = time.Now()
	return s, nil
}

func (c *conn) handle(ctx context.Context, req *rpc.Request) (any, error) {
	if req.Method != MethodInitialize {
		c.mu.Lock()
		ready := c.initialized
		c.mu.Unlock()
		if !ready {
			c.releaseFor(req)
			return nil, jsonrpc.Errorf(jsonrpc.CodeInvalidRequest, "ACP connection must be initialized before %q", req.Method)
		}
	}
	switch req.Method {
	case MethodInitialize:
		return c.initialize(req)
	case MethodAuthenticate:
		var p struct {
			MethodID string `json:"methodId"`
		}
		if err := req.UnmarshalParams(&p); err != nil {
			return nil, err
		}
		if c.agent.Authenticate != nil {
			if err := c.agent.Authenticate(ctx, p.MethodID); err != nil {
				return nil, err
			}
		}
		return map[string]any{}, nil
	case MethodSessionNew:
		return c.newSession(req)
	case MethodSetMode:
		return c.setMode(req)
	case MethodSetConfigOption:
		return c.setConfigOption(req)
	case MethodSessionLoad:
		return c.loadSession(ctx, req)
	case MethodCancel:
		c.cancelTurn(req)
		if req.IsNotification() {
			return nil, nil
		}
		return map[string]any{}, nil // sent as a request by mistake: still honoured
	case MethodSessionClose:
		var p sessionParams
		if err := req.UnmarshalParams(&p); err != nil {
			return nil, err
		}
		c.mu.Lock()
		s := c.sessions[p.SessionID]
		if s != nil && s.active != nil {
			s.active.cancel(errCancelledTurn)
		}
		delete(c.sessions, p.SessionID)
		c.mu.Unlock()
		if s != nil {
			s.closed.Store(true)
			c.closeBridges(s)
		}
		return map[string]any{}, nil
	case MethodPrompt:
		if req.IsNotification() {
			return nil, nil // nothing was admitted for it; nothing to answer
		}
		return c.prompt(ctx, req)
	case MethodMCPConnect, MethodMCPMessage, MethodMCPDisconnect:
		if req.IsNotification() {
			return nil, nil
		}
		defer c.release(nil, nil)
		switch req.Method {
		case MethodMCPConnect:
			return c.mcpConnect(ctx, req)
		case MethodMCPMessage:
			return c.mcpMessage(ctx, req)
		default:
			return c.mcpDisconnect(req)
		}
	}
	c.releaseFor(req)
	if req.IsNotification() {
		return nil, nil
	}
	return nil, jsonrpc.Errorf(jsonrpc.CodeMethodNotFound, "method not found: %s", req.Method)
}

func (c *conn) initialize(req *rpc.Request) (any, error) {
	var p struct {
		ProtocolVersion *int `json:"protocolVersion"`
	}
	if err := req.UnmarshalParams(&p); err != nil || p.ProtocolVersion == nil {
		return nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "invalid params: initialize needs protocolVersion")
	}
	c.mu.Lock()
	c.initialized = true
	c.mu.Unlock()
	caps := map[string]any{}
	for k, v := range c.agent.Capabilities {
		caps[k] = v
	}
	if c.agent.LoadSession != nil {
		caps["loadSession"] = true
	}
	// The agent answers with the client's version if it supports it, or
	// its own latest.
	return map[string]any{
		"protocolVersion":   ProtocolVersion,
		"agentCapabilities": caps,
		"authMethods":       []any{},
		"agentInfo":         c.agent.Info,
	}, nil
}

func (c *conn) newSession(req *rpc.Request) (any, error) {
	var p struct {
		Cwd        string            `json:"cwd"`
		McpServers []json.RawMessage `json:"mcpServers"`
	}
	if err := req.UnmarshalParams(&p); err != nil {
		return nil, err
	}
	if p.Cwd == "" || p.McpServers == nil {
		return nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "invalid params: session/new needs cwd and mcpServers")
	}
	s := &Session{ID: "sess-" + strconv.FormatInt(c.nextSession.Add(1), 10), Cwd: p.Cwd, lastUsed: time.Now(), mcpServers: p.McpServers}
	res := map[string]any{"sessionId": s.ID}
	c.describe(s, res)
	c.mu.Lock()
	c.sessions[s.ID] = s
	c.mu.Unlock()
	return res, nil
}

// describe fills a session's modes and config options into a result.
func (c *conn) describe(s *Session, res map[string]any) {
	if len(c.agent.Modes) > 0 {
		if s.Mode() == "" {
			s.mode.Store(c.agent.Modes[0].ID)
		}
		res["modes"] = map[string]any{"currentModeId": s.Mode(), "availableModes": c.agent.Modes}
	}
	if len(c.agent.ConfigOptions) > 0 {
		res["configOptions"] = c.configOptions(s)
	}
}

func (c *conn) configOptions(s *Session) []ConfigOption {
	out := make([]ConfigOption, len(c.agent.ConfigOptions))
	for i, o := range c.agent.ConfigOptions {
		if v := s.Config(o.ID); v != "" {
			o.CurrentValue = v
		}
		if o.Type == "" {
			o.Type = "select"
		}
		out[i] = o
	}
	return out
}

func (c *conn) setConfigOption(req *rpc.Request) (any, error) {
	var p struct {
		SessionID string `json:"sessionId"`
		ConfigID  string `json:"configId"`
		Value     string `json:"value"`
	}
	if err := req.UnmarshalParams(&p); err != nil {
		return nil, err
	}
	s, err := c.session(p.SessionID)
	if err != nil {
		return nil, err
	}
	for _, o := range c.agent.ConfigOptions {
		if o.ID != p.ConfigID {
			continue
		}
		for _, ch := range o.Options {
			if ch.Value == p.Value {
				s.config.Store(o.ID, p.Value)
				return map[string]any{"configOptions": c.configOptions(s)}, nil
			}
		}
		return nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "invalid params: %q is not a value of %q", p.Value, p.ConfigID)
	}
	return nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "invalid params: unknown config option %q", p.ConfigID)
}

// loadSession is session/load: the agent replays the history as updates,
// all before the response.
func (c *conn) loadSession(ctx context.Context, req *rpc.Request) (any, error) {
	if c.agent.LoadSession == nil {
		return nil, jsonrpc.Errorf(jsonrpc.CodeMethodNotFound, "method not found: %s (this agent cannot load sessions)", req.Method)
	}
	var p struct {
		SessionID  string            `json:"sessionId"`
		Cwd        string            `json:"cwd"`
		McpServers []json.RawMessage `json:"mcpServers"`
	}
	if err := req.UnmarshalParams(&p); err != nil {
		return nil, err
	}
	if p.SessionID == "" || p.Cwd == "" || p.McpServers == nil {
		return nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "invalid params: session/load needs sessionId, cwd and mcpServers")
	}
	s := &Session{ID: p.SessionID, Cwd: p.Cwd, lastUsed: time.Now(), mcpServers: p.McpServers}
	replay := func(update any) error {
		return req.Notify(MethodUpdate, map[string]any{"sessionId": s.ID, "update": update})
	}
	known, err := c.agent.LoadSession(ctx, s, replay)
	if err != nil {
		return nil, err
	}
	if !known {
		return nil, jsonrpc.NewError(CodeResourceNotFound, "session not found: "+p.SessionID, map[string]any{"sessionId": p.SessionID})
	}
	res := map[string]any{}
	c.describe(s, res)
	c.mu.Lock()
	if old := c.sessions[s.ID]; old != nil && old.active != nil {
		c.mu.Unlock()
		return nil, busy("prompt_in_progress", map[string]any{"sessionId": s.ID})
	}
	c.sessions[s.ID] = s
	c.mu.Unlock()
	return res, nil
}

func (c *conn) setMode(req *rpc.Request) (any, error) {
	var p struct {
		SessionID string `json:"sessionId"`
		ModeID    string `json:"modeId"`
	}
	if err := req.UnmarshalParams(&p); err != nil {
		return nil, err
	}
	s, err := c.session(p.SessionID)
	if err != nil {
		return nil, err
	}
	known := false
	for _, m := range c.agent.Modes {
		known = known || m.ID == p.ModeID
	}
	if !known {
		return nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "invalid params: unknown mode %q", p.ModeID)
	}
	s.mode.Store(p.ModeID)
	return map[string]any{}, nil
}

// cancelTurn is session/cancel: the session's active turn (running or not
// yet started) is cancelled; the next turn gets a fresh token (guarantee A5).
func (c *conn) cancelTurn(req *rpc.Request) {
	var p sessionParams
	if json.Unmarshal(req.Params, &p) != nil {
		return
	}
	c.mu.Lock()
	if s := c.sessions[p.SessionID]; s != nil && s.active != nil {
		s.active.cancel(errCancelledTurn)
	}
	c.mu.Unlock()
}

// Turn is one prompt turn as the agent's Prompt function sees it.
type Turn struct {
	Session *Session
	Prompt  []ContentBlock
	req     *rpc.Request
}

// Update streams one session/update for this turn; updates reach the
// client in order and before the prompt's response (guarantee A2).
func (t *Turn) Update(update any) error {
	return t.req.Notify(MethodUpdate, map[string]any{"sessionId": t.Session.ID, "update": update})
}

// MessageChunk streams an agent_message_chunk with text. It is the most
// frequent message of a turn, so it is encoded directly rather than
// through maps and reflection.
func (t *Turn) MessageChunk(text string) error {
	msg := make([]byte, 0, 112+len(t.Session.ID)+len(text))
	msg = append(msg, `{"sessionId":`...)
	msg = jsonrpc.AppendString(msg, t.Session.ID)
	msg = append(msg, `,"update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":`...)
	msg = jsonrpc.AppendString(msg, text)
	msg = append(msg, `}}}`...)
	return t.req.Notify(MethodUpdate, json.RawMessage(msg))
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

func (c *conn) prompt(ctx context.Context, req *rpc.Request) (any, error) {
	var p struct {
		SessionID string         `json:"sessionId"`
		Prompt    []ContentBlock `json:"prompt"`
	}
	if err := req.UnmarshalParams(&p); err != nil {
		c.releaseFor(req)
		return nil, err
	}
	c.mu.Lock()
	s := c.sessions[p.SessionID]
	var r *reservation
	var refused error
	switch {
	case s == nil:
	case s.active != nil && s.active.req == req:
		r = s.active
	case s.active != nil:
		refused = busy("prompt_in_progress", map[string]any{"sessionId": s.ID})
	default:
		// The session did not exist yet when the prompt was admitted (it
		// was queued behind the session/load that creates it): reserve now.
		ctx, cancel := context.WithCancelCause(context.Background())
		r = &reservation{req: req, ctx: ctx, cancel: cancel}
		s.active = r
	}
	c.mu.Unlock()
	if refused != nil {
		c.release(nil, nil)
		return nil, refused
	}
	if s == nil || r == nil {
		c.release(nil, nil)
		return nil, jsonrpc.NewError(CodeResourceNotFound, "session not found: "+p.SessionID, map[string]any{"sessionId": p.SessionID})
	}
	defer c.release(s, r) // on completion and on panic (guarantee A8)

	// The turn's context ends with the request's ($/cancel_request, the
	// connection) or with the reservation's token (session/cancel, EOF).
	tctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := context.AfterFunc(r.ctx, func() { cancel(context.Cause(r.ctx)) })
	defer stop()

	reason, err := c.agent.Prompt(tctx, &Turn{Session: s, Prompt: p.Prompt, req: req})
	if tctx.Err() != nil {
		// "MUST reply with stopReason cancelled, not an error".
		return map[string]any{"stopReason": Cancelled}, nil
	}
	if err != nil {
		return nil, err
	}
	if reason == "" {
		reason = EndTurn
	}
	return map[string]any{"stopReason": reason}, nil
}
