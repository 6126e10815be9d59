package authcode_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentwire/agentwire/mcp/auth"
	"github.com/agentwire/agentwire/mcp/host"
	"github.com/agentwire/agentwire/mcp/streamable"
	"github.com/agentwire/agentwire/oauth/authcode"
	"github.com/agentwire/agentwire/oauth/discover"
)

// setup starts a fake authorization server and an MCP server it
// protects; opts defaults to a dynamically registering public client.
func setup(t *testing.T, cfg *mcpConfig) (*fakeAS, *fakeMCP) {
	t.Helper()
	as := newFakeAS()
	t.Cleanup(as.Close)
	m := newFakeMCP(as, cfg)
	t.Cleanup(m.Close)
	return as, m
}

func defaultOptions() authcode.Options {
	return authcode.Options{
		RedirectURL:  redirectURL,
		Redirect:     userAgent,
		Registration: &authcode.Registration{ClientName: "test-client"},
	}
}

func newAuthorizer(t *testing.T, opts authcode.Options) *authcode.Authorizer {
	t.Helper()
	a, err := authcode.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// session connects to m with a; the session closes with the test.
func session(t *testing.T, m *fakeMCP, a *authcode.Authorizer) *host.Session {
	t.Helper()
	sess, err := streamable.Connect(t.Context(), m.URL(), nil, &streamable.ClientOptions{Authorizer: a})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sess.Close() })
	return sess
}

// connect connects to m with a and lists its tools.
func connect(t *testing.T, m *fakeMCP, a *authcode.Authorizer) error {
	t.Helper()
	sess, err := streamable.Connect(t.Context(), m.URL(), nil, &streamable.ClientOptions{Authorizer: a})
	if err != nil {
		return err
	}
	defer sess.Close()
	_, err = sess.ListTools(t.Context())
	return err
}

// The whole flow: a 401, discovery, registration, an authorization
// request with PKCE, state, resource and the challenge's scope, a token
// request with the code, the verifier and the resource; then every call
// carries the token.
func TestAuthorizationCodeFlowObtainsATokenAfterA401(t *testing.T) {
	as, m := setup(t, nil)
	a := newAuthorizer(t, defaultOptions())
	sess := session(t, m, a)
	if _, err := sess.ListTools(t.Context()); err != nil {
		t.Fatal(err)
	}
	res, err := sess.CallTool(t.Context(), "echo", map[string]any{})
	if err != nil || res.Content[0].Text != "echoed" {
		t.Fatalf("CallTool = %+v, %v", res, err)
	}
	authz, tokens, regs := as.counts()
	if authz != 1 || tokens != 1 || regs != 1 {
		t.Fatalf("authorizations, token requests, registrations = %d, %d, %d; want 1, 1, 1", authz, tokens, regs)
	}
	q := as.lastAuthorization()
	want := map[string]string{
		"response_type":         "code",
		"client_id":             "client-1",
		"redirect_uri":          redirectURL,
		"code_challenge_method": "S256",
		"resource":              m.URL(),
		"scope":                 "mcp:basic",
	}
	for k, v := range want {
		if q.Get(k) != v {
			t.Errorf("authorization request %s = %q, want %q", k, q.Get(k), v)
		}
	}
	if len(q.Get("state")) < 16 || q.Get("code_challenge") == "" {
		t.Errorf("state %q, code_challenge %q: want both", q.Get("state"), q.Get("code_challenge"))
	}
	tr := as.lastTokenRequest()
	if tr.form.Get("grant_type") != "authorization_code" || tr.form.Get("code_verifier") == "" || tr.form.Get("resource") != m.URL() {
		t.Errorf("token request %v: want the code, the verifier and the resource", tr.form)
	}
}

