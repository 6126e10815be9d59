package acpclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/agentwire/agentwire/acp"
	"github.com/agentwire/agentwire/jsonrpc"
)

// SessionConfig describes a session to open.
type SessionConfig struct {
	// Cwd is the session's working directory, absolute. Default: the
	// process's working directory.
	Cwd string
	// AddDirs are additionalDirectories (sent only when the agent
	// advertises sessionCapabilities.additionalDirectories).
	AddDirs []string
	// Roots confine the file system served to the agent. Default: Cwd and
	// AddDirs.
	Roots []string
	// MCPServers are passed to the agent as they are (an http or sse entry
	// needs the agent's mcpCapabilities for it).
	MCPServers []acp.MCPServer
	// ProvideMCP offers MCP servers of this process to the agent over the
	// ACP connection itself (mcpCapabilities.acp): no socket, no
	// subprocess.
	ProvideMCP []ProvidedMCP
	// Updates receives this session's updates instead of Options.Updates.
	Updates UpdateHandler
}

// Session is one ACP session of a Conn: made by NewSession, LoadSession or
// ResumeSession. Its state (modes, config options, commands, title, usage)
// follows the agent's updates, applied before each update's handler runs.
type Session struct {
	conn    *Conn
	id      string
	cwd     string
	roots   []string
	handler UpdateHandler

	// ctx ends when the session is closed or lost (Close, Conn.Close, the
	// agent gone); what the session owns (terminals, MCP connections,
	// pending permission questions) ends with it.
	ctx    context.Context
	cancel context.CancelCauseFunc

	backlog [][]byte // updates that arrived before the session/new result (guarded by conn.mu)

	mu       sync.Mutex
	turn     *turn
	closed   bool
	modes    []acp.SessionMode
	mode     string
	config   []acp.ConfigOption
	commands []acp.AvailableCommand
	title    string
	usage    *acp.Usage
}

// turn is one prompt in flight; done closes when it is cancelled, which
// answers its pending permission questions "cancelled".
type turn struct {
	done chan struct{}
	once sync.Once
}

func (t *turn) cancel() { t.once.Do(func() { close(t.done) }) }

// turnDone returns the current turn's cancellation, or nil (never ready)
// outside a turn.
func (s *Session) turnDone() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.turn == nil {
		return nil
	}
	return s.turn.done
}

// Mode returns the current mode id ("" when the agent offers no modes).
func (s *Session) Mode() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mode
}

// Modes returns the modes the agent offers for the session.
func (s *Session) Modes() []acp.SessionMode {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]acp.SessionMode(nil), s.modes...)
}

// ConfigOptions returns the session's config options with their current
// values.
func (s *Session) ConfigOptions() []acp.ConfigOption {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]acp.ConfigOption(nil), s.config...)
}

// Commands returns the slash commands the agent last advertised.
func (s *Session) Commands() []acp.AvailableCommand {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]acp.AvailableCommand(nil), s.commands...)
}

// Title returns the title the agent last gave the session.
func (s *Session) Title() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.title
}

// Usage returns the agent's last usage_update, or nil.
func (s *Session) Usage() *acp.Usage {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.usage
}

// Done is closed when the session is closed or lost; Err says why.
func (s *Session) Done() <-chan struct{} { return s.ctx.Done() }

// Err is nil while the session is usable, ErrSessionLost after its agent
// was restarted or went away, ErrClosed after Close.
func (s *Session) Err() error {
	if s.ctx.Err() == nil {
		return nil
	}
	return context.Cause(s.ctx)
}

