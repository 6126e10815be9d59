package streamable

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/agentwire/agentwire/mcp"
	"github.com/agentwire/agentwire/mcp/host"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentwire/agentwire/client"
	"github.com/agentwire/agentwire/internal/chain"
	"github.com/agentwire/agentwire/jsonrpc"
	"github.com/agentwire/agentwire/process"
	"github.com/agentwire/agentwire/rpc"
)

// ClientOptions configures a session over Streamable HTTP. The zero
// value uses http.DefaultClient's transport with no extra headers.
type ClientOptions struct {
	// Client sends the requests. Nil means a client with no overall
	// timeout (event streams last as long as their calls).
	Client *http.Client
	// Token, when set, is sent as "Authorization: Bearer TOKEN" on every
	// request (when there is no Authorizer).
	Token string
	// Authorizer, when set, gives every request its credentials and is
	// told when the server refuses them, so that it can obtain new ones
	// (an OAuth client, say) and have the request sent again.
	Authorizer Authorizer
	// Header is added to every request.
	Header http.Header
	// MaxMessageBytes bounds one response or event. Default 16 MiB.
	MaxMessageBytes int
	// MaxPendingCalls bounds, for a 2024-11-05 HTTP+SSE server, the calls
	// waiting at once for their answer on the server's event stream (its
	// answers come there, not on the POSTs): one more fails at once with
	// ErrTooManyCalls. Default 1024.
	MaxPendingCalls int
	// StreamReconnects bounds how many times in a row a legacy session's
	// standalone GET stream is reopened without getting an event before
	// the client gives up on it (until the session is next initialized);
	// a connection that brought events resets the count (the server
	// polls). The wait before each attempt is the server's retry field
	// (1 s without one), doubled after each failed attempt up to 30 s.
	// Default 5; negative means none: the first attempt that fails, or
	// brings nothing, ends the stream.
	StreamReconnects int
	// MaxServerRequests bounds the server's requests (ping, sampling,
	// elicitation, roots/list) being answered at once, on every stream
	// of the session: each is answered by OnInput (ping at once) and a
	// POST of its own, on a goroutine of its own. One more is answered
	// on the goroutine that reads its stream, at once: a ping with its
	// result, anything else with -32000 (the client is busy), so that a
	// server streaming requests is slowed to the pace of those answers
	// and never costs a goroutine each, and answers that wait on a person
	// cannot stop the stream that carries what they wait for. Default 16.
	MaxServerRequests int
}

// Defaults of ClientOptions.
const (
	DefaultMaxPendingCalls   = 1024
	DefaultStreamReconnects  = 5
	DefaultMaxServerRequests = 16
)

// ErrTooManyCalls fails a call to an HTTP+SSE server when
// ClientOptions.MaxPendingCalls calls are already waiting for their answer.
var ErrTooManyCalls = errors.New("mcp: too many calls waiting for an answer on the HTTP+SSE event stream")

// An Authorizer gives a client's requests their credentials: a token it
// holds, or one it obtains (the OAuth flows of the MCP authorization
// specification live in github.com/agentwire/agentwire/oauth, which
// implements this). Both methods are called concurrently, on the
// goroutine of the call whose request it is.
type Authorizer interface {
	// Authorize sets req's credentials: its Authorization header, and
	// any other the scheme needs (DPoP). An error fails the call.
	Authorize(req *http.Request) error
	// Refused is told of a 401 or 403 answer to a request Authorize
	// prepared: resp's status and headers (WWW-Authenticate) as the
	// server sent them; its body is the transport's. It returns true when
	// it has new credentials and the request should be sent again, false
	// to let the call fail with the refusal (an HTTPStatusError). A
	// request is sent at most MaxAuthAttempts times.
	Refused(ctx context.Context, req *http.Request, resp *http.Response) (retry bool, err error)
}

// MaxAuthAttempts bounds how many times one request is sent with fresh
// credentials: a server that refuses every token (or keeps asking for a
// scope it is never granted) costs a few round trips, not a loop.
const MaxAuthAttempts = 3

// ErrHTTPTransport marks a request that got no HTTP response at all
// (connection refused, reset, a broken event stream). It is never taken as
// evidence of a server's era.
var ErrHTTPTransport = errors.New("mcp: HTTP transport failure")

// HTTPStatusError is a response with a status other than 200 or 202. RPC
// is the JSON-RPC error in its body, when it has one (errors.As finds it).
type HTTPStatusError struct {
	StatusCode int
	Status     string
	// Authenticate is the WWW-Authenticate header of a 401 or 403.
	Authenticate string
	RPC          *jsonrpc.Error
	Body         string // the start of a body that was not a JSON-RPC error
}

func (e *HTTPStatusError) Error() string {
	msg := "mcp: HTTP " + e.Status
	switch {
	case e.RPC != nil:
		msg += ": " + e.RPC.Error()
	case e.Body != "":
		msg += ": " + e.Body
	}
	if e.Authenticate != "" {
		msg += " (WWW-Authenticate: " + e.Authenticate + ")"
	}
	return msg
}

func (e *HTTPStatusError) Unwrap() error {
	if e.RPC != nil {
		return e.RPC
	}
	return nil
}

// Connect negotiates with a Streamable HTTP server at url (guarantee T2):
// server/discover first; a result or a recognized modern error is modern;
// a legacy server's refusal (a JSON-RPC error, or 400/404/405 without a
// modern error in the body) falls back to initialize. 401, 403, 5xx,
// timeouts and network errors are errors, never legacy evidence (guarantee
// E2 and the 2026-07-28 Streamable HTTP transport's backward compatibility).
//
// When that initialize POST fails too, with 400, 404 or 405 and no modern
// JSON-RPC error in the body, the server may be a 2024-11-05 HTTP+SSE
// server (the backwards-compatibility procedure of every later revision):
// the URL is fetched with GET, and a 200 event stream whose first event is
// "endpoint" (within the probe timeout) makes the session an HTTP+SSE one,
// its messages POSTed to that endpoint and every answer read from the
// stream. The endpoint must have the URL's scheme and host, so that the
// credentials never leave the origin. Anything else fails the connect
// with the initialize error.
func Connect(ctx context.Context, url string, opts *host.Options, hopts *ClientOptions) (*host.Session, error) {
	var o host.Options
	if opts != nil {
		o = *opts
	}
	if o.CacheKey == "" {
		o.CacheKey = url
	}
	return host.NewSession(ctx, &o, func(p host.Peer) host.Transport {
		t := newHTTPTransport(url, p, hopts)
		if o.Transport != nil {
			// Over HTTP no rpc.Conn sends the messages: the outbound
			// middleware (tracing, logging, limits) is applied here.
			t.outbound = t.outboundChain(o.Transport.Outbound)
		}
		return t
	})
}

