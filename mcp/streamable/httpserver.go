package streamable

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/agentwire/agentwire/mcp"
	"io"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/agentwire/agentwire/jsonrpc"
	"github.com/agentwire/agentwire/rpc"
)

// Defaults of Options.
const (
	DefaultMaxBodyBytes = 4 << 20
	DefaultKeepAlive    = 15 * time.Second
	DefaultBodyTimeout  = 30 * time.Second
)

// canonicalProtocolVersion is HeaderProtocolVersion as net/http keys it.
const canonicalProtocolVersion = "Mcp-Protocol-Version"

// legacyDefaultVersion is what a request without MCP-Protocol-Version is
// taken to speak: "the server SHOULD assume protocol version 2025-03-26"
// (2025-11-25 transports, Protocol Version Header).
const legacyDefaultVersion = "2025-03-26"

// Options configures a Streamable HTTP endpoint. The zero value (or nil)
// serves /mcp to any client that sends no Origin or a loopback one, without
// authentication, with the limits below at their defaults: bodies up to
// 4 MiB read within 30 s, 256 requests and 16 MiB of request bodies in
// flight, writes that must progress within 30 s, a keep-alive comment
// every 15 s on event streams and, through Serve, 1024 connections that
// must send their headers within 10 s and their next request within 30 s.
type Options struct {
	// Path is the endpoint's path (as the handler sees it: after any
	// http.StripPrefix); requests for any other path get 404. Default
	// "/mcp".
	Path string
	// AllowedOrigins lists the origins ("https://app.example.com") a
	// browser page may call from, besides loopback origins. A request whose
	// Origin header is present and not allowed gets 403: "Servers MUST
	// validate the Origin header on all incoming connections to prevent DNS
	// rebinding attacks" (2026-07-28 transports, Security). "*" allows any.
	AllowedOrigins []string
	// AllowedHosts, when not empty, lists the host names (without port)
	// the Host header may name; others get 403. A server bound to loopback
	// should list only loopback names: a rebinding page reaches it with its
	// own host name.
	AllowedHosts []string
	// Token, when set, is the bearer token every request must carry
	// (Authorization: Bearer TOKEN); others get 401 with WWW-Authenticate.
	// 401, 403 and 413 close the connection, so that a client without the
	// token cannot keep one open. It is the simplest protection: Token and
	// Protect are exclusive (NewHandler panics when both are set).
	Token string
	// ResourceMetadata is the URL of the RFC 9728 protected resource
	// metadata, named in WWW-Authenticate when set. With Protect it
	// replaces the URL of the handler's own document in challenges (for a
	// document served elsewhere, say behind a proxy that maps paths).
	ResourceMetadata string
	// Protect, when set, makes the endpoint an OAuth 2.1 resource server:
	// every POST must carry a bearer token that Protect.Verifier accepts
	// (401 without one or with a refused one, 503 when the verifier
	// fails), with the scopes its method and tool require (403), and the
	// handler serves the protected resource metadata document (see
	// Protection and docs/auth.md). The verified identity is in the
	// context of the request's handler (auth.IdentityFrom). NewHandler
	// panics when Protect has no Verifier or no Metadata.Resource. Nil:
	// no protection but Token.
	Protect *Protection
	// MaxBodyBytes caps a request body; larger ones get 413 (before they
	// are read, when Content-Length says so). Default 4 MiB.
	MaxBodyBytes int64
	// BodyTimeout bounds the reading of a request body. Default 30 s.
	BodyTimeout time.Duration
	// KeepAlive is how long a stream may be quiet before it gets an SSE
	// comment, and how long a JSON answer may take before the response
	// becomes an event stream so that it can carry them (proxies end
	// silent connections); each happens within a quarter of KeepAlive
	// after that. Default 15 s; negative disables both.
	KeepAlive time.Duration

	// MaxInFlight bounds the requests being served at once, across all
	// clients (each HTTP request has its own connection, so the
	// per-connection handler bound does not apply across requests).
	// Beyond it a request gets 503 with Retry-After: 1 at once, before its
	// body is read: waiting would hold the client's connection without
	// bounding anything. Default Conn.MaxConcurrentRequests, or 256.
	MaxInFlight int
	// MaxStreams bounds the subscriptions/listen streams open at once,
	// across all clients, and the GET streams of legacy sessions
	// (Sessions); a stream leaves MaxInFlight when it opens, so
	// that long-lived streams cannot starve ordinary requests. Beyond it
	// a listen request gets 503 with Retry-After: 1. Default
	// Conn.MaxStreams, or 256.
	MaxStreams int
	// MaxBufferedBytes bounds the request bytes held by the requests in
	// flight, across all clients. A body is charged from the moment it is
	// admitted (its Content-Length, or what has arrived of a body of
	// unknown length) until its response is written, and an answer while
	// it is being written; a body that does not fit gets 503 with
	// Retry-After: 1, before it is read when its length is known. Serving
	// a request costs a few times its body (the handler's decoded
	// arguments, the encoded answer, which may be larger still: "<" is
	// encoded as \u003c), so this is the lever on the server's peak
	// memory. The default, 16 MiB (never less than MaxBodyBytes), keeps
	// 200 concurrent 4 MiB calls under about 250 MiB of resident memory.
	MaxBufferedBytes int64
	// WriteTimeout bounds each write to a client: a write (of at most 64
	// KiB) that makes no progress for this long fails, and the request is
	// cancelled. It is a no-progress deadline, renewed for every write,
	// not a bound on the whole response: an event stream may last as long
	// as its call, and a slow reader is served, but a client that stops
	// reading cannot pin the response's memory and its connection
	// forever. Default 30 s; negative disables it.
	WriteTimeout time.Duration

	// The connection limits below are applied by Serve (an http.Server of
	// one's own has its own settings).

	// MaxConns bounds the connections open at once. A connection over the
	// cap makes room by closing the one that has waited longest without a
	// request in progress (one that has sent nothing yet first); when
	// every connection is serving a request it is answered 503 and closed.
	// Default 1024, or half the process's open-file limit when that is
	// lower, so that the process never runs out of descriptors; negative
	// means no cap.
	MaxConns int
	// ReadHeaderTimeout bounds the wait for a request's headers, the first
	// request's included: a connection that sends nothing is closed after
	// it. Default 10 s, or IdleTimeout when that is shorter; negative
	// disables it.
	ReadHeaderTimeout time.Duration
	// IdleTimeout is how long a connection may wait for its next request
	// after a response. Default 30 s; negative disables it.
	IdleTimeout time.Duration
	// MaxHeaderBytes bounds a request's headers (431 beyond). Default
	// 64 KiB.
	MaxHeaderBytes int

	// Sessions, when set, serves legacy clients in sessions
	// (Mcp-Session-Id minted on initialize, the GET stream, DELETE,
	// resumption with Last-Event-ID, idle expiry and MaxSessions; see
	// SessionOptions and the package doc). Modern requests stay
	// stateless. Nil: legacy clients are served statelessly, and GET and
	// DELETE get 405. The backend must be a SessionBackend (NewHandler
	// panics otherwise).
	Sessions *SessionOptions
	// SSE, when set, also serves the 2024-11-05 HTTP+SSE transport (see
	// SSEOptions). The backend must be a SessionBackend.
	SSE *SSEOptions

	// Conn is the base of every exchange's connection options (Logger,
	// ShutdownTimeout, ...).
	Conn *rpc.Options
	// Logger receives diagnostics, and one line per burst of refusals of
	// each limit (see Stats). Nil means slog.Default().
	Logger *slog.Logger
}

