package streamable_test

// The client of the 2024-11-05 HTTP+SSE transport, reached through the
// backwards-compatibility procedure, against servers written from raw
// lines that behave as go-sdk's SSEHandler and mcp-go's SSEServer do.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/agentwire/agentwire/mcp"
	"github.com/agentwire/agentwire/mcp/host"
	"github.com/agentwire/agentwire/mcp/streamable"
)

// sseMsg is what the fake servers read of a POSTed message.
type sseMsg struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  json.RawMessage `json:"error"`
}

// sseFake plays an HTTP+SSE server. style "go-sdk": one path; GET opens a
// session whose endpoint is the same path with ?sessionid=; a POST without
// it gets 400 text/plain, with an unknown one 404. style "mcp-go": GET /sse
// opens a session whose endpoint is /message?sessionId= (the line ends
// with CRLF CRLF, as mcp-go writes it); POST /sse gets 405 text/plain; a
// POST to /message with a missing or unknown session gets 400 and an
// id-less JSON-RPC error.
type sseFake struct {
	t     *testing.T
	style string
	// endpoint, when set, replaces the endpoint event's data (%s is the
	// session id).
	endpoint string
	// first, when set, is written instead of the endpoint event.
	first string
	// handle, when set, serves a message before the defaults; it reports
	// whether it did.
	handle func(s *sseSess, m sseMsg) bool

	mu       sync.Mutex
	n        int
	sessions map[string]*sseSess
	log      []string // "GET /sse", "POST /message initialize", ...
	headers  []http.Header
	answers  chan sseMsg   // the client's answers to the server's requests
	notes    chan sseMsg   // the client's notifications
	opened   chan *sseSess // every session, as its stream opens
}

type sseSess struct {
	id     string
	events chan string   // raw event text, written as it is
	end    chan struct{} // closed: the server ends the stream
	gone   chan struct{} // closed once the GET has returned
	once   sync.Once
}

// send queues a message event.
func (s *sseSess) send(format string, args ...any) {
	s.events <- "event: message\ndata: " + fmt.Sprintf(format, args...) + "\n\n"
}

// hangUp ends the session's stream from the server's side.
func (s *sseSess) hangUp() { s.once.Do(func() { close(s.end) }) }

func newSSEFake(t *testing.T, style string) *sseFake {
	return &sseFake{t: t, style: style, sessions: map[string]*sseSess{}, answers: make(chan sseMsg, 16), notes: make(chan sseMsg, 16), opened: make(chan *sseSess, 16)}
}

func (f *sseFake) record(r *http.Request, what string) {
	f.mu.Lock()
	f.log = append(f.log, what)
	f.headers = append(f.headers, r.Header.Clone())
	f.mu.Unlock()
}

// requests is what the server has been sent so far.
func (f *sseFake) requests() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.log...)
}

func (f *sseFake) allHeaders() []http.Header {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]http.Header(nil), f.headers...)
}

// next returns the next session opened, waiting for it.
func (f *sseFake) next() *sseSess {
	f.t.Helper()
	select {
	case s := <-f.opened:
		return s
	case <-time.After(5 * time.Second):
		f.t.Fatal("no session was opened")
		return nil
	}
}

func (f *sseFake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	sidParam, ssePath := "sessionid", r.URL.Path
	if f.style == "mcp-go" {
		sidParam, ssePath = "sessionId", "/sse"
	}
	switch {
	case r.Method == http.MethodGet && r.URL.Path == ssePath:
		f.record(r, "GET "+r.URL.Path)
		f.stream(w, r)
	case r.Method == http.MethodPost && f.style == "mcp-go" && r.URL.Path == "/sse":
		f.record(r, "POST /sse 405")
		http.Error(w, "Method not allowed", http.StatusMethodNotAllowed)
	case r.Method == http.MethodPost:
		b, _ := io.ReadAll(r.Body)
		var m sseMsg
		json.Unmarshal(b, &m)
		sid := r.URL.Query().Get(sidParam)
		f.mu.Lock()
		s := f.sessions[sid]
		f.mu.Unlock()
		switch {
		case f.style == "mcp-go" && s == nil:
			f.record(r, "POST "+r.URL.Path+" 400 "+m.Method)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			io.WriteString(w, `{"jsonrpc":"2.0","id":null,"error":{"code":-32602,"message":"Invalid session ID"}}`)
			return
		case sid == "":
			f.record(r, "POST "+r.URL.Path+" 400 "+m.Method)
			http.Error(w, "sessionid must be provided", http.StatusBadRequest)
			return
		case s == nil:
			f.record(r, "POST "+r.URL.Path+" 404 "+m.Method)
			http.Error(w, "session not found", http.StatusNotFound)
			return
		}
		f.record(r, "POST "+r.URL.Path+" "+sid+" "+m.Method)
		w.WriteHeader(http.StatusAccepted)
		f.serve(s, m)
	default:
		f.record(r, r.Method+" "+r.URL.Path+" 405")
		http.Error(w, "Method Not Allowed", http.StatusMethodNotAllowed)
	}
}

