package resource_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/agentwire/agentwire/mcp/auth"
	"github.com/agentwire/agentwire/oauth/resource"
)

const mcpResource = "https://mcp.example.com/mcp"

func newJWTVerifier(t *testing.T, is *issuer, c *clock, edit ...func(*resource.JWTOptions)) *resource.JWTVerifier {
	t.Helper()
	return build(t, resource.JWTOptions{Issuer: is.URL, Resource: mcpResource, Now: c.Now}, edit, resource.NewJWTVerifier)
}

// refused fails t unless err refuses the token.
func refused(t *testing.T, err error, reason string) {
	t.Helper()
	if !errors.Is(err, auth.ErrInvalidToken) {
		t.Fatalf("err = %v, want a refusal (ErrInvalidToken)", err)
	}
	if !strings.Contains(err.Error(), reason) {
		t.Errorf("err = %q, want it to say %q", err, reason)
	}
}

// failed fails t unless err is the verifier's own failure.
func failed(t *testing.T, err error, reason string) {
	t.Helper()
	if err == nil || errors.Is(err, auth.ErrInvalidToken) {
		t.Fatalf("err = %v, want a failure that is not ErrInvalidToken", err)
	}
	if !strings.Contains(err.Error(), reason) {
		t.Errorf("err = %q, want it to say %q", err, reason)
	}
}

func TestAValidAccessTokenYieldsTheIdentityItsClaimsDescribe(t *testing.T) {
	is, c := newIssuer(t, ""), newClock()
	v := newJWTVerifier(t, is, c)
	id, err := v.Verify(context.Background(), is.sign("k1", is.claims(mcpResource)))
	if err != nil {
		t.Fatal(err)
	}
	if id.Subject != "user-1" || id.ClientID != "agentwire-cli" || id.Issuer != is.URL ||
		!slices.Equal(id.Audience, []string{mcpResource}) || !slices.Equal(id.Scopes, []string{"mcp:read", "mcp:write"}) ||
		!id.Expiry.Equal(t0.Add(5*time.Minute)) || id.Claims["jti"] != "jti-1" {
		t.Errorf("identity = %+v", id)
	}
}

func TestATokenIsValidUntilItsExpiryPlusTheLeeway(t *testing.T) {
	is, c := newIssuer(t, ""), newClock()
	v := newJWTVerifier(t, is, c)
	tok := is.sign("k1", is.claims(mcpResource))
	c.Advance(5*time.Minute + resource.DefaultLeeway)
	if _, err := v.Verify(context.Background(), tok); err != nil {
		t.Fatalf("within the leeway: %v", err)
	}
	c.Advance(time.Second)
	_, err := v.Verify(context.Background(), tok)
	refused(t, err, "expired")
}

func TestATokenWithoutExpiryIsRefused(t *testing.T) {
	is, c := newIssuer(t, ""), newClock()
	claims := is.claims(mcpResource)
	delete(claims, "exp")
	_, err := newJWTVerifier(t, is, c).Verify(context.Background(), is.sign("k1", claims))
	refused(t, err, "no exp")
}

func TestATokenNotYetValidIsRefused(t *testing.T) {
	is, c := newIssuer(t, ""), newClock()
	v := newJWTVerifier(t, is, c)
	claims := is.claims(mcpResource)
	claims["nbf"] = t0.Add(2 * time.Minute).Unix()
	_, err := v.Verify(context.Background(), is.sign("k1", claims))
	refused(t, err, "not valid before")

	claims["nbf"] = t0.Add(30 * time.Second).Unix() // within the leeway
	if _, err := v.Verify(context.Background(), is.sign("k1", claims)); err != nil {
		t.Errorf("nbf within the leeway: %v", err)
	}
}

func TestATokenIssuedInTheFutureIsRefused(t *testing.T) {
	is, c := newIssuer(t, ""), newClock()
	claims := is.claims(mcpResource)
	claims["iat"] = t0.Add(2 * time.Minute).Unix()
	_, err := newJWTVerifier(t, is, c).Verify(context.Background(), is.sign("k1", claims))
	refused(t, err, "issued in the future")
}