// Backend is what an HTTP endpoint serves: a server.Server, or a
// bridge.Bridge to a stdio server. The handler calls it on the request's
// goroutine; a backend serves any number of requests at once.
type Backend interface {
	// ExchangeHandler returns the handler of one HTTP request, whose era,
	// version and parsed params the route has put in r (they reach the
	// handler again as the rpc.Request's Note, mcp.RoutedOf): modern, or
	// legacy at its version, served statelessly as if initialize had
	// happened. The handler lives as long as the request.
	ExchangeHandler(r *mcp.Routed) rpc.Handler
	// ExchangeOptions returns the options of every exchange's connection
	// on top of base: Options.Conn, with the endpoint's logger
	// (Options.Logger, or slog.Default()) as base.Logger, which a
	// backend may keep for its own diagnostics (the connections log to
	// Conn.Logger when it is set). It is called once, by NewHandler.
	ExchangeOptions(base *rpc.Options) *rpc.Options
	// Eras is which eras the backend serves.
	Eras() mcp.Eras
	// HeaderParams maps a tool's arguments to the Mcp-Param- headers its
	// input schema declares (x-mcp-header); nil when it declares none.
	HeaderParams(tool string) map[string]string
}

// Handler serves MCP over Streamable HTTP on one endpoint: every
// message is a POST; a request is answered with one JSON object, or with an
// event stream when it asked for progress, when the handler sends
// notifications, when it outlives KeepAlive, or when it is a
// subscriptions/listen stream. Legacy (2025-03-26 .. 2025-11-25) clients
// are served too: statelessly by default (initialize is answered, no
// Mcp-Session-Id is minted, every later request is served at the version
// its MCP-Protocol-Version header names, and GET and DELETE get 405), or
// in sessions with Options.Sessions (Mcp-Session-Id, the GET stream,
// resumption, DELETE: httpsession.go).
//
// A POST goes through three steps, a file each: the gate (this file:
// path, host, origin, authorization, method, media types, the limits, the
// body), the route (httproute.go: decoded once, params parsed once, the
// era decided once, headers checked) and the exchange (httpexchange.go:
// served on a connection of its own over the rpc message seam, on the
// request's goroutine, so handlers get the same guarantees as on stdio —
// panics answered, cancellation, W8 order — and the client closing the
// response cancels the handler: "closing the SSE response stream MUST be
// treated as cancellation").
type Handler struct {
	backend Backend
	opts    Options
	log     *slog.Logger
	eras    mcp.Eras      // the backend's, read once
	conns   *rpc.Prepared // every exchange's connection options, resolved once

	limits httpLimits
	prot   *protection // Options.Protect resolved; nil when unprotected

	// epoch is when the handler was made: times kept in atomics are
	// offsets from it (monotonic).
	epoch time.Time

	mu        sync.Mutex
	draining  bool
	exchanges map[*exchange]struct{}
	// keepAlives is the one keep-alive clock of every open exchange
	// (armKeepAlivesLocked); made on first use, pending while armed.
	keepAlives      *time.Timer
	keepAlivesArmed bool
	servers         []*http.Server // of Serve
	listeners       []*limitListener
	running         sync.WaitGroup // exchanges and their connections

	// The server's own requests to legacy clients, by the id they were
	// sent with: their answers arrive as POSTs of their own.
	asked sync.Map // string id -> askedRequest

	sse *sseServer // Options.SSE resolved (httpsse.go); nil when off

	sess *sessionTable // Options.Sessions resolved (httpsession.go); nil when off
}

