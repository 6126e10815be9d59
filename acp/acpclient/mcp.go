package acpclient

// MCP over ACP, the client's side (the unstable extension): the client
// offers MCP servers of its own in session/new's mcpServers as
// {type:"acp", name, serverId}, and the agent reaches them through the ACP
// connection itself. The extension has changed generations more than once;
// two are served, told apart by mcp/message's params:
//
//   - the schema's (connection-oriented): mcp/connect {serverId} ->
//     {connectionId}; mcp/message {connectionId, method, params} -> the
//     inner result, with the inner error as the outer error, or, without an
//     id, an inner notification; mcp/disconnect {connectionId} -> {}. acpId
//     and id are accepted as aliases of serverId (acp-go-sdk v0.13.0 sends
//     acpId). Each connect opens a connection of its own, with its own MCP
//     lifecycle (a legacy initialize, or requests with the 2026-07-28
//     per-request _meta).
//   - the TypeScript SDK 2.4's (connectionless): mcp/message {serverId,
//     requestId, method, params} -> the carrier {result} or {error:{code,
//     message, data}}. Requests are served statelessly on one connection
//     per offered server; a (serverId, requestId) pair still active is
//     refused with -32602, and the server's notifications for a request go
//     back with the same serverId and requestId.
//
// Every MCP connection is an mcp/server.Server's handler on a pushed
// rpc connection (rpc.NewMessages with no reader), the way Streamable HTTP
// serves one: inner requests are pushed with Receive and what the server
// writes is routed by kind. Outer errors: -32602 for a malformed envelope,
// an unknown or ended connectionId or a duplicate pair; -33000
// (acp.CodeResourceLimit, data.reason "too_many_connections") past
// Options.MaxMCPConnections live connections; -33001
// (acp.CodeBridgeUnavailable) for a serverId no live session offers; and
// the outer request's cancellation ($/cancel_request) pushes the inner
// notifications/cancelled and answers -32800.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/agentwire/agentwire/acp"
	"github.com/agentwire/agentwire/internal/refusal"
	"github.com/agentwire/agentwire/jsonrpc"
	"github.com/agentwire/agentwire/mcp/server"
	"github.com/agentwire/agentwire/rpc"
)

// ProvidedMCP is an MCP server the client offers to the agent over the ACP
// connection (SessionConfig.ProvideMCP). Name is what the session declares
// it as; the agent must advertise mcpCapabilities.acp.
type ProvidedMCP struct {
	Name   string
	Server *server.Server
}

// MCPStats counts the MCP-over-ACP traffic of a Conn.
type MCPStats struct {
	// Connections is the MCP connections opened: one per mcp/connect, and
	// one per offered server that connectionless requests reached.
	Connections int64
	// Messages is the mcp/message requests and notifications the agent
	// sent to offered servers.
	Messages int64
	// Refused is the connections refused past Options.MaxMCPConnections.
	Refused int64
}

// validateProvided checks SessionConfig.ProvideMCP before anything is sent.
func validateProvided(provided []ProvidedMCP) error {
	seen := map[string]bool{}
	for i, p := range provided {
		switch {
		case p.Name == "":
			return fmt.Errorf("acpclient: ProvideMCP[%d] has no Name", i)
		case p.Server == nil:
			return fmt.Errorf("acpclient: ProvideMCP[%d] (%q) has no Server", i, p.Name)
		case seen[p.Name]:
			return fmt.Errorf("acpclient: ProvideMCP names %q twice", p.Name)
		}
		seen[p.Name] = true
	}
	return nil
}

// mcpProvider serves one Conn's offered MCP servers.
type mcpProvider struct {
	call     func(ctx context.Context, method string, params any) (json.RawMessage, error)
	notify   func(ctx context.Context, method string, params any) error
	maxConns int
	log      *slog.Logger
	refusals refusal.Log

	mu       sync.Mutex
	closed   bool
	nextSrv  int64
	nextConn int64
	live     int
	servers  map[string]*offered    // by serverId
	conns    map[string]*mcpConnect // connection-oriented, by connectionId

	connections, messages, refused atomic.Int64
}

// offered is one ProvidedMCP declared by one session.
type offered struct {
	id, name string
	session  *Session
	srv      *server.Server
	shared   *mcpConnect // the connectionless requests' connection, made on first use
}

