package redisstate

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/agentwire/agentwire/jsonrpc"
	"github.com/agentwire/agentwire/mcp/tasks"
	"github.com/redis/go-redis/v9"
)

// LostMessage is the statusMessage of a task whose instance was lost
// (its lease lapsed); its error is -32603 with the same words.
const LostMessage = "the server instance running the task was lost"

// leaseBatch bounds the ids one renewal script renews.
const leaseBatch = 500

// sweepBatch bounds the lapsed leases and expired index entries one
// command of a sweep takes; a sweep goes on batch after batch until one
// comes back short or its time budget (sweepBudget) is spent.
const sweepBatch = 500

// renewScript renews the leases of tasks running on one instance: for
// each, the head of its record (GETRANGE: the record is not read whole)
// says whether it is still live, and a live one gets a new deadline on
// Redis's clock (ZADD without XX: a lease Redis lost is put back; a
// lease a sweeper took has gone with the task's end, in one script).
// It returns a code per task: -1 gone; else 1 cancel requested, 2
// ended, 4 (live) its lease was missing and was put back.
//
// KEYS: live, then each task's key. ARGV: the lease in ms, then each id.
var renewScript = redis.NewScript(luaNow + `
local deadline = string.format('%d', now_ms() + tonumber(ARGV[1]))
local out = {}
for i = 2, #KEYS do
  local id = ARGV[i]
  local h = redis.call('GETRANGE', KEYS[i], 0, ` + strconv.Itoa(headBytes-1) + `)
  local c
  if h == '' then
    redis.call('ZREM', KEYS[1], id)
    c = -1
  elseif string.find(h, '^{"rev":%d+,"ended":true') then
    redis.call('ZREM', KEYS[1], id)
    c = 2
    if string.find(h, '^{"rev":%d+,"ended":true,"cancel":true') then c = 3 end
  else
    c = 0
    if string.find(h, '^{"rev":%d+,"cancel":true') then c = 1 end
    if redis.call('ZADD', KEYS[1], deadline, id) == 1 then c = c + 4 end
  end
  out[#out + 1] = c
end
return out
`)

// lapsedScript lists leases whose deadline has passed by Redis's clock.
//
// KEYS: live. ARGV: offset, count.
var lapsedScript = redis.NewScript(luaNow + `
return redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', string.format('%d', now_ms()), 'LIMIT', ARGV[1], ARGV[2])
`)

// failScript fails a task whose lease lapsed, in one step with the
// checks: its lease is still lapsed (by Redis's clock), and its record
// is the revision the sweeper read (else it is read again). It returns
// 0 no longer live (ended), 1 renewed, 2 gone, 3 changed, 4 failed.
//
// KEYS: task, live, ended. ARGV: the head of the revision read, the
// failed record, id, expiry in ms, expiry score, ended member, events
// channel, event message.
var failScript = redis.NewScript(luaNow + `
local score = redis.call('ZSCORE', KEYS[2], ARGV[3])
if not score then return 0 end
if tonumber(score) > now_ms() then return 1 end
local head = redis.call('GETRANGE', KEYS[1], 0, string.len(ARGV[1]) - 1)
if head == '' then
  redis.call('ZREM', KEYS[2], ARGV[3])
  return 2
end
if head ~= ARGV[1] then return 3 end
redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[4])
redis.call('ZADD', KEYS[3], ARGV[5], ARGV[6])
redis.call('ZREM', KEYS[2], ARGV[3])
redis.call('PUBLISH', ARGV[7], ARGV[8])
return 4
`)

// expiredScript lists the ended set's entries whose expiry has passed by
// Redis's clock, after that clock.
//
// KEYS: ended. ARGV: count.
var expiredScript = redis.NewScript(luaNow + `
local now = string.format('%d', now_ms())
local m = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, ARGV[1])
table.insert(m, 1, now)
return m
`)

// renewRetry is how soon a renewal that failed is tried again: an
// instance renews within about this much of Redis coming back.
func (s *State) renewRetry() time.Duration {
	return min(max(s.opts.Lease/20, 50*time.Millisecond), time.Second)
}

