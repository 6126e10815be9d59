package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentwire/agentwire/mcp/streamable"
	"github.com/agentwire/agentwire/oauth/authcode"
	"github.com/agentwire/agentwire/oauth/resource"
)

// TestAgentwireClientAuthenticatesOnItsOwn: agentwire's own OAuth client
// (oauth/authcode), given no token, the pre-registered native client and
// a user agent, connects to the JWT-protected server: it authorizes at
// the provider from the server's 401, steps up when a tool needs
// mcp:write, and refreshes an expired token (by its clock) without a new
// authorization. The refusal of a token for another audience is checked
// by TestProtectedServerAgainstOIDCProvider.
func TestAgentwireClientAuthenticatesOnItsOwn(t *testing.T) {
	srv := newMCPServer(t)
	p := startProvider(t, providerConfig{Resource: srv.Resource})
	v, err := resource.NewJWTVerifier(resource.JWTOptions{Issuer: p.Issuer, Resource: srv.Resource, RequireType: true})
	if err != nil {
		t.Fatal(err)
	}
	srv.protect(t, v, p.Issuer)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	ua := newUserAgent(p)
	tokens := &tokenRequests{base: http.DefaultTransport}
	clock := &fakeClock{t: time.Now()}
	a, err := authcode.New(authcode.Options{
		RedirectURL:         redirectURI,
		Redirect:            ua.redirect,
		Preregistered:       map[string]authcode.Credentials{p.Issuer: {ClientID: clientID, AuthMethod: authcode.AuthNone}},
		RequestRefreshToken: true,
		HTTPClient:          &http.Client{Transport: tokens},
		Now:                 clock.Now,
	})
	if err != nil {
		t.Fatal(err)
	}
	sent := &sentTokens{base: http.DefaultTransport}
	diag := func() string {
		return fmt.Sprintf("authorizations: %q\ntoken requests: %q\nserver saw: %s\n%s",
			ua.Authorizations(), tokens.Requests(), strings.Join(served2s(srv.Requests()), ", "), p.Diagnostics())
	}

	sess, err := streamable.Connect(ctx, srv.Endpoint, nil, &streamable.ClientOptions{
		Client:     &http.Client{Transport: sent},
		Authorizer: a,
	})
	if err != nil {
		t.Fatalf("connecting without a token: %v\n%s", err, diag())
	}
	defer sess.Close()

	// The first request had no token and was refused; the client then
	// authorized once, by itself, for the resource.
	reqs := srv.Requests()
	if i := slices.IndexFunc(reqs, func(r served) bool { return r.Path == "/mcp" }); i < 0 || reqs[i].Bearer || reqs[i].Status != http.StatusUnauthorized {
		t.Fatalf("the server's first MCP request: want one without a token answered 401\n%s", diag())
	}
	auths := ua.Authorizations()
	if len(auths) != 1 {
		t.Fatalf("%d authorizations on connecting, want 1\n%s", len(auths), diag())
	}
	first := auths[0]
	if first.Get("client_id") != clientID || first.Get("resource") != srv.Resource || first.Get("code_challenge_method") != "S256" ||
		first.Get("redirect_uri") != redirectURI || !slices.Contains(strings.Fields(first.Get("scope")), "mcp:read") {
		t.Errorf("the first authorization request: %q; want client %q, resource %q, S256, redirect %q, scope with mcp:read",
			first, clientID, srv.Resource, redirectURI)
	}
	if got := tokens.Grants(); !slices.Equal(got, []string{"authorization_code 200"}) {
		t.Errorf("token requests after connecting: %q, want one authorization_code grant\n%s", got, diag())
	}

	tools, err := sess.ListTools(ctx)
	if err != nil {
		t.Fatalf("tools/list: %v\n%s", err, diag())
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

	// Step-up: the write tool's 403 makes the client authorize again, for
	// mcp:read and mcp:write, and the call goes through.
	if got := callText(ctx, t, p, sess, "write"); got != "written by user-1" {
		t.Errorf("write: %q", got)
	}
	auths = ua.Authorizations()
	if len(auths) != 2 {
		t.Fatalf("%d authorizations after the write tool, want 2 (a step-up)\n%s", len(auths), diag())
	}
	if sc := strings.Fields(auths[1].Get("scope")); !slices.Contains(sc, "mcp:read") || !slices.Contains(sc, "mcp:write") ||
		auths[1].Get("resource") != srv.Resource {
		t.Errorf("the step-up's authorization request: %q; want scope with mcp:read and mcp:write, resource %q", auths[1], srv.Resource)
	}
	if st := srv.Handler.Stats(); st.InsufficientScope != 1 {
		t.Errorf("server stats: %d insufficient scope, want 1 (the write tool before the step-up)", st.InsufficientScope)
	}
	if got, want := callText(ctx, t, p, sess, "whoami"), "user-1 "+clientID+" [mcp:read mcp:write]"; got != want {
		t.Errorf("whoami after the step-up: %q, want %q", got, want)
	}
	if got := tokens.Grants(); !slices.Equal(got, []string{"authorization_code 200", "authorization_code 200"}) {
		t.Errorf("token requests after the step-up: %q, want two authorization_code grants\n%s", got, diag())
	}

	// Refresh: past the token's expiry by the client's clock, the next
	// call refreshes it at the provider, with no new authorization.
	before := sent.Last()
	clock.Advance(time.Hour)
	if got := callText(ctx, t, p, sess, "write"); got != "written by user-1" {
		t.Errorf("write after the refresh: %q", got)
	}
	if got := tokens.Grants(); !slices.Equal(got, []string{"authorization_code 200", "authorization_code 200", "refresh_token 200"}) {
		t.Errorf("token requests after the expiry: %q, want a refresh_token grant after the two authorizations\n%s", got, diag())
	}
	if rs := tokens.Requests(); len(rs) == 3 && rs[2].Form.Get("resource") != srv.Resource {
		t.Errorf("the refresh request names resource %q, want %q", rs[2].Form.Get("resource"), srv.Resource)
	}
	if n := len(ua.Authorizations()); n != 2 {
		t.Errorf("%d authorizations after the refresh, want still 2\n%s", n, diag())
	}
	if after := sent.Last(); after == "" || after == before {
		t.Errorf("the call after the expiry did not send a new token")
	}
	if got, want := callText(ctx, t, p, sess, "whoami"), "user-1 "+clientID+" [mcp:read mcp:write]"; got != want {
		t.Errorf("whoami with the refreshed token: %q, want %q", got, want)
	}

	// The server's side: one 401 (the first request), one 403 (the write
	// tool before the step-up), no token refused.
	if st := srv.Handler.Stats(); st.Unauthorized != 1 || st.InvalidTokens != 0 || st.InsufficientScope != 1 {
		t.Errorf("server stats: %d unauthorized (want 1), %d invalid tokens (want 0), %d insufficient scope (want 1)\n%s",
			st.Unauthorized, st.InvalidTokens, st.InsufficientScope, diag())
	}
	var scopes []string
	for _, q := range ua.Authorizations() {
		scopes = append(scopes, q.Get("scope"))
	}
	t.Logf("authorizations (their scopes): %q; token requests: %q", scopes, tokens.Grants())
}

// userAgent plays the browser for authcode.Options.Redirect: it follows
// the provider's redirects (/auth, /interaction, /auth again) with a
// cookie jar, up to the loopback redirect URI, which it returns without
// connecting to it. It records every authorization request.
type userAgent struct {
	p       *provider
	browser *http.Client

	mu    sync.Mutex
	auths []url.Values
}

func newUserAgent(p *provider) *userAgent {
	jar, _ := cookiejar.New(nil)
	return &userAgent{p: p, browser: &http.Client{
		Jar:           jar,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
}

func (u *userAgent) redirect(ctx context.Context, authURL string) (*url.URL, error) {
	au, err := url.Parse(authURL)
	if err != nil {
		return nil, err
	}
	u.mu.Lock()
	u.auths = append(u.auths, au.Query())
	u.mu.Unlock()
	next := authURL
	for hops := 0; hops < 10; hops++ {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, next, nil)
		if err != nil {
			return nil, err
		}
		resp, err := u.browser.Do(req)
		if err != nil {
			return nil, err
		}
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		resp.Body.Close()
		loc, err := resp.Location()
		if resp.StatusCode/100 != 3 || err != nil {
			return nil, fmt.Errorf("GET %s: %s, not a redirect: %s", next, resp.Status, body)
		}
		if strings.HasPrefix(loc.String(), redirectURI+"?") {
			return loc, nil
		}
		next = loc.String()
	}
	return nil, fmt.Errorf("more than 10 redirects, the last to %s", next)
}

// Authorizations are the query parameters of the authorization requests
// so far, in order.
func (u *userAgent) Authorizations() []url.Values {
	u.mu.Lock()
	defer u.mu.Unlock()
	return slices.Clone(u.auths)
}

// tokenRequests is the authorizer's HTTP transport: it records the form
// of every request that carries a grant_type (the token endpoint's) and
// the provider's answer.
type tokenRequests struct {
	base http.RoundTripper

	mu   sync.Mutex
	reqs []tokenRequest
}

type tokenRequest struct {
	Form   url.Values
	Status int
}

func (r tokenRequest) String() string {
	return fmt.Sprintf("%s %d", r.Form.Get("grant_type"), r.Status)
}

func (tr *tokenRequests) RoundTrip(req *http.Request) (*http.Response, error) {
	var form url.Values
	if req.Method == http.MethodPost && req.Body != nil {
		body, err := io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			return nil, err
		}
		req.Body = io.NopCloser(bytes.NewReader(body))
		if f, err := url.ParseQuery(string(body)); err == nil && f.Get("grant_type") != "" {
			form = f
		}
	}
	resp, err := tr.base.RoundTrip(req)
	if form != nil {
		status := 0
		if err == nil {
			status = resp.StatusCode
		}
		tr.mu.Lock()
		tr.reqs = append(tr.reqs, tokenRequest{form, status})
		tr.mu.Unlock()
	}
	return resp, err
}

// Requests are the token requests so far, in order.
func (tr *tokenRequests) Requests() []tokenRequest {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return slices.Clone(tr.reqs)
}

// Grants are the token requests so far as "GRANT_TYPE STATUS".
func (tr *tokenRequests) Grants() []string {
	var out []string
	for _, r := range tr.Requests() {
		out = append(out, r.String())
	}
	return out
}

// sentTokens is the MCP client's transport: it keeps the last bearer
// token sent.
type sentTokens struct {
	base http.RoundTripper

	mu   sync.Mutex
	last string
}

func (s *sentTokens) RoundTrip(req *http.Request) (*http.Response, error) {
	if tok, ok := strings.CutPrefix(req.Header.Get("Authorization"), "Bearer "); ok {
		s.mu.Lock()
		s.last = tok
		s.mu.Unlock()
	}
	return s.base.RoundTrip(req)
}

func (s *sentTokens) Last() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last
}

// fakeClock is the authorizer's clock, moved on by the test.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}
