package gopeers_test

// agentwire's host client against an mcp-go server with task tools: the
// 2025-11-25 tasks over stdio and over Streamable HTTP (StartTool, Get,
// Wait, Cancel, ResumeTask, CallTool), and what happens when the two
// negotiate 2026-07-28.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/agentwire/agentwire/jsonrpc"
	"github.com/agentwire/agentwire/mcp"
	"github.com/agentwire/agentwire/mcp/host"
	"github.com/agentwire/agentwire/mcp/streamable"
	mcpgo "github.com/mark3labs/mcp-go/mcp"
	mcpserver "github.com/mark3labs/mcp-go/server"
)

// mgServer is an mcp-go server with tools that run as tasks, both kinds
// mcp-go has: a regular tool with execution.taskSupport (AddTool; it runs
// as a task when the call has params.task) and task tools (AddTaskTool,
// which only run as tasks).
type mgServer struct {
	s       *mcpserver.MCPServer
	started chan string   // a blocking tool has started (its argument)
	release chan struct{} // closed by the test's cleanup: every blocking tool ends
	ended   chan error    // why each blocking tool ended: nil released, else its context's error
}

const (
	failingTaskMessage = "the backend refused the job"
	toolErrorText      = "the build step exited with status 1"
)

func newMCPGoServer(t *testing.T) *mgServer {
	m := &mgServer{started: make(chan string, 16), release: make(chan struct{}), ended: make(chan error, 16)}
	m.s = mcpserver.NewMCPServer("mcp-go-interop", "1.2.1",
		mcpserver.WithToolCapabilities(true),
		mcpserver.WithTaskCapabilities(true, true, true))

	m.s.AddTool(mcpgo.NewTool("echo",
		mcpgo.WithDescription("Echoes text after ms milliseconds; runs as a task when asked to."),
		mcpgo.WithTaskSupport(mcpgo.TaskSupportOptional),
		mcpgo.WithString("text"), mcpgo.WithNumber("ms")),
		func(ctx context.Context, req mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
			// It does not watch ctx: see TestMCPGoServerTaskContextEndsWithItsRequest.
			time.Sleep(time.Duration(req.GetFloat("ms", 0)) * time.Millisecond)
			return mcpgo.NewToolResultText("echo: " + req.GetString("text", "")), nil
		})
	m.s.AddTool(mcpgo.NewTool("sync_only", mcpgo.WithDescription("Never a task.")),
		func(ctx context.Context, req mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
			return mcpgo.NewToolResultText("sync"), nil
		})
	m.s.AddTool(mcpgo.NewTool("watch_ctx",
		mcpgo.WithDescription("Runs until released or its context ends."),
		mcpgo.WithTaskSupport(mcpgo.TaskSupportOptional)),
		func(ctx context.Context, req mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
			m.started <- "watch_ctx"
			select {
			case <-m.release:
				m.ended <- nil
				return mcpgo.NewToolResultText("released"), nil
			case <-ctx.Done():
				m.ended <- ctx.Err()
				return nil, ctx.Err()
			}
		})
	m.s.AddTaskTools(
		mcpserver.ServerTaskTool{
			Tool: mcpgo.NewTool("block", mcpgo.WithDescription("Runs until released."), mcpgo.WithTaskSupport(mcpgo.TaskSupportRequired)),
			Handler: func(ctx context.Context, req mcpgo.CallToolRequest) (*mcpgo.CreateTaskResult, error) {
				m.started <- "block"
				<-m.release
				m.ended <- nil
				return &mcpgo.CreateTaskResult{Content: []mcpgo.Content{mcpgo.NewTextContent("released")}}, nil
			},
		},
		mcpserver.ServerTaskTool{
			Tool: mcpgo.NewTool("tool_error", mcpgo.WithDescription("Reports a tool error."), mcpgo.WithTaskSupport(mcpgo.TaskSupportRequired)),
			Handler: func(ctx context.Context, req mcpgo.CallToolRequest) (*mcpgo.CreateTaskResult, error) {
				return &mcpgo.CreateTaskResult{Content: []mcpgo.Content{mcpgo.NewTextContent(toolErrorText)}, IsError: true}, nil
			},
		},
		mcpserver.ServerTaskTool{
			Tool: mcpgo.NewTool("failing", mcpgo.WithDescription("Fails."), mcpgo.WithTaskSupport(mcpgo.TaskSupportRequired)),
			Handler: func(ctx context.Context, req mcpgo.CallToolRequest) (*mcpgo.CreateTaskResult, error) {
				return nil, errors.New(failingTaskMessage)
			},
		},
		mcpserver.ServerTaskTool{
			Tool: mcpgo.NewTool("panicking", mcpgo.WithDescription("Panics."), mcpgo.WithTaskSupport(mcpgo.TaskSupportRequired)),
			Handler: func(ctx context.Context, req mcpgo.CallToolRequest) (*mcpgo.CreateTaskResult, error) {
				panic("a deliberate crash")
			},
		},
	)
	t.Cleanup(func() { close(m.release) })
	return m
}

