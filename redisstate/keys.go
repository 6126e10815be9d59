package redisstate

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
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
	// seen within Refresh, and a new key signs here only once this
	// instance has known it for Refresh + OpTimeout (see RotateKeys).
	Refresh time.Duration
	// RotateEvery, when positive, rotates the fleet's keys once the
	// current one is that old (by the Redis server's clock): every
	// instance checks, one rotates (the check and the rotation are one
	// script). It must be at least the lifetime of a requestState (an
	// hour): a state sealed two rotations ago no longer verifies. 0
	// means never (RotateKeys rotates).
	RotateEvery time.Duration
}

// keySize is the length of every key the ring makes (HMAC-SHA256).
const keySize = 32

// keyRing is a server.KeyRing over the prefix's "statekeys" hash.
//
// Its clock is this process's monotonic one only: a key read from Redis
// for the first time here signs only grace later (until then the key
// that signed before goes on signing), so that every instance that
// reads Redis as it should has it by then. A cache older than grace may
// lack a key another instance signs with: StateKeys then waits for a
// read (one at a time, shared by every caller) within its context.
type keyRing struct {
	s    *State
	opts KeyOptions

	mu      sync.Mutex
	have    bool
	cur     []byte    // Redis's current key
	prev    []byte    // Redis's previous key (nil for none)
	signer  []byte    // the key this ring signs with while cur is new here
	kept    []byte    // a key that signed here before and that Redis no longer has (a ring remade): it still verifies
	curSeen time.Time // when this ring first read cur
	readAt  time.Time // when the last successful read began
	failAt  time.Time // when the last read failed (zero once one succeeds)
	flight  *keyFlight
}

// keyFlight is the read from Redis in progress, that callers share.
type keyFlight struct {
	done chan struct{}
	err  error
}

var _ server.KeyRing = (*keyRing)(nil)

// Keys returns a server.KeyRing the fleet shares: the keys live in Redis
// (the prefix's "statekeys" hash: current, previous, rotated_at), made
// by whichever instance needs one first (one wins), and are cached here
// for KeyOptions.Refresh, so that a Redis outage does not fail
// multi-round-trip requests while the cache holds keys. With
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

// grace is how long a key read here for the first time only verifies:
// by then every instance whose reads succeed has read it too (each reads
// again every Refresh, a read taking at most OpTimeout).
func (r *keyRing) grace() time.Duration { return r.opts.Refresh + r.s.opts.OpTimeout }

// StateKeys returns the key that signs and those that verify. A key new
// to this ring only verifies for grace, while the one that signed before
// goes on signing; then it signs, and the others verify.
//
// A cache younger than Refresh is served as is; one younger than grace
// is served while a read runs behind; an older one (or none) waits for
// the read (shared by every caller, bounded by ctx and OpTimeout), since
// another instance may sign with a key it lacks. A read that fails keeps
// the cache, which is then served without waiting for Refresh; with no
// cache, the error is returned.
func (r *keyRing) StateKeys(ctx context.Context) ([]byte, [][]byte, error) {
	now := time.Now()
	r.mu.Lock()
	age := now.Sub(r.readAt)
	switch {
	case r.have && age < r.opts.Refresh:
	case r.have && (age < r.grace() || (!r.failAt.IsZero() && now.Sub(r.failAt) < r.opts.Refresh)):
		r.startLocked()
	default:
		f := r.startLocked()
		r.mu.Unlock()
		select {
		case <-f.done:
		case <-ctx.Done():
		}
		r.mu.Lock()
		if !r.have {
			r.mu.Unlock()
			if err := ctx.Err(); err != nil {
				return nil, nil, err
			}
			select {
			case <-f.done:
				if f.err != nil {
					return nil, nil, f.err
				}
			default:
			}
			return nil, nil, errors.New("redisstate: no requestState key yet")
		}
	}
	defer r.mu.Unlock()
	return r.keysLocked(time.Now())
}

// keysLocked picks the signing key and the verifying ones at now.
func (r *keyRing) keysLocked(now time.Time) ([]byte, [][]byte, error) {
	if now.Sub(r.curSeen) >= r.grace() || (r.signer == nil && r.prev == nil) {
		if old := r.signer; old != nil && !bytes.Equal(old, r.cur) && !bytes.Equal(old, r.prev) {
			r.kept = old // Redis lost it (an empty Redis made a new ring): states sealed with it here still verify
		}
		r.signer = r.cur
	}
	sign := r.signer
	if sign == nil {
		sign = r.prev // a ring that starts while the newest key is fresh signs with the one before
	}
	var verify [][]byte
	for _, k := range [][]byte{r.cur, r.prev, r.signer, r.kept} {
		if k == nil || bytes.Equal(k, sign) {
			continue
		}
		dup := false
		for _, v := range verify {
			dup = dup || bytes.Equal(v, k)
		}
		if !dup {
			verify = append(verify, bytes.Clone(k))
		}
	}
	return bytes.Clone(sign), verify, nil
}

