package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/agentwire/agentwire/internal/wiretest"
	"github.com/agentwire/agentwire/jsonrpc"
	"github.com/agentwire/agentwire/mcp"
	"github.com/agentwire/agentwire/mcp/auth"
	"github.com/agentwire/agentwire/mcp/internal/mcptest"
	"github.com/agentwire/agentwire/mcp/server"
	"github.com/agentwire/agentwire/mcp/streamable"
	"github.com/agentwire/agentwire/mcp/tasks"
)

// The 2026-07-28 tasks extension (io.modelcontextprotocol/tasks, SEP-2663)
// on the wire: raw lines over a stream, raw POSTs over Streamable HTTP.

// extMeta is a 2026-07-28 _meta whose client capabilities declare the
// tasks extension.
const extMeta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"},"io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}`

// declared is a 2026-07-28 request of a client that declares the tasks
// extension; modernReq (features_test.go) is one of a client that does not.
func declared(id, method, params string) string {
	p := "{" + extMeta
	if params != "" {
		p += "," + params
	}
	return `{"jsonrpc":"2.0","id":` + id + `,"method":"` + method + `","params":` + p + `}}`
}

func taskParam(id string) string { return `"taskId":"` + id + `"` }

// synctest's clock starts at midnight UTC, 2000-01-01.
const epoch = "2000-01-01T00:00:00.000Z"

type wireError struct {
	Code    int64          `json:"code"`
	Message string         `json:"message"`
	Data    map[string]any `json:"data"`
}

type wireReply struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params map[string]any  `json:"params"`
	Result map[string]any  `json:"result"`
	Error  *wireError      `json:"error"`
}

func parseReply(t *testing.T, line string) wireReply {
	t.Helper()
	var r wireReply
	if err := json.Unmarshal([]byte(line), &r); err != nil {
		t.Fatalf("not a JSON-RPC message: %q", line)
	}
	return r
}

// resultOf returns a reply's result, failing the test on an error.
func resultOf(t *testing.T, line string) map[string]any {
	t.Helper()
	r := parseReply(t, line)
	if r.Error != nil || r.Result == nil {
		t.Fatalf("not a result: %s", line)
	}
	return r.Result
}

// errorOf returns a reply's error, failing the test on a result.
func errorOf(t *testing.T, line string) *wireError {
	t.Helper()
	r := parseReply(t, line)
	if r.Error == nil {
		t.Fatalf("not an error: %s", line)
	}
	return r.Error
}

// createdTask checks a CreateTaskResult and returns its taskId.
func createdTask(t *testing.T, line string) string {
	t.Helper()
	r := resultOf(t, line)
	id, _ := r["taskId"].(string)
	if r["resultType"] != "task" || id == "" {
		t.Fatalf("not a CreateTaskResult: %s", line)
	}
	return id
}

// taskWire drives a server over a stream in a synctest bubble, with its
// own tools added by the test.
type taskWire struct {
	*wiretest.Wire
	t *testing.T
	s *server.Server
	n int
}

// runTasks builds a server with task options o inside a bubble, runs f,
// and shuts it down (every task handler ended) before the wire closes.
func runTasks(t *testing.T, o *server.TaskOptions, f func(w *taskWire)) {
	t.Helper()
	synctest.Test(t, func(t *testing.T) {
		s := mcptest.NewServer(&server.Options{Tasks: o, Logger: wiretest.Quiet})
		w := wiretest.Start(t, s.Handler(), s.ConnOptions(nil), true)
		defer w.Finish()
		defer func() {
			if err := s.Shutdown(context.Background()); err != nil {
				t.Errorf("Shutdown: %v", err)
			}
		}()
		f(&taskWire{Wire: w, t: t, s: s})
	})
}

// do sends one request and returns its one reply.
func (w *taskWire) do(line string) string {
	w.t.Helper()
	return mcptest.One(w.t, w.Exchange(line))
}

func (w *taskWire) id() string { w.n++; return fmt.Sprintf(`"r%d"`, w.n) }

// call calls a tool as a declaring client.
func (w *taskWire) call(tool, args string) string {
	w.t.Helper()
	return w.do(declared(w.id(), "tools/call", `"name":"`+tool+`","arguments":`+args))
}

// start calls a tool that must answer with a task, and returns its id.
func (w *taskWire) start(tool, args string) string {
	w.t.Helper()
	return createdTask(w.t, w.call(tool, args))
}

// get returns tasks/get's result for id.
func (w *taskWire) get(id string) map[string]any {
	w.t.Helper()
	r := resultOf(w.t, w.do(declared(w.id(), "tasks/get", taskParam(id))))
	if r["resultType"] != "complete" || r["taskId"] != id {
		w.t.Fatalf("tasks/get of %s: %v", id, r)
	}
	return r
}

func (w *taskWire) update(id, responses string) string {
	w.t.Helper()
	return w.do(declared(w.id(), "tasks/update", taskParam(id)+`,"inputResponses":`+responses))
}

func (w *taskWire) cancel(id string) string {
	w.t.Helper()
	return w.do(declared(w.id(), "tasks/cancel", taskParam(id)))
}

// gate is a tool's handle: release lets it return, causes reports how its
// context ended when it was stopped instead.
type gate struct {
	release chan struct{}
	causes  chan error
}

// addGated adds a tool that waits for its gate (or its context's end).
func addGated(s *server.Server, name string, ex *mcp.ToolExecution) *gate {
	g := &gate{release: make(chan struct{}), causes: make(chan error, 8)}
	s.AddTool(mcp.Tool{Name: name, Execution: ex}, func(ctx context.Context, r *server.ToolRequest) (*mcp.ToolResult, error) {
		select {
		case <-g.release:
			return mcp.TextResult(name + " done"), nil
		case <-ctx.Done():
			g.causes <- context.Cause(ctx)
			return nil, ctx.Err()
		}
	})
	return g
}

var (
	optional = &mcp.ToolExecution{TaskSupport: mcp.TaskOptional}
	required = &mcp.ToolExecution{TaskSupport: mcp.TaskRequired}
)

// A task-supporting tool called by a client that declares the extension
// is answered with a flat CreateTaskResult (resultType "task", ttlMs and
// pollIntervalMs), and the id resolves with tasks/get the moment the
// answer is out (durable creation); once the tool returns, tasks/get
// carries its result inlined.
func TestATaskSupportingToolAnswersADeclaringClientWithATaskThatResolvesAtOnce(t *testing.T) {
	runTasks(t, &server.TaskOptions{TTL: 10 * time.Minute, PollInterval: 250 * time.Millisecond}, func(w *taskWire) {
		g := addGated(w.s, "job", optional)
		created := w.call("job", `{}`)
		id := createdTask(t, created)
		mcptest.JSONEq(t, created, `{"jsonrpc":"2.0","id":"r1","result":{"resultType":"task","taskId":"`+id+`","status":"working",
			"createdAt":"`+epoch+`","lastUpdatedAt":"`+epoch+`","ttlMs":600000,"pollIntervalMs":250,`+serverInfo+`}}`)
		if len(id) < 22 {
			t.Errorf("task id %q: too short to be unguessable", id)
		}
		mcptest.JSONEq(t, w.do(declared(`"g1"`, "tasks/get", taskParam(id))), `{"jsonrpc":"2.0","id":"g1","result":{"resultType":"complete",
			"taskId":"`+id+`","status":"working","createdAt":"`+epoch+`","lastUpdatedAt":"`+epoch+`","ttlMs":600000,"pollIntervalMs":250,`+serverInfo+`}}`)
		w.Sleep(3 * time.Second)
		close(g.release)
		w.Settle()
		mcptest.JSONEq(t, w.do(declared(`"g2"`, "tasks/get", taskParam(id))), `{"jsonrpc":"2.0","id":"g2","result":{"resultType":"complete",
			"taskId":"`+id+`","status":"completed","createdAt":"`+epoch+`","lastUpdatedAt":"2000-01-01T00:00:03.000Z","ttlMs":600000,"pollIntervalMs":250,
			"result":{"content":[{"type":"text","text":"job done"}]},`+serverInfo+`}}`)
		if st := w.s.TaskStats(); st.Created != 1 || st.Completed != 1 || st.Running != 0 {
			t.Errorf("stats %+v", st)
		}
	})
}

// The server decides per request: a client that does not declare the
// extension gets the tool's result in the request (sync fall-through), and
// a tool that never runs as a task answers a declaring client in the
// request too. server/discover advertises the extension.
func TestAClientThatDoesNotDeclareTheExtensionGetsThePlainResult(t *testing.T) {
	runTasks(t, nil, func(w *taskWire) {
		w.s.AddTool(mcp.Tool{Name: "quick", Execution: optional}, func(ctx context.Context, r *server.ToolRequest) (*mcp.ToolResult, error) {
			ctx2, err := r.StartTask(ctx) // not a task: the request's own context back
			if err != nil || ctx2 != ctx {
				return nil, fmt.Errorf("StartTask outside a task: %v", err)
			}
			return mcp.TextResult("quick done"), nil
		})
		mcptest.JSONEq(t, w.do(modernReq(`"p1"`, "tools/call", `"name":"quick","arguments":{}`)),
			`{"jsonrpc":"2.0","id":"p1","result":{"resultType":"complete","content":[{"type":"text","text":"quick done"}],`+serverInfo+`}}`)
		mcptest.JSONEq(t, w.do(declared(`"p2"`, "tools/call", `"name":"echo","arguments":{"text":"hi"}`)),
			`{"jsonrpc":"2.0","id":"p2","result":{"resultType":"complete","content":[{"type":"text","text":"hi"}],`+serverInfo+`}}`)
		if st := w.s.TaskStats(); st.Created != 0 {
			t.Errorf("stats %+v", st)
		}
		disc := resultOf(t, w.do(modernReq(`"d"`, "server/discover", "")))
		caps, _ := disc["capabilities"].(map[string]any)
		ext, _ := caps["extensions"].(map[string]any)
		if _, ok := ext[mcp.ExtensionTasks]; !ok {
			t.Errorf("server/discover does not advertise the extension: %v", disc)
		}
		// 2026-07-28 tools/list has no execution field: the server decides.
		if l := w.do(modernReq(`"l"`, "tools/list", "")); strings.Contains(l, "taskSupport") {
			t.Errorf("tools/list: %s", l)
		}
	})
}

// -32021 (Missing Required Client Capability), naming the extension in
// data.requiredCapabilities: a tool that must run as a task called by a
// client that does not declare it, and tasks/* from such a request.
func TestWithoutTheExtensionARequiredToolAndTasksMethodsAreMissingCapability(t *testing.T) {
	runTasks(t, nil, func(w *taskWire) {
		g := addGated(w.s, "must", required)
		got := w.do(modernReq(`"c"`, "tools/call", `"name":"must","arguments":{}`))
		mcptest.JSONEq(t, got, `{"jsonrpc":"2.0","id":"c","error":{"code":-32021,
			"message":"Tool must must run as a task: the request's client capabilities must declare the io.modelcontextprotocol/tasks extension",
			"data":{"requiredCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}}}`)
		id := w.start("must", `{}`)
		for _, m := range []string{"tasks/get", "tasks/update", "tasks/cancel"} {
			e := errorOf(t, w.do(modernReq(`"x"`, m, taskParam(id)+`,"inputResponses":{}`)))
			ext, _ := e.Data["requiredCapabilities"].(map[string]any)["extensions"].(map[string]any)
			if _, ok := ext[mcp.ExtensionTasks]; e.Code != mcp.CodeMissingRequiredClientCapability || !ok {
				t.Errorf("%s without the extension: %+v", m, e)
			}
		}
		// Declaring it elsewhere than extensions does not count.
		odd := strings.Replace(extMeta, `"extensions":{"io.modelcontextprotocol/tasks":{}}`, `"io.modelcontextprotocol/tasks":{}`, 1)
		line := `{"jsonrpc":"2.0","id":"o","method":"tasks/get","params":{` + odd + `,` + taskParam(id) + `}}`
		if e := errorOf(t, w.do(line)); e.Code != mcp.CodeMissingRequiredClientCapability {
			t.Errorf("a capability outside extensions: %+v", e)
		}
		if st := w.get(id)["status"]; st != "working" {
			t.Errorf("status %v", st)
		}
		close(g.release)
	})
}