// newHTTPTransport is the transport of a session with the server at url.
func newHTTPTransport(url string, p host.Peer, hopts *ClientOptions) *httpTransport {
	t := &httpTransport{url: url, onNotify: p.Notification, onRequest: p.Input, reinitialize: p.Reinitialize,
		probeTimeout: p.ProbeTimeout, renew: make(chan struct{}, 1)}
	t.base, t.stop = context.WithCancel(context.Background())
	if hopts != nil {
		t.opts = *hopts
	}
	if t.probeTimeout <= 0 {
		t.probeTimeout = host.DefaultProbeTimeout
	}
	if t.opts.MaxPendingCalls <= 0 {
		t.opts.MaxPendingCalls = DefaultMaxPendingCalls
	}
	if t.opts.MaxServerRequests <= 0 {
		t.opts.MaxServerRequests = DefaultMaxServerRequests
	}
	t.answering = make(chan struct{}, t.opts.MaxServerRequests)
	switch {
	case t.opts.StreamReconnects == 0:
		t.opts.StreamReconnects = DefaultStreamReconnects
	case t.opts.StreamReconnects < 0:
		t.opts.StreamReconnects = 0
	}
	if t.opts.Client == nil {
		t.opts.Client = &http.Client{
			// Our own connection pool, so that Close closes only ours.
			Transport: http.DefaultTransport.(*http.Transport).Clone(),
			// A 301/302/303 would turn the POST into a bodiless GET, whose
			// answer (405, say) would pass for the server's. Only the
			// redirects that keep the method and body are followed.
			CheckRedirect: func(req *http.Request, via []*http.Request) error {
				if len(via) >= 10 {
					return errors.New("stopped after 10 redirects")
				}
				if c := req.Response.StatusCode; c != http.StatusTemporaryRedirect && c != http.StatusPermanentRedirect {
					return http.ErrUseLastResponse
				}
				return nil
			},
		}
	}
	if t.opts.MaxMessageBytes <= 0 {
		t.opts.MaxMessageBytes = 16 << 20
	}
	return t
}

// httpTransport sends each message as a POST (2026-07-28 transports,
// Sending): a request's answer is a JSON object or an event stream whose
// notifications are passed to onNotify; cancelling a call closes its
// stream, which is the cancellation. With a 2024-11-05 HTTP+SSE server
// (sse) it POSTs to the endpoint the server named instead, and reads every
// answer from the server's one event stream (link; httpclient_sse.go).
type httpTransport struct {
	url      string
	opts     ClientOptions
	outbound rpc.Invoker // host.Options.Transport.Outbound composed once; nil without any

	onNotify     func(method string, params json.RawMessage)
	onRequest    func(ctx context.Context, method string, params json.RawMessage) (any, error)
	reinitialize func(ctx context.Context) error // a new legacy session, after a 404 or a lost HTTP+SSE stream
	probeTimeout time.Duration                   // bounds the wait for an HTTP+SSE server's endpoint event
	nextID       atomic.Int64
	base         context.Context // every request's; cancelled by close
	stop         context.CancelFunc
	bg           sync.WaitGroup // cancellations, replies and GET streams, in the background
	late         sync.Map       // responses that arrived on another stream, by id
	inflight     sync.Map       // ids of calls waiting for their response
	failCall     sync.Map       // id -> context.CancelCauseFunc ending that call with an error
	// renew is held (a one-slot semaphore that a context can give up
	// waiting for) while a new session replaces one the server lost, so
	// that calls that all meet the loss start one session, not one each.
	renew chan struct{}
	// answering holds a place for each server request being answered
	// (MaxServerRequests places; reply).
	answering chan struct{}

	mu          sync.Mutex
	closed      bool
	era         mcp.Era
	version     string                       // the legacy version, for MCP-Protocol-Version
	sessionID   string                       // a legacy server's Mcp-Session-Id
	toolHeaders map[string]map[string]string // tool -> argument -> Mcp-Param- name, from tools/list
	wantGet     bool                         // a legacy session that keeps a standalone GET stream open
	getGone     bool                         // the server answered the GET with 405: never again
	getStop     context.CancelFunc           // ends the running standalone stream's loop
	sse         bool                         // the server speaks 2024-11-05 HTTP+SSE
	link        *sseLink                     // its current event stream
}

// ErrSessionClosed is returned for calls on a closed HTTP session.
var ErrSessionClosed = errors.New("mcp: the session is closed")

func (t *httpTransport) Negotiated(era mcp.Era, version string) {
	t.mu.Lock()
	t.era, t.version = era, version
	t.mu.Unlock()
}

// Connected opens a legacy server's standalone GET stream, after the
// handshake and before any call (so that the server sees it as the
// standalone one), when the session has anywhere to send what comes on
// it: a legacy server sends list changes, resource updates, log messages
// and its own requests (elicitation, sampling) there rather than on a
// call's stream. ctx, and at most standaloneWait, bound the wait for the
// stream's headers; the stream goes on opening in the background after
// that. An HTTP+SSE session has its one stream already.
func (t *httpTransport) Connected(ctx context.Context) {
	t.mu.Lock()
	want := t.era == mcp.Legacy && !t.sse && (t.onNotify != nil || t.onRequest != nil)
	t.wantGet = want
	t.mu.Unlock()
	if !want {
		return
	}
	opened := t.restartStandalone()
	wait := time.NewTimer(standaloneWait)
	defer wait.Stop()
	select {
	case <-opened:
	case <-ctx.Done():
	case <-wait.C:
	}
}

// standaloneWait bounds how long Connected waits for the standalone
// stream's headers: a server that holds them back until its first event
// must not hold the connect.
const standaloneWait = time.Second

// Bounds of the standalone stream's reconnection delay: the server's retry
// field (or defaultRetry) doubles after each failed attempt up to
// maxReconnectDelay, and is never below minReconnectDelay, so that a
// server asking for retry: 0 cannot make the client spin.
const (
	defaultRetry      = time.Second
	minReconnectDelay = 50 * time.Millisecond
	maxReconnectDelay = 30 * time.Second
)

// restartStandalone ends the running standalone stream, if any, and opens
// one for the current session (after Connected, and after every new
// session); opened is closed once the first attempt has its answer.
func (t *httpTransport) restartStandalone() (opened <-chan struct{}) {
	ch := make(chan struct{})
	t.mu.Lock()
	if t.getStop != nil {
		t.getStop()
		t.getStop = nil
	}
	if t.closed || !t.wantGet || t.getGone || t.sse {
		t.mu.Unlock()
		close(ch)
		return ch
	}
	ctx, cancel := context.WithCancel(t.base)
	t.getStop = cancel
	sid := t.sessionID
	t.mu.Unlock()
	if !t.goBackground(func() {
		defer cancel()
		t.runStandalone(ctx, sid, ch)
	}) {
		cancel()
		close(ch)
	}
	return ch
}

