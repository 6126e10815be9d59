package streamable_test

// Adversarial review of the Streamable HTTP server endpoint and the bridge.
// Every TestRegressionHTTP* test here fails while the bug it names is present.

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentwire/agentwire/internal/wiretest"
	"github.com/agentwire/agentwire/mcp"
	"github.com/agentwire/agentwire/mcp/bridge"
	"github.com/agentwire/agentwire/mcp/internal/mcptest"
	"github.com/agentwire/agentwire/mcp/server"
	"github.com/agentwire/agentwire/mcp/streamable"
	"github.com/agentwire/agentwire/rpc"
)

// stallWriter is a ResponseWriter whose body writes block until released,
// like a client that keeps its connection open but never reads the stream
// (its TCP window stays closed). Released writes fail as a broken
// connection does.
type stallWriter struct {
	hdr     http.Header
	wrote   chan struct{} // closed at the first body write
	release chan struct{}
	once    sync.Once
	relOnce sync.Once
}

func newStallWriter() *stallWriter {
	return &stallWriter{hdr: http.Header{}, wrote: make(chan struct{}), release: make(chan struct{})}
}

func (w *stallWriter) Header() http.Header { return w.hdr }
func (w *stallWriter) WriteHeader(int)     {}
func (w *stallWriter) Flush()              {}
func (w *stallWriter) Write(b []byte) (int, error) {
	w.once.Do(func() { close(w.wrote) })
	<-w.release
	return 0, errors.New("write: broken pipe")
}
func (w *stallWriter) unblock() { w.relOnce.Do(func() { close(w.release) }) }

// SetWriteDeadline is what http.ResponseController reaches: a deadline
// in the past fails the stalled write, as it does on a real connection.
func (w *stallWriter) SetWriteDeadline(d time.Time) error {
	if !d.IsZero() && !d.After(time.Now()) {
		w.unblock()
	}
	return nil
}

// metaWith is the modern _meta with extra members (a progress token).
func metaWith(extra string) string {
	return strings.TrimSuffix(mcptest.Meta, "}") + "," + extra + "}"
}

// Bug 1. A client that never reads its event stream blocks the exchange's
// Write inside exchange.mu; ServeHTTP then waits for that mutex forever
// (after conn.Done or a keep-alive tick), so Shutdown never returns, even
// after its context has expired ("returns ctx's error once they have
// returned"). The CLI's SIGTERM path hangs the same way.
func TestRegressionHTTPShutdownHangsOnStalledStream(t *testing.T) {
	s := mcptest.NewServer(nil)
	h := streamable.NewHandler(s, &streamable.Options{
		KeepAlive: -1,
		Logger:    wiretest.Quiet,
		Conn:      &rpc.Options{ShutdownTimeout: 50 * time.Millisecond, EndOfStreamTimeout: 50 * time.Millisecond, Logger: wiretest.Quiet},
	})
	body := `{"jsonrpc":"2.0","id":"L","method":"subscriptions/listen","params":` + withMeta(`"notifications":{"toolsListChanged":true}`) + `}`
	w := newStallWriter()
	defer w.unblock()
	served := make(chan struct{})
	go func() {
		h.ServeHTTP(w, newPost(context.Background(), body, modernHeaders(body, nil)))
		close(served)
	}()
	<-w.wrote // the acknowledgment is being written and never will be

	sctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	down := make(chan error, 1)
	go func() { down <- h.Shutdown(sctx) }()
	select {
	case <-down:
	case <-time.After(5 * time.Second):
		t.Error("Shutdown has not returned 5 s after its 100 ms context expired: the stalled Write holds exchange.mu and ServeHTTP cannot finish")
		w.unblock()
		<-down
	}
	w.unblock()
	<-served
}

// Bug 2. exchange() assigns ex.conn after registering the exchange and
// releasing h.mu; Shutdown's abort() reads ex.conn under h.mu only: a data
// race (run with -race), and an exchange registered but not yet given its
// conn is silently not aborted.
func TestRegressionHTTPShutdownRacesExchangeConn(t *testing.T) {
	s := mcptest.NewServer(nil)
	started := make(chan struct{})
	s.AddTool(mcp.Tool{Name: "block"}, func(ctx context.Context, _ *server.ToolRequest) (*mcp.ToolResult, error) {
		close(started)
		<-ctx.Done()
		return nil, ctx.Err()
	})
	h := streamable.NewHandler(s, &streamable.Options{
		KeepAlive: -1,
		Logger:    wiretest.Quiet,
		Conn:      &rpc.Options{ShutdownTimeout: 50 * time.Millisecond, EndOfStreamTimeout: time.Minute, Logger: wiretest.Quiet},
	})
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":` + withMeta(`"name":"block"`) + `}`
	served := make(chan struct{})
	go func() {
		serve(h, newPost(context.Background(), body, modernHeaders(body, nil)))
		close(served)
	}()
	<-started
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // out of time at once: abort() reads ex.conn
	if err := h.Shutdown(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Shutdown: %v", err)
	}
	<-served
}

