package redisstate

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/agentwire/agentwire/jsonrpc"
	"github.com/agentwire/agentwire/mcp/streamable"
	"github.com/redis/go-redis/v9"
)

// EventOptions configures the event store of a State (State.Events). The
// zero value (or nil) means the documented defaults.
type EventOptions struct {
	// MaxEventsPerStream bounds one stream's events: each XADD trims the
	// oldest past it (MAXLEN ~, so Redis keeps up to one node of its
	// radix tree more, 100 entries by default, rather than trim entry
	// by entry). A client resuming from a trimmed event gets
	// streamable.ErrUnknownEvent. Default 1000.
	MaxEventsPerStream int
	// Retain is how long a stream is kept after its last event (each
	// Append sets its PEXPIRE), and the session's index of streams after
	// the last event of any of them. Default 5 min.
	Retain time.Duration
	// MaxEventBytes bounds one event: Append refuses a larger one with an
	// error (Stats.StreamEventsTooLarge, logged), and the handler sends it live,
	// not resumable. Default 8 MiB.
	MaxEventBytes int
	// MaxFollows bounds the Follow calls running at once through this
	// store: past it Follow fails with ErrTooManyFollows
	// (Stats.FollowsRefused, logged). Each Follow holds one of the
	// client's pooled connections while it waits (XREAD BLOCK), so the
	// bound keeps follows from starving every other command of
	// connections. Default half the client's PoolSize when the client is a
	// *redis.Client or a *redis.ClusterClient (go-redis's own default pool
	// is 10 connections per CPU), else 16.
	MaxFollows int
	// FollowWait is how long one XREAD BLOCK of Follow waits for a new
	// event before Follow looks again (at whether the stream still
	// exists). A blocked read is not interrupted: Follow returns as soon
	// as its context ends, and the read goes on for at most FollowWait,
	// holding its connection (and the follow's place under MaxFollows).
	// Default 1 s.
	FollowWait time.Duration
}

// ErrTooManyFollows is wrapped by Follow when EventOptions.MaxFollows
// follows are running already.
var ErrTooManyFollows = errors.New("redisstate: too many streams followed at once (EventOptions.MaxFollows)")

// errClosed is what a Follow gets once its State has closed.
var errClosed = errors.New("redisstate: the State is closed")

// sessionCounters count what the event and session stores did and
// refused.
type sessionCounters struct {
	appended, tooLarge, gaps, followsRefused, following, corrupt atomic.Int64
}

// Events returns an event store for resumable Streamable HTTP streams
// (streamable.SessionOptions.Events) that the fleet shares: each stream is
// a Redis Stream, so a client whose connection dropped resumes it, with
// Last-Event-ID, through any instance, and an instance that did not
// produce a stream can Follow it while its request runs on another.
// Streams and event ids are described in the package documentation.
func (s *State) Events(opts *EventOptions) streamable.EventFollower {
	e := &events{s: s, cnt: &s.sess}
	if opts != nil {
		e.opts = *opts
	}
	if e.opts.MaxEventsPerStream <= 0 {
		e.opts.MaxEventsPerStream = 1000
	}
	if e.opts.Retain <= 0 {
		e.opts.Retain = 5 * time.Minute
	}
	if e.opts.MaxEventBytes <= 0 {
		e.opts.MaxEventBytes = 8 << 20
	}
	pool := poolSize(s.client)
	if e.opts.MaxFollows <= 0 {
		e.opts.MaxFollows = 16
		if pool > 0 {
			e.opts.MaxFollows = max(pool/2, 1)
		}
	} else if pool > 0 && e.opts.MaxFollows >= pool {
		s.log.Warn("redisstate: MaxFollows is not below the client's PoolSize: follows waiting for events may hold every connection and stall other commands",
			"max_follows", e.opts.MaxFollows, "pool_size", pool)
	}
	if e.opts.FollowWait <= 0 {
		e.opts.FollowWait = time.Second
	}
	return e
}

// poolSize is the client's connection pool size (per node, for a
// cluster), or 0 when the client does not say.
func poolSize(c redis.UniversalClient) int {
	switch c := c.(type) {
	case *redis.Client:
		return c.Options().PoolSize
	case *redis.ClusterClient:
		return c.Options().PoolSize
	}
	return 0
}

