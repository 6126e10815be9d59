package streamable

import (
	"bytes"
	"container/heap"
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentwire/agentwire/internal/refusal"
	"github.com/agentwire/agentwire/jsonrpc"
)

// MemoryEventsOptions bounds a MemoryEvents. The zero value (or nil) means
// the documented defaults.
type MemoryEventsOptions struct {
	// MaxBytes bounds what the store holds for all sessions together:
	// the events' data plus an estimate of what each event, stream and
	// session costs besides. Past it the oldest events of any session are
	// dropped. Default 16 MiB.
	MaxBytes int64
	// MaxSessionBytes bounds what one session holds, counted the same
	// way, so that a busy session loses its own events rather than the
	// others'. Past it the session's oldest events are dropped, those of
	// its answered streams (whose response is stored: a client that has
	// gone for good leaves those) before those of its live ones. An
	// event larger than this on its own is given an id but not kept.
	// Default 1 MiB; never more than MaxBytes.
	MaxSessionBytes int64
	// Retain is how long an event is kept: older ones are dropped, and a
	// stream that has had no event for this long is forgotten. Default
	// 5 min.
	Retain time.Duration
	// Now is the clock (Retain); nil means time.Now. Tests inject one.
	Now func() time.Time
	// Logger receives one line per burst of events dropped for space;
	// nil means slog.Default().
	Logger *slog.Logger
}

// MemoryEventsStats counts what a MemoryEvents holds and has dropped.
type MemoryEventsStats struct {
	Events   int   // events held now, priming events included
	Bytes    int64 // what they, their streams and sessions are estimated to take
	Sessions int   // sessions with a stream held
	Streams  int   // streams held
	Appended int64 // events appended
	Replayed int64 // events sent by Replay
	// Dropped counts events forgotten before their stream or session
	// ended: Evicted plus Expired. A replay across one of them is refused
	// with ErrUnknownEvent (counted in Gaps), never skipped silently.
	Dropped int64
	Evicted int64 // of Dropped, for MaxSessionBytes or MaxBytes
	Expired int64 // of Dropped, older than Retain
	// TooLarge counts events larger than MaxSessionBytes on their own:
	// given an id (they are delivered live) but never kept; counted in
	// Evicted too.
	TooLarge int64
	// Gaps counts replays refused because events after Last-Event-ID had
	// been dropped.
	Gaps int64
	// UnknownIDs counts replays refused because Last-Event-ID named no
	// event of the session (never issued, or its stream forgotten).
	UnknownIDs int64
}

// MemoryEvents is the in-memory EventStore, the default of
// SessionOptions.Events: bounded in bytes per session and in total, and in
// age. It has no goroutine or timer: events older than Retain are dropped
// as the store is used (Append, Replay) and by Sweep. It is safe for
// concurrent use; send is called without the store's lock held, so a slow
// client delays no other session.
//
// An event id is "<stream>_<seq>": the stream id, then the event's number
// in decimal, parsed at the last "_" (a stream id may contain "_"). Numbers
// increase by one within a stream from a random start chosen when the
// store first sees the stream: a stream the store has forgotten (ended,
// expired or evicted) and then sees again starts afresh without reissuing
// an id a client may still hold, and an id of one session names no event
// of another's stream of the same name.
type MemoryEvents struct {
	opts    MemoryEventsOptions
	newBase func() uint64 // the number before a new stream's first event; random
	logs    [numEventDrops]refusal.Log

	replayed atomic.Int64 // counted as send is called, outside mu

	mu               sync.Mutex
	sessions         map[string]*evSession
	oldest, newest   *memEvent // every event held, in the order appended
	lruHead, lruTail *evStream // every stream held, least recently appended first
	ord              uint64    // the order of the last event appended, store-wide
	events, streams  int
	bytes            int64
	appended         int64
	evicted, expired int64
	tooLarge         int64
	gaps, unknown    int64
}

// The estimated cost of what the store keeps besides the events' data:
// the structs, their pointers in slices, heaps and maps, and what the
// allocator rounds up. Estimates on the high side, so that MaxBytes holds
// for the process's memory and not only for the data.
const (
	eventOverhead   = 128
	streamOverhead  = 256
	sessionOverhead = 256
)

