package gopeers_test

// mcp-go's client against an agentwire server: the 2025-11-25 tasks
// (params.task, tasks/get, tasks/result, tasks/list, tasks/cancel) over
// stdio and over Streamable HTTP, and what mcp-go's client meets when it
// negotiates 2026-07-28 with the same server.

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentwire/agentwire/internal/fixtures"
	"github.com/agentwire/agentwire/jsonrpc"
	"github.com/agentwire/agentwire/mcp"
	"github.com/agentwire/agentwire/mcp/server"
	"github.com/agentwire/agentwire/mcp/streamable"
	"github.com/agentwire/agentwire/stdio"
	mcpclient "github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	mcpgo "github.com/mark3labs/mcp-go/mcp"
)

// awServer is an agentwire server with the conformance fixtures (among
// them the tasks-* scenarios' tools: slow_compute, failing_job,
// protocol_error_job, greet) and two tools of this file's: interop_wait,
// which runs until its task is cancelled and tells why it ended, and
// interop_rpc_error, which fails with a *jsonrpc.Error of its own.
type awServer struct {
	srv     *server.Server
	started chan struct{} // an interop_wait handler has started
	causes  chan error    // why each interop_wait handler's context ended
}

// rpcErrorCode and rpcErrorMessage are what interop_rpc_error fails with.
const (
	rpcErrorCode    = -32077 // an implementation-defined server error (-32042 is MCP's URL elicitation)
	rpcErrorMessage = "interop: the backend refused the job"
)

func newAgentwireServer(t *testing.T) *awServer {
	aw := &awServer{started: make(chan struct{}, 16), causes: make(chan error, 16)}
	aw.srv = server.New(mcp.Implementation{Name: "agentwire-interop", Version: "1.0.0"}, &server.Options{
		Logger: quiet,
		// mcp-go's WaitForTask polls at the interval the server gives.
		Tasks: &server.TaskOptions{PollInterval: 20 * time.Millisecond},
	})
	fixtures.Conformance(aw.srv)
	server.AddTool(aw.srv, mcp.Tool{Name: "interop_wait", Description: "Runs until cancelled.",
		Execution: &mcp.ToolExecution{TaskSupport: mcp.TaskOptional}},
		func(ctx context.Context, r *server.ToolRequest, _ struct{}) (*mcp.ToolResult, error) {
			r.SetStatusMessage("waiting to be cancelled")
			aw.started <- struct{}{}
			<-ctx.Done()
			aw.causes <- context.Cause(ctx)
			return nil, ctx.Err()
		})
	server.AddTool(aw.srv, mcp.Tool{Name: "interop_rpc_error", Description: "Fails with a protocol error of its own.",
		Execution: &mcp.ToolExecution{TaskSupport: mcp.TaskRequired}},
		func(ctx context.Context, r *server.ToolRequest, _ struct{}) (*mcp.ToolResult, error) {
			return nil, jsonrpc.NewError(rpcErrorCode, rpcErrorMessage, map[string]any{"retryable": false})
		})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := aw.srv.Shutdown(ctx); err != nil {
			t.Errorf("server shutdown: %v", err)
		}
	})
	return aw
}

// mcpgoTransport connects an mcp-go client to an agentwire server.
type mcpgoTransport struct {
	name    string
	connect func(t *testing.T, srv *server.Server, tr *transcript, opts ...mcpclient.ClientOption) *mcpclient.Client
}

var mcpgoTransports = []mcpgoTransport{
	{"stdio", mcpgoOverStdio},
	{"http", mcpgoOverHTTP},
}

// mcpgoOverStdio serves srv with ServeStdio on in-process pipes, and puts
// mcp-go's stdio transport on their other ends.
func mcpgoOverStdio(t *testing.T, srv *server.Server, tr *transcript, opts ...mcpclient.ClientOption) *mcpclient.Client {
	serverIn, clientOut := io.Pipe()
	clientIn, serverOut := io.Pipe()
	conn, err := srv.ServeStdio(&stdio.Config{Stdin: serverIn, Stdout: tapWriter{serverOut, "<-", tr}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	tp := transport.NewIO(clientIn, tapWriteCloser{tapWriter{clientOut, "->", tr}, clientOut}, io.NopCloser(strings.NewReader("")))
	c := mcpclient.NewClient(tp, opts...)
	if err := c.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.Close() // the server's input ends
		conn.Wait()
		serverOut.Close() // and then the client's
		serverIn.Close()
	})
	return c
}

