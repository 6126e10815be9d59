package streamable

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentwire/agentwire/internal/refusal"
	"github.com/agentwire/agentwire/internal/wait"
	"github.com/agentwire/agentwire/jsonrpc"
	"github.com/agentwire/agentwire/mcp"
	"github.com/agentwire/agentwire/mcp/auth"
	"github.com/agentwire/agentwire/rpc"
)

// The 2024-11-05 HTTP+SSE transport (Options.SSE), for clients that
// predate Streamable HTTP: "The server MUST provide two endpoints: 1. An
// SSE endpoint, for clients to establish a connection and receive
// messages from the server 2. A regular HTTP POST endpoint for clients to
// send messages to the server" (2024-11-05 transports, HTTP with SSE).
//
//	GET  Path          -> one session: an event stream whose first event,
//	                      endpoint, names where to POST; then every
//	                      message of the server's, responses included, as
//	                      a message event on this one stream
//	POST MessagePath?sessionId=ID
//	                   -> 202 with an empty body at once; the message is
//	                      then pushed into the session's connection, in
//	                      the order the POSTs were accepted
//
// A session is one long-lived rpc.Conn of the backend's SessionHandler,
// as a stdio connection is, over the message seam: the POSTs push into it
// (ReceiveDecoded, each on a goroutine of its own holding a MaxInFlight
// slot, one after the other as a stdio reader reads lines; see
// sseTurn), and its one MessageWriter is the GET's stream. The stream is
// an exchange registered with the handler like any other, so Shutdown,
// the keep-alive clock, the piece writer and WriteTimeout treat it as
// they treat a listen stream. The session lives as long as its GET: there
// is no resumption in this transport.

// Defaults of SSEOptions.
const (
	DefaultSSEPath        = "/sse"
	DefaultSSEMessagePath = "/messages"
)

const (
	// sseDefaultMaxSessions bounds the HTTP+SSE sessions when
	// Options.Sessions does not say (SessionOptions.MaxSessions).
	sseDefaultMaxSessions = 4096
	// sseCloseGrace bounds the wait, once a session's GET has ended, for
	// the POSTs it already accepted to hand their messages over, so that
	// a client that sends a last notification (notifications/cancelled,
	// a response to the server) and then disconnects is still heard.
	sseCloseGrace = time.Second
	// sseMaxPending bounds a session's POSTs on their way in: found the
	// session, and not yet handed their message to its connection
	// (reading their body, or waiting for their turn behind the message
	// before). One more is answered 503 with Retry-After: 1. Without it a
	// client could pile up goroutines and bodies behind a message whose
	// hand-over waits (a notification waiting for room in a connection
	// whose every slot and queue place is taken); with it, that costs at
	// most this many per session, within MaxInFlight overall.
	sseMaxPending = 64
)

// SSEStats counts the handler's HTTP+SSE sessions (Options.SSE); every
// refusal is also logged, once per burst. All zero when SSE is off.
type SSEStats struct {
	// Sessions is the number of sessions open now (their GET streams).
	Sessions int
	// SessionsOpened counts the sessions opened so far.
	SessionsOpened int64
	// SessionsRefused counts GETs refused because MaxSessions sessions
	// were open (503).
	SessionsRefused int64
	// UnknownSessions counts POSTs naming no live session of their
	// caller's (404): never made, ended, or bound to another identity.
	UnknownSessions int64
	// MissingSessions counts POSTs without a sessionId (400).
	MissingSessions int64
	// ModernRefused counts 2026-07-28 requests answered -32022 on a
	// session's stream: an HTTP+SSE session is legacy only.
	ModernRefused int64
	// QueueFull counts POSTs refused (503, Retry-After: 1) because 64
	// messages of their session were already on their way into its
	// connection: read, and waiting for their turn (messages are handed
	// over in the order their POSTs were accepted).
	QueueFull int64
}

// SSEStats reports the HTTP+SSE sessions.
func (h *Handler) SSEStats() SSEStats {
	s := h.sse
	if s == nil {
		return SSEStats{}
	}
	s.mu.Lock()
	n := len(s.sessions)
	s.mu.Unlock()
	return SSEStats{
		Sessions:        n,
		SessionsOpened:  s.opened.Load(),
		SessionsRefused: s.counts[sseRefFull].Load(),
		UnknownSessions: s.counts[sseRefUnknown].Load(),
		MissingSessions: s.counts[sseRefMissing].Load(),
		ModernRefused:   s.modern.Load(),
		QueueFull:       s.counts[sseRefQueue].Load(),
	}
}

