//go:build unix

package main

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// envWithout is the test's environment without the variables named.
func envWithout(names ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if !slices.Contains(names, name) {
			env = append(env, kv)
		}
	}
	return env
}

// The OAuth flags refuse what cannot be served: each case exits 2 and
// says why, before anything listens.
func TestOAuthFlagsRefused(t *testing.T) {
	const is, res = "https://as.example.test", "https://mcp.example.test/mcp"
	clean := envWithout(TokenEnv, OAuthClientIDEnv, OAuthClientSecretEnv)
	for _, tc := range []struct {
		args []string
		env  []string // added to clean
		want string
	}{
		{[]string{"serve", "mcp", "--oauth-issuer", is, "--oauth-resource", res}, nil, "only with --http"},
		{[]string{"serve", "mcp", "--http", "0", "--oauth-issuer", is}, nil, "needs --oauth-resource"},
		{[]string{"serve", "mcp", "--http", "0", "--oauth-resource", res}, nil, "need --oauth-issuer"},
		{[]string{"serve", "mcp", "--http", "0", "--oauth-introspect", is + "/introspect", "--oauth-resource", res}, nil, "need --oauth-issuer"},
		{[]string{"serve", "mcp", "--http", "0", "--oauth-issuer", is, "--oauth-resource", res, "--token", "t"}, nil, "exclude each other"},
		{[]string{"serve", "mcp", "--http", "0", "--oauth-issuer", is, "--oauth-resource", res}, []string{TokenEnv + "=t"}, "exclude each other"},
		{[]string{"bridge", "--http", "0", "--oauth-issuer", is, "--oauth-resource", res, "--token", "t", "--", binary, "serve", "mcp"}, nil, "exclude each other"},
		{[]string{"serve", "mcp", "--http", "0", "--oauth-issuer", is, "--oauth-resource", res, "--oauth-introspect", is + "/introspect"}, nil, "$" + OAuthClientIDEnv},
		{[]string{"serve", "mcp", "--http", "0", "--oauth-issuer", is, "--oauth-resource", res, "--oauth-introspect", is + "/introspect"}, []string{OAuthClientIDEnv + "=rs"}, "$" + OAuthClientSecretEnv},
		{[]string{"serve", "mcp", "--http", "0", "--oauth-issuer", is, "--oauth-resource", res, "--oauth-introspect", "ftp://as/x"}, []string{OAuthClientIDEnv + "=rs", OAuthClientSecretEnv + "=s"}, "not an http(s) URL"},
		{[]string{"serve", "mcp", "--http", "0", "--oauth-issuer", is, "--oauth-resource", res + "?x=1"}, nil, "without query or fragment"},
		{[]string{"serve", "mcp", "--http", "0", "--oauth-issuer", is, "--oauth-resource", "/mcp"}, nil, "absolute http(s) URL"},
		{[]string{"serve", "mcp", "--http", "0", "--oauth-issuer", "as.example.test", "--oauth-resource", res}, nil, "--oauth-issuer"},
		{[]string{"serve", "mcp", "--http", "0", "--oauth-issuer", is, "--oauth-resource", res, "--oauth-scope", "a b"}, nil, "not a scope token"},
		{[]string{"bridge", "--http", "0", "--oauth-issuer", is, "--", binary, "serve", "mcp"}, nil, "needs --oauth-resource"},
	} {
		cmd := exec.Command(binary, tc.args...)
		cmd.Env = append(slices.Clone(clean), tc.env...)
		out, err := cmd.CombinedOutput()
		if err == nil || cmd.ProcessState.ExitCode() != 2 || !strings.Contains(string(out), tc.want) {
			t.Errorf("agentwire %q (env %q): %v, want exit 2 saying %q; got %s", tc.args, tc.env, err, tc.want, out)
		}
	}
}

// testIssuer is an authorization server in the test's process: its
// RFC 8414 metadata and its key set, and the key it signs with.
type testIssuer struct {
	URL string
	key *ecdsa.PrivateKey

	mu             sync.Mutex
	codes          map[string]url.Values // the authorization requests, by the code issued
	authorizations int
	registrations  int
	clients        map[string]string // pre-registered client IDs and their secrets ("" for a public client)
	tokenAuth      []string          // how each token request authenticated: "basic ID:SECRET", "post ID:SECRET" or "none ID"
}