func newMCPProvider(call func(ctx context.Context, method string, params any) (json.RawMessage, error),
	notify func(ctx context.Context, method string, params any) error, maxConns int, log *slog.Logger) *mcpProvider {
	if maxConns <= 0 {
		maxConns = DefaultMaxMCPConnections
	}
	if log == nil {
		log = slog.Default()
	}
	return &mcpProvider{
		call: call, notify: notify, maxConns: maxConns, log: log,
		refusals: refusal.Log{Logger: log},
		servers:  map[string]*offered{}, conns: map[string]*mcpConnect{},
	}
}

// declare registers a session's offered servers and returns the mcpServers
// entries that declare them. A serverId is never reused on a Conn, so a
// request meant for a closed session's server cannot reach another's.
func (p *mcpProvider) declare(s *Session, provided []ProvidedMCP) []acp.MCPServer {
	out := make([]acp.MCPServer, 0, len(provided))
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, pm := range provided {
		p.nextSrv++
		id := "agentwire-mcp-" + strconv.FormatInt(p.nextSrv, 10) + "-" + pm.Name
		p.servers[id] = &offered{id: id, name: pm.Name, session: s, srv: pm.Server}
		out = append(out, acp.MCPServer{Type: "acp", Name: pm.Name, ServerID: id})
	}
	return out
}

// handles reports the methods serve answers: mcp/* once a session has
// offered a server. A client that never offered one does not serve the
// extension, and its mcp/* get -32601 like any undeclared method.
func (p *mcpProvider) handles(method string) bool {
	switch method {
	case acp.MethodMCPConnect, acp.MethodMCPMessage, acp.MethodMCPDisconnect:
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.nextSrv > 0
	}
	return false
}

func (p *mcpProvider) stats() MCPStats {
	return MCPStats{Connections: p.connections.Load(), Messages: p.messages.Load(), Refused: p.refused.Load()}
}

// serve answers the agent's mcp/connect, mcp/message and mcp/disconnect.
func (p *mcpProvider) serve(ctx context.Context, req *rpc.Request) (any, error) {
	switch req.Method {
	case acp.MethodMCPConnect:
		if req.IsNotification() {
			return nil, nil
		}
		return p.connect(req)
	case acp.MethodMCPDisconnect:
		if req.IsNotification() {
			return nil, nil
		}
		return p.disconnect(req)
	case acp.MethodMCPMessage:
		return p.message(ctx, req)
	}
	return nil, jsonrpc.Errorf(jsonrpc.CodeMethodNotFound, "method not found: %s", req.Method)
}

func unavailable(serverID string) *jsonrpc.Error {
	return jsonrpc.NewError(acp.CodeBridgeUnavailable,
		fmt.Sprintf("MCP server %q unavailable: no live session of this connection offers it", serverID),
		map[string]any{"serverId": serverID})
}

func (p *mcpProvider) connect(req *rpc.Request) (any, error) {
	var a struct {
		ServerID string `json:"serverId"`
		AcpID    string `json:"acpId"`
		ID       string `json:"id"`
	}
	if err := req.UnmarshalParams(&a); err != nil {
		return nil, err
	}
	id := a.ServerID
	if id == "" {
		id = a.AcpID
	}
	if id == "" {
		id = a.ID
	}
	if id == "" {
		return nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "invalid params: mcp/connect needs serverId")
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	o := p.servers[id]
	if o == nil || p.closed || sessionDone(o.session) {
		return nil, unavailable(id)
	}
	if err := p.reserveLocked(); err != nil {
		return nil, err
	}
	p.nextConn++
	mc := p.open(o, "mcpc-"+strconv.FormatInt(p.nextConn, 10))
	p.conns[mc.id] = mc
	return map[string]any{"connectionId": mc.id}, nil
}

// reserveLocked takes a place among the live connections.
func (p *mcpProvider) reserveLocked() error {
	if p.live >= p.maxConns {
		p.refused.Add(1)
		p.refusals.Refused("acpclient: MCP connection refused: too many connections", "limit", p.maxConns)
		return jsonrpc.NewError(acp.CodeResourceLimit, "too many MCP connections",
			map[string]any{"reason": "too_many_connections", "limit": p.maxConns})
	}
	p.live++
	p.connections.Add(1)
	return nil
}

func (p *mcpProvider) disconnect(req *rpc.Request) (any, error) {
	var a struct {
		ConnectionID string `json:"connectionId"`
	}
	if err := req.UnmarshalParams(&a); err != nil {
		return nil, err
	}
	p.mu.Lock()
	mc := p.conns[a.ConnectionID]
	delete(p.conns, a.ConnectionID)
	p.mu.Unlock()
	if mc == nil {
		return nil, notConnected(a.ConnectionID)
	}
	mc.close()
	return map[string]any{}, nil
}

