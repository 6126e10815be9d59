package authcode_test

import (
	"context"
	"crypto"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/agentwire/agentwire/mcp"
	"github.com/agentwire/agentwire/mcp/auth"
	"github.com/agentwire/agentwire/mcp/server"
	"github.com/agentwire/agentwire/mcp/streamable"
	"github.com/agentwire/agentwire/oauth/authcode"
	"github.com/agentwire/agentwire/oauth/dpop"
)

const (
	dpopCIMD    = "https://client.example/metadata.json"
	dpopASNonce = "as-nonce-1"
	dpopRSNonce = "rs-nonce-1"
)

// dpopToken is a token the fake DPoP server minted.
type dpopToken struct {
	jkt    string // the key it is bound to; "" for a bearer token
	expiry time.Time
}

// dpopTokenRequest is a token request as the fake DPoP server saw it.
type dpopTokenRequest struct {
	grantType string
	resource  string
	proof     dpop.Claims // zero without a proof
	jkt       string
	status    int
}

// dpopServer is an authorization server and the MCP server it protects,
// both checking DPoP (RFC 9449) as the conformance suite does: proofs of
// type dpop+jwt with a public jwk they verify with, a jti never seen, htm
// and htu of the request, iat within 300 s, ath of the token at the MCP
// server, and, with nonces, the server's nonce. A token request with a
// proof gets a token bound to its key (token_type DPoP), one without a
// bearer token.
type dpopServer struct {
	as, rs *httptest.Server
	mcp    *streamable.Handler

	// nonces: both servers demand their nonce in proofs.
	nonces bool
	// dpopChallenge: the MCP server's challenge has scheme DPoP, not
	// Bearer, and its metadata is only at the URL the challenge names.
	dpopChallenge bool
	// noBinding: the authorization server ignores DPoP, and mints bearer
	// tokens whatever the request carries.
	noBinding bool
	expiresIn int

	mu             sync.Mutex
	jtis           map[string]bool
	tokens         map[string]dpopToken
	refresh        map[string]string // refresh token → the jkt of its grant
	codes          map[string]string // code → dpop_jkt of its authorization
	authorizations []url.Values
	tokenRequests  []dpopTokenRequest
	mcpRequests    []string      // the Authorization header of each MCP request
	mcpProofs      []dpop.Claims // the accepted proofs of MCP requests
	nonceRefusals  int           // the MCP server's use_dpop_nonce answers
	problems       []string
	n              int
}

func newDPoPServer(t *testing.T, nonces, dpopChallenge bool) *dpopServer {
	t.Helper()
	d := &dpopServer{nonces: nonces, dpopChallenge: dpopChallenge, expiresIn: 3600,
		jtis: map[string]bool{}, tokens: map[string]dpopToken{}, refresh: map[string]string{}, codes: map[string]string{}}
	asMux := http.NewServeMux()
	asMux.HandleFunc("GET /.well-known/oauth-authorization-server", d.metadata)
	asMux.HandleFunc("GET /authorize", d.authorize)
	asMux.HandleFunc("POST /token", d.token)
	d.as = httptest.NewServer(asMux)
	t.Cleanup(d.as.Close)

	rsMux := http.NewServeMux()
	d.rs = httptest.NewServer(rsMux)
	t.Cleanup(d.rs.Close)
	resource := d.rs.URL + "/mcp"
	s := server.New(mcp.Implementation{Name: "protected", Version: "1"}, nil)
	s.AddTool(mcp.Tool{Name: "echo"}, func(context.Context, *server.ToolRequest) (*mcp.ToolResult, error) {
		return mcp.TextResult("echoed"), nil
	})
	prm := auth.ProtectedResourceMetadata{Resource: resource, AuthorizationServers: []string{d.as.URL}, DPoPSigningAlgValuesSupported: []string{"ES256"}}
	d.mcp = streamable.NewHandler(s, &streamable.Options{Protect: &streamable.Protection{
		Verifier: auth.VerifierFunc(func(ctx context.Context, token string) (*auth.Identity, error) {
			d.mu.Lock()
			defer d.mu.Unlock()
			if _, ok := d.tokens[token]; !ok {
				return nil, fmt.Errorf("%w: not minted here", auth.ErrInvalidToken)
			}
			return &auth.Identity{Subject: "user", Issuer: d.as.URL, Audience: []string{resource}}, nil
		}),
		Metadata: prm,
	}})
	t.Cleanup(func() { d.mcp.Shutdown(context.Background()) })
	rsMux.HandleFunc("GET /custom/prm.json", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(prm)
	})
	rsMux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/.well-known/") {
			if d.dpopChallenge {
				http.NotFound(w, r)
				return
			}
			d.mcp.ServeHTTP(w, r)
			return
		}
		if d.front(w, r, resource) {
			d.mcp.ServeHTTP(w, r)
		}
	})
	return d
}

