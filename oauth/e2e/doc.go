// Package e2e is an end-to-end test of agentwire's protected MCP server
// against a real authorization server: oidc-provider, the certified
// OpenID provider from npm, run by interop/oidc/provider.mjs. It has no
// code of its own, only tests.
//
// The test starts the provider as a subprocess on a loopback port and
// serves agentwire's Streamable HTTP handler, protected
// (streamable.Options.Protect), on httptest servers, with a tool any
// token with mcp:read may call and one that needs mcp:write
// (mcp.Tool.Scopes). A scripted authorization code flow with PKCE S256
// (the redirects of /auth and /interaction followed with a cookie jar, up
// to the loopback redirect URI; code, state and iss read there) obtains
// tokens with a resource indicator (RFC 8707). It checks that:
//
//   - discovery works both ways: the server's protected resource metadata
//     names the provider, whose metadata the client checks;
//   - a JWT access token (RFC 9068) for the server's resource, verified
//     by resource.JWTVerifier against the provider's key set, lists the
//     tools and calls the open one;
//   - the write tool answers 403 with error="insufficient_scope" and a
//     scope that names mcp:write; after a step-up (authorizing again for
//     "mcp:read mcp:write") it works;
//   - a token the provider issued for another resource is refused with
//     401 error="invalid_token";
//   - a refresh (the refresh_token grant, with the resource) yields a new
//     access token that works;
//   - an opaque access token (for a resource the provider issues opaque
//     tokens to), verified by resource.IntrospectionVerifier with the
//     credentials of a confidential client of the provider, is accepted,
//     and refused with 401 once revoked at the revocation endpoint.
//
// A second test hands the server's URL to a client built on the
// TypeScript SDK (@modelcontextprotocol/client, interop/oidc/ts-client.mjs)
// that authenticates with the SDK's own OAuth support: from the server's
// 401 it reads the protected resource metadata and the provider's
// metadata, authorizes the pre-registered native client with PKCE and
// the resource (the script, as the user agent, follows the provider's
// redirects with a cookie jar up to the loopback redirect URI and gives
// the callback to the transport's finishAuth), redeems the code, and
// calls the tool that names the verified token's subject, client and
// scopes. The server's side is checked too: its first request had no
// token and was answered 401 (Handler.Stats), the later ones carried the
// token.
//
// A third does the same with agentwire's own client: oauth/authcode's
// Authorizer, given the pre-registered native client, a user agent (the
// test's, following the provider's redirects with a cookie jar) and a
// clock of the test's, as the Authorizer of streamable.Connect with no
// token. Its first request is refused with 401 and it authorizes once, by
// itself, for the server's resource; tools/list and the open tool work,
// the tool seeing the token's identity; the write tool's 403 makes it
// authorize again for mcp:read and mcp:write, and the call succeeds; with
// its clock moved past the token's expiry, the next call refreshes the
// token at the provider (a refresh_token grant with the resource, no new
// authorization) and succeeds. The test counts the authorizations at the
// user agent and the grants at the token endpoint, and checks the
// server's 401 and 403 counts.
//
// # What it needs
//
// oidc-provider is pinned in interop/package.json and runs on the Node 22
// that interop/conformance/package.json pins (it refuses older Nodes).
// The test installs both as the interoperability tests do (`npm install
// --no-save` from each lock file, skipped when node_modules already
// matches it, which interop's TestMain records the same way), so a fresh
// clone needs only node and npm on the PATH. Without them, or on another
// platform than linux/amd64 (that Node's), the test is skipped, saying
// so; a failed install or a provider that does not start fails it. The
// provider is stopped (its standard input closed, killed if it lingers)
// when the test ends.
package e2e
