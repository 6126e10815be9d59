package machine_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentwire/agentwire/mcp/host"
	"github.com/agentwire/agentwire/mcp/streamable"
	"github.com/agentwire/agentwire/oauth/dpop"
	"github.com/agentwire/agentwire/oauth/machine"
)

const (
	grantCC  = "client_credentials"
	grantJWT = "urn:ietf:params:oauth:grant-type:jwt-bearer"
)

func setup(t *testing.T, cfg asConfig) (*fakeAS, *fakeMCP) {
	t.Helper()
	as := newFakeAS(cfg)
	t.Cleanup(as.Close)
	m := newFakeMCP(as)
	t.Cleanup(m.Close)
	return as, m
}

func newAuthorizer(t *testing.T, opts machine.Options) *machine.Authorizer {
	t.Helper()
	a, err := machine.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// secretBasic sets up a client_credentials client with
// client_secret_basic and its servers.
func secretBasic(t *testing.T) (*fakeAS, *fakeMCP, *machine.Authorizer) {
	t.Helper()
	as, m := setup(t, asConfig{grant: grantCC, authMethod: "client_secret_basic"})
	return as, m, newAuthorizer(t, machine.Options{ClientID: clientID, ClientSecret: clientSecret})
}

func session(t *testing.T, m *fakeMCP, a *machine.Authorizer) (*host.Session, error) {
	t.Helper()
	sess, err := streamable.Connect(t.Context(), m.URL(), nil, &streamable.ClientOptions{Authorizer: a})
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { sess.Close() })
	return sess, nil
}

// callTool connects to m with a, lists the tools and calls test-tool.
func callTool(t *testing.T, m *fakeMCP, a *machine.Authorizer) error {
	t.Helper()
	sess, err := session(t, m, a)
	if err != nil {
		return err
	}
	if _, err := sess.ListTools(t.Context()); err != nil {
		return err
	}
	res, err := sess.CallTool(t.Context(), "test-tool", map[string]any{})
	if err != nil {
		return err
	}
	if res.Content[0].Text != "done" {
		t.Errorf("test-tool answered %q", res.Content[0].Text)
	}
	return nil
}

func noProblems(t *testing.T, as *fakeAS) {
	t.Helper()
	for _, p := range as.problemsSeen() {
		t.Error("the authorization server saw:", p)
	}
}

func TestClientCredentialsAuthenticatedWithClientSecretBasic(t *testing.T) {
	as, m, a := secretBasic(t)
	if err := callTool(t, m, a); err != nil {
		t.Fatal(err)
	}
	noProblems(t, as)
	reqs := as.tokenRequests()
	if len(reqs) != 1 {
		t.Fatalf("%d token requests, want 1", len(reqs))
	}
	f := reqs[0].form
	if f.Get("grant_type") != "client_credentials" || f.Get("resource") != m.URL() || f.Has("client_id") {
		t.Errorf("token request %v", f)
	}
}

func TestClientCredentialsAuthenticatedWithClientSecretPost(t *testing.T) {
	as, m := setup(t, asConfig{grant: grantCC, authMethod: "client_secret_post"})
	a := newAuthorizer(t, machine.Options{ClientID: clientID, ClientSecret: clientSecret, AuthMethod: machine.AuthClientSecretPost})
	if err := callTool(t, m, a); err != nil {
		t.Fatal(err)
	}
	noProblems(t, as)
	if r := as.tokenRequests()[0]; r.header.Get("Authorization") != "" {
		t.Error("client_secret_post sent an Authorization header")
	}
}

func TestClientCredentialsAuthenticatedWithPrivateKeyJWT(t *testing.T) {
	key, pemKey := newECKey()
	as, m := setup(t, asConfig{grant: grantCC, authMethod: "private_key_jwt", publicKey: &key.PublicKey})
	signer, err := machine.ParsePrivateKeyPEM(pemKey)
	if err != nil {
		t.Fatal(err)
	}
	a := newAuthorizer(t, machine.Options{ClientID: clientID, PrivateKey: signer})
	if err := callTool(t, m, a); err != nil {
		t.Fatal(err)
	}
	// A second token (the first revoked) comes with a fresh assertion:
	// the fake refuses a jti it has seen.
	as.revoke()
	if err := callTool(t, m, a); err != nil {
		t.Fatal(err)
	}
	noProblems(t, as)
	reqs := as.tokenRequests()
	if len(reqs) != 2 {
		t.Fatalf("%d token requests, want 2", len(reqs))
	}
	if reqs[0].form.Get("client_assertion") == reqs[1].form.Get("client_assertion") {
		t.Error("the assertion was sent twice")
	}
	if reqs[0].form.Get("client_id") != clientID {
		t.Errorf("client_id %q", reqs[0].form.Get("client_id"))
	}
}