func (d *dpopServer) URL() string { return d.rs.URL + "/mcp" }

func (d *dpopServer) problem(format string, args ...any) {
	d.problems = append(d.problems, fmt.Sprintf(format, args...))
}

func (d *dpopServer) metadata(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{
		"issuer":                                         d.as.URL,
		"authorization_endpoint":                         d.as.URL + "/authorize",
		"token_endpoint":                                 d.as.URL + "/token",
		"code_challenge_methods_supported":               []string{"S256"},
		"token_endpoint_auth_methods_supported":          []string{"none"},
		"response_types_supported":                       []string{"code"},
		"authorization_response_iss_parameter_supported": true,
		"client_id_metadata_document_supported":          true,
		"dpop_signing_alg_values_supported":              []string{"ES256"},
	})
}

func (d *dpopServer) authorize(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	d.mu.Lock()
	d.authorizations = append(d.authorizations, q)
	d.n++
	code := fmt.Sprintf("code-%d", d.n)
	d.codes[code] = q.Get("dpop_jkt")
	d.mu.Unlock()
	back, _ := url.Parse(q.Get("redirect_uri"))
	v := url.Values{"code": {code}, "state": {q.Get("state")}, "iss": {d.as.URL}}
	back.RawQuery = v.Encode()
	http.Redirect(w, r, back.String(), http.StatusFound)
}

// checkProof verifies a proof for a request of method to htu; it returns
// its claims and the thumbprint of its key. Called with d.mu held.
func (d *dpopServer) checkProof(proof, method, htu string) (dpop.Claims, string, error) {
	var c dpop.Claims
	jws, err := jose.ParseSignedCompact(proof, []jose.SignatureAlgorithm{jose.ES256, jose.ES384, jose.EdDSA, jose.RS256, jose.PS256})
	if err != nil {
		return c, "", err
	}
	h := jws.Signatures[0].Protected
	if h.ExtraHeaders[jose.HeaderType] != dpop.ProofType || h.JSONWebKey == nil || !h.JSONWebKey.IsPublic() {
		return c, "", fmt.Errorf("header typ %v jwk %v", h.ExtraHeaders[jose.HeaderType], h.JSONWebKey)
	}
	payload, err := jws.Verify(h.JSONWebKey)
	if err != nil {
		return c, "", err
	}
	if err := json.Unmarshal(payload, &c); err != nil {
		return c, "", err
	}
	now := time.Now().Unix()
	switch {
	case c.Method != method || c.URL != htu:
		return c, "", fmt.Errorf("htm %q htu %q, want %s %s", c.Method, c.URL, method, htu)
	case c.IssuedAt < now-300 || c.IssuedAt > now+300:
		return c, "", fmt.Errorf("iat %d", c.IssuedAt)
	case c.ID == "" || d.jtis[c.ID]:
		return c, "", fmt.Errorf("jti %q missing or reused", c.ID)
	}
	d.jtis[c.ID] = true
	tp, err := h.JSONWebKey.Thumbprint(crypto.SHA256)
	if err != nil {
		return c, "", err
	}
	return c, base64.RawURLEncoding.EncodeToString(tp), nil
}