// startLocked starts a read from Redis unless one is under way, and
// returns it. The read runs on a goroutine of the State's, bounded by
// OpTimeout and by Close, not by any caller's context.
func (r *keyRing) startLocked() *keyFlight {
	if r.flight != nil {
		return r.flight
	}
	f := &keyFlight{done: make(chan struct{})}
	s := r.s
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		f.err = errors.New("redisstate: the State is closed")
		close(f.done)
		return f
	}
	s.wg.Add(1)
	s.mu.Unlock()
	r.flight = f
	go func() {
		defer s.wg.Done()
		start := time.Now()
		ctx, cancel := s.op(s.ctx)
		cur, prev, err := r.read(ctx)
		cancel()
		r.mu.Lock()
		if err == nil {
			if !r.have || !bytes.Equal(cur, r.cur) {
				r.curSeen = start
			}
			r.have, r.cur, r.prev, r.readAt, r.failAt = true, cur, prev, start, time.Time{}
		} else {
			r.failAt = start
		}
		r.flight = nil
		f.err = err
		close(f.done)
		r.mu.Unlock()
	}()
	return f
}

// createKeyScript makes the ring's first key unless one is there
// (rotated_at on Redis's clock), and returns current and previous.
//
// KEYS: the hash. ARGV: a new key.
var createKeyScript = redis.NewScript(luaNow + `
if redis.call('HSETNX', KEYS[1], 'current', ARGV[1]) == 1 then
  redis.call('HSET', KEYS[1], 'rotated_at', string.format('%d', now_ms()))
end
return redis.call('HMGET', KEYS[1], 'current', 'previous')
`)

// read reads the keys from Redis, making the first one when there is
// none (of instances racing, one key wins and every one reads it back).
func (r *keyRing) read(ctx context.Context) (cur, prev []byte, err error) {
	s := r.s
	vals, err := s.client.HMGet(ctx, s.k.stateKeys, "current", "previous").Result()
	if err == nil && vals[0] == nil {
		vals, err = createKeyScript.Run(ctx, s.client, []string{s.k.stateKeys}, newKey()).Slice()
	}
	if err != nil {
		return nil, nil, s.redisErr("state keys", err)
	}
	c, _ := vals[0].(string)
	if len(c) < keySize {
		return nil, nil, fmt.Errorf("redisstate: the requestState key in %s is missing or shorter than %d bytes", s.k.stateKeys, keySize)
	}
	if p, _ := vals[1].(string); len(p) >= keySize {
		prev = []byte(p)
	}
	return []byte(c), prev, nil
}

// invalidate makes the next StateKeys wait for a read from Redis.
func (r *keyRing) invalidate() {
	r.mu.Lock()
	r.readAt, r.failAt = time.Time{}, time.Time{}
	r.mu.Unlock()
}

func newKey() []byte {
	k := make([]byte, keySize)
	rand.Read(k)
	return k
}

// rotateScript moves current to previous and makes a new current, unless
// minAge is positive and the current key is younger than that by Redis's
// clock (so that of N instances rotating on a schedule, one does). It
// returns 1 when it rotated.
//
// KEYS: the hash. ARGV: new key, minAge (ms).
var rotateScript = redis.NewScript(luaNow + `
local now = now_ms()
local cur = redis.call('HGET', KEYS[1], 'current')
local at = tonumber(redis.call('HGET', KEYS[1], 'rotated_at') or '0') or 0
local minAge = tonumber(ARGV[2])
if minAge > 0 and cur and (now - at) < minAge then return 0 end
if cur then redis.call('HSET', KEYS[1], 'previous', cur) end
redis.call('HSET', KEYS[1], 'current', ARGV[1], 'rotated_at', string.format('%d', now))
return 1
`)

// RotateKeys rotates the fleet's requestState keys: in one script, the
// current key becomes the previous and a new random key the current.
// Every instance's ring verifies under both; the new key starts sealing
// on an instance once it has known it for Refresh + OpTimeout. A state
// sealed before the rotation verifies until the next one.
func (s *State) RotateKeys(ctx context.Context) error {
	_, err := s.rotate(ctx, 0)
	return err
}

func (s *State) rotate(ctx context.Context, minAge time.Duration) (bool, error) {
	octx, cancel := s.op(ctx)
	defer cancel()
	n, err := rotateScript.Run(octx, s.client, []string{s.k.stateKeys}, newKey(), minAge.Milliseconds()).Int64()
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