// mcpgoOverHTTP serves srv with streamable.NewHandler on an httptest
// server and connects mcp-go's Streamable HTTP transport to it.
func mcpgoOverHTTP(t *testing.T, srv *server.Server, tr *transcript, opts ...mcpclient.ClientOption) *mcpclient.Client {
	h := streamable.NewHandler(srv, nil)
	web := httptest.NewServer(tapHandler(h, tr))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		h.Shutdown(ctx)
		web.Close()
	})
	tp, err := transport.NewStreamableHTTP(web.URL + "/mcp")
	if err != nil {
		t.Fatal(err)
	}
	c := mcpclient.NewClient(tp, opts...)
	if err := c.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func initialize(t *testing.T, ctx context.Context, c *mcpclient.Client) *mcpgo.InitializeResult {
	t.Helper()
	res, err := c.Initialize(ctx, mcpgo.InitializeRequest{Params: mcpgo.InitializeParams{
		ClientInfo: mcpgo.Implementation{Name: "mcp-go-interop", Version: "1.2.1"},
	}})
	if err != nil {
		t.Fatalf("initialize: %v", err)
	}
	return res
}

// raw sends a request through the client's transport as it is: for what
// mcp-go's client has no method of its own for, and to see error codes
// (its typed methods keep only the standard ones).
func raw(ctx context.Context, c *mcpclient.Client, method string, params any) (json.RawMessage, error) {
	resp, err := c.GetTransport().SendRequest(ctx, transport.JSONRPCRequest{
		JSONRPC: mcpgo.JSONRPC_VERSION, ID: mcpgo.NewRequestId(rawID()), Method: method, Params: params,
	})
	if err != nil {
		return nil, err
	}
	if resp.Error != nil {
		e := &rawError{Code: int64(resp.Error.Code), Message: resp.Error.Message}
		if resp.Error.Data != nil {
			e.Data, _ = json.Marshal(resp.Error.Data)
		}
		return nil, e
	}
	return resp.Result, nil
}

// startTask calls a tool as a task (params.task) and returns the task the
// server created, decoded as mcp-go decodes a CreateTaskResult.
func startTask(t *testing.T, ctx context.Context, c *mcpclient.Client, tool string, args map[string]any) mcpgo.Task {
	t.Helper()
	ttl := int64(60_000)
	res, err := raw(ctx, c, "tools/call", mcpgo.CallToolParams{Name: tool, Arguments: args, Task: &mcpgo.TaskParams{TTL: &ttl}})
	if err != nil {
		t.Fatalf("tools/call %s as a task: %v", tool, err)
	}
	var created mcpgo.CreateTaskResult
	if err := json.Unmarshal(res, &created); err != nil {
		t.Fatalf("CreateTaskResult %s: %v", res, err)
	}
	task := created.Task
	if task.TaskId == "" || task.Status != mcpgo.TaskStatusWorking {
		t.Fatalf("CreateTaskResult %s: want a working task with an id", res)
	}
	if task.TTL == nil || *task.TTL != ttl {
		t.Errorf("CreateTaskResult %s: ttl %v, want the %d asked for", res, task.TTL, ttl)
	}
	if task.PollInterval == nil || *task.PollInterval != 20 {
		t.Errorf("CreateTaskResult %s: pollInterval %v, want 20", res, task.PollInterval)
	}
	for _, ts := range []string{task.CreatedAt, task.LastUpdatedAt} {
		if _, err := time.Parse(time.RFC3339, ts); err != nil {
			t.Errorf("CreateTaskResult %s: timestamp %q: %v", res, ts, err)
		}
	}
	return task
}

func waitTask(t *testing.T, ctx context.Context, c *mcpclient.Client, id string) *mcpgo.GetTaskResult {
	t.Helper()
	res, err := c.WaitForTask(ctx, mcpgo.GetTaskRequest{Params: mcpgo.GetTaskParams{TaskId: id}}, 10*time.Millisecond)
	if err != nil {
		t.Fatalf("WaitForTask %s: %v", id, err)
	}
	return res
}

