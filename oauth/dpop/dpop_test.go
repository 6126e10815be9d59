package dpop_test

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/agentwire/agentwire/oauth/dpop"
)

// verify checks proof as a server does: typ dpop+jwt, an asymmetric alg,
// a public jwk in the header that verifies the signature. It returns the
// claims and the key.
func verify(t *testing.T, proof string) (dpop.Claims, jose.JSONWebKey) {
	t.Helper()
	jws, err := jose.ParseSignedCompact(proof, []jose.SignatureAlgorithm{jose.ES256, jose.ES384, jose.EdDSA, jose.RS256, jose.PS256})
	if err != nil {
		t.Fatalf("parsing the proof: %v", err)
	}
	h := jws.Signatures[0].Protected
	if h.ExtraHeaders[jose.HeaderType] != dpop.ProofType {
		t.Errorf("typ = %v, want %s", h.ExtraHeaders[jose.HeaderType], dpop.ProofType)
	}
	if h.JSONWebKey == nil || !h.JSONWebKey.IsPublic() {
		t.Fatalf("the header's jwk is missing or not public: %+v", h.JSONWebKey)
	}
	payload, err := jws.Verify(h.JSONWebKey)
	if err != nil {
		t.Fatalf("the proof does not verify with its jwk: %v", err)
	}
	var c dpop.Claims
	if err := json.Unmarshal(payload, &c); err != nil {
		t.Fatal(err)
	}
	return c, *h.JSONWebKey
}

func newKey(t *testing.T, opts *dpop.Options) *dpop.Key {
	t.Helper()
	k, err := dpop.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestAProofCarriesTheRequestAndAFreshID(t *testing.T) {
	at := time.Unix(1_800_000_000, 0)
	k := newKey(t, &dpop.Options{Now: func() time.Time { return at }})
	if k.Algorithm() != "ES256" {
		t.Errorf("default algorithm %s, want ES256", k.Algorithm())
	}
	p1, err := k.Proof("post", "https://as.example/token?x=1#f", "", "")
	if err != nil {
		t.Fatal(err)
	}
	c, jwk := verify(t, p1)
	if c.Method != "POST" || c.URL != "https://as.example/token" || c.IssuedAt != at.Unix() || c.ID == "" {
		t.Errorf("claims %+v", c)
	}
	if c.AccessToken != "" || c.Nonce != "" {
		t.Errorf("ath or nonce without a token or nonce: %+v", c)
	}
	tp, _ := jwk.Thumbprint(cryptoSHA256)
	if got := b64(tp); got != k.Thumbprint() {
		t.Errorf("Thumbprint %s, the jwk's is %s", k.Thumbprint(), got)
	}
	p2, _ := k.Proof("POST", "https://as.example/token", "", "")
	if c2, _ := verify(t, p2); c2.ID == c.ID {
		t.Error("two proofs share a jti")
	}
}

func TestAProofForAResourceHashesTheTokenAndCarriesTheNonce(t *testing.T) {
	k := newKey(t, nil)
	p, err := k.Proof("GET", "https://rs.example/mcp", "tok-123", "n-1")
	if err != nil {
		t.Fatal(err)
	}
	c, _ := verify(t, p)
	// base64url(SHA-256("tok-123")), computed independently.
	if want := dpop.AccessTokenHash("tok-123"); c.AccessToken != want || want != "yJY0FL9sTIae6sX4oFfD3FdNQi8bEIOXtm9nurPS-YE" {
		t.Errorf("ath %q, want %q", c.AccessToken, want)
	}
	if c.Nonce != "n-1" {
		t.Errorf("nonce %q", c.Nonce)
	}
}

func TestAGivenSignerIsUsed(t *testing.T) {
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	k := newKey(t, &dpop.Options{Signer: priv})
	if k.Algorithm() != "EdDSA" {
		t.Errorf("algorithm %s, want EdDSA", k.Algorithm())
	}
	p, _ := k.Proof("POST", "https://as.example/token", "", "")
	_, jwk := verify(t, p)
	if !pub.Equal(jwk.Key) {
		t.Error("the proof's jwk is not the signer's public key")
	}
	ec, _ := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	if k := newKey(t, &dpop.Options{Signer: ec}); k.Algorithm() != "ES384" {
		t.Errorf("P-384 algorithm %s", k.Algorithm())
	}
}

func TestARelativeURLIsRefused(t *testing.T) {
	k := newKey(t, nil)
	if _, err := k.Proof("GET", "/mcp", "", ""); !errors.Is(err, dpop.ErrBadURL) {
		t.Errorf("err = %v, want ErrBadURL", err)
	}
}

func TestNoncesAreKeptPerOrigin(t *testing.T) {
	k := newKey(t, nil)
	as, _ := url.Parse("https://as.example/token")
	rs, _ := url.Parse("https://rs.example/mcp")
	resp := &http.Response{Header: http.Header{"Dpop-Nonce": {"as-n"}}, Request: &http.Request{URL: as}}
	if !k.Observe(resp) {
		t.Fatal("a DPoP-Nonce was not observed")
	}
	if k.Nonce(as) != "as-n" || k.Nonce(rs) != "" {
		t.Errorf("nonces as=%q rs=%q", k.Nonce(as), k.Nonce(rs))
	}
	other, _ := url.Parse("HTTPS://AS.example/other")
	if k.Nonce(other) != "as-n" {
		t.Error("the nonce is not the origin's")
	}
}

func TestIsNonceChallengeTellsANonceDemandFromARefusedToken(t *testing.T) {
	for _, tc := range []struct {
		status int
		header string
		want   bool
	}{
		{401, `DPoP error="use_dpop_nonce", resource_metadata="https://rs/x"`, true},
		{401, `Bearer realm="x", DPoP error="use_dpop_nonce"`, true},
		{401, `DPoP error="invalid_token"`, false},
		{401, `Bearer error="use_dpop_nonce"`, false},
		{403, `DPoP error="use_dpop_nonce"`, false},
	} {
		resp := &http.Response{StatusCode: tc.status, Header: http.Header{"Www-Authenticate": {tc.header}}}
		if got := dpop.IsNonceChallenge(resp); got != tc.want {
			t.Errorf("%d %s: %v, want %v", tc.status, tc.header, got, tc.want)
		}
	}
}

// nonceAS is a token endpoint that demands a nonce and records proofs.
type nonceAS struct {
	mu     sync.Mutex
	proofs []string
	bodies []string
}

func (s *nonceAS) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	s.proofs = append(s.proofs, r.Header.Get("DPoP"))
	s.bodies = append(s.bodies, string(body))
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("DPoP-Nonce", "as-nonce")
	var c dpop.Claims
	parts := strings.Split(r.Header.Get("DPoP"), ".")
	if len(parts) == 3 {
		raw, _ := b64dec(parts[1])
		json.Unmarshal(raw, &c)
	}
	if c.Nonce != "as-nonce" {
		w.WriteHeader(http.StatusBadRequest)
		io.WriteString(w, `{"error":"use_dpop_nonce"}`)
		return
	}
	io.WriteString(w, `{"access_token":"t","token_type":"DPoP"}`)
}