// leaseLoop renews the leases of the tasks created here every Lease/3,
// at once after the Pub/Sub connection was subscribed again, and every
// renewRetry while renewing fails.
func (s *State) leaseLoop() {
	defer s.wg.Done()
	t := time.NewTimer(s.opts.Lease / 3)
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
		case <-s.kick:
		}
		next := s.opts.Lease / 3
		if s.renew() != nil {
			next = s.renewRetry()
		}
		t.Reset(next)
	}
}

// renew moves the lease deadline of every live task created here (a
// script per batch that reads only the head of each record): a task
// cancelled or ended elsewhere is read and told to the local subscribers
// by the dispatcher (its Pub/Sub event may have been lost), and an ended
// or vanished one is forgotten. A batch that fails does not stop the
// next; the first error is returned.
func (s *State) renew() error {
	s.mu.Lock()
	ids := make([]string, 0, len(s.local))
	for id := range s.local {
		ids = append(ids, id)
	}
	s.mu.Unlock()
	var failed error
	for len(ids) > 0 {
		batch := ids[:min(len(ids), leaseBatch)]
		ids = ids[len(batch):]
		ks := make([]string, 1+len(batch))
		args := make([]any, 1+len(batch))
		ks[0], args[0] = s.k.live, s.opts.Lease.Milliseconds()
		for i, id := range batch {
			ks[1+i], args[1+i] = s.k.task(id), id
		}
		ctx, cancel := s.op(s.ctx)
		codes, err := renewScript.Run(ctx, s.client, ks, args...).Int64Slice()
		cancel()
		if err != nil {
			if s.ctx.Err() != nil {
				return err
			}
			s.redisErr("renew leases", err)
			if failed == nil {
				failed = err
			}
			continue
		}
		var restored int64
		for i, c := range codes {
			if i >= len(batch) {
				break
			}
			id := batch[i]
			switch {
			case c < 0: // expired or gone: nothing to renew
				s.forget(id)
			case c&2 != 0:
				s.forget(id)
				s.queueRecheck(id)
			default:
				s.renewed.Add(1)
				if c&1 != 0 {
					s.queueRecheck(id)
				}
				if c&4 != 0 {
					restored++
				}
			}
		}
		if restored > 0 {
			n := s.restored.Add(restored)
			s.log.Warn("redisstate: leases of live tasks were missing from Redis and were put back (Redis lost or evicted them: run it with maxmemory-policy noeviction)",
				"restored", restored, "leases_restored", n)
		}
	}
	return failed
}

// queueRecheck has the dispatcher read a task running here and tell the
// local subscribers, in order with the events.
func (s *State) queueRecheck(id string) {
	s.noteDropped(s.inbox.push(inItem{kind: itemRecheck, payload: id}), "dispatcher")
}

// Released stops renewing the lease of a task whose handler has
// returned (tasks.Releaser): if its outcome was written the task has
// ended already; if not, another instance's sweeper fails it once the
// lease runs out.
func (st *store) Released(id string) { st.s.forget(id) }

func (s *State) forget(id string) {
	s.mu.Lock()
	delete(s.local, id)
	s.mu.Unlock()
}

func (s *State) isLocal(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.local[id]
	return ok
}

// sweepBudget bounds one sweep's time (it runs every Lease/3); what is
// left waits for the next (Stats.SweepsCut).
func (s *State) sweepBudget() time.Duration { return max(s.opts.Lease/6, 50*time.Millisecond) }

// sweepLoop sweeps every Lease/3, and looks once at Redis's eviction
// policy.
func (s *State) sweepLoop() {
	defer s.wg.Done()
	t := time.NewTicker(s.opts.Lease / 3)
	defer t.Stop()
	policyChecked := false
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
		}
		if !policyChecked {
			policyChecked = s.checkEviction()
		}
		s.sweep()
	}
}

