package mcp

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/agentwire/agentwire/jsonrpc"
	"github.com/agentwire/agentwire/rpc"
)

// Defaults of HTTPOptions.
const (
	DefaultMaxBodyBytes = 4 << 20
	DefaultKeepAlive    = 15 * time.Second
	DefaultBodyTimeout  = 30 * time.Second
)

// Headers of the Streamable HTTP transport (research/mcp-spec.md §3.1).
const (
	HeaderProtocolVersion = "MCP-Protocol-Version"
	HeaderMethod          = "Mcp-Method"
	HeaderName            = "Mcp-Name"
	HeaderParamPrefix     = "Mcp-Param-"
	HeaderSessionID       = "Mcp-Session-Id"
)

// legacyDefaultVersion is what a request without MCP-Protocol-Version is
// taken to speak: "the server SHOULD assume protocol version 2025-03-26"
// (2025-11-25 transports, Protocol Version Header).
const legacyDefaultVersion = "2025-03-26"

// HTTPOptions configures a Streamable HTTP endpoint. The zero value (or nil)
// accepts requests from any client that sends no Origin or a loopback one,
// without authentication, with bodies up to 4 MiB read within 30 s, and a
// keep-alive comment every 15 s on event streams.
type HTTPOptions struct {
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
	Token string
	// ResourceMetadata is the URL of the RFC 9728 protected resource
	// metadata, named in WWW-Authenticate when set.
	ResourceMetadata string
	// MaxBodyBytes caps a request body; larger ones get 413. Default 4 MiB.
	MaxBodyBytes int64
	// BodyTimeout bounds the reading of a request body. Default 30 s.
	BodyTimeout time.Duration
	// KeepAlive is the interval of SSE comments on a quiet stream, and how
	// long a JSON answer may take before the response becomes an event
	// stream so that it can carry them (proxies end silent connections).
	// Default 15 s; negative disables both.
	KeepAlive time.Duration
	// Conn is the base of every exchange's connection options (Logger,
	// ShutdownTimeout, ...).
	Conn *rpc.Options
	// Logger receives diagnostics. Nil means slog.Default().
	Logger *slog.Logger
}

// httpBackend is what an HTTP endpoint serves: a Server, or a Bridge to a
// stdio server.
type httpBackend interface {
	// exchangeHandler returns the handler of one HTTP request: modern
	// (per-request _meta required), or legacy at the given version, served
	// statelessly as if initialize had happened.
	exchangeHandler(modern bool, legacyVersion string) rpc.Handler
	exchangeOptions(base *rpc.Options) *rpc.Options
	era() Era
	// headerParams maps a tool's arguments to the Mcp-Param- headers its
	// input schema declares (x-mcp-header); nil when it declares none.
	headerParams(tool string) map[string]string
}