// Bug 3. A request that asks for progress, or any subscriptions/listen,
// gets its 200 text/event-stream headers before the handler runs, so the
// errors the spec pins to HTTP statuses ("On HTTP, the response status MUST
// be 400" for missing _meta; 400 for -32022; 404 for -32601) arrive as 200.
func TestRegressionHTTPEagerStreamHidesErrorStatus(t *testing.T) {
	h := streamable.NewHandler(mcptest.NewServer(nil), nil)
	noCaps := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}`
	cases := []struct {
		name   string
		body   string
		status int
	}{
		{"listen without clientCapabilities", `{"jsonrpc":"2.0","id":"L","method":"subscriptions/listen","params":{` + noCaps + `,"notifications":{}}}`, 400},
		{"progress call of an unknown tool", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{` + metaWith(`"progressToken":"t"`) + `,"name":"nope"}}`, 400},
		{"progress request of an unknown method", `{"jsonrpc":"2.0","id":2,"method":"nope/nope","params":{` + metaWith(`"progressToken":"t"`) + `}}`, 404},
		{"progress call without clientCapabilities", `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","progressToken":"t"},"name":"echo"}}`, 400},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rec := serve(h, newPost(t.Context(), tc.body, modernHeaders(tc.body, nil)))
			if rec.Status() != tc.status {
				t.Errorf("status %d (%s), want %d; body %q", rec.Status(), rec.hdr.Get("Content-Type"), tc.status, rec.Body())
			}
		})
	}
	h.Shutdown(t.Context())
}

// Bug 4. Mcp-Param- headers are compared with the argument looked up
// case-sensitively (map), while the tool decodes its arguments with
// encoding/json's case-insensitive struct matching: {"region":"us",
// "REGION":"eu"} passes the check against "Mcp-Param-Region: us" and the
// tool runs with "eu". A gateway that routes or authorizes on the header is
// bypassed.
func TestRegressionHTTPParamHeaderCaseVariantBypass(t *testing.T) {
	s := mcptest.NewServer(nil)
	type regionIn struct {
		Region string `json:"region"`
	}
	got := make(chan string, 1)
	server.AddTool(s, mcp.Tool{Name: "deploy", InputSchema: json.RawMessage(`{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"}}}`)},
		func(_ context.Context, _ *server.ToolRequest, in regionIn) (*mcp.ToolResult, error) {
			got <- in.Region
			return mcp.TextResult(in.Region), nil
		})
	h := streamable.NewHandler(s, nil)
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":` + withMeta(`"name":"deploy","arguments":{"region":"us","REGION":"eu"}`) + `}`
	rec := serve(h, newPost(t.Context(), body, modernHeaders(body, map[string]string{"Mcp-Param-Region": "us"})))
	if rec.Status() == http.StatusBadRequest {
		return // rejected: fixed
	}
	select {
	case region := <-got:
		if region != "us" {
			t.Errorf("Mcp-Param-Region: us was accepted (status %d) but the tool ran with region %q", rec.Status(), region)
		}
	default:
		t.Errorf("status %d and the tool did not run: %s", rec.Status(), rec.Body())
	}
}

// Bug 5. The bridge validates Mcp-Name against params.name decoded
// case-insensitively (the last of "name"/"NAME" wins) but forwards the
// params map with both members to the stdio server, where a case-sensitive
// reader (JSON.parse, Python's json) takes "name": the header named one
// tool, the server runs another.
func TestRegressionHTTPBridgeForwardsNameOtherThanHeader(t *testing.T) {
	var mu sync.Mutex
	var forwarded json.RawMessage
	wrap := func(s *server.Server) rpc.Handler {
		inner := s.Handler()
		return rpc.HandlerFunc(func(ctx context.Context, r *rpc.Request) (any, error) {
			if r.Method == "tools/call" {
				mu.Lock()
				forwarded = append(json.RawMessage(nil), r.Params...)
				mu.Unlock()
			}
			return inner.Handle(ctx, r)
		})
	}
	child, _, err := mcptest.ConnectTo(t, nil, wrap, nil)
	if err != nil {
		t.Fatal(err)
	}
	h := streamable.NewHandler(bridge.New(child), &streamable.Options{Logger: wiretest.Quiet})
	defer h.Shutdown(context.Background())
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":` + withMeta(`"name":"fails","NAME":"echo","arguments":{"text":"x"}`) + `}`
	rec := serve(h, newPost(t.Context(), body, modernHeaders(body, map[string]string{"Mcp-Name": "echo"})))
	if rec.Status() == http.StatusBadRequest {
		return // rejected: fixed
	}
	mu.Lock()
	defer mu.Unlock()
	var p map[string]json.RawMessage
	if err := json.Unmarshal(forwarded, &p); err != nil {
		t.Fatalf("nothing forwarded (status %d): %s", rec.Status(), rec.Body())
	}
	if string(p["name"]) != `"echo"` {
		t.Errorf("Mcp-Name: echo was accepted, but the stdio server received params.name = %s (params %s)", p["name"], forwarded)
	}
}