func TestParsePrivateKeyPEMRefusesWhatIsNotPKCS8(t *testing.T) {
	for _, in := range []string{"", "not pem", "-----BEGIN EC PRIVATE KEY-----\nAAAA\n-----END EC PRIVATE KEY-----\n"} {
		if _, err := machine.ParsePrivateKeyPEM([]byte(in)); !errors.Is(err, machine.ErrBadKey) {
			t.Errorf("%q: err = %v, want ErrBadKey", in, err)
		}
	}
}

func TestJWTBearerAssertionGrantForAWorkload(t *testing.T) {
	as, m := setup(t, asConfig{grant: grantJWT, authMethod: "none", assertion: "valid-workload-jwt"})
	var issuers []string
	a := newAuthorizer(t, machine.Options{
		ClientID: "conformance-wif-workload",
		Assertion: func(ctx context.Context, issuer string) (string, error) {
			issuers = append(issuers, issuer)
			return "valid-workload-jwt", nil
		},
	})
	if err := callTool(t, m, a); err != nil {
		t.Fatal(err)
	}
	noProblems(t, as)
	if len(issuers) != 1 || issuers[0] != as.URL {
		t.Errorf("the assertion source was asked for %v", issuers)
	}
	f := as.tokenRequests()[0].form
	if f.Get("grant_type") != grantJWT || f.Get("assertion") != "valid-workload-jwt" || f.Get("resource") != m.URL() {
		t.Errorf("token request %v", f)
	}
}

func TestARefusedAssertionIsNeitherRetriedNorReplacedByAnotherGrant(t *testing.T) {
	as, m := setup(t, asConfig{grant: grantJWT, authMethod: "none", assertion: "valid-workload-jwt"})
	a := newAuthorizer(t, machine.Options{
		ClientID:  "conformance-wif-workload",
		Assertion: func(context.Context, string) (string, error) { return "expired-jwt", nil },
	})
	for range 3 {
		err := callTool(t, m, a)
		if !errors.Is(err, machine.ErrTokenRefused) {
			t.Fatalf("err = %v, want ErrTokenRefused", err)
		}
		if strings.Contains(err.Error(), "own words") || !strings.Contains(err.Error(), "invalid_grant") {
			t.Errorf("the error %q should name the code, never the description", err)
		}
	}
	if n := len(as.tokenRequests()); n != 1 {
		t.Errorf("%d token requests, want 1", n)
	}
}

func TestEnterpriseManagedAuthorizationExchangesTheIDTokenForAnIDJAG(t *testing.T) {
	as, m := setup(t, asConfig{grant: grantJWT, authMethod: "client_secret_basic", assertion: "the-id-jag"})
	a := newAuthorizer(t, machine.Options{
		ClientID:     clientID,
		ClientSecret: clientSecret,
		Enterprise: &machine.Enterprise{
			TokenEndpoint: as.URL + "/idp/token",
			ClientID:      idpClientID,
			IDToken:       func(context.Context) (string, error) { return idToken, nil },
		},
	})
	if err := callTool(t, m, a); err != nil {
		t.Fatal(err)
	}
	noProblems(t, as)
	if len(as.exchange) != 1 {
		t.Fatalf("%d token exchanges, want 1", len(as.exchange))
	}
	f := as.tokenRequests()[0].form
	if f.Get("grant_type") != grantJWT || f.Get("assertion") != "the-id-jag" {
		t.Errorf("token request %v", f)
	}
}

