package authcode

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"golang.org/x/oauth2"

	"github.com/agentwire/agentwire/oauth/dpop"
)

// identify sets b.client: the client's identity at b's authorization
// server, in the specification's order.
func (a *Authorizer) identify(ctx context.Context, b *binding) error {
	issuer := b.key.Issuer
	if c, ok := a.opts.Preregistered[issuer]; ok {
		b.client = c
		return nil
	}
	if len(a.opts.Preregistered) > 0 {
		// Credentials given for other authorization servers: this client
		// is configured for those, and a server that moved to another
		// one is a configuration to update, not a reason to register
		// itself somewhere new (as the specification advises).
		return fmt.Errorf("%w: pre-registered credentials are for other authorization servers than %s", ErrNoClientIdentity, issuer)
	}
	if a.opts.ClientIDMetadataURL != "" && b.server.ClientIDMetadataDocumentSupported {
		b.client = Credentials{ClientID: a.opts.ClientIDMetadataURL, AuthMethod: AuthNone}
		return nil
	}
	a.mu.Lock()
	c, ok := a.registered[issuer]
	a.mu.Unlock()
	if ok {
		b.client = c
		return nil
	}
	if a.opts.Registration == nil || b.server.RegistrationEndpoint == "" {
		return fmt.Errorf("%w: %s", ErrNoClientIdentity, issuer)
	}
	c, err := a.register(ctx, b)
	if err != nil {
		return err
	}
	a.mu.Lock()
	a.registered[issuer] = c
	a.mu.Unlock()
	b.client = c
	return nil
}

// registrationRequest is the metadata sent to a registration endpoint.
type registrationRequest struct {
	ClientName              string   `json:"client_name,omitempty"`
	ClientURI               string   `json:"client_uri,omitempty"`
	RedirectURIs            []string `json:"redirect_uris"`
	GrantTypes              []string `json:"grant_types"`
	ResponseTypes           []string `json:"response_types"`
	TokenEndpointAuthMethod string   `json:"token_endpoint_auth_method"`
	ApplicationType         string   `json:"application_type"`
}

type registrationResponse struct {
	ClientID                string `json:"client_id"`
	ClientSecret            string `json:"client_secret"`
	TokenEndpointAuthMethod string `json:"token_endpoint_auth_method"`
}

// maxResponseBytes bounds a registration or token response.
const maxResponseBytes = 1 << 20

