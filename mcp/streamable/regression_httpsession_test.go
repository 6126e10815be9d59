package streamable_test

// Regression tests of legacy sessions (httpsession.go): each names the
// bug it pins.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/agentwire/agentwire/mcp"
	"github.com/agentwire/agentwire/mcp/internal/mcptest"
	"github.com/agentwire/agentwire/mcp/server"
	"github.com/agentwire/agentwire/mcp/streamable"
)

// sseOnly makes a POST take only an event stream: its stream starts, with
// its priming event, as soon as it is served.
var sseOnly = map[string]string{"Accept": "text/event-stream"}

func loggedHandler(t *testing.T, so *streamable.SessionOptions, o *streamable.Options) (*streamable.Handler, *sessionServer, *syncBuffer) {
	t.Helper()
	logs := &syncBuffer{}
	var opts streamable.Options
	if o != nil {
		opts = *o
	}
	opts.Logger = slog.New(slog.NewTextHandler(logs, nil))
	h, ss := sessionHandler(t, so, &opts)
	return h, ss, logs
}

func wasCancelled(ss *sessionServer) bool {
	select {
	case <-ss.cancelled:
		return true
	default:
		return false
	}
}

// Bug: a request whose client went after the first event of its stream
// (a 2025-11-25 client disconnecting after the priming event) was never
// cancelled: its handler's context is the session's, it kept its
// MaxInFlight place, and it kept its session busy, so that the session
// never expired; 256 of them and every POST got 503. Now a request whose
// stream no connection takes over within the resume deadline (3 × Retry,
// at least 10 s, at most IdleTimeout) is cancelled, as
// notifications/cancelled would, logged, and its session idles from then
// on.
func TestARequestWhoseClientWentIsCancelledAtItsResumeDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, ss, logs := loggedHandler(t, &streamable.SessionOptions{IdleTimeout: time.Minute}, nil)
		sid := openSession(t, h, "2025-11-25", nil)
		call := startStream(t, h, legacyRequest(t.Context(), http.MethodPost, callBody(2, "wait", ""), sid, "", sseOnly))
		synctest.Wait()
		if evs := parseEvents(call.rec.Body()); len(evs) != 1 || evs[0].id == "" {
			t.Fatalf("no priming event: %q", call.rec.Body())
		}
		call.stop()
		time.Sleep(9 * time.Second)
		synctest.Wait()
		if wasCancelled(ss) {
			t.Fatal("cancelled before the resume deadline: a client reconnecting after Retry would find it gone")
		}
		if st := h.Stats(); st.InFlight != 1 {
			t.Errorf("in flight before the deadline: %d", st.InFlight)
		}
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if !wasCancelled(ss) {
			t.Fatal("the request of a client that went for good runs on past its resume deadline")
		}
		<-call.done
		if st := h.Stats(); st.InFlight != 0 || st.ResumeTimeouts != 1 {
			t.Errorf("after the deadline: in flight %d, ResumeTimeouts %d; want 0 and 1", st.InFlight, st.ResumeTimeouts)
		}
		if !strings.Contains(logs.String(), "resume deadline") {
			t.Errorf("the cancellation is not logged: %s", logs.String())
		}
		// Nothing keeps the session busy now: it expires after
		// IdleTimeout.
		time.Sleep(61 * time.Second)
		synctest.Wait()
		if st := h.Stats(); st.Sessions != 0 || st.SessionsExpired != 1 {
			t.Errorf("the session after IdleTimeout: %+v", st)
		}
	})
}

