package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"weak"

	"github.com/agentwire/agentwire/internal/wiretest"
	"github.com/agentwire/agentwire/jsonrpc"
	"github.com/agentwire/agentwire/mcp"
	"github.com/agentwire/agentwire/mcp/internal/mcptest"
	"github.com/agentwire/agentwire/mcp/server"
	"github.com/agentwire/agentwire/rpc"
)

// A legacy Streamable HTTP session is one long-lived connection of
// SessionHandler's, fed by the session's POSTs, each message with the
// route's note (mcp.Routed), as the transport makes it; its one writer
// sends each message on the stream the message belongs to, named by
// Outbound.Related (the request's own stream, or with none the session's
// GET stream). These tests drive such connections with raw wire lines
// and check what is written and where it belongs.

// sent is one message a session wrote, with the request it belongs to.
type sent struct {
	kind    jsonrpc.Kind
	method  string
	related string // Outbound.Related: "" for the GET stream
	line    string
}

// sessionWire is a session's connection and everything it wrote.
type sessionWire struct {
	t    *testing.T
	conn *rpc.Conn

	mu   sync.Mutex
	out  []sent
	gate chan struct{} // when set, every write waits for it (a client that does not read)
}

func (w *sessionWire) WriteMessage(m *rpc.Outbound) error {
	w.mu.Lock()
	gate := w.gate
	w.mu.Unlock()
	if gate != nil {
		<-gate
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.out = append(w.out, sent{kind: m.Kind, method: m.Method, related: string(m.Related), line: string(m.AppendTo(nil))})
	return nil
}

// openSession makes a session's connection to s, as the transport does.
func openSession(t *testing.T, s *server.Server) *sessionWire {
	w := &sessionWire{t: t}
	w.conn = rpc.NewMessages(nil, w, s.SessionHandler(), s.ConnOptions(&rpc.Options{Logger: wiretest.Quiet}))
	return w
}

// post pushes one message with the note the route gives a legacy message
// served at version ("": the header was absent and the transport left the
// version to the session).
func (w *sessionWire) post(line, version string) {
	w.t.Helper()
	raw := []byte(line)
	msg, err := jsonrpc.Decode(raw, nil)
	if err != nil {
		w.t.Fatalf("bad test line %s: %v", line, err)
	}
	n := &mcp.Routed{Era: mcp.Legacy, Version: version}
	mcp.ParseRequestParams(msg.Params, &n.Params)
	if err := w.conn.ReceiveDecoded(raw, &msg, n); err != nil {
		w.t.Fatalf("push: %v", err)
	}
}

// initialize runs the handshake at version, declaring caps.
func (w *sessionWire) initialize(version, caps string) {
	w.t.Helper()
	w.post(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"`+version+`","capabilities":`+caps+`,"clientInfo":{"name":"c","version":"1"}}}`, version)
	w.post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`, version)
	if got := w.take(); len(got) != 1 || !strings.Contains(got[0].line, `"protocolVersion":"`+version+`"`) {
		w.t.Fatalf("initialize answered %+v", got)
	}
}

// take returns what was written since the last take, once every
// goroutine of the bubble is blocked.
func (w *sessionWire) take() []sent {
	synctest.Wait()
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.out
	w.out = nil
	return out
}

func (w *sessionWire) close() { w.conn.Close() }

// notes returns the notifications among msgs.
func notes(msgs []sent) []sent {
	var out []sent
	for _, m := range msgs {
		if m.kind == jsonrpc.KindNotification {
			out = append(out, m)
		}
	}
	return out
}

func inBubble(t *testing.T, f func(t *testing.T, s *server.Server)) {
	synctest.Test(t, func(t *testing.T) {
		s := mcptest.NewServer(&server.Options{Logger: wiretest.Quiet})
		defer func() { // also after a failed check: no task is left running
			if err := s.Shutdown(context.Background()); err != nil {
				t.Errorf("Shutdown: %v", err)
			}
		}()
		f(t, s)
	})
}