// callerOf identifies who sent a request, as far as HTTP can tell: a
// digest of its Authorization header and remote address.
func callerOf(r *http.Request) string {
	h := sha256.New()
	io.WriteString(h, r.Header.Get("Authorization"))
	h.Write([]byte{0})
	host, _, _ := net.SplitHostPort(r.RemoteAddr)
	io.WriteString(h, host)
	return string(h.Sum(nil))
}

type askedRequest struct {
	ex     *exchange
	id     []byte // the id the handler's connection used
	caller string // who asked: a digest of the request's credentials
}

// NewHandler returns a Streamable HTTP endpoint for b.
func NewHandler(b Backend, opts *Options) *Handler {
	h := &Handler{backend: b, exchanges: map[*exchange]struct{}{}, epoch: time.Now()}
	if opts != nil {
		h.opts = *opts
	}
	if h.opts.MaxBodyBytes <= 0 {
		h.opts.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if h.opts.KeepAlive == 0 {
		h.opts.KeepAlive = DefaultKeepAlive
	}
	if h.opts.BodyTimeout <= 0 {
		h.opts.BodyTimeout = DefaultBodyTimeout
	}
	if h.opts.Path == "" {
		h.opts.Path = DefaultPath
	}
	if h.opts.WriteTimeout == 0 {
		h.opts.WriteTimeout = DefaultWriteTimeout
	}
	if h.opts.MaxInFlight <= 0 {
		h.opts.MaxInFlight = DefaultMaxInFlight
		if h.opts.Conn != nil && h.opts.Conn.MaxConcurrentRequests > 0 {
			h.opts.MaxInFlight = h.opts.Conn.MaxConcurrentRequests
		}
	}
	if h.opts.MaxStreams <= 0 {
		h.opts.MaxStreams = DefaultMaxStreams
		if h.opts.Conn != nil && h.opts.Conn.MaxStreams > 0 {
			h.opts.MaxStreams = h.opts.Conn.MaxStreams
		}
	}
	if h.opts.MaxBufferedBytes <= 0 {
		h.opts.MaxBufferedBytes = DefaultMaxBufferedBytes
	}
	// A body of the largest size must fit, with its newline.
	h.opts.MaxBufferedBytes = max(h.opts.MaxBufferedBytes, h.opts.MaxBodyBytes+1)
	if h.opts.IdleTimeout == 0 {
		h.opts.IdleTimeout = DefaultIdleTimeout
	}
	if h.opts.ReadHeaderTimeout == 0 {
		h.opts.ReadHeaderTimeout = DefaultReadHeaderTimeout
		if h.opts.IdleTimeout > 0 {
			h.opts.ReadHeaderTimeout = min(h.opts.ReadHeaderTimeout, h.opts.IdleTimeout)
		}
	}
	if h.opts.MaxHeaderBytes <= 0 {
		h.opts.MaxHeaderBytes = DefaultMaxHeaderBytes
	}
	maxConns := h.opts.MaxConns
	if maxConns == 0 {
		maxConns = DefaultMaxConns
		if lim := openFileLimit(); lim > 0 {
			maxConns = max(1, min(maxConns, lim/2))
		}
	}
	maxConns = max(maxConns, 0) // negative: no cap
	h.log = h.opts.Logger
	if h.log == nil {
		h.log = slog.Default()
	}
	h.limits.init(h.log, maxConns, h.opts.MaxInFlight, h.opts.MaxStreams, h.opts.MaxBufferedBytes, h.opts.ReadHeaderTimeout)
	h.eras = b.Eras()
	if h.opts.Protect != nil {
		h.prot = newProtection(h.opts.Protect, &h.opts, b)
	}
	var base rpc.Options
	if h.opts.Conn != nil {
		base = *h.opts.Conn
	}
	base.Logger = h.log // the endpoint's, for the backend's own diagnostics
	o := *b.ExchangeOptions(&base)
	if h.opts.Conn != nil && h.opts.Conn.Logger != nil {
		o.Logger = h.opts.Conn.Logger
	}
	o.MaxMessageBytes = int(h.opts.MaxBodyBytes) + 1
	if o.Logger == nil {
		o.Logger = h.log
	}
	h.conns = rpc.Prepare(&o)
	if h.opts.Sessions != nil {
		h.sess = newSessionTable(h, b, h.opts.Sessions)
	}
	if h.opts.SSE != nil {
		h.sse = newSSE(h)
	}
	return h
}

// Shutdown stops taking requests (503), ends subscriptions/listen streams
// with their final result, and waits for running requests to be answered.
// When ctx ends first, the remaining handlers are cancelled and Shutdown
// returns ctx's error once they have returned (each gets the connection's
// ShutdownTimeout). Call it after http.Server.Shutdown has stopped the
// listeners, or instead of waiting for it: http.Server.Shutdown itself
// waits for open event streams forever.
//
// The servers of Serve are shut down too: their listeners close at once,
// connections that have not sent a request are closed, idle ones as
// soon as their response is written, and Serve returns
// http.ErrServerClosed. When ctx ends first, their connections are closed.
func (h *Handler) Shutdown(ctx context.Context) error {
	h.mu.Lock()
	h.draining = true
	servers, listeners := h.servers, h.listeners
	h.servers, h.listeners = nil, nil
	for ex := range h.exchanges {
		if ex.conn != nil {
			ex.conn.EndInput() // listen streams finish, others get the grace
		}
	}
	h.mu.Unlock()
	if h.sess != nil {
		h.sess.shutdownSessions()
	}
	for _, ln := range listeners {
		ln.Close()
	}
	if len(listeners) > 0 {
		// Nothing new arrives; connections that have sent nothing
		// would keep http.Server.Shutdown waiting for 5 s.
		h.limits.conns.closeFresh()
	}
	var stopped sync.WaitGroup
	for _, srv := range servers {
		stopped.Go(func() {
			if srv.Shutdown(ctx) != nil {
				srv.Close()
			}
		})
	}
	defer func() {
		stopped.Wait()
		h.limits.refusers.Wait()
	}()
	done := make(chan struct{})
	go func() {
		h.running.Wait()
		if h.sess != nil {
			h.sess.waitSessions(ctx) // their handlers' grace
		}
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
	}
	h.mu.Lock()
	for ex := range h.exchanges {
		ex.abort()
	}
	h.mu.Unlock()
	if h.sess != nil {
		h.sess.abortSessions() // their handlers run on the POSTs' goroutines
	}
	<-done
	return ctx.Err()
}

// httpError writes a JSON-RPC error as the whole response.
func httpError(w http.ResponseWriter, status int, id jsonrpc.ID, code int64, msg string, data any) {
	e := jsonrpc.NewError(code, msg, data)
	body := jsonrpc.AppendErrorResponse(nil, id, e)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(append(body, '\n'))
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h.sse != nil && h.sse.owns(r.URL.Path) {
		h.serveSSE(w, r) // the 2024-11-05 HTTP+SSE transport (httpsse.go)
		return
	}
	// The exchange is made now: its deadlines are set from here on.
	ex := &exchange{w: w}
	now := h.startWriting(ex)
	// Each step is a function of its own whose frame is gone before the
	// next runs: a listen stream lives on this goroutine's stack for as
	// long as it is open, and a stack that stays within its first 8 KiB
	// is half the memory of one that grew. (TestAnIdleListenStreamKeepsASmallStack
	// in cmd/agentwire holds it there.)
	accept, ok := h.gate(w, r)
	if !ok {
		return
	}
	place, ok := h.limits.enter() // inlined: the place stays on this stack
	if !ok {
		h.refuseBusy(w, r)
		return
	}
	defer place.leave()
	if h.prot != nil && !h.authenticate(w, r, ex) {
		return
	}
	if r.Method != http.MethodPost {
		// GET or DELETE, which the gate lets through with sessions only.
		h.serveSessionMethod(w, r, ex, place)
		return
	}
	var reserved int64
	defer func() { h.limits.release(reserved) }()
	body, ok := h.readRequest(w, r, ex, now, &reserved)
	if !ok {
		return
	}
	ok = h.route(w, r, ex, body, accept, place)
	if ex.x != nil && (ex.x.sess != nil || ex.x.mint) {
		// A legacy request in a session (httpsession.go).
		if ok {
			h.sessionExchange(w, r, body, ex, accept)
		}
		h.leaveSession(ex)
		return
	}
	if ok {
		h.exchange(w, r, body, ex, accept)
	}
}

// startWriting puts the response under the no-progress deadline and
// returns the time the request is served from. Every response is written
// under that deadline; the exchange renews it for each write of a longer
// one. The last one stays for net/http's final flush, after which
// net/http lifts it. The clock is read once per request.
//
//go:noinline
func (h *Handler) startWriting(ex *exchange) time.Time {
	now := time.Now()
	if h.opts.WriteTimeout > 0 {
		ex.ctl().SetWriteDeadline(now.Add(h.opts.WriteTimeout))
	}
	return now
}

// refuseBusy answers a request that found every place in flight taken.
// It is out of ServeHTTP's line, whose frame a listen stream keeps.
//
//go:noinline
func (h *Handler) refuseBusy(w http.ResponseWriter, r *http.Request) {
	h.limits.refused(refBusy, "limit", h.opts.MaxInFlight, "remote", r.RemoteAddr)
	h.unavailable(w, r, "too many requests in flight")
}

// gate checks what can be checked before a request is admitted: path,
// host, origin (and CORS preflights), authorization, method, media types,
// the server draining, the declared length.
//
//go:noinline
func (h *Handler) gate(w http.ResponseWriter, r *http.Request) (acceptable, bool) {
	if r.URL.Path != h.opts.Path {
		if h.prot != nil && h.prot.serveMetadata(w, r) {
			return acceptable{}, false
		}
		h.limits.refused(refNotFound, "path", r.URL.Path)
		httpError(w, http.StatusNotFound, "", jsonrpc.CodeInvalidRequest, "Not Found: the MCP endpoint is "+h.opts.Path, nil)
		return acceptable{}, false
	}
	if !h.checkCaller(w, r, h.allowedMethods(), h.sess != nil) {
		return acceptable{}, false
	}
	if r.Method != http.MethodPost {
		return h.gateSessionMethod(w, r)
	}
	if ct := r.Header.Get("Content-Type"); ct != "" {
		if ct != "application/json" && !isJSONMediaType(ct) {
			httpError(w, http.StatusUnsupportedMediaType, "", jsonrpc.CodeInvalidRequest, "Unsupported Media Type: the body must be application/json", nil)
			return acceptable{}, false
		}
	}
	accept := parseAccept(r.Header.Values("Accept"))
	if !accept.json && !accept.sse {
		httpError(w, http.StatusNotAcceptable, "", jsonrpc.CodeInvalidRequest, "Not Acceptable: the client must accept application/json and text/event-stream", nil)
		return acceptable{}, false
	}
	if h.refuseIfDraining(w) {
		return acceptable{}, false
	}
	if r.ContentLength > h.opts.MaxBodyBytes {
		h.tooLarge(w, r)
		return acceptable{}, false
	}
	return accept, true
}

// checkCaller is the gate's check of who is calling, for the endpoint
// and the HTTP+SSE paths alike: Host and Origin (403, so that a
// DNS-rebinding page reaches nothing), CORS for an allowed origin (its
// preflight answered with methods, before authentication: preflights
// carry no credentials; exposeSession adds Mcp-Session-Id to what a page
// may send and read), and the bearer token (401; with Protect only its
// presence here, verified later). It reports whether the request goes on.
func (h *Handler) checkCaller(w http.ResponseWriter, r *http.Request, methods string, exposeSession bool) bool {
	if !h.hostAllowed(r.Host) {
		h.limits.refused(refForbidden, "host", r.Host, "remote", r.RemoteAddr)
		closeAfter(w, r, discardAuthBytes, discardTimeout)
		httpError(w, http.StatusForbidden, "", jsonrpc.CodeInvalidRequest, "Forbidden: host "+r.Host+" is not allowed", nil)
		return false
	}
	origin := r.Header.Get("Origin")
	if origin != "" && !h.originAllowed(origin) {
		h.limits.refused(refForbidden, "origin", origin, "remote", r.RemoteAddr)
		closeAfter(w, r, discardAuthBytes, discardTimeout)
		httpError(w, http.StatusForbidden, "", jsonrpc.CodeInvalidRequest, "Forbidden: origin "+origin+" is not allowed", nil)
		return false
	}
	if origin != "" {
		hdr := w.Header()
		hdr.Set("Access-Control-Allow-Origin", origin)
		hdr.Add("Vary", "Origin")
		if exposeSession {
			hdr.Set("Access-Control-Expose-Headers", "WWW-Authenticate, "+mcp.HeaderSessionID)
		} else {
			hdr.Set("Access-Control-Expose-Headers", "WWW-Authenticate")
		}
		if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" {
			hdr.Set("Access-Control-Allow-Methods", methods)
			allowed := corsHeaders(r.Header.Get("Access-Control-Request-Headers"))
			if exposeSession {
				allowed += ", " + mcp.HeaderSessionID
			}
			hdr.Set("Access-Control-Allow-Headers", allowed)
			hdr.Set("Access-Control-Max-Age", "600")
			w.WriteHeader(http.StatusNoContent)
			return false
		}
	}
	if h.prot != nil {
		if _, ok := bearerToken(r); !ok {
			h.limits.refused(refUnauthorized, "remote", r.RemoteAddr)
			h.unauthorized(w, r, h.prot.challenge401)
			return false
		}
		return true
	}
	if !h.authorized(r) {
		h.limits.refused(refUnauthorized, "remote", r.RemoteAddr)
		challenge := `Bearer realm="mcp"`
		if r.Header.Get("Authorization") != "" {
			challenge += `, error="invalid_token"`
		}
		if h.opts.ResourceMetadata != "" {
			challenge += `, resource_metadata="` + h.opts.ResourceMetadata + `"`
		}
		w.Header().Set("WWW-Authenticate", challenge)
		// A client without the token keeps no connection open.
		closeAfter(w, r, discardAuthBytes, discardTimeout)
		httpError(w, http.StatusUnauthorized, "", jsonrpc.CodeInvalidRequest, "Unauthorized: a valid bearer token is required", nil)
		return false
	}
	return true
}