func TestATokenOfAnotherIssuerIsRefused(t *testing.T) {
	is, c := newIssuer(t, ""), newClock()
	for _, iss := range []string{"https://evil.example.com", is.URL + "/", strings.ToUpper(is.URL), ""} {
		claims := is.claims(mcpResource)
		claims["iss"] = iss
		_, err := newJWTVerifier(t, is, c).Verify(context.Background(), is.sign("k1", claims))
		refused(t, err, "iss")
	}
}

func TestATokenForAnotherAudienceIsRefused(t *testing.T) {
	is, c := newIssuer(t, ""), newClock()
	v := newJWTVerifier(t, is, c)
	for _, aud := range []any{"https://other.example.com/mcp", mcpResource + "/", []string{"agentwire-cli"}, "absent"} {
		claims := is.claims(mcpResource)
		claims["aud"] = aud
		if aud == "absent" {
			delete(claims, "aud")
		}
		_, err := v.Verify(context.Background(), is.sign("k1", claims))
		refused(t, err, "aud")
	}
}

func TestAnAudienceArrayNeedOnlyContainTheResource(t *testing.T) {
	is, c := newIssuer(t, ""), newClock()
	claims := is.claims(mcpResource)
	claims["aud"] = []string{"https://other.example.com", mcpResource}
	id, err := newJWTVerifier(t, is, c).Verify(context.Background(), is.sign("k1", claims))
	if err != nil {
		t.Fatal(err)
	}
	if len(id.Audience) != 2 {
		t.Errorf("Audience = %q", id.Audience)
	}
}

func TestScopesComeFromScopeOrElseFromScp(t *testing.T) {
	is, c := newIssuer(t, ""), newClock()
	v := newJWTVerifier(t, is, c)
	claims := is.claims(mcpResource)
	delete(claims, "scope")
	claims["scp"] = []string{"files:read", "files:write"}
	id, err := v.Verify(context.Background(), is.sign("k1", claims))
	if err != nil || !slices.Equal(id.Scopes, []string{"files:read", "files:write"}) {
		t.Errorf("from scp: %v, %v", id, err)
	}
	claims["scope"] = "mcp:read"
	id, err = v.Verify(context.Background(), is.sign("k1", claims))
	if err != nil || !slices.Equal(id.Scopes, []string{"mcp:read"}) {
		t.Errorf("scope wins over scp: %v, %v", id, err)
	}
}

func TestTheTypeHeaderMustNameAnAccessTokenWhenRequired(t *testing.T) {
	is, c := newIssuer(t, ""), newClock()
	lenient := newJWTVerifier(t, is, c)
	strict := newJWTVerifier(t, is, c, func(o *resource.JWTOptions) { o.RequireType = true })
	key := jose.SigningKey{Algorithm: jose.ES256, Key: is.private["k1"]}
	for _, tc := range []struct {
		typ                 string
		lenientOK, strictOK bool
	}{
		{"at+jwt", true, true},
		{"application/at+jwt", true, true},
		{"AT+JWT", true, true},
		{"", true, false},
		{"JWT", true, false},
		{"dpop+jwt", false, false},
		{"logout+jwt", false, false},
	} {
		tok := signWith(t, key, "k1", tc.typ, is.claims(mcpResource))
		if _, err := lenient.Verify(context.Background(), tok); (err == nil) != tc.lenientOK {
			t.Errorf("typ %q, not required: %v", tc.typ, err)
		}
		if _, err := strict.Verify(context.Background(), tok); (err == nil) != tc.strictOK {
			t.Errorf("typ %q, required: %v", tc.typ, err)
		}
	}
}

func TestATokenSignedByAnotherKeyUnderAKnownKeyIDIsRefused(t *testing.T) {
	is, c := newIssuer(t, ""), newClock()
	forger, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tok := signWith(t, jose.SigningKey{Algorithm: jose.ES256, Key: forger}, "k1", "at+jwt", is.claims(mcpResource))
	_, err := newJWTVerifier(t, is, c).Verify(context.Background(), tok)
	refused(t, err, "signature")
}