// An initialized session hears of tool, prompt and resource list changes
// outside any request (on its GET stream, Related empty), once per
// change, as the listChanged capabilities promise; it is not asked to
// subscribe.
func TestASessionHearsOfListChangesOutsideAnyRequest(t *testing.T) {
	inBubble(t, func(t *testing.T, s *server.Server) {
		w := openSession(t, s)
		defer w.close()
		w.initialize("2025-11-25", `{}`)
		s.AddTool(mcp.Tool{Name: "late"}, nil)
		got := w.take()
		if len(got) != 1 || got[0].related != "" {
			t.Fatalf("after AddTool: %+v", got)
		}
		mcptest.JSONEq(t, got[0].line, `{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`)
		s.AddPrompt(mcp.Prompt{Name: "p"}, nil)
		s.AddResource(mcp.Resource{URI: "test://a", Name: "a"}, nil)
		got = w.take()
		var methods []string
		for _, m := range got {
			if m.related != "" {
				t.Errorf("a list change belongs to request %s: %s", m.related, m.line)
			}
			methods = append(methods, m.method)
		}
		if strings.Join(methods, " ") != "notifications/prompts/list_changed notifications/resources/list_changed" {
			t.Errorf("after AddPrompt and AddResource: %q", methods)
		}
		if st := s.LegacyStats(); st.Connections != 1 || st.Notified != 3 {
			t.Errorf("stats %+v", st)
		}
	})
}

// A session that was not initialized (a connection whose initialize
// failed, say) is told nothing.
func TestASessionThatDidNotInitializeHearsNoListChange(t *testing.T) {
	inBubble(t, func(t *testing.T, s *server.Server) {
		w := openSession(t, s)
		defer w.close()
		w.post(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, "2025-11-25")
		w.take()
		s.AddTool(mcp.Tool{Name: "late"}, nil)
		if got := w.take(); len(got) != 0 {
			t.Fatalf("an uninitialized session was told %+v", got)
		}
	})
}

func addResources(s *server.Server, uris ...string) {
	for _, u := range uris {
		s.AddResource(mcp.Resource{URI: u, Name: u}, func(context.Context, *server.ReadRequest) ([]mcp.ResourceContents, error) {
			return []mcp.ResourceContents{{URI: u, Text: "x"}}, nil
		})
	}
}

// Each session hears of updates to the resources it subscribed to, and of
// no other: outside any request, until it unsubscribes or ends. Its
// subscriptions go with it.
func TestASessionHearsOfUpdatesToItsSubscriptionsOnlyUntilItUnsubscribesOrEnds(t *testing.T) {
	inBubble(t, func(t *testing.T, s *server.Server) {
		addResources(s, "test://a", "test://b")
		a, b := openSession(t, s), openSession(t, s)
		defer a.close()
		a.initialize("2025-11-25", `{}`)
		b.initialize("2025-06-18", `{}`)
		a.post(`{"jsonrpc":"2.0","id":1,"method":"resources/subscribe","params":{"uri":"test://a"}}`, "2025-11-25")
		b.post(`{"jsonrpc":"2.0","id":1,"method":"resources/subscribe","params":{"uri":"test://b"}}`, "2025-06-18")
		for _, w := range []*sessionWire{a, b} {
			if got := w.take(); len(got) != 1 || !strings.Contains(got[0].line, `"result":{}`) || got[0].related != "1" {
				t.Fatalf("subscribe answered %+v", got)
			}
		}
		if st := s.LegacyStats(); st.Subscriptions != 2 {
			t.Fatalf("stats %+v", st)
		}

		s.ResourceUpdated("test://a")
		got := a.take()
		if len(got) != 1 || got[0].related != "" {
			t.Fatalf("a after test://a changed: %+v", got)
		}
		mcptest.JSONEq(t, got[0].line, `{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":"test://a"}}`)
		if got := b.take(); len(got) != 0 {
			t.Fatalf("b heard of test://a: %+v", got)
		}
		s.ResourceUpdated("test://b")
		if got := b.take(); len(got) != 1 || !strings.Contains(got[0].line, `"uri":"test://b"`) {
			t.Fatalf("b after test://b changed: %+v", got)
		}
		if got := a.take(); len(got) != 0 {
			t.Fatalf("a heard of test://b: %+v", got)
		}

		a.post(`{"jsonrpc":"2.0","id":2,"method":"resources/unsubscribe","params":{"uri":"test://a"}}`, "2025-11-25")
		a.take()
		s.ResourceUpdated("test://a")
		if got := a.take(); len(got) != 0 {
			t.Fatalf("a heard of test://a after unsubscribing: %+v", got)
		}

		b.close()
		synctest.Wait()
		if st := s.LegacyStats(); st.Subscriptions != 0 || st.Connections != 1 {
			t.Fatalf("after b ended: %+v", st)
		}
		s.ResourceUpdated("test://b")
		if got := b.take(); len(got) != 0 {
			t.Fatalf("an ended session was told %+v", got)
		}
	})
}

