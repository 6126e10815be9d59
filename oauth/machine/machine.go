package machine

import (
	"context"
	"crypto"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

	"golang.org/x/oauth2"

	"github.com/agentwire/agentwire/mcp/auth"
	"github.com/agentwire/agentwire/mcp/streamable"
	"github.com/agentwire/agentwire/oauth/discover"
	"github.com/agentwire/agentwire/oauth/dpop"
)

// Token endpoint authentication methods (RFC 7591 §2, RFC 7523 §2.2).
const (
	AuthNone              = "none"
	AuthClientSecretBasic = "client_secret_basic"
	AuthClientSecretPost  = "client_secret_post"
	AuthPrivateKeyJWT     = "private_key_jwt"
)

// Grant types and token types the Authorizer sends.
const (
	GrantClientCredentials = "client_credentials"
	GrantJWTBearer         = "urn:ietf:params:oauth:grant-type:jwt-bearer"
	GrantTokenExchange     = "urn:ietf:params:oauth:grant-type:token-exchange"
	TokenTypeIDJAG         = "urn:ietf:params:oauth:token-type:id-jag"
	TokenTypeIDToken       = "urn:ietf:params:oauth:token-type:id_token"
	ClientAssertionType    = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
)

// ExpirySkew is how long before its expiry a token is replaced.
const ExpirySkew = 30 * time.Second

// Options configure an Authorizer. ClientID is required, as is a way to
// authenticate or an assertion.
type Options struct {
	// ClientID is the client's identifier at the authorization server.
	ClientID string
	// ClientSecret is its secret, for client_secret_basic or
	// client_secret_post.
	ClientSecret string
	// PrivateKey signs the client assertions of private_key_jwt (RFC
	// 7523 §2.2): an ECDSA, Ed25519 or RSA key (ParsePrivateKeyPEM reads
	// a PKCS#8 PEM one).
	PrivateKey crypto.Signer
	// KeyID, when set, is the kid header of the client assertions.
	KeyID string
	// AuthMethod is how the client authenticates at the token endpoint.
	// Empty means private_key_jwt with a PrivateKey, else
	// client_secret_basic with a ClientSecret, else none. It is never
	// guessed from the server's answers.
	AuthMethod string

	// Assertion, when set, makes the grant a JWT bearer assertion (RFC
	// 7523 §2.1) instead of client_credentials: it returns the JWT (a
	// workload identity token, say), for the authorization server whose
	// issuer it is given. A refused assertion is not sent again.
	Assertion func(ctx context.Context, issuer string) (string, error)
	// Enterprise, when set, obtains the assertion from the enterprise's
	// identity provider (an ID-JAG, SEP-990); Assertion is then unused.
	Enterprise *Enterprise

	// Scopes are requested with every token. Nil means the scope of the
	// server's challenge, else none.
	Scopes []string
	// DPoP, when set, binds the tokens to this key (RFC 9449): token
	// requests carry proofs, and MCP requests "Authorization: DPoP"
	// with a fresh proof each.
	DPoP *dpop.Key

	// HTTPClient makes discovery and token requests. Nil means
	// http.DefaultClient.
	HTTPClient *http.Client
	// Now is the clock tokens expire by and assertions are dated by. Nil
	// means time.Now.
	Now func() time.Time
}

// Enterprise is the identity provider of an enterprise-managed
// authorization (SEP-990): the client exchanges the user's ID token there
// for an identity assertion authorization grant (ID-JAG) for the MCP
// server's authorization server, then presents it there as a JWT bearer
// assertion, authenticated with Options' credentials.
type Enterprise struct {
	// TokenEndpoint is the identity provider's token endpoint.
	TokenEndpoint string
	// ClientID and ClientSecret identify the client at the identity
	// provider; an empty secret sends client_id alone.
	ClientID     string
	ClientSecret string
	// IDToken returns the user's ID token from the identity provider.
	IDToken func(ctx context.Context) (string, error)
}