// events is a State's streamable.EventFollower.
type events struct {
	s         *State
	opts      EventOptions
	cnt       *sessionCounters
	running   atomic.Int64 // this store's Follow calls running now, against MaxFollows
	bigLog    limiter
	followLog limiter
}

var _ streamable.EventFollower = (*events)(nil)

// stream is the Redis Stream of one event stream.
func (k keys) stream(session, stream string) string { return k.prefix + "ev:" + session + ":" + stream }

// streams is the sorted set of a session's stream ids, each scored by
// the time of its last append (ms), for EndSession: an append drops the
// members whose streams have expired since (older than Retain), so that
// a session that lives for days with a stream per request keeps an index
// of what is still in Redis, not of every stream it ever had.
func (k keys) streams(session string) string { return k.prefix + "evs:" + session }

// maxName bounds a session's or a stream's id: the handler's are far
// shorter, and a client's header longer than this names nothing.
const maxName = 256

// validName reports whether id can name a session or a stream: 1 to
// maxName visible ASCII characters (what the transport allows in
// Mcp-Session-Id), so that nothing a client sends becomes an odd key.
func validName(id string) bool {
	if id == "" || len(id) > maxName {
		return false
	}
	for i := 0; i < len(id); i++ {
		if id[i] < 0x21 || id[i] > 0x7e {
			return false
		}
	}
	return true
}

// validSession is validName without ':', which separates the session
// from the stream in a stream's key: session "a:b" with stream "c" would
// otherwise share the key of session "a" with stream "b:c".
func validSession(id string) bool { return validName(id) && !strings.Contains(id, ":") }

// errBadName is wrapped by Append, EndStream and EndSession for ids the
// handler cannot have made.
var errBadName = errors.New("not a session or stream id (1 to 256 visible ASCII characters, no ':' in a session's)")

// An event id is "<stream>_<XADD id>": the stream first, so that the id
// names its stream (2025-11-25 "Resumability"), and Redis's own entry id
// after the last '_' (stream ids are the handler's, base64url, and may
// hold '_'; an entry id never does).
func formatEventID(stream, xid string) string { return stream + "_" + xid }

// parseEventID splits an event id into its stream and its Redis entry id,
// which must be "<ms>-<seq>" in canonical decimal: nothing else reaches a
// script as an id.
func parseEventID(id string) (stream, xid string, ok bool) {
	i := strings.LastIndexByte(id, '_')
	if i <= 0 {
		return "", "", false
	}
	stream, xid = id[:i], id[i+1:]
	ms, seq, found := strings.Cut(xid, "-")
	if !found || !canonicalUint(ms) || !canonicalUint(seq) || !validName(stream) {
		return "", "", false
	}
	return stream, xid, true
}

// canonicalUint reports whether s is a uint64 in decimal as
// strconv.FormatUint writes it (no sign, no leading zero).
func canonicalUint(s string) bool {
	n, err := strconv.ParseUint(s, 10, 64)
	return err == nil && strconv.FormatUint(n, 10) == s
}

// Append adds data as the stream's next event: XADD (trimming the oldest
// past MaxEventsPerStream), its PEXPIRE of Retain, and the stream's entry
// in the session's index with the same expiry, in one transaction, so
// that no key is ever left without an expiry. A priming event (nil data)
// is stored with an empty field and never replayed.
func (e *events) Append(ctx context.Context, session, stream string, data []byte) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	if !validSession(session) || !validName(stream) {
		return "", fmt.Errorf("redisstate: append: %w", errBadName)
	}
	if len(data) > e.opts.MaxEventBytes {
		n := e.cnt.tooLarge.Add(1)
		if e.bigLog.allow() {
			e.s.log.Warn("redisstate: an event is not stored: it exceeds MaxEventBytes; it is sent but cannot be replayed",
				"stream", stream, "bytes", len(data), "max_event_bytes", e.opts.MaxEventBytes, "events_too_large", n)
		}
		return "", fmt.Errorf("redisstate: append to stream %q: an event of %d bytes, at most %d (EventOptions.MaxEventBytes)", stream, len(data), e.opts.MaxEventBytes)
	}
	s := e.s
	key, index := s.k.stream(session, stream), s.k.streams(session)
	octx, cancel := s.op(ctx)
	defer cancel()
	var add *redis.StringCmd
	cmds, err := s.client.TxPipelined(octx, func(p redis.Pipeliner) error {
		add = p.XAdd(octx, &redis.XAddArgs{Stream: key, MaxLen: int64(e.opts.MaxEventsPerStream), Approx: true, Values: []any{"d", data}})
		p.PExpire(octx, key, e.opts.Retain)
		now := time.Now().UnixMilli()
		p.ZAdd(octx, index, redis.Z{Score: float64(now), Member: stream})
		p.ZRemRangeByScore(octx, index, "-inf", "("+strconv.FormatInt(now-e.opts.Retain.Milliseconds(), 10))
		p.PExpire(octx, index, e.opts.Retain)
		return nil
	})
	if err != nil {
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		return "", s.redisErr("append (events)", firstOOM(err, cmds))
	}
	e.cnt.appended.Add(1)
	return formatEventID(stream, add.Val()), nil
}

