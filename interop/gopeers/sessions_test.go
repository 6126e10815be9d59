package gopeers_test

// Stateful Streamable HTTP (2025-03-26 .. 2025-11-25 sessions) between
// agentwire and the Go peers, both ways: go-sdk's and mcp-go's clients
// against an agentwire server with Options.Sessions (Mcp-Session-Id, the
// standalone GET stream, Last-Event-ID resumption, DELETE), and
// agentwire's host client against go-sdk's and mcp-go's stateful servers.
// The wire is recorded with its headers (wireTap), so that each test can
// say on which stream a message travelled and which session it named.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentwire/agentwire/mcp"
	"github.com/agentwire/agentwire/mcp/host"
	"github.com/agentwire/agentwire/mcp/server"
	"github.com/agentwire/agentwire/mcp/streamable"
	"github.com/agentwire/agentwire/rpc"
	mcpclient "github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	mcpgo "github.com/mark3labs/mcp-go/mcp"
	mcpserver "github.com/mark3labs/mcp-go/server"
	gosdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// ----- the agentwire side -----

// docURI is the resource the tests subscribe to.
const docURI = "test://doc"

// peerServer is an agentwire server over HTTP, with the tools the session
// tests use: echo; interop_log, which logs one debug line (sent only once
// the session's level is debug); interop_elicit, which asks the client
// for a name (elicitation/create) and greets it. docURI is a resource, so
// that resources/subscribe is offered.
type peerServer struct {
	srv  *server.Server
	h    *streamable.Handler
	base string // the httptest server's URL
	url  string // the Streamable HTTP endpoint
	tr   *transcript
}

func newPeerServer(t *testing.T, opts streamable.Options, front func(http.Handler) http.Handler) *peerServer {
	srv := server.New(mcp.Implementation{Name: "agentwire-interop", Version: "1.0.0"}, &server.Options{Logger: quiet})
	type echoIn struct {
		Text string `json:"text"`
	}
	server.AddTool(srv, mcp.Tool{Name: "echo", Description: "Echoes text."},
		func(ctx context.Context, r *server.ToolRequest, in echoIn) (*mcp.ToolResult, error) {
			return mcp.TextResult("echo: " + in.Text), nil
		})
	server.AddTool(srv, mcp.Tool{Name: "interop_log", Description: "Logs a debug line."},
		func(ctx context.Context, r *server.ToolRequest, _ struct{}) (*mcp.ToolResult, error) {
			sent, err := r.Log("debug", "interop", "a debug line")
			if err != nil {
				return nil, err
			}
			return mcp.TextResult(fmt.Sprintf("logged: %v", sent)), nil
		})
	server.AddTool(srv, mcp.Tool{Name: "interop_elicit", Description: "Asks the client for a name."},
		func(ctx context.Context, r *server.ToolRequest, _ struct{}) (*mcp.ToolResult, error) {
			res, err := r.Elicit(ctx, "name", "Your name?", map[string]any{
				"type":       "object",
				"properties": map[string]any{"name": map[string]any{"type": "string"}},
				"required":   []string{"name"},
			})
			if err != nil {
				return nil, err
			}
			return mcp.TextResult(fmt.Sprintf("%s: hello %v", res.Action, res.Content["name"])), nil
		})
	srv.AddResource(mcp.Resource{URI: docURI, Name: "doc", MIMEType: "text/plain"},
		func(ctx context.Context, req *server.ReadRequest) ([]mcp.ResourceContents, error) {
			return []mcp.ResourceContents{{URI: docURI, MIMEType: "text/plain", Text: "v1"}}, nil
		})

	opts.Logger = quiet
	opts.Conn = &rpc.Options{Logger: quiet}
	h := streamable.NewHandler(srv, &opts)
	ps := &peerServer{srv: srv, h: h, tr: &transcript{}}
	var front0 http.Handler = h
	if front != nil {
		front0 = front(h)
	}
	web := httptest.NewServer(wireTap(front0, ps.tr))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := h.Shutdown(ctx); err != nil {
			t.Errorf("handler shutdown: %v", err)
		}
		web.Close()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("server shutdown: %v", err)
		}
	})
	ps.tr.logOnFailure(t)
	ps.base, ps.url = web.URL, web.URL+"/mcp"
	return ps
}

// addTool adds a tool, which tells every initialized session that the
// list changed.
func (ps *peerServer) addTool(name string) {
	server.AddTool(ps.srv, mcp.Tool{Name: name, Description: "Added by the test."},
		func(ctx context.Context, r *server.ToolRequest, _ struct{}) (*mcp.ToolResult, error) {
			return mcp.TextResult(name), nil
		})
}

