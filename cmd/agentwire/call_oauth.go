package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"time"

	"github.com/agentwire/agentwire/mcp/streamable"
	"github.com/agentwire/agentwire/oauth/authcode"
	"github.com/agentwire/agentwire/oauth/resource"
)

// DefaultOAuthTimeout is how long call --oauth and check --oauth wait for
// the user to authorize.
const DefaultOAuthTimeout = 5 * time.Minute

// clientOAuthFlags are the OAuth client flags of call and check, which
// go with --url.
type clientOAuthFlags struct {
	use         *bool
	timeout     *time.Duration
	metadataURL *string
	clientID    *string
	issuer      *string
	clientAuth  *string
	secret      string // of the pre-registered client, from $OAuthClientSecretEnv
}

// clientOAuthFlagNames are the flags of clientOAuthFlags but --oauth.
var clientOAuthFlagNames = []string{"oauth-timeout", "oauth-client-metadata-url", "oauth-client-id", "oauth-issuer", "oauth-client-auth"}

func addClientOAuthFlags(fs *flag.FlagSet) *clientOAuthFlags {
	return &clientOAuthFlags{
		use:         fs.Bool("oauth", false, "with --url: obtain a token from the server's OAuth authorization server, asking you to authorize in a browser (the URL is printed on stderr); tokens are kept in the user's config directory"),
		timeout:     fs.Duration("oauth-timeout", DefaultOAuthTimeout, "with --oauth: how long to wait for you to authorize"),
		metadataURL: fs.String("oauth-client-metadata-url", "", "with --oauth: the https URL of a client ID metadata document to use as the client_id where the authorization server takes one"),
		clientID:    fs.String("oauth-client-id", "", "with --oauth and --oauth-issuer: a client ID registered beforehand at that authorization server (its secret, if any, in $"+OAuthClientSecretEnv+")"),
		issuer:      fs.String("oauth-issuer", "", "with --oauth-client-id: the issuer identifier of the authorization server the client ID is registered at; the credentials are sent to no other"),
		clientAuth:  fs.String("oauth-client-auth", "", "with --oauth-client-id: client_secret_basic, client_secret_post or none (default client_secret_basic with a secret, none without)"),
	}
}

// validate checks the flags against each other and --url and --token
// (set says which are on the command line), and takes the pre-registered
// client's secret from the environment. With --url the variable is
// removed from the environment, read or not, so that nothing started (a
// browser) inherits it.
func (f *clientOAuthFlags) validate(set map[string]bool, url string) error {
	var secret string
	if url != "" { // else a server is started, whose environment it is
		secret = os.Getenv(OAuthClientSecretEnv)
		os.Unsetenv(OAuthClientSecretEnv)
	}
	given := false
	for _, name := range clientOAuthFlagNames {
		given = given || set[name]
	}
	switch {
	case (*f.use || given) && url == "":
		return errors.New("--oauth and the --oauth-* flags go with --url")
	case !*f.use && given:
		return errors.New("--oauth-timeout, --oauth-client-metadata-url, --oauth-client-id, --oauth-issuer and --oauth-client-auth go with --oauth")
	case *f.use && set["token"]:
		return errors.New("--token and --oauth exclude each other")
	case *f.timeout <= 0:
		return errors.New("--oauth-timeout must be positive")
	case set["oauth-client-id"] && *f.clientID == "":
		return errors.New("--oauth-client-id is empty")
	case *f.clientID != "" && *f.issuer == "":
		return errors.New("--oauth-client-id needs --oauth-issuer: the authorization server the client is registered at, the only one its credentials are sent to")
	case *f.clientID == "" && (set["oauth-issuer"] || set["oauth-client-auth"]):
		return errors.New("--oauth-issuer and --oauth-client-auth go with --oauth-client-id")
	}
	if *f.clientID == "" {
		return nil
	}
	if _, err := resource.MetadataURLs(*f.issuer); err != nil {
		return fmt.Errorf("--oauth-issuer %q: %v", *f.issuer, err)
	}
	switch *f.clientAuth {
	case "", authcode.AuthNone:
		if *f.clientAuth == authcode.AuthNone && secret != "" {
			return fmt.Errorf("--oauth-client-auth none sends no secret, but $%s holds one: unset it, or choose client_secret_basic or client_secret_post", OAuthClientSecretEnv)
		}
	case authcode.AuthClientSecretBasic, authcode.AuthClientSecretPost:
		if secret == "" {
			return fmt.Errorf("--oauth-client-auth %s needs the client's secret in $%s (never on the command line)", *f.clientAuth, OAuthClientSecretEnv)
		}
	default:
		return fmt.Errorf("bad --oauth-client-auth %q (client_secret_basic, client_secret_post or none)", *f.clientAuth)
	}
	f.secret = secret
	return nil
}

