package host

import (
	"context"
	"encoding/json"
	"github.com/agentwire/agentwire/mcp"

	"github.com/agentwire/agentwire/client"
	"github.com/agentwire/agentwire/jsonrpc"
	"github.com/agentwire/agentwire/process"
)

// Transport carries a Session's messages: a stdio (or socket) stream
// through the client package (StartServer, NewClient), or Streamable HTTP
// (streamable.Connect, through NewSession). What a Session needs of its
// transport beyond carrying messages it asks through these methods, never
// by knowing the transport's type: a stream answers them as a stream
// does, mostly with nothing to do.
type Transport interface {
	// Call sends a request and waits for its result; onID, when not nil,
	// is told the request's id before it is sent. Cancelling ctx cancels
	// the request on the server.
	Call(ctx context.Context, method string, params any, onID func(jsonrpc.ID), opts ...client.CallOption) (json.RawMessage, error)
	// Notify sends a notification.
	Notify(ctx context.Context, method string, params any) error
	// Restart replaces a server process that died; a transport without a
	// process returns client.ErrNotRestartable.
	Restart(ctx context.Context) error
	// Fresh reports whether the server process has just been started (its
	// first probe is given ProcessStartupAllowance).
	Fresh() bool
	// Negotiated tells the transport the era and version agreed on: after
	// a legacy initialize, and again once the connect has succeeded.
	Negotiated(era mcp.Era, version string)
	// Connected is called once the connect has succeeded, before any
	// call; ctx bounds what the transport does then (over HTTP a legacy
	// server's standalone stream is opened).
	Connected(ctx context.Context)
	// LearnTools tells the transport the server's tools, as ListTools
	// returns them (over HTTP, x-mcp-header arguments are mirrored in
	// Mcp-Param- headers).
	LearnTools(tools []mcp.Tool)
	// KnowsTool reports whether the transport has learned what it needs
	// of a tool: a call refused with a header mismatch (-32020) whose tool
	// it did not know is sent once more after the tools are listed. A
	// stream, which mirrors nothing, knows every tool.
	KnowsTool(name string) bool
	// Evidence says what an error of the era probe tells of the server
	// (guarantee E2). A stream returns EvidenceAnswer for every error.
	Evidence(err error) Evidence
	// Close ends the transport (shutting a started server down).
	Close() process.ShutdownResult
}

// Evidence is what a transport makes of an error answering the era probe
// (server/discover).
type Evidence uint8

const (
	// EvidenceAnswer: the server's own answer (a JSON-RPC error) or the
	// failure of a stream. The session reads it as it reads an error on a
	// stream: a JSON-RPC error is legacy evidence unless it is a modern
	// one; silence and a server that died are legacy.
	EvidenceAnswer Evidence = iota
	// EvidenceNone: refused in front of the server (HTTP 401, 403, 5xx) or
	// lost on the way (a network failure). It says nothing of the
	// server's era: the connect fails, and never falls back.
	EvidenceNone
	// EvidenceNotModern: the server answered without a JSON-RPC error
	// (HTTP 400, 404, 405): it is not modern, as a modern server explains
	// itself, so initialize is tried.
	EvidenceNotModern
	// EvidenceFault: no answer where one was owed (silence, or a reply
	// that is not the response): a fault of the network or the server,
	// never a legacy server. The connect fails.
	EvidenceFault
)

// streamTransport is a Session over a client.Client.
type streamTransport struct{ c *client.Client }

func (t streamTransport) Call(ctx context.Context, method string, params any, onID func(jsonrpc.ID), opts ...client.CallOption) (json.RawMessage, error) {
	if onID != nil {
		return t.c.CallWithID(ctx, method, params, onID)
	}
	return t.c.Call(ctx, method, params, opts...)
}

func (t streamTransport) Notify(ctx context.Context, method string, params any) error {
	return t.c.Notify(ctx, method, params)
}
func (t streamTransport) Restart(ctx context.Context) error { return t.c.Restart(ctx) }
func (t streamTransport) Fresh() bool                       { return t.c.Fresh() }
func (t streamTransport) Negotiated(mcp.Era, string)        {}
func (t streamTransport) Connected(context.Context)         {}
func (t streamTransport) LearnTools([]mcp.Tool)             {}
func (t streamTransport) KnowsTool(string) bool             { return true }
func (t streamTransport) Evidence(error) Evidence           { return EvidenceAnswer }
func (t streamTransport) Close() process.ShutdownResult     { return t.c.Close() }