func TestAnHMACTokenKeyedWithThePublicKeyIsRefused(t *testing.T) {
	// The classic confusion: an RSA issuer's public key, which anyone
	// can read, used as the HMAC secret of an HS256 token.
	is, c := newIssuer(t, ""), newClock()
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	is.mu.Lock()
	is.private["rsa"] = rsaKey
	is.published = append(is.published, "rsa")
	is.mu.Unlock()
	der, _ := x509.MarshalPKIXPublicKey(&rsaKey.PublicKey)
	pubPEM := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
	tok := signWith(t, jose.SigningKey{Algorithm: jose.HS256, Key: pubPEM}, "rsa", "at+jwt", is.claims(mcpResource))

	_, err = newJWTVerifier(t, is, c).Verify(context.Background(), tok)
	refused(t, err, "accepted algorithm")
	is.wantFetches(t, 0, "for a token refused on its header")
	// RS256 tokens of the same key are fine.
	if _, err := newJWTVerifier(t, is, c).Verify(context.Background(),
		signWith(t, jose.SigningKey{Algorithm: jose.RS256, Key: rsaKey}, "rsa", "at+jwt", is.claims(mcpResource))); err != nil {
		t.Errorf("RS256: %v", err)
	}
}

func TestAnUnsignedTokenIsRefused(t *testing.T) {
	is, c := newIssuer(t, ""), newClock()
	enc := func(v any) string {
		b, _ := json.Marshal(v)
		return base64.RawURLEncoding.EncodeToString(b)
	}
	tok := enc(map[string]string{"alg": "none", "typ": "at+jwt"}) + "." + enc(is.claims(mcpResource)) + "."
	_, err := newJWTVerifier(t, is, c).Verify(context.Background(), tok)
	refused(t, err, "accepted algorithm")
	_, err = newJWTVerifier(t, is, c).Verify(context.Background(), "not a token")
	refused(t, err, "JWT")
}

func TestNoneIsNeverAndHMACOnlyWithAKeyConfigured(t *testing.T) {
	is, c := newIssuer(t, ""), newClock()
	for _, algs := range [][]string{{"none"}, {"ES256", "HS256"}, {"XS999"}} {
		if _, err := resource.NewJWTVerifier(resource.JWTOptions{Issuer: is.URL, Resource: mcpResource, Algorithms: algs}); err == nil {
			t.Errorf("Algorithms %q accepted", algs)
		}
	}
	secret := []byte("a shared secret of thirty-two b.")
	v := newJWTVerifier(t, is, c, func(o *resource.JWTOptions) {
		o.Algorithms, o.HMACKey = []string{"HS256"}, secret
	})
	if _, err := v.Verify(context.Background(), signWith(t, jose.SigningKey{Algorithm: jose.HS256, Key: secret}, "", "at+jwt", is.claims(mcpResource))); err != nil {
		t.Errorf("HS256 with the configured key: %v", err)
	}
	_, err := v.Verify(context.Background(), signWith(t, jose.SigningKey{Algorithm: jose.HS256, Key: []byte("another secret of thirty-two b..")}, "", "at+jwt", is.claims(mcpResource)))
	refused(t, err, "signature")
	_, err = v.Verify(context.Background(), is.sign("k1", is.claims(mcpResource)))
	refused(t, err, "accepted algorithm")
}