// refuseIfDraining answers 503 once Shutdown has begun.
func (h *Handler) refuseIfDraining(w http.ResponseWriter) bool {
	h.mu.Lock()
	draining := h.draining
	h.mu.Unlock()
	if draining {
		w.Header().Set("Retry-After", "1")
		httpError(w, http.StatusServiceUnavailable, "", jsonrpc.CodeInternalError, "Service Unavailable: the server is shutting down", nil)
	}
	return draining
}

// allowedMethods is the Allow header of the endpoint.
func (h *Handler) allowedMethods() string {
	if h.sess != nil {
		return "GET, POST, DELETE"
	}
	return http.MethodPost
}

// gateSessionMethod is the gate of a request that is not a POST: with
// sessions, a GET (which must take an event stream) or a DELETE goes on,
// without a body; anything else gets 405.
func (h *Handler) gateSessionMethod(w http.ResponseWriter, r *http.Request) (acceptable, bool) {
	if h.sess == nil || (r.Method != http.MethodGet && r.Method != http.MethodDelete) {
		// 2026-07-28: "GET stream endpoint and protocol sessions removed";
		// legacy GET/DELETE traffic gets 405 unless sessions are on.
		w.Header().Set("Allow", h.allowedMethods())
		what := "this endpoint takes POST only"
		if h.sess != nil {
			what = "this endpoint takes GET, POST and DELETE"
		}
		httpError(w, http.StatusMethodNotAllowed, "", jsonrpc.CodeInvalidRequest, "Method Not Allowed: "+what, nil)
		return acceptable{}, false
	}
	accept := parseAccept(r.Header.Values("Accept"))
	if r.Method == http.MethodGet && !accept.sse {
		httpError(w, http.StatusNotAcceptable, "", jsonrpc.CodeInvalidRequest, "Not Acceptable: the client must accept text/event-stream", nil)
		return acceptable{}, false
	}
	h.mu.Lock()
	draining := h.draining
	h.mu.Unlock()
	if draining {
		w.Header().Set("Retry-After", "1")
		httpError(w, http.StatusServiceUnavailable, "", jsonrpc.CodeInternalError, "Service Unavailable: the server is shutting down", nil)
		return acceptable{}, false
	}
	return accept, true
}