// A session's subscriptions are bounded (MaxResourceSubscriptions): one
// more is refused with -32000 and a reason, counted, and the session is
// served on; one it holds already is no new subscription.
func TestASessionsSubscriptionsAreBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := mcptest.NewServer(&server.Options{Logger: wiretest.Quiet, MaxResourceSubscriptions: 2})
		addResources(s, "test://a")
		w := openSession(t, s)
		defer w.close()
		w.initialize("2025-11-25", `{}`)
		for i, uri := range []string{"test://a", "test://b", "test://a", "test://c"} {
			w.post(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"resources/subscribe","params":{"uri":%q}}`, i+1, uri), "")
		}
		got := w.take()
		if len(got) != 4 {
			t.Fatalf("answers %+v", got)
		}
		for _, m := range got[:3] {
			if !strings.Contains(m.line, `"result":{}`) {
				t.Errorf("refused within the bound: %s", m.line)
			}
		}
		if !strings.Contains(got[3].line, `"code":-32000`) || !strings.Contains(got[3].line, `"reason":"too_many_subscriptions"`) {
			t.Errorf("the third URI: %s", got[3].line)
		}
		if st := s.LegacyStats(); st.SubscriptionsRefused != 1 || st.Subscriptions != 2 {
			t.Errorf("stats %+v", st)
		}
	})
}

// logging/setLevel holds for the session's life: a later request's log
// lines are filtered by it, and belong to that request.
func TestSetLevelFiltersASessionsLogLinesForItsLife(t *testing.T) {
	inBubble(t, func(t *testing.T, s *server.Server) {
		s.AddTool(mcp.Tool{Name: "logs"}, func(ctx context.Context, r *server.ToolRequest) (*mcp.ToolResult, error) {
			for _, level := range []string{"debug", "info", "error"} {
				if _, err := r.Log(level, "t", level+" line"); err != nil {
					return nil, err
				}
			}
			return mcp.TextResult("ok"), nil
		})
		w := openSession(t, s)
		defer w.close()
		w.initialize("2025-11-25", `{}`)
		levels := func(id string) string {
			t.Helper()
			var got []string
			for _, m := range notes(w.take()) {
				if m.method != "notifications/message" || m.related != id {
					t.Errorf("a log line of request %s: %+v", id, m)
				}
				var p struct {
					Params struct {
						Level string `json:"level"`
					} `json:"params"`
				}
				json.Unmarshal([]byte(m.line), &p)
				got = append(got, p.Params.Level)
			}
			return strings.Join(got, " ")
		}
		w.post(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"logs"}}`, "2025-11-25")
		if got := levels("1"); got != "info error" {
			t.Errorf("before setLevel (info): %q", got)
		}
		w.post(`{"jsonrpc":"2.0","id":2,"method":"logging/setLevel","params":{"level":"error"}}`, "2025-11-25")
		w.take()
		for _, id := range []string{"3", `"x"`} { // every later request, not only the next
			w.post(`{"jsonrpc":"2.0","id":`+id+`,"method":"tools/call","params":{"name":"logs"}}`, "2025-11-25")
			if got := levels(id); got != "error" {
				t.Errorf("request %s after setLevel error: %q", id, got)
			}
		}
		w.post(`{"jsonrpc":"2.0","id":4,"method":"logging/setLevel","params":{"level":"debug"}}`, "")
		w.take()
		w.post(`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"logs"}}`, "")
		if got := levels("5"); got != "debug info error" {
			t.Errorf("after setLevel debug: %q", got)
		}
	})
}

// Progress of a tools/call belongs to that call (Related is its id), so
// that it travels on the call's own stream, before the response.
func TestProgressInsideAToolCallBelongsToThatCall(t *testing.T) {
	inBubble(t, func(t *testing.T, s *server.Server) {
		w := openSession(t, s)
		defer w.close()
		w.initialize("2025-11-25", `{}`)
		w.post(`{"jsonrpc":"2.0","id":"c1","method":"tools/call","params":{"name":"slow","arguments":{"steps":2},"_meta":{"progressToken":"p"}}}`, "2025-11-25")
		got := w.take()
		if len(got) != 3 {
			t.Fatalf("wrote %+v", got)
		}
		for _, m := range got {
			if m.related != `"c1"` {
				t.Errorf("belongs to %q, not the call: %s", m.related, m.line)
			}
		}
		if got[0].method != mcp.MethodProgress || got[1].method != mcp.MethodProgress || got[2].kind != jsonrpc.KindResult {
			t.Errorf("order %+v", got)
		}
	})
}

