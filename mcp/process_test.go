//go:build unix

package mcp_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentwire/agentwire/client"
	"github.com/agentwire/agentwire/internal/testserver"
	"github.com/agentwire/agentwire/jsonrpc"
	"github.com/agentwire/agentwire/mcp"
	"github.com/agentwire/agentwire/process"
)

func serverCommand(t *testing.T, mode string) process.Command {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return process.Command{Path: exe, Env: testserver.Command(mode)}
}

// A real subprocess, dual-era: the probe finds it modern.
func TestStartServerModern(t *testing.T) {
	sess, err := mcp.StartServer(context.Background(), serverCommand(t, "mcp"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	if sess.Era() != mcp.Modern || sess.ServerInfo().Name != "agentwire-seed" {
		t.Fatalf("era %s info %+v", sess.Era(), sess.ServerInfo())
	}
	res, err := sess.CallTool(context.Background(), "search", map[string]string{"query": "stdio"}, mcp.Retryable())
	if err != nil || !strings.Contains(res.Content[0].Text, "1 results") {
		t.Fatalf("%+v %v", res, err)
	}
}

// guarantee E2: a server that exits on the probe is restarted and spoken to in
// legacy; nothing is cached.
func TestServerExitingOnProbeIsRestarted(t *testing.T) {
	cache := mcp.NewMemoryEraCache(nil)
	start := time.Now()
	sess, err := mcp.StartServer(context.Background(), serverCommand(t, "mcp-probe-exit"), &mcp.ClientOptions{Cache: cache})
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	if sess.Era() != mcp.Legacy || sess.Probe() != mcp.ProbeExit || sess.Client().Stats().Restarts != 1 {
		t.Fatalf("era %s probe %s restarts %d", sess.Era(), sess.Probe(), sess.Client().Stats().Restarts)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("connect took %v", d)
	}
	if _, ok := cache.Get(`["` + serverCommand(t, "x").Path + `"]`); ok {
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
	sess, err := mcp.StartServer(context.Background(), serverCommand(t, "mcp-reply-exit"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	if sess.Era() != mcp.Legacy || sess.Probe() != mcp.ProbeError || sess.Client().Stats().Restarts != 1 {
		t.Fatalf("era %s probe %s restarts %d", sess.Era(), sess.Probe(), sess.Client().Stats().Restarts)
	}
}

// Regression (found in review): with a restart policy, a probe exit could
// keep connect waiting for the policy's backoff past ConnectTimeout.
func TestProbeExitRespectsConnectTimeout(t *testing.T) {
	start := time.Now()
	sess, err := mcp.StartServer(context.Background(), serverCommand(t, "mcp-probe-exit"), &mcp.ClientOptions{
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
	sess, err := mcp.StartServer(context.Background(), serverCommand(t, "mcp"), &mcp.ClientOptions{Transport: &client.Options{
		Restart: &client.RestartPolicy{Backoff: time.Millisecond},
		Process: &process.Options{Grace: 300 * time.Millisecond},
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	changed := make(chan struct{}, 8)
	sub, err := sess.Listen(context.Background(), mcp.ListenFilter{ToolsListChanged: true}, func(string, json.RawMessage) { changed <- struct{}{} })
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

// Regression: when the stdio server behind the bridge died, every client
// with a request in flight got an error carrying up to 64 KiB of the
// server's stderr, so a server that logged an API key at start-up handed it
// to another user's client. Clients now get a short error; the tail goes to
// the bridge's own log.
func TestRegressionBridgeLeaksServerStderrToClients(t *testing.T) {
	var logBuf strings.Builder
	var logMu sync.Mutex
	logger := slog.New(slog.NewTextHandler(lockedWriter{&logMu, &logBuf}, nil))
	sess, err := mcp.StartServer(context.Background(), serverCommand(t, "mcp-secret"), &mcp.ClientOptions{
		Transport: &client.Options{Restart: &client.RestartPolicy{MaxRestarts: 5}, Process: &process.Options{Stderr: io.Discard}},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	b := mcp.NewBridge(sess)
	h := b.HTTPHandler(&mcp.HTTPOptions{Logger: logger})
	srv := httptest.NewServer(h)
	defer func() {
		h.Shutdown(context.Background())
		srv.Close()
	}()
	for _, mode := range []mcp.Eras{mcp.ModernOnly, mcp.LegacyOnly} {
		c, err := mcp.ConnectHTTP(t.Context(), srv.URL+"/mcp", &mcp.ClientOptions{Eras: mode}, nil)
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.CallTool(t.Context(), "crash", map[string]any{})
		c.Close()
		var je *jsonrpc.Error
		if !errors.As(err, &je) {
			t.Fatalf("%s: crash through the bridge: %v", mode, err)
		}
		raw, _ := json.Marshal(je)
		if strings.Contains(string(raw), testserver.SecretInStderr) || strings.Contains(string(raw), "stderr") || len(raw) > 400 {
			t.Fatalf("%s: the client's error carries the server's stderr: %s", mode, raw)
		}
		if !strings.Contains(je.Message, "lost") {
			t.Errorf("%s: error does not say the server was lost: %s", mode, raw)
		}
	}
	if st := b.Stats(); st.ServerLost != 2 {
		t.Errorf("Stats %+v, want two requests lost with the server", st)
	}
	logMu.Lock()
	defer logMu.Unlock()
	if !strings.Contains(logBuf.String(), testserver.SecretInStderr) {
		t.Errorf("the bridge's log lacks the server's stderr tail:\n%s", logBuf.String())
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
