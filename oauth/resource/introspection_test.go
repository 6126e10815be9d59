package resource_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/agentwire/agentwire/oauth/resource"
)

// introspector is an RFC 7662 endpoint answering from a table.
type introspector struct {
	srv *httptest.Server

	mu      sync.Mutex
	answers map[string]map[string]any // by token; absent: inactive
	status  int                       // when not 0, every answer's
	// errorCode, with status, is the OAuth error of the answer's body.
	errorCode string
	calls     int
	requests  []*http.Request
	forms     []url.Values
}

func newIntrospector(t *testing.T) *introspector {
	in := &introspector{answers: map[string]map[string]any{}}
	in.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.ParseForm()
		in.mu.Lock()
		defer in.mu.Unlock()
		in.calls++
		in.requests = append(in.requests, r)
		in.forms = append(in.forms, r.PostForm)
		if in.status != 0 {
			w.WriteHeader(in.status)
			if in.errorCode != "" {
				writeJSON(w, map[string]any{"error": in.errorCode})
			}
			return
		}
		ans, ok := in.answers[r.PostForm.Get("token")]
		if !ok {
			ans = map[string]any{"active": false}
		}
		writeJSON(w, ans)
	}))
	t.Cleanup(in.srv.Close)
	return in
}

func (in *introspector) count() int {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.calls
}

// active is oidc-provider's answer for an opaque token, issued at t0.
func active(aud any) map[string]any {
	return map[string]any{
		"active": true, "sub": "user-1", "client_id": "agentwire-cli", "token_type": "Bearer",
		"iss": "https://as.example.com", "aud": aud, "scope": "mcp:read mcp:write",
		"iat": t0.Unix(), "exp": t0.Add(5 * time.Minute).Unix(),
	}
}

func newIntrospectionVerifier(t *testing.T, in *introspector, c *clock, edit ...func(*resource.IntrospectionOptions)) *resource.IntrospectionVerifier {
	t.Helper()
	return build(t, resource.IntrospectionOptions{
		Endpoint: in.srv.URL, ClientID: "agentwire rs", ClientSecret: "s3cret:&=",
		Resource: mcpResource, Issuer: "https://as.example.com", Now: c.Now,
	}, edit, resource.NewIntrospectionVerifier)
}

func TestAnActiveTokenYieldsTheIdentityTheEndpointDescribes(t *testing.T) {
	in, c := newIntrospector(t), newClock()
	in.answers["opaque-1"] = active(mcpResource)
	id, err := newIntrospectionVerifier(t, in, c).Verify(context.Background(), "opaque-1")
	if err != nil {
		t.Fatal(err)
	}
	if id.Subject != "user-1" || id.ClientID != "agentwire-cli" || id.Issuer != "https://as.example.com" ||
		!slices.Equal(id.Audience, []string{mcpResource}) || !slices.Equal(id.Scopes, []string{"mcp:read", "mcp:write"}) ||
		!id.Expiry.Equal(t0.Add(5*time.Minute)) || id.Claims["token_type"] != "Bearer" {
		t.Errorf("identity = %+v", id)
	}
}

func TestTheClientAuthenticatesWithBasicCredentialsByDefault(t *testing.T) {
	in, c := newIntrospector(t), newClock()
	in.answers["opaque-1"] = active(mcpResource)
	if _, err := newIntrospectionVerifier(t, in, c).Verify(context.Background(), "opaque-1"); err != nil {
		t.Fatal(err)
	}
	r, form := in.requests[0], in.forms[0]
	user, pass, ok := r.BasicAuth()
	// RFC 6749 §2.3.1: each form-urlencoded before the Basic encoding.
	if !ok || user != "agentwire+rs" || pass != "s3cret%3A%26%3D" {
		t.Errorf("Basic credentials %q %q %v", user, pass, ok)
	}
	if r.Method != http.MethodPost || form.Get("token") != "opaque-1" || form.Get("token_type_hint") != "access_token" || form.Has("client_secret") {
		t.Errorf("%s with form %v", r.Method, form)
	}
}

