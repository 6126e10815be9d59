package mcp

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentwire/agentwire/client"
	"github.com/agentwire/agentwire/jsonrpc"
	"github.com/agentwire/agentwire/process"
)

// HTTPClientOptions configures a session over Streamable HTTP. The zero
// value uses http.DefaultClient's transport with no extra headers.
type HTTPClientOptions struct {
	// Client sends the requests. Nil means a client with no overall
	// timeout (event streams last as long as their calls).
	Client *http.Client
	// Token, when set, is sent as "Authorization: Bearer TOKEN" on every
	// request.
	Token string
	// Header is added to every request.
	Header http.Header
	// MaxMessageBytes bounds one response or event. Default 16 MiB.
	MaxMessageBytes int
}

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

// ConnectHTTP negotiates with a Streamable HTTP server at url (SPEC T2):
// server/discover first; a result or a recognized modern error is modern;
// a legacy server's refusal (a JSON-RPC error, or 400/404/405 without a
// modern error in the body) falls back to initialize. 401, 403, 5xx,
// timeouts and network errors are errors, never legacy evidence (research
// §3.1, "HTTP era detection").
func ConnectHTTP(ctx context.Context, url string, opts *ClientOptions, hopts *HTTPClientOptions) (*Session, error) {
	s := &Session{opts: opts.resolve(), overHTTP: true}
	if s.opts.CacheKey == "" {
		s.opts.CacheKey = url
	}
	t := &httpTransport{url: url, onNotify: s.inbound}
	if hopts != nil {
		t.opts = *hopts
	}
	if t.opts.Client == nil {
		t.opts.Client = &http.Client{}
	}
	if t.opts.MaxMessageBytes <= 0 {
		t.opts.MaxMessageBytes = 16 << 20
	}
	s.t = t
	if err := s.connect(ctx); err != nil {
		return nil, s.connectFailed(err)
	}
	return s, nil
}

// httpTransport sends each message as a POST (2026-07-28 transports,
// Sending): a request's answer is a JSON object or an event stream whose
// notifications are passed to onNotify; cancelling a call closes its
// stream, which is the cancellation.
type httpTransport struct {
	url      string
	opts     HTTPClientOptions
	onNotify func(method string, params json.RawMessage)
	nextID   atomic.Int64
	bg       sync.WaitGroup // cancellations and replies sent in the background

	mu        sync.Mutex
	era       string
	version   string // the legacy version, for MCP-Protocol-Version
	sessionID string // a legacy server's Mcp-Session-Id
}

func (t *httpTransport) negotiated(era, version string) {
	t.mu.Lock()
	t.era, t.version = era, version
	t.mu.Unlock()
}

func (t *httpTransport) restart(context.Context) error { return client.ErrNotRestartable }
func (t *httpTransport) fresh() bool                   { return false }

func (t *httpTransport) close() process.ShutdownResult {
	t.mu.Lock()
	sid := t.sessionID
	t.mu.Unlock()
	if sid != "" {
		// A legacy session ends with DELETE (a server MAY answer 405).
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		if req, err := http.NewRequestWithContext(ctx, http.MethodDelete, t.url, nil); err == nil {
			t.setHeaders(req, "", nil)
			if resp, err := t.opts.Client.Do(req); err == nil {
				resp.Body.Close()
			}
		}
		cancel()
	}
	t.bg.Wait()
	t.opts.Client.CloseIdleConnections()
	return process.ShutdownResult{}
}

// envelope is what the transport reads from params to mirror in headers.
type envelope struct {
	Meta *struct {
		ProtocolVersion string `json:"io.modelcontextprotocol/protocolVersion"`
	} `json:"_meta"`
	Name string `json:"name"`
	URI  string `json:"uri"`
}

func (t *httpTransport) setHeaders(req *http.Request, method string, params []byte) {
	h := req.Header
	h.Set("Content-Type", "application/json")
	h.Set("Accept", "application/json, text/event-stream")
	for k, v := range t.opts.Header {
		h[k] = v
	}
	if t.opts.Token != "" {
		h.Set("Authorization", "Bearer "+t.opts.Token)
	}
	t.mu.Lock()
	version, sid := t.version, t.sessionID
	t.mu.Unlock()
	if sid != "" {
		h.Set(HeaderSessionID, sid)
	}
	var env envelope
	if len(params) > 0 {
		json.Unmarshal(params, &env)
	}
	if env.Meta != nil && env.Meta.ProtocolVersion != "" {
		// A modern request: the headers mirror the body (Request
		// Metadata).
		h.Set(HeaderProtocolVersion, env.Meta.ProtocolVersion)
		if method != "" {
			h.Set(HeaderMethod, method)
		}
		switch method {
		case methodToolsCall, "prompts/get":
			if env.Name != "" {
				h.Set(HeaderName, EncodeHeaderValue(env.Name))
			}
		case "resources/read":
			if env.URI != "" {
				h.Set(HeaderName, EncodeHeaderValue(env.URI))
			}
		}
	} else if version != "" {
		h.Set(HeaderProtocolVersion, version)
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
		msg = append(msg, `,"params":`...)
		msg = append(msg, rawParams...)
	}
	return append(msg, '}'), rawParams, nil
}

func (t *httpTransport) notify(ctx context.Context, method string, params any) error {
	msg, raw, err := t.encode("", method, params)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.url, bytes.NewReader(msg))
	if err != nil {
		return err
	}
	t.setHeaders(req, method, raw)
	resp, err := t.opts.Client.Do(req)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrHTTPTransport, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted && resp.StatusCode != http.StatusOK {
		return t.statusError(resp)
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	return nil
}