// checkEviction warns when Redis may evict keys that are not expiring
// (allkeys-*): a lease, the sequence or the keys could go. It reports
// whether it had an answer (a Redis that refuses CONFIG is one).
func (s *State) checkEviction() bool {
	ctx, cancel := s.op(s.ctx)
	defer cancel()
	v, err := s.client.ConfigGet(ctx, "maxmemory-policy").Result()
	if err != nil {
		var re redis.Error
		return errors.As(err, &re) // refused: ask no more; not answered: ask again
	}
	if p := v["maxmemory-policy"]; strings.HasPrefix(p, "allkeys-") {
		s.log.Warn("redisstate: Redis may evict any key (maxmemory-policy "+p+"): leases, the sequence and the requestState keys can be lost; use noeviction (or volatile-*)", "maxmemory_policy", p)
	}
	return true
}

// sweep fails the tasks whose lease has lapsed (their instance is gone)
// and takes the expired tasks out of their owner indexes. Every instance
// sweeps; the work is idempotent, and a task is failed once (an ended
// task stays ended). Lapsed leases are taken only once Redis has
// answered this State for a whole Lease: after an outage, every live
// instance has had that long to renew.
func (s *State) sweep() {
	deadline := time.Now().Add(s.sweepBudget())
	cut := false
	if s.healthy() {
		if s.held.Swap(false) {
			s.log.Info("redisstate: Redis has answered for a whole Lease: lapsed leases are taken again")
		}
		cut = s.sweepLeases(deadline)
	} else {
		s.sweepsHeld.Add(1)
		if s.errAt.Load() != 0 && !s.held.Swap(true) {
			s.log.Warn("redisstate: lapsed leases are not taken until Redis has answered this instance for a whole Lease (every live instance renews first)", "lease", s.opts.Lease)
		}
	}
	if !cut && s.ctx.Err() == nil {
		cut = s.sweepExpired(deadline)
	}
	if cut {
		n := s.sweepsCut.Add(1)
		if s.cutLog.allow() {
			s.log.Warn("redisstate: a sweep ran out of its time budget; the rest waits for the next", "budget", s.sweepBudget(), "sweeps_cut", n)
		}
	}
}

// sweepLeases fails the tasks of lapsed leases, batch after batch,
// until a batch comes back short or the deadline passes (then it
// reports true: work is left).
func (s *State) sweepLeases(deadline time.Time) bool {
	offset := 0 // lapsed entries left in place this sweep (running here, or failing)
	for {
		if time.Now().After(deadline) {
			return true
		}
		ctx, cancel := s.op(s.ctx)
		ids, err := lapsedScript.Run(ctx, s.client, []string{s.k.live}, offset, sweepBatch).StringSlice()
		cancel()
		if err != nil {
			if s.ctx.Err() == nil {
				s.redisErr("sweep leases", err)
			}
			return false
		}
		for _, id := range ids {
			if s.ctx.Err() != nil {
				return false
			}
			if time.Now().After(deadline) {
				return true
			}
			if s.isLocal(id) {
				// Running here: this instance renews it.
				offset++
				continue
			}
			if s.failLost(id) == lostKept {
				offset++
			}
		}
		if len(ids) < sweepBatch {
			return false
		}
	}
}

// sweepExpired takes the tasks whose record has expired out of their
// owner indexes and of the ended set, batch after batch, until a batch
// comes back short or the deadline passes (then it reports true). An
// entry whose record is still there (the clocks of the State that ended
// it and of Redis differ) is put back at the record's own expiry.
func (s *State) sweepExpired(deadline time.Time) bool {
	for {
		if time.Now().After(deadline) {
			return true
		}
		ctx, cancel := s.op(s.ctx)
		full, err := s.sweepExpiredBatch(ctx)
		cancel()
		if err != nil {
			if s.ctx.Err() == nil {
				s.redisErr("sweep expired", err)
			}
			return false
		}
		if !full {
			return false
		}
	}
}