// Errors of an Authorizer; each returned error wraps one of these.
var (
	// ErrTokenRefused: the token endpoint answered an OAuth error; its
	// code (never its description) is in the message. A refused grant is
	// not tried again: the Authorizer fails every call with it.
	ErrTokenRefused = errors.New("machine: the authorization server refused the token request")
	// ErrTokenEndpoint: the token request failed otherwise (the network,
	// an answer that is not a token).
	ErrTokenEndpoint = errors.New("machine: the token request failed")
	// ErrExchangeRefused: the identity provider refused the token
	// exchange, or did not answer an ID-JAG.
	ErrExchangeRefused = errors.New("machine: the identity provider refused the token exchange")
	// ErrUnsupported: the authorization server's metadata rules out the
	// grant or the authentication method configured.
	ErrUnsupported = errors.New("machine: the authorization server does not support the configured grant or authentication")
	// ErrAssertion: the assertion source failed.
	ErrAssertion = errors.New("machine: obtaining the assertion failed")
	// ErrNotDiscovered: Prepare was not called and no server has refused
	// a request yet; there is nothing to authorize with.
	ErrNotDiscovered = errors.New("machine: no authorization server discovered yet")
)

var _ streamable.Authorizer = (*Authorizer)(nil)

// An Authorizer obtains and presents access tokens for one MCP server
// without a user (see the package documentation). Its methods are safe
// for concurrent use.
type Authorizer struct {
	opts   Options
	method string
	http   *http.Client // token requests (with proofs, under DPoP)
	now    func() time.Time
	fetch  chan struct{} // held by the one token request in progress

	mu      sync.Mutex
	bound   *binding
	token   *oauth2.Token
	refused error // a refused grant, sticky
}

// binding is what discovery found: the resource and its authorization
// server.
type binding struct {
	resource string
	server   *discover.ServerMetadata
	scopes   []string // the challenge's scope
}

// New returns an Authorizer.
func New(opts Options) (*Authorizer, error) {
	if opts.ClientID == "" {
		return nil, errors.New("machine: Options.ClientID is required")
	}
	method := opts.AuthMethod
	if method == "" {
		switch {
		case opts.PrivateKey != nil:
			method = AuthPrivateKeyJWT
		case opts.ClientSecret != "":
			method = AuthClientSecretBasic
		default:
			method = AuthNone
		}
	}
	switch method {
	case AuthClientSecretBasic, AuthClientSecretPost:
		if opts.ClientSecret == "" {
			return nil, fmt.Errorf("machine: %s needs Options.ClientSecret", method)
		}
	case AuthPrivateKeyJWT:
		if opts.PrivateKey == nil {
			return nil, errors.New("machine: private_key_jwt needs Options.PrivateKey")
		}
	case AuthNone:
		if opts.Assertion == nil && opts.Enterprise == nil {
			return nil, errors.New("machine: client_credentials needs client authentication (a secret or a private key)")
		}
	default:
		return nil, fmt.Errorf("%w: authentication method %q", ErrUnsupported, method)
	}
	if e := opts.Enterprise; e != nil && (e.TokenEndpoint == "" || e.ClientID == "" || e.IDToken == nil) {
		return nil, errors.New("machine: Enterprise needs TokenEndpoint, ClientID and IDToken")
	}
	a := &Authorizer{opts: opts, method: method, now: opts.Now, fetch: make(chan struct{}, 1)}
	if a.now == nil {
		a.now = time.Now
	}
	if a.opts.HTTPClient == nil {
		a.opts.HTTPClient = http.DefaultClient
	}
	a.http = a.opts.HTTPClient
	if opts.DPoP != nil {
		c := *a.opts.HTTPClient
		c.Transport = &dpop.Transport{Key: opts.DPoP, Base: c.Transport, NoRetry: true}
		a.http = &c
	}
	return a, nil
}

// Prepare discovers the authorization server of the MCP server at
// serverURL from its well-known metadata and obtains a token, before any
// request is refused.
func (a *Authorizer) Prepare(ctx context.Context, serverURL string) error {
	return a.rebind(ctx, serverURL, discover.Challenge{}, nil)
}

// Authorize sets req's credentials: "Bearer TOKEN", or "DPoP TOKEN" and a
// DPoP proof. Before the first 401 (without Prepare) there are none. An
// expired token is replaced first.
func (a *Authorizer) Authorize(req *http.Request) error {
	a.mu.Lock()
	t, b, refused := a.token, a.bound, a.refused
	a.mu.Unlock()
	if refused != nil {
		return refused
	}
	if b == nil {
		req.Header.Del("Authorization")
		req.Header.Del("DPoP")
		return nil
	}
	if !a.valid(t) {
		var err error
		if t, err = a.obtain(req.Context(), b, t); err != nil {
			return err
		}
	}
	return dpop.Present(req, a.opts.DPoP, t.TokenType, t.AccessToken)
}