// readRequest reads the body of an admitted request, charged to the
// buffered-bytes budget (reserved), within BodyTimeout.
//
//go:noinline
func (h *Handler) readRequest(w http.ResponseWriter, r *http.Request, ex *exchange, now time.Time, reserved *int64) ([]byte, bool) {
	// The body must arrive within BodyTimeout (a client trickling it in
	// would hold the request forever); the deadline is lifted afterwards,
	// as an event stream may last as long as its call. http.Server's
	// ReadTimeout cannot do this: it would cut long streams too.
	ex.ctl().SetReadDeadline(now.Add(h.opts.BodyTimeout))
	var src io.Reader = r.Body
	if r.ContentLength < 0 {
		src = http.MaxBytesReader(w, r.Body, h.opts.MaxBodyBytes)
	}
	body, err := h.limits.readBody(src, r.ContentLength, h.opts.MaxBodyBytes, reserved)
	if err == nil {
		ex.ctl().SetReadDeadline(time.Time{})
	} else if !errors.Is(err, errOverBudget) {
		// The connection is not reused; the deadline stays so that
		// net/http's attempt to drain the rest of the body ends too.
		w.Header().Set("Connection", "close")
	}
	if err != nil {
		var tooBig *http.MaxBytesError
		switch {
		case errors.As(err, &tooBig):
			h.tooLarge(w, r)
		case errors.Is(err, errOverBudget):
			h.limits.refused(refOverBudget, "limit", h.opts.MaxBufferedBytes, "remote", r.RemoteAddr)
			h.unavailable(w, r, "too many request bytes in flight")
		default:
			httpError(w, http.StatusBadRequest, "", jsonrpc.CodeParseError, "Bad Request: reading the body: "+err.Error(), nil)
		}
		return nil, false
	}
	return body, true
}