// A request the server makes of the client while a handler runs
// (sampling) belongs to the handler's request; the client's answer,
// pushed into the session, reaches the handler. A session that did not
// declare the capability at initialize is refused it.
func TestAServerRequestMadeByAHandlerBelongsToItsRequest(t *testing.T) {
	inBubble(t, func(t *testing.T, s *server.Server) {
		s.AddTool(mcp.Tool{Name: "ask"}, func(ctx context.Context, r *server.ToolRequest) (*mcp.ToolResult, error) {
			if err := r.RequireClientCapability("sampling"); err != nil {
				return nil, err
			}
			res, err := r.Ask(ctx, map[string]mcp.InputRequest{"s": {Method: mcp.MethodSample, Params: map[string]any{"messages": []any{}, "maxTokens": 1}}})
			if err != nil {
				return nil, err
			}
			return mcp.TextResult(string(res["s"])), nil
		})
		w := openSession(t, s)
		defer w.close()
		w.initialize("2025-11-25", `{"sampling":{}}`)
		go w.post(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"ask"}}`, "2025-11-25")
		got := w.take()
		if len(got) != 1 || got[0].kind != jsonrpc.KindRequest || got[0].method != mcp.MethodSample || got[0].related != "7" {
			t.Fatalf("the server's request: %+v", got)
		}
		var req struct {
			ID json.RawMessage `json:"id"`
		}
		json.Unmarshal([]byte(got[0].line), &req)
		w.post(`{"jsonrpc":"2.0","id":`+string(req.ID)+`,"result":{"role":"assistant","content":{"type":"text","text":"hi"},"model":"m"}}`, "2025-11-25")
		got = w.take()
		if len(got) != 1 || got[0].kind != jsonrpc.KindResult || got[0].related != "7" || !strings.Contains(got[0].line, `\"model\":\"m\"`) {
			t.Fatalf("the call's answer: %+v", got)
		}

		other := openSession(t, s)
		defer other.close()
		other.initialize("2025-11-25", `{}`)
		other.post(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"ask"}}`, "2025-11-25")
		if got := other.take(); len(got) != 1 || !strings.Contains(got[0].line, `"code":-32602`) || !strings.Contains(got[0].line, "sampling") {
			t.Fatalf("a session without sampling: %+v", got)
		}
	})
}

// A session serves each request at the version its route's note names
// (the request's MCP-Protocol-Version header), as a stateless exchange
// does, and at the version initialize negotiated when the note names
// none or there is no note.
func TestASessionServesEachRequestAtItsRoutesVersionElseTheNegotiatedOne(t *testing.T) {
	inBubble(t, func(t *testing.T, s *server.Server) {
		s.AddTool(mcp.Tool{Name: "tasky", Execution: &mcp.ToolExecution{TaskSupport: mcp.TaskOptional}}, nil)
		w := openSession(t, s)
		defer w.close()
		w.initialize("2025-11-25", `{}`)
		hasExecution := func() bool {
			t.Helper()
			got := w.take()
			if len(got) != 1 || got[0].kind != jsonrpc.KindResult {
				t.Fatalf("tools/list: %+v", got)
			}
			return strings.Contains(got[0].line, `"execution"`)
		}
		w.post(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, "2025-03-26")
		if hasExecution() {
			t.Error("at the header's 2025-03-26 the list shows execution, a 2025-11-25 field")
		}
		w.post(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`, "")
		if !hasExecution() {
			t.Error("with no version in the note the session's 2025-11-25 is not used")
		}
		w.conn.Receive([]byte(`{"jsonrpc":"2.0","id":3,"method":"tools/list"}`))
		if !hasExecution() {
			t.Error("without a note the session's 2025-11-25 is not used")
		}
	})
}

