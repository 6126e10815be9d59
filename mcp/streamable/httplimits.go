package streamable

import (
	clist "container/list"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentwire/agentwire/internal/refusal"
	"github.com/agentwire/agentwire/jsonrpc"
)

// The limits of an HTTP endpoint. Those of a connection (MaxConns,
// ReadHeaderTimeout, IdleTimeout, MaxHeaderBytes) are applied by
// Handler.Serve; those of a request (MaxInFlight, MaxBufferedBytes,
// MaxBodyBytes, BodyTimeout, WriteTimeout) by the handler itself, wherever
// it is mounted.

// Defaults of Options' limits.
const (
	DefaultPath              = "/mcp"
	DefaultMaxConns          = 1024
	DefaultReadHeaderTimeout = 10 * time.Second
	DefaultIdleTimeout       = 30 * time.Second
	DefaultMaxHeaderBytes    = 64 << 10
	DefaultWriteTimeout      = 30 * time.Second
	DefaultMaxInFlight       = 256
	DefaultMaxStreams        = 256
	DefaultMaxBufferedBytes  = 16 << 20
)

const (
	// writePiece is the most written to a client under one write
	// deadline: a large response is a series of writes, each of which
	// must make progress within WriteTimeout, so a slow reader is served
	// and a stalled one is cut off.
	writePiece = 64 << 10
	// refuseLinger bounds how long a connection refused over MaxConns is
	// kept to deliver its 503 (its request is read and dropped meanwhile,
	// so that closing it does not reset the answer away), and
	// maxRefusing how many are kept at once; beyond, they are closed
	// without an answer.
	refuseLinger = 500 * time.Millisecond
	// maxEvictScan bounds the new connections looked at to find one that
	// has sent nothing.
	maxEvictScan = 64
	// A new connection may be closed to make room once it has had
	// maxFreshAge (a quarter of ReadHeaderTimeout when that is less) to
	// send its request.
	maxFreshAge = 250 * time.Millisecond
	maxRefusing = 64
	// A request refused with 503 has the rest of its body (up to
	// MaxBodyBytes) read and dropped within BodyTimeout before its
	// connection closes, so that the client, still sending, is not reset
	// before it reads the answer; one refused with 401 or 403, up to
	// discardAuthBytes within discardTimeout.
	discardTimeout   = 5 * time.Second
	discardAuthBytes = 256 << 10
	// Accept errors (EMFILE: the process is out of descriptors) are
	// retried after a pause that doubles from minAcceptBackoff up to
	// maxAcceptBackoff, rather than in a spinning loop.
	minAcceptBackoff = 5 * time.Millisecond
	maxAcceptBackoff = time.Second
)

