package acpclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"
	"weak"

	"github.com/agentwire/agentwire/acp"
	"github.com/agentwire/agentwire/client"
	"github.com/agentwire/agentwire/jsonrpc"
	"github.com/agentwire/agentwire/process"
	"github.com/agentwire/agentwire/rpc"
)

// Parking bounds: updates for a session whose session/new result has not
// been read yet (agents send available_commands_update first).
const (
	maxParkedUpdates = 256
	maxParkedBytes   = 1 << 20
)

// Conn is a client connection to one ACP agent, initialized.
type Conn struct {
	opts  Options
	log   *slog.Logger
	cl    *client.Client
	perms PermissionPolicy
	fs    FileSystem
	fsw   FileWriter
	terms *terminals
	mcp   *mcpProvider

	declared    acp.ClientCapabilities
	agentInfo   acp.Implementation
	version     int
	caps        acp.AgentCapabilities
	capsRaw     json.RawMessage
	authMethods []acp.AuthMethod

	mu       sync.Mutex
	sessions map[string]*Session
	creating int // session/new calls in flight: an unknown session's updates are parked meanwhile
	parked   map[string][][]byte
	parkedN  int
	parkedB  int
	closed   bool
	prompts  sync.WaitGroup // Prompt calls in flight (Close gives them CancelGrace)

	// The watermark (watermark.go) of the current agent connection, and
	// the connections it replaced.
	wm        atomic.Pointer[watermark]
	retiredMu sync.Mutex
	retired   []weak.Pointer[rpc.Conn]
	deliverMu sync.Mutex // one update handler at a time, backlogs first
	upd       Update     // the Update handed to handlers (deliverMu held)
	undeliv   [][]byte   // parked updates whose session/new answered without them (c.mu)

	updates, orphans, parkedTotal, handlerErrors, refused atomic.Int64
	perm                                                  permissionCounters
	policySlots                                           chan struct{} // permission policies running
	refusedLog                                            throttle

	closeOnce sync.Once
	closeRes  process.ShutdownResult
	onClose   []func() // Pipe: the in-memory agent
}

// Stats counts what a connection has seen.
type Stats struct {
	Updates       int64 // session/update notifications handled
	OrphanUpdates int64 // updates for a session this connection does not know
	ParkedUpdates int64 // updates that arrived before their session/new result
	HandlerErrors int64 // update handlers that returned an error or panicked
	Refused       int64 // agent requests for methods this client did not declare
	Permissions   PermissionStats
	FS            FSStats
	Terminals     TerminalStats
	MCP           MCPStats
	Transport     client.Stats // stdout violations, late responses, restarts
}

// Start launches an agent (process.Start: its own process group, stderr
// drained and kept as a tail) and initializes it. ctx bounds only the
// start and initialize; cancelling it later does not stop the agent.
func Start(ctx context.Context, cmd process.Command, opts *Options) (*Conn, error) {
	c := newConn(opts)
	cl, err := client.Start(cmd, c.transport())
	if err != nil {
		return nil, err
	}
	c.cl = cl
	if err := c.initialize(ctx); err != nil {
		c.cl.Close()
		return nil, err
	}
	return c, nil
}

// New initializes an agent over an existing stream: r carries the agent's
// messages, w takes ours (closed by Close when it has a Close method).
func New(ctx context.Context, r io.Reader, w io.Writer, opts *Options) (*Conn, error) {
	c := newConn(opts)
	c.cl = client.New(r, w, c.transport())
	if err := c.initialize(ctx); err != nil {
		c.cl.Close()
		return nil, err
	}
	return c, nil
}