// -32602 for a task id that is unknown (never created, expired, or
// another's: the same answer), and for a request that names none.
func TestUnknownTaskIDsAreInvalidParams(t *testing.T) {
	runTasks(t, &server.TaskOptions{TTL: time.Minute}, func(w *taskWire) {
		g := addGated(w.s, "job", optional)
		for _, m := range []string{"tasks/get", "tasks/update", "tasks/cancel"} {
			got := w.do(declared(`"u"`, m, taskParam("no-such-task")+`,"inputResponses":{}`))
			mcptest.JSONEq(t, got, `{"jsonrpc":"2.0","id":"u","error":{"code":-32602,
				"message":"invalid params: unknown task \"no-such-task\" (never created, expired, or not yours)"}}`)
			for _, p := range []string{``, `"taskId":""`, `"taskId":7`} {
				if e := errorOf(t, w.do(declared(`"v"`, m, p))); e.Code != jsonrpc.CodeInvalidParams {
					t.Errorf("%s with %s: %+v", m, p, e)
				}
			}
		}
		// An ended task is forgotten TTL after it ended: then it is unknown.
		id := w.start("job", `{}`)
		close(g.release)
		w.Settle()
		w.Sleep(time.Minute - time.Second)
		if st := w.get(id)["status"]; st != "completed" {
			t.Fatalf("status %v", st)
		}
		w.Sleep(time.Second)
		if e := errorOf(t, w.do(declared(`"e"`, "tasks/get", taskParam(id)))); e.Code != jsonrpc.CodeInvalidParams {
			t.Errorf("an expired task: %+v", e)
		}
	})
}