func notConnected(id string) *jsonrpc.Error {
	return jsonrpc.NewError(jsonrpc.CodeInvalidParams,
		fmt.Sprintf("invalid params: MCP connection %q is not connected (send mcp/connect and wait for its response)", id),
		map[string]any{"connectionId": id})
}

// envelope is mcp/message's params in either generation.
type envelope struct {
	ConnectionID json.RawMessage `json:"connectionId"`
	ServerID     json.RawMessage `json:"serverId"`
	RequestID    json.RawMessage `json:"requestId"`
	Method       string          `json:"method"`
	Params       json.RawMessage `json:"params"`
}

func (p *mcpProvider) message(ctx context.Context, req *rpc.Request) (any, error) {
	var e envelope
	if err := req.UnmarshalParams(&e); err != nil {
		return nil, err
	}
	p.messages.Add(1)
	if e.Method == "" {
		return nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "invalid params: mcp/message needs a method")
	}
	if isNull(e.Params) {
		e.Params = nil
	} else if c := e.Params[0]; c != '{' && c != '[' {
		// Pushed as they are, inner params that are not structured would
		// make an inner message the server cannot answer by id.
		return nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "invalid params: mcp/message's params must be an object or an array")
	}
	switch {
	case e.ConnectionID != nil:
		var id string
		if json.Unmarshal(e.ConnectionID, &id) != nil {
			return nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "invalid params: mcp/message's connectionId must be a string")
		}
		p.mu.Lock()
		mc := p.conns[id]
		p.mu.Unlock()
		if mc == nil {
			return nil, notConnected(id)
		}
		if req.IsNotification() {
			return nil, mc.pushNotification(e.Method, e.Params)
		}
		res, err := mc.request(ctx, "", e.Method, e.Params)
		if errors.Is(err, errConnEnded) {
			return nil, notConnected(id)
		}
		return res, err
	case e.ServerID != nil && e.RequestID != nil:
		return p.connectionless(ctx, req, &e)
	}
	return nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams,
		"invalid params: mcp/message needs connectionId, or serverId and requestId")
}

// sessionDone reports a session closed or lost: its servers are no longer
// offered, even before closeSession has run.
func sessionDone(s *Session) bool { return s != nil && s.ctx != nil && s.ctx.Err() != nil }

func isNull(raw json.RawMessage) bool { return len(raw) == 0 || string(raw) == "null" }

// connectionless serves the TypeScript SDK 2.4's generation.
func (p *mcpProvider) connectionless(ctx context.Context, req *rpc.Request, e *envelope) (any, error) {
	var serverID string
	if json.Unmarshal(e.ServerID, &serverID) != nil {
		return nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "invalid params: mcp/message's serverId must be a string")
	}
	var rid any
	if json.Unmarshal(e.RequestID, &rid) != nil {
		return nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "invalid params: mcp/message's requestId must be a string or a number")
	}
	switch rid.(type) {
	case string, float64:
	default:
		return nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "invalid params: mcp/message's requestId must be a string or a number")
	}
	p.mu.Lock()
	o := p.servers[serverID]
	if o == nil || p.closed || sessionDone(o.session) {
		p.mu.Unlock()
		return nil, unavailable(serverID)
	}
	mc := o.shared
	if mc == nil {
		if err := p.reserveLocked(); err != nil {
			p.mu.Unlock()
			return nil, err
		}
		mc = p.open(o, "")
		o.shared = mc
	}
	p.mu.Unlock()
	if req.IsNotification() {
		return nil, mc.pushNotification(e.Method, e.Params)
	}
	id := jsonrpc.ID(compact(e.RequestID))
	res, err := mc.request(ctx, id, e.Method, e.Params)
	var inner *jsonrpc.Error
	switch {
	case errors.Is(err, errDuplicate):
		return nil, jsonrpc.NewError(jsonrpc.CodeInvalidParams, "invalid params: duplicate active MCP request id",
			map[string]any{"serverId": serverID, "requestId": json.RawMessage(id)})
	case errors.Is(err, errConnEnded):
		return nil, unavailable(serverID)
	case errors.As(err, &inner) && errors.Is(err, errInner):
		return map[string]any{"error": inner}, nil
	case err != nil:
		return nil, err
	}
	return map[string]any{"result": res}, nil
}

