package streamable_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/agentwire/agentwire/internal/wiretest"
	"github.com/agentwire/agentwire/mcp"
	"github.com/agentwire/agentwire/mcp/auth"
	"github.com/agentwire/agentwire/mcp/internal/mcptest"
	"github.com/agentwire/agentwire/mcp/server"
	"github.com/agentwire/agentwire/mcp/streamable"
	"github.com/agentwire/agentwire/rpc"
)

// The 2024-11-05 HTTP+SSE transport (Options.SSE), on the wire: the GET's
// event stream read as bytes, the POSTs' statuses and bodies.

// sseOpts are Options with HTTP+SSE on at its defaults, logging nowhere.
func sseOpts(o streamable.Options) *streamable.Options {
	if o.SSE == nil {
		o.SSE = &streamable.SSEOptions{}
	}
	o.Logger = wiretest.Quiet
	if o.Conn == nil {
		o.Conn = &rpc.Options{Logger: wiretest.Quiet}
	}
	return &o
}

// sseClientStream is a test's open GET on the SSE path, served on a goroutine.
type sseClientStream struct {
	t        *testing.T
	h        http.Handler
	rec      *httpRecorder
	cancel   context.CancelFunc
	done     chan struct{}
	endpoint string // the endpoint event's data
	postURL  string // it, resolved against the GET's URL
}

// sseGet sends a GET for target (an absolute URL) with hdr; the caller
// waits for it (synctest.Wait) before reading.
func sseGet(t *testing.T, h http.Handler, target string, hdr http.Header) *sseClientStream {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	req := httptest.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	req.Header.Set("Accept", "text/event-stream")
	for k, v := range hdr {
		req.Header[k] = v
	}
	s := &sseClientStream{t: t, h: h, rec: newHTTPRecorder(), cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		h.ServeHTTP(s.rec, req)
	}()
	return s
}

// openSSE opens a session at http://localhost:8080/sse and reads its
// endpoint event.
func openSSE(t *testing.T, h http.Handler, hdr http.Header) *sseClientStream {
	t.Helper()
	const target = "http://localhost:8080/sse"
	s := sseGet(t, h, target, hdr)
	synctest.Wait()
	ev := s.events()
	if s.rec.Status() != http.StatusOK || len(ev) == 0 || ev[0].name != "endpoint" {
		t.Fatalf("GET: %d %q", s.rec.Status(), s.rec.Body())
	}
	s.endpoint = ev[0].data
	u, err := url.Parse(target)
	if err == nil {
		u, err = u.Parse(s.endpoint)
	}
	if err != nil {
		t.Fatalf("endpoint %q: %v", s.endpoint, err)
	}
	s.postURL = u.String()
	return s
}

type sseEvent struct{ name, data string }

// events parses the stream so far: each event's name and data (comments
// are not events).
func (s *sseClientStream) events() []sseEvent {
	var out []sseEvent
	for block := range strings.SplitSeq(s.rec.Body(), "\n\n") {
		var ev sseEvent
		for line := range strings.SplitSeq(block, "\n") {
			if v, ok := strings.CutPrefix(line, "event: "); ok {
				ev.name = v
			} else if v, ok := strings.CutPrefix(line, "data: "); ok {
				ev.data = v
			}
		}
		if ev.name != "" || ev.data != "" {
			out = append(out, ev)
		}
	}
	return out
}

// messages returns the data of the message events so far.
func (s *sseClientStream) messages() []string {
	var out []string
	for _, ev := range s.events() {
		if ev.name == "message" {
			out = append(out, ev.data)
		}
	}
	return out
}

// post POSTs body to the session's endpoint.
func (s *sseClientStream) post(body string) *httpRecorder {
	return ssePostTo(s.h, s.postURL, body, nil)
}

func ssePostTo(h http.Handler, target, body string, hdr http.Header) *httpRecorder {
	req := httptest.NewRequest(http.MethodPost, target, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	for k, v := range hdr {
		req.Header[k] = v
	}
	return serve(h, req)
}

// accepted POSTs body and checks the answer: 202 with an empty body.
func (s *sseClientStream) accepted(body string) {
	s.t.Helper()
	rec := s.post(body)
	if rec.Status() != http.StatusAccepted || rec.Body() != "" || rec.hdr.Get("Content-Length") != "0" {
		s.t.Fatalf("POST %s: %d %v %q", body, rec.Status(), rec.hdr, rec.Body())
	}
}

// close ends the GET as a client does, and waits for it to be served.
func (s *sseClientStream) close() {
	s.cancel()
	<-s.done
}

const sseInit = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2024-11-05","capabilities":{"sampling":{}},"clientInfo":{"name":"c","version":"1"}}}`

// initialize runs the handshake on the session.
func (s *sseClientStream) initialize() {
	s.t.Helper()
	before := len(s.messages())
	s.accepted(sseInit)
	synctest.Wait()
	if m := s.messages()[before:]; len(m) != 1 || !strings.Contains(m[0], `"id":1,"result":{`) || !strings.Contains(m[0], `"protocolVersion":"2024-11-05"`) {
		s.t.Fatalf("initialize: %q", m)
	}
	s.accepted(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	synctest.Wait()
}

// "When a client connects, the server MUST send an endpoint event
// containing a URI for the client to use for sending messages": the
// stream's first bytes are that event, its data a relative reference to
// the message path carrying an unguessable session id.
func TestSSEStreamBeginsWithTheEndpointEvent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := streamable.NewHandler(mcptest.NewServer(nil), sseOpts(streamable.Options{}))
		s := sseGet(t, h, "http://localhost:8080/sse", nil)
		synctest.Wait()
		body := s.rec.Body()
		const prefix = "event: endpoint\ndata: messages?sessionId="
		if !strings.HasPrefix(body, prefix) || !strings.HasSuffix(body, "\n\n") || strings.Count(body, "\n") != 3 {
			t.Fatalf("stream %q", body)
		}
		id := strings.TrimSuffix(strings.TrimPrefix(body, prefix), "\n\n")
		if len(id) != 22 || strings.Trim(id, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_") != "" {
			t.Errorf("session id %q: want 16 random bytes in base64url", id)
		}
		if ct := s.rec.hdr.Get("Content-Type"); ct != "text/event-stream" || s.rec.hdr.Get("Cache-Control") != "no-cache" {
			t.Errorf("headers %v", s.rec.hdr)
		}
		// Another GET is another session.
		s2 := sseGet(t, h, "http://localhost:8080/sse", nil)
		synctest.Wait()
		if strings.Contains(s2.rec.Body(), id) {
			t.Errorf("two sessions share id %s", id)
		}
		if st := h.SSEStats(); st.Sessions != 2 || st.SessionsOpened != 2 {
			t.Errorf("stats %+v", st)
		}
		s.close()
		s2.close()
		if st := h.SSEStats(); st.Sessions != 0 {
			t.Errorf("after close: %+v", st)
		}
	})
}