// runStandalone keeps a legacy session's standalone GET stream open
// (2025-11-25 transports, Listening for Messages from the Server, and
// Resumability) until ctx ends: after a drop it waits the server's retry
// interval and reconnects with Last-Event-ID, so that the server can
// replay what the drop lost. It stops for good on 405 (the server offers
// no stream), starts a new session on 404 (the server forgot this one;
// the new session opens its own stream), and gives up after
// StreamReconnects attempts in a row that brought no event. opened is
// closed after the first attempt.
func (t *httpTransport) runStandalone(ctx context.Context, sid string, opened chan struct{}) {
	signalled := false
	signal := func() {
		if !signalled {
			signalled = true
			close(opened)
		}
	}
	defer signal()
	lastID, retry, failures := "", defaultRetry, 0
	for {
		resp, err := t.getStream(ctx, sid, lastID)
		signal()
		if ctx.Err() != nil {
			if resp != nil {
				resp.Body.Close()
			}
			return
		}
		var ae *authError
		switch {
		case errors.As(err, &ae):
			return // no credentials: asking again would not find any
		case err != nil:
			failures++ // lost on the way: try again
		case resp.StatusCode == http.StatusOK && isEventStream(resp):
			before := lastID
			got, err := t.readStandalone(ctx, resp.Body, &lastID, &retry)
			resp.Body.Close()
			if ctx.Err() != nil {
				return
			}
			if (got || lastID != before) && (err == io.EOF || errors.Is(err, ErrHTTPTransport)) {
				failures = 0 // a stream that delivered: reconnecting is polling
			} else {
				// Nothing came, or an event over the limit, which a
				// replay would bring again.
				failures++
			}
		case resp.StatusCode == http.StatusMethodNotAllowed:
			// "The server MUST either return Content-Type: text/event-stream
			// ... or else return HTTP 405": it has no stream to offer.
			resp.Body.Close()
			t.mu.Lock()
			t.getGone = true
			t.mu.Unlock()
			return
		case resp.StatusCode == http.StatusNotFound && sid != "":
			// The session is gone; its successor opens its own stream.
			resp.Body.Close()
			t.renewSession(ctx, sid)
			return
		case resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests:
			resp.Body.Close()
			failures++
		case resp.StatusCode >= 400 && resp.StatusCode < 500 && lastID != "":
			// The server cannot resume from that event (go-sdk answers 400
			// when it has purged it): what was lost is lost, and a fresh
			// stream carries what comes next.
			resp.Body.Close()
			lastID = ""
			failures++
		default:
			// Refused, or not an event stream: this server keeps no
			// standalone stream for us.
			resp.Body.Close()
			return
		}
		if failures > t.opts.StreamReconnects {
			return
		}
		delay := retry
		for i := 1; i < failures && delay < maxReconnectDelay; i++ {
			delay *= 2
		}
		delay = min(max(delay, minReconnectDelay), maxReconnectDelay)
		timer := time.NewTimer(delay)
		select {
		case <-timer.C:
		case <-ctx.Done():
			timer.Stop()
			return
		}
	}
}

// getStream sends the standalone stream's GET, for session sid, resuming
// after lastID when it is set.
func (t *httpTransport) getStream(ctx context.Context, sid, lastID string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, t.url, nil)
	if err != nil {
		return nil, err
	}
	t.setHeaders(req, "", nil)
	req.Header.Del("Content-Type")
	req.Header.Set("Accept", "text/event-stream")
	if sid != "" {
		// This stream's session, even if another has replaced it since:
		// the server then answers 404, and the loop ends.
		req.Header.Set(mcp.HeaderSessionID, sid)
	}
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	return t.do(req, nil)
}

// readStandalone reads one connection of the standalone stream until it
// ends: notifications go to onNotify, the server's requests are answered
// by POST, and a response (a resumed stream may replay one) goes to the
// call that waits for it. got reports whether it carried a message; err
// is why it ended (io.EOF: the server ended it).
func (t *httpTransport) readStandalone(ctx context.Context, body io.Reader, lastID *string, retry *time.Duration) (bool, error) {
	r := t.newEventReader(body, lastID, retry)
	got := false
	for {
		name, data, err := r.next()
		if err != nil {
			return got, err
		}
		if name == eventMessage {
			got = true
			t.event(data, "", ctx.Done())
		}
	}
}

func isEventStream(resp *http.Response) bool {
	return isEventStreamType(resp.Header.Get("Content-Type"))
}

// isEventStreamType reports whether a Content-Type is text/event-stream,
// as mime.ParseMediaType reads it; the two values servers send are
// settled without parsing (which makes a map for every answer).
func isEventStreamType(ct string) bool {
	switch ct {
	case "text/event-stream":
		return true
	case "application/json":
		return false
	}
	mt, _, _ := mime.ParseMediaType(ct)
	return mt == "text/event-stream"
}

// renewSession replaces legacy session sid, which the server no longer
// knows (404), with a new one (2025-11-25 transports, Session Management:
// the client "MUST start a new session by sending a new InitializeRequest
// without a session ID attached"). Calls that meet the same loss at once
// start one session between them: whoever comes second finds sid
// replaced, and goes on with the new one.
func (t *httpTransport) renewSession(ctx context.Context, sid string) error {
	select {
	case t.renew <- struct{}{}:
	case <-ctx.Done():
		return context.Cause(ctx)
	}
	defer func() { <-t.renew }()
	t.mu.Lock()
	replaced := t.sessionID != sid || t.era != mcp.Legacy
	if !replaced {
		t.sessionID = ""
	}
	t.mu.Unlock()
	if replaced {
		return nil
	}
	if t.reinitialize == nil {
		return errors.New("mcp: the server ended the session, and this transport cannot start another")
	}
	return t.reinitialize(ctx)
}

func (t *httpTransport) Restart(context.Context) error { return client.ErrNotRestartable }
func (t *httpTransport) Fresh() bool                   { return false }