// notified waits until the server has sent n list-change and
// resources/updated notifications to its sessions in all.
func (ps *peerServer) notified(t *testing.T, n int64) {
	t.Helper()
	eventually(t, fmt.Sprintf("%d notifications sent", n), func() bool { return ps.srv.LegacyStats().Notified >= n })
}

// ----- the wire -----

// wireTap records every request a handler serves and its response, with
// the headers sessions turn on: "-> METHOD PATH sid=... lei=..." and the
// body of a POST, "<- METHOD STATUS sid=..." when the response starts,
// and each message of the response tagged with the request's method
// ("<-GET {...}" for a message on a GET stream, "<-POST {...}" for one on
// a POST's response, whole JSON or event stream).
func wireTap(h http.Handler, tr *transcript) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		line := r.Method + " " + r.URL.Path
		if q := r.URL.RawQuery; q != "" {
			line += "?" + q
		}
		if sid := r.Header.Get(mcp.HeaderSessionID); sid != "" {
			line += " sid=" + sid
		}
		if lei := r.Header.Get("Last-Event-ID"); lei != "" {
			line += " lei=" + lei
		}
		if r.Method == http.MethodPost && r.Body != nil {
			body, _ := io.ReadAll(r.Body)
			r.Body.Close()
			r.Body = io.NopCloser(bytes.NewReader(body))
			line += " " + strings.TrimSpace(string(body))
		}
		tr.addMessage("->", []byte(line))
		wr := &wireResponse{ResponseWriter: w, tr: tr, method: r.Method}
		defer func() {
			if !wr.sse {
				tr.addMessage("<-"+r.Method, wr.buf.Bytes())
			} else {
				tr.addMessage("<-", []byte(r.Method+" end"))
			}
		}()
		h.ServeHTTP(wr, r)
	})
}

type wireResponse struct {
	http.ResponseWriter
	tr      *transcript
	method  string
	started bool
	sse     bool
	buf     bytes.Buffer
}

func (w *wireResponse) WriteHeader(code int) {
	if !w.started {
		w.started = true
		w.sse = strings.HasPrefix(w.Header().Get("Content-Type"), "text/event-stream")
		line := fmt.Sprintf("%s %d", w.method, code)
		if sid := w.Header().Get(mcp.HeaderSessionID); sid != "" {
			line += " sid=" + sid
		}
		w.tr.addMessage("<-", []byte(line))
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *wireResponse) Write(b []byte) (int, error) {
	if !w.started {
		w.WriteHeader(http.StatusOK)
	}
	w.buf.Write(b)
	if w.sse {
		for {
			line, err := w.buf.ReadBytes('\n')
			if err != nil {
				rest := append([]byte(nil), line...)
				w.buf.Reset()
				w.buf.Write(rest)
				break
			}
			s := strings.TrimSpace(string(line))
			if data, ok := strings.CutPrefix(s, "data:"); ok && strings.TrimSpace(data) != "" {
				w.tr.addMessage("<-"+w.method, []byte(data))
			} else if id, ok := strings.CutPrefix(s, "id:"); ok {
				w.tr.addMessage("<-", []byte(w.method+" event id="+strings.TrimSpace(id)))
			}
		}
	}
	return w.ResponseWriter.Write(b)
}

func (w *wireResponse) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *wireResponse) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// sidPattern is what the 2025-11-25 transports allow in a session id:
// "MUST only contain visible ASCII characters (ranging from 0x21 to
// 0x7E)".
var sidPattern = regexp.MustCompile(`^[\x21-\x7E]+$`)

// requestsWithout returns the recorded requests (but initialize) that do
// not name session sid.
func requestsWithout(tr *transcript, sid string) []string {
	var out []string
	for _, l := range tr.find("-> ") {
		if strings.Contains(l, `"method":"initialize"`) || strings.Contains(l, `"method":"server/discover"`) {
			continue
		}
		if !strings.Contains(l, " sid="+sid) {
			out = append(out, l)
		}
	}
	return out
}

