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
	// CodeAuthRequired is ACP's "Authentication required": the same code as
	// CodeBusy, sent without data.reason, which is how clients tell the two
	// apart.
	CodeAuthRequired int64 = -32000
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

// ContentBlock is one block of a prompt or an update, with its raw JSON
// in Raw (how blocks other than text marshal). In a Turn's Prompt, Raw
// aliases the request's params, which stay valid: read it, do not write
// to it.
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
	Info Implementation
	// Capabilities is agentCapabilities; default {}. The runtime adds what
	// it serves itself: loadSession when LoadSession is set,
	// sessionCapabilities close and resume, and mcpCapabilities.acp with
	// MCPOverACP, merged into the objects given here.
	Capabilities map[string]any
	Modes        []SessionMode // offered by session/new; the first is current
	// Prompt runs one turn. It streams with turn.Update and sees a context
	// that is cancelled by session/cancel, $/cancel_request, or the end of
	// input. After a cancellation the turn answers stopReason "cancelled"
	// whatever Prompt returns (guarantee A5).
	Prompt func(ctx context.Context, turn *Turn) (StopReason, error)
	// AuthMethods are initialize's authMethods (default []); a method of
	// Type "terminal" is left out for a client that did not declare
	// auth.terminal. When it is not empty, authenticate with a methodId it
	// does not list gets -32602.
	AuthMethods []AuthMethod
	// RequireAuth refuses session/new, session/load, session/resume and
	// session/prompt with -32000 "Authentication required" (no data) until
	// an authenticate has succeeded on the connection.
	RequireAuth bool
	// Authenticate checks a method id; nil accepts any.
	Authenticate func(ctx context.Context, methodID string) error
	// NewSession, if set, is called by session/new with the new session
	// before it is answered; an error refuses the session (a
	// *jsonrpc.Error is sent as it is).
	NewSession func(ctx context.Context, s *Session) error
	// LoadSession, if set, enables session/load (and agentCapabilities.
	// loadSession): it replays the session's history with replay (as
	// session/update notifications, all before the response) and reports
	// whether it knows the session. session/resume of a session this
	// connection does not hold calls it too, with a replay that discards
	// the updates.
	LoadSession func(ctx context.Context, s *Session, replay func(update any) error) (bool, error)
	// ConfigOptions are offered by session/new; session/set_config_option
	// changes their current values.
	ConfigOptions []ConfigOption
	// MCPOverACP advertises mcpCapabilities.acp: the agent accepts MCP
	// servers that the client serves over the ACP connection itself.
	MCPOverACP bool
}

// ConfigOption is a session configuration option: Type "select" (the
// default) with Options, or "boolean", whose CurrentValue is "true" or
// "false" here and a JSON boolean on the wire. Raw keeps the option as a
// peer sent it (grouped select options are flattened into Options).
type ConfigOption struct {
	ID           string
	Name         string
	Description  string
	Category     string
	Type         string // "select" or "boolean"
	CurrentValue string
	Options      []ConfigChoice
	Raw          json.RawMessage
}

// MarshalJSON writes the schema's form of each type: a boolean option's
// currentValue as a JSON boolean and no options, a select option's
// options always as an array.
func (o ConfigOption) MarshalJSON() ([]byte, error) {
	type base struct {
		ID          string `json:"id"`
		Name        string `json:"name"`
		Description string `json:"description,omitempty"`
		Category    string `json:"category,omitempty"`
		Type        string `json:"type"`
	}
	b := base{o.ID, o.Name, o.Description, o.Category, o.Type}
	if o.Type == "boolean" {
		return json.Marshal(struct {
			base
			CurrentValue bool `json:"currentValue"`
		}{b, o.CurrentValue == "true"})
	}
	if b.Type == "" {
		b.Type = "select"
	}
	return json.Marshal(struct {
		base
		CurrentValue string         `json:"currentValue"`
		Options      []ConfigChoice `json:"options"`
	}{b, o.CurrentValue, nonNil(o.Options)})
}