// The refusals of the HTTP+SSE paths, each with its counter and its log.
const (
	sseRefFull = iota
	sseRefUnknown
	sseRefMissing
	sseRefQueue
	sseNumRefusals
)

var sseRefusalMessages = [sseNumRefusals]string{
	sseRefFull:    "mcp http+sse: too many sessions open (503, MaxSessions)",
	sseRefUnknown: "mcp http+sse: message for no live session (404)",
	sseRefMissing: "mcp http+sse: message without a sessionId (400)",
	sseRefQueue:   "mcp http+sse: too many messages of one session on their way in (503)",
}

// sseServer is Options.SSE resolved, and the table of its sessions.
type sseServer struct {
	backend     SessionBackend
	path        string // the GET's
	messagePath string // the POSTs'
	// endpoint is the endpoint event's data up to the session id: a
	// relative reference from path to messagePath, and "?sessionId=".
	endpoint string
	max      int
	// budget is how long a message's handler runs on the goroutine that
	// handed it over before the next message goes in anyway: the
	// connection's InlineBudget (rpc.Options), as on stdio, where the
	// reader runs a handler inline for that long before another reader
	// takes over input.
	budget time.Duration

	mu       sync.Mutex
	sessions map[string]*sseSession

	opened atomic.Int64
	modern atomic.Int64
	counts [sseNumRefusals]atomic.Int64
	logs   [sseNumRefusals]refusal.Log
}

// newSSE resolves Options.SSE; it panics on a configuration that cannot
// be served, as NewHandler does.
func newSSE(h *Handler) *sseServer {
	sb, ok := h.backend.(SessionBackend)
	if !ok {
		panic(fmt.Sprintf("streamable: Options.SSE needs a SessionBackend (one long-lived handler per session); %T is not one", h.backend))
	}
	o := *h.opts.SSE
	if o.Path == "" {
		o.Path = DefaultSSEPath
	}
	if o.MessagePath == "" {
		o.MessagePath = DefaultSSEMessagePath
	}
	for _, p := range []string{o.Path, o.MessagePath} {
		if err := checkSSEPath(p); err != nil {
			panic("streamable: Options.SSE: " + err.Error())
		}
		if p == h.opts.Path {
			panic(fmt.Sprintf("streamable: Options.SSE: %q is the Streamable HTTP endpoint's own path", p))
		}
	}
	s := &sseServer{
		backend:     sb,
		path:        o.Path,
		messagePath: o.MessagePath,
		endpoint:    relativeRef(o.Path, o.MessagePath) + "?sessionId=",
		max:         sseDefaultMaxSessions,
		budget:      rpc.DefaultInlineBudget,
		sessions:    map[string]*sseSession{},
	}
	if h.opts.Sessions != nil && h.opts.Sessions.MaxSessions > 0 {
		s.max = h.opts.Sessions.MaxSessions
	}
	if c := h.opts.Conn; c != nil && c.InlineBudget != 0 {
		s.budget = max(c.InlineBudget, 0) // negative: every handler on its own goroutine, no wait
	}
	for i := range s.logs {
		s.logs[i].Logger = h.log
	}
	return s
}

// checkSSEPath refuses a path the endpoint event could not name
// faithfully: it must be absolute, without dot segments (a client
// resolving the reference would remove them) and without control
// characters (they would break the event's line).
func checkSSEPath(p string) error {
	if !strings.HasPrefix(p, "/") {
		return fmt.Errorf("path %q must begin with /", p)
	}
	for _, seg := range strings.Split(p, "/") {
		if seg == "." || seg == ".." {
			return fmt.Errorf("path %q has a dot segment", p)
		}
	}
	for i := 0; i < len(p); i++ {
		if p[i] < 0x20 || p[i] == 0x7f {
			return fmt.Errorf("path %q has a control character", p)
		}
	}
	return nil
}