// A second Authorizer sharing the token store uses the stored token: no
// registration, no authorization.
func TestASecondCallReusesTheStoredTokenWithoutAuthorization(t *testing.T) {
	as, m := setup(t, nil)
	store := &authcode.MemoryStore{}
	opts := defaultOptions()
	opts.Store = store
	if err := connect(t, m, newAuthorizer(t, opts)); err != nil {
		t.Fatal(err)
	}
	if err := connect(t, m, newAuthorizer(t, opts)); err != nil {
		t.Fatal(err)
	}
	if authz, tokens, regs := as.counts(); authz != 1 || tokens != 1 || regs != 1 {
		t.Fatalf("authorizations, token requests, registrations = %d, %d, %d; want 1, 1, 1", authz, tokens, regs)
	}
	tok, err := store.Get(t.Context(), authcode.Key{Issuer: as.URL(), Resource: m.URL()})
	if err != nil || tok == nil || tok.AccessToken == "" {
		t.Fatalf("stored token = %+v, %v", tok, err)
	}
}

// Many requests refused at once share one authorization.
func TestConcurrentRefusalsShareOneAuthorization(t *testing.T) {
	as, m := setup(t, nil)
	const n = 8
	allRefused := make(chan struct{})
	m.onRefusal = func(k int) {
		if k == n {
			close(allRefused)
		}
	}
	opts := defaultOptions()
	opts.Redirect = func(ctx context.Context, authURL string) (*url.URL, error) {
		select {
		case <-allRefused:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return userAgent(ctx, authURL)
	}
	a := newAuthorizer(t, opts)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for range n {
		wg.Go(func() { errs <- connect(t, m, a) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if authz, _, regs := as.counts(); authz != 1 || regs != 1 {
		t.Fatalf("authorizations, registrations = %d, %d; want 1, 1", authz, regs)
	}
}

// A request waiting for another's authorization is bounded by its own
// context: it ends while the authorization is still in progress.
func TestAWaitingRefusalEndsWithItsContext(t *testing.T) {
	_, m := setup(t, nil)
	release := make(chan struct{})
	entered := make(chan struct{})
	opts := defaultOptions()
	opts.Redirect = func(ctx context.Context, authURL string) (*url.URL, error) {
		close(entered)
		<-release
		return userAgent(ctx, authURL)
	}
	a := newAuthorizer(t, opts)
	first := make(chan error, 1)
	go func() { first <- connect(t, m, a) }()
	<-entered
	// The second call's context ends once its 401 has arrived: it is
	// then waiting for the first call's authorization.
	ctx, cancel := context.WithCancel(t.Context())
	client := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		resp, err := http.DefaultTransport.RoundTrip(r)
		if err == nil && resp.StatusCode == http.StatusUnauthorized {
			cancel()
		}
		return resp, err
	})}
	if _, err := streamable.Connect(ctx, m.URL(), nil, &streamable.ClientOptions{Authorizer: a, Client: client}); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	close(release)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
}

// Refusals before any authorization request: the authorization server's
// metadata without PKCE S256, or naming another issuer, a resource
// metadata document for another resource.
func TestRefusesBeforeAnyAuthorizationRequest(t *testing.T) {
	cases := []struct {
		name  string
		setup func(as *fakeAS, m *fakeMCP)
		want  error
	}{
		{"no PKCE", func(as *fakeAS, m *fakeMCP) {
			as.meta = func(md map[string]any) { delete(md, "code_challenge_methods_supported") }
		}, discover.ErrNoPKCE},
		{"plain PKCE only", func(as *fakeAS, m *fakeMCP) {
			as.meta = func(md map[string]any) { md["code_challenge_methods_supported"] = []string{"plain"} }
		}, discover.ErrNoPKCE},
		{"issuer mismatch", func(as *fakeAS, m *fakeMCP) {
			as.meta = func(md map[string]any) { md["issuer"] = "https://attacker.example.com" }
		}, discover.ErrIssuerMismatch},
		{"issuer with a trailing slash", func(as *fakeAS, m *fakeMCP) {
			as.meta = func(md map[string]any) { md["issuer"] = as.URL() + "/" }
		}, discover.ErrIssuerMismatch},
		{"resource mismatch", func(as *fakeAS, m *fakeMCP) {
			m.prm = map[string]any{"resource": "https://evil.example.com/mcp", "authorization_servers": []string{as.URL()}}
		}, discover.ErrResourceMismatch},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			as, m := setup(t, nil)
			tc.setup(as, m)
			err := connect(t, m, newAuthorizer(t, defaultOptions()))
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			if authz, tokens, regs := as.counts(); authz+tokens+regs != 0 {
				t.Fatalf("authorizations, token requests, registrations = %d, %d, %d; want none", authz, tokens, regs)
			}
		})
	}
}