// HTTPHandler serves MCP over Streamable HTTP on one endpoint: every
// message is a POST; a request is answered with one JSON object, or with an
// event stream when it asked for progress, when the handler sends
// notifications, when it outlives KeepAlive, or when it is a
// subscriptions/listen stream. GET and DELETE get 405: there is no
// standalone stream and there are no sessions. Legacy (2025-03-26 ..
// 2025-11-25) clients are served too, statelessly: initialize is answered,
// no Mcp-Session-Id is minted, and every later request is served at the
// version its MCP-Protocol-Version header names.
//
// Each request runs on its own rpc.Conn, so handlers get the same
// guarantees as on stdio (panics answered, bounded output, cancellation):
// the client closing the response cancels the handler ("closing the SSE
// response stream MUST be treated as cancellation").
type HTTPHandler struct {
	backend httpBackend
	opts    HTTPOptions
	log     *slog.Logger

	mu        sync.Mutex
	draining  bool
	exchanges map[*exchange]struct{}
	running   sync.WaitGroup // exchanges and their connections

	// The server's own requests to legacy clients, by the id they were
	// sent with: their answers arrive as POSTs of their own.
	asked sync.Map // string id -> askedRequest
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

// HTTPHandler returns a Streamable HTTP endpoint for s.
func (s *Server) HTTPHandler(opts *HTTPOptions) *HTTPHandler { return newHTTPHandler(s, opts) }

func newHTTPHandler(b httpBackend, opts *HTTPOptions) *HTTPHandler {
	h := &HTTPHandler{backend: b, exchanges: map[*exchange]struct{}{}}
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
	h.log = h.opts.Logger
	if h.log == nil {
		h.log = slog.Default()
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
func (h *HTTPHandler) Shutdown(ctx context.Context) error {
	h.mu.Lock()
	h.draining = true
	for ex := range h.exchanges {
		ex.in.end() // end of input: listen streams finish, others get the grace
	}
	h.mu.Unlock()
	done := make(chan struct{})
	go func() {
		h.running.Wait()
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

func (h *HTTPHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !h.hostAllowed(r.Host) {
		httpError(w, http.StatusForbidden, "", jsonrpc.CodeInvalidRequest, "Forbidden: host "+r.Host+" is not allowed", nil)
		return
	}
	origin := r.Header.Get("Origin")
	if origin != "" && !h.originAllowed(origin) {
		httpError(w, http.StatusForbidden, "", jsonrpc.CodeInvalidRequest, "Forbidden: origin "+origin+" is not allowed", nil)
		return
	}
	if origin != "" {
		// A page on an allowed origin may read the answer (CORS), and its
		// preflight is answered before authentication: preflights carry
		// no credentials.
		hdr := w.Header()
		hdr.Set("Access-Control-Allow-Origin", origin)
		hdr.Add("Vary", "Origin")
		hdr.Set("Access-Control-Expose-Headers", "WWW-Authenticate")
		if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" {
			hdr.Set("Access-Control-Allow-Methods", "POST")
			hdr.Set("Access-Control-Allow-Headers", corsHeaders(r.Header.Get("Access-Control-Request-Headers")))
			hdr.Set("Access-Control-Max-Age", "600")
			w.WriteHeader(http.StatusNoContent)
			return
		}
	}
	if !h.authorized(r) {
		challenge := `Bearer realm="mcp"`
		if r.Header.Get("Authorization") != "" {
			challenge += `, error="invalid_token"`
		}
		if h.opts.ResourceMetadata != "" {
			challenge += `, resource_metadata="` + h.opts.ResourceMetadata + `"`
		}
		w.Header().Set("WWW-Authenticate", challenge)
		httpError(w, http.StatusUnauthorized, "", jsonrpc.CodeInvalidRequest, "Unauthorized: a valid bearer token is required", nil)
		return
	}
	if r.Method != http.MethodPost {
		// 2026-07-28: "GET stream endpoint and protocol sessions removed";
		// legacy GET/DELETE traffic gets 405.
		w.Header().Set("Allow", http.MethodPost)
		httpError(w, http.StatusMethodNotAllowed, "", jsonrpc.CodeInvalidRequest, "Method Not Allowed: this endpoint takes POST only", nil)
		return
	}
	if ct := r.Header.Get("Content-Type"); ct != "" {
		if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
			httpError(w, http.StatusUnsupportedMediaType, "", jsonrpc.CodeInvalidRequest, "Unsupported Media Type: the body must be application/json", nil)
			return
		}
	}
	accept := parseAccept(r.Header.Values("Accept"))
	if !accept.json && !accept.sse {
		httpError(w, http.StatusNotAcceptable, "", jsonrpc.CodeInvalidRequest, "Not Acceptable: the client must accept application/json and text/event-stream", nil)
		return
	}
	h.mu.Lock()
	draining := h.draining
	h.mu.Unlock()
	if draining {
		w.Header().Set("Retry-After", "1")
		httpError(w, http.StatusServiceUnavailable, "", jsonrpc.CodeInternalError, "Service Unavailable: the server is shutting down", nil)
		return
	}

	// The body must arrive within BodyTimeout (a client trickling it in
	// would hold the request forever); the deadline is lifted afterwards,
	// as an event stream may last as long as its call. http.Server's
	// ReadTimeout cannot do this: it would cut long streams too.
	rc := http.NewResponseController(w)
	rc.SetReadDeadline(time.Now().Add(h.opts.BodyTimeout))
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.opts.MaxBodyBytes))
	if err == nil {
		rc.SetReadDeadline(time.Time{})
	} else {
		// The connection is not reused; the deadline stays so that
		// net/http's attempt to drain the rest of the body ends too.
		w.Header().Set("Connection", "close")
	}
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			httpError(w, http.StatusRequestEntityTooLarge, "", jsonrpc.CodeInvalidRequest,
				fmt.Sprintf("Payload Too Large: the body exceeds %d bytes", h.opts.MaxBodyBytes), nil)
			return
		}
		httpError(w, http.StatusBadRequest, "", jsonrpc.CodeParseError, "Bad Request: reading the body: "+err.Error(), nil)
		return
	}
	msg, err := jsonrpc.Decode(body, nil)
	if err != nil {
		var de *jsonrpc.DecodeError
		errors.As(err, &de)
		httpError(w, http.StatusBadRequest, jsonrpc.ID(de.ID), de.Code, de.Error(), nil)
		return
	}
	if msg.Kind == jsonrpc.KindBatch {
		httpError(w, http.StatusBadRequest, "", jsonrpc.CodeInvalidRequest, "Invalid Request: the body must be a single JSON-RPC message, not a batch", nil)
		return
	}
	if bytes.ContainsAny(body, "\r\n") {
		// The exchange's connection is newline-framed; whitespace between
		// tokens is all that Compact removes.
		var buf bytes.Buffer
		if err := json.Compact(&buf, body); err == nil {
			body = buf.Bytes()
			msg, _ = jsonrpc.Decode(body, nil)
		}
	}
	h.serveMessage(w, r, &msg, body, accept)
}