// A 2025-11-25 task's status notifications go to the session that made
// it, outside any request (its call has been answered), and to no other.
func TestLegacyTaskStatusReachesTheSessionThatMadeIt(t *testing.T) {
	inBubble(t, func(t *testing.T, s *server.Server) {
		release := make(chan struct{})
		s.AddTool(mcp.Tool{Name: "job", Execution: &mcp.ToolExecution{TaskSupport: mcp.TaskOptional}}, func(ctx context.Context, r *server.ToolRequest) (*mcp.ToolResult, error) {
			<-release
			return mcp.TextResult("done"), nil
		})
		w, other := openSession(t, s), openSession(t, s)
		defer w.close()
		defer other.close()
		w.initialize("2025-11-25", `{}`)
		other.initialize("2025-11-25", `{}`)
		w.post(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"job","arguments":{},"task":{}}}`, "2025-11-25")
		got := w.take()
		if len(got) != 1 || !strings.Contains(got[0].line, `"taskId"`) {
			t.Fatalf("the call: %+v", got)
		}
		close(release)
		got = notes(w.take())
		if len(got) != 1 || got[0].method != mcp.MethodTasksStatus || got[0].related != "" || !strings.Contains(got[0].line, `"status":"completed"`) {
			t.Fatalf("status notifications: %+v", got)
		}
		if got := other.take(); len(got) != 0 {
			t.Fatalf("another session heard of the task: %+v", got)
		}
	})
}

// A 2025-11-25 task's input request, carried by the client's tasks/result,
// belongs to that tasks/result (its stream), and the client's answer,
// pushed into the session, completes the task.
func TestALegacyTasksInputRequestBelongsToTheTasksResultThatCarriesIt(t *testing.T) {
	inBubble(t, func(t *testing.T, s *server.Server) {
		s.AddTool(mcp.Tool{Name: "confirm", Execution: &mcp.ToolExecution{TaskSupport: mcp.TaskOptional}}, func(ctx context.Context, r *server.ToolRequest) (*mcp.ToolResult, error) {
			res, err := r.Elicit(ctx, "ok", "Go ahead?", map[string]any{"type": "object"})
			if err != nil {
				return nil, err
			}
			return mcp.TextResult(res.Action), nil
		})
		w := openSession(t, s)
		defer w.close()
		w.initialize("2025-11-25", `{"elicitation":{}}`)
		w.post(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"confirm","arguments":{},"task":{}}}`, "2025-11-25")
		var created struct {
			Result struct {
				Task struct {
					TaskID string `json:"taskId"`
				} `json:"task"`
			} `json:"result"`
		}
		for _, m := range w.take() {
			if m.kind == jsonrpc.KindResult {
				json.Unmarshal([]byte(m.line), &created)
			}
		}
		id := created.Result.Task.TaskID
		if id == "" {
			t.Fatal("no task was created")
		}
		go w.post(`{"jsonrpc":"2.0","id":"res","method":"tasks/result","params":{"taskId":"`+id+`"}}`, "2025-11-25")
		var req *sent
		for _, m := range w.take() {
			if m.kind == jsonrpc.KindRequest {
				req = &m
			}
		}
		if req == nil || req.method != mcp.MethodElicit || req.related != `"res"` {
			t.Fatalf("the input request: %+v", req)
		}
		var r struct {
			ID json.RawMessage `json:"id"`
		}
		json.Unmarshal([]byte(req.line), &r)
		w.post(`{"jsonrpc":"2.0","id":`+string(r.ID)+`,"result":{"action":"accept","content":{}}}`, "2025-11-25")
		var answer *sent
		for _, m := range w.take() {
			if m.kind == jsonrpc.KindResult {
				answer = &m
			}
		}
		if answer == nil || answer.related != `"res"` || !strings.Contains(answer.line, `"text":"accept"`) {
			t.Fatalf("tasks/result answered %+v", answer)
		}
	})
}

// A session that does not read (its writer blocks) holds up neither the
// change nor the other sessions, and however many changes it misses while
// it is stuck it costs one goroutine and hears of them once.
func TestASlowSessionHoldsUpNeitherTheChangeNorTheOthers(t *testing.T) {
	inBubble(t, func(t *testing.T, s *server.Server) {
		slow, quick := openSession(t, s), openSession(t, s)
		slow.initialize("2025-11-25", `{}`)
		quick.initialize("2025-11-25", `{}`)
		gate := make(chan struct{})
		slow.mu.Lock()
		slow.gate = gate
		slow.mu.Unlock()
		s.AddTool(mcp.Tool{Name: "first"}, nil)
		synctest.Wait()
		before := bubbleGoroutines()
		for i := range 100 {
			s.AddTool(mcp.Tool{Name: fmt.Sprint("t", i)}, nil) // returns: nothing waits for slow
		}
		synctest.Wait()
		if grown := bubbleGoroutines() - before; grown > 0 {
			t.Errorf("100 changes to a stuck session started %d goroutines", grown)
		}
		if got := quick.take(); len(got) == 0 || len(got) > 101 {
			t.Errorf("the quick session heard %d notifications", len(got))
		}
		slow.mu.Lock()
		slow.gate = nil
		slow.mu.Unlock()
		close(gate)
		if got := slow.take(); len(got) != 2 {
			t.Errorf("the slow session heard %d notifications, want the one it was stuck on and one for the rest", len(got))
		}
		slow.close()
		quick.close()
	})
}

