package redisstate

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"time"

	"github.com/agentwire/agentwire/jsonrpc"
	"github.com/agentwire/agentwire/mcp/tasks"
	"github.com/redis/go-redis/v9"
)

// LostMessage is the statusMessage of a task whose instance was lost
// (its lease lapsed); its error is -32603 with the same words.
const LostMessage = "the server instance running the task was lost"

// leaseBatch bounds the ids one command renews or reads.
const leaseBatch = 500

// sweepBatch bounds the lapsed leases and expired index entries one sweep
// takes (the rest wait for the next).
const sweepBatch = 500

var errRenewed = errors.New("redisstate: the lease was renewed")
var errEnded = errors.New("redisstate: the task has ended")

// leaseLoop renews the leases of the tasks created here every Lease/3,
// and at once after the Pub/Sub connection was subscribed again.
func (s *State) leaseLoop() {
	defer s.wg.Done()
	t := time.NewTicker(s.opts.Lease / 3)
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
		case <-s.kick:
		}
		s.renew()
	}
}

// renew moves the lease deadline of every live task created here (ZADD
// XX: a lease the sweeper has already taken is not given back), and
// reads each record: a task cancelled or ended elsewhere is told to the
// local subscribers (its Pub/Sub event may have been lost), and an ended
// one is forgotten.
func (s *State) renew() {
	s.mu.Lock()
	ids := make([]string, 0, len(s.local))
	for id := range s.local {
		ids = append(ids, id)
	}
	s.mu.Unlock()
	for len(ids) > 0 {
		batch := ids[:min(len(ids), leaseBatch)]
		ids = ids[len(batch):]
		deadline := float64(unixMs(s.opts.Now().Add(s.opts.Lease)))
		zs := make([]redis.Z, len(batch))
		ks := make([]string, len(batch))
		for i, id := range batch {
			zs[i] = redis.Z{Score: deadline, Member: id}
			ks[i] = s.k.task(id)
		}
		ctx, cancel := s.op(s.ctx)
		var renewed *redis.IntCmd
		var records *redis.SliceCmd
		_, err := s.client.Pipelined(ctx, func(p redis.Pipeliner) error {
			renewed = p.ZAddArgs(ctx, s.k.live, redis.ZAddArgs{XX: true, Ch: true, Members: zs})
			records = p.MGet(ctx, ks...)
			return nil
		})
		cancel()
		if err != nil {
			if s.ctx.Err() == nil {
				s.redisErr("renew leases", err)
			}
			return
		}
		s.renewed.Add(renewed.Val())
		for i, v := range records.Val() {
			str, ok := v.(string)
			if !ok { // expired or gone: nothing to renew
				s.forget(batch[i])
				continue
			}
			t, err := decodeTask(batch[i], []byte(str))
			if err != nil {
				continue
			}
			if t.Status.Terminal() {
				s.forget(t.ID)
			}
			if t.CancelRequested || t.Status.Terminal() {
				s.deliver(t)
			}
		}
	}
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

// sweepLoop sweeps every Lease/3.
func (s *State) sweepLoop() {
	defer s.wg.Done()
	t := time.NewTicker(s.opts.Lease / 3)
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
		}
		s.sweep()
	}
}

// sweep fails the tasks whose lease has lapsed (their instance is gone)
// and takes the expired tasks out of their owner indexes. Every instance
// sweeps; the work is idempotent, and a task is failed once (an ended
// task stays ended).
func (s *State) sweep() {
	now := s.opts.Now()
	ctx, cancel := s.op(s.ctx)
	lapsed, err := s.client.ZRangeByScore(ctx, s.k.live, &redis.ZRangeBy{Min: "-inf", Max: strconv.FormatInt(unixMs(now), 10), Count: sweepBatch}).Result()
	cancel()
	if err != nil {
		if s.ctx.Err() == nil {
			s.redisErr("sweep leases", err)
		}
		return
	}
	for _, id := range lapsed {
		if s.ctx.Err() != nil {
			return
		}
		if s.isLocal(id) {
			// Running here: this instance renews it (a Redis outage
			// longer than Lease let it lapse); other instances may fail
			// it all the same.
			continue
		}
		s.failLost(id)
	}

	ctx, cancel = s.op(s.ctx)
	defer cancel()
	expired, err := s.client.ZRangeByScore(ctx, s.k.ended, &redis.ZRangeBy{Min: "-inf", Max: strconv.FormatInt(unixMs(now), 10), Count: sweepBatch}).Result()
	if err != nil || len(expired) == 0 {
		if err != nil && s.ctx.Err() == nil {
			s.redisErr("sweep expired", err)
		}
		return
	}
	_, err = s.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		members := make([]any, len(expired))
		for i, m := range expired {
			members[i] = m
			if id, index, ok := parseEndedMember(m); ok {
				p.ZRem(ctx, index, id)
			}
		}
		p.ZRem(ctx, s.k.ended, members...)
		return nil
	})
	if err != nil && s.ctx.Err() == nil {
		s.redisErr("sweep expired", err)
	}
}

// lostError is the error object of a task whose instance was lost.
var lostError, _ = json.Marshal(jsonrpc.NewError(jsonrpc.CodeInternalError, "Internal error: "+LostMessage, nil))

// failLost fails a task whose lease lapsed, unless it has ended or its
// lease was renewed meanwhile, and takes it out of the live set.
func (s *State) failLost(id string) {
	now := s.opts.Now()
	_, err := s.store.update(s.ctx, id, func(t *tasks.Task) error {
		if t.Status.Terminal() {
			return errEnded
		}
		t.Status = tasks.Failed
		t.StatusMessage = LostMessage
		t.Error = append(json.RawMessage(nil), lostError...)
		t.Result = nil
		t.InputRequests, t.Responses = nil, nil
		t.LastUpdatedAt, t.EndedAt = now.UTC(), now.UTC()
		return nil
	}, func(ctx context.Context, tx *redis.Tx) error {
		score, err := tx.ZScore(ctx, s.k.live, id).Result()
		if errors.Is(err, redis.Nil) {
			return errEnded // no longer live: someone ended it
		}
		if err != nil {
			return err
		}
		if int64(score) > unixMs(s.opts.Now()) {
			return errRenewed
		}
		return nil
	})
	switch {
	case err == nil:
		s.swept.Add(1)
		s.log.Warn("redisstate: a task is failed: the instance running it was lost (its lease lapsed)", "task", id)
	case errors.Is(err, errRenewed):
		return
	case errors.Is(err, errEnded), errors.Is(err, tasks.ErrNotFound):
		ctx, cancel := s.op(s.ctx)
		if err := s.client.ZRem(ctx, s.k.live, id).Err(); err != nil && s.ctx.Err() == nil {
			s.redisErr("sweep leases", err)
		}
		cancel()
	default:
		// Counted and logged by update; tried again at the next sweep.
	}
}