// rawSessionPost POSTs one JSON-RPC request with session sid and returns
// the response's status and body.
func rawSessionPost(t *testing.T, url, sid, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(testCtx(t), http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set(mcp.HeaderSessionID, sid)
	req.Header.Set("MCP-Protocol-Version", mcp.LatestLegacyVersion)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// rawDelete ends session sid with DELETE and returns the status.
func rawDelete(t *testing.T, url, sid string) int {
	t.Helper()
	req, err := http.NewRequestWithContext(testCtx(t), http.MethodDelete, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set(mcp.HeaderSessionID, sid)
	req.Header.Set("MCP-Protocol-Version", mcp.LatestLegacyVersion)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// streamCutter stands in front of a handler and can drop its GET streams
// the way a network does: cut ends the handler's request (as a client
// gone away would) and aborts the connection without ending the chunked
// body, so the client reads an unexpected EOF, not the end of a stream.
// While hold is on, a GET that resumes (Last-Event-ID) waits at the door
// until release, so that what the server sends meanwhile can only reach
// the client by replay.
type streamCutter struct {
	mu      sync.Mutex
	live    map[*context.CancelFunc]struct{}
	gate    chan struct{} // non-nil while held
	opened  chan string   // each GET let through: its Last-Event-ID ("" for none)
	started chan struct{} // each GET whose response has started
}

func newStreamCutter() *streamCutter {
	return &streamCutter{live: map[*context.CancelFunc]struct{}{}, opened: make(chan string, 64), started: make(chan struct{}, 64)}
}

func (c *streamCutter) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			h.ServeHTTP(w, r)
			return
		}
		lei := r.Header.Get("Last-Event-ID")
		c.mu.Lock()
		gate := c.gate
		c.mu.Unlock()
		if gate != nil && lei != "" {
			select {
			case <-gate:
			case <-r.Context().Done():
				return
			}
		}
		ctx, cancel := context.WithCancel(r.Context())
		defer cancel()
		c.mu.Lock()
		c.live[&cancel] = struct{}{}
		c.mu.Unlock()
		defer func() {
			c.mu.Lock()
			delete(c.live, &cancel)
			c.mu.Unlock()
		}()
		c.opened <- lei
		h.ServeHTTP(&startSignal{ResponseWriter: w, started: c.started}, r.WithContext(ctx))
		if ctx.Err() != nil && r.Context().Err() == nil {
			panic(http.ErrAbortHandler) // cut: drop the connection mid-stream
		}
	})
}

// cut drops every GET stream open now.
func (c *streamCutter) cut() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for cancel := range c.live {
		(*cancel)()
	}
}

// hold makes resuming GETs wait for release.
func (c *streamCutter) hold() {
	c.mu.Lock()
	c.gate = make(chan struct{})
	c.mu.Unlock()
}

func (c *streamCutter) release() {
	c.mu.Lock()
	close(c.gate)
	c.gate = nil
	c.mu.Unlock()
}

// startSignal tells when a response has started (its status written).
type startSignal struct {
	http.ResponseWriter
	started chan struct{}
	once    sync.Once
}

func (w *startSignal) WriteHeader(code int) {
	w.once.Do(func() { w.started <- struct{}{} })
	w.ResponseWriter.WriteHeader(code)
}

func (w *startSignal) Write(b []byte) (int, error) {
	w.once.Do(func() { w.started <- struct{}{} })
	return w.ResponseWriter.Write(b)
}

func (w *startSignal) Flush() {
	w.once.Do(func() { w.started <- struct{}{} })
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *startSignal) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// recv returns the next value from ch, failing the test after 10 s.
func recv[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("no %s within 10s", what)
		var zero T
		return zero
	}
}

// sessionsOn is Options with legacy sessions on; a short Retry, so that
// a dropped stream is resumed within milliseconds, not a second.
func sessionsOn() streamable.Options {
	return streamable.Options{Sessions: &streamable.SessionOptions{Retry: 20 * time.Millisecond}}
}

// ----- go-sdk's client against agentwire -----

// gosdkNotes collects what a go-sdk client is told outside its calls.
type gosdkNotes struct {
	listChanged chan struct{}
	updated     chan string // the URI
	logs        chan string // "level data"
}

func newGoSDKNotes() *gosdkNotes {
	return &gosdkNotes{listChanged: make(chan struct{}, 16), updated: make(chan string, 16), logs: make(chan string, 16)}
}

func (n *gosdkNotes) options() *gosdk.ClientOptions {
	return &gosdk.ClientOptions{
		ToolListChangedHandler: func(context.Context, *gosdk.ToolListChangedRequest) { n.listChanged <- struct{}{} },
		ResourceUpdatedHandler: func(_ context.Context, r *gosdk.ResourceUpdatedNotificationRequest) { n.updated <- r.Params.URI },
		LoggingMessageHandler: func(_ context.Context, r *gosdk.LoggingMessageRequest) {
			n.logs <- fmt.Sprintf("%s %v", r.Params.Level, r.Params.Data)
		},
		ElicitationHandler: func(_ context.Context, r *gosdk.ElicitRequest) (*gosdk.ElicitResult, error) {
			return &gosdk.ElicitResult{Action: "accept", Content: map[string]any{"name": "gopher"}}, nil
		},
	}
}

