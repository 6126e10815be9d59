package streamable_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/agentwire/agentwire/mcp"
	"github.com/agentwire/agentwire/mcp/auth"
	"github.com/agentwire/agentwire/mcp/internal/mcptest"
	"github.com/agentwire/agentwire/mcp/server"
	"github.com/agentwire/agentwire/mcp/streamable"
)

// ----- helpers of the session tests -----

// sessionServer is mcptest's server plus the tools the session tests
// call: "version" answers the version it was served at, "wait" blocks
// until release is closed (or its context ends, which it reports on
// cancelled), "progress" sends steps progress notifications, "ask"
// elicits from the client.
type sessionServer struct {
	*server.Server
	release   chan struct{}
	cancelled chan error
}

func newSessionServer() *sessionServer {
	ss := &sessionServer{Server: mcptest.NewServer(nil), release: make(chan struct{}), cancelled: make(chan error, 16)}
	ss.AddTool(mcp.Tool{Name: "version"}, func(_ context.Context, r *server.ToolRequest) (*mcp.ToolResult, error) {
		return mcp.TextResult(r.ProtocolVersion), nil
	})
	ss.AddTool(mcp.Tool{Name: "wait"}, func(ctx context.Context, _ *server.ToolRequest) (*mcp.ToolResult, error) {
		select {
		case <-ss.release:
			return mcp.TextResult("released"), nil
		case <-ctx.Done():
			ss.cancelled <- ctx.Err()
			return nil, ctx.Err()
		}
	})
	server.AddTool(ss.Server, mcp.Tool{Name: "progress"}, func(ctx context.Context, r *server.ToolRequest, in mcptest.SlowIn) (*mcp.ToolResult, error) {
		for i := 1; i <= in.Steps; i++ {
			if err := r.Progress(float64(i), float64(in.Steps), ""); err != nil {
				return nil, err
			}
		}
		return mcp.TextResult("done"), nil
	})
	ss.AddTool(mcp.Tool{Name: "ask"}, func(ctx context.Context, r *server.ToolRequest) (*mcp.ToolResult, error) {
		res, err := r.Elicit(ctx, "name", "Your name?", map[string]any{"type": "object"})
		if err != nil {
			return nil, err
		}
		return mcp.TextResult(res.Action), nil
	})
	return ss
}

func sessionHandler(t *testing.T, so *streamable.SessionOptions, o *streamable.Options) (*streamable.Handler, *sessionServer) {
	t.Helper()
	ss := newSessionServer()
	var opts streamable.Options
	if o != nil {
		opts = *o
	}
	if so == nil {
		so = &streamable.SessionOptions{}
	}
	opts.Sessions = so
	h := streamable.NewHandler(ss.Server, &opts)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		h.Shutdown(ctx)
	})
	return h, ss
}

// legacyRequest is a 2025 client's HTTP request: sid (if any) in
// Mcp-Session-Id, version (if any) in MCP-Protocol-Version, hdr on top
// ("" removes a header).
func legacyRequest(ctx context.Context, method, body, sid, version string, hdr map[string]string) *http.Request {
	req := newPost(ctx, body, http.Header{})
	req.Method = method
	if method == http.MethodPost {
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
	} else if method == http.MethodGet {
		req.Header.Set("Accept", "text/event-stream")
	}
	if sid != "" {
		req.Header.Set(mcp.HeaderSessionID, sid)
	}
	if version != "" {
		req.Header.Set(mcp.HeaderProtocolVersion, version)
	}
	for k, v := range hdr {
		if v == "" {
			req.Header.Del(k)
		} else {
			req.Header.Set(k, v)
		}
	}
	return req
}

func initializeBody(version string) string {
	return `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"` + version + `","capabilities":{"elicitation":{}},"clientInfo":{"name":"c","version":"1"}}}`
}

const initializedBody = `{"jsonrpc":"2.0","method":"notifications/initialized"}`

