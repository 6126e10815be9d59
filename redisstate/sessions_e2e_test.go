package redisstate

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentwire/agentwire/mcp"
	"github.com/agentwire/agentwire/mcp/server"
	"github.com/agentwire/agentwire/mcp/streamable"
	goredis "github.com/redis/go-redis/v9"
)

// ----- a fleet of two instances serving legacy sessions through Redis -----

// wireWait bounds every wait of these tests for something on the wire or
// in Redis: a wait that runs out is a failure, never the expected path.
const wireWait = 10 * time.Second

// docURI is the resource the sessions subscribe to.
const docURI = "test://doc"

// legacyInstance is one instance of the fleet: a server.Server behind a
// streamable.Handler with sessions on, sharing the fleet's sessions and
// event streams through a State of its own (its own go-redis client).
type legacyInstance struct {
	name   string
	st     *State
	srv    *server.Server
	h      *streamable.Handler
	addr   string // host:port of its HTTP endpoint
	events *watchedEvents
	// started receives the gate of each call of "slow" once it has sent
	// its progress and waits.
	started chan string

	// The context of each request the test sent, by its X-Test-Exchange
	// tag: it ends when the server notices that the client has gone.
	mu   sync.Mutex
	ctxs map[string]context.Context
	seq  int
}

// legacyFleet is the instances and the gates their "slow" calls wait on.
type legacyFleet struct {
	r      *redisServer
	rdb    *goredis.Client // the test's own
	a, b   *legacyInstance
	mu     sync.Mutex
	gates  map[string]chan struct{}
	opened map[string]bool
}

func newLegacyFleet(t *testing.T, r *redisServer) *legacyFleet {
	t.Helper()
	f := &legacyFleet{r: r, rdb: r.client(t), gates: map[string]chan struct{}{}, opened: map[string]bool{}}
	f.a, f.b = f.start(t, "A"), f.start(t, "B")
	// The gates open before the instances shut down (cleanups run last
	// first), so that no call is left waiting on one.
	t.Cleanup(func() {
		f.mu.Lock()
		names := slices.Collect(maps.Keys(f.gates))
		f.mu.Unlock()
		for _, g := range names {
			f.open(g)
		}
	})
	return f
}

// gate returns the channel the calls of "slow" with that gate wait on.
func (f *legacyFleet) gate(name string) chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	ch, ok := f.gates[name]
	if !ok {
		ch = make(chan struct{})
		f.gates[name] = ch
	}
	return ch
}

// open lets the calls of "slow" with that gate finish.
func (f *legacyFleet) open(name string) {
	ch := f.gate(name)
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.opened[name] {
		f.opened[name] = true
		close(ch)
	}
}

// start makes one instance: the same tools and resource on every
// instance, as a fleet behind one balancer has.
func (f *legacyFleet) start(t *testing.T, name string) *legacyInstance {
	t.Helper()
	st := storeState(t, f.r, Options{})
	in := &legacyInstance{name: name, st: st, events: watch(st.Events(nil)), started: make(chan string, 8), ctxs: map[string]context.Context{}}
	srv := server.New(mcp.Implementation{Name: "fleet-" + name, Version: "1"}, &server.Options{Logger: quiet})
	// version answers the protocol version the call was served at: the
	// session's negotiated one when the request names none.
	srv.AddTool(mcp.Tool{Name: "version"}, func(_ context.Context, r *server.ToolRequest) (*mcp.ToolResult, error) {
		return mcp.TextResult(r.ProtocolVersion), nil
	})
	// slow reports progress, then waits until the test opens its gate.
	type slowIn struct {
		Gate string `json:"gate"`
	}
	server.AddTool(srv, mcp.Tool{Name: "slow"}, func(ctx context.Context, r *server.ToolRequest, arg slowIn) (*mcp.ToolResult, error) {
		if err := r.Progress(1, 2, "waiting for "+arg.Gate); err != nil {
			return nil, err
		}
		in.started <- arg.Gate
		select {
		case <-f.gate(arg.Gate):
			return mcp.TextResult("finished " + arg.Gate + " on " + name), nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	})
	srv.AddResource(mcp.Resource{URI: docURI, Name: "doc"}, func(context.Context, *server.ReadRequest) ([]mcp.ResourceContents, error) {
		return []mcp.ResourceContents{{URI: docURI, Text: "v"}}, nil
	})
	in.srv = srv
	in.h = streamable.NewHandler(srv, &streamable.Options{Logger: quiet, Sessions: &streamable.SessionOptions{
		Events:   in.events,
		Store:    st.Sessions(),
		Instance: name,
	}})
	web := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if tag := r.Header.Get("X-Test-Exchange"); tag != "" {
			in.mu.Lock()
			in.ctxs[tag] = r.Context()
			in.mu.Unlock()
		}
		in.h.ServeHTTP(w, r)
	}))
	in.addr = strings.TrimPrefix(web.URL, "http://")
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), wireWait)
		defer cancel()
		in.h.Shutdown(ctx)
		web.Close()
		srv.Shutdown(ctx)
	})
	return in
}