func (f *sseFake) stream(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.n++
	s := &sseSess{id: fmt.Sprintf("S%d", f.n), events: make(chan string, 64), end: make(chan struct{}), gone: make(chan struct{})}
	f.sessions[s.id] = s
	f.mu.Unlock()
	f.opened <- s
	defer func() {
		f.mu.Lock()
		delete(f.sessions, s.id)
		f.mu.Unlock()
		close(s.gone)
	}()
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	switch {
	case f.first != "":
		io.WriteString(w, f.first)
	case f.endpoint != "":
		fmt.Fprintf(w, "event: endpoint\ndata: "+f.endpoint+"\n\n", s.id)
	case f.style == "mcp-go":
		fmt.Fprintf(w, "event: endpoint\ndata: /message?sessionId=%s\r\n\r\n", s.id)
	default:
		fmt.Fprintf(w, "event: endpoint\ndata: %s?sessionid=%s\n\n", r.URL.Path, s.id)
	}
	w.(http.Flusher).Flush()
	for {
		select {
		case ev := <-s.events:
			io.WriteString(w, ev)
			w.(http.Flusher).Flush()
		case <-s.end:
			return
		case <-r.Context().Done():
			return
		}
	}
}

// serve answers a message on its session's stream, as the servers do
// after their 202.
func (f *sseFake) serve(s *sseSess, m sseMsg) {
	if f.handle != nil && f.handle(s, m) {
		return
	}
	switch {
	case m.Method == "" && (m.Result != nil || m.Error != nil):
		f.answers <- m
	case m.ID == nil:
		select {
		case f.notes <- m:
		default:
		}
	case m.Method == "initialize":
		s.send(`{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":"2024-11-05","capabilities":{"tools":{}},"serverInfo":{"name":"%s-sse","version":"1"}}}`, m.ID, f.style)
	case m.Method == "tools/list":
		s.send(`{"jsonrpc":"2.0","id":%s,"result":{"tools":[{"name":"echo","inputSchema":{"type":"object"}}]}}`, m.ID)
	case m.Method == "tools/call":
		var p struct {
			Arguments struct {
				Text string `json:"text"`
			} `json:"arguments"`
		}
		json.Unmarshal(m.Params, &p)
		text, _ := json.Marshal(p.Arguments.Text)
		s.send(`{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":%s}]}}`, m.ID, text)
	default:
		s.send(`{"jsonrpc":"2.0","id":%s,"error":{"code":-32601,"message":"Method not found"}}`, m.ID)
	}
}

