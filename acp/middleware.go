package acp

import (
	"context"
	"fmt"

	"github.com/agentwire/agentwire/internal/chain"
	"github.com/agentwire/agentwire/jsonrpc"
	"github.com/agentwire/agentwire/rpc"
)

// Call is one ACP request or notification as a Middleware sees it: the
// message, the session it names, and for session/prompt its prompt
// (Prompt).
type Call struct {
	// Request is the JSON-RPC message: Method, ID (zero for a
	// notification), Params.
	Request *rpc.Request
	// Method is Request.Method.
	Method string
	// SessionID is params.sessionId when the method names a session
	// (session/prompt, session/cancel, session/set_mode, ...), "" otherwise.
	SessionID string

	c       *conn
	reached bool // the chain reached the dispatch
}

// Prompt decodes the prompt of a session/prompt, as the turn will see it
// (Turn.Prompt): its blocks alias the request's params. It is an error for
// any other method, and -32602 for a prompt that is not an array of
// content blocks.
func (c *Call) Prompt() ([]ContentBlock, error) {
	if c.Method != MethodPrompt {
		return nil, fmt.Errorf("acp: %s carries no prompt", c.Method)
	}
	if _, prompt, n, ok := decodePrompt(c.Request.Params); ok {
		blocks := make([]ContentBlock, n)
		fillBlocks(prompt, blocks)
		return blocks, nil
	}
	_, blocks, err := decodePromptSlow(c.Request)
	return blocks, err
}

// CallHandler serves a Call: the agent's own dispatch, or the next
// Middleware.
type CallHandler func(ctx context.Context, call *Call) (any, error)

// Middleware wraps the agent's dispatch of every request and notification
// (Options.Middleware, the first outermost): a prompt's turn, from its
// admission to its stop reason, runs inside next. It runs where the
// dispatch runs — control requests in order on the control lane, prompts
// in the background lane — so a control-lane middleware that blocks holds
// every later control request (guarantee A1). A middleware that returns
// without calling next refuses the message; the reservation the
// connection made for a prompt on receipt (guarantee A5) is then released,
// so a refused prompt leaves its session free.
type Middleware func(next CallHandler) CallHandler

// chainMiddleware composes Options.Middleware once per connection (the
// dispatch it ends in finds the connection in the Call); nil without any.
func chainMiddleware(mw []Middleware) CallHandler {
	if h, ok := chain.Compose(CallHandler(dispatchCall), mw); ok {
		return h
	}
	return nil
}

func dispatchCall(ctx context.Context, call *Call) (any, error) {
	if call.c == nil {
		return nil, errForeignCall
	}
	call.reached = true
	return call.c.handle(ctx, call.Request)
}

// errForeignCall answers a message whose middleware passed on a Call it
// made itself instead of the one it was given.
var errForeignCall = jsonrpc.NewError(jsonrpc.CodeInternalError, "acp: a middleware passed on a Call the connection did not make", nil)

// serveCall runs the middleware chain on one message.
func (c *conn) serveCall(ctx context.Context, req *rpc.Request) (any, error) {
	call := &Call{Request: req, Method: req.Method, c: c}
	if id := sessionIDOf(req.Params); id != nil {
		call.SessionID = string(id)
	}
	res, err := c.chain(ctx, call)
	if !call.reached {
		c.releaseFor(req)
	}
	return res, err
}