// relativeRef returns a relative reference (RFC 3986 §4.2) that resolves
// against the URL of from to the same URL with the path to: "messages"
// from /sse to /messages, "../messages" from /a/sse. Relative, not
// absolute, so that it survives a proxy that serves the handler under a
// prefix of its own (http.StripPrefix behind /mcp-server/ is still
// resolved right), and it names no host: clients resolve it against the
// URL they opened (the TypeScript SDK with new URL(data, url), go-sdk
// with url.Parse(url).Parse(data)) and some check that the result has the
// same origin (the TypeScript SDK, mcp-go), which it always has.
func relativeRef(from, to string) string {
	dir := strings.Split(from[:strings.LastIndexByte(from, '/')], "/") // "/a/sse" -> ["", "a"]
	segs := strings.Split(to, "/")                                     // "/m/x" -> ["", "m", "x"]
	i := 0
	for i < len(dir) && i < len(segs)-1 && dir[i] == segs[i] {
		i++
	}
	var b strings.Builder
	for range len(dir) - i {
		b.WriteString("../")
	}
	for j, seg := range segs[i:] {
		if j > 0 {
			b.WriteByte('/')
		}
		b.WriteString(url.PathEscape(seg))
	}
	ref := b.String()
	first, _, _ := strings.Cut(ref, "/")
	if ref == "" || strings.Contains(first, ":") {
		// "" would be the base URL itself; a first segment with a colon
		// would read as a scheme.
		ref = "./" + ref
	}
	return ref
}

// owns reports whether a path is one of the HTTP+SSE transport's.
func (s *sseServer) owns(path string) bool { return path == s.path || path == s.messagePath }

func (s *sseServer) refused(kind int, attrs ...any) {
	s.counts[kind].Add(1)
	s.logs[kind].Refused(sseRefusalMessages[kind], attrs...)
}

// sseSession is one HTTP+SSE session: its GET's stream and the
// connection the POSTs feed.
type sseSession struct {
	srv   *sseServer
	id    string
	owner string    // the identity it is bound to (auth.Identity.Owner); "" without Protect
	ex    *exchange // the GET: its ResponseWriter, lock, deadlines, keep-alives
	conn  *rpc.Conn

	// posts counts the POSTs that have found the session and not yet
	// handed their message over (at most sseMaxPending); drained is
	// closed when it falls to zero once the session has left the table.
	// tail is the turn of the message accepted last. All under srv.mu.
	posts   int
	drained chan struct{}
	tail    *sseTurn

	// current is the message being handed over now, so that sseHandler
	// can tell when its handler starts (Request.Note is its note).
	current atomic.Pointer[ssePost]

	broken     chan struct{} // closed when a write failed: the stream is lost (lose)
	brokenOnce sync.Once
}

var errSSEClosed = errors.New("mcp: the HTTP+SSE session is over")

// WriteMessage sends every message of the session's connection on its
// one stream (rpc.MessageWriter), as a message event: "Server messages
// are sent as SSE message events, with the message content encoded as
// JSON in the event data." Responses too: in this transport a POST is
// only ever answered 202. A write that fails loses the stream, and so
// ends the session (its connection stops on the error).
func (ss *sseSession) WriteMessage(m *rpc.Outbound) error {
	ex := ss.ex
	ex.mu.Lock()
	defer ex.mu.Unlock()
	if ex.closed {
		return errSSEClosed
	}
	// Held until the client has it, as an exchange's answer is.
	n := int64(m.Len())
	ex.h.limits.charge(n)
	defer ex.h.limits.release(n)
	return ex.sendLocked(m, eventPrefix, eventSuffix)
}

// send writes one message of our own (not the connection's) on the
// stream: the error of a request that cannot be served in this session.
func (ss *sseSession) send(line []byte) {
	ex := ss.ex
	ex.mu.Lock()
	defer ex.mu.Unlock()
	if ex.closed {
		return
	}
	ex.sendLocked(nil, eventPrefix, line, eventSuffix) // a failure loses the stream (sseWriter)
}

// add puts a new session in the table, unless MaxSessions are open.
func (s *sseServer) add(ss *sseSession) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.sessions) >= s.max {
		return false
	}
	s.sessions[ss.id] = ss
	s.opened.Add(1)
	return true
}

// lookup finds the live session id bound to owner and counts the caller
// among its POSTs in flight (release ends that); nil when there is none.
// full says the session has sseMaxPending POSTs in flight already: the
// caller is not counted, and is to be refused.
func (s *sseServer) lookup(id, owner string) (ss *sseSession, full bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ss = s.sessions[id]
	if ss == nil || ss.owner != owner {
		return nil, false
	}
	if ss.posts >= sseMaxPending {
		return ss, true
	}
	ss.posts++
	return ss, false
}