func (h *HTTPHandler) serveMessage(w http.ResponseWriter, r *http.Request, msg *jsonrpc.Message, body []byte, accept acceptable) {
	id := jsonrpc.ID(msg.ID)
	// The members headers mirror are read exactly as the session reads
	// them (exact keys), and must be unambiguous: a handler decoding into a
	// Go struct matches keys case-insensitively, a server behind a bridge
	// exactly, and a header must be checked against the value used.
	var p params
	var args map[string]json.RawMessage
	if len(msg.Params) > 0 && msg.Params[0] == '{' {
		var obj map[string]json.RawMessage
		if json.Unmarshal(msg.Params, &obj) == nil {
			if k := caseAmbiguous(obj, "name", "uri", "arguments", "_meta"); k != "" {
				httpError(w, http.StatusBadRequest, id, jsonrpc.CodeInvalidParams, "invalid params: member "+quoteJSON(k)+" is ambiguous (differs from another only in case)", nil)
				return
			}
			var meta map[string]json.RawMessage
			if json.Unmarshal(obj["_meta"], &meta) == nil {
				if k := caseAmbiguous(meta, MetaProtocolVersion, MetaClientCapabilities, MetaClientInfo, MetaLogLevel, MetaProgressToken); k != "" {
					httpError(w, http.StatusBadRequest, id, jsonrpc.CodeInvalidParams, "invalid params: _meta member "+quoteJSON(k)+" is ambiguous (differs from another only in case)", nil)
					return
				}
			}
		}
		parseParams(msg.Params, &p)
		if len(p.arguments) > 0 && p.arguments[0] == '{' {
			json.Unmarshal(p.arguments, &args)
		}
	}
	headerVersion, hasHeader := headerValue(r.Header, HeaderProtocolVersion)
	var bodyVersion string
	hasBodyVersion := false
	if p.meta != nil && len(p.meta.ProtocolVersion) > 0 && json.Unmarshal(p.meta.ProtocolVersion, &bodyVersion) == nil {
		hasBodyVersion = true
	}

	// Which era is this message? The body's _meta says modern; otherwise
	// the header does. A legacy message is served at its header's version.
	era := h.backend.era()
	modern := false
	legacyVersion := legacyDefaultVersion
	switch {
	case era == LegacyOnly:
		if hasHeader {
			legacyVersion = headerVersion
		}
	case hasBodyVersion:
		modern = true
	case hasHeader && IsModern(headerVersion):
		modern = true
	case hasHeader:
		legacyVersion = headerVersion
	}
	if !modern && !slices.Contains(LegacyVersions, legacyVersion) {
		httpError(w, http.StatusBadRequest, id, CodeUnsupportedProtocolVersion, "Unsupported protocol version",
			map[string]any{"supported": supportedFor(era), "requested": legacyVersion})
		return
	}

	switch msg.Kind {
	case jsonrpc.KindNotification:
		// Nothing a client may notify needs an answer over HTTP: there is
		// no session for notifications/initialized to advance, and a
		// cancelled request is cancelled by closing its response.
		w.WriteHeader(http.StatusAccepted)
		return
	case jsonrpc.KindResult, jsonrpc.KindError:
		if modern {
			httpError(w, http.StatusBadRequest, "", jsonrpc.CodeInvalidRequest, "Invalid Request: clients do not send responses in protocol version "+LatestVersion, nil)
			return
		}
		// A legacy client answering a request of the server's (sampling,
		// elicitation) that went out on another POST's event stream: it
		// goes back to that exchange, under the id the handler used.
		h.answerServerRequest(msg, callerOf(r))
		w.WriteHeader(http.StatusAccepted)
		return
	}

	method := msg.MethodName()
	if modern {
		if e := h.checkHeaders(r.Header, method, hasHeader, headerVersion, hasBodyVersion, bodyVersion, p.name, p.uri, args); e != nil {
			httpError(w, http.StatusBadRequest, id, e.Code, e.Message, nil)
			return
		}
	}
	if method == methodListen && !accept.sse {
		httpError(w, http.StatusNotAcceptable, id, jsonrpc.CodeInvalidRequest, "Not Acceptable: subscriptions/listen answers with an event stream (text/event-stream)", nil)
		return
	}
	// The event stream starts with the first notification (or keep-alive),
	// not before: an error that comes first keeps its status (400, 404).
	h.exchange(w, r, body, modern, legacyVersion, accept)
}

