package main

import (
	"context"
	"fmt"
	"net/http"
	"net/url"

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