// enqueue gives an accepted message its turn, behind the message accepted
// before it in the same session.
func (s *sseServer) enqueue(p *ssePost) {
	t := &sseTurn{started: make(chan struct{}), done: make(chan struct{})}
	s.mu.Lock()
	p.prev, p.ss.tail = p.ss.tail, t
	s.mu.Unlock()
	p.turn = t
}

// release says a POST has handed its message over (or given up).
func (s *sseServer) release(ss *sseSession) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ss.posts--
	if ss.posts == 0 && ss.drained != nil {
		close(ss.drained)
		ss.drained = nil
	}
}

// remove takes a session out of the table (its id gets 404 from now on)
// and returns a channel closed once the POSTs that found it before have
// handed their messages over.
func (s *sseServer) remove(ss *sseSession) <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sessions[ss.id] == ss {
		delete(s.sessions, ss.id)
	}
	if ss.posts == 0 {
		return sseNoPosts
	}
	if ss.drained == nil {
		ss.drained = make(chan struct{})
	}
	return ss.drained
}

// sseNoPosts is a channel that is always closed.
var sseNoPosts = func() chan struct{} {
	ch := make(chan struct{})
	close(ch)
	return ch
}()

var sseEndpointPrefix = []byte("event: endpoint\ndata: ")

// serveSSE serves a request for one of the HTTP+SSE paths, with the
// endpoint's checks of who is calling (Host, Origin, the bearer token)
// and its limits.
func (h *Handler) serveSSE(w http.ResponseWriter, r *http.Request) {
	s := h.sse
	// As in ServeHTTP: every response is written under the no-progress
	// deadline, which the stream renews for each of its writes.
	ex := &exchange{w: w}
	now := time.Now()
	if h.opts.WriteTimeout > 0 {
		ex.ctl().SetWriteDeadline(now.Add(h.opts.WriteTimeout))
	}
	stream := r.URL.Path == s.path
	post := r.URL.Path == s.messagePath
	allow := http.MethodGet
	switch {
	case stream && post:
		allow = http.MethodGet + ", " + http.MethodPost
	case post:
		allow = http.MethodPost
	}
	if !h.checkCaller(w, r, allow, false) {
		return
	}
	switch {
	case stream && r.Method == http.MethodGet:
		ss, place := h.openSSE(w, r, ex)
		if ss == nil {
			return
		}
		defer place.leave()
		h.runSSE(ss, r)
	case post && r.Method == http.MethodPost:
		h.postSSE(w, r, ex, now)
	default:
		// Plain text, not a JSON-RPC error: a client probing this URL
		// with a Streamable HTTP POST (2025-03-26 backwards
		// compatibility) must read "not a modern server" and fall back
		// to a GET, as it does from mcp-go's and go-sdk's SSE servers.
		w.Header().Set("Allow", allow)
		http.Error(w, "Method Not Allowed: "+r.URL.Path+" takes "+allow, http.StatusMethodNotAllowed)
	}
}

