package resource_test

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// t0 is the tests' present.
var t0 = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

// clock is a settable time source.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock() *clock { return &clock{now: t0} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// issuer is an authorization server serving its metadata and key set
// from an httptest server, holding the private keys it signs with.
type issuer struct {
	t      *testing.T
	srv    *httptest.Server
	URL    string // the issuer identifier
	prefix string // the issuer's path

	mu             sync.Mutex
	private        map[string]crypto.Signer
	published      []string // kids in the key set
	metadataIssuer string   // the "issuer" the metadata says
	metadataPaths  map[string]bool
	requested      []string

	jwksFetches atomic.Int32
}

// newIssuer starts an issuer at path (empty for the root) publishing
// one ES256 key, "k1", with its metadata at RFC 8414's place.
func newIssuer(t *testing.T, path string) *issuer {
	t.Helper()
	is := &issuer{t: t, private: map[string]crypto.Signer{}, prefix: path}
	is.srv = httptest.NewServer(http.HandlerFunc(is.serve))
	t.Cleanup(is.srv.Close)
	is.URL = is.srv.URL + path
	is.metadataIssuer = is.URL
	is.metadataPaths = map[string]bool{"/.well-known/oauth-authorization-server" + path: true}
	is.addKey("k1", true)
	return is
}

func (is *issuer) serve(w http.ResponseWriter, r *http.Request) {
	is.mu.Lock()
	defer is.mu.Unlock()
	is.requested = append(is.requested, r.URL.Path)
	switch {
	case r.URL.Path == "/jwks":
		is.jwksFetches.Add(1)
		var set jose.JSONWebKeySet
		for _, kid := range is.published {
			set.Keys = append(set.Keys, jose.JSONWebKey{Key: is.private[kid].Public(), KeyID: kid, Use: "sig"})
		}
		writeJSON(w, set)
	case is.metadataPaths[r.URL.Path]:
		writeJSON(w, map[string]any{"issuer": is.metadataIssuer, "jwks_uri": is.srv.URL + "/jwks"})
	default:
		http.NotFound(w, r)
	}
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}

// addKey makes a new ES256 key kid, in the key set when published.
func (is *issuer) addKey(kid string, published bool) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		is.t.Fatal(err)
	}
	is.mu.Lock()
	defer is.mu.Unlock()
	is.private[kid] = k
	if published {
		is.published = append(is.published, kid)
	}
}

func (is *issuer) publish(kid string) {
	is.mu.Lock()
	defer is.mu.Unlock()
	is.published = append(is.published, kid)
}

// claims are a valid access token's for resource, issued at t0.
func (is *issuer) claims(resource string) map[string]any {
	return map[string]any{
		"iss":       is.URL,
		"aud":       resource,
		"sub":       "user-1",
		"client_id": "agentwire-cli",
		"scope":     "mcp:read mcp:write",
		"jti":       "jti-1",
		"iat":       t0.Unix(),
		"exp":       t0.Add(5 * time.Minute).Unix(),
	}
}

// sign signs claims with key kid, ES256, typ at+jwt.
func (is *issuer) sign(kid string, claims map[string]any) string {
	is.mu.Lock()
	key := is.private[kid]
	is.mu.Unlock()
	return signWith(is.t, jose.SigningKey{Algorithm: jose.ES256, Key: key}, kid, "at+jwt", claims)
}

// signWith signs claims with key, naming kid and typ in the header when
// not empty.
func signWith(t *testing.T, key jose.SigningKey, kid, typ string, claims map[string]any) string {
	t.Helper()
	opts := &jose.SignerOptions{}
	if kid != "" {
		opts = opts.WithHeader(jose.HeaderKey("kid"), kid)
	}
	if typ != "" {
		opts = opts.WithType(jose.ContentType(typ))
	}
	s, err := jose.NewSigner(key, opts)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := jwt.Signed(s).Claims(claims).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func (is *issuer) paths() string {
	is.mu.Lock()
	defer is.mu.Unlock()
	return strings.Join(is.requested, " ")
}

// build makes a verifier of options o, edited by edit.
func build[O, V any](t *testing.T, o O, edit []func(*O), newVerifier func(O) (V, error)) V {
	t.Helper()
	for _, e := range edit {
		e(&o)
	}
	v, err := newVerifier(o)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// wantFetches fails t unless the key set was fetched want times.
func (is *issuer) wantFetches(t *testing.T, want int32, when string) {
	t.Helper()
	if n := is.jwksFetches.Load(); n != want {
		t.Errorf("%s: %d key set fetches, want %d", when, n, want)
	}
}