func TestClientSecretPostSendsTheCredentialsInTheForm(t *testing.T) {
	in, c := newIntrospector(t), newClock()
	in.answers["opaque-1"] = active(mcpResource)
	v := newIntrospectionVerifier(t, in, c, func(o *resource.IntrospectionOptions) { o.AuthMethod = resource.ClientSecretPost })
	if _, err := v.Verify(context.Background(), "opaque-1"); err != nil {
		t.Fatal(err)
	}
	r, form := in.requests[0], in.forms[0]
	if _, _, ok := r.BasicAuth(); ok || form.Get("client_id") != "agentwire rs" || form.Get("client_secret") != "s3cret:&=" {
		t.Errorf("Authorization %q, form %v", r.Header.Get("Authorization"), form)
	}
	if _, err := resource.NewIntrospectionVerifier(resource.IntrospectionOptions{
		Endpoint: in.srv.URL, ClientID: "rs", Resource: mcpResource, AuthMethod: "private_key_jwt",
	}); err == nil {
		t.Error("an unknown client authentication method accepted")
	}
}

func TestAnInactiveTokenIsRefusedAndNotCached(t *testing.T) {
	in, c := newIntrospector(t), newClock()
	v := newIntrospectionVerifier(t, in, c)
	for range 2 {
		_, err := v.Verify(context.Background(), "revoked")
		refused(t, err, "not active")
	}
	if n := in.count(); n != 2 {
		t.Errorf("%d introspections, want 2", n)
	}
	_, err := v.Verify(context.Background(), "")
	refused(t, err, "empty")
}

func TestAnEndpointErrorIsAFailureNotARefusal(t *testing.T) {
	in, c := newIntrospector(t), newClock()
	v := newIntrospectionVerifier(t, in, c)
	for _, status := range []int{http.StatusInternalServerError, http.StatusServiceUnavailable, http.StatusUnauthorized} {
		in.mu.Lock()
		in.status = status
		in.mu.Unlock()
		_, err := v.Verify(context.Background(), "opaque-1")
		failed(t, err, http.StatusText(status))
	}
	in.srv.Close()
	_, err := v.Verify(context.Background(), "opaque-1")
	failed(t, err, "connect")
}

// An endpoint that cannot take the token at all (oidc-provider answers a
// JWT access token so) has refused it; a 400 for anything else is the
// verifier's own failure.
func TestATokenTheEndpointCannotIntrospectIsRefused(t *testing.T) {
	in, c := newIntrospector(t), newClock()
	v := newIntrospectionVerifier(t, in, c)
	for _, code := range []string{"unsupported_token_type", "invalid_token"} {
		in.mu.Lock()
		in.status, in.errorCode = http.StatusBadRequest, code
		in.mu.Unlock()
		_, err := v.Verify(context.Background(), "eyJ.a.jwt")
		refused(t, err, code)
	}
	in.mu.Lock()
	in.status, in.errorCode = http.StatusBadRequest, "invalid_client"
	in.mu.Unlock()
	_, err := v.Verify(context.Background(), "eyJ.a.jwt")
	failed(t, err, "invalid_client")
}