// The endpoint is a relative reference from Path to MessagePath, resolved
// as the SDKs resolve it (go-sdk: url.Parse(sse).Parse(data); TypeScript:
// new URL(data, sse)): it names the same origin, and it still lands on
// the message path when a proxy serves the handler under a prefix.
func TestSSEEndpointResolvesAgainstTheStreamURLBehindAPrefix(t *testing.T) {
	cases := []struct{ path, messages, ref string }{
		{"", "", "messages"},
		{"/sse", "/sse", "sse"},
		{"/a/b/sse", "/a/c/messages", "../c/messages"},
		{"/a/sse", "/messages", "../messages"},
		{"/sse", "/a/b/messages", "a/b/messages"},
		{"/x/", "/x/m", "m"},
		{"/sse", "/", "./"},
		{"/sse", "/m:1/post here", "./m:1/post%20here"},
	}
	for _, c := range cases {
		t.Run(c.path+"→"+c.messages, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				o := &streamable.SSEOptions{Path: c.path, MessagePath: c.messages}
				h := streamable.NewHandler(mcptest.NewServer(nil), sseOpts(streamable.Options{SSE: o}))
				path := c.path
				if path == "" {
					path = "/sse"
				}
				s := sseGet(t, h, "http://localhost:8080"+path, nil)
				synctest.Wait()
				ev := s.events()
				if len(ev) == 0 {
					t.Fatalf("GET: %d %q", s.rec.Status(), s.rec.Body())
				}
				ref, query, _ := strings.Cut(ev[0].data, "?")
				if ref != c.ref || !strings.HasPrefix(query, "sessionId=") {
					t.Fatalf("endpoint %q, want %q?sessionId=…", ev[0].data, c.ref)
				}
				base, _ := url.Parse("https://proxy.example/prefix" + path)
				u, err := base.Parse(ev[0].data)
				messages := c.messages
				if messages == "" {
					messages = "/messages"
				}
				if err != nil || u.Scheme != "https" || u.Host != "proxy.example" || u.Path != "/prefix"+messages || u.Query().Get("sessionId") == "" {
					t.Fatalf("resolved behind the proxy: %v %v", u, err)
				}
				// And without the proxy, the POST lands.
				direct, _ := url.Parse("http://localhost:8080" + path)
				u, _ = direct.Parse(ev[0].data)
				if rec := ssePostTo(h, u.String(), sseInit, nil); rec.Status() != http.StatusAccepted {
					t.Errorf("POST %s: %d %s", u, rec.Status(), rec.Body())
				}
				s.close()
			})
		})
	}
}

// A POST is answered 202 with an empty body, and its answer travels on
// the stream as a message event ("Server messages are sent as SSE message
// events"), responses included; the session keeps what initialize
// negotiated, as a stdio connection does.
func TestSSEPostIsAcceptedAndAnsweredOnTheStream(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := streamable.NewHandler(mcptest.NewServer(nil), sseOpts(streamable.Options{}))
		s := openSSE(t, h, nil)
		// Before initialize, the session says so.
		s.accepted(`{"jsonrpc":"2.0","id":0,"method":"tools/list"}`)
		synctest.Wait()
		if m := s.messages(); len(m) != 1 || !strings.Contains(m[0], `"id":0,"error":{"code":-32600`) {
			t.Fatalf("before initialize: %q", m)
		}
		s.accepted(sseInit)
		synctest.Wait()
		if m := s.messages(); len(m) != 2 || !strings.Contains(m[1], `"protocolVersion":"2024-11-05"`) {
			t.Fatalf("initialize: %q", m)
		}
		s.accepted(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
		s.accepted(`{"jsonrpc":"2.0","id":"e","method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}`)
		synctest.Wait()
		m := s.messages()
		if len(m) != 3 {
			t.Fatalf("messages %q", m)
		}
		if !strings.HasPrefix(m[2], `{"jsonrpc":"2.0","id":"e","result":{`) || !strings.Contains(m[2], `"text":"hi"`) {
			t.Errorf("tools/call: %s", m[2])
		}
		// Progress goes on the same stream, before its response.
		s.accepted(`{"jsonrpc":"2.0","id":"p","method":"tools/call","params":{"_meta":{"progressToken":"t"},"name":"slow","arguments":{"steps":2}}}`)
		time.Sleep(time.Second)
		synctest.Wait()
		m = s.messages()[3:]
		if len(m) != 3 || !strings.Contains(m[0], `"notifications/progress"`) || !strings.Contains(m[1], `"notifications/progress"`) || !strings.Contains(m[2], `"id":"p","result"`) {
			t.Errorf("progress then result: %q", m)
		}
		s.close()
	})
}