// setup reads a session/new, load or resume result.
func (s *Session) setup(res json.RawMessage) error {
	var r struct {
		Modes         *acp.SessionModes  `json:"modes"`
		ConfigOptions []acp.ConfigOption `json:"configOptions"`
	}
	if len(res) > 0 && string(res) != "null" {
		if err := json.Unmarshal(res, &r); err != nil {
			return fmt.Errorf("acpclient: malformed session result: %w", err)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if r.Modes != nil {
		s.modes, s.mode = r.Modes.AvailableModes, r.Modes.CurrentModeID
	}
	if r.ConfigOptions != nil {
		s.config = r.ConfigOptions
	}
	return nil
}

// apply keeps the session's state current with an update, before the
// update's handler sees it.
func (s *Session) apply(u *Update) {
	switch u.Kind {
	case acp.UpdateCurrentMode, acp.UpdateConfigOption, acp.UpdateAvailableCommands, acp.UpdateSessionInfo, acp.UpdateUsage:
	default:
		return
	}
	v, err := u.Decode()
	if err != nil {
		s.conn.log.Warn("acpclient: ignoring a malformed update", "session", s.id, "kind", u.Kind, "error", err)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch v := v.(type) {
	case *acp.CurrentMode:
		s.mode = v.CurrentModeID
	case *acp.ConfigOptions:
		s.config = v.ConfigOptions
	case *acp.AvailableCommands:
		s.commands = v.AvailableCommands
	case *acp.SessionInfo:
		if v.Title != nil {
			s.title = *v.Title
		}
	case *acp.Usage:
		s.usage = v
	}
}

// usable refuses calls on a closed or lost session.
func (s *Session) usable() error {
	if err := s.Err(); err != nil {
		return err
	}
	return s.conn.usable()
}

// Prompt runs one turn: it sends session/prompt and returns the agent's
// stop reason once the agent answered and every update it sent before the
// answer has been handled. Text and resource_link blocks always go; image,
// audio and embedded resources need the agent's promptCapabilities (else a
// *NotSupportedError, nothing sent).
//
// When ctx ends first, the turn is cancelled the ACP way: session/cancel,
// then every pending permission question of the session answered
// "cancelled"; the agent then answers stopReason "cancelled", which Prompt
// returns with a nil error. An agent that does not answer within
// CancelGrace is abandoned: $/cancel_request is sent and Prompt returns
// ctx's cause.
func (s *Session) Prompt(ctx context.Context, blocks ...acp.ContentBlock) (acp.StopReason, error) {
	c := s.conn
	if err := s.usable(); err != nil {
		return "", err
	}
	if err := c.checkBlocks(blocks); err != nil {
		return "", err
	}
	if ctx.Err() != nil {
		return "", context.Cause(ctx) // nothing sent: there is no turn to cancel
	}
	if !c.promptStarted() {
		return "", ErrClosed
	}
	defer c.prompts.Done()
	t := &turn{done: make(chan struct{})}
	s.mu.Lock()
	owner := s.turn == nil
	if owner {
		s.turn = t
	}
	s.mu.Unlock()
	if owner {
		defer func() {
			s.mu.Lock()
			if s.turn == t {
				s.turn = nil
			}
			s.mu.Unlock()
		}()
	}

	// The call itself is not tied to ctx: when ctx ends, the turn is
	// cancelled the ACP way and the agent's "cancelled" awaited (for
	// CancelGrace) before the request is abandoned. A ctx that ends in the
	// microseconds while the request is being queued can put session/cancel
	// on the wire first; the agent then finishes the turn normally or the
	// grace abandons it.
	callCtx, callCancel := context.WithCancel(context.WithoutCancel(ctx))
	defer callCancel()
	answered := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		nctx, ncancel := context.WithTimeout(context.Background(), c.opts.CancelGrace)
		defer ncancel()
		s.cancelTurn(nctx, t)
		select {
		case <-answered:
		case <-nctx.Done():
			callCancel() // abandon: rpc sends $/cancel_request
		case <-s.ctx.Done():
			callCancel()
		}
	})
	if blocks == nil {
		blocks = []acp.ContentBlock{}
	}
	res, err := c.cl.Call(callCtx, acp.MethodPrompt, struct {
		SessionID string             `json:"sessionId"`
		Prompt    []acp.ContentBlock `json:"prompt"`
	}{s.id, blocks})
	close(answered)
	if !stop() && err != nil && callCtx.Err() != nil {
		// The AfterFunc ran (ctx ended) and gave up on the agent.
		return "", context.Cause(ctx)
	}
	if err != nil {
		return "", c.classify(err)
	}
	var r struct {
		StopReason acp.StopReason `json:"stopReason"`
	}
	if err := json.Unmarshal(res, &r); err != nil {
		return "", fmt.Errorf("acpclient: malformed session/prompt result: %w", err)
	}
	// Even when ctx ended (a cancelled turn), the updates the agent sent
	// before its answer are handled before the answer is returned.
	c.waitUpdates(context.WithoutCancel(ctx))
	return r.StopReason, nil
}

// Cancel cancels the session's turn the ACP way: session/cancel goes on
// the wire first, then every pending permission question of the turn is
// answered "cancelled" (and any asked until the prompt returns). The
// prompt itself then returns stopReason "cancelled".
func (s *Session) Cancel(ctx context.Context) error {
	if err := s.usable(); err != nil {
		return err
	}
	s.mu.Lock()
	t := s.turn
	s.mu.Unlock()
	return s.cancelTurn(ctx, t)
}

func (s *Session) cancelTurn(ctx context.Context, t *turn) error {
	// The notification is queued before the permission answers: rpc's one
	// output queue keeps that order on the wire, so an agent never reads
	// "cancelled" as the user's answer to an ordinary question.
	err := s.conn.cl.Notify(ctx, acp.MethodCancel, struct {
		SessionID string `json:"sessionId"`
	}{s.id})
	if t != nil {
		t.cancel()
	}
	return err
}

// SetMode switches the session's mode (session/set_mode); the agent must
// offer modes for the session.
func (s *Session) SetMode(ctx context.Context, modeID string) error {
	if err := s.usable(); err != nil {
		return err
	}
	s.mu.Lock()
	hasModes := len(s.modes) > 0
	s.mu.Unlock()
	if !hasModes && !s.conn.opts.IgnoreCapabilities {
		return &NotSupportedError{Method: acp.MethodSetMode, Capability: "session modes"}
	}
	_, err := s.conn.cl.Call(ctx, acp.MethodSetMode, struct {
		SessionID string `json:"sessionId"`
		ModeID    string `json:"modeId"`
	}{s.id, modeID})
	if err != nil {
		return s.conn.classify(err)
	}
	s.mu.Lock()
	s.mode = modeID
	s.mu.Unlock()
	s.conn.waitUpdates(ctx)
	return nil
}

// SetConfigOption sets a config option (session/set_config_option): value
// is a string for a select option, a bool for a boolean one. The agent's
// answer (the whole list) replaces the session's options, which it returns.
func (s *Session) SetConfigOption(ctx context.Context, configID string, value any) ([]acp.ConfigOption, error) {
	if err := s.usable(); err != nil {
		return nil, err
	}
	params := map[string]any{"sessionId": s.id, "configId": configID, "value": value}
	switch value.(type) {
	case bool:
		params["type"] = "boolean"
	case string:
	default:
		return nil, fmt.Errorf("acpclient: config value must be a string or a bool, not %T", value)
	}
	res, err := s.conn.cl.Call(ctx, acp.MethodSetConfigOption, params)
	if err != nil {
		return nil, s.conn.classify(err)
	}
	if err := s.setup(res); err != nil {
		return nil, err
	}
	s.conn.waitUpdates(ctx)
	return s.ConfigOptions(), nil
}

// Close ends the session: pending permission questions are answered
// "cancelled", session/close is sent when the agent offers it, and what the
// session owns locally (terminals, MCP connections, open roots) is
// released, whatever the agent answers.
func (s *Session) Close(ctx context.Context) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	t := s.turn
	s.mu.Unlock()
	if t != nil {
		t.cancel()
	}
	c := s.conn
	var err error
	if s.Err() == nil && c.usable() == nil && c.caps.Offers(acp.MethodSessionClose) {
		_, err = c.cl.Call(ctx, acp.MethodSessionClose, struct {
			SessionID string `json:"sessionId"`
		}{s.id})
		var je *jsonrpc.Error
		if errors.As(err, &je) && je.Code == acp.CodeResourceNotFound {
			err = nil // already gone: what we wanted
		}
		err = c.classify(err)
	}
	c.forget(s, ErrClosed)
	return err
}
