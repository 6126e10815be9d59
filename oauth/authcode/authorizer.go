package authcode

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"time"

	"github.com/agentwire/agentwire/mcp/streamable"
	"github.com/agentwire/agentwire/oauth/discover"
	"github.com/agentwire/agentwire/oauth/dpop"
)

// Auth methods of the token endpoint (RFC 7591 §2) the Authorizer
// implements.
const (
	AuthNone              = "none"
	AuthClientSecretBasic = "client_secret_basic"
	AuthClientSecretPost  = "client_secret_post"
)

// Credentials identify a client to one authorization server.
type Credentials struct {
	ClientID     string
	ClientSecret string // empty for a public client
	// AuthMethod is how the client authenticates at the token endpoint:
	// AuthClientSecretBasic, AuthClientSecretPost or AuthNone. Empty
	// means basic with a secret, none without.
	AuthMethod string
}

// Registration is the metadata of a dynamic client registration (RFC
// 7591); the Authorizer adds redirect_uris (Options.RedirectURL),
// grant_types (authorization_code, refresh_token), response_types,
// token_endpoint_auth_method and application_type.
type Registration struct {
	ClientName string
	ClientURI  string // optional
}

// Options configure an Authorizer. RedirectURL and Redirect are required.
type Options struct {
	// RedirectURL is the client's redirect URI: a loopback http URL or a
	// custom scheme for a native application, an https URL for a web one.
	RedirectURL string
	// Redirect is the user agent: it sends the user to authURL and
	// returns the URL the authorization server redirected back to
	// (RedirectURL with its query), as it is. It is called with the
	// context of the request being authorized.
	Redirect func(ctx context.Context, authURL string) (callback *url.URL, err error)

	// Preregistered are credentials by issuer, used first. When it holds
	// credentials, but none for the issuer a server names, the client
	// neither uses a metadata document nor registers: the authorization
	// fails with ErrNoClientIdentity.
	Preregistered map[string]Credentials
	// ClientIDMetadataURL is the https URL of the client's metadata
	// document, used as its client_id by servers that take one.
	ClientIDMetadataURL string
	// Registration, when set, allows dynamic registration where the
	// server offers it.
	Registration *Registration

	// RequestRefreshToken asks for offline_access where the
	// authorization server lists it.
	RequestRefreshToken bool
	// DPoP, when set, asks for tokens bound to this key (RFC 9449): the
	// authorization request carries its dpop_jkt, every token request a
	// proof, and a token the server bound (token_type DPoP) is sent as
	// "Authorization: DPoP TOKEN" with a fresh proof on every request.
	// Nil (the default) sends no proof: an authorization server that
	// sees one may bind the token, and a resource server that does not
	// speak DPoP then refuses it.
	DPoP *dpop.Key
	// Store keeps tokens. Nil means a MemoryStore of the Authorizer's own.
	Store TokenStore
	// HTTPClient makes discovery, registration and token requests. Nil
	// means http.DefaultClient.
	HTTPClient *http.Client
	// Now is the clock tokens expire by. Nil means time.Now.
	Now func() time.Time
}

// Errors of an authorization; each wraps one of these.
var (
	ErrStateMismatch      = errors.New("authcode: the authorization response's state is not the one sent")
	ErrIssuerMissing      = errors.New("authcode: the authorization response has no iss, though the server advertises it")
	ErrIssuerMismatch     = errors.New("authcode: the authorization response's iss is not the authorization server's issuer")
	ErrAuthorization      = errors.New("authcode: the authorization server refused the authorization")
	ErrNoCode             = errors.New("authcode: the authorization response has no code")
	ErrNoClientIdentity   = errors.New("authcode: no client identity for the authorization server (no pre-registered credentials, no client ID metadata document it accepts, no dynamic registration)")
	ErrUnsupportedAuth    = errors.New("authcode: unsupported token endpoint authentication method")
	ErrRegistrationFailed = errors.New("authcode: dynamic client registration failed")
)

var _ streamable.Authorizer = (*Authorizer)(nil)

// An Authorizer obtains and presents access tokens for one MCP server
// (see the package documentation). Its methods are safe for concurrent
// use.
type Authorizer struct {
	opts  Options
	store TokenStore
	now   func() time.Time

	mu         sync.Mutex
	bound      *binding               // what the last 401 discovered; nil before
	token      *Token                 // the token for bound's key
	registered map[string]Credentials // dynamic registrations by issuer
	flight     *flight                // the recovery in progress
}

