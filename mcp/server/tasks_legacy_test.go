package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/agentwire/agentwire/internal/wiretest"
	"github.com/agentwire/agentwire/jsonrpc"
	"github.com/agentwire/agentwire/mcp"
	"github.com/agentwire/agentwire/mcp/internal/mcptest"
	"github.com/agentwire/agentwire/mcp/server"
	"github.com/agentwire/agentwire/mcp/tasks"
)

// The 2025-11-25 design of tasks on the wire, over a stream after
// initialize: params.task on tools/call, tasks/get, tasks/result,
// tasks/list and tasks/cancel.

const legacyInit = `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"elicitation":{}},"clientInfo":{"name":"c","version":"1"}}}`

func legacyLine(id, method, params string) string {
	if params == "" {
		return `{"jsonrpc":"2.0","id":` + id + `,"method":"` + method + `"}`
	}
	return `{"jsonrpc":"2.0","id":` + id + `,"method":"` + method + `","params":{` + params + `}}`
}

// legacyTask checks a 2025-11-25 CreateTaskResult ({"task":{...}}) and
// returns its task.
func legacyTask(t *testing.T, line string) map[string]any {
	t.Helper()
	r := resultOf(t, line)
	task, _ := r["task"].(map[string]any)
	if id, _ := task["taskId"].(string); id == "" || len(r) != 1 {
		t.Fatalf("not a 2025-11-25 CreateTaskResult: %s", line)
	}
	return task
}

// legacyWire is a connection that has been through initialize at
// 2025-11-25.
type legacyWire struct {
	*wiretest.Wire
	t     *testing.T
	n     int
	notes []string // the notifications the server sent (list changes, task status)
}

// take returns the responses and requests the server wrote since the last
// take; its notifications are kept apart, in notes.
func (w *legacyWire) take() []string {
	var out []string
	for _, l := range w.Take() {
		if r := parseReply(w.t, l); r.Method != "" && len(r.ID) == 0 {
			w.notes = append(w.notes, l)
			continue
		}
		out = append(out, l)
	}
	return out
}

// exchange sends lines and returns the one message that answers them.
func (w *legacyWire) exchange(lines ...string) string {
	w.t.Helper()
	w.Send(lines...)
	return mcptest.One(w.t, w.take())
}

func (w *legacyWire) do(method, params string) string {
	w.t.Helper()
	w.n++
	return w.exchange(legacyLine(fmt.Sprint(w.n), method, params))
}

// start calls a tool with params.task and returns the task's id.
func (w *legacyWire) start(tool, task string) string {
	w.t.Helper()
	return legacyTask(w.t, w.do("tools/call", `"name":"`+tool+`","arguments":{},"task":`+task))["taskId"].(string)
}

func (w *legacyWire) get(id string) map[string]any {
	w.t.Helper()
	return resultOf(w.t, w.do("tasks/get", taskParam(id)))
}

