package streamable_test

// Regression tests for defects a review found in the Streamable HTTP client
// (httpclient.go, era detection over HTTP in client.go, listen.go over
// HTTP). Each names the bug it pins; its comment says what went wrong.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentwire/agentwire/mcp"
	"github.com/agentwire/agentwire/mcp/host"
	"github.com/agentwire/agentwire/mcp/internal/mcptest"
	"github.com/agentwire/agentwire/mcp/server"
	"github.com/agentwire/agentwire/mcp/streamable"
)

// rcMsg is the part of a POSTed JSON-RPC message the fake servers look at.
type rcMsg struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Result json.RawMessage `json:"result"`
	Error  json.RawMessage `json:"error"`
}

func rcRead(t *testing.T, r *http.Request) rcMsg {
	t.Helper()
	b, _ := io.ReadAll(r.Body)
	var m rcMsg
	json.Unmarshal(b, &m)
	return m
}

const rcDiscoverOK = `{"resultType":"complete","supportedVersions":["2026-07-28"],"capabilities":{"tools":{}},"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"fake","version":"1"}},"ttlMs":0,"cacheScope":"public"}`

const rcInitOK = `{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"legacy","version":"1"}}`

// The 2026-07-28 schema lets an error response omit "id" (its
// JSONRPCErrorResponse has `id?`); a 400 whose body is a recognized modern error (-32022) means a
// modern server: no fallback to initialize. The client's statusError uses
// jsonrpc.Decode, which rejects an id-less response, so the modern error is
// not recognized and the client falls back to initialize.
func TestRegressionHTTPIDlessModernErrorIsModernEvidence(t *testing.T) {
	var initializes atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m := rcRead(t, r)
		switch m.Method {
		case "server/discover":
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			io.WriteString(w, `{"jsonrpc":"2.0","error":{"code":-32022,"message":"Unsupported protocol version","data":{"supported":["2099-01-01"],"requested":"2026-07-28"}}}`)
		case "initialize":
			initializes.Add(1)
			http.Error(w, "no", http.StatusBadRequest)
		default:
			w.WriteHeader(http.StatusAccepted)
		}
	}))
	defer srv.Close()
	_, err := streamable.Connect(t.Context(), srv.URL, nil, nil)
	if n := initializes.Load(); n != 0 {
		t.Errorf("a 400 with an id-less -32022 was taken as legacy evidence: %d initialize POSTs", n)
	}
	if !errors.Is(err, host.ErrNoCommonVersion) {
		t.Errorf("error %v, want ErrNoCommonVersion", err)
	}
}

// A modern server behind a 301 (e.g. /mcp -> /mcp/): net/http turns the
// POST into a body-less GET, the modern endpoint answers 405 with a
// JSON-RPC error, and the client takes that as *definitive* legacy
// evidence: it tries initialize (also turned into a GET) and caches
// "legacy" for the URL.
func TestRegressionHTTPRedirectTurnsProbeIntoGET(t *testing.T) {
	s := mcptest.NewServer(nil)
	h := streamable.NewHandler(s, nil)
	var gets atomic.Int32
	mux := http.NewServeMux()
	mux.HandleFunc("/mcp", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/mcp/", http.StatusMovedPermanently)
	})
	mux.HandleFunc("/mcp/", func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			gets.Add(1)
		}
		h.ServeHTTP(w, r)
	})
	srv := httptest.NewServer(mux)
	defer func() {
		h.Shutdown(context.Background())
		srv.Close()
	}()
	cache := host.NewMemoryEraCache(nil)
	sess, err := streamable.Connect(t.Context(), srv.URL+"/mcp", &host.Options{Cache: cache}, nil)
	if err == nil {
		sess.Close()
	}
	if n := gets.Load(); n != 0 {
		t.Errorf("the redirected POSTs reached the server as %d GETs; err = %v", n, err)
	}
	if e, ok := cache.Get(srv.URL + "/mcp"); ok && e.Era == mcp.Legacy {
		t.Errorf("a modern server behind a redirect was cached as legacy (err = %v)", err)
	}
}