func callBody(id any, name, args string) string {
	if args == "" {
		args = "{}"
	}
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%v,"method":"tools/call","params":{"name":%q,"arguments":%s}}`, id, name, args)
}

var visibleASCII = regexp.MustCompile(`^[\x21-\x7E]+$`)

// openSession initializes a session at version as a 2025 client does
// (initialize, then notifications/initialized) and returns its id.
func openSession(t *testing.T, h http.Handler, version string, hdr map[string]string) string {
	t.Helper()
	rec := serve(h, legacyRequest(t.Context(), http.MethodPost, initializeBody(version), "", "", hdr))
	if rec.Status() != http.StatusOK {
		t.Fatalf("initialize: %d %s", rec.Status(), rec.Body())
	}
	sid := rec.hdr.Get(mcp.HeaderSessionID)
	if !visibleASCII.MatchString(sid) || len(sid) < 22 {
		t.Fatalf("Mcp-Session-Id %q: not 128 bits of visible ASCII", sid)
	}
	if rec := serve(h, legacyRequest(t.Context(), http.MethodPost, initializedBody, sid, version, hdr)); rec.Status() != http.StatusAccepted {
		t.Fatalf("notifications/initialized: %d %s", rec.Status(), rec.Body())
	}
	return sid
}

// wireEvent is one event of a stream, as the WHATWG parser would see it.
type wireEvent struct {
	id, event, data, retry string
	hasData                bool
}

func parseEvents(body string) []wireEvent {
	var out []wireEvent
	var cur wireEvent
	seen := false
	for _, line := range strings.Split(body, "\n") {
		if line == "" {
			if seen {
				out = append(out, cur)
			}
			cur, seen = wireEvent{}, false
			continue
		}
		if strings.HasPrefix(line, ":") {
			continue
		}
		k, v, _ := strings.Cut(line, ":")
		v = strings.TrimPrefix(v, " ")
		switch k {
		case "id":
			cur.id = v
		case "event":
			cur.event = v
		case "data":
			cur.data, cur.hasData = v, true
		case "retry":
			cur.retry = v
		}
		seen = true
	}
	return out
}

// messages returns the JSON-RPC messages of a stream's events (priming
// events and bare retry fields left out).
func messages(evs []wireEvent) []wireEvent {
	var out []wireEvent
	for _, e := range evs {
		if e.data != "" {
			out = append(out, e)
		}
	}
	return out
}

// stream is a GET (or a POST) served on a goroutine of its own, in
// process, whose client can go away (stop).
type stream struct {
	rec  *httpRecorder
	stop context.CancelFunc
	done chan struct{}
}

func startStream(t *testing.T, h http.Handler, req *http.Request) *stream {
	ctx, cancel := context.WithCancel(req.Context())
	st := &stream{rec: newHTTPRecorder(), stop: cancel, done: make(chan struct{})}
	go func() {
		defer close(st.done)
		h.ServeHTTP(st.rec, req.WithContext(ctx))
	}()
	// The client goes at the end; the handler's Shutdown (a cleanup
	// registered before this one, so run after it) waits for the rest.
	t.Cleanup(cancel)
	return st
}

// ended reports whether the stream's response has ended.
func (st *stream) ended() bool {
	select {
	case <-st.done:
		return true
	default:
		return false
	}
}

// ----- the wire rules -----

// The status of each kind of legacy message with sessions on, as the
// 2025-11-25 transport ("Session Management") and the SDKs' clients
// expect: a missing Mcp-Session-Id is 400 (-32000), an unknown one 404
// (-32001, never a modern error), initialize on a live session 400, DELETE
// 200 with an empty body, a GET that takes no event stream 406.
func TestSessionsAnswerEachMessageWithTheStatusTheSpecificationGives(t *testing.T) {
	h, _ := sessionHandler(t, nil, nil)
	sid := openSession(t, h, "2025-11-25", nil)
	const v = "2025-11-25"
	cases := []struct {
		name, method, body, sid string
		hdr                     map[string]string
		status                  int
		code                    int64
		message                 string
	}{
		{name: "a request without the header", method: "POST", body: callBody(2, "echo", `{"text":"x"}`), status: 400, code: -32000, message: "Bad Request: Mcp-Session-Id header is required"},
		{name: "a notification without the header", method: "POST", body: initializedBody, status: 400, code: -32000},
		{name: "a response without the header", method: "POST", body: `{"jsonrpc":"2.0","id":1,"result":{}}`, status: 400, code: -32000},
		{name: "a request in an unknown session", method: "POST", body: callBody(2, "echo", `{"text":"x"}`), sid: "nope", status: 404, code: -32001, message: "Session not found"},
		{name: "a notification in an unknown session", method: "POST", body: initializedBody, sid: "nope", status: 404, code: -32001},
		{name: "initialize in an unknown session", method: "POST", body: initializeBody(v), sid: "nope", status: 404, code: -32001},
		{name: "initialize in a live session", method: "POST", body: initializeBody(v), sid: sid, status: 400, code: -32600},
		{name: "a request in the session", method: "POST", body: callBody(2, "echo", `{"text":"x"}`), sid: sid, status: 200},
		{name: "a notification in the session", method: "POST", body: `{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}`, sid: sid, status: 202},
		{name: "an unexpected response in the session", method: "POST", body: `{"jsonrpc":"2.0","id":99,"result":{}}`, sid: sid, status: 202},
		{name: "a GET without the header", method: "GET", status: 400, code: -32000},
		{name: "a GET in an unknown session", method: "GET", sid: "nope", status: 404, code: -32001},
		{name: "a GET that takes no event stream", method: "GET", sid: sid, hdr: map[string]string{"Accept": "application/json"}, status: 406, code: -32600},
		{name: "a GET with an unsupported version", method: "GET", sid: sid, hdr: map[string]string{mcp.HeaderProtocolVersion: "1999-01-01"}, status: 400, code: -32022},
		{name: "a modern GET", method: "GET", sid: sid, hdr: map[string]string{mcp.HeaderProtocolVersion: mcp.LatestVersion}, status: 405, code: -32600},
		{name: "a DELETE without the header", method: "DELETE", status: 400, code: -32000},
		{name: "a DELETE of an unknown session", method: "DELETE", sid: "nope", status: 404, code: -32001},
		{name: "PUT", method: "PUT", sid: sid, status: 405, code: -32600},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rec := serve(h, legacyRequest(t.Context(), tc.method, tc.body, tc.sid, v, tc.hdr))
			body := rec.Body()
			if rec.Status() != tc.status {
				t.Fatalf("status %d, want %d: %s", rec.Status(), tc.status, body)
			}
			if got := rec.hdr.Get(mcp.HeaderSessionID); got != "" {
				t.Errorf("Mcp-Session-Id %q on a response that is not initialize's", got)
			}
			if tc.code != 0 {
				if code, _ := errCode(t, body); code != tc.code {
					t.Errorf("code %d, want %d: %s", code, tc.code, body)
				}
				if !strings.Contains(body, tc.message) {
					t.Errorf("body lacks %q: %s", tc.message, body)
				}
			}
			if tc.status == 202 && body != "" {
				t.Errorf("202 with a body: %q", body)
			}
			if tc.status == 405 && tc.method == "PUT" && rec.hdr.Get("Allow") != "GET, POST, DELETE" {
				t.Errorf("Allow %q", rec.hdr.Get("Allow"))
			}
		})
	}
	// DELETE ends the session: 200 with nothing in the body, then 404.
	rec := serve(h, legacyRequest(t.Context(), http.MethodDelete, "", sid, v, map[string]string{"Accept": "", "Content-Type": ""}))
	if rec.Status() != http.StatusOK || rec.Body() != "" {
		t.Fatalf("DELETE: %d %q", rec.Status(), rec.Body())
	}
	rec = serve(h, legacyRequest(t.Context(), http.MethodPost, callBody(3, "echo", `{"text":"x"}`), sid, v, nil))
	if rec.Status() != http.StatusNotFound {
		t.Fatalf("a request after DELETE: %d %s", rec.Status(), rec.Body())
	}
	st := h.Stats()
	if st.Sessions != 0 || st.SessionsCreated != 1 || st.UnknownSessions < 6 {
		t.Errorf("stats: %+v", st)
	}
}

// The session id goes out on the initialize response only, and not at
// all when initialize is answered with an error: that session is gone.
func TestASessionIsMintedOnlyByASuccessfulInitialize(t *testing.T) {
	h, _ := sessionHandler(t, nil, nil)
	rec := serve(h, legacyRequest(t.Context(), http.MethodPost, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`, "", "", nil))
	if code, _ := errCode(t, rec.Body()); code != -32602 {
		t.Fatalf("initialize without params: %d %s", rec.Status(), rec.Body())
	}
	if sid := rec.hdr.Get(mcp.HeaderSessionID); sid != "" {
		t.Errorf("a failed initialize minted %q", sid)
	}
	if st := h.Stats(); st.Sessions != 0 {
		t.Errorf("a failed initialize left a session: %+v", st)
	}
	// A modern request and a stateless-looking legacy one mint nothing.
	disc := `{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{` + mcptest.Meta + `}}`
	rec = serve(h, newPost(t.Context(), disc, modernHeaders(disc, nil)))
	if rec.Status() != 200 || rec.hdr.Get(mcp.HeaderSessionID) != "" {
		t.Errorf("server/discover: %d, Mcp-Session-Id %q", rec.Status(), rec.hdr.Get(mcp.HeaderSessionID))
	}
	a, b := openSession(t, h, "2025-11-25", nil), openSession(t, h, "2025-11-25", nil)
	if a == b {
		t.Errorf("two sessions share the id %s", a)
	}
	if st := h.Stats(); st.Sessions != 2 || st.SessionsCreated != 2 {
		t.Errorf("stats: %+v", st)
	}
}

// "the server MAY ... rely on the protocol version negotiated during
// initialization": a request in a session without MCP-Protocol-Version is
// served at the session's version, not 2025-03-26; one whose header names
// another supported version is served at that version (the conformance
// suite sends 2025-03-26 on a 2025-11-25 session); an unsupported one is
// 400.
func TestASessionSuppliesTheVersionARequestDoesNotName(t *testing.T) {
	h, _ := sessionHandler(t, nil, nil)
	sid := openSession(t, h, "2025-06-18", nil)
	for _, tc := range []struct{ header, want string }{{"", "2025-06-18"}, {"2025-03-26", "2025-03-26"}} {
		rec := serve(h, legacyRequest(t.Context(), http.MethodPost, callBody(2, "version", ""), sid, tc.header, nil))
		if rec.Status() != 200 || !strings.Contains(rec.Body(), `"text":"`+tc.want+`"`) {
			t.Errorf("header %q: %d %s, want served at %s", tc.header, rec.Status(), rec.Body(), tc.want)
		}
	}
	rec := serve(h, legacyRequest(t.Context(), http.MethodPost, callBody(3, "version", ""), sid, "1999-01-01", nil))
	if code, _ := errCode(t, rec.Body()); rec.Status() != 400 || code != -32022 {
		t.Errorf("an unsupported version: %d %s", rec.Status(), rec.Body())
	}
}

