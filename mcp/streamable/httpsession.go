package streamable

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	clist "container/list"

	"github.com/agentwire/agentwire/internal/refusal"
	"github.com/agentwire/agentwire/jsonrpc"
	"github.com/agentwire/agentwire/mcp"
	"github.com/agentwire/agentwire/mcp/auth"
	"github.com/agentwire/agentwire/rpc"
)

// Legacy sessions (Options.Sessions): the table of sessions, each one
// long-lived rpc.Conn of the backend's session handler, fed by POSTs and
// written to by one MessageWriter that sends each message on exactly one
// of the session's streams:
//
//	a response                    -> the POST stream of its request
//	a notification or request of  -> that request's POST stream, while it
//	a running request (Related)      is open and unanswered
//	anything else                 -> the standalone GET stream ("g")
//
// A stream is logical: its connection may drop and a GET with
// Last-Event-ID take it over, so what a stream carries is appended to the
// event store before it is written (when resumability is on and the
// client has, or is about to have, an id of the stream to resume from).
// One mutex per session (wmu) keeps the store's order the wire's: the
// writer, the priming event of a stream that starts, and a replay all
// hold it.
//
// Lock order: wmu, then exchange.mu, then httpSession.mu; sessionTable.mu
// before httpSession.mu. Nothing calls into the session's rpc.Conn with
// one of them held (a request pushed there may be answered inline, which
// takes wmu), except the writer failing a server request it cannot send:
// an answer is delivered, never written.

// Defaults of SessionOptions.
const (
	DefaultSessionIdleTimeout      = 10 * time.Minute
	DefaultSessionFirstIdleTimeout = 60 * time.Second
	DefaultMaxSessions             = 4096
	DefaultMaxStreamsPerSession    = 16
	DefaultSessionRetry            = time.Second
)

const (
	// minEvictIdle is how long a session must have been idle before it is
	// ended to make room for a new one: a flood of initialize requests
	// must not end, one after the other, the sessions of clients between
	// two requests.
	minEvictIdle = time.Second
	// restoreWait bounds the wait for the answers of the messages that
	// rebuild a restored session (they are dropped, but must be out of
	// the way before the request that restored it is served).
	restoreWait = 5 * time.Second
	// storeTimeout bounds one call to the SessionStore or the EventStore
	// made outside a request's context.
	storeTimeout = 5 * time.Second
	// gStream is the id of a session's standalone (GET) stream.
	gStream = "g"
	// minResumeWait is the least time a request whose POST connection
	// went, its stream resumable, waits for a GET to take the stream
	// over (Last-Event-ID) before it is cancelled: the resume deadline is
	// three times Retry, at least this, at most IdleTimeout. A client
	// whose connection broke reconnects after Retry; one that does not
	// come back must not hold the request, its MaxInFlight place and its
	// session forever.
	minResumeWait = 10 * time.Second
	// maxRecordSubscriptions bounds the resources/subscribe a session's
	// SessionRecord keeps, as mcp/server's DefaultMaxResourceSubscriptions
	// bounds a connection's: a record is saved whole on every change.
	maxRecordSubscriptions = 1024
	// maxRecordBytes bounds a SessionRecord's restore messages in all, and
	// maxInitRecordBytes its initialize (whose capabilities and
	// clientInfo are the client's to make large): a session whose
	// initialize is larger is not shared (no record; another instance
	// answers 404 and the client initializes again there).
	maxRecordBytes     = 256 << 10
	maxInitRecordBytes = 64 << 10
	// recordOverhead is what a restore message costs besides its params.
	recordOverhead = 64
)

// The session table's own logs, once per burst each, beside the
// handler's refusals (httplimits.go).
const (
	logResumeTimeout = iota
	logRecordFull
	numSessionLogs
)

var sessionLogMessages = [numSessionLogs]string{
	logResumeTimeout: "mcp http: cancelled a request whose client went and resumed none of its stream in time (the resume deadline)",
	logRecordFull:    "mcp http: a client message was left out of its session's record (too many subscriptions, or too large): another instance restoring the session will not see it",
}

// The JSON-RPC codes of the session errors, as the TypeScript SDK sends
// them: -32000 for a missing header, -32001 for an unknown session.
// Neither is an error a 2026-07-28 client reads as a modern server's.
const (
	codeBadRequest      = -32000
	codeSessionNotFound = -32001
)

// sessionTable is the handler's sessions.
type sessionTable struct {
	h         *Handler
	opts      SessionOptions // resolved
	backend   SessionBackend
	events    EventStore
	follower  EventFollower // events, when it is one
	resumable bool          // events keeps something (not NoEvents)
	retry     []byte        // "retry: N\n\n"
	retryMS   string

	// resumeWait is the resume deadline of a request whose POST went
	// (minResumeWait says why).
	resumeWait time.Duration

	created  atomic.Int64
	expired  atomic.Int64
	replayed atomic.Int64
	// resumeTimeouts counts requests cancelled at their resume deadline;
	// recordOverflows client messages left out of a record (full).
	resumeTimeouts  atomic.Int64
	recordOverflows atomic.Int64
	logs            [numSessionLogs]refusal.Log

	mu     sync.Mutex
	m      map[string]*httpSession
	peak   int        // the most entries m has held since it was made
	fresh  clist.List // *httpSession idle, nothing since initialize; oldest first
	idle   clist.List // *httpSession idle after being used; oldest first
	timer  *time.Timer
	wakeAt time.Duration // when the timer fires (since epoch); 0: not armed
	// lastTouches is when the sweeper last touched, in the Store, the
	// sessions kept busy by an open stream.
	lastTouches time.Duration
	// ending holds ended sessions whose connection still runs handlers
	// (the end-of-stream grace): Shutdown waits for them.
	ending map[*httpSession]struct{}
	// detached lists the resume deadlines of requests whose POST went
	// (*detachment), earliest first: every deadline is resumeWait after
	// its start, so the order they are added in is their order, and the
	// sweeper serves them all without a timer of their own.
	detached clist.List
	// restores holds the ids being loaded from the Store, so that
	// concurrent requests for one id load it once. An entry lives only
	// while the request that made it runs: there are at most MaxInFlight.
	restores map[string]*restoreCall
	closed   bool // Shutdown has ended the sessions: no new one
	// unwatch stops the Store's watcher (a SessionWatcher), at Shutdown.
	unwatch func()
}

// detachment is the resume deadline of one request whose POST went.
type detachment struct {
	s  *httpSession
	st *sseStream
	at time.Duration // since the handler's epoch; st.detachAt while it stands
}

// restoreCall is one load of a session from the Store, which concurrent
// requests for the same id wait for.
type restoreCall struct {
	done chan struct{}
	none bool // there is no such session for its caller: answer 404
}

func newSessionTable(h *Handler, b Backend, o *SessionOptions) *sessionTable {
	sb, ok := b.(SessionBackend)
	if !ok {
		panic("streamable: Options.Sessions needs a backend that is a SessionBackend")
	}
	t := &sessionTable{h: h, opts: *o, backend: sb, m: map[string]*httpSession{}, ending: map[*httpSession]struct{}{}, restores: map[string]*restoreCall{}}
	op := &t.opts
	if op.IdleTimeout <= 0 {
		op.IdleTimeout = DefaultSessionIdleTimeout
	}
	if op.FirstIdleTimeout <= 0 {
		op.FirstIdleTimeout = DefaultSessionFirstIdleTimeout
	}
	op.FirstIdleTimeout = min(op.FirstIdleTimeout, op.IdleTimeout)
	if op.MaxSessions <= 0 {
		op.MaxSessions = DefaultMaxSessions
	}
	if op.MaxStreamsPerSession <= 0 {
		op.MaxStreamsPerSession = DefaultMaxStreamsPerSession
	}
	if op.Retry <= 0 {
		op.Retry = DefaultSessionRetry
	}
	if op.Events == nil {
		op.Events = NewMemoryEvents(nil)
	}
	if op.Instance == "" {
		op.Instance = randomID(8)
	}
	t.events = op.Events
	_, off := op.Events.(noEvents)
	t.resumable = !off
	t.follower, _ = op.Events.(EventFollower)
	t.retryMS = strconv.FormatInt(op.Retry.Milliseconds(), 10)
	t.retry = []byte("retry: " + t.retryMS + "\n\n")
	t.resumeWait = min(max(3*op.Retry, minResumeWait), op.IdleTimeout)
	for i := range t.logs {
		t.logs[i].Logger = h.log
	}
	if w, ok := op.Store.(SessionWatcher); ok {
		stop, err := w.WatchSessions(context.Background(), t.watched)
		if err != nil {
			// The Touch still finds out, only later.
			h.limits.refused(refStoreError, "op", "watch sessions", "error", err)
		} else {
			t.unwatch = stop
		}
	}
	return t
}