// A POST must name a live session of its caller's: without sessionId it
// is 400, with one that never was or has ended 404 (counted, and nothing
// is served); bodies that are not one JSON-RPC message are 400.
func TestSSEPostNeedsALiveSession(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := streamable.NewHandler(mcptest.NewServer(nil), sseOpts(streamable.Options{}))
		if rec := ssePostTo(h, "http://localhost:8080/messages", sseInit, nil); rec.Status() != http.StatusBadRequest {
			t.Errorf("no sessionId: %d %s", rec.Status(), rec.Body())
		}
		if rec := ssePostTo(h, "http://localhost:8080/messages?sessionId=nope", sseInit, nil); rec.Status() != http.StatusNotFound {
			t.Errorf("unknown session: %d %s", rec.Status(), rec.Body())
		}
		s := openSSE(t, h, nil)
		for _, bad := range []string{`[` + sseInit + `]`, `{"jsonrpc":"2.0","id":1,`, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","Name":"x"}}`} {
			if rec := s.post(bad); rec.Status() != http.StatusBadRequest || !strings.Contains(rec.Body(), `"error"`) {
				t.Errorf("POST %s: %d %s", bad, rec.Status(), rec.Body())
			}
		}
		req := httptest.NewRequest(http.MethodPost, s.postURL, strings.NewReader(sseInit))
		req.Header.Set("Content-Type", "text/plain")
		if rec := serve(h, req); rec.Status() != http.StatusUnsupportedMediaType {
			t.Errorf("text/plain: %d", rec.Status())
		}
		synctest.Wait()
		if m := s.messages(); len(m) != 0 {
			t.Errorf("refused POSTs reached the session: %q", m)
		}
		s.close()
		if rec := s.post(sseInit); rec.Status() != http.StatusNotFound {
			t.Errorf("ended session: %d %s", rec.Status(), rec.Body())
		}
		if st := h.SSEStats(); st.MissingSessions != 1 || st.UnknownSessions != 2 {
			t.Errorf("stats %+v", st)
		}
	})
}

// The session's paths take only their own methods; a POST to the stream's
// path (a newer client probing it with initialize) gets 405 in plain
// text, not a JSON-RPC error, so that it reads "not a modern server" and
// falls back to the GET; a GET that does not take an event stream is 406.
func TestSSEPathsTakeTheirOwnMethods(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := streamable.NewHandler(mcptest.NewServer(nil), sseOpts(streamable.Options{}))
		rec := ssePostTo(h, "http://localhost:8080/sse", sseInit, nil)
		if rec.Status() != http.StatusMethodNotAllowed || rec.hdr.Get("Allow") != "GET" || !strings.HasPrefix(rec.hdr.Get("Content-Type"), "text/plain") || strings.Contains(rec.Body(), "jsonrpc") {
			t.Errorf("POST /sse: %d %v %q", rec.Status(), rec.hdr, rec.Body())
		}
		rec = serve(h, httptest.NewRequest(http.MethodGet, "http://localhost:8080/messages?sessionId=x", nil))
		if rec.Status() != http.StatusMethodNotAllowed || rec.hdr.Get("Allow") != "POST" {
			t.Errorf("GET /messages: %d %v", rec.Status(), rec.hdr)
		}
		rec = serve(h, httptest.NewRequest(http.MethodGet, "http://localhost:8080/sse", nil))
		if rec.Status() != http.StatusNotAcceptable {
			t.Errorf("GET without Accept: %d %q", rec.Status(), rec.Body())
		}
		// The Streamable HTTP endpoint is unchanged beside it.
		disc := `{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{` + mcptest.Meta + `}}`
		if rec := serve(h, newPost(t.Context(), disc, modernHeaders(disc, nil))); rec.Status() != http.StatusOK {
			t.Errorf("/mcp: %d", rec.Status())
		}
	})
}

// An HTTP+SSE session is legacy only: a 2026-07-28 request (its _meta
// names a protocol version, or its MCP-Protocol-Version header is a
// modern one) is answered -32022 on the stream with the versions the
// session speaks, which is how go-sdk's client, trying server/discover
// first, learns to fall back to initialize.
func TestSSEModernRequestGetsUnsupportedVersionOnTheStream(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := streamable.NewHandler(mcptest.NewServer(nil), sseOpts(streamable.Options{}))
		s := openSSE(t, h, nil)
		s.accepted(`{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{` + mcptest.Meta + `}}`)
		req := httptest.NewRequest(http.MethodPost, s.postURL, strings.NewReader(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(mcp.HeaderProtocolVersion, mcp.LatestVersion)
		if rec := serve(h, req); rec.Status() != http.StatusAccepted {
			t.Fatalf("modern header: %d", rec.Status())
		}
		synctest.Wait()
		m := s.messages()
		if len(m) != 2 {
			t.Fatalf("messages %q", m)
		}
		// In the order the POSTs were accepted.
		for i, msg := range m {
			var e struct {
				ID    int `json:"id"`
				Error struct {
					Code int64 `json:"code"`
					Data struct {
						Supported []string `json:"supported"`
						Requested string   `json:"requested"`
					} `json:"data"`
				} `json:"error"`
			}
			if err := json.Unmarshal([]byte(msg), &e); err != nil || e.ID != i+1 || e.Error.Code != mcp.CodeUnsupportedProtocolVersion ||
				!slices.Equal(e.Error.Data.Supported, mcp.LegacyVersions) || e.Error.Data.Requested != mcp.LatestVersion {
				t.Errorf("answer %d: %s", i, msg)
			}
		}
		// The fallback works on the same session.
		s.initialize()
		if st := h.SSEStats(); st.ModernRefused != 2 {
			t.Errorf("stats %+v", st)
		}
		s.close()
	})
}

// askingServer has a tool that asks the client for a completion
// (sampling/createMessage) and returns its text.
func askingServer() *server.Server {
	s := mcptest.NewServer(nil)
	s.AddTool(mcp.Tool{Name: "ask"}, func(ctx context.Context, r *server.ToolRequest) (*mcp.ToolResult, error) {
		res, err := r.Ask(ctx, map[string]mcp.InputRequest{"s": {Method: "sampling/createMessage", Params: map[string]any{"messages": []any{}, "maxTokens": 8}}})
		if err != nil {
			return nil, err
		}
		var m struct {
			Content struct {
				Text string `json:"text"`
			} `json:"content"`
		}
		json.Unmarshal(res["s"], &m)
		return mcp.TextResult("the model said " + m.Content.Text), nil
	})
	return s
}