func TestAnUnknownKeyIDRefetchesTheKeySetAndThenVerifies(t *testing.T) {
	is, c := newIssuer(t, ""), newClock()
	v := newJWTVerifier(t, is, c)
	if _, err := v.Verify(context.Background(), is.sign("k1", is.claims(mcpResource))); err != nil {
		t.Fatal(err)
	}
	// The issuer rotates to k2.
	is.addKey("k2", true)
	c.Advance(time.Second)
	if _, err := v.Verify(context.Background(), is.sign("k2", is.claims(mcpResource))); err != nil {
		t.Fatalf("after rotation: %v", err)
	}
	is.wantFetches(t, 2, "the first token, then the rotated key")
	// Both keys are known now: no more fetches.
	for _, kid := range []string{"k1", "k2", "k1"} {
		if _, err := v.Verify(context.Background(), is.sign(kid, is.claims(mcpResource))); err != nil {
			t.Fatal(err)
		}
	}
	is.wantFetches(t, 2, "both keys known")
}

func TestAnUnknownKeyIDWithinTheIntervalDoesNotRefetch(t *testing.T) {
	is, c := newIssuer(t, ""), newClock()
	v := newJWTVerifier(t, is, c)
	is.addKey("k2", false) // signs, but not published yet
	_, err := v.Verify(context.Background(), is.sign("k2", is.claims(mcpResource)))
	refused(t, err, `no key "k2"`)
	is.wantFetches(t, 1, "the first token")

	is.publish("k2")
	c.Advance(resource.DefaultRefreshInterval - time.Second)
	_, err = v.Verify(context.Background(), is.sign("k2", is.claims(mcpResource)))
	refused(t, err, `no key "k2"`)
	is.wantFetches(t, 1, "within the interval")

	c.Advance(time.Second)
	if _, err := v.Verify(context.Background(), is.sign("k2", is.claims(mcpResource))); err != nil {
		t.Fatalf("after the interval: %v", err)
	}
	is.wantFetches(t, 2, "after the interval")
}

func TestAKeySetOlderThanItsMaxAgeIsFetchedAgain(t *testing.T) {
	is, c := newIssuer(t, ""), newClock()
	v := newJWTVerifier(t, is, c, func(o *resource.JWTOptions) { o.KeySetMaxAge = 10 * time.Minute })
	tok := func() string {
		cl := is.claims(mcpResource)
		cl["iat"], cl["exp"] = c.Now().Unix(), c.Now().Add(time.Minute).Unix()
		return is.sign("k1", cl)
	}
	for range 3 {
		if _, err := v.Verify(context.Background(), tok()); err != nil {
			t.Fatal(err)
		}
	}
	c.Advance(10 * time.Minute)
	// The issuer withdraws k1 for k2.
	is.addKey("k2", false)
	is.mu.Lock()
	is.published = []string{"k2"}
	is.mu.Unlock()
	_, err := v.Verify(context.Background(), tok())
	refused(t, err, `no key "k1"`)
	is.wantFetches(t, 2, "past the max age")
}