// Pipe runs an agent of package acp in this process and returns a client
// connected to it through in-memory pipes: the whole protocol, no
// subprocess. Close ends both.
func Pipe(agent *acp.Agent, agentOpts *acp.Options, opts *Options) (*Conn, error) {
	toAgent, fromClient := io.Pipe()
	toClient, fromAgent := io.Pipe()
	h, o := acp.ConnOptions(agent, agentOpts, nil)
	ac := rpc.New(toAgent, fromAgent, h, o)
	agentDone := make(chan struct{})
	go func() {
		defer close(agentDone)
		_ = ac.Wait()
		_ = fromAgent.Close()
		_ = toAgent.Close()
	}()
	c := newConn(opts)
	c.onClose = append(c.onClose, func() {
		_ = ac.Close()
		<-agentDone
	})
	c.cl = client.New(toClient, fromClient, c.transport())
	ctx, cancel := context.WithTimeout(context.Background(), c.opts.InitTimeout)
	defer cancel()
	if err := c.initialize(ctx); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

func newConn(o *Options) *Conn {
	var opts Options
	if o != nil {
		opts = *o
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Info.Name == "" {
		opts.Info = acp.Implementation{Name: "agentwire", Version: "dev"}
	}
	if opts.CancelGrace <= 0 {
		opts.CancelGrace = DefaultCancelGrace
	}
	if opts.InitTimeout <= 0 {
		opts.InitTimeout = DefaultInitTimeout
	}
	if opts.MaxQueuedUpdates <= 0 {
		opts.MaxQueuedUpdates = DefaultMaxQueuedUpdates
	}
	if opts.MaxQueuedBytes <= 0 {
		opts.MaxQueuedBytes = DefaultMaxQueuedBytes
	}
	if opts.MaxMCPConnections <= 0 {
		opts.MaxMCPConnections = DefaultMaxMCPConnections
	}
	if opts.MaxPendingPermissions <= 0 {
		opts.MaxPendingPermissions = DefaultMaxPendingPermissions
	}
	c := &Conn{opts: opts, log: opts.Logger, sessions: map[string]*Session{}, parked: map[string][][]byte{},
		policySlots: make(chan struct{}, opts.MaxPendingPermissions)}
	c.refusedLog.log = c.log
	c.perms = opts.Permissions
	if c.perms == nil {
		c.perms = DenyAll
	}
	c.fs, _, _ = serveFS(opts.FS, c.log)
	if c.fs != NoFiles {
		c.declared.FS.ReadTextFile = true
		if w, ok := c.fs.(FileWriter); ok {
			if wr, ok := c.fs.(interface{ Writable() bool }); !ok || wr.Writable() {
				c.fsw = w
				c.declared.FS.WriteTextFile = true
			}
		}
	}
	if opts.Terminals != nil {
		c.terms = newTerminals(*opts.Terminals, c.log)
		c.declared.Terminal = true
	}
	c.declared.Auth.Terminal = opts.TerminalAuth
	c.mcp = newMCPProvider(c.Call, c.Notify, opts.MaxMCPConnections, c.log)
	return c
}

// transport is the client.Options of the connection: ACP's framing and
// cancellation, session/update as a barrier (receive order, backpressure),
// and the watermark's counter.
func (c *Conn) transport() *client.Options {
	var t client.Options
	if c.opts.Transport != nil {
		t = *c.opts.Transport
	}
	t.Handler = rpc.HandlerFunc(c.handle)
	t.Admit = c.admit
	t.IsBarrier = isUpdate
	t.RejectBatches = true
	t.Cancel = &rpc.ACPCancel
	t.NoCancel = false
	t.InboundCancel = []rpc.CancelMethod{rpc.ACPCancel}
	t.MaxQueuedRequests = c.opts.MaxQueuedUpdates
	t.MaxQueuedBytes = c.opts.MaxQueuedBytes
	// Never -32000 for a full queue: agents read that as "authentication
	// required".
	t.BusyError = jsonrpc.NewError(acp.CodeResourceLimit, "client busy", map[string]any{"reason": "connection_busy", "limit": c.opts.MaxQueuedUpdates})
	if t.Logger == nil {
		t.Logger = c.log
	}
	if t.Restart != nil {
		userHandshake, userRestart := t.Handshake, t.OnRestart
		t.Handshake = func(ctx context.Context, conn *rpc.Conn) error {
			if userHandshake != nil {
				if err := userHandshake(ctx, conn); err != nil {
					return err
				}
			}
			// No call reaches the new process before this returns: every
			// session known now was the old process's.
			c.loseSessions()
			c.watermarkFor(conn)
			res, err := conn.Call(ctx, acp.MethodInitialize, c.initParams())
			if err != nil {
				return err
			}
			return c.readInit(res)
		}
		t.OnRestart = userRestart
	}
	return &t
}

func isUpdate(method string) bool { return method == acp.MethodUpdate }

// admit counts updates in receive order, for the watermark. It runs on the
// reader (or under the connection's lock for held messages): nothing else.
func (c *Conn) admit(req *rpc.Request) error {
	if req.Method == acp.MethodUpdate {
		if w := c.watermarkFor(req.Conn()); w != nil {
			w.recv.Add(1)
		}
	}
	return nil
}

func (c *Conn) initParams() any {
	return struct {
		ProtocolVersion    int                    `json:"protocolVersion"`
		ClientCapabilities acp.ClientCapabilities `json:"clientCapabilities"`
		ClientInfo         acp.Implementation     `json:"clientInfo"`
	}{acp.ProtocolVersion, c.declared, c.opts.Info}
}

// initialize is the first message, alone: nothing else is sent before its
// result (some agents refuse what arrives before they answered it).
func (c *Conn) initialize(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, c.opts.InitTimeout)
	defer cancel()
	res, err := c.cl.Call(ctx, acp.MethodInitialize, c.initParams())
	if err != nil {
		return fmt.Errorf("acpclient: initialize: %w", err)
	}
	return c.readInit(res)
}

func (c *Conn) readInit(res json.RawMessage) error {
	var r struct {
		ProtocolVersion   int                `json:"protocolVersion"`
		AgentCapabilities json.RawMessage    `json:"agentCapabilities"`
		AuthMethods       []acp.AuthMethod   `json:"authMethods"`
		AgentInfo         acp.Implementation `json:"agentInfo"`
	}
	if err := json.Unmarshal(res, &r); err != nil {
		return fmt.Errorf("acpclient: malformed initialize result: %w", err)
	}
	if r.ProtocolVersion != acp.ProtocolVersion {
		return &VersionError{Agent: r.ProtocolVersion}
	}
	var caps acp.AgentCapabilities
	if len(r.AgentCapabilities) > 0 && string(r.AgentCapabilities) != "null" {
		if err := json.Unmarshal(r.AgentCapabilities, &caps); err != nil {
			return fmt.Errorf("acpclient: malformed agentCapabilities: %w", err)
		}
	}
	c.mu.Lock()
	c.version, c.caps, c.capsRaw, c.authMethods, c.agentInfo = r.ProtocolVersion, caps, r.AgentCapabilities, r.AuthMethods, r.AgentInfo
	c.mu.Unlock()
	return nil
}

// AgentInfo returns the agent's agentInfo.
func (c *Conn) AgentInfo() acp.Implementation {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.agentInfo
}

// ProtocolVersion returns the negotiated ACP version (1).
func (c *Conn) ProtocolVersion() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.version
}