func TestATokenIsCachedUntilShortlyBeforeItExpires(t *testing.T) {
	as, m := setup(t, asConfig{grant: grantCC, authMethod: "client_secret_basic", expiresIn: 3600})
	var offset atomic.Int64
	a := newAuthorizer(t, machine.Options{
		ClientID: clientID, ClientSecret: clientSecret,
		Now: func() time.Time { return time.Now().Add(time.Duration(offset.Load())) },
	})
	for range 2 {
		if err := callTool(t, m, a); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(as.tokenRequests()); n != 1 {
		t.Fatalf("%d token requests for two sessions, want 1", n)
	}
	offset.Store(int64(time.Hour - machine.ExpirySkew + time.Second))
	if err := callTool(t, m, a); err != nil {
		t.Fatal(err)
	}
	if n := len(as.tokenRequests()); n != 2 {
		t.Errorf("%d token requests once the token is about to expire, want 2", n)
	}
}

func TestConcurrentRefusalsShareOneTokenRequest(t *testing.T) {
	as, m, a := secretBasic(t)
	sess, err := session(t, m, a)
	if err != nil {
		t.Fatal(err)
	}
	as.revoke()
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Go(func() {
			_, err := sess.ListTools(t.Context())
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if n := len(as.tokenRequests()); n != 2 {
		t.Errorf("%d token requests, want 2 (the first, one after the revocation)", n)
	}
}

func TestPrepareObtainsATokenBeforeTheFirstRequest(t *testing.T) {
	as, m, a := secretBasic(t)
	if err := a.Prepare(t.Context(), m.URL()); err != nil {
		t.Fatal(err)
	}
	if err := callTool(t, m, a); err != nil {
		t.Fatal(err)
	}
	noProblems(t, as)
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, h := range m.seen {
		if !strings.Contains(h, " Bearer ") {
			t.Error("a request went out without a token")
		}
	}
}

func TestA403IsNotSteppedUp(t *testing.T) {
	as, m, a := secretBasic(t)
	sess, err := session(t, m, a)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sess.CallTool(t.Context(), "admin-tool", map[string]any{}); err == nil {
		t.Fatal("a call the token lacks the scope for succeeded")
	}
	if n := len(as.tokenRequests()); n != 1 {
		t.Errorf("%d token requests, want 1", n)
	}
}

func TestAGrantOrAuthenticationTheServerDoesNotListIsNotAttempted(t *testing.T) {
	for name, cfg := range map[string]asConfig{
		"grant":  {grant: grantJWT, authMethod: "client_secret_basic"},
		"method": {grant: grantCC, authMethod: "private_key_jwt"},
	} {
		t.Run(name, func(t *testing.T) {
			as, m := setup(t, cfg)
			a := newAuthorizer(t, machine.Options{ClientID: clientID, ClientSecret: clientSecret})
			if err := callTool(t, m, a); !errors.Is(err, machine.ErrUnsupported) {
				t.Errorf("err = %v, want ErrUnsupported", err)
			}
			if n := len(as.tokenRequests()); n != 0 {
				t.Errorf("%d token requests, want none", n)
			}
		})
	}
}

func TestNewRefusesIncompleteOptions(t *testing.T) {
	for name, opts := range map[string]machine.Options{
		"no client id":         {ClientSecret: "s"},
		"no authentication":    {ClientID: "c"},
		"basic without secret": {ClientID: "c", AuthMethod: machine.AuthClientSecretBasic},
		"jwt without key":      {ClientID: "c", AuthMethod: machine.AuthPrivateKeyJWT},
		"unknown method":       {ClientID: "c", ClientSecret: "s", AuthMethod: "tls_client_auth"},
		"enterprise half-set":  {ClientID: "c", ClientSecret: "s", Enterprise: &machine.Enterprise{ClientID: "i"}},
	} {
		if _, err := machine.New(opts); err == nil {
			t.Errorf("%s: New accepted %+v", name, opts)
		}
	}
}

// dpopCall calls test-tool as a client_secret_basic client with a DPoP
// key, through servers that check proofs (and demand nonces).
func dpopCall(t *testing.T, nonces bool) (*fakeAS, *fakeMCP) {
	t.Helper()
	as, m := setup(t, asConfig{grant: grantCC, authMethod: "client_secret_basic", dpop: true, nonces: nonces})
	key, err := dpop.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	a := newAuthorizer(t, machine.Options{ClientID: clientID, ClientSecret: clientSecret, DPoP: key})
	if err := callTool(t, m, a); err != nil {
		t.Fatal(err)
	}
	noProblems(t, as)
	return as, m
}

func TestDPoPBindsTheTokenAndProvesEveryRequest(t *testing.T) {
	as, m := dpopCall(t, false)
	if n := len(as.tokenRequests()); n != 1 {
		t.Errorf("%d token requests, want 1", n)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	// initialize, tools/list, tools/call at least; the fake refused any
	// jti seen before and any proof without the token's ath.
	if len(m.proofs) < 3 {
		t.Errorf("%d proven MCP requests, want at least 3", len(m.proofs))
	}
	for _, h := range m.seen[1:] {
		if !strings.Contains(h, " DPoP ") {
			t.Errorf("Authorization %q, want the DPoP scheme", h)
		}
	}
}

func TestDPoPNoncesAreFollowedWithoutANewToken(t *testing.T) {
	as, m := dpopCall(t, true)
	// The AS's use_dpop_nonce, then the token.
	if n := len(as.tokenRequests()); n != 2 {
		t.Errorf("%d token requests, want 2", n)
	}
	as.mu.Lock()
	minted := as.n
	as.mu.Unlock()
	if minted != 1 {
		t.Errorf("%d tokens minted, want 1: an RS nonce is no reason for a new token", minted)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, c := range m.proofs {
		if c.Nonce != rsNonce {
			t.Errorf("an accepted proof with nonce %q", c.Nonce)
		}
	}
}