func (d *dpopServer) token(w http.ResponseWriter, r *http.Request) {
	r.ParseForm()
	d.mu.Lock()
	defer d.mu.Unlock()
	tr := dpopTokenRequest{grantType: r.PostForm.Get("grant_type"), resource: r.PostForm.Get("resource")}
	answer := func(status int, body map[string]any) {
		tr.status = status
		d.tokenRequests = append(d.tokenRequests, tr)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		w.WriteHeader(status)
		json.NewEncoder(w).Encode(body)
	}
	if p := r.Header.Get("DPoP"); p != "" && !d.noBinding {
		c, jkt, err := d.checkProof(p, http.MethodPost, d.as.URL+"/token")
		if err != nil {
			d.problem("token request proof: %v", err)
			answer(http.StatusBadRequest, map[string]any{"error": "invalid_dpop_proof"})
			return
		}
		if c.AccessToken != "" {
			d.problem("token request proof has ath")
		}
		tr.proof, tr.jkt = c, jkt
		if d.nonces && c.Nonce != dpopASNonce {
			w.Header().Set(dpop.NonceHeader, dpopASNonce)
			answer(http.StatusBadRequest, map[string]any{"error": "use_dpop_nonce"})
			return
		}
	}
	switch tr.grantType {
	case "authorization_code":
		want, ok := d.codes[r.PostForm.Get("code")]
		if !ok {
			answer(http.StatusBadRequest, map[string]any{"error": "invalid_grant"})
			return
		}
		if want != tr.jkt && !d.noBinding {
			d.problem("code for dpop_jkt %q exchanged with a proof of key %q", want, tr.jkt)
			answer(http.StatusBadRequest, map[string]any{"error": "invalid_dpop_proof"})
			return
		}
		delete(d.codes, r.PostForm.Get("code"))
	case "refresh_token":
		jkt, ok := d.refresh[r.PostForm.Get("refresh_token")]
		if !ok || jkt != tr.jkt {
			answer(http.StatusBadRequest, map[string]any{"error": "invalid_grant"})
			return
		}
	default:
		answer(http.StatusBadRequest, map[string]any{"error": "unsupported_grant_type"})
		return
	}
	d.n++
	access, refresh := fmt.Sprintf("access-%d", d.n), fmt.Sprintf("refresh-%d", d.n)
	d.tokens[access] = dpopToken{jkt: tr.jkt, expiry: time.Now().Add(time.Duration(d.expiresIn) * time.Second)}
	d.refresh[refresh] = tr.jkt
	tokenType := "Bearer"
	if tr.jkt != "" {
		tokenType = "DPoP"
	}
	answer(http.StatusOK, map[string]any{"access_token": access, "token_type": tokenType, "refresh_token": refresh, "expires_in": d.expiresIn})
}

// front checks an MCP request's credentials (RFC 9449 §7), answers the
// refusals itself, and otherwise hands on a bearer request.
func (d *dpopServer) front(w http.ResponseWriter, r *http.Request, resource string) bool {
	scheme, tok, _ := strings.Cut(r.Header.Get("Authorization"), " ")
	d.mu.Lock()
	defer d.mu.Unlock()
	d.mcpRequests = append(d.mcpRequests, r.Header.Get("Authorization"))
	refuse := func(params string) bool {
		if d.dpopChallenge {
			w.Header().Set("WWW-Authenticate", fmt.Sprintf(`DPoP %sresource_metadata=%q`, params, d.rs.URL+"/custom/prm.json"))
		} else {
			w.Header().Set("WWW-Authenticate", fmt.Sprintf(`Bearer %sresource_metadata=%q`, params, d.rs.URL+"/.well-known/oauth-protected-resource/mcp"))
		}
		http.Error(w, "unauthorized", http.StatusUnauthorized)
		return false
	}
	t, minted := d.tokens[tok]
	switch {
	case scheme == "":
		return refuse("")
	case !minted:
		return refuse(`error="invalid_token", `)
	case t.jkt == "":
		if scheme != "Bearer" || r.Header.Get("DPoP") != "" {
			d.problem("bearer token sent as %s, DPoP header %q", scheme, r.Header.Get("DPoP"))
			return refuse(`error="invalid_token", `)
		}
		return true
	case scheme != "DPoP":
		d.problem("DPoP-bound token sent as %s", scheme)
		return refuse(`error="invalid_token", `)
	}
	c, jkt, err := d.checkProof(r.Header.Get("DPoP"), r.Method, resource)
	if err != nil {
		d.problem("MCP request proof: %v", err)
		return refuse(`error="invalid_dpop_proof", `)
	}
	if c.AccessToken != dpop.AccessTokenHash(tok) || jkt != t.jkt {
		d.problem("MCP request proof: ath %q, key %q; want the token's %q, %q", c.AccessToken, jkt, dpop.AccessTokenHash(tok), t.jkt)
		return refuse(`error="invalid_dpop_proof", `)
	}
	if d.nonces && c.Nonce != dpopRSNonce {
		d.nonceRefusals++
		w.Header().Set(dpop.NonceHeader, dpopRSNonce)
		if d.dpopChallenge {
			w.Header().Set("WWW-Authenticate", fmt.Sprintf(`DPoP error="use_dpop_nonce", resource_metadata=%q`, d.rs.URL+"/custom/prm.json"))
		} else {
			w.Header().Set("WWW-Authenticate", `DPoP error="use_dpop_nonce"`)
		}
		http.Error(w, "unauthorized", http.StatusUnauthorized)
		return false
	}
	if time.Now().After(t.expiry) {
		return refuse(`error="invalid_token", `)
	}
	d.mcpProofs = append(d.mcpProofs, c)
	r.Header.Set("Authorization", "Bearer "+tok)
	r.Header.Del("DPoP")
	return true
}