// watchedEvents is an instance's Redis event store as its handler uses
// it, which also keeps what was appended through it: a test waits for an
// event to be in Redis, not for time to pass.
type watchedEvents struct {
	streamable.EventFollower
	mu      sync.Mutex
	stored  []storedEvent
	changed chan struct{}
}

// storedEvent is one event appended through an instance.
type storedEvent struct {
	stream, id, data string
}

func watch(e streamable.EventFollower) *watchedEvents {
	return &watchedEvents{EventFollower: e, changed: make(chan struct{})}
}

func (w *watchedEvents) Append(ctx context.Context, session, stream string, data []byte) (string, error) {
	id, err := w.EventFollower.Append(ctx, session, stream, data)
	if err == nil {
		w.mu.Lock()
		w.stored = append(w.stored, storedEvent{stream: stream, id: id, data: string(data)})
		close(w.changed)
		w.changed = make(chan struct{})
		w.mu.Unlock()
	}
	return id, err
}

// await waits (at most wireWait) until an event that match accepts has
// been appended through w, and returns it.
func (w *watchedEvents) await(t *testing.T, what string, match func(storedEvent) bool) storedEvent {
	t.Helper()
	timer := time.NewTimer(wireWait)
	defer timer.Stop()
	for {
		w.mu.Lock()
		for _, e := range w.stored {
			if match(e) {
				w.mu.Unlock()
				return e
			}
		}
		changed := w.changed
		w.mu.Unlock()
		select {
		case <-changed:
		case <-timer.C:
			t.Fatalf("not appended within %v: %s", wireWait, what)
		}
	}
}

// ----- the wire -----

// rawExchange is one HTTP request, written byte for byte on a TCP
// connection of its own, and its response; drop closes the connection,
// as a client (or a proxy) that goes away does.
type rawExchange struct {
	t    *testing.T
	what string
	in   *legacyInstance
	tag  string
	conn net.Conn
	resp *http.Response
	body *bufio.Reader
}

// postHeaders are the headers of a 2025-11-25 client's POST in session
// sid ("" for none: initialize).
func postHeaders(sid string) []string {
	h := []string{"Content-Type: application/json", "Accept: application/json, text/event-stream"}
	if sid != "" {
		h = append(h, "Mcp-Session-Id: "+sid, "MCP-Protocol-Version: 2025-11-25")
	}
	return h
}

// getHeaders are those of its GET in session sid, resuming from
// lastEventID unless "".
func getHeaders(sid, lastEventID string) []string {
	h := []string{"Accept: text/event-stream", "Mcp-Session-Id: " + sid, "MCP-Protocol-Version: 2025-11-25"}
	if lastEventID != "" {
		h = append(h, "Last-Event-ID: "+lastEventID)
	}
	return h
}

