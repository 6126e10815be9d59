package machine

import (
	"crypto"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/cryptosigner"

	"github.com/agentwire/agentwire/oauth/discover"
)

// AssertionLifetime is how long a client assertion is valid.
const AssertionLifetime = time.Minute

// ErrBadKey: a private key that is not a PKCS#8 PEM signing key, or that
// has no JWS algorithm the authorization server takes.
var ErrBadKey = errors.New("machine: unusable private key")

// ParsePrivateKeyPEM reads a PKCS#8 PEM private key ("BEGIN PRIVATE
// KEY") for Options.PrivateKey.
func ParsePrivateKeyPEM(data []byte) (crypto.Signer, error) {
	block, _ := pem.Decode(data)
	if block == nil || block.Type != "PRIVATE KEY" {
		return nil, fmt.Errorf("%w: not a PKCS#8 PEM block", ErrBadKey)
	}
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadKey, err)
	}
	s, ok := k.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("%w: a %T cannot sign", ErrBadKey, k)
	}
	return s, nil
}

// assertionClaims are a client assertion's claims (RFC 7523 §3).
type assertionClaims struct {
	Issuer   string `json:"iss"`
	Subject  string `json:"sub"`
	Audience string `json:"aud"`
	ID       string `json:"jti"`
	IssuedAt int64  `json:"iat"`
	Expiry   int64  `json:"exp"`
}

// clientAssertion signs a fresh private_key_jwt assertion for the
// authorization server md: iss and sub the client, aud its issuer.
func (a *Authorizer) clientAssertion(md *discover.ServerMetadata) (string, error) {
	opaque := cryptosigner.Opaque(a.opts.PrivateKey)
	algs := opaque.Algs()
	if want := md.TokenEndpointAuthSigningAlgValuesSupported; len(want) > 0 {
		algs = slices.DeleteFunc(slices.Clone(algs), func(alg jose.SignatureAlgorithm) bool {
			return !slices.Contains(want, string(alg))
		})
	}
	if len(algs) == 0 {
		return "", fmt.Errorf("%w: no JWS algorithm of the key is one %s takes", ErrBadKey, md.Issuer)
	}
	opts := (&jose.SignerOptions{}).WithType("JWT")
	if a.opts.KeyID != "" {
		opts = opts.WithHeader(jose.HeaderKey("kid"), a.opts.KeyID)
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: algs[0], Key: opaque}, opts)
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrBadKey, err)
	}
	var jti [16]byte
	rand.Read(jti[:])
	now := a.now()
	payload, _ := json.Marshal(assertionClaims{
		Issuer:   a.opts.ClientID,
		Subject:  a.opts.ClientID,
		Audience: md.Issuer,
		ID:       base64.RawURLEncoding.EncodeToString(jti[:]),
		IssuedAt: now.Unix(),
		Expiry:   now.Add(AssertionLifetime).Unix(),
	})
	jws, err := signer.Sign(payload)
	if err != nil {
		return "", fmt.Errorf("%w: signing: %v", ErrBadKey, err)
	}
	return jws.CompactSerialize()
}