func (d *dpopServer) check(t *testing.T) {
	t.Helper()
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, p := range d.problems {
		t.Error(p)
	}
}

func dpopOptions(t *testing.T, key *dpop.Key) authcode.Options {
	t.Helper()
	return authcode.Options{
		RedirectURL:         redirectURL,
		Redirect:            userAgent,
		ClientIDMetadataURL: dpopCIMD,
		DPoP:                key,
	}
}

func newDPoPKey(t *testing.T) *dpop.Key {
	t.Helper()
	k, err := dpop.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// callEcho connects to d with a, lists the tools and calls echo.
func callEcho(t *testing.T, d *dpopServer, a *authcode.Authorizer) {
	t.Helper()
	sess, err := streamable.Connect(t.Context(), d.URL(), nil, &streamable.ClientOptions{Authorizer: a})
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	if _, err := sess.ListTools(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := sess.CallTool(t.Context(), "echo", map[string]any{}); err != nil {
		t.Fatal(err)
	}
}

// With a DPoP key, a server whose challenge has scheme DPoP is
// discovered from it; the authorization request names the key, the code
// is exchanged with a proof, and every MCP request presents the bound
// token as DPoP with a proof of its own (ath of the token, htu of the MCP
// endpoint).
func TestDPoPBoundToken(t *testing.T) {
	d := newDPoPServer(t, false, true)
	key := newDPoPKey(t)
	a := newAuthorizer(t, dpopOptions(t, key))
	callEcho(t, d, a)
	d.check(t)

	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.authorizations) != 1 {
		t.Fatalf("%d authorizations, want 1", len(d.authorizations))
	}
	if got := d.authorizations[0].Get("dpop_jkt"); got != key.Thumbprint() {
		t.Errorf("dpop_jkt %q, want the key's thumbprint %q", got, key.Thumbprint())
	}
	if len(d.tokenRequests) != 1 {
		t.Fatalf("token requests %+v, want one", d.tokenRequests)
	}
	tr := d.tokenRequests[0]
	if tr.status != http.StatusOK || tr.jkt != key.Thumbprint() || tr.proof.Nonce != "" {
		t.Errorf("token request %+v: want a proof of the key, no nonce, a token", tr)
	}
	if len(d.mcpProofs) < 3 {
		t.Fatalf("%d MCP requests with accepted proofs, want at least 3 (connect, list, call)", len(d.mcpProofs))
	}
	for _, h := range d.mcpRequests[1:] {
		if !strings.HasPrefix(h, "DPoP access-") {
			t.Errorf("MCP request Authorization %q, want DPoP and the token", h)
		}
	}
}

// A server that demands nonces gets them: the token request answered
// use_dpop_nonce is sent once more with the authorization server's nonce,
// the MCP request answered use_dpop_nonce once more with the resource
// server's, and neither is a new authorization; later requests carry the
// nonce from the start.
func TestDPoPNonces(t *testing.T) {
	for _, dpopChallenge := range []bool{true, false} {
		t.Run(fmt.Sprintf("dpopChallenge=%v", dpopChallenge), func(t *testing.T) {
			d := newDPoPServer(t, true, dpopChallenge)
			key := newDPoPKey(t)
			a := newAuthorizer(t, dpopOptions(t, key))
			callEcho(t, d, a)
			callEcho(t, d, a)
			d.check(t)

			d.mu.Lock()
			defer d.mu.Unlock()
			if len(d.authorizations) != 1 {
				t.Errorf("%d authorizations, want 1", len(d.authorizations))
			}
			if len(d.tokenRequests) != 2 {
				t.Fatalf("token requests %+v, want two", d.tokenRequests)
			}
			first, second := d.tokenRequests[0], d.tokenRequests[1]
			if first.status != http.StatusBadRequest || first.proof.Nonce != "" {
				t.Errorf("first token request %+v: want no nonce, refused", first)
			}
			if second.status != http.StatusOK || second.proof.Nonce != dpopASNonce || second.proof.ID == first.proof.ID || second.resource == "" {
				t.Errorf("second token request %+v: want a new proof with nonce %q, the resource, a token", second, dpopASNonce)
			}
			if d.nonceRefusals != 1 {
				t.Errorf("the MCP server demanded its nonce %d times, want once", d.nonceRefusals)
			}
			for _, c := range d.mcpProofs {
				if c.Nonce != dpopRSNonce {
					t.Errorf("accepted MCP proof %+v without the nonce", c)
				}
			}
		})
	}
}

// A refresh is a token request like the others: with a proof of the key
// (and the server's nonce), and the token it brings is bound again.
func TestDPoPRefresh(t *testing.T) {
	d := newDPoPServer(t, true, true)
	d.expiresIn = 60
	key := newDPoPKey(t)
	var mu sync.Mutex
	now := time.Now()
	opts := dpopOptions(t, key)
	opts.Now = func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		return now
	}
	a := newAuthorizer(t, opts)
	callEcho(t, d, a)
	mu.Lock()
	now = now.Add(2 * time.Minute)
	mu.Unlock()
	callEcho(t, d, a)
	d.check(t)

	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.authorizations) != 1 {
		t.Errorf("%d authorizations, want 1", len(d.authorizations))
	}
	var refreshes []dpopTokenRequest
	for _, tr := range d.tokenRequests {
		if tr.grantType == "refresh_token" {
			refreshes = append(refreshes, tr)
		}
	}
	if len(refreshes) != 1 {
		t.Fatalf("refresh requests %+v, want one", refreshes)
	}
	if r := refreshes[0]; r.status != http.StatusOK || r.jkt != key.Thumbprint() || r.proof.Nonce != dpopASNonce || r.resource != d.URL() {
		t.Errorf("refresh %+v: want a proof of the key with the nonce, the resource", r)
	}
	last := d.mcpRequests[len(d.mcpRequests)-1]
	if last != "DPoP access-"+fmt.Sprint(d.n) {
		t.Errorf("last MCP request Authorization %q, want the refreshed token as DPoP", last)
	}
}