// connect opens another connection to s and initializes it.
func connectLegacy(t *testing.T, s *server.Server) *legacyWire {
	w := &legacyWire{Wire: wiretest.Start(t, s.Handler(), s.ConnOptions(nil), true), t: t}
	w.Exchange(legacyInit, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	w.take()
	return w
}

// runLegacy builds a server inside a bubble, initializes a connection at
// 2025-11-25 and runs f; every task handler has ended before the wire
// closes.
func runLegacy(t *testing.T, opts *server.Options, f func(w *legacyWire, s *server.Server)) {
	t.Helper()
	synctest.Test(t, func(t *testing.T) {
		o := server.Options{Logger: wiretest.Quiet}
		if opts != nil {
			o = *opts
			o.Logger = wiretest.Quiet
		}
		s := mcptest.NewServer(&o)
		w := connectLegacy(t, s)
		defer w.Finish()
		defer func() {
			if err := s.Shutdown(context.Background()); err != nil {
				t.Errorf("Shutdown: %v", err)
			}
		}()
		f(w, s)
	})
}

// initialize at 2025-11-25 declares the tasks capability (list, cancel,
// tools/call), and tools/list shows each tool's execution.taskSupport; an
// older version has neither.
func TestInitializeDeclaresTasksAndToolsListShowsTaskSupport(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := mcptest.NewServer(&server.Options{Logger: wiretest.Quiet})
		addGated(s, "job", optional)
		addGated(s, "must", required)
		w := wiretest.Start(t, s.Handler(), s.ConnOptions(nil), true)
		defer w.Finish()
		got := resultOf(t, mcptest.One(t, w.Exchange(legacyInit)))
		caps, _ := json.Marshal(got["capabilities"])
		mcptest.JSONEq(t, string(caps), `{"tools":{"listChanged":true},"logging":{},
			"tasks":{"list":{},"cancel":{},"requests":{"tools":{"call":{}}}}}`)
		w.Exchange(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
		list := resultOf(t, mcptest.One(t, w.Exchange(legacyLine("1", "tools/list", ""))))
		support := map[string]any{}
		for _, tl := range list["tools"].([]any) {
			m := tl.(map[string]any)
			ex, _ := m["execution"].(map[string]any)
			support[m["name"].(string)] = ex["taskSupport"]
		}
		if fmt.Sprint(support) != "map[echo:<nil> fails:<nil> job:optional must:required slow:<nil>]" {
			t.Errorf("taskSupport by tool: %v", support)
		}

		old := wiretest.Start(t, s.Handler(), s.ConnOptions(nil), true)
		defer old.Finish()
		got = resultOf(t, mcptest.One(t, old.Exchange(strings.Replace(legacyInit, "2025-11-25", "2025-06-18", 1))))
		if caps := got["capabilities"].(map[string]any); caps["tasks"] != nil {
			t.Errorf("2025-06-18 capabilities: %v", caps)
		}
		if l := mcptest.One(t, old.Exchange(legacyLine("1", "tools/list", ""))); strings.Contains(l, "taskSupport") {
			t.Errorf("2025-06-18 tools/list: %s", l)
		}
	})
}