// A task that asks for input is input_required, its requests inlined in
// tasks/get; tasks/update may answer some of them (the answered key leaves
// inputRequests, the task waits for the rest), answers to unknown or
// answered keys are ignored, and the acknowledgment is an empty result.
func TestATaskWaitsAsInputRequiredUntilTasksUpdateAnswersEveryRequest(t *testing.T) {
	runTasks(t, nil, func(w *taskWire) {
		schema := map[string]any{"type": "object", "properties": map[string]any{"name": map[string]any{"type": "string"}}}
		w.s.AddTool(mcp.Tool{Name: "survey", Execution: optional}, func(ctx context.Context, r *server.ToolRequest) (*mcp.ToolResult, error) {
			a, err := r.Ask(ctx, map[string]mcp.InputRequest{
				"first":  {Method: mcp.MethodElicit, Params: map[string]any{"message": "First?", "requestedSchema": schema}},
				"second": {Method: mcp.MethodElicit, Params: map[string]any{"message": "Second?", "requestedSchema": schema}},
			})
			if err != nil {
				return nil, err
			}
			return mcp.TextResult(string(a["first"]) + " " + string(a["second"])), nil
		})
		id := w.start("survey", `{}`)
		got := w.get(id)
		if got["status"] != "input_required" {
			t.Fatalf("status %v", got)
		}
		reqs, _ := json.Marshal(got["inputRequests"])
		mcptest.JSONEq(t, string(reqs), `{
			"first":{"method":"elicitation/create","params":{"message":"First?","requestedSchema":{"type":"object","properties":{"name":{"type":"string"}}}}},
			"second":{"method":"elicitation/create","params":{"message":"Second?","requestedSchema":{"type":"object","properties":{"name":{"type":"string"}}}}}}`)

		ack := w.update(id, `{"first":{"action":"accept","content":{"name":"A"}},"nonsense":{"action":"accept"}}`)
		mcptest.JSONEq(t, ack, `{"jsonrpc":"2.0","id":"r3","result":{"resultType":"complete",`+serverInfo+`}}`)
		got = w.get(id)
		if got["status"] != "input_required" || len(got["inputRequests"].(map[string]any)) != 1 || got["inputRequests"].(map[string]any)["second"] == nil {
			t.Fatalf("after a partial answer: %v", got)
		}
		// The same key again, and only unknown keys: ignored, acknowledged.
		for _, again := range []string{`{"first":{"action":"decline"}}`, `{"zzz":{"action":"accept"}}`, `{}`} {
			if r := resultOf(t, w.update(id, again)); len(r) != 2 || r["resultType"] != "complete" {
				t.Errorf("ack %v", r)
			}
		}
		if got = w.get(id); got["status"] != "input_required" {
			t.Fatalf("after ignored answers: %v", got)
		}
		w.update(id, `{"second":{"action":"accept","content":{"name":"B"}}}`)
		got = w.get(id)
		res, _ := json.Marshal(got["result"])
		if got["status"] != "completed" || got["inputRequests"] != nil ||
			!strings.Contains(string(res), `{\"action\":\"accept\",\"content\":{\"name\":\"A\"}} {\"action\":\"accept\",\"content\":{\"name\":\"B\"}}`) {
			t.Errorf("the answers did not reach the tool: %v", got)
		}
		// An answer once the task has ended is acknowledged and changes
		// nothing.
		w.update(id, `{"second":{"action":"decline"}}`)
		if got := w.get(id); got["status"] != "completed" {
			t.Errorf("after a late answer: %v", got)
		}
		// inputResponses that is not an object is invalid.
		if e := errorOf(t, w.update(id, `[1]`)); e.Code != jsonrpc.CodeInvalidParams {
			t.Errorf("inputResponses [1]: %+v", e)
		}
		if e := errorOf(t, w.do(declared(`"n"`, "tasks/update", taskParam(id)))); e.Code != jsonrpc.CodeInvalidParams {
			t.Errorf("no inputResponses: %+v", e)
		}
	})
}

// "Each request key in inputRequests MUST be unique over the lifetime of
// a single task": a handler that asks under the same key twice gets a new
// wire key the second time, and a repeated answer to the first key cannot
// be taken for the second question.
func TestAnInputKeyIsNeverUsedTwiceInATask(t *testing.T) {
	runTasks(t, nil, func(w *taskWire) {
		w.s.AddTool(mcp.Tool{Name: "twice", Execution: optional}, func(ctx context.Context, r *server.ToolRequest) (*mcp.ToolResult, error) {
			var got []string
			for _, q := range []string{"once?", "again?"} {
				res, err := r.Elicit(ctx, "confirm", q, map[string]any{"type": "object"})
				if err != nil {
					return nil, err
				}
				got = append(got, res.Action)
			}
			return mcp.TextResult(strings.Join(got, ",")), nil
		})
		id := w.start("twice", `{}`)
		if reqs := w.get(id)["inputRequests"].(map[string]any); reqs["confirm"] == nil || len(reqs) != 1 {
			t.Fatalf("first question %v", reqs)
		}
		w.update(id, `{"confirm":{"action":"accept"}}`)
		reqs := w.get(id)["inputRequests"].(map[string]any)
		if len(reqs) != 1 || reqs["confirm~2"] == nil || !strings.Contains(fmt.Sprint(reqs["confirm~2"]), "again?") {
			t.Fatalf("second question %v", reqs)
		}
		w.update(id, `{"confirm":{"action":"decline"}}`) // the first key, again: ignored
		if st := w.get(id)["status"]; st != "input_required" {
			t.Fatalf("a repeated answer to the first key was taken: %v", st)
		}
		w.update(id, `{"confirm~2":{"action":"decline"}}`)
		if got := w.get(id); got["status"] != "completed" || !strings.Contains(fmt.Sprint(got["result"]), "accept,decline") {
			t.Errorf("result %v", got)
		}
	})
}

