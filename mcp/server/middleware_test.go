package server_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/agentwire/agentwire/internal/wiretest"
	"github.com/agentwire/agentwire/jsonrpc"
	"github.com/agentwire/agentwire/mcp"
	"github.com/agentwire/agentwire/mcp/internal/mcptest"
	"github.com/agentwire/agentwire/mcp/server"
)

// seen is what a recording middleware saw of each call.
type seen struct {
	mu    sync.Mutex
	calls []string
}

func (s *seen) middleware(next server.CallHandler) server.CallHandler {
	return func(ctx context.Context, c *server.Call) (any, error) {
		res, err := next(ctx, c)
		client, _ := c.Client()
		s.mu.Lock()
		s.calls = append(s.calls, fmt.Sprintf("%s id=%s era=%v version=%q name=%q uri=%q client=%q toolError=%v err=%v",
			c.Method, c.Request.ID, c.Era, c.ProtocolVersion, c.Name, c.URI, client.Name, c.ToolError, err != nil))
		s.mu.Unlock()
		return res, err
	}
}

func (s *seen) all() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Join(s.calls, "\n")
}

// A middleware sees MCP's view of a request in both eras: the tool named,
// the era and version served, the client's self-description, and whether
// the tool failed in its result.
func TestMiddlewareSeesTheToolEraVersionAndClient(t *testing.T) {
	var rec seen
	runMCP(t, &server.Options{Middleware: []server.Middleware{rec.middleware}}, func(w *wiretest.Wire, _ *server.Server) {
		w.Exchange(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"},` + mcptest.Meta + `}}`)
		w.Exchange(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"fails",` + mcptest.Meta + `}}`)
		w.Exchange(`{"jsonrpc":"2.0","id":3,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"legacy-host","version":"2"}}}`)
		w.Send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
		w.Exchange(`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x"}}}`)
		w.Exchange(`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"nope"}}`)
	})
	want := strings.Join([]string{
		`tools/call id=1 era=modern version="2026-07-28" name="echo" uri="" client="t" toolError=false err=false`,
		`tools/call id=2 era=modern version="2026-07-28" name="fails" uri="" client="t" toolError=true err=false`,
		`initialize id=3 era=legacy version="" name="" uri="" client="" toolError=false err=false`,
		`tools/call id=4 era=legacy version="2025-11-25" name="echo" uri="" client="legacy-host" toolError=false err=false`,
		`tools/call id=5 era=legacy version="2025-11-25" name="nope" uri="" client="legacy-host" toolError=false err=true`,
	}, "\n")
	if got := rec.all(); got != want {
		t.Errorf("the middleware saw\n%s\nwant\n%s", got, want)
	}
}

// A middleware that refuses answers the request with its error, and the
// tool never runs; the chain runs outermost first.
func TestMiddlewareRefusesBeforeTheToolRuns(t *testing.T) {
	var order []string
	var mu sync.Mutex
	mark := func(name string) server.Middleware {
		return func(next server.CallHandler) server.CallHandler {
			return func(ctx context.Context, c *server.Call) (any, error) {
				mu.Lock()
				order = append(order, name)
				mu.Unlock()
				if name == "guard" && c.Name == "echo" {
					return nil, jsonrpc.NewError(-32000, "refused by policy", map[string]any{"reason": "policy"})
				}
				return next(ctx, c)
			}
		}
	}
	ran := false
	opts := &server.Options{Middleware: []server.Middleware{mark("outer"), nil, mark("guard")}}
	runMCP(t, opts, func(w *wiretest.Wire, s *server.Server) {
		server.AddTool(s, mcp.Tool{Name: "echo"}, func(context.Context, *server.ToolRequest, mcptest.EchoIn) (*mcp.ToolResult, error) {
			ran = true
			return mcp.TextResult("ran"), nil
		})
		got := mcptest.One(t, w.Exchange(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"},`+mcptest.Meta+`}}`))
		mcptest.JSONEq(t, got, `{"jsonrpc":"2.0","id":7,"error":{"code":-32000,"message":"refused by policy","data":{"reason":"policy"}}}`)
	})
	if ran {
		t.Error("the tool ran although the middleware refused the call")
	}
	if got := strings.Join(order, ","); got != "outer,guard" {
		t.Errorf("middleware order %s, want outer,guard", got)
	}
}
