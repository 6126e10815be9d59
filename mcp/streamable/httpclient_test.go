package streamable_test

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
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/agentwire/agentwire/mcp"
	"github.com/agentwire/agentwire/mcp/host"
	"github.com/agentwire/agentwire/mcp/internal/mcptest"
	"github.com/agentwire/agentwire/mcp/server"
	"github.com/agentwire/agentwire/mcp/streamable"
)

// T2, guarantee E2 over HTTP: the client probes, finds a modern server, and
// lists, calls (with progress over the event stream) and listens.
func TestHTTPClientModern(t *testing.T) {
	s := mcptest.NewServer(nil)
	url, _ := mcptest.StartHTTP(t, s, nil)
	sess, err := streamable.Connect(t.Context(), url, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	if sess.Era() != mcp.Modern || sess.Probe() != host.ProbeResult || sess.ServerInfo().Name != "test-server" {
		t.Fatalf("era %s probe %s info %+v", sess.Era(), sess.Probe(), sess.ServerInfo())
	}
	tools, err := sess.ListTools(t.Context())
	if err != nil || len(tools) != 3 {
		t.Fatalf("tools %v %v", tools, err)
	}
	mcptest.CallSlow(t, sess, 3)

	changed := make(chan string, 4)
	sub, err := sess.Listen(t.Context(), host.ListenFilter{ToolsListChanged: true}, func(method string, _ json.RawMessage) { changed <- method })
	if err != nil {
		t.Fatal(err)
	}
	s.RemoveTool("fails")
	select {
	case m := <-changed:
		if m != "notifications/tools/list_changed" {
			t.Errorf("got %s", m)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no change notification on the listen stream")
	}
	sub.Close()
}

// T2: cancelling a call closes its stream, which cancels the handler on
// the server.
func TestHTTPClientCancelReachesHandler(t *testing.T) {
	s := mcptest.NewServer(nil)
	started := make(chan struct{})
	cancelled := make(chan struct{})
	s.AddTool(mcp.Tool{Name: "wait"}, func(ctx context.Context, _ *server.ToolRequest) (*mcp.ToolResult, error) {
		close(started)
		<-ctx.Done()
		close(cancelled)
		return nil, ctx.Err()
	})
	url, _ := mcptest.StartHTTP(t, s, nil)
	sess, err := streamable.Connect(t.Context(), url, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() {
		_, err := sess.CallTool(ctx, "wait", nil)
		errc <- err
	}()
	<-started
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Errorf("call error %v", err)
	}
	select {
	case <-cancelled:
	case <-time.After(10 * time.Second):
		t.Fatal("the handler was not cancelled")
	}
}

// T2: a legacy-only HTTP server answers the probe with a JSON-RPC error;
// the client falls back to initialize and works statelessly.
func TestHTTPClientFallsBackToLegacy(t *testing.T) {
	url, _ := mcptest.StartHTTP(t, mcptest.NewServer(&server.Options{Eras: mcp.LegacyOnly}), nil)
	sess, err := streamable.Connect(t.Context(), url, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	if sess.Era() != mcp.Legacy || sess.ProtocolVersion() != mcp.LatestLegacyVersion || sess.Probe() != host.ProbeError {
		t.Fatalf("era %s version %s probe %s", sess.Era(), sess.ProtocolVersion(), sess.Probe())
	}
	res, err := sess.CallTool(t.Context(), "echo", map[string]any{"text": "legacy"})
	if err != nil || res.Content[0].Text != "legacy" {
		t.Fatalf("%+v %v", res, err)
	}
}

// T2: 401, 403, 5xx and network errors end the connect with an error;
// none is taken for a legacy server (guarantee E2).
func TestHTTPClientErrorsAreNotLegacyEvidence(t *testing.T) {
	var initializes atomic.Int32
	status := func(code int) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get(mcp.HeaderMethod) == "" {
				initializes.Add(1)
			}
			if code == 401 {
				w.Header().Set("WWW-Authenticate", `Bearer realm="mcp"`)
			}
			http.Error(w, http.StatusText(code), code)
		}
	}
	for _, code := range []int{401, 403, 500, 502, 503} {
		srv := httptest.NewServer(status(code))
		_, err := streamable.Connect(t.Context(), srv.URL, nil, nil)
		srv.Close()
		var hse *streamable.HTTPStatusError
		if !errors.As(err, &hse) || hse.StatusCode != code {
			t.Errorf("%d: error %v", code, err)
		}
		if code == 401 && !strings.Contains(err.Error(), "WWW-Authenticate") {
			t.Errorf("401 without the challenge: %v", err)
		}
	}
	if n := initializes.Load(); n != 0 {
		t.Errorf("%d initialize attempts after an error status", n)
	}
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	if _, err := streamable.Connect(t.Context(), url, nil, nil); !errors.Is(err, streamable.ErrHTTPTransport) {
		t.Errorf("closed port: %v", err)
	}
}

// T2: the token option authenticates; a wrong token is a 401 error.
func TestHTTPClientToken(t *testing.T) {
	url, _ := mcptest.StartHTTP(t, mcptest.NewServer(nil), &streamable.Options{Token: "t0k"})
	if _, err := streamable.Connect(t.Context(), url, nil, &streamable.ClientOptions{Token: "nope"}); err == nil || !strings.Contains(err.Error(), "401") {
		t.Fatalf("wrong token: %v", err)
	}
	sess, err := streamable.Connect(t.Context(), url, nil, &streamable.ClientOptions{Token: "t0k"})
	if err != nil {
		t.Fatal(err)
	}
	sess.Close()
}

// getFake plays a 2025-11-25 Streamable HTTP server with sessions, from
// raw lines: discover gets a bare 400, initialize mints sess-N, a request
// with a session the server does not hold gets 404, tools/list is
// answered as JSON (or by list, when set), and the n-th GET (1-based) of
// the standalone stream is served by get.
type getFake struct {
	get  func(w http.ResponseWriter, r *http.Request, n int)
	list func(w http.ResponseWriter, r *http.Request, id json.RawMessage)

	mu      sync.Mutex
	minted  int
	live    map[string]bool
	gets    []getSeen
	posts   []string // "sess-1 tools/list", ...
	deletes []string
	answers chan sseMsg
}

// getSeen is one GET of the standalone stream, as the server saw it.
type getSeen struct {
	sid, lastEventID string
	at               time.Time
}

func newGetFake() *getFake {
	return &getFake{live: map[string]bool{}, answers: make(chan sseMsg, 16)}
}

// expire makes the server forget a session.
func (f *getFake) expire(sid string) {
	f.mu.Lock()
	delete(f.live, sid)
	f.mu.Unlock()
}

func (f *getFake) seen() []getSeen {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]getSeen(nil), f.gets...)
}