// preregister adds a client registered beforehand, with its secret ("" for
// a public client).
func (is *testIssuer) preregister(id, secret string) {
	is.mu.Lock()
	defer is.mu.Unlock()
	is.clients[id] = secret
}

// counts are the authorizations and registrations so far, and the token
// requests' authentication.
func (is *testIssuer) counts() (authorizations, registrations int, tokenAuth []string) {
	is.mu.Lock()
	defer is.mu.Unlock()
	return is.authorizations, is.registrations, slices.Clone(is.tokenAuth)
}

// clientAuth is how a token request authenticated, and whether that is
// its client's way: a registered client with its secret, a public one
// without.
func (is *testIssuer) clientAuth(r *http.Request) (string, bool) {
	is.mu.Lock()
	defer is.mu.Unlock()
	if id, secret, ok := r.BasicAuth(); ok {
		want, known := is.clients[id]
		return "basic " + id + ":" + secret, known && want != "" && secret == want
	}
	id := r.PostForm.Get("client_id")
	if secret := r.PostForm.Get("client_secret"); secret != "" {
		want, known := is.clients[id]
		return "post " + id + ":" + secret, known && want != "" && secret == want
	}
	want, known := is.clients[id]
	return "none " + id, id == "c-1" || (known && want == "")
}

func newTestIssuer(t *testing.T) *testIssuer {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	is := &testIssuer{key: key, codes: map[string]url.Values{}, clients: map[string]string{}}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/.well-known/oauth-authorization-server":
			json.NewEncoder(w).Encode(map[string]any{
				"issuer": is.URL, "jwks_uri": is.URL + "/jwks",
				"authorization_endpoint": is.URL + "/authorize", "token_endpoint": is.URL + "/token",
				"registration_endpoint": is.URL + "/register", "response_types_supported": []string{"code"},
				"code_challenge_methods_supported":               []string{"S256"},
				"token_endpoint_auth_methods_supported":          []string{"none", "client_secret_basic", "client_secret_post"},
				"authorization_response_iss_parameter_supported": true,
			})
		case "/register":
			is.mu.Lock()
			is.registrations++
			is.mu.Unlock()
			w.WriteHeader(http.StatusCreated)
			json.NewEncoder(w).Encode(map[string]any{"client_id": "c-1", "token_endpoint_auth_method": "none"})
		case "/authorize":
			// The user consents at once.
			q := r.URL.Query()
			code := rand.Text()
			is.mu.Lock()
			is.codes[code] = q
			is.authorizations++
			_, known := is.clients[q.Get("client_id")]
			is.mu.Unlock()
			back, err := url.Parse(q.Get("redirect_uri"))
			if err != nil || q.Get("code_challenge_method") != "S256" || (q.Get("client_id") != "c-1" && !known) {
				http.Error(w, "bad authorization request", http.StatusBadRequest)
				return
			}
			back.RawQuery = url.Values{"code": {code}, "state": {q.Get("state")}, "iss": {is.URL}}.Encode()
			http.Redirect(w, r, back.String(), http.StatusFound)
		case "/token":
			r.ParseForm()
			how, authenticated := is.clientAuth(r)
			is.mu.Lock()
			is.tokenAuth = append(is.tokenAuth, how)
			is.mu.Unlock()
			if !authenticated {
				w.WriteHeader(http.StatusUnauthorized)
				json.NewEncoder(w).Encode(map[string]string{"error": "invalid_client"})
				return
			}
			is.mu.Lock()
			q, ok := is.codes[r.PostForm.Get("code")]
			delete(is.codes, r.PostForm.Get("code"))
			is.mu.Unlock()
			sum := sha256.Sum256([]byte(r.PostForm.Get("code_verifier")))
			if !ok || r.PostForm.Get("grant_type") != "authorization_code" || base64.RawURLEncoding.EncodeToString(sum[:]) != q.Get("code_challenge") ||
				r.PostForm.Get("resource") != q.Get("resource") || r.PostForm.Get("redirect_uri") != q.Get("redirect_uri") {
				w.WriteHeader(http.StatusBadRequest)
				json.NewEncoder(w).Encode(map[string]string{"error": "invalid_grant"})
				return
			}
			json.NewEncoder(w).Encode(map[string]any{"access_token": is.token(t, q.Get("resource"), q.Get("scope")), "token_type": "Bearer", "expires_in": 3600})
		case "/jwks":
			json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &key.PublicKey, KeyID: "k1", Algorithm: "ES256", Use: "sig"}}})
		default:
			http.NotFound(w, r)
		}
	}))
	is.URL = "http://" + srv.Listener.Addr().String()
	srv.Start()
	t.Cleanup(srv.Close)
	return is
}