// The kinds of drop that are logged, once per burst each.
const (
	dropSession = iota
	dropStore
	dropTooLarge
	numEventDrops
)

var eventDropMessages = [numEventDrops]string{
	dropSession:  "mcp events: dropped a session's oldest events to stay under MaxSessionBytes; a client resuming across them is told of the gap",
	dropStore:    "mcp events: dropped the store's oldest events to stay under MaxBytes; a client resuming across them is told of the gap",
	dropTooLarge: "mcp events: an event larger than MaxSessionBytes was not kept for replay (it is still delivered live)",
}

type evSession struct {
	id      string
	streams map[string]*evStream
	heap    streamHeap // its streams that hold events, the first to evict on top
	bytes   int64
}

type evStream struct {
	sess *evSession
	name string
	evs  []*memEvent // the events held, numbered lo, lo+1, …
	lo   uint64      // the number of evs[0]; next when evs is empty
	next uint64      // the number of the next event
	// first is the number of the first event this record issued: an id
	// below it names an event of another record of the same name (an
	// earlier life of the stream, or another session's).
	first uint64
	// lost is the number of the latest event with data that was dropped
	// (0: none). A replay from before it would skip that event.
	lost     uint64
	answered bool      // its response is stored: its events are evicted first
	used     time.Time // the last Append
	hidx     int       // in sess.heap; -1 when it holds no event
	lprev    *evStream // the store's streams, by last Append
	lnext    *evStream
}

type memEvent struct {
	st         *evStream
	seq        uint64
	ord        uint64
	data       []byte // the store's copy; nil for a priming event
	at         time.Time
	size       int64
	prev, next *memEvent // the store's events, in the order appended
}

var _ EventStore = (*MemoryEvents)(nil)

// NewMemoryEvents returns an empty store.
func NewMemoryEvents(opts *MemoryEventsOptions) *MemoryEvents {
	m := &MemoryEvents{sessions: map[string]*evSession{}}
	if opts != nil {
		m.opts = *opts
	}
	if m.opts.MaxBytes <= 0 {
		m.opts.MaxBytes = 16 << 20
	}
	if m.opts.MaxSessionBytes <= 0 {
		m.opts.MaxSessionBytes = 1 << 20
	}
	m.opts.MaxSessionBytes = min(m.opts.MaxSessionBytes, m.opts.MaxBytes)
	if m.opts.Retain <= 0 {
		m.opts.Retain = 5 * time.Minute
	}
	if m.opts.Now == nil {
		m.opts.Now = time.Now
	}
	for i := range m.logs {
		m.logs[i].Logger = m.opts.Logger
		m.logs[i].Now = m.opts.Now
	}
	// 2^48 starts: the chance that a forgotten stream's new start lands
	// within reach of an id a client still holds is negligible, and the
	// ids stay short (at most 15 digits for years of events).
	m.newBase = func() uint64 { return rand.Uint64N(1 << 48) }
	return m
}

// Stats reports what the store holds and has dropped.
func (m *MemoryEvents) Stats() MemoryEventsStats {
	m.mu.Lock()
	defer m.mu.Unlock()
	return MemoryEventsStats{
		Events: m.events, Bytes: m.bytes, Sessions: len(m.sessions), Streams: m.streams,
		Appended: m.appended, Replayed: m.replayed.Load(),
		Dropped: m.evicted + m.expired, Evicted: m.evicted, Expired: m.expired, TooLarge: m.tooLarge,
		Gaps: m.gaps, UnknownIDs: m.unknown,
	}
}

// Sweep drops the events older than Retain, and forgets the streams that
// have had no event for as long. The store does so anyway as it is used;
// a server's periodic sweeper calls Sweep so that an idle store gives its
// memory back too.
func (m *MemoryEvents) Sweep() {
	m.mu.Lock()
	m.expireLocked(m.opts.Now())
	m.mu.Unlock()
}

