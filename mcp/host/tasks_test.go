package host_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentwire/agentwire/jsonrpc"
	"github.com/agentwire/agentwire/mcp"
	"github.com/agentwire/agentwire/mcp/host"
	"github.com/agentwire/agentwire/mcp/internal/mcptest"
	"github.com/agentwire/agentwire/mcp/server"
	"github.com/agentwire/agentwire/mcp/streamable"
)

// taskServer has tools that run as tasks: one that waits to be released
// (or cancelled), one that must run as a task and asks a question, and
// one that fails.
func taskServer(t *testing.T, release <-chan struct{}, cancelled *atomic.Bool) *server.Server {
	s := server.New(mcp.Implementation{Name: "tasks", Version: "1"}, &server.Options{Tasks: &server.TaskOptions{PollInterval: 10 * time.Millisecond}})
	server.AddTool(s, mcp.Tool{Name: "build", Execution: &mcp.ToolExecution{TaskSupport: mcp.TaskOptional}},
		func(ctx context.Context, r *server.ToolRequest, in struct {
			Target string `json:"target"`
		}) (*mcp.ToolResult, error) {
			r.SetStatusMessage("building " + in.Target)
			select {
			case <-release:
				return mcp.TextResult("built " + in.Target), nil
			case <-ctx.Done():
				if errors.Is(context.Cause(ctx), server.ErrTaskCancelled) {
					cancelled.Store(true)
				}
				return nil, ctx.Err()
			}
		})
	server.AddTool(s, mcp.Tool{Name: "deploy", Execution: &mcp.ToolExecution{TaskSupport: mcp.TaskRequired}},
		func(ctx context.Context, r *server.ToolRequest, _ struct{}) (*mcp.ToolResult, error) {
			res, err := r.Elicit(ctx, "ok", "Deploy to production?", map[string]any{"type": "object", "properties": map[string]any{"ok": map[string]any{"type": "boolean"}}})
			if err != nil {
				return nil, err
			}
			if res.Content["ok"] != true {
				return mcp.ErrorResult("not deployed"), nil
			}
			return mcp.TextResult("deployed"), nil
		})
	server.AddTool(s, mcp.Tool{Name: "broken", Execution: &mcp.ToolExecution{TaskSupport: mcp.TaskOptional}},
		func(ctx context.Context, r *server.ToolRequest, _ struct{}) (*mcp.ToolResult, error) {
			return nil, jsonrpc.NewError(-32050, "the build farm is down", nil)
		})
	t.Cleanup(func() { s.Shutdown(context.Background()) })
	return s
}

// yes answers every elicitation with ok: true, and counts them.
func yes(asked *atomic.Int32) func(context.Context, mcp.InputRequest) (any, error) {
	return func(ctx context.Context, req mcp.InputRequest) (any, error) {
		asked.Add(1)
		return map[string]any{"action": "accept", "content": map[string]any{"ok": true}}, nil
	}
}

type sessionMaker func(t *testing.T, s *server.Server, opts *host.Options) *host.Session

var taskTransports = map[string]sessionMaker{
	"stdio-modern": func(t *testing.T, s *server.Server, opts *host.Options) *host.Session {
		sess, err := mcptest.ConnectServerWith(t, s, opts)
		if err != nil {
			t.Fatal(err)
		}
		return sess
	},
	"stdio-legacy": func(t *testing.T, s *server.Server, opts *host.Options) *host.Session {
		o := *opts
		o.Eras = mcp.LegacyOnly
		sess, err := mcptest.ConnectServerWith(t, s, &o)
		if err != nil {
			t.Fatal(err)
		}
		return sess
	},
	"http-modern": func(t *testing.T, s *server.Server, opts *host.Options) *host.Session {
		url, _ := mcptest.StartHTTP(t, s, nil)
		sess, err := streamable.Connect(t.Context(), url, opts, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { sess.Close() })
		return sess
	},
	"http-legacy": func(t *testing.T, s *server.Server, opts *host.Options) *host.Session {
		url, _ := mcptest.StartHTTP(t, s, nil)
		o := *opts
		o.Eras = mcp.LegacyOnly
		sess, err := streamable.Connect(t.Context(), url, &o, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { sess.Close() })
		return sess
	},
}