// send writes method /mcp with hdr and body to in and reads the
// response's head. The request also carries X-Test-Exchange, a tag
// (ignored by the handler) by which drop finds the request's context on
// the server's side.
func send(t *testing.T, in *legacyInstance, what, method string, hdr []string, body string) *rawExchange {
	t.Helper()
	conn, err := net.DialTimeout("tcp", in.addr, wireWait)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	t.Cleanup(func() { conn.Close() })
	in.mu.Lock()
	in.seq++
	tag := fmt.Sprint(in.seq)
	in.mu.Unlock()
	var b strings.Builder
	fmt.Fprintf(&b, "%s /mcp HTTP/1.1\r\nHost: %s\r\nX-Test-Exchange: %s\r\n", method, in.addr, tag)
	for _, h := range hdr {
		b.WriteString(h + "\r\n")
	}
	if method == http.MethodPost {
		fmt.Fprintf(&b, "Content-Length: %d\r\n", len(body))
	}
	b.WriteString("\r\n" + body)
	conn.SetDeadline(time.Now().Add(wireWait))
	if _, err := io.WriteString(conn, b.String()); err != nil {
		t.Fatalf("%s: writing the request: %v", what, err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("%s: reading the response: %v", what, err)
	}
	return &rawExchange{t: t, what: what + " on " + in.name, in: in, tag: tag, conn: conn, resp: resp, body: bufio.NewReader(resp.Body)}
}

// drop closes the client's connection and waits until the server has
// noticed (the request's context has ended): from then on nothing is
// written to it, and what its stream carries waits in Redis.
func (x *rawExchange) drop() {
	x.t.Helper()
	x.conn.Close()
	x.in.mu.Lock()
	ctx := x.in.ctxs[x.tag]
	x.in.mu.Unlock()
	select {
	case <-ctx.Done():
	case <-time.After(wireWait):
		x.t.Fatalf("%s: the server did not notice the client going within %v", x.what, wireWait)
	}
}

// status checks the response's status and Content-Type (a prefix).
func (x *rawExchange) status(code int, contentType string) {
	x.t.Helper()
	if x.resp.StatusCode != code || !strings.HasPrefix(x.resp.Header.Get("Content-Type"), contentType) {
		b, _ := io.ReadAll(x.body)
		x.t.Fatalf("%s: %d %q, want %d %q: %q", x.what, x.resp.StatusCode, x.resp.Header.Get("Content-Type"), code, contentType, b)
	}
}

// all reads the rest of the body.
func (x *rawExchange) all() string {
	x.t.Helper()
	x.conn.SetReadDeadline(time.Now().Add(wireWait))
	b, err := io.ReadAll(x.body)
	if err != nil {
		x.t.Fatalf("%s: reading the body: %v (read %q)", x.what, err, b)
	}
	return string(b)
}

// sseEvent is one event of an event stream.
type sseEvent struct {
	id, data, retry string
	hasData         bool
}

// next reads the stream's next event (comments, the keep-alives, are
// skipped); at the end of the stream it fails the test.
func (x *rawExchange) next() sseEvent {
	x.t.Helper()
	ev, err := x.read()
	if err != nil {
		x.t.Fatalf("%s: reading an event: %v", x.what, err)
	}
	return ev
}

// ends checks that the stream ends (cleanly) before any other event.
func (x *rawExchange) ends() {
	x.t.Helper()
	if ev, err := x.read(); err != io.EOF {
		x.t.Fatalf("%s: the stream goes on: %+v %v", x.what, ev, err)
	}
}

// stops checks that the stream ends before any other event: cleanly, or
// with its connection cut (a bug, pinned by
// TestAStreamTheServerEndsEndsItsResponseCleanly).
func (x *rawExchange) stops() {
	x.t.Helper()
	if ev, err := x.read(); err != io.EOF && err != io.ErrUnexpectedEOF {
		x.t.Fatalf("%s: the stream goes on: %+v %v", x.what, ev, err)
	}
}

func (x *rawExchange) read() (sseEvent, error) {
	var ev sseEvent
	seen := false
	x.conn.SetReadDeadline(time.Now().Add(wireWait))
	for {
		line, err := x.body.ReadString('\n')
		if err != nil {
			if err == io.EOF && (seen || line != "") {
				err = io.ErrUnexpectedEOF
			}
			return ev, err
		}
		line = strings.TrimSuffix(line, "\n")
		switch {
		case line == "" && seen:
			return ev, nil
		case line == "" || strings.HasPrefix(line, ":"):
			continue
		}
		k, v, _ := strings.Cut(line, ":")
		v = strings.TrimPrefix(v, " ")
		switch k {
		case "id":
			ev.id = v
		case "data":
			ev.data, ev.hasData = v, true
		case "retry":
			ev.retry = v
		}
		seen = true
	}
}

// priming checks that ev is a priming event (an id, the retry delay,
// empty data) and returns its id.
func priming(t *testing.T, what string, ev sseEvent) string {
	t.Helper()
	if ev.id == "" || ev.retry == "" || !ev.hasData || ev.data != "" {
		t.Fatalf("%s: not a priming event first: %+v", what, ev)
	}
	return ev.id
}

// rpcMessage is what these tests read of a JSON-RPC message.
type rpcMessage struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params struct {
		URI           string          `json:"uri"`
		ProgressToken json.RawMessage `json:"progressToken"`
	} `json:"params"`
	Result struct {
		ProtocolVersion string `json:"protocolVersion"`
		Content         []struct {
			Text string `json:"text"`
		} `json:"content"`
	} `json:"result"`
	Error *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func decode(t *testing.T, what, data string) rpcMessage {
	t.Helper()
	var m rpcMessage
	if err := json.Unmarshal([]byte(data), &m); err != nil {
		t.Fatalf("%s: not JSON-RPC: %q", what, data)
	}
	return m
}

// text is a tool result's text.
func (m rpcMessage) text() string {
	if len(m.Result.Content) == 0 {
		return ""
	}
	return m.Result.Content[0].Text
}

// answer reads the response to a POSTed request, whether the server
// answered with JSON or with an event stream.
func (x *rawExchange) answer() rpcMessage {
	x.t.Helper()
	x.status(http.StatusOK, "")
	if strings.HasPrefix(x.resp.Header.Get("Content-Type"), "text/event-stream") {
		for {
			ev := x.next()
			if ev.data == "" {
				continue
			}
			if m := decode(x.t, x.what, ev.data); m.Method == "" {
				return m
			}
		}
	}
	return decode(x.t, x.what, strings.TrimSpace(x.all()))
}

// call POSTs one request in session sid and returns its response.
func call(t *testing.T, in *legacyInstance, sid, what, body string) rpcMessage {
	t.Helper()
	return send(t, in, what, http.MethodPost, postHeaders(sid), body).answer()
}

// initSession opens a 2025-11-25 session on in, as a 2025 client does
// (initialize without Mcp-Session-Id, then notifications/initialized),
// and returns its id.
func initSession(t *testing.T, in *legacyInstance) string {
	t.Helper()
	x := send(t, in, "initialize", http.MethodPost, postHeaders(""),
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	sid := x.resp.Header.Get("Mcp-Session-Id")
	if m := x.answer(); m.Result.ProtocolVersion != "2025-11-25" || sid == "" {
		t.Fatalf("initialize on %s: version %q, Mcp-Session-Id %q", in.name, m.Result.ProtocolVersion, sid)
	}
	x = send(t, in, "notifications/initialized", http.MethodPost, postHeaders(sid), `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	x.status(http.StatusAccepted, "")
	return sid
}

// slowCall starts "slow" with gate on in as a 2025-11-25 client does (it
// accepts JSON and an event stream), reads its stream until the progress
// notification, and returns the exchange and the id of the last event
// read (the one a client resumes from).
func slowCall(t *testing.T, in *legacyInstance, sid string, id int, gate string) (x *rawExchange, lastID string) {
	t.Helper()
	what := "slow " + gate
	x = send(t, in, what, http.MethodPost, postHeaders(sid),
		fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"slow","arguments":{"gate":%q},"_meta":{"progressToken":%q}}}`, id, gate, gate))
	x.status(http.StatusOK, "text/event-stream")
	priming(t, what, x.next())
	ev := x.next()
	if m := decode(t, what, ev.data); m.Method != "notifications/progress" || string(m.Params.ProgressToken) != `"`+gate+`"` || ev.id == "" {
		t.Fatalf("%s: the progress notification: %+v", what, ev)
	}
	select {
	case g := <-in.started:
		if g != gate {
			t.Fatalf("%s: the call of gate %q started instead", what, g)
		}
	case <-time.After(wireWait):
		t.Fatalf("%s: the tool did not start", what)
	}
	return x, ev.id
}

// isResponseTo reports whether a stored event is the response to
// request id (a JSON number).
func isResponseTo(e storedEvent, id int) bool {
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	return json.Unmarshal([]byte(e.data), &m) == nil && m.Method == "" && string(m.ID) == fmt.Sprint(id)
}

// redis returns a context for one of the test's own Redis commands,
// bounded by wireWait: the client's ContextTimeoutEnabled makes it bound
// the command's reads (its ReadTimeout, a second, is short for a busy
// machine).
func (f *legacyFleet) redis(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), wireWait)
	t.Cleanup(cancel)
	return ctx
}