// Bug: the same, for a handler that does not heed its context: it held
// its session busy for as long as it ran. Past the resume deadline the
// request no longer keeps its session busy (its MaxInFlight place is the
// handler's until it returns).
func TestARequestPastItsResumeDeadlineNoLongerKeepsItsSessionBusy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, ss := sessionHandler(t, &streamable.SessionOptions{IdleTimeout: time.Minute}, nil)
		deaf := make(chan struct{})
		ss.AddTool(mcp.Tool{Name: "deaf"}, func(context.Context, *server.ToolRequest) (*mcp.ToolResult, error) {
			<-deaf // whatever its context says
			return mcp.TextResult("late"), nil
		})
		t.Cleanup(func() { close(deaf) }) // before the handler's Shutdown
		sid := openSession(t, h, "2025-11-25", nil)
		call := startStream(t, h, legacyRequest(t.Context(), http.MethodPost, callBody(2, "deaf", ""), sid, "", sseOnly))
		synctest.Wait()
		call.stop()
		time.Sleep(10*time.Second + time.Minute + 2*time.Second)
		synctest.Wait()
		if st := h.Stats(); st.Sessions != 0 || st.SessionsExpired != 1 {
			t.Errorf("a session whose only request went past its resume deadline did not expire: %+v", st)
		}
	})
}

// A connection that takes the stream over before the deadline keeps the
// request running, and gets its response; when that connection goes in
// turn, the deadline starts again.
func TestAResumptionInTimeKeepsTheRequestAndItsDropStartsTheDeadlineAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, ss := sessionHandler(t, &streamable.SessionOptions{IdleTimeout: time.Minute}, nil)
		sid := openSession(t, h, "2025-11-25", nil)
		call := startStream(t, h, legacyRequest(t.Context(), http.MethodPost, callBody(2, "wait", ""), sid, "", sseOnly))
		synctest.Wait()
		prime := parseEvents(call.rec.Body())[0].id
		call.stop()
		time.Sleep(5 * time.Second)
		resumed := getStream(t, h, sid, "", map[string]string{"Last-Event-ID": prime})
		time.Sleep(30 * time.Second)
		synctest.Wait()
		if wasCancelled(ss) || resumed.ended() {
			t.Fatal("a request whose stream was taken over in time was cancelled")
		}
		resumed.stop()
		<-resumed.done
		time.Sleep(9 * time.Second)
		synctest.Wait()
		if wasCancelled(ss) {
			t.Fatal("cancelled before the deadline that the resumption's drop started")
		}
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if !wasCancelled(ss) {
			t.Fatal("the request runs on past the deadline that the resumption's drop started")
		}
	})
}