func TestTheTransportRetriesOnceWithTheServersNonce(t *testing.T) {
	as := &nonceAS{}
	srv := httptest.NewServer(as)
	defer srv.Close()
	k := newKey(t, nil)
	c := &http.Client{Transport: &dpop.Transport{Key: k}}
	resp, err := c.Post(srv.URL+"/token?q=1", "application/x-www-form-urlencoded", strings.NewReader("grant_type=client_credentials"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || len(as.proofs) != 2 {
		t.Fatalf("status %d after %d requests, want 200 after 2", resp.StatusCode, len(as.proofs))
	}
	c1, _ := verify(t, as.proofs[0])
	c2, _ := verify(t, as.proofs[1])
	if c1.Nonce != "" || c2.Nonce != "as-nonce" || c1.ID == c2.ID {
		t.Errorf("proofs %+v then %+v", c1, c2)
	}
	if c2.Method != "POST" || c2.URL != srv.URL+"/token" {
		t.Errorf("htm/htu %s %s", c2.Method, c2.URL)
	}
	if as.bodies[1] != "grant_type=client_credentials" {
		t.Errorf("the retry's body %q", as.bodies[1])
	}
	// The nonce is remembered: the next request needs no retry.
	resp, _ = c.Post(srv.URL+"/token", "application/x-www-form-urlencoded", strings.NewReader("x=1"))
	resp.Body.Close()
	if len(as.proofs) != 3 {
		t.Errorf("%d requests, want 3", len(as.proofs))
	}
}

func TestTheTransportDoesNotRetryTwice(t *testing.T) {
	var n int
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n++
		w.Header().Set("DPoP-Nonce", "always-new")
		w.WriteHeader(http.StatusBadRequest)
		io.WriteString(w, `{"error":"use_dpop_nonce"}`)
	}))
	defer srv.Close()
	c := &http.Client{Transport: &dpop.Transport{Key: newKey(t, nil)}}
	resp, err := c.Post(srv.URL, "text/plain", strings.NewReader("x"))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if n != 2 || resp.StatusCode != 400 || !strings.Contains(string(body), "use_dpop_nonce") {
		t.Errorf("%d requests, status %d, body %q", n, resp.StatusCode, body)
	}
}
