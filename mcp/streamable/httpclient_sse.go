package streamable

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentwire/agentwire/jsonrpc"
	"github.com/agentwire/agentwire/mcp"
	"github.com/agentwire/agentwire/mcp/host"
)

// The client side of the 2024-11-05 HTTP+SSE transport (2024-11-05
// transports, HTTP with SSE), reached through the backwards-compatibility
// procedure of every later revision: "Attempt to POST an InitializeRequest
// to the server URL ... If it fails with an HTTP 4xx status code (e.g.,
// 405 Method Not Allowed or 404 Not Found): Issue a GET request to the
// server URL, expecting that this will open an SSE stream and return an
// endpoint event as the first event." 2025-11-25 narrows the statuses to
// 400, 404 and 405, and 2026-07-28 adds "and the response body is not a
// recognized modern JSON-RPC error", which is what Evidence's
// EvidenceNotModern says.
//
// The server then sends everything, answers included, as message events on
// that one stream, and takes every client message as a POST to the
// endpoint. The specification says nothing of the POST's status (the SDKs
// answer 202), of sessions beyond the endpoint (a query parameter, by
// convention, which is why the endpoint is kept opaque), or of resumption:
// when the stream ends, the session has ended, and the next call starts a
// new one on a new stream.

// sseLink is one event stream of an HTTP+SSE server: the session it
// carries, where that session's messages are POSTed, and the calls
// waiting for their answers on it.
type sseLink struct {
	endpoint string             // the POST URL, resolved against the server URL
	cancel   context.CancelFunc // closes the GET
	done     chan struct{}      // closed once the stream has ended
	err      error              // why it ended (an ErrHTTPTransport error); set before done closes

	mu      sync.Mutex
	ended   bool
	pending map[string]chan []byte // call id -> its answer's event data
}

func (l *sseLink) alive() bool {
	select {
	case <-l.done:
		return false
	default:
		return true
	}
}

// await registers call id for its answer; at most max calls wait at once.
func (l *sseLink) await(id jsonrpc.ID, max int) (chan []byte, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ended {
		return nil, l.err
	}
	if len(l.pending) >= max {
		return nil, fmt.Errorf("%w (%d)", ErrTooManyCalls, max)
	}
	ch := make(chan []byte, 1)
	l.pending[string(id)] = ch
	return ch, nil
}

func (l *sseLink) forget(id jsonrpc.ID) {
	l.mu.Lock()
	delete(l.pending, string(id))
	l.mu.Unlock()
}

// deliver hands a response to the call waiting for it. One that no call
// waits for (answered already, abandoned, or never asked) is dropped: the
// stream costs nothing that the server alone decides.
func (l *sseLink) deliver(id []byte, data []byte) {
	l.mu.Lock()
	ch, ok := l.pending[string(id)]
	if ok {
		delete(l.pending, string(id))
	}
	l.mu.Unlock()
	if ok {
		ch <- bytes.Clone(data) // buffered, and sent once: never blocks
	}
}

// end closes the stream for good; every call still waiting fails with err.
func (l *sseLink) end(err error) {
	l.mu.Lock()
	if l.ended {
		l.mu.Unlock()
		return
	}
	l.ended, l.err = true, err
	l.pending = nil
	l.mu.Unlock()
	l.cancel()
	close(l.done)
}

// isSSE reports whether the server has been found to speak HTTP+SSE.
func (t *httpTransport) isSSE() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.sse
}

// mayFallBack reports whether initialize's failure may mean an HTTP+SSE
// server: 400, 404 or 405 without a JSON-RPC error, from a server not
// known to be modern.
func (t *httpTransport) mayFallBack(err error) bool {
	t.mu.Lock()
	era := t.era
	t.mu.Unlock()
	return era != mcp.Modern && t.Evidence(err) == host.EvidenceNotModern
}