// AgentCapabilities returns what the agent advertised.
func (c *Conn) AgentCapabilities() acp.AgentCapabilities {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.caps
}

// AgentCapabilitiesRaw returns the agentCapabilities object as sent, with
// what AgentCapabilities does not model.
func (c *Conn) AgentCapabilitiesRaw() json.RawMessage {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.capsRaw
}

// ClientCapabilities returns what this client declared: exactly what it
// serves.
func (c *Conn) ClientCapabilities() acp.ClientCapabilities { return c.declared }

// AuthMethods returns the agent's authentication methods (unknown types
// kept with their raw JSON).
func (c *Conn) AuthMethods() []acp.AuthMethod {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]acp.AuthMethod(nil), c.authMethods...)
}

// Authenticate runs one of the agent's methods (authenticate). A method of
// type "terminal" is not passed to the agent (the spec forbids it): the
// caller runs the agent's command with the method's args on a terminal.
func (c *Conn) Authenticate(ctx context.Context, methodID string) error {
	if err := c.usable(); err != nil {
		return err
	}
	for _, m := range c.AuthMethods() {
		if m.ID == methodID && m.Type == "terminal" {
			return fmt.Errorf("acpclient: auth method %q is a terminal login: run the agent's command with its args instead of authenticate", methodID)
		}
	}
	_, err := c.cl.Call(ctx, acp.MethodAuthenticate, struct {
		MethodID string `json:"methodId"`
	}{methodID})
	return c.classify(err)
}

// Logout ends the agent's authenticated state (needs auth.logout).
func (c *Conn) Logout(ctx context.Context) error {
	if err := c.gate(acp.MethodLogout, "auth.logout"); err != nil {
		return err
	}
	_, err := c.cl.Call(ctx, acp.MethodLogout, struct{}{})
	return c.classify(err)
}

// gate refuses locally a method the agent did not advertise.
func (c *Conn) gate(method, capability string) error {
	if err := c.usable(); err != nil {
		return err
	}
	if c.opts.IgnoreCapabilities || c.AgentCapabilities().Offers(method) {
		return nil
	}
	return &NotSupportedError{Method: method, Capability: capability}
}

func (c *Conn) usable() error {
	c.mu.Lock()
	closed := c.closed
	c.mu.Unlock()
	if closed {
		return ErrClosed
	}
	return c.cl.Err()
}