// token signs an access token for audience with scope.
func (is *testIssuer) token(t *testing.T, audience, scope string) string {
	t.Helper()
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: is.key},
		(&jose.SignerOptions{}).WithType("at+jwt").WithHeader("kid", "k1"))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	tok, err := jwt.Signed(s).Claims(map[string]any{
		"iss": is.URL, "aud": audience, "sub": "ann", "client_id": "cli",
		"iat": now.Unix(), "exp": now.Add(time.Hour).Unix(), "scope": scope,
	}).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// post sends a ping with token (none when empty) and returns the status
// and the WWW-Authenticate header.
func post(t *testing.T, url, token string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, resp.Header.Get("WWW-Authenticate")
}

// serve mcp --http with --oauth-issuer and --oauth-resource is a resource
// server: 401 with the challenge naming its metadata document, the
// document itself, tokens verified against the issuer's JWKS (audience and
// the --oauth-scope scope checked), and agentwire call --token gets
// through with a good one.
func TestServeMCPOverHTTPWithOAuth(t *testing.T) {
	is := newTestIssuer(t)
	const res = "https://mcp.example.test/mcp"
	url, _ := startServeHTTP(t, "127.0.0.1:0", "--oauth-issuer", is.URL, "--oauth-resource", res, "--oauth-scope", "mcp:tools")
	metadataURL := "https://mcp.example.test/.well-known/oauth-protected-resource/mcp"

	status, challenge := post(t, url, "")
	if want := `Bearer resource_metadata="` + metadataURL + `", scope="mcp:tools"`; status != http.StatusUnauthorized || challenge != want {
		t.Errorf("without a token: %d %q, want 401 %q", status, challenge, want)
	}
	resp, err := http.Get(strings.TrimSuffix(url, "/mcp") + "/.well-known/oauth-protected-resource/mcp")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Resource             string   `json:"resource"`
		AuthorizationServers []string `json:"authorization_servers"`
		ScopesSupported      []string `json:"scopes_supported"`
	}
	err = json.NewDecoder(resp.Body).Decode(&doc)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 200 || doc.Resource != res || !slices.Equal(doc.AuthorizationServers, []string{is.URL}) || !slices.Equal(doc.ScopesSupported, []string{"mcp:tools"}) {
		t.Errorf("metadata document: %d %+v %v", resp.StatusCode, doc, err)
	}

	if status, challenge := post(t, url, is.token(t, "https://other.example.test/mcp", "mcp:tools")); status != http.StatusUnauthorized || !strings.Contains(challenge, `error="invalid_token"`) {
		t.Errorf("a token for another resource: %d %q", status, challenge)
	}
	if status, challenge := post(t, url, is.token(t, res, "other")); status != http.StatusForbidden || !strings.Contains(challenge, `error="insufficient_scope"`) {
		t.Errorf("a token without the scope: %d %q", status, challenge)
	}
	if status, _ := post(t, url, "not-a-jwt"); status != http.StatusUnauthorized {
		t.Errorf("garbage: %d", status)
	}
	good := is.token(t, res, "mcp:tools")
	if status, _ := post(t, url, good); status != http.StatusOK {
		t.Errorf("a good token: %d", status)
	}
	out, err := exec.Command(binary, "call", "--url", url, "--token", good, "--tool", "echo", "--args", `{"text":"hi"}`).CombinedOutput()
	if err != nil || !strings.Contains(string(out), `"text":"hi"`) {
		t.Errorf("call --token with a good token: %v %s", err, out)
	}
}