// fallBack tries the server as an HTTP+SSE one after initialize (id, msg)
// failed with initErr: with its event stream open, it sends initialize
// again, to the endpoint, and returns the answer. When no HTTP+SSE server
// answers the GET, the call fails with initErr, and the reason the
// fallback failed.
func (t *httpTransport) fallBack(ctx context.Context, initErr error, id jsonrpc.ID, msg []byte) (json.RawMessage, error) {
	l, err := t.dialSSE(ctx)
	if err != nil {
		return nil, fmt.Errorf("%w (nor is it a 2024-11-05 HTTP+SSE server: %v)", initErr, err)
	}
	t.mu.Lock()
	t.sse, t.link = true, l
	t.mu.Unlock()
	return t.callOnLink(ctx, l, id, msg)
}

// dialSSE opens an HTTP+SSE server's event stream and reads its endpoint
// event, within ctx and the probe timeout. The stream then lasts until
// the server ends it, or the transport closes.
func (t *httpTransport) dialSSE(ctx context.Context) (*sseLink, error) {
	base, err := url.Parse(t.url)
	if err != nil {
		return nil, err
	}
	rctx, cancel := context.WithCancel(t.base)
	req, err := http.NewRequestWithContext(rctx, http.MethodGet, t.url, nil)
	if err != nil {
		cancel()
		return nil, err
	}
	t.setHeaders(req, "", nil)
	req.Header.Del("Content-Type")
	req.Header.Set("Accept", "text/event-stream")
	// Until the endpoint has come, the caller's context and the probe
	// timeout can end the GET; after, only the session.
	var expired atomic.Bool
	timer := time.AfterFunc(t.probeTimeout, func() {
		expired.Store(true)
		cancel()
	})
	stop := context.AfterFunc(ctx, cancel)
	failed := func(err error) (*sseLink, error) {
		timer.Stop()
		stop()
		cancel()
		switch {
		case expired.Load():
			return nil, fmt.Errorf("%w: no endpoint event within %v", ErrHTTPTransport, t.probeTimeout)
		case ctx.Err() != nil:
			return nil, context.Cause(ctx)
		}
		return nil, err
	}
	resp, err := t.do(req, nil)
	if err != nil {
		return failed(t.sendError(err))
	}
	if resp.StatusCode != http.StatusOK {
		err := t.statusError(resp)
		resp.Body.Close()
		return failed(fmt.Errorf("GET answered %w", err))
	}
	if !isEventStream(resp) {
		resp.Body.Close()
		return failed(fmt.Errorf("GET answered %s, not an event stream", resp.Header.Get("Content-Type")))
	}
	lastID, retry := "", time.Duration(0)
	r := t.newEventReader(resp.Body, &lastID, &retry)
	name, data, err := r.next()
	if err == io.EOF {
		err = errors.New("the event stream ended before its endpoint event")
	}
	if err == nil && name != eventEndpoint {
		err = fmt.Errorf("the first event is %q, not endpoint", name)
	}
	var endpoint string
	if err == nil {
		endpoint, err = resolveEndpoint(base, string(data))
	}
	// Both stopped, or one of them has cancelled the GET.
	waited := timer.Stop()
	waited = stop() && waited
	if err != nil || !waited {
		resp.Body.Close()
		return failed(err)
	}
	l := &sseLink{endpoint: endpoint, cancel: cancel, done: make(chan struct{}), pending: map[string]chan []byte{}}
	if !t.goBackground(func() { t.readLink(l, &r, resp.Body) }) {
		resp.Body.Close()
		cancel()
		return nil, ErrSessionClosed
	}
	return l, nil
}

