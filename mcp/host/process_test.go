//go:build unix

package host_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/agentwire/agentwire/client"
	"github.com/agentwire/agentwire/mcp"
	"github.com/agentwire/agentwire/mcp/host"
	"github.com/agentwire/agentwire/mcp/internal/mcptest"
	"github.com/agentwire/agentwire/process"
)

// A real subprocess, dual-era: the probe finds it modern.
func TestStartServerModern(t *testing.T) {
	sess, err := host.StartServer(context.Background(), mcptest.ServerCommand(t, "mcp"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	if sess.Era() != mcp.Modern || sess.ServerInfo().Name != "agentwire-seed" {
		t.Fatalf("era %s info %+v", sess.Era(), sess.ServerInfo())
	}
	res, err := sess.CallTool(context.Background(), "search", map[string]string{"query": "stdio"}, host.Retryable())
	if err != nil || !strings.Contains(res.Content[0].Text, "1 results") {
		t.Fatalf("%+v %v", res, err)
	}
}

// guarantee E2: a server that exits on the probe is restarted and spoken to in
// legacy; nothing is cached.
func TestServerExitingOnProbeIsRestarted(t *testing.T) {
	cache := host.NewMemoryEraCache(nil)
	start := time.Now()
	sess, err := host.StartServer(context.Background(), mcptest.ServerCommand(t, "mcp-probe-exit"), &host.Options{Cache: cache})
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	if sess.Era() != mcp.Legacy || sess.Probe() != host.ProbeExit || sess.Client().Stats().Restarts != 1 {
		t.Fatalf("era %s probe %s restarts %d", sess.Era(), sess.Probe(), sess.Client().Stats().Restarts)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("connect took %v", d)
	}
	if _, ok := cache.Get(`["` + mcptest.ServerCommand(t, "x").Path + `"]`); ok {
		t.Error("an exit on the probe was cached")
	}
	res, err := sess.CallTool(context.Background(), "echo", map[string]string{"text": "after restart"})
	if err != nil || res.Content[0].Text != "after restart" {
		t.Fatalf("%+v %v", res, err)
	}
}

// Regression (found in review): a legacy server that answers the probe with
// an error and then exits is restarted before initialize.
func TestServerReplyingThenExitingIsRestarted(t *testing.T) {
	sess, err := host.StartServer(context.Background(), mcptest.ServerCommand(t, "mcp-reply-exit"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	if sess.Era() != mcp.Legacy || sess.Probe() != host.ProbeError || sess.Client().Stats().Restarts != 1 {
		t.Fatalf("era %s probe %s restarts %d", sess.Era(), sess.Probe(), sess.Client().Stats().Restarts)
	}
}

// Regression (found in review): with a restart policy, a probe exit could
// keep connect waiting for the policy's backoff past ConnectTimeout.
func TestProbeExitRespectsConnectTimeout(t *testing.T) {
	start := time.Now()
	sess, err := host.StartServer(context.Background(), mcptest.ServerCommand(t, "mcp-probe-exit"), &host.Options{
		ConnectTimeout: time.Second,
		Transport:      &client.Options{Restart: &client.RestartPolicy{Backoff: 5 * time.Second}},
	})
	if err == nil {
		sess.Close()
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("connect took %v with a 1s ConnectTimeout (err %v)", d, err)
	}
}

// A listen stream is opened again on the server the restart policy starts
// after a crash, and keeps delivering changes.
func TestListenReopenedAfterRestart(t *testing.T) {
	sess, err := host.StartServer(context.Background(), mcptest.ServerCommand(t, "mcp"), &host.Options{Transport: &client.Options{
		Restart: &client.RestartPolicy{Backoff: time.Millisecond},
		Process: &process.Options{Grace: 300 * time.Millisecond},
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	changed := make(chan struct{}, 8)
	sub, err := sess.Listen(context.Background(), host.ListenFilter{ToolsListChanged: true}, func(string, json.RawMessage) { changed <- struct{}{} })
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	if _, err := sess.CallTool(context.Background(), "crash", nil); err == nil {
		t.Fatal("crash answered")
	}
	// The new server: a tool-set change reaches the same subscription.
	deadline := time.After(20 * time.Second)
	for {
		if _, err := sess.CallTool(context.Background(), "test_trigger_tool_change", nil); err != nil {
			t.Fatal(err)
		}
		select {
		case <-changed:
			if n := sess.Client().Stats().Restarts; n != 1 {
				t.Errorf("restarts %d", n)
			}
			return
		case <-sub.Done():
			t.Fatalf("the subscription ended: %v", sub.Err())
		case <-time.After(200 * time.Millisecond):
		case <-deadline:
			t.Fatal("no change on the reopened stream")
		}
	}
}