// Stats counts what an Handler refused, and what it holds now.
// Each refusal is also logged, once per burst (the first at once, then at
// most one line per 10 s with the number suppressed).
type Stats struct {
	// Conns is the number of connections open on Serve's listeners.
	Conns int
	// InFlight is the number of requests being served (MaxInFlight).
	InFlight int
	// Streams is the number of open subscriptions/listen streams and
	// sessions' GET streams (MaxStreams).
	Streams int
	// BufferedBytes is the request bytes held by them (MaxBufferedBytes).
	BufferedBytes int64

	// ConnsRefused counts connections over MaxConns while every open
	// connection was serving a request: answered 503 and closed.
	ConnsRefused int64
	// ConnsEvicted counts connections closed to make room under MaxConns:
	// the one that had waited longest without a request in progress.
	ConnsEvicted int64
	// IdleClosed counts connections closed for sending no request within
	// ReadHeaderTimeout (a new connection) or IdleTimeout (between
	// requests).
	IdleClosed int64
	// AcceptErrors counts failed accepts (EMFILE, ENFILE, ...), each
	// followed by a pause.
	AcceptErrors int64
	// NotFound counts requests for another path than Path (404).
	NotFound int64
	// Forbidden counts requests from a foreign Origin or Host (403).
	Forbidden int64
	// Unauthorized counts requests without the bearer token (401): with
	// none, or with another than Options.Token.
	Unauthorized int64
	// InvalidTokens counts requests whose bearer token the verifier
	// refused (401 invalid_token, Options.Protect).
	InvalidTokens int64
	// InsufficientScope counts requests whose verified token lacked a
	// scope the request needs (403, Options.Protect).
	InsufficientScope int64
	// VerifierFailures counts requests whose token could not be verified
	// for the verifier's own failure (503, Options.Protect).
	VerifierFailures int64
	// TooLarge counts bodies over MaxBodyBytes (413).
	TooLarge int64
	// Busy counts requests over MaxInFlight (503).
	Busy int64
	// StreamsRefused counts listen streams and sessions' GET streams over
	// MaxStreams (503).
	StreamsRefused int64
	// OverBudget counts requests whose body did not fit in
	// MaxBufferedBytes (503).
	OverBudget int64
	// WriteTimeouts counts responses cut off because the client read
	// nothing for WriteTimeout.
	WriteTimeouts int64

	// The legacy sessions (Options.Sessions); all zero without them.

	// Sessions is the number of live sessions (MaxSessions).
	Sessions int
	// SessionsCreated counts sessions made by a successful initialize, and those
	// restored here from the SessionStore.
	SessionsCreated int64
	// SessionsExpired counts sessions ended for idling past IdleTimeout
	// (FirstIdleTimeout for one that sent nothing after initialize).
	SessionsExpired int64
	// SessionsEvicted counts idle sessions ended to make room for a new
	// one under MaxSessions.
	SessionsEvicted int64
	// SessionsRefused counts initialize requests (and restorations)
	// answered 503 because MaxSessions sessions were live and none was
	// idle enough to evict.
	SessionsRefused int64
	// UnknownSessions counts requests naming a session that does not
	// exist, has ended, or belongs to another identity (404).
	UnknownSessions int64
	// SessionStreamsRefused counts GET streams over MaxStreamsPerSession
	// (503).
	SessionStreamsRefused int64
	// EventsReplayed counts events sent again to a client resuming a
	// stream with Last-Event-ID.
	EventsReplayed int64
	// ReplayGaps counts resumptions refused (400) because Last-Event-ID
	// named no event of the session, or one whose successors were gone.
	ReplayGaps int64
	// StoreErrors counts failed calls to the EventStore or the
	// SessionStore; the message is still delivered live, the session
	// still served here.
	StoreErrors int64
	// ResumeTimeouts counts requests cancelled at their resume deadline:
	// their POST connection went and no GET with Last-Event-ID took their
	// stream over within three times SessionOptions.Retry (at least 10 s,
	// at most IdleTimeout).
	ResumeTimeouts int64
	// RecordOverflows counts client messages left out of a session's
	// SessionRecord because it was full (1024 subscriptions, 256 KiB), and
	// initialize requests too large (64 KiB) for their session to be shared.
	RecordOverflows int64

	// SSE counts the 2024-11-05 HTTP+SSE sessions (Options.SSE).
	SSE SSEStats
}

// The kinds of refusal, each with its counter and its log.
const (
	refConnRefused = iota
	refConnEvicted
	refIdleClosed
	refAcceptError
	refNotFound
	refForbidden
	refUnauthorized
	refTooLarge
	refBusy
	refStreams
	refOverBudget
	refWriteTimeout
	refInvalidToken
	refInsufficientScope
	refVerifier
	refSessionsFull
	refSessionEvicted
	refUnknownSession
	refSessionStreams
	refReplayGap
	refStoreError
	numRefusals
)

