package e2e

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"

	"github.com/agentwire/agentwire/oauth/discover"
)

// clientID is the provider's native public client, whose loopback
// redirect URI matches any port; the flow never connects to it.
const (
	clientID    = "agentwire-cli"
	redirectURI = "http://127.0.0.1:8976/callback"
)

// The provider's resource server client, for introspection.
const (
	rsClientID     = "agentwire-rs"
	rsClientSecret = "rs-secret"
)

// asClient is a scripted OAuth client of the provider, with the cookie
// jar of a browser in which the user is logged in after the first flow.
type asClient struct {
	p    *provider
	meta *discover.ServerMetadata
	// revocation is the provider's revocation_endpoint (RFC 7009), which
	// discover.ServerMetadata leaves out.
	revocation string
	browser    *http.Client
}

func newASClient(ctx context.Context, t *testing.T, p *provider) *asClient {
	t.Helper()
	meta, err := discover.AuthorizationServer(ctx, http.DefaultClient, p.Issuer)
	if err != nil {
		t.Fatalf("the provider's metadata: %v\n%s", err, p.Diagnostics())
	}
	if !meta.AuthorizationResponseIssParameterSupported {
		t.Errorf("the provider does not advertise iss in authorization responses (RFC 9207)")
	}
	var extra struct {
		Revocation string `json:"revocation_endpoint"`
	}
	c := &asClient{p: p, meta: meta}
	wellKnown, _ := discover.AuthorizationServerURLs(p.Issuer)
	if err := c.do(ctx, http.DefaultClient, http.MethodGet, wellKnown[0], nil, &extra); err != nil || extra.Revocation == "" {
		t.Fatalf("the provider's revocation_endpoint: %q, %v", extra.Revocation, err)
	}
	c.revocation = extra.Revocation
	jar, _ := cookiejar.New(nil)
	c.browser = &http.Client{
		Jar: jar,
		// The flow follows the redirects itself, to stop at the
		// redirect URI.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	return c
}

// tokenResponse is a token endpoint's answer (RFC 6749 §5.1).
type tokenResponse struct {
	AccessToken  string `json:"access_token"`
	TokenType    string `json:"token_type"`
	ExpiresIn    int    `json:"expires_in"`
	RefreshToken string `json:"refresh_token"`
	Scope        string `json:"scope"`
}

// authorize runs the authorization code flow with PKCE S256 for resource
// and scope, and exchanges the code for tokens.
func (c *asClient) authorize(ctx context.Context, t *testing.T, resource, scope string) tokenResponse {
	t.Helper()
	verifier := randomString()
	sum := sha256.Sum256([]byte(verifier))
	state := randomString()
	q := url.Values{
		"response_type":         {"code"},
		"client_id":             {clientID},
		"redirect_uri":          {redirectURI},
		"scope":                 {scope},
		"state":                 {state},
		"code_challenge":        {base64.RawURLEncoding.EncodeToString(sum[:])},
		"code_challenge_method": {"S256"},
		"resource":              {resource},
	}
	next := c.meta.AuthorizationEndpoint + "?" + q.Encode()
	var callback *url.URL
	for hops := 0; callback == nil; hops++ {
		if hops == 10 {
			t.Fatalf("authorization: more than 10 redirects, the last to %s\n%s", next, c.p.Diagnostics())
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, next, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := c.browser.Do(req)
		if err != nil {
			t.Fatalf("authorization: GET %s: %v\n%s", next, err, c.p.Diagnostics())
		}
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		resp.Body.Close()
		loc, err := resp.Location()
		if resp.StatusCode/100 != 3 || err != nil {
			t.Fatalf("authorization: GET %s: %s, not a redirect: %s\n%s", next, resp.Status, body, c.p.Diagnostics())
		}
		next = loc.String()
		if strings.HasPrefix(next, redirectURI+"?") {
			callback = loc
		}
	}
	got := callback.Query()
	if e := got.Get("error"); e != "" {
		t.Fatalf("authorization refused: %s: %s\n%s", e, got.Get("error_description"), c.p.Diagnostics())
	}
	if got.Get("state") != state {
		t.Fatalf("authorization response state %q, want %q", got.Get("state"), state)
	}
	if got.Get("iss") != c.p.Issuer {
		t.Fatalf("authorization response iss %q, want %q (RFC 9207)", got.Get("iss"), c.p.Issuer)
	}
	if got.Get("code") == "" {
		t.Fatalf("authorization response without a code: %s", callback)
	}
	return c.token(ctx, t, url.Values{
		"grant_type":    {"authorization_code"},
		"code":          {got.Get("code")},
		"redirect_uri":  {redirectURI},
		"client_id":     {clientID},
		"code_verifier": {verifier},
		"resource":      {resource},
	})
}

// refresh uses a refresh token for a new access token for resource.
func (c *asClient) refresh(ctx context.Context, t *testing.T, refreshToken, resource string) tokenResponse {
	t.Helper()
	return c.token(ctx, t, url.Values{
		"grant_type":    {"refresh_token"},
		"refresh_token": {refreshToken},
		"client_id":     {clientID},
		"resource":      {resource},
	})
}

func (c *asClient) token(ctx context.Context, t *testing.T, form url.Values) tokenResponse {
	t.Helper()
	var tr tokenResponse
	if err := c.do(ctx, http.DefaultClient, http.MethodPost, c.meta.TokenEndpoint, form, &tr); err != nil {
		t.Fatalf("token endpoint, %s grant: %v\n%s", form.Get("grant_type"), err, c.p.Diagnostics())
	}
	if tr.AccessToken == "" || !strings.EqualFold(tr.TokenType, "Bearer") {
		t.Fatalf("token endpoint, %s grant: a %q token %q", form.Get("grant_type"), tr.TokenType, tr.AccessToken)
	}
	return tr
}

// revoke revokes an access token (RFC 7009).
func (c *asClient) revoke(ctx context.Context, t *testing.T, token string) {
	t.Helper()
	form := url.Values{"token": {token}, "token_type_hint": {"access_token"}, "client_id": {clientID}}
	if err := c.do(ctx, http.DefaultClient, http.MethodPost, c.revocation, form, nil); err != nil {
		t.Fatalf("revocation: %v\n%s", err, c.p.Diagnostics())
	}
}

// do sends a request (a form when form is not nil) and decodes a 200
// answer's JSON into dst, when dst is not nil.
func (c *asClient) do(ctx context.Context, hc *http.Client, method, target string, form url.Values, dst any) error {
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequestWithContext(ctx, method, target, body)
	if err != nil {
		return err
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	req.Header.Set("Accept", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s %s: %s: %s", method, target, resp.Status, data)
	}
	if dst == nil {
		return nil
	}
	return json.Unmarshal(data, dst)
}

func randomString() string {
	b := make([]byte, 32)
	rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}
