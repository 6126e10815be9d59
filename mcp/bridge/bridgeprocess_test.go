//go:build unix

package bridge_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/agentwire/agentwire/client"
	"github.com/agentwire/agentwire/internal/testserver"
	"github.com/agentwire/agentwire/jsonrpc"
	"github.com/agentwire/agentwire/mcp"
	"github.com/agentwire/agentwire/mcp/bridge"
	"github.com/agentwire/agentwire/mcp/host"
	"github.com/agentwire/agentwire/mcp/internal/mcptest"
	"github.com/agentwire/agentwire/mcp/streamable"
	"github.com/agentwire/agentwire/process"
)

// Regression: when the stdio server behind the bridge died, every client
// with a request in flight got an error carrying up to 64 KiB of the
// server's stderr, so a server that logged an API key at start-up handed it
// to another user's client. Clients now get a short error; the tail goes to
// the bridge's own log.
func TestRegressionBridgeLeaksServerStderrToClients(t *testing.T) {
	var logBuf strings.Builder
	var logMu sync.Mutex
	logger := slog.New(slog.NewTextHandler(lockedWriter{&logMu, &logBuf}, nil))
	sess, err := host.StartServer(context.Background(), mcptest.ServerCommand(t, "mcp-secret"), &host.Options{
		Transport: &client.Options{Restart: &client.RestartPolicy{MaxRestarts: 5}, Process: &process.Options{Stderr: io.Discard}},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	b := bridge.New(sess)
	h := streamable.NewHandler(b, &streamable.Options{Logger: logger})
	srv := httptest.NewServer(h)
	defer func() {
		h.Shutdown(context.Background())
		srv.Close()
	}()
	for _, mode := range []mcp.Eras{mcp.ModernOnly, mcp.LegacyOnly} {
		c, err := streamable.Connect(t.Context(), srv.URL+"/mcp", &host.Options{Eras: mode}, nil)
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