// The authorization response is checked in order (state, iss, error,
// code) and, refused, its code never reaches the token endpoint.
func TestTheAuthorizationResponseIsCheckedBeforeTheTokenRequest(t *testing.T) {
	cases := []struct {
		name       string
		advertised bool
		callback   func(as *fakeAS, q url.Values)
		want       error // nil: the flow succeeds
	}{
		{"iss advertised and correct", true, nil, nil},
		{"iss not advertised and absent", false, func(_ *fakeAS, q url.Values) { q.Del("iss") }, nil},
		{"iss not advertised, present and correct", false, nil, nil},
		{"state mismatch", true, func(_ *fakeAS, q url.Values) { q.Set("state", "forged") }, authcode.ErrStateMismatch},
		{"state missing", true, func(_ *fakeAS, q url.Values) { q.Del("state") }, authcode.ErrStateMismatch},
		{"state mismatch comes before iss", true, func(_ *fakeAS, q url.Values) { q.Set("state", "forged"); q.Set("iss", "https://evil.example.com") }, authcode.ErrStateMismatch},
		{"iss missing though advertised", true, func(_ *fakeAS, q url.Values) { q.Del("iss") }, authcode.ErrIssuerMissing},
		{"iss of another issuer", true, func(_ *fakeAS, q url.Values) { q.Set("iss", "https://evil.example.com") }, authcode.ErrIssuerMismatch},
		{"iss unexpected and wrong", false, func(_ *fakeAS, q url.Values) { q.Set("iss", "https://evil.example.com") }, authcode.ErrIssuerMismatch},
		{"iss with a trailing slash", true, func(as *fakeAS, q url.Values) { q.Set("iss", as.URL()+"/") }, authcode.ErrIssuerMismatch},
		{"iss in upper case", true, func(as *fakeAS, q url.Values) { q.Set("iss", strings.ToUpper(as.URL())) }, authcode.ErrIssuerMismatch},
		{"iss twice", true, func(as *fakeAS, q url.Values) { q.Add("iss", as.URL()) }, authcode.ErrIssuerMismatch},
		{"iss wrong comes before error", true, func(_ *fakeAS, q url.Values) {
			q.Set("iss", "https://evil.example.com")
			q.Del("code")
			q.Set("error", "access_denied")
		}, authcode.ErrIssuerMismatch},
		{"error", true, func(_ *fakeAS, q url.Values) {
			q.Del("code")
			q.Set("error", "access_denied")
			q.Set("error_description", "visit https://phish.example.com")
		}, authcode.ErrAuthorization},
		{"no code", true, func(_ *fakeAS, q url.Values) { q.Del("code") }, authcode.ErrNoCode},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			as, m := setup(t, nil)
			as.meta = func(md map[string]any) { md["authorization_response_iss_parameter_supported"] = tc.advertised }
			if tc.callback != nil {
				as.callback = func(q url.Values) { tc.callback(as, q) }
			}
			err := connect(t, m, newAuthorizer(t, defaultOptions()))
			authz, tokens, _ := as.counts()
			if tc.want == nil {
				if err != nil || tokens != 1 {
					t.Fatalf("err = %v, token requests = %d; want success", err, tokens)
				}
				return
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			if authz != 1 || tokens != 0 {
				t.Fatalf("authorizations, token requests = %d, %d; want 1, 0", authz, tokens)
			}
			if strings.Contains(err.Error(), "phish") {
				t.Fatalf("the error %q echoes the server's error_description", err)
			}
		})
	}
}