// NewSession opens a session (session/new). Updates the agent sends before
// its result (available commands, say) are delivered, in order, before
// NewSession returns.
func (c *Conn) NewSession(ctx context.Context, cfg SessionConfig) (*Session, error) {
	s, params, err := c.prepare(cfg, "")
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.creating++
	c.mu.Unlock()
	res, err := c.cl.Call(ctx, acp.MethodSessionNew, params)
	var id string
	if err == nil {
		var r struct {
			SessionID string `json:"sessionId"`
		}
		if jerr := json.Unmarshal(res, &r); jerr != nil || r.SessionID == "" {
			err = fmt.Errorf("acpclient: session/new result has no sessionId")
		}
		id = r.SessionID
	}
	if err == nil {
		err = s.setup(res)
	}
	c.mu.Lock()
	c.creating--
	if err == nil {
		if c.sessions[id] != nil {
			err = fmt.Errorf("acpclient: the agent gave session id %q twice", id)
		} else {
			s.id = id
			c.sessions[id] = s
			s.backlog = c.takeParked(id)
		}
	}
	if c.creating == 0 {
		// Nobody else will claim what is still parked: deliver it as
		// orphans, in the order it came.
		for pid := range c.parked {
			c.undeliv = append(c.undeliv, c.takeParked(pid)...)
		}
	}
	pending := len(c.undeliv) > 0 || len(s.backlog) > 0
	c.mu.Unlock()
	if pending {
		c.drainParked(ctx, s)
	}
	if err != nil {
		c.forget(s, ErrClosed)
		return nil, c.classify(err)
	}
	c.waitUpdates(ctx)
	return s, nil
}

// LoadSession resumes a session the agent stored (session/load, needs
// loadSession): the history the agent replays is delivered, in order,
// before LoadSession returns.
func (c *Conn) LoadSession(ctx context.Context, id string, cfg SessionConfig) (*Session, error) {
	if err := c.gate(acp.MethodSessionLoad, "loadSession"); err != nil {
		return nil, err
	}
	return c.reopen(ctx, acp.MethodSessionLoad, id, cfg)
}

// ResumeSession reattaches a session without a replay (session/resume,
// needs sessionCapabilities.resume).
func (c *Conn) ResumeSession(ctx context.Context, id string, cfg SessionConfig) (*Session, error) {
	if err := c.gate(acp.MethodSessionResume, "sessionCapabilities.resume"); err != nil {
		return nil, err
	}
	return c.reopen(ctx, acp.MethodSessionResume, id, cfg)
}

func (c *Conn) reopen(ctx context.Context, method, id string, cfg SessionConfig) (*Session, error) {
	if id == "" {
		return nil, errors.New("acpclient: " + method + " needs a session id")
	}
	s, params, err := c.prepare(cfg, id)
	if err != nil {
		return nil, err
	}
	// Registered before the request, so the replay finds it.
	c.mu.Lock()
	if c.sessions[id] != nil {
		c.mu.Unlock()
		c.forget(s, ErrClosed)
		return nil, fmt.Errorf("acpclient: session %q is already open on this connection", id)
	}
	c.sessions[id] = s
	c.mu.Unlock()
	res, err := c.cl.Call(ctx, method, params)
	if err == nil {
		err = s.setup(res)
	}
	if err != nil {
		c.forget(s, ErrClosed)
		return nil, c.classify(err)
	}
	c.waitUpdates(ctx)
	return s, nil
}

// ListSessions lists the agent's sessions (session/list, needs
// sessionCapabilities.list); cwd and cursor may be empty.
func (c *Conn) ListSessions(ctx context.Context, cwd, cursor string) (acp.SessionList, error) {
	var out acp.SessionList
	if err := c.gate(acp.MethodSessionList, "sessionCapabilities.list"); err != nil {
		return out, err
	}
	res, err := c.cl.Call(ctx, acp.MethodSessionList, struct {
		Cwd    string `json:"cwd,omitempty"`
		Cursor string `json:"cursor,omitempty"`
	}{cwd, cursor})
	if err != nil {
		return out, c.classify(err)
	}
	if err := json.Unmarshal(res, &out); err != nil {
		return out, fmt.Errorf("acpclient: malformed session/list result: %w", err)
	}
	return out, nil
}