// firstOOM is the error of the command Redis refused for memory, when
// one was: EXECABORT says less.
func firstOOM(err error, cmds []redis.Cmder) error {
	for _, c := range cmds {
		if cerr := c.Err(); cerr != nil && isOOM(cerr) {
			return cerr
		}
	}
	return err
}

// replayBatch is how many events one script call reads.
const replayBatch = 128

// afterScript reads the entries of a stream after an entry id, once it
// has checked, when asked, that this entry is still in the stream:
// trimming (MAXLEN) takes the oldest first and expiry takes the whole
// key, so the entry's presence means nothing after it has gone. A gap is
// false (a nil reply). Exclusive ranges need Redis 6.2.
//
// KEYS: the stream. ARGV: the entry id, the count, "1" to check.
var afterScript = redis.NewScript(`
if ARGV[3] == '1' and #redis.call('XRANGE', KEYS[1], ARGV[1], ARGV[1]) == 0 then return false end
return redis.call('XRANGE', KEYS[1], '(' .. ARGV[1], '+', 'COUNT', ARGV[2])
`)

// entry is one event read back: its Redis entry id and its data (nil for
// a priming event).
type entry struct {
	id   string
	data []byte
}

// errGap says that the entry to read after is no longer in the stream.
var errGap = errors.New("gap")

// after reads up to replayBatch entries of key after xid, checking first
// (when check) that xid is still in the stream.
func (e *events) after(ctx context.Context, key, xid string, check bool) ([]entry, error) {
	s := e.s
	flag := "0"
	if check {
		flag = "1"
	}
	octx, cancel := s.op(ctx)
	defer cancel()
	v, err := afterScript.Run(octx, s.client, []string{key}, xid, replayBatch, flag).Result()
	if errors.Is(err, redis.Nil) {
		return nil, errGap
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, s.redisErr("read (events)", err)
	}
	return parseEntries(v)
}

// parseEntries reads XRANGE's reply (as go-redis hands over a script's):
// entries of an id and a field list, whose "d" holds the event.
// Anything else is an error, never a panic.
func parseEntries(v any) ([]entry, error) {
	list, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("redisstate: a stream read back as %T, not a list of entries", v)
	}
	out := make([]entry, 0, len(list))
	for _, item := range list {
		pair, ok := item.([]any)
		if !ok || len(pair) != 2 {
			return nil, errors.New("redisstate: a stream entry that is not an id and its fields")
		}
		id, ok := pair[0].(string)
		if !ok {
			return nil, errors.New("redisstate: a stream entry without an id")
		}
		fields, ok := pair[1].([]any)
		if !ok || len(fields)%2 != 0 {
			return nil, errors.New("redisstate: a stream entry whose fields are not pairs")
		}
		var data []byte
		found := false
		for i := 0; i < len(fields); i += 2 {
			if k, _ := fields[i].(string); k == "d" {
				d, ok := fields[i+1].(string)
				if !ok {
					return nil, errors.New("redisstate: a stream entry whose event is not a string")
				}
				if d != "" {
					data = []byte(d)
				}
				found = true
			}
		}
		if !found {
			return nil, errors.New("redisstate: a stream entry without an event")
		}
		out = append(out, entry{id: id, data: data})
	}
	return out, nil
}