var refusalMessages = [numRefusals]string{
	refConnRefused:       "mcp http: connection refused: every connection is serving a request (MaxConns)",
	refConnEvicted:       "mcp http: closed a waiting connection to make room (MaxConns)",
	refIdleClosed:        "mcp http: closed a connection that sent no request in time (ReadHeaderTimeout, IdleTimeout)",
	refAcceptError:       "mcp http: accept failed; backing off",
	refNotFound:          "mcp http: request for another path (404)",
	refForbidden:         "mcp http: request from a foreign origin or host (403)",
	refUnauthorized:      "mcp http: request without a valid bearer token (401)",
	refTooLarge:          "mcp http: request body too large (413)",
	refBusy:              "mcp http: too many requests in flight (503, MaxInFlight)",
	refStreams:           "mcp http: too many streams open (503, MaxStreams)",
	refOverBudget:        "mcp http: request bytes in flight over the budget (503, MaxBufferedBytes)",
	refWriteTimeout:      "mcp http: response cut off: the client read nothing for WriteTimeout",
	refInvalidToken:      "mcp http: bearer token refused by the verifier (401, Protect)",
	refInsufficientScope: "mcp http: token without a scope the request needs (403, Protect)",
	refVerifier:          "mcp http: the token verifier failed (503, Protect)",
	refSessionsFull:      "mcp http: session refused: every session is in use (503, MaxSessions)",
	refSessionEvicted:    "mcp http: ended the session idle longest to make room (MaxSessions)",
	refUnknownSession:    "mcp http: request for an unknown, ended or foreign session (404)",
	refSessionStreams:    "mcp http: too many streams open in one session (503, MaxStreamsPerSession)",
	refReplayGap:         "mcp http: Last-Event-ID unknown or its events dropped (400)",
	refStoreError:        "mcp http: the session or event store failed; serving on without it",
}

// httpLimits is the handler's limit state: counters, logs, the request
// budget and the connection tracker.
type httpLimits struct {
	counts [numRefusals]atomic.Int64
	logs   [numRefusals]refusal.Log

	inFlight atomic.Int64
	streams  atomic.Int64
	buffered atomic.Int64

	conns      connTracker
	refusing   chan struct{} // semaphore: connections being answered 503
	refusers   sync.WaitGroup
	maxConns   int
	maxFlight  int64
	maxStreams int64
	maxBytes   int64
}

func (l *httpLimits) init(log *slog.Logger, maxConns, maxFlight, maxStreams int, maxBytes int64, headerTimeout time.Duration) {
	for i := range l.logs {
		l.logs[i].Logger = log
	}
	l.refusing = make(chan struct{}, maxRefusing)
	l.maxConns = maxConns
	l.maxFlight = int64(maxFlight)
	l.maxStreams = int64(maxStreams)
	l.maxBytes = maxBytes
	l.conns.limits = l
	l.conns.max = maxConns
	l.conns.room = make(chan struct{}, 1)
	l.conns.minAge = maxFreshAge
	if headerTimeout > 0 {
		l.conns.minAge = min(maxFreshAge, headerTimeout/4)
	}
}

// refused counts one refusal and logs it once per burst.
func (l *httpLimits) refused(kind int, attrs ...any) {
	l.counts[kind].Add(1)
	l.logs[kind].Refused(refusalMessages[kind], attrs...)
}