// openSSE opens a session on a GET: a stream slot (MaxStreams), the
// caller's identity, a place under MaxSessions, the session's connection,
// the stream's headers and its endpoint event, and its registration with
// the handler (Shutdown, the keep-alive clock). It returns nil when it
// has answered otherwise. A function of its own, so that its frame is not
// on the stack of the long-lived GET.
//
//go:noinline
func (h *Handler) openSSE(w http.ResponseWriter, r *http.Request, ex *exchange) (*sseSession, *slot) {
	s := h.sse
	if !parseAccept(r.Header.Values("Accept")).sse {
		httpError(w, http.StatusNotAcceptable, "", jsonrpc.CodeInvalidRequest, "Not Acceptable: "+s.path+" answers with an event stream (text/event-stream)", nil)
		return nil, nil
	}
	if h.refuseIfDraining(w) {
		return nil, nil
	}
	place, ok := h.limits.enter()
	if !ok {
		h.limits.refused(refBusy, "limit", h.opts.MaxInFlight, "remote", r.RemoteAddr)
		h.unavailable(w, r, "too many requests in flight")
		return nil, nil
	}
	// The stream lasts: it takes a place among the streams, not among
	// the requests, as a listen stream does.
	if !place.toStream() {
		place.leave()
		h.limits.refused(refStreams, "limit", h.opts.MaxStreams, "remote", r.RemoteAddr)
		h.unavailable(w, r, "too many streams open")
		return nil, nil
	}
	if h.prot != nil && !h.authenticate(w, r, ex) {
		place.leave()
		return nil, nil
	}
	ss := &sseSession{srv: s, id: randomID(16), owner: ex.id.Owner(), ex: ex, broken: make(chan struct{})}
	if !s.add(ss) {
		place.leave()
		s.refused(sseRefFull, "limit", s.max, "remote", r.RemoteAddr)
		h.unavailable(w, r, "too many sessions open")
		return nil, nil
	}
	// The session outlives no GET, but its handlers are cancelled by the
	// session's end (after the grace for POSTs in flight), not by the
	// request's context: the connection's Close does it. The identity
	// bound at the GET is in every handler's context, so what keys on it
	// (tasks' owners) is stable for the session.
	ctx := withSessionID(context.WithoutCancel(r.Context()), ss.id)
	if ex.id != nil {
		ctx = auth.WithIdentity(ctx, ex.id)
	}
	ss.conn = h.conns.NewMessages(ctx, nil, ss, &sseHandler{ss: ss, h: s.backend.SessionHandler()})
	ex.h, ex.r, ex.conn, ex.canSSE = h, r, ss.conn, true
	ex.w = &sseWriter{ResponseWriter: w, ss: ss}

	// "When a client connects, the server MUST send an endpoint event":
	// first, before the stream is registered with the keep-alive clock,
	// so that nothing precedes it.
	ex.mu.Lock()
	ex.startStreamLocked()
	ex.sendLocked(nil, sseEndpointPrefix, []byte(s.endpoint), []byte(ss.id), eventSuffix) // a failure loses the stream
	ex.mu.Unlock()

	h.mu.Lock()
	if h.draining {
		// Shutdown began meanwhile and did not see this stream: it ends
		// now, with its connection.
		h.mu.Unlock()
		h.endSSE(ss, false)
		place.leave()
		return nil, nil
	}
	ex.quietSince.Store(int64(time.Since(h.epoch)))
	h.exchanges[ex] = struct{}{}
	h.armKeepAlivesLocked()
	h.running.Add(1)
	h.mu.Unlock()
	return ss, place
}

// runSSE waits for the session to end, and ends it: its GET closed (the
// client left), its stream lost (a write failed: WriteTimeout, or a
// keep-alive comment that could not be written), or its connection done
// (Shutdown ended its input).
func (h *Handler) runSSE(ss *sseSession, r *http.Request) {
	defer h.running.Done()
	lost := false
	select {
	case <-ss.conn.Done():
	case <-r.Context().Done():
		lost = true
	case <-ss.broken:
		lost = true
	}
	h.endSSE(ss, lost)
}

// endSSE ends a session: it leaves the table at once (404 from then on),
// the POSTs it had accepted hand their messages over (within
// sseCloseGrace), and its connection is closed, which cancels the
// handlers still running: nothing they send can reach the client.
func (h *Handler) endSSE(ss *sseSession, lost bool) {
	ex := ss.ex
	wait.Closed(ss.srv.remove(ss), sseCloseGrace)
	if lost {
		// Nothing more reaches the client: a write stalled on it must
		// fail now, not at WriteTimeout, and the answers of the handlers
		// being cancelled are not written. (A session that ended with
		// its connection keeps its stream, which then ends cleanly.)
		ex.unblock()
		ex.mu.Lock()
		ex.closed = true
		ex.mu.Unlock()
	}
	ss.conn.Close()
	ex.mu.Lock()
	ex.closed = true
	ex.mu.Unlock()
	h.mu.Lock()
	delete(h.exchanges, ex)
	if len(h.exchanges) == 0 && h.keepAlives != nil {
		h.keepAlives.Stop() // nothing to keep alive: no timer pending
		h.keepAlivesArmed = false
	}
	h.mu.Unlock()
}

// sseWriter is a session's ResponseWriter: it notices the first failed
// write or flush, wherever it comes from (a message, or the keep-alive
// clock's comment, whose error nobody else reads), and ends the session.
// Unwrap keeps the ResponseController's deadlines working.
type sseWriter struct {
	http.ResponseWriter
	ss *sseSession
}