// UnmarshalJSON reads both types: a boolean currentValue becomes "true" or
// "false", grouped options ({group, name, options}) are flattened, and
// what cannot be read (an option item of another shape) is skipped, as
// the schema's x-deserialize-default-on-error asks.
func (o *ConfigOption) UnmarshalJSON(data []byte) error {
	var v struct {
		ID           string            `json:"id"`
		Name         string            `json:"name"`
		Description  *string           `json:"description"`
		Category     *string           `json:"category"`
		Type         string            `json:"type"`
		CurrentValue json.RawMessage   `json:"currentValue"`
		Options      []json.RawMessage `json:"options"`
	}
	if err := json.Unmarshal(data, &v); err != nil {
		return err
	}
	*o = ConfigOption{ID: v.ID, Name: v.Name, Type: v.Type, Raw: append(json.RawMessage(nil), data...)}
	if v.Description != nil {
		o.Description = *v.Description
	}
	if v.Category != nil {
		o.Category = *v.Category
	}
	var b bool
	if json.Unmarshal(v.CurrentValue, &b) == nil && (string(v.CurrentValue) == "true" || string(v.CurrentValue) == "false") {
		o.CurrentValue = strconv.FormatBool(b)
	} else {
		_ = json.Unmarshal(v.CurrentValue, &o.CurrentValue)
	}
	for _, raw := range v.Options {
		var item struct {
			Group   *string        `json:"group"`
			Value   string         `json:"value"`
			Name    string         `json:"name"`
			Options []ConfigChoice `json:"options"`
		}
		if json.Unmarshal(raw, &item) != nil {
			continue
		}
		if item.Group != nil {
			o.Options = append(o.Options, item.Options...)
		} else {
			o.Options = append(o.Options, ConfigChoice{Value: item.Value, Name: item.Name})
		}
	}
	return nil
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
	// Middleware wraps the dispatch of every request and notification,
	// the first outermost (see Middleware). Nil: dispatched directly.
	Middleware []Middleware
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
	c.chain = chainMiddleware(s.Middleware)
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
	if h.c.chain != nil {
		return h.c.serveCall(ctx, req)
	}
	return h.c.handle(ctx, req)
}

// conn is the authoritative context of one connection (guarantee A1): the
// control lane updates it in receive order; background requests read it.
type conn struct {
	agent *Agent
	opts  Options

	mu            sync.Mutex
	initialized   bool
	authenticated bool
	sessions      map[string]*Session
	background    int
	nextSession   atomic.Int64
	watchOnce     sync.Once
	watching      atomic.Bool
	cleaned       chan struct{} // closed when end-of-input cleanup is done
	bridges       bridges
	// client is what initialize declared; nil before it. Turns read it
	// without the lock.
	client atomic.Pointer[peerClient]
	// chain is Options.Middleware composed; nil without any.
	chain CallHandler
}

// peerClient is the client as its initialize described it.
type peerClient struct {
	caps ClientCapabilities
	raw  json.RawMessage
}

// Session is one ACP session.
type Session struct {
	ID   string
	Cwd  string
	mode atomic.Value // string

	config sync.Map    // config option id -> current value
	closed atomic.Bool // session/close or idle cleanup: no new bridges
	c      *conn

	// guarded by conn.mu
	active     *reservation
	lastUsed   time.Time
	mcpServers []json.RawMessage
}

// Config returns the current value of a config option ("true" or "false"
// for a boolean one).
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

// ClientCapabilities returns what the client declared in initialize.
func (s *Session) ClientCapabilities() ClientCapabilities {
	if s.c == nil {
		return ClientCapabilities{}
	}
	return s.c.clientCapabilities()
}

func (c *conn) clientCapabilities() ClientCapabilities {
	if p := c.client.Load(); p != nil {
		return p.caps
	}
	return ClientCapabilities{}
}

// reservation is a prompt's claim on its session and its cancellation
// token, made in receive order before the prompt's handler starts
// (guarantee A5). The turn's context does not exist yet at admission (it
// derives from the handler's), so a cancellation that comes first is kept
// in cause and applied when the turn starts: one context per turn, not a
// token context plus a turn context joined by an AfterFunc. The Turn and
// the first prompt block live in it, so that a turn costs one allocation
// for all three.
type reservation struct {
	req    *rpc.Request            // the prompt that holds it
	cause  error                   // a cancellation before the turn started; under conn.mu
	cancel context.CancelCauseFunc // the turn's context; nil until it starts; under conn.mu
	turn   Turn
	one    [1]ContentBlock
}