func gosdkText(res *gosdk.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*gosdk.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// go-sdk's Streamable HTTP client, pinned to 2025-11-25, keeps a session
// with an agentwire server that has sessions on: initialize mints an
// Mcp-Session-Id (visible ASCII) that every later request carries; the
// client's standalone GET stream carries the list change and the resource
// update, which no call is running for; when the network drops that
// stream, the client resumes it with Last-Event-ID and gets, by replay,
// exactly the notifications sent while it was gone; and Close sends
// DELETE, after which the session is unknown (404) and the server holds
// nothing for it.
func TestGoSDKStreamableClientKeepsAnAgentwireSession(t *testing.T) {
	cut := newStreamCutter()
	ps := newPeerServer(t, sessionsOn(), cut.wrap)
	ctx := testCtx(t)
	notes := newGoSDKNotes()
	c := gosdk.NewClient(&gosdk.Implementation{Name: "go-sdk-client", Version: "1.8.0"}, notes.options())
	cs, err := c.Connect(ctx, &gosdk.StreamableClientTransport{Endpoint: ps.url, MaxRetries: 5},
		&gosdk.ClientSessionOptions{ProtocolVersion: mcp.LatestLegacyVersion})
	if err != nil {
		t.Fatalf("Connect: %v", err)
	}
	closed := false
	t.Cleanup(func() {
		if !closed {
			cs.Close()
		}
	})
	sid := cs.ID()
	if !sidPattern.MatchString(sid) {
		t.Fatalf("session id %q: want one, of visible ASCII", sid)
	}
	if v := cs.InitializeResult().ProtocolVersion; v != mcp.LatestLegacyVersion {
		t.Fatalf("protocolVersion %q, want %q", v, mcp.LatestLegacyVersion)
	}
	if got := ps.tr.find("<- POST 200 sid="); len(got) == 0 || got[0] != "<- POST 200 sid="+sid {
		t.Errorf("responses naming a session: %q, want the initialize response to name %q", got, sid)
	}
	if lei := recv(t, cut.opened, "standalone GET"); lei != "" {
		t.Fatalf("the first GET resumes %q", lei)
	}
	recv(t, cut.started, "standalone GET's response")

	res, err := cs.CallTool(ctx, &gosdk.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "in a session"}})
	if err != nil || gosdkText(res) != "echo: in a session" {
		t.Fatalf("echo: %v, %v", res, err)
	}
	if err := cs.Subscribe(ctx, &gosdk.SubscribeParams{URI: docURI}); err != nil {
		t.Fatalf("Subscribe: %v", err)
	}

	// Outside any call: both go on the GET stream.
	ps.addTool("added_live")
	recv(t, notes.listChanged, "tools/list_changed on the GET stream")
	ps.srv.ResourceUpdated(docURI)
	if uri := recv(t, notes.updated, "resources/updated on the GET stream"); uri != docURI {
		t.Errorf("resources/updated for %q, want %q", uri, docURI)
	}
	for _, m := range []string{"notifications/tools/list_changed", "notifications/resources/updated"} {
		if len(ps.tr.find("<-GET", m)) != 1 || len(ps.tr.find("<-POST", m)) != 0 {
			t.Errorf("%s: want it once, on the GET stream", m)
		}
	}

	// The network drops the GET; what is sent meanwhile is replayed.
	cut.hold()
	cut.cut()
	before := ps.srv.LegacyStats().Notified
	ps.addTool("added_while_away")
	ps.srv.ResourceUpdated(docURI)
	ps.notified(t, before+2)
	cut.release()
	lei := recv(t, cut.opened, "the resuming GET")
	if lei == "" {
		t.Fatalf("the GET after the drop carries no Last-Event-ID")
	}
	recv(t, notes.listChanged, "the replayed tools/list_changed")
	if uri := recv(t, notes.updated, "the replayed resources/updated"); uri != docURI {
		t.Errorf("replayed resources/updated for %q, want %q", uri, docURI)
	}
	if st := ps.h.Stats(); st.EventsReplayed < 2 {
		t.Errorf("EventsReplayed %d, want the two notifications", st.EventsReplayed)
	}
	// Nothing came twice.
	select {
	case <-notes.listChanged:
		t.Errorf("a tools/list_changed came twice")
	case uri := <-notes.updated:
		t.Errorf("a resources/updated (%s) came twice", uri)
	default:
	}
	if got := requestsWithout(ps.tr, sid); len(got) != 0 {
		t.Errorf("requests without the session id: %q", got)
	}

	// Close: DELETE, and the session is gone.
	closed = true
	if err := cs.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if got := ps.tr.find("-> DELETE /mcp sid=" + sid); len(got) != 1 {
		t.Errorf("DELETEs of the session: %q, want one", got)
	}
	if len(ps.tr.find("<- DELETE 2")) != 1 {
		t.Errorf("the DELETE was not answered 2xx")
	}
	status, body := rawSessionPost(t, ps.url, sid, `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}`)
	if status != http.StatusNotFound {
		t.Errorf("a POST for the deleted session: %d %s, want 404", status, body)
	}
	eventually(t, "the session ended", func() bool { return ps.h.Stats().Sessions == 0 })
}