func relatedTaskOf(m *mcpgo.Meta) string {
	if m == nil {
		return ""
	}
	rt, _ := m.AdditionalFields[mcpgo.RelatedTaskMetaKey].(map[string]any)
	id, _ := rt["taskId"].(string)
	return id
}

func textOf(content []mcpgo.Content) string {
	var b strings.Builder
	for _, c := range content {
		if tc, ok := c.(mcpgo.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// legacy pins mcp-go's client to the 2025-11-25 handshake: the era whose
// tasks both implement.
var legacy = mcpclient.WithProtocolVersion(mcp.LatestLegacyVersion)

func TestMCPGoClientAgentwireServerTasks(t *testing.T) {
	for _, tp := range mcpgoTransports {
		t.Run(tp.name, func(t *testing.T) {
			t.Run("initialize declares tasks", func(t *testing.T) {
				tr := &transcript{}
				tr.logOnFailure(t)
				c := tp.connect(t, newAgentwireServer(t).srv, tr, legacy)
				res := initialize(t, testCtx(t), c)
				if res.ProtocolVersion != mcp.LatestLegacyVersion {
					t.Errorf("protocolVersion %q, want %q", res.ProtocolVersion, mcp.LatestLegacyVersion)
				}
				// tasks.list may be left out where the server cannot tell a
				// client's tasks (see TestMCPGoClientAgentwireServerHTTPTasksListed).
				tc := res.Capabilities.Tasks
				if tc == nil || tc.Cancel == nil || tc.Requests == nil || tc.Requests.Tools == nil || tc.Requests.Tools.Call == nil {
					t.Errorf("capabilities.tasks %s, want cancel and requests.tools.call", mustJSON(t, tc))
				}
			})

			t.Run("tools/list shows execution.taskSupport", func(t *testing.T) {
				tr := &transcript{}
				tr.logOnFailure(t)
				ctx := testCtx(t)
				c := tp.connect(t, newAgentwireServer(t).srv, tr, legacy)
				initialize(t, ctx, c)
				res, err := c.ListTools(ctx, mcpgo.ListToolsRequest{})
				if err != nil {
					t.Fatal(err)
				}
				got := map[string]mcpgo.TaskSupport{}
				for _, tool := range res.Tools {
					got[tool.Name] = "(none)"
					if tool.Execution != nil {
						got[tool.Name] = tool.Execution.TaskSupport
					}
				}
				want := map[string]mcpgo.TaskSupport{
					"slow_compute":       mcpgo.TaskSupportOptional,
					"interop_wait":       mcpgo.TaskSupportOptional,
					"failing_job":        mcpgo.TaskSupportRequired,
					"protocol_error_job": mcpgo.TaskSupportRequired,
					"greet":              "(none)", // forbidden is the default, and not written
				}
				for name, w := range want {
					if got[name] != w {
						t.Errorf("tool %s: taskSupport %q, want %q", name, got[name], w)
					}
				}
			})

			t.Run("a task completes and tasks/result returns the result", func(t *testing.T) {
				tr := &transcript{}
				tr.logOnFailure(t)
				ctx := testCtx(t)
				c := tp.connect(t, newAgentwireServer(t).srv, tr, legacy)
				initialize(t, ctx, c)

				// mcp-go's CallTool sends params.task, but reads the answer
				// as a CallToolResult: the CreateTaskResult has no content.
				_, err := c.CallTool(ctx, mcpgo.CallToolRequest{Params: mcpgo.CallToolParams{
					Name: "slow_compute", Arguments: map[string]any{"seconds": 0.01, "label": "lost"}, Task: &mcpgo.TaskParams{}}})
				if err == nil || !strings.Contains(err.Error(), "content is missing") {
					t.Errorf("mcp-go CallTool with params.task: %v, want its %q (it cannot take a CreateTaskResult)", err, "content is missing")
				}

				task := startTask(t, ctx, c, "slow_compute", map[string]any{"seconds": 0.05, "label": "interop"})
				done := waitTask(t, ctx, c, task.TaskId)
				if done.Status != mcpgo.TaskStatusCompleted || done.TaskId != task.TaskId {
					t.Fatalf("task ended %s, want completed", mustJSON(t, done))
				}
				if done.StatusMessage != "computing for 0.05s" {
					t.Errorf("statusMessage %q, want the handler's %q", done.StatusMessage, "computing for 0.05s")
				}
				res, err := c.TaskResult(ctx, mcpgo.TaskResultRequest{Params: mcpgo.TaskResultParams{TaskId: task.TaskId}})
				if err != nil {
					t.Fatalf("tasks/result: %v", err)
				}
				if got, want := textOf(res.Content), `computed "interop" after 0.05s`; got != want || res.IsError {
					t.Errorf("tasks/result %q (isError %v), want %q", got, res.IsError, want)
				}
				if id := relatedTaskOf(res.Meta); id != task.TaskId {
					t.Errorf("tasks/result _meta related-task %q, want %q", id, task.TaskId)
				}
			})

			t.Run("tasks/result waits for the end", func(t *testing.T) {
				tr := &transcript{}
				tr.logOnFailure(t)
				ctx := testCtx(t)
				c := tp.connect(t, newAgentwireServer(t).srv, tr, legacy)
				initialize(t, ctx, c)
				task := startTask(t, ctx, c, "slow_compute", map[string]any{"seconds": 0.2, "label": "blocking"})
				res, err := c.TaskResult(ctx, mcpgo.TaskResultRequest{Params: mcpgo.TaskResultParams{TaskId: task.TaskId}})
				if err != nil {
					t.Fatalf("tasks/result: %v", err)
				}
				if got, want := textOf(res.Content), `computed "blocking" after 0.2s`; got != want {
					t.Errorf("tasks/result %q, want %q", got, want)
				}
			})

			t.Run("tasks/cancel cancels a running task", func(t *testing.T) {
				tr := &transcript{}
				tr.logOnFailure(t)
				ctx := testCtx(t)
				aw := newAgentwireServer(t)
				c := tp.connect(t, aw.srv, tr, legacy)
				initialize(t, ctx, c)
				task := startTask(t, ctx, c, "interop_wait", nil)
				<-aw.started
				// A status message reaches the store within a quarter of a
				// second (with the task's next change, or on its own).
				var got *mcpgo.GetTaskResult
				var err error
				for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
					got, err = c.GetTask(ctx, mcpgo.GetTaskRequest{Params: mcpgo.GetTaskParams{TaskId: task.TaskId}})
					if err != nil || got.StatusMessage != "" || time.Now().After(deadline) {
						break
					}
				}
				if err != nil || got.Status != mcpgo.TaskStatusWorking || got.StatusMessage != "waiting to be cancelled" {
					t.Errorf("tasks/get of a running task: %s, %v; want working, with the handler's statusMessage", mustJSON(t, got), err)
				}
				cancelled, err := c.CancelTask(ctx, mcpgo.CancelTaskRequest{Params: mcpgo.CancelTaskParams{TaskId: task.TaskId}})
				if err != nil {
					t.Fatalf("tasks/cancel: %v", err)
				}
				if cancelled.Status != mcpgo.TaskStatusCancelled || cancelled.TaskId != task.TaskId {
					t.Errorf("tasks/cancel answered %s, want the task, cancelled", mustJSON(t, cancelled))
				}
				select {
				case cause := <-aw.causes:
					if !errors.Is(cause, server.ErrTaskCancelled) {
						t.Errorf("the handler's context ended with %v, want server.ErrTaskCancelled", cause)
					}
				case <-ctx.Done():
					t.Fatal("the handler was not stopped")
				}
				if got := waitTask(t, ctx, c, task.TaskId); got.Status != mcpgo.TaskStatusCancelled {
					t.Errorf("tasks/get after tasks/cancel: %s, want cancelled", mustJSON(t, got))
				}
				// Cancelling it again: -32602, the task has ended.
				_, err = raw(ctx, c, "tasks/cancel", mcpgo.CancelTaskParams{TaskId: task.TaskId})
				if re, ok := err.(*rawError); !ok || re.Code != jsonrpc.CodeInvalidParams {
					t.Errorf("tasks/cancel of a cancelled task: %v, want -32602", err)
				}
				// tasks/result of a cancelled task is an error.
				_, err = c.TaskResult(ctx, mcpgo.TaskResultRequest{Params: mcpgo.TaskResultParams{TaskId: task.TaskId}})
				if err == nil {
					t.Errorf("tasks/result of a cancelled task succeeded, want an error")
				}
			})

			t.Run("a tool error fails the task and tasks/result returns the result", func(t *testing.T) {
				tr := &transcript{}
				tr.logOnFailure(t)
				ctx := testCtx(t)
				c := tp.connect(t, newAgentwireServer(t).srv, tr, legacy)
				initialize(t, ctx, c)
				// failing_job requires a task: called plainly, -32601.
				_, err := c.CallTool(ctx, mcpgo.CallToolRequest{Params: mcpgo.CallToolParams{Name: "failing_job"}})
				if !errors.Is(err, mcpgo.ErrMethodNotFound) {
					t.Errorf("failing_job without params.task: %v, want -32601 (taskSupport required)", err)
				}
				// 2025-11-25: "For tool calls specifically, [failed]
				// includes cases where the tool call result has isError set
				// to true"; tasks/result returns that result.
				task := startTask(t, ctx, c, "failing_job", nil)
				if got := waitTask(t, ctx, c, task.TaskId); got.Status != mcpgo.TaskStatusFailed || got.StatusMessage == "" {
					t.Errorf("task ended %s, want failed, with a statusMessage", mustJSON(t, got))
				}
				res, err := c.TaskResult(ctx, mcpgo.TaskResultRequest{Params: mcpgo.TaskResultParams{TaskId: task.TaskId}})
				if err != nil {
					t.Fatalf("tasks/result: %v", err)
				}
				if got, want := textOf(res.Content), "the job failed: the build step exited with status 1"; !res.IsError || got != want {
					t.Errorf("tasks/result %q (isError %v), want %q with isError", got, res.IsError, want)
				}
				if id := relatedTaskOf(res.Meta); id != task.TaskId {
					t.Errorf("tasks/result _meta related-task %q, want %q", id, task.TaskId)
				}
			})

			t.Run("a panicking tool fails the task", func(t *testing.T) {
				tr := &transcript{}
				tr.logOnFailure(t)
				ctx := testCtx(t)
				c := tp.connect(t, newAgentwireServer(t).srv, tr, legacy)
				initialize(t, ctx, c)
				task := startTask(t, ctx, c, "protocol_error_job", nil)
				if got := waitTask(t, ctx, c, task.TaskId); got.Status != mcpgo.TaskStatusFailed {
					t.Fatalf("task ended %s, want failed", mustJSON(t, got))
				}
				_, err := c.TaskResult(ctx, mcpgo.TaskResultRequest{Params: mcpgo.TaskResultParams{TaskId: task.TaskId}})
				if !errors.Is(err, mcpgo.ErrInternalError) || !strings.Contains(err.Error(), "protocol_error_job: a deliberate crash") {
					t.Errorf("tasks/result of the failed task: %v, want -32603 naming the panic", err)
				}
			})

			t.Run("a *jsonrpc.Error fails the task and tasks/result returns it", func(t *testing.T) {
				tr := &transcript{}
				tr.logOnFailure(t)
				ctx := testCtx(t)
				c := tp.connect(t, newAgentwireServer(t).srv, tr, legacy)
				initialize(t, ctx, c)
				task := startTask(t, ctx, c, "interop_rpc_error", nil)
				if got := waitTask(t, ctx, c, task.TaskId); got.Status != mcpgo.TaskStatusFailed {
					t.Fatalf("task ended %s, want failed", mustJSON(t, got))
				}
				_, err := raw(ctx, c, "tasks/result", mcpgo.TaskResultParams{TaskId: task.TaskId})
				re, ok := err.(*rawError)
				if !ok || re.Code != rpcErrorCode || re.Message != rpcErrorMessage || string(re.Data) != `{"retryable":false}` {
					t.Errorf("tasks/result: %v (data %s), want exactly the tool's error %d %q", err, dataOf(err), rpcErrorCode, rpcErrorMessage)
				}
				// mcp-go's typed method keeps the message of a code it does
				// not know.
				_, err = c.TaskResult(ctx, mcpgo.TaskResultRequest{Params: mcpgo.TaskResultParams{TaskId: task.TaskId}})
				if err == nil || err.Error() != rpcErrorMessage {
					t.Errorf("mcp-go TaskResult: %v, want %q", err, rpcErrorMessage)
				}
			})

			t.Run("an unknown task is -32602", func(t *testing.T) {
				tr := &transcript{}
				tr.logOnFailure(t)
				ctx := testCtx(t)
				c := tp.connect(t, newAgentwireServer(t).srv, tr, legacy)
				initialize(t, ctx, c)
				for _, m := range []string{"tasks/get", "tasks/result", "tasks/cancel"} {
					_, err := raw(ctx, c, m, mcpgo.GetTaskParams{TaskId: "no-such-task"})
					if re, ok := err.(*rawError); !ok || re.Code != jsonrpc.CodeInvalidParams {
						t.Errorf("%s of an unknown task: %v, want -32602", m, err)
					}
				}
				if _, err := c.GetTask(ctx, mcpgo.GetTaskRequest{Params: mcpgo.GetTaskParams{TaskId: "no-such-task"}}); !errors.Is(err, mcpgo.ErrInvalidParams) {
					t.Errorf("mcp-go GetTask of an unknown task: %v, want ErrInvalidParams", err)
				}
			})
		})
	}
}

func dataOf(err error) string {
	if re, ok := err.(*rawError); ok {
		return string(re.Data)
	}
	return ""
}

// Over stdio a connection is the requestor: tasks/list lists the tasks it
// created, and not another connection's.
func TestMCPGoClientAgentwireServerTasksListStdio(t *testing.T) {
	ctx := testCtx(t)
	aw := newAgentwireServer(t)
	tr := &transcript{}
	tr.logOnFailure(t)
	c := mcpgoOverStdio(t, aw.srv, tr, legacy)
	initialize(t, ctx, c)
	a := startTask(t, ctx, c, "slow_compute", map[string]any{"seconds": 0.01, "label": "a"})
	b := startTask(t, ctx, c, "interop_wait", nil)
	<-aw.started
	waitTask(t, ctx, c, a.TaskId)

	res, err := c.ListTasks(ctx, mcpgo.ListTasksRequest{})
	if err != nil {
		t.Fatalf("tasks/list: %v", err)
	}
	status := map[string]mcpgo.TaskStatus{}
	for _, task := range res.Tasks {
		status[task.TaskId] = task.Status
	}
	if status[a.TaskId] != mcpgo.TaskStatusCompleted || status[b.TaskId] != mcpgo.TaskStatusWorking || len(status) != 2 {
		t.Errorf("tasks/list %s, want %s completed and %s working", mustJSON(t, res.Tasks), a.TaskId, b.TaskId)
	}

	other := mcpgoOverStdio(t, aw.srv, &transcript{}, legacy)
	initialize(t, ctx, other)
	if res, err := other.ListTasks(ctx, mcpgo.ListTasksRequest{}); err != nil || len(res.Tasks) != 0 {
		t.Errorf("tasks/list on another connection: %s, %v; want none of the first's", mustJSON(t, res), err)
	}
	if _, err := c.CancelTask(ctx, mcpgo.CancelTaskRequest{Params: mcpgo.CancelTaskParams{TaskId: b.TaskId}}); err != nil {
		t.Fatal(err)
	}
	<-aw.causes
}

// The 2025-11-25 specification: "If a task is retrievable via tasks/get
// for a requestor, it MUST be retrievable via tasks/list for that
// requestor". Over Streamable HTTP without an authorization context
// agentwire's server keeps nothing per client: if it declares tasks.list
// there, tasks/list must list what tasks/get finds.
func TestMCPGoClientAgentwireServerHTTPTasksListed(t *testing.T) {
	ctx := testCtx(t)
	tr := &transcript{}
	tr.logOnFailure(t)
	c := mcpgoOverHTTP(t, newAgentwireServer(t).srv, tr, legacy)
	init := initialize(t, ctx, c)
	task := startTask(t, ctx, c, "slow_compute", map[string]any{"seconds": 0.01, "label": "listed"})
	waitTask(t, ctx, c, task.TaskId) // tasks/get finds it
	if init.Capabilities.Tasks == nil || init.Capabilities.Tasks.List == nil {
		return // not declared: nothing promised
	}
	res, err := c.ListTasks(ctx, mcpgo.ListTasksRequest{})
	if err != nil {
		t.Fatalf("tasks/list: %v", err)
	}
	if !slices.ContainsFunc(res.Tasks, func(t mcpgo.Task) bool { return t.TaskId == task.TaskId }) {
		t.Errorf("capabilities.tasks.list is declared and tasks/get finds task %s, but tasks/list answers %s",
			task.TaskId, mustJSON(t, res.Tasks))
	}
}

// Regression (fixed: the call is refused with -32601): the 2025-11-25 specification says of a tool whose taskSupport is
// absent or "forbidden" that clients MUST NOT invoke it as a task and
// "Servers SHOULD return a -32601 (Method not found) error if a client
// attempts to do so"; mcp/server/tasks.go's taskDesign has that error
// ("tool %s does not run as a task (execution.taskSupport is forbidden)"),
// but callTool only calls taskDesign for a tool whose Execution.Supports(),
// so the call runs plainly and is answered with a CallToolResult where the
// client, which asked for a task, waits for a CreateTaskResult.
func TestRegressionAForbiddenToolCalledWithParamsTaskIsRefused(t *testing.T) {
	for _, tp := range mcpgoTransports {
		t.Run(tp.name, func(t *testing.T) {
			tr := &transcript{}
			tr.logOnFailure(t)
			ctx := testCtx(t)
			c := tp.connect(t, newAgentwireServer(t).srv, tr, legacy)
			initialize(t, ctx, c)
			res, err := raw(ctx, c, "tools/call", mcpgo.CallToolParams{Name: "greet", Arguments: map[string]any{"name": "x"}, Task: &mcpgo.TaskParams{}})
			if re, ok := err.(*rawError); !ok || re.Code != jsonrpc.CodeMethodNotFound {
				t.Errorf("greet (taskSupport forbidden) with params.task: %s, %v; want -32601", res, err)
			}
		})
	}
}

// mcp-go's client, left to its default, probes server/discover and speaks
// 2026-07-28 with agentwire's server. Its tasks there are still the
// 2025-11-25 ones (params.task; it knows nothing of the
// io.modelcontextprotocol/tasks extension agentwire's server offers), so
// the server runs an optional tool in the request and refuses a required
// one for want of the extension.
func TestMCPGoModernClientAgentwireServer(t *testing.T) {
	for _, tp := range mcpgoTransports {
		t.Run(tp.name, func(t *testing.T) {
			tr := &transcript{}
			tr.logOnFailure(t)
			ctx := testCtx(t)
			c := tp.connect(t, newAgentwireServer(t).srv, tr)
			res := initialize(t, ctx, c)
			if res.ProtocolVersion != mcp.LatestVersion {
				t.Fatalf("protocolVersion %q, want %q", res.ProtocolVersion, mcp.LatestVersion)
			}
			if res.Capabilities.Tasks != nil {
				t.Errorf("capabilities.tasks %s in 2026-07-28, want none (tasks are an extension there)", mustJSON(t, res.Capabilities.Tasks))
			}
			if _, ok := res.Capabilities.Extensions[mcp.ExtensionTasks]; !ok {
				t.Errorf("capabilities.extensions %s, want %s", mustJSON(t, res.Capabilities.Extensions), mcp.ExtensionTasks)
			}

			// params.task is a 2025-11-25 hint: the call runs in the request.
			out, err := c.CallTool(ctx, mcpgo.CallToolRequest{Params: mcpgo.CallToolParams{
				Name: "slow_compute", Arguments: map[string]any{"seconds": 0.01, "label": "modern"}, Task: &mcpgo.TaskParams{}}})
			if err != nil {
				t.Fatalf("slow_compute with params.task in 2026-07-28: %v", err)
			}
			if got, want := textOf(out.Content), `computed "modern" after 0.01s`; got != want {
				t.Errorf("slow_compute: %q, want %q", got, want)
			}

			// A tool that must run as a task needs the extension declared.
			_, err = c.CallTool(ctx, mcpgo.CallToolRequest{Params: mcpgo.CallToolParams{Name: "failing_job", Task: &mcpgo.TaskParams{}}})
			var missing mcpgo.MissingRequiredClientCapabilityError
			if !errors.As(err, &missing) {
				t.Errorf("failing_job in 2026-07-28 without the extension: %v, want -32021", err)
			}
		})
	}
}
