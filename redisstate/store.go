package redisstate

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/agentwire/agentwire/mcp/tasks"
	"github.com/redis/go-redis/v9"
)

// maxTries bounds an Update's optimistic retries.
const maxTries = 20

// inlineEvent is the largest task an event carries whole; a larger one's
// event carries its id, and the receiving State reads the task.
const inlineEvent = 64 << 10

// Event messages on the events channel: 'T' and the task's JSON, or 'I'
// and its id.
const (
	eventTask = 'T'
	eventID   = 'I'
)

// store is a State's tasks.Store.
type store struct{ s *State }

var _ tasks.Store = (*store)(nil)

// createScript makes a task in one step: the record (unless the id is
// taken), its place in the owner index under the next creation sequence,
// its lease (live) or its expiry (ended), and its event.
//
// KEYS: task, seq, index, live, ended. ARGV: json, id, lease deadline
// ("" when ended), expiry in ms ("" when live), expiry score, ended
// member, events channel, event message.
var createScript = redis.NewScript(`
if not redis.call('SET', KEYS[1], ARGV[1], 'NX') then return -1 end
local seq = redis.call('INCR', KEYS[2])
redis.call('ZADD', KEYS[3], seq, ARGV[2])
if ARGV[3] ~= '' then redis.call('ZADD', KEYS[4], ARGV[3], ARGV[2]) end
if ARGV[4] ~= '' then
  redis.call('PEXPIRE', KEYS[1], ARGV[4])
  redis.call('ZADD', KEYS[5], ARGV[5], ARGV[6])
end
redis.call('PUBLISH', ARGV[7], ARGV[8])
return seq
`)

// endedMember names a task in the ended set: its id and the owner index
// it is listed in, so that the sweeper can take it out of the index when
// it expires.
func endedMember(id, index string) string { return strconv.Itoa(len(id)) + ":" + id + index }

func parseEndedMember(m string) (id, index string, ok bool) {
	n, rest, found := cutColon(m)
	if !found || n < 0 || n > len(rest) {
		return "", "", false
	}
	return rest[:n], rest[n:], true
}

func cutColon(m string) (int, string, bool) {
	for i := 0; i < len(m) && i < 12; i++ {
		if m[i] == ':' {
			n, err := strconv.Atoi(m[:i])
			return n, m[i+1:], err == nil
		}
	}
	return 0, "", false
}

func unixMs(t time.Time) int64 { return t.UnixMilli() }

// expiry is what is left of an ended task's TTL, for PEXPIRE: counted by
// this State's clock, so that the Redis server's clock does not matter.
func (st *store) expiry(t *tasks.Task, now time.Time) int64 {
	return max(t.ExpiresAt().Sub(now).Milliseconds(), 1)
}

func (st *store) eventMessage(t *tasks.Task, b []byte) string {
	if len(b) <= inlineEvent {
		return string(eventTask) + string(b)
	}
	return string(eventID) + t.ID
}

// decodeEvent reads an event message: the task it carries, or the task
// read from Redis when it carries an id.
func (st *store) decodeEvent(payload string) (*tasks.Task, error) {
	if payload == "" {
		return nil, errors.New("redisstate: an empty event")
	}
	switch payload[0] {
	case eventTask:
		return decodeTask("(event)", []byte(payload[1:]))
	case eventID:
		return st.Get(st.s.ctx, payload[1:])
	}
	return nil, fmt.Errorf("redisstate: an event of an unknown kind %q", payload[0])
}

// Create stores t: in one script, the record (tasks.ErrExists when the
// id is taken), its place in its owner's index, and its lease; it
// returns once Redis has answered, so a Get through any instance finds
// the task. A live task is this instance's to renew until it ends.
func (st *store) Create(ctx context.Context, t *tasks.Task) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s := st.s
	c := t.Clone()
	now := s.opts.Now()
	if c.Status.Terminal() && c.EndedAt.IsZero() {
		c.EndedAt = now
	}
	if size := c.Size(); size > s.opts.MaxTaskBytes {
		s.tooLarge.Add(1)
		s.log.Warn("redisstate: a task is refused: it exceeds its size limit", "task", c.ID, "bytes", size, "max_task_bytes", s.opts.MaxTaskBytes)
		return fmt.Errorf("%w (%d bytes, at most %d)", tasks.ErrTooLarge, size, s.opts.MaxTaskBytes)
	}
	b, err := encodeTask(c)
	if err != nil {
		return err
	}
	index := s.k.index(c.Owner, c.Scope)
	lease, exp, expScore := "", "", ""
	if c.Status.Terminal() {
		exp = strconv.FormatInt(st.expiry(c, now), 10)
		expScore = strconv.FormatInt(unixMs(c.ExpiresAt()), 10)
	} else {
		lease = strconv.FormatInt(unixMs(now.Add(s.opts.Lease)), 10)
	}
	octx, cancel := s.op(ctx)
	defer cancel()
	seq, err := createScript.Run(octx, s.client, []string{s.k.task(c.ID), s.k.seq, index, s.k.live, s.k.ended},
		b, c.ID, lease, exp, expScore, endedMember(c.ID, index), s.k.events, st.eventMessage(c, b)).Int64()
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return s.redisErr("create", err)
	}
	if seq < 0 {
		return tasks.ErrExists
	}
	s.created.Add(1)
	s.published.Add(1)
	if !c.Status.Terminal() {
		s.mu.Lock()
		if !s.closed {
			s.local[c.ID] = struct{}{}
		}
		s.mu.Unlock()
	}
	return nil
}

