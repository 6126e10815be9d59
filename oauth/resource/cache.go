package resource

import (
	"container/list"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/agentwire/agentwire/mcp/auth"
)

// tokenCache remembers verified identities by the SHA-256 of their
// token, never the token itself, for at most a given time each, and
// holds at most size of them: when full, the least recently used goes.
type tokenCache struct {
	mu      sync.Mutex
	size    int
	entries map[[32]byte]*list.Element
	lru     list.List // of *cacheEntry, most recently used first
}

type cacheEntry struct {
	key   [32]byte
	id    *auth.Identity
	until time.Time
}

func newTokenCache(size int) *tokenCache {
	return &tokenCache{size: size, entries: make(map[[32]byte]*list.Element)}
}

// get returns a copy of the identity remembered for key, or nil.
func (c *tokenCache) get(key [32]byte, now time.Time) *auth.Identity {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.entries[key]
	if !ok {
		return nil
	}
	e := el.Value.(*cacheEntry)
	if !now.Before(e.until) {
		c.lru.Remove(el)
		delete(c.entries, key)
		return nil
	}
	c.lru.MoveToFront(el)
	return cloneIdentity(e.id)
}

// put remembers id for key until then.
func (c *tokenCache) put(key [32]byte, id *auth.Identity, until, now time.Time) {
	if !now.Before(until) {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.entries[key]; ok {
		c.lru.Remove(el)
		delete(c.entries, key)
	}
	if len(c.entries) >= c.size {
		victim := c.lru.Back()
		c.lru.Remove(victim)
		delete(c.entries, victim.Value.(*cacheEntry).key)
	}
	c.entries[key] = c.lru.PushFront(&cacheEntry{key: key, id: cloneIdentity(id), until: until})
}

// cloneIdentity copies id deeply enough that a caller who changes its
// slices or its top-level claims does not change what the cache holds.
func cloneIdentity(id *auth.Identity) *auth.Identity {
	out := *id
	out.Audience = slices.Clone(id.Audience)
	out.Scopes = slices.Clone(id.Scopes)
	out.Claims = maps.Clone(id.Claims)
	return &out
}