// A 200 answer that is not a response to the probe (wrong id, an HTML
// page, too big) is not "a legacy server's refusal" (Connect's doc:
// a JSON-RPC error, or 400/404/405) and no legacy evidence on HTTP
// (guarantee E2; rust-sdk #1133 surfaces an uncorrelated response). The
// same answer as an event stream is already fatal (ErrHTTPTransport); as
// JSON it falls back to initialize.
func TestRegressionHTTPMalformed200IsNotLegacyEvidence(t *testing.T) {
	bodies := map[string]string{
		"wrong id": `{"jsonrpc":"2.0","id":999,"result":` + rcDiscoverOK + `}`,
		"html":     `<html><body>Welcome</body></html>`,
	}
	for name, body := range bodies {
		t.Run(name, func(t *testing.T) {
			var initializes atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				m := rcRead(t, r)
				if m.Method == "initialize" {
					initializes.Add(1)
				}
				if strings.HasPrefix(body, "<") {
					w.Header().Set("Content-Type", "text/html")
				} else {
					w.Header().Set("Content-Type", "application/json")
				}
				io.WriteString(w, body)
			}))
			defer srv.Close()
			_, err := streamable.Connect(t.Context(), srv.URL, nil, nil)
			if n := initializes.Load(); n != 0 {
				t.Errorf("a malformed 200 answer fell back to initialize (%d POSTs); err = %v", n, err)
			}
		})
	}
}

// SSE (WHATWG) ends lines with CRLF, LF or a lone CR. The reader splits on
// '\n' only: a stream using CR endings never yields an event.
func TestRegressionHTTPSSECarriageReturnLineEndings(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m := rcRead(t, r)
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprintf(w, ": hi\revent: message\rdata: {\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":%s}\r\r", m.ID, rcDiscoverOK)
	}))
	defer srv.Close()
	sess, err := streamable.Connect(t.Context(), srv.URL, nil, nil)
	if err != nil {
		t.Fatalf("CR-terminated event stream: %v", err)
	}
	sess.Close()
}

// rcLegacyServer plays a 2025-11-25 Streamable HTTP server with a session:
// discover gets a bare 400, initialize mints a session id, tools/list is
// served by onList.
func rcLegacyServer(t *testing.T, onList func(w http.ResponseWriter, r *http.Request, id json.RawMessage), onOther func(w http.ResponseWriter, r *http.Request, m rcMsg)) *httptest.Server {
	return httptest.NewServer(rcLegacyHandler(t, onList, onOther))
}

func rcLegacyHandler(t *testing.T, onList func(w http.ResponseWriter, r *http.Request, id json.RawMessage), onOther func(w http.ResponseWriter, r *http.Request, m rcMsg)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			if onOther != nil {
				onOther(w, r, rcMsg{})
				return
			}
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		m := rcRead(t, r)
		switch {
		case m.Method == "server/discover":
			w.WriteHeader(http.StatusBadRequest)
		case m.Method == "initialize":
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set(mcp.HeaderSessionID, "sess-1")
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":%s}`, m.ID, rcInitOK)
		case m.Method == "tools/list":
			onList(w, r, m.ID)
		case onOther != nil:
			onOther(w, r, m)
		default:
			w.WriteHeader(http.StatusAccepted)
		}
	})
}

// 2025-11-25 ping: "The receiver MUST respond promptly with an empty
// response" — either party may ping, and a legacy server may send it on a
// POST's event stream. The client answers every server request with
// -32601, ping included.
func TestRegressionHTTPLegacyServerPingIsAnswered(t *testing.T) {
	replies := make(chan rcMsg, 1)
	got := make(chan rcMsg, 1)
	h := rcLegacyHandler(t, func(w http.ResponseWriter, r *http.Request, id json.RawMessage) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: {\"jsonrpc\":\"2.0\",\"id\":\"srv-1\",\"method\":\"ping\"}\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-replies:
		case <-time.After(5 * time.Second):
		}
		fmt.Fprintf(w, "data: {\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":{\"tools\":[]}}\n\n", id)
	}, nil)
	srv := httptest.NewServer(rcWrapReplies(h, t, got, replies))
	defer srv.Close()
	sess, err := streamable.Connect(t.Context(), srv.URL, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	if _, err := sess.ListTools(t.Context()); err != nil {
		t.Fatal(err)
	}
	select {
	case m := <-got:
		if m.Error != nil || string(m.Result) != "{}" {
			t.Errorf("the client answered the server's ping with result %s error %s", m.Result, m.Error)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no answer to the ping")
	}
}

// rcWrapReplies catches POSTed responses (the client's answers to server
// requests) before the fake server sees them.
func rcWrapReplies(next http.Handler, t *testing.T, got chan<- rcMsg, release chan<- rcMsg) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			b, _ := io.ReadAll(r.Body)
			var m rcMsg
			json.Unmarshal(b, &m)
			if m.Method == "" && (m.Result != nil || m.Error != nil) {
				select {
				case got <- m:
				default:
				}
				select {
				case release <- m:
				default:
				}
				w.WriteHeader(http.StatusAccepted)
				return
			}
			r.Body = io.NopCloser(strings.NewReader(string(b)))
		}
		next.ServeHTTP(w, r)
	})
}

