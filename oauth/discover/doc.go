// Package discover finds where an MCP client gets a token for a protected
// server, as the MCP authorization specification orders it: the server's
// protected resource metadata (RFC 9728), then its authorization server's
// metadata (RFC 8414, or OpenID Connect discovery).
//
// # The order
//
// A 401 names the metadata document in its WWW-Authenticate challenge
// (resource_metadata); without one, the client tries the well-known URL
// built from the server's path, then the one at the root of its origin.
// The document's resource must be the server (its origin, and a path that
// is the server's or a parent of it at a segment boundary) — a document
// that speaks for another resource is refused, and no authorization is
// attempted. It must name at least one authorization server.
//
// An authorization server's metadata is looked up at the RFC 8414 URL and
// then the OpenID Connect ones, in the order the specification gives for
// an issuer with a path and without one; a 4xx moves on to the next URL,
// anything else fails. The document's issuer must be exactly the issuer
// it was looked up for (no normalization of any kind), and it must
// advertise PKCE with S256 (AuthorizationServer, for the authorization code
// flow): a server that does not is refused, since the specification
// requires PKCE and the client cannot verify it otherwise. Grants without
// an authorization request (client credentials, JWT bearer) look the
// metadata up with ServerMetadataOf, which does not ask for PKCE.
//
// # Safety
//
// Only http and https URLs are fetched, http only on a loopback host;
// documents are read up to MaxDocumentBytes; every fetch is bounded by
// the caller's context; redirects are not followed (a metadata URL that
// moves is not the one the server or issuer named).
//
// The functions are safe for concurrent use and keep no state: caching
// is the caller's (the OAuth client keeps what it learned per issuer).
package discover