// tooLarge answers 413 and closes the connection: the rest of the body is
// not read.
func (h *Handler) tooLarge(w http.ResponseWriter, r *http.Request) {
	h.limits.refused(refTooLarge, "limit", h.opts.MaxBodyBytes, "remote", r.RemoteAddr)
	closeAfter(w, r, 0, 0)
	httpError(w, http.StatusRequestEntityTooLarge, "", jsonrpc.CodeInvalidRequest,
		fmt.Sprintf("Payload Too Large: the body exceeds %d bytes", h.opts.MaxBodyBytes), nil)
}

// unavailable answers 503 for a request over a server-wide limit; the
// client may retry in a second, on a new connection.
func (h *Handler) unavailable(w http.ResponseWriter, r *http.Request, why string) {
	w.Header().Set("Retry-After", "1")
	// A refused body is dropped for as long as an admitted one could take
	// to arrive: under a burst of large requests a client may still be
	// sending well after the refusal, and cutting it off resets the
	// answer away.
	closeAfter(w, r, h.opts.MaxBodyBytes, h.opts.BodyTimeout)
	httpError(w, http.StatusServiceUnavailable, "", jsonrpc.CodeInternalError, "Service Unavailable: "+why, nil)
}

// closeAfter makes the connection close after this response without
// losing it to a reset: closing a socket with unread input sends RST, and
// the client's TCP stack then drops the answer it has not read yet. So up
// to limit bytes of what remains of the body are read and dropped first
// (within timeout); net/http closes a connection with more unread only
// after a FIN and a pause (its reset avoidance). A client waiting for 100
// Continue has sent no body, and none is asked for.
func closeAfter(w http.ResponseWriter, r *http.Request, limit int64, timeout time.Duration) {
	if r.ContentLength != 0 && r.Body != nil && !strings.EqualFold(r.Header.Get("Expect"), "100-continue") {
		if r.ContentLength <= limit {
			http.NewResponseController(w).SetReadDeadline(time.Now().Add(timeout))
			io.Copy(io.Discard, io.LimitReader(r.Body, limit))
		}
		r.Body.Close()
	}
	w.Header().Set("Connection", "close")
}