// prepare checks a SessionConfig and builds the session and its params.
func (c *Conn) prepare(cfg SessionConfig, id string) (*Session, map[string]any, error) {
	if err := c.usable(); err != nil {
		return nil, nil, err
	}
	cwd := cfg.Cwd
	if cwd == "" {
		wd, err := os.Getwd()
		if err != nil {
			return nil, nil, fmt.Errorf("acpclient: no working directory: %w", err)
		}
		cwd = wd
	}
	if !filepath.IsAbs(cwd) {
		return nil, nil, fmt.Errorf("acpclient: the session's cwd must be absolute, not %q", cwd)
	}
	roots := cfg.Roots
	if roots == nil {
		roots = append([]string{cwd}, cfg.AddDirs...)
	}
	for _, r := range roots {
		if !filepath.IsAbs(r) {
			return nil, nil, fmt.Errorf("acpclient: a session root must be absolute, not %q", r)
		}
	}
	caps := c.AgentCapabilities()
	servers := make([]acp.MCPServer, 0, len(cfg.MCPServers)+len(cfg.ProvideMCP))
	for _, m := range cfg.MCPServers {
		ok := true
		switch m.Type {
		case "http":
			ok = caps.MCPCapabilities.HTTP
		case "sse":
			ok = caps.MCPCapabilities.SSE
		case "acp":
			ok = caps.MCPCapabilities.ACP
		}
		if !ok && !c.opts.IgnoreCapabilities {
			return nil, nil, &NotSupportedError{Method: "an MCP server of type " + m.Type, Capability: "mcpCapabilities." + m.Type}
		}
		servers = append(servers, m)
	}
	if len(cfg.ProvideMCP) > 0 && !caps.MCPCapabilities.ACP && !c.opts.IgnoreCapabilities {
		return nil, nil, &NotSupportedError{Method: "ProvideMCP", Capability: "mcpCapabilities.acp"}
	}
	if len(cfg.AddDirs) > 0 && !offersRaw(caps.SessionCapabilities.AdditionalDirectories) && !c.opts.IgnoreCapabilities {
		return nil, nil, &NotSupportedError{Method: "additional directories", Capability: "sessionCapabilities.additionalDirectories"}
	}
	if err := validateProvided(cfg.ProvideMCP); err != nil {
		return nil, nil, err
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	s := &Session{conn: c, id: id, cwd: cwd, roots: roots, handler: cfg.Updates, ctx: ctx, cancel: cancel}
	if o, ok := c.fs.(interface{ OpenSession(*Session) error }); ok && c.fs != NoFiles {
		if err := o.OpenSession(s); err != nil {
			cancel(ErrClosed)
			return nil, nil, fmt.Errorf("acpclient: the session's roots: %w", err)
		}
	}
	servers = append(servers, c.mcp.declare(s, cfg.ProvideMCP)...)
	params := map[string]any{"cwd": cwd, "mcpServers": servers}
	if id != "" {
		params["sessionId"] = id
	}
	if len(cfg.AddDirs) > 0 {
		params["additionalDirectories"] = cfg.AddDirs
	}
	return s, params, nil
}

func offersRaw(raw json.RawMessage) bool {
	return len(raw) > 0 && string(raw) != "null" && string(raw) != "false"
}

// checkBlocks refuses locally the prompt blocks the agent does not accept.
func (c *Conn) checkBlocks(blocks []acp.ContentBlock) error {
	if c.opts.IgnoreCapabilities {
		return nil
	}
	pc := c.AgentCapabilities().PromptCapabilities
	for _, b := range blocks {
		switch {
		case b.Type == "image" && !pc.Image:
			return &NotSupportedError{Method: "an image prompt block", Capability: "promptCapabilities.image"}
		case b.Type == "audio" && !pc.Audio:
			return &NotSupportedError{Method: "an audio prompt block", Capability: "promptCapabilities.audio"}
		case b.Type == "resource" && !pc.EmbeddedContext:
			return &NotSupportedError{Method: "an embedded resource block", Capability: "promptCapabilities.embeddedContext"}
		}
	}
	return nil
}

func (c *Conn) promptStarted() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return false
	}
	c.prompts.Add(1)
	return true
}

// Call sends any request to the agent (an extension method, say) and
// returns its raw result; an error response is a *jsonrpc.Error (or one of
// this package's errors for what they describe).
func (c *Conn) Call(ctx context.Context, method string, params any) (json.RawMessage, error) {
	res, err := c.cl.Call(ctx, method, params)
	return res, c.classify(err)
}

// Notify sends a notification to the agent.
func (c *Conn) Notify(ctx context.Context, method string, params any) error {
	return c.cl.Notify(ctx, method, params)
}

// Terminal returns a terminal the agent created, for a UI that renders a
// {"type":"terminal"} tool call content.
func (c *Conn) Terminal(id string) (*Terminal, bool) {
	if c.terms == nil {
		return nil, false
	}
	return c.terms.get(id)
}

// Session returns an open session by id.
func (c *Conn) Session(id string) (*Session, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s, ok := c.sessions[id]
	return s, ok
}

// Process returns the agent process (nil for New and Pipe).
func (c *Conn) Process() *process.Process { return c.cl.Process() }

// Done is closed when the connection has closed or its agent is gone for
// good; Err says why.
func (c *Conn) Done() <-chan struct{} { return c.cl.Done() }

// Err is nil while the connection is usable.
func (c *Conn) Err() error { return c.usable() }

// LastLoss returns why the agent process was last lost (with its exit
// status and stderr tail), or nil.
func (c *Conn) LastLoss() error { return c.cl.LastLoss() }