// Get reads the task, or tasks.ErrNotFound (never created, or expired).
func (st *store) Get(ctx context.Context, id string) (*tasks.Task, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s := st.s
	octx, cancel := s.op(ctx)
	defer cancel()
	b, err := s.client.Get(octx, s.k.task(id)).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, tasks.ErrNotFound
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, s.redisErr("get", err)
	}
	return decodeTask(id, b)
}

// Update changes the task with f, atomically: WATCH, GET, f, then the
// write in MULTI/EXEC, tried again (f called again) when another writer
// got there first. An ended task stays ended; f's error writes nothing.
func (st *store) Update(ctx context.Context, id string, f func(*tasks.Task) error) (*tasks.Task, error) {
	return st.update(ctx, id, f, nil)
}

// update is Update with check, run inside the transaction before f (the
// sweeper's: is the lease still lapsed?).
func (st *store) update(ctx context.Context, id string, f func(*tasks.Task) error, check func(context.Context, *redis.Tx) error) (*tasks.Task, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s := st.s
	key := s.k.task(id)
	for try := 0; ; try++ {
		var out *tasks.Task
		var ended bool
		var stop error // an error that is not Redis's: f's, not found, too large
		octx, cancel := s.op(ctx)
		err := s.client.Watch(octx, func(tx *redis.Tx) error {
			b, err := tx.Get(octx, key).Bytes()
			if errors.Is(err, redis.Nil) {
				stop = tasks.ErrNotFound
				return stop
			}
			if err != nil {
				return err
			}
			old, err := decodeTask(id, b)
			if err != nil {
				stop = err
				return err
			}
			if check != nil {
				if err := check(octx, tx); err != nil {
					stop = err
					return err
				}
			}
			c := old.Clone()
			if err := f(c); err != nil {
				stop = err
				return err
			}
			c.ID = id // not f's to change
			wasLive := !old.Status.Terminal()
			if old.Status.Terminal() && c.Status != old.Status {
				c.Status = old.Status // an ended task stays ended
			}
			if size := c.Size(); size > s.opts.MaxTaskBytes {
				s.tooLarge.Add(1)
				s.log.Warn("redisstate: an update is refused: the task would exceed its size limit", "task", id, "bytes", size, "max_task_bytes", s.opts.MaxTaskBytes)
				stop = fmt.Errorf("%w (%d bytes, at most %d)", tasks.ErrTooLarge, size, s.opts.MaxTaskBytes)
				return stop
			}
			now := s.opts.Now()
			if c.Status.Terminal() && wasLive && c.EndedAt.IsZero() {
				c.EndedAt = now
			}
			nb, err := encodeTask(c)
			if err != nil {
				stop = err
				return stop
			}
			cmds, err := tx.TxPipelined(octx, func(p redis.Pipeliner) error {
				p.Set(octx, key, nb, 0)
				if c.Status.Terminal() {
					index := s.k.index(c.Owner, c.Scope)
					p.PExpire(octx, key, time.Duration(st.expiry(c, now))*time.Millisecond)
					p.ZAdd(octx, s.k.ended, redis.Z{Score: float64(unixMs(c.ExpiresAt())), Member: endedMember(id, index)})
					if wasLive {
						p.ZRem(octx, s.k.live, id)
					}
				}
				p.Publish(octx, s.k.events, st.eventMessage(c, nb))
				return nil
			})
			if err == nil {
				out, ended = c, c.Status.Terminal() && wasLive
			}
			for _, cmd := range cmds {
				if cerr := cmd.Err(); err != nil && cerr != nil && isOOM(cerr) {
					err = cerr // EXECABORT says less than the command Redis refused
				}
			}
			return err
		}, key)
		cancel()
		switch {
		case err == nil:
			s.updated.Add(1)
			s.published.Add(1)
			if ended {
				s.forget(id)
			}
			return out, nil
		case stop != nil && errors.Is(err, stop):
			return nil, stop
		case errors.Is(err, redis.TxFailedErr):
			if try+1 >= maxTries {
				s.conflicts.Add(1)
				s.log.Warn("redisstate: an update is given up: the task kept changing under it", "task", id, "tries", maxTries)
				return nil, fmt.Errorf("redisstate: update of task %s: %d tries, each overtaken by another writer: %w", id, maxTries, err)
			}
			s.retries.Add(1)
			// Spread the contenders out a little.
			d := time.Duration(rand.Int64N(int64(min(time.Duration(try+1)*2*time.Millisecond, 50*time.Millisecond)) + 1))
			t := time.NewTimer(d)
			select {
			case <-ctx.Done():
				t.Stop()
				return nil, ctx.Err()
			case <-t.C:
			}
		default:
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, s.redisErr("update", err)
		}
	}
}

