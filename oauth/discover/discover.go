package discover

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/agentwire/agentwire/mcp/auth"
)

// MaxDocumentBytes bounds a metadata document.
const MaxDocumentBytes = 1 << 20

var (
	// ErrResourceMismatch: the protected resource metadata speaks for
	// another resource than the server it was found for.
	ErrResourceMismatch = errors.New("discover: the protected resource metadata is for another resource")
	// ErrNoMetadata: none of the URLs tried had a document.
	ErrNoMetadata = errors.New("discover: no metadata document found")
	// ErrIssuerMismatch: an authorization server's metadata names another
	// issuer than the one it was looked up for.
	ErrIssuerMismatch = errors.New("discover: the authorization server metadata names another issuer")
	// ErrNoPKCE: the authorization server does not advertise PKCE with
	// S256.
	ErrNoPKCE = errors.New("discover: the authorization server does not advertise PKCE with S256")
	// ErrUnsafeURL: a URL that is neither https nor http on a loopback
	// host.
	ErrUnsafeURL = errors.New("discover: refusing a URL that is neither https nor loopback http")
)

// ServerMetadata is what an OAuth client reads of an authorization
// server's metadata (RFC 8414 §2; the OpenID Connect discovery document
// has the same members).
type ServerMetadata struct {
	Issuer                                     string   `json:"issuer"`
	AuthorizationEndpoint                      string   `json:"authorization_endpoint,omitempty"`
	TokenEndpoint                              string   `json:"token_endpoint,omitempty"`
	RegistrationEndpoint                       string   `json:"registration_endpoint,omitempty"`
	JWKSURI                                    string   `json:"jwks_uri,omitempty"`
	IntrospectionEndpoint                      string   `json:"introspection_endpoint,omitempty"`
	ScopesSupported                            []string `json:"scopes_supported,omitempty"`
	ResponseTypesSupported                     []string `json:"response_types_supported,omitempty"`
	GrantTypesSupported                        []string `json:"grant_types_supported,omitempty"`
	TokenEndpointAuthMethodsSupported          []string `json:"token_endpoint_auth_methods_supported,omitempty"`
	TokenEndpointAuthSigningAlgValuesSupported []string `json:"token_endpoint_auth_signing_alg_values_supported,omitempty"`
	CodeChallengeMethodsSupported              []string `json:"code_challenge_methods_supported,omitempty"`
	DPoPSigningAlgValuesSupported              []string `json:"dpop_signing_alg_values_supported,omitempty"`
	// AuthorizationResponseIssParameterSupported says the server puts
	// iss in its authorization responses (RFC 9207).
	AuthorizationResponseIssParameterSupported bool `json:"authorization_response_iss_parameter_supported,omitempty"`
	// ClientIDMetadataDocumentSupported says the server takes an https
	// URL of a client metadata document as a client_id.
	ClientIDMetadataDocumentSupported bool `json:"client_id_metadata_document_supported,omitempty"`
}

// ProtectedResourceURLs returns the well-known URLs of serverURL's
// protected resource metadata, in the order they are tried when no
// challenge names one: the one built from the server's path, then the
// one at the root of its origin.
func ProtectedResourceURLs(serverURL string) ([]string, error) {
	u, err := parseSafe(serverURL)
	if err != nil {
		return nil, err
	}
	base := u.Scheme + "://" + u.Host + "/.well-known/oauth-protected-resource"
	path := strings.TrimSuffix(u.EscapedPath(), "/")
	if path == "" {
		return []string{base}, nil
	}
	return []string{base + path, base}, nil
}

// ProtectedResource fetches the protected resource metadata of the MCP
// server at serverURL: from metadataURL (the resource_metadata of the
// server's challenge) when it is not empty, else from the well-known URLs
// in order. The document's resource must be the server (see the package
// documentation); it must name an authorization server.
func ProtectedResource(ctx context.Context, c *http.Client, serverURL, metadataURL string) (*auth.ProtectedResourceMetadata, error) {
	urls := []string{metadataURL}
	if metadataURL == "" {
		var err error
		if urls, err = ProtectedResourceURLs(serverURL); err != nil {
			return nil, err
		}
	}
	var md auth.ProtectedResourceMetadata
	found, err := first(ctx, c, urls, &md)
	if err != nil {
		return nil, err
	}
	if !ResourceCovers(md.Resource, serverURL) {
		return nil, fmt.Errorf("%w: %q (from %s) does not cover %q", ErrResourceMismatch, md.Resource, found, serverURL)
	}
	if len(md.AuthorizationServers) == 0 {
		return nil, fmt.Errorf("discover: the protected resource metadata at %s names no authorization server", found)
	}
	return &md, nil
}

// ResourceCovers reports whether resource, a protected resource
// metadata document's resource, speaks for the server at serverURL: the
// same scheme and host (and port), and a path that is the server's or one
// of its parents at a segment boundary.
func ResourceCovers(resource, serverURL string) bool {
	r, err := url.Parse(resource)
	if err != nil || r.Fragment != "" || r.RawQuery != "" {
		return false
	}
	s, err := url.Parse(serverURL)
	if err != nil {
		return false
	}
	if !strings.EqualFold(r.Scheme, s.Scheme) || !strings.EqualFold(r.Host, s.Host) {
		return false
	}
	rp := strings.TrimSuffix(r.EscapedPath(), "/")
	sp := strings.TrimSuffix(s.EscapedPath(), "/")
	return rp == "" || rp == sp || strings.HasPrefix(sp, rp+"/")
}