func (s *State) sweepExpiredBatch(ctx context.Context) (full bool, err error) {
	res, err := expiredScript.Run(ctx, s.client, []string{s.k.ended}, sweepBatch).StringSlice()
	if err != nil || len(res) < 2 {
		return false, err
	}
	now, _ := strconv.ParseInt(res[0], 10, 64)
	members := res[1:]
	pttls := make([]*redis.Cmd, len(members))
	_, err = s.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, m := range members {
			if id, _, ok := parseEndedMember(m); ok {
				pttls[i] = p.Do(ctx, "PTTL", s.k.task(id))
			}
		}
		return nil
	})
	if err != nil {
		return false, err
	}
	var gone int64
	_, err = s.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, m := range members {
			id, index, ok := parseEndedMember(m)
			if !ok {
				p.ZRem(ctx, s.k.ended, m)
				continue
			}
			switch ms, _ := pttls[i].Int64(); {
			case ms == -2: // expired: out of its index
				p.ZRem(ctx, index, id)
				p.ZRem(ctx, s.k.ended, m)
				gone++
			case ms < 0: // a record that does not expire is not an ended one
				p.ZRem(ctx, s.k.ended, m)
			default:
				p.ZAddXX(ctx, s.k.ended, redis.Z{Score: float64(now + ms + 1), Member: m})
			}
		}
		return nil
	})
	if err != nil {
		return false, err
	}
	s.expired.Add(gone)
	return len(members) >= sweepBatch, nil
}

// lostError is the error object of a task whose instance was lost.
var lostError, _ = json.Marshal(jsonrpc.NewError(jsonrpc.CodeInternalError, "Internal error: "+LostMessage, nil))

// What failLost did with a lapsed lease.
type lostOutcome int

const (
	lostKept    lostOutcome = iota // nothing: Redis failed, or the task kept changing
	lostGone                       // the entry is gone: the task had ended or vanished
	lostRenewed                    // its instance renewed it meanwhile
	lostSwept                      // the task was failed
)

// failLost fails a task whose lease lapsed, unless it has ended or its
// lease was renewed meanwhile, and takes it out of the live set: it reads
// the record, and a script checks the lease and the revision and writes
// in one step (read again when another writer got there first).
func (s *State) failLost(id string) lostOutcome {
	for try := 0; try < maxTries; try++ {
		t, rev, err := s.store.get(s.ctx, id)
		if err == nil && t.Status.Terminal() {
			err = tasks.ErrNotFound // ended: only its lease is left to take
		}
		if errors.Is(err, tasks.ErrNotFound) {
			ctx, cancel := s.op(s.ctx)
			err := s.client.ZRem(ctx, s.k.live, id).Err()
			cancel()
			if err != nil {
				if s.ctx.Err() == nil {
					s.redisErr("sweep leases", err)
				}
				return lostKept
			}
			return lostGone
		}
		if err != nil {
			return lostKept // counted and logged by get
		}
		now := s.opts.Now()
		t.Status = tasks.Failed
		t.StatusMessage = LostMessage
		t.Error = append(json.RawMessage(nil), lostError...)
		t.Result = nil
		t.InputRequests, t.Responses = nil, nil
		t.LastUpdatedAt, t.EndedAt = now.UTC(), now.UTC()
		b, err := encodeStored(t, rev+1)
		if err != nil {
			return lostKept
		}
		index := s.k.index(t.Owner, t.Scope)
		ctx, cancel := s.op(s.ctx)
		n, err := failScript.Run(ctx, s.client, []string{s.k.task(id), s.k.live, s.k.ended},
			revHead(rev), b, id, s.store.expiry(t, now), unixMs(t.ExpiresAt()), endedMember(id, index), s.k.events, eventMessage(id, rev+1, b)).Int64()
		cancel()
		if err != nil {
			if s.ctx.Err() == nil {
				s.redisErr("sweep leases", err)
			}
			return lostKept
		}
		switch n {
		case 0, 2:
			return lostGone
		case 1:
			return lostRenewed
		case 4:
			s.swept.Add(1)
			s.published.Add(1)
			s.log.Warn("redisstate: a task is failed: the instance running it was lost (its lease lapsed)", "task", id)
			return lostSwept
		}
		s.retries.Add(1)
		if backoff(s.ctx, try) != nil {
			return lostKept
		}
	}
	s.conflicts.Add(1)
	s.log.Warn("redisstate: failing a lost task is given up for this sweep: the task kept changing under it", "task", id, "tries", maxTries)
	return lostKept
}
