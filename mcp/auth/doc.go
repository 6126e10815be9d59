// Package auth is what an MCP server's HTTP transport and its handlers
// share about who is calling, under the MCP authorization specification
// (OAuth 2.1; a server is a resource server in its terms): the Verifier
// that checks the access token of a request, the Identity it yields, the
// protected resource metadata document (RFC 9728) that tells clients
// where to get a token, and the errors by which a Verifier says how a
// request is refused.
//
// The package is the standard library only. Verifiers that need JOSE or
// an OAuth client (JWT access tokens against an issuer's JWKS, RFC 7662
// introspection) live in a module of their own,
// github.com/agentwire/agentwire/oauth, so that a server without OAuth
// does not carry those dependencies.
//
// # The model
//
// The HTTP transport (mcp/streamable, Options.Protect) reads the bearer
// token of every request and hands it to the Verifier, on the request's
// goroutine, with the request's context. A token that is missing or that
// the Verifier refuses with ErrInvalidToken is answered 401 with a
// WWW-Authenticate challenge naming the metadata document; a verified
// token that lacks a scope the method or tool requires is answered 403
// with error="insufficient_scope" and the scopes needed; any other error
// of the Verifier (its authorization server unreachable, say) is 503,
// never a refusal the client would act on. A verified Identity is in the
// context of the request's handler (IdentityFrom), and nothing forwards
// the token itself to anything downstream.
package auth
