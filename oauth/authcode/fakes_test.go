package authcode_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"

	"github.com/agentwire/agentwire/mcp"
	"github.com/agentwire/agentwire/mcp/auth"
	"github.com/agentwire/agentwire/mcp/server"
	"github.com/agentwire/agentwire/mcp/streamable"
)

// redirectURL is the clients' redirect URI: nothing listens there, the
// user agent reads it from the authorization server's redirect.
const redirectURL = "http://127.0.0.1:3000/callback"

// fakeClient is a client the fake authorization server knows.
type fakeClient struct {
	secret string
	method string
}

type grant struct {
	clientID, challenge, resource string
	scopes                        []string
}

// tokenRequest is one request to the token endpoint, as received.
type tokenRequest struct {
	form                 url.Values
	basicUser, basicPass string
	basic                bool
}

// fakeAS is an authorization server that approves every authorization
// request at once, answering with a 302 to the redirect URI, and mints
// tokens the fake MCP server accepts.
type fakeAS struct {
	srv *httptest.Server

	mu sync.Mutex
	// meta is applied to the metadata document before it is served.
	meta func(m map[string]any)
	// callback is applied to the query of the authorization response.
	callback func(q url.Values)
	// grantScopes filters what an authorization grants.
	grantScopes func([]string) []string
	expiresIn   int

	clients        map[string]fakeClient
	codes          map[string]grant
	tokens         map[string]grant
	refreshTokens  map[string]grant
	authorizations []url.Values
	tokenRequests  []tokenRequest
	registrations  []map[string]any
	n              int
}

func newFakeAS() *fakeAS {
	as := &fakeAS{clients: map[string]fakeClient{}, codes: map[string]grant{}, tokens: map[string]grant{}, refreshTokens: map[string]grant{}, expiresIn: 3600}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/oauth-authorization-server", as.metadata)
	mux.HandleFunc("GET /authorize", as.authorize)
	mux.HandleFunc("POST /token", as.token)
	mux.HandleFunc("POST /register", as.register)
	as.srv = httptest.NewServer(mux)
	return as
}

func (as *fakeAS) URL() string { return as.srv.URL }
func (as *fakeAS) Close()      { as.srv.Close() }

func (as *fakeAS) set(f func(as *fakeAS)) {
	as.mu.Lock()
	defer as.mu.Unlock()
	f(as)
}

func (as *fakeAS) metadata(w http.ResponseWriter, r *http.Request) {
	as.mu.Lock()
	m := map[string]any{
		"issuer":                                         as.URL(),
		"authorization_endpoint":                         as.URL() + "/authorize",
		"token_endpoint":                                 as.URL() + "/token",
		"registration_endpoint":                          as.URL() + "/register",
		"code_challenge_methods_supported":               []string{"S256"},
		"token_endpoint_auth_methods_supported":          []string{"none"},
		"response_types_supported":                       []string{"code"},
		"authorization_response_iss_parameter_supported": true,
	}
	if as.meta != nil {
		as.meta(m)
	}
	as.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(m)
}

func (as *fakeAS) next(prefix string) string {
	as.n++
	return fmt.Sprintf("%s-%d", prefix, as.n)
}

func (as *fakeAS) authorize(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	as.mu.Lock()
	defer as.mu.Unlock()
	as.authorizations = append(as.authorizations, q)
	if _, ok := as.clients[q.Get("client_id")]; !ok && !strings.HasPrefix(q.Get("client_id"), "https://") {
		http.Error(w, "unknown client", http.StatusBadRequest)
		return
	}
	scopes := strings.Fields(q.Get("scope"))
	if as.grantScopes != nil {
		scopes = as.grantScopes(scopes)
	}
	code := as.next("code")
	as.codes[code] = grant{clientID: q.Get("client_id"), challenge: q.Get("code_challenge"), resource: q.Get("resource"), scopes: scopes}
	resp := url.Values{"code": {code}, "state": {q.Get("state")}, "iss": {as.URL()}}
	if as.callback != nil {
		as.callback(resp)
	}
	http.Redirect(w, r, q.Get("redirect_uri")+"?"+resp.Encode(), http.StatusFound)
}