// ----- mcp-go's client against agentwire -----

// mcp-go's Streamable HTTP client with continuous listening stays in a
// 2025-11-25 session with an agentwire server that has sessions on
// (continuous listening needs the GET stream, which 2026-07-28 removed):
// GetSessionId is the minted id, and OnNotification hears the list change
// and the resource update on its GET stream. When the server ends the
// session (a DELETE), mcp-go v1.2.1 does not start a new one by itself:
// the next call fails with transport.ErrSessionTerminated, and once the
// caller initializes again, it is on a new session, whose GET stream it
// opens, and notifications flow again.
func TestMCPGoStreamableClientKeepsAnAgentwireSession(t *testing.T) {
	ps := newPeerServer(t, sessionsOn(), nil)
	ctx := testCtx(t)
	tp, err := transport.NewStreamableHTTP(ps.url, transport.WithContinuousListening(), transport.WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	c := mcpclient.NewClient(tp)
	notes := make(chan mcpgo.JSONRPCNotification, 16)
	c.OnNotification(func(n mcpgo.JSONRPCNotification) { notes <- n })
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	res := initialize(t, ctx, c)
	if res.ProtocolVersion != mcp.LatestLegacyVersion {
		t.Fatalf("protocolVersion %q, want %q (continuous listening is legacy only)", res.ProtocolVersion, mcp.LatestLegacyVersion)
	}
	sid := c.GetSessionId()
	if !sidPattern.MatchString(sid) || tp.GetSessionId() != sid {
		t.Fatalf("session id %q (transport %q): want the minted one", sid, tp.GetSessionId())
	}
	eventually(t, "the GET stream open", func() bool { return len(ps.tr.find("<- GET 200")) == 1 })

	ps.addTool("added_live")
	nextMCPGoNote(t, notes, mcpgo.MethodNotificationToolsListChanged)
	if err := c.Subscribe(ctx, mcpgo.SubscribeRequest{Params: mcpgo.SubscribeParams{URI: docURI}}); err != nil {
		t.Fatalf("Subscribe: %v", err)
	}
	ps.srv.ResourceUpdated(docURI)
	n := nextMCPGoNote(t, notes, mcpgo.MethodNotificationResourceUpdated)
	if uri, _ := n.Params.AdditionalFields["uri"].(string); uri != docURI {
		t.Errorf("resources/updated params %s, want uri %q", mustJSON(t, n.Params), docURI)
	}
	for _, m := range []string{"notifications/tools/list_changed", "notifications/resources/updated"} {
		if len(ps.tr.find("<-GET", m)) != 1 {
			t.Errorf("%s: want it once, on the GET stream", m)
		}
	}
	if got := requestsWithout(ps.tr, sid); len(got) != 0 {
		t.Errorf("requests without the session id: %q", got)
	}

	// The server ends the session.
	if status := rawDelete(t, ps.url, sid); status/100 != 2 {
		t.Fatalf("DELETE: %d, want 2xx", status)
	}
	eventually(t, "the deleted session's GET stream ended", func() bool { return len(ps.tr.find("<- GET end")) == 1 })
	_, err = c.CallTool(ctx, mcpgo.CallToolRequest{Params: mcpgo.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "x"}}})
	if !errors.Is(err, transport.ErrSessionTerminated) {
		t.Fatalf("a call after the session ended: %v, want mcp-go's ErrSessionTerminated", err)
	}
	initialize(t, ctx, c)
	fresh := c.GetSessionId()
	if !sidPattern.MatchString(fresh) || fresh == sid {
		t.Fatalf("session id after initializing again %q, want a new one (was %q)", fresh, sid)
	}
	out, err := c.CallTool(ctx, mcpgo.CallToolRequest{Params: mcpgo.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "again"}}})
	if err != nil || textOf(out.Content) != "echo: again" {
		t.Fatalf("echo on the new session: %v, %v", out, err)
	}
	eventually(t, "the GET stream open on the new session", func() bool {
		return len(ps.tr.find("-> GET /mcp sid="+fresh)) > 0 && len(ps.tr.find("<- GET 200")) == 2
	})
	ps.addTool("added_after")
	nextMCPGoNote(t, notes, mcpgo.MethodNotificationToolsListChanged)
}