// Bug 6. The bridge relays a child's progress (and listen) notifications
// with req.Notify on the shared Session's reading goroutine. When one HTTP
// client does not read its stream, the relay blocks (holding the request's
// mutex, so every later notification for it blocks too); each blocked
// notification handler holds one of the child connection's 256 handler
// slots, the reader stops, and every other client of the bridge hangs.
func TestRegressionHTTPBridgeSlowClientStallsOthers(t *testing.T) {
	const steps = 2000
	var sent atomic.Int64
	allSent := make(chan struct{})
	wrap := func(s *server.Server) rpc.Handler {
		s.AddTool(mcp.Tool{Name: "chatty"}, func(ctx context.Context, r *server.ToolRequest) (*mcp.ToolResult, error) {
			for i := 1; i <= steps; i++ {
				if err := r.Progress(float64(i), 0, ""); err != nil {
					return nil, err
				}
				sent.Store(int64(i))
			}
			close(allSent)
			<-ctx.Done()
			return nil, ctx.Err()
		})
		return s.Handler()
	}
	child, _, err := mcptest.ConnectTo(t, nil, wrap, nil)
	if err != nil {
		t.Fatal(err)
	}
	h := streamable.NewHandler(bridge.New(child), &streamable.Options{KeepAlive: -1, Logger: wiretest.Quiet,
		Conn: &rpc.Options{Logger: wiretest.Quiet, ShutdownTimeout: 100 * time.Millisecond}})
	defer h.Shutdown(context.Background())

	// Client A asks for progress and never reads.
	w := newStallWriter()
	defer w.unblock()
	actx, acancel := context.WithCancel(context.Background())
	defer acancel()
	aBody := `{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{` + metaWith(`"progressToken":"mine"`) + `,"name":"chatty"}}`
	aDone := make(chan struct{})
	go func() {
		h.ServeHTTP(w, newPost(actx, aBody, modernHeaders(aBody, nil)))
		close(aDone)
	}()
	// Wait until the tool has sent everything, or its progress has stopped
	// advancing: the bridge no longer reads the child's output, and what B
	// gets from the child would queue behind it.
	last, still := int64(-1), 0
	for still < 10 {
		select {
		case <-allSent:
			still = 10
		case <-time.After(50 * time.Millisecond):
			if n := sent.Load(); n == last {
				still++
			} else {
				last, still = n, 0
			}
		}
	}
	// The bridge kept reading the stdio server: the tool either sent
	// everything or was cancelled because client A fell too far behind
	// (the fix: a bounded relay per request, never the shared reader).
	if n := sent.Load(); n < steps && n > 1000 {
		t.Errorf("the tool's progress stopped at %d of %d without being cancelled", n, steps)
	}

	// Client B only lists tools.
	bBody := `{"jsonrpc":"2.0","id":"b","method":"tools/list","params":{` + mcptest.Meta + `}}`
	bDone := make(chan *httpRecorder, 1)
	go func() { bDone <- serve(h, newPost(context.Background(), bBody, modernHeaders(bBody, nil))) }()
	select {
	case rec := <-bDone:
		if rec.Status() != 200 {
			t.Errorf("B: %d %s", rec.Status(), rec.Body())
		}
	case <-time.After(5 * time.Second):
		t.Error("client B's tools/list has had no answer for 5 s: client A, which does not read its progress stream, stalls the whole bridge")
		w.unblock()
		acancel()
		<-bDone
	}
	w.unblock()
	acancel()
	<-aDone
}

// Bug 7. AllowedOrigins is documented as the origins "a browser page may
// call from", but the endpoint answers no CORS preflight (OPTIONS gets 405)
// and sends no Access-Control-Allow-Origin: every MCP POST carries
// non-safelisted headers (Mcp-Method, MCP-Protocol-Version, Content-Type:
// application/json), so a browser page on an allowed origin can never call.
func TestRegressionHTTPAllowedOriginCannotPassPreflight(t *testing.T) {
	h := streamable.NewHandler(mcptest.NewServer(nil), &streamable.Options{AllowedOrigins: []string{"https://app.example.com"}})
	pre := newPost(t.Context(), "", http.Header{
		"Origin":                         {"https://app.example.com"},
		"Access-Control-Request-Method":  {"POST"},
		"Access-Control-Request-Headers": {"content-type,mcp-method,mcp-protocol-version"},
	})
	pre.Method = http.MethodOptions
	rec := serve(h, pre)
	if rec.Status() >= 300 || rec.hdr.Get("Access-Control-Allow-Origin") == "" {
		t.Errorf("preflight from an allowed origin: status %d, Access-Control-Allow-Origin %q", rec.Status(), rec.hdr.Get("Access-Control-Allow-Origin"))
	}
	body := `{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{` + mcptest.Meta + `}}`
	rec = serve(h, newPost(t.Context(), body, modernHeaders(body, map[string]string{"Origin": "https://app.example.com"})))
	if rec.Status() != 200 || rec.hdr.Get("Access-Control-Allow-Origin") == "" {
		t.Errorf("POST from an allowed origin: status %d, Access-Control-Allow-Origin %q", rec.Status(), rec.hdr.Get("Access-Control-Allow-Origin"))
	}
}
