package e2e

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentwire/agentwire/mcp"
	"github.com/agentwire/agentwire/mcp/auth"
	"github.com/agentwire/agentwire/mcp/host"
	"github.com/agentwire/agentwire/mcp/server"
	"github.com/agentwire/agentwire/mcp/streamable"
	"github.com/agentwire/agentwire/oauth/discover"
	"github.com/agentwire/agentwire/oauth/resource"
)

// otherResource is a resource the provider issues tokens for that no
// server here is.
const otherResource = "https://other.example.test/mcp"

// The protected MCP servers' scopes: every request needs mcp:read, the
// write tool mcp:write too.
var scopesSupported = []string{"mcp:read", "mcp:write"}

func TestProtectedServerAgainstOIDCProvider(t *testing.T) {
	// The servers are listening before the provider starts, which must
	// know their resources; they are protected once its issuer is known.
	jwtServer := newMCPServer(t)
	opaqueServer := newMCPServer(t)
	p := startProvider(t, providerConfig{
		Resource:        jwtServer.Resource,
		ExtraResources:  []string{otherResource, opaqueServer.Resource},
		OpaqueResources: []string{opaqueServer.Resource},
	})
	// Bounds everything but the install and the start (bounded of their own).
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	as := newASClient(ctx, t, p)

	jwtVerifier, err := resource.NewJWTVerifier(resource.JWTOptions{
		Issuer:      p.Issuer,
		Resource:    jwtServer.Resource,
		RequireType: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	jwtServer.protect(t, jwtVerifier, p.Issuer)
	introspection, err := resource.NewIntrospectionVerifier(resource.IntrospectionOptions{
		Endpoint:        as.meta.IntrospectionEndpoint,
		ClientID:        rsClientID,
		ClientSecret:    rsClientSecret,
		Resource:        opaqueServer.Resource,
		RequireAudience: true,
		Issuer:          p.Issuer,
		// Without a cache, so that a revocation is seen at once.
		CacheSize: -1,
	})
	if err != nil {
		t.Fatal(err)
	}
	opaqueServer.protect(t, introspection, p.Issuer)

	t.Run("discovery", func(t *testing.T) {
		prm, err := discover.ProtectedResource(ctx, http.DefaultClient, jwtServer.Endpoint, "")
		if err != nil {
			t.Fatal(err)
		}
		if prm.Resource != jwtServer.Resource || !slices.Equal(prm.AuthorizationServers, []string{p.Issuer}) {
			t.Errorf("protected resource metadata: resource %q, authorization servers %q; want %q, [%q]",
				prm.Resource, prm.AuthorizationServers, jwtServer.Resource, p.Issuer)
		}
		if !slices.Contains(as.meta.CodeChallengeMethodsSupported, "S256") || as.meta.IntrospectionEndpoint == "" {
			t.Errorf("provider metadata: code challenge methods %q, introspection endpoint %q",
				as.meta.CodeChallengeMethodsSupported, as.meta.IntrospectionEndpoint)
		}
	})

	read := as.authorize(ctx, t, jwtServer.Resource, "mcp:read")
	t.Run("JWT access token accepted", func(t *testing.T) {
		if strings.Count(read.AccessToken, ".") != 2 {
			t.Fatalf("the provider issued %q, not a JWT", read.AccessToken)
		}
		sess := connect(ctx, t, p, jwtServer.Endpoint, read.AccessToken)
		tools, err := sess.ListTools(ctx)
		if err != nil {
			t.Fatalf("tools/list: %v\n%s", err, p.Diagnostics())
		}
		var names []string
		for _, tool := range tools {
			names = append(names, tool.Name)
		}
		if slices.Sort(names); !slices.Equal(names, []string{"whoami", "write"}) {
			t.Errorf("tools/list: %q", names)
		}
		if got, want := callText(ctx, t, p, sess, "whoami"), "user-1 "+clientID+" [mcp:read]"; got != want {
			t.Errorf("whoami: %q, want %q", got, want)
		}
	})

	t.Run("insufficient scope", func(t *testing.T) {
		sess := connect(ctx, t, p, jwtServer.Endpoint, read.AccessToken)
		_, err := sess.CallTool(ctx, "write", map[string]any{})
		c := refusal(t, err, http.StatusForbidden)
		if c.Param("error") != "insufficient_scope" || !slices.Contains(c.Scopes(), "mcp:write") {
			t.Errorf("403 challenge: error %q, scope %q; want insufficient_scope naming mcp:write", c.Param("error"), c.Param("scope"))
		}
		// The connection stays usable: the open tool still works.
		callText(ctx, t, p, sess, "whoami")
	})

	// Step-up: authorize again, for what the 403 asked.
	both := as.authorize(ctx, t, jwtServer.Resource, "mcp:read mcp:write")
	t.Run("step-up", func(t *testing.T) {
		sess := connect(ctx, t, p, jwtServer.Endpoint, both.AccessToken)
		if got := callText(ctx, t, p, sess, "write"); got != "written by user-1" {
			t.Errorf("write after the step-up: %q", got)
		}
	})

	t.Run("token for another resource refused", func(t *testing.T) {
		other := as.authorize(ctx, t, otherResource, "mcp:read mcp:write")
		_, err := streamable.Connect(ctx, jwtServer.Endpoint, nil, &streamable.ClientOptions{Token: other.AccessToken})
		c := refusal(t, err, http.StatusUnauthorized)
		if c.Param("error") != "invalid_token" {
			t.Errorf("401 challenge: error %q, want invalid_token", c.Param("error"))
		}
	})

	t.Run("refresh", func(t *testing.T) {
		if both.RefreshToken == "" {
			t.Fatalf("the provider issued no refresh token: %+v", both)
		}
		fresh := as.refresh(ctx, t, both.RefreshToken, jwtServer.Resource)
		if fresh.AccessToken == both.AccessToken {
			t.Fatal("the refresh returned the same access token")
		}
		sess := connect(ctx, t, p, jwtServer.Endpoint, fresh.AccessToken)
		if got := callText(ctx, t, p, sess, "write"); got != "written by user-1" {
			t.Errorf("write with the refreshed token: %q", got)
		}
	})

	t.Run("introspection", func(t *testing.T) {
		tok := as.authorize(ctx, t, opaqueServer.Resource, "mcp:read mcp:write")
		if strings.Contains(tok.AccessToken, ".") {
			t.Fatalf("the provider issued %q for the opaque resource, a JWT", tok.AccessToken)
		}
		sess := connect(ctx, t, p, opaqueServer.Endpoint, tok.AccessToken)
		if got, want := callText(ctx, t, p, sess, "whoami"), "user-1 "+clientID+" [mcp:read mcp:write]"; got != want {
			t.Errorf("whoami: %q, want %q", got, want)
		}
		// A JWT for the other server is no token here. oidc-provider does
		// not introspect JWT access tokens (400 unsupported_token_type),
		// which refuses the token: 401 invalid_token, not a failure to
		// decide (503).
		_, err := streamable.Connect(ctx, opaqueServer.Endpoint, nil, &streamable.ClientOptions{Token: both.AccessToken})
		if c := refusal(t, err, http.StatusUnauthorized); c.Param("error") != "invalid_token" {
			t.Errorf("a JWT for another resource at the opaque-token server: error %q, want invalid_token", c.Param("error"))
		}

		as.revoke(ctx, t, tok.AccessToken)
		_, err = sess.CallTool(ctx, "whoami", map[string]any{})
		if c := refusal(t, err, http.StatusUnauthorized); c.Param("error") != "invalid_token" {
			t.Errorf("revoked token: error %q, want invalid_token", c.Param("error"))
		}
		_, err = streamable.Connect(ctx, opaqueServer.Endpoint, nil, &streamable.ClientOptions{Token: tok.AccessToken})
		refusal(t, err, http.StatusUnauthorized)
	})
}

// mcpServer is an MCP server on httptest, protected once protect has
// been called.
type mcpServer struct {
	Endpoint string              // where clients connect
	Resource string              // its canonical URL, here the same
	Handler  *streamable.Handler // once protected
	mux      *http.ServeMux

	mu       sync.Mutex
	requests []served
}

// served is a request the server answered.
type served struct {
	Method, Path string
	Bearer       bool // it carried a bearer token
	Status       int
}

func (r served) String() string {
	b := ""
	if r.Bearer {
		b = " (bearer)"
	}
	return fmt.Sprintf("%s %s%s %d", r.Method, r.Path, b, r.Status)
}

// Requests returns the requests served so far, in order.
func (s *mcpServer) Requests() []served {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.requests)
}

// record notes each request h answers, and its status.
func (s *mcpServer) record(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		h.ServeHTTP(sw, r)
		s.mu.Lock()
		s.requests = append(s.requests, served{r.Method, r.URL.Path, strings.HasPrefix(strings.ToLower(r.Header.Get("Authorization")), "bearer "), sw.status})
		s.mu.Unlock()
	})
}