func (w *sseWriter) Write(b []byte) (int, error) {
	n, err := w.ResponseWriter.Write(b)
	if err != nil {
		w.ss.lose()
	}
	return n, err
}

func (w *sseWriter) FlushError() error {
	err := http.NewResponseController(w.ResponseWriter).Flush()
	if err != nil && !errors.Is(err, http.ErrNotSupported) {
		w.ss.lose()
	}
	return err
}

func (w *sseWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// lose says the stream is lost.
func (ss *sseSession) lose() { ss.brokenOnce.Do(func() { close(ss.broken) }) }

// ssePost is one POSTed message on its way into a session.
type ssePost struct {
	ss   *sseSession
	body []byte
	msg  jsonrpc.Message
	note mcp.Routed
	// modern is set for a 2026-07-28 request (or notification): it is
	// answered -32022 instead of being pushed.
	modern    bool
	requested string

	turn   *sseTurn    // this message's place in the session's order
	prev   *sseTurn    // the one before it (nil: none); dropped once it is its turn
	handed atomic.Bool // released: the message is in the connection (or never will be)
}

// sseTurn is a message's place in the order in which its session's
// messages go into the connection: the order their POSTs were accepted
// (a POST takes its place before it is answered 202), whatever order the
// goroutines that push them run in. A client that waits for each 202
// before its next POST (resources/subscribe then unsubscribe,
// logging/setLevel twice, a request then its notifications/cancelled)
// thus has them served in the order it sent them, as on stdio.
//
// The next message goes in once this one is in and done with
// (ReceiveDecoded returned: a response delivered, a request answered,
// queued or held), or once this one's handler has started on the
// goroutine that pushed it and has run for the connection's
// InlineBudget, after which a stdio reader too would go on reading. So a
// handler that waits (a tool asking the client for sampling) never keeps
// out the answer it waits for, and one that is quick (setLevel,
// subscribe) is done before the next message of its session is served. A
// next message that needs no handler (a response, a cancellation) does
// not wait for the budget: it goes in as soon as this one's handler has
// started, its request registered, so that a cancellation always finds
// its request.
type sseTurn struct {
	started chan struct{} // closed when its handler starts on the goroutine that pushed it
	done    chan struct{} // closed when it has been handed over and ReceiveDecoded has returned
}

// handlerless reports whether a message needs no handler of the
// connection's: a response is delivered to its call, a cancellation acted
// on at once.
func (p *ssePost) handlerless() bool {
	switch p.msg.Kind {
	case jsonrpc.KindResult, jsonrpc.KindError:
		return true
	case jsonrpc.KindNotification:
		return methodOf(&p.msg) == rpc.MCPCancel.Method
	}
	return false
}

// waitTurn waits for the message before p to be in (see sseTurn).
func (s *sseServer) waitTurn(p *ssePost) {
	prev := p.prev
	p.prev = nil
	if prev == nil {
		return
	}
	select {
	case <-prev.done:
		return
	case <-prev.started:
	}
	if s.budget <= 0 || p.modern || p.handlerless() {
		return
	}
	t := time.NewTimer(s.budget)
	defer t.Stop()
	select {
	case <-prev.done:
	case <-t.C:
	}
}

// handOver says p's message is in its session's connection (or will
// never be): from then on the session's end need not wait for it. Once,
// whichever comes first: its handler starting, or ReceiveDecoded
// returning.
func (p *ssePost) handOver() {
	if p.handed.CompareAndSwap(false, true) {
		p.ss.srv.release(p.ss)
	}
}

// sseHandler is a session's connection handler: the backend's, told
// apart from it only in that it notices when the handler of the message
// being handed over starts (sseTurn).
type sseHandler struct {
	ss *sseSession
	h  rpc.Handler
}

func (sh *sseHandler) Handle(ctx context.Context, req *rpc.Request) (any, error) {
	if p := sh.ss.current.Load(); p != nil && req.Note() == any(&p.note) {
		p.handOver()
		close(p.turn.started) // once: a note is one request's
	}
	return sh.h.Handle(ctx, req)
}

// postSSE serves a POST to MessagePath: the session named by sessionId
// (bound to the caller), the body read within the endpoint's limits,
// decoded and checked once, its turn in the session's order, 202 with an
// empty body, and the message pushed into the session's connection on a
// goroutine of its own when its turn comes. 202 comes first, and the
// handler returns, because the HTTP connection must be free for the
// client's next request: a tool that asks the client for sampling waits
// for an answer that the client POSTs, perhaps on the very connection
// this POST came on. The turn comes before 202, so that a client that
// waits for it before its next POST has its messages served in the order
// it sent them.
//
//go:noinline
func (h *Handler) postSSE(w http.ResponseWriter, r *http.Request, ex *exchange, now time.Time) {
	s := h.sse
	id := r.URL.Query().Get("sessionId")
	if id == "" {
		s.refused(sseRefMissing, "remote", r.RemoteAddr)
		httpError(w, http.StatusBadRequest, "", jsonrpc.CodeInvalidRequest, "Bad Request: the sessionId query parameter is required (the endpoint event names the URL to POST to)", nil)
		return
	}
	if ct := r.Header.Get("Content-Type"); ct != "" && ct != "application/json" && !isJSONMediaType(ct) {
		httpError(w, http.StatusUnsupportedMediaType, "", jsonrpc.CodeInvalidRequest, "Unsupported Media Type: the body must be application/json", nil)
		return
	}
	if h.refuseIfDraining(w) {
		return
	}
	if r.ContentLength > h.opts.MaxBodyBytes {
		h.tooLarge(w, r)
		return
	}
	place, ok := h.limits.enter()
	if !ok {
		h.limits.refused(refBusy, "limit", h.opts.MaxInFlight, "remote", r.RemoteAddr)
		h.unavailable(w, r, "too many requests in flight")
		return
	}
	if h.prot != nil && !h.authenticate(w, r, ex) {
		place.leave()
		return
	}
	ss, full := s.lookup(id, ex.id.Owner())
	switch {
	case ss == nil:
		place.leave()
		s.refused(sseRefUnknown, "remote", r.RemoteAddr)
		httpError(w, http.StatusNotFound, "", jsonrpc.CodeInvalidRequest, "Not Found: no such session (it ended, or never was): open a new one with a GET on "+s.path, nil)
		return
	case full:
		place.leave()
		s.refused(sseRefQueue, "limit", sseMaxPending, "remote", r.RemoteAddr)
		h.unavailable(w, r, "too many messages of this session on their way in")
		return
	}
	var reserved int64
	p := &ssePost{ss: ss}
	if !h.admitSSE(w, r, ex, now, p, &reserved) {
		s.release(ss)
		h.limits.release(reserved)
		place.leave()
		return
	}
	s.enqueue(p)
	// "202 with an empty body", complete (Content-Length: 0) and flushed
	// before the message is handled, so that the client has it before
	// anything the message causes arrives on the stream.
	w.Header()["Content-Length"] = []string{"0"}
	w.WriteHeader(http.StatusAccepted)
	ex.ctl().Flush()
	go h.pushSSE(p, place, reserved)
}

// admitSSE reads and routes a POSTed message and registers it with
// Shutdown; it reports whether the message goes on to its session, and
// has answered otherwise.
func (h *Handler) admitSSE(w http.ResponseWriter, r *http.Request, ex *exchange, now time.Time, p *ssePost, reserved *int64) bool {
	var ok bool
	if p.body, ok = h.readRequest(w, r, ex, now, reserved); !ok || !h.routeSSE(w, r, ex, p) {
		return false
	}
	h.mu.Lock()
	draining := h.draining
	if !draining {
		h.running.Add(1) // Shutdown waits for the message's handler
	}
	h.mu.Unlock()
	if draining {
		w.Header().Set("Retry-After", "1")
		httpError(w, http.StatusServiceUnavailable, "", jsonrpc.CodeInternalError, "Service Unavailable: the server is shutting down", nil)
	}
	return !draining
}

// routeSSE is the route of a POSTed message: decoded once, batches
// refused, params parsed once, the era decided (a modern request is
// marked for -32022), the mirroring headers a client sent and the scopes
// checked. It reports whether the message goes on to the session.
func (h *Handler) routeSSE(w http.ResponseWriter, r *http.Request, ex *exchange, p *ssePost) bool {
	var err error
	if p.msg, err = jsonrpc.Decode(p.body, nil); err != nil {
		var de *jsonrpc.DecodeError
		errors.As(err, &de)
		httpError(w, http.StatusBadRequest, jsonrpc.ID(de.ID), de.Code, de.Error(), nil)
		return false
	}
	msg := &p.msg
	switch msg.Kind {
	case jsonrpc.KindBatch:
		httpError(w, http.StatusBadRequest, "", jsonrpc.CodeInvalidRequest, "Invalid Request: the body must be a single JSON-RPC message, not a batch", nil)
		return false
	case jsonrpc.KindResult, jsonrpc.KindError:
		// The client's answer to a request of the server's: the
		// session's connection made that request and matches its id.
		return true
	}
	id := jsonrpc.ID(msg.ID)
	params := &p.note.Params
	if !parseParams(w, id, msg.Params, params) {
		return false
	}
	headerVersion, hasHeader := headerValue(r.Header, mcp.HeaderProtocolVersion)
	if params.Meta != nil && len(params.Meta.ProtocolVersion) > 0 {
		p.modern = true
		if b, ok := jsonrpc.StringBytes(params.Meta.ProtocolVersion); ok {
			p.requested = string(b)
		}
	} else if hasHeader && mcp.IsModern(headerVersion) {
		p.modern, p.requested = true, headerVersion
	}
	if p.modern {
		// Nothing of it is served: no header or scope says anything.
		return true
	}
	method := methodOf(msg)
	bodyName := nameOf(method, params, msg.Params)
	if e := h.checkHeaders(r.Header, false, method, hasHeader, headerVersion, false, "", bodyName, params.Arguments); e != nil {
		httpError(w, http.StatusBadRequest, id, e.Code, e.Message, nil)
		return false
	}
	if h.prot != nil && !h.authorizeScopes(w, r, ex, id, method, bodyName) {
		return false
	}
	// No version: the session's, the one its initialize negotiated (an
	// HTTP+SSE client sends no MCP-Protocol-Version header to name one).
	p.note.Era = mcp.Legacy
	return true
}

// pushSSE hands a POSTed message to its session when its turn comes
// (sseTurn), on a goroutine of its own that holds the POST's place among
// the requests in flight and its bytes of the budget until the message's
// handler returns: the same bounds as a Streamable HTTP request's, which
// runs on its POST's goroutine. The POST stays among the session's POSTs
// in flight (release) until the message is in the connection, so that a
// session ending meanwhile waits for it (within sseCloseGrace) before its
// connection closes: a last notifications/cancelled, or a last answer to
// a server request, is still heard.
func (h *Handler) pushSSE(p *ssePost, place *slot, reserved int64) {
	defer h.running.Done()
	defer place.leave()
	defer h.limits.release(reserved)
	ss := p.ss
	ss.srv.waitTurn(p)
	defer close(p.turn.done)
	defer p.handOver()
	if p.modern {
		if p.msg.Kind != jsonrpc.KindRequest {
			return
		}
		// A 2026-07-28 client probing (go-sdk's client sends
		// server/discover first): the error it reads as "not modern",
		// naming what this session speaks, so that it falls back to
		// initialize.
		ss.srv.modern.Add(1)
		ss.send(jsonrpc.AppendErrorResponse(nil, jsonrpc.ID(p.msg.ID), jsonrpc.NewError(mcp.CodeUnsupportedProtocolVersion,
			"Unsupported protocol version: an HTTP+SSE (2024-11-05) session speaks only the initialize versions",
			map[string]any{"supported": mcp.LegacyVersions, "requested": p.requested})))
		return
	}
	var note any
	if p.msg.Kind == jsonrpc.KindRequest || p.msg.Kind == jsonrpc.KindNotification {
		note = &p.note
	}
	ss.current.Store(p)
	err := ss.conn.ReceiveDecoded(p.body, &p.msg, note)
	ss.current.CompareAndSwap(p, nil)
	p.handOver()
	if err != nil && p.msg.Kind == jsonrpc.KindRequest {
		// The session is ending (its GET closed, or Shutdown): the
		// request is answered, on the stream if it is still there.
		ss.send(jsonrpc.AppendErrorResponse(nil, jsonrpc.ID(p.msg.ID), jsonrpc.NewError(jsonrpc.CodeInternalError,
			"Internal error: the session is ending", nil)))
	}
}