func (f *getFake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	sid := r.Header.Get(mcp.HeaderSessionID)
	f.mu.Lock()
	live := f.live[sid]
	f.mu.Unlock()
	switch r.Method {
	case http.MethodGet:
		f.mu.Lock()
		f.gets = append(f.gets, getSeen{sid, r.Header.Get("Last-Event-ID"), time.Now()})
		n := len(f.gets)
		f.mu.Unlock()
		if !live {
			http.Error(w, "Session not found", http.StatusNotFound)
			return
		}
		f.get(w, r, n)
		return
	case http.MethodDelete:
		f.mu.Lock()
		f.deletes = append(f.deletes, sid)
		f.mu.Unlock()
		return
	}
	b, _ := io.ReadAll(r.Body)
	var m sseMsg
	json.Unmarshal(b, &m)
	switch {
	case m.Method == "server/discover":
		w.WriteHeader(http.StatusBadRequest)
		return
	case m.Method == "initialize":
		f.mu.Lock()
		f.minted++
		sid = fmt.Sprintf("sess-%d", f.minted)
		f.live[sid] = true
		f.posts = append(f.posts, sid+" initialize")
		f.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set(mcp.HeaderSessionID, sid)
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"legacy","version":"1"}}}`, m.ID)
		return
	case !live:
		http.Error(w, "Session not found", http.StatusNotFound)
		return
	}
	f.mu.Lock()
	f.posts = append(f.posts, sid+" "+m.Method)
	f.mu.Unlock()
	switch {
	case m.Method == "" && (m.Result != nil || m.Error != nil):
		f.answers <- m
		w.WriteHeader(http.StatusAccepted)
	case m.ID == nil:
		w.WriteHeader(http.StatusAccepted)
	case m.Method == "tools/list" && f.list != nil:
		f.list(w, r, m.ID)
	case m.Method == "tools/list":
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"tools":[]}}`, m.ID)
	default:
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32601,"message":"Method not found"}}`, m.ID)
	}
}

// getEvents starts a standalone stream's answer.
func getEvents(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	w.(http.Flusher).Flush()
}

// logEvent is a notifications/message event with an id.
func logEvent(id, text string) string {
	return fmt.Sprintf("id: %s\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{\"level\":\"info\",\"data\":%q}}\n\n", id, text)
}

// connectGetFake connects to f in memory, with OnLog collecting the log
// messages' data.
func connectGetFake(t *testing.T, f *getFake, hopts *streamable.ClientOptions) (*host.Session, chan string) {
	t.Helper()
	logs := make(chan string, 16)
	var o streamable.ClientOptions
	if hopts != nil {
		o = *hopts
	}
	o.Client = pipeClient(f)
	sess, err := streamable.Connect(t.Context(), "http://legacy.test/mcp", &host.Options{
		OnLog: func(_, _ string, data json.RawMessage) { logs <- string(data) },
	}, &o)
	if err != nil {
		t.Fatal(err)
	}
	return sess, logs
}

// 2025-11-25 transports, Resumability: a standalone stream that the
// server ends after an event with an id is reopened after the server's
// retry interval, to the millisecond, with Last-Event-ID naming that
// event, and what the server sends then is delivered.
func TestHTTPClientResumesTheStandaloneStreamAfterTheRetryIntervalWithLastEventID(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newGetFake()
		var dropped time.Time
		f.get = func(w http.ResponseWriter, r *http.Request, n int) {
			getEvents(w)
			if n == 1 {
				io.WriteString(w, "id: g-0\nretry: 500\ndata: \n\n"+logEvent("g-1", "one"))
				dropped = time.Now()
				return // the connection ends, not the stream
			}
			io.WriteString(w, logEvent("g-2", "two"))
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		}
		sess, logs := connectGetFake(t, f, nil)
		defer sess.Close()
		for _, want := range []string{`"one"`, `"two"`} {
			if got := <-logs; got != want {
				t.Errorf("got %s, want %s", got, want)
			}
		}
		gets := f.seen()
		if len(gets) != 2 {
			t.Fatalf("%d GETs", len(gets))
		}
		if gets[1].lastEventID != "g-1" || gets[1].sid != "sess-1" {
			t.Errorf("the reconnection sent Last-Event-ID %q and session %q", gets[1].lastEventID, gets[1].sid)
		}
		if d := gets[1].at.Sub(dropped); d != 500*time.Millisecond {
			t.Errorf("reconnected %v after the drop, want the server's retry (500ms)", d)
		}
	})
}

// "The server MUST either return Content-Type: text/event-stream ... or
// else return HTTP 405": a 405 means the server offers no stream, and the
// client never asks again, however long the session lasts.
func TestHTTPClientNeverReopensAStandaloneStreamRefusedWith405(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newGetFake()
		f.get = func(w http.ResponseWriter, r *http.Request, n int) {
			http.Error(w, "Method Not Allowed", http.StatusMethodNotAllowed)
		}
		sess, _ := connectGetFake(t, f, nil)
		defer sess.Close()
		time.Sleep(time.Hour)
		if _, err := sess.ListTools(t.Context()); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Hour)
		if n := len(f.seen()); n != 1 {
			t.Errorf("%d GETs after a 405", n)
		}
	})
}

// A standalone stream that keeps failing (a 503 from a gateway, say) is
// tried again with a doubling delay, StreamReconnects times, and then left
// alone.
func TestHTTPClientBacksOffAndGivesUpOnAStandaloneStreamThatKeepsFailing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newGetFake()
		f.get = func(w http.ResponseWriter, r *http.Request, n int) {
			http.Error(w, "Service Unavailable", http.StatusServiceUnavailable)
		}
		sess, _ := connectGetFake(t, f, &streamable.ClientOptions{StreamReconnects: 4})
		defer sess.Close()
		time.Sleep(time.Hour)
		gets := f.seen()
		var delays []string
		for i := 1; i < len(gets); i++ {
			delays = append(delays, gets[i].at.Sub(gets[i-1].at).String())
		}
		if got, want := strings.Join(delays, " "), "1s 2s 4s 8s"; got != want {
			t.Errorf("GETs after %s, want %s", got, want)
		}
	})
}

// "The server MAY terminate the session at any time, after which it MUST
// respond to requests containing that session ID with HTTP 404": a 404 to
// the standalone stream's reconnection starts a new session, and the new
// session has its own stream, opened afresh (no Last-Event-ID: the old
// session's events are not the new one's).
func TestHTTPClientStartsANewSessionWhenTheStandaloneStreamGets404(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newGetFake()
		f.get = func(w http.ResponseWriter, r *http.Request, n int) {
			getEvents(w)
			if n == 1 {
				io.WriteString(w, "retry: 10\n"+logEvent("g-1", "one"))
				f.expire("sess-1")
				return
			}
			io.WriteString(w, logEvent("h-1", "two"))
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		}
		sess, logs := connectGetFake(t, f, nil)
		defer sess.Close()
		<-logs
		if got := <-logs; got != `"two"` {
			t.Errorf("got %s", got)
		}
		gets := f.seen()
		if len(gets) != 3 || gets[1].sid != "sess-1" || gets[2].sid != "sess-2" || gets[2].lastEventID != "" {
			t.Errorf("GETs %+v", gets)
		}
		if _, err := sess.ListTools(t.Context()); err != nil {
			t.Errorf("in the new session: %v", err)
		}
	})
}

// A call that meets a 404 starts a new session; the old session's
// standalone stream is closed and the new session's opened.
func TestHTTPClientReopensTheStandaloneStreamInTheNewSessionAfterA404(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newGetFake()
		closed := make(chan string, 4)
		f.get = func(w http.ResponseWriter, r *http.Request, n int) {
			getEvents(w)
			<-r.Context().Done()
			closed <- r.Header.Get(mcp.HeaderSessionID)
		}
		sess, _ := connectGetFake(t, f, nil)
		f.expire("sess-1")
		if _, err := sess.ListTools(t.Context()); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if got := <-closed; got != "sess-1" {
			t.Errorf("closed the stream of %s", got)
		}
		gets := f.seen()
		if len(gets) != 2 || gets[1].sid != "sess-2" {
			t.Errorf("GETs %+v", gets)
		}
		sess.Close()
		if got := <-closed; got != "sess-2" {
			t.Errorf("Close closed the stream of %s", got)
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		if strings.Join(f.deletes, " ") != "sess-2" {
			t.Errorf("DELETEs %v", f.deletes)
		}
	})
}

// A legacy server's own requests on the standalone stream (ping,
// elicitation) are answered by POST, with the session's id.
func TestHTTPClientAnswersServerRequestsOnTheStandaloneStreamInTheSession(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newGetFake()
		f.get = func(w http.ResponseWriter, r *http.Request, n int) {
			getEvents(w)
			io.WriteString(w, "data: {\"jsonrpc\":\"2.0\",\"id\":\"srv-1\",\"method\":\"ping\"}\n\n")
			io.WriteString(w, "data: {\"jsonrpc\":\"2.0\",\"id\":\"srv-2\",\"method\":\"roots/list\"}\n\n")
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		}
		sess, _ := connectGetFake(t, f, nil)
		defer sess.Close()
		got := map[string]sseMsg{}
		for range 2 {
			m := <-f.answers
			got[string(m.ID)] = m
		}
		if string(got[`"srv-1"`].Result) != "{}" {
			t.Errorf("ping answered %s %s", got[`"srv-1"`].Result, got[`"srv-1"`].Error)
		}
		if !strings.Contains(string(got[`"srv-2"`].Error), "-32601") {
			t.Errorf("roots/list without OnInput answered %s %s", got[`"srv-2"`].Result, got[`"srv-2"`].Error)
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		answered := 0
		for _, p := range f.posts {
			if p == "sess-1 " {
				answered++
			}
		}
		if answered != 2 {
			t.Errorf("posts %q: the answers were not sent in the session", f.posts)
		}
	})
}

// A response that comes on the standalone stream (a server that replays a
// call's stream there) answers the call waiting for it at once, though
// the call's own stream is still open; the call is not cancelled.
func TestHTTPClientTakesAResponseOnTheStandaloneStreamForItsCall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newGetFake()
		calls := make(chan json.RawMessage, 1)
		answer := make(chan string, 1)
		f.list = func(w http.ResponseWriter, r *http.Request, id json.RawMessage) {
			getEvents(w)
			calls <- id
			<-r.Context().Done() // the response never comes here
		}
		f.get = func(w http.ResponseWriter, r *http.Request, n int) {
			getEvents(w)
			for {
				select {
				case ev := <-answer:
					io.WriteString(w, ev)
					w.(http.Flusher).Flush()
				case <-r.Context().Done():
					return
				}
			}
		}
		sess, _ := connectGetFake(t, f, nil)
		defer sess.Close()
		go func() {
			id := <-calls
			answer <- fmt.Sprintf("data: {\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":{\"tools\":[{\"name\":\"late\",\"inputSchema\":{\"type\":\"object\"}}]}}\n\n", id)
		}()
		tools, err := sess.ListTools(t.Context())
		if err != nil || len(tools) != 1 || tools[0].Name != "late" {
			t.Fatalf("%v, %v", tools, err)
		}
		synctest.Wait()
		f.mu.Lock()
		defer f.mu.Unlock()
		for _, p := range f.posts {
			if strings.HasSuffix(p, mcp.MethodCancelled) {
				t.Errorf("the answered call was cancelled: %v", f.posts)
			}
		}
	})
}
