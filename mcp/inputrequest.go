package mcp

import "errors"

// Methods a server may ask the client to serve during a request.
const (
	MethodElicit    = "elicitation/create"
	MethodSample    = "sampling/createMessage"
	MethodListRoots = "roots/list"
)

// InputRequest asks the client for something while a request runs: a form
// filled in (MethodElicit), a model's completion (MethodSample), or its
// roots (MethodListRoots). Params follow the method's schema.
type InputRequest struct {
	Method string `json:"method"`
	Params any    `json:"params,omitempty"`
}

// ErrInputRequired is the multi-round-trip signal (SEP-2322) on both
// sides. A client gets it when the server answered input_required and
// no host.Options.OnInput served the requests. A server's handler gets
// it from Ask in the 2026-07-28 era while the client has not answered
// yet, and returns it: the client is sent input_required with the
// unanswered requests and retries with the answers, and the handler
// runs again from the start.
var ErrInputRequired = errors.New("mcp: input required from the client (input_required)")
