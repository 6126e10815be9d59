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
}

func newTestIssuer(t *testing.T) *testIssuer {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	is := &testIssuer{key: key, codes: map[string]url.Values{}}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/.well-known/oauth-authorization-server":
			json.NewEncoder(w).Encode(map[string]any{
				"issuer": is.URL, "jwks_uri": is.URL + "/jwks",
				"authorization_endpoint": is.URL + "/authorize", "token_endpoint": is.URL + "/token",
				"registration_endpoint": is.URL + "/register", "response_types_supported": []string{"code"},
				"code_challenge_methods_supported":               []string{"S256"},
				"token_endpoint_auth_methods_supported":          []string{"none"},
				"authorization_response_iss_parameter_supported": true,
			})
		case "/register":
			w.WriteHeader(http.StatusCreated)
			json.NewEncoder(w).Encode(map[string]any{"client_id": "c-1", "token_endpoint_auth_method": "none"})
		case "/authorize":
			// The user consents at once.
			q := r.URL.Query()
			code := rand.Text()
			is.mu.Lock()
			is.codes[code] = q
			is.authorizations++
			is.mu.Unlock()
			back, err := url.Parse(q.Get("redirect_uri"))
			if err != nil || q.Get("code_challenge_method") != "S256" || q.Get("client_id") != "c-1" {
				http.Error(w, "bad authorization request", http.StatusBadRequest)
				return
			}
			back.RawQuery = url.Values{"code": {code}, "state": {q.Get("state")}, "iss": {is.URL}}.Encode()
			http.Redirect(w, r, back.String(), http.StatusFound)
		case "/token":
			r.ParseForm()
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
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	res := "http://" + addr + "/mcp"
	url, _ := startServeHTTP(t, addr, "--oauth-issuer", is.URL, "--oauth-resource", res)
	home := t.TempDir()
	env := append(envWithout("XDG_CONFIG_HOME", "HOME"), "XDG_CONFIG_HOME="+home, "HOME="+home)
	args := []string{"call", "--url", url, "--oauth", "--oauth-timeout", "20s", "--tool", "echo", "--args", `{"text":"hi"}`}

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
			t.Fatalf("no authorization URL on stderr: %v", err)
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
		t.Errorf("the redirect to call's listener: %d at %s: %s", resp.StatusCode, resp.Request.URL, page)
	}
	if err := cmd.Wait(); err != nil || !strings.Contains(out.String(), `"text":"hi"`) {
		t.Fatalf("call --oauth: %v %s", err, out.String())
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
	} {
		cmd := exec.Command(binary, tc.args...)
		out, err := cmd.CombinedOutput()
		if err == nil || cmd.ProcessState.ExitCode() != 2 || !strings.Contains(string(out), tc.want) {
			t.Errorf("agentwire %q: %v, want exit 2 saying %q; got %s", tc.args, err, tc.want, out)
		}
	}
}
