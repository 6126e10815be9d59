package redisstate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/agentwire/agentwire/mcp/streamable"
	"github.com/redis/go-redis/v9"
)

// Sessions returns the store of legacy Streamable HTTP sessions that the
// fleet shares (streamable.SessionOptions.Store): each session is a
// HASH, "sess:<id>", holding its record as JSON and, apart, the instance
// that holds it, under the record's PEXPIRE.
//
// It is a streamable.SessionWatcher too: Save (of a record with a
// holder) and Delete PUBLISH {"id","holder"} on the prefix's "sessions"
// channel in the same transaction as their write, and WatchSessions
// delivers what arrives there, so that an instance drops at once a copy
// of a session that another took over or that ended. Messages are told
// at most once: one published while a watcher's connection is down is
// lost, and the handler's Touch of the record finds out later instead.
func (s *State) Sessions() streamable.SessionStore {
	return &sessions{s: s, cnt: &s.sess, subs: map[*subscriber[sessionChange]]struct{}{}}
}

// sessions is a State's streamable.SessionStore.
type sessions struct {
	s          *State
	cnt        *sessionCounters
	corruptLog limiter
	badLog     limiter

	// The watchers (under s.mu, as the State's own subscribers) and
	// whether the receiver of the sessions channel runs (under wmu).
	subs     map[*subscriber[sessionChange]]struct{}
	wmu      sync.Mutex
	watching bool
}

var _ streamable.SessionWatcher = (*sessions)(nil)

// sessionChange is the message of the sessions channel: session ID is
// held by Holder now, or ended ("").
type sessionChange struct {
	ID     string `json:"id"`
	Holder string `json:"holder"`
}

// sessionsChannel is the channel session changes are published on.
func (k keys) sessionsChannel() string { return k.prefix + "sessions" }

// maxHolder bounds a holder name read from the channel: an instance's
// name is short, and a message is anybody's who can PUBLISH.
const maxHolder = 256

func changeSize(sessionChange) int64 { return 2 * itemOverhead }

// session is the HASH of one session: "rec", its record (JSON), and
// "holder", a copy of its Holder that Touch reads without the rest.
func (k keys) session(id string) string { return k.prefix + "sess:" + id }

// ttlMs is a TTL for PEXPIRE: at least 1 ms (0 would be refused).
func ttlMs(ttl time.Duration) int64 { return max(ttl.Milliseconds(), 1) }

// Save writes rec whole, replacing what the key held, with its expiry,
// in one transaction.
func (ss *sessions) Save(ctx context.Context, rec *streamable.SessionRecord, ttl time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if rec == nil || !validName(rec.ID) {
		return fmt.Errorf("redisstate: save session: %w", errBadName)
	}
	if ttl <= 0 {
		// A record without an expiry would outlive every instance that
		// could end it.
		return fmt.Errorf("redisstate: save session: the ttl must be positive, not %v", ttl)
	}
	b, err := encodeSession(rec)
	if err != nil {
		return err
	}
	s := ss.s
	key := s.k.session(rec.ID)
	octx, cancel := s.op(ctx)
	defer cancel()
	var change []byte
	if rec.Holder != "" {
		change = encodeChange(rec.ID, rec.Holder)
	}
	cmds, err := s.client.TxPipelined(octx, func(p redis.Pipeliner) error {
		p.Del(octx, key)
		p.HSet(octx, key, "rec", b, "holder", rec.Holder)
		p.PExpire(octx, key, time.Duration(ttlMs(ttl))*time.Millisecond)
		if change != nil {
			p.Publish(octx, s.k.sessionsChannel(), change)
		}
		return nil
	})
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return s.redisErr("save (sessions)", firstOOM(err, cmds))
	}
	return nil
}

// unknownSession is what Load and Touch return for a session there is
// no record of. It does not repeat the id: a client's header, and as
// good as a password for the session.
func unknownSession(what string) error {
	return fmt.Errorf("redisstate: %s: %w", what, streamable.ErrUnknownSession)
}

// Load reads id's record (HGET of "rec"): streamable.ErrUnknownSession
// when there is none, and an error (not that one) when what the key
// holds is not a session's record.
func (ss *sessions) Load(ctx context.Context, id string) (*streamable.SessionRecord, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if !validName(id) {
		return nil, unknownSession("load session")
	}
	s := ss.s
	octx, cancel := s.op(ctx)
	defer cancel()
	b, err := s.client.HGet(octx, s.k.session(id), "rec").Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, unknownSession("load session")
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, s.redisErr("load (sessions)", err)
	}
	rec, err := decodeSession(id, b)
	if err != nil {
		n := ss.cnt.corrupt.Add(1)
		if ss.corruptLog.allow() {
			ss.s.log.Warn("redisstate: a session record could not be read", "error", err, "sessions_corrupt", n)
		}
		return nil, err
	}
	return rec, nil
}

// touchScript extends a session's life and returns its holder ("" when
// the record has none), or false when there is no such session.
//
// KEYS: the session. ARGV: the TTL in ms.
var touchScript = redis.NewScript(`
if redis.call('PEXPIRE', KEYS[1], ARGV[1]) == 0 then return false end
return redis.call('HGET', KEYS[1], 'holder') or ''
`)