// hget reads one field of a hash ("" when there is none).
func (f *legacyFleet) hget(t *testing.T, key, field string) string {
	t.Helper()
	v, err := f.rdb.HGet(f.redis(t), key, field).Result()
	if err != nil && err != goredis.Nil {
		t.Fatalf("HGET %s %s: %v", key, field, err)
	}
	return v
}

// keys lists the keys that match pattern.
func (f *legacyFleet) keys(t *testing.T, pattern string) []string {
	t.Helper()
	ks, err := f.rdb.Keys(f.redis(t), pattern).Result()
	if err != nil {
		t.Fatalf("KEYS %s: %v", pattern, err)
	}
	return ks
}

// ----- the tests -----

// A 2025-11-25 client's session made on instance A is resumed on
// instance B through Redis, as behind a load balancer whose instances
// come and go: B restores the session from its record (the client never
// initializes again), replays on its GET stream the resource update sent
// while the client had no stream, serves its calls at the negotiated
// version, and tells it of later updates (the subscription made on A
// lives on B). A call still running on A when its client lost A is
// resumed on B too: its response is replayed once the call has ended on
// A, or followed while it still runs there. A DELETE through B ends the
// session: B answers 404 after it, and nothing of the session is left in
// Redis.
func TestALegacySessionIsResumedOnAnotherInstanceThroughRedis(t *testing.T) {
	r := startRedis(t)
	f := newLegacyFleet(t, r)
	a, b := f.a, f.b

	// 1. The session is made on A, subscribes, and opens its GET stream.
	sid := initSession(t, a)
	if m := call(t, a, sid, "resources/subscribe", `{"jsonrpc":"2.0","id":2,"method":"resources/subscribe","params":{"uri":"`+docURI+`"}}`); m.Error != nil {
		t.Fatalf("resources/subscribe on A: %+v", m.Error)
	}
	if h := f.hget(t, "test:sess:"+sid, "holder"); h != "A" {
		t.Fatalf("the record's holder after the mint: %q", h)
	}
	if rec := f.hget(t, "test:sess:"+sid, "rec"); !strings.Contains(rec, `resources/subscribe`) || !strings.Contains(rec, `"method":"initialize"`) {
		t.Fatalf("the record does not hold what restores the session: %s", rec)
	}
	getA := send(t, a, "GET", http.MethodGet, getHeaders(sid, ""), "")
	getA.status(http.StatusOK, "text/event-stream")
	if got := getA.resp.Header.Get("Mcp-Session-Id"); got != sid {
		t.Errorf("the GET stream's Mcp-Session-Id: %q", got)
	}
	getPrime := priming(t, "the GET stream on A", getA.next())

	// Two calls run on A; their client reads each one's progress, then
	// loses its connections to A.
	callX, lastX := slowCall(t, a, sid, 3, "x")
	callY, lastY := slowCall(t, a, sid, 4, "y")

	// 2. A's connections drop (and A notices: the calls run on, since
	// their client holds event ids to resume from). The resource changes
	// meanwhile: the update goes to the session's GET stream, which has
	// no connection: Redis keeps it.
	getA.drop()
	callX.drop()
	callY.drop()
	a.srv.ResourceUpdated(docURI)
	missed := a.events.await(t, "the update on the GET stream", func(e storedEvent) bool {
		return e.stream == "g" && strings.Contains(e.data, "notifications/resources/updated")
	})
	if n, err := f.rdb.XLen(f.redis(t), "test:ev:"+sid+":g").Result(); err != nil || n < 2 {
		t.Fatalf("the GET stream in Redis: XLEN %d %v", n, err)
	}

	// 3. The client reconnects through the balancer, which picks B: a GET
	// with its session and the last event id it saw. B restores the
	// session from Redis and replays the update.
	getB := send(t, b, "GET with Last-Event-ID", http.MethodGet, getHeaders(sid, getPrime), "")
	getB.status(http.StatusOK, "text/event-stream")
	if ev := getB.next(); ev.id != missed.id || decode(t, "the replay", ev.data).Params.URI != docURI {
		t.Fatalf("B's replay of the GET stream: %+v, want the update %s", ev, missed.id)
	}
	if h := f.hget(t, "test:sess:"+sid, "holder"); h != "B" {
		t.Errorf("the record's holder after B restored it: %q", h)
	}
	if st := b.h.Stats(); st.SessionsCreated != 1 || st.Sessions != 1 || st.EventsReplayed != 1 {
		t.Errorf("B's stats after the restore: %+v", st)
	}
	// A call on B is served in the session, at its negotiated version
	// (the request names none: without the session it would be
	// 2025-03-26).
	x := send(t, b, "version", http.MethodPost, []string{"Content-Type: application/json", "Accept: application/json, text/event-stream", "Mcp-Session-Id: " + sid},
		`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"version","arguments":{}}}`)
	if m := x.answer(); m.text() != "2025-11-25" {
		t.Fatalf("a call on B: %+v", m)
	}
	// The subscription made on A lives on B: B's update reaches the GET
	// stream on B.
	b.srv.ResourceUpdated(docURI)
	if ev := getB.next(); ev.id == "" || decode(t, "B's update", ev.data).Method != "notifications/resources/updated" {
		t.Fatalf("B's update on the GET stream: %+v", ev)
	}

	// 4. Call x ends on A (its handler runs on in A's copy of the
	// session); its response waits in Redis, and B replays it to a GET
	// with the id of the last event the client had of the call's stream,
	// after which that GET ends.
	f.open("x")
	a.events.await(t, "the response of call x", func(e storedEvent) bool { return isResponseTo(e, 3) })
	resX := send(t, b, "GET resuming call x", http.MethodGet, getHeaders(sid, lastX), "")
	resX.status(http.StatusOK, "text/event-stream")
	ev := resX.next()
	if m := decode(t, "call x resumed", ev.data); string(m.ID) != "3" || m.text() != "finished x on A" || ev.id == "" {
		t.Fatalf("call x resumed on B: %+v", ev)
	}
	resX.ends()
	// Call y still runs on A: B follows its stream until the response.
	resY := send(t, b, "GET resuming call y", http.MethodGet, getHeaders(sid, lastY), "")
	resY.status(http.StatusOK, "text/event-stream")
	eventually(t, wireWait, "B follows call y's stream", func() bool { return b.st.Stats().Following == 1 })
	f.open("y")
	ev = resY.next()
	if m := decode(t, "call y followed", ev.data); string(m.ID) != "4" || m.text() != "finished y on A" {
		t.Fatalf("call y followed on B: %+v", ev)
	}
	resY.ends()

	// 5. DELETE through B ends the session: its GET stream ends, B
	// answers 404 from then on, and Redis forgets the record and every
	// stream. (A still serves its own copy until it next touches the
	// record: TestASessionDeletedThroughOneInstanceIsNotFoundOnTheOthers.)
	del := send(t, b, "DELETE", http.MethodDelete, []string{"Mcp-Session-Id: " + sid, "MCP-Protocol-Version: 2025-11-25"}, "")
	del.status(http.StatusOK, "")
	getB.stops()
	gone := send(t, b, "a call after the DELETE", http.MethodPost, postHeaders(sid), `{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"version","arguments":{}}}`)
	gone.status(http.StatusNotFound, "application/json")
	if m := decode(t, "404", gone.all()); m.Error == nil || m.Error.Code != -32001 {
		t.Errorf("the 404's body: %+v", m)
	}
	if ks := f.keys(t, "test:*"+sid+"*"); len(ks) != 0 {
		t.Errorf("left in Redis after the DELETE: %v", ks)
	}
}