// Stats returns what the handler has refused so far and what it holds now.
func (h *Handler) Stats() Stats {
	l := &h.limits
	c := func(k int) int64 { return l.counts[k].Load() }
	s := Stats{
		Conns:             l.conns.open(),
		InFlight:          int(l.inFlight.Load()),
		Streams:           int(l.streams.Load()),
		BufferedBytes:     l.buffered.Load(),
		ConnsRefused:      c(refConnRefused),
		ConnsEvicted:      c(refConnEvicted),
		IdleClosed:        c(refIdleClosed),
		AcceptErrors:      c(refAcceptError),
		NotFound:          c(refNotFound),
		Forbidden:         c(refForbidden),
		Unauthorized:      c(refUnauthorized),
		TooLarge:          c(refTooLarge),
		Busy:              c(refBusy),
		StreamsRefused:    c(refStreams),
		OverBudget:        c(refOverBudget),
		WriteTimeouts:     c(refWriteTimeout),
		InvalidTokens:     c(refInvalidToken),
		InsufficientScope: c(refInsufficientScope),
		VerifierFailures:  c(refVerifier),

		SessionsEvicted:       c(refSessionEvicted),
		SessionsRefused:       c(refSessionsFull),
		UnknownSessions:       c(refUnknownSession),
		SessionStreamsRefused: c(refSessionStreams),
		ReplayGaps:            c(refReplayGap),
		StoreErrors:           c(refStoreError),
	}
	if t := h.sess; t != nil {
		t.mu.Lock()
		s.Sessions = len(t.m)
		t.mu.Unlock()
		s.SessionsCreated = t.created.Load()
		s.SessionsExpired = t.expired.Load()
		s.EventsReplayed = t.replayed.Load()
		s.ResumeTimeouts = t.resumeTimeouts.Load()
		s.RecordOverflows = t.recordOverflows.Load()
	}
	s.SSE = h.SSEStats()
	return s
}

// ----- the request budget -----

// slot is a request's place: among the requests in flight, or, once it
// turns out to be a subscriptions/listen stream, among the streams, so
// that streams (which last) cannot starve ordinary requests, and the
// other way round.
type slot struct {
	l      *httpLimits
	lane   *atomic.Int64 // nil: none held
	stream bool
}

// enter takes a place among the requests in flight.
func (l *httpLimits) enter() (*slot, bool) {
	if l.inFlight.Add(1) > l.maxFlight {
		l.inFlight.Add(-1)
		return nil, false
	}
	return &slot{l: l, lane: &l.inFlight}, true
}

// toStream moves the request to the streams' lane.
func (s *slot) toStream() bool {
	if s.l.streams.Add(1) > s.l.maxStreams {
		s.l.streams.Add(-1)
		return false
	}
	s.lane.Add(-1)
	s.lane, s.stream = &s.l.streams, true
	return true
}

func (s *slot) leave() {
	if s.lane != nil {
		s.lane.Add(-1)
		s.lane = nil
	}
}

// reserve takes n bytes of the request budget.
func (l *httpLimits) reserve(n int64) bool {
	if l.buffered.Add(n) > l.maxBytes {
		l.buffered.Add(-n)
		return false
	}
	return true
}

func (l *httpLimits) release(n int64) { l.buffered.Add(-n) }

// charge counts n bytes that cannot be refused (an answer being written).
func (l *httpLimits) charge(n int64) { l.buffered.Add(n) }

var errOverBudget = errors.New("mcp: request bytes in flight over MaxBufferedBytes")

