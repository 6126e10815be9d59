package server

import (
	"context"
	"encoding/json"

	"github.com/agentwire/agentwire/internal/chain"
	"github.com/agentwire/agentwire/jsonrpc"
	"github.com/agentwire/agentwire/mcp"
	"github.com/agentwire/agentwire/mcp/auth"
	"github.com/agentwire/agentwire/rpc"
)

// Call is one MCP request as a Middleware sees it: what rpc knows (the
// request's method, id and raw params) and what only MCP knows (the era and
// version it is served at, the tool, prompt or resource it names, the
// caller's verified identity and self-description).
type Call struct {
	// Request is the JSON-RPC request: Method, ID, Params.
	Request *rpc.Request
	// Method is Request.Method.
	Method string
	// Era is the era the request is served in (mcp.Modern: its _meta named
	// a 2026-07-28 version; mcp.Legacy otherwise).
	Era mcp.Era
	// ProtocolVersion is the version it is served at: the _meta's, the
	// HTTP header's, or what initialize negotiated on this connection; ""
	// for a legacy request before initialize (and for initialize itself).
	ProtocolVersion string
	// Name is the tool (tools/call) or prompt (prompts/get) named, "" for
	// other methods.
	Name string
	// URI is the resource named by resources/read, resources/subscribe or
	// resources/unsubscribe, "" for other methods.
	URI string
	// Identity is the verified OAuth identity of the caller on a protected
	// HTTP endpoint (auth.IdentityFrom), nil elsewhere.
	Identity *auth.Identity
	// ClientInfo is the client's self-description, raw: the _meta's
	// io.modelcontextprotocol/clientInfo (modern) or initialize's
	// clientInfo (legacy, once initialized on this connection); nil when
	// unknown. It is what the client says, not verified.
	ClientInfo json.RawMessage
	// ToolError is set, by the time next returns, when the tool's result
	// has isError true (a tool execution error, answered as a result).
	ToolError bool

	ss     *session
	params *mcp.RequestParams
	routed string // the HTTP route's version for a legacy request
}

// Client decodes ClientInfo; ok is false when there is none or it is not
// an Implementation.
func (c *Call) Client() (info mcp.Implementation, ok bool) {
	if len(c.ClientInfo) == 0 || json.Unmarshal(c.ClientInfo, &info) != nil {
		return mcp.Implementation{}, false
	}
	return info, info.Name != ""
}

// CallHandler serves a Call: the server's own dispatch, or the next
// Middleware.
type CallHandler func(ctx context.Context, call *Call) (any, error)

// Middleware wraps the server's dispatch of every request (not of
// notifications, which have no answer: rpc.Middleware sees those): it runs
// after the era is decided and params are read, before the tool, prompt or
// resource handler, and sees its result or error after. The first of
// Options.Middleware is outermost. A Middleware runs on the goroutine the
// request is served on — inline on the reader for a short request — so it
// must not block longer than the handler would; the context it passes on
// must derive from the one it was given. A returned *jsonrpc.Error answers
// the request as it is (a refusal); a result returned without calling next
// answers it instead of the server (a cache).
type Middleware func(next CallHandler) CallHandler

// callKey finds the Call of a request in its handler's context, for what
// the dispatch learns late (ToolError).
type callKey struct{}

// callFrom returns the Call of the request ctx serves, nil without
// middleware.
func callFrom(ctx context.Context) *Call {
	c, _ := ctx.Value(callKey{}).(*Call)
	return c
}

// chainMiddleware composes Options.Middleware once, at New: the dispatch
// it ends in is the same for every connection (the Call carries its
// session), so no request pays for composing it.
func chainMiddleware(mw []Middleware) CallHandler {
	if h, ok := chain.Compose(CallHandler(dispatchCall), mw); ok {
		return h
	}
	return nil
}

// dispatchCall is the innermost CallHandler: the server's own dispatch.
func dispatchCall(ctx context.Context, c *Call) (any, error) {
	ctx = context.WithValue(ctx, callKey{}, c)
	if c.Era == mcp.Modern {
		return c.ss.modern(ctx, c.Request, c.params)
	}
	return c.ss.legacy(ctx, c.Request, c.params, c.routed)
}

// serveCall builds the Call of a request whose era is decided and runs
// the middleware chain on it.
func (ss *session) serveCall(ctx context.Context, req *rpc.Request, p *mcp.RequestParams, era mcp.Era, routed string) (any, error) {
	c := &Call{Request: req, Method: req.Method, Era: era, Identity: auth.IdentityFrom(ctx), ss: ss, params: p, routed: routed}
	switch req.Method {
	case mcp.MethodToolsCall, "prompts/get":
		c.Name, _ = jsonrpc.StringValue(p.Name)
	case "resources/read", "resources/subscribe", "resources/unsubscribe":
		c.URI, _ = jsonrpc.StringValue(p.URI)
	}
	if era == mcp.Modern {
		if p.Meta != nil {
			c.ProtocolVersion, _ = jsonrpc.StringValue(p.Meta.ProtocolVersion)
			c.ClientInfo = p.Meta.ClientInfo
		}
	} else {
		c.ProtocolVersion = routed
		if !ss.stateless {
			ss.mu.Lock()
			if c.ProtocolVersion == "" {
				c.ProtocolVersion = ss.legacyVersion
			}
			c.ClientInfo = ss.clientInfo
			ss.mu.Unlock()
		}
	}
	return ss.srv.chain(ctx, c)
}