// Evidence reads a failed probe as "HTTP era detection" has it: only an
// answer of the server itself (a JSON-RPC error with 200, 400, 404 or
// 405) can say anything about its era; 401, 403 and 5xx come from in
// front of it or from its trouble, and a network failure, silence or a
// 200 that is not the response from neither era's server (guarantee E2).
func (t *httpTransport) Evidence(err error) host.Evidence {
	var hse *HTTPStatusError
	if errors.As(err, &hse) {
		switch hse.StatusCode {
		case http.StatusBadRequest, http.StatusNotFound, http.StatusMethodNotAllowed:
			if hse.RPC == nil {
				return host.EvidenceNotModern
			}
			return host.EvidenceAnswer
		}
		return host.EvidenceNone
	}
	if errors.Is(err, ErrHTTPTransport) {
		return host.EvidenceNone
	}
	var je *jsonrpc.Error
	if errors.As(err, &je) {
		return host.EvidenceAnswer
	}
	return host.EvidenceFault
}

// goBackground runs f unless the transport is closed; close waits for it.
// It reports whether f runs.
func (t *httpTransport) goBackground(f func()) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return false
	}
	t.bg.Add(1)
	go func() {
		defer t.bg.Done()
		f()
	}()
	return true
}

// Close ends every call and stream in flight (the standalone GET stream,
// an HTTP+SSE server's event stream), ends a legacy session with DELETE
// (an HTTP+SSE session ends with its stream), and closes the pool's idle
// connections.
func (t *httpTransport) Close() process.ShutdownResult {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return process.ShutdownResult{}
	}
	t.closed = true
	sid := t.sessionID
	t.mu.Unlock()
	t.stop()
	if sid != "" {
		// A legacy session ends with DELETE (a server MAY answer 405).
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		if req, err := http.NewRequestWithContext(ctx, http.MethodDelete, t.url, nil); err == nil {
			t.setHeaders(req, "", nil)
			if resp, err := t.do(req, nil); err == nil {
				resp.Body.Close()
			}
		}
		cancel()
	}
	t.bg.Wait()
	t.opts.Client.CloseIdleConnections()
	return process.ShutdownResult{}
}

// LearnTools remembers which tool arguments travel in Mcp-Param- headers
// ("clients MUST support" x-mcp-header).
func (t *httpTransport) LearnTools(tools []mcp.Tool) {
	m, _ := mcp.ToolHeaderMap(tools)
	t.mu.Lock()
	t.toolHeaders = m
	t.mu.Unlock()
}

// KnowsTool reports whether tools/list told us about the tool's headers.
func (t *httpTransport) KnowsTool(name string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	_, ok := t.toolHeaders[name]
	return ok
}

// setParamHeaders mirrors annotated arguments: strings as they are (or
// base64 when they must be), integers in decimal, booleans as true/false.
func (t *httpTransport) setParamHeaders(h http.Header, tool string, rawArgs []byte) {
	t.mu.Lock()
	params := t.toolHeaders[tool]
	t.mu.Unlock()
	if len(params) == 0 {
		return
	}
	var args map[string]json.RawMessage
	if json.Unmarshal(rawArgs, &args) != nil {
		return
	}
	for path, name := range params {
		raw := mcp.ArgAt(args, path)
		if len(raw) == 0 || string(raw) == "null" {
			continue
		}
		v := string(raw)
		if raw[0] == '"' {
			var str string
			if json.Unmarshal(raw, &str) != nil {
				continue
			}
			v = mcp.EncodeHeaderValue(str)
		} else if raw[0] == '{' || raw[0] == '[' {
			continue // not a primitive: nothing to mirror
		}
		h.Set(mcp.HeaderParamPrefix+name, v)
	}
}

// The request headers every POST carries, shared: net/http only reads a
// request's header values, and a slice at its capacity is copied by
// anyone who appends to it (Header.Add).
var (
	postContentType = []string{"application/json"}
	postAccept      = []string{"application/json, text/event-stream"}
)

// setHeaders sets a POST's headers; a modern request's mirror its params
// (Request Metadata), read with the exact-key walk the server routes with
// (mcp.ParseRequestParams), not decoded again. (A key repeated in the
// params is refused by the server, -32600, whichever one a reader takes.)
func (t *httpTransport) setHeaders(req *http.Request, method string, params []byte) {
	h := req.Header
	h["Content-Type"] = postContentType[:1:1]
	h["Accept"] = postAccept[:1:1]
	for k, v := range t.opts.Header {
		h[k] = v
	}
	if t.opts.Token != "" && t.opts.Authorizer == nil {
		h.Set("Authorization", "Bearer "+t.opts.Token)
	}
	t.mu.Lock()
	version, sid := t.version, t.sessionID
	t.mu.Unlock()
	if sid != "" {
		h.Set(mcp.HeaderSessionID, sid)
	}
	var p mcp.RequestParams
	if len(params) > 0 {
		mcp.ParseRequestParams(params, &p)
	}
	modern := ""
	if p.Meta != nil {
		modern, _ = jsonrpc.StringValue(p.Meta.ProtocolVersion)
	}
	if modern == "" {
		if version != "" {
			h.Set(mcp.HeaderProtocolVersion, version)
		}
		return
	}
	h.Set(mcp.HeaderProtocolVersion, modern)
	if method != "" {
		h.Set(mcp.HeaderMethod, method)
	}
	named := func(raw []byte) {
		if v, _ := jsonrpc.StringValue(raw); v != "" {
			h.Set(mcp.HeaderName, mcp.EncodeHeaderValue(v))
		}
	}
	switch method {
	case mcp.MethodToolsCall, "prompts/get":
		named(p.Name)
		if method == mcp.MethodToolsCall {
			name, _ := jsonrpc.StringValue(p.Name)
			t.setParamHeaders(h, name, p.Arguments)
		}
	case "resources/read":
		named(p.URI)
	case mcp.MethodTasksGet, mcp.MethodTasksUpdate, mcp.MethodTasksCancel:
		// The tasks extension's routing header (SEP-2663).
		var taskID []byte
		jsonrpc.EachMember(params, func(key, value []byte) bool {
			if string(key) == "taskId" {
				taskID = value
			}
			return true
		})
		named(taskID)
	}
}

func (t *httpTransport) encode(id jsonrpc.ID, method string, params any) (msg, rawParams []byte, err error) {
	msg = append(msg, `{"jsonrpc":"2.0"`...)
	if id != "" {
		msg = append(msg, `,"id":`...)
		msg = append(msg, id...)
	}
	msg = append(msg, `,"method":`...)
	msg = jsonrpc.AppendString(msg, method)
	if params != nil {
		rawParams, err = jsonrpc.RawValue(params)
		if err != nil {
			return nil, nil, err
		}
		if string(rawParams) == "null" {
			// "params": null is not JSON-RPC, and TypeScript SDK servers
			// drop such a request unanswered: params is left out.
			rawParams = nil
		} else {
			msg = append(msg, `,"params":`...)
			msg = append(msg, rawParams...)
		}
	}
	return append(msg, '}'), rawParams, nil
}