// checkHeaders enforces "Headers mirroring the body": the server "MUST
// reject" a mismatch, a missing required standard header or invalid
// characters with 400 and HeaderMismatch (2026-07-28 transports, Server
// Validation). A legacy request is not required to carry them, but the
// ones it carries are checked all the same.
func (h *Handler) checkHeaders(hdr http.Header, modern bool, method string, hasHeader bool, headerVersion string, hasBodyVersion bool, bodyVersion string, bodyName, arguments []byte) *jsonrpc.Error {
	mismatch := func(format string, a ...any) *jsonrpc.Error {
		return jsonrpc.Errorf(mcp.CodeHeaderMismatch, "Header mismatch: "+format, a...)
	}
	if modern && !hasHeader {
		return mismatch("the %s header is required", mcp.HeaderProtocolVersion)
	}
	if modern && hasBodyVersion && headerVersion != bodyVersion {
		return mismatch("%s header value '%s' does not match body value '%s'", mcp.HeaderProtocolVersion, headerVersion, bodyVersion)
	}
	hm, ok := headerValue(hdr, mcp.HeaderMethod)
	if !ok && modern {
		return mismatch("the %s header is required", mcp.HeaderMethod)
	}
	if ok && hm != method {
		return mismatch("%s header value '%s' does not match body value '%s'", mcp.HeaderMethod, hm, method)
	}
	// The body's name, read in place (no copy unless it has escapes).
	var want []byte
	var hasName bool
	if len(bodyName) > 0 {
		want, hasName = jsonrpc.StringBytes(bodyName)
	}
	if hasName {
		got, ok := headerValue(hdr, mcp.HeaderName)
		if !ok && modern {
			return mismatch("the %s header is required for %s", mcp.HeaderName, method)
		}
		if ok {
			got, err := mcp.DecodeHeaderValue(got)
			if err != nil {
				return mismatch("%s header: %v", mcp.HeaderName, err)
			}
			if got != string(want) {
				return mismatch("%s header value '%s' does not match body value '%s'", mcp.HeaderName, got, want)
			}
		}
	}
	if method == mcp.MethodToolsCall && len(want) > 0 {
		params := h.backend.HeaderParams(string(want))
		if !modern {
			// Only the Mcp-Param- headers sent are checked.
			sent := false
			for _, hname := range params {
				if _, ok := headerValue(hdr, mcp.HeaderParamPrefix+hname); ok {
					sent = true
				}
			}
			if !sent {
				return nil
			}
		}
		if len(params) == 0 {
			return nil
		}
		var args map[string]json.RawMessage
		if len(arguments) > 0 && arguments[0] == '{' {
			args = rawMembers(arguments)
		}
		names := make([]string, 0, len(params))
		for path := range params {
			names = append(names, strings.Split(path, mcp.ArgPathSep)[0])
		}
		if k := caseAmbiguousIn(args, names...); k != "" {
			return jsonrpc.Errorf(mcp.CodeHeaderMismatch, "Header mismatch: argument %q is ambiguous (differs from another only in case)", k)
		}
		for path, hname := range params {
			arg, ambiguous := argAtStrict(args, path)
			if ambiguous != "" {
				return jsonrpc.Errorf(mcp.CodeHeaderMismatch, "Header mismatch: argument %q is ambiguous (differs from another only in case)", ambiguous)
			}
			if _, ok := headerValue(hdr, mcp.HeaderParamPrefix+hname); !ok && !modern {
				continue
			}
			if e := checkParamHeader(hdr, mcp.HeaderParamPrefix+hname, arg); e != nil {
				return e
			}
		}
	}
	return nil
}

// rawMembers maps the members of a JSON object to their raw values, which
// are slices of raw (the last of repeated keys wins, as in
// encoding/json).
func rawMembers(raw []byte) map[string]json.RawMessage {
	m := map[string]json.RawMessage{}
	jsonrpc.EachMember(raw, func(key, value []byte) bool { m[string(key)] = value; return true })
	return m
}