// hostTransport connects agentwire's host client to an mcp-go server.
type hostTransport struct {
	name    string
	connect func(t *testing.T, m *mgServer, tr *transcript, opts *host.Options) *host.Session
}

var hostTransports = []hostTransport{
	{"stdio", hostOverStdio},
	{"http", hostOverHTTP},
}

// hostOverStdio serves the mcp-go server with its StdioServer on
// in-process pipes (one at a time: mcp-go's stdio session is a package
// variable), and puts host.NewClient on their other ends.
func hostOverStdio(t *testing.T, m *mgServer, tr *transcript, opts *host.Options) *host.Session {
	serverIn, clientOut := io.Pipe()
	clientIn, serverOut := io.Pipe()
	ss := mcpserver.NewStdioServer(m.s)
	ss.SetErrorLogger(discardLog)
	ctx, cancel := context.WithCancel(context.Background())
	listened := make(chan error, 1)
	go func() { listened <- ss.Listen(ctx, serverIn, tapWriter{serverOut, "<-", tr}) }()
	t.Cleanup(func() {
		clientOut.Close() // the server's input ends
		cancel()
		if err := <-listened; err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, io.EOF) {
			t.Logf("mcp-go Listen: %v", err)
		}
		serverOut.Close()
		clientIn.Close()
	})
	sess, err := host.NewClient(testCtx(t), clientIn, tapWriter{clientOut, "->", tr}, opts)
	if err != nil {
		t.Fatalf("host.NewClient: %v", err)
	}
	t.Cleanup(func() { sess.Close() })
	return sess
}

// hostOverHTTP serves the mcp-go server with its StreamableHTTPServer on
// an httptest server and connects with streamable.Connect.
func hostOverHTTP(t *testing.T, m *mgServer, tr *transcript, opts *host.Options) *host.Session {
	return connectHTTP(t, serveMCPGoHTTP(t, m, tr), opts)
}

// serveMCPGoHTTP serves the mcp-go server over Streamable HTTP and returns
// its endpoint's URL.
func serveMCPGoHTTP(t *testing.T, m *mgServer, tr *transcript) string {
	hs := mcpserver.NewStreamableHTTPServer(m.s, mcpserver.WithStreamableHTTPLogger(quiet))
	web := httptest.NewServer(tapHandler(hs, tr))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		hs.Shutdown(ctx)
		web.Close()
	})
	return web.URL + "/mcp"
}

func connectHTTP(t *testing.T, url string, opts *host.Options) *host.Session {
	sess, err := streamable.Connect(testCtx(t), url, opts, nil)
	if err != nil {
		t.Fatalf("streamable.Connect: %v", err)
	}
	t.Cleanup(func() { sess.Close() })
	return sess
}

var legacyOnly = &host.Options{Eras: mcp.LegacyOnly}

// waitStatus polls tasks/get until the task is in status.
func waitStatus(t *testing.T, ctx context.Context, task *host.Task, status string) *host.TaskState {
	t.Helper()
	var st *host.TaskState
	eventually(t, fmt.Sprintf("task %s %s", task.ID(), status), func() bool {
		var err error
		st, err = task.Get(ctx)
		if err != nil {
			t.Fatalf("tasks/get %s: %v", task.ID(), err)
		}
		return st.Status == status
	})
	return st
}

func hostText(r *mcp.ToolResult) string {
	if r == nil {
		return ""
	}
	var b strings.Builder
	for _, c := range r.Content {
		b.WriteString(c.Text)
	}
	return b.String()
}

