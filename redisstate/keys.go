package redisstate

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/agentwire/agentwire/mcp/server"
	"github.com/redis/go-redis/v9"
)

// KeyOptions configures a key ring (State.Keys). The zero value (or nil)
// means the documented defaults.
type KeyOptions struct {
	// Refresh is how long the ring serves its cached keys before reading
	// them from Redis again. Default 5 s. A rotation made elsewhere is
	// seen within Refresh, and a new key signs only once every instance
	// has had Refresh to see it (see RotateKeys).
	Refresh time.Duration
	// RotateEvery, when positive, rotates the fleet's keys once the
	// current one is that old: every instance checks, one rotates (the
	// check and the rotation are one script). It must be at least the
	// lifetime of a requestState (an hour): a state sealed two rotations
	// ago no longer verifies. 0 means never (RotateKeys rotates).
	RotateEvery time.Duration
}

// keySize is the length of every key the ring makes (HMAC-SHA256).
const keySize = 32

// keyRing is a server.KeyRing over the prefix's "statekeys" hash.
type keyRing struct {
	s    *State
	opts KeyOptions

	fetch sync.Mutex // one read from Redis at a time

	mu        sync.Mutex
	have      bool
	cur, prev []byte
	rotatedAt time.Time
	fetchedAt time.Time // when the last read (or failed read) began
}

var _ server.KeyRing = (*keyRing)(nil)