// gap counts a replay or a follow refused for a Last-Event-ID that names
// nothing retained, and says so.
func (e *events) gap(what, stream string) error {
	e.cnt.gaps.Add(1)
	if stream == "" {
		return fmt.Errorf("redisstate: %s: %w", what, streamable.ErrUnknownEvent)
	}
	return fmt.Errorf("redisstate: %s of stream %q: %w", what, stream, streamable.ErrUnknownEvent)
}

// Replay sends the events of lastID's stream after lastID, in order,
// priming events skipped, reading them in batches; each batch is one
// script that first checks that the last event seen is still retained,
// so that a gap (events trimmed or expired, even midway) is
// streamable.ErrUnknownEvent, never a silent loss. Events appended while
// it runs are sent too.
func (e *events) Replay(ctx context.Context, session, lastID string, send func(id string, data []byte) error) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	stream, xid, ok := parseEventID(lastID)
	if !ok || !validSession(session) {
		return "", e.gap("replay", "")
	}
	key := e.s.k.stream(session, stream)
	for {
		batch, err := e.after(ctx, key, xid, true)
		if errors.Is(err, errGap) {
			return "", e.gap("replay", stream)
		}
		if err != nil {
			return "", err
		}
		for _, en := range batch {
			xid = en.id
			if en.data == nil {
				continue
			}
			if err := send(formatEventID(stream, en.id), en.data); err != nil {
				return stream, err
			}
		}
		if len(batch) < replayBatch {
			return stream, nil
		}
	}
}

// tombstone is how long the empty stream EndStream leaves behind lasts
// (at most: never past the stream's own expiry).
const tombstone = 10 * time.Second