func (t *httpTransport) Notify(ctx context.Context, method string, params any) error {
	if t.outbound != nil {
		_, err := t.outbound(ctx, &rpc.OutboundCall{Method: method, Params: params, Notification: true})
		return err
	}
	return t.notify(ctx, method, params)
}

// callExtras are what Call was given besides the method and params, for
// the innermost invoker of the outbound chain: the chain is composed once
// per transport (so a middleware may keep state across calls), and these
// travel to its end in the call's context.
type callExtras struct {
	onID func(jsonrpc.ID)
	opts []client.CallOption
}

type callExtrasKey struct{}

// outboundChain composes the outbound middleware around the transport's
// own call and notify; nil without any.
func (t *httpTransport) outboundChain(mw []rpc.OutboundMiddleware) rpc.Invoker {
	if inv, ok := chain.Compose(rpc.Invoker(t.send), mw); ok {
		return inv
	}
	return nil
}

// send is the innermost invoker: the call or notification itself.
func (t *httpTransport) send(ctx context.Context, c *rpc.OutboundCall) (json.RawMessage, error) {
	if c.Notification {
		return nil, t.notify(ctx, c.Method, c.Params)
	}
	x, _ := ctx.Value(callExtrasKey{}).(*callExtras)
	if x == nil {
		x = &callExtras{}
	}
	return t.call(ctx, c.Method, c.Params, func(id jsonrpc.ID) {
		c.ID = id
		if x.onID != nil {
			x.onID(id)
		}
	}, x.opts...)
}

func (t *httpTransport) notify(ctx context.Context, method string, params any) error {
	msg, raw, err := t.encode("", method, params)
	if err != nil {
		return err
	}
	if t.isSSE() {
		return t.notifySSE(ctx, method, msg)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.url, bytes.NewReader(msg))
	if err != nil {
		return err
	}
	t.setHeaders(req, method, raw)
	resp, err := t.do(req, msg)
	if err != nil {
		return t.sendError(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted && resp.StatusCode != http.StatusOK {
		return t.statusError(resp)
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if method == mcp.MethodInitialized {
		// A new session (after a 404) has its own standalone stream.
		t.mu.Lock()
		want := t.wantGet
		t.mu.Unlock()
		if want {
			t.restartStandalone()
		}
	}
	return nil
}

func (t *httpTransport) Call(ctx context.Context, method string, params any, onID func(jsonrpc.ID), opts ...client.CallOption) (json.RawMessage, error) {
	if t.outbound != nil {
		if onID != nil || len(opts) > 0 {
			ctx = context.WithValue(ctx, callExtrasKey{}, &callExtras{onID: onID, opts: opts})
		}
		return t.outbound(ctx, &rpc.OutboundCall{Method: method, Params: params})
	}
	return t.call(ctx, method, params, onID, opts...)
}

func (t *httpTransport) call(ctx context.Context, method string, params any, onID func(jsonrpc.ID), opts ...client.CallOption) (json.RawMessage, error) {
	t.mu.Lock()
	closed := t.closed
	t.mu.Unlock()
	if closed {
		return nil, ErrSessionClosed
	}
	// Close ends the call too.
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := context.AfterFunc(t.base, func() { cancel(ErrSessionClosed) })
	defer stop()

	sid := t.legacySession()
	res, err := t.once(ctx, method, params, onID)
	var hse *HTTPStatusError
	var refused *AnswerRefusedError
	if errors.As(err, &refused) {
		// The call ran on the server: it is not sent again.
		return nil, err
	}
	if err != nil && errors.As(err, &hse) && hse.StatusCode == http.StatusNotFound && method != mcp.MethodInitialize {
		switch {
		case t.isSSE():
			// An HTTP+SSE server that no longer knows the session (go-sdk
			// answers 404 once its stream has ended) did not take the
			// message: the link is closed, and the call is sent again on
			// a new one, in a new session.
			res, err = t.once(ctx, method, params, onID)
		case sid != "":
			// "The server MAY terminate the session at any time, after
			// which it MUST respond to requests containing that session ID
			// with HTTP 404 Not Found. When a client receives HTTP 404 in
			// response to a request containing an Mcp-Session-Id, it MUST
			// start a new session" (2025-11-25 transports, Session
			// Management).
			if rerr := t.renewSession(ctx, sid); rerr != nil {
				return nil, fmt.Errorf("%w (starting a new session: %v)", err, rerr)
			}
			res, err = t.once(ctx, method, params, onID)
		}
	}
	// "A broken stream loses the request; client MUST re-issue with a new
	// id": done for calls marked safe to send twice.
	if err != nil && errors.Is(err, ErrHTTPTransport) && ctx.Err() == nil && client.IsRetryable(opts...) {
		res, err = t.once(ctx, method, params, onID)
	}
	if err != nil && errors.Is(context.Cause(ctx), ErrSessionClosed) {
		err = ErrSessionClosed
	}
	return res, err
}

// legacySession is the legacy session id requests carry now, if any.
func (t *httpTransport) legacySession() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.era != mcp.Legacy {
		return ""
	}
	return t.sessionID
}

func (t *httpTransport) once(ctx context.Context, method string, params any, onID func(jsonrpc.ID)) (json.RawMessage, error) {
	if t.isSSE() {
		return t.onceSSE(ctx, method, params, onID)
	}
	id := jsonrpc.Int64ID(t.nextID.Add(1))
	msg, raw, err := t.encode(id, method, params)
	if err != nil {
		return nil, err
	}
	if onID != nil {
		onID(id)
	}
	// A server request on this call's stream whose answer the server
	// refuses ends the call with that refusal (see reply).
	ctx, fail := context.WithCancelCause(ctx)
	defer fail(nil)
	t.inflight.Store(string(id), struct{}{})
	t.failCall.Store(string(id), fail)
	defer func() {
		t.inflight.Delete(string(id))
		t.late.Delete(string(id))
		t.failCall.Delete(string(id))
	}()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.url, bytes.NewReader(msg))
	if err != nil {
		return nil, err
	}
	t.setHeaders(req, method, raw)
	resp, err := t.do(req, msg)
	if err != nil {
		if res, ok, err := t.answeredElsewhere(ctx, id); ok {
			return res, err
		}
		if ctx.Err() != nil {
			t.cancelled(id)
			return nil, context.Cause(ctx)
		}
		return nil, t.sendError(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		err := t.statusError(resp)
		if method == mcp.MethodInitialize && t.mayFallBack(err) {
			// Perhaps a 2024-11-05 HTTP+SSE server (httpclient_sse.go).
			return t.fallBack(ctx, err, id, msg)
		}
		return nil, err
	}
	if method == mcp.MethodInitialize {
		if sid := resp.Header.Get(mcp.HeaderSessionID); sid != "" {
			t.mu.Lock()
			t.sessionID = sid
			t.mu.Unlock()
		}
	}
	var res json.RawMessage
	if isEventStream(resp) {
		res, err = t.readStream(ctx, resp.Body, id)
	} else {
		var body []byte
		body, err = readLimited(resp.Body, t.opts.MaxMessageBytes)
		if err == nil {
			res, err = t.response(body, id)
		}
	}
	if err != nil {
		if res, ok, err := t.answeredElsewhere(ctx, id); ok {
			return res, err
		}
	}
	if err != nil && ctx.Err() != nil {
		t.cancelled(id)
		return nil, context.Cause(ctx)
	}
	return res, err
}

// errAnsweredElsewhere ends a call's own request once its response has
// come on another stream (the standalone GET stream, say): the call need
// not wait for its own stream to end.
var errAnsweredElsewhere = errors.New("mcp: answered on another stream")

// answeredElsewhere returns the response to id that came on another
// stream, when that is what ended the call's request.
func (t *httpTransport) answeredElsewhere(ctx context.Context, id jsonrpc.ID) (json.RawMessage, bool, error) {
	if !errors.Is(context.Cause(ctx), errAnsweredElsewhere) {
		return nil, false, nil
	}
	data, ok := t.late.LoadAndDelete(string(id))
	if !ok {
		return nil, false, nil
	}
	res, err := t.response(data.([]byte), id)
	return res, true, err
}

// cancelled tells a legacy server that a call was abandoned: for it,
// "disconnection SHOULD NOT be treated as cancellation" (2025-11-25
// transports). A modern server took the closed stream as the cancel.
func (t *httpTransport) cancelled(id jsonrpc.ID) {
	t.mu.Lock()
	legacy := t.era == mcp.Legacy
	t.mu.Unlock()
	if !legacy {
		return
	}
	t.goBackground(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		t.Notify(ctx, mcp.MethodCancelled, map[string]any{"requestId": json.RawMessage(id), "reason": "cancelled by the caller"})
	})
}

func readLimited(r io.Reader, limit int) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, int64(limit)+1))
	if err != nil {
		return nil, fmt.Errorf("%w: reading the response: %v", ErrHTTPTransport, err)
	}
	if len(b) > limit {
		return nil, fmt.Errorf("mcp: the response exceeds %d bytes", limit)
	}
	return b, nil
}