// The 2024-11-05 HTTP+SSE transport, reached as every later revision's
// backwards compatibility says: the probe and the initialize POST fail
// with a bare 400 (go-sdk's "sessionid must be provided"), so the client
// GETs the URL, takes the endpoint event, and the session's messages go
// there while every answer comes on the stream; the credentials go on
// every request, and Close ends the stream without a DELETE.
func TestHTTPClientReachesAGoSDKStyleHTTPSSEServer(t *testing.T) {
	f := newSSEFake(t, "go-sdk")
	srv := httptest.NewServer(f)
	defer srv.Close()
	sess, err := streamable.Connect(t.Context(), srv.URL+"/mcp", nil, &streamable.ClientOptions{Token: "t0k"})
	if err != nil {
		t.Fatal(err)
	}
	if sess.Era() != mcp.Legacy || sess.ProtocolVersion() != "2024-11-05" || sess.ServerInfo().Name != "go-sdk-sse" {
		t.Errorf("era %s version %s server %+v", sess.Era(), sess.ProtocolVersion(), sess.ServerInfo())
	}
	tools, err := sess.ListTools(t.Context())
	if err != nil || len(tools) != 1 || tools[0].Name != "echo" {
		t.Fatalf("tools %v, %v", tools, err)
	}
	res, err := sess.CallTool(t.Context(), "echo", map[string]any{"text": "over sse"})
	if err != nil || res.Content[0].Text != "over sse" {
		t.Fatalf("call %+v, %v", res, err)
	}
	s := f.next()
	sess.Close()
	select {
	case <-s.gone:
	case <-time.After(5 * time.Second):
		t.Fatal("the event stream is still open after Close")
	}
	want := []string{
		"POST /mcp 400 server/discover",
		"POST /mcp 400 initialize",
		"GET /mcp",
		"POST /mcp S1 initialize",
		"POST /mcp S1 notifications/initialized",
		"POST /mcp S1 tools/list",
		"POST /mcp S1 tools/call",
	}
	if got := f.requests(); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("the server was sent\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for i, h := range f.allHeaders() {
		if h.Get("Authorization") != "Bearer t0k" {
			t.Errorf("request %d (%s) without the token", i, f.requests()[i])
		}
	}
	if h := f.allHeaders()[2]; !strings.Contains(h.Get("Accept"), "text/event-stream") {
		t.Errorf("the GET accepts %q", h.Get("Accept"))
	}
}