// tasks/cancel stops the handler (its context ends with ErrTaskCancelled),
// the task is cancelled, and a cancel of an ended task is acknowledged
// the same way and changes nothing.
func TestTasksCancelStopsTheHandlerAndIsIdempotent(t *testing.T) {
	runTasks(t, nil, func(w *taskWire) {
		g := addGated(w.s, "job", optional)
		id := w.start("job", `{}`)
		mcptest.JSONEq(t, w.do(declared(`"c1"`, "tasks/cancel", taskParam(id))), `{"jsonrpc":"2.0","id":"c1","result":{"resultType":"complete",`+serverInfo+`}}`)
		w.Settle()
		select {
		case cause := <-g.causes:
			if !errors.Is(cause, server.ErrTaskCancelled) {
				t.Errorf("the handler's context ended with %v, want ErrTaskCancelled", cause)
			}
		default:
			t.Fatal("the handler was not stopped")
		}
		got := w.get(id)
		if got["status"] != "cancelled" || got["result"] != nil || got["error"] != nil {
			t.Errorf("after tasks/cancel: %v", got)
		}
		mcptest.JSONEq(t, w.do(declared(`"c2"`, "tasks/cancel", taskParam(id))), `{"jsonrpc":"2.0","id":"c2","result":{"resultType":"complete",`+serverInfo+`}}`)
		// A completed task stays completed.
		done := w.start("job", `{}`)
		close(g.release)
		w.Settle()
		mcptest.JSONEq(t, w.do(declared(`"c3"`, "tasks/cancel", taskParam(done))), `{"jsonrpc":"2.0","id":"c3","result":{"resultType":"complete",`+serverInfo+`}}`)
		if st := w.get(done)["status"]; st != "completed" {
			t.Errorf("a cancelled completed task: %v", st)
		}
		// A task waiting for input is cancelled just the same.
		w.s.AddTool(mcp.Tool{Name: "asks", Execution: optional}, func(ctx context.Context, r *server.ToolRequest) (*mcp.ToolResult, error) {
			_, err := r.Elicit(ctx, "k", "?", map[string]any{"type": "object"})
			g.causes <- err
			return nil, err
		})
		asking := w.start("asks", `{}`)
		w.cancel(asking)
		w.Settle()
		if err := <-g.causes; !errors.Is(err, server.ErrTaskCancelled) {
			t.Errorf("Elicit in a cancelled task returned %v", err)
		}
		if got := w.get(asking); got["status"] != "cancelled" || got["inputRequests"] != nil {
			t.Errorf("a cancelled waiting task: %v", got)
		}
		if st := w.s.TaskStats(); st.Cancelled != 2 || st.Completed != 1 || st.Failed != 0 || st.Running != 0 {
			t.Errorf("stats %+v", st)
		}
	})
}

// A tool's own failure is completed with result.isError (the task did
// not fail: the tool answered); a JSON-RPC error it returns fails the
// task with that error and no result.
func TestAToolErrorCompletesTheTaskAndAProtocolErrorFailsIt(t *testing.T) {
	runTasks(t, nil, func(w *taskWire) {
		w.s.AddTool(mcp.Tool{Name: "broken", Execution: optional}, func(context.Context, *server.ToolRequest) (*mcp.ToolResult, error) {
			return nil, errors.New("the disk is full")
		})
		w.s.AddTool(mcp.Tool{Name: "refuses", Execution: optional}, func(context.Context, *server.ToolRequest) (*mcp.ToolResult, error) {
			return nil, jsonrpc.NewError(-32050, "quota exceeded", map[string]any{"retryAfter": 60})
		})
		id := w.start("broken", `{}`)
		w.Settle()
		got, _ := json.Marshal(w.get(id))
		mcptest.JSONEq(t, string(got), `{"resultType":"complete","taskId":"`+id+`","status":"completed","createdAt":"`+epoch+`","lastUpdatedAt":"`+epoch+`",
			"ttlMs":3600000,"pollIntervalMs":1000,"result":{"content":[{"type":"text","text":"the disk is full"}],"isError":true},`+serverInfo+`}`)
		id = w.start("refuses", `{}`)
		w.Settle()
		got, _ = json.Marshal(w.get(id))
		mcptest.JSONEq(t, string(got), `{"resultType":"complete","taskId":"`+id+`","status":"failed","statusMessage":"quota exceeded","createdAt":"`+epoch+`","lastUpdatedAt":"`+epoch+`",
			"ttlMs":3600000,"pollIntervalMs":1000,"error":{"code":-32050,"message":"quota exceeded","data":{"retryAfter":60}},`+serverInfo+`}`)
		if st := w.s.TaskStats(); st.Completed != 1 || st.Failed != 1 {
			t.Errorf("stats %+v", st)
		}
	})
}

// A task handler that panics fails its task with a JSON-RPC error
// {code, message} and no result; the server goes on serving, and says
// where the panic was.
func TestAPanickingTaskFailsAndTheServerKeepsServing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var logs syncBuffer
		s := mcptest.NewServer(&server.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		s.AddTool(mcp.Tool{Name: "crash", Execution: required}, func(context.Context, *server.ToolRequest) (*mcp.ToolResult, error) {
			panicInATask()
			return nil, nil
		})
		wire := wiretest.Start(t, s.Handler(), s.ConnOptions(nil), true)
		defer wire.Finish()
		defer s.Shutdown(context.Background())
		w := &taskWire{Wire: wire, t: t, s: s}
		id := w.start("crash", `{}`)
		w.Settle()
		got := w.get(id)
		e, _ := got["error"].(map[string]any)
		if got["status"] != "failed" || got["result"] != nil || e["code"] != float64(jsonrpc.CodeInternalError) ||
			!strings.Contains(fmt.Sprint(e["message"]), "a deliberate crash") {
			t.Errorf("a panicked task: %v", got)
		}
		mcptest.JSONEq(t, w.do(declared(`"e"`, "tools/call", `"name":"echo","arguments":{"text":"still here"}`)),
			`{"jsonrpc":"2.0","id":"e","result":{"resultType":"complete","content":[{"type":"text","text":"still here"}],`+serverInfo+`}}`)
		if st := s.TaskStats(); st.Panics != 1 || st.Failed != 1 || st.Running != 0 {
			t.Errorf("stats %+v", st)
		}
		if l := logs.String(); !strings.Contains(l, "a task handler panicked") || !strings.Contains(l, "panicInATask") {
			t.Errorf("the log does not say where the task panicked: %s", l)
		}
	})
}