// Without a key (the default) no request carries a proof, and the token
// is a bearer one; a key whose token the server did not bind presents it
// as a bearer token too.
func TestDPoPOff(t *testing.T) {
	d := newDPoPServer(t, false, false)
	opts := dpopOptions(t, nil)
	a := newAuthorizer(t, opts)
	callEcho(t, d, a)
	d.check(t)
	d.mu.Lock()
	defer d.mu.Unlock()
	if got := d.authorizations[0].Get("dpop_jkt"); got != "" {
		t.Errorf("dpop_jkt %q without a key", got)
	}
	for _, tr := range d.tokenRequests {
		if tr.jkt != "" {
			t.Errorf("token request %+v with a proof, without a key", tr)
		}
	}
	for _, h := range d.mcpRequests[1:] {
		if !strings.HasPrefix(h, "Bearer access-") {
			t.Errorf("MCP request Authorization %q, want Bearer and the token", h)
		}
	}
}

// An authorizer with a key and a token the server answered as Bearer (an
// authorization server that does not do DPoP) sends it as Bearer, without
// a proof.
func TestDPoPUnboundToken(t *testing.T) {
	d := newDPoPServer(t, false, false)
	d.noBinding = true
	a := newAuthorizer(t, dpopOptions(t, newDPoPKey(t)))
	callEcho(t, d, a)
	d.check(t)
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, h := range d.mcpRequests[1:] {
		if !strings.HasPrefix(h, "Bearer access-") {
			t.Errorf("MCP request Authorization %q, want Bearer and the token", h)
		}
	}
}