// ----- agentwire's client against go-sdk's and mcp-go's stateful servers -----

// hostNotes collects what agentwire's host is told outside its calls.
func hostNotes() (*host.Options, chan string) {
	notes := make(chan string, 32)
	return &host.Options{
		Eras:           mcp.LegacyOnly, // both peers answer server/discover: keep to sessions
		OnNotification: func(method string, params json.RawMessage) { notes <- method + " " + string(params) },
	}, notes
}

// nextHostNote returns the next notification of method (its params),
// skipping others.
func nextHostNote(t *testing.T, notes chan string, method string) string {
	t.Helper()
	for {
		n := recv(t, notes, method)
		if m, params, _ := strings.Cut(n, " "); m == method {
			return params
		}
	}
}

// hostNotesOf waits for one notification of each of methods, in any
// order, skipping others.
func hostNotesOf(t *testing.T, notes chan string, methods ...string) {
	t.Helper()
	want := map[string]bool{}
	for _, m := range methods {
		want[m] = true
	}
	for len(want) > 0 {
		n := recv(t, notes, fmt.Sprintf("notifications %v", methods))
		m, _, _ := strings.Cut(n, " ")
		delete(want, m)
	}
}

// agentwire's host client against go-sdk's stateful Streamable HTTP
// server (sessions, with an event store): it echoes the Mcp-Session-Id of
// the initialize response on every later request, opens the standalone
// GET stream, and hears there the list change after srv.AddTool and the
// resource update after srv.ResourceUpdated; when the network drops the
// GET it resumes with Last-Event-ID and gets, on the resumed stream, what was
// sent meanwhile; Close sends DELETE, after which go-sdk no longer knows
// the session (404).
func TestHostClientGoSDKStatefulServer(t *testing.T) {
	srv := gosdk.NewServer(&gosdk.Implementation{Name: "go-sdk-peer", Version: "1.8.0"}, &gosdk.ServerOptions{
		SubscribeHandler:   func(context.Context, *gosdk.SubscribeRequest) error { return nil },
		UnsubscribeHandler: func(context.Context, *gosdk.UnsubscribeRequest) error { return nil },
	})
	type echoIn struct {
		Text string `json:"text"`
	}
	gosdk.AddTool(srv, &gosdk.Tool{Name: "echo", Description: "Echoes text."},
		func(ctx context.Context, req *gosdk.CallToolRequest, in echoIn) (*gosdk.CallToolResult, any, error) {
			return &gosdk.CallToolResult{Content: []gosdk.Content{&gosdk.TextContent{Text: "echo: " + in.Text}}}, nil, nil
		})
	srv.AddResource(&gosdk.Resource{URI: docURI, Name: "doc", MIMEType: "text/plain"},
		func(context.Context, *gosdk.ReadResourceRequest) (*gosdk.ReadResourceResult, error) {
			return &gosdk.ReadResourceResult{Contents: []*gosdk.ResourceContents{{URI: docURI, Text: "v1"}}}, nil
		})
	hostAgainstStatefulPeer(t, statefulPeer{
		name: "go-sdk",
		handler: gosdk.NewStreamableHTTPHandler(func(*http.Request) *gosdk.Server { return srv },
			&gosdk.StreamableHTTPOptions{EventStore: gosdk.NewMemoryEventStore(nil), SessionTimeout: time.Minute, Logger: quiet}),
		latestLegacyOnly: true,
		addTool: func(name string) {
			gosdk.AddTool(srv, &gosdk.Tool{Name: name, Description: "Added by the test."},
				func(context.Context, *gosdk.CallToolRequest, struct{}) (*gosdk.CallToolResult, any, error) {
					return &gosdk.CallToolResult{Content: []gosdk.Content{&gosdk.TextContent{Text: name}}}, nil, nil
				})
		},
		resourceUpdated: func(ctx context.Context) error {
			return srv.ResourceUpdated(ctx, &gosdk.ResourceUpdatedNotificationParams{URI: docURI})
		},
		forgetsDeleted: true,
	})
}