// Stats returns the connection's counters.
func (c *Conn) Stats() Stats {
	s := Stats{
		Updates: c.updates.Load(), OrphanUpdates: c.orphans.Load(), ParkedUpdates: c.parkedTotal.Load(),
		HandlerErrors: c.handlerErrors.Load(), Refused: c.refused.Load(),
		Permissions: c.perm.snapshot(), MCP: c.mcp.stats(), Transport: c.cl.Stats(), FS: fsStats(c.fs),
	}
	if c.terms != nil {
		s.Terminals = c.terms.stats()
	}
	return s
}

// Close ends the connection the ACP way: pending permission questions are
// answered "cancelled", terminals are killed and released, provided MCP
// connections end, then the agent's input is closed (an ACP agent cancels
// its turns at end of input and answers them) and prompts in flight get
// CancelGrace to be answered before the shutdown ladder runs. It returns
// how the agent process ended (zero for New and Pipe).
func (c *Conn) Close() process.ShutdownResult {
	c.closeOnce.Do(func() {
		c.mu.Lock()
		c.closed = true
		sessions := make([]*Session, 0, len(c.sessions))
		for _, s := range c.sessions {
			sessions = append(sessions, s)
		}
		c.mu.Unlock()
		for _, s := range sessions {
			s.mu.Lock()
			if s.turn != nil {
				s.turn.cancel()
			}
			s.mu.Unlock()
		}
		if c.terms != nil {
			c.terms.closeAll()
		}
		c.mcp.closeAll()
		_ = c.cl.CloseOutput()
		done := make(chan struct{})
		go func() {
			c.prompts.Wait()
			close(done)
		}()
		t := time.NewTimer(c.opts.CancelGrace)
		select {
		case <-done:
		case <-t.C:
		case <-c.cl.Done():
		}
		t.Stop()
		c.closeRes = c.cl.Close()
		<-done // the client is closed: every call has returned
		for _, s := range sessions {
			c.forget(s, ErrClosed)
		}
		if cl, ok := c.fs.(interface{ Close() }); ok {
			cl.Close()
		}
		for _, f := range c.onClose {
			f()
		}
	})
	return c.closeRes
}

// forget drops a session and releases what it owns.
func (c *Conn) forget(s *Session, cause error) {
	c.mu.Lock()
	if s.id != "" && c.sessions[s.id] == s {
		delete(c.sessions, s.id)
	}
	c.mu.Unlock()
	s.cancel(cause)
	if c.terms != nil {
		c.terms.closeSession(s)
	}
	c.mcp.closeSession(s)
	if sc, ok := c.fs.(interface{ CloseSession(*Session) }); ok {
		sc.CloseSession(s)
	}
}

// loseSessions marks every session lost after the agent was restarted:
// the new process knows none of them.
func (c *Conn) loseSessions() {
	c.mu.Lock()
	sessions := make([]*Session, 0, len(c.sessions))
	for _, s := range c.sessions {
		sessions = append(sessions, s)
	}
	c.mu.Unlock()
	for _, s := range sessions {
		c.forget(s, ErrSessionLost)
	}
}

// sessionFor finds the session an agent request names: -32002 otherwise.
func (c *Conn) sessionFor(id string) (*Session, error) {
	c.mu.Lock()
	s := c.sessions[id]
	c.mu.Unlock()
	if s == nil || s.ctx.Err() != nil {
		return nil, jsonrpc.NewError(acp.CodeResourceNotFound, "session not found: "+id, map[string]any{"sessionId": id})
	}
	return s, nil
}

// handle serves what the agent sends: session/update (a barrier, inline),
// permission questions, and the fs, terminal and MCP methods this client
// declared; anything else is -32601.
func (c *Conn) handle(ctx context.Context, req *rpc.Request) (any, error) {
	switch req.Method {
	case acp.MethodUpdate:
		c.handleUpdate(ctx, req)
		return nil, nil
	case acp.MethodRequestPermission:
		if req.IsNotification() {
			return nil, nil
		}
		return c.requestPermission(ctx, req)
	case acp.MethodReadTextFile:
		if c.declared.FS.ReadTextFile {
			return c.readTextFile(ctx, req)
		}
	case acp.MethodWriteTextFile:
		if c.declared.FS.WriteTextFile {
			return c.writeTextFile(ctx, req)
		}
	case acp.MethodTerminalCreate, acp.MethodTerminalOutput, acp.MethodTerminalWait, acp.MethodTerminalKill, acp.MethodTerminalRelease:
		if c.terms != nil {
			var p struct {
				SessionID string `json:"sessionId"`
			}
			if err := req.UnmarshalParams(&p); err != nil {
				return nil, err
			}
			s, err := c.sessionFor(p.SessionID)
			if err != nil {
				return nil, err
			}
			return c.terms.serve(ctx, s, req)
		}
	default:
		if c.mcp.handles(req.Method) {
			return c.mcp.serve(ctx, req)
		}
	}
	if req.IsNotification() {
		return nil, nil
	}
	c.refused.Add(1)
	c.refusedLog.warn("acpclient: refused an agent request for a method this client did not declare", "method", req.Method)
	return nil, jsonrpc.Errorf(jsonrpc.CodeMethodNotFound, "method not found: %s", req.Method)
}