func TestHostClientMCPGoServerTasks(t *testing.T) {
	for _, tp := range hostTransports {
		t.Run(tp.name, func(t *testing.T) {
			t.Run("initialize shows the tasks capability", func(t *testing.T) {
				tr := &transcript{}
				tr.logOnFailure(t)
				sess := tp.connect(t, newMCPGoServer(t), tr, legacyOnly)
				if sess.ProtocolVersion() != mcp.LatestLegacyVersion {
					t.Errorf("version %q, want %q", sess.ProtocolVersion(), mcp.LatestLegacyVersion)
				}
				var caps struct {
					Tasks *mcpgo.TasksCapability `json:"tasks"`
				}
				json.Unmarshal(sess.Capabilities(), &caps)
				if c := caps.Tasks; c == nil || c.List == nil || c.Cancel == nil || c.Requests == nil || c.Requests.Tools == nil || c.Requests.Tools.Call == nil {
					t.Errorf("capabilities %s, want tasks with list, cancel and requests.tools.call", sess.Capabilities())
				}
			})

			t.Run("tools/list shows execution.taskSupport", func(t *testing.T) {
				tr := &transcript{}
				tr.logOnFailure(t)
				ctx := testCtx(t)
				sess := tp.connect(t, newMCPGoServer(t), tr, legacyOnly)
				tools, err := sess.ListTools(ctx)
				if err != nil {
					t.Fatal(err)
				}
				got := map[string]mcp.TaskSupport{}
				for _, tool := range tools {
					got[tool.Name] = "(none)"
					if tool.Execution != nil {
						got[tool.Name] = tool.Execution.TaskSupport
					}
				}
				want := map[string]mcp.TaskSupport{"echo": mcp.TaskOptional, "block": mcp.TaskRequired, "failing": mcp.TaskRequired, "sync_only": "(none)"}
				for name, w := range want {
					if got[name] != w {
						t.Errorf("tool %s: taskSupport %q, want %q", name, got[name], w)
					}
				}
			})

			t.Run("StartTool runs a task, Get polls it, Wait returns the result", func(t *testing.T) {
				tr := &transcript{}
				tr.logOnFailure(t)
				ctx := testCtx(t)
				sess := tp.connect(t, newMCPGoServer(t), tr, legacyOnly)
				task, err := sess.StartTool(ctx, "echo", map[string]any{"text": "hi", "ms": 30})
				if err != nil {
					t.Fatalf("StartTool: %v", err)
				}
				if task.ID() == "" {
					t.Fatal("StartTool: the server answered without a task")
				}
				if last := task.Last(); last == nil || last.Status != "working" || last.CreatedAt.IsZero() {
					t.Errorf("the created task %+v, want working, with createdAt", last)
				}
				if len(tr.find(`"method":"tools/call"`, `"task":{}`)) != 1 {
					t.Errorf("tools/call did not carry params.task")
				}
				st := waitStatus(t, ctx, task, "completed")
				if st.ID != task.ID() {
					t.Errorf("tasks/get id %q, want %q", st.ID, task.ID())
				}
				res, err := task.Wait(ctx, nil)
				if err != nil {
					t.Fatalf("Wait: %v", err)
				}
				if got := hostText(res); got != "echo: hi" || res.IsError {
					t.Errorf("Wait: %q (isError %v), want %q", got, res.IsError, "echo: hi")
				}
			})

			t.Run("Wait on a running task waits in tasks/result", func(t *testing.T) {
				tr := &transcript{}
				tr.logOnFailure(t)
				ctx := testCtx(t)
				m := newMCPGoServer(t)
				sess := tp.connect(t, m, tr, legacyOnly)
				task, err := sess.StartTool(ctx, "block", nil)
				if err != nil {
					t.Fatalf("StartTool: %v", err)
				}
				<-m.started
				type outcome struct {
					res *mcp.ToolResult
					err error
				}
				done := make(chan outcome, 1)
				go func() {
					res, err := task.Wait(ctx, nil)
					done <- outcome{res, err}
				}()
				eventually(t, "tasks/result sent", func() bool { return len(tr.find(`"method":"tasks/result"`)) > 0 })
				select {
				case o := <-done:
					t.Fatalf("Wait returned %v, %v before the task ended", o.res, o.err)
				default:
				}
				m.release <- struct{}{} // not closed: the cleanup closes it
				<-m.ended
				o := <-done
				if o.err != nil || hostText(o.res) != "released" {
					t.Errorf("Wait: %q, %v; want %q", hostText(o.res), o.err, "released")
				}
			})

			t.Run("Cancel cancels a running task", func(t *testing.T) {
				tr := &transcript{}
				tr.logOnFailure(t)
				ctx := testCtx(t)
				m := newMCPGoServer(t)
				sess := tp.connect(t, m, tr, legacyOnly)
				task, err := sess.StartTool(ctx, "block", nil)
				if err != nil {
					t.Fatalf("StartTool: %v", err)
				}
				<-m.started
				if err := task.Cancel(ctx); err != nil {
					t.Fatalf("Cancel: %v", err)
				}
				if st, err := task.Get(ctx); err != nil || st.Status != "cancelled" {
					t.Errorf("tasks/get after Cancel: %+v, %v; want cancelled", st, err)
				}
				// A second cancel: -32602, the task has ended.
				var je *jsonrpc.Error
				if err := task.Cancel(ctx); !errors.As(err, &je) || je.Code != jsonrpc.CodeInvalidParams {
					t.Errorf("Cancel of a cancelled task: %v, want -32602", err)
				}
			})

			t.Run("a tool error: Wait returns the result with isError", func(t *testing.T) {
				tr := &transcript{}
				tr.logOnFailure(t)
				ctx := testCtx(t)
				sess := tp.connect(t, newMCPGoServer(t), tr, legacyOnly)
				task, err := sess.StartTool(ctx, "tool_error", nil)
				if err != nil {
					t.Fatalf("StartTool: %v", err)
				}
				res, err := task.Wait(ctx, nil)
				if err != nil {
					t.Fatalf("Wait: %v", err)
				}
				if got := hostText(res); got != toolErrorText || !res.IsError {
					t.Errorf("Wait: %q (isError %v), want %q with isError", got, res.IsError, toolErrorText)
				}
			})

			t.Run("a failing task: Get says failed, Wait returns the error", func(t *testing.T) {
				tr := &transcript{}
				tr.logOnFailure(t)
				ctx := testCtx(t)
				sess := tp.connect(t, newMCPGoServer(t), tr, legacyOnly)
				for _, tool := range []string{"failing", "panicking"} {
					task, err := sess.StartTool(ctx, tool, nil)
					if err != nil {
						t.Fatalf("StartTool %s: %v", tool, err)
					}
					st := waitStatus(t, ctx, task, "failed")
					if st.StatusMessage == "" {
						t.Errorf("%s: a failed task without a statusMessage", tool)
					}
					_, err = task.Wait(ctx, nil)
					var je *jsonrpc.Error
					if !errors.As(err, &je) || je.Code != jsonrpc.CodeInternalError {
						t.Errorf("%s: Wait: %v, want the task's error, -32603", tool, err)
					}
				}
			})

			t.Run("an unknown task is -32602", func(t *testing.T) {
				tr := &transcript{}
				tr.logOnFailure(t)
				ctx := testCtx(t)
				sess := tp.connect(t, newMCPGoServer(t), tr, legacyOnly)
				_, err := sess.ResumeTask("no-such-task").Get(ctx)
				var je *jsonrpc.Error
				if !errors.As(err, &je) || je.Code != jsonrpc.CodeInvalidParams {
					t.Errorf("tasks/get of an unknown task: %v, want -32602", err)
				}
			})

			t.Run("ResumeTask on the same session", func(t *testing.T) {
				tr := &transcript{}
				tr.logOnFailure(t)
				ctx := testCtx(t)
				sess := tp.connect(t, newMCPGoServer(t), tr, legacyOnly)
				task, err := sess.StartTool(ctx, "echo", map[string]any{"text": "again"})
				if err != nil {
					t.Fatalf("StartTool: %v", err)
				}
				res, err := sess.ResumeTask(task.ID()).Wait(ctx, nil)
				if err != nil || hostText(res) != "echo: again" {
					t.Errorf("ResumeTask(%s).Wait: %q, %v; want %q", task.ID(), hostText(res), err, "echo: again")
				}
			})

			t.Run("CallTool runs an optional tool in the request", func(t *testing.T) {
				tr := &transcript{}
				tr.logOnFailure(t)
				ctx := testCtx(t)
				sess := tp.connect(t, newMCPGoServer(t), tr, legacyOnly)
				res, err := sess.CallTool(ctx, "echo", map[string]any{"text": "plain"})
				if err != nil || hostText(res) != "echo: plain" {
					t.Errorf("CallTool echo: %q, %v; want %q", hostText(res), err, "echo: plain")
				}
				if len(tr.find(`"method":"tools/call"`, `"task":`)) != 0 {
					t.Errorf("CallTool sent params.task")
				}
			})
		})
	}
}