// The server's own request (sampling) goes on the stream; the client's
// answer comes back as a POST of its own (202) and reaches the waiting
// tool, whose result follows on the stream.
func TestSSEServerRequestIsAnsweredByAPost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := streamable.NewHandler(askingServer(), sseOpts(streamable.Options{}))
		s := openSSE(t, h, nil)
		s.initialize()
		s.accepted(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"ask"}}`)
		synctest.Wait()
		m := s.messages()
		if len(m) != 2 {
			t.Fatalf("messages %q", m)
		}
		var ask struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		if json.Unmarshal([]byte(m[1]), &ask) != nil || ask.Method != "sampling/createMessage" || len(ask.ID) == 0 {
			t.Fatalf("server request %s", m[1])
		}
		s.accepted(`{"jsonrpc":"2.0","id":` + string(ask.ID) + `,"result":{"role":"assistant","content":{"type":"text","text":"42"},"model":"m"}}`)
		synctest.Wait()
		m = s.messages()
		if len(m) != 3 || !strings.Contains(m[2], `"id":7,"result"`) || !strings.Contains(m[2], "the model said 42") {
			t.Fatalf("after the answer %q", m)
		}
		s.close()
	})
}

// The HTTP connection of a POST is free for the client's next request as
// soon as the POST is accepted, with its message still being handled: a
// client whose HTTP pool holds one connection besides the stream POSTs
// its answer to a sampling request on the connection that carried the
// tools/call still waiting for that answer. (Answered after its handler,
// the POST would hold that connection, and the answer would wait behind
// the call that waits for it.)
func TestSSEAcceptedPostFreesItsConnection(t *testing.T) {
	h := streamable.NewHandler(askingServer(), sseOpts(streamable.Options{}))
	srv := httptest.NewServer(h)
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		h.Shutdown(ctx)
		srv.Close()
	}()
	client := &http.Client{Transport: &http.Transport{MaxConnsPerHost: 2}} // the stream's, and one
	defer client.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second) // the failure case, not a wait
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/sse", nil)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	next := func() (string, string) {
		t.Helper()
		var name, data string
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				t.Fatalf("reading the stream: %v", err)
			}
			line = strings.TrimSuffix(line, "\n")
			switch {
			case line == "" && (name != "" || data != ""):
				return name, data
			case strings.HasPrefix(line, "event: "):
				name = line[len("event: "):]
			case strings.HasPrefix(line, "data: "):
				data = line[len("data: "):]
			}
		}
	}
	name, data := next()
	if name != "endpoint" {
		t.Fatalf("first event %q %q", name, data)
	}
	base, _ := url.Parse(srv.URL + "/sse")
	endpoint, _ := base.Parse(data)
	if endpoint.Host != base.Host {
		t.Fatalf("endpoint %s is not on %s", endpoint, base.Host)
	}
	post := func(body string) {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, endpoint.String(), strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusAccepted {
			t.Fatalf("POST %s: %d", body, resp.StatusCode)
		}
	}
	post(sseInit)
	if _, data := next(); !strings.Contains(data, `"protocolVersion"`) {
		t.Fatalf("initialize: %s", data)
	}
	post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	post(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"ask"}}`)
	_, data = next()
	var ask struct {
		ID json.RawMessage `json:"id"`
	}
	if err := json.Unmarshal([]byte(data), &ask); err != nil || !strings.Contains(data, "sampling/createMessage") {
		t.Fatalf("server request %s", data)
	}
	post(`{"jsonrpc":"2.0","id":` + string(ask.ID) + `,"result":{"role":"assistant","content":{"type":"text","text":"ok"},"model":"m"}}`)
	if _, data := next(); !strings.Contains(data, "the model said ok") {
		t.Fatalf("result %s", data)
	}
}

// The GET goes through the endpoint's gate: a foreign Host or Origin is
// 403 (a DNS-rebinding page opens no session), no token is 401 with a
// challenge; so does every POST.
func TestSSERefusesForeignCallers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := streamable.NewHandler(mcptest.NewServer(nil), sseOpts(streamable.Options{AllowedHosts: []string{"localhost"}, Token: "s3cret"}))
		bearer := http.Header{"Authorization": {"Bearer s3cret"}}
		with := func(k, v string) http.Header {
			hdr := bearer.Clone()
			if v == "" {
				hdr.Del(k)
			} else {
				hdr.Set(k, v)
			}
			return hdr
		}
		for _, c := range []struct {
			name   string
			target string
			hdr    http.Header
			status int
		}{
			{"host", "http://evil.example/sse", bearer, http.StatusForbidden},
			{"origin", "http://localhost:8080/sse", with("Origin", "http://evil.example"), http.StatusForbidden},
			{"no token", "http://localhost:8080/sse", with("Authorization", ""), http.StatusUnauthorized},
			{"wrong token", "http://localhost:8080/sse", with("Authorization", "Bearer guess"), http.StatusUnauthorized},
		} {
			s := sseGet(t, h, c.target, c.hdr)
			<-s.done
			if s.rec.Status() != c.status || strings.Contains(s.rec.Body(), "endpoint") {
				t.Errorf("GET %s: %d %q", c.name, s.rec.Status(), s.rec.Body())
			}
			if c.status == http.StatusUnauthorized && !strings.HasPrefix(s.rec.hdr.Get("WWW-Authenticate"), "Bearer") {
				t.Errorf("GET %s: no challenge: %v", c.name, s.rec.hdr)
			}
			s.cancel()
		}
		s := openSSE(t, h, bearer)
		if rec := ssePostTo(h, s.postURL, sseInit, nil); rec.Status() != http.StatusUnauthorized {
			t.Errorf("POST without the token: %d", rec.Status())
		}
		if rec := ssePostTo(h, strings.Replace(s.postURL, "localhost:8080", "evil.example", 1), sseInit, bearer); rec.Status() != http.StatusForbidden {
			t.Errorf("POST from a foreign host: %d", rec.Status())
		}
		if rec := ssePostTo(h, s.postURL, sseInit, bearer); rec.Status() != http.StatusAccepted {
			t.Errorf("POST with the token: %d %s", rec.Status(), rec.Body())
		}
		// A page on an allowed origin gets CORS, its preflight included.
		pre := httptest.NewRequest(http.MethodOptions, s.postURL, nil)
		pre.Header.Set("Origin", "http://localhost:3000")
		pre.Header.Set("Access-Control-Request-Method", "POST")
		if rec := serve(h, pre); rec.Status() != http.StatusNoContent || rec.hdr.Get("Access-Control-Allow-Methods") != "POST" || rec.hdr.Get("Access-Control-Allow-Origin") != "http://localhost:3000" {
			t.Errorf("preflight: %d %v", rec.Status(), rec.hdr)
		}
		if st := h.Stats(); st.Forbidden != 3 || st.Unauthorized != 3 {
			t.Errorf("stats %+v", st)
		}
		s.close()
	})
}