// resolveEndpoint resolves an endpoint event's data against the server
// URL (RFC 3986; the servers send an absolute path, a relative reference
// or a full URL) and requires the result to have the URL's scheme, host
// and port: the messages carry the client's credentials, which must never
// leave the origin they were given for.
func resolveEndpoint(base *url.URL, data string) (string, error) {
	data = strings.TrimSpace(data)
	if data == "" {
		return "", errors.New("the endpoint event is empty")
	}
	ep, err := base.Parse(data)
	if err != nil {
		return "", fmt.Errorf("the endpoint event's URI does not parse: %v", err)
	}
	if origin(ep) != origin(base) || ep.User.String() != base.User.String() {
		return "", fmt.Errorf("the endpoint %s://%s is not on the server's origin %s://%s", ep.Scheme, ep.Host, base.Scheme, base.Host)
	}
	ep.Fragment, ep.RawFragment = "", ""
	return ep.String(), nil
}

// origin is scheme://host:port, lower-cased, with the scheme's default port
// spelled out.
func origin(u *url.URL) string {
	scheme, port := strings.ToLower(u.Scheme), u.Port()
	if port == "" {
		switch scheme {
		case "http":
			port = "80"
		case "https":
			port = "443"
		}
	}
	return scheme + "://" + net.JoinHostPort(strings.ToLower(u.Hostname()), port)
}

// readLink reads an HTTP+SSE server's event stream until it ends: answers
// go to their calls, notifications to onNotify (on this goroutine, so that
// a call's progress keeps its place before its answer), the server's
// requests (mcp-go's keep-alive pings among them) are answered by POST, at
// most MaxServerRequests at once (reading waits for a place). The
// end of the stream ends the session: the calls waiting fail with an
// ErrHTTPTransport error, and the next call starts a new session.
func (t *httpTransport) readLink(l *sseLink, r *eventReader, body io.ReadCloser) {
	defer body.Close()
	for {
		name, data, err := r.next()
		switch {
		case err == io.EOF:
			l.end(fmt.Errorf("%w: the HTTP+SSE server ended its event stream", ErrHTTPTransport))
			return
		case errors.Is(err, ErrHTTPTransport):
			l.end(err)
			return
		case err != nil:
			l.end(fmt.Errorf("%w: the HTTP+SSE event stream: %v", ErrHTTPTransport, err))
			return
		}
		if name != eventMessage {
			continue // another endpoint event, or one of no meaning to MCP
		}
		msg, err := jsonrpc.Decode(data, nil)
		if err != nil {
			continue // not a message: ignored, like a stray line on stdio
		}
		switch msg.Kind {
		case jsonrpc.KindNotification:
			if t.onNotify != nil {
				t.onNotify(msg.MethodName(), json.RawMessage(bytes.Clone(msg.Params)))
			}
		case jsonrpc.KindRequest:
			t.reply("", jsonrpc.ID(bytes.Clone(msg.ID)), msg.MethodName(), json.RawMessage(bytes.Clone(msg.Params)), l.endpoint, l.done)
		case jsonrpc.KindResult, jsonrpc.KindError:
			l.deliver(msg.ID, data)
		}
	}
}

// onceSSE sends one request to an HTTP+SSE server and waits for its answer
// on the event stream.
func (t *httpTransport) onceSSE(ctx context.Context, method string, params any, onID func(jsonrpc.ID)) (json.RawMessage, error) {
	id := jsonrpc.Int64ID(t.nextID.Add(1))
	msg, _, err := t.encode(id, method, params)
	if err != nil {
		return nil, err
	}
	if onID != nil {
		onID(id)
	}
	l, err := t.linkFor(ctx, method)
	if err != nil {
		return nil, err
	}
	return t.callOnLink(ctx, l, id, msg)
}

// linkFor returns the event stream a request goes on: a new one for
// initialize (a new session), the current one for anything else, or, when
// the server has ended it, a new one in a new session, started through the
// session's own re-initialization.
func (t *httpTransport) linkFor(ctx context.Context, method string) (*sseLink, error) {
	if method == mcp.MethodInitialize {
		l, err := t.dialSSE(ctx)
		if err != nil {
			return nil, err
		}
		t.mu.Lock()
		old := t.link
		t.link = l
		t.mu.Unlock()
		if old != nil {
			old.end(fmt.Errorf("%w: replaced by a new HTTP+SSE session", ErrHTTPTransport))
		}
		return l, nil
	}
	t.mu.Lock()
	l := t.link
	t.mu.Unlock()
	if l != nil && l.alive() {
		return l, nil
	}
	return t.renewLink(ctx, l)
}

