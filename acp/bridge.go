package acp

// MCP bridges (guarantee A7). The extension is unstable and has had three
// generations: an underscore-prefixed _mcp/connect, then mcp/connect with
// serverId and connectionId (ACP schema PR #1185, renamed in #1567), then a
// connectionless form (the TypeScript SDK 2.4.0). This runtime implements the
// second, which uses these names (serverId, connectionId) with
// the agent as the bridge: the client asks the agent to connect to an MCP
// server that a session declared in session/new's mcpServers, and the
// agent reaches it through agentwire's MCP client (a stdio entry is spawned
// and ended with the shutdown ladder when the bridge, its session or the
// connection ends).
//
//	mcp/connect    {serverId}                       -> {connectionId}
//	mcp/message    {connectionId, method, params}   -> the inner result, or the inner error as the error
//	mcp/disconnect {connectionId}                   -> {}
//
// serverId is the declared server's name. A message for a bridge that is
// not connected (yet, or any more) gets -32602 naming the connectionId.

import (
	"context"
	"encoding/json"
	"strconv"
	"sync"

	"github.com/agentwire/agentwire/client"
	"github.com/agentwire/agentwire/jsonrpc"
	"github.com/agentwire/agentwire/mcp"
	"github.com/agentwire/agentwire/mcp/host"
	"github.com/agentwire/agentwire/process"
	"github.com/agentwire/agentwire/rpc"
)

// Bridge method names.
const (
	MethodMCPConnect    = "mcp/connect"
	MethodMCPMessage    = "mcp/message"
	MethodMCPDisconnect = "mcp/disconnect"
)

// stdioServer is a stdio entry of session/new's mcpServers.
type stdioServer struct {
	Name    string `json:"name"`
	Command string `json:"command"`
	Args    []string
	Env     []struct {
		Name  string `json:"name"`
		Value string `json:"value"`
	} `json:"env"`
	Type string `json:"type"`
}

type bridge struct {
	id      string
	session *Session
	mcp     *host.Session
}

type bridges struct {
	mu     sync.Mutex
	next   int64
	m      map[string]*bridge
	closed bool // the connection ended: no new bridges
}

func (c *conn) declared(serverID string) (*Session, *stdioServer) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, s := range c.sessions {
		for _, raw := range s.mcpServers {
			var d stdioServer
			var args struct {
				Args []string `json:"args"`
			}
			if json.Unmarshal(raw, &d) != nil || json.Unmarshal(raw, &args) != nil {
				continue
			}
			d.Args = args.Args
			if d.Name == serverID && d.Type == "" && d.Command != "" {
				return s, &d
			}
		}
	}
	return nil, nil
}

func (c *conn) mcpConnect(ctx context.Context, req *rpc.Request) (any, error) {
	var p struct {
		ServerID string `json:"serverId"`
	}
	if err := req.UnmarshalParams(&p); err != nil {
		return nil, err
	}
	s, d := c.declared(p.ServerID)
	if d == nil {
		return nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "invalid params: no session declared a stdio MCP server named %q", p.ServerID)
	}
	env := []string{}
	for _, e := range d.Env {
		env = append(env, e.Name+"="+e.Value)
	}
	cmd := process.Command{Path: d.Command, Args: d.Args}
	if len(env) > 0 {
		cmd.Env = append(append([]string{}, baseEnv()...), env...)
	}
	ms, err := host.StartServer(ctx, cmd, &host.Options{
		Info:      mcp.Implementation{Name: c.agent.Info.Name, Version: c.agent.Info.Version},
		Transport: &client.Options{Logger: c.opts.Logger},
	})
	if err != nil {
		return nil, jsonrpc.NewError(CodeBridgeUnavailable, "MCP server "+p.ServerID+" unavailable: "+err.Error(), map[string]any{"serverId": p.ServerID})
	}
	c.bridges.mu.Lock()
	if c.bridges.closed || s.closed.Load() {
		// The connection or the session ended while the server started:
		// nobody will disconnect it, so it is stopped now.
		c.bridges.mu.Unlock()
		ms.Close()
		return nil, jsonrpc.NewError(CodeBridgeUnavailable, "MCP server "+p.ServerID+" unavailable: the session or connection has ended", map[string]any{"serverId": p.ServerID})
	}
	if c.bridges.m == nil {
		c.bridges.m = map[string]*bridge{}
	}
	c.bridges.next++
	b := &bridge{id: "mcp-" + strconv.FormatInt(c.bridges.next, 10), session: s, mcp: ms}
	c.bridges.m[b.id] = b
	c.bridges.mu.Unlock()
	return map[string]any{"connectionId": b.id}, nil
}

// CodeBridgeUnavailable answers mcp/connect when the server cannot be
// started or negotiated with (the TS SDK's "server unavailable").
const CodeBridgeUnavailable int64 = -33001

func (c *conn) bridge(id string) (*bridge, error) {
	c.bridges.mu.Lock()
	defer c.bridges.mu.Unlock()
	b := c.bridges.m[id]
	if b == nil {
		return nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams,
			"invalid params: MCP bridge %q is not connected (send mcp/connect and wait for its response)", id)
	}
	return b, nil
}

func (c *conn) mcpMessage(ctx context.Context, req *rpc.Request) (any, error) {
	var p struct {
		ConnectionID string          `json:"connectionId"`
		Method       string          `json:"method"`
		Params       json.RawMessage `json:"params"`
	}
	if err := req.UnmarshalParams(&p); err != nil {
		return nil, err
	}
	b, err := c.bridge(p.ConnectionID)
	if err != nil {
		return nil, err
	}
	if p.Method == "" {
		return nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "invalid params: mcp/message needs a method")
	}
	var params any
	if len(p.Params) > 0 && string(p.Params) != "null" {
		params = p.Params
	}
	res, err := b.mcp.Request(ctx, p.Method, params)
	if err != nil {
		return nil, err // an inner *jsonrpc.Error is passed on as it is
	}
	return res, nil
}

func (c *conn) mcpDisconnect(req *rpc.Request) (any, error) {
	var p struct {
		ConnectionID string `json:"connectionId"`
	}
	if err := req.UnmarshalParams(&p); err != nil {
		return nil, err
	}
	c.bridges.mu.Lock()
	b := c.bridges.m[p.ConnectionID]
	delete(c.bridges.m, p.ConnectionID)
	c.bridges.mu.Unlock()
	if b == nil {
		return nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "invalid params: MCP bridge %q is not connected", p.ConnectionID)
	}
	b.mcp.Close()
	return map[string]any{}, nil
}

// closeBridges ends the bridges of one session (nil: all) with the ladder.
func (c *conn) closeBridges(s *Session) {
	c.bridges.mu.Lock()
	if s == nil {
		c.bridges.closed = true
	}
	var doomed []*bridge
	for id, b := range c.bridges.m {
		if s == nil || b.session == s {
			doomed = append(doomed, b)
			delete(c.bridges.m, id)
		}
	}
	c.bridges.mu.Unlock()
	var wg sync.WaitGroup
	for _, b := range doomed {
		wg.Go(func() { b.mcp.Close() })
	}
	wg.Wait()
}