// endScript empties a stream and leaves the empty key, which keeps the
// stream's last entry id, for a little while: an Append to the same
// stream id meanwhile gets ids after it, and once the key has gone
// Redis's clock has moved past them. A DEL would let an Append in the
// same millisecond issue an ended event's id again, which would resume a
// client holding it at a wrong place.
//
// KEYS: the stream. ARGV: the tombstone's life in ms.
var endScript = redis.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('XTRIM', KEYS[1], 'MAXLEN', '0')
local ttl = redis.call('PTTL', KEYS[1])
if ttl < 0 or ttl > tonumber(ARGV[1]) then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end
return 1
`)

// EndStream forgets the stream's events (it will carry nothing more:
// its request was cancelled or left unanswered; an answered stream is
// left to Retain, so that its response can still be resumed): it empties the stream, whose ids are then unknown, and
// leaves the empty key for at most tombstone (endScript says why); the
// session's index keeps naming it for EndSession.
func (e *events) EndStream(ctx context.Context, session, stream string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if !validSession(session) || !validName(stream) {
		return fmt.Errorf("redisstate: end stream: %w", errBadName)
	}
	s := e.s
	octx, cancel := s.op(ctx)
	defer cancel()
	if err := endScript.Run(octx, s.client, []string{s.k.stream(session, stream)}, tombstone.Milliseconds()).Err(); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return s.redisErr("end stream (events)", err)
	}
	return nil
}

// delBatch is how many keys one DEL of EndSession takes.
const delBatch = 500

// EndSession forgets every stream of the session: it reads the session's
// index (ZRANGE), then deletes the streams it names and the index. A
// stream appended to between the two (the handler does not, once it ends
// the session) is left to its expiry, Retain.
func (e *events) EndSession(ctx context.Context, session string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if !validSession(session) {
		return fmt.Errorf("redisstate: end session: %w", errBadName)
	}
	s := e.s
	index := s.k.streams(session)
	octx, cancel := s.op(ctx)
	defer cancel()
	members, err := s.client.ZRange(octx, index, 0, -1).Result()
	if err == nil {
		// Only keys of this session's streams: the index names stream
		// ids, never keys, so no member can name another key. The index
		// goes last, so that a failure midway leaves it to try again.
		ks := make([]string, 0, len(members)+1)
		for _, m := range members {
			if validName(m) {
				ks = append(ks, s.k.stream(session, m))
			}
		}
		ks = append(ks, index)
		for len(ks) > 0 && err == nil {
			n := min(len(ks), delBatch)
			err = s.client.Del(octx, ks[:n]...).Err()
			ks = ks[n:]
		}
	}
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return s.redisErr("end session (events)", err)
	}
	return nil
}

// Follow sends the events of stream after afterID as they are appended,
// through any instance, and returns nil once it has sent a JSON-RPC
// response (the stream's last message). It reads as Replay does, by the
// script that checks the last event seen is still retained (a gap is
// streamable.ErrUnknownEvent), and, when there is nothing new, waits
// with XREAD BLOCK for at most FollowWait before it reads again. afterID
// "" follows from the stream's first retained event. It returns ctx's
// error as soon as ctx ends, send's error, or ErrTooManyFollows past
// MaxFollows.
func (e *events) Follow(ctx context.Context, session, stream, afterID string, send func(id string, data []byte) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if !validSession(session) || !validName(stream) {
		return e.gap("follow", "")
	}
	xid, check := "0-0", false
	if afterID != "" {
		st, id, ok := parseEventID(afterID)
		if !ok || st != stream {
			return e.gap("follow", stream)
		}
		xid, check = id, true
	}
	if n := e.running.Add(1); n > int64(e.opts.MaxFollows) {
		e.running.Add(-1)
		refused := e.cnt.followsRefused.Add(1)
		if e.followLog.allow() {
			e.s.log.Warn("redisstate: a stream is not followed: MaxFollows are running", "max_follows", e.opts.MaxFollows, "follows_refused", refused)
		}
		return fmt.Errorf("redisstate: follow of stream %q: %w", stream, ErrTooManyFollows)
	}
	e.cnt.following.Add(1)
	// The slot is let go by the last of Follow and the read it may leave
	// running (waitFor): that read still holds a connection.
	slot := &followSlot{e: e}
	slot.refs.Store(1)
	defer slot.release()
	s := e.s
	key := s.k.stream(session, stream)
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		if s.ctx.Err() != nil {
			return errClosed
		}
		batch, err := e.after(ctx, key, xid, check)
		if errors.Is(err, errGap) {
			return e.gap("follow", stream)
		}
		if err != nil {
			return err
		}
		for _, en := range batch {
			xid, check = en.id, true
			if en.data == nil {
				continue
			}
			if err := send(formatEventID(stream, en.id), en.data); err != nil {
				return err
			}
			if isResponse(en.data) {
				return nil
			}
		}
		if len(batch) == replayBatch {
			continue
		}
		if err := e.waitFor(ctx, slot, key, xid); err != nil {
			return err
		}
	}
}

// followSlot is one Follow's place under MaxFollows.
type followSlot struct {
	e    *events
	refs atomic.Int32
}

func (f *followSlot) release() {
	if f.refs.Add(-1) == 0 {
		f.e.cnt.following.Add(-1)
		f.e.running.Add(-1)
	}
}

// waitFor waits, with XREAD BLOCK of at most FollowWait, until the stream
// has an entry after xid (or does not, by then). What XREAD returns is
// not sent: Follow's checked read sends it, so that an entry trimmed
// between the two reads is a gap, not a loss. A blocked read is not
// interrupted by its context, so it runs on a goroutine of its own, and
// waitFor returns the moment ctx ends or the State closes; the read ends
// within FollowWait (Close waits for it) and holds the follow's slot
// until then.
func (e *events) waitFor(ctx context.Context, slot *followSlot, key, xid string) error {
	s := e.s
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return errClosed
	}
	s.wg.Add(1)
	s.mu.Unlock()
	slot.refs.Add(1)
	done := make(chan error, 1)
	go func() {
		defer s.wg.Done()
		defer slot.release()
		wctx, cancel := context.WithTimeout(ctx, e.opts.FollowWait+s.opts.OpTimeout)
		defer cancel()
		done <- s.client.XRead(wctx, &redis.XReadArgs{Streams: []string{key, xid}, Count: 1, Block: e.opts.FollowWait}).Err()
	}()
	select {
	case err := <-done:
		if err != nil && !errors.Is(err, redis.Nil) { // Nil: nothing new within FollowWait
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return s.redisErr("follow (events)", err)
		}
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-s.ctx.Done():
		return errClosed
	}
}

// isResponse reports whether data is a JSON-RPC response (a result or
// an error), which ends its stream.
func isResponse(data []byte) bool {
	m, err := jsonrpc.Decode(data, &jsonrpc.DecodeOptions{AllowNullID: true})
	return err == nil && m.Kind.IsResponse()
}