// Append records data (nil or empty: a priming event, which takes an id
// but is never replayed) as the next event of stream in session. The
// store keeps a copy of data. It makes room by dropping the session's
// oldest events when the session is over MaxSessionBytes, and the store's
// oldest when it is over MaxBytes; it fails only when ctx has ended, or
// when session and stream ids alone exceed MaxSessionBytes.
func (m *MemoryEvents) Append(ctx context.Context, session, stream string, data []byte) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", fmt.Errorf("mcp events: append: %w", err)
	}
	var own []byte
	answer := false
	if len(data) > 0 {
		own = bytes.Clone(data)
		answer = isResponse(own)
	}
	fixed := sessionOverhead + int64(len(session)) + streamOverhead + int64(len(stream))
	if fixed > m.opts.MaxSessionBytes {
		return "", fmt.Errorf("mcp events: append: session and stream ids of %d bytes exceed MaxSessionBytes (%d)",
			len(session)+len(stream), m.opts.MaxSessionBytes)
	}
	size := eventOverhead + int64(len(own))
	var logged [numEventDrops]bool

	m.mu.Lock()
	now := m.opts.Now()
	m.expireLocked(now)
	st := m.streamLocked(session, stream, now)
	seq := st.next
	st.next++
	m.appended++
	if answer {
		st.answered = true
		if st.hidx >= 0 {
			heap.Fix(&st.sess.heap, st.hidx)
		}
	}
	if fixed+size > m.opts.MaxSessionBytes {
		// It can never fit: drop it at once. The stream's earlier events
		// go too: a replay from any of them would have to skip this one.
		for len(st.evs) > 0 {
			m.dropFrontLocked(st)
			m.evicted++
		}
		st.lo = st.next
		if own != nil {
			st.lost = seq
		}
		m.evicted++
		m.tooLarge++
		logged[dropTooLarge] = true
		m.makeRoomLocked(st, 0, &logged)
	} else {
		// Room is made before the event goes in, so that it is never its
		// own victim: the newest event is the last a client has missed.
		m.makeRoomLocked(st, size, &logged)
		m.ord++
		e := &memEvent{st: st, seq: seq, ord: m.ord, data: own, at: now, size: size, prev: m.newest}
		if m.newest != nil {
			m.newest.next = e
		} else {
			m.oldest = e
		}
		m.newest = e
		if len(st.evs) == 0 {
			st.lo = seq
		}
		st.evs = append(st.evs, e)
		if st.hidx < 0 {
			heap.Push(&st.sess.heap, st)
		}
		m.events++
		m.bytes += size
		st.sess.bytes += size
	}
	m.mu.Unlock()

	for kind, ok := range logged {
		if ok {
			m.logs[kind].Refused(eventDropMessages[kind], "max_bytes", m.opts.MaxBytes,
				"max_session_bytes", m.opts.MaxSessionBytes, "event_bytes", len(data))
		}
	}
	return formatEventID(stream, seq), nil
}

// Replay calls send, in order, with each event of lastID's stream after
// lastID, priming events skipped, and returns the stream. send is called
// without the store's lock held; it must not modify data. An id this
// session's streams never issued, or of a stream forgotten since, is
// refused with ErrUnknownEvent; so is one after which an event was
// dropped (for space or age), a gap the client must hear about.
func (m *MemoryEvents) Replay(ctx context.Context, session, lastID string, send func(id string, data []byte) error) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", fmt.Errorf("mcp events: replay: %w", err)
	}
	name, seq, ok := parseEventID(lastID)

	m.mu.Lock()
	m.expireLocked(m.opts.Now())
	var st *evStream
	if s := m.sessions[session]; ok && s != nil {
		st = s.streams[name]
	}
	if st == nil || seq < st.first || seq >= st.next {
		m.unknown++
		m.mu.Unlock()
		return "", fmt.Errorf("%w: no event of this session has that id", ErrUnknownEvent)
	}
	if seq < st.lost {
		m.gaps++
		m.mu.Unlock()
		return "", fmt.Errorf("%w: events after it were dropped (older than the retention, or over the store's bounds)", ErrUnknownEvent)
	}
	var later []*memEvent
	if seq+1 > st.lo {
		later = st.evs[seq+1-st.lo:]
	} else {
		later = st.evs
	}
	// A copy of the pointers: the stream's slice changes under mu once it
	// is released; the events themselves never change.
	later = append([]*memEvent(nil), later...)
	m.mu.Unlock()

	for _, e := range later {
		if e.data == nil {
			continue
		}
		if err := ctx.Err(); err != nil {
			return name, fmt.Errorf("mcp events: replay: %w", err)
		}
		if err := send(formatEventID(name, e.seq), e.data); err != nil {
			return name, err
		}
		m.replayed.Add(1)
	}
	return name, nil
}