func supportedFor(era Era) []string {
	switch era {
	case ModernOnly:
		return ModernVersions
	case LegacyOnly:
		return LegacyVersions
	}
	return append(slices.Clone(ModernVersions), LegacyVersions...)
}

// checkHeaders enforces "Headers mirroring the body": the server "MUST
// reject" a mismatch, a missing required standard header or invalid
// characters with 400 and HeaderMismatch (2026-07-28 transports, Server
// Validation).
func (h *HTTPHandler) checkHeaders(hdr http.Header, method string, hasHeader bool, headerVersion string, hasBodyVersion bool, bodyVersion string, name, uri json.RawMessage, args map[string]json.RawMessage) *jsonrpc.Error {
	mismatch := func(format string, a ...any) *jsonrpc.Error {
		return jsonrpc.Errorf(CodeHeaderMismatch, "Header mismatch: "+format, a...)
	}
	if !hasHeader {
		return mismatch("the %s header is required", HeaderProtocolVersion)
	}
	if hasBodyVersion && headerVersion != bodyVersion {
		return mismatch("%s header value '%s' does not match body value '%s'", HeaderProtocolVersion, headerVersion, bodyVersion)
	}
	hm, ok := headerValue(hdr, HeaderMethod)
	if !ok {
		return mismatch("the %s header is required", HeaderMethod)
	}
	if hm != method {
		return mismatch("%s header value '%s' does not match body value '%s'", HeaderMethod, hm, method)
	}
	var bodyName json.RawMessage
	switch method {
	case methodToolsCall, "prompts/get":
		bodyName = name
	case "resources/read":
		bodyName = uri
	}
	var want string
	if len(bodyName) > 0 && json.Unmarshal(bodyName, &want) == nil {
		got, ok := headerValue(hdr, HeaderName)
		if !ok {
			return mismatch("the %s header is required for %s", HeaderName, method)
		}
		got, err := decodeHeaderValue(got)
		if err != nil {
			return mismatch("%s header: %v", HeaderName, err)
		}
		if got != want {
			return mismatch("%s header value '%s' does not match body value '%s'", HeaderName, got, want)
		}
	}
	if method == methodToolsCall && want != "" {
		params := h.backend.headerParams(want)
		names := make([]string, 0, len(params))
		for path := range params {
			names = append(names, strings.Split(path, pathSep)[0])
		}
		if k := caseAmbiguous(args, names...); k != "" {
			return jsonrpc.Errorf(CodeHeaderMismatch, "Header mismatch: argument %q is ambiguous (differs from another only in case)", k)
		}
		for path, hname := range params {
			arg, ambiguous := argAtStrict(args, path)
			if ambiguous != "" {
				return jsonrpc.Errorf(CodeHeaderMismatch, "Header mismatch: argument %q is ambiguous (differs from another only in case)", ambiguous)
			}
			if e := checkParamHeader(hdr, HeaderParamPrefix+hname, arg); e != nil {
				return e
			}
		}
	}
	return nil
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
		return jsonrpc.Errorf(CodeHeaderMismatch, "Header mismatch: the %s header is required when the argument is present", name)
	case !present:
		return jsonrpc.Errorf(CodeHeaderMismatch, "Header mismatch: %s header sent for an absent argument", name)
	}
	got, err := decodeHeaderValue(raw)
	if err != nil {
		return jsonrpc.Errorf(CodeHeaderMismatch, "Header mismatch: %s header: %v", name, err)
	}
	if !paramEqual(got, arg) {
		return jsonrpc.Errorf(CodeHeaderMismatch, "Header mismatch: %s header value '%s' does not match body value %s", name, got, arg)
	}
	return nil
}

