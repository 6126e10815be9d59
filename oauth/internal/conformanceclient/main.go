// Command conformanceclient runs the OAuth client scenarios (auth/*) of
// the official MCP conformance suite with agentwire's MCP client over
// Streamable HTTP, authorized by package authcode (the extensions for a
// client acting for itself by package machine):
//
//	conformance client --command "conformanceclient" --scenario auth/metadata-default
//
// The suite passes the scenario server's URL as the last argument, the
// scenario in MCP_CONFORMANCE_SCENARIO, the protocol version in
// MCP_CONFORMANCE_PROTOCOL_VERSION and scenario data (pre-registered
// credentials, client credentials, keys and assertions) in
// MCP_CONFORMANCE_CONTEXT. Its authorization server
// approves at once, answering the authorization request with a redirect
// to the callback; the user agent here requests the authorization URL and
// returns where that redirect points. Each scenario is the ordinary use of
// the client API a host would make: connect, list the tools, call
// test-tool. The scenarios that a client must refuse end with an error,
// and a non-zero exit.
//
// The non-OAuth scenarios are run by interop/conformanceclient in the
// main module, which does not depend on this one.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/agentwire/agentwire/mcp"
	"github.com/agentwire/agentwire/mcp/host"
	"github.com/agentwire/agentwire/mcp/streamable"
	"github.com/agentwire/agentwire/oauth/authcode"
	"github.com/agentwire/agentwire/oauth/dpop"
	"github.com/agentwire/agentwire/oauth/machine"
)

// The redirect URI and client ID metadata document URL the suite expects.
const (
	redirectURL         = "http://localhost:3000/callback"
	clientIDMetadataURL = "https://conformance-test.local/client-metadata.json"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "conformanceclient:", err)
		os.Exit(1)
	}
}

func run() error {
	if len(os.Args) < 2 {
		return fmt.Errorf("usage: conformanceclient URL")
	}
	serverURL := os.Args[len(os.Args)-1]
	scenario := os.Getenv("MCP_CONFORMANCE_SCENARIO")
	version := os.Getenv("MCP_CONFORMANCE_PROTOCOL_VERSION")
	if !strings.HasPrefix(scenario, "auth/") {
		return fmt.Errorf("unknown scenario %q (this client runs the auth/* ones)", scenario)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Second)
	defer cancel()

	var sc scenarioContext
	if raw := os.Getenv("MCP_CONFORMANCE_CONTEXT"); raw != "" {
		if err := json.Unmarshal([]byte(raw), &sc); err != nil {
			return fmt.Errorf("MCP_CONFORMANCE_CONTEXT: %w", err)
		}
	}
	authorizer, err := newAuthorizer(scenario, sc)
	if err != nil {
		return err
	}

	opts := &host.Options{
		Info: mcp.Implementation{Name: "agentwire-conformance-client", Version: "1.0.0"},
		Eras: mcp.LegacyOnly,
	}
	switch {
	case mcp.IsModern(version):
		opts.Eras = mcp.ModernOnly
	case version != "":
		opts.LegacyVersion = version
	}
	sess, err := streamable.Connect(ctx, serverURL, opts, &streamable.ClientOptions{Authorizer: authorizer})
	if err != nil {
		return err
	}
	defer sess.Close()
	if _, err := sess.ListTools(ctx); err != nil {
		return err
	}
	_, err = sess.CallTool(ctx, "test-tool", map[string]any{})
	return err
}

// scenarioContext is the scenario data of MCP_CONFORMANCE_CONTEXT: the
// client's pre-registered credentials, and those of the extensions.
type scenarioContext struct {
	ClientID     string `json:"client_id"`
	ClientSecret string `json:"client_secret"`
	Issuer       string `json:"issuer"`
	// auth/client-credentials-jwt: the private_key_jwt key (the
	// assertion's algorithm follows from it: ES256 for the suite's P-256
	// key, the signing_algorithm it names).
	PrivateKeyPEM string `json:"private_key_pem"`
	// auth/wif-jwt-bearer: the workload's identity token.
	ValidJWT string `json:"valid_jwt"`
	// auth/enterprise-managed-authorization: the enterprise identity
	// provider and the user's ID token there.
	IDPClientID      string `json:"idp_client_id"`
	IDPIDToken       string `json:"idp_id_token"`
	IDPIssuer        string `json:"idp_issuer"`
	IDPTokenEndpoint string `json:"idp_token_endpoint"`
}

// newAuthorizer is the Authorizer of a scenario: package machine for a
// client acting for itself (client credentials, a workload's or an
// enterprise's assertion), package authcode for a user's authorization,
// with DPoP-bound tokens in the DPoP scenarios.
func newAuthorizer(scenario string, sc scenarioContext) (streamable.Authorizer, error) {
	switch scenario {
	case "auth/client-credentials-basic":
		return machine.New(machine.Options{ClientID: sc.ClientID, ClientSecret: sc.ClientSecret, AuthMethod: machine.AuthClientSecretBasic})
	case "auth/client-credentials-jwt":
		key, err := machine.ParsePrivateKeyPEM([]byte(sc.PrivateKeyPEM))
		if err != nil {
			return nil, err
		}
		return machine.New(machine.Options{ClientID: sc.ClientID, PrivateKey: key, AuthMethod: machine.AuthPrivateKeyJWT})
	case "auth/wif-jwt-bearer":
		return machine.New(machine.Options{
			ClientID:   sc.ClientID,
			AuthMethod: machine.AuthNone,
			Assertion:  func(context.Context, string) (string, error) { return sc.ValidJWT, nil },
		})
	case "auth/enterprise-managed-authorization":
		return machine.New(machine.Options{
			ClientID:     sc.ClientID,
			ClientSecret: sc.ClientSecret,
			AuthMethod:   machine.AuthClientSecretBasic,
			Enterprise: &machine.Enterprise{
				TokenEndpoint: sc.IDPTokenEndpoint,
				ClientID:      sc.IDPClientID,
				IDToken:       func(context.Context) (string, error) { return sc.IDPIDToken, nil },
			},
		})
	}
	aopts := authcode.Options{
		RedirectURL:         redirectURL,
		Redirect:            userAgent,
		ClientIDMetadataURL: clientIDMetadataURL,
		Registration:        &authcode.Registration{ClientName: "test-auth-client"},
		RequestRefreshToken: true,
	}
	if sc.ClientID != "" && sc.Issuer != "" {
		aopts.Preregistered = map[string]authcode.Credentials{sc.Issuer: {
			ClientID:     sc.ClientID,
			ClientSecret: sc.ClientSecret,
			AuthMethod:   authcode.AuthClientSecretBasic,
		}}
	}
	if scenario == "auth/dpop" || scenario == "auth/dpop-nonce" {
		key, err := dpop.New(nil)
		if err != nil {
			return nil, err
		}
		aopts.DPoP = key
	}
	return authcode.New(aopts)
}

// userAgent is a user who approves at once: it requests the
// authorization URL without following the redirect and returns where it
// points, as it is.
func userAgent(ctx context.Context, authURL string) (*url.URL, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, authURL, nil)
	if err != nil {
		return nil, err
	}
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noFollow.Do(req)
	if err != nil {
		return nil, err
	}
	resp.Body.Close()
	if resp.StatusCode < 300 || resp.StatusCode > 399 {
		return nil, fmt.Errorf("the authorization server answered %s, not a redirect", resp.Status)
	}
	return resp.Location()
}