// While Redis is down, each instance goes on serving the sessions it
// holds, but not resumably: its calls are answered, and its GET stream
// carries what happens live, without event ids (none could be stored);
// a resumption is 503 with Retry-After (the Last-Event-ID may be good: it
// cannot be read), never 400 or 404; and a new session can be made, to be
// served by the instance that made it.
func TestWhileRedisIsDownAnInstanceServesTheSessionsItHoldsWithoutResumability(t *testing.T) {
	r := startRedis(t)
	f := newLegacyFleet(t, r)
	a, b := f.a, f.b
	sid := initSession(t, a)
	if m := call(t, a, sid, "resources/subscribe", `{"jsonrpc":"2.0","id":2,"method":"resources/subscribe","params":{"uri":"`+docURI+`"}}`); m.Error != nil {
		t.Fatalf("resources/subscribe: %+v", m.Error)
	}
	getA := send(t, a, "GET", http.MethodGet, getHeaders(sid, ""), "")
	getA.status(http.StatusOK, "text/event-stream")
	prime := priming(t, "the GET stream", getA.next())

	r.Stop()
	if m := call(t, a, sid, "version", `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"version","arguments":{}}}`); m.text() != "2025-11-25" {
		t.Fatalf("a call on the holder while Redis is down: %+v", m)
	}
	a.srv.ResourceUpdated(docURI)
	if ev := getA.next(); ev.id != "" || decode(t, "the update", ev.data).Method != "notifications/resources/updated" {
		t.Fatalf("the update while Redis is down: %+v (live, with no id to resume from)", ev)
	}
	res := send(t, a, "GET with Last-Event-ID", http.MethodGet, getHeaders(sid, prime), "")
	res.status(http.StatusServiceUnavailable, "application/json")
	if ra := res.resp.Header.Get("Retry-After"); ra != "1" {
		t.Errorf("a resumption while Redis is down: Retry-After %q", ra)
	}
	sid2 := initSession(t, b)
	if m := call(t, b, sid2, "version", `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"version","arguments":{}}}`); m.text() != "2025-11-25" {
		t.Fatalf("a call in a session made while Redis is down: %+v", m)
	}
	if st := a.h.Stats(); st.StoreErrors == 0 {
		t.Errorf("A counted no store error: %+v", st)
	}
}