//go:noinline
func panicInATask() { panic("a deliberate crash") }

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// Once a call runs as a task nothing more goes to its request: Progress
// and Log send nothing, and SetStatusMessage is what tasks/get shows.
func TestATaskTellsHowItGoesThroughItsStatusMessageOnly(t *testing.T) {
	runTasks(t, nil, func(w *taskWire) {
		step := make(chan struct{})
		w.s.AddTool(mcp.Tool{Name: "report", Execution: optional}, func(ctx context.Context, r *server.ToolRequest) (*mcp.ToolResult, error) {
			if err := r.Progress(1, 2, "half"); err != nil {
				return nil, err
			}
			if sent, _ := r.Log("error", "t", "loud"); sent {
				return nil, errors.New("logged on a finished request")
			}
			if err := r.SetStatusMessage("halfway there"); err != nil {
				return nil, err
			}
			<-step
			return mcp.TextResult("reported"), nil
		})
		call := `{"jsonrpc":"2.0","id":"p","method":"tools/call","params":{` + strings.TrimSuffix(extMeta, "}") +
			`,"progressToken":"tok","io.modelcontextprotocol/logLevel":"debug"},"name":"report","arguments":{}}}`
		lines := w.Exchange(call)
		if len(lines) != 1 {
			t.Fatalf("lines after the task started: %q", lines)
		}
		id := createdTask(t, lines[0])
		w.Sleep(time.Second) // a status message is written within a quarter of a second
		if got := w.get(id); got["statusMessage"] != "halfway there" || got["status"] != "working" {
			t.Errorf("tasks/get %v", got)
		}
		close(step)
		if got := w.Take(); len(got) != 0 {
			t.Errorf("sent on the request after it was answered: %q", got)
		}
		if got := w.get(id); got["status"] != "completed" || got["statusMessage"] != "halfway there" {
			t.Errorf("tasks/get %v", got)
		}
	})
}

// DeferTask: the tool gathers input in the request's own rounds first
// (input_required, no task yet), then becomes a task when it calls
// StartTask (a CreateTaskResult, no requestState), and its result
// reflects the answer.
func TestADeferredTaskGathersInputInTheRequestThenBecomesATask(t *testing.T) {
	runTasks(t, nil, func(w *taskWire) {
		g := make(chan struct{})
		w.s.AddTool(mcp.Tool{Name: "greeter", Execution: &mcp.ToolExecution{TaskSupport: mcp.TaskRequired, DeferTask: true}},
			func(ctx context.Context, r *server.ToolRequest) (*mcp.ToolResult, error) {
				r.SetState([]byte("asked"))
				res, err := r.Elicit(ctx, "user_name", "Your name?", map[string]any{"type": "object", "properties": map[string]any{"name": map[string]any{"type": "string"}}})
				if err != nil {
					return nil, err
				}
				if string(r.State()) != "asked" {
					return nil, errors.New("state lost")
				}
				if ctx, err = r.StartTask(ctx); err != nil {
					return nil, err
				}
				select {
				case <-g:
				case <-ctx.Done():
					return nil, ctx.Err()
				}
				return mcp.TextResult("Hello, " + res.Content["name"].(string) + ", from a task."), nil
			})
		first := resultOf(t, w.call("greeter", `{}`))
		reqs, _ := first["inputRequests"].(map[string]any)
		state, _ := first["requestState"].(string)
		if first["resultType"] != "input_required" || reqs["user_name"] == nil || first["taskId"] != nil || state == "" {
			t.Fatalf("the first round: %v", first)
		}
		if st := w.s.TaskStats(); st.Created != 0 {
			t.Fatalf("a task before StartTask: %+v", st)
		}
		second := w.do(declared(`"two"`, "tools/call", `"name":"greeter","arguments":{},"requestState":"`+state+`",`+
			`"inputResponses":{"user_name":{"action":"accept","content":{"name":"Ada"}}}`))
		id := createdTask(t, second)
		if r := resultOf(t, second); r["requestState"] != nil || r["inputRequests"] != nil {
			t.Errorf("a CreateTaskResult with round fields: %s", second)
		}
		if st := w.get(id)["status"]; st != "working" {
			t.Errorf("status %v", st)
		}
		close(g)
		w.Settle()
		if got := w.get(id); got["status"] != "completed" || !strings.Contains(fmt.Sprint(got["result"]), "Hello, Ada, from a task.") {
			t.Errorf("the task's result %v", got)
		}
	})
}

// MaxRunning: with every slot taken, a tool that may run as a task runs
// in its request instead, and one that must is refused (-32000), counted.
func TestAtMaxRunningAnOptionalToolRunsInItsRequestAndARequiredOneIsRefused(t *testing.T) {
	runTasks(t, &server.TaskOptions{MaxRunning: 1}, func(w *taskWire) {
		g := addGated(w.s, "hold", optional)
		w.s.AddTool(mcp.Tool{Name: "quick", Execution: optional}, func(context.Context, *server.ToolRequest) (*mcp.ToolResult, error) {
			return mcp.TextResult("in the request"), nil
		})
		addGated(w.s, "must", required)
		held := w.start("hold", `{}`)
		mcptest.JSONEq(t, w.do(declared(`"q"`, "tools/call", `"name":"quick","arguments":{}`)),
			`{"jsonrpc":"2.0","id":"q","result":{"resultType":"complete","content":[{"type":"text","text":"in the request"}],`+serverInfo+`}}`)
		mcptest.JSONEq(t, w.do(declared(`"m"`, "tools/call", `"name":"must","arguments":{}`)),
			`{"jsonrpc":"2.0","id":"m","error":{"code":-32000,"message":"server busy: cannot start a task now (1 tasks running, the most allowed)","data":{"reason":"tasks_unavailable"}}}`)
		if st := w.s.TaskStats(); st.Refused != 2 || st.Running != 1 || st.Created != 1 {
			t.Errorf("stats %+v", st)
		}
		close(g.release)
		w.Settle()
		if st := w.get(held)["status"]; st != "completed" {
			t.Fatalf("status %v", st)
		}
		w.start("quick", `{}`) // the slot is free again
	})
}

// A store that refuses a task (full of live tasks) is MaxRunning's case
// again: in the request, or -32000.
func TestAFullStoreRunsAnOptionalToolInItsRequest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := tasks.NewMemory(&tasks.MemoryOptions{MaxTasks: 1, Logger: wiretest.Quiet})
		s := mcptest.NewServer(&server.Options{Tasks: &server.TaskOptions{Store: store}, Logger: wiretest.Quiet})
		g := addGated(s, "hold", optional)
		addGated(s, "must", required)
		s.AddTool(mcp.Tool{Name: "quick", Execution: optional}, func(context.Context, *server.ToolRequest) (*mcp.ToolResult, error) {
			return mcp.TextResult("in the request"), nil
		})
		wire := wiretest.Start(t, s.Handler(), s.ConnOptions(nil), true)
		defer wire.Finish()
		defer s.Shutdown(context.Background())
		w := &taskWire{Wire: wire, t: t, s: s}
		w.start("hold", `{}`)
		if e := errorOf(t, w.call("must", `{}`)); e.Code != jsonrpc.CodeServerBusy {
			t.Errorf("a required tool with the store full: %+v", e)
		}
		if r := resultOf(t, w.call("quick", `{}`)); r["resultType"] != "complete" || !strings.Contains(fmt.Sprint(r["content"]), "in the request") {
			t.Errorf("an optional tool with the store full: %v", r)
		}
		if st := s.TaskStats(); st.Refused != 2 || st.Running != 1 || st.Created != 1 {
			t.Errorf("stats %+v", st)
		}
		if st := store.Stats(); st.Refused != 2 {
			t.Errorf("store stats %+v", st)
		}
		close(g.release)
	})
}

