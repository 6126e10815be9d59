// Package resource verifies the OAuth 2.1 access tokens presented to an
// MCP server, which is a resource server in OAuth's terms. Its two
// verifiers implement auth.Verifier (package
// github.com/agentwire/agentwire/mcp/auth), which the Streamable HTTP
// transport calls for every request:
//
//   - JWTVerifier checks JWT access tokens (RFC 9068) locally, against
//     the key set of one issuer;
//   - IntrospectionVerifier asks the issuer's introspection endpoint
//     (RFC 7662) about opaque tokens.
//
// # What is refused, and what is a failure
//
// A token is refused with an error wrapping auth.ErrInvalidToken (the
// request gets 401), whose text says why, for logs. A JWT is refused
// when its "alg" is not one of the configured algorithms ("none" never
// is; an HMAC algorithm only with a configured shared key, so a token
// "signed" with an issuer's public key as an HMAC secret is refused on
// its header); when its signature does not verify with a key of the
// issuer's set whose "kid" (and "alg", when the key names one) match;
// when its "typ" is that of another kind of JWT (and, with RequireType,
// when it is not "at+jwt"); when "iss" is not exactly the issuer; when
// "aud" does not contain the resource, this server's canonical URL, so
// that a token issued for another server cannot be replayed here; when
// it has no "exp", or "exp" is past, or "nbf" or "iat" is in the future,
// each beyond the leeway. An introspected token is refused when the
// endpoint says it is not active, or when the answer names another
// audience or issuer, or it is expired.
//
// Anything that keeps a verifier from deciding is a failure, not a
// refusal (the request gets 503, and a client does not throw its token
// away): the issuer's metadata or key set unreachable, answering other
// than 200, not JSON or larger than MaxResponseBytes; metadata whose
// "issuer" is not the configured issuer exactly (RFC 8414 §3.3); an
// introspection endpoint that fails; the request's context ending.
//
// # Key sets
//
// A JWTVerifier reads the issuer's metadata on its first token (RFC
// 8414's /.well-known/oauth-authorization-server, then OpenID Connect's
// /.well-known/openid-configuration, path-aware, see MetadataURLs) for
// its jwks_uri, unless JWKSURL is configured, and keeps the key set it
// reads there. Symmetric keys, private halves and keys for encryption
// in the set are ignored. A token signed with a key ID the set does not
// have makes it fetch the set again (key rotation), at most once per
// RefreshInterval: within it, such tokens are refused without a fetch,
// so a stream of forged key IDs cannot make the verifier hammer the
// issuer. A set older than KeySetMaxAge is fetched again on the next
// token, so withdrawn keys stop verifying; if that fetch fails, the
// old set is kept until the next attempt.
//
// # Introspection cache
//
// An IntrospectionVerifier remembers an active token's identity for
// CacheTTL, never beyond the token's "exp", in a cache of at most
// CacheSize entries (least recently used goes first) keyed by the
// SHA-256 of the token: a raw token is never kept. A revoked token may
// thus be accepted for up to CacheTTL after its revocation; choose it
// accordingly. Refusals are not cached: an inactive token stays
// inactive, but caching refusals would let a stream of garbage tokens
// evict the entries of real ones, and each refusal is cheap for the
// endpoint. Each caller gets its own copy of a cached Identity.
//
// # Concurrency and bounds
//
// Both verifiers are safe for concurrent use. Concurrent needs for the
// key set share one fetch, which runs under Timeout and does not end
// when the request that started it gives up; every waiting request
// still stops waiting when its own context ends. Introspection requests
// run under the request's context and Timeout. Every answer read from
// an authorization server is limited to MaxResponseBytes.
//
// The clock is Now, a field of the options, so that tests move time on
// without sleeping.
package resource
