// Package authcode is an MCP client's OAuth 2.1 authorization code flow:
// an Authorizer for a Streamable HTTP client (streamable.ClientOptions)
// that, told of a 401 or 403, obtains an access token the way the MCP
// authorization specification orders it, and gives it to every request.
//
// # The flow
//
// On a 401, the Authorizer reads the server's Bearer challenge (else its
// DPoP one), discovers
// its protected resource metadata (the challenge's resource_metadata, else
// the well-known URLs) and the metadata of the first authorization server
// it names (package discover: issuer checked exactly, PKCE with S256
// required). It does so on every 401, so that a server that moves to
// another authorization server is followed. It then finds its client
// identity for that issuer, in this order: the pre-registered credentials
// of Options.Preregistered; Options.ClientIDMetadataURL when the server
// takes client ID metadata documents; a dynamic registration (RFC 7591)
// when Options.Registration allows one and the server has a registration
// endpoint; else it fails with ErrNoClientIdentity.
//
// The authorization request carries PKCE (S256), a random state, the
// resource of the metadata document (RFC 8707) and the scope of the
// challenge (else the document's scopes_supported, else none; plus
// offline_access when Options.RequestRefreshToken asks for it and the
// authorization server lists it). Options.Redirect is the user agent: the
// library never opens a browser; it is handed the authorization URL and
// returns the callback URL the authorization server redirected to. The
// callback is checked in this order: its state, its iss (RFC 9207, an
// exact string comparison), then its error, then its code. The code is
// exchanged with the PKCE verifier, the resource, and the client
// authentication the client was registered with (client_secret_basic,
// client_secret_post or none; never guessed).
//
// A 403 whose challenge says error="insufficient_scope" is a step-up: a
// new authorization for the union of the scopes requested so far and the
// challenge's, only when the challenge adds a scope: a server that asks
// again for what it was given gets no new authorization, and the call
// fails with its 403. As the transport sends a request at most
// streamable.MaxAuthAttempts (3) times, one request causes at most two
// step-ups, three authorizations in all.
//
// # DPoP
//
// With Options.DPoP (off by default), tokens are bound to that key (RFC
// 9449, package dpop): the authorization request carries the key's
// dpop_jkt, every token request (the code exchange, each refresh) a
// proof, sent once more with the server's nonce when it answers 400
// use_dpop_nonce. A token the server bound (token_type DPoP) is sent as
// "Authorization: DPoP TOKEN" with a fresh proof on every request (its
// ath the token's hash); any other is sent as a bearer token. A 401 whose
// DPoP challenge says error="use_dpop_nonce" is not a refusal of the
// token: the request is sent again, its proof carrying the DPoP-Nonce the
// server sent.
//
// # What is cached
//
// Tokens are kept in a TokenStore under the key issuer + resource; the
// default is in memory. A token found there is used without any
// authorization, refreshed (with its resource) when it has expired. Client
// registrations are kept in memory per issuer: credentials obtained from
// one authorization server are never presented to another, and a server
// that migrates to a new issuer gets a new registration.
//
// # Concurrency
//
// An Authorizer is safe for concurrent use, and is meant to be shared by
// every request to one MCP server. Many requests may be refused at once:
// they share one recovery (discovery, registration, authorization or
// refresh) at a time, the others waiting for its outcome, each no longer
// than its own context allows. A request whose token was already replaced
// by the time it was refused is simply sent again with the new one.
//
// # What is refused
//
// A metadata document for another resource, an authorization server
// whose metadata names another issuer or does not advertise PKCE with
// S256 (before any authorization request); a callback whose state is not
// the one sent, whose iss is missing though advertised or is not the
// issuer byte for byte (a trailing slash included); an error callback
// (its error code is reported, never its description, which the
// authorization server or an attacker chose); a token endpoint
// authentication method the library does not implement.
package authcode