// Issue 17: a client starts a tool as a task, sees its status, and waits
// for its result, in both designs and over both transports.
func TestAHostStartsAToolAsATaskAndWaitsForIt(t *testing.T) {
	for name, connect := range taskTransports {
		t.Run(name, func(t *testing.T) {
			release := make(chan struct{})
			var cancelled atomic.Bool
			s := taskServer(t, release, &cancelled)
			sess := connect(t, s, &host.Options{})
			task, err := sess.StartTool(t.Context(), "build", map[string]string{"target": "api"})
			if err != nil {
				t.Fatal(err)
			}
			if task.ID() == "" || task.Last() == nil || task.Last().Status != "working" {
				t.Fatalf("not a task: id %q last %+v", task.ID(), task.Last())
			}
			st, err := task.Get(t.Context())
			if err != nil || st.ID != task.ID() || st.Terminal() {
				t.Fatalf("get %+v %v", st, err)
			}
			var mu sync.Mutex
			var seen []string
			go func() {
				time.Sleep(30 * time.Millisecond) // let Wait poll once while the task runs
				close(release)
			}()
			res, err := task.Wait(t.Context(), func(st *host.TaskState) {
				mu.Lock()
				seen = append(seen, st.Status)
				mu.Unlock()
			})
			if err != nil || res.Content[0].Text != "built api" {
				t.Fatalf("wait %+v %v", res, err)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(seen) == 0 || seen[len(seen)-1] != "completed" {
				t.Fatalf("statuses seen %v", seen)
			}
		})
	}
}

// Issue 17: a task is cancelled through its handle; the handler's
// context ends with ErrTaskCancelled and Wait reports the cancellation.
func TestAHostCancelsATask(t *testing.T) {
	for name, connect := range taskTransports {
		t.Run(name, func(t *testing.T) {
			var cancelled atomic.Bool
			s := taskServer(t, make(chan struct{}), &cancelled)
			sess := connect(t, s, &host.Options{})
			task, err := sess.StartTool(t.Context(), "build", map[string]string{"target": "web"})
			if err != nil {
				t.Fatal(err)
			}
			if err := task.Cancel(t.Context()); err != nil {
				t.Fatal(err)
			}
			st, err := task.Get(t.Context())
			if err != nil || st.Status != "cancelled" {
				t.Fatalf("after cancel %+v %v", st, err)
			}
			if _, err := task.Wait(t.Context(), nil); !errors.Is(err, host.ErrTaskCancelled) {
				t.Fatalf("wait after cancel: %v", err)
			}
			deadline := time.Now().Add(5 * time.Second)
			for !cancelled.Load() && time.Now().Before(deadline) {
				time.Sleep(5 * time.Millisecond)
			}
			if !cancelled.Load() {
				t.Fatal("the handler's context did not end with ErrTaskCancelled")
			}
		})
	}
}

// Issue 17: CallTool takes either result shape: a tool that must run as
// a task is started as one, its question answered through the same
// OnInput as a synchronous call's (once), and its result returned.
func TestCallToolWaitsForATaskAndAnswersItsInputOnce(t *testing.T) {
	for name, connect := range taskTransports {
		t.Run(name, func(t *testing.T) {
			var cancelled atomic.Bool
			s := taskServer(t, make(chan struct{}), &cancelled)
			var asked atomic.Int32
			sess := connect(t, s, &host.Options{OnInput: yes(&asked), Capabilities: map[string]any{"elicitation": map[string]any{}}})
			var res *mcp.ToolResult
			var err error
			res, err = sess.CallTool(t.Context(), "deploy", nil)
			if err != nil || res.Content[0].Text != "deployed" {
				t.Fatalf("call %+v %v", res, err)
			}
			if n := asked.Load(); n != 1 {
				t.Fatalf("OnInput called %d times, want 1", n)
			}
		})
	}
}

// Issue 17: a failed task's protocol error is Wait's error.
func TestAFailedTaskReturnsItsProtocolError(t *testing.T) {
	for name, connect := range taskTransports {
		t.Run(name, func(t *testing.T) {
			var cancelled atomic.Bool
			s := taskServer(t, make(chan struct{}), &cancelled)
			sess := connect(t, s, &host.Options{})
			task, err := sess.StartTool(t.Context(), "broken", nil)
			if err != nil {
				t.Fatal(err)
			}
			_, err = task.Wait(t.Context(), nil)
			var je *jsonrpc.Error
			if !errors.As(err, &je) || je.Code != -32050 {
				t.Fatalf("wait: %v", err)
			}
		})
	}
}

// Issue 17: a task id outlives the session that started it: a new
// session resumes the task by id and gets its result.
func TestATaskIsResumedByIDInANewSession(t *testing.T) {
	release := make(chan struct{})
	var cancelled atomic.Bool
	s := taskServer(t, release, &cancelled)
	url, _ := mcptest.StartHTTP(t, s, nil)
	first, err := streamable.Connect(t.Context(), url, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	task, err := first.StartTool(t.Context(), "build", map[string]string{"target": "docs"})
	if err != nil {
		t.Fatal(err)
	}
	id := task.ID()
	first.Close()
	close(release)

	second, err := streamable.Connect(t.Context(), url, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	res, err := second.ResumeTask(id).Wait(t.Context(), nil)
	if err != nil || res.Content[0].Text != "built docs" {
		t.Fatalf("resumed %+v %v", res, err)
	}
	raw, _ := json.Marshal(res)
	if len(raw) == 0 {
		t.Fatal("empty")
	}
}

// Issue 17 ("Wait ... listens for status where the server offers it"):
// with a poll interval of an hour, a task that ends is seen at once,
// through notifications/tasks on a listen stream, over stdio and HTTP.
func TestWaitHearsTheEndOfATaskWithoutPolling(t *testing.T) {
	for _, name := range []string{"stdio-modern", "http-modern"} {
		t.Run(name, func(t *testing.T) {
			release := make(chan struct{})
			s := server.New(mcp.Implementation{Name: "tasks", Version: "1"}, &server.Options{Tasks: &server.TaskOptions{PollInterval: time.Hour}})
			defer s.Shutdown(context.Background())
			server.AddTool(s, mcp.Tool{Name: "job", Execution: &mcp.ToolExecution{TaskSupport: mcp.TaskOptional}},
				func(ctx context.Context, r *server.ToolRequest, _ struct{}) (*mcp.ToolResult, error) {
					<-release
					return mcp.TextResult("done"), nil
				})
			sess := taskTransports[name](t, s, &host.Options{})
			task, err := sess.StartTool(t.Context(), "job", nil)
			if err != nil || task.ID() == "" {
				t.Fatalf("%v %v", task, err)
			}
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
			defer cancel()
			polls := 0
			go func() {
				time.Sleep(50 * time.Millisecond) // the first poll has happened, the listen stream is open
				close(release)
			}()
			res, err := task.Wait(ctx, func(*host.TaskState) { polls++ })
			if err != nil || res.Content[0].Text != "done" {
				t.Fatalf("wait %+v %v (after %d states)", res, err, polls)
			}
		})
	}
}
