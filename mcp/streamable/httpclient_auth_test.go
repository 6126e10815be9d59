package streamable_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/agentwire/agentwire/internal/wiretest"
	"github.com/agentwire/agentwire/mcp/internal/mcptest"
	"github.com/agentwire/agentwire/mcp/streamable"
)

// rotatingAuthorizer holds a token and, told of a refusal, takes the next
// one of tokens (as an OAuth client obtains a new token), until it has
// none left.
type rotatingAuthorizer struct {
	mu         sync.Mutex
	tokens     []string
	authorized atomic.Int32
	refusals   []string // the WWW-Authenticate of each refusal
	fail       error    // returned by Authorize when set
}

func (a *rotatingAuthorizer) Authorize(req *http.Request) error {
	a.authorized.Add(1)
	if a.fail != nil {
		return a.fail
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	req.Header.Set("Authorization", "Bearer "+a.tokens[0])
	return nil
}

func (a *rotatingAuthorizer) Refused(_ context.Context, _ *http.Request, resp *http.Response) (bool, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.refusals = append(a.refusals, resp.Header.Get("WWW-Authenticate"))
	if len(a.tokens) == 1 {
		return false, nil
	}
	a.tokens = a.tokens[1:]
	return true, nil
}

// serveCounted serves h, counting the requests that reach it, and returns
// its endpoint's URL.
func serveCounted(t *testing.T, h *streamable.Handler, n *atomic.Int32) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		h.Shutdown(context.Background())
		srv.Close()
	})
	return srv.URL + "/mcp"
}

// T2: a refused request is handed to the Authorizer, sent again with the
// credentials it then gives, and succeeds; every later request carries them.
func TestHTTPClientAuthorizerGetsANewTokenAfterARefusal(t *testing.T) {
	s := mcptest.NewServer(nil)
	url, _ := mcptest.StartHTTP(t, s, &streamable.Options{Token: "fresh", Logger: wiretest.Quiet})
	a := &rotatingAuthorizer{tokens: []string{"stale", "fresh"}}
	sess, err := streamable.Connect(t.Context(), url, nil, &streamable.ClientOptions{Authorizer: a})
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	before := a.authorized.Load()
	if _, err := sess.ListTools(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n := a.authorized.Load() - before; n != 1 {
		t.Errorf("a call after the new token was authorized %d times, want 1", n)
	}
	if len(a.refusals) != 1 || !strings.HasPrefix(a.refusals[0], "Bearer ") || !strings.Contains(a.refusals[0], `error="invalid_token"`) {
		t.Errorf("refusals seen: %q", a.refusals)
	}
}

// T2: an Authorizer that has nothing better lets the call fail with the
// refusal, WWW-Authenticate included.
func TestHTTPClientAuthorizerThatGivesUpFailsTheCallWithTheRefusal(t *testing.T) {
	s := mcptest.NewServer(nil)
	url, _ := mcptest.StartHTTP(t, s, &streamable.Options{Token: "fresh", Logger: wiretest.Quiet})
	a := &rotatingAuthorizer{tokens: []string{"stale"}}
	_, err := streamable.Connect(t.Context(), url, nil, &streamable.ClientOptions{Authorizer: a})
	var se *streamable.HTTPStatusError
	if !errors.As(err, &se) || se.StatusCode != http.StatusUnauthorized || !strings.Contains(se.Authenticate, "invalid_token") {
		t.Fatalf("Connect: %v", err)
	}
	if errors.Is(err, streamable.ErrHTTPTransport) {
		t.Error("a refusal reported as a transport failure")
	}
}

// T2: a server that refuses every token gets each request at most
// MaxAuthAttempts times, however eager the Authorizer.
func TestHTTPClientAuthorizerRetriesAreBounded(t *testing.T) {
	s := mcptest.NewServer(nil)
	var posts atomic.Int32
	url := serveCounted(t, streamable.NewHandler(s, &streamable.Options{Token: "never-given", Logger: wiretest.Quiet}), &posts)
	a := &rotatingAuthorizer{tokens: []string{"a", "b", "c", "d", "e", "f", "g"}}
	_, err := streamable.Connect(t.Context(), url, nil, &streamable.ClientOptions{Authorizer: a})
	var se *streamable.HTTPStatusError
	if !errors.As(err, &se) || se.StatusCode != http.StatusUnauthorized {
		t.Fatalf("Connect: %v", err)
	}
	// The first request (server/discover) is refused MaxAuthAttempts
	// times and the connect ends there: a 401 is no evidence of an era.
	if got := posts.Load(); got != streamable.MaxAuthAttempts {
		t.Errorf("%d requests reached the server, want %d", got, streamable.MaxAuthAttempts)
	}
	if n := len(a.refusals); n != streamable.MaxAuthAttempts-1 {
		t.Errorf("%d refusals handed to the Authorizer, want %d (the last is the call's answer)", n, streamable.MaxAuthAttempts-1)
	}
}

// T2: the Authorizer's own failure fails the call with its error, not as
// a transport failure, and nothing is sent.
func TestHTTPClientAuthorizerErrorFailsTheCall(t *testing.T) {
	s := mcptest.NewServer(nil)
	var posts atomic.Int32
	url := serveCounted(t, streamable.NewHandler(s, nil), &posts)
	boom := errors.New("no token store")
	a := &rotatingAuthorizer{tokens: []string{"x"}, fail: boom}
	_, err := streamable.Connect(t.Context(), url, nil, &streamable.ClientOptions{Authorizer: a})
	if !errors.Is(err, boom) || errors.Is(err, streamable.ErrHTTPTransport) {
		t.Fatalf("Connect: %v", err)
	}
	if posts.Load() != 0 {
		t.Errorf("%d requests sent without credentials", posts.Load())
	}
}
