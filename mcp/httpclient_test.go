package mcp_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentwire/agentwire/mcp"
)

// startHTTP serves s over a real loopback HTTP server for the test.
func startHTTP(t *testing.T, s *mcp.Server, opts *mcp.HTTPOptions) (string, *mcp.HTTPHandler) {
	t.Helper()
	h := s.HTTPHandler(opts)
	srv := httptest.NewServer(h)
	t.Cleanup(func() {
		h.Shutdown(context.Background())
		srv.Close()
	})
	return srv.URL + "/mcp", h
}

// callSlow calls the slow tool with progress and checks that the result
// and every progress step arrived.
func callSlow(t *testing.T, sess *mcp.Session, steps int) {
	t.Helper()
	var mu sync.Mutex
	var seen []float64
	res, err := sess.CallTool(t.Context(), "slow", map[string]any{"steps": steps}, mcp.WithProgress(func(p, _ float64, _ string) {
		mu.Lock()
		seen = append(seen, p)
		mu.Unlock()
	}))
	if err != nil || res.Content[0].Text != "done" {
		t.Fatalf("%+v %v", res, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != steps {
		t.Errorf("progress %v, want %d steps", seen, steps)
	}
}

// T2, guarantee E2 over HTTP: the client probes, finds a modern server, and
// lists, calls (with progress over the event stream) and listens.
func TestHTTPClientModern(t *testing.T) {
	s := newServer(nil)
	url, _ := startHTTP(t, s, nil)
	sess, err := mcp.ConnectHTTP(t.Context(), url, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	if sess.Era() != mcp.Modern || sess.Probe() != mcp.ProbeResult || sess.ServerInfo().Name != "test-server" {
		t.Fatalf("era %s probe %s info %+v", sess.Era(), sess.Probe(), sess.ServerInfo())
	}
	tools, err := sess.ListTools(t.Context())
	if err != nil || len(tools) != 3 {
		t.Fatalf("tools %v %v", tools, err)
	}
	callSlow(t, sess, 3)

	changed := make(chan string, 4)
	sub, err := sess.Listen(t.Context(), mcp.ListenFilter{ToolsListChanged: true}, func(method string, _ json.RawMessage) { changed <- method })
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
	s := newServer(nil)
	started := make(chan struct{})
	cancelled := make(chan struct{})
	s.AddTool(mcp.Tool{Name: "wait"}, func(ctx context.Context, _ *mcp.ToolRequest) (*mcp.ToolResult, error) {
		close(started)
		<-ctx.Done()
		close(cancelled)
		return nil, ctx.Err()
	})
	url, _ := startHTTP(t, s, nil)
	sess, err := mcp.ConnectHTTP(t.Context(), url, nil, nil)
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
	url, _ := startHTTP(t, newServer(&mcp.ServerOptions{Eras: mcp.LegacyOnly}), nil)
	sess, err := mcp.ConnectHTTP(t.Context(), url, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	if sess.Era() != mcp.Legacy || sess.ProtocolVersion() != mcp.LatestLegacyVersion || sess.Probe() != mcp.ProbeError {
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
		_, err := mcp.ConnectHTTP(t.Context(), srv.URL, nil, nil)
		srv.Close()
		var hse *mcp.HTTPStatusError
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
	if _, err := mcp.ConnectHTTP(t.Context(), url, nil, nil); !errors.Is(err, mcp.ErrHTTPTransport) {
		t.Errorf("closed port: %v", err)
	}
}

// T2: the token option authenticates; a wrong token is a 401 error.
func TestHTTPClientToken(t *testing.T) {
	url, _ := startHTTP(t, newServer(nil), &mcp.HTTPOptions{Token: "t0k"})
	if _, err := mcp.ConnectHTTP(t.Context(), url, nil, &mcp.HTTPClientOptions{Token: "nope"}); err == nil || !strings.Contains(err.Error(), "401") {
		t.Fatalf("wrong token: %v", err)
	}
	sess, err := mcp.ConnectHTTP(t.Context(), url, nil, &mcp.HTTPClientOptions{Token: "t0k"})
	if err != nil {
		t.Fatal(err)
	}
	sess.Close()
}