// EndStream forgets stream's events. A later Append to the same stream id
// starts it afresh, with ids that name none of the forgotten events. It
// never fails: there is nothing to wait for.
func (m *MemoryEvents) EndStream(_ context.Context, session, stream string) error {
	m.mu.Lock()
	if s := m.sessions[session]; s != nil {
		if st := s.streams[stream]; st != nil {
			m.removeStreamLocked(st)
		}
	}
	m.mu.Unlock()
	return nil
}

// EndSession forgets every stream of session. It never fails.
func (m *MemoryEvents) EndSession(_ context.Context, session string) error {
	m.mu.Lock()
	if s := m.sessions[session]; s != nil {
		for _, st := range s.streams {
			m.removeStreamLocked(st) // the last one removes s
		}
	}
	m.mu.Unlock()
	return nil
}

// streamLocked returns stream's record in session, made if need be, moved
// to the back of the store's list as the most recently appended.
func (m *MemoryEvents) streamLocked(session, stream string, now time.Time) *evStream {
	s := m.sessions[session]
	if s == nil {
		s = &evSession{id: session, streams: map[string]*evStream{}, bytes: sessionOverhead + int64(len(session))}
		m.sessions[session] = s
		m.bytes += s.bytes
	}
	st := s.streams[stream]
	if st == nil {
		start := m.newBase() + 1
		st = &evStream{sess: s, name: stream, lo: start, next: start, first: start, hidx: -1}
		s.streams[stream] = st
		m.streams++
		cost := streamOverhead + int64(len(stream))
		s.bytes += cost
		m.bytes += cost
	} else {
		m.unlinkStreamLocked(st)
	}
	st.used = now
	st.lprev = m.lruTail
	if m.lruTail != nil {
		m.lruTail.lnext = st
	} else {
		m.lruHead = st
	}
	m.lruTail = st
	return st
}

// makeRoomLocked drops events until size more bytes fit in keep's session
// and in the store. Events go before stream records: a record without
// events still lets a client that had everything resume. keep, the stream
// being appended to, may lose its events but not its record.
func (m *MemoryEvents) makeRoomLocked(keep *evStream, size int64, logged *[numEventDrops]bool) {
	s := keep.sess
	for s.bytes+size > m.opts.MaxSessionBytes {
		if len(s.heap) > 0 {
			m.dropFrontLocked(s.heap[0])
			m.evicted++
			logged[dropSession] = true
			continue
		}
		victim := (*evStream)(nil)
		for _, st := range s.streams {
			if st != keep && (victim == nil || st.used.Before(victim.used)) {
				victim = st
			}
		}
		if victim == nil {
			break // cannot happen: Append checked that keep fits alone
		}
		m.removeStreamLocked(victim)
		logged[dropSession] = true
	}
	for m.bytes+size > m.opts.MaxBytes {
		if m.oldest != nil {
			m.dropFrontLocked(m.oldest.st)
			m.evicted++
			logged[dropStore] = true
			continue
		}
		victim := m.lruHead // no event is left: every record is empty
		if victim == keep {
			victim = victim.lnext
		}
		if victim == nil {
			break // cannot happen: MaxSessionBytes <= MaxBytes
		}
		m.removeStreamLocked(victim)
		logged[dropStore] = true
	}
}

// expireLocked drops the events older than Retain, then forgets the
// streams with no Append for as long (their events went first).
func (m *MemoryEvents) expireLocked(now time.Time) {
	cut := now.Add(-m.opts.Retain)
	for e := m.oldest; e != nil && !e.at.After(cut); e = m.oldest {
		m.dropFrontLocked(e.st) // the store's oldest is its stream's oldest
		m.expired++
	}
	for st := m.lruHead; st != nil && !st.used.After(cut); st = m.lruHead {
		m.expired += int64(len(st.evs)) // none, unless the clock went back
		m.removeStreamLocked(st)
	}
}

// dropFrontLocked forgets st's oldest event (the caller counts why).
func (m *MemoryEvents) dropFrontLocked(st *evStream) {
	e := st.evs[0]
	st.evs[0] = nil // no pointer left behind in the array's head
	st.evs = st.evs[1:]
	st.lo++
	if e.data != nil {
		st.lost = e.seq
	}
	m.unlinkEventLocked(e)
	m.events--
	m.bytes -= e.size
	st.sess.bytes -= e.size
	if len(st.evs) == 0 {
		st.evs = nil
		heap.Remove(&st.sess.heap, st.hidx)
	} else {
		heap.Fix(&st.sess.heap, st.hidx)
	}
}

