package machine_test

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/agentwire/agentwire/mcp"
	"github.com/agentwire/agentwire/mcp/auth"
	"github.com/agentwire/agentwire/mcp/server"
	"github.com/agentwire/agentwire/mcp/streamable"
	"github.com/agentwire/agentwire/oauth/dpop"
)

const (
	clientID     = "conformance-test-client"
	clientSecret = "conformance-test-secret"
	idpClientID  = "idp-client"
	idToken      = "the-users-id-token"
	asNonce      = "conformance-as-dpop-nonce"
	rsNonce      = "conformance-rs-dpop-nonce"
)

// asConfig is what the fake authorization server takes and checks.
type asConfig struct {
	grant      string // the grant type it accepts
	authMethod string // the one token endpoint authentication it accepts
	publicKey  crypto.PublicKey
	assertion  string // the JWT bearer assertion it accepts
	dpop       bool   // tokens are DPoP-bound; proofs required
	nonces     bool   // proofs must carry the AS's (and the RS's) nonce
	expiresIn  int    // of each token; 0 omits it
}

// issued is a token the fake minted.
type issued struct {
	resource string
	jkt      string // the DPoP key it is bound to
}

// request is a token request the fake received.
type request struct {
	form   url.Values
	header http.Header
}

// fakeAS is an authorization server (and, for the enterprise flow, the
// enterprise's identity provider) that checks each token request exactly
// as the conformance suite does, and answers an OAuth error otherwise.
type fakeAS struct {
	*httptest.Server
	cfg asConfig

	mu       sync.Mutex
	requests []request
	exchange []url.Values // token exchange requests at the identity provider
	tokens   map[string]issued
	jtis     map[string]bool // client assertions and proofs seen
	problems []string        // what a request got wrong
	resource string          // the MCP server's, set by newFakeMCP
	n        int
}

