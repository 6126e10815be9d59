package redisstate

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/agentwire/agentwire/mcp/tasks"
	"github.com/redis/go-redis/v9"
)

// maxTries bounds an Update's optimistic retries (and a sweeper's
// compare-and-set of a lost task).
const maxTries = 20

// inlineEvent is the largest task an event carries whole; a larger one's
// event carries its id, and the receiving State reads the task.
const inlineEvent = 64 << 10

// Event messages on the events channel: 'T', the id's length, ':', the
// id and the task's record (its revision in its head); or 'I', the
// revision, ':' and the id. Either names the task before anything is
// decoded (tasks.Selective).
const (
	eventTask = 'T'
	eventID   = 'I'
)

// store is a State's tasks.Store.
type store struct{ s *State }

var _ tasks.Store = (*store)(nil)

// luaNow is the Redis server's clock in unix ms, for the scripts.
const luaNow = `local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
`

// createScript makes a task in one step: the record (unless the id is
// taken), its place in the owner index under the next creation sequence
// (a new sequence, from 1, gets a new epoch: List cursors of an earlier
// one start over), its lease (live: a deadline on Redis's clock) or its
// expiry (ended), and its event.
//
// KEYS: task, seq, index, live, ended, epoch. ARGV: record, id, lease in
// ms ("" when ended), expiry in ms ("" when live), expiry score, ended
// member, events channel, event message.
var createScript = redis.NewScript(luaNow + `
if not redis.call('SET', KEYS[1], ARGV[1], 'NX') then return -1 end
local seq = redis.call('INCR', KEYS[2])
if seq == 1 or redis.call('EXISTS', KEYS[6]) == 0 then
  local t = redis.call('TIME')
  redis.call('SET', KEYS[6], t[1] .. '.' .. t[2])
end
redis.call('ZADD', KEYS[3], seq, ARGV[2])
if ARGV[3] ~= '' then redis.call('ZADD', KEYS[4], string.format('%d', now_ms() + tonumber(ARGV[3])), ARGV[2]) end
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

func eventMessage(id string, rev uint64, b []byte) string {
	if len(b) <= inlineEvent {
		return string(eventTask) + strconv.Itoa(len(id)) + ":" + id + string(b)
	}
	return string(eventID) + strconv.FormatUint(rev, 10) + ":" + id
}

// parseEvent reads an event message's kind, task id and revision, and
// the record of an inline one, without decoding the record.
func parseEvent(p string) (kind byte, id string, rev uint64, rec string, ok bool) {
	if p == "" {
		return 0, "", 0, "", false
	}
	switch kind, p = p[0], p[1:]; kind {
	case eventTask:
		n, rest, found := cutColon(p)
		if !found || n <= 0 || n > len(rest) {
			return 0, "", 0, "", false
		}
		id, rec = rest[:n], rest[n:]
		return kind, id, headRev(rec), rec, true
	case eventID:
		r, id, found := strings.Cut(p, ":")
		if !found || id == "" {
			return 0, "", 0, "", false
		}
		rev, err := strconv.ParseUint(r, 10, 64)
		return kind, id, rev, "", err == nil
	}
	return kind, "", 0, "", false
}

// headRev is the revision in a record's head (0 when it has none).
func headRev(rec string) uint64 {
	const head = `{"rev":`
	if !strings.HasPrefix(rec, head) {
		return 0
	}
	rest := rec[len(head):]
	end := strings.IndexByte(rest, ',')
	if end < 0 || end > 20 {
		return 0
	}
	rev, _ := strconv.ParseUint(rest[:end], 10, 64)
	return rev
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
	b, err := encodeStored(c, 1)
	if err != nil {
		return err
	}
	index := s.k.index(c.Owner, c.Scope)
	lease, exp, expScore := "", "", ""
	if c.Status.Terminal() {
		exp = strconv.FormatInt(st.expiry(c, now), 10)
		expScore = strconv.FormatInt(unixMs(c.ExpiresAt()), 10)
	} else {
		lease = strconv.FormatInt(s.opts.Lease.Milliseconds(), 10)
	}
	octx, cancel := s.op(ctx)
	defer cancel()
	seq, err := createScript.Run(octx, s.client, []string{s.k.task(c.ID), s.k.seq, index, s.k.live, s.k.ended, s.k.epoch},
		b, c.ID, lease, exp, expScore, endedMember(c.ID, index), s.k.events, eventMessage(c.ID, 1, b)).Int64()
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
	t, _, err := st.get(ctx, id)
	return t, err
}

// get is Get with the task's revision.
func (st *store) get(ctx context.Context, id string) (*tasks.Task, uint64, error) {
	if err := ctx.Err(); err != nil {
		return nil, 0, err
	}
	s := st.s
	octx, cancel := s.op(ctx)
	defer cancel()
	b, err := s.client.Get(octx, s.k.task(id)).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, 0, tasks.ErrNotFound
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil, 0, ctx.Err()
		}
		return nil, 0, s.redisErr("get", err)
	}
	return decodeStored(id, b)
}

// Update changes the task with f, atomically: WATCH, GET, f, then the
// write in MULTI/EXEC, tried again (f called again) when another writer
// got there first. An ended task stays ended; f's error writes nothing.
func (st *store) Update(ctx context.Context, id string, f func(*tasks.Task) error) (*tasks.Task, error) {
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
			old, rev, err := decodeStored(id, b)
			if err != nil {
				stop = err
				return err
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
			nb, err := encodeStored(c, rev+1)
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
				p.Publish(octx, s.k.events, eventMessage(id, rev+1, nb))
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
			if err := backoff(ctx, try); err != nil {
				return nil, err
			}
		default:
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, s.redisErr("update", err)
		}
	}
}

// backoff waits a short random while before an optimistic retry, to
// spread the contenders out a little.
func backoff(ctx context.Context, try int) error {
	d := time.Duration(rand.Int64N(int64(min(time.Duration(try+1)*2*time.Millisecond, 50*time.Millisecond)) + 1))
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// A List cursor is the base64 of "<epoch>/<sequence>": the creation
// sequence of the last task handed out, in the epoch of the sequence
// (made with its first value). A cursor of another epoch (Redis lost its
// data and the sequence started again) lists from the start.
func encodeCursor(epoch string, seq uint64) string {
	return base64.RawURLEncoding.EncodeToString([]byte(epoch + "/" + strconv.FormatUint(seq, 10)))
}

func decodeCursor(c string) (epoch string, seq uint64, err error) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return "", 0, tasks.ErrInvalidCursor
	}
	epoch, n, found := strings.Cut(string(b), "/")
	if !found {
		return "", 0, tasks.ErrInvalidCursor
	}
	seq, err = strconv.ParseUint(n, 10, 64)
	if err != nil {
		return "", 0, tasks.ErrInvalidCursor
	}
	return epoch, seq, nil
}

// List pages through the owner index: ids after the cursor's sequence,
// oldest first, the records read with MGET; ids whose record has expired
// are dropped from the index as they are met. A cursor List did not
// make is tasks.ErrInvalidCursor.
func (st *store) List(ctx context.Context, owner, scope, cursor string, limit int) ([]*tasks.Task, string, error) {
	if err := ctx.Err(); err != nil {
		return nil, "", err
	}
	var after uint64
	var cursorEpoch string
	if cursor != "" {
		var err error
		if cursorEpoch, after, err = decodeCursor(cursor); err != nil {
			return nil, "", err
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
	var epoch string
	scanned, exhausted := after, false
	const maxRounds = 8 // a page costs at most this many round trips however many expired ids it meets
	for round := 0; round < maxRounds && len(out) <= limit; round++ {
		want := limit + 1 - len(out)
		octx, cancel := s.op(ctx)
		var zs []redis.Z
		var err error
		if round == 0 {
			// The epoch with the first range: a cursor of another one
			// starts over (and costs a second round trip).
			var ep *redis.StringCmd
			var rng *redis.ZSliceCmd
			_, err = s.client.Pipelined(octx, func(p redis.Pipeliner) error {
				ep = p.Get(octx, s.k.epoch)
				rng = p.ZRangeByScoreWithScores(octx, index, &redis.ZRangeBy{Min: "(" + strconv.FormatUint(scanned, 10), Max: "+inf", Count: int64(want)})
				return nil
			})
			err = rng.Err()
			if eerr := ep.Err(); err == nil && eerr != nil && !errors.Is(eerr, redis.Nil) { // Nil: no epoch yet
				err = eerr
			}
			epoch, zs = ep.Val(), rng.Val()
			if err == nil && cursor != "" && cursorEpoch != epoch && scanned > 0 {
				scanned = 0
				zs, err = s.client.ZRangeByScoreWithScores(octx, index, &redis.ZRangeBy{Min: "(0", Max: "+inf", Count: int64(want)}).Result()
			}
		} else {
			zs, err = s.client.ZRangeByScoreWithScores(octx, index, &redis.ZRangeBy{
				Min: "(" + strconv.FormatUint(scanned, 10), Max: "+inf", Count: int64(want),
			}).Result()
		}
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
		next = encodeCursor(epoch, out[limit-1].seq)
	case !exhausted:
		// The rounds ran out among expired ids: resume after what was scanned.
		next = encodeCursor(epoch, scanned)
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
// EventBuffer and EventBufferBytes, oldest dropped). Delivery is at most
// once: what is published while the connection is down is lost. The
// events of one task arrive in the order of its writes.
func (st *store) Subscribe(ctx context.Context, f func(tasks.Event)) (func(), error) {
	return st.SubscribeSelected(ctx, nil, f)
}

var _ tasks.Selective = (*store)(nil)

// SubscribeSelected is Subscribe for the tasks keep accepts (nil: all):
// keep is asked with the id of each changed task, on the dispatcher's
// goroutine, before its event is decoded or its record read; an event
// no subscriber keeps costs nothing more.
func (st *store) SubscribeSelected(ctx context.Context, keep func(id string) bool, f func(tasks.Event)) (func(), error) {
	return subscribe(st.s, ctx, st.s.taskSubs, eventSize, keep, f)
}