func compact(raw json.RawMessage) []byte {
	var b []byte
	if len(raw) > 0 && raw[0] == '"' {
		var s string
		json.Unmarshal(raw, &s)
		return jsonrpc.AppendString(nil, s) // one spelling per id, whatever escapes the sender used
	}
	b = append(b, raw...)
	return b
}

// closeSession ends the connections to one session's servers and forgets
// them: their serverIds answer -33001 from then on.
func (p *mcpProvider) closeSession(s *Session) { p.closeWhere(s) }

// closeAll ends every connection; nothing more is served.
func (p *mcpProvider) closeAll() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.closeWhere(nil)
}

func (p *mcpProvider) closeWhere(s *Session) {
	var doomed []*mcpConnect
	p.mu.Lock()
	for id, o := range p.servers {
		if s != nil && o.session != s {
			continue
		}
		if o.shared != nil {
			doomed = append(doomed, o.shared)
		}
		delete(p.servers, id)
	}
	for id, mc := range p.conns {
		if s == nil || mc.srv.session == s {
			doomed = append(doomed, mc)
			delete(p.conns, id)
		}
	}
	p.mu.Unlock()
	var wg sync.WaitGroup
	for _, mc := range doomed {
		wg.Go(mc.close)
	}
	wg.Wait()
}

var (
	errConnEnded = errors.New("acpclient: the MCP connection has ended")
	errDuplicate = errors.New("acpclient: duplicate active MCP request id")
	// errInner marks the server's own error response, as opposed to a
	// failure of the binding.
	errInner = errors.New("acpclient: MCP error response")
)

// mcpConnect is one MCP connection: a server's handler on a pushed rpc
// connection, whose output comes back through WriteMessage.
type mcpConnect struct {
	p   *mcpProvider
	id  string // connectionId; "" for the connectionless generation's
	srv *offered
	rc  *rpc.Conn

	ctx    context.Context // ends at close: unblocks what is sent to the agent for it
	cancel context.CancelFunc

	mu       sync.Mutex
	ended    bool
	next     int64
	pending  map[jsonrpc.ID]chan innerReply
	queue    chan pushed                  // what the agent sent, in order, for the one pusher (closed at close)
	starting map[jsonrpc.ID]chan struct{} // requests being handed over: closed as their handler starts
	wg       sync.WaitGroup               // the pusher
}

// pushed is one message for the server, and what to do if it cannot take
// it; id is set for a request.
type pushed struct {
	msg    []byte
	id     jsonrpc.ID
	failed func()
}

// maxPushQueue bounds the messages waiting for a server that does not take
// them (its admission queue full): past it a notification is dropped and a
// request fails, counted and logged, rather than a goroutine or a message
// piling up per agent notification.
const maxPushQueue = 256

type innerReply struct {
	result json.RawMessage
	err    error
}

// open makes a connection to o; p.mu is held.
func (p *mcpProvider) open(o *offered, id string) *mcpConnect {
	parent := context.Background()
	if o.session != nil && o.session.ctx != nil {
		parent = o.session.ctx
	}
	ctx, cancel := context.WithCancel(parent)
	mc := &mcpConnect{p: p, id: id, srv: o, ctx: ctx, cancel: cancel, pending: map[jsonrpc.ID]chan innerReply{},
		queue: make(chan pushed, maxPushQueue), starting: map[jsonrpc.ID]chan struct{}{}}
	inner := o.srv.Handler()
	h := rpc.HandlerFunc(func(ctx context.Context, req *rpc.Request) (any, error) {
		mc.started(req.ID)
		return inner.Handle(ctx, req)
	})
	mc.rc = rpc.NewMessages(nil, mc, h, o.srv.ConnOptions(&rpc.Options{Logger: p.log, Context: ctx}))
	mc.wg.Go(mc.pushLoop)
	return mc
}

// pushLoop hands the agent's messages to the server in the order they
// came: a notification on this goroutine, a request on a goroutine of its
// own (a pushed request's handler runs on the goroutine that pushes it),
// but only once its handler has started (or it was refused), so that
// nothing after it — its own cancellation, say — overtakes it.
func (mc *mcpConnect) pushLoop() {
	for q := range mc.queue {
		if q.id == "" {
			if mc.rc.Receive(q.msg) != nil && q.failed != nil {
				q.failed()
			}
			continue
		}
		start := make(chan struct{})
		mc.mu.Lock()
		mc.starting[q.id] = start
		mc.mu.Unlock()
		done := make(chan struct{})
		mc.wg.Go(func() {
			defer close(done)
			if mc.rc.Receive(q.msg) != nil && q.failed != nil {
				q.failed()
			}
		})
		select {
		case <-start:
		case <-done:
		}
		mc.mu.Lock()
		delete(mc.starting, q.id)
		mc.mu.Unlock()
	}
}