// renewLink starts a new HTTP+SSE session in place of the one whose stream
// (stale) has ended; calls that meet the end at once start one between
// them.
func (t *httpTransport) renewLink(ctx context.Context, stale *sseLink) (*sseLink, error) {
	select {
	case t.renew <- struct{}{}:
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
	defer func() { <-t.renew }()
	t.mu.Lock()
	l := t.link
	t.mu.Unlock()
	if l != stale && l != nil && l.alive() {
		return l, nil // another call has started it
	}
	why := errors.New("no HTTP+SSE event stream")
	if stale != nil {
		why = stale.err
	}
	if t.reinitialize == nil {
		return nil, why
	}
	if err := t.reinitialize(ctx); err != nil {
		return nil, fmt.Errorf("mcp: %v, and a new HTTP+SSE session could not be started: %w", why, err)
	}
	t.mu.Lock()
	l = t.link
	t.mu.Unlock()
	if l == nil || !l.alive() {
		return nil, fmt.Errorf("%w: the new HTTP+SSE session's event stream ended at once", ErrHTTPTransport)
	}
	return l, nil
}

// callOnLink POSTs request id (msg) to the link's endpoint and waits for
// its answer on the link's stream. Cancelling ctx sends
// notifications/cancelled: closing a POST means nothing to this
// transport's servers.
func (t *httpTransport) callOnLink(ctx context.Context, l *sseLink, id jsonrpc.ID, msg []byte) (json.RawMessage, error) {
	answer, err := l.await(id, t.opts.MaxPendingCalls)
	if err != nil {
		return nil, err
	}
	defer l.forget(id)
	if err := t.postToLink(ctx, l, msg); err != nil {
		if ctx.Err() != nil {
			t.cancelled(id)
			return nil, context.Cause(ctx)
		}
		return nil, err
	}
	select {
	case data := <-answer:
		return t.response(data, id)
	case <-l.done:
		select {
		case data := <-answer: // came just before the end
			return t.response(data, id)
		default:
		}
		return nil, l.err
	case <-ctx.Done():
		t.cancelled(id)
		return nil, context.Cause(ctx)
	}
}

// postToLink POSTs one message to the link's endpoint; 200 and 202 accept
// it, whatever the body (the answer comes on the stream). A 404 means the
// server no longer knows the session: the link is ended, so that the next
// request starts a new one.
func (t *httpTransport) postToLink(ctx context.Context, l *sseLink, msg []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, l.endpoint, bytes.NewReader(msg))
	if err != nil {
		return err
	}
	t.setHeaders(req, "", nil)
	resp, err := t.do(req, msg)
	if err != nil {
		return t.sendError(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusAccepted {
		err := t.statusError(resp)
		if resp.StatusCode == http.StatusNotFound {
			l.end(fmt.Errorf("%w: the HTTP+SSE server no longer knows the session (%v)", ErrHTTPTransport, err))
		}
		return err
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	return nil
}

// notifySSE sends a notification to an HTTP+SSE server. After the stream
// has ended, a new session is started first, except for the
// notifications that belong to the session they were meant for:
// initialized (part of starting one) and cancelled (of a call the end has
// failed already).
func (t *httpTransport) notifySSE(ctx context.Context, method string, msg []byte) error {
	t.mu.Lock()
	l := t.link
	t.mu.Unlock()
	if l == nil || !l.alive() {
		if l != nil && (method == mcp.MethodInitialized || method == mcp.MethodCancelled) {
			return l.err
		}
		var err error
		if l, err = t.renewLink(ctx, l); err != nil {
			return err
		}
	}
	return t.postToLink(ctx, l, msg)
}
