package server_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/agentwire/agentwire/internal/wiretest"
	"github.com/agentwire/agentwire/jsonrpc"
	"github.com/agentwire/agentwire/mcp"
	"github.com/agentwire/agentwire/mcp/internal/mcptest"
	"github.com/agentwire/agentwire/mcp/server"
)

// tasksMeta is a 2026-07-28 _meta whose client capabilities declare the
// tasks extension.
const tasksMeta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"},"io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}`

// Issue 17 (notifications/tasks over subscriptions/listen, SEP-2663 "Task
// Status Notifications"): a listen stream that names a task's id is told
// of every change of it, each notification a complete DetailedTask with
// the subscription id; the acknowledgment lists the ids agreed to (an id
// the caller cannot see is left out) and is followed by each task's
// current state.
func TestAListenStreamIsToldOfItsTasksChanges(t *testing.T) {
	runMCP(t, nil, func(w *wiretest.Wire, s *server.Server) {
		release := make(chan struct{})
		server.AddTool(s, mcp.Tool{Name: "job", Execution: &mcp.ToolExecution{TaskSupport: mcp.TaskOptional}},
			func(ctx context.Context, r *server.ToolRequest, _ struct{}) (*mcp.ToolResult, error) {
				<-release
				return mcp.TextResult("done"), nil
			})
		defer s.Shutdown(context.Background())
		created := mcptest.One(t, w.Exchange(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"job","arguments":{},`+tasksMeta+`}}`))
		var r struct {
			Result struct {
				TaskID     string `json:"taskId"`
				ResultType string `json:"resultType"`
			} `json:"result"`
		}
		if err := json.Unmarshal([]byte(created), &r); err != nil || r.Result.ResultType != "task" || r.Result.TaskID == "" {
			t.Fatalf("not a task: %s", created)
		}
		id := r.Result.TaskID
		// The acknowledgment, then the task as it is now: a change between
		// the two is not missed.
		opened := w.Exchange(`{"jsonrpc":"2.0","id":"L","method":"subscriptions/listen","params":{` + tasksMeta + `,"notifications":{"taskIds":["` + id + `","not-a-task"]}}}`)
		if len(opened) != 2 {
			t.Fatalf("listen opened with %q", opened)
		}
		mcptest.JSONEq(t, opened[0], `{"jsonrpc":"2.0","method":"notifications/subscriptions/acknowledged","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":"L"},"notifications":{"taskIds":["`+id+`"]}}}`)
		if !strings.Contains(opened[1], `"method":"notifications/tasks"`) || !strings.Contains(opened[1], `"status":"working"`) {
			t.Fatalf("the current state: %s", opened[1])
		}
		close(release)
		w.Settle()
		lines := w.Take()
		var last map[string]any
		for _, l := range lines {
			var n struct {
				Method string         `json:"method"`
				Params map[string]any `json:"params"`
			}
			json.Unmarshal([]byte(l), &n)
			if n.Method != mcp.MethodTasksNotification {
				t.Fatalf("unexpected line %s", l)
			}
			if n.Params["taskId"] != id || !strings.Contains(l, `"io.modelcontextprotocol/subscriptionId":"L"`) {
				t.Fatalf("notification %s", l)
			}
			last = n.Params
		}
		if last == nil || last["status"] != "completed" || last["result"] == nil {
			t.Fatalf("the last notification does not carry the completed task: %q", lines)
		}
		w.Send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"L"}}`)
		w.Settle()
	})
}

// SEP-2663: "Servers MUST return [-32021] for non-declaring clients
// requesting task notifications on subscriptions/listen."
func TestListeningForTasksNeedsTheExtension(t *testing.T) {
	runMCP(t, nil, func(w *wiretest.Wire, s *server.Server) {
		got := mcptest.One(t, w.Exchange(`{"jsonrpc":"2.0","id":"L","method":"subscriptions/listen","params":{`+mcptest.Meta+`,"notifications":{"taskIds":["x"]}}}`))
		if c := wiretest.ErrCode(t, got); c != mcp.CodeMissingRequiredClientCapability || !strings.Contains(got, `"requiredCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}`) {
			t.Fatalf("got %s", got)
		}
		_ = jsonrpc.CodeInvalidParams
	})
}

// Issue 17 (2025-11-25 notifications/tasks/status): a task made on a
// stream connection is followed by a status notification at each change
// of its status, on that connection, until it ends.
func TestALegacyTaskTellsItsConnectionOfEachStatus(t *testing.T) {
	runMCP(t, nil, func(w *wiretest.Wire, s *server.Server) {
		release := make(chan struct{})
		server.AddTool(s, mcp.Tool{Name: "job", Execution: &mcp.ToolExecution{TaskSupport: mcp.TaskOptional}},
			func(ctx context.Context, r *server.ToolRequest, _ struct{}) (*mcp.ToolResult, error) {
				<-release
				return mcp.TextResult("done"), nil
			})
		defer s.Shutdown(context.Background())
		w.Exchange(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}`)
		w.Exchange(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
		created := mcptest.One(t, w.Exchange(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"job","arguments":{},"task":{"ttl":1000}}}`))
		if !strings.Contains(created, `"task":{`) {
			t.Fatalf("not a task: %s", created)
		}
		close(release)
		w.Settle()
		got := mcptest.One(t, w.Take())
		if !strings.Contains(got, `"method":"notifications/tasks/status"`) || !strings.Contains(got, `"status":"completed"`) || !strings.Contains(got, `"ttl":1000`) {
			t.Fatalf("status notification: %s", got)
		}
	})
}

// Issue 17: "the progress token remains valid for the task's
// lifetime" (2025-11-25): a task's progress goes to the stream connection
// that made it, tied to the task.
func TestALegacyTasksProgressReachesItsConnection(t *testing.T) {
	runMCP(t, nil, func(w *wiretest.Wire, s *server.Server) {
		release := make(chan struct{})
		server.AddTool(s, mcp.Tool{Name: "job", Execution: &mcp.ToolExecution{TaskSupport: mcp.TaskOptional}},
			func(ctx context.Context, r *server.ToolRequest, _ struct{}) (*mcp.ToolResult, error) {
				<-release
				if err := r.Progress(1, 2, "halfway"); err != nil {
					return nil, err
				}
				return mcp.TextResult("done"), nil
			})
		defer s.Shutdown(context.Background())
		w.Exchange(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}`)
		w.Exchange(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
		created := mcptest.One(t, w.Exchange(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"job","arguments":{},"task":{},"_meta":{"progressToken":"p1"}}}`))
		if !strings.Contains(created, `"task":{`) {
			t.Fatalf("not a task: %s", created)
		}
		close(release)
		w.Settle()
		got := strings.Join(w.Take(), "\n")
		if !strings.Contains(got, `"method":"notifications/progress"`) || !strings.Contains(got, `"progressToken":"p1"`) || !strings.Contains(got, `"io.modelcontextprotocol/related-task"`) {
			t.Fatalf("no progress tied to the task: %s", got)
		}
	})
}