// watched is told by the Store's watcher that session id changed hands
// (holder) or ended (""). A session held here is checked against its
// record on a goroutine of its own (f must not block): the record is the
// truth, and the message may come after this instance took the session
// back; one that is another's, or gone, is dropped as the Touch drops it.
func (t *sessionTable) watched(id, holder string) {
	if holder == t.opts.Instance {
		return
	}
	t.mu.Lock()
	s := t.m[id]
	if s == nil || s.restoring != nil || s.ended {
		t.mu.Unlock()
		return
	}
	s.lastTouch = t.h.since()
	t.mu.Unlock()
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
		defer cancel()
		t.touch(ctx, s)
	}()
}

// randomID returns n random bytes in base64url without padding.
func randomID(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// primes reports whether a stream at version starts with a priming event:
// clients before 2025-11-25 cannot handle its empty data.
func primes(version string) bool { return version >= "2025-11-25" }

// httpSession is one legacy session.
type httpSession struct {
	t     *sessionTable
	id    string
	owner string
	ident *auth.Identity // bound at mint, in the handlers' context
	conn  *rpc.Conn

	// Under t.mu.
	busy      int           // requests and GETs using it, unanswered requests whose POST went
	used      bool          // a message besides notifications/initialized since initialize
	seen      time.Duration // last activity, since the handler's epoch
	elem      *clist.Element
	in        *clist.List // fresh, idle or nil (busy, or ended)
	ended     bool
	restoring chan struct{} // closed when a restored session is ready (or given up)
	lastTouch time.Duration // when the Store last heard of it
	touchedUp bool          // its record's life was extended past FirstIdleTimeout

	// wmu orders the session's output: see the top of the file.
	wmu sync.Mutex
	// gEver: a GET stream has been attached once (under wmu): a server
	// request for the GET stream is then kept for a reconnecting client
	// rather than failed.
	gEver bool

	// streams counts its open event streams (MaxStreamsPerSession).
	streams atomic.Int32

	mu      sync.Mutex
	version string
	g       sseStream             // the standalone stream; g.conn is its GET
	byReq   map[string]*sseStream // unanswered requests' streams, by request id
	live    map[string]*sseStream // the same streams, by stream id
	gone    bool                  // ended: nothing more is stored
	failed  bool                  // initialize was answered with an error: the session goes
	drops   int                   // answers of restoring messages still to come
	dropped chan struct{}         // closed when drops reaches 0
	// finished: its connection's end has begun (finishKeep); no GET may
	// start following a stream of it any more.
	finished bool
	// follows are its GETs following a stream of another instance
	// (EventFollower): Shutdown and the session's end close them.
	follows map[*exchange]struct{}
	// What rebuilds it elsewhere (SessionOptions.Store): the client's
	// messages that built its state, each kept once it was answered
	// successfully, re-encoded with its minimal params under an id of
	// the record's (rSeq: the client's ids do not matter, its answers
	// are dropped). rBytes is what they come to (maxRecordBytes).
	rInit, rLevel []byte
	rInitialized  bool
	rSubs         []restoreSub
	rBytes        int
	rSeq          int64
	// unshared: its initialize was too large to record; it has no record.
	unshared bool
}

// restoreSub is one live subscription a record keeps.
type restoreSub struct {
	uri string
	msg []byte // its resources/subscribe, re-encoded
}

// recordable is what a record keeps of one client request, once it has
// been answered successfully: its method and its params, re-encoded with
// only what restoring needs.
type recordable struct {
	method string
	params []byte
	uri    string // resources/subscribe and resources/unsubscribe
}

// sseStream is one logical stream of a session: the standalone stream, or
// a POST's (its request's notifications, requests and response).
type sseStream struct {
	id   string // gStream, or random per POST
	req  string // the request it answers; "" for gStream
	sse  bool   // its POST accepts an event stream
	init bool   // it answers the session's initialize
	drop bool   // a restoring message's: its output goes nowhere
	// hasID: an event id of the stream has gone out to the client, which
	// can therefore resume it. Set under wmu; read without.
	hasID atomic.Bool

	// keep is what the session's record keeps of its request once it is
	// answered successfully (SessionOptions.Store); nil for nothing.
	keep *recordable

	// Under httpSession.mu.
	conn      *exchange // the live connection; nil when none
	answered  bool
	cancelled bool
	// hold: it holds the session busy (the unit its POST acquired), until
	// it is answered or forgotten, or its resume deadline passes.
	hold bool
	// detachAt is when its request is cancelled unless a connection takes
	// the stream over (since the handler's epoch); 0 while a connection
	// carries it, or before its POST went.
	detachAt time.Duration
}

// since is the handler's monotonic clock.
func (h *Handler) since() time.Duration { return time.Since(h.epoch) }

// ----- the table -----

// mint makes the session an initialize request (without Mcp-Session-Id)
// opens, busy for that request; nil when the table is full and nothing
// could be evicted (503 answered). Its record keeps the initialize once
// it is answered successfully.
func (t *sessionTable) mint(w http.ResponseWriter, r *http.Request, ex *exchange) *httpSession {
	s := t.newSession(randomID(16), ex.id.Owner(), ex.id, ex.in.note.Version)
	if t.insert(w, r, s, false) != inserted {
		return nil
	}
	return s
}

// newSession makes a session and its connection, not yet in the table.
func (t *sessionTable) newSession(id, owner string, ident *auth.Identity, version string) *httpSession {
	s := &httpSession{t: t, id: id, owner: owner, ident: ident, version: version}
	s.g.id = gStream
	// The handlers' context is not a POST's: a dropped connection is
	// not a cancellation, and the session outlives its requests.
	ctx := withSessionID(context.Background(), id)
	if ident != nil {
		ctx = auth.WithIdentity(ctx, ident)
	}
	s.conn = t.h.conns.NewMessages(ctx, nil, s, &sessionHandler{s: s, h: t.backend.SessionHandler()})
	return s
}

// What insert did.
const (
	inserted = iota
	insertFull
	insertExists
)

// insert enters s into the table, busy (its caller's), making room under
// MaxSessions; it answers 503 when there is none. With onlyNew, a session
// of the same id already there is left alone (insertExists).
func (t *sessionTable) insert(w http.ResponseWriter, r *http.Request, s *httpSession, onlyNew bool) int {
	now := t.h.since()
	t.mu.Lock()
	if onlyNew && t.m[s.id] != nil {
		t.mu.Unlock()
		s.conn.EndInput()
		return insertExists
	}
	if t.closed {
		t.mu.Unlock()
		s.conn.EndInput()
		w.Header().Set("Retry-After", "1")
		httpError(w, http.StatusServiceUnavailable, "", jsonrpc.CodeInternalError, "Service Unavailable: the server is shutting down", nil)
		return insertFull
	}
	var victim *httpSession
	if len(t.m) >= t.opts.MaxSessions {
		victim = t.evictableLocked(now)
		if victim == nil {
			t.mu.Unlock()
			s.conn.EndInput()
			t.h.limits.refused(refSessionsFull, "limit", t.opts.MaxSessions, "remote", r.RemoteAddr)
			t.h.unavailable(w, r, "too many sessions")
			return insertFull
		}
		t.removeLocked(victim)
	}
	s.busy, s.seen, s.lastTouch = 1, now, now
	t.m[s.id] = s
	t.peak = max(t.peak, len(t.m))
	t.mu.Unlock()
	if victim != nil {
		t.h.limits.refused(refSessionEvicted, "limit", t.opts.MaxSessions)
		t.finish(victim, false)
	}
	return inserted
}

// evictableLocked picks the session to end for room: the one idle
// longest, preferring one that has sent nothing since initialize, once
// it has been idle for minEvictIdle.
func (t *sessionTable) evictableLocked(now time.Duration) *httpSession {
	limit := min(minEvictIdle, t.opts.FirstIdleTimeout)
	for _, l := range []*clist.List{&t.fresh, &t.idle} {
		if e := l.Front(); e != nil {
			if s := e.Value.(*httpSession); now-s.seen >= limit {
				return s
			}
		}
	}
	return nil
}

// timeoutOf is how long s may idle.
func (t *sessionTable) timeoutOf(s *httpSession) time.Duration {
	if s.in == &t.fresh {
		return t.opts.FirstIdleTimeout
	}
	return t.opts.IdleTimeout
}

// acquire finds the session id names for a request of ident, busy for
// the caller until release; restored from the Store when this instance
// does not hold it. It answers 404 (or 503) and returns nil when there is
// none.
func (t *sessionTable) acquire(w http.ResponseWriter, r *http.Request, id string, ident *auth.Identity) *httpSession {
	owner := ident.Owner()
	for {
		now := t.h.since()
		t.mu.Lock()
		s := t.m[id]
		if s != nil && s.restoring != nil {
			ready := s.restoring
			t.mu.Unlock()
			<-ready
			continue
		}
		if s == nil {
			if call := t.restores[id]; call != nil {
				// Being loaded for another request: its answer is ours.
				t.mu.Unlock()
				<-call.done
				if call.none {
					break
				}
				continue
			}
		}
		if s != nil && s.owner == owner {
			if s.in != nil && now-s.seen >= t.timeoutOf(s) {
				// Expired, and the sweeper has not come yet.
				t.removeLocked(s)
				t.mu.Unlock()
				t.expired.Add(1)
				t.finish(s, false)
				break
			}
			t.unlistLocked(s)
			s.busy++
			s.seen = now
			touch := t.opts.Store != nil && now-s.lastTouch >= t.opts.IdleTimeout/4
			if touch {
				s.lastTouch = now
			}
			t.mu.Unlock()
			if touch && !t.touch(r.Context(), s) {
				// Gone from the Store (ended elsewhere), or taken over by
				// another instance: dropped here. Take it back, or
				// learn that it is gone.
				t.release(s)
				continue
			}
			return s
		}
		if s != nil || t.opts.Store == nil {
			t.mu.Unlock()
			break
		}
		// Not held here: perhaps another instance's, or one that stopped.
		call := &restoreCall{done: make(chan struct{})}
		t.restores[id] = call
		t.mu.Unlock()
		s, how := t.restore(w, r, id, ident)
		t.mu.Lock()
		delete(t.restores, id)
		t.mu.Unlock()
		call.none = how == restoredNone
		close(call.done)
		switch how {
		case restoredOK:
			return s
		case restoredAnswered:
			return nil
		case restoredRetry:
			continue
		}
		break
	}
	t.h.sessionGone(w, r)
	return nil
}

// touch extends s's life in the Store and reports whether it is still
// this instance's; one taken over, or gone, is dropped here.
func (t *sessionTable) touch(ctx context.Context, s *httpSession) bool {
	holder, err := t.opts.Store.Touch(ctx, s.id, t.opts.IdleTimeout)
	switch {
	case errors.Is(err, ErrUnknownSession):
		t.drop(s, false)
		return false
	case err != nil:
		t.h.limits.refused(refStoreError, "op", "touch", "error", err)
		return true
	case holder != "" && holder != t.opts.Instance:
		t.drop(s, true)
		return false
	}
	return true
}

// drop ends the local copy of a session that another instance holds now
// (elsewhere), or that is gone from the Store, without touching its
// record. Its running handlers get the end-of-stream grace; what they
// still send goes to the event store when the session lives elsewhere.
func (t *sessionTable) drop(s *httpSession, elsewhere bool) {
	t.mu.Lock()
	removed := t.removeLocked(s)
	t.mu.Unlock()
	if removed {
		t.finishKeep(s, elsewhere)
	}
}

// What restore did.
const (
	restoredOK       = iota
	restoredNone     // no such session for the caller: 404 is to be answered
	restoredAnswered // answered: 503 (the Store failed, or the table is full)
	restoredRetry    // the table has the id now: look again
)

// restore rebuilds a session another instance made (or one that
// stopped) from its record: a new connection is fed the client's
// messages that built its state, their answers dropped. The record is
// loaded first, and only a session that exists, for this caller, enters
// the table: an id that names nothing costs one Load, never a
// connection, and never evicts a live session to make room. A Store that
// fails is 503 (Retry-After: 1), not 404, which would make the client
// drop a session that lives on. While the connection is fed the session
// is in the table, restoring: concurrent requests for it wait.
func (t *sessionTable) restore(w http.ResponseWriter, r *http.Request, id string, ident *auth.Identity) (*httpSession, int) {
	ctx, cancel := context.WithTimeout(r.Context(), storeTimeout)
	rec, err := t.opts.Store.Load(ctx, id)
	cancel()
	owner := ident.Owner()
	switch {
	case errors.Is(err, ErrUnknownSession):
		return nil, restoredNone
	case err != nil:
		if r.Context().Err() == nil { // not merely its client gone
			t.h.limits.refused(refStoreError, "op", "load", "error", err)
		}
		w.Header().Set("Retry-After", "1")
		httpError(w, http.StatusServiceUnavailable, "", jsonrpc.CodeInternalError, "Service Unavailable: the session store failed", nil)
		return nil, restoredAnswered
	case rec == nil || rec.ID != id || rec.Owner != owner:
		return nil, restoredNone // another identity's: as if there were none
	}
	s := t.newSession(id, owner, ident, rec.Version)
	ready := make(chan struct{})
	s.restoring = ready
	defer close(ready)
	switch t.insert(w, r, s, true) {
	case insertFull:
		return nil, restoredAnswered
	case insertExists:
		return nil, restoredRetry // made or restored by another request meanwhile
	}
	// The messages go in one at a time, as the client sent them; each
	// request's answer goes nowhere.
	msgs := make([]jsonrpc.Message, len(rec.Restore))
	raws := make([][]byte, len(rec.Restore))
	s.mu.Lock()
	s.dropped = make(chan struct{})
	for i, raw := range rec.Restore {
		raws[i] = bytes.Clone(raw) // the connection owns what it is given
		m, err := jsonrpc.Decode(raws[i], nil)
		if err != nil || m.Kind == jsonrpc.KindBatch {
			continue
		}
		msgs[i] = m
		if m.Kind == jsonrpc.KindRequest {
			if s.byReq == nil {
				s.byReq, s.live = map[string]*sseStream{}, map[string]*sseStream{}
			}
			rid := string(m.ID)
			if s.byReq[rid] == nil {
				s.drops++
			}
			s.byReq[rid] = &sseStream{req: rid, drop: true}
		}
	}
	if s.drops == 0 {
		close(s.dropped)
	}
	s.mu.Unlock()
	for i := range msgs {
		if msgs[i].Kind == 0 {
			continue
		}
		// Kept again as it was (a record's messages were answered
		// successfully), re-encoded: a record an older version saved
		// with the client's bodies as they were shrinks to what counts.
		if msgs[i].Kind == jsonrpc.KindNotification && msgs[i].MethodName() == mcp.MethodInitialized {
			s.keepInitialized()
		} else if rc := recordableOf(&msgs[i]); rc != nil {
			s.keep(rc)
		}
		s.conn.ReceiveDecoded(raws[i], &msgs[i], nil)
	}
	timer := time.NewTimer(restoreWait)
	select {
	case <-s.dropped:
	case <-timer.C:
	}
	timer.Stop()
	s.mu.Lock()
	for rid, st := range s.byReq {
		if st.drop {
			delete(s.byReq, rid)
		}
	}
	s.mu.Unlock()
	t.created.Add(1)
	t.save(r.Context(), s, t.opts.IdleTimeout)
	t.mu.Lock()
	s.restoring = nil
	s.touchedUp, s.used = true, true
	ended := s.ended // Shutdown came meanwhile
	t.mu.Unlock()
	if ended {
		t.finishKeep(s, true)
		return nil, restoredNone
	}
	return s, restoredOK
}

// release ends a caller's use of s: a session nothing uses idles from
// now on.
func (t *sessionTable) release(s *httpSession) {
	now := t.h.since()
	t.mu.Lock()
	defer t.mu.Unlock()
	s.busy--
	if s.busy > 0 || s.ended {
		return
	}
	s.seen = now
	l := &t.idle
	if !s.used {
		l = &t.fresh
	}
	s.in, s.elem = l, l.PushBack(s)
	t.armLocked(now)
}

// use marks s as used since initialize: it may idle for IdleTimeout from
// now on, no longer FirstIdleTimeout, and so may its record in the Store.
func (t *sessionTable) use(ctx context.Context, s *httpSession) {
	t.mu.Lock()
	s.used = true
	up := t.opts.Store != nil && !s.touchedUp
	if up {
		s.touchedUp, s.lastTouch = true, t.h.since()
	}
	t.mu.Unlock()
	if up {
		if _, err := t.opts.Store.Touch(ctx, s.id, t.opts.IdleTimeout); err != nil && !errors.Is(err, ErrUnknownSession) {
			t.h.limits.refused(refStoreError, "op", "touch", "error", err)
		}
	}
}

func (t *sessionTable) unlistLocked(s *httpSession) {
	if s.in != nil {
		s.in.Remove(s.elem)
		s.in, s.elem = nil, nil
	}
}

// removeLocked takes s out of the table; it reports whether s was in it.
func (t *sessionTable) removeLocked(s *httpSession) bool {
	if s.ended {
		return false
	}
	s.ended = true
	t.unlistLocked(s)
	if t.m[s.id] == s {
		delete(t.m, s.id)
	}
	if (len(t.m) == 0 && t.peak > 64) || (len(t.m) < t.peak/4 && t.peak > 1024) {
		// A map keeps the room it once needed: after a burst of
		// sessions, a smaller one gives it back.
		m := make(map[string]*httpSession, len(t.m))
		for k, v := range t.m {
			m[k] = v
		}
		t.m, t.peak = m, len(m)
	}
	return true
}

// end ends s for good (DELETE, a failed initialize): its record goes too.
func (t *sessionTable) end(s *httpSession) {
	t.mu.Lock()
	removed := t.removeLocked(s)
	t.mu.Unlock()
	if removed {
		t.finish(s, true)
	}
}

// finish ends a session taken out of the table: its GET stream ends, its
// connection's input ends (running handlers get the end-of-stream grace,
// then are cancelled), its events go, and its record too when
// deleteRecord. With a Store, a session that only ends here (expired,
// evicted) may live on at another instance, whose events are the same
// store's: they are left to the store's retention, and the record to its
// time to live.
func (t *sessionTable) finish(s *httpSession, deleteRecord bool) {
	t.finishKeep(s, false)
	if t.opts.Store != nil && !deleteRecord {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	defer cancel()
	if err := t.events.EndSession(ctx, s.id); err != nil {
		t.h.limits.refused(refStoreError, "op", "end session", "error", err)
	}
	if deleteRecord && t.opts.Store != nil {
		if err := t.opts.Store.Delete(ctx, s.id); err != nil {
			t.h.limits.refused(refStoreError, "op", "delete", "error", err)
		}
	}
}

// finishKeep is finish without forgetting the session's events and
// record; with keepEvents, what its running handlers still send goes on
// to the event store (another instance serves the session now).
func (t *sessionTable) finishKeep(s *httpSession, keepEvents bool) {
	s.mu.Lock()
	s.gone = !keepEvents
	s.finished = true
	get := s.g.conn
	s.g.conn = nil
	follows := make([]*exchange, 0, len(s.follows))
	for ex := range s.follows {
		follows = append(follows, ex)
	}
	s.mu.Unlock()
	if get != nil {
		get.closeStream()
	}
	for _, ex := range follows {
		ex.closeStream()
	}
	s.conn.EndInput()
	select {
	case <-s.conn.Done():
	default:
		t.mu.Lock()
		t.ending[s] = struct{}{}
		t.armLocked(t.h.since())
		t.mu.Unlock()
	}
}

// armLocked makes sure the sweeper runs when the first listed session is
// due (or the Store's touches are, or an ended session may have
// finished). One timer serves every session.
func (t *sessionTable) armLocked(now time.Duration) {
	next := time.Duration(-1)
	earlier := func(d time.Duration) {
		if next < 0 || d < next {
			next = d
		}
	}
	for _, l := range []*clist.List{&t.fresh, &t.idle} {
		if e := l.Front(); e != nil {
			s := e.Value.(*httpSession)
			earlier(s.seen + t.timeoutOf(s))
		}
	}
	if t.opts.Store != nil && len(t.m) > 0 {
		earlier(t.lastTouches + t.opts.IdleTimeout/4)
	}
	if len(t.ending) > 0 {
		earlier(now + time.Second)
	}
	if e := t.detached.Front(); e != nil {
		earlier(e.Value.(*detachment).at)
	}
	if next < 0 {
		return
	}
	// A little slack gathers the expiries of a burst of sessions into
	// one run.
	next += min(t.opts.FirstIdleTimeout/16, time.Second)
	if t.wakeAt != 0 && t.wakeAt <= next {
		return
	}
	t.wakeAt = next
	wait := max(next-now, time.Millisecond)
	if t.timer == nil {
		t.timer = time.AfterFunc(wait, t.sweep)
		return
	}
	t.timer.Reset(wait)
}

// sweep is one run of the sweeper: it ends the sessions idle past their
// timeout, cancels the requests whose resume deadline has passed, touches
// in the Store the sessions kept busy by an open stream, and forgets
// ended sessions whose connection has finished.
func (t *sessionTable) sweep() {
	now := t.h.since()
	var expired, touch []*httpSession
	var due []*detachment
	t.mu.Lock()
	t.wakeAt = 0
	for e := t.detached.Front(); e != nil; e = t.detached.Front() {
		d := e.Value.(*detachment)
		if d.at > now {
			break
		}
		t.detached.Remove(e)
		due = append(due, d)
	}
	for _, l := range []*clist.List{&t.fresh, &t.idle} {
		for e := l.Front(); e != nil; e = l.Front() {
			s := e.Value.(*httpSession)
			if now-s.seen < t.timeoutOf(s) {
				break
			}
			t.removeLocked(s)
			expired = append(expired, s)
		}
	}
	if t.opts.Store != nil && now-t.lastTouches >= t.opts.IdleTimeout/4 {
		t.lastTouches = now
		for _, s := range t.m {
			if s.busy > 0 && s.restoring == nil && now-s.lastTouch >= t.opts.IdleTimeout/4 {
				s.lastTouch = now
				touch = append(touch, s)
			}
		}
	}
	for s := range t.ending {
		select {
		case <-s.conn.Done():
			delete(t.ending, s)
		default:
		}
	}
	t.armLocked(now)
	t.mu.Unlock()
	// First the deadlines: a request cancelled now no longer keeps its
	// session busy, and the session idles from now on.
	for _, d := range due {
		if d.s.resumeTimedOut(d.st, d.at) {
			t.resumeTimeouts.Add(1)
			t.logs[logResumeTimeout].Refused(sessionLogMessages[logResumeTimeout], "wait", t.resumeWait)
		}
	}
	t.expired.Add(int64(len(expired)))
	for _, s := range expired {
		t.finish(s, false)
	}
	for _, s := range touch {
		ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
		t.touch(ctx, s)
		cancel()
	}
	if sw, ok := t.events.(interface{ Sweep() }); ok {
		sw.Sweep() // an idle store gives back its expired events too
	}
}

// saveState writes s's record after its restorable state changed, to
// live as long as the session may idle.
func (t *sessionTable) saveState(ctx context.Context, s *httpSession) {
	t.mu.Lock()
	ttl := t.opts.IdleTimeout
	if !s.used {
		ttl = t.opts.FirstIdleTimeout
	}
	t.mu.Unlock()
	t.save(ctx, s, ttl)
}

// initializedRecord is notifications/initialized as a record keeps it.
var initializedRecord = json.RawMessage(`{"jsonrpc":"2.0","method":"` + mcp.MethodInitialized + `"}`)

// save writes s's record to the Store.
func (t *sessionTable) save(ctx context.Context, s *httpSession, ttl time.Duration) {
	if t.opts.Store == nil {
		return
	}
	s.mu.Lock()
	if s.unshared {
		s.mu.Unlock()
		return
	}
	rec := &SessionRecord{ID: s.id, Owner: s.owner, Version: s.version, Holder: t.opts.Instance}
	rec.Restore = make([]json.RawMessage, 0, 3+len(s.rSubs))
	if s.rInit != nil {
		rec.Restore = append(rec.Restore, s.rInit)
	}
	if s.rInitialized {
		rec.Restore = append(rec.Restore, initializedRecord)
	}
	if s.rLevel != nil {
		rec.Restore = append(rec.Restore, s.rLevel)
	}
	for _, sub := range s.rSubs {
		rec.Restore = append(rec.Restore, sub.msg)
	}
	s.mu.Unlock()
	if err := t.opts.Store.Save(ctx, rec, ttl); err != nil {
		t.h.limits.refused(refStoreError, "op", "save", "error", err)
	}
}

// recordableOf returns what a session's record keeps of a client request
// once it is answered successfully: its params re-encoded with only what
// restoring it needs (read as the server reads them), so that a record
// holds no padding a client sent along; nil for a request no record keeps,
// or one it cannot keep.
func recordableOf(msg *jsonrpc.Message) *recordable {
	method := msg.MethodName()
	switch method {
	case mcp.MethodInitialize:
		var p struct {
			ProtocolVersion json.RawMessage `json:"protocolVersion,omitempty"`
			Capabilities    json.RawMessage `json:"capabilities,omitempty"`
			ClientInfo      json.RawMessage `json:"clientInfo,omitempty"`
		}
		if json.Unmarshal(msg.Params, &p) != nil {
			return nil
		}
		b, err := json.Marshal(&p)
		if err != nil {
			return nil
		}
		return &recordable{method: method, params: b}
	case "logging/setLevel":
		var p struct {
			Level string `json:"level"`
		}
		if json.Unmarshal(msg.Params, &p) != nil {
			return nil
		}
		b := jsonrpc.AppendString(append(make([]byte, 0, 16+len(p.Level)), `{"level":`...), p.Level)
		return &recordable{method: method, params: append(b, '}')}
	case "resources/subscribe", "resources/unsubscribe":
		var p struct {
			URI string `json:"uri"`
		}
		if json.Unmarshal(msg.Params, &p) != nil || p.URI == "" {
			return nil
		}
		b := jsonrpc.AppendString(append(make([]byte, 0, 16+len(p.URI)), `{"uri":`...), p.URI)
		return &recordable{method: method, params: append(b, '}'), uri: p.URI}
	}
	return nil
}

// keep records what rc says in the session's record; it reports whether
// the record changed (and is to be saved). What would overflow the record
// (maxRecordSubscriptions, maxRecordBytes, maxInitRecordBytes) is left
// out, counted and logged.
func (s *httpSession) keep(rc *recordable) bool {
	changed, full := s.keepLocked(rc)
	if full {
		t := s.t
		t.recordOverflows.Add(1)
		t.logs[logRecordFull].Refused(sessionLogMessages[logRecordFull], "method", rc.method,
			"max_subscriptions", maxRecordSubscriptions, "max_bytes", maxRecordBytes)
	}
	return changed
}

func (s *httpSession) keepLocked(rc *recordable) (changed, full bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	msg := func() []byte {
		s.rSeq++
		b := make([]byte, 0, recordOverhead+len(rc.method)+len(rc.params))
		b = strconv.AppendInt(append(b, `{"jsonrpc":"2.0","id":`...), s.rSeq, 10)
		b = jsonrpc.AppendString(append(b, `,"method":`...), rc.method)
		return append(append(append(b, `,"params":`...), rc.params...), '}')
	}
	switch rc.method {
	case mcp.MethodInitialize:
		if len(rc.params) > maxInitRecordBytes {
			// Not shared: a record that large would be written again
			// on every change of the session's state.
			s.unshared = true
			return false, true
		}
		m := msg()
		s.rBytes += len(m) - len(s.rInit)
		s.rInit = m
	case "logging/setLevel":
		if s.rLevel != nil && bytes.HasSuffix(s.rLevel, append(append([]byte(`"params":`), rc.params...), '}')) {
			return false, false // that level already
		}
		m := msg()
		s.rBytes += len(m) - len(s.rLevel)
		s.rLevel = m
	case "resources/subscribe":
		for _, sub := range s.rSubs {
			if sub.uri == rc.uri {
				return false, false // subscribed already
			}
		}
		if len(s.rSubs) >= maxRecordSubscriptions || s.rBytes+recordOverhead+len(rc.params) > maxRecordBytes {
			return false, true
		}
		m := msg()
		s.rSubs = append(s.rSubs, restoreSub{uri: rc.uri, msg: m})
		s.rBytes += len(m)
	case "resources/unsubscribe":
		i := slices.IndexFunc(s.rSubs, func(sub restoreSub) bool { return sub.uri == rc.uri })
		if i < 0 {
			return false, false
		}
		s.rBytes -= len(s.rSubs[i].msg)
		s.rSubs = slices.Delete(s.rSubs, i, i+1)
	default:
		return false, false
	}
	return true, false
}

// keepInitialized records notifications/initialized; it reports whether
// the record changed (the first time only).
func (s *httpSession) keepInitialized() bool {
	if s.t.opts.Store == nil {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.rInitialized {
		return false
	}
	s.rInitialized = true
	return true
}

// sessionHandler is the backend's session handler, watched for requests
// it leaves unanswered on purpose: their streams end.
type sessionHandler struct {
	s *httpSession
	h rpc.Handler
}

func (sh *sessionHandler) Handle(ctx context.Context, req *rpc.Request) (any, error) {
	res, err := sh.h.Handle(ctx, req)
	if errors.Is(err, rpc.ErrNoResponse) && !req.IsNotification() {
		sh.s.forgetRequest(string(req.ID), false)
	}
	return res, err
}

// forgetRequest ends the stream of a request that will not be answered
// (cancelled, or left unanswered by its handler): its POST ends, and its
// id is free again.
func (s *httpSession) forgetRequest(id string, cancelled bool) {
	s.mu.Lock()
	st := s.byReq[id]
	if st == nil || st.drop {
		s.mu.Unlock()
		return
	}
	s.forgetLocked(st, cancelled)
}

// forgetLocked is forgetRequest for st, which is its request's stream;
// it unlocks s.mu.
func (s *httpSession) forgetLocked(st *sseStream, cancelled bool) {
	delete(s.byReq, st.req)
	delete(s.live, st.id)
	st.answered = true
	st.cancelled = cancelled
	conn, hold := st.conn, st.hold
	st.conn, st.hold = nil, false
	s.mu.Unlock()
	if conn != nil {
		conn.closeStream()
	}
	if hold {
		s.t.release(s)
	}
	if st.hasID.Load() {
		// Nothing more will be sent on it: its events may go.
		ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
		s.t.events.EndStream(ctx, s.id, st.id)
		cancel()
	}
}

// cancelRequest cancels request rid in the session's connection, as the
// client's notifications/cancelled would.
func (s *httpSession) cancelRequest(rid, reason string) {
	note := append([]byte(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":`), rid...)
	note = jsonrpc.AppendString(append(note, `,"reason":`...), reason)
	s.conn.Receive(append(note, "}}"...))
}

// detachLocked starts the resume deadline of a POST stream whose
// connection went (st.conn is nil) before its request was answered; it
// reports whether it did, the caller then listing it (listDetached)
// once s.mu is unlocked. A deadline that stands is kept. Under s.mu.
func (s *httpSession) detachLocked(st *sseStream, now time.Duration) bool {
	if st == &s.g || st.drop || st.answered || st.conn != nil || st.detachAt != 0 || s.gone || s.byReq[st.req] != st {
		return false
	}
	st.detachAt = max(now+s.t.resumeWait, 1)
	return true
}

// listDetached puts st's resume deadline, at, on the sweeper's list.
func (t *sessionTable) listDetached(s *httpSession, st *sseStream, at time.Duration) {
	t.mu.Lock()
	if !t.closed && !s.ended {
		t.detached.PushBack(&detachment{s: s, st: st, at: at})
		t.armLocked(t.h.since())
	}
	t.mu.Unlock()
}

// resumeTimedOut cancels the request of a stream whose resume deadline
// at has passed with no connection taking the stream over: its client
// has gone for good, and the request must not hold its MaxInFlight place
// and its session for as long as its handler cares to wait (an
// elicitation nobody will answer). It reports whether it did.
func (s *httpSession) resumeTimedOut(st *sseStream, at time.Duration) bool {
	s.mu.Lock()
	if st.detachAt != at || st.conn != nil || st.answered || s.gone || s.byReq[st.req] != st {
		s.mu.Unlock()
		return false
	}
	s.forgetLocked(st, true) // the session is not busy with it from now on
	s.cancelRequest(st.req, "the client did not resume the request's stream in time")
	return true
}

// ----- the session's output -----

// WriteMessage sends one of the session connection's messages on the one
// stream it belongs to (rpc.MessageWriter). It never fails: a stream whose
// connection has gone keeps the message in the event store for a
// resumption, and an error here would end the whole session.
func (s *httpSession) WriteMessage(m *rpc.Outbound) error {
	t := s.t
	s.wmu.Lock()
	defer s.wmu.Unlock()
	final := m.Kind == jsonrpc.KindResult || m.Kind == jsonrpc.KindError
	s.mu.Lock()
	var st *sseStream
	switch {
	case final:
		st = s.byReq[string(m.ID)]
	case m.Kind == jsonrpc.KindBatch:
	case m.Related != "":
		if r := s.byReq[string(m.Related)]; r != nil && (r.sse || r.drop) {
			st = r
		}
	}
	if st == nil && !final && m.Kind != jsonrpc.KindBatch {
		st = &s.g
	}
	if st == nil {
		// A response nobody waits for any more (its request was
		// cancelled).
		s.mu.Unlock()
		return nil
	}
	if st.drop {
		if final && s.byReq[st.req] == st {
			delete(s.byReq, st.req)
			if s.drops--; s.drops == 0 && s.dropped != nil {
				close(s.dropped)
			}
		}
		s.mu.Unlock()
		return nil
	}
	conn, gone := st.conn, s.gone
	if st.init && final {
		if m.Kind == jsonrpc.KindError {
			s.failed = true
		} else {
			t.created.Add(1)
			if v := resultVersion(m); v != "" {
				s.version = v
			}
		}
	}
	s.mu.Unlock()

	if st == &s.g && m.Kind == jsonrpc.KindRequest && conn == nil && (!t.resumable || !s.gEver) {
		// No stream to ask on, and no client that will resume one: the
		// call fails now rather than wait for nothing.
		s.conn.Receive(jsonrpc.AppendErrorResponse(nil, m.ID,
			jsonrpc.NewError(jsonrpc.CodeInternalError, "the client has no stream open to be asked on (GET)", nil)))
		return nil
	}
	if final && m.Kind == jsonrpc.KindResult && t.opts.Store != nil && (st.init || st.keep != nil) {
		// Answered successfully: the record keeps the request from now
		// on, saved before the client has the answer (its next request
		// may reach another instance), and in the writer's order, so
		// that a later state is never overwritten by an earlier one. The
		// initialize's record is saved before the client can have the
		// session's id.
		changed := st.keep != nil && s.keep(st.keep)
		ttl := time.Duration(0)
		switch {
		case st.init:
			ttl = t.opts.FirstIdleTimeout
		case changed:
			t.mu.Lock()
			ttl = t.opts.IdleTimeout
			if !s.used {
				ttl = t.opts.FirstIdleTimeout
			}
			t.mu.Unlock()
		}
		if ttl > 0 {
			ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
			t.save(ctx, s, ttl)
			cancel()
		}
	}
	// A stream that starts now starts with its priming event, in the
	// store and on the wire before this message: a client resuming from
	// the priming id must be sent the message.
	streams := conn != nil && conn.beginStream(final)
	var eid string
	// A message is stored when its client can resume its stream: it has
	// (or is about to have) an id of it. The GET stream's events are kept
	// once a GET has been open, for its client to resume after a drop; a
	// GET without Last-Event-ID does not replay them.
	if !gone && t.resumable && ((st == &s.g && s.gEver) || st.hasID.Load() || streams) {
		ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
		id, err := t.events.Append(ctx, s.id, st.id, m.AppendTo(make([]byte, 0, m.Len())))
		cancel()
		if err != nil {
			t.h.limits.refused(refStoreError, "op", "append", "error", err)
		} else {
			eid = id
			st.hasID.Store(true)
		}
	}
	delivered := conn != nil && conn.deliver(m, eid, st.init && m.Kind == jsonrpc.KindError)
	if conn != nil && !delivered {
		// The client has gone, or a newer connection took the stream
		// over: the message waits in the store, and a POST's request
		// for a connection to take its stream over (its resume
		// deadline).
		now := t.h.since()
		s.mu.Lock()
		listed := false
		if st.conn == conn {
			st.conn = nil
			listed = !final && s.detachLocked(st, now)
		}
		at := st.detachAt
		s.mu.Unlock()
		if listed {
			t.listDetached(s, st, at)
		}
	}
	if m.Kind == jsonrpc.KindRequest && !delivered && eid == "" {
		// Neither written nor kept for a resumption (no event ids, the
		// store failed, the session has ended): no answer can ever come,
		// so the call fails now rather than wait for nothing.
		s.conn.Receive(jsonrpc.AppendErrorResponse(nil, m.ID,
			jsonrpc.NewError(jsonrpc.CodeInternalError, "the client's stream went before it could be asked", nil)))
	}
	if final {
		s.answered(st)
	}
	return nil
}

// answered ends a POST stream whose response has been sent. Its events
// stay, to the store's retention: a connection that breaks after the
// response was written, before its client read it, is resumed with the
// response replayed (the in-memory store drops answered streams first
// when it needs room).
func (s *httpSession) answered(st *sseStream) {
	s.mu.Lock()
	if s.byReq[st.req] == st {
		delete(s.byReq, st.req)
	}
	delete(s.live, st.id)
	st.answered = true
	hold := st.hold
	st.hold = false
	s.mu.Unlock()
	if hold {
		s.t.release(s)
	}
}

// resultVersion reads protocolVersion from an initialize result.
func resultVersion(m *rpc.Outbound) string {
	var r struct {
		Result struct {
			ProtocolVersion string `json:"protocolVersion"`
		} `json:"result"`
	}
	json.Unmarshal(m.AppendTo(nil), &r)
	return r.Result.ProtocolVersion
}

// primeLocked sends the priming event of a stream that starts, when it is
// resumable and its client new enough: an event id with empty data
// (stored, so that the id can be resumed from), and the retry delay.
// Called with wmu and ex.mu held.
func (s *httpSession) primeLocked(ex *exchange) {
	t := s.t
	if !t.resumable || ex.x.st == nil || !primes(ex.in.note.Version) {
		return
	}
	s.mu.Lock()
	gone := s.gone
	s.mu.Unlock()
	if gone {
		// Ended (DELETE, expiry): its events are gone and nothing more is
		// stored, a keep-alive on a request still running included.
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	eid, err := t.events.Append(ctx, s.id, ex.x.st.id, nil)
	cancel()
	if err != nil {
		t.h.limits.refused(refStoreError, "op", "append", "error", err)
		return
	}
	ex.x.st.hasID.Store(true)
	line := make([]byte, 0, 32+len(eid))
	line = append(append(append(line, "id: "...), eid...), "\nretry: "...)
	line = append(append(line, t.retryMS...), "\ndata: \n\n"...)
	ex.sendLocked(nil, line)
}

// eventHead is the start of an event with id eid ("" for none).
func eventHead(eid string) []byte {
	if eid == "" {
		return eventPrefix
	}
	b := make([]byte, 0, len(eid)+5+len(eventPrefix))
	return append(append(append(append(b, "id: "...), eid...), '\n'), eventPrefix...)
}

// ----- requests in a session -----

// sessionRoute is the route's step for a legacy message on an endpoint
// with sessions: it finds the session Mcp-Session-Id names (busy for this
// request: ex.x.sess), or marks an initialize without one to mint a session
// (ex.x.mint), and answers what cannot go on (400, 404). version is the
// message's, which the session supplies when MCP-Protocol-Version is
// absent.
func (h *Handler) sessionRoute(w http.ResponseWriter, r *http.Request, ex *exchange, hasHeader bool, version *string) bool {
	msg := &ex.in.msg
	isInit := msg.Kind == jsonrpc.KindRequest && methodOf(msg) == mcp.MethodInitialize
	sid, hasSID := headerValue(r.Header, mcp.HeaderSessionID)
	switch {
	case !hasSID && isInit:
		ex.extra().mint = true
		return true
	case !hasSID || sid == "":
		httpError(w, http.StatusBadRequest, jsonrpc.ID(msg.ID), codeBadRequest, "Bad Request: Mcp-Session-Id header is required", nil)
		return false
	}
	s := h.sess.acquire(w, r, sid, ex.id)
	if s == nil {
		return false
	}
	ex.extra().sess = s
	if isInit {
		httpError(w, http.StatusBadRequest, jsonrpc.ID(msg.ID), jsonrpc.CodeInvalidRequest, "Invalid Request: the session is already initialized", nil)
		return false
	}
	if !hasHeader {
		s.mu.Lock()
		*version = s.version
		s.mu.Unlock()
	}
	return true
}

// leaveSession ends a request's use of its session (unless its stream
// keeps the session busy on its own).
func (h *Handler) leaveSession(ex *exchange) {
	if x := ex.x; x != nil && x.sess != nil && !x.keepsSession {
		h.sess.release(x.sess)
	}
}

// sessionGone answers 404 for a session that does not exist (or not for
// this client): the client must initialize a new one.
func (h *Handler) sessionGone(w http.ResponseWriter, r *http.Request) {
	h.limits.refused(refUnknownSession, "remote", r.RemoteAddr)
	httpError(w, http.StatusNotFound, "", codeSessionNotFound, "Session not found", nil)
}

// sessionMessage serves a client notification or response in a session:
// into the session's connection, then 202.
func (h *Handler) sessionMessage(w http.ResponseWriter, r *http.Request, ex *exchange, body []byte) {
	s := ex.x.sess
	msg := &ex.in.msg
	if msg.Kind != jsonrpc.KindNotification {
		h.sess.use(r.Context(), s)
		// An answer to a request of the server's, under the id the
		// session's connection sent it with: the session is the binding.
		if s.conn.ReceiveDecoded(body, msg, nil) != nil {
			h.sessionGone(w, r)
			return
		}
		w.WriteHeader(http.StatusAccepted)
		return
	}
	method := methodOf(msg)
	if method != mcp.MethodInitialized {
		h.sess.use(r.Context(), s)
	}
	if method == mcp.MethodInitialized && s.keepInitialized() {
		h.sess.saveState(r.Context(), s)
	}
	var cancelled string
	if method == rpc.MCPCancel.Method {
		var p struct {
			RequestID jsonrpc.ID `json:"requestId"`
		}
		json.Unmarshal(msg.Params, &p)
		cancelled = string(p.RequestID)
	}
	if s.conn.ReceiveDecoded(body, msg, &ex.in.note) != nil {
		h.sessionGone(w, r)
		return
	}
	if cancelled != "" {
		// The client has forgotten the request, and may reuse its id.
		s.forgetRequest(cancelled, true)
	}
	w.WriteHeader(http.StatusAccepted)
}

// sessionExchange serves a request in a session (minting the session
// first for an initialize). Its stream is registered, then the message
// goes into the session's connection, whose handler runs here, on the
// request's goroutine, as without sessions; but its context is the
// session's, not the request's: a dropped POST is not a cancellation. A
// hook on the request's context (no goroutine until it fires) notices the
// client going: a stream it could resume is left to the event store
// until its resume deadline (the sweeper's), one it could not is
// cancelled. The connection may be taken over meanwhile
// (a resumption): it then gets nothing more, and ends when the handler
// returns.
func (h *Handler) sessionExchange(w http.ResponseWriter, r *http.Request, body []byte, ex *exchange, accept acceptable) {
	t := h.sess
	x := ex.x
	if x.mint {
		if x.sess = t.mint(w, r, ex); x.sess == nil {
			return
		}
		w.Header().Set(mcp.HeaderSessionID, x.sess.id)
	} else {
		t.use(r.Context(), x.sess)
	}
	s := x.sess
	rid := string(ex.in.msg.ID)
	st := &sseStream{id: randomID(8), req: rid, sse: accept.sse, init: x.mint, conn: ex}
	if t.opts.Store != nil {
		st.keep = recordableOf(&ex.in.msg) // kept once answered successfully
	}
	x.st = st
	x.end = make(chan struct{})
	s.mu.Lock()
	if s.byReq[rid] != nil {
		s.mu.Unlock()
		httpError(w, http.StatusBadRequest, jsonrpc.ID(rid), jsonrpc.CodeInvalidRequest, "Invalid Request: a request with this id is in progress in the session", nil)
		return
	}
	if s.byReq == nil {
		s.byReq, s.live = map[string]*sseStream{}, map[string]*sseStream{}
	}
	s.byReq[rid], s.live[st.id] = st, st
	// The request's use of the session is its stream's from now on: it
	// ends with the answer (or the request forgotten), whether or not
	// the POST is still there, or at the resume deadline of a POST that
	// went.
	st.hold, x.keepsSession = true, true
	s.mu.Unlock()
	if !h.openSessionExchange(w, r, ex, accept) {
		s.forgetRequest(rid, true)
		if x.mint {
			t.end(s)
		}
		return
	}
	defer h.running.Done()

	stop := context.AfterFunc(r.Context(), func() { s.clientGone(ex, st, rid) })
	if err := s.conn.ReceiveDecoded(body, &ex.in.msg, &ex.in.note); err != nil {
		ex.mu.Lock()
		x.pushFailed = true
		ex.mu.Unlock()
		s.forgetRequest(rid, false)
	} else if !ex.done.Load() {
		// Not answered here: it waits in the admission queue, runs on
		// with its stream taken over, or was left unanswered.
		select {
		case <-x.end:
		case <-r.Context().Done():
		case <-s.conn.Done():
		}
	}
	stop()
	if !ex.done.Load() {
		ex.unblock() // a write stalled on a client that does not read
	}
	ex.mu.Lock()
	started := ex.started
	written := started || ex.answered
	ex.closed = true // nothing more reaches the ResponseWriter
	pushFailed := x.pushFailed
	ex.mu.Unlock()
	if started {
		s.streams.Add(-1)
	}
	now := t.h.since()
	s.mu.Lock()
	listed := false
	if st.conn == ex {
		// Still running with its POST gone: its output waits in the
		// store for a connection to take the stream over, until its
		// resume deadline.
		st.conn = nil
		listed = s.detachLocked(st, now)
	}
	at := st.detachAt
	cancelled, failed := st.cancelled, s.failed
	s.mu.Unlock()
	if listed {
		t.listDetached(s, st, at)
	}
	h.closeExchange(ex)
	if x.mint && (failed || !written) {
		w.Header().Del(mcp.HeaderSessionID)
		t.end(s)
	}
	switch {
	case written || r.Context().Err() != nil || cancelled:
	case pushFailed:
		h.sessionGone(w, r)
	default:
		httpError(w, http.StatusInternalServerError, "", jsonrpc.CodeInternalError, "Internal error: the request ended without a response", nil)
	}
}

// clientGone is called when the client of a request's POST (ex) goes
// before the answer. With no event id of the stream, the client cannot
// resume it and nothing could ever deliver the answer: the request is
// cancelled, as it is without sessions. Otherwise it runs on, its output
// kept for a resumption, until its resume deadline.
func (s *httpSession) clientGone(ex *exchange, st *sseStream, rid string) {
	if st.hasID.Load() {
		now := s.t.h.since()
		s.mu.Lock()
		if st.conn == ex {
			st.conn = nil
		}
		listed, at := s.detachLocked(st, now), st.detachAt
		s.mu.Unlock()
		if listed {
			s.t.listDetached(s, st, at)
		}
		return
	}
	s.mu.Lock()
	answered := st.answered
	s.mu.Unlock()
	if answered {
		return
	}
	s.cancelRequest(rid, "the client closed the request's stream")
	s.forgetRequest(rid, true)
}

// openSessionExchange registers a session's connection (a POST's or a
// GET's) with the handler: the keep-alive clock and Shutdown see it. It
// answers 503 when the server is draining.
func (h *Handler) openSessionExchange(w http.ResponseWriter, r *http.Request, ex *exchange, accept acceptable) bool {
	ex.h, ex.r, ex.w = h, r, w
	ex.canSSE = accept.sse
	h.mu.Lock()
	if h.draining {
		h.mu.Unlock()
		w.Header().Set("Retry-After", "1")
		httpError(w, http.StatusServiceUnavailable, "", jsonrpc.CodeInternalError, "Service Unavailable: the server is shutting down", nil)
		return false
	}
	ex.quietSince.Store(int64(h.since()))
	h.exchanges[ex] = struct{}{}
	h.armKeepAlivesLocked()
	h.running.Add(1)
	h.mu.Unlock()
	if !accept.json {
		s := ex.x.sess
		s.wmu.Lock()
		ex.mu.Lock()
		ex.startStreamLocked()
		ex.mu.Unlock()
		s.wmu.Unlock()
	}
	return true
}

// closeExchange unregisters an exchange.
func (h *Handler) closeExchange(ex *exchange) {
	h.mu.Lock()
	delete(h.exchanges, ex)
	if len(h.exchanges) == 0 && h.keepAlives != nil {
		h.keepAlives.Stop()
		h.keepAlivesArmed = false
	}
	h.mu.Unlock()
}

// ----- GET and DELETE -----

// serveSessionMethod serves a GET (the standalone stream, or the
// resumption of a stream with Last-Event-ID) or a DELETE (the end of the
// session). The gate lets them through only with sessions on.
func (h *Handler) serveSessionMethod(w http.ResponseWriter, r *http.Request, ex *exchange, place *slot) {
	version, hasVersion := headerValue(r.Header, mcp.HeaderProtocolVersion)
	if hasVersion && mcp.IsModern(version) {
		// 2026-07-28 has no GET stream and no sessions.
		w.Header().Set("Allow", http.MethodPost)
		httpError(w, http.StatusMethodNotAllowed, "", jsonrpc.CodeInvalidRequest, "Method Not Allowed: protocol version "+version+" takes POST only", nil)
		return
	}
	sid, ok := headerValue(r.Header, mcp.HeaderSessionID)
	if !ok || sid == "" {
		httpError(w, http.StatusBadRequest, "", codeBadRequest, "Bad Request: Mcp-Session-Id header is required", nil)
		return
	}
	if hasVersion && !slices.Contains(mcp.LegacyVersions, version) {
		httpError(w, http.StatusBadRequest, "", mcp.CodeUnsupportedProtocolVersion, "Unsupported protocol version",
			map[string]any{"supported": mcp.SupportedVersions(h.eras), "requested": version})
		return
	}
	s := h.sess.acquire(w, r, sid, ex.id)
	if s == nil {
		return
	}
	ex.extra().sess = s
	defer h.leaveSession(ex)
	if r.Method == http.MethodDelete {
		h.sess.end(s)
		w.WriteHeader(http.StatusOK)
		return
	}
	h.sess.use(r.Context(), s)
	if !hasVersion {
		s.mu.Lock()
		version = s.version
		s.mu.Unlock()
	}
	in := ex.input()
	in.note.Era, in.note.Version = mcp.Legacy, version
	if s.streams.Add(1) > int32(h.sess.opts.MaxStreamsPerSession) {
		s.streams.Add(-1)
		h.limits.refused(refSessionStreams, "limit", h.sess.opts.MaxStreamsPerSession, "remote", r.RemoteAddr)
		h.unavailable(w, r, "too many streams open in the session")
		return
	}
	defer s.streams.Add(-1)
	if !place.toStream() {
		h.limits.refused(refStreams, "limit", h.opts.MaxStreams, "remote", r.RemoteAddr)
		h.unavailable(w, r, "too many streams open")
		return
	}
	ex.x.end = make(chan struct{})
	ex.x.get = true
	w.Header().Set(mcp.HeaderSessionID, s.id)
	if last, ok := headerValue(r.Header, "Last-Event-ID"); ok && last != "" {
		h.resume(w, r, ex, last)
		return
	}
	if !h.openSessionExchange(w, r, ex, acceptable{json: true, sse: true}) {
		return
	}
	defer h.running.Done()
	// The latest connection wins: a client that reconnects before its
	// old connection is known to be dead is not locked out.
	s.wmu.Lock()
	s.mu.Lock()
	old := s.g.conn
	if !s.gone {
		s.g.conn, ex.x.st = ex, &s.g
	}
	s.mu.Unlock()
	s.gEver = true
	ex.mu.Lock()
	ex.startStreamLocked()
	ex.mu.Unlock()
	s.wmu.Unlock()
	if old != nil {
		old.closeStream()
	}
	h.waitStream(r, ex)
}

// waitStream waits for a GET's end: the client going, a newer connection
// taking its stream over, its stream's response, the session's end, or
// Shutdown. After it nothing more reaches its ResponseWriter.
func (h *Handler) waitStream(r *http.Request, ex *exchange) {
	select {
	case <-ex.x.end:
	case <-r.Context().Done():
	case <-ex.x.sess.conn.Done():
	}
	h.closeGet(ex)
}

// closeGet ends a GET's connection for its goroutine: cleanly, unless a
// write is stalled on a client that does not read (that one fails within
// stallGrace: lockEnding).
func (h *Handler) closeGet(ex *exchange) {
	ex.lockEnding()
	ex.closed = true
	ex.mu.Unlock()
	s := ex.x.sess
	now := h.since()
	s.mu.Lock()
	st, listed := ex.x.st, false
	if st != nil && st.conn == ex {
		// A POST's stream this GET had taken over waits for the next
		// (its resume deadline).
		st.conn = nil
		listed = s.detachLocked(st, now)
	}
	var at time.Duration
	if listed {
		at = st.detachAt
	}
	s.mu.Unlock()
	if listed {
		h.sess.listDetached(s, st, at)
	}
	h.closeExchange(ex)
}

// resume serves a GET with Last-Event-ID: the events of that event's
// stream after it are sent again (that stream's only); then the
// connection takes the stream over if it is still live here, follows it
// if it runs on another instance (EventFollower), or ends once the
// stream's response has been sent. An unknown id, or one whose successors
// are gone, is 400: a 404 would tell the client its session is gone.
func (h *Handler) resume(w http.ResponseWriter, r *http.Request, ex *exchange, last string) {
	t, s := h.sess, ex.x.sess
	if !h.openSessionExchange(w, r, ex, acceptable{json: true, sse: true}) {
		return
	}
	defer h.running.Done()
	sawResponse := false
	lastSent := last
	send := func(id string, data []byte) error {
		ex.mu.Lock()
		defer ex.mu.Unlock()
		if ex.closed || ex.x.ending || r.Context().Err() != nil {
			return errExchangeClosed
		}
		ex.startStreamLocked()
		if isResponse(data) {
			sawResponse = true
			ex.answered = true
			ex.done.Store(true)
		}
		t.replayed.Add(1)
		lastSent = id
		return ex.sendLocked(nil, eventHead(id), data, eventSuffix)
	}
	s.wmu.Lock()
	stream, err := t.events.Replay(r.Context(), s.id, last, send)
	if err != nil {
		s.wmu.Unlock()
		ex.mu.Lock()
		started := ex.started
		ex.mu.Unlock()
		switch {
		case started || errors.Is(err, errExchangeClosed):
			// The client has what could be sent.
		case errors.Is(err, ErrUnknownEvent):
			h.limits.refused(refReplayGap, "remote", r.RemoteAddr)
			httpError(w, http.StatusBadRequest, "", codeBadRequest, "Bad Request: Last-Event-ID is unknown or its events were dropped", nil)
		default:
			h.limits.refused(refStoreError, "op", "replay", "error", err)
			w.Header().Set("Retry-After", "1")
			httpError(w, http.StatusServiceUnavailable, "", jsonrpc.CodeInternalError, "Service Unavailable: the stream could not be replayed", nil)
		}
		h.closeGet(ex)
		return
	}
	var old *exchange
	attached, follow := false, false
	if !sawResponse {
		s.mu.Lock()
		var st *sseStream
		if stream == gStream {
			st = &s.g
		} else if x := s.live[stream]; x != nil && !x.answered {
			st = x
		}
		if st != nil && !s.gone {
			old, st.conn, ex.x.st, attached = st.conn, ex, st, true
			st.detachAt = 0 // taken over in time
		}
		s.mu.Unlock()
		if attached && st == &s.g {
			s.gEver = true
		}
		follow = !attached && t.follower != nil && stream != gStream
	}
	ex.mu.Lock()
	ex.startStreamLocked() // an empty replay still answers with the stream
	ex.mu.Unlock()
	s.wmu.Unlock()
	if old != nil && old != ex {
		old.closeStream()
	}
	switch {
	case attached:
		h.waitStream(r, ex)
		return
	case follow:
		ctx, cancel := context.WithCancel(r.Context())
		ex.mu.Lock()
		ex.x.cancel = cancel // its end (finishLocked) ends the follow
		ended := ex.x.ending
		ex.mu.Unlock()
		// Registered with its session, so that Shutdown and the
		// session's end reach it: it waits on the store, not on the
		// session's connection.
		s.mu.Lock()
		if !ended && !s.finished {
			if s.follows == nil {
				s.follows = map[*exchange]struct{}{}
			}
			s.follows[ex] = struct{}{}
			s.mu.Unlock()
			err := t.follower.Follow(ctx, s.id, stream, lastSent, send)
			if err != nil && ctx.Err() == nil && !errors.Is(err, errExchangeClosed) {
				h.limits.refused(refStoreError, "op", "follow", "error", err)
			}
			s.mu.Lock()
			delete(s.follows, ex)
		}
		s.mu.Unlock()
		cancel()
	}
	// A replayed response leaves its stream to the store's retention, as
	// one delivered live does: this connection too may break before its
	// client has read it.
	h.closeGet(ex)
}

// ----- shutdown -----

// shutdownSessions ends every session at Shutdown. With a Store the
// sessions live on elsewhere: each resumable stream's connection gets a
// retry field and ends (its stream does not), so that its client resumes
// on another instance, and the records and events stay. Without one the
// sessions end: their GET streams close, and their handlers get the
// end-of-stream grace.
func (t *sessionTable) shutdownSessions() {
	if t.unwatch != nil {
		t.unwatch()
	}
	t.mu.Lock()
	t.closed = true
	all := make([]*httpSession, 0, len(t.m))
	for _, s := range t.m {
		all = append(all, s)
	}
	for _, s := range all {
		t.removeLocked(s)
	}
	t.mu.Unlock()
	keep := t.opts.Store != nil
	for _, s := range all {
		if s.conn == nil {
			continue
		}
		if !keep {
			t.finish(s, false)
			continue
		}
		var conns []*exchange
		s.mu.Lock()
		if s.g.conn != nil {
			conns = append(conns, s.g.conn)
		}
		for _, st := range s.live {
			if st.conn != nil && st.hasID.Load() {
				conns = append(conns, st.conn)
			}
		}
		for ex := range s.follows {
			conns = append(conns, ex) // resumed elsewhere, as the others
		}
		s.mu.Unlock()
		for _, c := range conns {
			c.retryAndClose(t.retry)
		}
		t.finishKeep(s, true)
	}
}

// abortSessions cancels the handlers still running in ended sessions
// (Shutdown ran out of time).
func (t *sessionTable) abortSessions() {
	t.mu.Lock()
	for s := range t.ending {
		go s.conn.Close()
	}
	t.mu.Unlock()
}

// waitSessions waits for the connections of ended sessions to finish
// (their handlers' grace), or for ctx, after which it closes those left.
func (t *sessionTable) waitSessions(ctx context.Context) {
	t.mu.Lock()
	ending := make([]*httpSession, 0, len(t.ending))
	for s := range t.ending {
		ending = append(ending, s)
	}
	t.mu.Unlock()
	for _, s := range ending {
		select {
		case <-s.conn.Done():
		case <-ctx.Done():
			s.conn.Close()
		}
	}
	t.mu.Lock()
	for _, s := range ending {
		delete(t.ending, s)
	}
	if t.timer != nil {
		t.timer.Stop()
		t.wakeAt = 0
	}
	t.mu.Unlock()
}
