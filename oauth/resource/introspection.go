package resource

import (
	"context"
	"crypto/sha256"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/agentwire/agentwire/mcp/auth"
)

// A ClientAuthMethod is how a resource server authenticates itself to
// the introspection endpoint (RFC 7591 §2 token_endpoint_auth_method
// values).
type ClientAuthMethod string

// The client authentication methods an IntrospectionVerifier sends.
const (
	// ClientSecretBasic sends the client ID and secret, each
	// form-urlencoded, as HTTP Basic credentials (RFC 6749 §2.3.1).
	ClientSecretBasic ClientAuthMethod = "client_secret_basic"
	// ClientSecretPost sends them as client_id and client_secret in the
	// form body.
	ClientSecretPost ClientAuthMethod = "client_secret_post"
)

// Defaults of an IntrospectionVerifier's cache.
const (
	DefaultCacheSize = 1024
	DefaultCacheTTL  = time.Minute
)

// IntrospectionOptions configures an IntrospectionVerifier. Endpoint,
// ClientID and Resource are required; every other field has a default.
type IntrospectionOptions struct {
	// Endpoint is the authorization server's introspection endpoint
	// (its metadata's introspection_endpoint).
	Endpoint string
	// ClientID and ClientSecret are this resource server's credentials
	// at the authorization server.
	ClientID, ClientSecret string
	// AuthMethod is how they are sent (ClientSecretBasic when empty).
	AuthMethod ClientAuthMethod
	// Resource is this server's canonical URL. An answer's "aud", when
	// it has one, must contain it.
	Resource string
	// RequireAudience refuses an answer without "aud".
	RequireAudience bool
	// Issuer, when set, is what an answer's "iss", when it has one, must
	// equal.
	Issuer string
	// Leeway is the clock skew allowed for an answer's "exp" and "nbf"
	// (DefaultLeeway when zero; negative for none).
	Leeway time.Duration
	// CacheSize is how many verified tokens are remembered
	// (DefaultCacheSize when zero; negative for no cache).
	CacheSize int
	// CacheTTL is how long a verified token is remembered, never beyond
	// its "exp" (DefaultCacheTTL when zero).
	CacheTTL time.Duration
	// Timeout bounds one request to the endpoint (DefaultTimeout when
	// zero).
	Timeout time.Duration
	// HTTPClient sends the requests (http.DefaultClient when nil).
	HTTPClient *http.Client
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

// An IntrospectionVerifier verifies opaque access tokens by asking the
// authorization server's introspection endpoint (RFC 7662), and
// remembers the tokens it granted for a while. It is an auth.Verifier,
// safe for concurrent use.
type IntrospectionVerifier struct {
	o     IntrospectionOptions
	cache *tokenCache
}

var _ auth.Verifier = (*IntrospectionVerifier)(nil)

// NewIntrospectionVerifier returns a verifier configured by o.
func NewIntrospectionVerifier(o IntrospectionOptions) (*IntrospectionVerifier, error) {
	if o.Endpoint == "" || o.ClientID == "" || o.Resource == "" {
		return nil, errors.New("resource: IntrospectionOptions needs Endpoint, ClientID and Resource")
	}
	if u, err := url.Parse(o.Endpoint); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return nil, errors.New("resource: the introspection endpoint is not an http(s) URL")
	}
	switch o.AuthMethod {
	case "":
		o.AuthMethod = ClientSecretBasic
	case ClientSecretBasic, ClientSecretPost:
	default:
		return nil, errors.New("resource: unknown client authentication method " + string(o.AuthMethod))
	}
	o.Leeway = max(orDefault(o.Leeway, DefaultLeeway), 0)
	o.Timeout = orDefault(o.Timeout, DefaultTimeout)
	o.HTTPClient = orDefault(o.HTTPClient, http.DefaultClient)
	if o.Now == nil {
		o.Now = time.Now
	}
	v := &IntrospectionVerifier{o: o}
	if size := orDefault(o.CacheSize, DefaultCacheSize); size > 0 {
		v.cache = newTokenCache(size)
	}
	return v, nil
}