func (c *Conn) readTextFile(ctx context.Context, req *rpc.Request) (any, error) {
	var p struct {
		SessionID string `json:"sessionId"`
		Path      string `json:"path"`
		Line      *int   `json:"line"`
		Limit     *int   `json:"limit"`
	}
	if err := req.UnmarshalParams(&p); err != nil {
		return nil, err
	}
	s, err := c.sessionFor(p.SessionID)
	if err != nil {
		return nil, err
	}
	line, limit := 0, 0
	if p.Line != nil {
		line = *p.Line
	}
	if p.Limit != nil {
		limit = *p.Limit
	}
	if line < 0 || limit < 0 {
		return nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "invalid params: line and limit must not be negative")
	}
	content, err := c.fs.ReadTextFile(ctx, s, p.Path, line, limit)
	if err != nil {
		return nil, c.fsError(err)
	}
	return struct {
		Content string `json:"content"`
	}{content}, nil
}

func (c *Conn) writeTextFile(ctx context.Context, req *rpc.Request) (any, error) {
	var p struct {
		SessionID string  `json:"sessionId"`
		Path      string  `json:"path"`
		Content   *string `json:"content"`
	}
	if err := req.UnmarshalParams(&p); err != nil {
		return nil, err
	}
	if p.Content == nil {
		return nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "invalid params: fs/write_text_file needs content")
	}
	s, err := c.sessionFor(p.SessionID)
	if err != nil {
		return nil, err
	}
	if err := c.fsw.WriteTextFile(ctx, s, p.Path, *p.Content); err != nil {
		return nil, c.fsError(err)
	}
	return struct{}{}, nil
}

// fsError answers a file system's error: a *jsonrpc.Error as it is, any
// other without its text (it may name local paths).
func (c *Conn) fsError(err error) error {
	var je *jsonrpc.Error
	if errors.As(err, &je) {
		return je
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, rpc.ErrCancelledByPeer) {
		return err // the request was withdrawn: rpc answers it as such
	}
	c.log.Warn("acpclient: file system error", "error", err)
	return jsonrpc.NewError(jsonrpc.CodeInternalError, "internal error: the file could not be accessed", nil)
}

// handleUpdate is the session/update barrier: it runs alone, in receive
// order, on the reader while it is quick; a slow handler holds what comes
// after it (bounded), which is the backpressure.
func (c *Conn) handleUpdate(ctx context.Context, req *rpc.Request) {
	if w := c.watermarkFor(req.Conn()); w != nil {
		defer w.handledOne()
	}
	sid, update, ok := splitUpdate(req.Params)
	if !ok {
		c.handlerErrors.Add(1)
		c.refusedLog.warn("acpclient: ignoring a malformed session/update (it needs sessionId and an update object)")
		return
	}
	c.mu.Lock()
	s := c.sessions[string(sid)]
	if s == nil && c.creating > 0 {
		if c.parkedN < maxParkedUpdates && c.parkedB+len(req.Params) <= maxParkedBytes {
			id := string(sid)
			c.parked[id] = append(c.parked[id], req.Params)
			c.parkedN++
			c.parkedB += len(req.Params)
			c.mu.Unlock()
			c.parkedTotal.Add(1)
			return
		}
		c.refusedLog.warn("acpclient: an update for a session not yet known could not be parked: delivered as an orphan", "parked", c.parkedN, "limit", maxParkedUpdates)
	}
	c.mu.Unlock()
	c.deliverMu.Lock()
	defer c.deliverMu.Unlock()
	c.drainLocked(ctx, s)
	c.deliver(ctx, s, sid, update)
}

// drainParked delivers, before NewSession returns, the updates that were
// parked for its session (and the orphans left when no session/new is in
// flight any more). Called from an update handler (a nested NewSession),
// the caller already holds deliverMu; otherwise it takes it, and the
// handlers it runs see a nested context, since the updates behind them
// wait for deliverMu.
func (c *Conn) drainParked(ctx context.Context, s *Session) {
	if isNested(ctx) {
		c.drainLocked(ctx, s)
		return
	}
	c.deliverMu.Lock()
	defer c.deliverMu.Unlock()
	c.drainLocked(context.WithValue(ctx, nestedKey{}, true), s)
}