func tokenError(w http.ResponseWriter, code string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusBadRequest)
	json.NewEncoder(w).Encode(map[string]string{"error": code})
}

func (as *fakeAS) token(w http.ResponseWriter, r *http.Request) {
	r.ParseForm()
	user, pass, basic := r.BasicAuth()
	as.mu.Lock()
	defer as.mu.Unlock()
	as.tokenRequests = append(as.tokenRequests, tokenRequest{form: r.PostForm, basicUser: user, basicPass: pass, basic: basic})
	clientID := r.PostForm.Get("client_id")
	if basic {
		clientID, _ = url.QueryUnescape(user)
	}
	if !as.authenticated(clientID, r.PostForm, basic, pass) {
		tokenError(w, "invalid_client")
		return
	}
	var g grant
	switch r.PostForm.Get("grant_type") {
	case "authorization_code":
		var ok bool
		g, ok = as.codes[r.PostForm.Get("code")]
		delete(as.codes, r.PostForm.Get("code"))
		sum := sha256.Sum256([]byte(r.PostForm.Get("code_verifier")))
		if !ok || g.clientID != clientID || base64.RawURLEncoding.EncodeToString(sum[:]) != g.challenge || r.PostForm.Get("resource") != g.resource {
			tokenError(w, "invalid_grant")
			return
		}
	case "refresh_token":
		var ok bool
		g, ok = as.refreshTokens[r.PostForm.Get("refresh_token")]
		if !ok || g.clientID != clientID || r.PostForm.Get("resource") != g.resource {
			tokenError(w, "invalid_grant")
			return
		}
	default:
		tokenError(w, "unsupported_grant_type")
		return
	}
	access, refresh := as.next("access"), as.next("refresh")
	as.tokens[access] = g
	as.refreshTokens[refresh] = g
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"access_token": access, "token_type": "Bearer", "refresh_token": refresh, "expires_in": as.expiresIn, "scope": strings.Join(g.scopes, " ")})
}

// authenticated checks the client's authentication exactly as it was
// registered.
func (as *fakeAS) authenticated(clientID string, form url.Values, basic bool, pass string) bool {
	if strings.HasPrefix(clientID, "https://") {
		return !basic && !form.Has("client_secret")
	}
	c, ok := as.clients[clientID]
	if !ok {
		return false
	}
	switch c.method {
	case "client_secret_basic":
		p, _ := url.QueryUnescape(pass)
		return basic && p == c.secret && !form.Has("client_secret")
	case "client_secret_post":
		return !basic && form.Get("client_secret") == c.secret
	default:
		return !basic && !form.Has("client_secret")
	}
}

func (as *fakeAS) register(w http.ResponseWriter, r *http.Request) {
	var m map[string]any
	if err := json.NewDecoder(r.Body).Decode(&m); err != nil {
		http.Error(w, "bad", http.StatusBadRequest)
		return
	}
	as.mu.Lock()
	defer as.mu.Unlock()
	as.registrations = append(as.registrations, m)
	method, _ := m["token_endpoint_auth_method"].(string)
	id := as.next("client")
	c := fakeClient{method: method}
	resp := map[string]any{"client_id": id, "token_endpoint_auth_method": method}
	if method != "none" {
		c.secret = as.next("secret")
		resp["client_secret"] = c.secret
	}
	as.clients[id] = c
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	json.NewEncoder(w).Encode(resp)
}

// verify is an auth.Verifier accepting only the tokens as minted for
// resource.
func (as *fakeAS) verify(resource string) auth.VerifierFunc {
	return func(ctx context.Context, token string) (*auth.Identity, error) {
		as.mu.Lock()
		defer as.mu.Unlock()
		g, ok := as.tokens[token]
		if !ok || g.resource != resource {
			return nil, fmt.Errorf("%w: not minted here", auth.ErrInvalidToken)
		}
		return &auth.Identity{Subject: "user", ClientID: g.clientID, Issuer: as.URL(), Audience: []string{resource}, Scopes: slices.Clone(g.scopes)}, nil
	}
}