// AuthorizationServerURLs returns the metadata URLs of issuer in the order
// they are tried: for an issuer with a path, RFC 8414's (the well-known
// segment before the path), OpenID Connect's the same way, then OpenID
// Connect's after the path; for one without, RFC 8414's and then OpenID
// Connect's.
func AuthorizationServerURLs(issuer string) ([]string, error) {
	u, err := parseSafe(issuer)
	if err != nil {
		return nil, err
	}
	origin := u.Scheme + "://" + u.Host
	path := strings.TrimSuffix(u.EscapedPath(), "/")
	if path == "" {
		return []string{origin + "/.well-known/oauth-authorization-server", origin + "/.well-known/openid-configuration"}, nil
	}
	return []string{
		origin + "/.well-known/oauth-authorization-server" + path,
		origin + "/.well-known/openid-configuration" + path,
		origin + path + "/.well-known/openid-configuration",
	}, nil
}

// AuthorizationServer fetches the metadata of issuer, for the
// authorization code flow: it checks that it names issuer exactly
// (ServerMetadataOf) and that it advertises PKCE with S256.
func AuthorizationServer(ctx context.Context, c *http.Client, issuer string) (*ServerMetadata, error) {
	md, err := ServerMetadataOf(ctx, c, issuer)
	if err != nil {
		return nil, err
	}
	if !slices.Contains(md.CodeChallengeMethodsSupported, "S256") {
		return nil, fmt.Errorf("%w (%s)", ErrNoPKCE, issuer)
	}
	return md, nil
}

// ServerMetadataOf fetches the metadata of issuer and checks that it names
// issuer exactly and that its endpoints may be fetched, without asking for
// PKCE: for the grants that have no authorization request (client
// credentials, JWT bearer), where PKCE does not apply.
func ServerMetadataOf(ctx context.Context, c *http.Client, issuer string) (*ServerMetadata, error) {
	urls, err := AuthorizationServerURLs(issuer)
	if err != nil {
		return nil, err
	}
	var md ServerMetadata
	found, err := first(ctx, c, urls, &md)
	if err != nil {
		return nil, err
	}
	if md.Issuer != issuer {
		return nil, fmt.Errorf("%w: %s says %q, looked up for %q", ErrIssuerMismatch, found, md.Issuer, issuer)
	}
	for _, e := range []string{md.AuthorizationEndpoint, md.TokenEndpoint, md.RegistrationEndpoint} {
		if e == "" {
			continue
		}
		if _, err := parseSafe(e); err != nil {
			return nil, fmt.Errorf("discover: %s names endpoint %q: %w", found, e, err)
		}
	}
	return &md, nil
}

// first fetches the first of urls that has a document and decodes it
// into v. A 4xx moves on; anything else ends the search with an error.
func first(ctx context.Context, c *http.Client, urls []string, v any) (string, error) {
	if c == nil {
		c = http.DefaultClient
	}
	// Redirects are not followed: the document is the one at the URL its
	// server or issuer named.
	noRedirects := *c
	noRedirects.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	var tried []string
	for _, u := range urls {
		if _, err := parseSafe(u); err != nil {
			return "", err
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		if err != nil {
			return "", err
		}
		req.Header.Set("Accept", "application/json")
		resp, err := noRedirects.Do(req)
		if err != nil {
			return "", fmt.Errorf("discover: fetching %s: %w", u, err)
		}
		body, err := io.ReadAll(io.LimitReader(resp.Body, MaxDocumentBytes+1))
		resp.Body.Close()
		switch {
		case resp.StatusCode >= 400 && resp.StatusCode < 500:
			tried = append(tried, fmt.Sprintf("%s: %d", u, resp.StatusCode))
			continue
		case resp.StatusCode != http.StatusOK:
			return "", fmt.Errorf("discover: fetching %s: HTTP %d", u, resp.StatusCode)
		case err != nil:
			return "", fmt.Errorf("discover: reading %s: %w", u, err)
		case len(body) > MaxDocumentBytes:
			return "", fmt.Errorf("discover: %s is over %d bytes", u, MaxDocumentBytes)
		}
		if err := json.Unmarshal(body, v); err != nil {
			return "", fmt.Errorf("discover: %s is not a metadata document: %w", u, err)
		}
		return u, nil
	}
	return "", fmt.Errorf("%w (tried %s)", ErrNoMetadata, strings.Join(tried, ", "))
}

// parseSafe parses a URL that may be fetched: https, or http on a
// loopback host.
func parseSafe(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("discover: %q: %w", raw, err)
	}
	switch {
	case u.Scheme == "https" && u.Host != "":
		return u, nil
	case u.Scheme == "http" && isLoopback(u.Hostname()):
		return u, nil
	}
	return nil, fmt.Errorf("%w: %q", ErrUnsafeURL, raw)
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