// Client identity in order: pre-registered credentials for the issuer,
// then a client ID metadata document where the server takes one, then
// dynamic registration, else an error.
func TestClientIdentityIsChosenInTheSpecifiedOrder(t *testing.T) {
	const cimd = "https://client.example.com/metadata.json"
	cases := []struct {
		name          string
		cimdSupported bool
		noRegistrar   bool
		preregistered bool
		cimdURL       string
		register      bool
		wantClientID  string // "" means an error
		wantRegs      int
	}{
		{"pre-registered before everything", true, false, true, cimd, true, "pre-registered-client", 0},
		{"metadata document before registration", true, false, false, cimd, true, cimd, 0},
		{"registration when the server takes no metadata document", false, false, false, cimd, true, "client-1", 1},
		{"registration without a metadata document URL", true, false, false, "", true, "client-1", 1},
		{"no identity at all", false, true, false, cimd, true, "", 0},
		{"registration not allowed", false, false, false, "", false, "", 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			as, m := setup(t, nil)
			as.meta = func(md map[string]any) {
				md["client_id_metadata_document_supported"] = tc.cimdSupported
				if tc.noRegistrar {
					delete(md, "registration_endpoint")
				}
			}
			opts := defaultOptions()
			opts.ClientIDMetadataURL = tc.cimdURL
			if !tc.register {
				opts.Registration = nil
			}
			if tc.preregistered {
				as.clients["pre-registered-client"] = fakeClient{secret: "pre-registered-secret", method: "client_secret_basic"}
				opts.Preregistered = map[string]authcode.Credentials{as.URL(): {ClientID: "pre-registered-client", ClientSecret: "pre-registered-secret", AuthMethod: authcode.AuthClientSecretBasic}}
			}
			err := connect(t, m, newAuthorizer(t, opts))
			authz, _, regs := as.counts()
			if tc.wantClientID == "" {
				if !errors.Is(err, authcode.ErrNoClientIdentity) || authz != 0 {
					t.Fatalf("err = %v, authorizations %d; want ErrNoClientIdentity before any", err, authz)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := as.lastAuthorization().Get("client_id"); got != tc.wantClientID || regs != tc.wantRegs {
				t.Fatalf("client_id %q, registrations %d; want %q, %d", got, regs, tc.wantClientID, tc.wantRegs)
			}
		})
	}
}

// A dynamic registration sends the client's metadata: its redirect URI,
// the refresh_token grant, the application type its redirect URI implies,
// and the token endpoint authentication method it prefers among the
// server's (none for a public client).
func TestDynamicRegistrationSendsTheClientsMetadata(t *testing.T) {
	cases := []struct {
		redirect, wantType string
		supported          []string
		wantMethod         string
	}{
		{"http://127.0.0.1:3000/callback", "native", []string{"client_secret_post", "none", "client_secret_basic"}, "none"},
		{"http://localhost/callback", "native", []string{"client_secret_post", "client_secret_basic"}, "client_secret_basic"},
		{"com.example.app:/callback", "native", []string{"client_secret_post"}, "client_secret_post"},
		{"https://app.example.com/callback", "web", nil, "none"},
	}
	for _, tc := range cases {
		t.Run(tc.redirect, func(t *testing.T) {
			as, m := setup(t, nil)
			as.meta = func(md map[string]any) {
				if tc.supported == nil {
					delete(md, "token_endpoint_auth_methods_supported")
				} else {
					md["token_endpoint_auth_methods_supported"] = tc.supported
				}
			}
			opts := defaultOptions()
			opts.RedirectURL = tc.redirect
			connect(t, m, newAuthorizer(t, opts)) // the redirect URI may not be the user agent's
			as.mu.Lock()
			defer as.mu.Unlock()
			if len(as.registrations) != 1 {
				t.Fatalf("%d registrations", len(as.registrations))
			}
			r := as.registrations[0]
			if r["application_type"] != tc.wantType || r["token_endpoint_auth_method"] != tc.wantMethod || r["client_name"] != "test-client" {
				t.Errorf("registration %v: want application_type %q, token_endpoint_auth_method %q", r, tc.wantType, tc.wantMethod)
			}
			if !slices.Equal(anyStrings(r["redirect_uris"]), []string{tc.redirect}) || !slices.Contains(anyStrings(r["grant_types"]), "refresh_token") {
				t.Errorf("registration %v: want redirect_uris [%s] and the refresh_token grant", r, tc.redirect)
			}
		})
	}
}

func anyStrings(v any) []string {
	var out []string
	l, _ := v.([]any)
	for _, s := range l {
		out = append(out, s.(string))
	}
	return out
}

// The token request authenticates the client exactly as it was
// registered: Basic, the secret in the body, or neither.
func TestTheTokenRequestUsesTheRegisteredAuthMethod(t *testing.T) {
	for _, method := range []string{"client_secret_basic", "client_secret_post", "none"} {
		t.Run(method, func(t *testing.T) {
			as, m := setup(t, nil)
			as.meta = func(md map[string]any) { md["token_endpoint_auth_methods_supported"] = []string{method} }
			if err := connect(t, m, newAuthorizer(t, defaultOptions())); err != nil {
				t.Fatal(err)
			}
			as.mu.Lock()
			defer as.mu.Unlock()
			if len(as.tokenRequests) != 1 {
				t.Fatalf("%d token requests, want exactly 1", len(as.tokenRequests))
			}
			tr := as.tokenRequests[0]
			secret := as.clients["client-1"].secret
			switch method {
			case "client_secret_basic":
				if !tr.basic || tr.basicUser != "client-1" || tr.basicPass != secret || tr.form.Has("client_secret") {
					t.Errorf("token request %+v: want Basic only", tr)
				}
			case "client_secret_post":
				if tr.basic || tr.form.Get("client_secret") != secret || tr.form.Get("client_id") != "client-1" {
					t.Errorf("token request %+v: want the secret in the body", tr)
				}
			case "none":
				if tr.basic || tr.form.Has("client_secret") || tr.form.Get("client_id") != "client-1" {
					t.Errorf("token request %+v: want client_id only", tr)
				}
			}
		})
	}
}

// An unsupported registered method is refused before any request.
func TestAnUnsupportedAuthMethodIsRefused(t *testing.T) {
	as, m := setup(t, nil)
	opts := defaultOptions()
	opts.Preregistered = map[string]authcode.Credentials{as.URL(): {ClientID: "c", AuthMethod: "private_key_jwt"}}
	err := connect(t, m, newAuthorizer(t, opts))
	if !errors.Is(err, authcode.ErrUnsupportedAuth) {
		t.Fatalf("err = %v, want ErrUnsupportedAuth", err)
	}
	if authz, tokens, _ := as.counts(); authz+tokens != 0 {
		t.Fatalf("authorizations, token requests = %d, %d; want none", authz, tokens)
	}
}

// Scope: the challenge's, else the resource's scopes_supported, else
// none; offline_access only when asked for and listed by the server.
func TestTheScopeIsChosenInTheSpecifiedOrder(t *testing.T) {
	cases := []struct {
		name            string
		challenge       []string
		scopesSupported []string
		asScopes        []string
		refresh         bool
		want            string
		wantAbsent      bool
	}{
		{"from the challenge", []string{"mcp:basic"}, []string{"mcp:basic", "mcp:read", "mcp:write"}, nil, false, "mcp:basic", false},
		{"from scopes_supported", nil, []string{"mcp:basic", "mcp:read", "mcp:write"}, nil, false, "mcp:basic mcp:read mcp:write", false},
		{"omitted", nil, nil, nil, false, "", true},
		{"offline_access when listed and asked for", []string{"mcp:basic"}, nil, []string{"mcp:basic", "offline_access"}, true, "mcp:basic offline_access", false},
		{"no offline_access when not listed", []string{"mcp:basic"}, nil, []string{"mcp:basic", "mcp:read"}, true, "mcp:basic", false},
		{"no offline_access when not asked for", []string{"mcp:basic"}, nil, []string{"mcp:basic", "offline_access"}, false, "mcp:basic", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			as, m := setup(t, &mcpConfig{scopes: tc.challenge, scopesSupported: tc.scopesSupported})
			if tc.asScopes != nil {
				as.meta = func(md map[string]any) { md["scopes_supported"] = tc.asScopes }
			}
			opts := defaultOptions()
			opts.RequestRefreshToken = tc.refresh
			if err := connect(t, m, newAuthorizer(t, opts)); err != nil {
				t.Fatal(err)
			}
			q := as.lastAuthorization()
			if q.Get("scope") != tc.want || (tc.wantAbsent && q.Has("scope")) {
				t.Fatalf("scope = %q (present %v), want %q", q.Get("scope"), q.Has("scope"), tc.want)
			}
		})
	}
}