func (as *fakeAS) counts() (authorizations, tokens, registrations int) {
	as.mu.Lock()
	defer as.mu.Unlock()
	return len(as.authorizations), len(as.tokenRequests), len(as.registrations)
}

func (as *fakeAS) lastAuthorization() url.Values {
	as.mu.Lock()
	defer as.mu.Unlock()
	if len(as.authorizations) == 0 {
		return nil
	}
	return as.authorizations[len(as.authorizations)-1]
}

func (as *fakeAS) lastTokenRequest() tokenRequest {
	as.mu.Lock()
	defer as.mu.Unlock()
	if len(as.tokenRequests) == 0 {
		return tokenRequest{}
	}
	return as.tokenRequests[len(as.tokenRequests)-1]
}

// fakeMCP is a protected MCP server: every request needs mcp:basic, the
// tool "write" needs mcp:write and "admin" needs mcp:admin.
type fakeMCP struct {
	srv     *httptest.Server
	handler *streamable.Handler
	// prm, when set, is served as the protected resource metadata instead
	// of the handler's document.
	mu        sync.Mutex
	prm       map[string]any
	refusals  int // 401 answers to requests without a token
	onRefusal func(n int)
	// forbid, when set, answers every request with a token 403 with
	// the challenge it returns.
	forbid func() string
}

type mcpConfig struct {
	scopes          []string // Protection.Scopes
	scopesSupported []string
	verifier        auth.Verifier
}

func newFakeMCP(as *fakeAS, cfg *mcpConfig) *fakeMCP {
	if cfg == nil {
		cfg = &mcpConfig{scopes: []string{"mcp:basic"}, scopesSupported: []string{"mcp:basic", "mcp:write"}}
	}
	m := &fakeMCP{}
	mux := http.NewServeMux()
	m.srv = httptest.NewServer(mux)
	resource := m.srv.URL + "/mcp"
	s := server.New(mcp.Implementation{Name: "protected", Version: "1"}, nil)
	s.AddTool(mcp.Tool{Name: "echo"}, func(context.Context, *server.ToolRequest) (*mcp.ToolResult, error) {
		return mcp.TextResult("echoed"), nil
	})
	s.AddTool(mcp.Tool{Name: "write", Scopes: []string{"mcp:write"}}, func(context.Context, *server.ToolRequest) (*mcp.ToolResult, error) {
		return mcp.TextResult("written"), nil
	})
	s.AddTool(mcp.Tool{Name: "admin", Scopes: []string{"mcp:admin"}}, func(context.Context, *server.ToolRequest) (*mcp.ToolResult, error) {
		return mcp.TextResult("administered"), nil
	})
	v := cfg.verifier
	if v == nil {
		v = as.verify(resource)
	}
	m.handler = streamable.NewHandler(s, &streamable.Options{Protect: &streamable.Protection{
		Verifier: v,
		Metadata: auth.ProtectedResourceMetadata{Resource: resource, AuthorizationServers: []string{as.URL()}, ScopesSupported: cfg.scopesSupported},
		Scopes:   cfg.scopes,
	}})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		m.mu.Lock()
		prm, hook, forbid := m.prm, m.onRefusal, m.forbid
		if r.URL.Path == "/.well-known/oauth-protected-resource/mcp" && prm != nil {
			m.mu.Unlock()
			w.Header().Set("Content-Type", "application/json")
			json.NewEncoder(w).Encode(prm)
			return
		}
		if forbid != nil && r.Header.Get("Authorization") != "" {
			challenge := forbid()
			m.mu.Unlock()
			w.Header().Set("WWW-Authenticate", challenge)
			http.Error(w, "forbidden", http.StatusForbidden)
			return
		}
		n := 0
		if r.Method == http.MethodPost && r.Header.Get("Authorization") == "" {
			m.refusals++
			n = m.refusals
		}
		m.mu.Unlock()
		if n > 0 && hook != nil {
			hook(n)
		}
		m.handler.ServeHTTP(w, r)
	})
	return m
}

func (m *fakeMCP) URL() string { return m.srv.URL + "/mcp" }

func (m *fakeMCP) Close() {
	m.handler.Shutdown(context.Background())
	m.srv.Close()
}