// "With sessions on, a modern request still ignores Mcp-Session-Id": it is
// served statelessly whatever the header says, and no id is echoed.
func TestModernRequestsIgnoreMcpSessionIdWithSessionsOn(t *testing.T) {
	h, _ := sessionHandler(t, nil, nil)
	call := `{"jsonrpc":"2.0","id":"c","method":"tools/call","params":` + withMeta(`"name":"echo","arguments":{"text":"hi"}`) + `}`
	for _, sid := range []string{"", "nope", openSession(t, h, "2025-11-25", nil)} {
		rec := serve(h, newPost(t.Context(), call, modernHeaders(call, map[string]string{mcp.HeaderSessionID: sid})))
		if rec.Status() != 200 || !strings.Contains(rec.Body(), `"text":"hi"`) {
			t.Errorf("Mcp-Session-Id %q: %d %s", sid, rec.Status(), rec.Body())
		}
		if got := rec.hdr.Get(mcp.HeaderSessionID); got != "" {
			t.Errorf("Mcp-Session-Id %q echoed as %q", sid, got)
		}
	}
	if st := h.Stats(); st.Sessions != 1 {
		t.Errorf("sessions: %d", st.Sessions)
	}
}

// A browser page may use sessions when they are on (CORS: GET and DELETE
// allowed, Mcp-Session-Id sent and read), and only then.
func TestCORSAllowsSessionsOnlyWhenTheyAreOn(t *testing.T) {
	on, _ := sessionHandler(t, nil, nil)
	off := streamable.NewHandler(mcptest.NewServer(nil), nil)
	t.Cleanup(func() { off.Shutdown(context.Background()) })
	for _, tc := range []struct {
		h       http.Handler
		methods string
		has     bool
	}{{on, "GET, POST, DELETE", true}, {off, "POST", false}} {
		req := legacyRequest(t.Context(), http.MethodOptions, "", "", "", map[string]string{
			"Origin": "http://localhost:3000", "Access-Control-Request-Method": "DELETE", "Access-Control-Request-Headers": "mcp-session-id"})
		rec := serve(tc.h, req)
		if got := rec.hdr.Get("Access-Control-Allow-Methods"); got != tc.methods {
			t.Errorf("Allow-Methods %q, want %q", got, tc.methods)
		}
		if got := strings.Contains(rec.hdr.Get("Access-Control-Allow-Headers"), mcp.HeaderSessionID); got != tc.has {
			t.Errorf("Allow-Headers %q", rec.hdr.Get("Access-Control-Allow-Headers"))
		}
		if got := strings.Contains(rec.hdr.Get("Access-Control-Expose-Headers"), mcp.HeaderSessionID); got != tc.has {
			t.Errorf("Expose-Headers %q", rec.hdr.Get("Access-Control-Expose-Headers"))
		}
	}
	// Without sessions a GET and a DELETE are still 405, with Allow: POST.
	for _, m := range []string{http.MethodGet, http.MethodDelete} {
		rec := serve(off, legacyRequest(t.Context(), m, "", "abc", "2025-11-25", nil))
		if rec.Status() != 405 || rec.hdr.Get("Allow") != "POST" {
			t.Errorf("%s without sessions: %d, Allow %q", m, rec.Status(), rec.hdr.Get("Allow"))
		}
	}
}

// A session is bound to the verified identity that made it: another
// identity's request naming it gets 404, as if it did not exist, never
// 403 (which would confirm it does).
func TestASessionOfAnotherIdentityIsNotFound(t *testing.T) {
	verifier := auth.VerifierFunc(func(_ context.Context, token string) (*auth.Identity, error) {
		return &auth.Identity{Issuer: "https://auth.example.com", Subject: token}, nil
	})
	h, _ := sessionHandler(t, nil, &streamable.Options{Protect: &streamable.Protection{
		Verifier: verifier, Metadata: auth.ProtectedResourceMetadata{Resource: "https://mcp.example.com/mcp"}}})
	alice := map[string]string{"Authorization": "Bearer alice"}
	sid := openSession(t, h, "2025-11-25", alice)
	if rec := serve(h, legacyRequest(t.Context(), http.MethodPost, callBody(2, "echo", `{"text":"x"}`), sid, "2025-11-25", alice)); rec.Status() != 200 {
		t.Fatalf("alice in her session: %d %s", rec.Status(), rec.Body())
	}
	mallory := map[string]string{"Authorization": "Bearer mallory"}
	for _, m := range []string{http.MethodPost, http.MethodGet, http.MethodDelete} {
		rec := serve(h, legacyRequest(t.Context(), m, callBody(3, "echo", `{"text":"x"}`), sid, "2025-11-25", mallory))
		if rec.Status() != 404 {
			t.Errorf("mallory's %s in alice's session: %d %s", m, rec.Status(), rec.Body())
		}
	}
	if rec := serve(h, legacyRequest(t.Context(), http.MethodPost, callBody(4, "echo", `{"text":"x"}`), sid, "2025-11-25", alice)); rec.Status() != 200 {
		t.Errorf("alice after mallory's DELETE: %d %s", rec.Status(), rec.Body())
	}
}

// ----- lifetimes and limits -----

// A session that sends nothing after initialize (a scanner, a probe that
// gave up) ends after FirstIdleTimeout; one in use lasts IdleTimeout from
// its last request. One sweeper serves them all.
func TestAnAbandonedSessionExpiresSoonerThanOneInUse(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, _ := sessionHandler(t, &streamable.SessionOptions{IdleTimeout: time.Minute, FirstIdleTimeout: 5 * time.Second}, nil)
		abandoned := openSession(t, h, "2025-11-25", nil)
		used := openSession(t, h, "2025-11-25", nil)
		if rec := serve(h, legacyRequest(t.Context(), http.MethodPost, callBody(2, "echo", `{"text":"x"}`), used, "", nil)); rec.Status() != 200 {
			t.Fatalf("tools/call: %d %s", rec.Status(), rec.Body())
		}
		time.Sleep(10 * time.Second)
		synctest.Wait()
		if st := h.Stats(); st.Sessions != 1 || st.SessionsExpired != 1 {
			t.Errorf("after 10 s: %+v", st)
		}
		if rec := serve(h, legacyRequest(t.Context(), http.MethodPost, callBody(3, "echo", `{"text":"x"}`), abandoned, "", nil)); rec.Status() != 404 {
			t.Errorf("the abandoned session after 10 s: %d", rec.Status())
		}
		if rec := serve(h, legacyRequest(t.Context(), http.MethodPost, callBody(4, "echo", `{"text":"x"}`), used, "", nil)); rec.Status() != 200 {
			t.Errorf("the session in use after 10 s: %d", rec.Status())
		}
		time.Sleep(61 * time.Second)
		synctest.Wait()
		if rec := serve(h, legacyRequest(t.Context(), http.MethodPost, callBody(5, "echo", `{"text":"x"}`), used, "", nil)); rec.Status() != 404 {
			t.Errorf("the session in use a minute after its last request: %d", rec.Status())
		}
		if st := h.Stats(); st.Sessions != 0 || st.SessionsExpired != 2 {
			t.Errorf("at the end: %+v", st)
		}
	})
}