func TestAnAnswerForAnotherAudienceOrIssuerIsRefused(t *testing.T) {
	in, c := newIntrospector(t), newClock()
	in.answers["other-aud"] = active("https://other.example.com/mcp")
	in.answers["aud-array"] = active([]string{"https://other.example.com/mcp", mcpResource})
	in.answers["other-iss"] = active(mcpResource)
	in.answers["other-iss"]["iss"] = "https://evil.example.com"
	in.answers["no-aud"] = active(mcpResource)
	delete(in.answers["no-aud"], "aud")
	in.answers["expired"] = active(mcpResource)
	in.answers["expired"]["exp"] = t0.Add(-2 * time.Minute).Unix()

	v := newIntrospectionVerifier(t, in, c)
	strict := newIntrospectionVerifier(t, in, c, func(o *resource.IntrospectionOptions) { o.RequireAudience = true })
	ctx := context.Background()
	_, err := v.Verify(ctx, "other-aud")
	refused(t, err, "aud")
	_, err = v.Verify(ctx, "other-iss")
	refused(t, err, "iss")
	_, err = v.Verify(ctx, "expired")
	refused(t, err, "expired")
	_, err = strict.Verify(ctx, "no-aud")
	refused(t, err, "no aud")
	for _, tok := range []string{"aud-array", "no-aud"} {
		if _, err := v.Verify(ctx, tok); err != nil {
			t.Errorf("%s: %v", tok, err)
		}
	}
}

func TestAVerifiedTokenIsAnsweredFromTheCacheUntilItsTTL(t *testing.T) {
	in, c := newIntrospector(t), newClock()
	in.answers["opaque-1"] = active(mcpResource)
	v := newIntrospectionVerifier(t, in, c, func(o *resource.IntrospectionOptions) { o.CacheTTL = 30 * time.Second })
	for range 3 {
		id, err := v.Verify(context.Background(), "opaque-1")
		if err != nil {
			t.Fatal(err)
		}
		id.Scopes[0] = "changed by a handler" // not by the cache's
	}
	if n := in.count(); n != 1 {
		t.Errorf("%d introspections within the TTL, want 1", n)
	}
	c.Advance(30 * time.Second)
	// Revoked meanwhile: the next introspection says so.
	delete(in.answers, "opaque-1")
	_, err := v.Verify(context.Background(), "opaque-1")
	refused(t, err, "not active")
	if n := in.count(); n != 2 {
		t.Errorf("%d introspections after the TTL, want 2", n)
	}
}

func TestTheCacheNeverOutlivesTheTokensExpiry(t *testing.T) {
	in, c := newIntrospector(t), newClock()
	in.answers["short"] = active(mcpResource)
	in.answers["short"]["exp"] = t0.Add(10 * time.Second).Unix()
	v := newIntrospectionVerifier(t, in, c, func(o *resource.IntrospectionOptions) { o.CacheTTL = time.Hour })
	if _, err := v.Verify(context.Background(), "short"); err != nil {
		t.Fatal(err)
	}
	c.Advance(9 * time.Second)
	if _, err := v.Verify(context.Background(), "short"); err != nil || in.count() != 1 {
		t.Fatalf("before exp: %v, %d introspections", err, in.count())
	}
	c.Advance(time.Second)
	if _, err := v.Verify(context.Background(), "short"); err != nil || in.count() != 2 {
		t.Errorf("at exp: %v, %d introspections, want 2", err, in.count())
	}
}

func TestTheCacheHoldsAtMostItsSize(t *testing.T) {
	in, c := newIntrospector(t), newClock()
	for _, tok := range []string{"a", "b", "c"} {
		in.answers[tok] = active(mcpResource)
	}
	v := newIntrospectionVerifier(t, in, c, func(o *resource.IntrospectionOptions) { o.CacheSize = 2 })
	for _, tok := range []string{"a", "b", "a", "c", "a", "c", "b"} {
		if _, err := v.Verify(context.Background(), tok); err != nil {
			t.Fatal(err)
		}
	}
	// a, b cached; a used; c evicts b; a and c hit; b is asked again.
	if n := in.count(); n != 4 {
		t.Errorf("%d introspections, want 4", n)
	}

	none := newIntrospectionVerifier(t, in, c, func(o *resource.IntrospectionOptions) { o.CacheSize = -1 })
	for range 2 {
		none.Verify(context.Background(), "a")
	}
	if n := in.count(); n != 6 {
		t.Errorf("%d introspections without a cache, want 6", n)
	}
}