// Keys returns a server.KeyRing the fleet shares: the keys live in Redis
// (the prefix's "statekeys" hash: current, previous, rotated_at), made
// by whichever instance needs one first (HSETNX: one wins), and are
// cached here for KeyOptions.Refresh, so that a Redis outage does not
// fail multi-round-trip requests while the cache holds keys. With
// RotateEvery set, the State rotates the keys on its own (Close stops
// it).
func (s *State) Keys(opts *KeyOptions) server.KeyRing {
	r := &keyRing{s: s}
	if opts != nil {
		r.opts = *opts
	}
	if r.opts.Refresh <= 0 {
		r.opts.Refresh = 5 * time.Second
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rings = append(s.rings, r)
	if r.opts.RotateEvery > 0 && !s.closed {
		if r.opts.RotateEvery < time.Hour {
			s.log.Warn("redisstate: RotateEvery is shorter than a requestState lives (1 h): retries sealed two rotations ago will fail", "rotate_every", r.opts.RotateEvery)
		}
		s.wg.Add(1)
		go r.rotateLoop()
	}
	return r
}

// grace is how long after a rotation the new key only verifies: every
// instance's cache has been read again by then (Refresh), the read that
// began last included (OpTimeout).
func (r *keyRing) grace() time.Duration { return r.opts.Refresh + r.s.opts.OpTimeout }

// StateKeys returns the key that signs and those that verify. Right
// after a rotation (for Refresh and OpTimeout) the previous key still
// signs and the new one only verifies, so an instance that has not yet
// seen the rotation verifies everything sealed meanwhile; then the new
// key signs and the previous verifies.
func (r *keyRing) StateKeys(ctx context.Context) ([]byte, [][]byte, error) {
	now := r.s.opts.Now()
	r.mu.Lock()
	have, fresh := r.have, r.have && now.Sub(r.fetchedAt) < r.opts.Refresh
	r.mu.Unlock()
	if !fresh {
		if have {
			// Stale: one caller reads again, the others go on with the
			// cache, and a read that fails keeps the cache.
			if r.fetch.TryLock() {
				r.refresh(ctx, now)
				r.fetch.Unlock()
			}
		} else {
			r.fetch.Lock()
			r.mu.Lock()
			have = r.have
			r.mu.Unlock()
			var err error
			if !have {
				err = r.refresh(ctx, now)
			}
			r.fetch.Unlock()
			if err != nil {
				return nil, nil, err
			}
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.have {
		return nil, nil, errors.New("redisstate: no requestState key yet")
	}
	cur, prev := r.cur, r.prev
	if prev != nil && now.Sub(r.rotatedAt) < r.grace() {
		cur, prev = prev, cur
	}
	var verify [][]byte
	if prev != nil {
		verify = [][]byte{bytes.Clone(prev)}
	}
	return bytes.Clone(cur), verify, nil
}

// refresh reads the keys from Redis, making the first one when there is
// none (HSETNX in a transaction: of instances racing, one key wins and
// every one reads it back).
func (r *keyRing) refresh(ctx context.Context, now time.Time) error {
	s := r.s
	r.mu.Lock()
	r.fetchedAt = now // a failed read too: the next waits for Refresh
	r.mu.Unlock()
	octx, cancel := s.op(ctx)
	defer cancel()
	vals, err := s.client.HMGet(octx, s.k.stateKeys, "current", "previous", "rotated_at").Result()
	if err == nil && vals[0] == nil {
		key := newKey()
		var got *redis.SliceCmd
		_, err = s.client.TxPipelined(octx, func(p redis.Pipeliner) error {
			p.HSetNX(octx, s.k.stateKeys, "current", key)
			p.HSetNX(octx, s.k.stateKeys, "rotated_at", strconv.FormatInt(unixMs(now), 10))
			got = p.HMGet(octx, s.k.stateKeys, "current", "previous", "rotated_at")
			return nil
		})
		if err == nil {
			vals = got.Val()
		}
	}
	if err != nil {
		return s.redisErr("state keys", err)
	}
	cur, _ := vals[0].(string)
	if len(cur) < keySize {
		return fmt.Errorf("redisstate: the requestState key in %s is missing or shorter than %d bytes", s.k.stateKeys, keySize)
	}
	prev, _ := vals[1].(string)
	at, _ := vals[2].(string)
	ms, _ := strconv.ParseInt(at, 10, 64)
	r.mu.Lock()
	r.have, r.cur, r.rotatedAt = true, []byte(cur), time.UnixMilli(ms)
	r.prev = nil
	if len(prev) >= keySize {
		r.prev = []byte(prev)
	}
	r.mu.Unlock()
	return nil
}

// invalidate makes the next StateKeys read Redis again.
func (r *keyRing) invalidate() {
	r.mu.Lock()
	r.fetchedAt = time.Time{}
	r.mu.Unlock()
}

func newKey() []byte {
	k := make([]byte, keySize)
	rand.Read(k)
	return k
}

// rotateScript moves current to previous and makes a new current, unless
// minAge is positive and the current key is younger than that (so that
// of N instances rotating on a schedule, one does). It returns 1 when it
// rotated.
//
// KEYS: the hash. ARGV: new key, now (unix ms), minAge (ms).
var rotateScript = redis.NewScript(`
local cur = redis.call('HGET', KEYS[1], 'current')
local at = tonumber(redis.call('HGET', KEYS[1], 'rotated_at') or '0') or 0
local minAge = tonumber(ARGV[3])
if minAge > 0 and cur and (tonumber(ARGV[2]) - at) < minAge then return 0 end
if cur then redis.call('HSET', KEYS[1], 'previous', cur) end
redis.call('HSET', KEYS[1], 'current', ARGV[1], 'rotated_at', ARGV[2])
return 1
`)

// RotateKeys rotates the fleet's requestState keys: in one script, the
// current key becomes the previous and a new random key the current.
// Every instance's ring verifies under both; the new key starts sealing
// once every instance has had its Refresh to see it. A state sealed
// before the rotation verifies until the next one.
func (s *State) RotateKeys(ctx context.Context) error {
	_, err := s.rotate(ctx, 0)
	return err
}

func (s *State) rotate(ctx context.Context, minAge time.Duration) (bool, error) {
	octx, cancel := s.op(ctx)
	defer cancel()
	n, err := rotateScript.Run(octx, s.client, []string{s.k.stateKeys}, newKey(), unixMs(s.opts.Now()), minAge.Milliseconds()).Int64()
	if err != nil {
		return false, s.redisErr("rotate state keys", err)
	}
	if n == 1 {
		s.rotations.Add(1)
		s.log.Info("redisstate: the requestState keys were rotated")
		s.mu.Lock()
		rings := append([]*keyRing(nil), s.rings...)
		s.mu.Unlock()
		for _, r := range rings {
			r.invalidate()
		}
	}
	return n == 1, nil
}

// rotateLoop rotates the keys once they are RotateEvery old, looking a
// few times per period.
func (r *keyRing) rotateLoop() {
	s := r.s
	defer s.wg.Done()
	t := time.NewTicker(min(max(r.opts.RotateEvery/8, 50*time.Millisecond), time.Minute))
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
		}
		s.rotate(s.ctx, r.opts.RotateEvery)
	}
}