// CallTool in the 2025-11-25 era sends no params.task, and a server MUST
// refuse such a call of a tool whose execution.taskSupport is "required"
// (-32601): CallTool either ends there (it waits for a task only when a
// 2026-07-28 server asks for the extension, -32021) or calls the tool as
// a task itself. Either is fine by the specification; anything else is
// not.
func TestHostClientMCPGoServerCallToolRequiredTask(t *testing.T) {
	for _, tp := range hostTransports {
		t.Run(tp.name, func(t *testing.T) {
			tr := &transcript{}
			tr.logOnFailure(t)
			ctx := testCtx(t)
			sess := tp.connect(t, newMCPGoServer(t), tr, legacyOnly)
			res, err := sess.CallTool(ctx, "tool_error", nil)
			var je *jsonrpc.Error
			switch {
			case errors.As(err, &je) && je.Code == jsonrpc.CodeMethodNotFound:
				t.Logf("CallTool of a tool that requires a task: mcp-go's -32601 (%s); StartTool is the way to call it", je.Message)
			case err == nil && res.IsError && hostText(res) == toolErrorText:
				t.Logf("CallTool of a tool that requires a task ran it as a task")
			default:
				t.Errorf("CallTool of a tool that requires a task: %+v, %v; want mcp-go's -32601, or the tool's result", res, err)
			}
		})
	}
}