// corsHeaders lists the request headers a page may send: the transport's
// own (Mcp-Param- ones included) and the usual ones.
func corsHeaders(requested string) string {
	allowed := []string{"Content-Type", "Accept", "Authorization", HeaderProtocolVersion, HeaderMethod, HeaderName, "Last-Event-ID"}
	for _, h := range strings.Split(requested, ",") {
		h = strings.TrimSpace(h)
		if len(h) > len(HeaderParamPrefix) && strings.EqualFold(h[:len(HeaderParamPrefix)], HeaderParamPrefix) {
			allowed = append(allowed, h)
		}
	}
	return strings.Join(allowed, ", ")
}

// caseAmbiguous returns a member of obj that equals one of names only
// under case folding, or collides with another that way; "" if none.
func caseAmbiguous(obj map[string]json.RawMessage, names ...string) string {
	for _, name := range names {
		n := 0
		for k := range obj {
			if strings.EqualFold(k, name) {
				n++
				if k != name || n > 1 {
					return k
				}
			}
		}
	}
	return ""
}

func quoteJSON(s string) string { b, _ := json.Marshal(s); return string(b) }

// headerValue returns a header with the optional whitespace around it
// removed (RFC 9110 §5.5), and whether it was sent.
func headerValue(h http.Header, name string) (string, bool) {
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

// decodeHeaderValue undoes the =?base64?...?= form values that are not
// plain ASCII travel in.
func decodeHeaderValue(v string) (string, error) {
	inner, ok := strings.CutPrefix(v, "=?base64?")
	if !ok {
		return v, nil
	}
	inner, ok = strings.CutSuffix(inner, "?=")
	if !ok {
		return v, nil
	}
	b, err := base64.StdEncoding.Strict().DecodeString(inner)
	if err != nil {
		return "", fmt.Errorf("invalid base64 value: %v", err)
	}
	return string(b), nil
}

// EncodeHeaderValue returns v as it travels in an Mcp-Name or Mcp-Param-
// header: as it is when it is visible ASCII without surrounding spaces,
// otherwise (or when it looks like the encoded form) base64-encoded.
func EncodeHeaderValue(v string) string {
	plain := !strings.HasPrefix(v, "=?base64?") && v == strings.TrimSpace(v)
	for i := 0; plain && i < len(v); i++ {
		if v[i] < 0x20 || v[i] > 0x7e {
			plain = false
		}
	}
	if plain {
		return v
	}
	return "=?base64?" + base64.StdEncoding.EncodeToString([]byte(v)) + "?="
}

type acceptable struct{ json, sse bool }

func parseAccept(values []string) acceptable {
	if len(values) == 0 {
		return acceptable{json: true}
	}
	var a acceptable
	for _, v := range values {
		for _, part := range strings.Split(v, ",") {
			mt, _, _ := strings.Cut(strings.TrimSpace(part), ";")
			switch strings.ToLower(strings.TrimSpace(mt)) {
			case "application/json", "application/*":
				a.json = true
			case "text/event-stream", "text/*":
				a.sse = true
			case "*/*":
				a.json, a.sse = true, true
			}
		}
	}
	return a
}

func (h *HTTPHandler) hostAllowed(host string) bool {
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

func (h *HTTPHandler) originAllowed(origin string) bool {
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

func (h *HTTPHandler) authorized(r *http.Request) bool {
	if h.opts.Token == "" {
		return true
	}
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	return ok && strings.EqualFold(scheme, "Bearer") &&
		subtle.ConstantTimeCompare([]byte(strings.TrimSpace(token)), []byte(h.opts.Token)) == 1
}

// ----- one request -----

// exchange runs one request on its own connection and turns what the
// connection writes into the HTTP response.
func (h *HTTPHandler) exchange(w http.ResponseWriter, r *http.Request, line []byte, modern bool, legacyVersion string, accept acceptable) {
	ex := &exchange{
		h:      h,
		caller: callerOf(r),
		w:      w,
		rc:     http.NewResponseController(w),
		modern: modern,
		canSSE: accept.sse,
		json:   accept.json,
		final:  make(chan struct{}),
		in:     newPostInput(line),
	}
	h.mu.Lock()
	if h.draining {
		h.mu.Unlock()
		w.Header().Set("Retry-After", "1")
		httpError(w, http.StatusServiceUnavailable, "", jsonrpc.CodeInternalError, "Service Unavailable: the server is shutting down", nil)
		return
	}
	h.exchanges[ex] = struct{}{}
	h.running.Add(1)
	h.mu.Unlock()
	defer h.running.Done()

	o := h.backend.exchangeOptions(h.opts.Conn)
	o.MaxMessageBytes = int(h.opts.MaxBodyBytes) + 1
	if o.Logger == nil {
		o.Logger = h.log
	}
	conn := rpc.New(ex.in, ex, h.backend.exchangeHandler(modern, legacyVersion), o)
	h.mu.Lock()
	ex.conn = conn // abort reads it under h.mu
	h.mu.Unlock()
	if !accept.json {
		ex.mu.Lock()
		ex.startStreamLocked()
		ex.mu.Unlock()
	}

	var tick <-chan time.Time
	if h.opts.KeepAlive > 0 {
		t := time.NewTicker(h.opts.KeepAlive)
		defer t.Stop()
		tick = t.C
	}
	clientGone, finished := false, false
wait:
	for {
		select {
		case <-ex.final:
			finished = true
			break wait
		case <-conn.Done():
			// Ended without an answer (a handler that chose not to
			// answer): say so rather than leave the client waiting.
			break wait
		case <-r.Context().Done():
			clientGone = true
			break wait
		case <-tick:
			ex.keepAlive()
		}
	}
	if !finished {
		// A write may be stalled on a client that does not read, holding
		// the exchange's lock: it must fail now.
		ex.unblock()
	}
	ex.mu.Lock()
	answered := ex.answered
	written := ex.started || answered
	ex.closed = true // nothing more reaches the ResponseWriter
	ex.mu.Unlock()
	if !written && !clientGone {
		httpError(w, http.StatusInternalServerError, "", jsonrpc.CodeInternalError, "Internal error: the request ended without a response", nil)
	}

	h.mu.Lock()
	delete(h.exchanges, ex)
	h.running.Add(1) // the connection's end, below
	h.mu.Unlock()
	ex.mu.Lock()
	for _, id := range ex.asked {
		h.asked.Delete(id)
	}
	ex.mu.Unlock()
	go func() {
		defer h.running.Done()
		if clientGone {
			conn.Close() // cancels the handler
		} else {
			ex.in.end()
			conn.Wait()
		}
	}()
}

// exchange is one request's response: the io.Writer of its connection.
// Lines the connection writes become the JSON body or SSE events.
type exchange struct {
	h      *HTTPHandler
	caller string
	w      http.ResponseWriter
	rc     *http.ResponseController
	conn   *rpc.Conn
	in     *postInput
	modern bool
	canSSE bool
	json   bool
	final  chan struct{}

	mu       sync.Mutex
	partial  []byte   // a line not yet complete
	asked    []string // ids of the server's own requests sent on this stream
	started  bool     // the event stream's headers are out
	answered bool     // the response has been written
	closed   bool     // ServeHTTP has returned, or is about to
}

var errExchangeClosed = errors.New("mcp: the HTTP exchange is over")

// Write receives the connection's output and passes on each whole line.
func (ex *exchange) Write(p []byte) (int, error) {
	ex.mu.Lock()
	defer ex.mu.Unlock()
	if ex.closed || ex.answered {
		return 0, errExchangeClosed
	}
	data := p
	if len(ex.partial) > 0 {
		ex.partial = append(ex.partial, p...)
		data = ex.partial
	}
	for {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			break
		}
		if err := ex.lineLocked(data[:i]); err != nil {
			return 0, err
		}
		data = data[i+1:]
	}
	ex.partial = append(ex.partial[:0], data...)
	return len(p), nil
}

func (ex *exchange) lineLocked(line []byte) error {
	if ex.answered {
		return nil // one request, one response: anything after is not for this client
	}
	msg, err := jsonrpc.Decode(line, nil)
	if err != nil {
		return nil
	}
	if msg.Kind.IsResponse() {
		ex.answered = true
		defer close(ex.final)
		if ex.started {
			return ex.eventLocked(line)
		}
		status := http.StatusOK
		if msg.Kind == jsonrpc.KindError {
			if e, err := jsonrpc.ParseError(msg.Error); err == nil {
				status = statusFor(e.Code, ex.modern)
			}
		}
		ex.w.Header().Set("Content-Type", "application/json")
		ex.w.WriteHeader(status)
		_, err := ex.w.Write(append(line, '\n'))
		return err
	}
	if msg.Kind == jsonrpc.KindRequest {
		return ex.serverRequestLocked(&msg)
	}
	// A notification about the request (progress, a log line, a listen
	// stream's change): it needs the event stream. A client that accepts
	// only JSON does not get it.
	if !ex.canSSE {
		return nil
	}
	ex.startStreamLocked()
	return ex.eventLocked(line)
}

// serverRequestLocked sends a request of the handler's (legacy sampling,
// elicitation, roots) on the event stream. Without sessions its answer
// comes back on a POST of its own, so it gets an id unique in the process;
// answerServerRequest routes the answer back.
func (ex *exchange) serverRequestLocked(msg *jsonrpc.Message) error {
	if !ex.canSSE {
		// Nowhere to send it: the handler's call fails now.
		ex.in.push(jsonrpc.AppendErrorResponse(nil, jsonrpc.ID(bytes.Clone(msg.ID)),
			jsonrpc.NewError(jsonrpc.CodeInternalError, "the client accepts no event stream, so it cannot be asked anything", nil)))
		return nil
	}
	// Unguessable, and only its own client (the same credentials) may
	// answer it.
	var nonce [16]byte
	rand.Read(nonce[:])
	id := `"srv-` + hex.EncodeToString(nonce[:]) + `"`
	ex.h.asked.Store(id, askedRequest{ex: ex, id: bytes.Clone(msg.ID), caller: ex.caller})
	ex.asked = append(ex.asked, id)
	line := append([]byte(`{"jsonrpc":"2.0","id":`), id...)
	line = append(line, `,"method":`...)
	line = append(line, msg.Method...)
	if msg.Params != nil {
		line = append(line, `,"params":`...)
		line = append(line, msg.Params...)
	}
	line = append(line, '}')
	ex.startStreamLocked()
	return ex.eventLocked(line)
}

// answerServerRequest passes a legacy client's answer to the exchange that
// asked, under the id its handler used.
func (h *HTTPHandler) answerServerRequest(msg *jsonrpc.Message, caller string) {
	v, ok := h.asked.Load(string(msg.ID))
	if !ok || v.(askedRequest).caller != caller {
		return
	}
	h.asked.Delete(string(msg.ID))
	a := v.(askedRequest)
	line := append([]byte(`{"jsonrpc":"2.0","id":`), a.id...)
	if msg.Kind == jsonrpc.KindError {
		line = append(line, `,"error":`...)
		line = append(line, msg.Error...)
	} else {
		line = append(line, `,"result":`...)
		line = append(line, msg.Result...)
	}
	a.ex.in.push(append(line, '}'))
}

// statusFor maps an error response to its status (research/mcp-spec.md
// §3.1): 400 for malformed requests, bad metadata, header mismatches,
// missing capabilities and unsupported versions; 404 for unknown methods
// ("JSON body distinguishes it from a legacy HTTP+SSE 404"). Legacy clients
// expect JSON-RPC errors with 200, except for version trouble.
func statusFor(code int64, modern bool) int {
	switch code {
	case jsonrpc.CodeParseError, jsonrpc.CodeInvalidRequest, CodeUnsupportedProtocolVersion:
		return http.StatusBadRequest
	}
	if !modern {
		return http.StatusOK
	}
	switch code {
	case jsonrpc.CodeInvalidParams, CodeHeaderMismatch, CodeMissingRequiredClientCapability:
		return http.StatusBadRequest
	case jsonrpc.CodeMethodNotFound:
		return http.StatusNotFound
	}
	return http.StatusOK
}

func (ex *exchange) startStreamLocked() {
	if ex.started || ex.answered || ex.closed || !ex.canSSE {
		return
	}
	ex.started = true
	h := ex.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	// "Servers SHOULD send X-Accel-Buffering: no" so that proxies pass
	// events on as they come.
	h.Set("X-Accel-Buffering", "no")
	ex.w.WriteHeader(http.StatusOK)
	ex.rc.Flush()
}

func (ex *exchange) eventLocked(line []byte) error {
	buf := make([]byte, 0, len(line)+24)
	buf = append(buf, "event: message\ndata: "...)
	buf = append(buf, line...)
	buf = append(buf, "\n\n"...)
	if _, err := ex.w.Write(buf); err != nil {
		return err
	}
	return ex.rc.Flush()
}

// keepAlive sends an SSE comment, turning a slow JSON answer into an event
// stream first (clients "must ignore comment lines").
func (ex *exchange) keepAlive() {
	// A write in progress (perhaps stalled on a client that does not
	// read) holds the lock; the stream is not quiet then, and the caller
	// must stay free to notice the end.
	if !ex.mu.TryLock() {
		return
	}
	defer ex.mu.Unlock()
	if ex.closed || ex.answered || !ex.canSSE {
		return
	}
	ex.startStreamLocked()
	if _, err := io.WriteString(ex.w, ":\n\n"); err == nil {
		ex.rc.Flush()
	}
}

// abort cancels the request's handler and fails a write stalled on a
// client that does not read (Shutdown ran out of time). Called under h.mu.
func (ex *exchange) abort() {
	ex.unblock()
	if ex.conn != nil {
		go ex.conn.Close()
	}
}

// unblock makes a pending or future write to the client fail at once.
// It does not take ex.mu, which a stalled write holds.
func (ex *exchange) unblock() { ex.rc.SetWriteDeadline(time.Now()) }

// postInput is an exchange's input: the request line, then nothing until
// the exchange ends it (EOF: the request is over, or the server is shutting
// down) or the connection closes it.
type postInput struct {
	line  []byte // being read
	once  sync.Once
	done  chan struct{}
	mu    sync.Mutex
	queue [][]byte      // answers to the server's own requests, to read next
	more  chan struct{} // signalled when the queue grows
}

func newPostInput(line []byte) *postInput {
	l := make([]byte, len(line)+1)
	copy(l, line)
	l[len(line)] = '\n'
	return &postInput{line: l, done: make(chan struct{}), more: make(chan struct{}, 1)}
}

func (p *postInput) Read(b []byte) (int, error) {
	for len(p.line) == 0 {
		p.mu.Lock()
		if len(p.queue) > 0 {
			p.line, p.queue = p.queue[0], p.queue[1:]
			p.mu.Unlock()
			break
		}
		p.mu.Unlock()
		select {
		case <-p.more:
		case <-p.done:
			return 0, io.EOF
		}
	}
	n := copy(b, p.line)
	p.line = p.line[n:]
	return n, nil
}

// push queues one more line (an answer from the client) for the reader.
func (p *postInput) push(line []byte) {
	p.mu.Lock()
	p.queue = append(p.queue, append(line, '\n'))
	p.mu.Unlock()
	select {
	case p.more <- struct{}{}:
	default:
	}
}

func (p *postInput) end()         { p.once.Do(func() { close(p.done) }) }
func (p *postInput) Close() error { p.end(); return nil }
