package main

import (
	"errors"
	"flag"
	"fmt"
	"net/url"
	"os"

	"github.com/agentwire/agentwire/mcp/auth"
	"github.com/agentwire/agentwire/mcp/streamable"
	"github.com/agentwire/agentwire/oauth/resource"
)

// The environment variables the introspection verifier takes this
// resource server's credentials at the authorization server from: a
// secret never goes on the command line, where every local user can read
// it.
const (
	OAuthClientIDEnv     = "AGENTWIRE_OAUTH_CLIENT_ID"
	OAuthClientSecretEnv = "AGENTWIRE_OAUTH_CLIENT_SECRET"
)

// oauthFlags are the resource-server flags of the commands that serve
// Streamable HTTP.
type oauthFlags struct {
	issuer, resource, introspect *string
	scopes                       listFlag
}

func addOAuthFlags(fs *flag.FlagSet) *oauthFlags {
	f := &oauthFlags{
		issuer:     fs.String("oauth-issuer", "", "accept OAuth access tokens of this authorization server (its issuer identifier; JWTs verified against its JWKS, found through its metadata)"),
		resource:   fs.String("oauth-resource", "", "with --oauth-issuer: this server's canonical URL, the audience tokens must carry and the resource of its metadata document"),
		introspect: fs.String("oauth-introspect", "", "with --oauth-issuer: verify tokens at this introspection endpoint (RFC 7662) instead of the JWKS, as the client $"+OAuthClientIDEnv+" with the secret $"+OAuthClientSecretEnv),
	}
	fs.Var(&f.scopes, "oauth-scope", "with --oauth-issuer: a scope every request's token needs (repeatable)")
	return f
}

// oauthFlagNames are the flags of oauthFlags.
var oauthFlagNames = []string{"oauth-issuer", "oauth-resource", "oauth-introspect", "oauth-scope"}

// protection builds the endpoint's Options.Protect from the flags, nil
// when none is given. set says which flags are on the command line. The
// credentials' variables are removed from the environment, read or not,
// so that the servers a bridge starts never inherit them.
func (f *oauthFlags) protection(set map[string]bool) (*streamable.Protection, error) {
	clientID, idSet := os.LookupEnv(OAuthClientIDEnv)
	secret, secretSet := os.LookupEnv(OAuthClientSecretEnv)
	os.Unsetenv(OAuthClientIDEnv)
	os.Unsetenv(OAuthClientSecretEnv)
	given := false
	for _, name := range oauthFlagNames {
		given = given || set[name]
	}
	if !given {
		return nil, nil
	}
	switch {
	case *f.issuer == "":
		return nil, errors.New("--oauth-resource, --oauth-introspect and --oauth-scope need --oauth-issuer: the authorization server that issues the tokens, which the metadata document names")
	case *f.resource == "":
		return nil, errors.New("--oauth-issuer needs --oauth-resource: this server's canonical URL (https://host/mcp), the audience its tokens must carry")
	}
	if err := checkResourceURL(*f.resource); err != nil {
		return nil, err
	}
	if _, err := resource.MetadataURLs(*f.issuer); err != nil {
		return nil, fmt.Errorf("--oauth-issuer %q: %v", *f.issuer, err)
	}
	for _, s := range f.scopes {
		if !auth.ValidScope(s) {
			return nil, fmt.Errorf("--oauth-scope %q: not a scope token (visible ASCII, no space, '\"' or '\\')", s)
		}
	}
	var verifier auth.Verifier
	if set["oauth-introspect"] {
		if !idSet || clientID == "" || !secretSet || secret == "" {
			return nil, fmt.Errorf("--oauth-introspect needs this server's client credentials at the authorization server in $%s and $%s (never on the command line)", OAuthClientIDEnv, OAuthClientSecretEnv)
		}
		v, err := resource.NewIntrospectionVerifier(resource.IntrospectionOptions{
			Endpoint: *f.introspect, ClientID: clientID, ClientSecret: secret,
			Resource: *f.resource, Issuer: *f.issuer,
		})
		if err != nil {
			return nil, fmt.Errorf("--oauth-introspect %q: %v", *f.introspect, err)
		}
		verifier = v
	} else {
		v, err := resource.NewJWTVerifier(resource.JWTOptions{Issuer: *f.issuer, Resource: *f.resource})
		if err != nil {
			return nil, fmt.Errorf("--oauth-issuer: %v", err)
		}
		verifier = v
	}
	return &streamable.Protection{
		Verifier: verifier,
		Metadata: auth.ProtectedResourceMetadata{
			Resource:             *f.resource,
			AuthorizationServers: []string{*f.issuer},
			ScopesSupported:      f.scopes,
		},
		Scopes: f.scopes,
	}, nil
}

// checkResourceURL accepts what Options.Protect does as the resource: an
// absolute http(s) URL without query or fragment.
func checkResourceURL(s string) error {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" || u.ForceQuery {
		return fmt.Errorf("--oauth-resource %q: must be the server's absolute http(s) URL, without query or fragment", s)
	}
	return nil
}