// bridge --http with OAuth verifies the client's token and passes nothing
// of it to the stdio server: neither in what the server reads nor in its
// environment, which has no OAuth credentials either.
func TestBridgeOAuthNoTokenPassthrough(t *testing.T) {
	is := newTestIssuer(t)
	const res = "https://mcp.example.test/mcp"
	dir := t.TempDir()
	in, envFile := filepath.Join(dir, "in"), filepath.Join(dir, "env")
	cmd := exec.Command(binary, "bridge", "--http", "0", "--oauth-issuer", is.URL, "--oauth-resource", res, "--",
		"sh", "-c", `env > "$1"; tee "$2" | "$3" serve mcp`, "sh", envFile, in, binary)
	cmd.Env = append(envWithout(TokenEnv), OAuthClientIDEnv+"=rs-id", OAuthClientSecretEnv+"=rs-secret-value")
	url, stop := startBridgeCmd(t, cmd)
	token := is.token(t, res, "")
	if status, _ := post(t, url, ""); status != http.StatusUnauthorized {
		t.Errorf("without a token: %d", status)
	}
	out, err := exec.Command(binary, "call", "--url", url, "--token", token, "--tool", "echo", "--args", `{"text":"hi"}`).CombinedOutput()
	if err != nil || !strings.Contains(string(out), `"text":"hi"`) {
		t.Fatalf("call through the bridge: %v %s", err, out)
	}
	stop()
	read, err := os.ReadFile(in)
	if err != nil || !strings.Contains(string(read), `"hi"`) {
		t.Fatalf("the stdio server read %q (%v)", read, err)
	}
	env, _ := os.ReadFile(envFile)
	_, sig, _ := strings.Cut(token, ".")
	for _, secret := range []string{token, sig[:20], "rs-secret-value", "rs-id"} {
		if strings.Contains(string(read), secret) {
			t.Errorf("the stdio server read %q", secret)
		}
		if strings.Contains(string(env), secret) {
			t.Errorf("the stdio server's environment has %q", secret)
		}
	}
}

// call --url --oauth against a protected serve mcp --http: the 401 leads
// to the issuer's metadata, a registration, the authorization URL on
// stderr (here "opened" by the test, whose authorization server consents at
// once and redirects to call's loopback listener), the token, and the
// call; the token is kept in the user's config directory (0700, 0600), and
// a second call uses it without authorizing again.
func TestCallOAuth(t *testing.T) {
	is := newTestIssuer(t)
	url := startProtected(t, is)
	env, home := configHome(t)
	args := []string{"call", "--url", url, "--oauth", "--oauth-timeout", "20s", "--tool", "echo", "--args", `{"text":"hi"}`}

	out, err := authorizeInBrowser(t, is, env, args...)
	if err != nil || !strings.Contains(out, `"text":"hi"`) {
		t.Fatalf("call --oauth: %v %s", err, out)
	}

	config := home
	if runtime.GOOS == "darwin" {
		config = filepath.Join(home, "Library", "Application Support")
	}
	dir := filepath.Join(config, "agentwire", "oauth")
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("the token store: %v %v", fi, err)
	}
	files, _ := os.ReadDir(dir)
	if len(files) != 1 {
		t.Fatalf("the token store has %d files, want 1", len(files))
	}
	if fi, _ := files[0].Info(); fi.Mode().Perm() != 0o600 || !strings.HasSuffix(fi.Name(), ".json") {
		t.Errorf("the token file: %v", fi.Mode())
	}

	again := exec.Command(binary, args...)
	again.Env = env
	b, err := again.CombinedOutput()
	if err != nil || !strings.Contains(string(b), `"text":"hi"`) || strings.Contains(string(b), "/authorize") {
		t.Errorf("a second call --oauth: %v %s", err, b)
	}
	is.mu.Lock()
	n := is.authorizations
	is.mu.Unlock()
	if n != 1 {
		t.Errorf("%d authorizations, want 1", n)
	}
}

// startProtected runs serve mcp --http protected by is, its resource its
// own URL, and returns the URL.
func startProtected(t *testing.T, is *testIssuer) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	url, _ := startServeHTTP(t, addr, "--oauth-issuer", is.URL, "--oauth-resource", "http://"+addr+"/mcp")
	return url
}

// configHome is the environment of a user whose config directory is a new
// one, and the home directory it is in.
func configHome(t *testing.T) ([]string, string) {
	home := t.TempDir()
	return append(envWithout("XDG_CONFIG_HOME", "HOME", OAuthClientSecretEnv), "XDG_CONFIG_HOME="+home, "HOME="+home), home
}

// authorizeInBrowser runs agentwire with args and env, plays the user's
// browser (opens the authorization URL printed on stderr, which is
// followed to the command's loopback listener), and returns the command's
// stdout once it exits.
func authorizeInBrowser(t *testing.T, is *testIssuer, env []string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Env = env
	var out strings.Builder
	cmd.Stdout = &out
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(stderr)
	var authURL string
	for authURL == "" {
		line, err := br.ReadString('\n')
		if err != nil {
			cmd.Wait()
			t.Fatalf("no authorization URL on stderr: %v (stdout %s)", err, out.String())
		}
		if l := strings.TrimSpace(line); strings.HasPrefix(l, is.URL+"/authorize?") {
			authURL = l
		}
	}
	go io.Copy(io.Discard, br)
	resp, err := http.Get(authURL)
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Request.URL.String(), "http://127.0.0.1:") {
		t.Errorf("the redirect to the loopback listener: %d at %s: %s", resp.StatusCode, resp.Request.URL, page)
	}
	err = cmd.Wait()
	return out.String(), err
}