// 2025-11-25 transports: a server "MAY close the connection" of a POST's
// event stream after an event with an id (polling, after a "retry"
// field); the client resumes with GET and Last-Event-ID. The client has no
// resumption: the call fails with "the event stream ended before the
// response".
func TestRegressionHTTPLegacySSEResumption(t *testing.T) {
	var lastEventID atomic.Value
	srv := rcLegacyServer(t, func(w http.ResponseWriter, r *http.Request, id json.RawMessage) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "id: ev-1\nretry: 10\ndata:\n\n")
		lastEventID.Store(string(id)) // remembered for the resumption
	}, func(w http.ResponseWriter, r *http.Request, m rcMsg) {
		if r.Method == http.MethodGet && r.Header.Get("Last-Event-ID") == "ev-1" {
			id, _ := lastEventID.Load().(string)
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprintf(w, "id: ev-2\ndata: {\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":{\"tools\":[]}}\n\n", id)
			return
		}
		if r.Method == http.MethodDelete {
			w.WriteHeader(http.StatusOK)
			return
		}
		w.WriteHeader(http.StatusAccepted)
	})
	defer srv.Close()
	sess, err := streamable.Connect(t.Context(), srv.URL, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	if _, err := sess.Request(t.Context(), "tools/list", nil); err != nil {
		t.Errorf("a legacy server that closed the stream after an event id: %v", err)
	}
}