// A 403 insufficient_scope is a step-up: a new authorization for the
// union of the scopes requested and the challenge's.
func TestStepUpRequestsTheUnionOfScopes(t *testing.T) {
	as, m := setup(t, nil)
	a := newAuthorizer(t, defaultOptions())
	sess := session(t, m, a)
	res, err := sess.CallTool(t.Context(), "write", map[string]any{})
	if err != nil || res.Content[0].Text != "written" {
		t.Fatalf("CallTool = %+v, %v", res, err)
	}
	if authz, _, regs := as.counts(); authz != 2 || regs != 1 {
		t.Fatalf("authorizations, registrations = %d, %d; want 2, 1", authz, regs)
	}
	if got := strings.Fields(as.lastAuthorization().Get("scope")); !slices.Contains(got, "mcp:basic") || !slices.Contains(got, "mcp:write") {
		t.Fatalf("step-up scope = %v, want mcp:basic and mcp:write", got)
	}
	// The stepped-up token serves what the first one did.
	if _, err := sess.CallTool(t.Context(), "echo", map[string]any{}); err != nil {
		t.Fatal(err)
	}
	if authz, _, _ := as.counts(); authz != 2 {
		t.Fatalf("%d authorizations after the step-up, want 2", authz)
	}
}

// A server that keeps refusing the scope it is given gets a bounded
// number of authorizations, then the call fails with its 403.
func TestStepUpStopsWhenItAddsNoScope(t *testing.T) {
	as, m := setup(t, nil)
	as.grantScopes = func(s []string) []string {
		return slices.DeleteFunc(slices.Clone(s), func(x string) bool { return x == "mcp:admin" })
	}
	a := newAuthorizer(t, defaultOptions())
	sess := session(t, m, a)
	for range 3 {
		_, err := sess.CallTool(t.Context(), "admin", map[string]any{})
		var se *streamable.HTTPStatusError
		if !errors.As(err, &se) || se.StatusCode != 403 {
			t.Fatalf("CallTool err = %v, want the 403", err)
		}
	}
	if authz, _, _ := as.counts(); authz > 3 {
		t.Fatalf("%d authorizations, want at most 3", authz)
	}
}