func TestConcurrentVerificationsShareOneFetch(t *testing.T) {
	is, c := newIssuer(t, ""), newClock()
	v := newJWTVerifier(t, is, c)
	is.addKey("k2", true)
	var wg sync.WaitGroup
	for i := range 32 {
		wg.Go(func() {
			kid := []string{"k1", "k2"}[i%2]
			if _, err := v.Verify(context.Background(), is.sign(kid, is.claims(mcpResource))); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	is.wantFetches(t, 1, "32 concurrent tokens")
}

func TestMetadataNamingAnotherIssuerIsAFailureNotARefusal(t *testing.T) {
	is, c := newIssuer(t, ""), newClock()
	is.metadataIssuer = "https://evil.example.com"
	_, err := newJWTVerifier(t, is, c).Verify(context.Background(), is.sign("k1", is.claims(mcpResource)))
	failed(t, err, "names issuer")
	is.wantFetches(t, 0, "after a mismatching issuer")
}

func TestMetadataIsLookedForInTheSpecificationsOrder(t *testing.T) {
	got, err := resource.MetadataURLs("https://as.example.com/tenant/one")
	want := []string{
		"https://as.example.com/.well-known/oauth-authorization-server/tenant/one",
		"https://as.example.com/.well-known/openid-configuration/tenant/one",
		"https://as.example.com/tenant/one/.well-known/openid-configuration",
	}
	if err != nil || !slices.Equal(got, want) {
		t.Errorf("with a path: %q, %v", got, err)
	}
	got, err = resource.MetadataURLs("https://as.example.com")
	want = []string{
		"https://as.example.com/.well-known/oauth-authorization-server",
		"https://as.example.com/.well-known/openid-configuration",
	}
	if err != nil || !slices.Equal(got, want) {
		t.Errorf("without: %q, %v", got, err)
	}
	for _, bad := range []string{"as.example.com", "ftp://as.example.com", "https://as.example.com/?q=1", "https://as.example.com/#f"} {
		if _, err := resource.MetadataURLs(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}

	// An issuer with a path whose metadata is only at OpenID Connect's
	// appended place is found there, after the other two.
	is, c := newIssuer(t, "/tenant"), newClock()
	is.metadataPaths = map[string]bool{"/tenant/.well-known/openid-configuration": true}
	if _, err := newJWTVerifier(t, is, c).Verify(context.Background(), is.sign("k1", is.claims(mcpResource))); err != nil {
		t.Fatal(err)
	}
	if got, want := is.paths(), "/.well-known/oauth-authorization-server/tenant /.well-known/openid-configuration/tenant /tenant/.well-known/openid-configuration /jwks"; got != want {
		t.Errorf("requested %s\nwant      %s", got, want)
	}
}

func TestAnIssuerWithoutMetadataOrKeysIsAFailureNotARefusal(t *testing.T) {
	is, c := newIssuer(t, ""), newClock()
	is.metadataPaths = nil
	_, err := newJWTVerifier(t, is, c).Verify(context.Background(), is.sign("k1", is.claims(mcpResource)))
	failed(t, err, "no metadata")

	down := httptest.NewServer(http.NotFoundHandler())
	down.Close()
	v, _ := resource.NewJWTVerifier(resource.JWTOptions{Issuer: down.URL, Resource: mcpResource, Now: c.Now})
	_, err = v.Verify(context.Background(), is.sign("k1", is.claims(mcpResource)))
	failed(t, err, "connect")

	huge := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"keys":[` + strings.Repeat(" ", resource.MaxResponseBytes) + `]}`))
	}))
	defer huge.Close()
	v, _ = resource.NewJWTVerifier(resource.JWTOptions{Issuer: is.URL, JWKSURL: huge.URL, Resource: mcpResource, Now: c.Now})
	_, err = v.Verify(context.Background(), is.sign("k1", is.claims(mcpResource)))
	failed(t, err, "larger than")

	notJSON := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"keys":`))
	}))
	defer notJSON.Close()
	v, _ = resource.NewJWTVerifier(resource.JWTOptions{Issuer: is.URL, JWKSURL: notJSON.URL, Resource: mcpResource, Now: c.Now})
	_, err = v.Verify(context.Background(), is.sign("k1", is.claims(mcpResource)))
	failed(t, err, "unexpected end")
}

func TestAWaitForTheKeySetEndsWithTheRequestsContext(t *testing.T) {
	release := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-release }))
	defer slow.Close()
	defer close(release)
	is, c := newIssuer(t, ""), newClock()
	v, _ := resource.NewJWTVerifier(resource.JWTOptions{Issuer: is.URL, JWKSURL: slow.URL, Resource: mcpResource, Now: c.Now})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := v.Verify(ctx, is.sign("k1", is.claims(mcpResource)))
	if !errors.Is(err, context.Canceled) || errors.Is(err, auth.ErrInvalidToken) {
		t.Errorf("err = %v", err)
	}
}

func TestTheClientIsClientIDOrElseAzp(t *testing.T) {
	is, c := newIssuer(t, ""), newClock()
	claims := is.claims(mcpResource)
	delete(claims, "client_id")
	claims["azp"] = "other-cli"
	id, err := newJWTVerifier(t, is, c).Verify(context.Background(), is.sign("k1", claims))
	if err != nil || id.ClientID != "other-cli" {
		t.Errorf("ClientID from azp: %v, %v", id, err)
	}
}