// removeStreamLocked forgets st and its events (not counted as dropped:
// it was ended or expired as a whole), and its session once it has no
// stream left.
func (m *MemoryEvents) removeStreamLocked(st *evStream) {
	s := st.sess
	for _, e := range st.evs {
		m.unlinkEventLocked(e)
		m.events--
		m.bytes -= e.size
		s.bytes -= e.size
	}
	st.evs = nil
	if st.hidx >= 0 {
		heap.Remove(&s.heap, st.hidx)
	}
	m.unlinkStreamLocked(st)
	delete(s.streams, st.name)
	m.streams--
	cost := streamOverhead + int64(len(st.name))
	s.bytes -= cost
	m.bytes -= cost
	if len(s.streams) == 0 {
		delete(m.sessions, s.id)
		m.bytes -= s.bytes // its own overhead, all that is left
	}
}

func (m *MemoryEvents) unlinkEventLocked(e *memEvent) {
	if e.prev != nil {
		e.prev.next = e.next
	} else {
		m.oldest = e.next
	}
	if e.next != nil {
		e.next.prev = e.prev
	} else {
		m.newest = e.prev
	}
	e.prev, e.next = nil, nil
}

func (m *MemoryEvents) unlinkStreamLocked(st *evStream) {
	if st.lprev != nil {
		st.lprev.lnext = st.lnext
	} else if m.lruHead == st {
		m.lruHead = st.lnext
	}
	if st.lnext != nil {
		st.lnext.lprev = st.lprev
	} else if m.lruTail == st {
		m.lruTail = st.lprev
	}
	st.lprev, st.lnext = nil, nil
}

// streamHeap orders a session's streams that hold events by which loses
// its oldest event first: answered streams (their client has all but
// fetched the response, or has gone) before live ones, then the stream
// whose oldest event is the oldest.
type streamHeap []*evStream

func (h streamHeap) Len() int { return len(h) }
func (h streamHeap) Less(i, j int) bool {
	a, b := h[i], h[j]
	if a.answered != b.answered {
		return a.answered
	}
	return a.evs[0].ord < b.evs[0].ord
}
func (h streamHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].hidx = i
	h[j].hidx = j
}
func (h *streamHeap) Push(x any) {
	st := x.(*evStream)
	st.hidx = len(*h)
	*h = append(*h, st)
}
func (h *streamHeap) Pop() any {
	old := *h
	st := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	st.hidx = -1
	return st
}

// formatEventID is the id of event seq of stream.
func formatEventID(stream string, seq uint64) string {
	return stream + "_" + strconv.FormatUint(seq, 10)
}

// parseEventID splits an id made by formatEventID at its last "_". It
// accepts exactly the ids formatEventID makes: the number is decimal,
// without sign, leading zero or overflow, so that one event has one id.
func parseEventID(id string) (stream string, seq uint64, ok bool) {
	i := strings.LastIndexByte(id, '_')
	if i < 0 {
		return "", 0, false
	}
	digits := id[i+1:]
	if digits == "" || len(digits) > 20 || (digits[0] == '0' && len(digits) > 1) {
		return "", 0, false
	}
	for j := 0; j < len(digits); j++ {
		if digits[j] < '0' || digits[j] > '9' {
			return "", 0, false
		}
	}
	n, err := strconv.ParseUint(digits, 10, 64)
	if err != nil {
		return "", 0, false // over 2^64-1
	}
	return id[:i], n, true
}

// isResponse reports whether data, one encoded JSON-RPC message, is a
// response: an id that is not null, and a result or an error. The
// handler's own output is valid JSON, so the top-level members are read
// without validating it again.
func isResponse(data []byte) bool {
	var id, answer, method bool
	jsonrpc.EachMember(data, func(key, value []byte) bool {
		switch string(key) {
		case "id":
			id = !bytes.Equal(value, []byte("null"))
		case "result", "error":
			answer = true
		case "method":
			method = true
		}
		return true
	})
	return id && answer && !method
}
