package host

import (
	"github.com/agentwire/agentwire/mcp"
	"sync"
	"time"
)

// DefaultLegacyLifetime is how long the in-memory cache believes a server
// is legacy: 5 minutes after the probe that taught it, however many legacy
// connections succeed meanwhile, so an upgraded server is probed again
// (guarantee E5).
const DefaultLegacyLifetime = 5 * time.Minute

// EraEntry is what a cache knows about one server.
type EraEntry struct {
	Era     mcp.Era // Modern or Legacy
	Version string  // the protocol version last agreed (modern), or empty
}

// EraCache remembers which era a server speaks, keyed by the server's
// identity (for stdio: its command line). An implementation owns its expiry
// policy; the connecting functions (StartServer, NewClient, streamable.Connect)
// only read, store and forget.
//
// They store Legacy only after a definitive rejection of the probe
// (an error reply) or a discover result that lists only legacy versions;
// silence, a crash on the probe, and malformed answers teach nothing (guarantee
// E4). They store Modern after a successful modern negotiation and forget
// the entry when a negotiation based on it fails.
type EraCache interface {
	Get(key string) (EraEntry, bool)
	Put(key string, e EraEntry)
	Forget(key string)
}

// MemoryEraCacheOptions configures NewMemoryEraCache. The zero value means
// the real clock and DefaultLegacyLifetime.
type MemoryEraCacheOptions struct {
	Now            func() time.Time
	LegacyLifetime time.Duration
}

// MemoryEraCache is the default EraCache: in memory, with legacy entries
// expiring LegacyLifetime after they were stored and modern entries kept
// until forgotten.
type MemoryEraCache struct {
	now      func() time.Time
	lifetime time.Duration
	mu       sync.Mutex
	m        map[string]cached
}

type cached struct {
	entry  EraEntry
	stored time.Time
}

// NewMemoryEraCache returns an empty cache.
func NewMemoryEraCache(opts *MemoryEraCacheOptions) *MemoryEraCache {
	c := &MemoryEraCache{now: time.Now, lifetime: DefaultLegacyLifetime, m: map[string]cached{}}
	if opts != nil {
		if opts.Now != nil {
			c.now = opts.Now
		}
		if opts.LegacyLifetime > 0 {
			c.lifetime = opts.LegacyLifetime
		}
	}
	return c
}

// Get returns the entry for key, dropping a legacy entry past its lifetime.
func (c *MemoryEraCache) Get(key string) (EraEntry, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[key]
	if !ok {
		return EraEntry{}, false
	}
	if e.entry.Era == mcp.Legacy && !c.now().Before(e.stored.Add(c.lifetime)) {
		delete(c.m, key)
		return EraEntry{}, false
	}
	return e.entry, true
}

// Put stores an entry; its lifetime (for legacy) starts now.
func (c *MemoryEraCache) Put(key string, e EraEntry) {
	c.mu.Lock()
	c.m[key] = cached{entry: e, stored: c.now()}
	c.mu.Unlock()
}

// Forget drops the entry for key.
func (c *MemoryEraCache) Forget(key string) {
	c.mu.Lock()
	delete(c.m, key)
	c.mu.Unlock()
}