// readBody reads a request body into a buffer with room for one more byte
// (the newline the exchange's connection reads the message by), taking
// what it allocates from the request budget as it goes: at once when the
// length is known, step by step when it is not. *reserved is what was
// taken, for the caller to give back.
func (l *httpLimits) readBody(r io.Reader, length, max int64, reserved *int64) ([]byte, error) {
	take := func(n int64) error {
		if !l.reserve(n) {
			return errOverBudget
		}
		*reserved += n
		return nil
	}
	if length >= 0 {
		if err := take(length + 1); err != nil {
			return nil, err
		}
		buf := make([]byte, length, length+1)
		if _, err := io.ReadFull(r, buf); err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
		return buf, nil
	}
	size := min(int64(4<<10), max+1)
	if err := take(size); err != nil {
		return nil, err
	}
	buf := make([]byte, 0, size)
	for {
		if len(buf) == cap(buf) {
			next := min(2*int64(cap(buf)), max+1)
			if next <= int64(cap(buf)) {
				next = int64(cap(buf)) + 1 // past max: the reader says so
			}
			if err := take(next - int64(cap(buf))); err != nil {
				return nil, err
			}
			nb := make([]byte, len(buf), next)
			copy(nb, buf)
			buf = nb
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			if len(buf) == cap(buf) {
				buf = append(buf[:len(buf):len(buf)], 0)[:len(buf)] // room for the newline
			}
			return buf, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// ----- connections -----

// connTracker bounds the connections open on Serve's listeners. Those that
// wait without a request in progress are listed, oldest first: new ones
// (no request yet) and idle ones (between requests). A new connection
// over the cap evicts the oldest new one; when there is none, it is
// refused. Running out of descriptors evicts the oldest new one, else the
// oldest idle one. A connection serving a request is never closed to make
// room.
type connTracker struct {
	limits *httpLimits
	max    int
	minAge time.Duration
	room   chan struct{} // signalled when a connection closes

	mu    sync.Mutex
	n     int
	fresh clist.List // *trackedConn: no request yet
	idle  clist.List // *trackedConn: between requests
}

func (t *connTracker) open() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.n
}

// trackedConn is a connection accepted by Serve.
type trackedConn struct {
	net.Conn
	t        *connTracker
	since    time.Time   // accepted
	sent     atomic.Bool // bytes have arrived: no longer new
	mu       sync.Mutex  // t.mu guards the rest; mu only timedOut
	timedOut bool        // a read ended at its deadline
	elem     *clist.Element
	in       *clist.List // fresh, idle or nil (serving a request, or closed)
	closed   bool
}

// admit starts tracking c, making room first when the cap is reached. It
// returns nil when c was refused. Every new connection gets at least
// minAge to send its request before it may be closed to make room: when
// the oldest silent one is younger, admit waits (the flood waits in the
// listen backlog), so that a burst of new connections cannot close a
// client's connection in the moment between its connect and its request.
func (t *connTracker) admit(c net.Conn, done <-chan struct{}) *trackedConn {
	t.mu.Lock()
	var victim *trackedConn
	for t.max > 0 && t.n >= t.max {
		v, wait := t.freshVictimLocked()
		if v != nil {
			victim = v
			t.dropLocked(victim)
			break
		}
		if wait == 0 {
			t.mu.Unlock()
			t.limits.refuseConn(c)
			return nil
		}
		t.mu.Unlock()
		timer := time.NewTimer(wait)
		select {
		case <-timer.C:
		case <-t.room:
			timer.Stop()
		case <-done:
			timer.Stop()
			c.Close()
			return nil
		}
		t.mu.Lock()
	}
	tc := &trackedConn{Conn: c, t: t, since: time.Now()}
	tc.in = &t.fresh
	tc.elem = t.fresh.PushBack(tc)
	t.n++
	t.mu.Unlock()
	if victim != nil {
		t.limits.refused(refConnEvicted, "limit", t.max)
		victim.Conn.Close()
	}
	return tc
}

// freshVictimLocked picks the connection to close to make room: the
// oldest that has sent nothing, once it is minAge old; otherwise it says
// how long until the oldest is (0: there is none; refuse). Only such a
// connection makes room: one between requests belongs to a client that
// has been served (and authenticated, with a token), and IdleTimeout ends
// it. A new connection whose request waits in the socket, not yet read
// (the server is busy), has sent something: it leaves the list instead.
func (t *connTracker) freshVictimLocked() (*trackedConn, time.Duration) {
	for range maxEvictScan {
		e := t.fresh.Front()
		if e == nil {
			return nil, 0
		}
		tc := e.Value.(*trackedConn)
		if hasInput(tc.Conn) {
			tc.sent.Store(true)
			t.moveLocked(tc, nil)
			continue
		}
		if age := time.Since(tc.since); age < t.minAge {
			return nil, t.minAge - age
		}
		return tc, 0
	}
	return nil, 0
}

// evictOne closes the oldest waiting connection, if any (the process is
// out of descriptors).
func (t *connTracker) evictOne() {
	t.mu.Lock()
	var victim *trackedConn
	if e := t.fresh.Front(); e != nil {
		victim = e.Value.(*trackedConn)
	} else if e := t.idle.Front(); e != nil {
		victim = e.Value.(*trackedConn)
	}
	if victim != nil {
		t.dropLocked(victim)
	}
	t.mu.Unlock()
	if victim != nil {
		t.limits.refused(refConnEvicted, "limit", t.max, "reason", "accept failed")
		victim.Conn.Close()
	}
}

// closeFresh closes every connection that has not sent a request (at
// shutdown: http.Server.Shutdown would wait 5 s for each).
func (t *connTracker) closeFresh() {
	t.mu.Lock()
	var victims []*trackedConn
	for e := t.fresh.Front(); e != nil; e = e.Next() {
		victims = append(victims, e.Value.(*trackedConn))
	}
	for _, v := range victims {
		t.dropLocked(v)
	}
	t.mu.Unlock()
	for _, v := range victims {
		v.Conn.Close()
	}
}

func (t *connTracker) dropLocked(tc *trackedConn) {
	if tc.closed {
		return
	}
	tc.closed = true
	t.n--
	t.moveLocked(tc, nil)
	select {
	case t.room <- struct{}{}:
	default:
	}
}

func (t *connTracker) moveLocked(tc *trackedConn, to *clist.List) {
	if tc.in != nil {
		tc.in.Remove(tc.elem)
		tc.in, tc.elem = nil, nil
	}
	if to != nil && !tc.closed {
		tc.in = to
		tc.elem = to.PushBack(tc)
	}
}

// connState follows http.Server's view of each connection.
func (t *connTracker) connState(c net.Conn, s http.ConnState) {
	tc, ok := c.(*trackedConn)
	if !ok {
		return
	}
	switch s {
	case http.StateActive:
		t.mu.Lock()
		t.moveLocked(tc, nil)
		t.mu.Unlock()
	case http.StateIdle:
		t.mu.Lock()
		t.moveLocked(tc, &t.idle)
		t.mu.Unlock()
	}
}

func (tc *trackedConn) Read(b []byte) (int, error) {
	n, err := tc.Conn.Read(b)
	if n > 0 && !tc.sent.Load() && !tc.sent.Swap(true) {
		// A request has begun: the connection is no longer new.
		t := tc.t
		t.mu.Lock()
		if tc.in == &t.fresh {
			t.moveLocked(tc, nil)
		}
		t.mu.Unlock()
	}
	if err != nil && errors.Is(err, os.ErrDeadlineExceeded) {
		tc.mu.Lock()
		tc.timedOut = true
		tc.mu.Unlock()
	}
	return n, err
}

// CloseWrite keeps net/http's reset avoidance (a FIN, then a pause, before
// closing a connection whose request was not read).
func (tc *trackedConn) CloseWrite() error {
	if cw, ok := tc.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

func (tc *trackedConn) Close() error {
	t := tc.t
	t.mu.Lock()
	waiting := tc.in != nil
	t.dropLocked(tc)
	t.mu.Unlock()
	tc.mu.Lock()
	idle := waiting && tc.timedOut
	tc.timedOut = false
	tc.mu.Unlock()
	switch {
	case idle && !tc.sent.Load():
		t.limits.refused(refIdleClosed) // sent nothing at all: counted and logged
	case idle:
		// A client that was served and then kept the connection idle:
		// counted, but ordinary keep-alive use, not worth a log line.
		t.limits.counts[refIdleClosed].Add(1)
	}
	return tc.Conn.Close()
}

// busyResponse is what a connection over the cap gets.
var busyResponse = func() []byte {
	body := append(jsonrpc.AppendErrorResponse(nil, "", jsonrpc.NewError(jsonrpc.CodeInternalError,
		"Service Unavailable: too many connections", nil)), '\n')
	return []byte("HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nRetry-After: 1\r\n" +
		"Connection: close\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + string(body))
}()

// refuseConn answers a connection over the cap with 503 and closes it: at
// once when too many are being refused already.
func (l *httpLimits) refuseConn(c net.Conn) {
	l.refused(refConnRefused, "limit", l.maxConns)
	select {
	case l.refusing <- struct{}{}:
	default:
		c.Close()
		return
	}
	l.refusers.Add(1)
	go func() {
		defer l.refusers.Done()
		defer func() { <-l.refusing }()
		c.SetDeadline(time.Now().Add(refuseLinger))
		if _, err := c.Write(busyResponse); err == nil {
			if cw, ok := c.(interface{ CloseWrite() error }); ok {
				cw.CloseWrite()
			}
			io.Copy(io.Discard, io.LimitReader(c, 1<<20))
		}
		c.Close()
	}()
}

// limitListener is the listener Serve accepts on.
type limitListener struct {
	net.Listener
	l    *httpLimits
	done chan struct{}
	once sync.Once
}

func (ll *limitListener) Accept() (net.Conn, error) {
	var delay time.Duration
	for {
		c, err := ll.Listener.Accept()
		if err != nil {
			var te interface{ Temporary() bool }
			if !errors.As(err, &te) || !te.Temporary() {
				return nil, err
			}
			// Out of descriptors (or a connection aborted before it
			// was accepted): make room if a connection waits idle, and
			// pause rather than spin.
			if delay == 0 {
				delay = minAcceptBackoff
			} else {
				delay = min(2*delay, maxAcceptBackoff)
			}
			ll.l.refused(refAcceptError, "error", err, "retry_in", delay)
			ll.l.conns.evictOne()
			t := time.NewTimer(delay)
			select {
			case <-t.C:
			case <-ll.done:
				t.Stop()
				return nil, net.ErrClosed
			}
			continue
		}
		delay = 0
		if tc := ll.l.conns.admit(c, ll.done); tc != nil {
			return tc, nil
		}
	}
}

// Close closes the listener once; later calls return nil, so that
// http.Server.Shutdown, which closes it again, reports no error.
func (ll *limitListener) Close() error {
	err := net.ErrClosed
	ll.once.Do(func() {
		close(ll.done)
		err = ll.Listener.Close()
	})
	if errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}

// Serve accepts connections on ln and serves h on them until Shutdown,
// with the connection limits of Options: MaxConns (a connection over
// the cap closes the one that has waited longest without a request, or,
// when every connection is serving one, is answered 503 and closed),
// ReadHeaderTimeout, IdleTimeout and MaxHeaderBytes. Accept errors such as
// running out of file descriptors are retried after a growing pause. Serve
// may be called for several listeners; it returns http.ErrServerClosed
// after Shutdown, or the listener's error.
//
// It serves HTTP/1.1 over ln as it is; a handler mounted on an http.Server
// of one's own gets the request limits (MaxInFlight, MaxBufferedBytes,
// MaxBodyBytes, BodyTimeout, WriteTimeout) but not these.
func (h *Handler) Serve(ln net.Listener) error {
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: h.opts.ReadHeaderTimeout,
		IdleTimeout:       h.opts.IdleTimeout,
		MaxHeaderBytes:    h.opts.MaxHeaderBytes,
		ConnState:         h.limits.conns.connState,
		ErrorLog:          slog.NewLogLogger(h.log.Handler(), slog.LevelWarn),
	}
	// A negative timeout means none; net/http's zero falls back to
	// ReadTimeout, which is zero too.
	srv.ReadHeaderTimeout = max(srv.ReadHeaderTimeout, 0)
	srv.IdleTimeout = max(srv.IdleTimeout, 0)
	h.mu.Lock()
	if h.draining {
		h.mu.Unlock()
		ln.Close()
		return http.ErrServerClosed
	}
	ll := &limitListener{Listener: ln, l: &h.limits, done: make(chan struct{})}
	h.servers = append(h.servers, srv)
	h.listeners = append(h.listeners, ll)
	h.mu.Unlock()
	err := srv.Serve(ll)
	h.mu.Lock()
	draining := h.draining
	h.mu.Unlock()
	if draining {
		return http.ErrServerClosed
	}
	return err
}