// With Options.Protect a session is bound to the identity that opened it:
// a POST with another identity's valid token finds no session (404, not
// 403: it learns nothing of the id), and the handler's context carries
// the identity of the GET.
func TestSSESessionIsBoundToItsIdentity(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := mcptest.NewServer(nil)
		seen := make(chan string, 1)
		s.AddTool(mcp.Tool{Name: "whoami"}, func(ctx context.Context, _ *server.ToolRequest) (*mcp.ToolResult, error) {
			seen <- auth.IdentityFrom(ctx).Subject
			return mcp.TextResult("ok"), nil
		})
		verifier := auth.VerifierFunc(func(_ context.Context, token string) (*auth.Identity, error) {
			switch token {
			case "alice-1", "alice-2":
				return &auth.Identity{Subject: "alice", Issuer: "https://as.example"}, nil
			case "bob":
				return &auth.Identity{Subject: "bob", Issuer: "https://as.example"}, nil
			}
			return nil, auth.ErrInvalidToken
		})
		h := streamable.NewHandler(s, sseOpts(streamable.Options{Protect: &streamable.Protection{
			Verifier: verifier,
			Metadata: auth.ProtectedResourceMetadata{Resource: "http://localhost:8080/mcp", AuthorizationServers: []string{"https://as.example"}},
		}}))
		tok := func(t string) http.Header { return http.Header{"Authorization": {"Bearer " + t}} }
		g := sseGet(t, h, "http://localhost:8080/sse", tok("forged"))
		<-g.done
		if g.rec.Status() != http.StatusUnauthorized {
			t.Errorf("refused token: %d", g.rec.Status())
		}
		st := openSSE(t, h, tok("alice-1"))
		if rec := ssePostTo(h, st.postURL, sseInit, tok("bob")); rec.Status() != http.StatusNotFound {
			t.Errorf("another identity: %d %s", rec.Status(), rec.Body())
		}
		// A refreshed token of the same subject is the same owner.
		if rec := ssePostTo(h, st.postURL, sseInit, tok("alice-2")); rec.Status() != http.StatusAccepted {
			t.Fatalf("the same identity: %d %s", rec.Status(), rec.Body())
		}
		synctest.Wait()
		ssePostTo(h, st.postURL, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, tok("alice-2"))
		ssePostTo(h, st.postURL, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"whoami"}}`, tok("alice-2"))
		if who := <-seen; who != "alice" {
			t.Errorf("the handler saw %q", who)
		}
		st.close()
	})
}

// Sessions are bounded: beyond SessionOptions.MaxSessions (4096 by
// default) a GET gets 503 with Retry-After: 1, counted; a session that
// ends makes room. The GET streams also count against MaxStreams.
func TestSSESessionsAreBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := streamable.NewHandler(mcptest.NewServer(nil), sseOpts(streamable.Options{Sessions: &streamable.SessionOptions{MaxSessions: 2}}))
		a, b := openSSE(t, h, nil), openSSE(t, h, nil)
		c := sseGet(t, h, "http://localhost:8080/sse", nil)
		<-c.done
		if c.rec.Status() != http.StatusServiceUnavailable || c.rec.hdr.Get("Retry-After") != "1" {
			t.Fatalf("over the cap: %d %v", c.rec.Status(), c.rec.hdr)
		}
		if st := h.SSEStats(); st.Sessions != 2 || st.SessionsRefused != 1 {
			t.Errorf("stats %+v", st)
		}
		a.close()
		d := openSSE(t, h, nil)
		b.close()
		d.close()

		h = streamable.NewHandler(mcptest.NewServer(nil), sseOpts(streamable.Options{MaxStreams: 1}))
		a = openSSE(t, h, nil)
		c = sseGet(t, h, "http://localhost:8080/sse", nil)
		<-c.done
		if c.rec.Status() != http.StatusServiceUnavailable || h.Stats().StreamsRefused != 1 {
			t.Errorf("over MaxStreams: %d %+v", c.rec.Status(), h.Stats())
		}
		if st := h.Stats(); st.Streams != 1 || st.InFlight != 0 {
			t.Errorf("the stream's place: %+v", st)
		}
		a.close()
		if st := h.Stats(); st.Streams != 0 {
			t.Errorf("after close: %+v", st)
		}
	})
}

// "Closing the SSE response stream MUST be treated as cancellation" has
// its HTTP+SSE form: the GET closing ends the session. Its running
// handler is cancelled, its id gets 404, and nothing of it is left.
func TestSSEClosingTheStreamEndsTheSessionAndCancelsItsHandler(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := mcptest.NewServer(nil)
		started := make(chan struct{})
		cancelled := make(chan error, 1)
		s.AddTool(mcp.Tool{Name: "wait"}, func(ctx context.Context, _ *server.ToolRequest) (*mcp.ToolResult, error) {
			close(started)
			<-ctx.Done()
			cancelled <- ctx.Err()
			return nil, ctx.Err()
		})
		h := streamable.NewHandler(s, sseOpts(streamable.Options{}))
		st := openSSE(t, h, nil)
		st.initialize()
		st.accepted(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"wait"}}`)
		<-started
		synctest.Wait()
		if hs := h.Stats(); hs.InFlight != 1 {
			t.Errorf("the running call holds a place: %+v", hs)
		}
		st.close()
		if err := <-cancelled; err == nil {
			t.Fatal("the handler was not cancelled")
		}
		if rec := st.post(`{"jsonrpc":"2.0","id":3,"method":"tools/list"}`); rec.Status() != http.StatusNotFound {
			t.Errorf("after close: %d", rec.Status())
		}
		synctest.Wait()
		if hs, ss := h.Stats(), h.SSEStats(); hs.InFlight != 0 || hs.Streams != 0 || hs.BufferedBytes != 0 || ss.Sessions != 0 {
			t.Errorf("left behind: %+v %+v", hs, ss)
		}
	})
}