// A server that asks for a new scope on every request gets at most three
// authorizations for one request (two step-ups), then the call fails with
// its 403.
func TestStepUpsPerRequestAreBounded(t *testing.T) {
	as, m := setup(t, nil)
	n := 0
	m.forbid = func() string {
		n++
		return fmt.Sprintf(`Bearer error="insufficient_scope", scope="mcp:s%d"`, n)
	}
	_, err := streamable.Connect(t.Context(), m.URL(), nil, &streamable.ClientOptions{Authorizer: newAuthorizer(t, defaultOptions())})
	var se *streamable.HTTPStatusError
	if !errors.As(err, &se) || se.StatusCode != 403 {
		t.Fatalf("Connect err = %v, want the 403", err)
	}
	if authz, _, _ := as.counts(); authz > 3 {
		t.Fatalf("%d authorizations for one request, want at most 3", authz)
	}
	if got := strings.Fields(as.lastAuthorization().Get("scope")); !slices.Contains(got, "mcp:basic") || !slices.Contains(got, "mcp:s1") {
		t.Fatalf("step-up scope = %v, want the union of mcp:basic and mcp:s1", got)
	}
}

// Refresh: an expired token is refreshed with its resource, without a
// new authorization.
func TestAnExpiredTokenIsRefreshedWithItsResource(t *testing.T) {
	as, m := setup(t, nil)
	as.expiresIn = 60
	var mu sync.Mutex
	now := time.Now()
	opts := defaultOptions()
	opts.Now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	a := newAuthorizer(t, opts)
	sess := session(t, m, a)
	mu.Lock()
	now = now.Add(2 * time.Minute)
	mu.Unlock()
	if _, err := sess.ListTools(t.Context()); err != nil {
		t.Fatal(err)
	}
	authz, tokens, _ := as.counts()
	tr := as.lastTokenRequest()
	if authz != 1 || tokens != 2 || tr.form.Get("grant_type") != "refresh_token" || tr.form.Get("resource") != m.URL() {
		t.Fatalf("authorizations %d, token requests %d, last %v; want a refresh with resource %s", authz, tokens, tr.form, m.URL())
	}
}