// mcp-go's SSEServer: POST /sse gets 405, the endpoint is an absolute
// path elsewhere (/message?sessionId=...) on a line ending in CRLF, and
// the server's keep-alive is a ping request on the stream, which the
// client answers at once with an empty result; the server's own requests
// go to OnInput and its notifications where they belong, and both
// answers are POSTed to the endpoint.
func TestHTTPClientReachesAnMCPGoStyleHTTPSSEServerAndAnswersItsPings(t *testing.T) {
	f := newSSEFake(t, "mcp-go")
	srv := httptest.NewServer(f)
	defer srv.Close()
	logs := make(chan string, 4)
	changed := make(chan string, 4)
	sess, err := streamable.Connect(t.Context(), srv.URL+"/sse", &host.Options{
		OnInput: func(_ context.Context, req mcp.InputRequest) (any, error) {
			return map[string]any{"role": "assistant", "content": map[string]any{"type": "text", "text": "sampled"}, "model": "m"}, nil
		},
		OnLog:          func(level, _ string, data json.RawMessage) { logs <- level + " " + string(data) },
		OnNotification: func(method string, _ json.RawMessage) { changed <- method },
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	s := f.next()
	s.send(`{"jsonrpc":"2.0","id":1,"method":"ping"}`)
	s.send(`{"jsonrpc":"2.0","id":2,"method":"sampling/createMessage","params":{"messages":[],"maxTokens":1}}`)
	s.send(`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"hello"}}`)
	s.send(`{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`)
	got := map[string]string{}
	for range 2 {
		select {
		case m := <-f.answers:
			got[string(m.ID)] = string(m.Result)
		case <-time.After(5 * time.Second):
			t.Fatal("the client did not answer the server's requests")
		}
	}
	if got["1"] != "{}" {
		t.Errorf("the ping was answered with %q", got["1"])
	}
	if !strings.Contains(got["2"], "sampled") {
		t.Errorf("sampling was answered with %q", got["2"])
	}
	for _, ch := range []chan string{logs, changed} {
		select {
		case m := <-ch:
			if m != `info "hello"` && m != "notifications/tools/list_changed" {
				t.Errorf("got %s", m)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("a notification on the stream was not delivered")
		}
	}
	res, err := sess.CallTool(t.Context(), "echo", map[string]any{"text": "mcp-go"})
	if err != nil || res.Content[0].Text != "mcp-go" {
		t.Fatalf("call %+v, %v", res, err)
	}
	reqs := f.requests()
	if reqs[0] != "POST /sse 405" || reqs[1] != "POST /sse 405" || reqs[2] != "GET /sse" {
		t.Errorf("the connect went %v", reqs)
	}
	for _, r := range reqs[3:] {
		if !strings.HasPrefix(r, "POST /message S1 ") {
			t.Errorf("a message went %q, not to the endpoint", r)
		}
	}
}

// The endpoint event must name the server's own origin: the messages
// carry the client's credentials. An endpoint on another host, or on
// another port of the same host, fails the connect with the initialize
// error, and nothing is sent there.
func TestHTTPClientRefusesAnHTTPSSEEndpointOnAnotherOrigin(t *testing.T) {
	var elsewhere []string
	var mu sync.Mutex
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		elsewhere = append(elsewhere, r.Method+" "+r.Header.Get("Authorization"))
		mu.Unlock()
		w.WriteHeader(http.StatusAccepted)
	}))
	defer other.Close()
	for _, ep := range []string{other.URL + "/message?sessionid=%s", "//evil.example/message?sessionid=%s", "https://" + strings.TrimPrefix(other.URL, "http://") + "/m?%s"} {
		f := newSSEFake(t, "go-sdk")
		f.endpoint = ep
		srv := httptest.NewServer(f)
		_, err := streamable.Connect(t.Context(), srv.URL, nil, &streamable.ClientOptions{Token: "secret"})
		srv.Close()
		var hse *streamable.HTTPStatusError
		if !errors.As(err, &hse) || hse.StatusCode != http.StatusBadRequest || !strings.Contains(err.Error(), "origin") {
			t.Errorf("endpoint %s: %v", ep, err)
		}
		if strings.Contains(err.Error(), "secret") {
			t.Errorf("the error shows the token: %v", err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(elsewhere) > 0 {
		t.Errorf("requests went to another origin: %v", elsewhere)
	}
}

// Relative references resolve against the URL as RFC 3986 has it (the
// servers send an absolute path, a relative path or a full URL on the
// same origin).
func TestHTTPClientResolvesTheHTTPSSEEndpointAgainstTheURL(t *testing.T) {
	for _, c := range []struct{ endpoint, url, want string }{
		{"messages?sessionid=%s", "/a/sse", "POST /a/messages S1 initialize"},
		{"../m?sessionid=%s", "/a/b/sse", "POST /a/m S1 initialize"},
		{"/message?sessionid=%s", "/a/sse", "POST /message S1 initialize"},
		{"?sessionid=%s", "/a/sse", "POST /a/sse S1 initialize"},
	} {
		f := newSSEFake(t, "go-sdk")
		f.endpoint = c.endpoint
		srv := httptest.NewServer(f)
		sess, err := streamable.Connect(t.Context(), srv.URL+c.url, nil, nil)
		if err == nil {
			sess.Close()
		}
		got := f.requests()
		srv.Close()
		if len(got) < 4 || got[3] != c.want {
			t.Errorf("endpoint %q from %s: the server was sent %v (err %v)", c.endpoint, c.url, got, err)
		}
	}
	// And a full URL on the same origin.
	f := newSSEFake(t, "go-sdk")
	srv := httptest.NewServer(f)
	defer srv.Close()
	f.endpoint = srv.URL + "/full?sessionid=%s"
	sess, err := streamable.Connect(t.Context(), srv.URL+"/sse", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	sess.Close()
	if got := f.requests(); got[3] != "POST /full S1 initialize" {
		t.Errorf("the server was sent %v", got)
	}
}

// A server that answers the GET but is no HTTP+SSE server (not 200, not
// an event stream, or a first event other than endpoint) leaves the
// connect with the error of the initialize POST, which says what the GET
// found.
func TestHTTPClientWithoutAnEndpointEventFailsWithTheInitializeError(t *testing.T) {
	for name, get := range map[string]http.HandlerFunc{
		"405": func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "Method Not Allowed", http.StatusMethodNotAllowed)
		},
		"html": func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			io.WriteString(w, "<html></html>")
		},
		"message first": func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, "event: message\ndata: {}\n\nevent: endpoint\ndata: /m\n\n")
		},
		"ended": func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, ": nothing\n\n")
		},
	} {
		t.Run(name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Method == http.MethodGet {
					get(w, r)
					return
				}
				http.Error(w, "Not Found", http.StatusNotFound)
			}))
			defer srv.Close()
			_, err := streamable.Connect(t.Context(), srv.URL, nil, nil)
			var hse *streamable.HTTPStatusError
			if !errors.As(err, &hse) || hse.StatusCode != http.StatusNotFound || !strings.Contains(err.Error(), "initialize") || !strings.Contains(err.Error(), "HTTP+SSE") {
				t.Errorf("err = %v", err)
			}
		})
	}
}