// checkParamHeader compares an Mcp-Param- header with the argument it
// mirrors: both present and equal, or both absent.
func checkParamHeader(hdr http.Header, name string, arg json.RawMessage) *jsonrpc.Error {
	raw, has := headerValue(hdr, name)
	present := len(arg) > 0 && string(arg) != "null"
	switch {
	case !has && !present:
		return nil
	case !has:
		return jsonrpc.Errorf(mcp.CodeHeaderMismatch, "Header mismatch: the %s header is required when the argument is present", name)
	case !present:
		return jsonrpc.Errorf(mcp.CodeHeaderMismatch, "Header mismatch: %s header sent for an absent argument", name)
	}
	got, err := mcp.DecodeHeaderValue(raw)
	if err != nil {
		return jsonrpc.Errorf(mcp.CodeHeaderMismatch, "Header mismatch: %s header: %v", name, err)
	}
	if !paramEqual(got, arg) {
		return jsonrpc.Errorf(mcp.CodeHeaderMismatch, "Header mismatch: %s header value '%s' does not match body value %s", name, got, arg)
	}
	return nil
}

// corsHeaders lists the request headers a page may send: the transport's
// own (Mcp-Param- ones included) and the usual ones.
func corsHeaders(requested string) string {
	allowed := []string{"Content-Type", "Accept", "Authorization", mcp.HeaderProtocolVersion, mcp.HeaderMethod, mcp.HeaderName, "Last-Event-ID"}
	for _, h := range strings.Split(requested, ",") {
		h = strings.TrimSpace(h)
		if len(h) > len(mcp.HeaderParamPrefix) && strings.EqualFold(h[:len(mcp.HeaderParamPrefix)], mcp.HeaderParamPrefix) {
			allowed = append(allowed, h)
		}
	}
	return strings.Join(allowed, ", ")
}

// headerValue returns a header with the optional whitespace around it
// removed (RFC 9110 §5.5), and whether it was sent.
func headerValue(h http.Header, name string) (string, bool) {
	if name == mcp.HeaderProtocolVersion {
		name = canonicalProtocolVersion // not canonical as the specification spells it
	}
	v, ok := h[http.CanonicalHeaderKey(name)]
	if !ok || len(v) == 0 {
		return "", false
	}
	first := strings.Trim(v[0], " \t")
	for _, other := range v[1:] {
		if strings.Trim(other, " \t") != first {
			// Repeated with different values: an intermediary may read
			// either one, so the request matches neither.
			return "<repeated with different values>", true
		}
	}
	return first, true
}

type acceptable struct{ json, sse bool }

func parseAccept(values []string) acceptable {
	if len(values) == 0 {
		return acceptable{json: true}
	}
	var a acceptable
	for _, v := range values {
		// Comma-separated media ranges, walked in place: this runs for
		// every request.
		for v != "" {
			part, rest, _ := strings.Cut(v, ",")
			v = rest
			mt, _, _ := strings.Cut(part, ";")
			mt = strings.TrimSpace(mt)
			switch {
			case strings.EqualFold(mt, "application/json"), strings.EqualFold(mt, "application/*"):
				a.json = true
			case strings.EqualFold(mt, "text/event-stream"), strings.EqualFold(mt, "text/*"):
				a.sse = true
			case mt == "*/*":
				a.json, a.sse = true, true
			}
		}
	}
	return a
}

// isJSONMediaType reports whether a Content-Type names application/json
// (with parameters, in any case).
func isJSONMediaType(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && mt == "application/json"
}

func (h *Handler) hostAllowed(host string) bool {
	if len(h.opts.AllowedHosts) == 0 {
		return true
	}
	name := host
	if hn, _, err := net.SplitHostPort(host); err == nil {
		name = hn
	}
	name = strings.TrimSuffix(strings.TrimPrefix(name, "["), "]")
	for _, a := range h.opts.AllowedHosts {
		if strings.EqualFold(strings.TrimSuffix(strings.TrimPrefix(a, "["), "]"), name) {
			return true
		}
	}
	return false
}

func (h *Handler) originAllowed(origin string) bool {
	for _, a := range h.opts.AllowedOrigins {
		if a == "*" || strings.EqualFold(strings.TrimSuffix(a, "/"), origin) {
			return true
		}
	}
	u, err := url.Parse(origin)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && IsLoopbackHost(u.Hostname())
}

// IsLoopbackHost reports whether a host name means this machine:
// localhost, or a loopback address.
func IsLoopbackHost(name string) bool {
	if strings.EqualFold(name, "localhost") {
		return true
	}
	ip := net.ParseIP(strings.TrimSuffix(strings.TrimPrefix(name, "["), "]"))
	return ip != nil && ip.IsLoopback()
}

func (h *Handler) authorized(r *http.Request) bool {
	if h.opts.Token == "" {
		return true
	}
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	return ok && strings.EqualFold(scheme, "Bearer") &&
		subtle.ConstantTimeCompare([]byte(strings.TrimSpace(token)), []byte(h.opts.Token)) == 1
}