// started is called as a request's handler starts.
func (mc *mcpConnect) started(id jsonrpc.ID) {
	mc.mu.Lock()
	ch := mc.starting[id]
	delete(mc.starting, id)
	mc.mu.Unlock()
	if ch != nil {
		close(ch)
	}
}

// close ends the connection and waits for it and for its goroutines.
func (mc *mcpConnect) close() {
	mc.mu.Lock()
	already := mc.ended
	if !already {
		mc.ended = true
		close(mc.queue)
	}
	mc.mu.Unlock()
	if already {
		return
	}
	// Cancelled first: the connection is going away, so its handlers and
	// what they send to the agent end now rather than after a grace.
	mc.cancel()
	mc.rc.EndInput()
	<-mc.rc.Done()
	mc.wg.Wait()
	mc.p.mu.Lock()
	mc.p.live--
	mc.p.mu.Unlock()
}

// Close is called by the connection at shutdown, after its handlers'
// bound: a send to the agent that never returns is ended.
func (mc *mcpConnect) Close() error {
	mc.cancel()
	return nil
}

// push queues one message for the server, in order: errConnEnded when the
// connection has ended, a -33000 server_busy when its queue is full
// (counted, logged).
func (mc *mcpConnect) push(msg []byte, id jsonrpc.ID, failed func()) error {
	mc.mu.Lock()
	defer mc.mu.Unlock()
	if mc.ended {
		return errConnEnded
	}
	select {
	case mc.queue <- pushed{msg, id, failed}:
		return nil
	default:
		mc.p.refused.Add(1)
		mc.p.refusals.Refused("acpclient: MCP message refused: the server is not taking messages", "queued", maxPushQueue)
		return jsonrpc.NewError(acp.CodeResourceLimit, "MCP server busy", map[string]any{"reason": "server_busy", "limit": maxPushQueue})
	}
}

func (mc *mcpConnect) pushNotification(method string, params json.RawMessage) error {
	return mc.push(encodeMessage("", method, params), "", nil)
}

func encodeMessage(id jsonrpc.ID, method string, params json.RawMessage) []byte {
	b := []byte(`{"jsonrpc":"2.0",`)
	if id != "" {
		b = append(append(append(b, `"id":`...), id...), ',')
	}
	b = jsonrpc.AppendString(append(b, `"method":`...), method)
	if params != nil {
		b = append(append(b, `,"params":`...), params...)
	}
	return append(b, '}')
}