// register registers the client at b's registration endpoint (RFC 7591).
func (a *Authorizer) register(ctx context.Context, b *binding) (Credentials, error) {
	body, _ := json.Marshal(registrationRequest{
		ClientName:              a.opts.Registration.ClientName,
		ClientURI:               a.opts.Registration.ClientURI,
		RedirectURIs:            []string{a.opts.RedirectURL},
		GrantTypes:              []string{"authorization_code", "refresh_token"},
		ResponseTypes:           []string{"code"},
		TokenEndpointAuthMethod: chooseAuthMethod(b.server.TokenEndpointAuthMethodsSupported),
		ApplicationType:         applicationType(a.opts.RedirectURL),
	})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, b.server.RegistrationEndpoint, bytes.NewReader(body))
	if err != nil {
		return Credentials{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	resp, err := a.opts.HTTPClient.Do(req)
	if err != nil {
		return Credentials{}, fmt.Errorf("%w: %v", ErrRegistrationFailed, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes))
	if err != nil {
		return Credentials{}, fmt.Errorf("%w: %v", ErrRegistrationFailed, err)
	}
	if resp.StatusCode != http.StatusCreated && resp.StatusCode != http.StatusOK {
		return Credentials{}, fmt.Errorf("%w: %s answered HTTP %d", ErrRegistrationFailed, b.server.RegistrationEndpoint, resp.StatusCode)
	}
	var r registrationResponse
	if err := json.Unmarshal(data, &r); err != nil || r.ClientID == "" {
		return Credentials{}, fmt.Errorf("%w: %s answered no client_id", ErrRegistrationFailed, b.server.RegistrationEndpoint)
	}
	method := r.TokenEndpointAuthMethod
	if method == "" {
		method = chooseAuthMethod(b.server.TokenEndpointAuthMethodsSupported)
	}
	return Credentials{ClientID: r.ClientID, ClientSecret: r.ClientSecret, AuthMethod: method}, nil
}

// chooseAuthMethod picks the token endpoint authentication method a
// registration asks for: none (a public client) where the server
// supports it, else client_secret_basic, else client_secret_post. A
// server that lists none of them gets none asked for; one that lists
// nothing supports client_secret_basic (RFC 8414 §2), but a public client
// asks for none.
func chooseAuthMethod(supported []string) string {
	if len(supported) == 0 {
		return AuthNone
	}
	for _, m := range []string{AuthNone, AuthClientSecretBasic, AuthClientSecretPost} {
		if slices.Contains(supported, m) {
			return m
		}
	}
	return AuthNone
}

// applicationType is "native" for a loopback or custom-scheme redirect
// URI (RFC 8252), "web" otherwise.
func applicationType(redirect string) string {
	u, err := url.Parse(redirect)
	if err != nil {
		return "web"
	}
	if u.Scheme == "http" || u.Scheme == "https" {
		if isLoopback(u.Hostname()) {
			return "native"
		}
		return "web"
	}
	return "native"
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// authStyle is the x/oauth2 style of a token endpoint authentication
// method; never AutoDetect, which sends a request the server may record
// as a failure.
func authStyle(c Credentials) (oauth2.AuthStyle, error) {
	m := c.AuthMethod
	if m == "" {
		m = AuthNone
		if c.ClientSecret != "" {
			m = AuthClientSecretBasic
		}
	}
	switch m {
	case AuthClientSecretBasic:
		return oauth2.AuthStyleInHeader, nil
	case AuthClientSecretPost, AuthNone:
		return oauth2.AuthStyleInParams, nil
	}
	return 0, fmt.Errorf("%w: %q", ErrUnsupportedAuth, m)
}

// config is the x/oauth2 configuration of b's client.
func (a *Authorizer) config(b *binding, scopes []string) (*oauth2.Config, error) {
	style, err := authStyle(b.client)
	if err != nil {
		return nil, err
	}
	secret := b.client.ClientSecret
	if b.client.AuthMethod == AuthNone {
		secret = ""
	}
	return &oauth2.Config{
		ClientID:     b.client.ClientID,
		ClientSecret: secret,
		Endpoint: oauth2.Endpoint{
			AuthURL:   b.server.AuthorizationEndpoint,
			TokenURL:  b.server.TokenEndpoint,
			AuthStyle: style,
		},
		RedirectURL: a.opts.RedirectURL,
		Scopes:      scopes,
	}, nil
}

// authorize runs the authorization code flow at b's server for scopes.
func (a *Authorizer) authorize(ctx context.Context, b *binding, scopes []string) (*Token, error) {
	if b.client.ClientID == "" {
		if err := a.identify(ctx, b); err != nil {
			return nil, err
		}
	}
	if a.opts.RequestRefreshToken && slices.Contains(b.server.ScopesSupported, "offline_access") {
		scopes = union(scopes, []string{"offline_access"})
	}
	cfg, err := a.config(b, scopes)
	if err != nil {
		return nil, err
	}
	verifier := oauth2.GenerateVerifier()
	state := randomState()
	params := []oauth2.AuthCodeOption{oauth2.S256ChallengeOption(verifier), oauth2.SetAuthURLParam("resource", b.key.Resource)}
	if a.opts.DPoP != nil {
		// The key the code is bound to (RFC 9449 §10).
		params = append(params, oauth2.SetAuthURLParam("dpop_jkt", a.opts.DPoP.Thumbprint()))
	}
	authURL := cfg.AuthCodeURL(state, params...)
	callback, err := a.opts.Redirect(ctx, authURL)
	if err != nil {
		return nil, fmt.Errorf("authcode: the authorization step: %w", err)
	}
	code, err := checkCallback(callback, state, b.key.Issuer, b.server.AuthorizationResponseIssParameterSupported)
	if err != nil {
		return nil, err
	}
	t, err := cfg.Exchange(a.tokenContext(ctx, b), code, oauth2.VerifierOption(verifier), oauth2.SetAuthURLParam("resource", b.key.Resource))
	if err != nil {
		return nil, fmt.Errorf("authcode: the token request: %w", err)
	}
	return a.fromOAuth2(t, scopes), nil
}

// checkCallback checks an authorization response, in this order: its
// state, its iss (RFC 9207), its error, and returns its code.
func checkCallback(callback *url.URL, state, issuer string, issAdvertised bool) (string, error) {
	if callback == nil {
		return "", ErrNoCode
	}
	q := callback.Query()
	if q.Get("state") != state || len(q["state"]) != 1 {
		return "", ErrStateMismatch
	}
	iss, present := q["iss"]
	switch {
	case present && (len(iss) != 1 || iss[0] != issuer):
		return "", fmt.Errorf("%w (%s)", ErrIssuerMismatch, issuer)
	case !present && issAdvertised:
		return "", fmt.Errorf("%w (%s)", ErrIssuerMissing, issuer)
	}
	if e := q.Get("error"); e != "" {
		// The code alone: the description and URI are the server's
		// words, not ours to show.
		if !isErrorCode(e) {
			e = "(malformed)"
		}
		return "", fmt.Errorf("%w: %s", ErrAuthorization, e)
	}
	code := q.Get("code")
	if code == "" {
		return "", ErrNoCode
	}
	return code, nil
}

// isErrorCode reports whether s has the characters of an error code
// (RFC 6749 §4.1.2.1), within a sane length.
func isErrorCode(s string) bool {
	if len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}

func randomState() string {
	b := make([]byte, 24)
	rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// refresh exchanges t's refresh token at b's server.
func (a *Authorizer) refresh(ctx context.Context, b *binding, t *Token) (*Token, error) {
	if b == nil {
		return nil, fmt.Errorf("authcode: no authorization server to refresh at")
	}
	if b.client.ClientID == "" {
		if err := a.identify(ctx, b); err != nil {
			return nil, err
		}
	}
	cfg, err := a.config(b, t.Scopes)
	if err != nil {
		return nil, err
	}
	// No access token: the source refreshes at once, whatever its
	// clock says.
	nt, err := cfg.TokenSource(a.tokenContext(ctx, b), &oauth2.Token{RefreshToken: t.RefreshToken}).Token()
	if err != nil {
		return nil, fmt.Errorf("authcode: refreshing the token: %w", err)
	}
	return a.fromOAuth2(nt, t.Scopes), nil
}

// fromOAuth2 is t as stored, its expiry by the Authorizer's clock.
func (a *Authorizer) fromOAuth2(t *oauth2.Token, scopes []string) *Token {
	out := &Token{AccessToken: t.AccessToken, TokenType: t.TokenType, RefreshToken: t.RefreshToken, Scopes: slices.Clone(scopes)}
	if t.ExpiresIn > 0 {
		out.Expiry = a.now().Add(time.Duration(t.ExpiresIn) * time.Second)
	}
	return out
}

// tokenContext carries the HTTP client of b's token requests: the
// Authorizer's, adding resource to refresh requests (x/oauth2 sends only
// grant_type and refresh_token) and, with Options.DPoP, a proof to every
// request (sent once more with the server's nonce when it demands one).
func (a *Authorizer) tokenContext(ctx context.Context, b *binding) context.Context {
	base := a.opts.HTTPClient
	rt := base.Transport
	if rt == nil {
		rt = http.DefaultTransport
	}
	rt = &refreshResource{base: rt, resource: b.key.Resource}
	if a.opts.DPoP != nil {
		rt = &dpop.Transport{Key: a.opts.DPoP, Base: rt}
	}
	c := &http.Client{Transport: rt, Timeout: base.Timeout, CheckRedirect: base.CheckRedirect, Jar: base.Jar}
	return context.WithValue(ctx, oauth2.HTTPClient, c)
}

// refreshResource adds resource (RFC 8707) to refresh_token grants that
// lack it.
type refreshResource struct {
	base     http.RoundTripper
	resource string
}

func (r *refreshResource) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method != http.MethodPost || req.Body == nil || !strings.HasPrefix(req.Header.Get("Content-Type"), "application/x-www-form-urlencoded") {
		return r.base.RoundTrip(req)
	}
	body, err := io.ReadAll(req.Body)
	req.Body.Close()
	if err != nil {
		return nil, err
	}
	form, err := url.ParseQuery(string(body))
	if err == nil && form.Get("grant_type") == "refresh_token" && !form.Has("resource") {
		form.Set("resource", r.resource)
		body = []byte(form.Encode())
	}
	next := req.Clone(req.Context())
	next.Body = io.NopCloser(bytes.NewReader(body))
	next.ContentLength = int64(len(body))
	next.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	return r.base.RoundTrip(next)
}