// params.task makes a task: {"task":{taskId, status, createdAt,
// lastUpdatedAt, ttl, pollInterval}}, the ttl the client asked for up to
// MaxTTL (TTL when it asks none); tasks/get is the task itself.
func TestParamsTaskCreatesATaskWithItsTTLCappedByMaxTTL(t *testing.T) {
	opts := &server.Options{Tasks: &server.TaskOptions{TTL: 10 * time.Minute, MaxTTL: 2 * time.Hour, PollInterval: 500 * time.Millisecond}}
	runLegacy(t, opts, func(w *legacyWire, s *server.Server) {
		g := addGated(s, "job", optional)
		for _, tc := range []struct {
			task string
			ttl  float64
		}{
			{`{"ttl":5000}`, 5000},
			{`{"ttl":864000000}`, 7200000}, // ten days, capped at two hours
			{`{}`, 600000},
			{`{"ttl":0}`, 600000},
			{`{"ttl":-5}`, 600000},
		} {
			line := w.do("tools/call", `"name":"job","arguments":{},"task":`+tc.task)
			task := legacyTask(t, line)
			id := task["taskId"].(string)
			mcptest.JSONEq(t, line, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"result":{"task":{"taskId":"%s","status":"working",
				"createdAt":"%s","lastUpdatedAt":"%s","ttl":%v,"pollInterval":500}}}`, w.n, id, epoch, epoch, tc.ttl))
			mcptest.JSONEq(t, w.do("tasks/get", taskParam(id)), fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"result":{"taskId":"%s","status":"working",
				"createdAt":"%s","lastUpdatedAt":"%s","ttl":%v,"pollInterval":500}}`, w.n, id, epoch, epoch, tc.ttl))
		}
		close(g.release)
		// Without params.task an optional tool answers in the request.
		mcptest.JSONEq(t, w.do("tools/call", `"name":"job","arguments":{}`), fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"result":{"content":[{"type":"text","text":"job done"}]}}`, w.n))
	})
}

// tasks/result blocks until the task has ended, then returns what the
// call would have (the tool's whole result) with _meta
// io.modelcontextprotocol/related-task; a failed task's is its JSON-RPC
// error, or (2025-11-25 fails a task whose tool reported isError) the
// result.
func TestTasksResultWaitsForTheEndAndReturnsTheResultOrTheError(t *testing.T) {
	runLegacy(t, nil, func(w *legacyWire, s *server.Server) {
		release := make(chan struct{})
		s.AddTool(mcp.Tool{Name: "job", Execution: optional}, func(ctx context.Context, r *server.ToolRequest) (*mcp.ToolResult, error) {
			<-release
			res := mcp.TextResult("job done")
			res.StructuredContent = map[string]any{"mine": 1}
			return res, nil
		})
		s.AddTool(mcp.Tool{Name: "refuses", Execution: required}, func(context.Context, *server.ToolRequest) (*mcp.ToolResult, error) {
			return nil, jsonrpc.NewError(-32050, "quota exceeded", map[string]any{"retryAfter": 60})
		})
		s.AddTool(mcp.Tool{Name: "crash", Execution: required}, func(context.Context, *server.ToolRequest) (*mcp.ToolResult, error) {
			panic("boom")
		})
		s.AddTool(mcp.Tool{Name: "flawed", Execution: required}, func(context.Context, *server.ToolRequest) (*mcp.ToolResult, error) {
			return mcp.ErrorResult("it went wrong"), nil
		})
		id := w.start("job", `{}`)
		w.Send(legacyLine(`"res"`, "tasks/result", taskParam(id)))
		w.Sleep(time.Minute)
		if got := w.take(); len(got) != 0 {
			t.Fatalf("tasks/result answered before the task ended: %q", got)
		}
		close(release)
		mcptest.JSONEq(t, mcptest.One(t, w.take()), `{"jsonrpc":"2.0","id":"res","result":{"content":[{"type":"text","text":"job done"}],
			"structuredContent":{"mine":1},"_meta":{"io.modelcontextprotocol/related-task":{"taskId":"`+id+`"}}}}`)
		// Once ended, at once.
		mcptest.JSONEq(t, w.do("tasks/result", taskParam(id)), fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"result":{"content":[{"type":"text","text":"job done"}],
			"structuredContent":{"mine":1},"_meta":{"io.modelcontextprotocol/related-task":{"taskId":"%s"}}}}`, w.n, id))
		if st := w.get(id)["status"]; st != "completed" {
			t.Errorf("status %v", st)
		}

		failed := w.start("refuses", `{}`)
		mcptest.JSONEq(t, w.do("tasks/result", taskParam(failed)), fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,
			"error":{"code":-32050,"message":"quota exceeded","data":{"retryAfter":60}}}`, w.n))
		if got := w.get(failed); got["status"] != "failed" || got["error"] != nil || got["result"] != nil {
			t.Errorf("a 2025-11-25 tasks/get inlines nothing: %v", got)
		}
		// 2025-11-25: a tool result with isError ends the task failed, and
		// tasks/result returns that result.
		flawed := w.start("flawed", `{}`)
		mcptest.JSONEq(t, w.do("tasks/result", taskParam(flawed)), fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"result":{"content":[{"type":"text","text":"it went wrong"}],
			"isError":true,"_meta":{"io.modelcontextprotocol/related-task":{"taskId":"%s"}}}}`, w.n, flawed))
		if st := w.get(flawed)["status"]; st != "failed" {
			t.Errorf("a 2025-11-25 task whose tool reported isError: %v", st)
		}
		crashed := w.start("crash", `{}`)
		if e := errorOf(t, w.do("tasks/result", taskParam(crashed))); e.Code != jsonrpc.CodeInternalError || !strings.Contains(e.Message, "boom") {
			t.Errorf("a panicked task's tasks/result: %+v", e)
		}
	})
}

