package streamable_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentwire/agentwire/mcp"
	"github.com/agentwire/agentwire/mcp/host"
	"github.com/agentwire/agentwire/mcp/internal/mcptest"
	"github.com/agentwire/agentwire/mcp/server"
	"github.com/agentwire/agentwire/mcp/streamable"
)

// T2, guarantee E2 over HTTP: the client probes, finds a modern server, and
// lists, calls (with progress over the event stream) and listens.
func TestHTTPClientModern(t *testing.T) {
	s := mcptest.NewServer(nil)
	url, _ := mcptest.StartHTTP(t, s, nil)
	sess, err := streamable.Connect(t.Context(), url, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	if sess.Era() != mcp.Modern || sess.Probe() != host.ProbeResult || sess.ServerInfo().Name != "test-server" {
		t.Fatalf("era %s probe %s info %+v", sess.Era(), sess.Probe(), sess.ServerInfo())
	}
	tools, err := sess.ListTools(t.Context())
	if err != nil || len(tools) != 3 {
		t.Fatalf("tools %v %v", tools, err)
	}
	mcptest.CallSlow(t, sess, 3)

	changed := make(chan string, 4)
	sub, err := sess.Listen(t.Context(), host.ListenFilter{ToolsListChanged: true}, func(method string, _ json.RawMessage) { changed <- method })
	if err != nil {
		t.Fatal(err)
	}
	s.RemoveTool("fails")
	select {
	case m := <-changed:
		if m != "notifications/tools/list_changed" {
			t.Errorf("got %s", m)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no change notification on the listen stream")
	}
	sub.Close()
}

// T2: cancelling a call closes its stream, which cancels the handler on
// the server.
func TestHTTPClientCancelReachesHandler(t *testing.T) {
	s := mcptest.NewServer(nil)
	started := make(chan struct{})
	cancelled := make(chan struct{})
	s.AddTool(mcp.Tool{Name: "wait"}, func(ctx context.Context, _ *server.ToolRequest) (*mcp.ToolResult, error) {
		close(started)
		<-ctx.Done()
		close(cancelled)
		return nil, ctx.Err()
	})
	url, _ := mcptest.StartHTTP(t, s, nil)
	sess, err := streamable.Connect(t.Context(), url, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() {
		_, err := sess.CallTool(ctx, "wait", nil)
		errc <- err
	}()
	<-started
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Errorf("call error %v", err)
	}
	select {
	case <-cancelled:
	case <-time.After(10 * time.Second):
		t.Fatal("the handler was not cancelled")
	}
}

// T2: a legacy-only HTTP server answers the probe with a JSON-RPC error;
// the client falls back to initialize and works statelessly.
func TestHTTPClientFallsBackToLegacy(t *testing.T) {
	url, _ := mcptest.StartHTTP(t, mcptest.NewServer(&server.Options{Eras: mcp.LegacyOnly}), nil)
	sess, err := streamable.Connect(t.Context(), url, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	if sess.Era() != mcp.Legacy || sess.ProtocolVersion() != mcp.LatestLegacyVersion || sess.Probe() != host.ProbeError {
		t.Fatalf("era %s version %s probe %s", sess.Era(), sess.ProtocolVersion(), sess.Probe())
	}
	res, err := sess.CallTool(t.Context(), "echo", map[string]any{"text": "legacy"})
	if err != nil || res.Content[0].Text != "legacy" {
		t.Fatalf("%+v %v", res, err)
	}
}

// T2: 401, 403, 5xx and network errors end the connect with an error;
// none is taken for a legacy server (guarantee E2).
func TestHTTPClientErrorsAreNotLegacyEvidence(t *testing.T) {
	var initializes atomic.Int32
	status := func(code int) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get(mcp.HeaderMethod) == "" {
				initializes.Add(1)
			}
			if code == 401 {
				w.Header().Set("WWW-Authenticate", `Bearer realm="mcp"`)
			}
			http.Error(w, http.StatusText(code), code)
		}
	}
	for _, code := range []int{401, 403, 500, 502, 503} {
		srv := httptest.NewServer(status(code))
		_, err := streamable.Connect(t.Context(), srv.URL, nil, nil)
		srv.Close()
		var hse *streamable.HTTPStatusError
		if !errors.As(err, &hse) || hse.StatusCode != code {
			t.Errorf("%d: error %v", code, err)
		}
		if code == 401 && !strings.Contains(err.Error(), "WWW-Authenticate") {
			t.Errorf("401 without the challenge: %v", err)
		}
	}
	if n := initializes.Load(); n != 0 {
		t.Errorf("%d initialize attempts after an error status", n)
	}
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	if _, err := streamable.Connect(t.Context(), url, nil, nil); !errors.Is(err, streamable.ErrHTTPTransport) {
		t.Errorf("closed port: %v", err)
	}
}

// T2: the token option authenticates; a wrong token is a 401 error.
func TestHTTPClientToken(t *testing.T) {
	url, _ := mcptest.StartHTTP(t, mcptest.NewServer(nil), &streamable.Options{Token: "t0k"})
	if _, err := streamable.Connect(t.Context(), url, nil, &streamable.ClientOptions{Token: "nope"}); err == nil || !strings.Contains(err.Error(), "401") {
		t.Fatalf("wrong token: %v", err)
	}
	sess, err := streamable.Connect(t.Context(), url, nil, &streamable.ClientOptions{Token: "t0k"})
	if err != nil {
		t.Fatal(err)
	}
	sess.Close()
}