// MaxSessions: a new session over the cap ends the one idle the longest
// (one that sent nothing since initialize first); when every session is
// busy (an open stream) initialize gets 503 with Retry-After: 1.
func TestAFullTableEvictsTheSessionIdleLongestOrRefuses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, _ := sessionHandler(t, &streamable.SessionOptions{MaxSessions: 2}, nil)
		a := openSession(t, h, "2025-11-25", nil)
		serve(h, legacyRequest(t.Context(), http.MethodPost, callBody(2, "echo", `{"text":"x"}`), a, "", nil))
		time.Sleep(2 * time.Second)
		b := openSession(t, h, "2025-11-25", nil) // fresh: nothing after initialize
		time.Sleep(2 * time.Second)
		c := openSession(t, h, "2025-11-25", nil) // evicts b, the fresh one, though a idled longer
		if rec := serve(h, legacyRequest(t.Context(), http.MethodPost, callBody(3, "echo", `{"text":"x"}`), b, "", nil)); rec.Status() != 404 {
			t.Errorf("the evicted session: %d", rec.Status())
		}
		for _, sid := range []string{a, c} {
			if rec := serve(h, legacyRequest(t.Context(), http.MethodPost, callBody(4, "echo", `{"text":"x"}`), sid, "", nil)); rec.Status() != 200 {
				t.Errorf("a kept session: %d", rec.Status())
			}
		}
		// Both busy with a GET stream: no room.
		startStream(t, h, legacyRequest(t.Context(), http.MethodGet, "", a, "", nil))
		startStream(t, h, legacyRequest(t.Context(), http.MethodGet, "", c, "", nil))
		synctest.Wait()
		time.Sleep(2 * time.Second)
		rec := serve(h, legacyRequest(t.Context(), http.MethodPost, initializeBody("2025-11-25"), "", "", nil))
		if rec.Status() != 503 || rec.hdr.Get("Retry-After") != "1" || rec.hdr.Get(mcp.HeaderSessionID) != "" {
			t.Errorf("initialize with every session busy: %d, Retry-After %q", rec.Status(), rec.hdr.Get("Retry-After"))
		}
		if st := h.Stats(); st.Sessions != 2 || st.SessionsEvicted != 1 || st.SessionsRefused != 1 {
			t.Errorf("stats: %+v", st)
		}
	})
}

// DELETE ends the session at once for new requests; a handler still
// running gets the end-of-stream grace and is then cancelled, and its
// POST ends.
func TestDELETEEndsTheSessionAndCancelsItsRunningHandlerAfterTheGrace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, ss := sessionHandler(t, nil, nil)
		sid := openSession(t, h, "2025-11-25", nil)
		call := startStream(t, h, legacyRequest(t.Context(), http.MethodPost, callBody(2, "wait", ""), sid, "", nil))
		synctest.Wait()
		rec := serve(h, legacyRequest(t.Context(), http.MethodDelete, "", sid, "", nil))
		if rec.Status() != 200 {
			t.Fatalf("DELETE: %d %s", rec.Status(), rec.Body())
		}
		synctest.Wait()
		select {
		case err := <-ss.cancelled:
			t.Fatalf("cancelled at once (%v): the grace was skipped", err)
		default:
		}
		time.Sleep(6 * time.Second) // the default EndOfStreamTimeout is 5 s
		synctest.Wait()
		select {
		case <-ss.cancelled:
		default:
			t.Fatal("the handler still runs after the grace")
		}
		<-call.done
		if st := h.Stats(); st.Sessions != 0 {
			t.Errorf("sessions: %d", st.Sessions)
		}
	})
}

// ----- streams -----

// getStream opens the session's GET stream and waits until it is
// attached.
func getStream(t *testing.T, h http.Handler, sid, version string, hdr map[string]string) *stream {
	t.Helper()
	st := startStream(t, h, legacyRequest(t.Context(), http.MethodGet, "", sid, version, hdr))
	synctest.Wait()
	if st.rec.Status() != http.StatusOK || st.rec.hdr.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("GET: %d %q %s", st.rec.Status(), st.rec.hdr.Get("Content-Type"), st.rec.Body())
	}
	if got := st.rec.hdr.Get(mcp.HeaderSessionID); got != sid {
		t.Errorf("GET's Mcp-Session-Id %q", got)
	}
	return st
}

// The GET stream carries what belongs to no request: a 2025-11-25 client
// holding a session hears notifications/tools/list_changed and
// notifications/resources/updated there (not on a POST), and the stream
// starts with a priming event (an id, the retry delay, empty data).
func TestTheGETStreamCarriesListChangesAndResourceUpdates(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, ss := sessionHandler(t, nil, nil)
		ss.AddResource(mcp.Resource{URI: "file:///a", Name: "a"}, func(context.Context, *server.ReadRequest) ([]mcp.ResourceContents, error) {
			return []mcp.ResourceContents{{URI: "file:///a", Text: "a"}}, nil
		})
		sid := openSession(t, h, "2025-11-25", nil)
		get := getStream(t, h, sid, "2025-11-25", nil)
		sub := serve(h, legacyRequest(t.Context(), http.MethodPost, `{"jsonrpc":"2.0","id":2,"method":"resources/subscribe","params":{"uri":"file:///a"}}`, sid, "", nil))
		if sub.Status() != 200 || strings.Contains(sub.Body(), "error") {
			t.Fatalf("subscribe: %d %s", sub.Status(), sub.Body())
		}
		ss.AddTool(mcp.Tool{Name: "new"}, func(context.Context, *server.ToolRequest) (*mcp.ToolResult, error) { return mcp.TextResult(""), nil })
		ss.ResourceUpdated("file:///a")
		synctest.Wait()
		evs := parseEvents(get.rec.Body())
		if len(evs) == 0 || evs[0].id == "" || evs[0].retry != "1000" || !evs[0].hasData || evs[0].data != "" {
			t.Fatalf("no priming event first: %q", get.rec.Body())
		}
		var methods []string
		for _, e := range messages(evs) {
			var m struct {
				Method string `json:"method"`
			}
			json.Unmarshal([]byte(e.data), &m)
			methods = append(methods, m.Method)
			if e.id == "" || e.event != "message" {
				t.Errorf("event without an id or named %q: %+v", e.event, e)
			}
		}
		for _, want := range []string{mcp.MethodToolsListChanged, "notifications/resources/updated"} {
			if !slices.Contains(methods, want) {
				t.Errorf("the GET stream lacks %s: %v", want, methods)
			}
		}
	})
}

// The priming event, whose empty data older clients cannot handle, goes
// only to clients of 2025-11-25; their events still carry ids.
func TestOnlyA2025_11_25ClientGetsPrimingEvents(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		for _, tc := range []struct {
			version string
			primed  bool
		}{{"2025-11-25", true}, {"2025-06-18", false}, {"2025-03-26", false}} {
			h, ss := sessionHandler(t, nil, nil)
			sid := openSession(t, h, tc.version, nil)
			get := getStream(t, h, sid, "", nil)
			post := startStream(t, h, legacyRequest(t.Context(), http.MethodPost, callBody(2, "wait", ""), sid, "", map[string]string{"Accept": "text/event-stream"}))
			synctest.Wait()
			ss.AddTool(mcp.Tool{Name: "new"}, func(context.Context, *server.ToolRequest) (*mcp.ToolResult, error) { return nil, nil })
			synctest.Wait()
			for name, body := range map[string]string{"GET": get.rec.Body(), "POST": post.rec.Body()} {
				evs := parseEvents(body)
				primed := len(evs) > 0 && evs[0].hasData && evs[0].data == ""
				if primed != tc.primed {
					t.Errorf("%s %s: primed %v, want %v: %q", tc.version, name, primed, tc.primed, body)
				}
			}
			if msgs := messages(parseEvents(get.rec.Body())); len(msgs) == 0 || msgs[0].id == "" {
				t.Errorf("%s: the list change has no event id: %q", tc.version, get.rec.Body())
			}
			close(ss.release)
			<-post.done
			get.stop()
			<-get.done
		}
	})
}