// start makes the OAuth client and has it authorize its requests to
// serverURL (see oauthClient.authorize) within --oauth-timeout. The
// caller closes the client once done with the server.
func (f *clientOAuthFlags) start(ctx context.Context, command string, stderr io.Writer, serverURL string) (*oauthClient, error) {
	opts := authcode.Options{
		ClientIDMetadataURL: *f.metadataURL,
		Registration:        &authcode.Registration{ClientName: "agentwire"},
	}
	if *f.clientID != "" {
		opts.Preregistered = map[string]authcode.Credentials{
			*f.issuer: {ClientID: *f.clientID, ClientSecret: f.secret, AuthMethod: *f.clientAuth},
		}
	}
	oc, err := newOAuthClient(stderr, command, opts)
	if err != nil {
		return nil, err
	}
	actx, cancel := context.WithTimeout(ctx, *f.timeout)
	defer cancel()
	if err := oc.authorize(actx, serverURL); err != nil {
		oc.close()
		return nil, err
	}
	return oc, nil
}

// oauthClient is call or check --url --oauth: an authcode.Authorizer whose user
// agent is the user, sent to the authorization URL (printed on stderr, and
// opened in a browser where one is at hand), and a loopback listener on
// 127.0.0.1 that receives the redirect (RFC 8252 §7.3). Tokens are kept
// in a fileTokenStore.
type oauthClient struct {
	authorizer *authcode.Authorizer
	command    string // for the messages
	stderr     io.Writer
	ln         net.Listener
	srv        *http.Server
	callbacks  chan *url.URL
	prompts    atomic.Int32 // how many times the user was sent to authorize
}

// newOAuthClient makes the client of opts, with the user agent, the
// redirect URL and the store set here.
func newOAuthClient(stderr io.Writer, command string, opts authcode.Options) (*oauthClient, error) {
	store, err := newFileTokenStore()
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("the redirect listener: %v", err)
	}
	redirect := "http://" + ln.Addr().String() + "/callback"
	oc := &oauthClient{command: command, stderr: stderr, ln: ln, callbacks: make(chan *url.URL, 1)}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /callback", func(w http.ResponseWriter, r *http.Request) {
		u, _ := url.Parse(redirect)
		u.RawQuery = r.URL.RawQuery
		select {
		case oc.callbacks <- u:
		default: // one is waiting to be read already
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintln(w, "agentwire: the authorization response was received; you may close this window.")
	})
	oc.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go oc.srv.Serve(ln)
	opts.RedirectURL, opts.Redirect, opts.RequestRefreshToken, opts.Store = redirect, oc.redirect, true, store
	oc.authorizer, err = authcode.New(opts)
	if err != nil {
		oc.close()
		return nil, err
	}
	return oc, nil
}

func (oc *oauthClient) close() { oc.srv.Close() }

// redirect is the user agent: it shows authURL and waits for the
// authorization server to redirect the browser to the listener.
func (oc *oauthClient) redirect(ctx context.Context, authURL string) (*url.URL, error) {
	select { // a stale response of an earlier authorization
	case <-oc.callbacks:
	default:
	}
	oc.prompts.Add(1)
	fmt.Fprintf(oc.stderr, "agentwire %s: to authorize, open this URL in a browser:\n  %s\n", oc.command, authURL)
	if isTerminal(os.Stderr) {
		openBrowser(authURL)
	}
	select {
	case u := <-oc.callbacks:
		return u, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("no authorization response: %w", context.Cause(ctx))
	}
}

