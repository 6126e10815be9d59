package resource

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

// keySet is the cached JSON Web Key Set of one issuer. The set is
// replaced whole by a fetch, never modified, so a reader holds it
// without the lock. At most one fetch runs at a time; callers that need
// one while it runs wait for it.
type keySet struct {
	client   *http.Client
	issuer   string // discovered from, when jwksURL is not configured
	timeout  time.Duration
	interval time.Duration // the least time between fetches on an unknown kid
	maxAge   time.Duration // a set older than this is fetched again
	now      func() time.Time

	mu        sync.Mutex
	jwksURL   string
	keys      []jose.JSONWebKey // nil before the first fetch succeeded
	fetchedAt time.Time
	missAt    time.Time // the last fetch for an unknown kid (or a stale set)
	inflight  *fetchCall
}

type fetchCall struct {
	started time.Time
	done    chan struct{}
	keys    []jose.JSONWebKey
	err     error
}

// lookup returns the keys that may have signed a token with this kid
// and alg. It fetches the set the first time, when it is older than
// maxAge, and when kid is unknown, this last two at most once per
// interval; a failed fetch with a set in hand keeps the old set.
// With no candidate, the slice is empty and the error nil.
func (s *keySet) lookup(ctx context.Context, kid, alg string) ([]jose.JSONWebKey, error) {
	s.mu.Lock()
	keys := s.keys
	var call *fetchCall
	now := s.now()
	switch {
	case keys == nil:
		call = s.startLocked(ctx)
	case len(candidates(keys, kid, alg)) > 0 && now.Sub(s.fetchedAt) < s.maxAge:
		// The common case: a known key in a fresh set.
	case s.inflight != nil:
		call = s.inflight
	case s.missAt.IsZero() || now.Sub(s.missAt) >= s.interval:
		s.missAt = now
		call = s.startLocked(ctx)
	}
	s.mu.Unlock()

	if call == nil {
		return candidates(keys, kid, alg), nil
	}
	select {
	case <-call.done:
	case <-ctx.Done():
		return nil, fmt.Errorf("resource: waiting for the key set of %s: %w", s.issuer, ctx.Err())
	}
	switch {
	case call.err == nil:
		keys = call.keys
	case keys == nil:
		return nil, call.err
	}
	found := candidates(keys, kid, alg)
	if len(found) == 0 {
		// However the fetch came about, it was one for this unknown kid.
		s.mu.Lock()
		if call.started.After(s.missAt) {
			s.missAt = call.started
		}
		s.mu.Unlock()
	}
	return found, nil
}

// startLocked starts a fetch, or returns the one running. The fetch
// runs on its own goroutine, under s.timeout and not under ctx's
// cancellation, so that a caller that gives up does not fail the
// others waiting for it.
func (s *keySet) startLocked(ctx context.Context) *fetchCall {
	if s.inflight != nil {
		return s.inflight
	}
	call := &fetchCall{started: s.now(), done: make(chan struct{})}
	s.inflight = call
	jwksURL := s.jwksURL
	go func() {
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.timeout)
		defer cancel()
		url, keys, err := s.fetch(fctx, jwksURL)
		s.mu.Lock()
		if err == nil {
			s.jwksURL, s.keys, s.fetchedAt = url, keys, s.now()
		}
		s.inflight = nil
		s.mu.Unlock()
		call.keys, call.err = keys, err
		close(call.done)
	}()
	return call
}

// fetch discovers the jwks_uri when it is not known yet, then reads the
// key set there.
func (s *keySet) fetch(ctx context.Context, jwksURL string) (string, []jose.JSONWebKey, error) {
	if jwksURL == "" {
		md, err := discover(ctx, s.client, s.issuer)
		if err != nil {
			return "", nil, err
		}
		jwksURL = md.JWKSURI
	}
	var doc struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := getJSON(ctx, s.client, jwksURL, &doc); err != nil {
		return "", nil, err
	}
	if doc.Keys == nil {
		return "", nil, fmt.Errorf("resource: %s is not a JSON Web Key Set", jwksURL)
	}
	keys := make([]jose.JSONWebKey, 0, len(doc.Keys))
	for _, raw := range doc.Keys {
		var k jose.JSONWebKey
		// A key of a type this package cannot use is skipped, not the
		// whole set: the issuer may publish keys for others too.
		if err := k.UnmarshalJSON(raw); err != nil {
			continue
		}
		if k.Use != "" && k.Use != "sig" {
			continue
		}
		// Only public keys of asymmetric algorithms verify tokens: a
		// symmetric ("oct") key in a published set is a mistake of the
		// issuer's, and a private key is reduced to its public half.
		if k = k.Public(); !k.Valid() || !k.IsPublic() {
			continue
		}
		keys = append(keys, k)
	}
	return jwksURL, keys, nil
}

// candidates are the keys of set that may have signed a token whose
// header says kid and alg: those with that kid (every key, when the
// token names none) whose own alg, if they say one, is alg.
func candidates(set []jose.JSONWebKey, kid, alg string) []jose.JSONWebKey {
	var out []jose.JSONWebKey
	for _, k := range set {
		if kid != "" && k.KeyID != kid {
			continue
		}
		if k.Algorithm != "" && k.Algorithm != alg {
			continue
		}
		out = append(out, k)
	}
	return out
}
