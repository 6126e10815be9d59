package resource

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
)

// MetadataURLs returns where the metadata of the authorization server
// issuer is looked for, in order: RFC 8414's
// /.well-known/oauth-authorization-server, then OpenID Connect
// Discovery's /.well-known/openid-configuration. For an issuer with a
// path, the well-known segment goes between the host and the path
// (RFC 8414 §3.1), and OpenID Connect's appended form comes last, the
// order the MCP authorization specification gives.
func MetadataURLs(issuer string) ([]string, error) {
	u, err := url.Parse(issuer)
	if err != nil {
		return nil, fmt.Errorf("resource: issuer %q: %w", issuer, err)
	}
	if u.Scheme != "https" && u.Scheme != "http" || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("resource: issuer %q is not an http(s) URL without query or fragment", issuer)
	}
	root := u.Scheme + "://" + u.Host
	path := strings.TrimSuffix(u.EscapedPath(), "/")
	if path == "" {
		return []string{
			root + "/.well-known/oauth-authorization-server",
			root + "/.well-known/openid-configuration",
		}, nil
	}
	return []string{
		root + "/.well-known/oauth-authorization-server" + path,
		root + "/.well-known/openid-configuration" + path,
		root + path + "/.well-known/openid-configuration",
	}, nil
}

// serverMetadata is the part of an authorization server's metadata
// (RFC 8414 §2) a resource server reads.
type serverMetadata struct {
	Issuer                string `json:"issuer"`
	JWKSURI               string `json:"jwks_uri"`
	IntrospectionEndpoint string `json:"introspection_endpoint"`
}

// discover fetches issuer's metadata from the first of MetadataURLs
// that answers 200. A document whose "issuer" is not issuer exactly is
// an error (RFC 8414 §3.3), and so is one without a jwks_uri: neither
// is a reason to try the next place.
func discover(ctx context.Context, client *http.Client, issuer string) (*serverMetadata, error) {
	urls, err := MetadataURLs(issuer)
	if err != nil {
		return nil, err
	}
	var errs []error
	for _, u := range urls {
		var md serverMetadata
		err := getJSON(ctx, client, u, &md)
		var se *statusError
		if errors.As(err, &se) && se.status >= 400 && se.status < 500 {
			errs = append(errs, err)
			continue
		}
		if err != nil {
			return nil, err
		}
		if md.Issuer != issuer {
			return nil, fmt.Errorf("resource: %s names issuer %q, not %q", u, md.Issuer, issuer)
		}
		if md.JWKSURI == "" {
			return nil, fmt.Errorf("resource: %s has no jwks_uri", u)
		}
		return &md, nil
	}
	return nil, fmt.Errorf("resource: no metadata for issuer %q: %w", issuer, errors.Join(errs...))
}