// introspection is the part of an RFC 7662 §2.2 answer that is checked.
type introspection struct {
	Active    bool             `json:"active"`
	Subject   string           `json:"sub"`
	Issuer    string           `json:"iss"`
	Audience  jwt.Audience     `json:"aud"`
	Expiry    *jwt.NumericDate `json:"exp"`
	NotBefore *jwt.NumericDate `json:"nbf"`
}

// Verify returns the identity the introspection endpoint describes for
// token, from the cache when it was asked lately. An inactive token, or
// an answer for another audience or issuer, is refused with
// auth.ErrInvalidToken; an endpoint that cannot be reached or answers
// other than 200 is an error of another kind.
func (v *IntrospectionVerifier) Verify(ctx context.Context, token string) (*auth.Identity, error) {
	if token == "" {
		return nil, refuse("empty token")
	}
	key := sha256.Sum256([]byte(token))
	now := v.o.Now()
	if v.cache != nil {
		if id := v.cache.get(key, now); id != nil {
			return id, nil
		}
	}
	id, err := v.introspect(ctx, token, now)
	if err != nil {
		return nil, err
	}
	if v.cache != nil {
		until := now.Add(orDefault(v.o.CacheTTL, DefaultCacheTTL))
		if !id.Expiry.IsZero() && id.Expiry.Before(until) {
			until = id.Expiry
		}
		v.cache.put(key, id, until, now)
	}
	return cloneIdentity(id), nil
}

func (v *IntrospectionVerifier) introspect(ctx context.Context, token string, now time.Time) (*auth.Identity, error) {
	form := url.Values{"token": {token}, "token_type_hint": {"access_token"}}
	if v.o.AuthMethod == ClientSecretPost {
		form.Set("client_id", v.o.ClientID)
		form.Set("client_secret", v.o.ClientSecret)
	}
	ctx, cancel := context.WithTimeout(ctx, v.o.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, v.o.Endpoint, strings.NewReader(form.Encode()))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if v.o.AuthMethod == ClientSecretBasic {
		req.SetBasicAuth(url.QueryEscape(v.o.ClientID), url.QueryEscape(v.o.ClientSecret))
	}
	var ans introspection
	var all map[string]any
	if err := doJSON(v.o.HTTPClient, req, &ans, &all); err != nil {
		// An endpoint that says the token is not one it can take (some
		// do not introspect their own JWT access tokens) has decided
		// about the token: it is no token of this server's.
		var se *statusError
		if errors.As(err, &se) && se.status == http.StatusBadRequest &&
			(se.code == "unsupported_token_type" || se.code == "invalid_token") {
			return nil, refuse("the introspection endpoint refuses the token (%s)", se.code)
		}
		return nil, err
	}

	switch {
	case !ans.Active:
		return nil, refuse("the introspection endpoint says the token is not active")
	case len(ans.Audience) == 0 && v.o.RequireAudience:
		return nil, refuse("the introspection answer has no aud")
	case len(ans.Audience) > 0 && !slices.Contains(ans.Audience, v.o.Resource):
		return nil, refuse("aud %q does not contain %q", []string(ans.Audience), v.o.Resource)
	case v.o.Issuer != "" && ans.Issuer != "" && ans.Issuer != v.o.Issuer:
		return nil, refuse("iss %q, not %q", ans.Issuer, v.o.Issuer)
	case ans.Expiry != nil && now.Add(-v.o.Leeway).After(ans.Expiry.Time()):
		return nil, refuse("expired at %s", ans.Expiry.Time().UTC().Format(time.RFC3339))
	case ans.NotBefore != nil && now.Add(v.o.Leeway).Before(ans.NotBefore.Time()):
		return nil, refuse("not valid before %s", ans.NotBefore.Time().UTC().Format(time.RFC3339))
	}
	id := &auth.Identity{
		Subject:  ans.Subject,
		ClientID: clientIDOf(all),
		Issuer:   ans.Issuer,
		Audience: []string(ans.Audience),
		Scopes:   scopesOf(all),
		Claims:   all,
	}
	if ans.Expiry != nil {
		id.Expiry = ans.Expiry.Time()
	}
	return id, nil
}
