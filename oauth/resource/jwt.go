package resource

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/agentwire/agentwire/mcp/auth"
)

// DefaultAlgorithms are the signature algorithms a JWTVerifier accepts
// when it is not told otherwise: asymmetric ones only.
var DefaultAlgorithms = []string{"RS256", "PS256", "ES256", "EdDSA"}

// DefaultRefreshInterval is the least time between two fetches of an
// issuer's key set for a token signed by a key it does not know.
const DefaultRefreshInterval = time.Minute

// DefaultKeySetMaxAge is how long a fetched key set is used before it
// is fetched again, so that a key the issuer withdrew stops verifying.
const DefaultKeySetMaxAge = time.Hour

// JWTOptions configures a JWTVerifier. Issuer and Resource are
// required; every other field has a default.
type JWTOptions struct {
	// Issuer is the authorization server's issuer identifier, which
	// tokens' "iss" must equal exactly and whose metadata names the key
	// set.
	Issuer string
	// Resource is this server's canonical URL (RFC 8707, RFC 9728's
	// "resource"): a token's "aud" must contain it.
	Resource string
	// JWKSURL, when set, is where the key set is read, and the issuer's
	// metadata is not fetched.
	JWKSURL string
	// Algorithms are the "alg" values accepted (DefaultAlgorithms when
	// empty). "none" is never accepted; HS256, HS384 and HS512 only
	// with HMACKey.
	Algorithms []string
	// HMACKey is the shared secret that verifies tokens of an HMAC
	// algorithm listed in Algorithms. Without it no HMAC algorithm is
	// accepted, whatever Algorithms says.
	HMACKey []byte
	// RequireType refuses a token whose header "typ" is not "at+jwt"
	// (RFC 9068 §2.1). Without it a token with no "typ", or "JWT", is
	// accepted too; any other "typ" (an ID token's, a DPoP proof's) is
	// refused either way.
	RequireType bool
	// Leeway is the clock skew allowed for "exp", "nbf" and "iat"
	// (DefaultLeeway when zero; negative for none).
	Leeway time.Duration
	// RefreshInterval is the least time between fetches of the key set
	// on a token signed by an unknown key (DefaultRefreshInterval when
	// zero).
	RefreshInterval time.Duration
	// KeySetMaxAge is how long a fetched key set is trusted before it is
	// fetched again (DefaultKeySetMaxAge when zero).
	KeySetMaxAge time.Duration
	// Timeout bounds one fetch of the metadata and key set
	// (DefaultTimeout when zero).
	Timeout time.Duration
	// HTTPClient fetches the metadata and key set (http.DefaultClient
	// when nil).
	HTTPClient *http.Client
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

// A JWTVerifier verifies JWT access tokens (RFC 9068) against the key
// set of one issuer. It is an auth.Verifier, safe for concurrent use.
type JWTVerifier struct {
	issuer, resource string
	algs             []jose.SignatureAlgorithm
	hmacKey          []byte
	requireType      bool
	leeway           time.Duration
	now              func() time.Time
	keys             *keySet
}

var _ auth.Verifier = (*JWTVerifier)(nil)

var hmacAlgorithms = []jose.SignatureAlgorithm{jose.HS256, jose.HS384, jose.HS512}

// NewJWTVerifier returns a verifier configured by o. It fetches nothing
// yet: the issuer's metadata and key set are read on the first token.
func NewJWTVerifier(o JWTOptions) (*JWTVerifier, error) {
	if o.Issuer == "" || o.Resource == "" {
		return nil, errors.New("resource: JWTOptions needs Issuer and Resource")
	}
	if o.JWKSURL == "" {
		if _, err := MetadataURLs(o.Issuer); err != nil {
			return nil, err
		}
	}
	v := &JWTVerifier{
		issuer:      o.Issuer,
		resource:    o.Resource,
		hmacKey:     slices.Clone(o.HMACKey),
		requireType: o.RequireType,
		leeway:      max(orDefault(o.Leeway, DefaultLeeway), 0),
		now:         o.Now,
	}
	if v.now == nil {
		v.now = time.Now
	}
	names := o.Algorithms
	if len(names) == 0 {
		names = DefaultAlgorithms
	}
	for _, name := range names {
		alg := jose.SignatureAlgorithm(name)
		switch {
		case strings.EqualFold(name, "none"):
			return nil, errors.New(`resource: the algorithm "none" is never accepted`)
		case slices.Contains(hmacAlgorithms, alg) && len(o.HMACKey) == 0:
			return nil, fmt.Errorf("resource: the algorithm %s needs HMACKey", name)
		case !slices.Contains(knownAlgorithms, alg):
			return nil, fmt.Errorf("resource: unknown signature algorithm %q", name)
		}
		v.algs = append(v.algs, alg)
	}
	v.keys = &keySet{
		client:   orDefault(o.HTTPClient, http.DefaultClient),
		issuer:   o.Issuer,
		jwksURL:  o.JWKSURL,
		timeout:  orDefault(o.Timeout, DefaultTimeout),
		interval: orDefault(o.RefreshInterval, DefaultRefreshInterval),
		maxAge:   orDefault(o.KeySetMaxAge, DefaultKeySetMaxAge),
		now:      v.now,
	}
	return v, nil
}

var knownAlgorithms = []jose.SignatureAlgorithm{
	jose.RS256, jose.RS384, jose.RS512, jose.PS256, jose.PS384, jose.PS512,
	jose.ES256, jose.ES384, jose.ES512, jose.EdDSA,
	jose.HS256, jose.HS384, jose.HS512,
}

// Verify checks token and returns the identity its claims describe.
// A refusal wraps auth.ErrInvalidToken and says why; a failure to read
// the issuer's metadata or key set does not.
func (v *JWTVerifier) Verify(ctx context.Context, token string) (*auth.Identity, error) {
	jws, err := jose.ParseSignedCompact(token, v.algs)
	if err != nil {
		return nil, refuse("not a signed JWT with an accepted algorithm: %v", err)
	}
	if len(jws.Signatures) != 1 {
		return nil, refuse("%d signatures", len(jws.Signatures))
	}
	h := jws.Signatures[0].Header
	if err := v.checkType(h); err != nil {
		return nil, err
	}

	var keys []any
	if slices.Contains(hmacAlgorithms, jose.SignatureAlgorithm(h.Algorithm)) {
		keys = []any{v.hmacKey}
	} else {
		jwks, err := v.keys.lookup(ctx, h.KeyID, h.Algorithm)
		if err != nil {
			return nil, err
		}
		for _, k := range jwks {
			keys = append(keys, k.Key)
		}
		if len(keys) == 0 {
			return nil, refuse("no key %q for %s in the key set of %s", h.KeyID, h.Algorithm, v.issuer)
		}
	}
	var payload []byte
	for _, k := range keys {
		if payload, err = jws.Verify(k); err == nil {
			break
		}
	}
	if err != nil {
		return nil, refuse("the signature does not verify with key %q: %v", h.KeyID, err)
	}

	var c jwt.Claims
	var all map[string]any
	if err := json.Unmarshal(payload, &all); err != nil {
		return nil, refuse("claims: %v", err)
	}
	if err := json.Unmarshal(payload, &c); err != nil {
		return nil, refuse("claims: %v", err)
	}
	return v.checkClaims(&c, all)
}

func (v *JWTVerifier) checkType(h jose.Header) error {
	typ, _ := h.ExtraHeaders[jose.HeaderType].(string)
	switch strings.ToLower(typ) {
	case "at+jwt", "application/at+jwt":
		return nil
	case "", "jwt":
		if v.requireType {
			return refuse("typ %q, not at+jwt", typ)
		}
		return nil
	}
	return refuse("typ %q is not an access token's", typ)
}

func (v *JWTVerifier) checkClaims(c *jwt.Claims, all map[string]any) (*auth.Identity, error) {
	if c.Expiry == nil {
		return nil, refuse("no exp")
	}
	now := v.now()
	switch err := c.ValidateWithLeeway(jwt.Expected{
		Issuer:      v.issuer,
		AnyAudience: jwt.Audience{v.resource},
		Time:        now,
	}, v.leeway); {
	case err == nil:
	case errors.Is(err, jwt.ErrInvalidIssuer):
		return nil, refuse("iss %q, not %q", c.Issuer, v.issuer)
	case errors.Is(err, jwt.ErrInvalidAudience):
		return nil, refuse("aud %q does not contain %q", []string(c.Audience), v.resource)
	case errors.Is(err, jwt.ErrExpired):
		return nil, refuse("expired at %s", c.Expiry.Time().UTC().Format(time.RFC3339))
	case errors.Is(err, jwt.ErrNotValidYet):
		return nil, refuse("not valid before %s", c.NotBefore.Time().UTC().Format(time.RFC3339))
	case errors.Is(err, jwt.ErrIssuedInTheFuture):
		return nil, refuse("issued in the future, at %s", c.IssuedAt.Time().UTC().Format(time.RFC3339))
	default:
		return nil, refuse("%v", err)
	}
	return &auth.Identity{
		Subject:  c.Subject,
		ClientID: clientIDOf(all),
		Issuer:   c.Issuer,
		Audience: []string(c.Audience),
		Scopes:   scopesOf(all),
		Expiry:   c.Expiry.Time(),
		Claims:   all,
	}, nil
}