// cancelLocked cancels the turn, or records the cancellation for a turn
// that has not started yet. c.mu is held.
func (r *reservation) cancelLocked(cause error) {
	if r.cancel != nil {
		r.cancel(cause)
	} else if r.cause == nil {
		r.cause = cause
	}
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

// errAuthRequired is exactly what ACP clients read as "authenticate
// first": -32000 without data (a data.reason would make it a busy error).
func errAuthRequired() error {
	return jsonrpc.NewError(CodeAuthRequired, "Authentication required", nil)
}

func notFound(id string) error {
	return jsonrpc.NewError(CodeResourceNotFound, "session not found: "+id, map[string]any{"sessionId": id})
}

type sessionParams struct {
	SessionID string `json:"sessionId"`
}

// sessionIDOf reads params.sessionId without encoding/json: it runs for
// every prompt at admission and again in its handler, and for every
// cancel. The bytes alias params (or are a decoded copy when the id has
// escapes); a lookup c.sessions[string(id)] copies nothing. nil when
// absent or not a string.
func sessionIDOf(params []byte) []byte {
	var id []byte
	jsonrpc.EachMember(params, func(k, v []byte) bool {
		if string(k) != "sessionId" {
			return true
		}
		id, _ = jsonrpc.StringBytes(v)
		return false
	})
	return id
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
		if s := c.sessions[string(sessionIDOf(req.Params))]; s != nil {
			if s.active != nil {
				return busy("prompt_in_progress", map[string]any{"sessionId": s.ID})
			}
			s.active = &reservation{req: req}
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
	var cancel context.CancelCauseFunc
	if r != nil {
		cancel = r.cancel
	}
	c.mu.Unlock()
	if cancel != nil {
		cancel(nil)
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
		c.mu.Lock()
		if s = c.sessions[string(sessionIDOf(req.Params))]; s != nil && s.active != nil && s.active.req == req {
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
					s.active.cancelLocked(rpc.ErrEndOfStream)
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
		return nil, notFound(id)
	}
	s.lastUsed = time.Now()
	return s, nil
}

// needsAuth lists the methods RequireAuth holds back until authenticate.
func needsAuth(method string) bool {
	switch method {
	case MethodSessionNew, MethodSessionLoad, MethodSessionResume, MethodPrompt:
		return true
	}
	return false
}

func (c *conn) handle(ctx context.Context, req *rpc.Request) (any, error) {
	if req.Method != MethodInitialize {
		c.mu.Lock()
		ready, authed := c.initialized, c.authenticated
		c.mu.Unlock()
		if !ready {
			c.releaseFor(req)
			return nil, jsonrpc.Errorf(jsonrpc.CodeInvalidRequest, "ACP connection must be initialized before %q", req.Method)
		}
		if c.agent.RequireAuth && !authed && needsAuth(req.Method) {
			c.releaseFor(req)
			if req.IsNotification() {
				return nil, nil
			}
			return nil, errAuthRequired()
		}
	}
	switch req.Method {
	case MethodInitialize:
		return c.initialize(req)
	case MethodAuthenticate:
		return c.authenticate(ctx, req)
	case MethodSessionNew:
		return c.newSession(ctx, req)
	case MethodSetMode:
		return c.setMode(req)
	case MethodSetConfigOption:
		return c.setConfigOption(req)
	case MethodSessionLoad:
		return c.loadSession(ctx, req)
	case MethodSessionResume:
		return c.resumeSession(ctx, req)
	case MethodCancel:
		c.cancelTurn(req)
		if req.IsNotification() {
			return nil, nil
		}
		return emptyResult(), nil // sent as a request by mistake: still honoured
	case MethodSessionClose:
		var p sessionParams
		if err := req.UnmarshalParams(&p); err != nil {
			return nil, err
		}
		c.mu.Lock()
		s := c.sessions[p.SessionID]
		if s != nil && s.active != nil {
			s.active.cancelLocked(errCancelledTurn)
		}
		delete(c.sessions, p.SessionID)
		c.mu.Unlock()
		if s != nil {
			s.closed.Store(true)
			c.closeBridges(s)
		}
		return emptyResult(), nil
	case MethodPrompt:
		if req.IsNotification() {
			return nil, nil // nothing was admitted for it; nothing to answer
		}
		return c.prompt(ctx, req)
	case MethodMCPConnect, MethodMCPMessage, MethodMCPDisconnect:
		if req.IsNotification() {
			c.deliverMCPNotification(req) // from a server the client offers, to the agent's MCPConnection
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

// Pre-encoded results: a handler returns a pointer to one of these, which
// rpc sends as it is, with no map, no reflection and no allocation. They
// are never written to.
var (
	resultEmpty     = jsonrpc.Encoded(`{}`)
	resultEndTurn   = jsonrpc.Encoded(`{"stopReason":"end_turn"}`)
	resultCancelled = jsonrpc.Encoded(`{"stopReason":"cancelled"}`)
)

func emptyResult() any { return &resultEmpty }

func stopResult(reason StopReason) any {
	switch reason {
	case EndTurn:
		return &resultEndTurn
	case Cancelled:
		return &resultCancelled
	}
	b := append(jsonrpc.AppendString([]byte(`{"stopReason":`), string(reason)), '}')
	e := jsonrpc.Encoded(b)
	return &e
}

// decodeClientCapabilities reads clientCapabilities member by member, each
// falling back to its default when malformed (the schema's
// x-deserialize-default-on-error): a client's unexpected shape for one
// capability costs it that capability, not the connection.
func decodeClientCapabilities(raw json.RawMessage) ClientCapabilities {
	var caps ClientCapabilities
	// Keys are read exactly, as JSON and the schema spell them (encoding/json
	// would also take "Terminal"); a capability is on only when it is true.
	isTrue := func(v []byte) bool { return string(v) == "true" }
	_ = jsonrpc.Members(raw, func(k, v []byte) bool {
		switch string(k) {
		case "fs":
			_ = jsonrpc.Members(v, func(k, v []byte) bool {
				switch string(k) {
				case "readTextFile":
					caps.FS.ReadTextFile = isTrue(v)
				case "writeTextFile":
					caps.FS.WriteTextFile = isTrue(v)
				}
				return true
			})
		case "terminal":
			caps.Terminal = isTrue(v)
		case "auth":
			_ = jsonrpc.Members(v, func(k, v []byte) bool {
				if string(k) == "terminal" {
					caps.Auth.Terminal = isTrue(v)
				}
				return true
			})
		}
		return true
	})
	return caps
}

func (c *conn) initialize(req *rpc.Request) (any, error) {
	var p struct {
		ProtocolVersion    *int            `json:"protocolVersion"`
		ClientCapabilities json.RawMessage `json:"clientCapabilities"`
	}
	if err := req.UnmarshalParams(&p); err != nil || p.ProtocolVersion == nil {
		return nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "invalid params: initialize needs protocolVersion")
	}
	caps := decodeClientCapabilities(p.ClientCapabilities)
	c.client.Store(&peerClient{caps: caps, raw: p.ClientCapabilities})
	// A "terminal" method is for clients that can run it (the schema's
	// auth.terminal "determines which authentication method types the
	// agent may include").
	methods := make([]AuthMethod, 0, len(c.agent.AuthMethods))
	for _, m := range c.agent.AuthMethods {
		if m.Type != "terminal" || caps.Auth.Terminal {
			methods = append(methods, m)
		}
	}
	c.mu.Lock()
	c.initialized = true
	c.mu.Unlock()
	// The agent answers with the client's version if it supports it, or
	// its own latest.
	return map[string]any{
		"protocolVersion":   ProtocolVersion,
		"agentCapabilities": c.agentCapabilities(),
		"authMethods":       methods,
		"agentInfo":         c.agent.Info,
	}, nil
}

// agentCapabilities is Agent.Capabilities with what the runtime serves
// merged in: an object the agent gave (sessionCapabilities,
// mcpCapabilities) keeps its members and gains ours.
func (c *conn) agentCapabilities() map[string]any {
	caps := map[string]any{}
	for k, v := range c.agent.Capabilities {
		caps[k] = v
	}
	if c.agent.LoadSession != nil {
		caps["loadSession"] = true
	}
	sc := asObject(caps["sessionCapabilities"])
	for _, k := range []string{"close", "resume"} {
		if v, ok := sc[k]; !ok || v == nil {
			sc[k] = map[string]any{}
		}
	}
	caps["sessionCapabilities"] = sc
	if c.agent.MCPOverACP {
		mc := asObject(caps["mcpCapabilities"])
		mc["acp"] = true
		caps["mcpCapabilities"] = mc
	}
	return caps
}

// asObject returns a copy of v as a JSON object's members (v a map, a
// struct, raw JSON...); an empty map when v is absent or not an object.
func asObject(v any) map[string]any {
	out := map[string]any{}
	if v == nil {
		return out
	}
	if m, ok := v.(map[string]any); ok {
		for k, x := range m {
			out[k] = x
		}
		return out
	}
	if b, err := json.Marshal(v); err == nil {
		_ = json.Unmarshal(b, &out)
	}
	return out
}

func (c *conn) authenticate(ctx context.Context, req *rpc.Request) (any, error) {
	var p struct {
		MethodID string `json:"methodId"`
	}
	if err := req.UnmarshalParams(&p); err != nil {
		return nil, err
	}
	if p.MethodID == "" {
		return nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "invalid params: authenticate needs methodId")
	}
	if len(c.agent.AuthMethods) > 0 {
		listed := false
		for _, m := range c.agent.AuthMethods {
			listed = listed || m.ID == p.MethodID
		}
		if !listed {
			return nil, jsonrpc.NewError(jsonrpc.CodeInvalidParams,
				fmt.Sprintf("invalid params: %q is not one of this agent's authMethods", p.MethodID),
				map[string]any{"methodId": p.MethodID})
		}
	}
	if c.agent.Authenticate != nil {
		if err := c.agent.Authenticate(ctx, p.MethodID); err != nil {
			return nil, err
		}
	}
	c.mu.Lock()
	c.authenticated = true
	c.mu.Unlock()
	return emptyResult(), nil
}

func (c *conn) newSession(ctx context.Context, req *rpc.Request) (any, error) {
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
	s := &Session{Cwd: p.Cwd, lastUsed: time.Now(), mcpServers: p.McpServers, c: c}
	c.mu.Lock()
	// A session/load may have brought in an id of the form we mint (from
	// an earlier connection): skip it rather than replace that session.
	for s.ID == "" || c.sessions[s.ID] != nil {
		s.ID = "sess-" + strconv.FormatInt(c.nextSession.Add(1), 10)
	}
	c.mu.Unlock()
	if c.agent.NewSession != nil {
		if err := c.agent.NewSession(ctx, s); err != nil {
			return nil, err
		}
	}
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
		SessionID string          `json:"sessionId"`
		ConfigID  string          `json:"configId"`
		Type      string          `json:"type"`
		Value     json.RawMessage `json:"value"`
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
		if o.Type == "boolean" {
			var b bool
			if (p.Type != "" && p.Type != "boolean") || json.Unmarshal(p.Value, &b) != nil || len(p.Value) == 0 || p.Value[0] == 'n' {
				return nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "invalid params: %q is a boolean option: value must be true or false", p.ConfigID)
			}
			s.config.Store(o.ID, strconv.FormatBool(b))
			return map[string]any{"configOptions": c.configOptions(s)}, nil
		}
		var v string
		if p.Type == "boolean" || json.Unmarshal(p.Value, &v) != nil || len(p.Value) == 0 || p.Value[0] != '"' {
			return nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "invalid params: %q is a select option: value must be one of its values", p.ConfigID)
		}
		for _, ch := range o.Options {
			if ch.Value == v {
				s.config.Store(o.ID, v)
				return map[string]any{"configOptions": c.configOptions(s)}, nil
			}
		}
		return nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "invalid params: %q is not a value of %q", v, p.ConfigID)
	}
	return nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "invalid params: unknown config option %q", p.ConfigID)
}