func newFakeAS(cfg asConfig) *fakeAS {
	as := &fakeAS{cfg: cfg, tokens: map[string]issued{}, jtis: map[string]bool{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/oauth-authorization-server", as.metadata)
	mux.HandleFunc("POST /token", as.token)
	mux.HandleFunc("POST /idp/token", as.idpToken)
	as.Server = httptest.NewServer(mux)
	return as
}

func (as *fakeAS) metadata(w http.ResponseWriter, r *http.Request) {
	md := map[string]any{
		"issuer":                                as.URL,
		"token_endpoint":                        as.URL + "/token",
		"grant_types_supported":                 []string{as.cfg.grant},
		"token_endpoint_auth_methods_supported": []string{as.cfg.authMethod},
		// No code_challenge_methods_supported: PKCE belongs to the
		// authorization code flow, which these grants do not use (a
		// machine client once refused such a server).
	}
	if as.cfg.authMethod == "private_key_jwt" {
		md["token_endpoint_auth_signing_alg_values_supported"] = []string{"ES256"}
	}
	if as.cfg.dpop {
		md["dpop_signing_alg_values_supported"] = []string{"ES256"}
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(md)
}

func oauthError(w http.ResponseWriter, status int, code string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	fmt.Fprintf(w, `{"error":%q,"error_description":"the fake's own words\u001b[31m"}`, code)
}

// problem records what a request got wrong, and refuses it.
func (as *fakeAS) problem(w http.ResponseWriter, code, format string, args ...any) {
	as.problems = append(as.problems, fmt.Sprintf(format, args...))
	oauthError(w, http.StatusBadRequest, code)
}

func (as *fakeAS) token(w http.ResponseWriter, r *http.Request) {
	r.ParseForm()
	as.mu.Lock()
	defer as.mu.Unlock()
	as.requests = append(as.requests, request{form: r.PostForm, header: r.Header.Clone()})
	f := r.PostForm
	jkt := ""
	if as.cfg.dpop {
		c, key, err := as.checkProof(r.Header.Get("DPoP"), "POST", as.URL+"/token")
		if err != nil {
			as.problem(w, "invalid_dpop_proof", "token request proof: %v", err)
			return
		}
		if as.cfg.nonces && c.Nonce != asNonce {
			w.Header().Set("DPoP-Nonce", asNonce)
			oauthError(w, http.StatusBadRequest, dpop.ErrorUseNonce)
			return
		}
		tp, _ := key.Thumbprint(crypto.SHA256)
		jkt = base64.RawURLEncoding.EncodeToString(tp)
	}
	if g := f.Get("grant_type"); g != as.cfg.grant {
		as.problem(w, "unsupported_grant_type", "grant_type %q", g)
		return
	}
	if res := f.Get("resource"); res != as.resource {
		as.problem(w, "invalid_target", "resource %q", res)
		return
	}
	if slices.Contains(strings.Fields(f.Get("scope")), "trigger.rejected") {
		oauthError(w, http.StatusBadRequest, "invalid_scope")
		return
	}
	if !as.authenticated(w, r) {
		return
	}
	if as.cfg.grant == "urn:ietf:params:oauth:grant-type:jwt-bearer" && f.Get("assertion") != as.cfg.assertion {
		oauthError(w, http.StatusBadRequest, "invalid_grant")
		return
	}
	as.n++
	tok := fmt.Sprintf("cc-token-%d", as.n)
	as.tokens[tok] = issued{resource: f.Get("resource"), jkt: jkt}
	answer := map[string]any{"access_token": tok, "token_type": "Bearer"}
	if as.cfg.dpop {
		answer["token_type"] = "DPoP"
	}
	if as.cfg.expiresIn > 0 {
		answer["expires_in"] = as.cfg.expiresIn
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(answer)
}

// authenticated checks the client's authentication is exactly the
// configured method.
func (as *fakeAS) authenticated(w http.ResponseWriter, r *http.Request) bool {
	f := r.PostForm
	id, secret, basic := r.BasicAuth()
	switch as.cfg.authMethod {
	case "client_secret_basic":
		if !basic || id != url.QueryEscape(clientID) || secret != url.QueryEscape(clientSecret) || f.Has("client_secret") {
			as.problem(w, "invalid_client", "not client_secret_basic: basic=%v id=%q body secret=%v", basic, id, f.Has("client_secret"))
			return false
		}
	case "client_secret_post":
		if basic || f.Get("client_id") != clientID || f.Get("client_secret") != clientSecret {
			as.problem(w, "invalid_client", "not client_secret_post")
			return false
		}
	case "private_key_jwt":
		if basic || f.Has("client_secret") {
			as.problem(w, "invalid_client", "a secret alongside private_key_jwt")
			return false
		}
		if t := f.Get("client_assertion_type"); t != "urn:ietf:params:oauth:client-assertion-type:jwt-bearer" {
			as.problem(w, "invalid_client", "client_assertion_type %q", t)
			return false
		}
		if err := as.checkAssertion(f.Get("client_assertion")); err != nil {
			as.problem(w, "invalid_client", "client_assertion: %v", err)
			return false
		}
	case "none":
		if basic || f.Has("client_secret") || f.Has("client_assertion") {
			as.problem(w, "invalid_client", "client authentication sent to a none client")
			return false
		}
	}
	return true
}

// checkAssertion verifies a private_key_jwt assertion as the suite does:
// the signature, iss = sub = the client, aud the issuer (a trailing slash
// allowed), exp within a 30 s tolerance; and a jti not seen before.
func (as *fakeAS) checkAssertion(raw string) error {
	jws, err := jose.ParseSignedCompact(raw, []jose.SignatureAlgorithm{jose.ES256})
	if err != nil {
		return err
	}
	payload, err := jws.Verify(as.cfg.publicKey)
	if err != nil {
		return err
	}
	var c struct {
		Iss, Sub, Aud, Jti string
		Exp, Iat           int64
	}
	if err := json.Unmarshal(payload, &c); err != nil {
		return err
	}
	now := time.Now().Unix()
	switch {
	case c.Iss != clientID || c.Sub != clientID:
		return fmt.Errorf("iss %q sub %q", c.Iss, c.Sub)
	case c.Aud != as.URL && c.Aud != as.URL+"/":
		return fmt.Errorf("aud %q", c.Aud)
	case c.Exp == 0 || c.Exp+30 < now || c.Exp > now+300:
		return fmt.Errorf("exp %d (now %d)", c.Exp, now)
	case c.Jti == "" || as.jtis[c.Jti]:
		return fmt.Errorf("jti %q missing or reused", c.Jti)
	}
	as.jtis[c.Jti] = true
	return nil
}

// checkProof verifies a DPoP proof as the suite does: typ, an asymmetric
// alg, a public jwk that verifies it, a jti not seen before, htm, htu,
// iat within 300 s.
func (as *fakeAS) checkProof(proof, method, htu string) (dpop.Claims, *jose.JSONWebKey, error) {
	var c dpop.Claims
	jws, err := jose.ParseSignedCompact(proof, []jose.SignatureAlgorithm{jose.ES256, jose.ES384, jose.EdDSA, jose.RS256, jose.PS256})
	if err != nil {
		return c, nil, err
	}
	h := jws.Signatures[0].Protected
	if h.ExtraHeaders[jose.HeaderType] != "dpop+jwt" || h.JSONWebKey == nil || !h.JSONWebKey.IsPublic() {
		return c, nil, fmt.Errorf("header typ %v jwk %v", h.ExtraHeaders[jose.HeaderType], h.JSONWebKey)
	}
	payload, err := jws.Verify(h.JSONWebKey)
	if err != nil {
		return c, nil, err
	}
	if err := json.Unmarshal(payload, &c); err != nil {
		return c, nil, err
	}
	now := time.Now().Unix()
	switch {
	case c.Method != method || c.URL != htu:
		return c, nil, fmt.Errorf("htm %q htu %q, want %s %s", c.Method, c.URL, method, htu)
	case c.IssuedAt < now-300 || c.IssuedAt > now+300:
		return c, nil, fmt.Errorf("iat %d", c.IssuedAt)
	case c.ID == "" || as.jtis[c.ID]:
		return c, nil, fmt.Errorf("jti %q missing or reused", c.ID)
	}
	as.jtis[c.ID] = true
	return c, h.JSONWebKey, nil
}

// idpToken is the enterprise identity provider's token endpoint: a token
// exchange of the user's ID token for an ID-JAG.
func (as *fakeAS) idpToken(w http.ResponseWriter, r *http.Request) {
	r.ParseForm()
	as.mu.Lock()
	defer as.mu.Unlock()
	f := r.PostForm
	as.exchange = append(as.exchange, f)
	want := url.Values{
		"grant_type":           {"urn:ietf:params:oauth:grant-type:token-exchange"},
		"requested_token_type": {"urn:ietf:params:oauth:token-type:id-jag"},
		"audience":             {as.URL},
		"resource":             {as.resource},
		"subject_token":        {idToken},
		"subject_token_type":   {"urn:ietf:params:oauth:token-type:id_token"},
		"client_id":            {idpClientID},
	}
	for k, v := range want {
		if f.Get(k) != v[0] {
			as.problem(w, "invalid_request", "token exchange %s = %q, want %q", k, f.Get(k), v[0])
			return
		}
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{
		"access_token":      as.cfg.assertion,
		"issued_token_type": "urn:ietf:params:oauth:token-type:id-jag",
		"token_type":        "N_A",
		"expires_in":        300,
	})
}

// verify accepts the tokens the fake minted for resource.
func (as *fakeAS) verify(resource string) auth.VerifierFunc {
	return func(ctx context.Context, token string) (*auth.Identity, error) {
		as.mu.Lock()
		defer as.mu.Unlock()
		if g, ok := as.tokens[token]; !ok || g.resource != resource {
			return nil, fmt.Errorf("%w: not minted here", auth.ErrInvalidToken)
		}
		return &auth.Identity{ClientID: clientID, Issuer: as.URL, Audience: []string{resource}}, nil
	}
}

func (as *fakeAS) tokenRequests() []request {
	as.mu.Lock()
	defer as.mu.Unlock()
	return slices.Clone(as.requests)
}

func (as *fakeAS) problemsSeen() []string {
	as.mu.Lock()
	defer as.mu.Unlock()
	return slices.Clone(as.problems)
}

// revoke forgets every token minted so far.
func (as *fakeAS) revoke() {
	as.mu.Lock()
	defer as.mu.Unlock()
	clear(as.tokens)
}

// fakeMCP is an MCP server protected by streamable's handler, with the
// fake's tokens; under DPoP, a front that checks the proofs (and demands
// the RS nonce) and hands the handler the token as a bearer.
type fakeMCP struct {
	srv     *httptest.Server
	handler *streamable.Handler

	mu     sync.Mutex
	proofs []dpop.Claims // the proofs of MCP requests, checked
	seen   []string      // the method and Authorization header of each MCP request
}

func newFakeMCP(as *fakeAS) *fakeMCP {
	m := &fakeMCP{}
	mux := http.NewServeMux()
	m.srv = httptest.NewServer(mux)
	resource := m.srv.URL + "/mcp"
	as.mu.Lock()
	as.resource = resource
	as.mu.Unlock()
	s := server.New(mcp.Implementation{Name: "protected", Version: "1"}, nil)
	s.AddTool(mcp.Tool{Name: "test-tool"}, func(context.Context, *server.ToolRequest) (*mcp.ToolResult, error) {
		return mcp.TextResult("done"), nil
	})
	s.AddTool(mcp.Tool{Name: "admin-tool", Scopes: []string{"mcp:admin"}}, func(context.Context, *server.ToolRequest) (*mcp.ToolResult, error) {
		return mcp.TextResult("administered"), nil
	})
	m.handler = streamable.NewHandler(s, &streamable.Options{Protect: &streamable.Protection{
		Verifier: as.verify(resource),
		Metadata: auth.ProtectedResourceMetadata{Resource: resource, AuthorizationServers: []string{as.URL}},
	}})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/.well-known/") {
			m.handler.ServeHTTP(w, r)
			return
		}
		m.mu.Lock()
		m.seen = append(m.seen, r.Method+" "+r.Header.Get("Authorization"))
		m.mu.Unlock()
		if as.cfg.dpop {
			if !m.dpopFront(w, r, as, resource) {
				return
			}
		}
		m.handler.ServeHTTP(w, r)
	})
	return m
}

// dpopFront checks a DPoP request (RFC 9449 §7); it answers the refusals
// itself, and otherwise turns the request into a bearer one.
func (m *fakeMCP) dpopFront(w http.ResponseWriter, r *http.Request, as *fakeAS, resource string) bool {
	prm := m.srv.URL + "/.well-known/oauth-protected-resource/mcp"
	scheme, tok, _ := strings.Cut(r.Header.Get("Authorization"), " ")
	refuse := func(params string) bool {
		w.Header().Set("WWW-Authenticate", fmt.Sprintf(`DPoP %sresource_metadata=%q`, params, prm))
		http.Error(w, "unauthorized", http.StatusUnauthorized)
		return false
	}
	if scheme != "DPoP" {
		return refuse("")
	}
	as.mu.Lock()
	c, key, err := as.checkProof(r.Header.Get("DPoP"), r.Method, resource)
	g, minted := as.tokens[tok]
	as.mu.Unlock()
	if err != nil {
		return refuse(`error="invalid_dpop_proof", `)
	}
	tp, _ := key.Thumbprint(crypto.SHA256)
	if !minted || c.AccessToken != dpop.AccessTokenHash(tok) || g.jkt != base64.RawURLEncoding.EncodeToString(tp) {
		return refuse(`error="invalid_token", `)
	}
	if as.cfg.nonces && c.Nonce != rsNonce {
		w.Header().Set("DPoP-Nonce", rsNonce)
		return refuse(`error="use_dpop_nonce", `)
	}
	m.mu.Lock()
	m.proofs = append(m.proofs, c)
	m.mu.Unlock()
	r.Header.Set("Authorization", "Bearer "+tok)
	r.Header.Del("DPoP")
	return true
}

func (m *fakeMCP) URL() string { return m.srv.URL + "/mcp" }

func (m *fakeMCP) Close() {
	m.handler.Shutdown(context.Background())
	m.srv.Close()
}

// newECKey returns a P-256 key and its PKCS#8 PEM, as the suite's context
// gives it.
func newECKey() (*ecdsa.PrivateKey, []byte) {
	k, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	der, _ := x509.MarshalPKCS8PrivateKey(k)
	return k, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
}