// Server.Shutdown stops the running task handlers (their context ends
// with ErrServerShutdown), marks their tasks failed, and returns once they
// have ended; later calls run in their request, or are refused.
func TestShutdownStopsTheRunningTasksAndReturns(t *testing.T) {
	runTasks(t, nil, func(w *taskWire) {
		g := addGated(w.s, "job", optional)
		w.s.AddTool(mcp.Tool{Name: "waits", Execution: optional}, func(ctx context.Context, r *server.ToolRequest) (*mcp.ToolResult, error) {
			_, err := r.Elicit(ctx, "k", "?", map[string]any{"type": "object"})
			return nil, err
		})
		a, b := w.start("job", `{}`), w.start("waits", `{}`)
		if st := w.s.TaskStats(); st.Running != 2 {
			t.Fatalf("stats %+v", st)
		}
		if err := w.s.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
		if st := w.s.TaskStats(); st.Running != 0 || st.Failed != 2 {
			t.Errorf("after Shutdown: %+v", st)
		}
		if cause := <-g.causes; !errors.Is(cause, server.ErrServerShutdown) {
			t.Errorf("the handler's context ended with %v", cause)
		}
		for _, id := range []string{a, b} {
			got := w.get(id)
			e, _ := got["error"].(map[string]any)
			if got["status"] != "failed" || e["code"] != float64(jsonrpc.CodeInternalError) {
				t.Errorf("a task stopped by Shutdown: %v", got)
			}
		}
		if r := resultOf(t, w.call("echo", `{"text":"after"}`)); r["resultType"] != "complete" {
			t.Errorf("a plain tool after Shutdown: %v", r)
		}
		addGated(w.s, "must", required)
		if e := errorOf(t, w.call("must", `{}`)); e.Code != jsonrpc.CodeServerBusy {
			t.Errorf("a required tool after Shutdown: %+v", e)
		}
		close(g.release)
		if r := resultOf(t, w.call("job", `{}`)); r["resultType"] != "complete" {
			t.Errorf("an optional tool after Shutdown: %v", r)
		}
	})
}

// Shutdown waits for the handlers only until its context is done.
func TestShutdownGivesUpAtItsContextsDeadline(t *testing.T) {
	runTasks(t, nil, func(w *taskWire) {
		stubborn := make(chan struct{})
		w.s.AddTool(mcp.Tool{Name: "stubborn", Execution: optional}, func(ctx context.Context, r *server.ToolRequest) (*mcp.ToolResult, error) {
			<-stubborn // ignores its context
			return mcp.TextResult("finally"), nil
		})
		id := w.start("stubborn", `{}`)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		start := time.Now()
		if err := w.s.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Shutdown: %v, want DeadlineExceeded", err)
		}
		if d := time.Since(start); d != 5*time.Second {
			t.Errorf("Shutdown returned after %v", d)
		}
		close(stubborn)
		w.Settle()
		// What a handler returns after Shutdown is its task's outcome.
		if got := w.get(id); got["status"] != "completed" {
			t.Errorf("status %v", got)
		}
	})
}

// gatedStore is a store whose Create waits for the test.
type gatedStore struct {
	tasks.Store
	entered chan struct{}
	gate    chan struct{}
}

func (g *gatedStore) Create(ctx context.Context, t *tasks.Task) error {
	close(g.entered)
	<-g.gate
	return g.Store.Create(ctx, t)
}

// Regression: StartTask counted a task in the wait group Shutdown waits
// on only after the store had created it, so a Shutdown while the store
// was creating one returned at once (a WaitGroup Add racing its Wait),
// and the handler ran on after it. Shutdown waits for it.
func TestShutdownWaitsForATaskTheStoreIsStillCreating(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := &gatedStore{Store: tasks.NewMemory(&tasks.MemoryOptions{Logger: wiretest.Quiet}), entered: make(chan struct{}), gate: make(chan struct{})}
		s := mcptest.NewServer(&server.Options{Tasks: &server.TaskOptions{Store: store}, Logger: wiretest.Quiet})
		g := addGated(s, "job", optional)
		wire := wiretest.Start(t, s.Handler(), s.ConnOptions(nil), true)
		defer wire.Finish()
		wire.Send(declared(`"c"`, "tools/call", `"name":"job","arguments":{}`))
		<-store.entered
		shut := make(chan error, 1)
		go func() { shut <- s.Shutdown(context.Background()) }()
		synctest.Wait()
		returned := false
		select {
		case err := <-shut:
			t.Errorf("Shutdown returned (%v) while a task was being created", err)
			returned = true
		default:
		}
		close(store.gate)
		if !returned {
			if err := <-shut; err != nil {
				t.Fatal(err)
			}
		}
		synctest.Wait()
		if cause := <-g.causes; !errors.Is(cause, server.ErrServerShutdown) {
			t.Errorf("the handler's context ended with %v", cause)
		}
		if st := s.TaskStats(); st.Running != 0 {
			t.Errorf("stats after Shutdown %+v", st)
		}
		id := createdTask(t, mcptest.One(t, wire.Take()))
		w := &taskWire{Wire: wire, t: t, s: s}
		if got := w.get(id); got["status"] != "failed" {
			t.Errorf("the task %v", got)
		}
	})
}

// TaskStats counts what the tasks came to.
func TestTaskStatsCountWhatTheTasksCameTo(t *testing.T) {
	runTasks(t, &server.TaskOptions{MaxRunning: 2}, func(w *taskWire) {
		g := addGated(w.s, "job", optional)
		w.s.AddTool(mcp.Tool{Name: "crash", Execution: optional}, func(context.Context, *server.ToolRequest) (*mcp.ToolResult, error) {
			panic("boom")
		})
		w.s.AddTool(mcp.Tool{Name: "quick", Execution: optional}, func(context.Context, *server.ToolRequest) (*mcp.ToolResult, error) {
			return mcp.TextResult("ok"), nil
		})
		w.start("quick", `{}`)
		w.start("crash", `{}`)
		cancelled := w.start("job", `{}`)
		w.start("job", `{}`)
		w.Settle()
		if st := w.s.TaskStats(); st != (server.TaskStats{Created: 4, Running: 2, Completed: 1, Failed: 1, Panics: 1}) {
			t.Errorf("stats %+v", st)
		}
		resultOf(t, w.call("quick", `{}`)) // refused a task: runs in the request
		w.cancel(cancelled)
		w.Settle()
		close(g.release)
		w.Settle()
		if st := w.s.TaskStats(); st != (server.TaskStats{Created: 4, Running: 0, Completed: 2, Failed: 1, Cancelled: 1, Refused: 1, Panics: 1}) {
			t.Errorf("stats %+v", st)
		}
	})
}