// Touch sets id's expiry to ttl from now and returns its holder, in one
// script; streamable.ErrUnknownSession when it has gone.
func (ss *sessions) Touch(ctx context.Context, id string, ttl time.Duration) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	if !validName(id) {
		return "", unknownSession("touch session")
	}
	if ttl <= 0 {
		return "", fmt.Errorf("redisstate: touch session: the ttl must be positive, not %v", ttl)
	}
	s := ss.s
	octx, cancel := s.op(ctx)
	defer cancel()
	holder, err := touchScript.Run(octx, s.client, []string{s.k.session(id)}, ttlMs(ttl)).Text()
	if errors.Is(err, redis.Nil) {
		return "", unknownSession("touch session")
	}
	if err != nil {
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		return "", s.redisErr("touch (sessions)", err)
	}
	return holder, nil
}

// Delete forgets id (DEL); an unknown session is no error.
func (ss *sessions) Delete(ctx context.Context, id string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if !validName(id) {
		return nil // nothing can be stored under it
	}
	s := ss.s
	octx, cancel := s.op(ctx)
	defer cancel()
	_, err := s.client.TxPipelined(octx, func(p redis.Pipeliner) error {
		p.Del(octx, s.k.session(id))
		p.Publish(octx, s.k.sessionsChannel(), encodeChange(id, ""))
		return nil
	})
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return s.redisErr("delete (sessions)", err)
	}
	return nil
}

// WatchSessions calls f, on a goroutine of the watch's own, for each
// session change published on the sessions channel (by every instance,
// this one's included: the handler ignores its own), until ctx is done,
// stop is called, or the State closes. It registers locally and never
// waits for Redis. The channel is received on a Pub/Sub connection of
// this store's, made at the first watch, which go-redis reconnects; what
// is published while it is down is lost.
func (ss *sessions) WatchSessions(ctx context.Context, f func(id, holder string)) (func(), error) {
	if err := ss.startWatching(); err != nil {
		return nil, err
	}
	return subscribe(ss.s, ctx, ss.subs, changeSize, nil, func(c sessionChange) { f(c.ID, c.Holder) })
}

// startWatching starts the receiver of the sessions channel, once.
func (ss *sessions) startWatching() error {
	ss.wmu.Lock()
	defer ss.wmu.Unlock()
	if ss.watching {
		return nil
	}
	s := ss.s
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return errors.New("redisstate: the State is closed")
	}
	s.wg.Add(1)
	s.mu.Unlock()
	ss.watching = true
	// A Redis that does not answer now is tried again by the channel's
	// receiver (go-redis reconnects and resubscribes).
	octx, cancel := s.op(s.ctx)
	ps := s.client.Subscribe(octx, s.k.sessionsChannel())
	cancel()
	go ss.receive(ps)
	return nil
}

// receive hands what the sessions channel carries to the watchers.
func (ss *sessions) receive(ps *redis.PubSub) {
	s := ss.s
	defer s.wg.Done()
	defer ps.Close()
	ch := ps.Channel()
	for {
		select {
		case <-s.ctx.Done():
			return
		case m, ok := <-ch:
			if !ok {
				return
			}
			c, err := decodeChange(m.Payload)
			if err != nil {
				if ss.badLog.allow() {
					s.log.Warn("redisstate: a session change could not be read", "error", err)
				}
				continue
			}
			n := 0
			s.mu.Lock()
			for sub := range ss.subs {
				n += sub.q.push(c)
			}
			s.mu.Unlock()
			s.noteDropped(n, "session watcher")
		}
	}
}

func encodeChange(id, holder string) []byte {
	b, _ := json.Marshal(sessionChange{ID: id, Holder: holder}) // two strings: cannot fail
	return b
}

// decodeChange reads a message of the sessions channel, refusing what
// Save and Delete cannot have published: the channel is Redis's, which
// anyone with access may publish to.
func decodeChange(payload string) (sessionChange, error) {
	var c sessionChange
	if len(payload) > 1024 {
		return c, errors.New("redisstate: a session change too large")
	}
	if err := json.Unmarshal([]byte(payload), &c); err != nil {
		return c, fmt.Errorf("redisstate: a session change that is not one: %w", err)
	}
	if !validName(c.ID) || len(c.Holder) > maxHolder {
		return c, errors.New("redisstate: a session change with a bad id or holder")
	}
	return c, nil
}

func encodeSession(rec *streamable.SessionRecord) ([]byte, error) {
	b, err := json.Marshal(rec)
	if err != nil {
		return nil, fmt.Errorf("redisstate: encoding a session record: %w", err)
	}
	return b, nil
}

// decodeSession reads a session's record, refusing what Save cannot have
// written: not JSON, a record of another id, one without a version, or
// a restore message that is not a JSON object. A record comes from
// Redis, where anything may have been written to the key; the handler
// replays the restore messages into a new connection.
func decodeSession(id string, b []byte) (*streamable.SessionRecord, error) {
	var rec streamable.SessionRecord
	if err := json.Unmarshal(b, &rec); err != nil {
		return nil, fmt.Errorf("redisstate: a session record that is not one: %w", err)
	}
	if rec.ID != id {
		return nil, errors.New("redisstate: a session record of another session")
	}
	if rec.Version == "" {
		return nil, errors.New("redisstate: a session record without a protocol version")
	}
	for _, m := range rec.Restore {
		if len(m) == 0 || m[0] != '{' {
			return nil, errors.New("redisstate: a session record whose restore messages are not all JSON objects")
		}
	}
	return &rec, nil
}
