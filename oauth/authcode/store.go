package authcode

import (
	"context"
	"slices"
	"sync"
	"time"
)

// Key names the tokens of one resource from one authorization server.
type Key struct {
	Issuer   string // the authorization server's issuer, exactly
	Resource string // the protected resource (its metadata's resource)
}

// Token is an access token and what comes with it.
type Token struct {
	AccessToken  string    `json:"access_token"`
	TokenType    string    `json:"token_type,omitempty"`
	RefreshToken string    `json:"refresh_token,omitempty"`
	Expiry       time.Time `json:"expiry,omitzero"` // zero: the server did not say
	// Scopes are those the authorization requested (the server may have
	// granted fewer); a step-up asks for them again, with more.
	Scopes []string `json:"scopes,omitempty"`
}

// valid reports whether t can be presented at now: it has an access
// token, and has not expired (with a margin for the trip to the server).
func (t *Token) valid(now time.Time) bool {
	return t != nil && t.AccessToken != "" && (t.Expiry.IsZero() || now.Add(expiryMargin).Before(t.Expiry))
}

// expiryMargin is how long before its expiry a token is no longer sent.
const expiryMargin = 10 * time.Second

// A TokenStore keeps tokens by Key. Access and refresh tokens are
// credentials: a store must keep them from other users (a file readable by
// its owner only, the system's keychain) and never log them. Get returns
// nil and no error when it has none. It is called concurrently.
type TokenStore interface {
	Get(ctx context.Context, k Key) (*Token, error)
	Put(ctx context.Context, k Key, t *Token) error
}

// MemoryStore is a TokenStore in memory, the default: its tokens last as
// long as the process.
type MemoryStore struct {
	mu     sync.Mutex
	tokens map[Key]Token
}

// Get returns a copy of the token stored under k.
func (s *MemoryStore) Get(_ context.Context, k Key) (*Token, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.tokens[k]
	if !ok {
		return nil, nil
	}
	t.Scopes = slices.Clone(t.Scopes)
	return &t, nil
}

// Put stores a copy of t under k.
func (s *MemoryStore) Put(_ context.Context, k Key, t *Token) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.tokens == nil {
		s.tokens = map[Key]Token{}
	}
	c := *t
	c.Scopes = slices.Clone(t.Scopes)
	s.tokens[k] = c
	return nil
}
