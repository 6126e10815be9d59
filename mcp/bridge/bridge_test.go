package bridge_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentwire/agentwire/mcp"
	"github.com/agentwire/agentwire/mcp/bridge"
	"github.com/agentwire/agentwire/mcp/host"
	"github.com/agentwire/agentwire/mcp/internal/mcptest"
	"github.com/agentwire/agentwire/mcp/server"
	"github.com/agentwire/agentwire/mcp/streamable"
)

// startBridge puts a bridge over HTTP in front of an in-memory server of
// the given era.
func startBridge(t *testing.T, eras mcp.Eras) (string, *host.Session) {
	t.Helper()
	child, _, err := mcptest.ConnectTo(t, &server.Options{Eras: eras}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	h := streamable.NewHandler(bridge.New(child), nil)
	srv := httptest.NewServer(h)
	t.Cleanup(func() {
		h.Shutdown(context.Background())
		srv.Close()
	})
	return srv.URL + "/mcp", child
}

// T2: every combination of HTTP client era and stdio
// server era lists and calls tools through the bridge, progress included.
func TestBridgeEras(t *testing.T) {
	for _, server := range []mcp.Eras{mcp.BothEras, mcp.LegacyOnly} {
		for _, mode := range []mcp.Eras{mcp.ModernOnly, mcp.LegacyOnly} {
			t.Run(fmt.Sprintf("server %s, client %s", server, mode), func(t *testing.T) {
				url, _ := startBridge(t, server)
				sess, err := streamable.Connect(t.Context(), url, &host.Options{Eras: mode}, nil)
				if err != nil {
					t.Fatal(err)
				}
				defer sess.Close()
				if sess.ServerInfo().Name != "test-server" {
					t.Errorf("server info %+v", sess.ServerInfo())
				}
				tools, err := sess.ListTools(t.Context())
				if err != nil || len(tools) != 3 {
					t.Fatalf("tools %v %v", tools, err)
				}
				mcptest.CallSlow(t, sess, 2)
				raw, err := sess.Request(t.Context(), "tools/call", map[string]any{"name": "echo", "arguments": map[string]any{"text": "x"}})
				if err != nil {
					t.Fatal(err)
				}
				hasResultType := strings.Contains(string(raw), `"resultType"`)
				if hasResultType != (mode == mcp.ModernOnly) {
					t.Errorf("%s client got %s", mode, raw)
				}
			})
		}
	}
}

// Two clients that pick the same progress token each get only their own
// progress: the bridge renames tokens on the way to the shared server.
func TestBridgeProgressTokensDoNotCross(t *testing.T) {
	url, _ := startBridge(t, mcp.BothEras)
	var wg sync.WaitGroup
	counts := make([]int, 4)
	for i := range counts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sess, err := streamable.Connect(t.Context(), url, nil, nil)
			if err != nil {
				t.Error(err)
				return
			}
			defer sess.Close()
			var mu sync.Mutex
			if _, err := sess.CallTool(t.Context(), "slow", map[string]any{"steps": 5}, host.WithProgress(func(float64, float64, string) {
				mu.Lock()
				counts[i]++
				mu.Unlock()
			})); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	for i, n := range counts {
		if n != 5 {
			t.Errorf("client %d saw %d progress notifications, want 5", i, n)
		}
	}
}

// A listen stream through the bridge carries the server's change
// notifications under the client's own subscription id.
func TestBridgeListen(t *testing.T) {
	s := mcptest.NewServer(nil)
	url, _ := startBridgeTo(t, s)
	sess, err := streamable.Connect(t.Context(), url, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	got := make(chan json.RawMessage, 4)
	sub, err := sess.Listen(t.Context(), host.ListenFilter{ToolsListChanged: true}, func(_ string, p json.RawMessage) { got <- p })
	if err != nil {
		t.Fatal(err)
	}
	if !sub.Honored().ToolsListChanged {
		t.Errorf("honored %+v", sub.Honored())
	}
	s.RemoveTool("fails")
	select {
	case p := <-got:
		if !strings.Contains(string(p), "subscriptionId") {
			t.Errorf("notification %s", p)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no change notification through the bridge")
	}
	sub.Close()
}

// startBridgeTo bridges to a given dual-era server in memory.
func startBridgeTo(t *testing.T, s *server.Server) (string, *host.Session) {
	t.Helper()
	child, err := mcptest.ConnectServer(t, s)
	if err != nil {
		t.Fatal(err)
	}
	h := streamable.NewHandler(bridge.New(child), nil)
	srv := httptest.NewServer(h)
	t.Cleanup(func() {
		h.Shutdown(context.Background())
		srv.Close()
	})
	return srv.URL + "/mcp", child
}