// agentwire's host client against mcp-go's stateful Streamable HTTP
// server (WithStateful, with an event store): it echoes the minted
// Mcp-Session-Id, opens the GET stream, and hears there the list change
// after m.AddTool and the resource update mcp-go sends to every session;
// when the network drops the GET it resumes with Last-Event-ID and gets,
// on the resumed stream, what was sent meanwhile; Close sends DELETE.
func TestHostClientMCPGoStatefulServer(t *testing.T) {
	m := mcpserver.NewMCPServer("mcp-go-peer", "1.2.1",
		mcpserver.WithToolCapabilities(true), mcpserver.WithResourceCapabilities(true, true), mcpserver.WithLogging())
	m.AddTool(mcpgo.NewTool("echo", mcpgo.WithDescription("Echoes text."), mcpgo.WithString("text")),
		func(ctx context.Context, req mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
			return mcpgo.NewToolResultText("echo: " + req.GetString("text", "")), nil
		})
	m.AddResource(mcpgo.NewResource(docURI, "doc", mcpgo.WithMIMEType("text/plain")),
		func(ctx context.Context, req mcpgo.ReadResourceRequest) ([]mcpgo.ResourceContents, error) {
			return []mcpgo.ResourceContents{mcpgo.TextResourceContents{URI: docURI, MIMEType: "text/plain", Text: "v1"}}, nil
		})
	hs := mcpserver.NewStreamableHTTPServer(m, mcpserver.WithStateful(true),
		mcpserver.WithEventStore(mcpserver.NewInMemoryEventStore()), mcpserver.WithStreamableHTTPLogger(quiet))
	hostAgainstStatefulPeer(t, statefulPeer{
		name:    "mcp-go",
		handler: hs,
		shutdown: func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			hs.Shutdown(ctx)
		},
		addTool: func(name string) {
			m.AddTool(mcpgo.NewTool(name, mcpgo.WithDescription("Added by the test.")),
				func(ctx context.Context, req mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
					return mcpgo.NewToolResultText("added"), nil
				})
		},
		resourceUpdated: func(context.Context) error {
			m.SendNotificationToAllClients("notifications/resources/updated", map[string]any{"uri": docURI})
			return nil
		},
	})
}

// statefulPeer is a stateful Streamable HTTP server of another SDK, with
// an event store, and how the test makes it change.
type statefulPeer struct {
	name             string
	handler          http.Handler
	shutdown         func() // before the test server closes; nil for none
	latestLegacyOnly bool   // it negotiates mcp.LatestLegacyVersion
	addTool          func(name string)
	resourceUpdated  func(ctx context.Context) error
	forgetsDeleted   bool // a request on a DELETEd session gets 404
}