// A modern server's refusal of initialize, or a legacy Streamable HTTP
// server's JSON-RPC error, is no reason to look for an HTTP+SSE server:
// no GET is sent.
func TestHTTPClientDoesNotLookForHTTPSSEAfterAJSONRPCError(t *testing.T) {
	var gets int
	var mu sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			mu.Lock()
			gets++
			mu.Unlock()
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		io.WriteString(w, `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Bad Request: Server already initialized"}}`)
	}))
	defer srv.Close()
	if _, err := streamable.Connect(t.Context(), srv.URL, &host.Options{Eras: mcp.LegacyOnly}, nil); err == nil {
		t.Fatal("connected")
	}
	mu.Lock()
	defer mu.Unlock()
	if gets != 0 {
		t.Errorf("%d GETs after a JSON-RPC error to initialize", gets)
	}
}

// When the server ends its stream (the session with it), the calls
// waiting for their answers fail as a transport failure, and the next
// call opens a new stream and initializes a new session there.
func TestHTTPClientStartsANewHTTPSSESessionAfterTheStreamEnds(t *testing.T) {
	f := newSSEFake(t, "go-sdk")
	held := make(chan struct{}, 1)
	f.handle = func(s *sseSess, m sseMsg) bool {
		if m.Method == "tools/call" {
			held <- struct{}{} // never answered
			return true
		}
		return false
	}
	srv := httptest.NewServer(f)
	defer srv.Close()
	sess, err := streamable.Connect(t.Context(), srv.URL, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	errc := make(chan error, 1)
	go func() {
		_, err := sess.CallTool(t.Context(), "echo", map[string]any{"text": "lost"})
		errc <- err
	}()
	<-held
	f.next().hangUp()
	select {
	case err := <-errc:
		if !errors.Is(err, streamable.ErrHTTPTransport) {
			t.Errorf("the waiting call failed with %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the waiting call outlived the stream")
	}
	tools, err := sess.ListTools(t.Context())
	if err != nil || len(tools) != 1 {
		t.Fatalf("after the stream ended: %v, %v", tools, err)
	}
	var tail []string
	for _, r := range f.requests() {
		if strings.HasPrefix(r, "GET") || strings.Contains(r, "S2") {
			tail = append(tail, r)
		}
	}
	want := "GET / | GET / | POST / S2 initialize | POST / S2 notifications/initialized | POST / S2 tools/list"
	if got := strings.Join(tail, " | "); got != want {
		t.Errorf("after the end: %s, want %s", got, want)
	}
}

// A server that no longer knows the session (go-sdk answers 404 once the
// stream has gone) did not take the message: the client starts a new
// session and sends the call again.
func TestHTTPClientSendsACallAgainInANewSessionAfterAn404FromTheEndpoint(t *testing.T) {
	f := newSSEFake(t, "go-sdk")
	srv := httptest.NewServer(f)
	defer srv.Close()
	sess, err := streamable.Connect(t.Context(), srv.URL, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	// The server forgets the session, but the client's stream stays open
	// (a proxy that keeps it, say).
	f.mu.Lock()
	delete(f.sessions, "S1")
	f.mu.Unlock()
	res, err := sess.CallTool(t.Context(), "echo", map[string]any{"text": "again"})
	if err != nil || res.Content[0].Text != "again" {
		t.Fatalf("%+v, %v", res, err)
	}
	got := strings.Join(f.requests()[5:], " | ")
	if want := "POST / 404 tools/call | GET / | POST / S2 initialize | POST / S2 notifications/initialized | POST / S2 tools/call"; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
}

// A call abandoned by its caller is cancelled with notifications/cancelled
// to the endpoint: closing its POST means nothing here, as the POST has
// long been answered.
func TestHTTPClientCancelsAnHTTPSSECallWithNotificationsCancelled(t *testing.T) {
	f := newSSEFake(t, "go-sdk")
	held := make(chan json.RawMessage, 1)
	f.handle = func(s *sseSess, m sseMsg) bool {
		if m.Method == "tools/call" {
			held <- m.ID
			return true
		}
		return false
	}
	srv := httptest.NewServer(f)
	defer srv.Close()
	sess, err := streamable.Connect(t.Context(), srv.URL, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() {
		_, err := sess.CallTool(ctx, "echo", nil)
		errc <- err
	}()
	id := <-held
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Errorf("call error %v", err)
	}
	for {
		select {
		case m := <-f.notes:
			if m.Method != mcp.MethodCancelled {
				continue
			}
			var p struct {
				RequestID json.RawMessage `json:"requestId"`
			}
			json.Unmarshal(m.Params, &p)
			if string(p.RequestID) != string(id) {
				t.Errorf("cancelled %s, want %s", p.RequestID, id)
			}
			return
		case <-time.After(5 * time.Second):
			t.Fatal("no notifications/cancelled")
		}
	}
}

// The calls waiting at once for their answers are bounded: one more fails
// at once with ErrTooManyCalls, and the others are not disturbed.
func TestHTTPClientBoundsTheHTTPSSECallsWaitingForAnAnswer(t *testing.T) {
	f := newSSEFake(t, "go-sdk")
	held := make(chan *sseSess, 1)
	var heldID json.RawMessage
	f.handle = func(s *sseSess, m sseMsg) bool {
		if m.Method == "tools/call" {
			heldID = m.ID
			held <- s
			return true
		}
		return false
	}
	srv := httptest.NewServer(f)
	defer srv.Close()
	sess, err := streamable.Connect(t.Context(), srv.URL, nil, &streamable.ClientOptions{MaxPendingCalls: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	errc := make(chan error, 1)
	go func() {
		_, err := sess.CallTool(t.Context(), "echo", nil)
		errc <- err
	}()
	s := <-held
	if _, err := sess.ListTools(t.Context()); !errors.Is(err, streamable.ErrTooManyCalls) {
		t.Errorf("a second call: %v", err)
	}
	s.send(`{"jsonrpc":"2.0","id":%s,"result":{"content":[]}}`, heldID)
	if err := <-errc; err != nil {
		t.Errorf("the waiting call: %v", err)
	}
}

// pipeTransport serves an http.Handler in memory, for tests in a synctest
// bubble (a network read is never durably blocked; a pipe is): each
// request runs the handler on a goroutine of its own, the response comes
// once the handler has written its header, and closing the response body
// cancels the handler's request, as a closed connection would.
type pipeTransport struct{ h http.Handler }

func (p pipeTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx, cancel := context.WithCancel(req.Context())
	sreq := req.Clone(ctx)
	sreq.RequestURI = req.URL.RequestURI()
	sreq.Host = req.URL.Host
	if sreq.Body == nil {
		sreq.Body = http.NoBody
	}
	pr, pw := io.Pipe()
	w := &pipeWriter{header: http.Header{}, body: pw, ready: make(chan struct{})}
	go func() {
		defer cancel()
		defer pw.Close()
		defer w.WriteHeader(http.StatusOK) // a handler that wrote nothing
		defer sreq.Body.Close()
		p.h.ServeHTTP(w, sreq)
	}()
	select {
	case <-w.ready:
	case <-req.Context().Done():
		pr.Close()
		return nil, req.Context().Err()
	}
	return &http.Response{
		StatusCode: w.code, Status: fmt.Sprintf("%d %s", w.code, http.StatusText(w.code)),
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: w.sent, Body: pipeBody{pr, cancel}, Request: req, ContentLength: -1,
	}, nil
}

type pipeBody struct {
	*io.PipeReader
	cancel context.CancelFunc
}

func (b pipeBody) Close() error {
	b.cancel()
	return b.PipeReader.Close()
}

type pipeWriter struct {
	header http.Header
	sent   http.Header
	code   int
	body   *io.PipeWriter
	once   sync.Once
	ready  chan struct{}
}

func (w *pipeWriter) Header() http.Header { return w.header }
func (w *pipeWriter) WriteHeader(code int) {
	w.once.Do(func() {
		w.code, w.sent = code, w.header.Clone()
		close(w.ready)
	})
}
func (w *pipeWriter) Write(b []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	return w.body.Write(b)
}
func (w *pipeWriter) Flush() { w.WriteHeader(http.StatusOK) }

// pipeClient is an http.Client for pipeTransport.
func pipeClient(h http.Handler) *http.Client { return &http.Client{Transport: pipeTransport{h}} }

// An HTTP+SSE server that sends its stream's headers but no endpoint
// event is given the probe timeout, not the connect's: after it, the
// connect fails with the initialize error.
func TestHTTPClientWaitsTheProbeTimeoutForTheEndpointEvent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodGet {
				w.Header().Set("Content-Type", "text/event-stream")
				w.(http.Flusher).Flush()
				<-r.Context().Done()
				return
			}
			http.Error(w, "Method Not Allowed", http.StatusMethodNotAllowed)
		})
		start := time.Now()
		_, err := streamable.Connect(t.Context(), "http://sse.test/sse", &host.Options{ProbeTimeout: 3 * time.Second, ConnectTimeout: time.Minute},
			&streamable.ClientOptions{Client: pipeClient(h)})
		// The 405s to discover and initialize come at once; the wait for
		// the endpoint is the probe timeout.
		if took := time.Since(start); took != 3*time.Second {
			t.Errorf("the connect took %v, want the probe timeout (3 s)", took)
		}
		var hse *streamable.HTTPStatusError
		if !errors.As(err, &hse) || hse.StatusCode != http.StatusMethodNotAllowed || !strings.Contains(err.Error(), "no endpoint event within 3s") {
			t.Errorf("err = %v", err)
		}
	})
}