// loadParams are session/load's and session/resume's params.
type loadParams struct {
	SessionID  string            `json:"sessionId"`
	Cwd        string            `json:"cwd"`
	McpServers []json.RawMessage `json:"mcpServers"`
}

// loadSession is session/load: the agent replays the history as updates,
// all before the response.
func (c *conn) loadSession(ctx context.Context, req *rpc.Request) (any, error) {
	if c.agent.LoadSession == nil {
		return nil, jsonrpc.Errorf(jsonrpc.CodeMethodNotFound, "method not found: %s (this agent cannot load sessions)", req.Method)
	}
	var p loadParams
	if err := req.UnmarshalParams(&p); err != nil {
		return nil, err
	}
	if p.SessionID == "" || p.Cwd == "" || p.McpServers == nil {
		return nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "invalid params: session/load needs sessionId, cwd and mcpServers")
	}
	return c.attach(ctx, p, func(update any) error {
		msg, err := updateMessage(p.SessionID, update)
		if err != nil {
			return err
		}
		return req.Notify(MethodUpdate, json.RawMessage(msg))
	})
}

// resumeSession is session/resume: the session is reattached without a
// replay. One this connection still holds answers as it is; another is
// asked of LoadSession, whose replay is discarded.
func (c *conn) resumeSession(ctx context.Context, req *rpc.Request) (any, error) {
	var p loadParams
	if err := req.UnmarshalParams(&p); err != nil {
		return nil, err
	}
	if p.SessionID == "" || p.Cwd == "" {
		return nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "invalid params: session/resume needs sessionId and cwd")
	}
	c.mu.Lock()
	s := c.sessions[p.SessionID]
	if s != nil {
		s.lastUsed = time.Now()
	}
	c.mu.Unlock()
	if s != nil {
		res := map[string]any{}
		c.describe(s, res)
		return res, nil
	}
	if c.agent.LoadSession == nil {
		return nil, notFound(p.SessionID)
	}
	if p.McpServers == nil {
		p.McpServers = []json.RawMessage{}
	}
	return c.attach(ctx, p, func(any) error { return nil })
}

