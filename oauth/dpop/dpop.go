package dpop

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/cryptosigner"
)

// ProofType is the typ header of a DPoP proof (RFC 9449 §4.2).
const ProofType = "dpop+jwt"

// Errors of a Key; each returned error wraps one of these.
var (
	// ErrUnsupportedKey: the signer's key has no asymmetric JWS algorithm.
	ErrUnsupportedKey = errors.New("dpop: the key has no asymmetric JWS algorithm")
	// ErrBadURL: a proof was asked for a URL that is not absolute.
	ErrBadURL = errors.New("dpop: the request URL is not absolute")
	// ErrSigning: the signer failed.
	ErrSigning = errors.New("dpop: signing the proof failed")
)

// Options configure a Key. The zero value generates an ES256 (P-256) key
// and reads time.Now.
type Options struct {
	// Signer is the private key proofs are signed with: an ECDSA
	// (P-256, P-384, P-521), Ed25519 or RSA key, in memory or behind a
	// crypto.Signer (a hardware or KMS key). Nil means a new P-256 key.
	Signer crypto.Signer
	// Now is the clock of the iat claim. Nil means time.Now.
	Now func() time.Time
}

// A Key signs DPoP proofs and remembers the nonces servers gave it, per
// origin. Its methods are safe for concurrent use.
type Key struct {
	signer     jose.Signer
	alg        jose.SignatureAlgorithm
	public     jose.JSONWebKey
	thumbprint string
	now        func() time.Time

	mu     sync.Mutex
	nonces map[string]string // origin → the last DPoP-Nonce it sent
}

// New returns a Key.
func New(opts *Options) (*Key, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Signer == nil {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return nil, fmt.Errorf("dpop: generating a key: %w", err)
		}
		o.Signer = k
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	opaque := cryptosigner.Opaque(o.Signer)
	algs := opaque.Algs()
	if len(algs) == 0 {
		return nil, fmt.Errorf("%w (%T)", ErrUnsupportedKey, o.Signer.Public())
	}
	alg := algs[0]
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: alg, Key: opaque},
		(&jose.SignerOptions{EmbedJWK: true}).WithType(ProofType))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnsupportedKey, err)
	}
	public := jose.JSONWebKey{Key: o.Signer.Public(), Algorithm: string(alg), Use: "sig"}
	tp, err := public.Thumbprint(crypto.SHA256)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnsupportedKey, err)
	}
	return &Key{
		signer:     signer,
		alg:        alg,
		public:     public,
		thumbprint: base64.RawURLEncoding.EncodeToString(tp),
		now:        o.Now,
		nonces:     map[string]string{},
	}, nil
}

// Algorithm is the JWS algorithm of the key's proofs ("ES256").
func (k *Key) Algorithm() string { return string(k.alg) }

// PublicJWK is the public key, as proofs carry it.
func (k *Key) PublicJWK() jose.JSONWebKey { return k.public }

// Thumbprint is the key's JWK SHA-256 thumbprint (RFC 7638), base64url:
// the dpop_jkt of an authorization request, and the cnf.jkt of the
// access tokens bound to the key.
func (k *Key) Thumbprint() string { return k.thumbprint }

// Claims are the claims of a DPoP proof (RFC 9449 §4.2).
type Claims struct {
	ID          string `json:"jti"`
	Method      string `json:"htm"`
	URL         string `json:"htu"`
	IssuedAt    int64  `json:"iat"`
	AccessToken string `json:"ath,omitempty"` // base64url(SHA-256(token))
	Nonce       string `json:"nonce,omitempty"`
}

// Proof returns a proof for a request of method to rawURL: a fresh jti,
// htu without query or fragment, iat now, ath when accessToken is not
// empty (a request to a resource server), nonce when not empty.
func (k *Key) Proof(method, rawURL, accessToken, nonce string) (string, error) {
	htu, err := TargetURI(rawURL)
	if err != nil {
		return "", err
	}
	var jti [16]byte
	rand.Read(jti[:])
	c := Claims{
		ID:       base64.RawURLEncoding.EncodeToString(jti[:]),
		Method:   strings.ToUpper(method),
		URL:      htu,
		IssuedAt: k.now().Unix(),
		Nonce:    nonce,
	}
	if accessToken != "" {
		c.AccessToken = AccessTokenHash(accessToken)
	}
	payload, _ := json.Marshal(c)
	jws, err := k.signer.Sign(payload)
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrSigning, err)
	}
	return jws.CompactSerialize()
}

// AccessTokenHash is the ath of a proof sent with token:
// base64url(SHA-256(token)).
func AccessTokenHash(token string) string {
	sum := sha256.Sum256([]byte(token))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// TargetURI is the htu of a request to rawURL: the URL without its query
// and fragment.
func TargetURI(rawURL string) (string, error) {
	u, err := url.Parse(rawURL)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return "", fmt.Errorf("%w: %q", ErrBadURL, rawURL)
	}
	u.RawQuery, u.ForceQuery, u.Fragment, u.RawFragment = "", false, "", ""
	return u.String(), nil
}

// origin is the scheme and host of rawURL, the key of its nonce.
func origin(u *url.URL) string {
	return strings.ToLower(u.Scheme) + "://" + strings.ToLower(u.Host)
}