// A 401 re-reads the metadata: a server that moved to another
// authorization server gets a new registration there, and the old
// server's client is never shown to the new one.
func TestAMigratedServerGetsANewRegistration(t *testing.T) {
	as1 := newFakeAS()
	t.Cleanup(as1.Close)
	as2 := newFakeAS()
	t.Cleanup(as2.Close)
	var mu sync.Mutex
	current := as1
	var m *fakeMCP
	verifier := auth.VerifierFunc(func(ctx context.Context, token string) (*auth.Identity, error) {
		mu.Lock()
		as := current
		mu.Unlock()
		return as.verify(m.URL())(ctx, token)
	})
	m = newFakeMCP(as1, &mcpConfig{scopes: []string{"mcp:basic"}, verifier: verifier})
	t.Cleanup(m.Close)
	as2.set(func(as *fakeAS) { as.n = 100 }) // client ids of its own
	a := newAuthorizer(t, defaultOptions())
	sess := session(t, m, a)
	mu.Lock()
	current = as2
	mu.Unlock()
	m.mu.Lock()
	m.prm = map[string]any{"resource": m.URL(), "authorization_servers": []string{as2.URL()}}
	m.mu.Unlock()
	if _, err := sess.ListTools(t.Context()); err != nil {
		t.Fatal(err)
	}
	_, _, regs2 := as2.counts()
	if regs2 != 1 {
		t.Fatalf("%d registrations at the new server, want 1", regs2)
	}
	as1ID := as1.lastAuthorization().Get("client_id")
	as2.mu.Lock()
	defer as2.mu.Unlock()
	for _, q := range as2.authorizations {
		if q.Get("client_id") == as1ID {
			t.Fatalf("the old server's client %q was shown to the new one", as1ID)
		}
	}
	for _, tr := range as2.tokenRequests {
		if tr.form.Get("client_id") == as1ID || tr.basicUser == as1ID {
			t.Fatalf("the old server's client %q was shown to the new one", as1ID)
		}
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// Credentials pre-registered with one authorization server do not make
// the client register itself with another that a server names instead:
// the authorization fails before any request to that server.
func TestPreregisteredCredentialsForAnotherIssuerAreAnError(t *testing.T) {
	as, m := setup(t, nil)
	opts := defaultOptions()
	opts.ClientIDMetadataURL = "https://client.example/metadata.json"
	opts.Preregistered = map[string]authcode.Credentials{"https://elsewhere.example": {ClientID: "c", ClientSecret: "s", AuthMethod: authcode.AuthClientSecretBasic}}
	err := connect(t, m, newAuthorizer(t, opts))
	authz, _, regs := as.counts()
	if !errors.Is(err, authcode.ErrNoClientIdentity) || authz != 0 || regs != 0 {
		t.Fatalf("err = %v, authorizations %d, registrations %d; want ErrNoClientIdentity before any", err, authz, regs)
	}
}