// The client's OAuth flags go with --url, and not with --token.
func TestCallOAuthFlagsRefused(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"call", "--oauth", "--", binary, "serve", "mcp"}, "go with --url"},
		{[]string{"call", "--url", "http://127.0.0.1:1/mcp", "--oauth", "--token", "t"}, "exclude each other"},
		{[]string{"call", "--url", "http://127.0.0.1:1/mcp", "--oauth-timeout", "1s"}, "go with --oauth"},
		{[]string{"call", "--url", "http://127.0.0.1:1/mcp", "--oauth", "--oauth-timeout", "0s"}, "must be positive"},
		{[]string{"check", "--oauth", "--", binary, "serve", "mcp"}, "go with --url"},
		{[]string{"check", "--url", "http://127.0.0.1:1/mcp", "--oauth", "--token", "t"}, "exclude each other"},
		{[]string{"check", "--url", "http://127.0.0.1:1/mcp", "--oauth-client-id", "c"}, "go with --oauth"},
		{[]string{"call", "--url", "http://127.0.0.1:1/mcp", "--oauth", "--oauth-client-id", "c"}, "needs --oauth-issuer"},
		{[]string{"check", "--url", "http://127.0.0.1:1/mcp", "--oauth", "--oauth-issuer", "https://as.example.test"}, "go with --oauth-client-id"},
		{[]string{"call", "--url", "http://127.0.0.1:1/mcp", "--oauth", "--oauth-client-id", "c", "--oauth-issuer", "as.example.test"}, "--oauth-issuer"},
		{[]string{"call", "--url", "http://127.0.0.1:1/mcp", "--oauth", "--oauth-client-id", "c", "--oauth-issuer", "https://as.example.test", "--oauth-client-auth", "client_secret_basic"}, "$" + OAuthClientSecretEnv},
		{[]string{"call", "--url", "http://127.0.0.1:1/mcp", "--oauth", "--oauth-client-id", "c", "--oauth-issuer", "https://as.example.test", "--oauth-client-auth", "private_key_jwt"}, "bad --oauth-client-auth"},
	} {
		cmd := exec.Command(binary, tc.args...)
		cmd.Env = envWithout(OAuthClientSecretEnv)
		out, err := cmd.CombinedOutput()
		if err == nil || cmd.ProcessState.ExitCode() != 2 || !strings.Contains(string(out), tc.want) {
			t.Errorf("agentwire %q: %v, want exit 2 saying %q; got %s", tc.args, err, tc.want, out)
		}
	}
}

// check --url --oauth runs the battery against a protected server with a
// token obtained as call --oauth obtains one: an "authorization" row,
// then the rows of an unprotected server; a second check uses the stored
// token without sending the user to authorize.
func TestCheckOAuth(t *testing.T) {
	is := newTestIssuer(t)
	url := startProtected(t, is)
	env, _ := configHome(t)
	args := []string{"check", "--json", "--url", url, "--oauth", "--oauth-timeout", "20s"}
	out, err := authorizeInBrowser(t, is, env, args...)
	var rep checkReport
	if jerr := json.Unmarshal([]byte(out), &rep); jerr != nil || err != nil || !rep.Passed {
		t.Fatalf("check --oauth: %v %v %s", err, jerr, out)
	}
	rows := map[string]string{"authorization": pass, "era": pass, "status codes": pass, "header mirroring": pass, "origin": pass}
	wantRows(t, rep, rows)
	if r := row(rep, "authorization"); !strings.Contains(r.Evidence, "authorizing in a browser") {
		t.Errorf("authorization: %s", r.Evidence)
	}

	again := exec.Command(binary, args...)
	again.Env = env
	var stdout, stderr strings.Builder
	again.Stdout, again.Stderr = &stdout, &stderr
	err = again.Run()
	rep = checkReport{}
	if jerr := json.Unmarshal([]byte(stdout.String()), &rep); jerr != nil || err != nil || !rep.Passed || strings.Contains(stderr.String(), "/authorize") {
		t.Fatalf("a second check --oauth: %v %v %s %s", err, jerr, stdout.String(), stderr.String())
	}
	wantRows(t, rep, rows)
	if r := row(rep, "authorization"); !strings.Contains(r.Evidence, "stored token") {
		t.Errorf("authorization: %s", r.Evidence)
	}
	if n, reg, _ := is.counts(); n != 1 || reg != 1 {
		t.Errorf("%d authorizations and %d registrations, want 1 and 1", n, reg)
	}
}

