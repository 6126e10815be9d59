package streamable_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/agentwire/agentwire/client"
	"github.com/agentwire/agentwire/mcp/host"
	"github.com/agentwire/agentwire/mcp/internal/mcptest"
	"github.com/agentwire/agentwire/mcp/streamable"
	"github.com/agentwire/agentwire/rpc"
)

// Over HTTP no rpc.Conn sends a session's messages, yet the outbound
// middleware of host.Options.Transport sees every call — the probe, the
// tool call — with the id it was sent with, and what it puts in the params
// reaches the server.
func TestHTTPSessionRunsTheOutboundMiddleware(t *testing.T) {
	srv := mcptest.NewServer(nil)
	h := streamable.NewHandler(srv, nil)
	web := httptest.NewServer(h)
	defer web.Close()
	defer h.Shutdown(context.Background())

	var mu sync.Mutex
	var seen []string
	stamp := func(next rpc.Invoker) rpc.Invoker {
		return func(ctx context.Context, c *rpc.OutboundCall) (json.RawMessage, error) {
			res, err := next(ctx, c)
			mu.Lock()
			seen = append(seen, c.Method+" id="+string(c.ID))
			mu.Unlock()
			return res, err
		}
	}
	opts := &host.Options{Transport: &client.Options{Outbound: []rpc.OutboundMiddleware{stamp}}}
	sess, err := streamable.Connect(t.Context(), web.URL+"/mcp", opts, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	res, err := sess.CallTool(t.Context(), "echo", map[string]string{"text": "hi"})
	if err != nil || res.Content[0].Text != "hi" {
		t.Fatalf("CallTool = %+v, %v", res, err)
	}
	mu.Lock()
	defer mu.Unlock()
	got := strings.Join(seen, ",")
	if !strings.Contains(got, "server/discover id=") || !strings.HasSuffix(got, "tools/call id="+lastID(seen)) || strings.Contains(got, "id=,") {
		t.Errorf("the outbound middleware saw %s, want the probe and the call, each with its id", got)
	}
}

func lastID(seen []string) string {
	_, id, _ := strings.Cut(seen[len(seen)-1], "id=")
	if id == "" {
		return "<missing>"
	}
	return id
}
