// Package dpop is the client's side of OAuth 2.0 Demonstrating
// Proof of Possession (RFC 9449): a Key that signs proofs, remembers the
// nonces servers hand out, and a Transport that gives every token request
// its proof.
//
// # Proofs
//
// A proof is a JWT of type dpop+jwt, signed with the Key (ES256 on a new
// P-256 key by default) and carrying its public JWK in its header. Its
// claims are a random jti, the request's method (htm) and URL without
// query or fragment (htu), the time (iat); with an access token, its hash
// (ath = base64url(SHA-256(token))); with a nonce, the nonce. Every
// request gets a proof of its own: a server refuses a jti it has seen.
//
// The Key's Thumbprint (RFC 7638, SHA-256) is the dpop_jkt of an
// authorization request and the cnf.jkt of the tokens bound to the key.
//
// # Nonces
//
// A server may demand that proofs carry a nonce of its choosing: an
// authorization server answers 400 {"error":"use_dpop_nonce"}, a resource
// server 401 with WWW-Authenticate: DPoP error="use_dpop_nonce"; both
// send the nonce in a DPoP-Nonce header, and may send a new one on any
// answer. Key.Observe records it per origin (scheme and host), and Sign
// puts the origin's last nonce in the proof. The Transport does this for
// a token endpoint, and sends a request refused for want of a nonce once
// more; IsNonceChallenge tells a resource server's demand apart from a
// refused token, so that the caller sends the request again rather than
// obtaining a new token.
//
// # Presenting a token
//
// Present sets a request's credentials: a DPoP-bound token (type DPoP)
// as "Authorization: DPoP TOKEN" with a fresh proof whose ath is the
// token's hash, any other token as a bearer token; PresentedToken reads
// back what a refused request carried.
package dpop