// tasks/list pages (Options.PageSize) through this connection's tasks,
// oldest first; another connection's, and tasks of the 2026-07-28 design,
// are not listed.
func TestTasksListPagesThroughThisConnectionsTasksOnly(t *testing.T) {
	runLegacy(t, &server.Options{PageSize: 2}, func(w *legacyWire, s *server.Server) {
		g := addGated(s, "job", optional)
		var mine []string
		for range 3 {
			mine = append(mine, w.start("job", `{}`))
		}
		other := connectLegacy(t, s)
		defer other.Finish()
		theirs := other.start("job", `{}`)
		modern := createdTask(t, w.exchange(declared(`"m"`, "tools/call", `"name":"job","arguments":{}`)))

		page := resultOf(t, w.do("tasks/list", ""))
		ids := func(page map[string]any) (out []string) {
			for _, tk := range page["tasks"].([]any) {
				m := tk.(map[string]any)
				if m["status"] != "working" || m["ttl"] == nil || m["createdAt"] == nil {
					t.Errorf("a listed task: %v", m)
				}
				out = append(out, m["taskId"].(string))
			}
			return out
		}
		cursor, _ := page["nextCursor"].(string)
		if got := ids(page); fmt.Sprint(got) != fmt.Sprint(mine[:2]) || cursor == "" {
			t.Fatalf("the first page %v (next %q), want %v", got, cursor, mine[:2])
		}
		page = resultOf(t, w.do("tasks/list", `"cursor":"`+cursor+`"`))
		if got := ids(page); fmt.Sprint(got) != fmt.Sprint(mine[2:]) || page["nextCursor"] != nil {
			t.Errorf("the second page %v", page)
		}
		page = resultOf(t, other.do("tasks/list", ""))
		if got := ids(page); fmt.Sprint(got) != fmt.Sprint([]string{theirs}) {
			t.Errorf("the other connection's list %v", got)
		}
		for _, bad := range []string{`"cursor":"!!"`, `"cursor":5`} {
			if e := errorOf(t, w.do("tasks/list", bad)); e.Code != jsonrpc.CodeInvalidParams {
				t.Errorf("tasks/list %s: %+v", bad, e)
			}
		}
		// Each design reads only its own tasks.
		if e := errorOf(t, w.do("tasks/get", taskParam(modern))); e.Code != jsonrpc.CodeInvalidParams {
			t.Errorf("a 2026-07-28 task through 2025-11-25 tasks/get: %+v", e)
		}
		if e := errorOf(t, w.exchange(declared(`"x"`, "tasks/get", taskParam(mine[0])))); e.Code != jsonrpc.CodeInvalidParams {
			t.Errorf("a 2025-11-25 task through 2026-07-28 tasks/get: %+v", e)
		}
		// Another connection may still read a task by its id (ids are
		// unguessable; there is no identity on a stream to bind it to).
		if st := other.get(mine[0])["status"]; st != "working" {
			t.Errorf("status %v", st)
		}
		close(g.release)
	})
}

// tasks/cancel stops the handler and returns the task, cancelled; a task
// that has ended cannot be cancelled (-32602), nor can an unknown one.
func TestTasksCancelReturnsTheCancelledTaskAndRefusesAnEndedOne(t *testing.T) {
	runLegacy(t, nil, func(w *legacyWire, s *server.Server) {
		g := addGated(s, "job", optional)
		id := w.start("job", `{"ttl":60000}`)
		got := resultOf(t, w.do("tasks/cancel", taskParam(id)))
		if got["taskId"] != id || got["status"] != "cancelled" || got["ttl"] != float64(60000) || got["lastUpdatedAt"] == nil {
			t.Errorf("tasks/cancel %v", got)
		}
		w.Settle()
		if cause := <-g.causes; !errors.Is(cause, server.ErrTaskCancelled) {
			t.Errorf("the handler's context ended with %v", cause)
		}
		if e := errorOf(t, w.do("tasks/cancel", taskParam(id))); e.Code != jsonrpc.CodeInvalidParams || !strings.Contains(e.Message, "already ended") {
			t.Errorf("a second tasks/cancel: %+v", e)
		}
		if e := errorOf(t, w.do("tasks/result", taskParam(id))); e.Code == 0 {
			t.Errorf("tasks/result of a cancelled task: %+v", e)
		}
		done := w.start("job", `{}`)
		close(g.release)
		w.Settle()
		if e := errorOf(t, w.do("tasks/cancel", taskParam(done))); e.Code != jsonrpc.CodeInvalidParams {
			t.Errorf("tasks/cancel of a completed task: %+v", e)
		}
		if st := w.get(done)["status"]; st != "completed" {
			t.Errorf("status %v", st)
		}
		for _, m := range []string{"tasks/get", "tasks/result", "tasks/cancel"} {
			if e := errorOf(t, w.do(m, taskParam("nope"))); e.Code != jsonrpc.CodeInvalidParams {
				t.Errorf("%s of an unknown task: %+v", m, e)
			}
		}
	})
}

