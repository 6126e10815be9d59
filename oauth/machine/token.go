package machine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"strconv"
	"strings"
	"time"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"

	"github.com/agentwire/agentwire/oauth/dpop"
)

// request asks b's token endpoint for a token. Under DPoP, a server that
// answers use_dpop_nonce is asked once more, with its nonce and a client
// assertion of its own (the grant's assertion is the same).
func (a *Authorizer) request(ctx context.Context, b *binding) (*oauth2.Token, error) {
	grant, err := a.grant(ctx, b)
	if err != nil {
		return nil, err
	}
	t, err := a.requestOnce(ctx, b, grant)
	var re *oauth2.RetrieveError
	if a.opts.DPoP != nil && errors.As(err, &re) && re.ErrorCode == dpop.ErrorUseNonce && re.Response.Header.Get(dpop.NonceHeader) != "" {
		t, err = a.requestOnce(ctx, b, grant)
	}
	if errors.As(err, &re) {
		return nil, tokenError(ErrTokenRefused, err)
	}
	if err != nil {
		return nil, err
	}
	// The expiry by the Authorizer's clock, not the library's.
	t.Expiry = time.Time{}
	if s := expiresIn(t); s > 0 {
		t.Expiry = a.now().Add(time.Duration(s) * time.Second)
	}
	return t, nil
}

// grant returns the grant's parameters: the resource, and for a JWT
// bearer grant its assertion (obtained from the source or the identity
// provider); client_credentials is the library's default grant_type.
func (a *Authorizer) grant(ctx context.Context, b *binding) (url.Values, error) {
	params := url.Values{"resource": {b.resource}}
	var assertion string
	switch {
	case a.opts.Enterprise != nil:
		jag, err := a.exchange(ctx, b)
		if err != nil {
			return nil, err
		}
		assertion = jag
	case a.opts.Assertion != nil:
		jwt, err := a.opts.Assertion(ctx, b.server.Issuer)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrAssertion, err)
		}
		assertion = jwt
	default:
		return params, nil
	}
	params.Set("grant_type", GrantJWTBearer)
	params.Set("assertion", assertion)
	return params, nil
}

// requestOnce sends one token request for grant, with the client
// authentication configured. The server's error answer is returned as
// the *oauth2.RetrieveError it is.
func (a *Authorizer) requestOnce(ctx context.Context, b *binding, grant url.Values) (*oauth2.Token, error) {
	params := maps.Clone(grant)
	conf := &clientcredentials.Config{
		ClientID:       a.opts.ClientID,
		TokenURL:       b.server.TokenEndpoint,
		Scopes:         a.scopes(b),
		EndpointParams: params,
	}
	switch a.method {
	case AuthClientSecretBasic:
		conf.ClientSecret, conf.AuthStyle = a.opts.ClientSecret, oauth2.AuthStyleInHeader
	case AuthClientSecretPost:
		conf.ClientSecret, conf.AuthStyle = a.opts.ClientSecret, oauth2.AuthStyleInParams
	case AuthPrivateKeyJWT:
		assertion, err := a.clientAssertion(b.server)
		if err != nil {
			return nil, err
		}
		conf.AuthStyle = oauth2.AuthStyleInParams
		params.Set("client_assertion_type", ClientAssertionType)
		params.Set("client_assertion", assertion)
	default: // none: client_id in the body
		conf.AuthStyle = oauth2.AuthStyleInParams
	}
	t, err := conf.Token(context.WithValue(ctx, oauth2.HTTPClient, a.http))
	var re *oauth2.RetrieveError
	if err != nil && !errors.As(err, &re) {
		return nil, tokenError(ErrTokenRefused, err)
	}
	return t, err
}

// scopes are the scopes a token request asks for.
func (a *Authorizer) scopes(b *binding) []string {
	if a.opts.Scopes != nil {
		return a.opts.Scopes
	}
	return b.scopes
}

// exchange trades the user's ID token at the identity provider for an
// ID-JAG for b's authorization server and resource (RFC 8693, SEP-990).
func (a *Authorizer) exchange(ctx context.Context, b *binding) (string, error) {
	e := a.opts.Enterprise
	idToken, err := e.IDToken(ctx)
	if err != nil {
		return "", fmt.Errorf("%w: the ID token: %v", ErrAssertion, err)
	}
	conf := &clientcredentials.Config{
		ClientID:     e.ClientID,
		ClientSecret: e.ClientSecret,
		TokenURL:     e.TokenEndpoint,
		Scopes:       a.scopes(b),
		AuthStyle:    oauth2.AuthStyleInParams,
		EndpointParams: url.Values{
			"grant_type":           {GrantTokenExchange},
			"requested_token_type": {TokenTypeIDJAG},
			"audience":             {b.server.Issuer},
			"resource":             {b.resource},
			"subject_token":        {idToken},
			"subject_token_type":   {TokenTypeIDToken},
		},
	}
	t, err := conf.Token(context.WithValue(ctx, oauth2.HTTPClient, a.opts.HTTPClient))
	if err != nil {
		return "", tokenError(ErrExchangeRefused, err)
	}
	if issued, _ := t.Extra("issued_token_type").(string); issued != "" && issued != TokenTypeIDJAG {
		return "", fmt.Errorf("%w: it issued a %s, not an ID-JAG", ErrExchangeRefused, issued)
	}
	return t.AccessToken, nil
}

// tokenError reports a failed token request: an OAuth error answer as
// refused (its code only: the description is the server's text), any
// other failure as ErrTokenEndpoint.
func tokenError(refused error, err error) error {
	var re *oauth2.RetrieveError
	if errors.As(err, &re) && re.ErrorCode != "" {
		return fmt.Errorf("%w: %s (HTTP %d)", refused, sanitize(re.ErrorCode), re.Response.StatusCode)
	}
	if errors.As(err, &re) {
		return fmt.Errorf("%w: HTTP %d", ErrTokenEndpoint, re.Response.StatusCode)
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return fmt.Errorf("%w: %v", ErrTokenEndpoint, err)
}

// sanitize keeps an error code to the characters RFC 6749 §5.2 allows,
// bounded: it is the server's text.
func sanitize(code string) string {
	code = strings.Map(func(r rune) rune {
		if r < 0x20 || r > 0x7e || r == '"' || r == '\\' {
			return -1
		}
		return r
	}, code)
	if len(code) > 64 {
		code = code[:64]
	}
	return code
}

// expiresIn is the token response's expires_in, in seconds; 0 if absent.
func expiresIn(t *oauth2.Token) int64 {
	switch v := t.Extra("expires_in").(type) {
	case float64:
		return int64(v)
	case json.Number:
		n, _ := v.Int64()
		return n
	case string:
		n, _ := strconv.ParseInt(v, 10, 64)
		return n
	}
	return 0
}