// statusWriter keeps the status written through it.
type statusWriter struct {
	http.ResponseWriter
	status int
	wrote  bool
}

func (w *statusWriter) WriteHeader(code int) {
	if !w.wrote {
		w.status, w.wrote = code, true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	w.wrote = true
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func newMCPServer(t *testing.T) *mcpServer {
	mux := http.NewServeMux()
	web := httptest.NewServer(mux)
	t.Cleanup(web.Close)
	return &mcpServer{Endpoint: web.URL + "/mcp", Resource: web.URL + "/mcp", mux: mux}
}

// protect serves the MCP server behind v, for issuer's tokens: whoami
// says who calls with which scopes, write needs mcp:write.
func (s *mcpServer) protect(t *testing.T, v auth.Verifier, issuer string) {
	srv := server.New(mcp.Implementation{Name: "e2e", Version: "1.0.0"}, nil)
	server.AddTool(srv, mcp.Tool{Name: "whoami", Description: "Says who calls."},
		func(ctx context.Context, req *server.ToolRequest, _ struct{}) (*mcp.ToolResult, error) {
			id := auth.IdentityFrom(ctx)
			return mcp.TextResult(id.Subject + " " + id.ClientID + " [" + strings.Join(id.Scopes, " ") + "]"), nil
		})
	server.AddTool(srv, mcp.Tool{Name: "write", Description: "Writes.", Scopes: []string{"mcp:write"}},
		func(ctx context.Context, req *server.ToolRequest, _ struct{}) (*mcp.ToolResult, error) {
			return mcp.TextResult("written by " + auth.IdentityFrom(ctx).Subject), nil
		})
	h := streamable.NewHandler(srv, &streamable.Options{Protect: &streamable.Protection{
		Verifier: v,
		Metadata: auth.ProtectedResourceMetadata{
			Resource:             s.Resource,
			AuthorizationServers: []string{issuer},
			ScopesSupported:      scopesSupported,
		},
		Scopes: []string{"mcp:read"},
	}})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		h.Shutdown(ctx)
	})
	s.Handler = h
	s.mux.Handle("/", s.record(h))
}