// response reads the JSON-RPC response to id.
func (t *httpTransport) response(body []byte, id jsonrpc.ID) (json.RawMessage, error) {
	body = bytes.TrimSpace(body)
	msg, err := jsonrpc.Decode(body, nil)
	if err != nil {
		// An error "MUST carry the request's id except in error cases
		// where the ID could not be read": one without an id, answering
		// our only request on this POST, is still its answer.
		if e := idlessError(body); e != nil {
			return nil, e
		}
		return nil, fmt.Errorf("mcp: malformed response: %w", err)
	}
	// body is the caller's to give: the result is handed out as it lies.
	return answerOf(&msg, id, false)
}

// answerOf returns what a decoded response says to request id. With
// borrowed, the message's bytes are a reused buffer (an event stream's),
// and the result is copied out of it.
func answerOf(msg *jsonrpc.Message, id jsonrpc.ID, borrowed bool) (json.RawMessage, error) {
	if !msg.Kind.IsResponse() || string(msg.ID) != string(id) {
		return nil, fmt.Errorf("mcp: the response does not answer request %s", id)
	}
	if msg.Kind == jsonrpc.KindError {
		e, err := jsonrpc.ParseError(msg.Error)
		if err != nil {
			return nil, fmt.Errorf("mcp: malformed error response: %w", err)
		}
		return nil, e
	}
	if borrowed {
		return json.RawMessage(bytes.Clone(msg.Result)), nil
	}
	return json.RawMessage(msg.Result[:len(msg.Result):len(msg.Result)]), nil
}

// readStream reads an event stream until the response to id. Lines end
// with LF, CR or CRLF; comment lines (keep-alives), event names and unknown
// fields are ignored. A legacy server may end the stream after an event
// with an id and expect the client to resume it with GET and Last-Event-ID
// after the retry interval (2025-11-25 transports, Resumability); that is
// done up to maxResumes times.
func (t *httpTransport) readStream(ctx context.Context, body io.Reader, id jsonrpc.ID) (json.RawMessage, error) {
	lastID, retry := "", time.Second
	for resumes := 0; ; resumes++ {
		res, done, err := t.scanEvents(body, id, &lastID, &retry, ctx.Done())
		if done || err != nil {
			return res, err
		}
		if data, ok := t.late.LoadAndDelete(string(id)); ok {
			return t.response(data.([]byte), id)
		}
		t.mu.Lock()
		legacy := t.era == mcp.Legacy || t.era == mcp.EraUnknown
		t.mu.Unlock()
		if lastID == "" || !legacy || resumes >= maxResumes {
			return nil, fmt.Errorf("%w: the event stream ended before the response", ErrHTTPTransport)
		}
		select {
		case <-time.After(retry):
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
		resp, err := t.resume(ctx, lastID)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		body = resp.Body
	}
}

const maxResumes = 10

// resume asks a legacy server for the rest of a stream.
func (t *httpTransport) resume(ctx context.Context, lastID string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, t.url, nil)
	if err != nil {
		return nil, err
	}
	t.setHeaders(req, "", nil)
	req.Header.Del("Content-Type")
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Last-Event-ID", lastID)
	resp, err := t.do(req, nil)
	if err != nil {
		if ctx.Err() != nil {
			return nil, context.Cause(ctx)
		}
		var ae *authError
		if errors.As(err, &ae) {
			return nil, err
		}
		return nil, fmt.Errorf("%w: resuming the event stream: %v", ErrHTTPTransport, err)
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		return nil, t.statusError(resp)
	}
	return resp, nil
}

// scanEvents reads one stream body; done reports the response to id.
// Only message events are messages: an event of another type (a 2024-11-05
// endpoint event, say) is not one, as EventSource clients have it. stop
// ends the stream's reader (reply).
func (t *httpTransport) scanEvents(body io.Reader, id jsonrpc.ID, lastID *string, retry *time.Duration, stop <-chan struct{}) (json.RawMessage, bool, error) {
	r := t.newEventReader(body, lastID, retry)
	for {
		name, data, err := r.next()
		if err == io.EOF {
			return nil, false, nil // the stream ended without the response
		}
		if err != nil {
			return nil, false, err
		}
		if name != eventMessage {
			continue
		}
		if res, done, err := t.event(data, id, stop); done {
			return res, true, err
		}
	}
}