func (t *httpTransport) call(ctx context.Context, method string, params any, onID func(jsonrpc.ID), opts ...client.CallOption) (json.RawMessage, error) {
	res, err := t.once(ctx, method, params, onID)
	// "A broken stream loses the request; client MUST re-issue with a new
	// id": done for calls marked safe to send twice.
	if err != nil && errors.Is(err, ErrHTTPTransport) && ctx.Err() == nil && client.IsRetryable(opts...) {
		res, err = t.once(ctx, method, params, onID)
	}
	return res, err
}

func (t *httpTransport) once(ctx context.Context, method string, params any, onID func(jsonrpc.ID)) (json.RawMessage, error) {
	id := jsonrpc.Int64ID(t.nextID.Add(1))
	msg, raw, err := t.encode(id, method, params)
	if err != nil {
		return nil, err
	}
	if onID != nil {
		onID(id)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.url, bytes.NewReader(msg))
	if err != nil {
		return nil, err
	}
	t.setHeaders(req, method, raw)
	resp, err := t.opts.Client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			t.cancelled(id)
			return nil, context.Cause(ctx)
		}
		return nil, fmt.Errorf("%w: %v", ErrHTTPTransport, err)
	}
	defer resp.Body.Close()
	if method == methodInitialize {
		if sid := resp.Header.Get(HeaderSessionID); sid != "" {
			t.mu.Lock()
			t.sessionID = sid
			t.mu.Unlock()
		}
	}
	if resp.StatusCode != http.StatusOK {
		return nil, t.statusError(resp)
	}
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	var res json.RawMessage
	if mt == "text/event-stream" {
		res, err = t.readStream(resp.Body, id)
	} else {
		var body []byte
		body, err = readLimited(resp.Body, t.opts.MaxMessageBytes)
		if err == nil {
			res, err = t.response(body, id)
		}
	}
	if err != nil && ctx.Err() != nil {
		t.cancelled(id)
		return nil, context.Cause(ctx)
	}
	return res, err
}

// cancelled tells a legacy server that a call was abandoned: for it,
// "disconnection SHOULD NOT be treated as cancellation" (2025-11-25
// transports). A modern server took the closed stream as the cancel.
func (t *httpTransport) cancelled(id jsonrpc.ID) {
	t.mu.Lock()
	legacy := t.era == "legacy"
	t.mu.Unlock()
	if !legacy {
		return
	}
	t.bg.Add(1)
	go func() {
		defer t.bg.Done()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		t.notify(ctx, methodCancelled, map[string]any{"requestId": json.RawMessage(id), "reason": "cancelled by the caller"})
	}()
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
	msg, err := jsonrpc.Decode(bytes.TrimSpace(body), nil)
	if err != nil {
		return nil, fmt.Errorf("mcp: malformed response: %w", err)
	}
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
	return json.RawMessage(bytes.Clone(msg.Result)), nil
}

// readStream reads an event stream until the response to id. Comment
// lines (keep-alives), event names, ids and retry fields are ignored.
func (t *httpTransport) readStream(body io.Reader, id jsonrpc.ID) (json.RawMessage, error) {
	br := bufio.NewReaderSize(body, 32<<10)
	var data []byte
	for {
		line, err := readEventLine(br, t.opts.MaxMessageBytes)
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil, fmt.Errorf("%w: the event stream ended before the response", ErrHTTPTransport)
			}
			return nil, err
		}
		if len(line) == 0 {
			if len(data) == 0 {
				continue
			}
			res, done, err := t.event(data, id)
			if done {
				return res, err
			}
			data = data[:0]
			continue
		}
		if d, ok := bytes.CutPrefix(line, []byte("data:")); ok {
			d = bytes.TrimPrefix(d, []byte(" "))
			if len(data) > 0 {
				data = append(data, '\n')
			}
			if len(data)+len(d) > t.opts.MaxMessageBytes {
				return nil, fmt.Errorf("mcp: an event exceeds %d bytes", t.opts.MaxMessageBytes)
			}
			data = append(data, d...)
		}
	}
}

func readEventLine(br *bufio.Reader, limit int) ([]byte, error) {
	var line []byte
	for {
		chunk, err := br.ReadSlice('\n')
		line = append(line, chunk...)
		if len(line) > limit+16 {
			return nil, fmt.Errorf("mcp: an event line exceeds %d bytes", limit)
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		if err != nil {
			if err == io.EOF && len(line) > 0 {
				return bytes.TrimRight(line, "\r\n"), nil
			}
			if err == io.EOF {
				return nil, io.EOF
			}
			return nil, fmt.Errorf("%w: reading the event stream: %v", ErrHTTPTransport, err)
		}
		return bytes.TrimRight(line, "\r\n"), nil
	}
}

// event handles one event's data; done reports the response to id.
func (t *httpTransport) event(data []byte, id jsonrpc.ID) (json.RawMessage, bool, error) {
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
		// A legacy server asking us something (sampling, roots): this
		// client serves no such requests.
		t.reply(jsonrpc.ID(bytes.Clone(msg.ID)), msg.MethodName())
	case jsonrpc.KindResult, jsonrpc.KindError:
		if string(msg.ID) != string(id) {
			return nil, false, nil
		}
		res, err := t.response(data, id)
		return res, true, err
	}
	return nil, false, nil
}

// reply answers a server request with -32601 in the background.
func (t *httpTransport) reply(id jsonrpc.ID, method string) {
	body := jsonrpc.AppendErrorResponse(nil, id, jsonrpc.Errorf(jsonrpc.CodeMethodNotFound, "method not found: %s", method))
	t.bg.Add(1)
	go func() {
		defer t.bg.Done()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.url, bytes.NewReader(body))
		if err != nil {
			return
		}
		t.setHeaders(req, "", nil)
		if resp, err := t.opts.Client.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
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
	s := string(body)
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	e.Body = strings.ToValidUTF8(s, "?")
	return e
}