// binding is what a 401 discovered: the resource, its authorization
// server, and the client's identity there.
type binding struct {
	key    Key
	scopes []string // the resource metadata's scopes_supported
	server *discover.ServerMetadata
	client Credentials
}

type flight struct {
	done chan struct{}
	err  error
}

// New returns an Authorizer.
func New(opts Options) (*Authorizer, error) {
	if opts.Redirect == nil {
		return nil, errors.New("authcode: Options.Redirect is required")
	}
	if u, err := url.Parse(opts.RedirectURL); err != nil || u.Scheme == "" || u.Fragment != "" {
		return nil, fmt.Errorf("authcode: Options.RedirectURL %q is not an absolute URL without a fragment", opts.RedirectURL)
	}
	a := &Authorizer{opts: opts, store: opts.Store, now: opts.Now, registered: map[string]Credentials{}}
	if a.store == nil {
		a.store = &MemoryStore{}
	}
	if a.now == nil {
		a.now = time.Now
	}
	if a.opts.HTTPClient == nil {
		a.opts.HTTPClient = http.DefaultClient
	}
	return a, nil
}

// Authorize sets req's Authorization header to the current token (and
// its DPoP header to a proof, for a DPoP-bound token), having refreshed it
// if it expired. Before the first 401 there is none: the server's refusal
// says where to get one.
func (a *Authorizer) Authorize(req *http.Request) error {
	a.mu.Lock()
	t, b := a.token, a.bound
	a.mu.Unlock()
	if t == nil {
		req.Header.Del("Authorization")
		req.Header.Del("DPoP")
		return nil
	}
	if !t.valid(a.now()) && t.RefreshToken != "" {
		sent := t.AccessToken
		_, err := a.recover(req.Context(), sent, func(ctx context.Context) error {
			nt, err := a.refresh(ctx, b, t)
			if err != nil {
				return err
			}
			return a.adopt(ctx, b, nt)
		})
		if err != nil {
			// The expired token is sent: the server's 401 starts over.
			return dpop.Present(req, a.opts.DPoP, t.TokenType, t.AccessToken)
		}
		a.mu.Lock()
		t = a.token
		a.mu.Unlock()
	}
	return dpop.Present(req, a.opts.DPoP, t.TokenType, t.AccessToken)
}

// Refused handles a 401 (a new token: from the store, by refresh, or by
// authorization) or a 403 insufficient_scope (a step-up); it returns true
// when the request should be sent again. With Options.DPoP, a 401 whose
// DPoP challenge says error="use_dpop_nonce" is no refusal of the token:
// the request is sent again with a proof carrying the server's nonce.
func (a *Authorizer) Refused(ctx context.Context, req *http.Request, resp *http.Response) (bool, error) {
	if a.opts.DPoP != nil && dpop.IsNonceChallenge(resp) {
		return a.opts.DPoP.Observe(resp), nil
	}
	sent := dpop.PresentedToken(req)
	challenge := discover.ChallengeOf(resp)
	server := *req.URL
	server.RawQuery, server.Fragment = "", ""
	switch resp.StatusCode {
	case http.StatusUnauthorized:
		return a.recover(ctx, sent, func(ctx context.Context) error {
			return a.reauthorize(ctx, server.String(), challenge, sent)
		})
	case http.StatusForbidden:
		if challenge.Param("error") != "insufficient_scope" {
			return false, nil
		}
		want, ok := a.stepUp(sent, challenge.Scopes())
		if !ok {
			return false, nil
		}
		return a.recover(ctx, sent, func(ctx context.Context) error {
			a.mu.Lock()
			b := a.bound
			a.mu.Unlock()
			t, err := a.authorize(ctx, b, want)
			if err != nil {
				return err
			}
			return a.adopt(ctx, b, t)
		})
	}
	return false, nil
}

// stepUp decides whether a 403 asking for scopes is worth a new
// authorization, and with which scopes: the union of those requested so
// far and the challenge's, when that adds one. Each step-up grows the
// scopes requested, and the transport sends a request at most
// streamable.MaxAuthAttempts times, so one request causes at most
// MaxAuthAttempts-1 step-ups.
func (a *Authorizer) stepUp(sent string, scopes []string) ([]string, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.bound == nil || a.token == nil {
		return nil, false
	}
	if a.token.AccessToken != sent {
		// Another step-up already replaced the token: try the new one.
		return nil, true
	}
	want := union(a.token.Scopes, scopes)
	return want, len(want) > len(a.token.Scopes)
}