// failingWriter is a ResponseWriter whose writes fail once the stream's
// first event is out: a client gone without closing its connection.
type failingWriter struct {
	*httpRecorder
	mu    sync.Mutex
	after int
}

func (w *failingWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.after <= 0 {
		return 0, errors.New("broken pipe")
	}
	w.after--
	return w.httpRecorder.Write(b)
}

// A write that fails loses the stream, and the stream is the session: the
// session ends (its GET returns, its id gets 404) rather than serving on
// into nothing.
func TestSSEFailedWriteEndsTheSession(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := streamable.NewHandler(mcptest.NewServer(nil), sseOpts(streamable.Options{}))
		w := &failingWriter{httpRecorder: newHTTPRecorder(), after: 4} // the endpoint event's four pieces
		req := httptest.NewRequestWithContext(t.Context(), http.MethodGet, "http://localhost:8080/sse", nil)
		req.Header.Set("Accept", "text/event-stream")
		done := make(chan struct{})
		go func() {
			defer close(done)
			h.ServeHTTP(w, req)
		}()
		synctest.Wait()
		data, ok := strings.CutPrefix(strings.TrimSuffix(w.Body(), "\n\n"), "event: endpoint\ndata: ")
		if !ok {
			t.Fatalf("stream %q", w.Body())
		}
		target := "http://localhost:8080/" + data
		if rec := ssePostTo(h, target, sseInit, nil); rec.Status() != http.StatusAccepted {
			t.Fatalf("POST: %d", rec.Status())
		}
		<-done // the answer's write failed: the GET is over
		if rec := ssePostTo(h, target, sseInit, nil); rec.Status() != http.StatusNotFound {
			t.Errorf("after the failure: %d", rec.Status())
		}
		if st := h.SSEStats(); st.Sessions != 0 {
			t.Errorf("stats %+v", st)
		}
	})
}

// A quiet session's stream gets a keep-alive comment once it has been
// quiet for KeepAlive, from the handler's one clock, so that proxies do
// not cut it.
func TestSSEQuietStreamIsKeptAlive(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := streamable.NewHandler(mcptest.NewServer(nil), sseOpts(streamable.Options{KeepAlive: 10 * time.Second}))
		s := openSSE(t, h, nil)
		time.Sleep(9 * time.Second)
		synctest.Wait()
		if n := strings.Count(s.rec.Body(), ":\n\n"); n != 0 {
			t.Errorf("%d comments before KeepAlive", n)
		}
		time.Sleep(16 * time.Second) // 25 s: one at 10 to 12.5 s, one 10 to 12.5 s later
		synctest.Wait()
		if n := strings.Count(s.rec.Body(), ":\n\n"); n != 2 {
			t.Errorf("%d comments in 25 s, want 2: %q", n, s.rec.Body())
		}
		if ev := s.events(); len(ev) != 1 {
			t.Errorf("events %q", ev)
		}
		s.close()
	})
}

// Shutdown ends every session: the request in flight finishes and its
// answer goes out on the stream, then the stream ends; a new GET or POST
// gets 503.
func TestSSEShutdownEndsSessions(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := mcptest.NewServer(nil)
		s.AddTool(mcp.Tool{Name: "nap"}, func(ctx context.Context, _ *server.ToolRequest) (*mcp.ToolResult, error) {
			select {
			case <-time.After(2 * time.Second):
				return mcp.TextResult("rested"), nil
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		})
		h := streamable.NewHandler(s, sseOpts(streamable.Options{}))
		busy, idle := openSSE(t, h, nil), openSSE(t, h, nil)
		busy.initialize()
		busy.accepted(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"nap"}}`)
		synctest.Wait()
		if err := h.Shutdown(t.Context()); err != nil {
			t.Fatal(err)
		}
		<-busy.done
		<-idle.done
		if m := busy.messages(); len(m) != 2 || !strings.Contains(m[1], "rested") {
			t.Errorf("the call in flight: %q", m)
		}
		g := sseGet(t, h, "http://localhost:8080/sse", nil)
		<-g.done
		if g.rec.Status() != http.StatusServiceUnavailable {
			t.Errorf("GET after Shutdown: %d", g.rec.Status())
		}
		if rec := busy.post(`{"jsonrpc":"2.0","id":3,"method":"tools/list"}`); rec.Status() != http.StatusServiceUnavailable {
			t.Errorf("POST after Shutdown: %d", rec.Status())
		}
		if st := h.SSEStats(); st.Sessions != 0 {
			t.Errorf("stats %+v", st)
		}
	})
}

// A body over MaxBodyBytes is 413 before it is read, as on the endpoint.
func TestSSEPostBodyIsBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := streamable.NewHandler(mcptest.NewServer(nil), sseOpts(streamable.Options{MaxBodyBytes: 64}))
		s := openSSE(t, h, nil)
		if rec := s.post(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"` + strings.Repeat("x", 64) + `"}}}`); rec.Status() != http.StatusRequestEntityTooLarge {
			t.Errorf("large body: %d", rec.Status())
		}
		if st := h.Stats(); st.TooLarge != 1 {
			t.Errorf("stats %+v", st)
		}
		s.close()
	})
}