// "The server MUST send each of its JSON-RPC messages on only one of the
// connected streams": several calls at once, each with progress, while
// the GET stream is open and the tool list changes. Each progress
// notification and each response is on its own call's stream, once; the
// list change is on the GET stream, once.
func TestEachMessageTravelsOnExactlyOneStream(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, ss := sessionHandler(t, nil, nil)
		sid := openSession(t, h, "2025-11-25", nil)
		get := getStream(t, h, sid, "", nil)
		const calls, steps = 4, 5
		var posts []*stream
		for i := range calls {
			body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"progress","arguments":{"steps":%d},"_meta":{"progressToken":"p%d"}}}`, 100+i, steps, i)
			posts = append(posts, startStream(t, h, legacyRequest(t.Context(), http.MethodPost, body, sid, "2025-03-26", nil)))
		}
		ss.AddTool(mcp.Tool{Name: "late"}, func(context.Context, *server.ToolRequest) (*mcp.ToolResult, error) { return nil, nil })
		for _, p := range posts {
			<-p.done
		}
		synctest.Wait()
		seen := map[string]int{}
		for i, p := range posts {
			msgs := messages(parseEvents(p.rec.Body()))
			if len(msgs) != steps+1 {
				t.Errorf("call %d: %d messages, want %d: %s", i, len(msgs), steps+1, p.rec.Body())
			}
			for _, m := range msgs {
				seen[m.data]++
				if strings.Contains(m.data, "progressToken") && !strings.Contains(m.data, fmt.Sprintf(`"progressToken":"p%d"`, i)) {
					t.Errorf("call %d's stream has another's progress: %s", i, m.data)
				}
				if strings.Contains(m.data, "list_changed") {
					t.Errorf("call %d's stream has the list change", i)
				}
			}
		}
		gm := messages(parseEvents(get.rec.Body()))
		if len(gm) != 1 || !strings.Contains(gm[0].data, mcp.MethodToolsListChanged) {
			t.Errorf("the GET stream: %v", gm)
		}
		for _, m := range gm {
			seen[m.data]++
		}
		for data, n := range seen {
			if n != 1 {
				t.Errorf("sent %d times: %s", n, data)
			}
		}
	})
}

// Of two GET streams of one session, the latest wins: the older one ends
// (a client reconnecting before its dead connection is noticed is not
// locked out), and a message goes on the newer one only.
func TestTheLatestGETStreamOfASessionWins(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, ss := sessionHandler(t, nil, nil)
		sid := openSession(t, h, "2025-11-25", nil)
		first := getStream(t, h, sid, "", nil)
		second := getStream(t, h, sid, "", nil)
		if !first.ended() {
			t.Fatal("the older GET stream is still open")
		}
		ss.AddTool(mcp.Tool{Name: "x"}, func(context.Context, *server.ToolRequest) (*mcp.ToolResult, error) { return nil, nil })
		synctest.Wait()
		if n := len(messages(parseEvents(second.rec.Body()))); n != 1 {
			t.Errorf("the newer stream has %d messages", n)
		}
		if n := len(messages(parseEvents(first.rec.Body()))); n != 0 {
			t.Errorf("the older stream has %d messages", n)
		}
	})
}

// MaxStreamsPerSession bounds a session's open streams: one more GET gets
// 503 with Retry-After: 1, counted.
func TestASessionOverMaxStreamsPerSessionGets503(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, _ := sessionHandler(t, &streamable.SessionOptions{MaxStreamsPerSession: 2}, nil)
		sid := openSession(t, h, "2025-11-25", nil)
		startStream(t, h, legacyRequest(t.Context(), http.MethodPost, callBody(2, "wait", ""), sid, "", map[string]string{"Accept": "text/event-stream"}))
		getStream(t, h, sid, "", nil)
		rec := serve(h, legacyRequest(t.Context(), http.MethodGet, "", sid, "", map[string]string{"Last-Event-ID": "g_1"}))
		if rec.Status() != 503 || rec.hdr.Get("Retry-After") != "1" {
			t.Errorf("a third stream: %d %s", rec.Status(), rec.Body())
		}
		if st := h.Stats(); st.SessionStreamsRefused != 1 {
			t.Errorf("stats: %+v", st)
		}
	})
}

// A server request made on behalf of a call (legacy elicitation) goes on
// that call's stream under the session connection's own id, and the
// client's answer, POSTed on its own in the session, reaches it.
func TestAServerRequestInASessionIsAnsweredByAPOSTOfItsOwn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, _ := sessionHandler(t, nil, nil)
		sid := openSession(t, h, "2025-11-25", nil)
		call := startStream(t, h, legacyRequest(t.Context(), http.MethodPost, callBody(2, "ask", ""), sid, "", nil))
		synctest.Wait()
		msgs := messages(parseEvents(call.rec.Body()))
		if len(msgs) != 1 {
			t.Fatalf("the call's stream: %q", call.rec.Body())
		}
		var ask struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		json.Unmarshal([]byte(msgs[0].data), &ask)
		if ask.Method != "elicitation/create" || strings.Contains(string(ask.ID), "srv-") {
			t.Fatalf("the server's request: %s", msgs[0].data)
		}
		answer := `{"jsonrpc":"2.0","id":` + string(ask.ID) + `,"result":{"action":"accept","content":{}}}`
		if rec := serve(h, legacyRequest(t.Context(), http.MethodPost, answer, sid, "", nil)); rec.Status() != 202 {
			t.Fatalf("the answer: %d %s", rec.Status(), rec.Body())
		}
		<-call.done
		msgs = messages(parseEvents(call.rec.Body()))
		if len(msgs) != 2 || !strings.Contains(msgs[1].data, `"text":"accept"`) {
			t.Errorf("the call's result: %q", call.rec.Body())
		}
	})
}

// ----- resumability -----

// "Disconnection SHOULD NOT be interpreted as the client cancelling its
// request": a call whose stream drops after its priming event runs on;
// what it sends meanwhile, its response included, is replayed to a GET
// with Last-Event-ID (that stream's events only), after which that GET
// ends.
func TestADroppedPOSTStreamIsReplayedWithItsResponse(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, ss := sessionHandler(t, nil, nil)
		sid := openSession(t, h, "2025-11-25", nil)
		get := getStream(t, h, sid, "", nil)
		call := startStream(t, h, legacyRequest(t.Context(), http.MethodPost, callBody(2, "wait", ""), sid, "", map[string]string{"Accept": "text/event-stream"}))
		synctest.Wait()
		evs := parseEvents(call.rec.Body())
		if len(evs) != 1 || evs[0].id == "" {
			t.Fatalf("no priming event: %q", call.rec.Body())
		}
		call.stop()
		synctest.Wait()
		ss.AddTool(mcp.Tool{Name: "meanwhile"}, func(context.Context, *server.ToolRequest) (*mcp.ToolResult, error) { return nil, nil })
		close(ss.release)
		<-call.done
		synctest.Wait()
		select {
		case err := <-ss.cancelled:
			t.Fatalf("the dropped call was cancelled: %v", err)
		default:
		}
		if strings.Contains(call.rec.Body(), "released") {
			t.Fatalf("the response went to the client that had gone: %q", call.rec.Body())
		}
		rec := serve(h, legacyRequest(t.Context(), http.MethodGet, "", sid, "", map[string]string{"Last-Event-ID": evs[0].id}))
		msgs := messages(parseEvents(rec.Body()))
		if rec.Status() != 200 || len(msgs) != 1 || !strings.Contains(msgs[0].data, `"text":"released"`) || !strings.Contains(msgs[0].data, `"id":2`) {
			t.Fatalf("the replay: %d %q", rec.Status(), rec.Body())
		}
		if gm := messages(parseEvents(get.rec.Body())); len(gm) != 1 || !strings.Contains(gm[0].data, "list_changed") {
			t.Errorf("the GET stream: %v", gm)
		}
		// Replayed, the stream stays to the store's retention: the
		// resumption's connection too may break before its client reads
		// the response, and the client may resume again.
		again := serve(h, legacyRequest(t.Context(), http.MethodGet, "", sid, "", map[string]string{"Last-Event-ID": evs[0].id}))
		if again.Status() != 200 || again.Body() != rec.Body() {
			t.Errorf("replaying the stream again: %d %q, want what the first replay sent: %q", again.Status(), again.Body(), rec.Body())
		}
		if st := h.Stats(); st.EventsReplayed != 2 || st.ReplayGaps != 0 {
			t.Errorf("stats: %+v", st)
		}
	})
}

// A resumption of a stream that is still live takes it over: the events
// sent since the id are replayed, and what comes next (the response
// included) goes on the new connection only, which then ends.
func TestAResumptionOfALiveStreamTakesItOver(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, ss := sessionHandler(t, nil, nil)
		sid := openSession(t, h, "2025-11-25", nil)
		call := startStream(t, h, legacyRequest(t.Context(), http.MethodPost, callBody(2, "wait", ""), sid, "", map[string]string{"Accept": "text/event-stream"}))
		synctest.Wait()
		prime := parseEvents(call.rec.Body())[0].id
		resumed := startStream(t, h, legacyRequest(t.Context(), http.MethodGet, "", sid, "", map[string]string{"Last-Event-ID": prime}))
		synctest.Wait()
		if resumed.ended() || resumed.rec.Status() != 200 {
			t.Fatalf("the resumption: %d %q", resumed.rec.Status(), resumed.rec.Body())
		}
		close(ss.release)
		<-resumed.done
		<-call.done // the old connection ends with its handler
		msgs := messages(parseEvents(resumed.rec.Body()))
		if len(msgs) != 1 || !strings.Contains(msgs[0].data, `"text":"released"`) {
			t.Errorf("the resumed stream: %q", resumed.rec.Body())
		}
		if strings.Contains(call.rec.Body(), "released") {
			t.Error("the response went on the old connection too")
		}
	})
}

// An id the session never issued, or another session's, is 400 with a
// body that is no modern error, never 404: a 404 would tell the client its
// session is gone.
func TestAnUnknownLastEventIDIs400(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, _ := sessionHandler(t, nil, nil)
		a, b := openSession(t, h, "2025-11-25", nil), openSession(t, h, "2025-11-25", nil)
		gb := getStream(t, h, b, "", nil)
		bid := parseEvents(gb.rec.Body())[0].id
		for _, last := range []string{"nope", "g_999999999", bid} {
			rec := serve(h, legacyRequest(t.Context(), http.MethodGet, "", a, "", map[string]string{"Last-Event-ID": last}))
			if code, _ := errCode(t, rec.Body()); rec.Status() != 400 || code != -32000 {
				t.Errorf("Last-Event-ID %q: %d %s", last, rec.Status(), rec.Body())
			}
		}
		if st := h.Stats(); st.ReplayGaps != 3 {
			t.Errorf("stats: %+v", st)
		}
	})
}

// A POST whose stream cannot be resumed (its client has no event id of
// it: a 2025-06-18 client gets no priming event) is cancelled when its
// client goes, as without sessions: nothing could ever deliver its
// answer.
func TestADroppedUnresumablePOSTCancelsItsRequest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, ss := sessionHandler(t, nil, nil)
		sid := openSession(t, h, "2025-06-18", nil)
		call := startStream(t, h, legacyRequest(t.Context(), http.MethodPost, callBody(2, "wait", ""), sid, "", nil))
		synctest.Wait()
		call.stop()
		synctest.Wait()
		select {
		case <-ss.cancelled:
		default:
			t.Fatal("the handler of a dropped, unresumable call runs on")
		}
		// The id is free again.
		close(ss.release)
		if rec := serve(h, legacyRequest(t.Context(), http.MethodPost, callBody(2, "wait", ""), sid, "", nil)); rec.Status() != 200 {
			t.Errorf("the id again: %d %s", rec.Status(), rec.Body())
		}
	})
}

// ----- shutdown -----

// Shutdown ends the sessions: open GET streams end, a running call is
// answered within the grace, and the table is empty.
func TestShutdownEndsSessionsAndTheirStreams(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, ss := sessionHandler(t, nil, nil)
		sid := openSession(t, h, "2025-11-25", nil)
		get := getStream(t, h, sid, "", nil)
		call := startStream(t, h, legacyRequest(t.Context(), http.MethodPost, callBody(2, "wait", ""), sid, "", nil))
		synctest.Wait()
		done := make(chan error, 1)
		go func() { done <- h.Shutdown(context.Background()) }()
		synctest.Wait()
		if !get.ended() {
			t.Error("the GET stream outlives Shutdown")
		}
		close(ss.release)
		if err := <-done; err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		<-call.done
		if !strings.Contains(call.rec.Body(), "released") {
			t.Errorf("the running call: %q", call.rec.Body())
		}
		if st := h.Stats(); st.Sessions != 0 {
			t.Errorf("sessions after Shutdown: %d", st.Sessions)
		}
	})
}

// ----- a fleet: sessions shared through a SessionStore -----

// memSessions is a SessionStore in memory, shared by the handlers of a
// test as Redis is by a fleet's instances.
type memSessions struct {
	mu      sync.Mutex
	recs    map[string]streamable.SessionRecord
	expires map[string]time.Time
	saves   int
}

func newMemSessions() *memSessions {
	return &memSessions{recs: map[string]streamable.SessionRecord{}, expires: map[string]time.Time{}}
}

func (m *memSessions) Save(_ context.Context, rec *streamable.SessionRecord, ttl time.Duration) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	c := *rec
	c.Restore = slices.Clone(rec.Restore)
	m.recs[rec.ID], m.expires[rec.ID] = c, time.Now().Add(ttl)
	m.saves++
	return nil
}

func (m *memSessions) liveLocked(id string) (streamable.SessionRecord, bool) {
	rec, ok := m.recs[id]
	if ok && time.Now().After(m.expires[id]) {
		delete(m.recs, id)
		return rec, false
	}
	return rec, ok
}

func (m *memSessions) Load(_ context.Context, id string) (*streamable.SessionRecord, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	rec, ok := m.liveLocked(id)
	if !ok {
		return nil, fmt.Errorf("load %s: %w", id, streamable.ErrUnknownSession)
	}
	rec.Restore = slices.Clone(rec.Restore)
	return &rec, nil
}

func (m *memSessions) Touch(_ context.Context, id string, ttl time.Duration) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	rec, ok := m.liveLocked(id)
	if !ok {
		return "", fmt.Errorf("touch %s: %w", id, streamable.ErrUnknownSession)
	}
	m.expires[id] = time.Now().Add(ttl)
	return rec.Holder, nil
}

func (m *memSessions) Delete(_ context.Context, id string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.recs, id)
	return nil
}

func (m *memSessions) holder(id string) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.recs[id].Holder
}

// Two instances behind one balancer share a SessionStore and an event
// store. A session made on A is served on B, restored there from the
// client's own messages (its subscription included: B tells it of the
// update); a stream that dropped on A is resumed on B, its response
// replayed from the shared events; and A, touching the session later,
// learns that B holds it and takes it back without losing it.
func TestASessionMadeOnOneInstanceIsServedAndResumedOnAnother(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store, events := newMemSessions(), streamable.NewMemoryEvents(nil)
		opts := func(name string) *streamable.SessionOptions {
			return &streamable.SessionOptions{Store: store, Events: events, Instance: name, IdleTimeout: time.Minute}
		}
		a, sa := sessionHandler(t, opts("a"), nil)
		b, sb := sessionHandler(t, opts("b"), nil)
		for _, ss := range []*sessionServer{sa, sb} {
			ss.AddResource(mcp.Resource{URI: "file:///a", Name: "a"}, func(context.Context, *server.ReadRequest) ([]mcp.ResourceContents, error) {
				return []mcp.ResourceContents{{URI: "file:///a", Text: "a"}}, nil
			})
		}
		sid := openSession(t, a, "2025-11-25", nil)
		if rec := serve(a, legacyRequest(t.Context(), http.MethodPost, `{"jsonrpc":"2.0","id":2,"method":"resources/subscribe","params":{"uri":"file:///a"}}`, sid, "", nil)); rec.Status() != 200 {
			t.Fatalf("subscribe on A: %d %s", rec.Status(), rec.Body())
		}
		if got := store.holder(sid); got != "a" {
			t.Fatalf("holder %q after the mint", got)
		}
		// A call on A whose stream drops after its priming event.
		call := startStream(t, a, legacyRequest(t.Context(), http.MethodPost, callBody(3, "wait", ""), sid, "", map[string]string{"Accept": "text/event-stream"}))
		synctest.Wait()
		prime := parseEvents(call.rec.Body())[0].id
		call.stop()
		synctest.Wait()

		// B: the session is served there, restored, and held by B now.
		rec := serve(b, legacyRequest(t.Context(), http.MethodPost, callBody(4, "version", ""), sid, "", nil))
		if rec.Status() != 200 || !strings.Contains(rec.Body(), `"text":"2025-11-25"`) {
			t.Fatalf("a request on B: %d %s", rec.Status(), rec.Body())
		}
		if got := store.holder(sid); got != "b" {
			t.Errorf("holder %q after B served it", got)
		}
		if st := b.Stats(); st.SessionsCreated != 1 || st.Sessions != 1 {
			t.Errorf("B: %+v", st)
		}
		get := getStream(t, b, sid, "", nil)
		sb.ResourceUpdated("file:///a")
		synctest.Wait()
		if !strings.Contains(get.rec.Body(), "notifications/resources/updated") {
			t.Errorf("B did not restore the subscription: %q", get.rec.Body())
		}
		// The call ends on A; its response is in the shared events, and
		// B replays it.
		close(sa.release)
		<-call.done
		rec = serve(b, legacyRequest(t.Context(), http.MethodGet, "", sid, "", map[string]string{"Last-Event-ID": prime}))
		if msgs := messages(parseEvents(rec.Body())); rec.Status() != 200 || len(msgs) != 1 || !strings.Contains(msgs[0].data, `"text":"released"`) {
			t.Fatalf("the resumption on B: %d %q", rec.Status(), rec.Body())
		}
		// A, touching the session a while later, learns B holds it: its
		// copy goes, the record stays, and A serves the session again
		// from the record.
		time.Sleep(20 * time.Second)
		rec = serve(a, legacyRequest(t.Context(), http.MethodPost, callBody(5, "echo", `{"text":"x"}`), sid, "", nil))
		if rec.Status() != 200 {
			t.Fatalf("back on A: %d %s", rec.Status(), rec.Body())
		}
		if st := a.Stats(); st.SessionsCreated != 2 {
			t.Errorf("A did not restore the session it had lost: %+v", st)
		}
		if got := store.holder(sid); got != "a" {
			t.Errorf("holder %q after A took it back", got)
		}
		// DELETE on either ends it everywhere: the record goes.
		if rec := serve(a, legacyRequest(t.Context(), http.MethodDelete, "", sid, "", nil)); rec.Status() != 200 {
			t.Fatalf("DELETE: %d", rec.Status())
		}
		get.stop()
		time.Sleep(20 * time.Second)
		if rec := serve(b, legacyRequest(t.Context(), http.MethodPost, callBody(6, "echo", `{"text":"x"}`), sid, "", nil)); rec.Status() != 404 {
			t.Errorf("B after the DELETE on A: %d %s", rec.Status(), rec.Body())
		}
	})
}

// With a SessionStore, Shutdown ends each resumable stream's connection
// with a retry field, not its stream, and keeps the session's record, so
// that its client resumes on another instance.
func TestShutdownWithAStoreSendsRetryAndKeepsTheSession(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := newMemSessions()
		h, _ := sessionHandler(t, &streamable.SessionOptions{Store: store, Instance: "a", Retry: 500 * time.Millisecond}, nil)
		sid := openSession(t, h, "2025-11-25", nil)
		get := getStream(t, h, sid, "", nil)
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		h.Shutdown(ctx)
		<-get.done
		evs := parseEvents(get.rec.Body())
		if len(evs) < 2 || evs[len(evs)-1].retry != "500" || evs[len(evs)-1].hasData {
			t.Errorf("the GET stream's last words: %q", get.rec.Body())
		}
		if _, err := store.Load(context.Background(), sid); err != nil {
			t.Errorf("the record is gone: %v", err)
		}
	})
}

// ----- memory -----

// 10,000 sessions made by initialize and abandoned (mcp-go's leak was an
// unbounded map of them) expire, and memory and goroutines return to
// what they were: an idle session costs no goroutine and no timer, and
// nothing of an ended one stays behind.
func Test10000AbandonedSessionsExpireAndMemoryReturnsToBaseline(t *testing.T) {
	if testing.Short() {
		t.Skip("10,000 sessions")
	}
	synctest.Test(t, func(t *testing.T) {
		h, _ := sessionHandler(t, &streamable.SessionOptions{IdleTimeout: time.Second, MaxSessions: 12000}, nil)
		abandon := func(n int) {
			for range n {
				rec := serve(h, legacyRequest(t.Context(), http.MethodPost, initializeBody("2025-11-25"), "", "", nil))
				if rec.Status() != 200 || rec.hdr.Get(mcp.HeaderSessionID) == "" {
					t.Fatalf("initialize: %d %s", rec.Status(), rec.Body())
				}
			}
		}
		measure := func() (heap uint64, goroutines int) {
			runtime.GC()
			runtime.GC()
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			return ms.HeapAlloc, runtime.NumGoroutine()
		}
		abandon(100) // warm up the pools and maps the server keeps anyway
		time.Sleep(3 * time.Second)
		synctest.Wait()
		baseHeap, baseG := measure()

		abandon(10000)
		synctest.Wait()
		peakHeap, peakG := measure()
		if st := h.Stats(); st.Sessions != 10000 {
			t.Fatalf("live sessions: %d", st.Sessions)
		}
		if peakG > baseG+2 {
			t.Errorf("10,000 idle sessions hold %d goroutines more than none", peakG-baseG)
		}
		time.Sleep(3 * time.Second)
		synctest.Wait()
		if st := h.Stats(); st.Sessions != 0 || st.SessionsExpired != 10100 {
			t.Fatalf("after the idle timeout: %+v", st)
		}
		heap, g := measure()
		t.Logf("heap: %d KiB at rest, %d KiB with 10,000 sessions, %d KiB after they expired", baseHeap>>10, peakHeap>>10, heap>>10)
		if heap > baseHeap+256<<10 {
			t.Errorf("heap %d KiB after expiry, %d KiB before the sessions: not returned", heap>>10, baseHeap>>10)
		}
		if g > baseG {
			t.Errorf("%d goroutines after expiry, %d before", g, baseG)
		}
	})
}

// A GET stream that drops is resumed with the last id its client saw:
// what was sent on it meanwhile is replayed, and the new connection
// carries the stream from then on.
func TestADroppedGETStreamIsResumedWithoutLosingAnEvent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, ss := sessionHandler(t, nil, nil)
		sid := openSession(t, h, "2025-11-25", nil)
		get := getStream(t, h, sid, "", nil)
		ss.AddTool(mcp.Tool{Name: "one"}, func(context.Context, *server.ToolRequest) (*mcp.ToolResult, error) { return nil, nil })
		synctest.Wait()
		seen := messages(parseEvents(get.rec.Body()))
		if len(seen) != 1 {
			t.Fatalf("before the drop: %q", get.rec.Body())
		}
		get.stop()
		<-get.done
		ss.AddTool(mcp.Tool{Name: "two"}, func(context.Context, *server.ToolRequest) (*mcp.ToolResult, error) { return nil, nil })
		synctest.Wait()
		again := getStream(t, h, sid, "", map[string]string{"Last-Event-ID": seen[0].id})
		msgs := messages(parseEvents(again.rec.Body()))
		if len(msgs) != 1 || !strings.Contains(msgs[0].data, mcp.MethodToolsListChanged) || msgs[0].id == seen[0].id {
			t.Fatalf("the replay: %q", again.rec.Body())
		}
		ss.AddTool(mcp.Tool{Name: "three"}, func(context.Context, *server.ToolRequest) (*mcp.ToolResult, error) { return nil, nil })
		synctest.Wait()
		if n := len(messages(parseEvents(again.rec.Body()))); n != 2 {
			t.Errorf("the resumed stream does not carry the stream on: %q", again.rec.Body())
		}
		if again.ended() {
			t.Error("the resumed GET stream ended")
		}
	})
}

// A quiet GET stream gets a keep-alive comment, so that proxies do not
// end it, from the same clock as every other stream.
func TestAQuietGETStreamIsKeptAlive(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, _ := sessionHandler(t, nil, &streamable.Options{KeepAlive: 4 * time.Second})
		sid := openSession(t, h, "2025-11-25", nil)
		get := getStream(t, h, sid, "", nil)
		time.Sleep(6 * time.Second)
		synctest.Wait()
		if n := strings.Count(get.rec.Body(), ":\n\n"); n != 1 {
			t.Errorf("%d keep-alives after 6 s at 4 s: %q", n, get.rec.Body())
		}
	})
}

// followEvents is an event store that other instances append to (a
// fleet's): Follow sends a stream's events as they come.
type followEvents struct {
	*streamable.MemoryEvents
	mu      sync.Mutex
	changed chan struct{}
}

func newFollowEvents() *followEvents {
	return &followEvents{MemoryEvents: streamable.NewMemoryEvents(nil), changed: make(chan struct{})}
}

func (f *followEvents) Append(ctx context.Context, session, stream string, data []byte) (string, error) {
	id, err := f.MemoryEvents.Append(ctx, session, stream, data)
	f.mu.Lock()
	close(f.changed)
	f.changed = make(chan struct{})
	f.mu.Unlock()
	return id, err
}

func (f *followEvents) Follow(ctx context.Context, session, stream, after string, send func(string, []byte) error) error {
	for {
		f.mu.Lock()
		changed := f.changed
		f.mu.Unlock()
		answered := false
		if _, err := f.Replay(ctx, session, after, func(id string, data []byte) error {
			after = id
			answered = answered || strings.Contains(string(data), `"result"`)
			return send(id, data)
		}); err != nil {
			return err
		}
		if answered {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-changed:
		}
	}
}

// With an EventFollower, a client resuming on one instance a stream whose
// request still runs on another follows it there: what the request sends
// next, its response last, reaches the client on its GET.
func TestAResumptionFollowsAStreamRunningOnAnotherInstance(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store, events := newMemSessions(), newFollowEvents()
		opts := func(name string) *streamable.SessionOptions {
			return &streamable.SessionOptions{Store: store, Events: events, Instance: name}
		}
		a, sa := sessionHandler(t, opts("a"), nil)
		b, _ := sessionHandler(t, opts("b"), nil)
		sid := openSession(t, a, "2025-11-25", nil)
		call := startStream(t, a, legacyRequest(t.Context(), http.MethodPost, callBody(2, "wait", ""), sid, "", map[string]string{"Accept": "text/event-stream"}))
		synctest.Wait()
		prime := parseEvents(call.rec.Body())[0].id
		call.stop()
		synctest.Wait()
		resumed := startStream(t, b, legacyRequest(t.Context(), http.MethodGet, "", sid, "", map[string]string{"Last-Event-ID": prime}))
		synctest.Wait()
		if resumed.ended() || resumed.rec.Status() != 200 {
			t.Fatalf("the resumption on B: %d %q", resumed.rec.Status(), resumed.rec.Body())
		}
		close(sa.release)
		<-resumed.done
		msgs := messages(parseEvents(resumed.rec.Body()))
		if len(msgs) != 1 || !strings.Contains(msgs[0].data, `"text":"released"`) {
			t.Errorf("B's resumed stream: %q", resumed.rec.Body())
		}
	})
}

// The same over a real connection, with net/http's flushes and write
// deadlines: a session's GET stream carries a list change as it happens,
// and after the client drops it, a GET with Last-Event-ID gets what it
// missed.
func TestASessionOverARealConnection(t *testing.T) {
	h, ss := sessionHandler(t, nil, nil)
	srv := httptest.NewServer(h)
	defer srv.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	do := func(ctx context.Context, method, body, sid string, hdr map[string]string) *http.Response {
		t.Helper()
		req := legacyRequest(ctx, method, body, sid, "2025-11-25", hdr)
		req.URL, _ = url.Parse(srv.URL + "/mcp")
		req.Host, req.RequestURI = "", ""
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	resp := do(ctx, http.MethodPost, initializeBody("2025-11-25"), "", nil)
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	sid := resp.Header.Get(mcp.HeaderSessionID)
	if resp.StatusCode != 200 || sid == "" {
		t.Fatalf("initialize: %d, Mcp-Session-Id %q", resp.StatusCode, sid)
	}
	gctx, drop := context.WithCancel(ctx)
	get := do(gctx, http.MethodGet, "", sid, nil)
	if get.StatusCode != 200 || get.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("GET: %d %q", get.StatusCode, get.Header.Get("Content-Type"))
	}
	lines := bufio.NewReader(get.Body)
	next := func(r *bufio.Reader) wireEvent {
		t.Helper()
		var block strings.Builder
		for {
			l, err := r.ReadString('\n')
			if err != nil {
				t.Fatalf("reading the stream: %v (so far %q)", err, block.String())
			}
			if l == "\n" && block.Len() > 0 {
				return parseEvents(block.String() + "\n")[0]
			}
			if l != "\n" && !strings.HasPrefix(l, ":") {
				block.WriteString(l)
			}
		}
	}
	if prime := next(lines); prime.id == "" || prime.data != "" {
		t.Fatalf("no priming event: %+v", prime)
	}
	ss.AddTool(mcp.Tool{Name: "one"}, func(context.Context, *server.ToolRequest) (*mcp.ToolResult, error) { return nil, nil })
	first := next(lines)
	if !strings.Contains(first.data, mcp.MethodToolsListChanged) {
		t.Fatalf("the list change: %+v", first)
	}
	drop()
	get.Body.Close()
	// The drop is noticed when the handler's next write fails, or its
	// request's context ends; either way the change below is stored.
	ss.AddTool(mcp.Tool{Name: "two"}, func(context.Context, *server.ToolRequest) (*mcp.ToolResult, error) { return nil, nil })
	again := do(ctx, http.MethodGet, "", sid, map[string]string{"Last-Event-ID": first.id})
	defer again.Body.Close()
	if again.StatusCode != 200 {
		t.Fatalf("the resumption: %d", again.StatusCode)
	}
	if missed := next(bufio.NewReader(again.Body)); !strings.Contains(missed.data, mcp.MethodToolsListChanged) || missed.id == first.id {
		t.Errorf("the resumption's first event: %+v", missed)
	}
}

// When Shutdown's context ends before a session's handler is done, the
// handler is cancelled then, not at the end of its grace.
func TestShutdownOutOfTimeCancelsASessionsHandlers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, ss := sessionHandler(t, nil, nil)
		sid := openSession(t, h, "2025-11-25", nil)
		call := startStream(t, h, legacyRequest(t.Context(), http.MethodPost, callBody(2, "wait", ""), sid, "", nil))
		synctest.Wait()
		start := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if err := h.Shutdown(ctx); err != context.DeadlineExceeded {
			t.Errorf("Shutdown: %v", err)
		}
		if took := time.Since(start); took > 2*time.Second {
			t.Errorf("Shutdown took %v with a 1 s context", took)
		}
		select {
		case <-ss.cancelled:
		default:
			t.Error("the handler was not cancelled")
		}
		<-call.done
	})
}