// Event types that mean something to MCP: messages, and the 2024-11-05
// HTTP+SSE server's endpoint.
const (
	eventMessage  = "message"
	eventEndpoint = "endpoint"
)

// eventReader reads an event stream (WHATWG server-sent events) one event
// at a time. Lines end with LF, CR or CRLF; comment lines (keep-alives)
// and unknown fields are ignored; an event with no data is not
// dispatched, and one cut off by the end of the stream is dropped. The id
// and retry fields are kept in *lastID and *retry as they come.
type eventReader struct {
	sc     *bufio.Scanner
	limit  int
	first  bool
	data   []byte
	name   []byte
	lastID *string
	retry  *time.Duration
}

func (t *httpTransport) newEventReader(body io.Reader, lastID *string, retry *time.Duration) eventReader {
	sc := bufio.NewScanner(body)
	// A small first buffer: most events are small, and the scanner grows
	// it (up to the limit) for the ones that are not.
	sc.Buffer(make([]byte, 0, 4<<10), t.opts.MaxMessageBytes+64)
	sc.Split(splitEventLines)
	return eventReader{sc: sc, limit: t.opts.MaxMessageBytes, first: true, lastID: lastID, retry: retry}
}

// next returns the next event: its type (message when it names none) and
// its data, which is valid until the next call. The end of the stream is
// io.EOF; a broken stream is an ErrHTTPTransport error.
func (r *eventReader) next() (string, []byte, error) {
	r.data, r.name = r.data[:0], r.name[:0]
	hasData := false
	for r.sc.Scan() {
		line := r.sc.Bytes()
		if r.first {
			line = bytes.TrimPrefix(line, []byte("\xEF\xBB\xBF"))
			r.first = false
		}
		if len(line) == 0 { // dispatch
			if hasData && len(r.data) > 0 {
				return eventType(r.name), r.data, nil
			}
			r.data, r.name, hasData = r.data[:0], r.name[:0], false
			continue
		}
		if line[0] == ':' {
			continue
		}
		field, value, _ := bytes.Cut(line, []byte(":"))
		value = bytes.TrimPrefix(value, []byte(" "))
		switch string(field) {
		case "data":
			if hasData {
				r.data = append(r.data, '\n')
			}
			if len(r.data)+len(value) > r.limit {
				return "", nil, fmt.Errorf("mcp: an event exceeds %d bytes", r.limit)
			}
			r.data, hasData = append(r.data, value...), true
		case "event":
			r.name = append(r.name[:0], value...)
		case "id":
			if !bytes.ContainsRune(value, 0) {
				*r.lastID = string(value)
			}
		case "retry":
			if ms, err := strconv.Atoi(string(value)); err == nil && ms >= 0 {
				// Clamped before it is multiplied: a server's retry of
				// 10^13 ms would overflow into a negative delay, and a
				// reconnection loop without a pause.
				*r.retry = time.Duration(min(ms, maxRetryMillis)) * time.Millisecond
			}
		}
	}
	if err := r.sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return "", nil, fmt.Errorf("mcp: an event line exceeds %d bytes", r.limit)
		}
		return "", nil, fmt.Errorf("%w: reading the event stream: %v", ErrHTTPTransport, err)
	}
	return "", nil, io.EOF
}

// maxRetryMillis bounds the reconnection delay a server may ask for (the
// SSE retry field): an hour.
const maxRetryMillis = 3_600_000

// eventType names an event without allocating for the types MCP uses.
func eventType(name []byte) string {
	switch string(name) {
	case "", eventMessage:
		return eventMessage
	case eventEndpoint:
		return eventEndpoint
	}
	return string(name)
}

// splitEventLines splits at LF, CR or CRLF, as event streams may.
func splitEventLines(data []byte, atEOF bool) (int, []byte, error) {
	i := bytes.IndexAny(data, "\r\n")
	switch {
	case i < 0 && atEOF && len(data) > 0:
		return len(data), data, nil
	case i < 0:
		return 0, nil, nil
	case data[i] == '\n':
		return i + 1, data[:i], nil
	case i+1 < len(data):
		if data[i+1] == '\n' {
			return i + 2, data[:i], nil
		}
		return i + 1, data[:i], nil
	case atEOF:
		return i + 1, data[:i], nil
	}
	return 0, nil, nil // a CR at the end: wait for a possible LF
}

// event handles one event's data; done reports the response to id. stop
// is closed when the stream's reader gives up (reply).
func (t *httpTransport) event(data []byte, id jsonrpc.ID, stop <-chan struct{}) (json.RawMessage, bool, error) {
	msg, err := jsonrpc.Decode(data, nil)
	if err != nil {
		return nil, false, nil // not a message: ignored, like a stray line on stdio
	}
	switch msg.Kind {
	case jsonrpc.KindNotification:
		if t.onNotify != nil {
			t.onNotify(msg.MethodName(), json.RawMessage(bytes.Clone(msg.Params)))
		}
	case jsonrpc.KindRequest:
		// A legacy server asking us something (sampling, elicitation,
		// roots): answered on a POST of its own.
		t.reply(id, jsonrpc.ID(bytes.Clone(msg.ID)), msg.MethodName(), json.RawMessage(bytes.Clone(msg.Params)), t.url, stop)
	case jsonrpc.KindResult, jsonrpc.KindError:
		if string(msg.ID) != string(id) {
			// A legacy server may answer a call on another stream (its
			// standalone GET stream, a resumed one): kept for the call to
			// find, and the call's own request ended, so that it finds it
			// now rather than when its own stream ends.
			if _, ok := t.inflight.Load(string(msg.ID)); ok {
				t.late.Store(string(msg.ID), bytes.Clone(data))
				if f, ok := t.failCall.Load(string(msg.ID)); ok {
					f.(context.CancelCauseFunc)(errAnsweredElsewhere)
				}
			}
			return nil, false, nil
		}
		// Decoded once: the event's message is the answer.
		res, err := answerOf(&msg, id, true)
		return res, true, err
	}
	return nil, false, nil
}

// AnswerRefusedError ends a call when the server asked something on the
// call's event stream and then did not accept the answer: the POST that
// carried it got a status other than 200 or 202 (a stateless mcp-go server
// answers 400: it has no session to route the answer to), or no response
// at all. The server will not go on with the call, so waiting for its
// result would only end at the caller's deadline. Err is the
// *HTTPStatusError, or an ErrHTTPTransport error.
type AnswerRefusedError struct {
	Method string // the server's request: sampling/createMessage, elicitation/create, ...
	Err    error
}

func (e *AnswerRefusedError) Error() string {
	return fmt.Sprintf("mcp: the server did not accept the answer to its %s request: %v", e.Method, e.Err)
}

func (e *AnswerRefusedError) Unwrap() error { return e.Err }