// connect opens a session with token; it is closed when t ends.
func connect(ctx context.Context, t *testing.T, p *provider, endpoint, token string) *host.Session {
	t.Helper()
	sess, err := streamable.Connect(ctx, endpoint, nil, &streamable.ClientOptions{Token: token})
	if err != nil {
		t.Fatalf("connecting to %s: %v\n%s", endpoint, err, p.Diagnostics())
	}
	t.Cleanup(func() { sess.Close() })
	return sess
}

// callText calls a tool without arguments and returns its text.
func callText(ctx context.Context, t *testing.T, p *provider, sess *host.Session, tool string) string {
	t.Helper()
	res, err := sess.CallTool(ctx, tool, map[string]any{})
	if err != nil {
		t.Fatalf("calling %s: %v\n%s", tool, err, p.Diagnostics())
	}
	if res.IsError || len(res.Content) != 1 {
		t.Fatalf("calling %s: %+v", tool, res)
	}
	return res.Content[0].Text
}

// refusal checks that err is an HTTP refusal with status and returns its
// Bearer challenge.
func refusal(t *testing.T, err error, status int) discover.Challenge {
	t.Helper()
	var hse *streamable.HTTPStatusError
	if !errors.As(err, &hse) || hse.StatusCode != status {
		t.Fatalf("got %v, want an HTTP %d", err, status)
	}
	cs, err := discover.ParseChallenges([]string{hse.Authenticate})
	if err != nil {
		t.Fatalf("WWW-Authenticate %q: %v", hse.Authenticate, err)
	}
	c, ok := discover.Find(cs, "Bearer")
	if !ok {
		t.Fatalf("WWW-Authenticate %q: no Bearer challenge", hse.Authenticate)
	}
	return c
}