// request sends one inner request (a fresh id when id is empty) and waits
// for its answer; the server's error response comes back as a
// *jsonrpc.Error that also matches errInner. ctx ending cancels it inside
// (notifications/cancelled) and returns ctx's error.
func (mc *mcpConnect) request(ctx context.Context, id jsonrpc.ID, method string, params json.RawMessage) (json.RawMessage, error) {
	ch := make(chan innerReply, 1)
	mc.mu.Lock()
	if id == "" {
		mc.next++
		id = jsonrpc.Int64ID(mc.next)
	}
	if mc.pending[id] != nil {
		mc.mu.Unlock()
		return nil, errDuplicate
	}
	mc.pending[id] = ch
	mc.mu.Unlock()
	if err := mc.push(encodeMessage(id, method, params), id, func() { mc.answer(id, innerReply{err: errConnEnded}) }); err != nil {
		mc.answer(id, innerReply{err: err})
	}
	select {
	case r := <-ch:
		return r.result, r.err
	case <-ctx.Done():
	case <-mc.rc.Done():
		select {
		case r := <-ch:
			return r.result, r.err
		default:
		}
		mc.answer(id, innerReply{})
		return nil, errConnEnded
	}
	if !mc.answer(id, innerReply{}) {
		// The answer came first.
		r := <-ch
		return r.result, r.err
	}
	cancelled := []byte(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":`)
	cancelled = append(append(cancelled, id...), `,"reason":"the ACP request was cancelled"}}`...)
	mc.push(cancelled, "", nil)
	return nil, fmt.Errorf("acpclient: MCP request %s cancelled: %w", method, ctx.Err())
}

// answer hands r to the waiter of id, if there still is one, and reports
// whether there was.
func (mc *mcpConnect) answer(id jsonrpc.ID, r innerReply) bool {
	mc.mu.Lock()
	ch := mc.pending[id]
	delete(mc.pending, id)
	mc.mu.Unlock()
	if ch == nil {
		return false
	}
	ch <- r
	return true
}

func (mc *mcpConnect) active(id jsonrpc.ID) bool {
	mc.mu.Lock()
	defer mc.mu.Unlock()
	return mc.pending[id] != nil
}

// WriteMessage routes what the server writes: an answer to its waiter, a
// notification and a request to the agent. It never waits for the agent's
// answer: a request is relayed by a goroutine of its own.
func (mc *mcpConnect) WriteMessage(m *rpc.Outbound) error {
	switch m.Kind {
	case jsonrpc.KindResult:
		var msg struct {
			Result json.RawMessage `json:"result"`
		}
		if err := json.Unmarshal(m.AppendTo(nil), &msg); err != nil {
			mc.answer(m.ID, innerReply{err: fmt.Errorf("acpclient: MCP server wrote a malformed result: %w", err)})
			return nil
		}
		mc.answer(m.ID, innerReply{result: msg.Result})
	case jsonrpc.KindError:
		e := jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "MCP server error"}
		if m.Error != nil {
			e = *m.Error
			e.Data = append(json.RawMessage(nil), e.Data...)
		}
		mc.answer(m.ID, innerReply{err: innerError{&e}})
	case jsonrpc.KindNotification:
		params := append(json.RawMessage(nil), m.Params...)
		env := map[string]any{"method": m.Method}
		if len(params) > 0 {
			env["params"] = params
		}
		if mc.id != "" {
			env["connectionId"] = mc.id
		} else {
			// Connectionless: a notification belongs to a request still
			// active, and goes back with its pair; any other is dropped.
			if m.Related == "" || !mc.active(m.Related) {
				return nil
			}
			env["serverId"] = mc.srv.id
			env["requestId"] = json.RawMessage(append([]byte(nil), m.Related...))
		}
		if err := mc.p.notify(mc.ctx, acp.MethodMCPMessage, env); err != nil {
			mc.p.log.Debug("acpclient: an MCP notification did not reach the agent", "method", m.Method, "err", err)
		}
	case jsonrpc.KindRequest:
		id := jsonrpc.ID(append([]byte(nil), m.ID...))
		method := m.Method
		params := append(json.RawMessage(nil), m.Params...)
		mc.mu.Lock()
		defer mc.mu.Unlock()
		if mc.ended {
			return nil
		}
		mc.wg.Go(func() { mc.relayRequest(id, method, params) })
	}
	return nil
}

// relayRequest asks the agent on the server's behalf and pushes the answer
// back. The connectionless generation has no way to ask: -32601.
func (mc *mcpConnect) relayRequest(id jsonrpc.ID, method string, params json.RawMessage) {
	var reply []byte
	if mc.id == "" {
		reply = jsonrpc.AppendErrorResponse(nil, id, jsonrpc.Errorf(jsonrpc.CodeMethodNotFound,
			"method not found: %s (connectionless MCP over ACP carries no server requests)", method))
	} else {
		env := map[string]any{"connectionId": mc.id, "method": method}
		if len(params) > 0 {
			env["params"] = params
		}
		res, err := mc.p.call(mc.ctx, acp.MethodMCPMessage, env)
		var je *jsonrpc.Error
		switch {
		case errors.As(err, &je):
			reply = jsonrpc.AppendErrorResponse(nil, id, je)
		case err != nil:
			reply = jsonrpc.AppendErrorResponse(nil, id, jsonrpc.Errorf(jsonrpc.CodeInternalError, "the agent did not answer: %v", err))
		default:
			if len(res) == 0 {
				res = json.RawMessage("null")
			}
			reply = append(append(append(append([]byte(`{"jsonrpc":"2.0","id":`), id...), `,"result":`...), res...), '}')
		}
	}
	mc.rc.Receive(reply)
}

// innerError is the server's error response: sent to the agent as it is
// (rpc sends an *jsonrpc.Error exactly as given), and marked as the
// server's own.
type innerError struct{ e *jsonrpc.Error }

func (e innerError) Error() string   { return e.e.Error() }
func (e innerError) Unwrap() []error { return []error{e.e, errInner} }