// hostAgainstStatefulPeer is the scenario of both stateful-server tests:
// the minted Mcp-Session-Id echoed on every request, the GET stream opened
// and hearing a list change and a resource update exactly once, a dropped
// GET resumed with Last-Event-ID and getting what was sent meanwhile, and
// Close sending DELETE.
func hostAgainstStatefulPeer(t *testing.T, p statefulPeer) {
	cut := newStreamCutter()
	tr := &transcript{}
	tr.logOnFailure(t)
	web := httptest.NewServer(wireTap(cut.wrap(p.handler), tr))
	t.Cleanup(func() {
		if p.shutdown != nil {
			p.shutdown()
		}
		web.Close()
	})

	opts, notes := hostNotes()
	sess := connectHTTP(t, web.URL+"/mcp", opts)
	ctx := testCtx(t)
	if sess.Era() != mcp.Legacy || p.latestLegacyOnly && sess.ProtocolVersion() != mcp.LatestLegacyVersion {
		t.Fatalf("era %v, version %q", sess.Era(), sess.ProtocolVersion())
	}
	minted := tr.find("<- POST 200 sid=")
	if len(minted) == 0 {
		t.Fatalf("%s minted no session id", p.name)
	}
	sid := strings.TrimPrefix(minted[0], "<- POST 200 sid=")
	recv(t, cut.opened, "the standalone GET")
	recv(t, cut.started, "the standalone GET's response")

	res, err := sess.CallTool(ctx, "echo", map[string]any{"text": "stateful"})
	if err != nil || hostText(res) != "echo: stateful" {
		t.Fatalf("echo: %+v, %v", res, err)
	}
	if _, err := sess.Request(ctx, "resources/subscribe", map[string]any{"uri": docURI}); err != nil {
		t.Fatalf("resources/subscribe: %v", err)
	}
	p.addTool("added_live")
	nextHostNote(t, notes, "notifications/tools/list_changed")
	if err := p.resourceUpdated(ctx); err != nil {
		t.Fatal(err)
	}
	if got := nextHostNote(t, notes, "notifications/resources/updated"); !strings.Contains(got, docURI) {
		t.Errorf("resources/updated params %s, want %s", got, docURI)
	}
	for _, m := range []string{"notifications/tools/list_changed", "notifications/resources/updated"} {
		if len(tr.find("<-GET", m)) != 1 {
			t.Errorf("%s: want it once, on the GET stream", m)
		}
	}

	// The network drops the GET; the peer's event store keeps what is sent
	// meanwhile.
	cut.hold()
	cut.cut()
	p.addTool("added_while_away")
	if err := p.resourceUpdated(ctx); err != nil {
		t.Fatal(err)
	}
	cut.release()
	if lei := recv(t, cut.opened, "the resuming GET"); lei == "" {
		t.Errorf("the GET after the drop carries no Last-Event-ID")
	}
	// In either order: go-sdk tells list changes after a short delay of
	// its own.
	hostNotesOf(t, notes, "notifications/tools/list_changed", "notifications/resources/updated")
	if got := requestsWithout(tr, sid); len(got) != 0 {
		t.Errorf("requests without %s's session id %q: %q", p.name, sid, got)
	}

	sess.Close()
	if len(tr.find("-> DELETE /mcp sid="+sid)) != 1 {
		t.Errorf("the host did not DELETE its session")
	}
	if p.forgetsDeleted {
		if status, body := rawSessionPost(t, web.URL+"/mcp", sid, `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}`); status != http.StatusNotFound {
			t.Errorf("%s after the DELETE: %d %s, want 404", p.name, status, body)
		}
	}
}

// When the server ends a session (here a DELETE that is not the
// client's), go-sdk's Streamable HTTP client learns it from a 404 naming
// its session: the standalone GET stream, ended by the server, is not
// reopened (the GET go-sdk reconnects with gets 404), go-sdk closes the connection, the
// next call fails with gosdk.ErrConnectionClosed saying the session was
// not found, and Close sends no DELETE for a session the server has
// already forgotten.
func TestGoSDKStreamableClientSeesAnEndedAgentwireSessionAsMissing(t *testing.T) {
	ps := newPeerServer(t, sessionsOn(), nil)
	ctx := testCtx(t)
	c := gosdk.NewClient(&gosdk.Implementation{Name: "go-sdk-client", Version: "1.8.0"}, newGoSDKNotes().options())
	cs, err := c.Connect(ctx, &gosdk.StreamableClientTransport{Endpoint: ps.url, MaxRetries: 5},
		&gosdk.ClientSessionOptions{ProtocolVersion: mcp.LatestLegacyVersion})
	if err != nil {
		t.Fatalf("Connect: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	sid := cs.ID()
	eventually(t, "the GET stream open", func() bool { return len(ps.tr.find("<- GET 200")) == 1 })

	if status := rawDelete(t, ps.url, sid); status/100 != 2 {
		t.Fatalf("DELETE: %d, want 2xx", status)
	}
	waited := make(chan error, 1)
	go func() { waited <- cs.Wait() }()
	werr := recv(t, waited, "go-sdk ending the connection")
	if !strings.Contains(fmt.Sprint(werr), gosdk.ErrSessionMissing.Error()) {
		t.Errorf("the connection ended with %v, want %q", werr, gosdk.ErrSessionMissing)
	}
	if len(ps.tr.find("<- GET 404")) != 1 {
		t.Errorf("the reconnecting GET was not refused with 404")
	}
	_, err = cs.CallTool(ctx, &gosdk.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "x"}})
	// go-sdk v1.8.0 closes the connection on the GET's 404, and the call
	// fails with that, the cause kept only as text.
	if !errors.Is(err, gosdk.ErrConnectionClosed) || !strings.Contains(err.Error(), gosdk.ErrSessionMissing.Error()) {
		t.Fatalf("a call after the session ended: %v, want go-sdk's ErrConnectionClosed for %q", err, gosdk.ErrSessionMissing)
	}
	cs.Close()
	if got := ps.tr.find("-> DELETE"); len(got) != 1 {
		t.Errorf("DELETEs %q, want only the server-side one", got)
	}
}