// ----- over Streamable HTTP -----

// poster sends raw JSON-RPC bodies as 2026-07-28 POSTs, with the headers
// that mirror the body (Mcp-Method; Mcp-Name from params.name or, for
// tasks/*, params.taskId); extra headers override them ("" removes one).
type poster func(body string, extra map[string]string) (status int, reply string)

func postHeaders(body string, extra map[string]string) http.Header {
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set("Accept", "application/json, text/event-stream")
	h.Set(mcp.HeaderProtocolVersion, mcp.LatestVersion)
	var m struct {
		Method string `json:"method"`
		Params struct {
			Name   string `json:"name"`
			TaskID string `json:"taskId"`
		} `json:"params"`
	}
	json.Unmarshal([]byte(body), &m)
	h.Set(mcp.HeaderMethod, m.Method)
	if m.Params.Name != "" {
		h.Set(mcp.HeaderName, m.Params.Name)
	} else if m.Params.TaskID != "" {
		h.Set(mcp.HeaderName, m.Params.TaskID)
	}
	for k, v := range extra {
		if v == "" {
			h.Del(k)
		} else {
			h.Set(k, v)
		}
	}
	return h
}

// lastMessage is the JSON-RPC message of a JSON body, or the last one of
// an event stream.
func lastMessage(contentType, body string) string {
	if !strings.HasPrefix(contentType, "text/event-stream") {
		return strings.TrimSpace(body)
	}
	last := ""
	for _, l := range strings.Split(body, "\n") {
		if d, ok := strings.CutPrefix(l, "data: "); ok {
			last = d
		}
	}
	return last
}

// inProcess posts to h by calling it (inside a synctest bubble).
func inProcess(ctx context.Context, h http.Handler) poster {
	return func(body string, extra map[string]string) (int, string) {
		req := httptest.NewRequestWithContext(ctx, http.MethodPost, "http://localhost/mcp", strings.NewReader(body))
		req.Header = postHeaders(body, extra)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code, lastMessage(rec.Header().Get("Content-Type"), rec.Body.String())
	}
}

// overTheNetwork posts to url with a real client, each POST a request of
// its own.
func overTheNetwork(t *testing.T, url string) poster {
	return func(body string, extra map[string]string) (int, string) {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header = postHeaders(body, extra)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, lastMessage(resp.Header.Get("Content-Type"), string(b))
	}
}

// statuses follows a store's events, so that a test over the network
// can wait for a task's status without polling.
type statuses struct {
	mu      sync.Mutex
	seen    map[string]tasks.Status
	changed chan struct{}
}

func followStatuses(t *testing.T, store tasks.Store) *statuses {
	st := &statuses{seen: map[string]tasks.Status{}, changed: make(chan struct{})}
	stop, err := store.Subscribe(context.Background(), func(ev tasks.Event) {
		st.mu.Lock()
		st.seen[ev.Task.ID] = ev.Task.Status
		close(st.changed)
		st.changed = make(chan struct{})
		st.mu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	return st
}

func (st *statuses) waitFor(t *testing.T, id string, want tasks.Status) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		st.mu.Lock()
		got, ch := st.seen[id], st.changed
		st.mu.Unlock()
		if got == want {
			return
		}
		select {
		case <-ch:
		case <-timeout:
			t.Fatalf("task %s is %q, never %q", id, got, want)
		}
	}
}

// A task outlives the POST that created it: it is polled, answered and
// cancelled through other POSTs, each carrying the task's id in Mcp-Name;
// an Mcp-Name that is not the body's taskId is 400 with -32020.
func TestATaskSurvivesItsCreatingHTTPRequest(t *testing.T) {
	store := tasks.NewMemory(&tasks.MemoryOptions{Logger: wiretest.Quiet})
	s := mcptest.NewServer(&server.Options{Tasks: &server.TaskOptions{Store: store}, Logger: wiretest.Quiet})
	t.Cleanup(func() { s.Shutdown(context.Background()) })
	seen := followStatuses(t, store)
	s.AddTool(mcp.Tool{Name: "confirm_delete", Execution: optional}, func(ctx context.Context, r *server.ToolRequest) (*mcp.ToolResult, error) {
		res, err := r.Elicit(ctx, "confirm", "Delete it?", map[string]any{"type": "object", "properties": map[string]any{"ok": map[string]any{"type": "boolean"}}})
		if err != nil {
			return nil, err
		}
		return mcp.TextResult("deleted: " + fmt.Sprint(res.Content["ok"])), nil
	})
	url, _ := mcptest.StartHTTP(t, s, nil)
	post := overTheNetwork(t, url)

	status, created := post(declared(`1`, "tools/call", `"name":"confirm_delete","arguments":{}`), nil)
	id := createdTask(t, created)
	if status != http.StatusOK {
		t.Fatalf("tools/call: %d %s", status, created)
	}
	seen.waitFor(t, id, tasks.InputRequired)
	_, got := post(declared(`2`, "tasks/get", taskParam(id)), nil)
	if r := resultOf(t, got); r["status"] != "input_required" || r["inputRequests"].(map[string]any)["confirm"] == nil {
		t.Fatalf("tasks/get: %s", got)
	}
	// The header must mirror the body's taskId: another id, or none, is a
	// header mismatch, and nothing is done.
	for _, extra := range []map[string]string{{mcp.HeaderName: "some-other-task"}, {mcp.HeaderName: ""}} {
		status, got := post(declared(`3`, "tasks/update", taskParam(id)+`,"inputResponses":{"confirm":{"action":"accept","content":{"ok":false}}}`), extra)
		if e := errorOf(t, got); status != http.StatusBadRequest || e.Code != mcp.CodeHeaderMismatch {
			t.Errorf("Mcp-Name %q: %d %s", extra[mcp.HeaderName], status, got)
		}
	}
	status, got = post(declared(`4`, "tasks/update", taskParam(id)+`,"inputResponses":{"confirm":{"action":"accept","content":{"ok":true}}}`), nil)
	if r := resultOf(t, got); status != http.StatusOK || r["resultType"] != "complete" || r["taskId"] != nil {
		t.Fatalf("tasks/update: %d %s", status, got)
	}
	seen.waitFor(t, id, tasks.Completed)
	_, got = post(declared(`5`, "tasks/get", taskParam(id)), nil)
	if r := resultOf(t, got); r["status"] != "completed" || !strings.Contains(got, `"text":"deleted: true"`) {
		t.Errorf("tasks/get: %s", got)
	}

	// Another, cancelled through a POST of its own.
	_, created = post(declared(`6`, "tools/call", `"name":"confirm_delete","arguments":{}`), nil)
	other := createdTask(t, created)
	seen.waitFor(t, other, tasks.InputRequired)
	if status, got := post(declared(`7`, "tasks/cancel", taskParam(other)), map[string]string{mcp.HeaderName: id}); status != http.StatusBadRequest {
		t.Errorf("tasks/cancel naming another task in Mcp-Name: %d %s", status, got)
	}
	status, got = post(declared(`8`, "tasks/cancel", taskParam(other)), nil)
	if r := resultOf(t, got); status != http.StatusOK || r["resultType"] != "complete" {
		t.Fatalf("tasks/cancel: %d %s", status, got)
	}
	_, got = post(declared(`9`, "tasks/get", taskParam(other)), nil)
	if r := resultOf(t, got); r["status"] != "cancelled" {
		t.Errorf("tasks/get after cancel: %s", got)
	}
	// The cancelled handler returns after tasks/cancel is answered (the
	// cancellation is cooperative): its slot is given back then.
	// Regression: the test read Running before that, and failed now and
	// then.
	st := s.TaskStats()
	for deadline := time.Now().Add(10 * time.Second); st.Running != 0 && time.Now().Before(deadline); st = s.TaskStats() {
		runtime.Gosched()
	}
	if st.Running != 0 || st.Completed != 1 || st.Cancelled != 1 {
		t.Errorf("stats %+v", st)
	}
}

