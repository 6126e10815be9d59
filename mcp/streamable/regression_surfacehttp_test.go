package streamable

// Regression tests for defects a review found in the Streamable HTTP
// surface (both sides). Each names the bug it pins; a failure is the bug.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"github.com/agentwire/agentwire/mcp"
	"github.com/agentwire/agentwire/mcp/host"
	"github.com/agentwire/agentwire/mcp/server"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"
)

const h7Meta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}`

func h7Server(opts *server.Options) *server.Server {
	return server.New(mcp.Implementation{Name: "test-server", Version: "0.1"}, opts)
}

// 2. A legacy client's answer to the server's own request is routed by a
// sequential, process-wide id ("srv-1", "srv-2", ...) and nothing else:
// any other HTTP client can guess it and answer for the client that was
// asked.
func TestRegressionSurfaceSrvIDAnsweredByAnotherClient(t *testing.T) {
	s := h7Server(nil)
	s.AddTool(mcp.Tool{Name: "greet"}, func(ctx context.Context, r *server.ToolRequest) (*mcp.ToolResult, error) {
		res, err := r.Elicit(ctx, "who", "Your name?", map[string]any{"type": "object"})
		if err != nil {
			return nil, err
		}
		return mcp.TextResult(fmt.Sprint("hello ", res.Content["name"])), nil
	})
	h := NewHandler(s, nil)
	srv := httptest.NewServer(h)
	defer func() { h.Shutdown(context.Background()); srv.Close() }()

	post := func(body string) *http.Response {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/mcp", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set(mcp.HeaderProtocolVersion, "2025-11-25")
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	// Alice calls the tool and is asked for her name on her stream.
	alice := post(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"greet"}}`)
	defer alice.Body.Close()
	br := bufio.NewReader(alice.Body)
	readData := func() string {
		for {
			l, err := br.ReadString('\n')
			if err != nil {
				t.Fatalf("alice's stream: %v", err)
			}
			if d, ok := strings.CutPrefix(strings.TrimRight(l, "\r\n"), "data: "); ok {
				return d
			}
		}
	}
	asked := readData()
	if !strings.Contains(asked, `"elicitation/create"`) {
		t.Fatalf("alice got %s", asked)
	}
	var q struct {
		ID json.RawMessage `json:"id"`
	}
	json.Unmarshal([]byte(asked), &q)
	// Mallory never saw Alice's stream; she guesses the first id. Then
	// Alice answers with the id she was sent.
	m := post(`{"jsonrpc":"2.0","id":"srv-1","result":{"action":"accept","content":{"name":"Mallory"}}}`)
	m.Body.Close()
	a := post(`{"jsonrpc":"2.0","id":` + string(q.ID) + `,"result":{"action":"accept","content":{"name":"Alice"}}}`)
	a.Body.Close()
	if d := readData(); !strings.Contains(d, "hello Alice") {
		t.Errorf("Alice's result: %s", d)
	}
}

func r7Post(body string, hdr map[string]string) *http.Request {
	req := httptest.NewRequest(http.MethodPost, "http://localhost/mcp", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	return req
}

// 7. The Mcp-Param- check of a nested argument reads it case-sensitively
// (argAt), the tool decodes case-insensitively: the header says "us", the
// tool runs with "eu". The top-level variant was fixed; the nested one not.
func TestRegressionSurfaceNestedParamHeaderCaseVariantBypass(t *testing.T) {
	s := h7Server(nil)
	type in struct {
		Loc struct {
			Region string `json:"region"`
		} `json:"loc"`
	}
	got := make(chan string, 1)
	server.AddTool(s, mcp.Tool{Name: "deploy", InputSchema: json.RawMessage(`{"type":"object","properties":{"loc":{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"}}}}}`)},
		func(_ context.Context, _ *server.ToolRequest, a in) (*mcp.ToolResult, error) {
			got <- a.Loc.Region
			return mcp.TextResult(a.Loc.Region), nil
		})
	h := NewHandler(s, nil)
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{` + h7Meta + `,"name":"deploy","arguments":{"loc":{"region":"us","REGION":"eu"}}}}`
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, r7Post(body, map[string]string{mcp.HeaderProtocolVersion: mcp.LatestVersion, mcp.HeaderMethod: "tools/call", mcp.HeaderName: "deploy", "Mcp-Param-Region": "us"}))
	select {
	case region := <-got:
		if region != "us" {
			t.Errorf("Mcp-Param-Region: us accepted (status %d) but the tool ran with region %q", rec.Code, region)
		}
	default:
	}
}

// 8. The HTTP layer reads _meta's protocolVersion case-insensitively
// (encoding/json), the session exactly (jsonrpc.Members): MCP-Protocol-Version:
// 2025-11-25 passes the mirror check while the request is served as
// 2026-07-28.
func TestRegressionSurfaceProtocolVersionHeaderMismatchViaCaseVariant(t *testing.T) {
	s := h7Server(nil)
	h := NewHandler(s, nil)
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","IO.MODELCONTEXTPROTOCOL/PROTOCOLVERSION":"2025-11-25","io.modelcontextprotocol/clientCapabilities":{}}}}`
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, r7Post(body, map[string]string{mcp.HeaderProtocolVersion: "2025-11-25", mcp.HeaderMethod: "tools/list"}))
	if rec.Code != http.StatusBadRequest {
		t.Errorf("header 2025-11-25 with body 2026-07-28 was served: %d %s", rec.Code, rec.Body)
	}
}