// List pages through the owner index: ids after the cursor's sequence,
// oldest first, the records read with MGET; ids whose record has expired
// are dropped from the index as they are met.
func (st *store) List(ctx context.Context, owner, scope, cursor string, limit int) ([]*tasks.Task, string, error) {
	if err := ctx.Err(); err != nil {
		return nil, "", err
	}
	var after uint64
	if cursor != "" {
		b, err := base64.RawURLEncoding.DecodeString(cursor)
		if err == nil {
			after, err = strconv.ParseUint(string(b), 10, 64)
		}
		if err != nil {
			return nil, "", fmt.Errorf("tasks: invalid cursor")
		}
	}
	if limit <= 0 {
		limit = 100
	}
	s := st.s
	index := s.k.index(owner, scope)
	type found struct {
		t   *tasks.Task
		seq uint64
	}
	var out []found
	scanned, exhausted := after, false
	const maxRounds = 8 // a page costs at most this many round trips however many expired ids it meets
	for round := 0; round < maxRounds && len(out) <= limit; round++ {
		want := limit + 1 - len(out)
		octx, cancel := s.op(ctx)
		zs, err := s.client.ZRangeByScoreWithScores(octx, index, &redis.ZRangeBy{
			Min: "(" + strconv.FormatUint(scanned, 10), Max: "+inf", Count: int64(want),
		}).Result()
		var vals []any
		if err == nil && len(zs) > 0 {
			ks := make([]string, len(zs))
			for i, z := range zs {
				ks[i] = s.k.task(z.Member.(string))
			}
			vals, err = s.client.MGet(octx, ks...).Result()
		}
		var gone []any
		for i, v := range vals {
			id, seq := zs[i].Member.(string), uint64(zs[i].Score)
			scanned = seq
			str, ok := v.(string)
			if !ok {
				gone = append(gone, id)
				continue
			}
			t, derr := decodeTask(id, []byte(str))
			if derr != nil {
				cancel()
				return nil, "", derr
			}
			if t.Owner == owner && (owner != "" || t.Scope == scope) {
				out = append(out, found{t, seq})
			}
		}
		if len(gone) > 0 && err == nil {
			err = s.client.ZRem(octx, index, gone...).Err()
		}
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return nil, "", ctx.Err()
			}
			return nil, "", s.redisErr("list", err)
		}
		if len(zs) < want {
			exhausted = true
			break
		}
	}
	next := ""
	switch {
	case len(out) > limit:
		out = out[:limit]
		next = base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatUint(out[limit-1].seq, 10)))
	case !exhausted:
		// The rounds ran out among expired ids: resume after what was scanned.
		next = base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatUint(scanned, 10)))
	}
	ts := make([]*tasks.Task, len(out))
	for i, f := range out {
		ts[i] = f.t
	}
	return ts, next, nil
}

// Subscribe calls f with every change to any task, made through any
// instance, until ctx is done or stop is called: the events arrive on the
// State's one Pub/Sub connection and are queued for f (bounded by
// EventBuffer, oldest dropped). Delivery is at most once: what is
// published while the connection is down is lost.
func (st *store) Subscribe(ctx context.Context, f func(tasks.Event)) (func(), error) {
	return subscribe(st.s, ctx, st.s.taskSubs, f)
}