// Refused handles a 401: a resource server's demand for a DPoP nonce is
// answered with a new proof; any other 401 with a new discovery and a new
// token (unless another request already replaced the one refused). A 403
// fails the call: this Authorizer does not step up.
func (a *Authorizer) Refused(ctx context.Context, req *http.Request, resp *http.Response) (bool, error) {
	if resp.StatusCode != http.StatusUnauthorized {
		return false, nil
	}
	if a.opts.DPoP != nil && dpop.IsNonceChallenge(resp) {
		return a.opts.DPoP.Observe(resp), nil
	}
	a.mu.Lock()
	refused := a.refused
	a.mu.Unlock()
	if refused != nil {
		return false, refused
	}
	challenge := discover.ChallengeOf(resp)
	server := *req.URL
	server.RawQuery, server.Fragment = "", ""
	sent := dpop.PresentedToken(req)
	if cur := a.current(); cur != nil && cur.AccessToken != sent {
		return true, nil // already replaced
	}
	var stale *oauth2.Token
	if sent != "" {
		stale = &oauth2.Token{AccessToken: sent}
	}
	if err := a.rebind(ctx, server.String(), challenge, stale); err != nil {
		return false, err
	}
	return true, nil
}

func (a *Authorizer) current() *oauth2.Token {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.token
}

// valid reports whether t can be sent: it exists and is not about to
// expire.
func (a *Authorizer) valid(t *oauth2.Token) bool {
	return t != nil && (t.Expiry.IsZero() || a.now().Add(ExpirySkew).Before(t.Expiry))
}

// rebind discovers the resource's authorization server and obtains a
// token from it in place of stale.
func (a *Authorizer) rebind(ctx context.Context, serverURL string, ch discover.Challenge, stale *oauth2.Token) error {
	prm, err := discover.ProtectedResource(ctx, a.opts.HTTPClient, serverURL, ch.Param("resource_metadata"))
	if err != nil {
		return err
	}
	b, err := a.bind(ctx, prm, ch)
	if err != nil {
		return err
	}
	_, err = a.obtain(ctx, b, stale)
	return err
}

// bind fetches the metadata of prm's first authorization server and
// checks it allows the configured grant and authentication.
func (a *Authorizer) bind(ctx context.Context, prm *auth.ProtectedResourceMetadata, ch discover.Challenge) (*binding, error) {
	issuer := prm.AuthorizationServers[0]
	md, err := discover.ServerMetadataOf(ctx, a.opts.HTTPClient, issuer)
	if err != nil {
		return nil, err
	}
	if md.TokenEndpoint == "" {
		return nil, fmt.Errorf("machine: the metadata of %s names no token endpoint", issuer)
	}
	if g := a.grantType(); len(md.GrantTypesSupported) > 0 && !slices.Contains(md.GrantTypesSupported, g) {
		return nil, fmt.Errorf("%w: %s does not list grant type %s", ErrUnsupported, issuer, g)
	}
	if m := md.TokenEndpointAuthMethodsSupported; len(m) > 0 && !slices.Contains(m, a.method) {
		return nil, fmt.Errorf("%w: %s does not list authentication method %s", ErrUnsupported, issuer, a.method)
	}
	return &binding{resource: prm.Resource, server: md, scopes: ch.Scopes()}, nil
}

func (a *Authorizer) grantType() string {
	if a.opts.Assertion != nil || a.opts.Enterprise != nil {
		return GrantJWTBearer
	}
	return GrantClientCredentials
}

// obtain gets a token from b's authorization server to replace stale,
// one request at a time: a caller that waited for another's request
// takes its token.
func (a *Authorizer) obtain(ctx context.Context, b *binding, stale *oauth2.Token) (*oauth2.Token, error) {
	select {
	case a.fetch <- struct{}{}:
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
	defer func() { <-a.fetch }()
	a.mu.Lock()
	t, refused := a.token, a.refused
	a.mu.Unlock()
	if refused != nil {
		return nil, refused
	}
	if a.valid(t) && (stale == nil || t.AccessToken != stale.AccessToken) {
		a.mu.Lock()
		a.bound = b
		a.mu.Unlock()
		return t, nil
	}
	t, err := a.request(ctx, b)
	a.mu.Lock()
	defer a.mu.Unlock()
	if err != nil {
		if errors.Is(err, ErrTokenRefused) || errors.Is(err, ErrExchangeRefused) {
			a.refused = err
		}
		return nil, err
	}
	a.bound, a.token = b, t
	return t, nil
}