// Bug: a POST stream that became an event stream for its first message
// stored that message before its priming event: on the wire the priming
// event (a later id) came first, and a client resuming from it, as the
// 2025-11-25 transport tells it to, was never sent the message.
func TestAStreamsPrimingEventPrecedesItsFirstMessage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, ss := sessionHandler(t, nil, nil)
		ss.AddTool(mcp.Tool{Name: "step"}, func(ctx context.Context, r *server.ToolRequest) (*mcp.ToolResult, error) {
			r.Progress(1, 2, "first")
			<-ss.release
			return mcp.TextResult("done"), nil
		})
		sid := openSession(t, h, "2025-11-25", nil)
		body := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"step","arguments":{},"_meta":{"progressToken":7}}}`
		call := startStream(t, h, legacyRequest(t.Context(), http.MethodPost, body, sid, "", nil))
		synctest.Wait()
		evs := parseEvents(call.rec.Body())
		if len(evs) != 2 || evs[0].data != "" || evs[0].id == "" || !strings.Contains(evs[1].data, "notifications/progress") {
			t.Fatalf("the POST's stream: %q", call.rec.Body())
		}
		call.stop()
		synctest.Wait()
		// The connection broke right after the priming event, as far as
		// the client knows: it resumes from there.
		resumed := getStream(t, h, sid, "", map[string]string{"Last-Event-ID": evs[0].id})
		close(ss.release)
		<-resumed.done
		msgs := messages(parseEvents(resumed.rec.Body()))
		if len(msgs) != 2 || !strings.Contains(msgs[0].data, "notifications/progress") || !strings.Contains(msgs[1].data, `"text":"done"`) {
			t.Errorf("resumed from the priming event: %q", resumed.rec.Body())
		}
	})
}

// Bug: a stream's events were forgotten (EndStream) as soon as its
// response was written to the POST: a connection that broke after the
// write, before the client read it, was resumed with 400 and the response
// was lost. The stream is now left to the store's retention.
func TestAStreamAnsweredOnItsPOSTCanStillBeResumed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, ss := sessionHandler(t, nil, nil)
		sid := openSession(t, h, "2025-11-25", nil)
		call := startStream(t, h, legacyRequest(t.Context(), http.MethodPost, callBody(2, "wait", ""), sid, "", sseOnly))
		synctest.Wait()
		prime := parseEvents(call.rec.Body())[0].id
		close(ss.release)
		<-call.done
		if msgs := messages(parseEvents(call.rec.Body())); len(msgs) != 1 || !strings.Contains(msgs[0].data, "released") {
			t.Fatalf("the POST's response: %q", call.rec.Body())
		}
		rec := serve(h, legacyRequest(t.Context(), http.MethodGet, "", sid, "", map[string]string{"Last-Event-ID": prime}))
		if msgs := messages(parseEvents(rec.Body())); rec.Status() != 200 || len(msgs) != 1 || !strings.Contains(msgs[0].data, `"text":"released"`) {
			t.Errorf("resuming a stream answered on its POST: %d %q", rec.Status(), rec.Body())
		}
	})
}

// Bug: a GET following a stream whose request runs on another instance
// (EventFollower) waited on its own request only: Shutdown did not end
// it, and so waited for its whole deadline. Now Shutdown ends it, with a
// retry field (with a Store the client resumes elsewhere).
func TestShutdownEndsAGETFollowingAStreamOfAnotherInstance(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store, events := newMemSessions(), newFollowEvents()
		opts := func(name string) *streamable.SessionOptions {
			return &streamable.SessionOptions{Store: store, Events: events, Instance: name, Retry: 500 * time.Millisecond}
		}
		a, _ := sessionHandler(t, opts("a"), nil)
		b, _ := sessionHandler(t, opts("b"), nil)
		sid := openSession(t, a, "2025-11-25", nil)
		call := startStream(t, a, legacyRequest(t.Context(), http.MethodPost, callBody(2, "wait", ""), sid, "", sseOnly))
		synctest.Wait()
		prime := parseEvents(call.rec.Body())[0].id
		call.stop()
		synctest.Wait()
		following := getStream(t, b, sid, "", map[string]string{"Last-Event-ID": prime})
		if following.ended() {
			t.Fatalf("the resumption on B does not follow: %q", following.rec.Body())
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		start := time.Now()
		if err := b.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v after %v", err, time.Since(start))
		}
		// Shutdown ends the stream; its handler's goroutine may still be
		// returning. Wait lets it finish without letting time pass, so a
		// GET still waiting for its deadline still fails here.
		synctest.Wait()
		if !following.ended() {
			t.Fatal("the following GET outlives Shutdown")
		}
		evs := parseEvents(following.rec.Body())
		if len(evs) == 0 || evs[len(evs)-1].retry != "500" {
			t.Errorf("the following GET's last words: %q", following.rec.Body())
		}
	})
}

// Bug: a keep-alive on a request still running after its session ended
// (DELETE) started its stream with a priming event, appended to the event
// store after the session's events were forgotten: an ended session's
// events came back.
func TestAKeepAliveAfterTheSessionEndedStoresNoEvent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		events := streamable.NewMemoryEvents(nil)
		h, _ := sessionHandler(t, &streamable.SessionOptions{Events: events}, &streamable.Options{KeepAlive: 4 * time.Second})
		sid := openSession(t, h, "2025-11-25", nil)
		call := startStream(t, h, legacyRequest(t.Context(), http.MethodPost, callBody(2, "wait", ""), sid, "", nil))
		synctest.Wait()
		if rec := serve(h, legacyRequest(t.Context(), http.MethodDelete, "", sid, "", nil)); rec.Status() != 200 {
			t.Fatalf("DELETE: %d", rec.Status())
		}
		time.Sleep(4500 * time.Millisecond) // a keep-alive, within the handler's grace
		synctest.Wait()
		if !strings.Contains(call.rec.Body(), ":\n\n") {
			t.Fatalf("no keep-alive: %q", call.rec.Body())
		}
		if st := events.Stats(); st.Events != 0 || st.Sessions != 0 {
			t.Errorf("the ended session's events: %+v; its stream: %q", st, call.rec.Body())
		}
		if strings.Contains(call.rec.Body(), "id: ") {
			t.Errorf("an ended session's stream was primed: %q", call.rec.Body())
		}
	})
}

// brokenWriter is a client whose connection is broken: every write of a
// body fails.
type brokenWriter struct{ *httpRecorder }

func (brokenWriter) Write([]byte) (int, error) { return 0, errors.New("broken pipe") }

// Bug: a server request (elicitation) whose live write failed on a stream
// without event ids (NoEvents) was neither stored nor failed: the
// handler's call waited for an answer that could never come. It fails at
// once now, as it does when there is no stream to ask on.
func TestAServerRequestWhoseWriteFailsWithoutAnEventIDFailsAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, _ := sessionHandler(t, &streamable.SessionOptions{Events: streamable.NoEvents}, nil)
		sid := openSession(t, h, "2025-11-25", nil)
		req := legacyRequest(t.Context(), http.MethodPost, callBody(2, "ask", ""), sid, "", nil)
		done := make(chan struct{})
		go func() {
			defer close(done)
			h.ServeHTTP(brokenWriter{newHTTPRecorder()}, req)
		}()
		synctest.Wait()
		select {
		case <-done:
		default:
			t.Fatal("the call of a server request that could not be sent still waits")
		}
	})
}

// flakySessions is a SessionStore whose Load fails while fail is set, as
// a store does when its network times out, and can be made to wait.
type flakySessions struct {
	*memSessions
	fail  atomic.Bool
	loads atomic.Int32
	block chan struct{} // Load waits for it to close when not nil
}

func (f *flakySessions) Load(ctx context.Context, id string) (*streamable.SessionRecord, error) {
	f.loads.Add(1)
	if f.block != nil {
		<-f.block
	}
	if f.fail.Load() {
		return nil, errors.New("i/o timeout")
	}
	return f.memSessions.Load(ctx, id)
}

// Bug: with a SessionStore, a request naming an unknown id made a
// session for it (a connection, a place in the table) before the Store
// was asked: junk ids evicted idle live sessions from a full table. Now
// nothing enters the table before a record is found.
func TestAnUnknownSessionIDEvictsNoLiveSessionWithAStore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := newMemSessions()
		h, _ := sessionHandler(t, &streamable.SessionOptions{Store: store, Instance: "a", MaxSessions: 2}, nil)
		a, b := openSession(t, h, "2025-11-25", nil), openSession(t, h, "2025-11-25", nil)
		for _, sid := range []string{a, b} {
			if rec := serve(h, legacyRequest(t.Context(), http.MethodPost, callBody(2, "echo", `{"text":"x"}`), sid, "", nil)); rec.Status() != 200 {
				t.Fatalf("tools/call: %d %s", rec.Status(), rec.Body())
			}
		}
		time.Sleep(2 * time.Second) // idle long enough to be evicted
		for i := range 3 {
			rec := serve(h, legacyRequest(t.Context(), http.MethodPost, callBody(3, "echo", `{"text":"x"}`), fmt.Sprintf("junk-%d", i), "", nil))
			if rec.Status() != 404 {
				t.Errorf("a junk id: %d %s", rec.Status(), rec.Body())
			}
		}
		if st := h.Stats(); st.SessionsEvicted != 0 || st.Sessions != 2 {
			t.Errorf("junk ids cost live sessions: %+v", st)
		}
		for _, sid := range []string{a, b} {
			if rec := serve(h, legacyRequest(t.Context(), http.MethodPost, callBody(4, "echo", `{"text":"x"}`), sid, "", nil)); rec.Status() != 200 {
				t.Errorf("a live session after the junk: %d %s", rec.Status(), rec.Body())
			}
		}
	})
}

// Bug: a Store that failed to load a session (a Redis timeout) was
// answered 404, which tells the client its session is gone: it dropped a
// session that lived on. It is 503 with Retry-After: 1 now, counted in
// StoreErrors and logged, and the session is served once the Store
// answers.
func TestAFailingSessionStoreIs503NotSessionNotFound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := &flakySessions{memSessions: newMemSessions()}
		a, _ := sessionHandler(t, &streamable.SessionOptions{Store: store, Instance: "a"}, nil)
		b, _, logs := loggedHandler(t, &streamable.SessionOptions{Store: store, Instance: "b"}, nil)
		sid := openSession(t, a, "2025-11-25", nil)
		store.fail.Store(true)
		for _, m := range []string{http.MethodPost, http.MethodGet} {
			rec := serve(b, legacyRequest(t.Context(), m, callBody(2, "echo", `{"text":"x"}`), sid, "", nil))
			if code, _ := errCode(t, rec.Body()); rec.Status() != 503 || rec.hdr.Get("Retry-After") != "1" || code == -32001 {
				t.Errorf("%s while the Store fails: %d, Retry-After %q: %s", m, rec.Status(), rec.hdr.Get("Retry-After"), rec.Body())
			}
		}
		if st := b.Stats(); st.StoreErrors != 2 || st.UnknownSessions != 0 || st.Sessions != 0 {
			t.Errorf("stats: %+v", st)
		}
		if !strings.Contains(logs.String(), "i/o timeout") {
			t.Errorf("the Store's failure is not logged: %s", logs.String())
		}
		store.fail.Store(false)
		if rec := serve(b, legacyRequest(t.Context(), http.MethodPost, callBody(3, "echo", `{"text":"x"}`), sid, "", nil)); rec.Status() != 200 {
			t.Errorf("once the Store answers: %d %s", rec.Status(), rec.Body())
		}
	})
}

// Concurrent requests for a session this instance does not hold load it
// from the Store once, and are all served.
func TestConcurrentRequestsForOneSessionLoadItOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := &flakySessions{memSessions: newMemSessions()}
		a, _ := sessionHandler(t, &streamable.SessionOptions{Store: store, Instance: "a"}, nil)
		b, _ := sessionHandler(t, &streamable.SessionOptions{Store: store, Instance: "b"}, nil)
		sid := openSession(t, a, "2025-11-25", nil)
		store.block = make(chan struct{})
		var wg sync.WaitGroup
		recs := make([]*httpRecorder, 5)
		for i := range recs {
			wg.Go(func() {
				recs[i] = serve(b, legacyRequest(t.Context(), http.MethodPost, callBody(10+i, "echo", `{"text":"x"}`), sid, "", nil))
			})
		}
		synctest.Wait()
		close(store.block)
		wg.Wait()
		for i, rec := range recs {
			if rec.Status() != 200 {
				t.Errorf("request %d: %d %s", i, rec.Status(), rec.Body())
			}
		}
		if n := store.loads.Load(); n != 1 {
			t.Errorf("%d loads for one session", n)
		}
	})
}

// restoreOf returns the restore messages of sid's record, decoded.
func restoreOf(t *testing.T, store *memSessions, sid string) []map[string]any {
	t.Helper()
	rec, err := store.Load(context.Background(), sid)
	if err != nil {
		t.Fatalf("the record: %v", err)
	}
	var out []map[string]any
	for _, raw := range rec.Restore {
		var m map[string]any
		if err := json.Unmarshal(raw, &m); err != nil {
			t.Fatalf("a restore message: %v: %s", err, raw)
		}
		out = append(out, m)
	}
	return out
}

func recordBytes(t *testing.T, store *memSessions, sid string) int {
	t.Helper()
	rec, _ := store.Load(context.Background(), sid)
	n := 0
	for _, raw := range rec.Restore {
		n += len(raw)
	}
	return n
}

// Bug: a session's record kept each resources/subscribe before its
// handler ran, as the client sent it: a refused one was kept too, with
// whatever the client padded its body with (up to 4 MiB each), and the
// whole record was saved again on every one. Now a request is kept once
// it is answered successfully, re-encoded with only what restoring it
// needs.
func TestASessionRecordKeepsOnlyAnsweredRequestsInMinimalForm(t *testing.T) {
	store := newMemSessions()
	srv := mcptest.NewServer(&server.Options{MaxResourceSubscriptions: 2})
	h := streamable.NewHandler(srv, &streamable.Options{Sessions: &streamable.SessionOptions{Store: store, Instance: "a"}})
	t.Cleanup(func() { h.Shutdown(context.Background()) })
	pad := strings.Repeat("x", 100<<10)
	init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"},"pad":"` + pad + `"}}`
	rec := serve(h, legacyRequest(t.Context(), http.MethodPost, init, "", "", nil))
	sid := rec.hdr.Get(mcp.HeaderSessionID)
	if rec.Status() != 200 || sid == "" {
		t.Fatalf("initialize: %d %s", rec.Status(), rec.Body())
	}
	if rec := serve(h, legacyRequest(t.Context(), http.MethodPost, initializedBody, sid, "", nil)); rec.Status() != 202 {
		t.Fatalf("initialized: %d", rec.Status())
	}
	for i := range 4 { // two over the server's limit: refused
		body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"resources/subscribe","params":{"uri":"file:///%d","pad":"%s"}}`, 10+i, i, pad)
		serve(h, legacyRequest(t.Context(), http.MethodPost, body, sid, "", nil))
	}
	level := `{"jsonrpc":"2.0","id":20,"method":"logging/setLevel","params":{"level":"debug","pad":"` + pad + `"}}`
	serve(h, legacyRequest(t.Context(), http.MethodPost, level, sid, "", nil))
	unsub := `{"jsonrpc":"2.0","id":21,"method":"resources/unsubscribe","params":{"uri":"file:///0"}}`
	serve(h, legacyRequest(t.Context(), http.MethodPost, unsub, sid, "", nil))

	msgs := restoreOf(t, store, sid)
	var methods []string
	for _, m := range msgs {
		methods = append(methods, fmt.Sprint(m["method"]))
	}
	want := []string{"initialize", "notifications/initialized", "logging/setLevel", "resources/subscribe"}
	if fmt.Sprint(methods) != fmt.Sprint(want) {
		t.Fatalf("the record's messages: %v, want %v", methods, want)
	}
	if p := msgs[3]["params"].(map[string]any); len(p) != 1 || p["uri"] != "file:///1" {
		t.Errorf("the subscription kept: %v", p)
	}
	if p := msgs[2]["params"].(map[string]any); len(p) != 1 || p["level"] != "debug" {
		t.Errorf("the level kept: %v", p)
	}
	if p := msgs[0]["params"].(map[string]any); len(p) != 3 || p["protocolVersion"] != "2025-11-25" || p["clientInfo"] == nil || p["capabilities"] == nil {
		t.Errorf("the initialize kept: %v", p)
	}
	if n := recordBytes(t, store, sid); n > 1024 {
		t.Errorf("the record holds %d bytes", n)
	}
}

// The record keeps at most 1024 subscriptions (mcp/server's default
// limit), whatever the backend allows: it is saved whole on every change.
// One left out is logged.
func TestASessionRecordKeepsAtMost1024Subscriptions(t *testing.T) {
	store := newMemSessions()
	logs := &syncBuffer{}
	srv := mcptest.NewServer(&server.Options{MaxResourceSubscriptions: 2000})
	h := streamable.NewHandler(srv, &streamable.Options{Logger: slog.New(slog.NewTextHandler(logs, nil)),
		Sessions: &streamable.SessionOptions{Store: store, Instance: "a"}})
	t.Cleanup(func() { h.Shutdown(context.Background()) })
	sid := openSession(t, h, "2025-11-25", nil)
	for i := range 1030 {
		body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"resources/subscribe","params":{"uri":"file:///%d"}}`, 10+i, i)
		if rec := serve(h, legacyRequest(t.Context(), http.MethodPost, body, sid, "", nil)); strings.Contains(rec.Body(), "error") {
			t.Fatalf("subscribe %d: %s", i, rec.Body())
		}
	}
	subs := 0
	for _, m := range restoreOf(t, store, sid) {
		if m["method"] == "resources/subscribe" {
			subs++
		}
	}
	if subs != 1024 {
		t.Errorf("the record keeps %d subscriptions", subs)
	}
	if n := h.Stats().RecordOverflows; n != 6 {
		t.Errorf("RecordOverflows %d, want the 6 subscriptions left out", n)
	}
	if !strings.Contains(logs.String(), "left out of its session's record") {
		t.Errorf("the subscriptions left out are not logged: %s", logs.String())
	}
}