// 11. An event stream's responses to ids no call waits for (kept in case
// a legacy server answers a call on another stream) were kept after the
// calls had ended: the client still held them, and a server could grow
// the table without bound.
func TestRegressionSurfaceLateResponsesKeptForever(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		json.NewDecoder(r.Body).Decode(&m)
		switch m.Method {
		case mcp.MethodDiscover:
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"resultType":"complete","supportedVersions":["2026-07-28"],"capabilities":{},"ttlMs":0,"cacheScope":"public"}}`, m.ID)
		default:
			w.Header().Set("Content-Type", "text/event-stream")
			for i := range 50 {
				fmt.Fprintf(w, "data: {\"jsonrpc\":\"2.0\",\"id\":\"junk-%s-%d\",\"result\":{}}\n\n", m.ID, i)
			}
			fmt.Fprintf(w, "data: {\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":{\"resultType\":\"complete\",\"tools\":[]}}\n\n", m.ID)
		}
	}))
	defer srv.Close()
	var ht *httpTransport
	sess, err := host.NewSession(t.Context(), &host.Options{Eras: mcp.ModernOnly, CacheKey: srv.URL}, func(p host.Peer) host.Transport {
		ht = newHTTPTransport(srv.URL, p, nil)
		return ht
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	for range 3 {
		if _, err := sess.ListTools(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	n := 0
	ht.late.Range(func(any, any) bool { n++; return true })
	if n > 0 {
		t.Errorf("no call in flight, yet %d stray responses are kept", n)
	}
}

// 13. With OnInput set, a legacy HTTP connect opens the standalone GET
// stream synchronously on the transport's base context: a server that
// does not send the GET's headers holds Connect past its ctx and
// ConnectTimeout.
func TestRegressionSurfaceStandaloneStreamIgnoresConnectDeadline(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			select { // headers only with the first event, which never comes
			case <-r.Context().Done():
			case <-release:
			}
			return
		}
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		json.NewDecoder(r.Body).Decode(&m)
		if m.ID == nil {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":"2025-11-25","capabilities":{},"serverInfo":{"name":"s","version":"1"}}}`, m.ID)
	}))
	defer srv.Close()
	var once sync.Once
	defer once.Do(func() { close(release) })
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	type result struct {
		s   *host.Session
		err error
	}
	ch := make(chan result, 1)
	go func() {
		s, err := Connect(ctx, srv.URL, &host.Options{Eras: mcp.LegacyOnly, ConnectTimeout: 300 * time.Millisecond,
			OnInput: func(context.Context, mcp.InputRequest) (any, error) { return map[string]any{}, nil }}, nil)
		ch <- result{s, err}
	}()
	var r result
	select {
	case r = <-ch:
	case <-time.After(3 * time.Second):
		t.Errorf("ConnectHTTP still running 3 s after its 300 ms deadline")
		once.Do(func() { close(release) })
		r = <-ch
	}
	if r.s != nil {
		r.s.Close()
	}
}

// An open subscriptions/listen stream keeps its exchange, so the exchange
// is small: the decoded message and the route's note are apart (inbound),
// let go of once the handler runs. The regressions this pins: an exchange
// of 680 bytes that kept a copy of the response controller and the
// bookkeeping of server requests almost no exchange sends, then one of
// 632 that kept its decoded message for as long as a stream was open.
func TestAnExchangeFitsThe160ByteSizeClass(t *testing.T) {
	if n := unsafe.Sizeof(exchange{}); n > 160 {
		t.Fatalf("an exchange is %d bytes, over 160", n)
	}
}

// An open listen stream keeps neither its decoded request nor the route's
// note: the exchange lets go of them as the handler starts, and the
// request drops its note when the handler detaches (rpc.Request.Detach).
// What is left per stream is what a stream needs.
func TestAnOpenListenStreamLetsGoOfItsDecodedRequest(t *testing.T) {
	h := NewHandler(h7Server(nil), &Options{KeepAlive: -1})
	srv := httptest.NewServer(h)
	defer srv.Close()
	body := `{"jsonrpc":"2.0","id":"L","method":"subscriptions/listen","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}},"notifications":{"toolsListChanged":true}}}`
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/mcp", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", "subscriptions/listen")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("no acknowledgment: %v", err)
		}
		if strings.Contains(line, mcp.MethodAcknowledged) {
			break
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.exchanges) != 1 {
		t.Fatalf("%d exchanges open, want the stream's", len(h.exchanges))
	}
	for ex := range h.exchanges {
		ex.mu.Lock()
		in := ex.in
		ex.mu.Unlock()
		if in != nil {
			t.Errorf("the open stream's exchange still holds its decoded request (%d bytes)", unsafe.Sizeof(*in))
		}
	}
}

// The keep-alive clock runs only while an exchange is open: with every
// request answered no timer is pending (a server with no traffic does
// nothing, and a test's bubble ends).
func TestTheKeepAliveClockStopsWhenNoExchangeIsOpen(t *testing.T) {
	s := h7Server(nil)
	h := NewHandler(s, &Options{KeepAlive: time.Hour})
	for i := range 3 {
		body := `{"jsonrpc":"2.0","id":` + fmt.Sprint(i) + `,"method":"tools/list","params":{` + h7Meta + `}}`
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r7Post(body, map[string]string{mcp.HeaderProtocolVersion: mcp.LatestVersion, mcp.HeaderMethod: "tools/list"}))
		if rec.Code != http.StatusOK {
			t.Fatalf("tools/list: %d %s", rec.Code, rec.Body)
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.keepAlives == nil {
		t.Fatal("no request armed the clock")
	}
	if h.keepAlivesArmed || h.keepAlives.Stop() {
		t.Error("a keep-alive timer is pending with no exchange open")
	}
}