// A tool whose taskSupport is required, called without params.task, is
// refused (-32601, "Method not found", as 2025-11-25 says); one that never
// runs as a task, called with it, likewise; and tasks/* before initialize
// are refused.
func TestTaskSupportIsEnforcedOnTheCall(t *testing.T) {
	runLegacy(t, nil, func(w *legacyWire, s *server.Server) {
		addGated(s, "must", required)
		mcptest.JSONEq(t, w.do("tools/call", `"name":"must","arguments":{}`), fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"error":{"code":-32601,
			"message":"tool must must run as a task: call it with params.task (execution.taskSupport is required)"}}`, w.n))
		if e := errorOf(t, w.do("tools/call", `"name":"echo","arguments":{"text":"x"},"task":{}`)); e.Code != jsonrpc.CodeMethodNotFound {
			t.Errorf("a forbidden tool with params.task: %+v", e)
		}
		if e := errorOf(t, w.do("tools/call", `"name":"must","arguments":{},"task":true`)); e.Code != jsonrpc.CodeMethodNotFound {
			t.Errorf("params.task that is not an object: %+v", e)
		}
		fresh := wiretest.Start(t, s.Handler(), s.ConnOptions(nil), true)
		defer fresh.Finish()
		if e := errorOf(t, mcptest.One(t, fresh.Exchange(legacyLine("1", "tasks/list", "")))); e.Code != mcp.CodeServerNotInitialized {
			t.Errorf("tasks/list before initialize: %+v", e)
		}
	})
}

// A task that asks for input: tasks/result sends the request to the client
// as a request of the server's own, tied to the task by _meta
// related-task; the client's answer resumes the task, and tasks/result
// returns its result.
func TestTasksResultCarriesATasksInputRequestToTheClient(t *testing.T) {
	runLegacy(t, nil, func(w *legacyWire, s *server.Server) {
		s.AddTool(mcp.Tool{Name: "confirm", Execution: optional}, func(ctx context.Context, r *server.ToolRequest) (*mcp.ToolResult, error) {
			res, err := r.Elicit(ctx, "ok", "Go ahead?", map[string]any{"type": "object", "properties": map[string]any{"yes": map[string]any{"type": "boolean"}}})
			if err != nil {
				return nil, err
			}
			return mcp.TextResult(fmt.Sprintf("%s %v", res.Action, res.Content["yes"])), nil
		})
		id := w.start("confirm", `{}`)
		if st := w.get(id)["status"]; st != "input_required" {
			t.Fatalf("status %v", st)
		}
		sent := w.exchange(legacyLine(`"res"`, "tasks/result", taskParam(id)))
		req := parseReply(t, sent)
		if req.Method != "elicitation/create" || len(req.ID) == 0 {
			t.Fatalf("the server's request: %s", sent)
		}
		params, _ := json.Marshal(req.Params)
		mcptest.JSONEq(t, string(params), `{"message":"Go ahead?","requestedSchema":{"type":"object","properties":{"yes":{"type":"boolean"}}},
			"_meta":{"io.modelcontextprotocol/related-task":{"taskId":"`+id+`"}}}`)
		// The client takes its time: the request is not sent again.
		w.Sleep(10 * time.Second)
		if got := w.take(); len(got) != 0 {
			t.Fatalf("while the client thinks: %q", got)
		}
		got := w.exchange(`{"jsonrpc":"2.0","id":` + string(req.ID) + `,"result":{"action":"accept","content":{"yes":true}}}`)
		mcptest.JSONEq(t, got, `{"jsonrpc":"2.0","id":"res","result":{"content":[{"type":"text","text":"accept true"}],
			"_meta":{"io.modelcontextprotocol/related-task":{"taskId":"`+id+`"}}}}`)
		if st := w.get(id)["status"]; st != "completed" {
			t.Errorf("status %v", st)
		}
	})
}

// forgetful is a store that loses a task between two reads (a shared
// store's eviction, an operator's purge).
type forgetful struct {
	tasks.Store
	gets atomic.Int32
	from int32
}

func (f *forgetful) Get(ctx context.Context, id string) (*tasks.Task, error) {
	if f.gets.Add(1) >= f.from {
		return nil, tasks.ErrNotFound
	}
	return f.Store.Get(ctx, id)
}

// Regression: tasks/result dereferenced the task it had just failed to
// read when the store no longer had it (a nil pointer, in the error
// message meant for the client). It answers -32602.
func TestTasksResultOfATaskTheStoreHasLostIsInvalidParams(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := &forgetful{Store: tasks.NewMemory(&tasks.MemoryOptions{Logger: wiretest.Quiet}), from: 2}
		s := mcptest.NewServer(&server.Options{Logger: wiretest.Quiet, Tasks: &server.TaskOptions{Store: store}})
		g := addGated(s, "job", optional)
		w := connectLegacy(t, s)
		defer w.Finish()
		defer s.Shutdown(context.Background())
		id := w.start("job", `{}`)
		e := errorOf(t, w.do("tasks/result", taskParam(id))) // found once, then lost
		if e.Code != jsonrpc.CodeInvalidParams || !strings.Contains(e.Message, id) {
			t.Errorf("tasks/result of a lost task: %+v", e)
		}
		close(g.release)
	})
}

// Regression: the goroutine that carries a task's input request to the
// client read tasks/result's task variable, which the waiting loop
// reassigns at every recheck (a data race when the client's answer, here
// a refusal, and a recheck crossed). And a refusal left the task waiting
// on input until it was cancelled: now the handler's Ask returns it, as
// Ask does outside a task, and tasks/result answers with what the handler
// made of it (here it returns the error: the task fails with it).
func TestTasksResultCarriesAnInputRequestTheClientRefuses(t *testing.T) {
	runLegacy(t, nil, func(w *legacyWire, s *server.Server) {
		s.AddTool(mcp.Tool{Name: "confirm", Execution: optional}, func(ctx context.Context, r *server.ToolRequest) (*mcp.ToolResult, error) {
			_, err := r.Elicit(ctx, "ok", "Go ahead?", map[string]any{"type": "object"})
			return nil, err
		})
		id := w.start("confirm", `{}`)
		req := parseReply(t, w.exchange(legacyLine(`"res"`, "tasks/result", taskParam(id))))
		if req.Method != "elicitation/create" {
			t.Fatalf("the server's request: %+v", req)
		}
		w.Send(`{"jsonrpc":"2.0","id":` + string(req.ID) + `,"error":{"code":-1,"message":"the user closed the dialog"}}`)
		w.Settle()
		got := w.take()
		if len(got) != 1 {
			t.Fatalf("after the refusal: %q", got)
		}
		if r := parseReply(t, got[0]); string(r.ID) != `"res"` || r.Error == nil || !strings.Contains(got[0], "the user closed the dialog") {
			t.Fatalf("tasks/result after the refusal: %s", got[0])
		}
		if st := w.get(id)["status"]; st != "failed" {
			t.Errorf("status %v", st)
		}
	})
}