// streamOf is the stream an event id of the Redis store names.
func streamOf(id string) string { return id[:strings.LastIndexByte(id, '_')] }

// "The server MAY terminate the session at any time, after which it MUST
// respond to requests containing that session ID with HTTP 404 Not Found."
// A fleet is one server to its clients: once the session is deleted
// through B, A must not serve it either, though A made it.
func TestASessionDeletedThroughOneInstanceIsNotFoundOnTheOthers(t *testing.T) {
	r := startRedis(t)
	f := newLegacyFleet(t, r)
	a, b := f.a, f.b
	sid := initSession(t, a)
	send(t, b, "DELETE", http.MethodDelete, []string{"Mcp-Session-Id: " + sid, "MCP-Protocol-Version: 2025-11-25"}, "").status(http.StatusOK, "")
	// The news travels by Pub/Sub, after the DELETE's answer; without it
	// A would learn at its next Touch, minutes later (IdleTimeout/4).
	eventually(t, 5*time.Second, "A drops its copy", func() bool { return a.h.Stats().Sessions == 0 })
	x := send(t, a, "a call after the DELETE", http.MethodPost, postHeaders(sid), `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"version","arguments":{}}}`)
	x.status(http.StatusNotFound, "application/json")
}

// An instance whose session another took over drops its copy at once,
// not at its next Touch: a subscribe or a log level set on the stale
// copy would overwrite the record of the instance that holds it.
func TestASessionTakenOverByAnotherInstanceIsDroppedAtOnce(t *testing.T) {
	r := startRedis(t)
	f := newLegacyFleet(t, r)
	a, b := f.a, f.b
	sid := initSession(t, a)
	if m := call(t, b, sid, "a call", `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"version","arguments":{}}}`); m.text() != "2025-11-25" {
		t.Fatalf("a call on B: %+v", m)
	}
	eventually(t, 5*time.Second, "A drops its copy", func() bool { return a.h.Stats().Sessions == 0 })
	if n := b.h.Stats().Sessions; n != 1 {
		t.Fatalf("B holds %d sessions, not the one it took over", n)
	}
	// A takes it back when the client comes to it again, and B drops its
	// copy in turn: one holder at a time.
	if m := call(t, a, sid, "a call back on A", `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"version","arguments":{}}}`); m.text() != "2025-11-25" {
		t.Fatalf("a call back on A: %+v", m)
	}
	eventually(t, 5*time.Second, "B drops its copy", func() bool { return b.h.Stats().Sessions == 0 })
	if n := a.h.Stats().Sessions; n != 1 {
		t.Fatalf("A holds %d sessions after taking it back", n)
	}
}