// attach asks LoadSession for a session and, when it knows it, makes it
// this connection's.
func (c *conn) attach(ctx context.Context, p loadParams, replay func(any) error) (any, error) {
	s := &Session{ID: p.SessionID, Cwd: p.Cwd, lastUsed: time.Now(), mcpServers: p.McpServers, c: c}
	known, err := c.agent.LoadSession(ctx, s, replay)
	if err != nil {
		return nil, err
	}
	if !known {
		return nil, notFound(p.SessionID)
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
	return emptyResult(), nil
}

// cancelTurn is session/cancel: the session's active turn (running or not
// yet started) is cancelled; the next turn gets a fresh token (guarantee A5).
func (c *conn) cancelTurn(req *rpc.Request) {
	id := sessionIDOf(req.Params)
	if id == nil {
		return
	}
	c.mu.Lock()
	if s := c.sessions[string(id)]; s != nil && s.active != nil {
		s.active.cancelLocked(errCancelledTurn)
	}
	c.mu.Unlock()
}

// decodePrompt reads session/prompt's params without encoding/json, which
// costs a dozen allocations for even a one-line prompt. It only checks
// the shape and finds the parts: sid and prompt alias params (rpc keeps
// them immutable for the request's life and after it), n is the number of
// blocks, and fillBlocks decodes them once their destination is known (a
// one-block prompt goes into its reservation: no allocation but its
// text). ok is false for anything this fast path does not read exactly as
// encoding/json would (a missing or non-string sessionId, a prompt that
// is not an array of objects, a type or text that is not a string); the
// caller then decodes with encoding/json, for its errors.
func decodePrompt(params []byte) (sid, prompt []byte, n int, ok bool) {
	ok = true
	jsonrpc.EachMember(params, func(k, v []byte) bool {
		switch string(k) {
		case "sessionId":
			sid, ok = jsonrpc.StringBytes(v)
		case "prompt":
			prompt = v
		}
		return ok
	})
	if !ok || sid == nil || len(prompt) == 0 || prompt[0] != '[' {
		return nil, nil, 0, false
	}
	jsonrpc.EachElement(prompt, func(v []byte) bool {
		ok = decodeBlock(v, nil)
		n++
		return ok
	})
	return sid, prompt, n, ok
}

// decodePromptSlow decodes with encoding/json what decodePrompt does not
// read, for its -32602 errors. A function of its own so that its struct's
// escape to the heap is paid only here.
func decodePromptSlow(req *rpc.Request) (sid []byte, blocks []ContentBlock, err error) {
	var p struct {
		SessionID string         `json:"sessionId"`
		Prompt    []ContentBlock `json:"prompt"`
	}
	if err := req.UnmarshalParams(&p); err != nil {
		return nil, nil, err
	}
	return []byte(p.SessionID), p.Prompt, nil
}

// fillBlocks decodes the n blocks decodePrompt checked into dst.
func fillBlocks(prompt []byte, dst []ContentBlock) {
	i := 0
	jsonrpc.EachElement(prompt, func(v []byte) bool {
		if i < len(dst) {
			decodeBlock(v, &dst[i])
		}
		i++
		return i < len(dst)
	})
}

// decodeBlock is ContentBlock.UnmarshalJSON's fast path (see
// decodePrompt); with a nil b it only checks.
func decodeBlock(v []byte, b *ContentBlock) bool {
	if len(v) == 0 || v[0] != '{' {
		return false
	}
	ok := true
	jsonrpc.EachMember(v, func(k, val []byte) bool {
		var s []byte
		switch string(k) {
		case "type":
			if s, ok = jsonrpc.StringBytes(val); ok && b != nil {
				b.Type = blockType(s)
			}
		case "text":
			if s, ok = jsonrpc.StringBytes(val); ok && b != nil {
				b.Text = string(s)
			}
		}
		return ok
	})
	if b != nil {
		b.Raw = v[:len(v):len(v)]
	}
	return ok
}

// blockType returns the schema's block types as constants: no copy.
func blockType(t []byte) string {
	switch string(t) {
	case "text":
		return "text"
	case "image":
		return "image"
	case "audio":
		return "audio"
	case "resource_link":
		return "resource_link"
	case "resource":
		return "resource"
	}
	return string(t)
}

func (c *conn) prompt(ctx context.Context, req *rpc.Request) (any, error) {
	sid, raw, n, fast := decodePrompt(req.Params)
	var slowBlocks []ContentBlock
	if !fast {
		var err error
		if sid, slowBlocks, err = decodePromptSlow(req); err != nil {
			c.releaseFor(req)
			return nil, err
		}
	}
	c.mu.Lock()
	s := c.sessions[string(sid)]
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
		r = &reservation{req: req}
		s.active = r
	}
	c.mu.Unlock()
	if refused != nil {
		c.release(nil, nil)
		return nil, refused
	}
	if s == nil || r == nil {
		c.release(nil, nil)
		return nil, notFound(string(sid))
	}
	defer c.release(s, r) // on completion and on panic (guarantee A8)
	blocks := slowBlocks
	if fast {
		switch n {
		case 0:
			blocks = []ContentBlock{}
		case 1:
			blocks = r.one[:]
		default:
			blocks = make([]ContentBlock, n)
		}
		fillBlocks(raw, blocks)
	}

	// The turn's context ends with the request's ($/cancel_request, the
	// connection) or with the reservation's token (session/cancel, EOF),
	// which cancels it directly from now on.
	tctx, cancel := context.WithCancelCause(ctx)
	c.mu.Lock()
	r.cancel = cancel
	if r.cause != nil {
		cancel(r.cause)
	}
	c.mu.Unlock()

	t := &r.turn
	t.Session, t.Prompt, t.req, t.c = s, blocks, req, c
	reason, err := c.agent.Prompt(tctx, t)
	if tctx.Err() != nil {
		// "MUST reply with stopReason cancelled, not an error".
		return stopResult(Cancelled), nil
	}
	if err != nil {
		return nil, err
	}
	if reason == "" {
		reason = EndTurn
	}
	return stopResult(reason), nil
}