// A task is bound to the mcp-go session (Mcp-Session-Id) that created
// it: another session's ResumeTask does not find it (-32602), as the
// specification asks of a server that binds tasks to a context.
func TestHostClientMCPGoServerResumeTaskFromAnotherSession(t *testing.T) {
	tr := &transcript{}
	tr.logOnFailure(t)
	ctx := testCtx(t)
	url := serveMCPGoHTTP(t, newMCPGoServer(t), tr)
	first, second := connectHTTP(t, url, legacyOnly), connectHTTP(t, url, legacyOnly)
	task, err := first.StartTool(ctx, "echo", map[string]any{"text": "mine"})
	if err != nil {
		t.Fatalf("StartTool: %v", err)
	}
	_, err = second.ResumeTask(task.ID()).Get(ctx)
	var je *jsonrpc.Error
	if !errors.As(err, &je) || je.Code != jsonrpc.CodeInvalidParams {
		t.Errorf("another session's tasks/get: %v, want -32602", err)
	}
	if res, err := first.ResumeTask(task.ID()).Wait(ctx, nil); err != nil || hostText(res) != "echo: mine" {
		t.Errorf("the creating session's Wait: %q, %v", hostText(res), err)
	}
}

// Regression (fixed: Wait asks tasks/get and returns ErrTaskCancelled) (mcp/host): Task.Wait documents ErrTaskCancelled for a cancelled
// task, but a 2025-11-25 Wait (waitLegacy) returns whatever tasks/result
// says: mcp-go answers a cancelled task's tasks/result with an empty
// success ({"_meta":{"io.modelcontextprotocol/related-task":{...}}}, no
// content), which Wait returns as a result with no content and no error;
// agentwire's own server answers it with -32603 "the task was cancelled",
// which Wait returns as that *jsonrpc.Error. Neither is ErrTaskCancelled.
func TestRegressionWaitOnACancelledLegacyTaskIsErrTaskCancelled(t *testing.T) {
	for _, tp := range hostTransports {
		t.Run(tp.name, func(t *testing.T) {
			tr := &transcript{}
			tr.logOnFailure(t)
			ctx := testCtx(t)
			m := newMCPGoServer(t)
			sess := tp.connect(t, m, tr, legacyOnly)
			task, err := sess.StartTool(ctx, "block", nil)
			if err != nil {
				t.Fatalf("StartTool: %v", err)
			}
			<-m.started
			if err := task.Cancel(ctx); err != nil {
				t.Fatalf("Cancel: %v", err)
			}
			res, err := task.Wait(ctx, nil)
			if !errors.Is(err, host.ErrTaskCancelled) {
				t.Errorf("Wait on a cancelled task: %+v, %v; want host.ErrTaskCancelled", res, err)
			}
		})
	}
}

