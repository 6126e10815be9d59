package acp

// The agent's side of MCP over ACP as the unstable schema has it: the
// client offers MCP servers in session/new's mcpServers as {type:"acp",
// name, serverId}, and the agent reaches them through the ACP connection
// itself (mcp/connect and mcp/disconnect are served by the client;
// mcp/message goes both ways). This is the reverse of bridge.go's
// direction (guarantee A7), where the client asks the agent to reach a
// server; both share the method names and tell the two apart by
// connectionId: the client allocates the ids of the connections it serves.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/agentwire/agentwire/rpc"
)

// ErrMCPNotDeclared is returned by ConnectMCP for a serverId the session did
// not declare as a {type:"acp"} MCP server: nothing is sent.
var ErrMCPNotDeclared = errors.New("acp: the session declared no MCP server over ACP with that serverId")

// MCPServers returns the session's declared mcpServers (session/new or
// session/load), decoded; an entry that does not decode is left out.
func (s *Session) MCPServers() []MCPServer {
	out := make([]MCPServer, 0, len(s.mcpServers))
	for _, raw := range s.mcpServers {
		var d MCPServer
		if json.Unmarshal(raw, &d) == nil {
			out = append(out, d)
		}
	}
	return out
}

// declaresACP reports whether the session declared serverID as a server
// the client serves over ACP.
func (s *Session) declaresACP(serverID string) bool {
	for _, d := range s.MCPServers() {
		if d.Type == "acp" && d.ServerID == serverID && serverID != "" {
			return true
		}
	}
	return false
}

// mcpCallers are a session's open MCPConnections, by connectionId, so that
// the client's mcp/message notifications reach them.
type mcpCallers struct {
	mu sync.Mutex
	m  map[string]*MCPConnection
}

// mcpCallersKey keys a session's mcpCallers in its value map; being a type
// of this file it can never collide with a config option id.
type mcpCallersKey struct{}

func (s *Session) callers() *mcpCallers {
	v, _ := s.config.LoadOrStore(mcpCallersKey{}, &mcpCallers{m: map[string]*MCPConnection{}})
	return v.(*mcpCallers)
}

// MCPConnection is one connection to an MCP server the client serves over
// ACP: its requests and notifications travel as mcp/message on the ACP
// connection. The server speaks MCP as usual: start with initialize (or
// send requests with the 2026-07-28 per-request _meta).
type MCPConnection struct {
	id     string
	rc     *rpc.Conn
	reg    *mcpCallers
	closed atomic.Bool

	mu     sync.Mutex
	onNote func(method string, params json.RawMessage)
}

// ConnectMCP sends mcp/connect {serverId} for a server the session
// declared as {type:"acp"} and returns the connection the client opened.
// An undeclared serverId is refused locally with ErrMCPNotDeclared. Close
// the connection when done; the client ends it too when the session or
// the ACP connection ends.
func (t *Turn) ConnectMCP(ctx context.Context, serverID string) (*MCPConnection, error) {
	if !t.Session.declaresACP(serverID) {
		return nil, fmt.Errorf("%w: %q", ErrMCPNotDeclared, serverID)
	}
	rc := t.req.Conn()
	res, err := rc.Call(ctx, MethodMCPConnect, map[string]any{"serverId": serverID})
	if err != nil {
		return nil, err
	}
	var r struct {
		ConnectionID string `json:"connectionId"`
	}
	if err := json.Unmarshal(res, &r); err != nil || r.ConnectionID == "" {
		return nil, fmt.Errorf("acp: mcp/connect for %q answered without a connectionId: %s", serverID, res)
	}
	reg := t.Session.callers()
	m := &MCPConnection{id: r.ConnectionID, rc: rc, reg: reg}
	reg.mu.Lock()
	reg.m[m.id] = m
	reg.mu.Unlock()
	return m, nil
}

// ID is the connectionId the client gave the connection.
func (m *MCPConnection) ID() string { return m.id }

func (m *MCPConnection) envelope(method string, params any) map[string]any {
	e := map[string]any{"connectionId": m.id, "method": method}
	if params != nil {
		e["params"] = params
	}
	return e
}

// Call sends one MCP request (mcp/message {connectionId, method, params})
// and returns its result; the server's error comes back as the
// *jsonrpc.Error. Cancelling ctx abandons the call ($/cancel_request).
func (m *MCPConnection) Call(ctx context.Context, method string, params any) (json.RawMessage, error) {
	return m.rc.Call(ctx, MethodMCPMessage, m.envelope(method, params))
}

// Notify sends one MCP notification (mcp/message without an id).
func (m *MCPConnection) Notify(ctx context.Context, method string, params any) error {
	return m.rc.Notify(ctx, MethodMCPMessage, m.envelope(method, params))
}

// OnNotification sets the function that receives the server's
// notifications (log messages, progress, list changes). It runs on the
// connection's dispatch, so it should return quickly; notifications that
// arrive while none is set are dropped.
func (m *MCPConnection) OnNotification(f func(method string, params json.RawMessage)) {
	m.mu.Lock()
	m.onNote = f
	m.mu.Unlock()
}

// Close sends mcp/disconnect; later calls do nothing.
func (m *MCPConnection) Close(ctx context.Context) error {
	if m.closed.Swap(true) {
		return nil
	}
	m.reg.mu.Lock()
	delete(m.reg.m, m.id)
	m.reg.mu.Unlock()
	_, err := m.rc.Call(ctx, MethodMCPDisconnect, map[string]any{"connectionId": m.id})
	return err
}

// deliverMCPNotification hands a client's mcp/message notification to the
// MCPConnection it names and reports whether one took it; the dispatcher
// calls it first for every inbound mcp/message notification.
func (c *conn) deliverMCPNotification(req *rpc.Request) bool {
	if req.Method != MethodMCPMessage || !req.IsNotification() {
		return false
	}
	var p struct {
		ConnectionID string          `json:"connectionId"`
		Method       string          `json:"method"`
		Params       json.RawMessage `json:"params"`
	}
	if json.Unmarshal(req.Params, &p) != nil || p.ConnectionID == "" || p.Method == "" {
		return false
	}
	c.mu.Lock()
	var m *MCPConnection
	for _, s := range c.sessions {
		v, ok := s.config.Load(mcpCallersKey{})
		if !ok {
			continue
		}
		reg := v.(*mcpCallers)
		reg.mu.Lock()
		m = reg.m[p.ConnectionID]
		reg.mu.Unlock()
		if m != nil {
			break
		}
	}
	c.mu.Unlock()
	if m == nil {
		return false
	}
	m.mu.Lock()
	f := m.onNote
	m.mu.Unlock()
	if f != nil {
		f(p.Method, p.Params)
	}
	return true
}