// subjects is a verifier that knows each token as the subject of its name.
var subjects = auth.VerifierFunc(func(_ context.Context, token string) (*auth.Identity, error) {
	switch token {
	case "alice", "bob":
		return &auth.Identity{Subject: token, Issuer: "https://auth.example.com"}, nil
	}
	return nil, fmt.Errorf("%w: %q", auth.ErrInvalidToken, token)
})

// On a protected endpoint a task is bound to the identity that created
// it: to anyone else its id is unknown (-32602, as if it did not exist),
// for tasks/get, tasks/update and tasks/cancel alike.
func TestATaskIsUnknownToAnyoneButTheSubjectThatCreatedIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := mcptest.NewServer(&server.Options{Logger: wiretest.Quiet})
		defer s.Shutdown(context.Background())
		s.AddTool(mcp.Tool{Name: "asks", Execution: optional}, func(ctx context.Context, r *server.ToolRequest) (*mcp.ToolResult, error) {
			res, err := r.Elicit(ctx, "k", "?", map[string]any{"type": "object"})
			if err != nil {
				return nil, err
			}
			return mcp.TextResult("answered " + res.Action + " for " + auth.IdentityFrom(ctx).Subject), nil
		})
		h := streamable.NewHandler(s, &streamable.Options{Logger: wiretest.Quiet, Protect: &streamable.Protection{
			Verifier: subjects, Metadata: auth.ProtectedResourceMetadata{Resource: "https://mcp.example.com/mcp"}}})
		defer h.Shutdown(context.Background())
		post := inProcess(t.Context(), h)
		as := func(who string) map[string]string { return map[string]string{"Authorization": "Bearer " + who} }

		_, created := post(declared(`1`, "tools/call", `"name":"asks","arguments":{}`), as("alice"))
		id := createdTask(t, created)
		synctest.Wait()
		for _, m := range []string{"tasks/get", "tasks/update", "tasks/cancel"} {
			status, got := post(declared(`2`, m, taskParam(id)+`,"inputResponses":{"k":{"action":"decline"}}`), as("bob"))
			if e := errorOf(t, got); e.Code != jsonrpc.CodeInvalidParams || !strings.Contains(e.Message, "unknown task") {
				t.Errorf("%s by bob: %d %s", m, status, got)
			}
		}
		if status, _ := post(declared(`3`, "tasks/get", taskParam(id)), nil); status != http.StatusUnauthorized {
			t.Errorf("tasks/get without a token: %d", status)
		}
		_, got := post(declared(`4`, "tasks/get", taskParam(id)), as("alice"))
		if r := resultOf(t, got); r["status"] != "input_required" {
			t.Fatalf("alice's tasks/get: %s", got)
		}
		post(declared(`5`, "tasks/update", taskParam(id)+`,"inputResponses":{"k":{"action":"accept"}}`), as("alice"))
		synctest.Wait()
		_, got = post(declared(`6`, "tasks/get", taskParam(id)), as("alice"))
		if r := resultOf(t, got); r["status"] != "completed" || !strings.Contains(got, "answered accept for alice") {
			t.Errorf("alice's task after her answer: %s", got)
		}
	})
}

// Over HTTP in a bubble: the same CreateTaskResult, and a required tool
// still needs the extension.
func TestOverHTTPATaskIsCreatedAndAnsweredLikeOnAStream(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := mcptest.NewServer(&server.Options{Logger: wiretest.Quiet, Tasks: &server.TaskOptions{PollInterval: 2 * time.Second}})
		defer s.Shutdown(context.Background())
		g := addGated(s, "must", required)
		h := streamable.NewHandler(s, &streamable.Options{Logger: wiretest.Quiet})
		defer h.Shutdown(context.Background())
		post := inProcess(t.Context(), h)
		status, got := post(modernReq(`1`, "tools/call", `"name":"must","arguments":{}`), nil)
		if e := errorOf(t, got); e.Code != mcp.CodeMissingRequiredClientCapability {
			t.Errorf("without the extension: %d %s", status, got)
		}
		status, created := post(declared(`2`, "tools/call", `"name":"must","arguments":{}`), nil)
		id := createdTask(t, created)
		mcptest.JSONEq(t, created, `{"jsonrpc":"2.0","id":2,"result":{"resultType":"task","taskId":"`+id+`","status":"working",
			"createdAt":"`+epoch+`","lastUpdatedAt":"`+epoch+`","ttlMs":3600000,"pollIntervalMs":2000,`+serverInfo+`}}`)
		if status != http.StatusOK {
			t.Errorf("status %d", status)
		}
		close(g.release)
		synctest.Wait()
		_, got = post(declared(`3`, "tasks/get", taskParam(id)), nil)
		if r := resultOf(t, got); r["status"] != "completed" {
			t.Errorf("tasks/get: %s", got)
		}
	})
}