// mcp-go runs a task with a context derived from its tools/call request's,
// which mcp-go cancels once it has answered the request: a task handler
// that watches its context (as Go handlers should) is stopped at once, and
// the task ends cancelled ("context canceled") without anyone asking.
// This documents mcp-go v1.2.1's behaviour, which agentwire's host sees
// as a task cancelled by the server.
func TestMCPGoServerTaskContextEndsWithItsRequest(t *testing.T) {
	for _, tp := range hostTransports {
		t.Run(tp.name, func(t *testing.T) {
			tr := &transcript{}
			tr.logOnFailure(t)
			ctx := testCtx(t)
			m := newMCPGoServer(t)
			sess := tp.connect(t, m, tr, legacyOnly)
			task, err := sess.StartTool(ctx, "watch_ctx", nil)
			if err != nil {
				t.Fatalf("StartTool: %v", err)
			}
			<-m.started
			select {
			case why := <-m.ended:
				if !errors.Is(why, context.Canceled) {
					t.Errorf("the task's handler ended with %v, want context.Canceled", why)
				}
			case <-ctx.Done():
				t.Fatal("the task's handler still runs: mcp-go no longer ends a task's context with its request")
			}
			st := waitStatus(t, ctx, task, "cancelled")
			if st.StatusMessage != context.Canceled.Error() {
				t.Errorf("statusMessage %q, want %q", st.StatusMessage, context.Canceled.Error())
			}
		})
	}
}

// With its default probe agentwire's host speaks 2026-07-28 with mcp-go,
// which answers server/discover. There mcp-go still offers the
// 2025-11-25 tasks (capabilities.tasks, params.task; no
// io.modelcontextprotocol/tasks extension) while the host, in the
// 2026-07-28 era, asks for tasks only through the extension: StartTool
// gets the tool's result at once (no task), and a tool that requires a
// task is refused with mcp-go's -32601.
func TestHostClientMCPGoServerModernEra(t *testing.T) {
	for _, tp := range hostTransports {
		t.Run(tp.name, func(t *testing.T) {
			tr := &transcript{}
			tr.logOnFailure(t)
			ctx := testCtx(t)
			sess := tp.connect(t, newMCPGoServer(t), tr, nil)
			if sess.Era() != mcp.Modern {
				t.Fatalf("era %v (%s), want modern", sess.Era(), sess.ProtocolVersion())
			}
			var caps struct {
				Tasks      json.RawMessage            `json:"tasks"`
				Extensions map[string]json.RawMessage `json:"extensions"`
			}
			json.Unmarshal(sess.Capabilities(), &caps)
			if len(caps.Tasks) == 0 {
				t.Errorf("server/discover capabilities %s: mcp-go no longer offers 2025-11-25 tasks in 2026-07-28", sess.Capabilities())
			}
			if _, ok := caps.Extensions[mcp.ExtensionTasks]; ok {
				t.Errorf("server/discover capabilities %s: mcp-go now offers the tasks extension; test it", sess.Capabilities())
			}

			task, err := sess.StartTool(ctx, "echo", map[string]any{"text": "modern"})
			if err != nil {
				t.Fatalf("StartTool: %v", err)
			}
			if task.ID() != "" {
				t.Errorf("StartTool: task %q, want the result at once (mcp-go makes a task only for params.task)", task.ID())
			}
			if res, err := task.Wait(ctx, nil); err != nil || hostText(res) != "echo: modern" {
				t.Errorf("Wait: %q, %v; want %q", hostText(res), err, "echo: modern")
			}

			_, err = sess.StartTool(ctx, "block", nil)
			var je *jsonrpc.Error
			if !errors.As(err, &je) || je.Code != jsonrpc.CodeMethodNotFound {
				t.Errorf("StartTool of a tool that requires a task in 2026-07-28: %v, want mcp-go's -32601", err)
			}
		})
	}
}