// While Redis is down, an instance that does not hold a session cannot
// tell whether it exists, and must not answer that it does not: a 404
// tells the client that its session is gone, and it "MUST start a new
// session", losing its subscriptions and its streams to an outage that
// may last a second. 503 with Retry-After is the truth.
func TestASessionHeldElsewhereIsUnavailableNotNotFoundWhileRedisIsDown(t *testing.T) {
	r := startRedis(t)
	f := newLegacyFleet(t, r)
	sid := initSession(t, f.a)
	r.Stop()
	x := send(t, f.b, "a call", http.MethodPost, postHeaders(sid), `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"version","arguments":{}}}`)
	x.status(http.StatusServiceUnavailable, "application/json")
	if ra := x.resp.Header.Get("Retry-After"); ra == "" {
		t.Error("no Retry-After")
	}
}

// A POST whose event stream starts with its first notification (its
// client accepts JSON and an event stream, as 2025-11-25 clients do)
// begins on the wire with the priming event, then the notification. A
// client cut off right after the priming event resumes from its id, and
// must get the notification, then the response: the store's order must
// be the wire's.
func TestAResumptionFromAPrimingEventReplaysTheNotificationSentAfterIt(t *testing.T) {
	r := startRedis(t)
	f := newLegacyFleet(t, r)
	a, b := f.a, f.b
	sid := initSession(t, a)
	x := send(t, a, "slow", http.MethodPost, postHeaders(sid),
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"slow","arguments":{"gate":"x"},"_meta":{"progressToken":"x"}}}`)
	x.status(http.StatusOK, "text/event-stream")
	prime := priming(t, "slow", x.next())
	<-a.started
	x.drop()
	f.open("x")
	a.events.await(t, "the response", func(e storedEvent) bool { return isResponseTo(e, 2) })
	res := send(t, b, "GET from the priming event", http.MethodGet, getHeaders(sid, prime), "")
	res.status(http.StatusOK, "text/event-stream")
	if m := decode(t, "the first event replayed", res.next().data); m.Method != "notifications/progress" {
		a.events.mu.Lock()
		defer a.events.mu.Unlock()
		t.Fatalf("the progress sent after the priming event %s was not replayed; first came %+v; the store holds, in order: %+v", prime, m, a.events.stored)
	}
	if m := decode(t, "the response replayed", res.next().data); m.text() != "finished x on A" {
		t.Fatalf("the response: %+v", m)
	}
}

// A response written to a connection that died without the server
// noticing (a NAT or a proxy lost it: the write succeeds, the client never
// reads it) must still be replayed when the client resumes: a server
// "doesn't know when a stream is finished, because the client can always
// send a GET with a Last-Event-ID referring to the stream".
func TestAResponseWrittenToAConnectionThatDiedUnnoticedIsReplayed(t *testing.T) {
	r := startRedis(t)
	f := newLegacyFleet(t, r)
	a, b := f.a, f.b
	sid := initSession(t, a)
	x, last := slowCall(t, a, sid, 2, "x")
	f.open("x")
	stream := streamOf(last)
	a.events.await(t, "x's response", func(e storedEvent) bool {
		return e.stream == stream && strings.Contains(e.data, `"result"`)
	})
	x.conn.Close() // the response is in the socket (or about to be), never read
	res := send(t, b, "GET resuming the call", http.MethodGet, getHeaders(sid, last), "")
	res.status(http.StatusOK, "text/event-stream")
	if m := decode(t, "the response replayed", res.next().data); m.text() != "finished x on A" {
		t.Fatalf("the response: %+v", m)
	}
}

// A stream the server ends (a session's DELETE ends its GET stream; a
// resumption that took a running call's stream over ends with the call's
// response) ends its HTTP response: the last chunk is written, and the
// client reads the end of the stream, not a cut connection, which an
// EventSource takes for a network error and reconnects after.
func TestAStreamTheServerEndsEndsItsResponseCleanly(t *testing.T) {
	r := startRedis(t)
	f := newLegacyFleet(t, r)
	a := f.a
	cut := 0
	for range 50 {
		sid := initSession(t, a)
		get := send(t, a, "GET", http.MethodGet, getHeaders(sid, ""), "")
		get.status(http.StatusOK, "text/event-stream")
		priming(t, "GET", get.next())
		send(t, a, "DELETE", http.MethodDelete, []string{"Mcp-Session-Id: " + sid}, "").status(http.StatusOK, "")
		if _, err := get.read(); err == io.ErrUnexpectedEOF {
			cut++
		} else if err != io.EOF {
			t.Fatalf("the GET stream after the DELETE: %v", err)
		}
	}
	sid := initSession(t, a)
	for i := range 50 {
		gate := fmt.Sprint("r", i)
		x, last := slowCall(t, a, sid, 10+i, gate)
		x.drop()
		res := send(t, a, "GET resuming the call", http.MethodGet, getHeaders(sid, last), "")
		res.status(http.StatusOK, "text/event-stream")
		f.open(gate)
		ev := res.next()
		if ev.data == "" { // the new connection's priming event
			ev = res.next()
		}
		if m := decode(t, "the resumed call", ev.data); m.text() != "finished "+gate+" on A" {
			t.Fatalf("the resumed call's response: %+v", ev)
		}
		if _, err := res.read(); err == io.ErrUnexpectedEOF {
			cut++
		} else if err != io.EOF {
			t.Fatalf("the resumed stream after its response: %v", err)
		}
	}
	if cut > 0 {
		t.Errorf("%d of 100 streams the server ended were cut, not ended", cut)
	}
}