// answerCounter is the part of a fake server that takes the client's
// answers to its requests: each POSTed answer is held until release is
// closed, so that the answers in flight at once can be counted.
type answerCounter struct {
	release chan struct{}

	mu                     sync.Mutex
	inflight, peak, served int
}

func newAnswerCounter() *answerCounter { return &answerCounter{release: make(chan struct{})} }

func (a *answerCounter) take(w http.ResponseWriter) {
	a.mu.Lock()
	a.inflight++
	a.peak = max(a.peak, a.inflight)
	a.mu.Unlock()
	<-a.release
	a.mu.Lock()
	a.inflight--
	a.served++
	a.mu.Unlock()
	w.WriteHeader(http.StatusAccepted)
}

func (a *answerCounter) counts() (peak, served int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.peak, a.served
}

// A server that streams requests (pings, as mcp-go's keep-alive sends
// them, here 64 at once) gets at most MaxServerRequests (16) answers in
// flight at once: the stream is read no faster than they are answered,
// and every one is answered in the end. (A goroutine and a POST each,
// without a bound, let a hostile server make the client start as many as
// it liked.)
func TestHTTPClientAnswersAtMost16OfAnHTTPSSEServersRequestsAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		answers := newAnswerCounter()
		events := make(chan string, 128)
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodGet {
				w.Header().Set("Content-Type", "text/event-stream")
				io.WriteString(w, "event: endpoint\ndata: /messages?sessionId=s\n\n")
				w.(http.Flusher).Flush()
				for {
					select {
					case ev := <-events:
						io.WriteString(w, ev)
						w.(http.Flusher).Flush()
					case <-r.Context().Done():
						return
					}
				}
			}
			if r.URL.Path != "/messages" {
				http.Error(w, "Method Not Allowed", http.StatusMethodNotAllowed)
				return
			}
			var m sseMsg
			json.NewDecoder(r.Body).Decode(&m)
			switch {
			case m.Method == "initialize":
				w.WriteHeader(http.StatusAccepted)
				events <- fmt.Sprintf("event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":{\"protocolVersion\":\"2024-11-05\",\"capabilities\":{},\"serverInfo\":{\"name\":\"s\",\"version\":\"1\"}}}\n\n", m.ID)
			case m.Method != "":
				w.WriteHeader(http.StatusAccepted)
			default:
				answers.take(w)
			}
		})
		sess, err := streamable.Connect(t.Context(), "http://sse.test/sse", nil, &streamable.ClientOptions{Client: pipeClient(h)})
		if err != nil {
			t.Fatal(err)
		}
		defer sess.Close()
		const n = 64
		for i := range n {
			events <- fmt.Sprintf("event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":%d,\"method\":\"ping\"}\n\n", i)
		}
		synctest.Wait()
		// The pool's, and the one the stream's reader answers itself.
		if peak, _ := answers.counts(); peak != streamable.DefaultMaxServerRequests+1 {
			t.Errorf("%d answers in flight at once, want %d+1", peak, streamable.DefaultMaxServerRequests)
		}
		close(answers.release)
		synctest.Wait()
		if peak, served := answers.counts(); peak != streamable.DefaultMaxServerRequests+1 || served != n {
			t.Errorf("%d answers in flight at most, %d answered; want %d+1 and %d", peak, served, streamable.DefaultMaxServerRequests, n)
		}
	})
}