// drainLocked delivers the orphans, then s's backlog (deliverMu held).
func (c *Conn) drainLocked(ctx context.Context, s *Session) {
	for {
		c.mu.Lock()
		orphans := c.undeliv
		c.undeliv = nil
		var backlog [][]byte
		if s != nil {
			backlog, s.backlog = s.backlog, nil
		}
		c.mu.Unlock()
		if len(orphans) == 0 && len(backlog) == 0 {
			return
		}
		for _, m := range orphans {
			c.deliverRaw(ctx, m)
		}
		for _, m := range backlog {
			c.deliverRaw(ctx, m)
		}
	}
}

// splitUpdate finds sessionId and update in a session/update's params
// without decoding the rest: rpc has validated the params, and the slices
// point into its per-message copy, which is never rewritten.
func splitUpdate(params []byte) (sid, update []byte, ok bool) {
	if len(params) == 0 || params[0] != '{' {
		return nil, nil, false
	}
	jsonrpc.EachMember(params, func(k, v []byte) bool {
		switch string(k) {
		case "sessionId":
			sid, _ = jsonrpc.StringBytes(v)
		case "update":
			update = v
		}
		return true
	})
	return sid, update, sid != nil && len(update) > 0 && update[0] == '{'
}

func (c *Conn) takeParked(id string) [][]byte {
	msgs := c.parked[id]
	delete(c.parked, id)
	for _, m := range msgs {
		c.parkedN--
		c.parkedB -= len(m)
	}
	return msgs
}

// deliverRaw delivers parked params (deliverMu held).
func (c *Conn) deliverRaw(ctx context.Context, params []byte) {
	sid, update, _ := splitUpdate(params) // checked when it was parked
	s, _ := c.Session(string(sid))
	c.deliver(ctx, s, sid, update)
}

// updateKinds interns the known kinds, so that an update costs no string.
var updateKinds = []string{
	acp.UpdateAgentMessageChunk, acp.UpdateAgentThoughtChunk, acp.UpdateToolCall, acp.UpdateToolCallUpdate,
	acp.UpdatePlan, acp.UpdateUserMessageChunk, acp.UpdateAvailableCommands, acp.UpdateCurrentMode,
	acp.UpdateConfigOption, acp.UpdateSessionInfo, acp.UpdateUsage,
}

func kindOf(update []byte) string {
	var kind []byte
	jsonrpc.EachMember(update, func(k, v []byte) bool {
		if string(k) == "sessionUpdate" {
			kind, _ = jsonrpc.StringBytes(v)
			return false
		}
		return true
	})
	for _, known := range updateKinds {
		if string(kind) == known {
			return known
		}
	}
	return string(kind)
}

// deliver applies an update to its session and runs its handler
// (deliverMu held, so the one Update value is reused: handlers must not
// keep it).
func (c *Conn) deliver(ctx context.Context, s *Session, sid, raw []byte) {
	u := &c.upd
	*u = Update{Session: s, Kind: kindOf(raw), Raw: raw}
	h := c.opts.Updates
	if s != nil {
		u.SessionID = s.id
		s.apply(u)
		if s.handler != nil {
			h = s.handler
		}
		c.updates.Add(1)
	} else {
		u.SessionID = string(sid)
		c.orphans.Add(1)
	}
	if h == nil {
		return
	}
	defer func() {
		if r := recover(); r != nil {
			c.handlerErrors.Add(1)
			c.log.Error("acpclient: update handler panicked", "session", u.SessionID, "panic", r)
		}
		*u = Update{}
	}()
	if err := h.HandleUpdate(ctx, u); err != nil {
		c.handlerErrors.Add(1)
		c.log.Warn("acpclient: update handler failed", "session", u.SessionID, "kind", u.Kind, "error", err)
	}
}

// throttle logs a refusal once per burst (a second), counting the rest.
type throttle struct {
	log     *slog.Logger
	mu      sync.Mutex
	last    time.Time
	dropped int
}

func (t *throttle) warn(msg string, args ...any) {
	t.mu.Lock()
	now := time.Now()
	if now.Sub(t.last) < time.Second {
		t.dropped++
		t.mu.Unlock()
		return
	}
	dropped := t.dropped
	t.last, t.dropped = now, 0
	t.mu.Unlock()
	if dropped > 0 {
		args = append(args, "suppressed", dropped)
	}
	t.log.Warn(msg, args...)
}