// Session.Close over HTTP leaves an open subscriptions/listen stream (and
// any call in flight) running: over stdio, Close ends the connection and
// so every stream; over HTTP the listen goroutine and its connection
// outlive the session until the caller also closes the Subscription.
func TestRegressionHTTPSessionCloseEndsHTTPListen(t *testing.T) {
	s := mcptest.NewServer(nil)
	url, _ := mcptest.StartHTTP(t, s, nil)
	sess, err := streamable.Connect(t.Context(), url, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	sub, err := sess.Listen(t.Context(), host.ListenFilter{ToolsListChanged: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close() // keeps goleak quiet when the bug is present
	sess.Close()
	select {
	case <-sub.Done():
	case <-time.After(2 * time.Second):
		t.Error("the listen stream is still open 2 s after Session.Close")
	}
}

// 2026-07-28 transports: clients MUST support Mcp-Param- headers for tool
// arguments annotated with x-mcp-header, and this module's own server
// rejects a tools/call without them (-32020). The HTTP client never sends
// them, so CallTool fails against its own server.
func TestRegressionHTTPCallToolSendsParamHeaders(t *testing.T) {
	s := mcptest.NewServer(nil)
	s.AddTool(mcp.Tool{Name: "region", InputSchema: json.RawMessage(`{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"}}}`)},
		func(context.Context, *server.ToolRequest) (*mcp.ToolResult, error) { return mcp.TextResult("ok"), nil })
	url, _ := mcptest.StartHTTP(t, s, nil)
	sess, err := streamable.Connect(t.Context(), url, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	if _, err := sess.CallTool(t.Context(), "region", map[string]any{"region": "Bern"}); err != nil {
		t.Errorf("tools/call of a tool with an x-mcp-header argument: %v", err)
	}
}

// 2025-11-25 sessions: a server that terminated the session answers 404,
// and "the client MUST start a new session by sending a new
// InitializeRequest without a session ID attached". The client surfaces
// the 404 and keeps sending the dead session id.
func TestRegressionHTTPLegacySessionExpiryReinitializes(t *testing.T) {
	var inits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m := rcRead(t, r)
		switch m.Method {
		case "server/discover":
			w.WriteHeader(http.StatusBadRequest)
		case "initialize":
			n := inits.Add(1)
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set(mcp.HeaderSessionID, fmt.Sprintf("sess-%d", n))
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":%s}`, m.ID, rcInitOK)
		case "tools/list":
			if r.Header.Get(mcp.HeaderSessionID) != "sess-2" { // sess-1 has expired
				http.Error(w, "session not found", http.StatusNotFound)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"tools":[]}}`, m.ID)
		default:
			w.WriteHeader(http.StatusAccepted)
		}
	}))
	defer srv.Close()
	sess, err := streamable.Connect(t.Context(), srv.URL, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	if _, err := sess.ListTools(t.Context()); err != nil {
		t.Errorf("after the legacy session expired (404): %v (initializes: %d)", err, inits.Load())
	}
}

// Legacy cancellation over HTTP: a call abandoned mid-stream sends
// notifications/cancelled with the session id (sanity check; expected to
// pass).
func TestRegressionHTTPLegacyCancelIsSent(t *testing.T) {
	cancelled := make(chan *http.Request, 1)
	srv := rcLegacyServer(t, func(w http.ResponseWriter, r *http.Request, id json.RawMessage) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}, func(w http.ResponseWriter, r *http.Request, m rcMsg) {
		if m.Method == "notifications/cancelled" {
			select {
			case cancelled <- r:
			default:
			}
		}
		w.WriteHeader(http.StatusAccepted)
	})
	defer srv.Close()
	sess, err := streamable.Connect(t.Context(), srv.URL, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	if _, err := sess.Request(ctx, "tools/list", nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("err = %v", err)
	}
	select {
	case r := <-cancelled:
		if r.Header.Get(mcp.HeaderSessionID) != "sess-1" || r.Header.Get(mcp.HeaderProtocolVersion) != "2025-11-25" {
			t.Errorf("cancellation headers %v", r.Header)
		}
	case <-time.After(5 * time.Second):
		t.Error("no notifications/cancelled")
	}
}

// 401/403/5xx are never era evidence (guarantee E2). With a cached
// "legacy" entry, negotiate's initialize fails with an HTTPStatusError
// whose body is a JSON-RPC error (this module's own server sends one with
// 401, 403 and its draining 503); HTTPStatusError unwraps to the
// *jsonrpc.Error, so negotiate takes it for "the server no longer takes
// initialize" and forgets the cached era.
func TestRegressionHTTPAuthErrorDoesNotForgetCachedEra(t *testing.T) {
	for _, code := range []int{401, 503} {
		t.Run(fmt.Sprint(code), func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(code)
				io.WriteString(w, `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Unauthorized or unavailable"}}`)
			}))
			defer srv.Close()
			cache := host.NewMemoryEraCache(nil)
			cache.Put(srv.URL, host.EraEntry{Era: mcp.Legacy})
			_, err := streamable.Connect(t.Context(), srv.URL, &host.Options{Cache: cache}, nil)
			var hse *streamable.HTTPStatusError
			if !errors.As(err, &hse) || hse.StatusCode != code {
				t.Errorf("err = %v", err)
			}
			if _, ok := cache.Get(srv.URL); !ok {
				t.Errorf("an HTTP %d made the client forget the cached era", code)
			}
		})
	}
}

// The standalone GET stream of a legacy session was opened only when the
// host served server requests (OnInput), and read once: a host with only
// OnLog never heard a log message sent outside a call, and once the server
// ended the connection (as a polling server does, after an event with an
// id) nothing reopened it, so what the server sent later was lost.
func TestRegressionHTTPLegacyStandaloneStreamWithoutOnInputIsReopenedAfterADrop(t *testing.T) {
	var gets atomic.Int32
	lastIDs := make(chan string, 4)
	srv := rcLegacyServer(t, nil, func(w http.ResponseWriter, r *http.Request, m rcMsg) {
		if r.Method != http.MethodGet {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		lastIDs <- r.Header.Get("Last-Event-ID")
		w.Header().Set("Content-Type", "text/event-stream")
		if gets.Add(1) == 1 {
			io.WriteString(w, "retry: 10\nid: e-1\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{\"level\":\"info\",\"data\":\"one\"}}\n\n")
			return
		}
		io.WriteString(w, "id: e-2\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{\"level\":\"info\",\"data\":\"two\"}}\n\n")
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	})
	defer srv.Close()
	logs := make(chan string, 4)
	sess, err := streamable.Connect(t.Context(), srv.URL, &host.Options{
		OnLog: func(_, _ string, data json.RawMessage) { logs <- string(data) },
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	for _, want := range []string{`"one"`, `"two"`} {
		select {
		case got := <-logs:
			if got != want {
				t.Errorf("got %s, want %s", got, want)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("no log message %s from the standalone stream", want)
		}
	}
	if first, second := <-lastIDs, <-lastIDs; first != "" || second != "e-1" {
		t.Errorf("Last-Event-ID %q then %q", first, second)
	}
}
