// Package machine is OAuth for an MCP client that acts for itself, with
// no user at a browser: an Authorizer for a Streamable HTTP client
// (streamable.ClientOptions) that obtains access tokens with the client's
// own credentials, a workload's identity token, or an enterprise
// identity provider's assertion, and gives them to every request.
//
// # Discovery
//
// On the first 401 (or beforehand, with Prepare) the Authorizer reads
// the server's Bearer or DPoP challenge, discovers its protected
// resource metadata (the challenge's resource_metadata, else the
// well-known URLs) and the metadata of the first authorization server it
// names, with package discover (the resource checked against the server,
// the issuer exactly). Where that metadata lists grant types or token
// endpoint authentication methods, the configured ones must be among
// them: nothing else is tried instead.
//
// # Grants
//
// Without an assertion the grant is client_credentials (OAuth 2.1
// §4.2). With Options.Assertion it is a JWT bearer assertion (RFC 7523
// §2.1: grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer, the
// assertion from the source, which is asked for each token), the way a
// workload presents the identity token its platform gave it. With
// Options.Enterprise it is the enterprise-managed authorization of
// SEP-990: a token exchange (RFC 8693) at the identity provider's token
// endpoint of the user's ID token for an ID-JAG (requested_token_type
// urn:ietf:params:oauth:token-type:id-jag, audience the authorization
// server's issuer, resource the MCP server's), then that ID-JAG as the
// JWT bearer assertion at the authorization server.
//
// Every token request carries the resource (RFC 8707) and
// Options.Scopes, else the challenge's scope, else none; and the client
// authentication configured, never guessed: client_secret_basic,
// client_secret_post, private_key_jwt (RFC 7523 §2.2: a fresh assertion
// signed with Options.PrivateKey for each request, iss and sub the
// client ID, aud the authorization server's issuer, a random jti, iat,
// and an exp a minute later), or none.
//
// A token endpoint that refuses a grant (an OAuth error answer) is not
// asked again: the Authorizer fails that call and every later one with
// ErrTokenRefused, naming the error code (never the server's
// description). It neither retries nor falls back to another grant.
// Failures of the network or of the answer's form (ErrTokenEndpoint) are
// not remembered.
//
// # DPoP
//
// With Options.DPoP, token requests carry a DPoP proof (package dpop,
// following the authorization server's nonce), and a token the server
// binds (token_type DPoP) is sent as "Authorization: DPoP TOKEN" with a
// fresh proof holding its hash. A resource server's 401 with
// error="use_dpop_nonce" has the request sent again with its nonce; it
// does not cost a new token.
//
// # Tokens
//
// A token is kept in memory and used until ExpirySkew before it
// expires (by Options.Now); then, or when a server refuses it, the
// Authorizer obtains another. One token request runs at a time: the
// requests refused meanwhile wait for it (each no longer than its own
// context allows) and take its token. A 403 fails the call: the
// Authorizer does not ask for more scopes.
package machine
