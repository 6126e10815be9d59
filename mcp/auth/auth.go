package auth

import (
	"context"
	"errors"
	"slices"
	"time"
)

// ErrInvalidToken is wrapped by a Verifier's error for a token that is not
// valid for this server: malformed, expired or not yet valid, signed by an
// unknown key, issued by another issuer or for another audience, revoked.
// The request gets 401 with error="invalid_token". The error's text is
// logged, never sent to the client.
var ErrInvalidToken = errors.New("auth: invalid token")

// A Verifier checks an access token presented to this server. It is
// called concurrently, on each request's goroutine, and must bound its
// own waiting (ctx is the request's).
type Verifier interface {
	// Verify returns who the token belongs to. An error wrapping
	// ErrInvalidToken refuses the token (401); any other error is the
	// verifier's own failure (503).
	Verify(ctx context.Context, token string) (*Identity, error)
}

// VerifierFunc adapts a function to Verifier.
type VerifierFunc func(ctx context.Context, token string) (*Identity, error)

// Verify calls f.
func (f VerifierFunc) Verify(ctx context.Context, token string) (*Identity, error) {
	return f(ctx, token)
}

// Identity is what a verified access token says of its holder.
type Identity struct {
	Subject  string   // the resource owner ("sub"); empty for a client acting for itself
	ClientID string   // the OAuth client ("client_id", or "azp")
	Issuer   string   // the authorization server that issued the token ("iss")
	Audience []string // the resources the token is for ("aud")
	Scopes   []string // the scopes granted ("scope", split)
	// Expiry is when the token stops being valid; zero when it does not
	// say.
	Expiry time.Time
	// Claims holds everything the verifier read (a JWT's claims, an
	// introspection answer), for handlers that need more.
	Claims map[string]any
}

// Owner is the key of what belongs to this identity (a task, a session):
// the issuer, then the subject, or the client for a client acting for
// itself, so that two issuers' subjects never collide. "" for nil (no
// verified identity: one principal).
func (id *Identity) Owner() string {
	if id == nil {
		return ""
	}
	who := id.Subject
	if who == "" {
		who = "client:" + id.ClientID
	}
	return id.Issuer + "\x00" + who
}

// HasScopes reports whether every one of want was granted.
func (id *Identity) HasScopes(want ...string) bool {
	if id == nil {
		return len(want) == 0
	}
	for _, s := range want {
		if !slices.Contains(id.Scopes, s) {
			return false
		}
	}
	return true
}

// Missing returns the scopes of want that were not granted, in want's
// order.
func (id *Identity) Missing(want []string) []string {
	var out []string
	for _, s := range want {
		if id == nil || !slices.Contains(id.Scopes, s) {
			out = append(out, s)
		}
	}
	return out
}

type identityKey struct{}

// WithIdentity returns a context carrying id, for the handlers of a
// verified request.
func WithIdentity(ctx context.Context, id *Identity) context.Context {
	return context.WithValue(ctx, identityKey{}, id)
}

// IdentityFrom returns the verified identity of the request whose context
// ctx is (or derives from), or nil when the request was not authenticated.
func IdentityFrom(ctx context.Context) *Identity {
	id, _ := ctx.Value(identityKey{}).(*Identity)
	return id
}

// ProtectedResourceMetadata is the protected resource metadata document of
// RFC 9728 §2, which a protected MCP server publishes at
// /.well-known/oauth-protected-resource followed by its path. Resource is
// required: the server's canonical URL, the audience its tokens must be
// issued for (RFC 8707).
type ProtectedResourceMetadata struct {
	Resource                          string   `json:"resource"`
	AuthorizationServers              []string `json:"authorization_servers,omitempty"`
	ScopesSupported                   []string `json:"scopes_supported,omitempty"`
	BearerMethodsSupported            []string `json:"bearer_methods_supported,omitempty"`
	ResourceName                      string   `json:"resource_name,omitempty"`
	ResourceDocumentation             string   `json:"resource_documentation,omitempty"`
	DPoPSigningAlgValuesSupported     []string `json:"dpop_signing_alg_values_supported,omitempty"`
	DPoPBoundAccessTokensRequired     bool     `json:"dpop_bound_access_tokens_required,omitempty"`
	AuthorizationDetailsTypes         []string `json:"authorization_details_types_supported,omitempty"`
	TLSClientCertificateBoundTokens   bool     `json:"tls_client_certificate_bound_access_tokens,omitempty"`
	ResourceSigningAlgValuesSupported []string `json:"resource_signing_alg_values_supported,omitempty"`
}

// ValidScope reports whether s is a scope token (RFC 6749 §3.3): one or
// more printable ASCII characters other than space, '"' and '\'.
func ValidScope(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c > '~' || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}