// reply answers a server request in the background: ping with {} ("The
// receiver MUST respond promptly with an empty response"), anything else
// through OnInput, or with -32601 without it. call is the id of the call
// on whose stream the request came ("" for the standalone stream): when
// the server refuses the answer, that call fails with an
// *AnswerRefusedError. The answer is POSTed to to: the MCP endpoint, or an
// HTTP+SSE server's message endpoint.
//
// At most MaxServerRequests answers are in flight: reply, called by the
// stream's reader, waits for a place, so that the server's requests cost
// a bounded number of goroutines and POSTs however fast it sends them
// (the stream is read no faster than they are answered). stop (the
// stream's end) or the session's close ends the wait, and the request
// is left unanswered: nobody would read the answer.
func (t *httpTransport) reply(call, id jsonrpc.ID, method string, params json.RawMessage, to string, stop <-chan struct{}) {
	select {
	case t.answering <- struct{}{}:
	case <-t.base.Done():
		return
	case <-stop:
		return
	default:
		// Every place is taken (answers waiting on a person, say). This
		// one is answered at once, on the reader's goroutine, rather than
		// waited for: a reader that stopped for a place could stop the
		// very stream that carries what the waiting answers need.
		if method == mcp.MethodPing {
			t.answer(call, id, method, to, map[string]any{}, nil)
			return
		}
		t.answer(call, id, method, to, nil, jsonrpc.NewError(jsonrpc.CodeServerBusy,
			fmt.Sprintf("the client is answering %d of the server's requests already (ClientOptions.MaxServerRequests)", cap(t.answering)), nil))
		return
	}
	if !t.goBackground(func() {
		defer func() { <-t.answering }()
		var res any
		var err error
		switch {
		case method == mcp.MethodPing:
			res = map[string]any{}
		case t.onRequest != nil:
			res, err = t.onRequest(t.base, method, params)
		default:
			err = jsonrpc.Errorf(jsonrpc.CodeMethodNotFound, "method not found: %s", method)
		}
		t.answer(call, id, method, to, res, err)
	}) {
		<-t.answering
	}
}

// answer POSTs the answer to the server's request id (res, or err) to
// to; when the server refuses it, the call on whose stream the request
// came fails with AnswerRefusedError.
func (t *httpTransport) answer(call, id jsonrpc.ID, method, to string, res any, err error) {
	var body []byte
	raw, merr := jsonrpc.RawValue(res)
	var je *jsonrpc.Error
	switch {
	case err != nil && errors.As(err, &je):
		body = jsonrpc.AppendErrorResponse(nil, id, je)
	case err != nil:
		body = jsonrpc.AppendErrorResponse(nil, id, jsonrpc.NewError(jsonrpc.CodeInternalError, err.Error(), nil))
	case merr != nil:
		body = jsonrpc.AppendErrorResponse(nil, id, jsonrpc.NewError(jsonrpc.CodeInternalError, merr.Error(), nil))
	default:
		body = append(append(append(append([]byte(`{"jsonrpc":"2.0","id":`), id...), `,"result":`...), raw...), '}')
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, rerr := http.NewRequestWithContext(ctx, http.MethodPost, to, bytes.NewReader(body))
	if rerr != nil {
		return
	}
	t.setHeaders(req, "", nil)
	var refused error
	if resp, derr := t.do(req, body); derr != nil {
		refused = t.sendError(derr)
	} else {
		if resp.StatusCode != http.StatusAccepted && resp.StatusCode != http.StatusOK {
			refused = t.statusError(resp)
		}
		resp.Body.Close()
	}
	if refused == nil || call == "" {
		return
	}
	if f, ok := t.failCall.Load(string(call)); ok {
		f.(context.CancelCauseFunc)(&AnswerRefusedError{Method: method, Err: refused})
	}
}

// idlessError reads an error response whose id is absent or null.
func idlessError(body []byte) *jsonrpc.Error {
	var m struct {
		ID    json.RawMessage `json:"id"`
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(body, &m) != nil || len(m.Error) == 0 || (len(m.ID) > 0 && string(m.ID) != "null") {
		return nil
	}
	e, err := jsonrpc.ParseError(m.Error)
	if err != nil {
		return nil
	}
	return e
}

func (t *httpTransport) statusError(resp *http.Response) error {
	e := &HTTPStatusError{StatusCode: resp.StatusCode, Status: resp.Status}
	if resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden {
		e.Authenticate = resp.Header.Get("WWW-Authenticate")
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	body = bytes.TrimSpace(body)
	if msg, err := jsonrpc.Decode(body, nil); err == nil && msg.Kind == jsonrpc.KindError {
		if je, err := jsonrpc.ParseError(msg.Error); err == nil {
			e.RPC = je
			return e
		}
	}
	if je := idlessError(body); je != nil {
		e.RPC = je
		return e
	}
	s := string(body)
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	e.Body = strings.ToValidUTF8(s, "?")
	return e
}

// authError is an Authorizer's own failure: the call fails with it, not
// as a transport failure.
type authError struct{ err error }

func (e *authError) Error() string { return "mcp: authorizing the request: " + e.err.Error() }
func (e *authError) Unwrap() error { return e.err }

// sendError is what a call reports when do returned no response.
func (t *httpTransport) sendError(err error) error {
	var ae *authError
	if errors.As(err, &ae) {
		return err
	}
	return fmt.Errorf("%w: %v", ErrHTTPTransport, err)
}

// do sends req (whose body, if any, is body) with its credentials. With an
// Authorizer, a 401 or 403 answer is handed to it, and the request is sent
// again, with the credentials it then gives, as long as it asks to and at
// most MaxAuthAttempts times in all; the last answer is returned as it is.
func (t *httpTransport) do(req *http.Request, body []byte) (*http.Response, error) {
	a := t.opts.Authorizer
	if a == nil {
		return t.opts.Client.Do(req)
	}
	for attempt := 1; ; attempt++ {
		if err := a.Authorize(req); err != nil {
			return nil, &authError{err}
		}
		resp, err := t.opts.Client.Do(req)
		if err != nil || attempt == MaxAuthAttempts ||
			(resp.StatusCode != http.StatusUnauthorized && resp.StatusCode != http.StatusForbidden) {
			return resp, err
		}
		retry, err := a.Refused(req.Context(), req, resp)
		if err != nil {
			resp.Body.Close()
			return nil, &authError{err}
		}
		if !retry {
			return resp, nil
		}
		// The refusal is spent: its connection goes back to the pool.
		io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
		next := req.Clone(req.Context())
		if body != nil {
			next.Body = io.NopCloser(bytes.NewReader(body))
			next.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
		}
		req = next
	}
}