// NewHandler refuses an HTTP+SSE configuration it cannot serve.
func TestSSEOptionsAreChecked(t *testing.T) {
	for _, o := range []streamable.Options{
		{SSE: &streamable.SSEOptions{Path: "sse"}},
		{SSE: &streamable.SSEOptions{MessagePath: "/a/../m"}},
		{SSE: &streamable.SSEOptions{Path: "/mcp"}},
		{SSE: &streamable.SSEOptions{MessagePath: "/m\n"}},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%+v: no panic", *o.SSE)
				}
			}()
			streamable.NewHandler(mcptest.NewServer(nil), &o)
		}()
	}
}

// The messages of a session reach its connection in the order their POSTs
// were accepted, whatever order the goroutines that push them run in: a
// client that waits for each 202 before its next POST has its messages
// served in the order it sent them, as on stdio. (Pushed on a goroutine
// each, with nothing to order them, they went in as the scheduler ran
// those goroutines.)
func TestSSEPostsReachTheSessionInTheOrderTheyWereAccepted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := streamable.NewHandler(mcptest.NewServer(nil), sseOpts(streamable.Options{}))
		s := openSSE(t, h, nil)
		s.initialize()
		before := len(s.messages())
		const n = 32
		for i := range n {
			s.accepted(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"ping"}`, i))
		}
		synctest.Wait()
		m := s.messages()[before:]
		if len(m) != n {
			t.Fatalf("%d answers, want %d: %q", len(m), n, m)
		}
		for i, msg := range m {
			if want := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"result":{}}`, i); msg != want {
				t.Fatalf("answer %d is %s, want %s: the pings were served out of order: %q", i, msg, want, m)
			}
		}
		s.close()
	})
}

// resources/subscribe then resources/unsubscribe, each POST answered 202
// before the next is sent, leave the session unsubscribed: an update of
// the resource sends nothing. (Served in the other order, the session
// stayed subscribed.)
func TestSSEUnsubscribeRightAfterSubscribeLeavesTheSessionUnsubscribed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := mcptest.NewServer(nil)
		srv.AddResource(mcp.Resource{URI: "file:///a", Name: "a"}, func(context.Context, *server.ReadRequest) ([]mcp.ResourceContents, error) {
			return []mcp.ResourceContents{{URI: "file:///a", Text: "a"}}, nil
		})
		h := streamable.NewHandler(srv, sseOpts(streamable.Options{}))
		s := openSSE(t, h, nil)
		s.initialize()
		updates := func() int {
			return strings.Count(strings.Join(s.messages(), "\n"), `"notifications/resources/updated"`)
		}
		for i := range 8 {
			s.accepted(fmt.Sprintf(`{"jsonrpc":"2.0","id":"s%d","method":"resources/subscribe","params":{"uri":"file:///a"}}`, i))
			s.accepted(fmt.Sprintf(`{"jsonrpc":"2.0","id":"u%d","method":"resources/unsubscribe","params":{"uri":"file:///a"}}`, i))
			synctest.Wait()
			srv.ResourceUpdated("file:///a")
			synctest.Wait()
			if n := updates(); n != 0 {
				t.Fatalf("round %d: subscribed after unsubscribing: %q", i, s.messages())
			}
		}
		// The update does reach a subscribed session: the test can fail.
		s.accepted(`{"jsonrpc":"2.0","id":"s","method":"resources/subscribe","params":{"uri":"file:///a"}}`)
		synctest.Wait()
		srv.ResourceUpdated("file:///a")
		synctest.Wait()
		if n := updates(); n != 1 {
			t.Errorf("%d updates to a subscribed session: %q", n, s.messages())
		}
		s.close()
	})
}

// Two logging/setLevel POSTs, each answered 202 before the next, leave the
// session at the second level. (Served in the other order, the first one
// won.)
func TestSSESetLevelTwiceKeepsTheLevelSentLast(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := mcptest.NewServer(nil)
		srv.AddTool(mcp.Tool{Name: "log"}, func(_ context.Context, r *server.ToolRequest) (*mcp.ToolResult, error) {
			r.Log("info", "", "hello")
			return mcp.TextResult("ok"), nil
		})
		h := streamable.NewHandler(srv, sseOpts(streamable.Options{}))
		s := openSSE(t, h, nil)
		s.initialize()
		for i := range 8 {
			first, last, want := "debug", "error", 0
			if i%2 == 1 {
				first, last, want = "error", "debug", 1
			}
			before := len(s.messages())
			s.accepted(`{"jsonrpc":"2.0","id":"a","method":"logging/setLevel","params":{"level":"` + first + `"}}`)
			s.accepted(`{"jsonrpc":"2.0","id":"b","method":"logging/setLevel","params":{"level":"` + last + `"}}`)
			synctest.Wait()
			s.accepted(`{"jsonrpc":"2.0","id":"c","method":"tools/call","params":{"name":"log"}}`)
			synctest.Wait()
			m := s.messages()[before:]
			if n := strings.Count(strings.Join(m, "\n"), `"notifications/message"`); n != want {
				t.Fatalf("round %d: setLevel %s then %s: %d log messages at info, want %d: %q", i, first, last, n, want, m)
			}
		}
		s.close()
	})
}

// notifications/cancelled POSTed right after its request (the request's
// 202 first) cancels it. (Served before the request, it found nothing to
// cancel, and the request ran on.)
func TestSSECancellationRightAfterItsRequestCancelsIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := mcptest.NewServer(nil)
		cancelled := make(chan string, 1)
		srv.AddTool(mcp.Tool{Name: "wait"}, func(ctx context.Context, r *server.ToolRequest) (*mcp.ToolResult, error) {
			<-ctx.Done()
			cancelled <- "yes"
			return nil, ctx.Err()
		})
		h := streamable.NewHandler(srv, sseOpts(streamable.Options{}))
		s := openSSE(t, h, nil)
		s.initialize()
		for i := range 8 {
			s.accepted(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"wait"}}`, 10+i))
			s.accepted(fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":%d}}`, 10+i))
			synctest.Wait()
			select {
			case <-cancelled:
			default:
				t.Fatalf("round %d: the request was not cancelled: its cancellation went in first", i)
			}
		}
		s.close()
	})
}