// check --oauth with no token (here: the authorization server refuses the
// client) fails the authorization row, and runs nothing else.
func TestCheckOAuthRefused(t *testing.T) {
	is := newTestIssuer(t)
	url := startProtected(t, is)
	env, _ := configHome(t)
	// Credentials for another authorization server are never sent to is.
	rep, code := runCheckURLEnv(t, env, url, "--oauth", "--oauth-client-id", "c", "--oauth-issuer", "https://other.example.test")
	wantRows(t, rep, map[string]string{"authorization": fail, "era": notRun, "origin": notRun})
	if r := row(rep, "authorization"); !strings.Contains(r.Evidence, "other authorization servers") {
		t.Errorf("authorization: %s", r.Evidence)
	}
	if n, reg, auth := is.counts(); code != 1 || n != 0 || reg != 0 || len(auth) != 0 {
		t.Errorf("exit %d; %d authorizations, %d registrations, token requests %q", code, n, reg, auth)
	}
}

// runCheckURLEnv is runCheckURL with env.
func runCheckURLEnv(t *testing.T, env []string, url string, args ...string) (checkReport, int) {
	t.Helper()
	cmd := exec.Command(binary, append([]string{"check", "--json", "--url", url}, args...)...)
	cmd.Env = env
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var rep checkReport
	if jerr := json.Unmarshal([]byte(stdout.String()), &rep); jerr != nil {
		t.Fatalf("check --json: %v %v %s %s", err, jerr, stdout.String(), stderr.String())
	}
	return rep, cmd.ProcessState.ExitCode()
}

// --oauth-client-id with --oauth-issuer is a client registered
// beforehand: no registration; its secret, from the environment, sent as
// --oauth-client-auth says (basic by default), or none for a public
// client; for call and check alike.
func TestOAuthPreregistered(t *testing.T) {
	is := newTestIssuer(t)
	is.preregister("pre-confidential", "s3cret")
	is.preregister("pre-public", "")
	url := startProtected(t, is)
	for _, tc := range []struct {
		args   []string
		secret string
		want   string // the token request's authentication
	}{
		{[]string{"call", "--oauth-client-id", "pre-confidential"}, "s3cret", "basic pre-confidential:s3cret"},
		{[]string{"call", "--oauth-client-id", "pre-confidential", "--oauth-client-auth", "client_secret_post"}, "s3cret", "post pre-confidential:s3cret"},
		{[]string{"call", "--oauth-client-id", "pre-public"}, "", "none pre-public"},
		{[]string{"check", "--json", "--oauth-client-id", "pre-confidential", "--oauth-client-auth", "client_secret_basic"}, "s3cret", "basic pre-confidential:s3cret"},
		{[]string{"check", "--json", "--oauth-client-id", "pre-public", "--oauth-client-auth", "none"}, "", "none pre-public"},
	} {
		env, _ := configHome(t)
		if tc.secret != "" {
			env = append(env, OAuthClientSecretEnv+"="+tc.secret)
		}
		args := append(slices.Clone(tc.args), "--url", url, "--oauth", "--oauth-timeout", "20s", "--oauth-issuer", is.URL)
		want := `"passed": true`
		if tc.args[0] == "call" {
			args, want = append(args, "--tool", "echo", "--args", `{"text":"hi"}`), `"text":"hi"`
		}
		_, _, before := is.counts()
		out, err := authorizeInBrowser(t, is, env, args...)
		if err != nil || !strings.Contains(out, want) {
			t.Errorf("%q: %v %s", tc.args, err, out)
		}
		if _, _, after := is.counts(); !slices.Equal(after[len(before):], []string{tc.want}) {
			t.Errorf("%q: token requests authenticated as %q, want %q", tc.args, after[len(before):], tc.want)
		}
	}
	if _, reg, _ := is.counts(); reg != 0 {
		t.Errorf("%d registrations, want none", reg)
	}
}