// openBrowser opens u in the user's browser where there is one, quietly
// doing nothing elsewhere: the URL is on stderr either way.
func openBrowser(u string) {
	var cmd *exec.Cmd
	switch runtime.GOOS {
	case "darwin":
		cmd = exec.Command("open", u)
	case "windows":
		cmd = exec.Command("rundll32", "url.dll,FileProtocolHandler", u)
	default:
		if os.Getenv("DISPLAY") == "" && os.Getenv("WAYLAND_DISPLAY") == "" {
			return
		}
		if _, err := exec.LookPath("xdg-open"); err != nil {
			return
		}
		cmd = exec.Command("xdg-open", u)
	}
	if cmd.Start() == nil {
		go cmd.Wait()
	}
}

// authorize sends the server a request before the MCP session starts, so
// that a 401 is answered (a stored token, a refresh, or the user's
// authorization) under the --oauth-timeout rather than the probe's: the
// session's requests then carry the token. Anything but a refusal is left
// for the session to report.
func (oc *oauthClient) authorize(ctx context.Context, serverURL string) error {
	for range streamable.MaxAuthAttempts {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, serverURL, strings.NewReader(`{"jsonrpc":"2.0","id":0,"method":"ping"}`))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if err := oc.authorizer.Authorize(req); err != nil {
			return err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return nil
		}
		io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized && resp.StatusCode != http.StatusForbidden {
			return nil
		}
		retry, err := oc.authorizer.Refused(ctx, req, resp)
		if err != nil || !retry {
			return err
		}
	}
	return nil
}

// fileTokenStore is an authcode.TokenStore in the user's configuration
// directory (os.UserConfigDir()/agentwire/oauth, mode 0700): one file per
// issuer and resource, mode 0600, replaced atomically.
type fileTokenStore struct{ dir string }

// storedToken is a token file: the key it was stored under, checked on
// reading, and the token.
type storedToken struct {
	Issuer   string         `json:"issuer"`
	Resource string         `json:"resource"`
	Token    authcode.Token `json:"token"`
}

func newFileTokenStore() (*fileTokenStore, error) {
	base, err := os.UserConfigDir()
	if err != nil {
		return nil, fmt.Errorf("the token store: %v", err)
	}
	dir := filepath.Join(base, "agentwire", "oauth")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("the token store: %v", err)
	}
	// MkdirAll leaves an existing directory as it is.
	if err := os.Chmod(dir, 0o700); err != nil {
		return nil, fmt.Errorf("the token store: %v", err)
	}
	return &fileTokenStore{dir: dir}, nil
}

// path is k's file: a hash of the issuer and resource, so that any URL
// makes a file name.
func (s *fileTokenStore) path(k authcode.Key) string {
	sum := sha256.Sum256([]byte(k.Issuer + "\x00" + k.Resource))
	return filepath.Join(s.dir, hex.EncodeToString(sum[:16])+".json")
}

func (s *fileTokenStore) Get(_ context.Context, k authcode.Key) (*authcode.Token, error) {
	b, err := os.ReadFile(s.path(k))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var st storedToken
	if json.Unmarshal(b, &st) != nil || st.Issuer != k.Issuer || st.Resource != k.Resource {
		return nil, nil // not this key's: authorize anew, and replace it
	}
	return &st.Token, nil
}

func (s *fileTokenStore) Put(_ context.Context, k authcode.Key, t *authcode.Token) error {
	b, err := json.Marshal(storedToken{Issuer: k.Issuer, Resource: k.Resource, Token: *t})
	if err != nil {
		return err
	}
	f, err := os.CreateTemp(s.dir, ".token-*") // mode 0600
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, s.path(k))
	}
	if err != nil {
		os.Remove(tmp)
	}
	return err
}
