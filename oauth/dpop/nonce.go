package dpop

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/url"

	"github.com/agentwire/agentwire/oauth/discover"
)

// ErrorUseNonce is the error code of a server that wants a proof with its
// nonce (RFC 9449 §8, §9).
const ErrorUseNonce = "use_dpop_nonce"

// NonceHeader carries a server's nonce.
const NonceHeader = "DPoP-Nonce"

// Nonce is the nonce the origin of u last gave, or "".
func (k *Key) Nonce(u *url.URL) string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.nonces[origin(u)]
}

// Observe records the DPoP-Nonce of resp, if it has one, as the nonce of
// its request's origin; it reports whether it did. Servers may send a new
// nonce on any answer, a success included.
func (k *Key) Observe(resp *http.Response) bool {
	n := resp.Header.Get(NonceHeader)
	if n == "" || resp.Request == nil || resp.Request.URL == nil {
		return false
	}
	k.mu.Lock()
	k.nonces[origin(resp.Request.URL)] = n
	k.mu.Unlock()
	return true
}

// Sign sets req's DPoP header to a fresh proof for it, with the nonce of
// its origin and, when accessToken is not empty, its hash.
func (k *Key) Sign(req *http.Request, accessToken string) error {
	p, err := k.Proof(req.Method, req.URL.String(), accessToken, k.Nonce(req.URL))
	if err != nil {
		return err
	}
	req.Header.Set("DPoP", p)
	return nil
}

// IsNonceChallenge reports whether resp is a resource server's demand for
// a nonce: a 401 whose DPoP challenge says error="use_dpop_nonce"
// (RFC 9449 §9).
func IsNonceChallenge(resp *http.Response) bool {
	if resp.StatusCode != http.StatusUnauthorized {
		return false
	}
	cs, err := discover.ParseChallenges(resp.Header.Values("WWW-Authenticate"))
	if err != nil {
		return false
	}
	c, ok := discover.Find(cs, "DPoP")
	return ok && c.Param("error") == ErrorUseNonce
}

// maxErrorBytes bounds the error body a Transport reads.
const maxErrorBytes = 64 << 10

// isNonceError reports whether an authorization server's answer is a
// demand for a nonce: a 400 whose JSON error is use_dpop_nonce (RFC 9449
// §8). The body is read and put back.
func isNonceError(resp *http.Response) bool {
	if resp.StatusCode != http.StatusBadRequest {
		return false
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxErrorBytes))
	resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(data))
	if err != nil {
		return false
	}
	var e struct {
		Error string `json:"error"`
	}
	return json.Unmarshal(data, &e) == nil && e.Error == ErrorUseNonce
}

// Transport is an http.RoundTripper for an authorization server's token
// endpoint: each request gets a fresh proof (with the nonce the server
// last gave), and a 400 use_dpop_nonce that brings a nonce is answered
// by sending the request once more with it.
type Transport struct {
	Key *Key
	// Base sends the requests. Nil means http.DefaultTransport.
	Base http.RoundTripper
	// NoRetry leaves a use_dpop_nonce answer to the caller (its nonce
	// recorded): for a request that must not be sent twice as it is, one
	// with a client assertion whose jti the server will not take again.
	NoRetry bool
}

// RoundTrip sends req with a proof.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	base := t.Base
	if base == nil {
		base = http.DefaultTransport
	}
	for attempt := 1; ; attempt++ {
		r := req.Clone(req.Context())
		if attempt > 1 && req.GetBody != nil {
			body, err := req.GetBody()
			if err != nil {
				return nil, err
			}
			r.Body = body
		}
		if err := t.Key.Sign(r, ""); err != nil {
			if req.Body != nil {
				req.Body.Close()
			}
			return nil, err
		}
		resp, err := base.RoundTrip(r)
		if err != nil {
			return nil, err
		}
		fresh := t.Key.Observe(resp)
		retryable := attempt == 1 && fresh && !t.NoRetry && (req.Body == nil || req.GetBody != nil)
		if !retryable || !isNonceError(resp) {
			return resp, nil
		}
		resp.Body.Close()
	}
}