// recover runs do unless the token sent was already replaced, or waits
// for the recovery in progress; one runs at a time. It reports whether the
// request should be sent again.
func (a *Authorizer) recover(ctx context.Context, sent string, do func(context.Context) error) (bool, error) {
	for {
		a.mu.Lock()
		if a.token != nil && a.token.AccessToken != sent {
			a.mu.Unlock()
			return true, nil
		}
		if f := a.flight; f != nil {
			a.mu.Unlock()
			select {
			case <-f.done:
			case <-ctx.Done():
				return false, context.Cause(ctx)
			}
			// A recovery that ended because its caller gave up is taken
			// over; any other failure is everyone's.
			if f.err != nil && !errors.Is(f.err, context.Canceled) && !errors.Is(f.err, context.DeadlineExceeded) {
				a.mu.Lock()
				replaced := a.token != nil && a.token.AccessToken != sent
				a.mu.Unlock()
				if replaced {
					return true, nil
				}
				return false, f.err
			}
			continue
		}
		f := &flight{done: make(chan struct{})}
		a.flight = f
		a.mu.Unlock()
		f.err = do(ctx)
		a.mu.Lock()
		a.flight = nil
		a.mu.Unlock()
		close(f.done)
		return f.err == nil, f.err
	}
}

// adopt makes t the token of b, and stores it.
func (a *Authorizer) adopt(ctx context.Context, b *binding, t *Token) error {
	if err := a.store.Put(ctx, b.key, t); err != nil {
		return fmt.Errorf("authcode: storing the token: %w", err)
	}
	a.mu.Lock()
	a.bound, a.token = b, t
	a.mu.Unlock()
	return nil
}

// reauthorize answers a 401: it discovers the resource's authorization
// server again, then takes a stored token other than the one refused,
// else refreshes, else authorizes.
func (a *Authorizer) reauthorize(ctx context.Context, serverURL string, ch discover.Challenge, sent string) error {
	b, err := a.discover(ctx, serverURL, ch)
	if err != nil {
		return err
	}
	stored, err := a.store.Get(ctx, b.key)
	if err != nil {
		return fmt.Errorf("authcode: reading the token store: %w", err)
	}
	if stored != nil && stored.AccessToken != sent && stored.valid(a.now()) {
		return a.adopt(ctx, b, stored)
	}
	if err := a.identify(ctx, b); err != nil {
		return err
	}
	if stored != nil && stored.RefreshToken != "" {
		if t, err := a.refresh(ctx, b, stored); err == nil {
			return a.adopt(ctx, b, t)
		}
		// A refused refresh token: authorize anew.
	}
	scopes := ch.Scopes()
	if len(scopes) == 0 {
		scopes = b.scopes
	}
	if stored != nil {
		scopes = union(stored.Scopes, scopes)
	}
	t, err := a.authorize(ctx, b, scopes)
	if err != nil {
		return err
	}
	return a.adopt(ctx, b, t)
}

// discover finds the protected resource metadata and its first
// authorization server's metadata.
func (a *Authorizer) discover(ctx context.Context, serverURL string, ch discover.Challenge) (*binding, error) {
	prm, err := discover.ProtectedResource(ctx, a.opts.HTTPClient, serverURL, ch.Param("resource_metadata"))
	if err != nil {
		return nil, err
	}
	issuer := prm.AuthorizationServers[0]
	md, err := discover.AuthorizationServer(ctx, a.opts.HTTPClient, issuer)
	if err != nil {
		return nil, err
	}
	if md.AuthorizationEndpoint == "" || md.TokenEndpoint == "" {
		return nil, fmt.Errorf("authcode: the metadata of %s names no authorization or token endpoint", issuer)
	}
	return &binding{key: Key{Issuer: issuer, Resource: prm.Resource}, scopes: prm.ScopesSupported, server: md}, nil
}

// union returns a's scopes followed by those of b it lacks.
func union(a, b []string) []string {
	out := slices.Clone(a)
	for _, s := range b {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}