// Ten thousand initialized sessions, subscribed and idle, cost no
// goroutine each; after they close the server keeps nothing of them,
// their connections are collected, and the heap returns to what it was
// (the regression this pins: the server's tables, Go maps, kept the room
// of 10,000 entries after the sessions ended).
func TestTenThousandIdleSessionsCostNoGoroutinesAndAreCollectedAfterClose(t *testing.T) {
	if testing.Short() {
		t.Skip("10,000 sessions")
	}
	synctest.Test(t, func(t *testing.T) {
		const n = 10000
		s := mcptest.NewServer(&server.Options{Logger: wiretest.Quiet})
		addResources(s, "test://a")
		opts := s.ConnOptions(&rpc.Options{Logger: wiretest.Quiet})
		conns := make([]*rpc.Conn, n)
		refs := make([]weak.Pointer[rpc.Conn], n)
		var out discard
		// The runtime keeps the descriptor of every goroutine that ever
		// ran at the same time as the others, for reuse: the update and
		// the closing below run one short-lived goroutine per session, so
		// as many run first, for the baseline to hold their descriptors.
		release := make(chan struct{})
		for range 2 * n {
			go func() { <-release }()
		}
		synctest.Wait()
		close(release)
		synctest.Wait()
		before, baseHeap := bubbleGoroutines(), heapInUse()
		for i := range conns {
			c := rpc.NewMessages(nil, &out, s.SessionHandler(), opts)
			c.Receive([]byte(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}`))
			c.Receive([]byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`))
			c.Receive([]byte(`{"jsonrpc":"2.0","id":1,"method":"resources/subscribe","params":{"uri":"test://a"}}`))
			conns[i], refs[i] = c, weak.Make(c)
		}
		synctest.Wait()
		if grown := bubbleGoroutines() - before; grown > 10 {
			t.Fatalf("%d idle sessions run %d goroutines:\n%s", n, grown, bubbleStacks())
		}
		if st := s.LegacyStats(); st.Connections != n || st.Subscriptions != n {
			t.Fatalf("stats %+v", st)
		}
		// They are live: every one hears of a change, and the goroutines
		// that told them are gone afterwards.
		s.ResourceUpdated("test://a")
		synctest.Wait()
		if st := s.LegacyStats(); st.Notified != n {
			t.Fatalf("notified %d of %d sessions", st.Notified, n)
		}
		if grown := bubbleGoroutines() - before; grown > 10 {
			t.Fatalf("after the update, %d goroutines are left:\n%s", grown, bubbleStacks())
		}
		for _, c := range conns {
			c.Close()
		}
		clear(conns) // the slice stays, measured on both sides
		synctest.Wait()
		if st := s.LegacyStats(); st.Connections != 0 || st.Subscriptions != 0 {
			t.Fatalf("after Close the server keeps %+v", st)
		}
		runtime.GC()
		live := 0
		for _, r := range refs {
			if r.Value() != nil {
				live++
			}
		}
		if live != 0 {
			t.Fatalf("%d of %d closed sessions' connections are still reachable", live, n)
		}
		heap := heapInUse()
		runtime.KeepAlive(s) // the server's tables are measured, not collected
		runtime.KeepAlive(conns)
		if heap > baseHeap+128<<10 {
			t.Errorf("heap %d KiB after the sessions closed, %d KiB before them", heap>>10, baseHeap>>10)
		}
		if grown := bubbleGoroutines() - before; grown > 10 {
			t.Fatalf("after Close, %d goroutines are left:\n%s", grown, bubbleStacks())
		}
	})
}

// bubbleGoroutines counts the goroutines of the calling synctest bubble
// only: runtime.NumGoroutine also counts whatever the package's other
// tests left running (a timer's callback firing meanwhile), which made
// the counts above flaky in a loaded CI run.
func bubbleGoroutines() int {
	return strings.Count(bubbleStacks(), "synctest bubble")
}

// bubbleStacks is the stack dump of every goroutine (the bubble's are
// marked "synctest bubble N"), for counting and for a failure's message.
func bubbleStacks() string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return string(buf[:n])
		}
		buf = make([]byte, 2*len(buf))
	}
}

func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// discard is a MessageWriter that keeps nothing.
type discard struct{}

func (*discard) WriteMessage(*rpc.Outbound) error { return nil }