// blockingServer has a tool that holds its connection's slot until
// release is closed, and one that asks the client for sampling and
// reports the answer on got.
func blockingServer(release <-chan struct{}, got chan<- string) *server.Server {
	s := askingServer()
	s.AddTool(mcp.Tool{Name: "block"}, func(ctx context.Context, _ *server.ToolRequest) (*mcp.ToolResult, error) {
		select {
		case <-release:
		case <-ctx.Done():
		}
		return mcp.TextResult("released"), nil
	})
	s.AddTool(mcp.Tool{Name: "report"}, func(ctx context.Context, r *server.ToolRequest) (*mcp.ToolResult, error) {
		res, err := r.Ask(ctx, map[string]mcp.InputRequest{"s": {Method: "sampling/createMessage", Params: map[string]any{"messages": []any{}, "maxTokens": 8}}})
		if err != nil {
			got <- "error: " + err.Error()
			return nil, err
		}
		got <- string(res["s"])
		return mcp.TextResult("ok"), nil
	})
	return s
}

// A session's messages on their way in are bounded: while one waits to
// go in (a notification that finds every slot and queue place of the
// connection taken), the POSTs behind it wait for their turn, and beyond
// 64 of them one more is answered 503 with Retry-After: 1, counted and
// logged; once the connection has room they all go in, and POSTs are
// accepted again.
func TestSSEPostsWaitingForTheirTurnAreBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		h := streamable.NewHandler(blockingServer(release, nil), sseOpts(streamable.Options{
			MaxInFlight: 1024,
			Conn:        &rpc.Options{Logger: wiretest.Quiet, MaxConcurrentRequests: 1, MaxQueuedRequests: 1},
		}))
		s := openSSE(t, h, nil)
		s.initialize()
		s.accepted(`{"jsonrpc":"2.0","id":"b1","method":"tools/call","params":{"name":"block"}}`) // the slot
		s.accepted(`{"jsonrpc":"2.0","id":"b2","method":"tools/call","params":{"name":"block"}}`) // the queue's place
		time.Sleep(time.Millisecond)                                                              // b1 has run for its InlineBudget: b2 goes in
		synctest.Wait()
		s.accepted(`{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}`) // waits for room
		for i := range 63 {
			s.accepted(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"ping"}`, i))
		}
		synctest.Wait()
		rec := s.post(`{"jsonrpc":"2.0","id":"over","method":"ping"}`)
		if rec.Status() != http.StatusServiceUnavailable || rec.hdr.Get("Retry-After") != "1" {
			t.Fatalf("the 65th message on its way in: %d %v %s", rec.Status(), rec.hdr, rec.Body())
		}
		if st := h.SSEStats(); st.QueueFull != 1 {
			t.Errorf("stats %+v", st)
		}
		close(release)
		synctest.Wait()
		// Every ping went in, and is answered (with a result, or busy
		// when it found the connection's queue full).
		all := strings.Join(s.messages(), "\n")
		for i := range 63 {
			if !strings.Contains(all, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,`, i)) {
				t.Errorf("ping %d is not answered", i)
			}
		}
		s.accepted(`{"jsonrpc":"2.0","id":"again","method":"ping"}`)
		s.close()
	})
}

// A session that ends waits (within its grace) for the messages it has
// accepted to go into its connection before it closes it: an answer to a
// server request POSTed just before the client disconnects still reaches
// the tool waiting for it, even when it must wait for its turn behind a
// message that waits for room. (Counted as handed over before it was,
// the message was left out: the connection closed first.)
func TestSSESessionEndWaitsForAcceptedMessagesToGoIn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		got := make(chan string, 1)
		release := make(chan struct{})
		h := streamable.NewHandler(blockingServer(release, got), sseOpts(streamable.Options{
			MaxInFlight: 1024,
			Conn:        &rpc.Options{Logger: wiretest.Quiet, MaxConcurrentRequests: 2, MaxQueuedRequests: 1},
		}))
		s := openSSE(t, h, nil)
		s.initialize()
		s.accepted(`{"jsonrpc":"2.0","id":"r","method":"tools/call","params":{"name":"report"}}`) // a slot, waiting for its answer
		synctest.Wait()
		m := s.messages()
		var ask struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		if json.Unmarshal([]byte(m[len(m)-1]), &ask) != nil || ask.Method != "sampling/createMessage" {
			t.Fatalf("server request %q", m)
		}
		s.accepted(`{"jsonrpc":"2.0","id":"b1","method":"tools/call","params":{"name":"block"}}`) // the other slot
		s.accepted(`{"jsonrpc":"2.0","id":"b2","method":"tools/call","params":{"name":"block"}}`) // the queue's place
		time.Sleep(time.Millisecond)                                                              // b1 has run for its InlineBudget: b2 goes in
		synctest.Wait()
		s.accepted(`{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}`) // waits for room
		s.accepted(`{"jsonrpc":"2.0","id":` + string(ask.ID) + `,"result":{"role":"assistant","content":{"type":"text","text":"42"},"model":"m"}}`)
		synctest.Wait()
		// The client leaves; room comes within the grace.
		time.AfterFunc(500*time.Millisecond, func() { close(release) })
		s.close()
		select {
		case a := <-got:
			if !strings.Contains(a, `"text":"42"`) {
				t.Errorf("the tool got %s", a)
			}
		default:
			t.Fatal("the answer did not reach the tool before the session closed")
		}
		synctest.Wait()
		if hs, ss := h.Stats(), h.SSEStats(); hs.InFlight != 0 || ss.Sessions != 0 {
			t.Errorf("left behind: %+v %+v", hs, ss)
		}
	})
}
