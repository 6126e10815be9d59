package mcp

import (
	"context"
	"encoding/json"

	"github.com/agentwire/agentwire/client"
	"github.com/agentwire/agentwire/jsonrpc"
	"github.com/agentwire/agentwire/process"
)

// transport carries a Session's messages: a stdio (or socket) stream
// through the client package, or Streamable HTTP.
type transport interface {
	call(ctx context.Context, method string, params any, onID func(jsonrpc.ID), opts ...client.CallOption) (json.RawMessage, error)
	notify(ctx context.Context, method string, params any) error
	// restart replaces a server process that died (stdio only).
	restart(ctx context.Context) error
	// fresh reports whether the server process has just been started.
	fresh() bool
	// negotiated tells the transport the era and version agreed on.
	negotiated(era Era, version string)
	close() process.ShutdownResult
}

// streamTransport is a Session over a client.Client.
type streamTransport struct{ c *client.Client }

func (t streamTransport) call(ctx context.Context, method string, params any, onID func(jsonrpc.ID), opts ...client.CallOption) (json.RawMessage, error) {
	if onID != nil {
		return t.c.CallWithID(ctx, method, params, onID)
	}
	return t.c.Call(ctx, method, params, opts...)
}

func (t streamTransport) notify(ctx context.Context, method string, params any) error {
	return t.c.Notify(ctx, method, params)
}
func (t streamTransport) restart(ctx context.Context) error { return t.c.Restart(ctx) }
func (t streamTransport) fresh() bool                       { return t.c.Fresh() }
func (t streamTransport) negotiated(Era, string)            {}
func (t streamTransport) close() process.ShutdownResult     { return t.c.Close() }
